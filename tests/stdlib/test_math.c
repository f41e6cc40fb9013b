/* tests/stdlib/test_math.c -- unit tests of stdlib/math.c: the stock math library,
   every function O(1). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static void functions_present(void **state) {
  (void)state;
  snippet_check_value(
      "local n = 0 for _, k in ipairs{'abs', 'ceil', 'floor', 'fmod', 'max', 'min', "
      "'modf', 'sqrt', 'exp', 'log', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', "
      "'random', 'randomseed', 'tointeger', 'type', 'ult'} do "
      "if type(math[k]) == 'function' then n = n + 1 end end return n",
      "21");
  snippet_check_value("return math.pi > 3.14159 and math.pi < 3.1416, math.huge == 1/0",
                      "[true,true]");
}

static void integer_and_float_results(void **state) {
  (void)state;
  snippet_check_value(
      "return math.floor(3.7), math.ceil(3.2), math.floor(-3.5), math.max(1, 5, 3), "
      "math.min(2, -1), math.max(1.5, 1), math.abs(-4)",
      "[3,4,-4,5,-1,1.5,4]");
  snippet_check_value(
      "return math.maxinteger, math.mininteger, math.maxinteger + 1 == math.mininteger",
      "[9223372036854775807,-9223372036854775808,true]");
  snippet_check_value("return math.tointeger(3.0), math.tointeger(3.5), math.tointeger('x'), "
                      "math.tointeger(7)",
                      "[3,null,null,7]");
  snippet_check_value("return math.type(1), math.type(1.0), math.type('1'), math.ult(1, -1)",
                      "[\"integer\",\"float\",null,true]");
  snippet_check_value("return math.fmod(7, 3), math.sqrt(16), math.modf(3.25)", "[1,4.0,3,0.25]");
  snippet_check_error("return math.floor('x')", MBX_RUNTIME_ERROR, "number expected");
  snippet_check_error("return math.random(2, 1)", MBX_RUNTIME_ERROR, "interval is empty");
}

static void random_stays_in_range(void **state) {
  (void)state;
  snippet_check_value("for i = 1, 1000 do "
                      "  local a, b, c = math.random(), math.random(6), math.random(-3, 3) "
                      "  assert(a >= 0 and a < 1 and math.type(a) == 'float') "
                      "  assert(b >= 1 and b <= 6 and math.type(b) == 'integer') "
                      "  assert(c >= -3 and c <= 3) "
                      "end return true",
                      "true");
  snippet_check_value("math.randomseed(42) local a, b = math.random(1e9), math.random(1e9) "
                      "math.randomseed(42) return a == math.random(1e9) and b == math.random(1e9)",
                      "true");
}

/* A sandbox whose policy fixes the seed. */
static mbx_sandbox *seeded_sandbox(uint64_t seed) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_seed(p, seed, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static void policy_seed_makes_runs_reproducible(void **state) {
  (void)state;
  const char *code = "local r = {} for i = 1, 5 do r[i] = math.random(1000000) end "
                     "math.randomseed() r[6] = math.random(1000000) return r";
  snippet_outcome a, b, c;
  mbx_sandbox *sa = seeded_sandbox(42), *sb = seeded_sandbox(42), *sc = seeded_sandbox(43);
  assert_int_equal(snippet_run_in(sa, code, &a), MBX_OK);
  assert_int_equal(snippet_run_in(sb, code, &b), MBX_OK);
  assert_int_equal(snippet_run_in(sc, code, &c), MBX_OK);
  assert_string_equal(a.value, b.value); /* math.randomseed() included */
  assert_string_not_equal(a.value, c.value);
  mbx_sandbox_free(sa);
  mbx_sandbox_free(sb);
  mbx_sandbox_free(sc);
  /* The policy seed N gives the sequence stock Lua gives after math.randomseed(N). */
  sa = seeded_sandbox(42);
  assert_int_equal(snippet_run_in(sa,
                                  "local x, y = math.random(1000000), math.random(1000000) "
                                  "math.randomseed(42) "
                                  "return x == math.random(1000000) and y == math.random(1000000)",
                                  &a),
                   MBX_OK);
  assert_string_equal(a.value, "true");
  mbx_sandbox_free(sa);
  /* Without a seed, two sandboxes differ. */
  sa = snippet_sandbox();
  sb = snippet_sandbox();
  assert_int_equal(snippet_run_in(sa, code, &a), MBX_OK);
  assert_int_equal(snippet_run_in(sb, code, &b), MBX_OK);
  assert_string_not_equal(a.value, b.value);
  mbx_sandbox_free(sa);
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(functions_present),
      cmocka_unit_test(integer_and_float_results),
      cmocka_unit_test(random_stays_in_range),
      cmocka_unit_test(policy_seed_makes_runs_reproducible),
  };
  return cmocka_run_group_tests_name("stdlib/math", tests, snippet_setup, snippet_teardown);
}
