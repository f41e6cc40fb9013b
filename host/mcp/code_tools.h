/* host/mcp/code_tools.h -- code mode (docs/code-mode.md): upstream MCP servers' tools as
   tools.NAME.TOOL(args) inside the sandbox, the search_tools meta-tool, and the proxy.
**
**   code_schema.c  pure functions over JSON: an argument table checked and coerced by a tool's
**                  inputSchema, the Lua call signature shown by search_tools, a CallToolResult
**                  made into the value (or the error) the guest gets
**   code_tools.c   the binding: the upstreams, the host functions granted to run_lua's
**                  sandboxes, search_tools, the proxied tools, the per-run context
*/
#ifndef MBX_HOST_MCP_CODE_TOOLS_H
#define MBX_HOST_MCP_CODE_TOOLS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "host/mcp/upstream.h"
#include "moonbox.h"

/* Time one run may spend waiting on upstreams, over all its calls (the guest's own timeout
   does not count it: the deadline moves on by host time). */
#define MBXH_CODE_RUN_UPSTREAM_MS ((uint64_t)120000)
/* search_tools: results by default and at most. */
#define MBXH_CODE_SEARCH_LIMIT 10
#define MBXH_CODE_SEARCH_MAX 50
/* search_tools: bytes of a query, and the words of it that count. */
#define MBXH_CODE_QUERY_MAX 1024
#define MBXH_CODE_QUERY_WORDS 32

/* ---- code_schema.c ---- */

/* value checked against schema (root is the document $ref resolves in; NULL = schema) and
   coerced as a Lua table's JSON needs: an empty table ({}) is [] where an array is expected,
   a float with an integral value is an integer where an integer is. A new value, or NULL with
   msg naming the place ("entities[1].name: expected a string, got a number"). */
json_t *mbxH_code_coerce(const json_t *root, const json_t *schema, const json_t *value, char *msg,
                         size_t msg_size);
/* The Lua call a model writes, from the inputSchema: tools.mem.create_entities{entities =
   {{name = "...", entityType = "...", observations = {"..."}}}}. malloc'd; NULL when out of
   memory. */
char *mbxH_code_signature(const char *upstream, const char *tool, const json_t *schema);
/* A CallToolResult as the guest gets it: 0 with *value (JSON text, malloc'd: the
   structuredContent, else the text content, decoded when it is JSON), 1 with *error
   (malloc'd: the upstream's message, for isError), -1 when out of memory. */
int mbxH_code_result(const json_t *result, char **value, char **error);
/* 1 if s is a Lua identifier (and not a keyword). */
int mbxH_code_is_identifier(const char *s, size_t n);

/* ---- code_tools.c ---- */

typedef struct mbxH_code_mode mbxH_code_mode;

/* The upstreams of a policy file's "upstreams" (policy_file may be NULL), then of the
   --upstream NAME=COMMAND and --allow-tool NAME.TOOL options (args, is_allow[i] saying which),
   in order: 0 with *out (NULL when there are none), or -1 with msg. Starts nothing. */
int mbxH_code_configure(const char *policy_file, const char *const *args, const int *is_allow,
                        int arg_count, int code_only, mbxH_code_mode **out, char *msg,
                        size_t msg_size);
/* Takes the configs' contents; code_only hides the upstream tools from tools/list. NULL when
   out of memory. */
mbxH_code_mode *mbxH_code_new(mbxH_upstream_config *list, size_t count, int code_only);
/* Without code_only, the proxied tools are listed: changed(ctx) is called (from an upstream's
   reader thread) when an upstream's list changed, so the client can be told. Before start. */
void mbxH_code_on_change(mbxH_code_mode *cm, void (*changed)(void *ctx), void *ctx);
/* 1 when tools/list holds the upstreams' tools (there are some, and no --code-mode). */
int mbxH_code_proxies(const mbxH_code_mode *cm);
/* Starts every upstream: 0, or -1 with msg naming the one that failed. */
int mbxH_code_start(mbxH_code_mode *cm, char *msg, size_t msg_size);
/* Ends the upstreams; NULL is a no-op. */
void mbxH_code_free(mbxH_code_mode *cm);
/* 1 when there are upstreams. NULL: 0. */
int mbxH_code_active(const mbxH_code_mode *cm);

/* Grants tools.NAME.TOOL for every allowed tool to p: 0, or -1 with msg. */
int mbxH_code_grant(mbxH_code_mode *cm, mbx_policy *p, char *msg, size_t msg_size);
/* Appends search_tools and (without code_only) the proxied upstream tools to tools. */
int mbxH_code_list(mbxH_code_mode *cm, json_t *tools);
/* 1 if name is search_tools or a proxied tool. */
int mbxH_code_tool_known(mbxH_code_mode *cm, const char *name);
/* Calls search_tools or a proxied tool: the CallToolResult as compact JSON (malloc'd), NULL
   when out of memory. cancelled(ctx) is polled while an upstream works. */
char *mbxH_code_tool_call(mbxH_code_mode *cm, const char *name, const json_t *args,
                          int (*cancelled)(void *ctx), void *ctx);

/* What the run on this thread may use of the upstreams: its cancel, its time left, the calls
   it made. Set around mbx_run/mbx_resume by the thread that runs them (host functions are
   called on it, in worker mode too). */
typedef struct mbxH_code_run {
  int (*cancelled)(void *ctx);
  void *ctx;
  uint64_t waited_ms; /* time spent waiting on upstreams so far */
  json_t *calls;      /* [{tool, calls, failed, readOnlyHint, idempotentHint}]: per tool, what the
                    run sent upstream */
} mbxH_code_run;
void mbxH_code_run_begin(mbxH_code_run *run);
void mbxH_code_run_end(void);

#endif
