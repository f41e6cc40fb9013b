/* host/mcp/upstream.c -- one upstream MCP server: the handshake, the tool list, requests with
   ids matched to their responses, restarts with backoff (upstream.h); over stdio its process (no
   shell) and reader thread, over Streamable HTTP the transport of upstream_http.c. */
#include "host/mcp/upstream.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/mcp/upstream_process.h"

/* The protocol version we ask for; an upstream may answer an older one (no structuredContent:
   the guest then gets the text content). */
#define UPSTREAM_PROTOCOL "2025-11-25"
/* A line read from the upstream past this many bytes is dropped as it arrives (never held),
   and the call it answers fails: room for max_result plus the envelope, and for tools/list. */
#define LIST_LINE_MAX ((size_t)4 << 20)
/* Pages of tools/list followed at most (a cursor that never ends is a bad upstream). */
#define MAX_LIST_PAGES 64
/* The first wait before a crashed upstream is started again, and the longest. */
#define BACKOFF_FIRST_MS 250
#define BACKOFF_MAX_MS 30000
/* The handshake and first tool list get the call timeout, but at least this long: a node or
   npx server takes a second or more to start on a busy machine. */
#define START_MIN_MS 5000
/* How often a waiting call looks at its cancel. */
#define POLL_MS 50

typedef struct pending {
  int used, done;
  int64_t id;
  int retry;              /* it was not taken (an expired HTTP session): send it once more */
  size_t max_reply;       /* bytes of the reply line at most (a tools/call's max_result); 0 = any */
  json_t *result, *error; /* the response's members (new references) */
  char fail[200];         /* why it failed without a response ("" = it has one) */
} pending;

struct mbxH_upstream {
  mbxH_upstream_config cfg;
  pthread_mutex_t lock; /* everything below */
  pthread_cond_t cond;  /* a response came, a slot was freed, the process ended, a start ended */
  pthread_mutex_t write_lock;
  pid_t pid;
  int to_fd;                    /* the upstream's stdin; -1 when not running */
  int running;                  /* the process is up and its handshake is done */
  int starting;                 /* a thread is starting it */
  int reader_live, errors_live; /* threads to join before the next start */
  pthread_t reader, errors;
  uint64_t restart_at_ms, backoff_ms;
  int64_t next_id;
  pending slot[MBXH_UPSTREAM_MAX_INFLIGHT];
  json_t *tools;              /* the allowed tools' list entries */
  int stale;                  /* notifications/tools/list_changed came */
  int relisting;              /* a relist thread runs (at most one) */
  int structured;             /* the negotiated protocol has structuredContent */
  void (*changed)(void *ctx); /* told of notifications/tools/list_changed */
  void *changed_ctx;
  char exit_note[120];
  const mbxH_upstream_transport *url_tx; /* a URL upstream's transport ... */
  void *http;                            /* ... and its state (made by the first start) */
};

typedef struct reader_arg {
  mbxH_upstream *u;
  int fd;
} reader_arg;

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void msgf(char *msg, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void msgf(char *msg, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
}

const mbxH_upstream_config *mbxH_upstream_config_of(const mbxH_upstream *u) {
  return &u->cfg;
}

/* ---------------------------------------------------------------------------------------- */
/* Writing                                                                                   */

/* One message (consumed): one line to the process, or one POST (id: a request's, whose reply
   may take cap bytes; init: initialize). -1 when the upstream's stdin is gone. */
static int send_msg(mbxH_upstream *u, json_t *msg, int64_t id, size_t cap, int init) {
  char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
  json_decref(msg);
  if (text == NULL) return -1;
  if (u->cfg.url) {
    int sent = u->http ? u->url_tx->send(u->http, text, id, init, cap) : -1;
    free(text);
    return sent;
  }
  pthread_mutex_lock(&u->write_lock);
  pthread_mutex_lock(&u->lock);
  int fd = u->to_fd;
  pthread_mutex_unlock(&u->lock);
  if (fd >= 0) (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); /* our end alone */
  uint64_t limit = u->cfg.timeout_ms > 5000 ? u->cfg.timeout_ms : 5000;
  int rc = fd < 0 ? -1 : mbxH_process_write_all(fd, text, strlen(text), limit);
  if (rc == 0) rc = mbxH_process_write_all(fd, "\n", 1, limit);
  pthread_mutex_unlock(&u->write_lock);
  free(text);
  return rc;
}

static json_t *envelope(void) {
  json_t *m = json_object();
  if (m) json_object_set_new(m, "jsonrpc", json_string("2.0"));
  return m;
}

static void notify(mbxH_upstream *u, const char *method, json_t *params) {
  json_t *m = envelope();
  if (m == NULL) {
    json_decref(params);
    return;
  }
  json_object_set_new(m, "method", json_string(method));
  if (params) json_object_set_new(m, "params", params);
  (void)send_msg(u, m, 0, 0, 0);
}

/* ---------------------------------------------------------------------------------------- */
/* Reading: one thread per process                                                           */

/* Every request waiting on the process fails with why (under u->lock). */
static void fail_all(mbxH_upstream *u, const char *why) {
  for (int i = 0; i < MBXH_UPSTREAM_MAX_INFLIGHT; i++)
    if (u->slot[i].used && !u->slot[i].done) {
      u->slot[i].done = 1;
      snprintf(u->slot[i].fail, sizeof u->slot[i].fail, "%s", why);
    }
  pthread_cond_broadcast(&u->cond);
}

static pending *find_slot(mbxH_upstream *u, int64_t id) {
  for (int i = 0; i < MBXH_UPSTREAM_MAX_INFLIGHT; i++)
    if (u->slot[i].used && !u->slot[i].done && u->slot[i].id == id) return &u->slot[i];
  return NULL;
}

/* An upstream's request to us: ping is answered; everything else (sampling/createMessage,
   elicitation/create, roots/list, ...) is declined, since we declared no client capability. */
static void answer_request(mbxH_upstream *u, const json_t *id, const char *method) {
  json_t *m = envelope();
  if (m == NULL) return;
  json_object_set_new(m, "id", json_deep_copy(id));
  if (strcmp(method, "ping") == 0) {
    json_object_set_new(m, "result", json_object());
  } else {
    char text[200];
    snprintf(text, sizeof text,
             "moonbox declines %.80s: it declares no client capabilities (no sampling, "
             "elicitation or roots)",
             method);
    json_t *err = json_object();
    json_object_set_new(err, "code", json_integer(-32601));
    json_object_set_new(err, "message", json_string(text));
    json_object_set_new(m, "error", err);
  }
  (void)send_msg(u, m, 0, 0, 0);
}

static int list_tools(mbxH_upstream *u, uint64_t deadline, char *msg, size_t msg_size);

/* The relist after notifications/tools/list_changed, on a thread of its own (this reader
   cannot wait for its own responses, and the server's message loop must not wait on an
   upstream), then the listener is told. */
static void *relist_thread(void *arg) {
  mbxH_upstream *u = arg;
  char msg[300];
  int ok = list_tools(u, now_ms() + u->cfg.timeout_ms, msg, sizeof msg) == 0;
  if (ok && u->changed) u->changed(u->changed_ctx);
  pthread_mutex_lock(&u->lock);
  u->relisting = 0;
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
  return NULL;
}

static void relist_later(mbxH_upstream *u) {
  pthread_mutex_lock(&u->lock);
  u->stale = 1; /* a call thread relists first if it comes before the thread is done */
  int start = !u->relisting && u->running;
  if (start) u->relisting = 1;
  pthread_mutex_unlock(&u->lock);
  if (!start) return; /* one at a time: a flood of notifications makes no threads */
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &attr, relist_thread, u) != 0) {
    pthread_mutex_lock(&u->lock);
    u->relisting = 0;
    pthread_mutex_unlock(&u->lock);
  }
  pthread_attr_destroy(&attr);
}

/* The arrays and objects of a JSON text (brackets inside strings skipped). jansson spends about
   a hundred bytes of host memory on each, so a line of empty containers ("[[],[],...]") would
   become some 50 times its size: such a line is dropped unparsed (its call times out). */
#define CONTAINER_BYTES_MIN 16 /* a line may hold one container per 16 bytes, plus a few */
static size_t containers_of(const char *p, size_t len) {
  size_t n = 0;
  int in_string = 0;
  for (size_t i = 0; i < len; i++) {
    char c = p[i];
    if (in_string) {
      if (c == '\\')
        i++;
      else if (c == '"')
        in_string = 0;
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      n++;
    }
  }
  return n;
}

static void handle_line(mbxH_upstream *u, const char *line, size_t len) {
  if (containers_of(line, len) > len / CONTAINER_BYTES_MIN + 1024) return;
  json_t *msg = json_loadb(line, len, JSON_DECODE_ANY, NULL);
  if (!json_is_object(msg)) {
    json_decref(msg);
    return; /* not JSON-RPC: servers sometimes log to stdout; nothing to match it to */
  }
  const json_t *id = json_object_get(msg, "id");
  const json_t *method = json_object_get(msg, "method");
  if (json_is_string(method)) {
    if (id != NULL && !json_is_null(id)) {
      answer_request(u, id, json_string_value(method));
    } else if (strcmp(json_string_value(method), "notifications/tools/list_changed") == 0) {
      relist_later(u);
    }
    json_decref(msg);
    return;
  }
  if (json_is_integer(id)) {
    pthread_mutex_lock(&u->lock);
    pending *p = find_slot(u, json_integer_value(id));
    if (p != NULL && p->max_reply && len > p->max_reply) {
      char fail[sizeof p->fail]; /* built aside: gcc -O2 cannot tell p->fail from the name */
      snprintf(fail, sizeof fail,
               "upstream '%s': a reply of %zu bytes, over its max_result of %zu bytes", u->cfg.name,
               len, p->max_reply);
      memcpy(p->fail, fail, sizeof fail);
      p->done = 1;
      pthread_cond_broadcast(&u->cond);
    } else if (p != NULL) {
      json_t *result = json_object_get(msg, "result"), *error = json_object_get(msg, "error");
      p->result = result ? json_incref(result) : NULL;
      p->error = error ? json_incref(error) : NULL;
      /* Detached from msg under the lock, before the waiter can see them: no two threads ever
         count references on one object (jansson's decref to zero has no acquire: the thread
         that frees would not see the other's reads; TSan reports it) */
      json_object_del(msg, "result");
      json_object_del(msg, "error");
      if (p->result == NULL && p->error == NULL)
        snprintf(p->fail, sizeof p->fail, "a response with neither result nor error");
      p->done = 1;
      pthread_cond_broadcast(&u->cond);
    }
    pthread_mutex_unlock(&u->lock);
  }
  json_decref(msg);
}

void mbxH_upstream_deliver(mbxH_upstream *u, const char *text, size_t len) {
  handle_line(u, text, len);
}

int mbxH_upstream_awaits(mbxH_upstream *u, int64_t id) {
  pthread_mutex_lock(&u->lock);
  int waiting = find_slot(u, id) != NULL;
  pthread_mutex_unlock(&u->lock);
  return waiting;
}

void mbxH_upstream_fail(mbxH_upstream *u, int64_t id, const char *why, int flags) {
  pthread_mutex_lock(&u->lock);
  pending *p = find_slot(u, id);
  if (p != NULL) {
    p->done = 1;
    p->retry = (flags & MBXH_UPSTREAM_RETRY) != 0;
    snprintf(p->fail, sizeof p->fail, "%s", why);
    pthread_cond_broadcast(&u->cond);
  }
  if (flags & MBXH_UPSTREAM_LOST) { /* a new session, by the next call, with no backoff */
    u->running = 0;
    u->restart_at_ms = 0;
    snprintf(u->exit_note, sizeof u->exit_note, "lost its session");
  }
  pthread_mutex_unlock(&u->lock);
}

/* A line too large to keep: the id is looked for in its first and last bytes (where
   JSON-RPC libraries put it); the request it names fails, or, when no id is found, every
   request then in flight does (one reply cannot be matched, so none is trusted). */
static void oversized_line(mbxH_upstream *u, const char *head, size_t head_len, const char *tail,
                           size_t tail_len, size_t total) {
  char why[200];
  snprintf(why, sizeof why,
           "upstream '%s': a reply of more than %zu bytes (max_result is %llu bytes; it was "
           "dropped unread)",
           u->cfg.name, total, (unsigned long long)u->cfg.max_result);
  pthread_mutex_lock(&u->lock);
  pending *hit = NULL;
  /* the tail from its end (an id written last), then the head from its start (written first) */
  for (size_t i = tail_len >= 5 ? tail_len - 5 + 1 : 0; i-- > 0 && hit == NULL;) {
    if (memcmp(tail + i, "\"id\":", 5) != 0) continue;
    char *stop;
    long long v = strtoll(tail + i + 5, &stop, 10);
    if (stop != tail + i + 5) hit = find_slot(u, v);
  }
  for (size_t i = 0; i + 5 < head_len && hit == NULL; i++) {
    if (memcmp(head + i, "\"id\":", 5) != 0) continue;
    char *stop;
    long long v = strtoll(head + i + 5, &stop, 10);
    if (stop != head + i + 5) hit = find_slot(u, v);
  }
  if (hit != NULL) {
    hit->done = 1;
    snprintf(hit->fail, sizeof hit->fail, "%s", why);
    pthread_cond_broadcast(&u->cond);
  } else {
    fail_all(u, why);
  }
  pthread_mutex_unlock(&u->lock);
}

static void *reader_thread(void *arg) {
  reader_arg a = *(reader_arg *)arg;
  free(arg);
  mbxH_upstream *u = a.u;
  size_t cap_line = u->cfg.max_result + 65536;
  if (cap_line < LIST_LINE_MAX) cap_line = LIST_LINE_MAX;
  char *line = NULL, chunk[65536], head[4096], tail[4096];
  size_t len = 0, cap = 0, total = 0, head_len = 0, tail_len = 0;
  int dropping = 0;
  for (;;) {
    ssize_t n = read(a.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t pos = 0;
    while (pos < (size_t)n) {
      char *nl = memchr(chunk + pos, '\n', (size_t)n - pos);
      size_t take = nl ? (size_t)(nl - (chunk + pos)) : (size_t)n - pos;
      if (!dropping && len + take > cap_line) {
        dropping = 1;
        head_len = len < sizeof head ? len : sizeof head;
        memcpy(head, line, head_len);
        total = len;
        len = 0;
      }
      if (dropping) {
        total += take;
        /* keep the last bytes seen, for the id */
        if (take >= sizeof tail) {
          memcpy(tail, chunk + pos + take - sizeof tail, sizeof tail);
          tail_len = sizeof tail;
        } else {
          size_t keep = tail_len + take > sizeof tail ? sizeof tail - take : tail_len;
          memmove(tail, tail + tail_len - keep, keep);
          memcpy(tail + keep, chunk + pos, take);
          tail_len = keep + take;
        }
      } else {
        if (len + take + 1 > cap) {
          size_t want = cap ? cap * 2 : 65536;
          while (want < len + take + 1)
            want *= 2;
          char *grown = realloc(line, want);
          if (grown == NULL) break;
          line = grown, cap = want;
        }
        memcpy(line + len, chunk + pos, take);
        len += take;
      }
      pos += take;
      if (nl == NULL) break;
      pos++;
      if (dropping) {
        oversized_line(u, head, head_len, tail, tail_len, total);
        dropping = 0, tail_len = 0;
      } else if (len > 0) {
        handle_line(u, line, len);
      }
      len = 0;
      if (cap > ((size_t)1 << 20)) {
        free(line);
        line = NULL, cap = 0;
      }
    }
  }
  free(line);
  close(a.fd);
  /* The process is gone (or closed its stdout): reap it, fail what waits on it. Its stdin is
     closed under the write lock: a writer never writes to a number reused by a later open. */
  pthread_mutex_lock(&u->write_lock);
  pthread_mutex_lock(&u->lock);
  pid_t pid = u->pid;
  u->pid = 0;
  u->running = 0;
  if (u->to_fd >= 0) close(u->to_fd);
  u->to_fd = -1;
  pthread_mutex_unlock(&u->lock);
  pthread_mutex_unlock(&u->write_lock);
  int status = 0;
  char note[120] = "";
  if (pid > 0 && waitpid(pid, &status, 0) == pid) {
    if (WIFEXITED(status))
      snprintf(note, sizeof note, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
      snprintf(note, sizeof note, "was killed by signal %d", WTERMSIG(status));
  }
  pthread_mutex_lock(&u->lock);
  snprintf(u->exit_note, sizeof u->exit_note, "%s", note[0] ? note : "closed its stdout");
  char why[200];
  snprintf(why, sizeof why, "upstream '%s' %s during the call", u->cfg.name, u->exit_note);
  fail_all(u, why);
  u->restart_at_ms = now_ms() + u->backoff_ms;
  u->backoff_ms = u->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : u->backoff_ms * 2;
  pthread_mutex_unlock(&u->lock);
  return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                  */

static int wait_cancelled(const mbxH_upstream_wait *w) {
  return w && w->cancelled && w->cancelled(w->ctx);
}

/* With u->lock held: 1 past the deadline, 2 once the caller cancelled, else 0 after waiting at
   most POLL_MS on u->cond (a slot freed, a reply come). */
static int wait_a_slice(mbxH_upstream *u, uint64_t deadline_ms, const mbxH_upstream_wait *w) {
  if (now_ms() >= deadline_ms) return 1;
  if (wait_cancelled(w)) return 2;
  struct timespec until;
  clock_gettime(CLOCK_REALTIME, &until);
  until.tv_nsec += POLL_MS * 1000000L;
  if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
  pthread_cond_timedwait(&u->cond, &u->lock, &until);
  return 0;
}

/* method(params) (consumed); 0 with *result, or -1 with msg (-2: not taken, its HTTP session
   had expired: it may be sent again in a new one). Waits until deadline_ms (the earlier of the
   call's timeout and w's), polling w's cancel. */
static int request(mbxH_upstream *u, const char *method, json_t *params, uint64_t deadline_ms,
                   size_t max_reply, const mbxH_upstream_wait *w, json_t **result, char *msg,
                   size_t msg_size) {
  *result = NULL;
  if (w && w->deadline_ms && w->deadline_ms < deadline_ms) deadline_ms = w->deadline_ms;
  pthread_mutex_lock(&u->lock);
  pending *p = NULL;
  int why = 0; /* 1 timeout, 2 cancelled */
  while (p == NULL) {
    for (int i = 0; i < MBXH_UPSTREAM_MAX_INFLIGHT && p == NULL; i++)
      if (!u->slot[i].used) p = &u->slot[i];
    if (p != NULL) break;
    if ((why = wait_a_slice(u, deadline_ms, w)) != 0) break;
  }
  if (p == NULL) {
    pthread_mutex_unlock(&u->lock);
    json_decref(params);
    msgf(msg, msg_size, "upstream '%s': %s while %d calls were in flight (the most at once)",
         u->cfg.name, why == 1 ? "timed out" : "cancelled", MBXH_UPSTREAM_MAX_INFLIGHT);
    return -1;
  }
  memset(p, 0, sizeof *p);
  p->used = 1;
  p->id = ++u->next_id;
  p->max_reply = max_reply;
  int64_t id = p->id;
  pthread_mutex_unlock(&u->lock);

  json_t *m = envelope();
  if (m) {
    json_object_set_new(m, "id", json_integer((json_int_t)id));
    json_object_set_new(m, "method", json_string(method));
    json_object_set_new(m, "params", params ? params : json_object());
  } else {
    json_decref(params);
  }
  /* HTTP stops a reply's transfer past this (stdio's reader, past its line cap) */
  size_t cap = max_reply ? max_reply + 65536 : LIST_LINE_MAX;
  int sent = send_msg(u, m, id, cap, strcmp(method, "initialize") == 0);

  pthread_mutex_lock(&u->lock);
  why = 0;
  if (sent != 0 && !p->done) {
    p->done = 1;
    snprintf(p->fail, sizeof p->fail, "upstream '%s' is not running (%s)", u->cfg.name,
             u->exit_note[0]
                 ? u->exit_note
                 : (u->cfg.url ? "its HTTP transport is stopped" : "its stdin is closed"));
  }
  while (!p->done) {
    if ((why = wait_a_slice(u, deadline_ms, w)) != 0) break;
  }
  json_t *res = p->result, *err = p->error;
  char fail[sizeof p->fail];
  snprintf(fail, sizeof fail, "%s", p->fail);
  int done = p->done, retry = p->retry;
  memset(p, 0, sizeof *p); /* the slot is free; a late response finds no one and is dropped */
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);

  if (!done) {
    json_t *cp = json_object();
    json_object_set_new(cp, "requestId", json_integer((json_int_t)id));
    json_object_set_new(cp, "reason", json_string(why == 1 ? "timed out" : "the run ended"));
    notify(u, "notifications/cancelled", cp);
    if (why == 1)
      msgf(msg, msg_size, "upstream '%s': %s timed out (no answer in time; its timeout is %llu ms)",
           u->cfg.name, method, (unsigned long long)u->cfg.timeout_ms);
    else
      msgf(msg, msg_size, "upstream '%s': %s cancelled", u->cfg.name, method);
    return -1;
  }
  if (fail[0]) {
    json_decref(res), json_decref(err);
    msgf(msg, msg_size, "%s", fail);
    return retry ? -2 : -1;
  }
  if (err != NULL) {
    const json_t *text = json_object_get(err, "message");
    msgf(msg, msg_size, "upstream '%s': %s failed: %.300s", u->cfg.name, method,
         json_is_string(text) ? json_string_value(text) : "an error without a message");
    json_decref(res), json_decref(err);
    return -1;
  }
  *result = res;
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The process                                                                               */

void mbxH_upstream_stop_soon(mbxH_upstream *u) {
  pthread_mutex_lock(&u->write_lock);
  pthread_mutex_lock(&u->lock);
  if (u->to_fd >= 0) close(u->to_fd);
  u->to_fd = -1;
  u->running = 0;
  if (u->pid > 0 && u->reader_live) (void)kill(-u->pid, SIGTERM); /* the reader reaps it */
  pthread_mutex_unlock(&u->lock);
  pthread_mutex_unlock(&u->write_lock);
}

/* Ends the process group: stdin closed first (a polite server exits), then SIGTERM, then
   SIGKILL. The reader reaps it. */
static void stop_process(mbxH_upstream *u) {
  if (u->cfg.url) { /* no process: the transport lives until the upstream is freed, and what
                       waits on it fails now (its transfers are then dropped) */
    pthread_mutex_lock(&u->lock);
    u->running = 0;
    char why[120];
    snprintf(why, sizeof why, "upstream '%s' was stopped", u->cfg.name);
    fail_all(u, why);
    pthread_mutex_unlock(&u->lock);
    return;
  }
  /* A writer waiting on a full pipe holds write_lock (for at most its call's timeout): after
     1 s the process group is killed, so that write fails at once, and the stop goes on. */
  for (int i = 0; pthread_mutex_trylock(&u->write_lock) != 0; i++) {
    if (i == 20) {
      pthread_mutex_lock(&u->lock);
      if (u->pid > 0) (void)kill(-u->pid, SIGKILL);
      pthread_mutex_unlock(&u->lock);
    }
    usleep(50000);
  }
  pthread_mutex_lock(&u->lock);
  pid_t pid = u->pid;
  if (u->to_fd >= 0) close(u->to_fd);
  u->to_fd = -1;
  u->running = 0;
  pthread_mutex_unlock(&u->lock);
  pthread_mutex_unlock(&u->write_lock);
  if (pid > 0 && !u->reader_live) { /* no reader to reap it */
    (void)kill(-pid, SIGKILL);
    (void)waitpid(pid, NULL, 0);
    u->pid = 0;
    return;
  }
  if (pid > 0) {
    (void)kill(-pid, SIGTERM);
    for (int i = 0; i < 20; i++) { /* up to 1 s */
      pthread_mutex_lock(&u->lock);
      int gone = u->pid == 0;
      pthread_mutex_unlock(&u->lock);
      if (gone) break;
      usleep(50000);
    }
    pthread_mutex_lock(&u->lock);
    if (u->pid > 0) (void)kill(-u->pid, SIGKILL);
    pthread_mutex_unlock(&u->lock);
  }
  if (u->reader_live) pthread_join(u->reader, NULL);
  if (u->errors_live) pthread_join(u->errors, NULL);
  u->reader_live = u->errors_live = 0;
}

static int start_threads(mbxH_upstream *u, int from, int errs) {
  reader_arg *ra = malloc(sizeof *ra);
  mbxH_stderr_relay *ea = malloc(sizeof *ea);
  if (ra == NULL || ea == NULL) {
    free(ra), free(ea);
    return -1;
  }
  *ra = (reader_arg){u, from};
  ea->fd = errs;
  snprintf(ea->name, sizeof ea->name, "%s", u->cfg.name);
  if (pthread_create(&u->reader, NULL, reader_thread, ra) != 0) {
    free(ra), free(ea);
    return -1;
  }
  u->reader_live = 1;
  if (pthread_create(&u->errors, NULL, mbxH_process_stderr_thread, ea) != 0) {
    free(ea);
    close(errs); /* the upstream's writes to stderr then fail; the reader goes on */
    return 0;
  }
  u->errors_live = 1;
  return 0;
}

/* tools/list, every page; the allowed ones are kept. */
static int list_tools(mbxH_upstream *u, uint64_t deadline, char *msg, size_t msg_size) {
  json_t *kept = json_array(), *cursor = NULL;
  if (kept == NULL) return -1;
  for (int page = 0; page < MAX_LIST_PAGES; page++) {
    json_t *params = json_object();
    if (cursor) json_object_set(params, "cursor", cursor);
    json_decref(cursor);
    cursor = NULL;
    json_t *res;
    if (request(u, "tools/list", params, deadline, 0, NULL, &res, msg, msg_size) != 0) {
      json_decref(kept);
      return -1;
    }
    const json_t *tools = json_object_get(res, "tools");
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
      const json_t *name = json_object_get(t, "name");
      const json_t *exec = json_object_get(t, "execution");
      const json_t *task = json_is_object(exec) ? json_object_get(exec, "taskSupport") : NULL;
      /* A tool that requires a task-augmented call cannot be called plainly: hidden. */
      if (json_is_string(task) && strcmp(json_string_value(task), "required") == 0) continue;
      if (json_is_string(name) && json_is_object(t) &&
          mbxH_upstream_allows(&u->cfg, json_string_value(name)) &&
          json_array_size(kept) < MBXH_UPSTREAM_MAX_TOOLS)
        json_array_append(kept, (json_t *)t);
    }
    const json_t *next = json_object_get(res, "nextCursor");
    if (json_is_string(next) && json_string_length(next) > 0) cursor = json_incref((json_t *)next);
    json_decref(res);
    if (cursor == NULL) break;
  }
  json_decref(cursor);
  pthread_mutex_lock(&u->lock);
  json_decref(u->tools);
  u->tools = kept;
  pthread_mutex_unlock(&u->lock);
  return 0;
}

/* The process and its reader (stdio), or the transport with no session yet (HTTP). */
static int open_transport(mbxH_upstream *u, char *msg, size_t msg_size) {
  if (u->cfg.url) {
    pthread_mutex_lock(&u->lock);
    u->exit_note[0] = '\0';
    pthread_mutex_unlock(&u->lock);
    if (u->url_tx == NULL) {
      msgf(msg, msg_size, "upstream '%s': no HTTP transport in this program", u->cfg.name);
      return -1;
    }
    if (u->http == NULL) u->http = u->url_tx->open(u, &u->cfg, msg, msg_size);
    if (u->http == NULL) return -1;
    u->url_tx->reset(u->http); /* initialize goes without a session id */
    return 0;
  }
  if (u->reader_live) { /* the last process's threads: it has ended */
    stop_process(u);
  }
  int to, from, errs;
  pthread_mutex_lock(&u->lock);
  u->exit_note[0] = '\0';
  int rc = mbxH_process_spawn(u->cfg.name, u->cfg.argv, u->cfg.env, u->cfg.cwd, &u->pid, &to, &from,
                              &errs, msg, msg_size);
  if (rc == 0) u->to_fd = to;
  pthread_mutex_unlock(&u->lock);
  if (rc != 0) return -1;
  if (start_threads(u, from, errs) != 0) {
    msgf(msg, msg_size, "upstream '%s': cannot start its reader thread", u->cfg.name);
    close(from), close(errs);
    stop_process(u);
    return -1;
  }
  return 0;
}

static int start_locked_out(mbxH_upstream *u, char *msg, size_t msg_size) {
  if (open_transport(u, msg, msg_size) != 0) return -1;
  uint64_t deadline =
      now_ms() + (u->cfg.timeout_ms > START_MIN_MS ? u->cfg.timeout_ms : START_MIN_MS);
  json_t *params = json_object(), *info = json_object();
  json_object_set_new(params, "protocolVersion", json_string(UPSTREAM_PROTOCOL));
  json_object_set_new(params, "capabilities", json_object()); /* no client capabilities */
  json_object_set_new(info, "name", json_string("moonbox"));
  json_object_set_new(info, "version", json_string("code-mode"));
  json_object_set_new(params, "clientInfo", info);
  json_t *res;
  char why[300];
  if (request(u, "initialize", params, deadline, 0, NULL, &res, why, sizeof why) != 0) {
    msgf(msg, msg_size, "upstream '%s': no handshake: %s", u->cfg.name, why);
    stop_process(u);
    return -1;
  }
  const json_t *version = json_object_get(res, "protocolVersion");
  const json_t *caps = json_object_get(res, "capabilities");
  if (!json_is_string(version) || !json_is_object(caps) ||
      !json_is_object(json_object_get(caps, "tools"))) {
    msgf(msg, msg_size,
         "upstream '%s': bad handshake: its initialize result has no protocolVersion or no "
         "tools capability",
         u->cfg.name);
    json_decref(res);
    stop_process(u);
    return -1;
  }
  pthread_mutex_lock(&u->lock);
  u->structured = strcmp(json_string_value(version), "2025-06-18") >= 0;
  pthread_mutex_unlock(&u->lock);
  if (u->http) u->url_tx->opened(u->http, json_string_value(version));
  json_decref(res);
  notify(u, "notifications/initialized", NULL);
  if (list_tools(u, deadline, why, sizeof why) != 0) {
    msgf(msg, msg_size, "upstream '%s': %s", u->cfg.name, why);
    stop_process(u);
    return -1;
  }
  pthread_mutex_lock(&u->lock);
  u->running = 1;
  u->stale = 0;
  pthread_mutex_unlock(&u->lock);
  return 0;
}

mbxH_upstream *mbxH_upstream_new(mbxH_upstream_config *cfg, const mbxH_upstream_transport *url) {
  mbxH_upstream *u = calloc(1, sizeof *u);
  if (u == NULL) return NULL;
  u->url_tx = url;
  u->cfg = *cfg;
  memset(cfg, 0, sizeof *cfg);
  u->to_fd = -1;
  u->backoff_ms = BACKOFF_FIRST_MS;
  pthread_mutex_init(&u->lock, NULL);
  pthread_mutex_init(&u->write_lock, NULL);
  pthread_cond_init(&u->cond, NULL);
  return u;
}

void mbxH_upstream_on_change(mbxH_upstream *u, void (*changed)(void *ctx), void *ctx) {
  u->changed = changed;
  u->changed_ctx = ctx;
}

int mbxH_upstream_start(mbxH_upstream *u, char *msg, size_t msg_size) {
  pthread_mutex_lock(&u->lock);
  u->starting = 1;
  pthread_mutex_unlock(&u->lock);
  int rc = start_locked_out(u, msg, msg_size);
  pthread_mutex_lock(&u->lock);
  u->starting = 0;
  if (rc == 0) u->backoff_ms = BACKOFF_FIRST_MS;
  u->restart_at_ms = now_ms() + u->backoff_ms;
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
  return rc;
}

/* Running, or started again when its backoff is over: 0, or -1 with msg. */
static int ensure_running(mbxH_upstream *u, char *msg, size_t msg_size) {
  pthread_mutex_lock(&u->lock);
  while (u->starting)
    pthread_cond_wait(&u->cond, &u->lock);
  if (u->running) {
    int stale = u->stale;
    u->stale = 0;
    pthread_mutex_unlock(&u->lock);
    if (stale) (void)list_tools(u, now_ms() + u->cfg.timeout_ms, msg, msg_size);
    return 0;
  }
  uint64_t now = now_ms();
  if (now < u->restart_at_ms) {
    msgf(msg, msg_size, "upstream '%s' is not running (it %s); it is started again in %llu ms",
         u->cfg.name, u->exit_note[0] ? u->exit_note : "failed to start",
         (unsigned long long)(u->restart_at_ms - now));
    pthread_mutex_unlock(&u->lock);
    return -1;
  }
  u->starting = 1;
  pthread_mutex_unlock(&u->lock);
  int rc = start_locked_out(u, msg, msg_size);
  pthread_mutex_lock(&u->lock);
  u->starting = 0;
  if (rc != 0) {
    u->restart_at_ms = now_ms() + u->backoff_ms;
    u->backoff_ms = u->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : u->backoff_ms * 2;
  }
  pthread_cond_broadcast(&u->cond);
  pthread_mutex_unlock(&u->lock);
  if (rc == 0) fprintf(stderr, "moonbox mcp: upstream %s: started again\n", u->cfg.name);
  return rc;
}

json_t *mbxH_upstream_tools(mbxH_upstream *u, int refresh) {
  char msg[300];
  if (refresh) (void)ensure_running(u, msg, sizeof msg); /* a failure keeps the last list */
  pthread_mutex_lock(&u->lock);
  json_t *t = u->tools ? json_incref(u->tools) : json_array();
  pthread_mutex_unlock(&u->lock);
  return t;
}

int mbxH_upstream_call(mbxH_upstream *u, const char *tool, const json_t *args,
                       const mbxH_upstream_wait *w, json_t **result, char *msg, size_t msg_size) {
  *result = NULL;
  if (!mbxH_upstream_allows(&u->cfg, tool)) {
    msgf(msg, msg_size, "upstream '%s': tool '%.100s' is not allowed", u->cfg.name, tool);
    return -1;
  }
  char why[300];
  json_t *res;
  int rc = -2;
  /* twice at most: a request an expired HTTP session did not take goes once more, in a new
     session (the server said 404: it did not run it) */
  for (int attempt = 0; attempt < 2 && rc == -2; attempt++) {
    if (ensure_running(u, msg, msg_size) != 0) return -1;
    json_t *params = json_object();
    json_object_set_new(params, "name", json_string(tool));
    json_object_set_new(params, "arguments", args ? json_deep_copy(args) : json_object());
    rc = request(u, "tools/call", params, now_ms() + u->cfg.timeout_ms, u->cfg.max_result, w, &res,
                 why, sizeof why);
  }
  if (rc != 0) {
    msgf(msg, msg_size, "%s", why);
    return -1;
  }
  if (!json_is_object(res)) {
    json_decref(res);
    msgf(msg, msg_size, "upstream '%s': tools/call answered something not an object", u->cfg.name);
    return -1;
  }
  pthread_mutex_lock(&u->lock);
  u->backoff_ms = BACKOFF_FIRST_MS; /* it works again */
  int structured = u->structured;
  pthread_mutex_unlock(&u->lock);
  if (!structured) json_object_del(res, "structuredContent");
  *result = res;
  return 0;
}

void mbxH_upstream_free(mbxH_upstream *u) {
  if (u == NULL) return;
  stop_process(u);
  if (u->http) u->url_tx->close(u->http); /* its thread ends, its session is DELETEd */
  pthread_mutex_lock(&u->lock); /* a relist thread's request has failed with the process */
  while (u->relisting)
    pthread_cond_wait(&u->cond, &u->lock);
  pthread_mutex_unlock(&u->lock);
  json_decref(u->tools);
  pthread_mutex_destroy(&u->lock);
  pthread_mutex_destroy(&u->write_lock);
  pthread_cond_destroy(&u->cond);
  mbxH_upstream_config_free(&u->cfg);
  free(u);
}
