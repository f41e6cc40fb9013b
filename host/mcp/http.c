/* host/mcp/http.c -- the Streamable HTTP transport of `moonbox mcp` (MCP 2025-11-25): one
   endpoint, /mcp. A POST carries one JSON-RPC message and is answered with application/json
   (202 when the message has no reply); the server mints Mcp-Session-Id at initialize (after
   the --http-session-prefix a proxy routes on, if any); DELETE ends a session; GET is 405 (no server-to-client stream). Every message goes to the one
   dispatch of server.c (mbxH_mcp_handle_message), its reply comes back through a reply sink.
**
** Threads: libmicrohttpd's one internal polling thread (epoll) runs every connection and this
** file's handlers, so the client table and the body budget need no lock; tools/call runs on
** server.c's call threads, and the connection waiting for it is suspended meanwhile, so one
** slow call never stalls another client. Idle connections cost a socket and a few KiB, under
** MBXH_HTTP_MAX_CONNECTIONS, MBXH_HTTP_MAX_PER_IP and MBXH_HTTP_IDLE_TIMEOUT_S.
*/
#include "host/mcp/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "host/mcp/mcp.h"

#define SESSION_HEX_LEN 64 /* hex digits of 32 bytes from getrandom */
/* The longest id: the prefix, '-', the hex digits. */
#define SESSION_ID_MAX (MBXH_HTTP_SESSION_PREFIX_MAX + 1 + SESSION_HEX_LEN)
#define TOKEN_MAX 512
#define PEM_MAX ((size_t)1 << 20)

typedef struct client {
  char id[SESSION_ID_MAX + 1]; /* "" = a free slot */
  mbxH_mcp_peer peer;
  uint64_t last_ms;
} client;

typedef struct http {
  mbxH_mcp_server *server;
  const mbxH_mcp_http_config *cfg;
  char token[TOKEN_MAX + 1]; /* "" = no token required */
  size_t token_len;
  char prefix[MBXH_HTTP_SESSION_PREFIX_MAX + 2]; /* "NAME-", or "" */
  size_t id_len;                                 /* of every id minted: prefix + hex */
  size_t body_bytes; /* held by bodies being received (the polling thread only) */
  uint64_t next_owner;
  atomic_int stopping; /* the polling thread answers 503 from now on */
  client clients[MBXH_HTTP_MAX_CLIENTS];
} http;

/* One request: its body, then its reply, which a call thread may deliver (under lock). */
typedef struct request {
  http *h;
  struct MHD_Connection *conn;
  char *body;
  size_t len, cap;
  uint64_t start_ms;
  int answered; /* a response was queued (an early refusal) */
  int dispatched;
  int sessionless;     /* no Mcp-Session-Id: only an initialize that opens one is a success */
  mbxH_mcp_peer fresh; /* the client of a message without Mcp-Session-Id */
  char minted[SESSION_ID_MAX + 1];
  pthread_mutex_t lock;
  int suspended, replied, reply_oom;
  char *reply; /* NULL: no reply (202) */
  size_t reply_len;
} request;

static volatile sig_atomic_t stop_signal;
static int stop_pipe[2] = {-1, -1};

static void on_stop(int sig) {
  stop_signal = sig;
  if (stop_pipe[1] >= 0) {
    char b = 1;
    ssize_t n = write(stop_pipe[1], &b, 1);
    (void)n;
  }
}

/* ---------------------------------------------------------------------------------------- */
/* Responses                                                                                 */

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, const char *type,
                               const char *body, size_t len, const char *session) {
  struct MHD_Response *r =
      MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  if (r == NULL) return MHD_NO;
  if (type) MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  if (session) MHD_add_response_header(r, "Mcp-Session-Id", session);
  if (status == MHD_HTTP_METHOD_NOT_ALLOWED) MHD_add_response_header(r, "Allow", "POST, DELETE");
  if (status == MHD_HTTP_UNAUTHORIZED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"moonbox\"");
  enum MHD_Result rc = MHD_queue_response(conn, status, r);
  MHD_destroy_response(r);
  return rc;
}

/* A refusal before any message: a JSON-RPC error without id (the spec's form for HTTP errors). */
static enum MHD_Result refuse(request *req, unsigned status, const char *why) {
  char body[512];
  int n = snprintf(body, sizeof body,
                   "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":%d,\"message\":\"%s\"}}",
                   MBXH_RPC_INVALID_REQUEST, why);
  req->answered = 1;
  return respond(req->conn, status, "application/json", body, (size_t)n, NULL);
}

/* The reply sink of mbxH_mcp_handle_message: called once, on the polling thread or a call
   thread; wakes the suspended connection. */
static void http_reply(void *ctx, const char *json, size_t len) {
  request *req = ctx;
  char *copy = NULL;
  if (json != NULL) {
    copy = malloc(len ? len : 1);
    if (copy) memcpy(copy, json, len);
  }
  pthread_mutex_lock(&req->lock);
  req->reply = copy;
  req->reply_len = len;
  req->reply_oom = json != NULL && copy == NULL;
  req->replied = 1;
  if (req->suspended) {
    req->suspended = 0;
    MHD_resume_connection(req->conn);
  }
  pthread_mutex_unlock(&req->lock);
}

static enum MHD_Result send_reply(request *req) {
  static const char error_prefix[] = "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\"";
  if (req->reply_oom) return refuse(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
  /* Anything but an initialize that opened a session, sent without Mcp-Session-Id, is a 400
     (the spec's answer), with the dispatch's JSON-RPC reply as its body when there is one. */
  int no_session = req->sessionless && req->minted[0] == '\0';
  if (req->reply == NULL && no_session)
    return refuse(req, MHD_HTTP_BAD_REQUEST, "no Mcp-Session-Id: send initialize first");
  if (req->reply == NULL)
    return respond(req->conn, MHD_HTTP_ACCEPTED, NULL, "", 0, req->minted[0] ? req->minted : NULL);
  /* A message that was not a request we could read (a parse error, not an object, ...) has an
     error reply with id null: HTTP 400, as the spec asks for input it cannot accept. */
  int bad = no_session || (req->reply_len >= sizeof error_prefix - 1 &&
                           memcmp(req->reply, error_prefix, sizeof error_prefix - 1) == 0);
  return respond(req->conn, bad ? MHD_HTTP_BAD_REQUEST : MHD_HTTP_OK, "application/json",
                 req->reply, req->reply_len, req->minted[0] ? req->minted : NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Checks                                                                                    */

/* Equal in time independent of where they differ. */
static int same_secret(const char *a, size_t alen, const char *b, size_t blen) {
  unsigned char diff = alen != blen;
  size_t n = alen < blen ? alen : blen;
  for (size_t i = 0; i < n; i++)
    diff |= (unsigned char)(a[i] ^ b[i]);
  return diff == 0;
}

static int token_ok(http *h, struct MHD_Connection *conn) {
  if (h->token_len == 0) return 1;
  const char *auth = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Authorization");
  if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0) return 0;
  auth += 7;
  return same_secret(auth, strlen(auth), h->token, h->token_len);
}

/* An Origin whose host is loopback (http or https, any port), or the one --http-allow-origin
   names. No Origin (not a browser) is accepted: the token is what guards those. */
static int origin_ok(http *h, const char *origin) {
  if (origin == NULL) return 1;
  if (h->cfg->allow_origin && strcmp(origin, h->cfg->allow_origin) == 0) return 1;
  const char *host = strncmp(origin, "http://", 7) == 0    ? origin + 7
                     : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                           : NULL;
  if (host == NULL) return 0;
  static const char *const loopback[] = {"localhost", "127.0.0.1", "[::1]"};
  for (size_t i = 0; i < sizeof loopback / sizeof *loopback; i++) {
    size_t n = strlen(loopback[i]);
    if (strncasecmp(host, loopback[i], n) != 0) continue;
    const char *rest = host + n;
    if (*rest == '\0') return 1;
    if (*rest != ':' || rest[1] == '\0') return 0;
    for (rest++; *rest; rest++)
      if (*rest < '0' || *rest > '9') return 0;
    return 1;
  }
  return 0;
}

/* The client of a session id; expired ones are dropped first. The whole id is compared, the
   prefix too, in time independent of where it differs: an id with another server's prefix
   (or none) is as unknown as a guessed one. */
static client *find_client(http *h, const char *id) {
  if (id == NULL || strlen(id) != h->id_len) return NULL;
  client *found = NULL;
  for (size_t i = 0; i < MBXH_HTTP_MAX_CLIENTS; i++) {
    client *c = &h->clients[i];
    if (c->id[0] != '\0' && same_secret(c->id, h->id_len, id, h->id_len)) found = c;
  }
  return found;
}

static void drop_client(http *h, client *c) {
  mbxH_mcp_peer_gone(h->server, c->peer.owner);
  memset(c, 0, sizeof *c);
}

static void expire_clients(http *h, uint64_t now) {
  for (size_t i = 0; i < MBXH_HTTP_MAX_CLIENTS; i++) {
    client *c = &h->clients[i];
    if (c->id[0] != '\0' && now - c->last_ms > MBXH_MCP_SESSION_IDLE_MS) drop_client(h, c);
  }
}

static client *free_client(http *h) {
  for (size_t i = 0; i < MBXH_HTTP_MAX_CLIENTS; i++)
    if (h->clients[i].id[0] == '\0') return &h->clients[i];
  return NULL;
}

/* The prefix, then 32 bytes of the kernel's CSPRNG as 64 hex digits; 0, or -1 when it fails.
   The prefix is public (a proxy reads it): the 256 random bits alone make the id unguessable. */
static int mint_id(const http *h, char out[SESSION_ID_MAX + 1]) {
  unsigned char raw[SESSION_HEX_LEN / 2];
  size_t got = 0;
  while (got < sizeof raw) {
    ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  static const char hex[] = "0123456789abcdef";
  size_t at = strlen(h->prefix);
  memcpy(out, h->prefix, at);
  for (size_t i = 0; i < sizeof raw; i++) {
    out[at + 2 * i] = hex[raw[i] >> 4];
    out[at + 2 * i + 1] = hex[raw[i] & 15];
  }
  out[at + SESSION_HEX_LEN] = '\0';
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Requests                                                                                  */

/* The checks every request passes before its body is read. */
static enum MHD_Result first_call(http *h, request *req, const char *url, const char *method) {
  struct MHD_Connection *conn = req->conn;
  if (atomic_load(&h->stopping))
    return refuse(req, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping");
  if (strcmp(url, "/mcp") != 0) return refuse(req, MHD_HTTP_NOT_FOUND, "the endpoint is /mcp");
  if (!origin_ok(h, MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Origin")))
    return refuse(req, MHD_HTTP_FORBIDDEN,
                  "Origin refused: only loopback origins (and --http-allow-origin) may call");
  if (!token_ok(h, conn))
    return refuse(req, MHD_HTTP_UNAUTHORIZED, "missing or wrong bearer token");
  int post = strcmp(method, "POST") == 0, del = strcmp(method, "DELETE") == 0;
  if (!post && !del)
    return refuse(req, MHD_HTTP_METHOD_NOT_ALLOWED,
                  "POST a JSON-RPC message or DELETE a session; there is no GET stream");
  const char *version = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "MCP-Protocol-Version");
  if (version != NULL && !mbxH_mcp_version_supported(version))
    return refuse(req, MHD_HTTP_BAD_REQUEST, "unsupported MCP-Protocol-Version");
  const char *sid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Mcp-Session-Id");
  expire_clients(h, mbxH_mcp_now_ms());
  client *c = find_client(h, sid);
  if (sid != NULL && c == NULL)
    return refuse(req, MHD_HTTP_NOT_FOUND, "unknown or expired Mcp-Session-Id");
  if (del) {
    if (c == NULL) return refuse(req, MHD_HTTP_BAD_REQUEST, "DELETE needs an Mcp-Session-Id");
    drop_client(h, c);
    req->answered = 1;
    return respond(conn, MHD_HTTP_OK, NULL, "", 0, NULL);
  }
  const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Type");
  if (type == NULL || strncasecmp(type, "application/json", 16) != 0 ||
      (type[16] != '\0' && type[16] != ';' && type[16] != ' '))
    return refuse(req, MHD_HTTP_UNSUPPORTED_MEDIA_TYPE, "the body must be application/json");
  const char *length = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
  if (length != NULL && strtoull(length, NULL, 10) > MBXH_HTTP_MAX_BODY)
    return refuse(req, MHD_HTTP_CONTENT_TOO_LARGE, "the body is too large");
  if (c == NULL && free_client(h) == NULL)
    return refuse(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too many MCP sessions open");
  if (c != NULL) c->last_ms = mbxH_mcp_now_ms();
  return MHD_YES;
}

static enum MHD_Result take_body(http *h, request *req, const char *data, size_t size) {
  if (mbxH_mcp_now_ms() - req->start_ms > MBXH_HTTP_BODY_MS) return MHD_NO; /* a trickle */
  if (req->len + size > MBXH_HTTP_MAX_BODY)
    return refuse(req, MHD_HTTP_CONTENT_TOO_LARGE, "the body is too large");
  if (h->body_bytes + size > MBXH_HTTP_BODY_BUDGET)
    return refuse(req, MHD_HTTP_SERVICE_UNAVAILABLE, "too many request bodies in flight");
  if (req->len + size > req->cap) {
    size_t want = req->cap ? req->cap : 4096;
    while (want < req->len + size)
      want *= 2;
    if (want > MBXH_HTTP_MAX_BODY) want = MBXH_HTTP_MAX_BODY;
    char *grown = realloc(req->body, want);
    if (grown == NULL) return refuse(req, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory");
    h->body_bytes += want - req->cap;
    req->body = grown;
    req->cap = want;
  }
  memcpy(req->body + req->len, data, size);
  req->len += size;
  return MHD_YES;
}

/* The whole body is in: one message to the dispatch. */
static enum MHD_Result dispatch(http *h, request *req) {
  req->dispatched = 1;
  if (req->len == 0) return refuse(req, MHD_HTTP_BAD_REQUEST, "an empty body: POST one message");
  const char *sid = MHD_lookup_connection_value(req->conn, MHD_HEADER_KIND, "Mcp-Session-Id");
  client *c = find_client(h, sid);
  if (sid != NULL && c == NULL)
    return refuse(req, MHD_HTTP_NOT_FOUND, "unknown or expired Mcp-Session-Id");
  mbxH_mcp_peer *peer = c ? &c->peer : &req->fresh;
  req->sessionless = c == NULL;
  if (c == NULL)
    req->fresh = (mbxH_mcp_peer){.owner = h->next_owner++,
                                 .max_calls = MBXH_HTTP_CLIENT_CALLS,
                                 .max_sessions = MBXH_HTTP_CLIENT_SESSIONS};
  mbxH_mcp_reply sink = {http_reply, req};
  mbxH_mcp_handle_message(h->server, peer, &sink, req->body ? req->body : "", req->len);
  if (c == NULL && req->fresh.initialized) {
    /* initialize answered: the client is a session from now on (a slot is free: checked
       before the body, and only this thread takes slots). */
    client *slot = free_client(h);
    if (slot == NULL || mint_id(h, req->minted) != 0) {
      free(req->reply);
      req->reply = NULL;
      req->minted[0] = '\0';
      return refuse(req, MHD_HTTP_SERVICE_UNAVAILABLE, "cannot open an MCP session");
    }
    memcpy(slot->id, req->minted, sizeof slot->id);
    slot->peer = req->fresh;
    slot->last_ms = mbxH_mcp_now_ms();
  }
  pthread_mutex_lock(&req->lock);
  int ready = req->replied;
  if (!ready) {
    /* A call thread answers: the connection sleeps until then (no timeout while suspended;
       the call's own budgets bound it). */
    req->suspended = 1;
    MHD_suspend_connection(req->conn);
  }
  pthread_mutex_unlock(&req->lock);
  return ready ? send_reply(req) : MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls) {
  (void)version;
  http *h = cls;
  request *req = *con_cls;
  if (req == NULL) {
    req = calloc(1, sizeof *req);
    if (req == NULL) return MHD_NO;
    req->h = h;
    req->conn = conn;
    req->start_ms = mbxH_mcp_now_ms();
    pthread_mutex_init(&req->lock, NULL);
    *con_cls = req;
    return first_call(h, req, url, method);
  }
  if (req->answered) {
    *upload_data_size = 0; /* the rest of a refused body is dropped */
    return MHD_YES;
  }
  if (*upload_data_size > 0) {
    size_t size = *upload_data_size;
    *upload_data_size = 0;
    return take_body(h, req, upload_data, size);
  }
  if (!req->dispatched) {
    if (atomic_load(&h->stopping))
      return refuse(req, MHD_HTTP_SERVICE_UNAVAILABLE, "the server is stopping");
    return dispatch(h, req);
  }
  pthread_mutex_lock(&req->lock);
  int ready = req->replied;
  pthread_mutex_unlock(&req->lock);
  return ready ? send_reply(req) : MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode code) {
  (void)conn;
  (void)code;
  http *h = cls;
  request *req = *con_cls;
  if (req == NULL) return;
  h->body_bytes -= req->cap;
  free(req->body);
  free(req->reply);
  pthread_mutex_destroy(&req->lock);
  free(req);
  *con_cls = NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Start and stop                                                                            */

/* A whole small file (a token, a PEM) as a string, or NULL with msg. */
static char *read_small(const char *path, size_t max, char *msg, size_t msg_size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) {
    snprintf(msg, msg_size, "cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  char *buf = malloc(max + 1);
  size_t n = buf ? fread(buf, 1, max + 1, f) : 0;
  fclose(f);
  if (buf == NULL || n > max) {
    snprintf(msg, msg_size, "%s: %s", path, buf ? "too large" : "out of memory");
    free(buf);
    return NULL;
  }
  buf[n] = '\0';
  return buf;
}

static int load_token(http *h, char *msg, size_t msg_size) {
  const char *path = h->cfg->token_file;
  if (path == NULL) return 0;
  char *text = read_small(path, TOKEN_MAX, msg, msg_size);
  if (text == NULL) return -1;
  size_t n = strcspn(text, "\r\n");
  while (n > 0 && (text[n - 1] == ' ' || text[n - 1] == '\t'))
    n--;
  int weak = n < 16;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)text[i] <= ' ' || (unsigned char)text[i] >= 127) weak = 1;
  if (weak) {
    snprintf(msg, msg_size,
             "--http-token-file %s: the first line must be a token of 16 to %d printable "
             "characters without spaces",
             path, TOKEN_MAX);
    free(text);
    return -1;
  }
  memcpy(h->token, text, n);
  h->token[n] = '\0';
  h->token_len = n;
  free(text);
  return 0;
}

/* HOST:PORT to an address; *loopback set. 0, or -1 with msg. */
static int parse_listen(const char *listen, struct sockaddr_storage *addr, int *loopback, char *msg,
                        size_t msg_size) {
  char host[256];
  const char *colon = strrchr(listen, ':');
  size_t hl = colon ? (size_t)(colon - listen) : 0;
  if (colon == NULL || hl == 0 || hl >= sizeof host || colon[1] == '\0') {
    snprintf(msg, msg_size, "--http %s: expected HOST:PORT (e.g. 127.0.0.1:8080)", listen);
    return -1;
  }
  memcpy(host, listen, hl);
  host[hl] = '\0';
  if (host[0] == '[' && host[hl - 1] == ']') {
    memmove(host, host + 1, hl - 2);
    host[hl - 2] = '\0';
  }
  struct addrinfo hints = {.ai_flags = AI_NUMERICSERV, .ai_socktype = SOCK_STREAM}, *res;
  int rc = getaddrinfo(host, colon + 1, &hints, &res);
  if (rc != 0) {
    snprintf(msg, msg_size, "--http %s: %s", listen, gai_strerror(rc));
    return -1;
  }
  memcpy(addr, res->ai_addr, res->ai_addrlen);
  freeaddrinfo(res);
  if (addr->ss_family == AF_INET) {
    const struct sockaddr_in *a = (const struct sockaddr_in *)addr;
    *loopback = (ntohl(a->sin_addr.s_addr) >> 24) == 127;
  } else {
    const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)addr;
    *loopback = IN6_IS_ADDR_LOOPBACK(&a->sin6_addr);
  }
  return 0;
}

int mbxH_mcp_http_serve(mbxH_mcp_server *s, const mbxH_mcp_http_config *cfg) {
  static http h; /* one listener per process: the stop signal's */
  char msg[512] = "";
  struct sockaddr_storage addr;
  int loopback = 0;
  memset(&h, 0, sizeof h);
  h.server = s;
  h.cfg = cfg;
  h.next_owner = 1; /* 0 is stdio's */
  h.id_len = SESSION_HEX_LEN;
  if (cfg->session_prefix != NULL) {
    size_t n = strlen(cfg->session_prefix);
    if (n == 0 || n > MBXH_HTTP_SESSION_PREFIX_MAX) {
      fprintf(stderr, "moonbox mcp: --http-session-prefix: 1 to %d characters\n",
              MBXH_HTTP_SESSION_PREFIX_MAX);
      return 2;
    }
    memcpy(h.prefix, cfg->session_prefix, n);
    h.prefix[n] = '-';
    h.prefix[n + 1] = '\0';
    h.id_len = n + 1 + SESSION_HEX_LEN;
  }
  if (parse_listen(cfg->listen, &addr, &loopback, msg, sizeof msg) != 0 ||
      load_token(&h, msg, sizeof msg) != 0) {
    fprintf(stderr, "moonbox mcp: %s\n", msg);
    return 2;
  }
  int tls = cfg->cert_file != NULL || cfg->key_file != NULL;
  const char *refusal = NULL;
  if (tls && (cfg->cert_file == NULL || cfg->key_file == NULL))
    refusal = "--http-cert and --http-key go together";
  else if (!loopback && h.token_len == 0)
    refusal = "off loopback, --http needs --http-token-file (anyone who can reach the port "
              "would run code)";
  else if (!loopback && !tls && !cfg->behind_proxy)
    refusal = "off loopback, --http needs --http-cert and --http-key, or --http-behind-proxy "
              "when a TLS proxy is in front (the token would cross the network in clear)";
  else if (tls && MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES)
    refusal = "this libmicrohttpd has no TLS";
  if (refusal) {
    fprintf(stderr, "moonbox mcp: %s\n", refusal);
    return 2;
  }
  char *cert = NULL, *key = NULL;
  if (tls && ((cert = read_small(cfg->cert_file, PEM_MAX, msg, sizeof msg)) == NULL ||
              (key = read_small(cfg->key_file, PEM_MAX, msg, sizeof msg)) == NULL)) {
    fprintf(stderr, "moonbox mcp: %s\n", msg);
    free(cert);
    return 2;
  }
  if (pipe2(stop_pipe, O_CLOEXEC) != 0) {
    fprintf(stderr, "moonbox mcp: pipe: %s\n", strerror(errno));
    free(cert);
    free(key);
    return 70;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME |
                   (addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0) | (tls ? MHD_USE_TLS : 0);
  struct MHD_OptionItem tls_opts[] = {{MHD_OPTION_HTTPS_MEM_KEY, 0, key},
                                      {MHD_OPTION_HTTPS_MEM_CERT, 0, cert},
                                      {MHD_OPTION_END, 0, NULL}};
  struct MHD_Daemon *d = MHD_start_daemon(
      flags, 0, NULL, NULL, on_request, &h, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&addr,
      MHD_OPTION_CONNECTION_LIMIT, (unsigned)MBXH_HTTP_MAX_CONNECTIONS,
      /* Behind a proxy every client has the proxy's address: no cap per address then. */
      MHD_OPTION_PER_IP_CONNECTION_LIMIT,
      (unsigned)(cfg->behind_proxy ? MBXH_HTTP_MAX_CONNECTIONS : MBXH_HTTP_MAX_PER_IP),
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)MBXH_HTTP_IDLE_TIMEOUT_S,
      MHD_OPTION_CONNECTION_MEMORY_LIMIT, MBXH_HTTP_HEADER_MEMORY, MHD_OPTION_NOTIFY_COMPLETED,
      on_completed, &h, MHD_OPTION_ARRAY, tls ? tls_opts : tls_opts + 2, MHD_OPTION_END);
  free(cert);
  free(key);
  if (d == NULL) {
    fprintf(stderr, "moonbox mcp: cannot listen on %s (in use, or not an address of this host)\n",
            cfg->listen);
    return 70;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
  char shown[INET6_ADDRSTRLEN] = "?";
  if (addr.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&addr)->sin_addr, shown, sizeof shown);
  else
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&addr)->sin6_addr, shown, sizeof shown);
  int v6 = addr.ss_family == AF_INET6;
  fprintf(stderr, "moonbox mcp: listening on %s://%s%s%s:%u/mcp (MCP %s Streamable HTTP%s)\n",
          tls ? "https" : "http", v6 ? "[" : "", shown, v6 ? "]" : "",
          info ? (unsigned)info->port : 0u, MBXH_MCP_PROTOCOL,
          h.token_len ? ", bearer token required" : "");
  while (!stop_signal) {
    char b;
    ssize_t n = read(stop_pipe[0], &b, 1);
    if (n < 0 && errno != EINTR) break;
  }
  /* New messages get 503; the calls in flight finish (their budgets bound them) and answer
     their suspended connections; then the listener stops. */
  MHD_quiesce_daemon(d);
  atomic_store(&h.stopping, 1);
  pthread_mutex_lock(&s->lock);
  while (s->threads > 0)
    pthread_cond_wait(&s->changed, &s->lock);
  pthread_mutex_unlock(&s->lock);
  MHD_stop_daemon(d);
  close(stop_pipe[0]);
  close(stop_pipe[1]);
  stop_pipe[0] = stop_pipe[1] = -1;
  fprintf(stderr, "moonbox mcp: stopped (signal %d)\n", (int)stop_signal);
  return 0;
}
