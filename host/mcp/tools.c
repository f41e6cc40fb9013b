/* host/mcp/tools.c -- the tools of `moonbox mcp`: run_lua, check_lua, reset_session,
   close_session. Their schemas, the check of a call's arguments (describe, validate), then the run (act). The
   server's policy caps every call: a client may lower limits, never raise them, and adds
   nothing but read-only inline files. */
#include "host/mcp/tools.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/units.h"

enum { TOOL_RUN = 1, TOOL_CHECK, TOOL_RESET, TOOL_CLOSE, TOOL_UPSTREAM };

/* The limits a client may lower, by their names in run_lua's "limits" (docs/vocabulary.md),
   the kind of value each takes (an integer, or a string such as "64M", "1e9" or "2s"), and an
   older spelling still read. */
typedef int (*value_parser)(const char *option, const char *text, uint64_t *out, char *msg,
                            size_t msg_size);
static const struct {
  const char *name;
  mbx_limit which;
  const char *flag; /* the server option that sets the cap */
  value_parser parse;
  const char *alias; /* an older name (integer milliseconds), or NULL */
} client_limits[] = {
    {"memory", MBX_LIMIT_MEMORY, "--memory", mbxU_parse_size, NULL},
    {"instructions", MBX_LIMIT_INSTRUCTIONS, "--instructions", mbxU_parse_count, NULL},
    {"timeout", MBX_LIMIT_TIME_MS, "--timeout", mbxU_parse_duration, "timeout_ms"},
    {"output", MBX_LIMIT_OUTPUT, "--output-limit", mbxU_parse_size, NULL},
};
#define CLIENT_LIMITS (sizeof client_limits / sizeof client_limits[0])

typedef struct inline_file {
  char *path;
  char *data;
  size_t len;
} inline_file;

struct mbxH_mcp_run {
  int tool;
  char *code;
  size_t code_len;
  char *inputs; /* compact JSON of the inputs object, or NULL */
  size_t inputs_len;
  inline_file files[MBXH_MCP_MAX_FILES];
  size_t file_count;
  int limit_set[CLIENT_LIMITS];
  uint64_t limit[CLIENT_LIMITS];
  char session[MBXH_MCP_SESSION_ID_MAX + 1]; /* "" = none */
  json_t *input_names; /* check_lua: the inputs' keys, which the code may read; or NULL */
  json_t *modules;     /* run_lua: {name: source} registered modules, or NULL */
  char *stdin_data;    /* run_lua: what io.stdin reads (stdin given), or NULL */
  size_t stdin_len;
  char *upstream_tool;   /* search_tools or a proxied tool (code mode): its name */
  json_t *upstream_args; /* ... and its arguments, or NULL */
};

/* ---------------------------------------------------------------------------------------- */
/* Schemas                                                                                   */

static const char run_input_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"code\"],"
    "\"properties\":{"
    "\"code\":{\"type\":\"string\",\"description\":\"Lua 5.4 source. Its return values come "
    "back as value; print() goes to stdout. No network, no host files but the server's mounts "
    "and the files given here; /tmp is memory.\"},"
    "\"inputs\":{\"type\":\"object\",\"description\":\"Globals set before the code runs: each "
    "key (a Lua identifier) becomes a global with the JSON value (tables for objects and "
    "arrays; {\\\"$bytes\\\": base64} for raw bytes).\"},"
    "\"files\":{\"type\":\"object\",\"description\":\"Read-only files in the sandbox's view, by "
    "absolute virtual path: {\\\"/input/data.csv\\\": \\\"a,b\\\\n1,2\\\\n\\\"}. A value is the "
    "text, or {\\\"$bytes\\\": base64} for binary contents.\","
    "\"propertyNames\":{\"pattern\":\"^/\"},"
    "\"additionalProperties\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\","
    "\"required\":[\"$bytes\"],\"additionalProperties\":false,"
    "\"properties\":{\"$bytes\":{\"type\":\"string\"}}}]}},"
    "\"stdin\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"object\",\"required\":[\"$bytes\"],"
    "\"additionalProperties\":false,\"properties\":{\"$bytes\":{\"type\":\"string\"}}}],"
    "\"description\":\"What io.read and io.stdin read: the text, or {\\\"$bytes\\\": base64}. "
    "In a session it replaces what earlier calls gave, from its first byte.\"},"
    "\"modules\":{\"type\":\"object\",\"description\":\"Lua modules by name, for require: "
    "{\\\"mylib.util\\\": \\\"return {twice = function(x) return 2 * x end}\\\"}. Found before "
    "package.path's files.\",\"additionalProperties\":{\"type\":\"string\"}},"
    "\"limits\":{\"type\":\"object\",\"additionalProperties\":false,\"description\":\"Lower "
    "budgets for this call (or the session it opens); the server's are the caps and cannot be "
    "raised.\",\"properties\":{"
    "\"memory\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":262144},{\"type\":\"string\"}],"
    "\"description\":\"live heap: bytes, or a size such as \\\"64M\\\"\"},"
    "\"instructions\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":1},{\"type\":\"string\"}],"
    "\"description\":\"VM instructions: a count such as 1000000 or \\\"1e9\\\"\"},"
    "\"timeout\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":1},{\"type\":\"string\"}],"
    "\"description\":\"wall time: milliseconds, or a duration such as \\\"2s\\\" or "
    "\\\"500ms\\\"\"},"
    "\"timeout_ms\":{\"type\":\"integer\",\"minimum\":1,\"description\":\"the older name of "
    "timeout, in milliseconds\"},"
    "\"output\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":1},{\"type\":\"string\"}],"
    "\"description\":\"stdout+stderr: bytes, or a size such as \\\"1M\\\"\"}}},"
    "\"session\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_.-]{1,64}$\",\"description\":"
    "\"Keep globals and /tmp between calls under this id (opened by its first call). Each call "
    "is checkpointed first: one that ends on a limit or a cancel rewinds the session to before "
    "it. limits and files apply when the session is opened.\"}}}";

static const char check_input_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"code\"],"
    "\"properties\":{\"code\":{\"type\":\"string\",\"description\":\"Lua 5.4 source to "
    "check; nothing runs.\"},\"inputs\":{\"type\":\"object\",\"description\":\"The inputs "
    "run_lua will be given: their names are globals the code may read.\"}}}";

/* What mbx_check answers (include/moonbox.h), keys sorted. */
static const char check_output_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,"
    "\"required\":[\"globals\",\"ok\",\"syntax_error\"],\"$defs\":{\"text\":{\"anyOf\":["
    "{\"type\":\"string\"},{\"type\":\"object\",\"required\":[\"$bytes\"],"
    "\"additionalProperties\":false,\"properties\":{\"$bytes\":{\"type\":\"string\"}}}]}},"
    "\"properties\":{\"ok\":{\"type\":\"boolean\",\"description\":\"no syntax error and "
    "no global the policy does not provide\"},"
    "\"syntax_error\":{\"anyOf\":[{\"type\":\"null\"},{\"type\":\"object\","
    "\"additionalProperties\":false,\"required\":[\"line\",\"message\"],\"properties\":{"
    "\"line\":{\"type\":\"integer\",\"minimum\":0},\"message\":{\"$ref\":\"#/$defs/text\"}}}]},"
    "\"globals\":{\"type\":\"array\",\"description\":\"globals the code reads or writes "
    "that the policy does not provide, by line\",\"items\":{\"type\":\"object\","
    "\"additionalProperties\":false,\"required\":[\"access\",\"line\",\"name\"],"
    "\"properties\":{\"access\":{\"enum\":[\"read\",\"write\"]},\"line\":{\"type\":"
    "\"integer\",\"minimum\":0},\"name\":{\"$ref\":\"#/$defs/text\"}}}}}}";

static const char session_input_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"session\"],"
    "\"properties\":{\"session\":{\"type\":\"string\",\"pattern\":\"^[A-Za-z0-9_.-]{1,64}$\"}}}";

static const char session_output_schema[] =
    "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"session\",\"status\"],"
    "\"properties\":{\"session\":{\"type\":\"string\"},"
    "\"status\":{\"enum\":[\"reset\",\"closed\"]}}}";

static json_t *tool_entry(const char *name, const char *title, const char *description,
                          const char *input, const char *output, int read_only) {
  json_t *t = json_object();
  json_t *in = json_loads(input, 0, NULL), *out = json_loads(output, 0, NULL);
  json_t *ann = json_object();
  if (t == NULL || in == NULL || out == NULL || ann == NULL) {
    json_decref(t), json_decref(in), json_decref(out), json_decref(ann);
    return NULL;
  }
  json_object_set_new(t, "name", json_string(name));
  json_object_set_new(t, "title", json_string(title));
  json_object_set_new(t, "description", json_string(description));
  json_object_set_new(t, "inputSchema", in);
  json_object_set_new(t, "outputSchema", out);
  json_object_set_new(ann, "readOnlyHint", json_boolean(read_only));
  json_object_set_new(ann, "openWorldHint", json_false());
  json_object_set_new(t, "annotations", ann);
  return t;
}

char *mbxH_mcp_tools_list(char *msg, size_t msg_size) {
  json_error_t jerr;
  json_t *schema = json_loads(mbxH_result_schema, 0, &jerr);
  if (schema == NULL) {
    snprintf(msg, msg_size, "the built-in result schema does not parse: %s", jerr.text);
    return NULL;
  }
  char *schema_text = json_dumps(schema, JSON_COMPACT);
  json_decref(schema);
  json_t *tools = json_array();
  json_t *run = schema_text
                    ? tool_entry("run_lua", "Run Lua in a sandbox",
                                 "Run Lua 5.4 code in a sandbox with budgets (memory, "
                                 "instructions, time, output) and no access to the host but "
                                 "what the server grants. Returns the result contract "
                                 "(docs/result.schema.json): status, value, stdout, stderr, "
                                 "error, usage. isError is true when status is not ok.",
                                 run_input_schema, schema_text, 0)
                    : NULL;
  free(schema_text);
  json_t *check = tool_entry("check_lua", "Check Lua without running it",
                             "Compile Lua 5.4 code (nothing runs) and list its syntax error and "
                             "the global names it reads or writes that this server's sandbox "
                             "does not provide, with line numbers, from the compiled bytecode. "
                             "Early feedback before run_lua.",
                             check_input_schema, check_output_schema, 1);
  json_t *reset = tool_entry("reset_session", "Reset a session",
                             "Put a session back to a fresh state (globals and /tmp "
                             "cleared); it stays open.",
                             session_input_schema, session_output_schema, 0);
  json_t *close =
      tool_entry("close_session", "Close a session", "End a session and free its sandbox.",
                 session_input_schema, session_output_schema, 0);
  json_t *result = json_object();
  char *text = NULL;
  if (tools && run && check && reset && close && result) {
    json_array_append_new(tools, run);
    json_array_append_new(tools, check);
    json_array_append_new(tools, reset);
    json_array_append_new(tools, close);
    json_object_set_new(result, "tools", tools);
    text = json_dumps(result, JSON_COMPACT);
  } else {
    json_decref(tools), json_decref(run), json_decref(check), json_decref(reset);
    json_decref(close);
  }
  json_decref(result);
  if (text == NULL) snprintf(msg, msg_size, "out of memory building the tool list");
  return text;
}

static int own_tool(const char *name) {
  return strcmp(name, "run_lua") == 0 || strcmp(name, "check_lua") == 0 ||
         strcmp(name, "reset_session") == 0 || strcmp(name, "close_session") == 0;
}

int mbxH_mcp_tool_known(const mbxH_mcp_tools *t, const char *name) {
  return own_tool(name) || mbxH_code_tool_known(t->code, name);
}

/* ---------------------------------------------------------------------------------------- */
/* Results                                                                                   */

/* {"content":[{"type":"text","text":TEXT}],"isError":B[,"structuredContent":JSON]} */
static char *tool_result(const char *text, size_t text_len, const char *structured,
                         size_t structured_len, int is_error) {
  json_t *s = json_stringn(text, text_len);
  char *esc = s ? json_dumps(s, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(s);
  if (esc == NULL) return NULL;
  static const char a[] = "{\"content\":[{\"type\":\"text\",\"text\":";
  static const char sc[] = ",\"structuredContent\":";
  size_t esc_len = strlen(esc);
  size_t total = sizeof a + esc_len + 32 + sizeof sc + structured_len + 2;
  char *out = malloc(total);
  if (out == NULL) {
    free(esc);
    return NULL;
  }
  int n = snprintf(out, total, "%s%s}],\"isError\":%s", a, esc, is_error ? "true" : "false");
  free(esc);
  size_t len = (size_t)n;
  if (structured != NULL) {
    memcpy(out + len, sc, sizeof sc - 1), len += sizeof sc - 1;
    memcpy(out + len, structured, structured_len), len += structured_len;
  }
  out[len++] = '}';
  out[len] = '\0';
  return out;
}

char *mbxH_mcp_tool_error(const char *text) {
  return tool_result(text, strlen(text), NULL, 0, 1);
}

static char *tool_errorf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *tool_errorf(const char *fmt, ...) {
  char text[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(text, sizeof text, fmt, ap);
  va_end(ap);
  /* The parts quoted are cut on UTF-8 boundaries; a cut by vsnprintf is trimmed here. */
  size_t len = strlen(text);
  size_t keep = len;
  while (keep > 0 && ((unsigned char)text[keep - 1] & 0x80)) {
    size_t start = keep - 1;
    while (start > 0 && ((unsigned char)text[start] & 0xC0) == 0x80)
      start--;
    unsigned char lead = (unsigned char)text[start];
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    if (keep - start >= need) break;
    keep = start;
  }
  return tool_result(text, keep, NULL, 0, 1);
}

/* A client string quoted in a message: at most 60 bytes, cut on a character boundary. */
static const char *quote(const char *s, size_t len, char *buf, size_t size) {
  size_t n = len < size - 4 ? len : size - 4;
  while (n < len && n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
    n--;
  memcpy(buf, s, n);
  strcpy(buf + n, n < len ? "..." : "");
  return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Arguments                                                                                 */

void mbxH_mcp_run_free(mbxH_mcp_run *run) {
  if (run == NULL) return;
  free(run->code);
  free(run->inputs);
  free(run->stdin_data);
  free(run->upstream_tool);
  json_decref(run->upstream_args);
  json_decref(run->input_names);
  json_decref(run->modules);
  for (size_t i = 0; i < run->file_count; i++) {
    free(run->files[i].path);
    free(run->files[i].data);
  }
  free(run);
}

/* Contents given as text or {"$bytes": base64}: 0 with *data (malloc'd, NULL when out of
   memory) and *len, -1 for another shape, -2 for bad base64. */
static int contents_of(const json_t *v, char **data, size_t *len) {
  *data = NULL;
  *len = 0;
  if (json_is_string(v)) {
    *len = json_string_length(v);
    if ((*data = malloc(*len + 1)) != NULL) memcpy(*data, json_string_value(v), *len);
    return 0;
  }
  const json_t *b =
      json_is_object(v) && json_object_size(v) == 1 ? json_object_get(v, "$bytes") : NULL;
  if (!json_is_string(b)) return -1;
  size_t n = json_string_length(b);
  if ((*data = malloc(n / 4 * 3 + 3)) == NULL) return 0;
  *len = mbxU_base64_decode(json_string_value(b), n, (unsigned char *)*data);
  if (*len == (size_t)-1) {
    free(*data);
    *data = NULL;
    *len = 0;
    return -2;
  }
  return 0;
}

static int prepare_files(mbxH_mcp_run *run, const json_t *files, char **error) {
  const char *path;
  const json_t *v;
  char q[64];
  if (!json_is_object(files)) {
    *error = tool_errorf("files: expected an object of virtual path -> contents, e.g. "
                         "{\"/input/data.csv\": \"a,b\\n\"}");
    return -1;
  }
  if (json_object_size(files) > MBXH_MCP_MAX_FILES) {
    *error = tool_errorf("files: %zu files given; at most %d per call", json_object_size(files),
                         MBXH_MCP_MAX_FILES);
    return -1;
  }
  json_object_foreach((json_t *)files, path, v) {
    inline_file *f = &run->files[run->file_count];
    size_t plen = strlen(path);
    if (path[0] != '/') {
      *error = tool_errorf("files: '%s' is not an absolute virtual path (e.g. /input/data.csv)",
                           quote(path, plen, q, sizeof q));
      return -1;
    }
    int rc = contents_of(v, &f->data, &f->len);
    if (rc != 0) {
      *error = tool_errorf(rc == -2 ? "files['%s']: $bytes is not valid base64"
                                    : "files['%s']: expected the contents as a string or "
                                      "{\"$bytes\": base64}",
                           quote(path, plen, q, sizeof q));
      return -1;
    }
    f->path = strdup(path);
    if (f->data == NULL || f->path == NULL) {
      free(f->data), free(f->path);
      f->data = f->path = NULL;
      *error = NULL; /* out of memory */
      return -1;
    }
    run->file_count++;
  }
  return 0;
}

static int prepare_limits(const mbxH_mcp_tools *t, mbxH_mcp_run *run, const json_t *limits,
                          char **error) {
  const char *key;
  const json_t *v;
  char q[64];
  if (!json_is_object(limits)) {
    *error = tool_errorf("limits: expected an object such as {\"timeout\": \"500ms\"}");
    return -1;
  }
  json_object_foreach((json_t *)limits, key, v) {
    size_t i;
    int by_alias = 0;
    for (i = 0; i < CLIENT_LIMITS; i++) {
      if (strcmp(key, client_limits[i].name) == 0) break;
      if (client_limits[i].alias && strcmp(key, client_limits[i].alias) == 0) {
        by_alias = 1;
        break;
      }
    }
    if (i == CLIENT_LIMITS) {
      *error = tool_errorf("limits: unknown limit '%s' (the limits are memory, instructions, "
                           "timeout and output)",
                           quote(key, strlen(key), q, sizeof q));
      return -1;
    }
    if (run->limit_set[i]) {
      *error =
          tool_errorf("limits.%s: given twice (as %s and as %s); keep %s", client_limits[i].name,
                      client_limits[i].name, client_limits[i].alias, client_limits[i].name);
      return -1;
    }
    uint64_t want;
    char option[32], msg[256];
    snprintf(option, sizeof option, "limits.%s", key);
    if (json_is_integer(v) && json_integer_value(v) > 0) {
      want = (uint64_t)json_integer_value(v);
    } else if (json_is_string(v) && !by_alias) {
      if (client_limits[i].parse(option, json_string_value(v), &want, msg, sizeof msg) != 0) {
        *error = tool_errorf("%s", msg);
        return -1;
      }
      if (want == 0) {
        *error = tool_errorf("%s: 0 would remove the limit; a client may only lower it", option);
        return -1;
      }
    } else {
      *error = tool_errorf("%s: expected %s, got %s", option,
                           by_alias ? "a positive integer (milliseconds)"
                                    : "a positive integer or a string such as \"64M\", \"1e9\" "
                                      "or \"2s\"",
                           json_is_string(v)    ? "a string"
                           : json_is_integer(v) ? "an integer <= 0"
                           : json_is_null(v)    ? "null"
                           : json_is_boolean(v) ? "a boolean"
                           : json_is_real(v)    ? "a fraction"
                           : json_is_array(v)   ? "an array"
                                                : "an object");
      return -1;
    }
    uint64_t cap = mbx_policy_get_limit(t->policy, client_limits[i].which);
    /* 0 is "unlimited" for instructions and time: any value lowers it. */
    int unlimited = cap == 0 && (client_limits[i].which == MBX_LIMIT_INSTRUCTIONS ||
                                 client_limits[i].which == MBX_LIMIT_TIME_MS);
    if (!unlimited && want > cap) {
      *error = tool_errorf("limits.%s: %llu is above the server's cap of %llu (a client may "
                           "lower a limit, never raise it; the server sets it with %s or --policy)",
                           key, (unsigned long long)want, (unsigned long long)cap,
                           client_limits[i].flag);
      return -1;
    }
    run->limit_set[i] = 1;
    run->limit[i] = want;
  }
  return 0;
}

mbxH_mcp_run *mbxH_mcp_tool_prepare(const mbxH_mcp_tools *t, const char *name, const json_t *args,
                                    char **error) {
  static const char *const run_keys[] = {"code",    "inputs",  "files", "limits",
                                         "session", "modules", "stdin"};
  mbxH_mcp_run *run = calloc(1, sizeof *run);
  const char *key;
  const json_t *v;
  char q[64];
  *error = NULL;
  if (run == NULL) return NULL;
  if (!own_tool(name)) { /* code mode's: checked by the upstream, or by search_tools */
    run->tool = TOOL_UPSTREAM;
    run->upstream_tool = strdup(name);
    run->upstream_args = json_is_object(args) ? json_deep_copy(args) : NULL;
    if (run->upstream_tool == NULL || (json_is_object(args) && run->upstream_args == NULL)) {
      mbxH_mcp_run_free(run);
      return NULL;
    }
    return run;
  }
  run->tool = strcmp(name, "run_lua") == 0         ? TOOL_RUN
              : strcmp(name, "check_lua") == 0     ? TOOL_CHECK
              : strcmp(name, "reset_session") == 0 ? TOOL_RESET
                                                   : TOOL_CLOSE;
  json_t *empty = NULL;
  if (args == NULL || json_is_null(args)) args = empty = json_object();
  /* Unknown keys first: a misspelt "limit" must not silently run without it. */
  json_object_foreach((json_t *)args, key, v) {
    int known = 0;
    if (run->tool == TOOL_RUN) {
      for (size_t i = 0; i < sizeof run_keys / sizeof *run_keys; i++)
        if (strcmp(key, run_keys[i]) == 0) known = 1;
    } else if (run->tool == TOOL_CHECK) {
      known = strcmp(key, "code") == 0 || strcmp(key, "inputs") == 0;
    } else {
      known = strcmp(key, "session") == 0;
    }
    if (!known) {
      *error =
          tool_errorf("%s: unknown argument '%s' (%s)", name, quote(key, strlen(key), q, sizeof q),
                      run->tool == TOOL_RUN     ? "run_lua takes code, inputs, files, "
                                                  "modules, stdin, limits and session"
                      : run->tool == TOOL_CHECK ? "check_lua takes code and inputs"
                                                : "it takes session");
      goto fail;
    }
  }
  const json_t *session = json_object_get(args, "session");
  if (session != NULL) {
    if (!json_is_string(session) ||
        !mbxH_mcp_session_id_ok(json_string_value(session), json_string_length(session))) {
      *error = tool_errorf("session: expected 1 to %d characters of A-Z a-z 0-9 _ . - "
                           "(e.g. \"notebook-1\")",
                           MBXH_MCP_SESSION_ID_MAX);
      goto fail;
    }
    memcpy(run->session, json_string_value(session), json_string_length(session) + 1);
  } else if (run->tool == TOOL_RESET || run->tool == TOOL_CLOSE) {
    *error = tool_errorf("%s: the argument session is required (the id given to run_lua)", name);
    goto fail;
  }
  if (run->tool == TOOL_RESET || run->tool == TOOL_CLOSE) {
    json_decref(empty);
    return run;
  }
  const json_t *code = json_object_get(args, "code");
  if (!json_is_string(code)) {
    *error = tool_errorf("%s: the argument code (a string of Lua source) is required", name);
    goto fail;
  }
  run->code_len = json_string_length(code);
  run->code = malloc(run->code_len + 1);
  if (run->code == NULL) goto fail;
  memcpy(run->code, json_string_value(code), run->code_len + 1);
  const json_t *inputs = json_object_get(args, "inputs");
  if (run->tool == TOOL_CHECK) {
    if (inputs != NULL && !json_is_null(inputs)) {
      if (!json_is_object(inputs)) {
        *error = tool_errorf("inputs: expected the object run_lua will be given, e.g. "
                             "{\"items\": [1, 2, 3]}");
        goto fail;
      }
      run->input_names = json_deep_copy(inputs);
      if (run->input_names == NULL) goto fail;
    }
    json_decref(empty);
    return run;
  }
  if (inputs != NULL && !json_is_null(inputs)) {
    if (!json_is_object(inputs)) {
      *error = tool_errorf("inputs: expected an object whose keys become globals, e.g. "
                           "{\"items\": [1, 2, 3]}");
      goto fail;
    }
    /* Compact JSON for the library's codec, which checks the names and decodes the values. */
    run->inputs = json_dumps(inputs, JSON_COMPACT | JSON_ENCODE_ANY);
    if (run->inputs == NULL) goto fail;
    run->inputs_len = strlen(run->inputs);
  }
  const json_t *files = json_object_get(args, "files");
  if (files != NULL && prepare_files(run, files, error) != 0) goto fail;
  const json_t *modules = json_object_get(args, "modules");
  if (modules != NULL && !json_is_null(modules)) {
    const char *mname;
    const json_t *src;
    int ok = json_is_object(modules);
    json_object_foreach((json_t *)modules, mname, src) ok = ok && json_is_string(src);
    if (!ok) {
      *error = tool_errorf("modules: expected {name: Lua source}, e.g. {\"mylib.util\": "
                           "\"return {twice = function(x) return 2 * x end}\"}");
      goto fail;
    }
    if ((run->modules = json_deep_copy(modules)) == NULL) goto fail;
  }
  const json_t *in = json_object_get(args, "stdin");
  if (in != NULL && !json_is_null(in)) {
    int rc = contents_of(in, &run->stdin_data, &run->stdin_len);
    if (rc != 0) {
      *error = tool_errorf(rc == -2 ? "stdin: $bytes is not valid base64"
                                    : "stdin: expected the text io.stdin reads, or "
                                      "{\"$bytes\": base64}");
      goto fail;
    }
    if (run->stdin_data == NULL) goto fail;
  }
  const json_t *limits = json_object_get(args, "limits");
  if (limits != NULL && prepare_limits(t, run, limits, error) != 0) goto fail;
  json_decref(empty);
  return run;
fail:
  json_decref(empty);
  mbxH_mcp_run_free(run);
  return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Running                                                                                   */

/* The call sets something of its own: limits, files, modules. */
static int has_own_settings(const mbxH_mcp_run *run) {
  if (run->file_count > 0 || run->modules != NULL) return 1;
  for (size_t i = 0; i < CLIENT_LIMITS; i++)
    if (run->limit_set[i]) return 1;
  return 0;
}

/* The server's policy will not do: the call's own settings, or the upstreams' tools. */
static int wants_own_policy(const mbxH_mcp_tools *t, const mbxH_mcp_run *run) {
  return has_own_settings(run) || mbxH_code_active(t->code);
}

/* The per-call policy: the server's settings (limits, env, clock, seed, mounts, files; the
   server grants no host functions of its own), the client's lower limits, its inline files,
   and in code mode the upstream tools the operator allowed (tools.NAME.TOOL). */
static mbx_policy *call_policy(const mbxH_mcp_tools *t, const mbxH_mcp_run *run, char **error) {
  mbx_policy *p = mbx_policy_copy(t->policy);
  mbx_error err;
  memset(&err, 0, sizeof err);
  if (p == NULL) return NULL;
  for (size_t i = 0; i < CLIENT_LIMITS; i++) {
    if (!run->limit_set[i]) continue;
    if (mbx_policy_set_limit_checked(p, client_limits[i].which, run->limit[i], &err) != MBX_OK) {
      *error = tool_errorf("limits.%s: %s", client_limits[i].name, err.message);
      mbx_policy_free(p);
      return NULL;
    }
  }
  for (size_t i = 0; i < run->file_count; i++) {
    const inline_file *f = &run->files[i];
    if (mbx_policy_add_file(p, f->path, f->data, f->len, &err) != MBX_OK) {
      char q[64];
      *error =
          tool_errorf("files['%s']: %s", quote(f->path, strlen(f->path), q, sizeof q), err.message);
      mbx_policy_free(p);
      return NULL;
    }
  }
  char why[300];
  if (mbxH_code_grant(t->code, p, why, sizeof why) != 0) {
    *error = tool_errorf("%s", why);
    mbx_policy_free(p);
    return NULL;
  }
  const char *mname;
  const json_t *src;
  json_object_foreach(run->modules, mname, src) {
    if (mbx_policy_add_module(p, mname, json_string_value(src), json_string_length(src), &err) !=
        MBX_OK) {
      char q[64];
      *error =
          tool_errorf("modules['%s']: %s", quote(mname, strlen(mname), q, sizeof q), err.message);
      mbx_policy_free(p);
      return NULL;
    }
  }
  return p;
}

static mbx_sandbox *new_sandbox(const mbxH_mcp_tools *t, const mbxH_mcp_run *run, char **error) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_policy *own = NULL;
  if (wants_own_policy(t, run)) {
    own = call_policy(t, run, error);
    if (own == NULL) {
      if (*error == NULL) *error = tool_errorf("the server is out of memory");
      return NULL;
    }
  }
  mbx_sandbox *sb = mbx_sandbox_new(t->runtime, own ? own : t->policy, &err);
  mbx_policy_free(own);
  if (sb == NULL) *error = tool_errorf("cannot create a sandbox: %s", err.message);
  return sb;
}

typedef struct session_note {
  int created, rewound, reset;
  int woke; /* the session was hibernated (--hibernate-after) and this call woke it */
} session_note;

/* The result contract, with the session member spliced in, as a tool result. */
/* The result contract, with "changes" (what the sandbox's overlays and memory /tmp hold that
   differs from its start, contents included: for a one-shot call what this run wrote, for a
   session what it changed since the session opened or was reset; mbx_sandbox_changes) and, in
   a session, "session" appended before the closing brace. NULL when out of host memory. */
/* The most change-set JSON a run_lua result carries with file contents (see run_result). */
#define MCP_CHANGES_CONTENT_MAX ((size_t)1 << 20)

static char *run_result(mbx_sandbox *sb, const mbx_result *res, const char *session,
                        const session_note *note, const json_t *calls) {
  size_t len = 0, changes_len = 0;
  const char *json = mbx_result_json(res, &len);
  if (json == NULL || len < 2) return NULL;
  int is_error = mbx_result_status(res) != MBX_OK;
  char *changes = NULL;
  mbx_error err;
  memset(&err, 0, sizeof err);
  if (mbx_sandbox_changes(sb, MBX_CHANGES_CONTENT, &changes, &changes_len, &err) != MBX_OK) {
    changes = NULL; /* out of host memory: the result still stands, without its change set */
    changes_len = 0;
  }
  /* The reply holds the result twice (the text block and structuredContent), escaped once more
     in the text: past MCP_CHANGES_CONTENT_MAX of change-set JSON the contents are left out
     (paths, kinds and sizes stay), so what a guest writes to /tmp cannot make each reply tens
     of times its memory limit. */
  if (changes != NULL && changes_len > MCP_CHANGES_CONTENT_MAX) {
    mbx_free(changes);
    changes = NULL;
    changes_len = 0;
    if (mbx_sandbox_changes(sb, 0, &changes, &changes_len, &err) != MBX_OK) {
      changes = NULL;
      changes_len = 0;
    }
  }
  char tail[200] = "";
  int n = 0;
  if (session[0] != '\0')
    n = snprintf(tail, sizeof tail,
                 ",\"session\":{\"created\":%s,\"id\":\"%s\",\"reset\":%s,\"rewound\":%s,"
                 "\"woke\":%s}",
                 note->created ? "true" : "false", session, note->reset ? "true" : "false",
                 note->rewound ? "true" : "false", note->woke ? "true" : "false");
  if (n < 0 || (size_t)n >= sizeof tail) n = 0;
  /* Code mode: the upstream calls the run made (a rewind cannot take them back). */
  char *calls_text = calls ? json_dumps(calls, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
  static const char calls_key[] = ",\"upstream_calls\":";
  size_t calls_len = calls_text ? sizeof calls_key - 1 + strlen(calls_text) : 0;
  static const char key[] = ",\"changes\":";
  size_t key_len = sizeof key - 1;
  size_t total = (len - 1) + (changes ? key_len + changes_len : 0) + (size_t)n + calls_len + 1;
  char *full = malloc(total + 1);
  if (full == NULL) {
    mbx_free(changes);
    free(calls_text);
    return NULL;
  }
  size_t k = len - 1; /* without the closing brace */
  memcpy(full, json, k);
  if (changes != NULL) {
    memcpy(full + k, key, key_len);
    k += key_len;
    memcpy(full + k, changes, changes_len);
    k += changes_len;
  }
  memcpy(full + k, tail, (size_t)n);
  k += (size_t)n;
  if (calls_text != NULL) {
    memcpy(full + k, calls_key, sizeof calls_key - 1);
    memcpy(full + k + sizeof calls_key - 1, calls_text, strlen(calls_text));
    k += calls_len;
    free(calls_text);
  }
  full[k++] = '}';
  full[k] = '\0';
  mbx_free(changes);
  char *out = tool_result(full, k, full, k, is_error);
  free(full);
  return out;
}

/* mbx_run under the call's cancel; *cancelled when it never started. */
/* mbx_run under the call's cancel; *cancelled when it never started. With upstreams, the
   run's host functions reach them through a per-thread context (its cancel, its upstream
   time), and *calls (a new reference, or NULL) lists what they called. */
static mbx_status run_code(const mbxH_mcp_tool_call *call, mbx_sandbox *sb, mbx_result **res,
                           mbx_error *err, int *cancelled, json_t **calls) {
  const mbxH_mcp_run *run = call->run;
  *res = NULL;
  *calls = NULL;
  *cancelled = !call->running(call->server_call, sb);
  if (*cancelled) return MBX_INTERRUPTED;
  if (run->stdin_data != NULL &&
      mbx_sandbox_set_stdin(sb, run->stdin_data, run->stdin_len, err) != MBX_OK) {
    (void)call->running(call->server_call, NULL);
    return MBX_NO_MEMORY;
  }
  mbxH_code_run ctx = {call->cancelled, call->server_call, 0, NULL};
  mbxH_code_run_begin(&ctx);
  mbx_status st = mbx_run(sb, run->code, run->code_len, run->inputs, run->inputs_len, res, err);
  mbxH_code_run_end();
  (void)call->running(call->server_call, NULL);
  *calls = ctx.calls;
  return st;
}

static char *api_error(mbx_status st, const mbx_error *err) {
  return tool_errorf("%s: %s", mbx_status_key(st) ? mbx_status_key(st) : "error",
                     err->message[0] ? err->message : mbx_status_str(st));
}

static char *execute_oneshot(const mbxH_mcp_tool_call *call) {
  char *error = NULL;
  mbx_sandbox *sb = new_sandbox(call->tools, call->run, &error);
  if (sb == NULL) return error;
  mbx_result *res;
  mbx_error err;
  int cancelled;
  memset(&err, 0, sizeof err);
  json_t *calls;
  mbx_status st = run_code(call, sb, &res, &err, &cancelled, &calls);
  char *out = cancelled ? NULL : res ? run_result(sb, res, "", NULL, calls) : api_error(st, &err);
  json_decref(calls);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  return out;
}

static char *busy_error(const char *id) {
  return tool_errorf("session busy: session '%s' is running another call (wait for its "
                     "result, or cancel it with notifications/cancelled)",
                     id);
}

static char *execute_session(const mbxH_mcp_tool_call *call) {
  const mbxH_mcp_tools *t = call->tools;
  const mbxH_mcp_run *run = call->run;
  mbxH_mcp_session *ses;
  session_note note = {0, 0, 0, 0};
  char *error = NULL;
  pthread_mutex_lock(t->lock);
  int got = mbxH_mcp_session_acquire(t->sessions, call->owner, run->session, call->max_sessions,
                                     t->now_ms(), &ses);
  pthread_mutex_unlock(t->lock);
  if (got == MBXH_SESSION_BUSY) return busy_error(run->session);
  if (got == MBXH_SESSION_FULL)
    return tool_errorf("too many sessions: the server keeps at most %d open, %zu of them "
                       "this client's (close_session one you no longer need; sessions idle "
                       "for %d minutes close by themselves)",
                       MBXH_MCP_MAX_SESSIONS, call->max_sessions,
                       (int)(MBXH_MCP_SESSION_IDLE_MS / 60000));
  if (got == MBXH_SESSION_CREATED) {
    note.created = 1;
    ses->sandbox = new_sandbox(t, run, &error);
    if (ses->sandbox == NULL) {
      pthread_mutex_lock(t->lock);
      (void)mbxH_mcp_session_drop(ses);
      pthread_mutex_unlock(t->lock);
      return error;
    }
  } else if (has_own_settings(run)) {
    pthread_mutex_lock(t->lock);
    mbxH_mcp_session_release(ses, t->now_ms());
    pthread_mutex_unlock(t->lock);
    return tool_errorf("session '%s' is already open: limits and files apply when a session "
                       "is opened (leave them out, or close_session it and open it again)",
                       run->session);
  }
  /* The session is ours (busy) from here: nobody else touches its sandbox (the monitor
     hibernates only sessions that are not busy), so it cannot go to sleep before the run. */
  mbx_sandbox *sb = ses->sandbox;
  note.woke = mbx_sandbox_hibernated(sb);
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status cp = mbx_sandbox_checkpoint(sb, &err);
  char *out = NULL;
  if (cp != MBX_OK && cp != MBX_UNSUPPORTED) {
    out = tool_errorf("session '%s': cannot checkpoint it before the call: %s", run->session,
                      err.message);
  } else {
    mbx_result *res;
    int cancelled;
    json_t *calls;
    mbx_status st = run_code(call, sb, &res, &err, &cancelled, &calls);
    if (res != NULL && mbx_sandbox_poisoned(sb)) {
      /* A limit, an interrupt or an internal error: the session goes back to before the call
         instead of dying (without checkpoints, as in the asan build, it starts afresh). */
      mbx_error e2;
      if (cp == MBX_OK && mbx_sandbox_rewind(sb, &e2) == MBX_OK)
        note.rewound = 1;
      else if (mbx_sandbox_reset(sb, &e2) == MBX_OK)
        note.reset = 1;
    }
    if (!cancelled)
      out = res ? run_result(sb, res, run->session, &note, calls) : api_error(st, &err);
    json_decref(calls);
    mbx_result_free(res);
  }
  pthread_mutex_lock(t->lock);
  mbxH_mcp_session_release(ses, t->now_ms());
  pthread_mutex_unlock(t->lock);
  return out;
}

static char *session_done(const char *id, const char *status) {
  char text[160];
  int n = snprintf(text, sizeof text, "{\"session\":\"%s\",\"status\":\"%s\"}", id, status);
  return tool_result(text, (size_t)n, text, (size_t)n, 0);
}

static char *no_session(const char *id) {
  return tool_errorf("no session '%s' (it was never opened, was closed, or closed itself after "
                     "%d idle minutes)",
                     id, (int)(MBXH_MCP_SESSION_IDLE_MS / 60000));
}

static char *execute_reset_or_close(const mbxH_mcp_tool_call *call) {
  const mbxH_mcp_tools *t = call->tools;
  const mbxH_mcp_run *run = call->run;
  pthread_mutex_lock(t->lock);
  mbxH_mcp_session *ses = mbxH_mcp_session_find(t->sessions, call->owner, run->session);
  if (ses == NULL || ses->busy) {
    pthread_mutex_unlock(t->lock);
    return ses == NULL ? no_session(run->session) : busy_error(run->session);
  }
  if (run->tool == TOOL_CLOSE) {
    mbx_sandbox *sb = mbxH_mcp_session_drop(ses);
    pthread_mutex_unlock(t->lock);
    mbx_sandbox_free(sb);
    return session_done(run->session, "closed");
  }
  ses->busy = 1;
  pthread_mutex_unlock(t->lock);
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status st = mbx_sandbox_reset(ses->sandbox, &err);
  pthread_mutex_lock(t->lock);
  mbxH_mcp_session_release(ses, t->now_ms());
  pthread_mutex_unlock(t->lock);
  if (st != MBX_OK) return tool_errorf("session '%s': reset failed: %s", run->session, err.message);
  return session_done(run->session, "reset");
}

/* check_lua: mbx_check under the server's policy; the names of the inputs the client declared
   are provided too (run_lua would bind them), so their reads are not findings. */
static char *execute_check(const mbxH_mcp_tool_call *call) {
  const mbxH_mcp_run *run = call->run;
  char *json = NULL;
  size_t len = 0;
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status st = mbx_check(call->tools->policy, run->code, run->code_len, &json, &len, &err);
  if (st != MBX_OK) return api_error(st, &err);
  if (run->input_names == NULL || json_object_size(run->input_names) == 0) {
    char *out = tool_result(json, len, json, len, 0);
    mbx_free(json);
    return out;
  }
  json_t *doc = json_loadb(json, len, JSON_ALLOW_NUL, NULL);
  mbx_free(json);
  json_t *globals = doc ? json_object_get(doc, "globals") : NULL;
  if (!json_is_array(globals)) {
    json_decref(doc);
    return NULL;
  }
  for (size_t i = json_array_size(globals); i-- > 0;) {
    const json_t *name = json_object_get(json_array_get(globals, i), "name");
    if (json_is_string(name) && json_object_get(run->input_names, json_string_value(name)))
      json_array_remove(globals, i);
  }
  json_object_set_new(doc, "ok",
                      json_boolean(json_array_size(globals) == 0 &&
                                   json_is_null(json_object_get(doc, "syntax_error"))));
  char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  json_decref(doc);
  if (text == NULL) return NULL;
  char *out = tool_result(text, strlen(text), text, strlen(text), 0);
  free(text);
  return out;
}

char *mbxH_mcp_tool_execute(const mbxH_mcp_tool_call *call, size_t *len) {
  char *out;
  switch (call->run->tool) {
  case TOOL_CHECK:
    out = execute_check(call);
    break;
  case TOOL_RUN:
    out = call->run->session[0] ? execute_session(call) : execute_oneshot(call);
    break;
  case TOOL_UPSTREAM:
    out = mbxH_code_tool_call(call->tools->code, call->run->upstream_tool, call->run->upstream_args,
                              call->cancelled, call->server_call);
    break;
  default:
    out = execute_reset_or_close(call);
    break;
  }
  *len = out ? strlen(out) : 0;
  return out;
}
