/* host/mcp/tools.h -- the tools of `moonbox mcp` (run_lua, check_lua, reset_session,
   close_session): their list, the check of a call's arguments, the run. What they need of the
   server that calls them comes in a context: the runtime, the policy, the session table and
   its lock, the clock, and each call's cancel registration. */
#ifndef MBX_HOST_MCP_TOOLS_H
#define MBX_HOST_MCP_TOOLS_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "host/mcp/code_tools.h"
#include "host/mcp/session.h"
#include "moonbox.h"

/* Inline files per call. */
#define MBXH_MCP_MAX_FILES 256

/* A call's checked arguments (tools.c). */
typedef struct mbxH_mcp_run mbxH_mcp_run;

/* What the tools use of the server: set once before the first call, then only read. */
typedef struct mbxH_mcp_tools {
  mbx_runtime *runtime;        /* every call's sandbox is made in it */
  const mbx_policy *policy;    /* the server's: caps every call; never modified */
  pthread_mutex_t *lock;       /* guards *sessions */
  mbxH_mcp_sessions *sessions; /* the open sessions */
  uint64_t (*now_ms)(void);    /* the clock of the sessions' idle time */
  mbxH_code_mode *code;        /* the upstreams (code mode), or NULL */
} mbxH_mcp_tools;

/* One call as the tools see it. */
typedef struct mbxH_mcp_tool_call {
  const mbxH_mcp_tools *tools;
  const mbxH_mcp_run *run; /* from mbxH_mcp_tool_prepare */
  /* The cancel registration: the call is about to run in sb (or, with NULL, is done with
     it). Returns 0 when it was cancelled already (do not run), 1 otherwise. */
  int (*running)(void *server_call, mbx_sandbox *sb);
  void *server_call; /* the server's own record of the call, passed back to running */
  /* 1 once the client cancelled the call (polled while an upstream works for it). */
  int (*cancelled)(void *server_call);
  uint64_t owner;      /* the client: session names are its own (0: stdio) */
  size_t max_sessions; /* sessions the client may hold open at once */
} mbxH_mcp_tool_call;

/* The tools/list result as compact JSON (malloc'd), or NULL with msg. */
char *mbxH_mcp_tools_list(char *msg, size_t msg_size);
/* 1 if name is one of the tools (with code, also search_tools and the proxied tools). */
int mbxH_mcp_tool_known(const mbxH_mcp_tools *t, const char *name);
/*
** Checks a call's arguments against the tool's inputSchema and the server's policy. Returns
** the run, or NULL with *error (malloc'd) saying what is wrong: the tool result with isError
** that the 2025-11-25 spec asks for.
*/
mbxH_mcp_run *mbxH_mcp_tool_prepare(const mbxH_mcp_tools *t, const char *name, const json_t *args,
                                    char **error);
void mbxH_mcp_run_free(mbxH_mcp_run *run);
/* Runs the call on the calling thread (a call thread: big stack). Returns the CallToolResult
   as compact JSON (malloc'd), or NULL when the call was cancelled before it ran. */
char *mbxH_mcp_tool_execute(const mbxH_mcp_tool_call *call, size_t *len);
/* A CallToolResult with isError and one text block (malloc'd). */
char *mbxH_mcp_tool_error(const char *text);

/* docs/result.schema.json, compiled in by the build (host/mcp/embed.cmake). */
extern const char mbxH_result_schema[];

#endif
