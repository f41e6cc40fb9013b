/* tests/host/test_pause.c -- unit tests of pause/resume (host/sandbox.c mbx_resume, vm/run.c,
   the external trampoline and the coroutine wrappers) through the public API. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static mbx_sandbox *pausing_sandbox(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_add_external(p, "tools.fetch", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "ask", &err), MBX_OK);
  if (which) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static char last_json[8192];

/* Keep what a result says, free it, return its status. */
static mbx_status take(mbx_status s, mbx_result *res, mbx_error *err) {
  if (s >= MBX_API_ERROR_BASE) {
    snprintf(last_json, sizeof last_json, "API %s: %s", mbx_status_name(s), err->message);
    return s;
  }
  snprintf(last_json, sizeof last_json, "%s", mbx_result_json(res, NULL));
  mbx_result_free(res);
  return s;
}

static mbx_status start(mbx_sandbox *sb, const char *code) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  return take(s, res, &err);
}

static mbx_status answer(mbx_sandbox *sb, const char *json) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_resume(sb, json, json ? strlen(json) : 0, &res, &err);
  return take(s, res, &err);
}

static mbx_status refuse(mbx_sandbox *sb, const char *message) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_resume_error(sb, message, strlen(message), &res, &err);
  return take(s, res, &err);
}

static void contains(const char *fragment) {
  if (strstr(last_json, fragment) == NULL)
    fail_msg("result %s\n  does not contain %s", last_json, fragment);
}

/* Run code; every pause must be at tools.fetch and is answered with the next of answers. */
static void drive(const char *code, const char *const *answers, size_t n, const char *value) {
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  mbx_status s = start(sb, code);
  for (size_t i = 0; i < n; i++) {
    if (s != MBX_PAUSED) fail_msg("%s\n  pause %zu expected, got %s", code, i, last_json);
    contains("\"function\":\"tools.fetch\"");
    assert_int_equal(mbx_sandbox_paused(sb), 1);
    s = answer(sb, answers[i]);
  }
  if (s != MBX_OK) fail_msg("%s\n  ended with %s", code, last_json);
  contains(value);
  assert_int_equal(mbx_sandbox_paused(sb), 0);
  mbx_sandbox_free(sb);
}

static void pause_in_main_chunk(void **state) {
  (void)state;
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  assert_int_equal(start(sb, "print('before') local v = tools.fetch('a', 1, {k = true}) "
                             "print('after') return v * 2"),
                   MBX_PAUSED);
  contains("\"pending\":{\"args\":[\"a\",1,{\"k\":true}],\"function\":\"tools.fetch\"}");
  contains("\"stdout\":\"before\\n\"");
  contains("\"host_calls\":1");
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  assert_int_equal(answer(sb, "21"), MBX_OK);
  contains("\"value\":42");
  contains("\"stdout\":\"after\\n\"");
  contains("\"pending\":null");
  /* Globals persist after a resumed run, like any run. */
  assert_int_equal(start(sb, "return ask() or 'nil'"), MBX_PAUSED);
  assert_int_equal(answer(sb, NULL), MBX_OK);
  contains("\"value\":\"nil\"");
  assert_int_equal(start(sb, "return ask()"), MBX_PAUSED);
  assert_int_equal(answer(sb, "null"), MBX_OK);
  contains("\"value\":null");
  mbx_sandbox_free(sb);
}

/* The run thread and the pending call travel with the state (vm/run.c keeps C pointers to
   them in the vm: vm/vm.h): a checkpoint taken while paused rewinds to that pause, the same
   run resumes from it twice, and a reset leaves nothing paused behind. */
static void a_pause_through_checkpoint_rewind_and_reset(void **state) {
  (void)state;
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  mbx_error err;
  assert_int_equal(start(sb, "n = (n or 0) + 1 local v = tools.fetch(n) return v + n"), MBX_PAUSED);
  contains("\"args\":[1]");
  /* MBX_ARENA_MALLOC builds have no checkpoints: the reset half still runs there. */
  mbx_status ck = mbx_sandbox_checkpoint(sb, &err);
  if (ck != MBX_UNSUPPORTED) assert_int_equal(ck, MBX_OK);
  assert_int_equal(answer(sb, "10"), MBX_OK);
  contains("\"value\":11");
  assert_int_equal(mbx_sandbox_paused(sb), 0);
  /* A clean run in between (it reuses the run thread), then back to the pause. */
  assert_int_equal(start(sb, "return n"), MBX_OK);
  contains("\"value\":1");
  if (ck == MBX_OK) {
    assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
    assert_int_equal(mbx_sandbox_paused(sb), 1);
    assert_int_equal(answer(sb, "20"), MBX_OK);
    contains("\"value\":21");
    assert_int_equal(start(sb, "return n"), MBX_OK);
    contains("\"value\":1");
  }
  /* Paused again, then reset: a new sandbox's state, nothing pending, runs accepted. */
  assert_int_equal(start(sb, "return ask()"), MBX_PAUSED);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_paused(sb), 0);
  assert_int_equal(answer(sb, "1"), MBX_INVALID_ARGUMENT);
  assert_int_equal(start(sb, "return n == nil, ask ~= nil"), MBX_OK);
  contains("\"value\":[true,true]");
  contains("\"pending\":null");
  mbx_sandbox_free(sb);
}

static void pause_in_nested_calls_and_loops(void **state) {
  (void)state;
  static const char *const three[] = {"1", "2", "{\"x\":[3]}"};
  drive("local function f(n) return tools.fetch(n) end "
        "local function g() local t = {} for i = 1, 2 do t[i] = f(i) end return t end "
        "local t = g() return t[1] + t[2] + f(3).x[1]",
        three, 3, "\"value\":6");
  /* In a metamethod the VM calls from Lua code, and in a for iterator. */
  static const char *const two[] = {"10", "20"};
  drive("local mt = {__index = function(t, k) return tools.fetch(k) end, "
        "__add = function(a, b) return tools.fetch('add') end} "
        "local o = setmetatable({}, mt) return o.x + (o + o)",
        two, 2, "\"value\":30");
  drive("local function it(s, i) if i < 2 then return i + 1, tools.fetch(i) end end "
        "local sum = 0 for i, v in it, nil, 0 do sum = sum + v end return sum",
        two, 2, "\"value\":30");
}

static void pause_inside_pcall_and_xpcall(void **state) {
  (void)state;
  static const char *const one[] = {"5"};
  drive("local ok, v = pcall(function() return tools.fetch() + 1 end) return {ok, v}", one, 1,
        "\"value\":[true,6]");
  drive("local ok, v = xpcall(function(a) return tools.fetch() + a end, print, 2) "
        "return {ok, v}",
        one, 1, "\"value\":[true,7]");
  drive("return pcall(pcall, function() return tools.fetch() end)", one, 1,
        "\"value\":[true,true,5]");
  /* An error answer is caught by the guest's pcall with the host's message exactly. */
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  assert_int_equal(start(sb, "local ok, e = pcall(tools.fetch, 'u') return {ok, e}"), MBX_PAUSED);
  assert_int_equal(refuse(sb, "HTTP 404: not found"), MBX_OK);
  contains("\"value\":[false,\"HTTP 404: not found\"]");
  /* Uncaught, it ends the run as a runtime error (not poisoned). */
  assert_int_equal(start(sb, "return tools.fetch()"), MBX_PAUSED);
  assert_int_equal(refuse(sb, "denied by the user"), MBX_RUNTIME_ERROR);
  contains("denied by the user");
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  mbx_sandbox_free(sb);
}

static void pause_inside_guest_coroutines(void **state) {
  (void)state;
  static const char *const two[] = {"1", "2"};
  drive("local co = coroutine.create(function(x) local a = tools.fetch(x) "
        "local b = coroutine.yield(a + 100) return a + b + tools.fetch(x) end) "
        "local ok1, y = coroutine.resume(co, 'q') local ok2, z = coroutine.resume(co, 1000) "
        "return {ok1, y, ok2, z, coroutine.status(co)}",
        two, 2, "\"value\":[true,101,true,1003,\"dead\"]");
  drive("local gen = coroutine.wrap(function() for i = 1, 2 do coroutine.yield(tools.fetch(i)) "
        "end end) local s = 0 for v in gen do s = s + v end return s",
        two, 2, "\"value\":3");
  /* Nested coroutines, the pause three levels down. */
  drive("local inner = coroutine.wrap(function() return tools.fetch() * 10 end) "
        "local mid = coroutine.wrap(function() return inner() + tools.fetch() end) "
        "local ok, v = coroutine.resume(coroutine.create(function() return mid() end)) "
        "return {ok, v}",
        two, 2, "\"value\":[true,12]");
  /* An error answer inside a coroutine comes out of resume as (false, message). */
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  assert_int_equal(start(sb, "return coroutine.resume(coroutine.create(function() "
                             "return tools.fetch() end))"),
                   MBX_PAUSED);
  assert_int_equal(refuse(sb, "boom"), MBX_OK);
  contains("\"value\":[false,\"boom\"]");
  mbx_sandbox_free(sb);
}

static void resume_rules(void **state) {
  (void)state;
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  mbx_result *res = NULL;
  mbx_error err;
  /* Not paused. */
  assert_int_equal(mbx_resume(sb, "1", 1, &res, &err), MBX_INVALID_ARGUMENT);
  assert_null(res);
  assert_int_equal(start(sb, "return tools.fetch() + 1"), MBX_PAUSED);
  /* mbx_run refuses while paused. */
  assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 0, &res, &err), MBX_SANDBOX_PAUSED);
  assert_null(res);
  /* Bad JSON: refused, still paused, and a good answer then works. */
  assert_int_equal(mbx_resume(sb, "{nope", 5, &res, &err), MBX_INVALID_INPUT);
  assert_null(res);
  assert_non_null(strstr(err.message, "not valid JSON"));
  assert_int_equal(mbx_sandbox_paused(sb), 1);
  assert_int_equal(mbx_resume(NULL, "1", 1, &res, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_resume(sb, "1", 1, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(answer(sb, "41"), MBX_OK);
  contains("\"value\":42");
  /* Reset abandons a paused run. */
  assert_int_equal(start(sb, "x = 1 return tools.fetch()"), MBX_PAUSED);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_paused(sb), 0);
  assert_int_equal(start(sb, "return x"), MBX_OK);
  contains("\"value\":null");
  /* A guest yield out of the main chunk is still no pause. */
  assert_int_equal(start(sb, "coroutine.yield(1)"), MBX_RUNTIME_ERROR);
  contains("attempt to yield from outside a coroutine");
  mbx_sandbox_free(sb);
}

static void pauses_count_as_host_calls(void **state) {
  (void)state;
  mbx_sandbox *sb = pausing_sandbox(MBX_LIMIT_HOST_CALLS, 3);
  mbx_status s = start(sb, "while true do pcall(tools.fetch) end");
  int pauses = 0;
  while (s == MBX_PAUSED) {
    pauses++;
    s = answer(sb, "1");
  }
  assert_int_equal(pauses, 3);
  assert_int_equal(s, MBX_HOST_CALL_LIMIT);
  contains("\"host_calls\":3");
  contains("host call limit exceeded");
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  mbx_sandbox_free(sb);
}

static void host_time_while_paused_is_free(void **state) {
  (void)state;
  mbx_sandbox *sb = pausing_sandbox(MBX_LIMIT_TIME_MS, 100);
  assert_int_equal(start(sb, "local n = 0 for i = 1, 3 do n = n + tools.fetch() end return n"),
                   MBX_PAUSED);
  for (int i = 0; i < 3; i++) {
    struct timespec ts = {0, 150 * 1000 * 1000}; /* longer than the whole limit */
    nanosleep(&ts, NULL);
    mbx_status s = answer(sb, "1");
    assert_int_equal(s, i < 2 ? MBX_PAUSED : MBX_OK);
  }
  contains("\"value\":3");
  /* Each resume gets its own deadline: a loop after a resume still trips. */
  assert_int_equal(start(sb, "tools.fetch() while true do end"), MBX_PAUSED);
  assert_int_equal(answer(sb, "1"), MBX_TIME_LIMIT);
  mbx_sandbox_free(sb);
}

/* Where Lua cannot suspend the C code between the call and the run, a catchable error. */
static void places_that_cannot_pause(void **state) {
  (void)state;
  static const char *const places[][2] = {
      {"table.sort({3, 1, 2}, function(a, b) tools.fetch() return a < b end)", "'sort'"},
      {"string.gsub('abc', '%w', function(c) return tools.fetch(c) end)", "'gsub'"},
      {"tostring(setmetatable({}, {__tostring = function() return tools.fetch() end}))",
       "'tostring'"},
      {"string.format('%s', setmetatable({}, {__tostring = function() return tools.fetch() "
       "end}))",
       "cannot pause here"},
      {"print(setmetatable({}, {__tostring = function() return tools.fetch() end}))", "'print'"},
      {"for i, v in ipairs(setmetatable({}, {__index = function(t, i) if i < 2 then "
       "return tools.fetch() end end})) do end",
       "cannot pause here: called from a C function"},
      {"load(function() return tools.fetch() end)", "'load'"},
      {"table.sort({3, 1, 2}, function(a, b) coroutine.wrap(function() tools.fetch() end)() "
       "return a < b end)",
       "inside a coroutine resumed from a C function"},
  };
  for (size_t i = 0; i < sizeof places / sizeof *places; i++) {
    mbx_sandbox *sb = pausing_sandbox(0, 0);
    char code[1024];
    /* Caught by pcall: the guest can fall back; load swallows its reader's error. */
    snprintf(code, sizeof code,
             "local ok, e = pcall(function() %s end) "
             "if ok then return 'no error' end return e",
             places[i][0]);
    mbx_status s = start(sb, code);
    if (s != MBX_OK) fail_msg("%s\n  %s", places[i][0], last_json);
    if (strstr(last_json, "tools.fetch cannot pause here") == NULL &&
        strstr(places[i][0], "load(") == NULL)
      fail_msg("%s\n  %s", places[i][0], last_json);
    if (strstr(places[i][0], "load(") == NULL) contains(places[i][1]);
    assert_int_equal(mbx_sandbox_paused(sb), 0);
    mbx_sandbox_free(sb);
  }
  /* load returns nil and the message rather than raising (stock behaviour for readers). */
  mbx_sandbox *sb = pausing_sandbox(0, 0);
  assert_int_equal(start(sb, "local f, e = load(function() return tools.fetch() end) return e"),
                   MBX_OK);
  contains("tools.fetch cannot pause here");
  contains("'load'");
  /* An xpcall message handler runs where Lua cannot yield; the refusal is an error inside
     the handler, which stock Lua reports as "error in error handling". The host is never
     reached. */
  assert_int_equal(start(sb, "return xpcall(error, function(m) return tools.fetch() end, 'x')"),
                   MBX_OK);
  contains("\"value\":[false,\"error in error handling\"]");
  contains("\"host_calls\":0");
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pause_in_main_chunk),
      cmocka_unit_test(a_pause_through_checkpoint_rewind_and_reset),
      cmocka_unit_test(pause_in_nested_calls_and_loops),
      cmocka_unit_test(pause_inside_pcall_and_xpcall),
      cmocka_unit_test(pause_inside_guest_coroutines),
      cmocka_unit_test(resume_rules),
      cmocka_unit_test(pauses_count_as_host_calls),
      cmocka_unit_test(host_time_while_paused_is_free),
      cmocka_unit_test(places_that_cannot_pause),
  };
  return cmocka_run_group_tests_name("host/pause", tests, snippet_setup, snippet_teardown);
}
