/* host/mcp/upstream_http.c -- an upstream MCP server over Streamable HTTP (MCP 2025-11-25) on
   libcurl: the POSTs, the SSE parser, the session, the checks of URLs and headers
   (upstream_http.h). */
#include "host/mcp/upstream_http.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

/* How long the thread sleeps in curl_multi_poll at most while transfers are under way: it then
   looks for requests whose callers stopped waiting (a timeout, a cancel); and when none is. */
#define POLL_MS 50
#define IDLE_MS 10000
/* Connecting; a notification's or response's POST; the DELETE at the end. */
#define CONNECT_MS 10000L
#define NOTE_MS 10000L
#define DELETE_MS 2000L
/* A request's transfer is also bounded by curl itself, past the caller's own deadline: a
   backstop, should the caller's abandon be missed. */
#define BACKSTOP_MS 5000L
/* Notifications and responses queued or in flight at once: a server that sends requests
   without end on a stream gets its answers dropped past this, never a thread's worth of
   transfers. */
#define MAX_NOTES (2 * MBXH_UPSTREAM_MAX_INFLIGHT)
/* A stream the server closes before its answer is resumed (a GET with Last-Event-ID) at most
   this many times, after its retry: (at most RETRY_MAX_MS; the call's deadline bounds it too). */
#define MAX_RESUMES 32
#define RETRY_MAX_MS 10000
/* Bytes of an error answer kept for the message. */
#define ERROR_TEXT 160

typedef struct xfer {
  struct xfer *next;
  mbxH_upstream_http *h;
  CURL *easy;
  struct curl_slist *headers;
  char *body;          /* the JSON-RPC message posted */
  int64_t id;          /* the request's id; 0: a notification, a response or the DELETE */
  int init;            /* initialize: its Mcp-Session-Id is kept */
  int with_session;    /* sent with a session id ... */
  unsigned generation; /* ... of this session */
  size_t cap, got, header_bytes;
  int resumes;         /* GETs with Last-Event-ID this request has taken */
  uint64_t not_before; /* CLOCK_MONOTONIC ms: a resume waits for the server's retry: */
  int kind;            /* 0: not looked at yet; 1 JSON; 2 SSE; 3 an error status or another type */
  long status;
  char *json; /* a JSON body as it arrives (at most cap bytes) */
  size_t json_len, json_cap;
  mbxH_sse sse;
  char error_text[ERROR_TEXT + 1]; /* the start of an error answer's body */
  size_t error_len;
  char fail[200]; /* why the transfer was stopped by us ("" = it was not) */
  char curl_error[CURL_ERROR_SIZE];
} xfer;

struct mbxH_upstream_http {
  mbxH_upstream *u;
  const mbxH_upstream_config *cfg;
  pthread_mutex_t lock; /* everything below */
  pthread_t thread;
  int thread_live;
  CURLM *multi;
  xfer *queue; /* posted, not yet handed to curl (the thread takes them) */
  int quit;    /* the thread is to end */
  int notes;   /* notification transfers queued or in flight */
  char session[MBXH_HTTP_SESSION_MAX + 1];
  unsigned generation; /* counts sessions: a 404 of an older one loses nothing */
  char version[32];    /* the negotiated protocol version ("" before initialize) */
};

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_ok;

static void global_init(void) {
  global_ok = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK;
}

/* ---------------------------------------------------------------------------------------- */
/* Server-Sent Events                                                                        */

/* *buf holds at least want bytes: doubled, but never past limit (want <= limit). */
static int grow(char **buf, size_t *cap, size_t want, size_t limit) {
  if (want <= *cap) return 0;
  size_t n = *cap ? *cap : 256;
  while (n < want)
    n *= 2;
  if (n > limit) n = limit;
  char *p = realloc(*buf, n);
  if (p == NULL) return -1;
  *buf = p, *cap = n;
  return 0;
}

/* One complete line (without its end). */
static int sse_line(mbxH_sse *s, void (*on_event)(void *, const char *, size_t), void *ctx) {
  const char *line = s->line;
  size_t len = s->line_len;
  if (len == 0) { /* the end of an event */
    if (s->has_data && !s->other) {
      size_t n = s->data_len;
      if (n > 0 && s->data[n - 1] == '\n') n--; /* the last data line's LF is not data */
      if (n > 0) on_event(ctx, s->data, n);
    }
    s->data_len = 0, s->has_data = 0, s->other = 0;
    return 0;
  }
  if (line[0] == ':') return 0; /* a comment (a keep-alive) */
  const char *colon = memchr(line, ':', len);
  size_t name = colon ? (size_t)(colon - line) : len;
  const char *value = colon ? colon + 1 : line + len;
  size_t value_len = (size_t)(line + len - value);
  if (value_len > 0 && value[0] == ' ') value++, value_len--;
  if (name == 4 && memcmp(line, "data", 4) == 0) {
    if (s->data_len + value_len + 1 > s->max) return -1;
    if (grow(&s->data, &s->data_cap, s->data_len + value_len + 1, s->max + 1) != 0) return -1;
    memcpy(s->data + s->data_len, value, value_len);
    s->data_len += value_len;
    s->data[s->data_len++] = '\n';
    s->has_data = 1;
  } else if (name == 5 && memcmp(line, "event", 5) == 0) {
    s->other = !(value_len == 0 || (value_len == 7 && memcmp(value, "message", 7) == 0));
  } else if (name == 2 && memcmp(line, "id", 2) == 0) {
    /* sent back as Last-Event-ID: a header value, so visible ASCII only, else not kept */
    int ok = value_len <= MBXH_SSE_ID_MAX;
    for (size_t i = 0; i < value_len && ok; i++)
      ok = value[i] >= 0x21 && value[i] <= 0x7e;
    if (ok) {
      memcpy(s->last_id, value, value_len);
      s->last_id[value_len] = '\0';
    }
  } else if (name == 5 && memcmp(line, "retry", 5) == 0 && value_len > 0 && value_len < 10 &&
             strspn(value, "0123456789") >= value_len) {
    s->retry_ms = 0;
    for (size_t i = 0; i < value_len; i++)
      s->retry_ms = s->retry_ms * 10 + (value[i] - '0');
  }
  return 0; /* unknown fields: ignored */
}

int mbxH_sse_feed(mbxH_sse *s, const char *p, size_t n,
                  void (*on_event)(void *ctx, const char *data, size_t len), void *ctx) {
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (c == '\n' && s->after_cr) { /* the LF of a CRLF: that line has ended */
      s->after_cr = 0;
      continue;
    }
    s->after_cr = c == '\r';
    if (c == '\r' || c == '\n') {
      if (sse_line(s, on_event, ctx) != 0) return -1;
      s->line_len = 0;
      continue;
    }
    /* the rest of the line up to its end, at once */
    size_t j = i;
    while (j < n && p[j] != '\r' && p[j] != '\n')
      j++;
    if (s->line_len + (j - i) > s->max) return -1;
    if (grow(&s->line, &s->line_cap, s->line_len + (j - i), s->max) != 0) return -1;
    memcpy(s->line + s->line_len, p + i, j - i);
    s->line_len += j - i;
    i = j - 1;
  }
  return 0;
}

void mbxH_sse_free(mbxH_sse *s) {
  free(s->line);
  free(s->data);
  memset(s, 0, sizeof *s);
}

/* ---------------------------------------------------------------------------------------- */
/* What the operator writes                                                                  */

static int is_loopback(const char *host) {
  if (strcasecmp(host, "localhost") == 0 || strcmp(host, "[::1]") == 0) return 1;
  struct in_addr a;
  /* curl's URL parser writes an IPv4 address in its dotted form (127.1 -> 127.0.0.1) */
  return inet_pton(AF_INET, host, &a) == 1 && (ntohl(a.s_addr) >> 24) == 127;
}

int mbxH_upstream_url_check(const char *url, char *why, size_t why_size) {
  pthread_once(&global_once, global_init);
  CURLU *h = curl_url();
  char *scheme = NULL, *host = NULL, *user = NULL, *password = NULL;
  int rc = -1;
  if (h == NULL) {
    snprintf(why, why_size, "out of memory");
    return -1;
  }
  if (curl_url_set(h, CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(h, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK) {
    snprintf(why, why_size, "not a URL (expected http://HOST[:PORT]/PATH or https://...)");
  } else if (strcmp(scheme, "http") != 0 && strcmp(scheme, "https") != 0) {
    snprintf(why, why_size, "a URL of http or https, not %.20s", scheme);
  } else if (curl_url_get(h, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    snprintf(why, why_size, "not a URL (expected http://HOST[:PORT]/PATH or https://...)");
  } else if (curl_url_get(h, CURLUPART_USER, &user, 0) == CURLUE_OK ||
             curl_url_get(h, CURLUPART_PASSWORD, &password, 0) == CURLUE_OK) {
    snprintf(why, why_size,
             "a user or password in the URL is refused (it would show in logs and process "
             "lists): give credentials in the policy file's headers");
  } else if (strcmp(scheme, "http") == 0 && !is_loopback(host)) {
    snprintf(why, why_size,
             "plain http:// is allowed to loopback only (localhost, 127.0.0.1, [::1]): a token "
             "would cross the network in clear; use https://");
  } else {
    rc = 0;
  }
  curl_free(scheme), curl_free(host), curl_free(user), curl_free(password);
  curl_url_cleanup(h);
  return rc;
}

int mbxH_upstream_header_check(const char *name, const char *value, char *why, size_t why_size) {
  /* the transport's own: the operator setting them would break or hijack the protocol */
  static const char *const own[] = {"accept",
                                    "content-type",
                                    "content-length",
                                    "host",
                                    "mcp-session-id",
                                    "mcp-protocol-version",
                                    "last-event-id",
                                    "transfer-encoding",
                                    "connection",
                                    "expect",
                                    "te",
                                    "upgrade"};
  size_t n = strlen(name);
  if (n == 0 || n > 128 ||
      strspn(name, "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyz"
                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != n) {
    snprintf(why, why_size, "a header name is a token of at most 128 bytes (letters, digits, -)");
    return -1;
  }
  for (size_t i = 0; i < sizeof own / sizeof *own; i++)
    if (strcasecmp(name, own[i]) == 0) {
      snprintf(why, why_size, "%s is set by the transport itself", name);
      return -1;
    }
  if (strlen(value) > 8192 || strpbrk(value, "\r\n")) {
    snprintf(why, why_size, "the value of %s must be one line of at most 8192 bytes", name);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Receiving                                                                                 */

static void on_event(void *ctx, const char *data, size_t len) {
  xfer *x = ctx;
  mbxH_upstream_deliver(x->h->u, data, len);
}

/* The first bytes of a body: what kind of answer this is. */
static void classify(xfer *x) {
  char *type = NULL;
  curl_easy_getinfo(x->easy, CURLINFO_RESPONSE_CODE, &x->status);
  curl_easy_getinfo(x->easy, CURLINFO_CONTENT_TYPE, &type);
  x->kind = 3;
  if (x->status < 200 || x->status > 299 || type == NULL) return;
  if (strncasecmp(type, "text/event-stream", 17) == 0) {
    x->kind = 2;
    x->sse.max = x->cap;
  } else if (strncasecmp(type, "application/json", 16) == 0) {
    x->kind = 1;
  }
}

static size_t on_body(char *p, size_t size, size_t count, void *arg) {
  xfer *x = arg;
  size_t n = size * count;
  if (x->kind == 0) classify(x);
  if (x->kind == 3) { /* an error answer, or a type we do not read: its start, for the message */
    size_t keep = x->error_len + n > ERROR_TEXT ? ERROR_TEXT - x->error_len : n;
    memcpy(x->error_text + x->error_len, p, keep);
    x->error_len += keep;
    x->error_text[x->error_len] = '\0';
    x->got += n;
    return x->got > x->cap ? 0 : n;
  }
  x->got += n;
  if (x->got > x->cap) {
    /* stopped as it arrives: a flood never sits in memory */
    snprintf(x->fail, sizeof x->fail,
             "upstream '%s': a reply of more than %zu bytes (max_result is %llu bytes; the "
             "transfer was stopped)",
             x->h->cfg->name, x->cap, (unsigned long long)x->h->cfg->max_result);
    return 0;
  }
  if (x->kind == 2) {
    if (mbxH_sse_feed(&x->sse, p, n, on_event, x) != 0) {
      snprintf(x->fail, sizeof x->fail, "upstream '%s': an SSE event over %zu bytes",
               x->h->cfg->name, x->cap);
      return 0;
    }
    return n;
  }
  if (grow(&x->json, &x->json_cap, x->json_len + n + 1, x->cap + 1) != 0) {
    snprintf(x->fail, sizeof x->fail, "upstream '%s': out of memory", x->h->cfg->name);
    return 0;
  }
  memcpy(x->json + x->json_len, p, n);
  x->json_len += n;
  return n;
}

static size_t on_header(char *p, size_t size, size_t count, void *arg) {
  xfer *x = arg;
  size_t n = size * count;
  x->header_bytes += n;
  if (x->header_bytes > MBXH_HTTP_HEADER_BYTES) {
    snprintf(x->fail, sizeof x->fail,
             "upstream '%s': an answer with more than %zu bytes of headers (refused)",
             x->h->cfg->name, MBXH_HTTP_HEADER_BYTES);
    return 0;
  }
  static const char key[] = "mcp-session-id:";
  if (!x->init || n < sizeof key || strncasecmp(p, key, sizeof key - 1) != 0) return n;
  const char *v = p + sizeof key - 1, *end = p + n;
  while (v < end && (*v == ' ' || *v == '\t'))
    v++;
  while (end > v && (end[-1] == '\r' || end[-1] == '\n' || end[-1] == ' '))
    end--;
  size_t len = (size_t)(end - v);
  for (size_t i = 0; i < len; i++)
    if (v[i] < 0x21 || v[i] > 0x7e) return n; /* the spec's visible ASCII only, else unused */
  if (len == 0 || len > MBXH_HTTP_SESSION_MAX) return n;
  pthread_mutex_lock(&x->h->lock);
  memcpy(x->h->session, v, len);
  x->h->session[len] = '\0';
  pthread_mutex_unlock(&x->h->lock);
  return n;
}

/* The error answer's start, printable, for a message. */
static void printable(char *s) {
  for (; *s; s++)
    if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e) *s = ' ';
}

static int resume(mbxH_upstream_http *h, const xfer *old);

/* A transfer has ended (rc): its reply is delivered, or its request fails with the reason. */
static void finish(mbxH_upstream_http *h, xfer *x, CURLcode rc) {
  mbxH_upstream *u = h->u;
  if (x->kind == 0) classify(x); /* no body at all */
  if (rc == CURLE_OK && x->kind == 1 && x->json_len > 0)
    mbxH_upstream_deliver(u, x->json, x->json_len);
  if (x->id == 0 || !mbxH_upstream_awaits(u, x->id)) return; /* answered, or not awaited */
  char why[300];
  const char *name = h->cfg->name;
  if (x->fail[0]) {
    snprintf(why, sizeof why, "%s", x->fail);
  } else if (rc == CURLE_OUT_OF_MEMORY && x->got == 0) {
    /* curl refuses a header line over 100 KiB this way, before any body */
    snprintf(why, sizeof why, "upstream '%s': an answer with a header line too large (refused)",
             name);
  } else if (rc != CURLE_OK) {
    snprintf(why, sizeof why, "upstream '%s': HTTP request failed: %s%s%.150s", name,
             curl_easy_strerror(rc), x->curl_error[0] ? ": " : "", x->curl_error);
  } else if (x->with_session &&
             (x->status == 404 || (x->status == 400 && strcasestr(x->error_text, "session")))) {
    /* 404 is the spec's answer to an expired session; servers built on the SDK's examples (the
       everything server's own entry point among them) answer 400 "No valid session ID" */
    pthread_mutex_lock(&h->lock);
    int current = x->generation == h->generation;
    if (current) h->session[0] = '\0';
    pthread_mutex_unlock(&h->lock);
    snprintf(why, sizeof why, "upstream '%s': its session expired (HTTP %ld)", name, x->status);
    /* sent once more only if this was its POST: a resumed stream's request may have run */
    mbxH_upstream_fail(u, x->id, why,
                       (x->resumes == 0 ? MBXH_UPSTREAM_RETRY : 0) |
                           (current ? MBXH_UPSTREAM_LOST : 0));
    return;
  } else if (x->status >= 300 && x->status < 400) {
    snprintf(why, sizeof why,
             "upstream '%s': answered HTTP %ld, a redirect (not followed: give the final URL)",
             name, x->status);
  } else if (x->status < 200 || x->status > 299) {
    printable(x->error_text);
    snprintf(why, sizeof why, "upstream '%s': answered HTTP %ld%s%s%s", name, x->status,
             x->status == 401 || x->status == 403 ? " (check the credentials in its headers)" : "",
             x->error_len ? ": " : "", x->error_text);
  } else if (x->kind == 3) {
    snprintf(why, sizeof why,
             "upstream '%s': answered a POST with neither application/json nor "
             "text/event-stream",
             name);
  } else if (rc == CURLE_OK && x->kind == 2 && x->sse.last_id[0] && resume(h, x) == 0) {
    return; /* the stream goes on in a GET */
  } else {
    snprintf(why, sizeof why, "upstream '%s': its answer ended without a response to the request%s",
             name,
             x->kind == 2 && x->sse.last_id[0] ? " (resumed too often)"
                                               : " (the stream gave no id to resume from)");
  }
  mbxH_upstream_fail(u, x->id, why, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Sending                                                                                   */

static void xfer_free(xfer *x) {
  if (x == NULL) return;
  if (x->easy) curl_easy_cleanup(x->easy);
  curl_slist_free_all(x->headers);
  free(x->body);
  free(x->json);
  mbxH_sse_free(&x->sse);
  free(x);
}

static int add_header(struct curl_slist **list, const char *line) {
  struct curl_slist *l = curl_slist_append(*list, line);
  if (l == NULL) return -1;
  *list = l;
  return 0;
}

/* The options every transfer shares: the safety ones in one place. */
static CURL *easy_for(mbxH_upstream_http *h, xfer *x, long timeout_ms) {
  CURL *e = curl_easy_init();
  if (e == NULL) return NULL;
  curl_easy_setopt(e, CURLOPT_URL, h->cfg->url);
  curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L); /* threads: no SIGALRM for DNS timeouts */
  curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L); /* a redirect could carry the token away */
  /* "" turns proxies off, those of http_proxy/https_proxy/ALL_PROXY included: the token
     goes to the URL the operator wrote, and nowhere else */
  curl_easy_setopt(e, CURLOPT_PROXY, "");
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 1L);
  curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 2L);
  curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_MS);
  curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(e, CURLOPT_HTTPHEADER, x->headers);
  curl_easy_setopt(e, CURLOPT_ERRORBUFFER, x->curl_error);
  curl_easy_setopt(e, CURLOPT_PRIVATE, x);
  curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(e, CURLOPT_WRITEDATA, x);
  curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(e, CURLOPT_HEADERDATA, x);
  return e;
}

/* A transfer with the headers of the current session (under h->lock). */
static xfer *xfer_new(mbxH_upstream_http *h, int64_t id, int init, size_t cap) {
  xfer *x = calloc(1, sizeof *x);
  if (x == NULL) return NULL;
  x->h = h, x->id = id, x->init = init, x->cap = cap;
  x->generation = h->generation;
  char line[MBXH_HTTP_SESSION_MAX + 64];
  int rc = add_header(&x->headers, "Content-Type: application/json");
  rc |= add_header(&x->headers, "Accept: application/json, text/event-stream");
  rc |= add_header(&x->headers, "Expect:"); /* no 100-continue round trip */
  if (h->session[0] && !init) {
    snprintf(line, sizeof line, "Mcp-Session-Id: %s", h->session);
    rc |= add_header(&x->headers, line);
    x->with_session = 1;
  }
  if (h->version[0] && !init) {
    snprintf(line, sizeof line, "MCP-Protocol-Version: %s", h->version);
    rc |= add_header(&x->headers, line);
  }
  for (size_t i = 0; h->cfg->headers && h->cfg->headers[i]; i++)
    rc |= add_header(&x->headers, h->cfg->headers[i]);
  if (rc != 0) {
    xfer_free(x);
    return NULL;
  }
  return x;
}

int mbxH_upstream_http_send(mbxH_upstream_http *h, const char *text, int64_t id, int init,
                            size_t cap) {
  pthread_mutex_lock(&h->lock);
  if (h->quit || (id == 0 && h->notes >= MAX_NOTES)) {
    pthread_mutex_unlock(&h->lock);
    return -1;
  }
  xfer *x = xfer_new(h, id, init, cap);
  if (x != NULL) x->body = strdup(text);
  long timeout = id == 0 ? NOTE_MS : (long)h->cfg->timeout_ms + BACKSTOP_MS;
  if (init && timeout < 5000 + BACKSTOP_MS) timeout = 5000 + BACKSTOP_MS;
  if (x != NULL && x->body != NULL) x->easy = easy_for(h, x, timeout);
  if (x == NULL || x->easy == NULL) {
    pthread_mutex_unlock(&h->lock);
    xfer_free(x);
    return -1;
  }
  curl_easy_setopt(x->easy, CURLOPT_POSTFIELDS, x->body);
  curl_easy_setopt(x->easy, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(x->body));
  if (id == 0) h->notes++;
  x->next = h->queue;
  h->queue = x;
  pthread_mutex_unlock(&h->lock);
  curl_multi_wakeup(h->multi);
  return 0;
}

/* The server closed the SSE stream of a request before its answer (2025-11-25 lets it, after
   an event with an id): the stream is polled again with a GET carrying Last-Event-ID, after the
   server's retry:, with what is left of the reply's bytes. 0, or -1 (too many resumes, no
   bytes left, stopped, out of memory). */
static int resume(mbxH_upstream_http *h, const xfer *old) {
  if (old->resumes >= MAX_RESUMES || old->got >= old->cap) return -1;
  char line[MBXH_SSE_ID_MAX + 32];
  pthread_mutex_lock(&h->lock);
  xfer *x = h->quit ? NULL : xfer_new(h, old->id, 0, old->cap - old->got);
  if (x != NULL) {
    snprintf(line, sizeof line, "Last-Event-ID: %s", old->sse.last_id);
    if (add_header(&x->headers, line) != 0 ||
        (x->easy = easy_for(h, x, (long)h->cfg->timeout_ms + BACKSTOP_MS)) == NULL) {
      pthread_mutex_unlock(&h->lock);
      xfer_free(x);
      return -1;
    }
    curl_easy_setopt(x->easy, CURLOPT_HTTPGET, 1L);
    x->resumes = old->resumes + 1;
    memcpy(x->sse.last_id, old->sse.last_id, sizeof x->sse.last_id);
    long wait = old->sse.retry_ms > RETRY_MAX_MS ? RETRY_MAX_MS : old->sse.retry_ms;
    x->not_before = now_ms() + (uint64_t)(wait > 0 ? wait : 0);
    x->next = h->queue;
    h->queue = x;
  }
  pthread_mutex_unlock(&h->lock);
  if (x) curl_multi_wakeup(h->multi); /* the thread's next poll must not sleep past it */
  return x ? 0 : -1;
}

/* ---------------------------------------------------------------------------------------- */
/* The thread                                                                                */

static void drop(mbxH_upstream_http *h, xfer **active, xfer *x) {
  for (xfer **p = active; *p; p = &(*p)->next)
    if (*p == x) {
      *p = x->next;
      break;
    }
  curl_multi_remove_handle(h->multi, x->easy);
  if (x->id == 0) {
    pthread_mutex_lock(&h->lock);
    h->notes--;
    pthread_mutex_unlock(&h->lock);
  }
  xfer_free(x);
}

static void *thread_main(void *arg) {
  mbxH_upstream_http *h = arg;
  xfer *active = NULL;
  pthread_mutex_lock(&h->lock);
  while (!h->quit) {
    /* what is due now; a resume waiting for its retry: stays queued */
    xfer *fresh = NULL, **link = &h->queue;
    uint64_t now = now_ms();
    int delayed = 0;
    while (*link) {
      xfer *x = *link;
      if (x->not_before > now) {
        delayed = 1;
        link = &x->next;
        continue;
      }
      *link = x->next;
      x->next = fresh;
      fresh = x;
    }
    pthread_mutex_unlock(&h->lock);
    while (fresh) {
      xfer *x = fresh;
      fresh = x->next;
      x->next = active;
      active = x;
      if (curl_multi_add_handle(h->multi, x->easy) != CURLM_OK) {
        if (x->id) mbxH_upstream_fail(h->u, x->id, "upstream: cannot start an HTTP request", 0);
        drop(h, &active, x);
      }
    }
    int running = 0;
    curl_multi_perform(h->multi, &running);
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(h->multi, &left)) != NULL) {
      if (m->msg != CURLMSG_DONE) continue;
      char *priv = NULL;
      curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, &priv);
      xfer *x = (xfer *)priv;
      CURLcode rc = m->data.result;
      finish(h, x, rc);
      drop(h, &active, x);
    }
    /* a request its caller stopped waiting for (its deadline, a cancel): the caller has sent
       notifications/cancelled, and the stream is closed rather than read to no one */
    for (xfer *x = active, *next; x; x = next) {
      next = x->next;
      if (x->id != 0 && !mbxH_upstream_awaits(h->u, x->id)) drop(h, &active, x);
    }
    /* idle, it sleeps until a send wakes it (or curl's own timers, which the poll honours) */
    curl_multi_poll(h->multi, NULL, 0, active || delayed ? POLL_MS : IDLE_MS, NULL);
    pthread_mutex_lock(&h->lock);
  }
  xfer *rest = h->queue;
  h->queue = NULL;
  pthread_mutex_unlock(&h->lock);
  while (active)
    drop(h, &active, active);
  while (rest) {
    xfer *x = rest;
    rest = x->next;
    xfer_free(x);
  }
  return NULL;
}

mbxH_upstream_http *mbxH_upstream_http_new(mbxH_upstream *u, const mbxH_upstream_config *cfg,
                                           char *msg, size_t msg_size) {
  pthread_once(&global_once, global_init);
  mbxH_upstream_http *h = calloc(1, sizeof *h);
  if (h == NULL || !global_ok || (h->multi = curl_multi_init()) == NULL) {
    snprintf(msg, msg_size, "upstream '%s': cannot set up libcurl", cfg->name);
    free(h);
    return NULL;
  }
  h->u = u, h->cfg = cfg;
  pthread_mutex_init(&h->lock, NULL);
  if (pthread_create(&h->thread, NULL, thread_main, h) != 0) {
    snprintf(msg, msg_size, "upstream '%s': cannot start its HTTP thread", cfg->name);
    curl_multi_cleanup(h->multi);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return NULL;
  }
  h->thread_live = 1;
  return h;
}

void mbxH_upstream_http_reset(mbxH_upstream_http *h) {
  pthread_mutex_lock(&h->lock);
  h->session[0] = '\0';
  h->version[0] = '\0';
  h->generation++;
  pthread_mutex_unlock(&h->lock);
}

void mbxH_upstream_http_opened(mbxH_upstream_http *h, const char *version) {
  pthread_mutex_lock(&h->lock);
  snprintf(h->version, sizeof h->version, "%s", version);
  pthread_mutex_unlock(&h->lock);
}

static size_t discard(char *p, size_t size, size_t count, void *arg) {
  (void)p, (void)arg;
  return size * count;
}

void mbxH_upstream_http_free(mbxH_upstream_http *h) {
  if (h == NULL) return;
  pthread_mutex_lock(&h->lock);
  h->quit = 1;
  pthread_mutex_unlock(&h->lock);
  curl_multi_wakeup(h->multi);
  if (h->thread_live) pthread_join(h->thread, NULL);
  /* The session's end, told to the server (it may answer 405: it keeps sessions itself). */
  if (h->session[0]) {
    xfer *x = xfer_new(h, 0, 0, 0);
    if (x != NULL && (x->easy = easy_for(h, x, DELETE_MS)) != NULL) {
      curl_easy_setopt(x->easy, CURLOPT_CUSTOMREQUEST, "DELETE");
      curl_easy_setopt(x->easy, CURLOPT_WRITEFUNCTION, discard);
      curl_easy_setopt(x->easy, CURLOPT_HEADERFUNCTION, discard);
      (void)curl_easy_perform(x->easy);
    }
    xfer_free(x);
  }
  curl_multi_cleanup(h->multi);
  pthread_mutex_destroy(&h->lock);
  free(h);
}

/* The seam upstream.c calls through (it does not include this file's header). */
static void *tx_open(mbxH_upstream *u, const mbxH_upstream_config *cfg, char *msg,
                     size_t msg_size) {
  return mbxH_upstream_http_new(u, cfg, msg, msg_size);
}
static void tx_reset(void *t) {
  mbxH_upstream_http_reset(t);
}
static void tx_opened(void *t, const char *version) {
  mbxH_upstream_http_opened(t, version);
}
static int tx_send(void *t, const char *text, int64_t id, int init, size_t cap) {
  return mbxH_upstream_http_send(t, text, id, init, cap);
}
static void tx_close(void *t) {
  mbxH_upstream_http_free(t);
}
const mbxH_upstream_transport mbxH_upstream_http_transport = {tx_open, tx_reset, tx_opened, tx_send,
                                                              tx_close};
