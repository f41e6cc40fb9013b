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

/* ---- Running snippets: a fresh sandbox per snippet unless a test keeps its own. -------- */

static mbx_runtime *runtime;

/* What a run produced, copied out of the mbx_result so tests can assert after freeing it. */
typedef struct outcome {
  mbx_status status;
  char value[8192]; /* the value JSON when the run succeeded, else the full error message */
  char out[8192];   /* captured stdout (raw bytes, NUL-terminated) */
  size_t out_len;
  char err[8192]; /* captured stderr */
  size_t err_len;
} outcome;

static void copy_bytes(char *dst, size_t size, const char *src, size_t len) {
  if (len >= size) len = size - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

/* Run code in sb and fill *o. Returns the run status; fails the test on an API status. */
static mbx_status run_in(mbx_sandbox *sb, const char *code, outcome *o) {
  mbx_result *res = NULL;
  mbx_error err;
  memset(o, 0, sizeof *o);
  o->status = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (o->status >= MBX_API_ERROR_BASE)
    fail_msg("mbx_run refused %s: %s (%s)", code, mbx_status_name(o->status), err.message);
  assert_non_null(res);
  assert_int_equal(mbx_result_status(res), o->status);
  size_t len;
  const char *text =
      o->status == MBX_OK ? mbx_result_value_json(res, &len) : mbx_result_error_message(res, &len);
  copy_bytes(o->value, sizeof o->value, text, len);
  text = mbx_result_stdout(res, &o->out_len);
  copy_bytes(o->out, sizeof o->out, text, o->out_len);
  text = mbx_result_stderr(res, &o->err_len);
  copy_bytes(o->err, sizeof o->err, text, o->err_len);
  mbx_result_free(res);
  return o->status;
}

/* A sandbox with the default policy, or with one limit changed (which == 0: none). */
static mbx_sandbox *new_sandbox_with(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (which != 0) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static mbx_sandbox *new_sandbox(void) {
  return new_sandbox_with(0, 0);
}

/* Run code in a fresh default sandbox. */
static mbx_status run(const char *code, outcome *o) {
  mbx_sandbox *sb = new_sandbox();
  mbx_status s = run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

/* The snippet succeeds and returns exactly this JSON. */
static void check_value(const char *code, const char *json) {
  static outcome o;
  if (run(code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

/* The snippet ends with this status and its error message contains the fragment. */
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

static void functions_present(void **state) {
  (void)state;
  check_value("local n = 0 for _, k in ipairs{'abs', 'ceil', 'floor', 'fmod', 'max', 'min', "
              "'modf', 'sqrt', 'exp', 'log', 'sin', 'cos', 'tan', 'asin', 'acos', 'atan', "
              "'random', 'randomseed', 'tointeger', 'type', 'ult'} do "
              "if type(math[k]) == 'function' then n = n + 1 end end return n",
              "21");
  check_value("return math.pi > 3.14159 and math.pi < 3.1416, math.huge == 1/0", "[true,true]");
}

static void integer_and_float_results(void **state) {
  (void)state;
  check_value("return math.floor(3.7), math.ceil(3.2), math.floor(-3.5), math.max(1, 5, 3), "
              "math.min(2, -1), math.max(1.5, 1), math.abs(-4)",
              "[3,4,-4,5,-1,1.5,4]");
  check_value("return math.maxinteger, math.mininteger, math.maxinteger + 1 == math.mininteger",
              "[9223372036854775807,-9223372036854775808,true]");
  check_value("return math.tointeger(3.0), math.tointeger(3.5), math.tointeger('x'), "
              "math.tointeger(7)",
              "[3,null,null,7]");
  check_value("return math.type(1), math.type(1.0), math.type('1'), math.ult(1, -1)",
              "[\"integer\",\"float\",null,true]");
  check_value("return math.fmod(7, 3), math.sqrt(16), math.modf(3.25)", "[1,4.0,3,0.25]");
  check_error("return math.floor('x')", MBX_RUNTIME_ERROR, "number expected");
  check_error("return math.random(2, 1)", MBX_RUNTIME_ERROR, "interval is empty");
}

static void random_stays_in_range(void **state) {
  (void)state;
  check_value("for i = 1, 1000 do "
              "  local a, b, c = math.random(), math.random(6), math.random(-3, 3) "
              "  assert(a >= 0 and a < 1 and math.type(a) == 'float') "
              "  assert(b >= 1 and b <= 6 and math.type(b) == 'integer') "
              "  assert(c >= -3 and c <= 3) "
              "end return true",
              "true");
  check_value("math.randomseed(42) local a, b = math.random(1e9), math.random(1e9) "
              "math.randomseed(42) return a == math.random(1e9) and b == math.random(1e9)",
              "true");
}

/* A sandbox whose policy fixes the seed. */
static mbx_sandbox *seeded_sandbox(uint64_t seed) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_seed(p, seed, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static void policy_seed_makes_runs_reproducible(void **state) {
  (void)state;
  const char *code = "local r = {} for i = 1, 5 do r[i] = math.random(1000000) end "
                     "math.randomseed() r[6] = math.random(1000000) return r";
  outcome a, b, c;
  mbx_sandbox *sa = seeded_sandbox(42), *sb = seeded_sandbox(42), *sc = seeded_sandbox(43);
  assert_int_equal(run_in(sa, code, &a), MBX_OK);
  assert_int_equal(run_in(sb, code, &b), MBX_OK);
  assert_int_equal(run_in(sc, code, &c), MBX_OK);
  assert_string_equal(a.value, b.value); /* math.randomseed() included */
  assert_string_not_equal(a.value, c.value);
  mbx_sandbox_free(sa);
  mbx_sandbox_free(sb);
  mbx_sandbox_free(sc);
  /* The policy seed N gives the sequence stock Lua gives after math.randomseed(N). */
  sa = seeded_sandbox(42);
  assert_int_equal(run_in(sa, "local x, y = math.random(1000000), math.random(1000000) "
                              "math.randomseed(42) "
                              "return x == math.random(1000000) and y == math.random(1000000)",
                          &a),
                   MBX_OK);
  assert_string_equal(a.value, "true");
  mbx_sandbox_free(sa);
  /* Without a seed, two sandboxes differ. */
  sa = new_sandbox();
  sb = new_sandbox();
  assert_int_equal(run_in(sa, code, &a), MBX_OK);
  assert_int_equal(run_in(sb, code, &b), MBX_OK);
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
  return cmocka_run_group_tests_name("stdlib/math", tests, group_setup, group_teardown);
}
