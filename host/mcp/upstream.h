/* host/mcp/upstream.h -- `moonbox mcp` as an MCP client of one upstream server over stdio or
   Streamable HTTP (code mode, docs/code-mode.md): its configuration, its process or its
   transport (upstream_http.h), the JSON-RPC requests to it.
**
** One upstream serves many calls at once: each request gets an id of ours, one reader thread
** per process hands each response to the call waiting for that id, and at most
** MBXH_UPSTREAM_MAX_INFLIGHT requests are in flight (the next waits for a free one, within its
** own deadline). A process that exits fails the calls waiting on it and is started again by the
** next call after a backoff; a request past its deadline, or whose run was cancelled, is
** abandoned with notifications/cancelled. Requests of the upstream to its client (sampling,
** elicitation, roots) are declined: moonbox declares no client capabilities.
*/
#ifndef MBX_HOST_MCP_UPSTREAM_H
#define MBX_HOST_MCP_UPSTREAM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Upstreams per server, requests in flight per upstream, tools kept per upstream. */
#define MBXH_UPSTREAM_MAX 16
#define MBXH_UPSTREAM_MAX_INFLIGHT 16
#define MBXH_UPSTREAM_MAX_TOOLS 256
#define MBXH_UPSTREAM_NAME_MAX 32
/* Defaults: a call's timeout, and the bytes of one reply (a tools/call result). */
#define MBXH_UPSTREAM_TIMEOUT_MS ((uint64_t)30000)
#define MBXH_UPSTREAM_MAX_RESULT ((uint64_t)1 << 20)
/* The most a reply may be set to: what a host function may hand the guest (MBX_HOST_REPLY_MAX). */
#define MBXH_UPSTREAM_MAX_RESULT_CAP ((uint64_t)8 << 20)

/* What the operator wrote (--upstream, --allow-tool, or the policy file's upstreams). */
typedef struct mbxH_upstream_config {
  char name[MBXH_UPSTREAM_NAME_MAX + 1]; /* a Lua identifier: tools.NAME */
  char **argv;    /* the program and its arguments; NULL-terminated (NULL for a URL upstream) */
  char *url;      /* Streamable HTTP: the MCP endpoint (http only to loopback); NULL for stdio */
  char **headers; /* "Name: value" sent with every HTTP request, NULL-terminated; or NULL */
  char **env;     /* NAME=VALUE added to the server's environment, NULL-terminated; or NULL */
  char *cwd;      /* the working folder, or NULL (the server's) */
  char **tools;   /* the allow-list: tool names, or "*" for every tool; NULL-terminated */
  uint64_t timeout_ms; /* one call; and the handshake, but at least 5 s */
  uint64_t max_result; /* bytes of one reply */
} mbxH_upstream_config;

void mbxH_upstream_config_free(mbxH_upstream_config *c);
/* 1 if the allow-list names tool (or holds "*"). */
int mbxH_upstream_allows(const mbxH_upstream_config *c, const char *tool);

/* The upstreams of the policy file's "upstreams" object (json), appended to list (*count of
   at most MBXH_UPSTREAM_MAX); host folders in it are taken from base_dir. 0, or -1 with msg
   naming the key ("upstreams.mem.timeout: ..."). */
int mbxH_upstream_config_json(const json_t *json, const char *base_dir, mbxH_upstream_config *list,
                              size_t *count, char *msg, size_t msg_size);
/* --upstream 'NAME=COMMAND ARGS...': the command split like a shell's words (spaces; '...'
   quotes; "..." quotes with \ escapes; \ outside quotes) but never run by one; or
   NAME=http(s)://...: a Streamable HTTP upstream at that URL. 0, or -1. */
int mbxH_upstream_config_flag(const char *value, mbxH_upstream_config *list, size_t *count,
                              char *msg, size_t msg_size);
/* --allow-tool NAME.TOOL (NAME.* for all of NAME's tools): adds to an upstream's allow-list. */
int mbxH_upstream_allow_flag(const char *value, mbxH_upstream_config *list, size_t count, char *msg,
                             size_t msg_size);

typedef struct mbxH_upstream mbxH_upstream;

/* How long a request may wait, and what cancels it. */
typedef struct mbxH_upstream_wait {
  uint64_t deadline_ms;        /* CLOCK_MONOTONIC ms; 0 = the call's timeout only */
  int (*cancelled)(void *ctx); /* polled while waiting; NULL = never */
  void *ctx;
} mbxH_upstream_wait;

/* A transport other than stdio, for URL upstreams (upstream_http.h's
   mbxH_upstream_http_transport): its state is opaque here. */
typedef struct mbxH_upstream_transport {
  /* Its state for u (cfg: u's, borrowed); NULL with msg on failure. */
  void *(*open)(mbxH_upstream *u, const mbxH_upstream_config *cfg, char *msg, size_t msg_size);
  void (*reset)(void *t);                       /* before an initialize: no session */
  void (*opened)(void *t, const char *version); /* after it: the negotiated version */
  /* One message; id: a request's (0: no reply awaited); init: initialize; cap: reply bytes. */
  int (*send)(void *t, const char *text, int64_t id, int init, size_t cap);
  void (*close)(void *t); /* ends it and frees t */
} mbxH_upstream_transport;

/* Takes cfg's contents (cfg is then empty). Starts nothing. url: the transport of a URL
   upstream (NULL: a URL upstream cannot start). NULL when out of memory. */
mbxH_upstream *mbxH_upstream_new(mbxH_upstream_config *cfg, const mbxH_upstream_transport *url);
/* changed(ctx) is called (on the upstream's reader thread, no lock held) when it says its tool
   list changed. Set before mbxH_upstream_start. */
void mbxH_upstream_on_change(mbxH_upstream *u, void (*changed)(void *ctx), void *ctx);
/* Starts the process, does the handshake and lists its tools. 0, or -1 with msg naming the
   upstream and what went wrong (does not start, bad handshake, no answer in time). */
int mbxH_upstream_start(mbxH_upstream *u, char *msg, size_t msg_size);
const mbxH_upstream_config *mbxH_upstream_config_of(const mbxH_upstream *u);
/* The allowed tools (their tools/list entries), as a new reference to an array. With refresh
   (a call thread), listed again first when the upstream said they changed and a relist has not
   yet run, the process started again first when it exited and its backoff is over; without
   (the server's message loop), the list as it is, never waiting. NULL when out of memory. */
json_t *mbxH_upstream_tools(mbxH_upstream *u, int refresh);
/* tools/call name(args): 0 with *result (the CallToolResult object, a new reference), or -1
   with msg (the upstream exited, timed out, was cancelled, the reply is too large...). */
int mbxH_upstream_call(mbxH_upstream *u, const char *tool, const json_t *args,
                       const mbxH_upstream_wait *w, json_t **result, char *msg, size_t msg_size);
/* Starts the end of the process without waiting (its stdin closed, SIGTERM to its group), so
   that many upstreams stop at once before each is freed. */
void mbxH_upstream_stop_soon(mbxH_upstream *u);
/* Ends the process (its stdin closed, then SIGTERM, then SIGKILL a second later to its
   process group) and frees everything. NULL is a no-op. */
void mbxH_upstream_free(mbxH_upstream *u);

/* The transport seam: what a transport (the stdio reader in upstream.c, upstream_http.c)
   hands the one request/response bookkeeping. */
/* One JSON-RPC message from the upstream: a response, a request to us, a notification. */
void mbxH_upstream_deliver(mbxH_upstream *u, const char *text, size_t len);
/* 1 while a request with this id is still awaited (else its transfer may be dropped). */
int mbxH_upstream_awaits(mbxH_upstream *u, int64_t id);
/* The request id fails with why. MBXH_UPSTREAM_RETRY: it was not taken (its session had
   expired): the call sends it once more, in a new session; MBXH_UPSTREAM_LOST: the current
   session is gone, the next call starts a new one at once. */
#define MBXH_UPSTREAM_RETRY 1
#define MBXH_UPSTREAM_LOST 2
void mbxH_upstream_fail(mbxH_upstream *u, int64_t id, const char *why, int flags);

#endif
