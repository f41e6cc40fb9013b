/* tests/stdlib/test_os.c -- unit tests of stdlib/os.c: the virtual os (UTC clock and dates,
   virtual environment, os.exit ending the run and never the host, refused functions). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* 2023-11-14T22:13:20Z, a Tuesday. */
#define FIXED_TIME 1700000000

/* A sandbox whose policy fixes the clock and defines two variables. */
static mbx_sandbox *fixed_sandbox(void) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_time(p, FIXED_TIME, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(p, "API_URL", "https://example.com/v1", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(p, "EMPTY", "", &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  /* The sandbox copied the policy: changing or freeing it now changes nothing. */
  assert_int_equal(mbx_policy_set_env(p, "API_URL", "changed", &err), MBX_OK);
  mbx_policy_free(p);
  return sb;
}

static void check_fixed(const char *code, const char *json) {
  mbx_sandbox *sb = fixed_sandbox();
  snippet_outcome o;
  if (snippet_run_in(sb, code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
  mbx_sandbox_free(sb);
}

static void time_reads_the_port(void **state) {
  (void)state;
  check_fixed("return os.time(), os.time(nil)", "[1700000000,1700000000]");
  /* Without a fixed time: the real clock, an integer, close to the host's. */
  snippet_check_value("local t = os.time() return math.type(t), t > 1700000000",
                      "[\"integer\",true]");
}

static void time_of_a_table_is_utc_and_normalized(void **state) {
  (void)state;
  snippet_check_value("return os.time{year=1970, month=1, day=1, hour=0}, "
                      "os.time{year=2023, month=11, day=14, hour=22, min=13, sec=20}",
                      "[0,1700000000]");
  /* hour defaults to 12; month 13 is January of the next year; the table is updated. */
  snippet_check_value("local t = {year=2024, month=13, day=1} local x = os.time(t) "
                      "return x, t.year, t.month, t.day, t.hour, t.yday, t.wday, t.isdst",
                      "[1735732800,2025,1,1,12,1,4,false]");
  snippet_check_value("return os.time{year=2024, month=3, day=0, hour=0} == "
                      "os.time{year=2024, month=2, day=29, hour=0}",
                      "true");
  snippet_check_error("return os.time{year=2024, month=1}", MBX_RUNTIME_ERROR,
                      "field 'day' missing in date table");
  snippet_check_error("return os.time{year=2024, month='x', day=1}", MBX_RUNTIME_ERROR,
                      "field 'month' is not an integer");
  snippet_check_error("return os.time{year=2024, month=1, day=2^40}", MBX_RUNTIME_ERROR,
                      "field 'day' is out-of-bound");
  snippet_check_error("return os.time(5)", MBX_RUNTIME_ERROR, "table expected");
}

static void date_formats_in_utc(void **state) {
  (void)state;
  check_fixed("return os.date('%Y-%m-%d %H:%M:%S'), os.date('!%Y-%m-%d %H:%M:%S')",
              "[\"2023-11-14 22:13:20\",\"2023-11-14 22:13:20\"]");
  check_fixed("return os.date()", "\"Tue Nov 14 22:13:20 2023\"");
  snippet_check_value("return os.date('%c', 0), os.date('!%A %B %j %p %z %%', 86400)",
                      "[\"Thu Jan  1 00:00:00 1970\",\"Friday January 002 AM +0000 %\"]");
  snippet_check_value("return os.date('%Ey|%Od|%F|%T', 1700000000)",
                      "\"23|14|2023-11-14|22:13:20\"");
  snippet_check_value("return os.date('plain text, no specifiers', 0)",
                      "\"plain text, no specifiers\"");
  snippet_check_error("return os.date('%Ez', 0)", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'date' (invalid conversion specifier '%Ez')");
  snippet_check_error("return os.date('%Q', 0)", MBX_RUNTIME_ERROR,
                      "invalid conversion specifier '%Q'");
  snippet_check_error("return os.date('%', 0)", MBX_RUNTIME_ERROR,
                      "invalid conversion specifier '%'");
  snippet_check_error("return os.date('%Y', 1.5)", MBX_RUNTIME_ERROR, "number has no integer");
}

static void date_tables(void **state) {
  (void)state;
  check_fixed("local t, u = os.date('*t'), os.date('!*t') "
              "return t.year, t.month, t.day, t.hour, t.min, t.sec, t.wday, t.yday, t.isdst, "
              "u.hour == t.hour",
              "[2023,11,14,22,13,20,3,318,false,true]");
  /* A date table goes back to the same time: the sandbox has one zone, UTC. */
  snippet_check_value("for _, x in ipairs{0, 1, 86399, 951782400, 1700000000, -86400} do "
                      "  assert(os.time(os.date('*t', x)) == x, x) "
                      "end return true",
                      "true");
}

static void difftime_and_clock(void **state) {
  (void)state;
  snippet_check_value("return os.difftime(10, 4), math.type(os.difftime(1, 1))", "[6.0,\"float\"]");
  /* Both arguments are required, as in stock 5.4. */
  snippet_check_error("return os.difftime()", MBX_RUNTIME_ERROR, "number expected");
  snippet_check_error("return os.difftime(5)", MBX_RUNTIME_ERROR, "bad argument #2");
  /* os.clock is this run's CPU time: a float that starts near 0 and grows with work. */
  snippet_check_value("local a = os.clock() local x = 0 for i = 1, 3e6 do x = x + i end "
                      "local b = os.clock() "
                      "return math.type(a), a >= 0 and a < 0.5, b > a",
                      "[\"float\",true,true]");
}

static void getenv_sees_only_the_policy(void **state) {
  (void)state;
  check_fixed("return os.getenv('API_URL'), os.getenv('EMPTY'), os.getenv('HOME'), "
              "os.getenv('PATH'), os.getenv('API_URL\\0x')",
              "[\"https://example.com/v1\",\"\",null,null,null]");
  snippet_check_value("return os.getenv('HOME'), os.getenv('PATH'), os.getenv('USER')",
                      "[null,null,null]");
  snippet_check_error("return os.getenv()", MBX_RUNTIME_ERROR, "string expected");
}

static void exit_ends_the_run_not_the_host(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  snippet_outcome o;
  mbx_result *res = NULL;
  mbx_error err;
  int64_t code = -1;
  const char *ok_forms[] = {
      "os.exit()",        "os.exit(true)",  "os.exit(0)",
      "os.exit(0, true)", "pcall(os.exit)", "print('before') pcall(os.exit, true) print('after')"};
  for (size_t i = 0; i < sizeof ok_forms / sizeof *ok_forms; i++) {
    const char *src = ok_forms[i];
    assert_int_equal(mbx_run(sb, src, strlen(src), NULL, 0, &res, &err), MBX_OK);
    assert_string_equal(mbx_result_value_json(res, NULL), "null");
    assert_int_equal(mbx_result_exit_code(res, &code), 1);
    assert_int_equal(code, 0);
    assert_int_equal(mbx_result_error(res, &err), 0);
    mbx_result_free(res);
  }
  /* The output so far is kept; nothing after the exit runs. */
  assert_int_equal(snippet_run_in(sb, "print('before') pcall(os.exit) print('after')", &o), MBX_OK);
  assert_string_equal(o.out, "before\n");
  /* A nonzero code is a runtime error "os.exit(N)"; false is 1, as in stock Lua. */
  const char *src = "local ok = pcall(os.exit, 3) return 'not reached'";
  assert_int_equal(mbx_run(sb, src, strlen(src), NULL, 0, &res, &err), MBX_RUNTIME_ERROR);
  assert_int_equal(mbx_result_exit_code(res, &code), 1);
  assert_int_equal(code, 3);
  assert_string_equal(mbx_result_error_message(res, NULL), "os.exit(3)");
  assert_string_equal(mbx_result_value_json(res, NULL), "null");
  mbx_result_free(res);
  assert_int_equal(snippet_run_in(sb, "os.exit(false)", &o), MBX_RUNTIME_ERROR);
  assert_string_equal(o.value, "os.exit(1)");
  assert_int_equal(snippet_run_in(sb, "os.exit(-7)", &o), MBX_RUNTIME_ERROR);
  assert_string_equal(o.value, "os.exit(-7)");
  /* Neither is a fault: the sandbox keeps running, with its globals. */
  assert_false(mbx_sandbox_poisoned(sb));
  assert_int_equal(snippet_run_in(sb, "kept = 41 os.exit()", &o), MBX_OK);
  assert_int_equal(snippet_run_in(sb, "return kept + 1", &o), MBX_OK);
  assert_string_equal(o.value, "42");
  /* An ordinary run is not an exit. */
  src = "return 1";
  assert_int_equal(mbx_run(sb, src, strlen(src), NULL, 0, &res, &err), MBX_OK);
  assert_int_equal(mbx_result_exit_code(res, NULL), 0);
  mbx_result_free(res);
  assert_int_equal(mbx_result_exit_code(NULL, &code), 0);
  mbx_sandbox_free(sb);
  snippet_check_error("os.exit('x')", MBX_RUNTIME_ERROR, "bad argument #1 to 'exit'");
}

static void exit_cannot_be_swallowed(void **state) {
  (void)state;
  /* Every way guest code catches errors: the exit passes through all of them. */
  snippet_check_error("for i = 1, 3 do pcall(os.exit, 5) end error('still running')",
                      MBX_RUNTIME_ERROR, "os.exit(5)");
  snippet_check_error("xpcall(os.exit, function() return 'handled' end, 6) "
                      "error('still running')",
                      MBX_RUNTIME_ERROR, "os.exit(6)");
  snippet_check_error("local co = coroutine.wrap(function() os.exit(8) end) pcall(co) "
                      "error('still running')",
                      MBX_RUNTIME_ERROR, "os.exit(8)");
  snippet_check_error("local ok = coroutine.resume(coroutine.create(os.exit), 9) "
                      "error('still running')",
                      MBX_RUNTIME_ERROR, "os.exit(9)");
  snippet_check_error("do local x <close> = setmetatable({}, {__close = function() "
                      "  while true do end end}) os.exit(4) end",
                      MBX_RUNTIME_ERROR, "os.exit(4)");
  /* A limit reached first wins over a later exit. */
  mbx_sandbox *sb = snippet_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 10000);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "pcall(function() while true do end end) os.exit()", &o),
                   MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
}

static void removed_functions_say_why(void **state) {
  (void)state;
  /* remove, rename and tmpname work on the sandbox's view (tests/stdlib/test_io.c). */
  snippet_check_value("local a, b = {os.remove('/tmp/x')}, {os.rename('/tmp/x', '/tmp/y')} "
                      "return a[1], a[2], a[3], b[1], b[2], b[3]",
                      "[null,\"/tmp/x: No such file or directory\",2,null,"
                      "\"/tmp/x: No such file or directory\",2]");
  /* os.execute() asks whether a shell is there (stock: true when one is): not without exec. */
  snippet_check_value("return os.execute()", "false");
  snippet_check_error("os.execute('ls')", MBX_RUNTIME_ERROR,
                      "os.execute is not available: this policy grants no exec");
  snippet_check_error("proc.run{'ls'}", MBX_RUNTIME_ERROR,
                      "proc.run is not available: this policy grants no exec");
  /* setlocale answers as stock Lua does when only "C" exists. */
  snippet_check_value("return os.setlocale(), os.setlocale('C'), os.setlocale(''), "
                      "os.setlocale(nil, 'time'), os.setlocale('de_DE.UTF-8')",
                      "[\"C\",\"C\",\"C\",\"C\",null]");
  snippet_check_error("return os.setlocale('C', 'bogus')", MBX_RUNTIME_ERROR, "invalid option");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(time_reads_the_port),
      cmocka_unit_test(time_of_a_table_is_utc_and_normalized),
      cmocka_unit_test(date_formats_in_utc),
      cmocka_unit_test(date_tables),
      cmocka_unit_test(difftime_and_clock),
      cmocka_unit_test(getenv_sees_only_the_policy),
      cmocka_unit_test(exit_ends_the_run_not_the_host),
      cmocka_unit_test(exit_cannot_be_swallowed),
      cmocka_unit_test(removed_functions_say_why),
  };
  return cmocka_run_group_tests_name("stdlib/os", tests, snippet_setup, snippet_teardown);
}
