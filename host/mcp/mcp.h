/* host/mcp/mcp.h -- `moonbox mcp`: a Model Context Protocol server on stdin/stdout (docs/mcp.md).
**
** Three files, one job each, each depending only on the ones below it:
**   server.c   the JSON-RPC side: line framing, the handshake, dispatch, the one writer of
**              stdout, the table of calls in flight (cancel, progress) and their threads
**   tools.c    the tools (tools.h): their schemas, checking a call's arguments, the per-call
**              policy, running the code and shaping the result; what they need of the server
**              comes in a context (mbxH_mcp_tools, mbxH_mcp_tool_call), never its internals
**   session.c  the session table (session.h): fixed size, idle expiry; no locking of its own
** The CLI only: nothing here is part of libmoonbox. jansson reads and writes the protocol; the
** guest's values reach the client as the library's result JSON, spliced in untouched.
*/
#ifndef MBX_HOST_MCP_H
#define MBX_HOST_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "host/mcp/tools.h"
#include "moonbox.h"

#define MBXH_MCP_PROTOCOL "2025-11-25"
/* One message (one line) at most: room for a 16 MiB source plus inline files. */
#define MBXH_MCP_MAX_LINE ((size_t)64 << 20)
/* tools/call requests running at once; one more gets a "server busy" tool error. */
#define MBXH_MCP_MAX_CALLS 16
/* A run with a progressToken reports every this many ms once it has run that long. */
#define MBXH_MCP_PROGRESS_MS 1000

/* JSON-RPC 2.0 error codes. */
#define MBXH_RPC_PARSE_ERROR (-32700)
#define MBXH_RPC_INVALID_REQUEST (-32600)
#define MBXH_RPC_METHOD_NOT_FOUND (-32601)
#define MBXH_RPC_INVALID_PARAMS (-32602)
#define MBXH_RPC_INTERNAL_ERROR (-32603)

/* ---- the server (server.c) ---- */

typedef struct mbxH_mcp_server mbxH_mcp_server;
typedef struct mbxH_mcp_http_config mbxH_mcp_http_config; /* http.h */

/* Where the one reply to a message goes: send(ctx, json, len) is called exactly once per
   message handled, json NULL when the message has no reply (a notification, a response, a
   cancelled call). It may be called on the handling thread or, for tools/call, later on a
   call thread. stdio writes the line; HTTP answers the POST. */
typedef struct mbxH_mcp_reply {
  void (*send)(void *ctx, const char *json, size_t len);
  void *ctx;
} mbxH_mcp_reply;

/* One client: stdio has one, HTTP one per Mcp-Session-Id. Its state is touched only by the
   thread that hands it messages. */
typedef struct mbxH_mcp_peer {
  uint64_t owner;      /* scopes request ids and session names; 0: stdio */
  int initialized;     /* its initialize was answered */
  int max_calls;       /* its tools/call requests in flight at once */
  size_t max_sessions; /* its session names open at once */
} mbxH_mcp_peer;

/* One tools/call in flight. */
typedef struct mbxH_mcp_call {
  struct mbxH_mcp_call *next;       /* the table of calls in flight */
  struct mbxH_mcp_call *queue_next; /* the queue of calls no worker has taken yet */
  mbxH_mcp_server *server;
  char *id;               /* the request id as compact JSON text */
  json_t *progress_token; /* NULL when the client sent none */
  uint64_t start_ms, next_progress_ms;
  int cancelled;        /* notifications/cancelled named it: no response */
  mbx_sandbox *running; /* the sandbox it runs in, for the cancel (under the lock) */
  mbxH_mcp_run *run;    /* the checked arguments */
  uint64_t owner;       /* the client (mbxH_mcp_peer.owner) */
  size_t max_sessions;  /* its cap on session names */
  mbxH_mcp_reply reply; /* where the response goes */
} mbxH_mcp_call;

struct mbxH_mcp_server {
  pthread_mutex_t lock;     /* calls, sessions, counters */
  pthread_cond_t changed;   /* a call ended, a worker left; the monitor's tick */
  pthread_cond_t work;      /* a call was queued, or the server stops */
  pthread_mutex_t out_lock; /* the one writer of out_fd */
  int out_fd;               /* -1: no stream for notifications (HTTP answers with JSON) */
  int out_broken;           /* a write failed (the client went away) */
  mbx_runtime *runtime;
  const mbx_policy *policy;               /* the server's: caps every call; never modified */
  mbxH_mcp_tools tools;                   /* what the tools use of the above (set by init) */
  char *tools_json;                       /* the tools/list result, built once */
  mbxH_mcp_call *calls;                   /* in flight, by request id */
  mbxH_mcp_call *queue_head, *queue_tail; /* calls no worker has taken yet */
  int queued;                             /* how many */
  int threads;                            /* calls in progress (queued or running) */
  int workers, idle_workers; /* the call threads: started on demand, kept for the next call */
  mbxH_mcp_peer stdio;       /* the client of mbxH_mcp_handle_line */
  int stopping, monitor_started;
  int isolated;          /* mbxH_mcp_server_isolate: the sandboxes live in worker processes */
  uint64_t hibernate_ms; /* --hibernate-after (0: never); the monitor hibernates idle sessions */
  uint64_t hibernations; /* how many times a session was hibernated (the exit line says) */
  pthread_t monitor;
  mbxH_mcp_sessions sessions;
};

/* The moonbox mcp command: serves stdin/stdout until stdin ends (or, with http, that
   listener until SIGINT/SIGTERM: http.c), under policy, every call's
   sandbox in a jailed worker process when isolate is set (MBX_CAP_ISOLATE), its programs as
   uids of [exec_uid_first, + exec_uid_count) when the count is not 0 (exec.uids), with the
   upstreams of code (code mode; NULL or none: without), which it starts and the caller frees
   after it returns, its sessions idle for hibernate_ms hibernated (0: never; only without
   isolate). Exit code. */
int mbxH_mcp_serve(const mbx_policy *policy, int isolate, uint32_t exec_uid_first,
                   uint32_t exec_uid_count, mbxH_code_mode *code, const mbxH_mcp_http_config *http,
                   uint64_t hibernate_ms);

/* The pieces of it, for tests: init (0, or -1 with msg), one message line, and the end (waits
   for the calls in flight, frees the sessions). Responses go to out_fd. */
int mbxH_mcp_server_init(mbxH_mcp_server *s, const mbx_policy *policy, int out_fd, char *msg,
                         size_t msg_size);
void mbxH_mcp_handle_line(mbxH_mcp_server *s, const char *line, size_t len);
void mbxH_mcp_server_finish(mbxH_mcp_server *s);
/* After init, before any message: every sandbox of the server's runtime runs in a worker, the
   pool started now. 0, or -1 with msg (the worker cannot be found or started). */
int mbxH_mcp_server_isolate(mbxH_mcp_server *s, char *msg, size_t msg_size);
/* After init: sessions idle for idle_ms or more are hibernated (mbx_sandbox_hibernate) by the
   monitor, within a tick more, and woken by their next call (0: never). 0, or -1 with msg for
   an isolated server (a worker process's sandbox cannot hibernate). */
int mbxH_mcp_server_hibernate(mbxH_mcp_server *s, uint64_t idle_ms, char *msg, size_t msg_size);

/* One message (JSON text) from peer: its reply (or NULL) goes to reply, exactly once, now or,
   for tools/call, from a call thread. The one dispatch of stdio and HTTP. */
void mbxH_mcp_handle_message(mbxH_mcp_server *s, mbxH_mcp_peer *peer, const mbxH_mcp_reply *reply,
                             const char *text, size_t len);
/* The client owner is gone (HTTP DELETE, expiry): its calls in flight are cancelled, its
   session names closed. */
void mbxH_mcp_peer_gone(mbxH_mcp_server *s, uint64_t owner);
/* 1 if version is a protocol version this server speaks (the MCP-Protocol-Version header). */
int mbxH_mcp_version_supported(const char *version);

/* Writes one message (compact JSON without a newline) as one line. Thread-safe. */
void mbxH_mcp_send(mbxH_mcp_server *s, const char *json, size_t len);
/* CLOCK_MONOTONIC in milliseconds. */
uint64_t mbxH_mcp_now_ms(void);

#endif /* MBX_HOST_MCP_H */
