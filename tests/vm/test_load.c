/* tests/vm/test_load.c -- vm/load.c: text-only loading with the parser under the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/moonbox.h"

/* "return a or a or ... or a": Lua's code generator walks the whole jump list at each `or`,
   so parsing is quadratic (THREATS D9): about 0.3 s for 60 KB on the dev VM. */
static char *or_chain(size_t terms, size_t *len) {
  size_t cap = 16 + terms * 5;
  char *s = malloc(cap);
  size_t n = (size_t)snprintf(s, cap, "return a");
  for (size_t i = 1; i < terms; i++)
    n += (size_t)snprintf(s + n, cap - n, " or a");
  *len = n;
  return s;
}

static mbx_status run(const char *code, size_t len, uint64_t time_ms, uint64_t source_limit,
                      char *value, size_t value_size) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, time_ms), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_SOURCE, source_limit), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  mbx_result *res = NULL;
  mbx_status s = mbx_run(sb, code, len, "{\"a\":7}", 7, &res, &err);
  assert_non_null(res);
  snprintf(value, value_size, "%s", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return s;
}

static void quadratic_parse_is_stopped_by_the_deadline(void **state) {
  (void)state;
  size_t len;
  char *code = or_chain(40000, &len); /* 200 KB: seconds of parsing if unmetered */
  char value[64];
  assert_int_equal(run(code, len, 20, 1 << 20, value, sizeof value), MBX_TIME_LIMIT);
  assert_string_equal(value, "null");
  free(code);
}

static void long_chunk_within_budget_compiles_and_runs(void **state) {
  (void)state;
  size_t len;
  char *code = or_chain(3000, &len); /* 15 KB, several read pieces */
  char value[64];
  assert_int_equal(run(code, len, 5000, 1 << 20, value, sizeof value), MBX_OK);
  assert_string_equal(value, "7");
  free(code);
}

static void binary_chunks_are_refused(void **state) {
  (void)state;
  char value[64];
  const char chunk[] = "\x1bLua\x54\x00garbage";
  assert_int_equal(run(chunk, sizeof chunk - 1, 1000, 1 << 20, value, sizeof value),
                   MBX_SYNTAX_ERROR);
}

static void guest_load_is_metered_too(void **state) {
  (void)state;
  /* A 16 KB or-chain through guest load, in a loop: each parse is polled. */
  const char *code = "local s = 'return a' for i = 1, 3200 do s = s .. ' or a' end "
                     "while true do assert(load(s)) end";
  char value[64];
  assert_int_equal(run(code, strlen(code), 100, 1 << 20, value, sizeof value), MBX_TIME_LIMIT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quadratic_parse_is_stopped_by_the_deadline),
      cmocka_unit_test(long_chunk_within_budget_compiles_and_runs),
      cmocka_unit_test(binary_chunks_are_refused),
      cmocka_unit_test(guest_load_is_metered_too),
  };
  return cmocka_run_group_tests_name("vm/load", tests, NULL, NULL);
}
