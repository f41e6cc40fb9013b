/* tests/host/mcp/test_server.c -- the JSON-RPC side of `moonbox mcp` (host/mcp/server.c) and
   its tools (host/mcp/tools.c), driven line by line with the responses read from a pipe: every
   error code, hostile messages, a long call that does not stall ping, a reused id, a cancel
   that gets no response, progress, sessions with their rewind and their cap. The real-client
   test is tests/mcp/ (the TypeScript SDK). */
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/mcp/mcp.h"

typedef struct fixture {
  mbxH_mcp_server server;
  mbx_policy *policy;
  int rd, wr;
  char pending[1 << 16];
  size_t pending_len;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  int fds[2];
  char msg[256];
  assert_non_null(f);
  assert_int_equal(pipe(fds), 0);
  f->rd = fds[0];
  f->wr = fds[1];
  f->policy = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(f->policy, MBX_LIMIT_TIME_MS, 4000), MBX_OK);
  assert_int_equal(mbxH_mcp_server_init(&f->server, f->policy, f->wr, msg, sizeof msg), 0);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mbxH_mcp_server_finish(&f->server);
  mbx_policy_free(f->policy);
  close(f->rd);
  close(f->wr);
  free(f);
  return 0;
}

static void send_line(fixture *f, const char *line) {
  mbxH_mcp_handle_line(&f->server, line, strlen(line));
}

/* The next line the server wrote, parsed; fails the test after a generous 60 s. */
static json_t *next_message(fixture *f) {
  for (;;) {
    char *nl = memchr(f->pending, '\n', f->pending_len);
    if (nl != NULL) {
      size_t n = (size_t)(nl - f->pending);
      json_error_t jerr;
      json_t *msg = json_loadb(f->pending, n, 0, &jerr);
      if (msg == NULL) fail_msg("not one JSON line: %.*s (%s)", (int)n, f->pending, jerr.text);
      memmove(f->pending, nl + 1, f->pending_len - n - 1);
      f->pending_len -= n + 1;
      return msg;
    }
    struct pollfd p = {f->rd, POLLIN, 0};
    if (poll(&p, 1, 60000) != 1) fail_msg("no message from the server within 60 s");
    assert_true(f->pending_len < sizeof f->pending);
    ssize_t got = read(f->rd, f->pending + f->pending_len, sizeof f->pending - f->pending_len);
    assert_true(got > 0);
    f->pending_len += (size_t)got;
  }
}

/* 1 if nothing arrives within ms. */
static int quiet_for(fixture *f, int ms) {
  if (memchr(f->pending, '\n', f->pending_len)) return 0;
  struct pollfd p = {f->rd, POLLIN, 0};
  return poll(&p, 1, ms) == 0;
}

static void expect_error(json_t *msg, int code, const char *id_json, const char *needle) {
  json_t *err = json_object_get(msg, "error");
  assert_true(json_is_object(err));
  assert_int_equal(json_integer_value(json_object_get(err, "code")), code);
  char *id = json_dumps(json_object_get(msg, "id"), JSON_ENCODE_ANY);
  assert_string_equal(id, id_json);
  free(id);
  const char *text = json_string_value(json_object_get(err, "message"));
  if (strstr(text, needle) == NULL) fail_msg("'%s' does not contain '%s'", text, needle);
  json_decref(msg);
}

static void initialize(fixture *f) {
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
               "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
  json_t *msg = next_message(f);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(msg, "result"), "protocolVersion")),
      "2025-11-25");
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
}

/* The result member of a tools/call response with the given id. */
static json_t *tool_result(json_t *msg, json_int_t id) {
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), id);
  json_t *result = json_object_get(msg, "result");
  if (!json_is_object(result)) fail_msg("no result in a response with id %lld", (long long)id);
  return result;
}

static void test_before_initialize(void **state) {
  fixture *f = *state;
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "1", "send initialize first");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":\"p\",\"method\":\"ping\"}");
  json_t *msg = next_message(f);
  assert_true(json_is_object(json_object_get(msg, "result")));
  json_decref(msg);
  /* An initialize without a version is refused and does not count. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_PARAMS, "2", "protocolVersion");
  /* A version we do not speak gets ours. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"1999-01-01\"}}");
  msg = next_message(f);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(msg, "result"), "protocolVersion")),
      MBXH_MCP_PROTOCOL);
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-11-25\"}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "4", "already initialized");
}

static void test_older_version_answered(void **state) {
  fixture *f = *state;
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
               "\"protocolVersion\":\"2025-06-18\"}}");
  json_t *msg = next_message(f);
  assert_string_equal(
      json_string_value(json_object_get(json_object_get(msg, "result"), "protocolVersion")),
      "2025-06-18");
  json_decref(msg);
}

static void test_malformed_messages(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,");
  expect_error(next_message(f), MBXH_RPC_PARSE_ERROR, "null", "parse error");
  /* Invalid UTF-8 inside a string. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\xfeing\"}");
  expect_error(next_message(f), MBXH_RPC_PARSE_ERROR, "null", "parse error");
  /* 100000 nested arrays: jansson's depth cap, not the C stack. */
  size_t depth = 100000;
  char *deep = malloc(2 * depth + 1);
  memset(deep, '[', depth);
  memset(deep + depth, ']', depth);
  deep[2 * depth] = '\0';
  send_line(f, deep);
  free(deep);
  expect_error(next_message(f), MBXH_RPC_PARSE_ERROR, "null", "parse error");
  send_line(f, "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "null", "batching");
  send_line(f, "42");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "null", "JSON object");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "null", "\"id\"");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "null", "\"id\"");
  send_line(f, "{\"id\":5,\"method\":\"ping\"}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "5", "jsonrpc");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":6}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "6", "method");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"ping\",\"id\":8}");
  expect_error(next_message(f), MBXH_RPC_PARSE_ERROR, "null", "duplicate");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"resources/list\"}");
  expect_error(next_message(f), MBXH_RPC_METHOD_NOT_FOUND, "9", "resources/list");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":10,\"method\":\"tools/call\",\"params\":[1]}");
  expect_error(next_message(f), MBXH_RPC_INVALID_PARAMS, "10", "params must be an object");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"ping\",\"params\":\"x\"}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "15", "params must be an object");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"tools/call\",\"params\":{}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_PARAMS, "11", "params.name");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":12,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"rm_rf\"}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_PARAMS, "12", "unknown tool 'rm_rf'");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":13,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":[\"return 1\"]}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_PARAMS, "13", "arguments must be an object");
  /* Notifications, responses and blank lines get nothing; the server still answers. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":99,\"result\":{}}");
  send_line(f, "   ");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":14,\"method\":\"ping\"}");
  json_t *msg = next_message(f);
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 14);
  json_decref(msg);
}

static void test_tools_list(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
  json_t *msg = next_message(f);
  json_t *tools = json_object_get(json_object_get(msg, "result"), "tools");
  assert_int_equal(json_array_size(tools), 4);
  assert_string_equal(json_string_value(json_object_get(json_array_get(tools, 1), "name")),
                      "check_lua");
  json_t *run = json_array_get(tools, 0);
  assert_string_equal(json_string_value(json_object_get(run, "name")), "run_lua");
  json_t *out = json_object_get(run, "outputSchema");
  assert_string_equal(json_string_value(json_object_get(out, "$id")),
                      "urn:moonbox:schema:result:1");
  assert_string_equal(json_string_value(json_object_get(out, "type")), "object");
  json_decref(msg);
}

static void test_run_lua(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"print('hi') return n * 2, "
               "io.open('/in/a.txt'):read('a')\",\"inputs\":{\"n\":9007199254740993},"
               "\"files\":{\"/in/a.txt\":\"file text\"}}}}");
  json_t *msg = next_message(f);
  json_t *r = tool_result(msg, 1);
  assert_true(json_is_false(json_object_get(r, "isError")));
  json_t *sc = json_object_get(r, "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  assert_string_equal(json_string_value(json_object_get(sc, "stdout")), "hi\n");
  json_t *value = json_object_get(sc, "value");
  /* 64-bit integers pass exactly (2^53 + 1 doubled). */
  assert_int_equal(json_integer_value(json_array_get(value, 0)), 18014398509481986LL);
  assert_string_equal(json_string_value(json_array_get(value, 1)), "file text");
  /* The text block is the same JSON. */
  json_t *text = json_loads(
      json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text")),
      0, NULL);
  assert_true(json_equal(text, sc));
  json_decref(text);
  json_decref(msg);

  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"error('boom')\"}}}");
  msg = next_message(f);
  r = tool_result(msg, 2);
  assert_true(json_is_true(json_object_get(r, "isError")));
  sc = json_object_get(r, "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "runtime_error");
  assert_non_null(
      strstr(json_string_value(json_object_get(json_object_get(sc, "error"), "message")), "boom"));
  /* Nothing written: an empty change set. */
  assert_int_equal(json_array_size(json_object_get(sc, "changes")), 0);
  json_decref(msg);

  /* What the code wrote comes back as the change set, contents included. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"local f = io.open('/tmp/r.txt', "
               "'w') f:write('report') f:close()\"}}}");
  msg = next_message(f);
  r = tool_result(msg, 3);
  sc = json_object_get(r, "structuredContent");
  json_t *changes = json_object_get(sc, "changes");
  assert_int_equal(json_array_size(changes), 1);
  json_t *c = json_array_get(changes, 0);
  assert_string_equal(json_string_value(json_object_get(c, "path")), "/tmp/r.txt");
  assert_string_equal(json_string_value(json_object_get(c, "kind")), "created");
  assert_string_equal(json_string_value(json_object_get(c, "content")), "report");
  json_decref(msg);

  /* Past 1 MiB of change-set JSON the contents are left out; the paths and sizes stay. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"for j = 1, 3 do local f = "
               "io.open('/tmp/f' .. j, 'w') f:write(string.rep('x', 1 << 19)) f:close() end\"}}}");
  msg = next_message(f);
  r = tool_result(msg, 4);
  changes = json_object_get(json_object_get(r, "structuredContent"), "changes");
  assert_int_equal(json_array_size(changes), 3);
  c = json_array_get(changes, 2);
  assert_string_equal(json_string_value(json_object_get(c, "path")), "/tmp/f3");
  assert_int_equal(json_integer_value(json_object_get(c, "size")), 1 << 19);
  assert_null(json_object_get(c, "content"));
  json_decref(msg);
}

/* Arguments that fail the inputSchema or the server's caps: a tool result with isError. */
static void expect_tool_error(fixture *f, const char *args, const char *needle) {
  char line[2048];
  snprintf(line, sizeof line,
           "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
           "\"run_lua\",\"arguments\":%s}}",
           args);
  send_line(f, line);
  json_t *msg = next_message(f);
  json_t *r = tool_result(msg, 5);
  assert_true(json_is_true(json_object_get(r, "isError")));
  assert_null(json_object_get(r, "structuredContent"));
  const char *text =
      json_string_value(json_object_get(json_array_get(json_object_get(r, "content"), 0), "text"));
  if (strstr(text, needle) == NULL) fail_msg("'%s' does not contain '%s'", text, needle);
  json_decref(msg);
}

static void test_bad_arguments(void **state) {
  fixture *f = *state;
  initialize(f);
  expect_tool_error(f, "{}", "code");
  expect_tool_error(f, "{\"code\":1}", "code");
  expect_tool_error(f, "{\"code\":\"x\",\"limit\":{}}", "unknown argument 'limit'");
  expect_tool_error(f, "{\"code\":\"x\",\"inputs\":[1]}", "inputs");
  expect_tool_error(f, "{\"code\":\"x\",\"inputs\":{\"print\":1}}", "invalid_input");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout_ms\":5000}}",
                    "above the server's cap of 4000");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"cpu\":1}}", "unknown limit 'cpu'");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"memory\":1024}}", "limits.memory");
  /* The vocabulary's values (docs/vocabulary.md): sizes, counts and durations as strings. */
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"memory\":\"1k\"}}",
                    "limits.memory: the memory limit must be between 256k and 1T, not 1k");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"memory\":\"64X\"}}",
                    "limits.memory: '64X' is not a size");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout\":\"5s\"}}",
                    "limits.timeout: 5000 is above the server's cap of 4000");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout\":\"5\"}}",
                    "limits.timeout: '5' has no unit");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout\":\"0s\"}}",
                    "limits.timeout: 0 would remove the limit");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout_ms\":\"5s\"}}",
                    "limits.timeout_ms: expected a positive integer (milliseconds), got a string");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"timeout\":100,\"timeout_ms\":100}}",
                    "limits.timeout: given twice (as timeout and as timeout_ms); keep timeout");
  expect_tool_error(f, "{\"code\":\"x\",\"limits\":{\"instructions\":true}}",
                    "limits.instructions: expected a positive integer or a string");
  expect_tool_error(f, "{\"code\":\"x\",\"files\":{\"rel/a\":\"\"}}", "absolute");
  expect_tool_error(f, "{\"code\":\"x\",\"files\":{\"/tmp/a\":\"\"}}", "files['/tmp/a']");
  expect_tool_error(f, "{\"code\":\"x\",\"files\":{\"/a\":{\"$bytes\":\"!!\"}}}", "base64");
  expect_tool_error(f, "{\"code\":\"x\",\"session\":\"a b\"}", "session");
  expect_tool_error(f, "{\"code\":\"x\",\"modules\":{\"m\":1}}", "modules: expected");
  expect_tool_error(f, "{\"code\":\"x\",\"modules\":{\"\":\"return 1\"}}", "modules['']");
}

/* run_lua's modules: registered by name, found by require (the call's policy is freed while
   its sandbox runs: the view must not borrow the modules from it). */
static void test_run_lua_modules(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"local m, how = "
               "require('mylib.util') return m.twice(21), how\","
               "\"modules\":{\"mylib.util\":\"return {twice = function(x) return 2 * x end}\"}}}}");
  json_t *msg = next_message(f);
  json_t *r = tool_result(msg, 1);
  json_t *sc = json_object_get(r, "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  json_t *value = json_object_get(sc, "value");
  assert_int_equal(json_integer_value(json_array_get(value, 0)), 42);
  assert_string_equal(json_string_value(json_array_get(value, 1)), ":registered:");
  json_decref(msg);
}

/* run_lua's stdin: what io.read reads, text or $bytes; bad shapes are tool errors. */
static void test_run_lua_stdin(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"return io.read('n') + io.read('n'), "
               "io.read('a')\",\"stdin\":\"3 4 rest\"}}}");
  json_t *msg = next_message(f);
  json_t *sc = json_object_get(tool_result(msg, 1), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  json_t *value = json_object_get(sc, "value");
  assert_int_equal(json_integer_value(json_array_get(value, 0)), 7);
  assert_string_equal(json_string_value(json_array_get(value, 1)), " rest");
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"return #io.read('a')\","
               "\"stdin\":{\"$bytes\":\"AP8A\"}}}}");
  msg = next_message(f);
  sc = json_object_get(tool_result(msg, 2), "structuredContent");
  assert_int_equal(json_integer_value(json_object_get(sc, "value")), 3);
  json_decref(msg);
  expect_tool_error(f, "{\"code\":\"x\",\"stdin\":42}", "stdin: expected the text");
  expect_tool_error(f, "{\"code\":\"x\",\"stdin\":{\"$bytes\":\"!!\"}}", "not valid base64");
}

/* check_lua: ungranted globals with lines from the bytecode, syntax errors, declared inputs. */
static void test_check_lua(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"check_lua\",\"arguments\":{\"code\":\"local s = 'x = y'\\n"
               "total = fetch(url) + math.huge\",\"inputs\":{\"url\":\"u\"}}}}");
  json_t *msg = next_message(f);
  json_t *r = tool_result(msg, 1);
  assert_true(json_is_false(json_object_get(r, "isError")));
  json_t *sc = json_object_get(r, "structuredContent");
  assert_true(json_is_false(json_object_get(sc, "ok")));
  json_t *g = json_object_get(sc, "globals");
  assert_int_equal(json_array_size(g), 2); /* fetch (read) and total (write); not url, not y */
  assert_string_equal(json_string_value(json_object_get(json_array_get(g, 0), "name")), "fetch");
  assert_int_equal(json_integer_value(json_object_get(json_array_get(g, 0), "line")), 2);
  assert_string_equal(json_string_value(json_object_get(json_array_get(g, 1), "access")), "write");
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"check_lua\",\"arguments\":{\"code\":\"return 1 +\"}}}");
  msg = next_message(f);
  sc = json_object_get(tool_result(msg, 2), "structuredContent");
  assert_int_equal(json_integer_value(json_object_get(json_object_get(sc, "syntax_error"), "line")),
                   1);
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"check_lua\",\"arguments\":{\"code\":\"return x\","
               "\"inputs\":{\"x\":1}}}}");
  msg = next_message(f);
  sc = json_object_get(tool_result(msg, 3), "structuredContent");
  assert_true(json_is_true(json_object_get(sc, "ok")));
  json_decref(msg);
}

static void wait_idle(fixture *f) {
  for (int i = 0; i < 6000; i++) {
    pthread_mutex_lock(&f->server.lock);
    int busy = f->server.threads;
    pthread_mutex_unlock(&f->server.lock);
    if (!busy) return;
    usleep(10000);
  }
  fail_msg("the calls did not end within 60 s");
}

static void test_long_call_cancel(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"while true do end\"}}}");
  /* The run does not stall ping... */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"ping\"}");
  json_t *msg = next_message(f);
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 8);
  json_decref(msg);
  /* ...and its id cannot be reused while it runs. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"return 1\"}}}");
  expect_error(next_message(f), MBXH_RPC_INVALID_REQUEST, "7", "already in use");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{"
               "\"requestId\":7,\"reason\":\"test\"}}");
  wait_idle(f); /* well before the 4 s limit on an idle machine; bounded by it anyway */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"ping\"}");
  msg = next_message(f); /* a cancelled request gets no response: the ping's comes next */
  assert_int_equal(json_integer_value(json_object_get(msg, "id")), 9);
  json_decref(msg);
  /* The id is free again. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"arguments\":{\"code\":\"return 1\"}}}");
  msg = next_message(f);
  assert_int_equal(json_integer_value(json_object_get(
                       json_object_get(tool_result(msg, 7), "structuredContent"), "value")),
                   1);
  json_decref(msg);
}

static void test_progress(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
               "\"name\":\"run_lua\",\"_meta\":{\"progressToken\":\"tok\"},\"arguments\":{"
               "\"code\":\"while true do end\",\"limits\":{\"timeout\":\"2.5s\"}}}}");
  json_int_t last = 0;
  int progress = 0;
  for (;;) {
    json_t *msg = next_message(f);
    const char *method = json_string_value(json_object_get(msg, "method"));
    if (method == NULL) {
      json_t *sc = json_object_get(tool_result(msg, 1), "structuredContent");
      assert_string_equal(json_string_value(json_object_get(sc, "status")), "time_limit");
      json_decref(msg);
      break;
    }
    assert_string_equal(method, "notifications/progress");
    json_t *params = json_object_get(msg, "params");
    assert_string_equal(json_string_value(json_object_get(params, "progressToken")), "tok");
    json_int_t p = json_integer_value(json_object_get(params, "progress"));
    assert_true(p > last);
    assert_true(p >= 900);
    last = p;
    progress++;
    json_decref(msg);
  }
  assert_true(progress >= 1);
  assert_true(quiet_for(f, 1500)); /* none after the reply */
}

static json_t *session_call(fixture *f, json_int_t id, const char *session, const char *code,
                            const char *extra) {
  char line[1024];
  snprintf(line, sizeof line,
           "{\"jsonrpc\":\"2.0\",\"id\":%lld,\"method\":\"tools/call\",\"params\":{\"name\":"
           "\"run_lua\",\"arguments\":{\"session\":\"%s\",\"code\":\"%s\"%s}}}",
           (long long)id, session, code, extra);
  send_line(f, line);
  return next_message(f);
}

static void test_sessions(void **state) {
  fixture *f = *state;
  initialize(f);
  json_t *msg = session_call(f, 1, "nb", "x = 41", ",\"limits\":{\"timeout_ms\":300}");
  json_t *sc = json_object_get(tool_result(msg, 1), "structuredContent");
  assert_true(json_is_true(json_object_get(json_object_get(sc, "session"), "created")));
  json_decref(msg);
  msg = session_call(f, 2, "nb", "x = x + 1 return x", "");
  sc = json_object_get(tool_result(msg, 2), "structuredContent");
  assert_int_equal(json_integer_value(json_object_get(sc, "value")), 42);
  assert_true(json_is_false(json_object_get(json_object_get(sc, "session"), "created")));
  json_decref(msg);
  /* Limits apply when the session opens. */
  msg = session_call(f, 3, "nb", "return 1", ",\"limits\":{\"timeout_ms\":100}");
  assert_true(json_is_true(json_object_get(tool_result(msg, 3), "isError")));
  json_decref(msg);
  /* A timeout (the session's 300 ms) rewinds instead of killing the session. */
  msg = session_call(f, 4, "nb", "x = 1000 while true do end", "");
  sc = json_object_get(tool_result(msg, 4), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "time_limit");
  json_t *note = json_object_get(sc, "session");
  int rewound = json_is_true(json_object_get(note, "rewound"));
  int reset = json_is_true(json_object_get(note, "reset"));
  assert_true(rewound != reset); /* rewound, or reset where checkpoints are unsupported */
  json_decref(msg);
  msg = session_call(f, 5, "nb", "return x", "");
  sc = json_object_get(tool_result(msg, 5), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  if (rewound)
    assert_int_equal(json_integer_value(json_object_get(sc, "value")), 42);
  else
    assert_true(json_is_null(json_object_get(sc, "value")));
  json_decref(msg);
  /* reset_session, close_session, and the id unknown afterwards. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"reset_session\",\"arguments\":{\"session\":\"nb\"}}}");
  msg = next_message(f);
  sc = json_object_get(tool_result(msg, 6), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "reset");
  json_decref(msg);
  msg = session_call(f, 7, "nb", "return x", "");
  assert_true(json_is_null(
      json_object_get(json_object_get(tool_result(msg, 7), "structuredContent"), "value")));
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"close_session\",\"arguments\":{\"session\":\"nb\"}}}");
  msg = next_message(f);
  assert_true(json_is_false(json_object_get(tool_result(msg, 8), "isError")));
  json_decref(msg);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"close_session\",\"arguments\":{\"session\":\"nb\"}}}");
  msg = next_message(f);
  assert_true(json_is_true(json_object_get(tool_result(msg, 9), "isError")));
  json_decref(msg);
}

/* MBX_ARENA_MALLOC builds (the asan preset) cannot hibernate: the heap is malloc blocks. */
#ifdef MBX_ARENA_MALLOC
#define NEEDS_THE_ARENA() skip()
#else
#define NEEDS_THE_ARENA() ((void)0)
#endif

/* Under the table's lock: -1 no such session, else 1 if its sandbox is hibernated. */
static int session_asleep(fixture *f, const char *id) {
  pthread_mutex_lock(&f->server.lock);
  mbxH_mcp_session *s = mbxH_mcp_session_find(&f->server.sessions, f->server.stdio.owner, id);
  int asleep = s == NULL ? -1 : s->sandbox != NULL && mbx_sandbox_hibernated(s->sandbox);
  pthread_mutex_unlock(&f->server.lock);
  return asleep;
}

/* Waits (a generous 60 s) for the monitor to hibernate the session. */
static void wait_asleep(fixture *f, const char *id) {
  for (int i = 0; i < 6000; i++) {
    int asleep = session_asleep(f, id);
    assert_int_not_equal(asleep, -1);
    if (asleep) return;
    usleep(10000);
  }
  fail_msg("session '%s' was not hibernated within 60 s", id);
}

static json_t *session_note(json_t *msg, json_int_t id) {
  json_t *sc = json_object_get(tool_result(msg, id), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  return json_object_get(sc, "session");
}

/* A session idle past --hibernate-after goes to sleep, and its next call wakes it with every
   global as it was: integers and doubles that look like pointers into the heap, string.pack
   bytes, a table holding them, a closure's upvalue. The result says the call woke it. */
static void test_session_hibernates(void **state) {
  fixture *f = *state;
  char msg[256];
  NEEDS_THE_ARENA();
  initialize(f);
  assert_int_equal(mbxH_mcp_server_hibernate(&f->server, 50, msg, sizeof msg), 0);
  static const char set[] =
      "p = 0x7f3a12345678 q = 0x00005555deadbeef d = 3.0e-310 "
      "b = string.pack('<j d s4', 0x7ffd00001000, 2.5e-320, 'heap') t = {p, q, d, b} "
      "local n = 0 bump = function() n = n + 1 return n end bump()";
  json_t *m = session_call(f, 1, "h", set, "");
  json_t *note = session_note(m, 1);
  assert_true(json_is_true(json_object_get(note, "created")));
  assert_true(json_is_false(json_object_get(note, "woke")));
  json_decref(m);
  wait_asleep(f, "h");
  static const char check[] =
      "return p == 0x7f3a12345678 and q == 0x00005555deadbeef and d == 3.0e-310 and "
      "b == string.pack('<j d s4', 0x7ffd00001000, 2.5e-320, 'heap') and t[1] == p and "
      "t[2] == q and t[3] == d and t[4] == b and bump() == 2";
  m = session_call(f, 2, "h", check, "");
  note = session_note(m, 2);
  assert_true(json_is_true(
      json_object_get(json_object_get(tool_result(m, 2), "structuredContent"), "value")));
  assert_true(json_is_true(json_object_get(note, "woke")));
  json_decref(m);
  assert_int_equal(session_asleep(f, "h"), 0); /* awake again, until it idles once more */
  wait_asleep(f, "h");
  /* reset_session and close_session on a sleeping session. */
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"reset_session\",\"arguments\":{\"session\":\"h\"}}}");
  m = next_message(f);
  assert_true(json_is_false(json_object_get(tool_result(m, 3), "isError")));
  json_decref(m);
  m = session_call(f, 4, "h", "return p", "");
  assert_true(json_is_null(
      json_object_get(json_object_get(tool_result(m, 4), "structuredContent"), "value")));
  json_decref(m);
  wait_asleep(f, "h");
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"close_session\",\"arguments\":{\"session\":\"h\"}}}");
  m = next_message(f);
  assert_true(json_is_false(json_object_get(tool_result(m, 5), "isError")));
  json_decref(m);
  pthread_mutex_lock(&f->server.lock);
  assert_true(f->server.hibernations >= 3);
  pthread_mutex_unlock(&f->server.lock);
}

/* A session with a call in flight is never hibernated, however long the call takes (what
   the call waits on does not matter: an upstream tool's answer in code mode is waited for
   inside the run just as this loop runs inside it); it sleeps once the call has ended. And
   with --hibernate-after 0 (or an isolated server, refused) nothing sleeps. */
static void test_busy_session_stays_awake(void **state) {
  fixture *f = *state;
  char msg[256];
  NEEDS_THE_ARENA();
  initialize(f);
  assert_int_equal(mbxH_mcp_server_hibernate(&f->server, 20, msg, sizeof msg), 0);
  json_t *m = session_call(f, 1, "w", "x = 7", "");
  json_decref(m);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"run_lua\",\"arguments\":{\"session\":\"w\",\"code\":\"local t = os.clock() "
               "while os.clock() - t < 0.5 do end return x\"}}}");
  /* Until the response comes, the session is busy and awake, across many monitor ticks. */
  int polls = 0;
  while (quiet_for(f, 20)) {
    pthread_mutex_lock(&f->server.lock);
    mbxH_mcp_session *s = mbxH_mcp_session_find(&f->server.sessions, f->server.stdio.owner, "w");
    int busy = s->busy;
    int asleep = mbx_sandbox_hibernated(s->sandbox);
    pthread_mutex_unlock(&f->server.lock);
    if (busy) polls++;
    assert_false(asleep && busy);
  }
  /* Half a second of CPU, so at least that much wall time: well past the 20 ms and several
     of the monitor's 100 ms ticks (the server's 4 s time limit leaves room for a busy
     machine). */
  assert_true(polls >= 3);
  m = next_message(f);
  json_t *sc = json_object_get(tool_result(m, 2), "structuredContent");
  assert_string_equal(json_string_value(json_object_get(sc, "status")), "ok");
  assert_int_equal(json_integer_value(json_object_get(sc, "value")), 7);
  json_decref(m);
  wait_asleep(f, "w");
  /* Off: a session idles awake. */
  assert_int_equal(mbxH_mcp_server_hibernate(&f->server, 0, msg, sizeof msg), 0);
  m = session_call(f, 3, "w", "return x", "");
  assert_true(json_is_true(json_object_get(session_note(m, 3), "woke")));
  json_decref(m);
  usleep(500000); /* five monitor ticks */
  assert_int_equal(session_asleep(f, "w"), 0);
  /* An isolated server refuses it, in the CLI's words. */
  f->server.isolated = 1;
  assert_int_equal(mbxH_mcp_server_hibernate(&f->server, 1000, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "--hibernate-after"));
  assert_non_null(strstr(msg, "--isolate none"));
  assert_int_equal(mbxH_mcp_server_hibernate(&f->server, 0, msg, sizeof msg), 0);
  f->server.isolated = 0;
}

static void test_session_busy_and_cap(void **state) {
  fixture *f = *state;
  initialize(f);
  send_line(f, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":"
               "\"run_lua\",\"arguments\":{\"session\":\"s\",\"code\":\"while true do end\","
               "\"limits\":{\"timeout_ms\":1500}}}}");
  /* Wait until it holds the session, then a second call on it is refused at once. */
  for (int i = 0; i < 6000; i++) {
    pthread_mutex_lock(&f->server.lock);
    mbxH_mcp_session *s = mbxH_mcp_session_find(&f->server.sessions, 0, "s");
    int running = f->server.calls != NULL && f->server.calls->running != NULL && s != NULL;
    pthread_mutex_unlock(&f->server.lock);
    if (running) break;
    usleep(10000);
  }
  json_t *msg = session_call(f, 2, "s", "return 1", "");
  assert_true(json_is_true(json_object_get(tool_result(msg, 2), "isError")));
  char *busy = json_dumps(msg, 0);
  assert_non_null(strstr(busy, "session busy"));
  free(busy);
  json_decref(msg);
  msg = next_message(f);
  json_decref(msg); /* the first call's time_limit */
  /* The cap: 31 more open, the next is refused and says so. */
  char id[16];
  for (int i = 0; i < MBXH_MCP_MAX_SESSIONS - 1; i++) {
    snprintf(id, sizeof id, "s%d", i);
    msg = session_call(f, 10 + i, id, "return 1", "");
    assert_true(json_is_false(json_object_get(tool_result(msg, 10 + i), "isError")));
    json_decref(msg);
  }
  msg = session_call(f, 100, "one-too-many", "return 1", "");
  assert_true(json_is_true(json_object_get(tool_result(msg, 100), "isError")));
  char *text = json_dumps(msg, 0);
  assert_non_null(strstr(text, "too many sessions"));
  free(text);
  json_decref(msg);
  assert_int_equal(mbxH_mcp_session_count(&f->server.sessions), MBXH_MCP_MAX_SESSIONS);
}

/* ---- peers (the HTTP transport's clients) through mbxH_mcp_handle_message ---- */

/* A reply sink that keeps every reply (NULL for "no reply"). */
typedef struct capture {
  pthread_mutex_t lock;
  pthread_cond_t changed;
  char *replies[64];
  int count;
} capture;

static void capture_reply(void *ctx, const char *json, size_t len) {
  capture *c = ctx;
  pthread_mutex_lock(&c->lock);
  assert_true(c->count < 64);
  c->replies[c->count++] = json ? strndup(json, len) : NULL;
  pthread_cond_broadcast(&c->changed);
  pthread_mutex_unlock(&c->lock);
}

/* Sends text as peer's message, waits for its one reply; returns it (owned by c). */
static const char *peer_call(fixture *f, capture *c, mbxH_mcp_peer *peer, const char *text) {
  mbxH_mcp_reply sink = {capture_reply, c};
  pthread_mutex_lock(&c->lock);
  int want = c->count + 1;
  pthread_mutex_unlock(&c->lock);
  mbxH_mcp_handle_message(&f->server, peer, &sink, text, strlen(text));
  pthread_mutex_lock(&c->lock);
  for (int i = 0; c->count < want && i < 600; i++) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100000000L;
    if (until.tv_nsec >= 1000000000L) until.tv_sec++, until.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&c->changed, &c->lock, &until);
  }
  assert_int_equal(c->count, want); /* exactly one reply */
  const char *r = c->replies[want - 1];
  pthread_mutex_unlock(&c->lock);
  return r;
}

static size_t owner_sessions(fixture *f, uint64_t owner) {
  pthread_mutex_lock(&f->server.lock);
  size_t n = mbxH_mcp_session_count_owner(&f->server.sessions, owner);
  pthread_mutex_unlock(&f->server.lock);
  return n;
}

static size_t all_sessions(fixture *f) {
  pthread_mutex_lock(&f->server.lock);
  size_t n = mbxH_mcp_session_count(&f->server.sessions);
  pthread_mutex_unlock(&f->server.lock);
  return n;
}

static void test_peers(void **state) {
  fixture *f = *state;
  capture c = {.count = 0};
  pthread_mutex_init(&c.lock, NULL);
  pthread_cond_init(&c.changed, NULL);
  mbxH_mcp_peer a = {.owner = 1, .max_calls = 4, .max_sessions = 2};
  mbxH_mcp_peer b = {.owner = 2, .max_calls = 4, .max_sessions = 2};
  static const char init[] = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":"
                             "{\"protocolVersion\":\"2025-11-25\"}}";
  /* Each peer is initialized on its own; a notification's reply is "none", once. */
  assert_non_null(strstr(peer_call(f, &c, &a, init), "\"protocolVersion\""));
  assert_true(a.initialized && !b.initialized);
  assert_null(
      peer_call(f, &c, &a, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
  assert_non_null(
      strstr(peer_call(f, &c, &b, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}"),
             "initialize first"));
  assert_non_null(peer_call(f, &c, &b, init));
  /* Session names are the peer's own. */
  static const char set_x[] =
      "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"run_lua\",\"arguments\":{\"session\":\"s\",\"code\":\"x = 7 "
      "return x\"}}}";
  static const char get_x[] =
      "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"run_lua\",\"arguments\":{\"session\":\"s\",\"code\":\"return "
      "x\"}}}";
  assert_non_null(strstr(peer_call(f, &c, &a, set_x), "\"value\":7"));
  assert_non_null(strstr(peer_call(f, &c, &b, get_x), "\"value\":null"));
  assert_non_null(strstr(peer_call(f, &c, &a, get_x), "\"value\":7"));
  /* The peer's cap on names (2): a third is refused. */
  static const char other[] = "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                              "\"name\":\"run_lua\",\"arguments\":{\"session\":\"%s\",\"code\":"
                              "\"return 1\"}}}";
  char line[256];
  snprintf(line, sizeof line, other, "t");
  assert_null(strstr(peer_call(f, &c, &a, line), "too many sessions"));
  snprintf(line, sizeof line, other, "u");
  assert_non_null(strstr(peer_call(f, &c, &a, line), "too many sessions"));
  assert_int_equal(owner_sessions(f, 1), 2);
  /* The peer goes: its sessions close, the other's stay. */
  mbxH_mcp_peer_gone(&f->server, 1);
  assert_int_equal(owner_sessions(f, 1), 0);
  assert_int_equal(owner_sessions(f, 2), 1);
  /* A peer gone with a call running in its session: the call is cancelled (no reply, once) and
     the session, busy then, is dropped after it. */
  mbxH_mcp_reply sink = {capture_reply, &c};
  static const char spin[] =
      "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
      "\"name\":\"run_lua\",\"arguments\":{\"session\":\"s\",\"code\":\"while "
      "true do end\"}}}";
  int before = c.count;
  mbxH_mcp_handle_message(&f->server, &b, &sink, spin, strlen(spin));
  for (int i = 0; i < 6000; i++) {
    pthread_mutex_lock(&f->server.lock);
    int running = f->server.calls != NULL && f->server.calls->running != NULL;
    pthread_mutex_unlock(&f->server.lock);
    if (running) break;
    usleep(10000);
  }
  mbxH_mcp_peer_gone(&f->server, 2);
  for (int i = 0; i < 6000 && (owner_sessions(f, 2) != 0 || all_sessions(f) != 0); i++)
    usleep(10000);
  assert_int_equal(all_sessions(f), 0);
  pthread_mutex_lock(&c.lock);
  for (int i = 0; i < 600 && c.count < before + 1; i++) {
    pthread_mutex_unlock(&c.lock);
    usleep(100000);
    pthread_mutex_lock(&c.lock);
  }
  assert_int_equal(c.count, before + 1);
  assert_null(c.replies[before]);
  pthread_mutex_unlock(&c.lock);
  for (int i = 0; i < c.count; i++)
    free(c.replies[i]);
  pthread_cond_destroy(&c.changed);
  pthread_mutex_destroy(&c.lock);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_before_initialize, setup, teardown),
      cmocka_unit_test_setup_teardown(test_older_version_answered, setup, teardown),
      cmocka_unit_test_setup_teardown(test_malformed_messages, setup, teardown),
      cmocka_unit_test_setup_teardown(test_tools_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_lua, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bad_arguments, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_lua_modules, setup, teardown),
      cmocka_unit_test_setup_teardown(test_run_lua_stdin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_check_lua, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_call_cancel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_progress, setup, teardown),
      cmocka_unit_test_setup_teardown(test_sessions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_session_busy_and_cap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_peers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_session_hibernates, setup, teardown),
      cmocka_unit_test_setup_teardown(test_busy_session_stays_awake, setup, teardown),
  };
  return cmocka_run_group_tests_name("host/mcp_server", tests, NULL, NULL);
}
