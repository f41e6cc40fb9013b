/* host/mcp/upstream_http.h -- the Streamable HTTP transport (MCP 2025-11-25) of an upstream
   MCP server (upstream.h), on libcurl: one thread per upstream drives a curl multi handle.
**
** Each JSON-RPC message is one POST (Accept: application/json, text/event-stream); the reply is
** one JSON body or an SSE stream whose events are handed to the upstream's one dispatch
** (mbxH_upstream_deliver) as they arrive. The Mcp-Session-Id of initialize's answer goes with
** every later request, with MCP-Protocol-Version. Bytes are bounded while they arrive (a reply
** past its cap stops its transfer), a request its caller stopped waiting for is dropped (after
** its notifications/cancelled is queued), no redirect is followed, no proxy is used (not even
** one the environment names), TLS is always verified, and credentials only ever travel in the
** operator's headers (docs/code-mode.md).
*/
#ifndef MBX_HOST_MCP_UPSTREAM_HTTP_H
#define MBX_HOST_MCP_UPSTREAM_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include "host/mcp/upstream.h"

/* Response headers of one transfer; a session id's bytes; headers the operator may add. */
#define MBXH_HTTP_HEADER_BYTES ((size_t)65536)
#define MBXH_HTTP_SESSION_MAX 256
#define MBXH_HTTP_MAX_HEADERS 32

typedef struct mbxH_upstream_http mbxH_upstream_http;

/* The functions below as the transport mbxH_upstream_new takes for URL upstreams. */
extern const mbxH_upstream_transport mbxH_upstream_http_transport;

/* Starts the transport's thread for u (cfg: u's, borrowed). NULL with msg on failure. */
mbxH_upstream_http *mbxH_upstream_http_new(mbxH_upstream *u, const mbxH_upstream_config *cfg,
                                           char *msg, size_t msg_size);
/* Before an initialize: the session id and protocol version are forgotten. */
void mbxH_upstream_http_reset(mbxH_upstream_http *h);
/* After initialize: version goes with every later request as MCP-Protocol-Version. */
void mbxH_upstream_http_opened(mbxH_upstream_http *h, const char *version);
/* POSTs text (copied). id: a request's id, whose reply is awaited (0 for a notification or a
   response); init: initialize, whose Mcp-Session-Id is kept; cap: bytes the reply may take
   (its transfer is stopped past them). 0, or -1 (stopped; too many notifications queued; out
   of memory). */
int mbxH_upstream_http_send(mbxH_upstream_http *h, const char *text, int64_t id, int init,
                            size_t cap);
/* Stops the thread (transfers in flight are dropped), DELETEs the session (2 s at most) and
   frees h. NULL is a no-op. */
void mbxH_upstream_http_free(mbxH_upstream_http *h);

/* An upstream's URL: http or https, a host, no user or password in it (credentials go in
   headers), and plain http only to a loopback host (localhost, 127.0.0.0/8, [::1]): a token
   would otherwise cross the network in clear. 0, or -1 with why. */
int mbxH_upstream_url_check(const char *url, char *why, size_t why_size);
/* One header the operator adds: a token name that is not one the transport sets itself, a
   value without CR, LF or NUL. 0, or -1 with why (never quoting the value: it may be a
   secret). */
int mbxH_upstream_header_check(const char *name, const char *value, char *why, size_t why_size);

/* A Server-Sent Events parser (the WHATWG event-stream format): lines end with CRLF, LF or CR;
   "data:" lines join with LF; a blank line ends an event; comments and events named other than
   "message" are skipped; an event without data is not dispatched. "id:" (visible ASCII, at most
   MBXH_SSE_ID_MAX bytes) and "retry:" (digits) are kept: a stream the server closes before its
   answer is resumed from them. */
#define MBXH_SSE_ID_MAX 128
typedef struct mbxH_sse {
  char *line, *data;
  size_t line_len, line_cap, data_len, data_cap;
  size_t max;                        /* bytes of one line, and of one event's data, at most */
  int has_data;                      /* a data: line came */
  int other;                         /* an event: line named another type */
  int after_cr;                      /* the last byte was CR: a following LF ends nothing */
  char last_id[MBXH_SSE_ID_MAX + 1]; /* the last "id:" ("" none) */
  long retry_ms;                     /* the last "retry:", in ms (0: none) */
} mbxH_sse;

/* n bytes of the stream: on_event(ctx, data, len) for each complete event. 0, or -1 when a
   line or an event is over s->max or memory ran out (the stream is then to be dropped). */
int mbxH_sse_feed(mbxH_sse *s, const char *p, size_t n,
                  void (*on_event)(void *ctx, const char *data, size_t len), void *ctx);
void mbxH_sse_free(mbxH_sse *s);

#endif
