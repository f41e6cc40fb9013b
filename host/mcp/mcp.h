/* host/mcp/mcp.h -- `moonbox mcp`: a Model Context Protocol server on stdin/stdout (docs/mcp.md).
**
** Three files, one job each:
**   mcp_server.c   the JSON-RPC side: line framing, the handshake, dispatch, the one writer of
**                  stdout, the table of calls in flight (cancel, progress) and their threads
**   mcp_tools.c    the tools: their schemas, checking a call's arguments, the per-call policy,
**                  running the code and shaping the result
**   mcp_session.c  the session table (fixed size, idle expiry); no locking of its own
** The CLI only: nothing here is part of libmoonbox. jansson reads and writes the protocol; the
** guest's values reach the client as the library's result JSON, spliced in untouched.
*/
#ifndef MBX_HOST_MCP_H
#define MBX_HOST_MCP_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "moonbox.h"

#define MBXH_MCP_PROTOCOL "2025-11-25"
/* One message (one line) at most: room for a 16 MiB source plus inline files. */
#define MBXH_MCP_MAX_LINE ((size_t)64 << 20)
/* tools/call requests running at once; one more gets a "server busy" tool error. */
#define MBXH_MCP_MAX_CALLS 16
/* Open sessions at once, and how long an unused one lives. */
#define MBXH_MCP_MAX_SESSIONS 32
#define MBXH_MCP_SESSION_IDLE_MS ((uint64_t)10 * 60 * 1000)
#define MBXH_MCP_SESSION_ID_MAX 64
/* A run with a progressToken reports every this many ms once it has run that long. */
#define MBXH_MCP_PROGRESS_MS 1000
/* Inline files per call. */
#define MBXH_MCP_MAX_FILES 256

/* JSON-RPC 2.0 error codes. */
#define MBXH_RPC_PARSE_ERROR (-32700)
#define MBXH_RPC_INVALID_REQUEST (-32600)
#define MBXH_RPC_METHOD_NOT_FOUND (-32601)
#define MBXH_RPC_INVALID_PARAMS (-32602)
#define MBXH_RPC_INTERNAL_ERROR (-32603)

/* ---- sessions (mcp_session.c); the caller holds the server lock ---- */

typedef struct mbxH_mcp_session {
  char id[MBXH_MCP_SESSION_ID_MAX + 1]; /* "" = a free slot */
  mbx_sandbox *sandbox;                 /* NULL while the opening call creates it */
  int busy;                             /* a call runs in it (or resets it) */
  uint64_t last_used_ms;
} mbxH_mcp_session;

typedef struct mbxH_mcp_sessions {
  mbxH_mcp_session slot[MBXH_MCP_MAX_SESSIONS];
} mbxH_mcp_sessions;

enum {
  MBXH_SESSION_FOUND = 0,
  MBXH_SESSION_CREATED = 1,
  MBXH_SESSION_BUSY = -1,
  MBXH_SESSION_FULL = -2
};

/* 1 if id (len bytes) is 1..64 of [A-Za-z0-9_.-], else 0. */
int mbxH_mcp_session_id_ok(const char *id, size_t len);
/* The session named id, or NULL. */
mbxH_mcp_session *mbxH_mcp_session_find(mbxH_mcp_sessions *t, const char *id);
/* Marks the session id busy, taking a free slot when there is none (sandbox NULL: the caller
   creates it). MBXH_SESSION_FOUND / _CREATED with *out set, _BUSY, or _FULL. */
int mbxH_mcp_session_acquire(mbxH_mcp_sessions *t, const char *id, uint64_t now_ms,
                             mbxH_mcp_session **out);
/* The call is done with it. */
void mbxH_mcp_session_release(mbxH_mcp_session *s, uint64_t now_ms);
/* Frees the slot; returns its sandbox, which the caller frees outside the lock. */
mbx_sandbox *mbxH_mcp_session_drop(mbxH_mcp_session *s);
/* Drops the sessions idle for more than idle_ms (never a busy one): their sandboxes go to out
   (at most max); returns how many. */
size_t mbxH_mcp_session_expire(mbxH_mcp_sessions *t, uint64_t now_ms, uint64_t idle_ms,
                               mbx_sandbox **out, size_t max);
size_t mbxH_mcp_session_count(const mbxH_mcp_sessions *t);

/* ---- the server (mcp_server.c) ---- */

typedef struct mbxH_mcp_run mbxH_mcp_run;
typedef struct mbxH_mcp_server mbxH_mcp_server;

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
} mbxH_mcp_call;

struct mbxH_mcp_server {
  pthread_mutex_t lock;     /* calls, sessions, counters */
  pthread_cond_t changed;   /* a call ended, a worker left; the monitor's tick */
  pthread_cond_t work;      /* a call was queued, or the server stops */
  pthread_mutex_t out_lock; /* the one writer of out_fd */
  int out_fd;
  int out_broken; /* a write failed (the client went away) */
  mbx_runtime *runtime;
  const mbx_policy *policy;               /* the server's: caps every call; never modified */
  char *tools_json;                       /* the tools/list result, built once */
  mbxH_mcp_call *calls;                   /* in flight, by request id */
  mbxH_mcp_call *queue_head, *queue_tail; /* calls no worker has taken yet */
  int queued;                             /* how many */
  int threads;                            /* calls in progress (queued or running) */
  int workers, idle_workers; /* the call threads: started on demand, kept for the next call */
  int initialized, stopping, monitor_started;
  pthread_t monitor;
  mbxH_mcp_sessions sessions;
};

/* The moonbox mcp command: serves stdin/stdout until stdin ends, under policy, every call's
   sandbox in a jailed worker process when isolate is set (MBX_CAP_ISOLATE). Exit code. */
int mbxH_mcp_serve(const mbx_policy *policy, int isolate);

/* The pieces of it, for tests: init (0, or -1 with msg), one message line, and the end (waits
   for the calls in flight, frees the sessions). Responses go to out_fd. */
int mbxH_mcp_server_init(mbxH_mcp_server *s, const mbx_policy *policy, int out_fd, char *msg,
                         size_t msg_size);
void mbxH_mcp_handle_line(mbxH_mcp_server *s, const char *line, size_t len);
void mbxH_mcp_server_finish(mbxH_mcp_server *s);
/* After init, before any message: every sandbox of the server's runtime runs in a worker, the
   pool started now. 0, or -1 with msg (the worker cannot be found or started). */
int mbxH_mcp_server_isolate(mbxH_mcp_server *s, char *msg, size_t msg_size);

/* Writes one message (compact JSON without a newline) as one line. Thread-safe. */
void mbxH_mcp_send(mbxH_mcp_server *s, const char *json, size_t len);
/* CLOCK_MONOTONIC in milliseconds. */
uint64_t mbxH_mcp_now_ms(void);
/* The call is about to run in sb (or, with NULL, is done with it). Returns 0 when it was
   cancelled already (do not run), 1 otherwise. */
int mbxH_mcp_call_running(mbxH_mcp_call *call, mbx_sandbox *sb);

/* ---- the tools (mcp_tools.c) ---- */

/* The tools/list result as compact JSON (malloc'd), or NULL with msg. */
char *mbxH_mcp_tools_list(char *msg, size_t msg_size);
/* 1 if name is one of the tools. */
int mbxH_mcp_tool_known(const char *name);
/*
** Checks a call's arguments against the tool's inputSchema and the server's policy. Returns
** the run, or NULL with *error (malloc'd) saying what is wrong: the tool result with isError
** that the 2025-11-25 spec asks for.
*/
mbxH_mcp_run *mbxH_mcp_tool_prepare(const mbxH_mcp_server *s, const char *name, const json_t *args,
                                    char **error);
void mbxH_mcp_run_free(mbxH_mcp_run *run);
/* Runs the call on the calling thread (a call thread: big stack). Returns the CallToolResult
   as compact JSON (malloc'd), or NULL when the call was cancelled before it ran. */
char *mbxH_mcp_tool_execute(mbxH_mcp_call *call, size_t *len);
/* A CallToolResult with isError and one text block (malloc'd). */
char *mbxH_mcp_tool_error(const char *text);

/* docs/result.schema.json, compiled in by the build (host/mcp/embed.cmake). */
extern const char mbxH_result_schema[];

#endif /* MBX_HOST_MCP_H */
