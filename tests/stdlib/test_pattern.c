/* tests/stdlib/test_pattern.c -- unit tests of stdlib/pattern.c: string.find/match/gmatch/gsub
   results and errors, the budget charged by matching, and gmatch reuse after an error. */
#include <pthread.h>
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

/* ---- Running snippets: a fresh sandbox per snippet. ------------------------------------- */

static mbx_runtime *runtime;

typedef struct outcome {
  mbx_status status;
  char value[8192]; /* the value JSON when the run succeeded, else the full error message */
} outcome;

static mbx_status run_in(mbx_sandbox *sb, const char *code, outcome *o) {
  mbx_result *res = NULL;
  mbx_error err;
  memset(o, 0, sizeof *o);
  o->status = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (o->status >= MBX_API_ERROR_BASE)
    fail_msg("mbx_run refused %s: %s (%s)", code, mbx_status_name(o->status), err.message);
  assert_non_null(res);
  size_t len;
  const char *text =
      o->status == MBX_OK ? mbx_result_value_json(res, &len) : mbx_result_error_message(res, &len);
  if (len >= sizeof o->value) len = sizeof o->value - 1;
  memcpy(o->value, text, len);
  o->value[len] = '\0';
  mbx_result_free(res);
  return o->status;
}

/* A sandbox with the default policy and up to two limits changed (which == 0: unchanged). */
static mbx_sandbox *new_sandbox_with(mbx_limit a, uint64_t av, mbx_limit b, uint64_t bv) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (a != 0) assert_int_equal(mbx_policy_set_limit(p, a, av), MBX_OK);
  if (b != 0) assert_int_equal(mbx_policy_set_limit(p, b, bv), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static mbx_status run(const char *code, outcome *o) {
  mbx_sandbox *sb = new_sandbox_with(0, 0, 0, 0);
  mbx_status s = run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

static void check_value(const char *code, const char *json) {
  static outcome o;
  if (run(code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

static void check_error(const char *code, mbx_status status, const char *fragment) {
  static outcome o;
  run(code, &o);
  if (o.status != status)
    fail_msg("%s\n  ended with %s (%s), expected %s", code, mbx_status_name(o.status), o.value,
             mbx_status_name(status));
  if (strstr(o.value, fragment) == NULL)
    fail_msg("%s\n  error %s\n  does not contain %s", code, o.value, fragment);
}

static int group_setup(void **state) {
  (void)state;
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  return runtime == NULL ? -1 : 0;
}

static int group_teardown(void **state) {
  (void)state;
  mbx_runtime_free(runtime);
  runtime = NULL;
  return 0;
}

/* The a?^n a^n bomb: exponential backtracking over n characters, almost no VM instructions.
   Strings are built by doubling (string.rep is not available yet). */
#define BOMB                                                                                       \
  "local s, p = 'a', 'a?' for i = 1, 5 do s = s .. s p = p .. p end "                              \
  "return string.find(s, p .. s)"

/* ---- results ----------------------------------------------------------------------------- */

static void find_returns_positions_and_captures(void **state) {
  (void)state;
  check_value("return string.find('hello world', 'o w')", "[5,7]");
  check_value("return string.find('hello world', 'l+')", "[3,4]");
  check_value("return string.find('key = val', '(%w+)%s*=%s*(%w+)')", "[1,9,\"key\",\"val\"]");
  check_value("return string.find('hello', '()ll()')", "[3,4,3,5]");
  check_value("return string.find('abc', 'x')", "null");
  check_value("return string.find('abc', '')", "[1,0]");
  check_value("return ('hello'):find('l', -2)", "[4,4]");
  check_value("return string.find('abc', 'c', 10)", "null");
  check_value("return string.find('abc', '', 4)", "[4,3]");
  check_value("return string.find('abc', 'a', -100)", "[1,1]");
  /* '^' anchors only at the start of the pattern, '$' only at its end. */
  check_value("return string.find('a^b', 'a^b')", "[1,3]");
  check_value("return string.find('ab', '^b')", "null");
  check_value("return string.find('ab$', 'b$')", "null");
  check_value("return string.find('a$b', '$b')", "[2,3]");
}

static void plain_find_takes_the_text_literally(void **state) {
  (void)state;
  check_value("return string.find('a.b(c', '.', 1, true)", "[2,2]");
  check_value("return string.find('a.b(c', '(', 1, true)", "[4,4]");
  check_value("return string.find('x[%]y', '[%]', 1, true)", "[2,4]");
  check_value("return string.find('a\\0b', '\\0b')", "[2,3]");
  /* A needle across the windows plain find searches one at a time (256 KiB each). */
  check_value("local s = 'ab' for i = 1, 18 do s = s .. s end "
              "local hay = s .. 'xyz' .. s "
              "local a, b = string.find(hay, 'bxyza', 1, true) "
              "return a, b, string.find(hay, 'zz', 1, true)",
              "[524288,524292,null]");
  check_value("local s = 'ab' for i = 1, 18 do s = s .. s end "
              "return string.find(s .. 'c', 'bc', 262140)",
              "[524288,524289]");
}

static void match_returns_captures_or_the_match(void **state) {
  (void)state;
  check_value("return string.match('  trim me  ', '^%s*(.-)%s*$')", "\"trim me\"");
  check_value("return string.match('2024-01-15', '(%d+)-(%d+)-(%d+)')", "[\"2024\",\"01\",\"15\"]");
  check_value("return string.match('hello', 'l+')", "\"ll\"");
  check_value("return string.match('f(a(b)c)d', '%b()')", "\"(a(b)c)\"");
  check_value("return string.match('THE (quick) fox', '%f[%a]%a+', 5)", "\"quick\"");
  check_value("return string.match('say \"hi\" now', '([\"\\'])(.-)%1')", "[\"\\\"\",\"hi\"]");
  check_value("return string.match('abc', '()b()')", "[2,3]");
  check_value("return string.match('[x]', '[]]'), string.match('a-b', '[a-]+')", "[\"]\",\"a-\"]");
  check_value("return string.match('\\0x', '%z'), string.match('abc', '[^%a]')",
              "[\"\\u0000\",null]");
}

static void gmatch_iterates_and_takes_init(void **state) {
  (void)state;
  check_value("local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do "
              "t[#t + 1] = k .. v end return t",
              "[\"a1\",\"b2\"]");
  check_value("local n = 0 for w in ('one two three'):gmatch('%a+', 5) do n = n + 1 end "
              "return n",
              "2");
  check_value("local t = {} for w in string.gmatch('abc', 'x*') do t[#t + 1] = #w end "
              "return #t",
              "4");
  check_value("local it = string.gmatch('ab', '.') return it(), it(), select('#', it())",
              "[\"a\",\"b\",0]");
  check_value("local t = {} for w in string.gmatch('^a^a', '^a') do t[#t + 1] = w end "
              "return #t",
              "2");
  check_value("local n = 0 for w in string.gmatch('abc', '.', 10) do n = n + 1 end return n", "0");
}

static void gsub_replaces_by_string_table_and_function(void **state) {
  (void)state;
  check_value("return string.gsub('hello world', 'o', '0')", "[\"hell0 w0rld\",2]");
  check_value("return string.gsub('hello world', '(%w+)', '<%1>')", "[\"<hello> <world>\",2]");
  check_value("return string.gsub('abc', '', '-')", "[\"-a-b-c-\",4]");
  check_value("return string.gsub('50', '%d+', '%0%%')", "[\"50%\",1]");
  check_value("return string.gsub('abc', '()b', '%1')", "[\"a2c\",1]");
  check_value("return string.gsub('$a $b', '%$(%w+)', {a = 'x', b = false})", "[\"x $b\",2]");
  check_value("return string.gsub('a b', '%a', function(c) if c == 'a' then return 1.5 end "
              "end)",
              "[\"1.5 b\",2]");
  check_value("return string.gsub('aaa', 'a', 'b', 2)", "[\"bba\",2]");
  check_value("return string.gsub('aaa', 'a', 'b', -1)", "[\"aaa\",0]");
  check_value("return string.gsub('aaa', '^a', 'b')", "[\"baa\",1]");
  check_value("return string.gsub(12345, 3, 0)", "[\"12045\",1]");
  check_value("return string.gsub('a b', '%a', setmetatable({}, {__index = function(_, k) "
              "return k:upper() end}))",
              "[\"A B\",2]");
}

/* ---- errors ------------------------------------------------------------------------------ */

static void malformed_patterns_raise_stock_messages(void **state) {
  (void)state;
  check_error("return string.find('abc', 'a%')", MBX_RUNTIME_ERROR,
              "malformed pattern (ends with '%')");
  check_error("return string.find('abc', 'a[b')", MBX_RUNTIME_ERROR,
              "malformed pattern (missing ']')");
  check_error("return string.find('abc', '%fa')", MBX_RUNTIME_ERROR,
              "missing '[' after '%f' in pattern");
  check_error("return string.find('abc', '%b(')", MBX_RUNTIME_ERROR,
              "malformed pattern (missing arguments to '%b')");
  check_error("return string.match('abc', 'a)')", MBX_RUNTIME_ERROR, "invalid pattern capture");
  check_error("return string.match('abc', '%1')", MBX_RUNTIME_ERROR, "invalid capture index %1");
  check_error("return string.match('abc', '(a')", MBX_RUNTIME_ERROR, "unfinished capture");
  check_error("local p = '' for i = 1, 33 do p = p .. '()' end return string.find('', p)",
              MBX_RUNTIME_ERROR, "too many captures");
  check_error("local s, p = 'a', 'a?' for i = 1, 8 do s = s .. s p = p .. p end "
              "return string.find(s, p .. 'b')",
              MBX_RUNTIME_ERROR, "pattern too complex");
  /* Errors are found when the matcher reaches them, as in stock. */
  check_value("return string.find('abc', 'x[')", "null");
}

static void bad_replacements_raise_stock_messages(void **state) {
  (void)state;
  check_error("return string.gsub('abc', 'b', '%2')", MBX_RUNTIME_ERROR,
              "invalid capture index %2");
  check_error("return string.gsub('abc', 'b', '%x')", MBX_RUNTIME_ERROR,
              "invalid use of '%' in replacement string");
  check_error("return string.gsub('abc', 'b', 'x%')", MBX_RUNTIME_ERROR,
              "invalid use of '%' in replacement string");
  check_error("return string.gsub('abc', 'b', {b = {}})", MBX_RUNTIME_ERROR,
              "invalid replacement value (a table)");
  check_error("return string.gsub('abc', 'b', function() return true end)", MBX_RUNTIME_ERROR,
              "invalid replacement value (a boolean)");
  check_error("return string.gsub('abc', 'b')", MBX_RUNTIME_ERROR,
              "bad argument #3 to 'gsub' (string/function/table expected, got no value)");
  check_error("return string.gsub('abc', 'b', 'c', 'x')", MBX_RUNTIME_ERROR,
              "bad argument #4 to 'gsub' (number expected, got string)");
}

/* ---- metering ---------------------------------------------------------------------------- */

static void backtracking_bomb_stops_at_the_deadline(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_TIME_MS, 100, MBX_LIMIT_INSTRUCTIONS, 0);
  outcome o;
  assert_int_equal(run_in(sb, BOMB, &o), MBX_TIME_LIMIT);
  mbx_sandbox_free(sb);
}

static void matching_steps_count_as_instructions(void **state) {
  (void)state;
  /* A handful of VM instructions, millions of matching steps: only the charge from the
     matcher can trip the instruction limit. */
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 100000, MBX_LIMIT_TIME_MS, 0);
  outcome o;
  assert_int_equal(run_in(sb, BOMB, &o), MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
  /* The same for a slow lazy match over a long subject, and for a gsub producing much. */
  sb = new_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 100000, MBX_LIMIT_TIME_MS, 0);
  assert_int_equal(run_in(sb,
                          "local s = 'ab' for i = 1, 12 do s = s .. s end "
                          "return string.find(s, '.-.-.-x')",
                          &o),
                   MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
  sb = new_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 100000, MBX_LIMIT_TIME_MS, 0);
  assert_int_equal(run_in(sb,
                          "local s = 'ab' for i = 1, 20 do s = s .. s end "
                          "return #string.gsub(s, '.', '%0%0')",
                          &o),
                   MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
}

static void pcall_cannot_swallow_the_trip(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_TIME_MS, 100, MBX_LIMIT_INSTRUCTIONS, 0);
  outcome o;
  assert_int_equal(run_in(sb,
                          "local s, p = 'a', 'a?' for i = 1, 5 do s = s .. s p = p .. p end "
                          "for i = 1, 3 do pcall(string.find, s, p .. s) end "
                          "return 'ESCAPED'",
                          &o),
                   MBX_TIME_LIMIT);
  mbx_sandbox_free(sb);
}

typedef struct interrupter {
  mbx_sandbox *sb;
  int delay_ms;
} interrupter;

static void *interrupt_later(void *arg) {
  interrupter *it = arg;
  struct timespec ts = {0, it->delay_ms * 1000000L};
  nanosleep(&ts, NULL);
  mbx_sandbox_interrupt(it->sb);
  return NULL;
}

static void interrupt_reaches_the_matcher(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_TIME_MS, 0, MBX_LIMIT_INSTRUCTIONS, 0);
  interrupter it = {sb, 50};
  pthread_t thread;
  assert_int_equal(pthread_create(&thread, NULL, interrupt_later, &it), 0);
  outcome o;
  assert_int_equal(run_in(sb, BOMB, &o), MBX_INTERRUPTED);
  pthread_join(thread, NULL);
  mbx_sandbox_free(sb);
}

static void gsub_result_is_memory_limited(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_MEMORY, 4u << 20, MBX_LIMIT_INSTRUCTIONS, 0);
  outcome o;
  mbx_status s = run_in(sb,
                        "local s, r = 'ab', '%0' for i = 1, 16 do s = s .. s end "
                        "for i = 1, 6 do r = r .. r end "
                        "return #string.gsub(s, '.', r)",
                        &o);
  assert_int_equal(s, MBX_MEMORY_LIMIT);
  mbx_sandbox_free(sb);
}

/* ---- gmatch state ------------------------------------------------------------------------ */

static void gmatch_reuse_after_too_complex_works(void **state) {
  (void)state;
  /* Stock 5.4.4 keeps the spent depth in the iterator and crashes on the next call
     (upstream efddc230); each of our calls starts from the full depth. */
  check_value("local s, p = 'a', 'a?' for i = 1, 8 do s = s .. s p = p .. p end "
              "local subject = s .. 'x' .. s "
              "local it = string.gmatch(subject, p .. '()x') "
              "local ok, e = pcall(it) "
              "local ok2, e2 = pcall(it) "
              "local it2 = string.gmatch(subject, '()x') "
              "return ok, e, ok2, e2, it2()",
              "[false,\"pattern too complex\",false,\"pattern too complex\",257]");
  /* The iterator keeps its place after the error: asked again, it fails the same way. */
  check_value("local s, p = 'a', 'a?' for i = 1, 8 do s = s .. s p = p .. p end "
              "local it = string.gmatch(s, p .. 'b') "
              "local r = {} for i = 1, 5 do r[i] = select(2, pcall(it)) end "
              "return r",
              "[\"pattern too complex\",\"pattern too complex\",\"pattern too complex\","
              "\"pattern too complex\",\"pattern too complex\"]");
}

static void gsub_callback_cannot_yield(void **state) {
  (void)state;
  /* A continuation would need the matcher and the luaL_Buffer to survive the yield; as in
     stock Lua, the yield is refused. */
  check_value("local co = coroutine.wrap(function() "
              "return pcall(string.gsub, 'ab', '.', function(c) coroutine.yield(c) end) end) "
              "local ok, e = co() return ok, e",
              "[false,\"attempt to yield across a C-call boundary\"]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(find_returns_positions_and_captures),
      cmocka_unit_test(plain_find_takes_the_text_literally),
      cmocka_unit_test(match_returns_captures_or_the_match),
      cmocka_unit_test(gmatch_iterates_and_takes_init),
      cmocka_unit_test(gsub_replaces_by_string_table_and_function),
      cmocka_unit_test(malformed_patterns_raise_stock_messages),
      cmocka_unit_test(bad_replacements_raise_stock_messages),
      cmocka_unit_test(backtracking_bomb_stops_at_the_deadline),
      cmocka_unit_test(matching_steps_count_as_instructions),
      cmocka_unit_test(pcall_cannot_swallow_the_trip),
      cmocka_unit_test(interrupt_reaches_the_matcher),
      cmocka_unit_test(gsub_result_is_memory_limited),
      cmocka_unit_test(gmatch_reuse_after_too_complex_works),
      cmocka_unit_test(gsub_callback_cannot_yield),
  };
  return cmocka_run_group_tests_name("stdlib/pattern", tests, group_setup, group_teardown);
}
