/* tests/stdlib/test_hostcall.c -- unit tests of stdlib/hostcall.c (and capabilities/hostfn.c)
   through the public API: synchronous host functions, their names, errors, caps, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* What the last callback saw. */
static char seen_args[4096];
static int calls;

/* Replies with its arguments' JSON: arguments round-trip through the host. */
static mbx_status echo(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  calls++;
  snprintf(seen_args, sizeof seen_args, "%.*s", (int)len, args);
  return mbx_host_reply_json(reply, args, len);
}

/* Replies with the JSON text in userdata. */
static mbx_status answer(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)args;
  (void)len;
  calls++;
  return mbx_host_reply_json(reply, ud, strlen(ud));
}

static mbx_status fail_with_message(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  mbx_host_reply_error(reply, "no such user: bob", 17);
  return MBX_RUNTIME_ERROR;
}

static mbx_status fail_silently(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  (void)reply;
  return MBX_NO_MEMORY;
}

static mbx_status nothing(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  (void)reply;
  calls++;
  return MBX_OK;
}

static mbx_status huge_reply(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  size_t n = (size_t)MBX_HOST_REPLY_MAX + 2;
  char *big = malloc(n);
  memset(big, ' ', n);
  big[0] = '1';
  mbx_status s = mbx_host_reply_json(reply, big, n);
  free(big);
  assert_int_equal(s, MBX_INVALID_ARGUMENT);
  return MBX_OK;
}

static mbx_status slow(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  struct timespec ts = {0, 60 * 1000 * 1000};
  nanosleep(&ts, NULL);
  return mbx_host_reply_json(reply, "true", 4);
}

/* Re-entrancy: the callback tries to run the sandbox that is calling it. */
static mbx_status reenter(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)args;
  (void)len;
  mbx_sandbox **sbp = ud;
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(*sbp, "return 1", 8, NULL, 0, &res, &err);
  char text[64];
  snprintf(text, sizeof text, "\"%s\"", mbx_status_name(s));
  return mbx_host_reply_json(reply, text, strlen(text));
}

static mbx_sandbox *reenter_target;

/* Replies with the text of its one string argument (["..."], no escapes in the tests), after
   checking the arguments are NUL-terminated at args_len as documented. */
static mbx_status reply_text(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  calls++;
  if (strlen(args) != len) return mbx_host_reply_error(reply, "args not NUL-terminated", 23);
  if (len < 4 || memcmp(args, "[\"", 2) != 0 || memcmp(args + len - 2, "\"]", 2) != 0)
    return mbx_host_reply_error(reply, "want one string", 15);
  return mbx_host_reply_json(reply, args + 2, len - 4);
}

static mbx_policy *tool_policy(void) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_add_function(p, "tools.echo", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.deep.answer", answer,
                                           "{\"b\":[1,2.5,\"x\",null,true],\"a\":{}}", &err),
                   MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.fail", fail_with_message, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.silent", fail_silently, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.nothing", nothing, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.bad", answer, "{\"a\":", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.huge", huge_reply, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.slow", slow, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.reenter", reenter, &reenter_target, &err),
                   MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "now", answer, "1700000000", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.text", reply_text, NULL, &err), MBX_OK);
  /* An MCP tool's name: the last part may be a key with '-' (code mode, docs/code-mode.md). */
  assert_int_equal(mbx_policy_add_function(p, "tools.mem.create-entities", echo, NULL, &err),
                   MBX_OK);
  return p;
}

static mbx_sandbox *tool_sandbox(mbx_limit which, uint64_t value) {
  mbx_policy *p = tool_policy();
  if (which) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static void check_in(mbx_sandbox *sb, const char *code, const char *json) {
  static snippet_outcome o;
  if (snippet_run_in(sb, code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

static void arguments_and_results_cross_as_json(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  check_in(sb, "return tools.echo(1, 'x', nil, {a = 1, b = {true, false}}, 2.5, -7)",
           "[1,\"x\",null,{\"a\":1,\"b\":[true,false]},2.5,-7]");
  assert_string_equal(seen_args, "[1,\"x\",null,{\"a\":1,\"b\":[true,false]},2.5,-7]");
  /* Integers exact, bytes as $bytes, empty arrays stay arrays. */
  check_in(sb,
           "local t = tools.echo(math.maxinteger, '\\xff', json.array({})) "
           "return t[1] == math.maxinteger, t[2] == '\\xff', json.encode(t[3])",
           "[true,true,\"[]\"]");
  check_in(sb, "return tools.echo()", "[]");
  assert_string_equal(seen_args, "[]");
  check_in(sb, "return tools.deep.answer()", "{\"a\":{},\"b\":[1,2.5,\"x\",null,true]}");
  check_in(sb, "return select('#', tools.nothing())", "0");
  check_in(sb, "return now()", "1700000000");
  check_in(sb, "return tools.mem['create-entities']{n = 1}", "[{\"n\":1}]");
  mbx_sandbox_free(sb);
}

/* Small integer replies skip the decoder's protected call (stdlib/hostcall.c): every reply
   must still give what the codec gives (json.decode of the same text), type and value, or
   the same failure. Arguments past the encoder's 256-byte C buffer are NUL-terminated too. */
static void replies_decode_as_the_codec_does(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  check_in(sb,
           "local texts = {'0', '-0', '7', '-7', '007', '-', '--1', '123456789012345678', "
           "'-123456789012345678', '1234567890123456789', '9223372036854775807', "
           "'9223372036854775808', '-9223372036854775808', '-9223372036854775809', ' 5', "
           "'5 ', '1e3', '1.0', '+1', '0x10', '12a', '-01', 'true', 'null'} "
           "local bad = 0 "
           "for _, t in ipairs(texts) do "
           "  local ok1, a = pcall(tools.text, t) local ok2, b = pcall(json.decode, t) "
           "  if t == 'null' then b = nil end "
           "  if ok1 ~= ok2 or (ok1 and (math.type(a) ~= math.type(b) or a ~= b)) then "
           "    error('reply ' .. t .. ': ' .. tostring(a) .. ' vs ' .. tostring(b)) end "
           "  if not ok1 then bad = bad + 1 end "
           "end "
           "return bad, math.type(tools.text('-0')), tools.text('123456789012345678')",
           "[7,\"integer\",123456789012345678]");
  /* 400 digits: past the C buffer; the callback refuses unterminated arguments, and the
     number is out of the decoder's range (the general path's error). */
  check_in(sb,
           "local ok, e = pcall(tools.text, ('7'):rep(400)) "
           "return ok, e:find('NUL') == nil, e:find('out of range') ~= nil",
           "[false,true,true]");
  check_in(sb, "local s = ('y'):rep(300) local r = tools.echo(s, 1) return r[1] == s, r[2]",
           "[true,1]");
  mbx_sandbox_free(sb);
}

static void host_errors_are_catchable(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  check_in(sb, "return pcall(tools.fail, 1)", "[false,\"no such user: bob\"]");
  check_in(sb, "local ok, e = pcall(tools.silent) return ok, e",
           "[false,\"tools.silent failed: the host is out of memory\"]");
  check_in(sb,
           "local ok, e = pcall(tools.bad) return ok, e:find('tools.bad: the host "
           "returned invalid JSON', 1, true) ~= nil",
           "[false,true]");
  check_in(sb,
           "local ok, e = pcall(tools.huge) return ok, e:find('more than the', 1, true) "
           "~= nil",
           "[false,true]");
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "tools.fail()", &o), MBX_RUNTIME_ERROR);
  assert_non_null(strstr(o.value, "no such user: bob"));
  /* Not poisoned: a host error is an ordinary runtime error. */
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  mbx_sandbox_free(sb);
}

static void bad_arguments_are_refused_before_the_host(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  calls = 0;
  check_in(sb, "local ok, e = pcall(tools.echo, 1, print) return ok, e",
           "[false,\"tools.echo(#2): cannot encode a function as JSON\"]");
  check_in(sb,
           "local t = {} t.self = t local ok, e = pcall(tools.echo, t) return ok, "
           "e:find('tools.echo(#1)', 1, true) ~= nil",
           "[false,true]");
  check_in(sb,
           "local ok, e = pcall(tools.echo, string.rep('x', 2 * 1024 * 1024)) "
           "return ok, e:find('the most a host call takes', 1, true) ~= nil",
           "[false,true]");
  assert_int_equal(calls, 0);
  mbx_sandbox_free(sb);
}

static void modules_and_require(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  check_in(sb,
           "return require('tools') == tools, require('tools').deep == tools.deep, "
           "type(tools.echo)",
           "[true,true,\"function\"]");
  /* The name cannot be shadowed by an input. */
  mbx_result *res = NULL;
  mbx_error err;
  assert_int_equal(mbx_run(sb, "return 1", 8, "{\"tools\": 1}", 12, &res, &err), MBX_INVALID_INPUT);
  assert_non_null(strstr(err.message, "shadow"));
  /* Reset installs them again on the pristine state. */
  check_in(sb, "tools = nil return 1", "1");
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  check_in(sb, "return tools.echo(5)", "[5]");
  mbx_sandbox_free(sb);
}

static void names_are_validated(void **state) {
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  static const char *const bad[] = {
      "",         "1tools", "tools..x", "tools.",      ".tools",    "tools.end",  "string",
      "os.fetch", "json.x", "print",    "tools-x",     "a.b.c.d.e", "require",    "tools.x y",
      "_G.evil",  "cjson",  "mem-x.y",  "tools.a-b.c", "tools.x.",  "tools.x.end"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    if (mbx_policy_add_function(p, bad[i], echo, NULL, &err) != MBX_INVALID_ARGUMENT)
      fail_msg("name '%s' was accepted", bad[i]);
    assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  }
  char long_name[200];
  memset(long_name, 'a', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  assert_int_equal(mbx_policy_add_function(p, long_name, echo, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(p, "tools.x", NULL, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(NULL, "tools.x", echo, NULL, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(p, "tools.x", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.x", echo, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "already defined"));
  assert_int_equal(mbx_policy_add_external(p, "tools.x.y", &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "clashes"));
  assert_int_equal(mbx_policy_add_function(p, "tools", echo, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(p, "tools.ok_2", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "_private", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.mem.read-graph_2", echo, NULL, &err), MBX_OK);
  mbx_policy_free(p);
}

/* Every global of a live sandbox is refused as a top-level name: the static list in
   capabilities/hostfn.c covers the real built-ins. */
static void builtins_cannot_be_shadowed(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("local t = {} for k in pairs(_G) do t[#t + 1] = k end "
                               "table.sort(t) return table.concat(t, ' ')",
                               &o),
                   MBX_OK);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  char names[8192];
  assert_true(strlen(o.value) < sizeof names);
  memcpy(names, o.value + 1, strlen(o.value)); /* skip the JSON quote; the NUL comes along */
  names[strlen(names) - 1] = '\0';
  int checked = 0;
  for (char *save = NULL, *name = strtok_r(names, " ", &save); name;
       name = strtok_r(NULL, " ", &save), checked++)
    if (mbx_policy_add_function(p, name, echo, NULL, &err) != MBX_INVALID_ARGUMENT)
      fail_msg("the built-in '%s' could be shadowed", name);
  assert_true(checked > 25);
  mbx_policy_free(p);
}

static void host_calls_are_counted_and_limited(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(MBX_LIMIT_HOST_CALLS, 3);
  mbx_result *res = NULL;
  mbx_error err;
  const char *code = "for i = 1, 3 do tools.echo(i) end return 1";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
  mbx_usage u;
  mbx_result_usage(res, &u);
  assert_int_equal(u.host_calls, 3);
  mbx_result_free(res);
  /* The count starts again with every run; the fourth call trips, pcall cannot hide it. */
  code = "for i = 1, 10 do pcall(tools.echo, i) end return 1";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_HOST_CALL_LIMIT);
  assert_non_null(strstr(mbx_result_error_message(res, NULL), "host call limit exceeded (3"));
  assert_non_null(strstr(mbx_result_json(res, NULL), "\"status\":\"host_call_limit\""));
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  mbx_sandbox_free(sb);
  /* Limit 0: no host calls at all. */
  sb = tool_sandbox(MBX_LIMIT_HOST_CALLS, 0);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "return tools.echo(1)", &o), MBX_HOST_CALL_LIMIT);
  mbx_sandbox_free(sb);
}

static void host_time_is_not_guest_time(void **state) {
  (void)state;
  /* 5 x 60 ms in the host under a 150 ms limit. */
  mbx_sandbox *sb = tool_sandbox(MBX_LIMIT_TIME_MS, 150);
  check_in(sb, "local n = 0 for i = 1, 5 do if tools.slow() then n = n + 1 end end return n", "5");
  /* The guest's own time still counts. */
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "tools.slow() while true do end", &o), MBX_TIME_LIMIT);
  mbx_sandbox_free(sb);
}

static void callbacks_cannot_reenter_their_sandbox(void **state) {
  (void)state;
  mbx_sandbox *sb = tool_sandbox(0, 0);
  reenter_target = sb;
  check_in(sb, "return tools.reenter()", "\"MBX_SANDBOX_BUSY\"");
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(arguments_and_results_cross_as_json),
      cmocka_unit_test(host_errors_are_catchable),
      cmocka_unit_test(bad_arguments_are_refused_before_the_host),
      cmocka_unit_test(modules_and_require),
      cmocka_unit_test(names_are_validated),
      cmocka_unit_test(builtins_cannot_be_shadowed),
      cmocka_unit_test(replies_decode_as_the_codec_does),
      cmocka_unit_test(host_calls_are_counted_and_limited),
      cmocka_unit_test(host_time_is_not_guest_time),
      cmocka_unit_test(callbacks_cannot_reenter_their_sandbox),
  };
  return cmocka_run_group_tests_name("stdlib/hostcall", tests, snippet_setup, snippet_teardown);
}
