/* tests/vm/test_load.c -- vm/load.c: text-only loading with the parser under the budget. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <time.h>

#include "include/moonbox.h"
#include "vm/load.h"

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

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

/* "local a = {} a.x = a return a.x.x...x.y.z": an error message names the value by
   walking back one C recursion level per link (7923dbbf). */
static char *field_chain(size_t links, size_t *len) {
  size_t cap = 64 + links * 2;
  char *s = malloc(cap);
  size_t n = (size_t)snprintf(s, cap, "local a = {} a.x = a return a");
  for (size_t i = 0; i < links; i++)
    n += (size_t)snprintf(s + n, cap - n, ".x");
  n += (size_t)snprintf(s + n, cap - n, ".y.z");
  *len = n;
  return s;
}

static void long_field_chains_are_refused_before_parsing(void **state) {
  (void)state;
  size_t len;
  char value[512];
  /* 30,000 links: 60 KB, under the source limit; 1.9 s and a C stack overflow on 1 MiB in
     stock lua5.4's error message. */
  char *code = field_chain(30000, &len);
  assert_int_equal(run(code, len, 5000, 1 << 20, value, sizeof value), MBX_SYNTAX_ERROR);
  free(code);
  /* A chain real code writes runs, and its error names the field. */
  code = field_chain(20, &len);
  assert_int_equal(run(code, len, 5000, 1 << 20, value, sizeof value), MBX_RUNTIME_ERROR);
  free(code);
}

static void chain_depth_counts_links_not_text(void **state) {
  (void)state;
  static const struct {
    const char *text;
    int depth;
  } cases[] = {
      {"return a", 1},
      {"return a.b.c", 3},
      {"return a.b.c:d().e.f", 3},          /* a method call ends the walk */
      {"return a.b(1).c.d", 3},             /* so does a call */
      {"return a[b.c.d]", 4},               /* the key's chain, plus the index */
      {"x = 'a.b.c.d.e' -- .f.g.h.i\n", 1}, /* strings and comments are skipped */
      {"x = [==[a.b.c.d]==] --[[ .e.f.g ]] y = z", 1},
      {"return (a.b).c.d", 4},
      {"return 1.5 .. a.b", 2},
      {"local t = {[k] = v, a.b.c}", 3},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    int got = mbxV_chain_depth(cases[i].text, strlen(cases[i].text));
    if (got != cases[i].depth)
      fail_msg("%s: depth %d, expected %d", cases[i].text, got, cases[i].depth);
  }
}

/* 1 MiB of "or a": a quadratic parse that takes minutes unmetered; the pieces shrink as the
   parse goes on, so the deadline is seen within a few milliseconds of work (the bound
   asserted is generous: a busy machine). */
static void a_megabyte_of_or_chain_stops_near_the_deadline(void **state) {
  (void)state;
  size_t len;
  char *code = or_chain(200000, &len); /* about 1 MB */
  char value[64];
  uint64_t t0 = now_ms();
  assert_int_equal(run(code, len, 300, 2 << 20, value, sizeof value), MBX_TIME_LIMIT);
  uint64_t took = now_ms() - t0;
  if (took > 300 + 2000) fail_msg("the parse went on for %llu ms", (unsigned long long)took);
  free(code);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(quadratic_parse_is_stopped_by_the_deadline),
      cmocka_unit_test(long_chunk_within_budget_compiles_and_runs),
      cmocka_unit_test(binary_chunks_are_refused),
      cmocka_unit_test(guest_load_is_metered_too),
      cmocka_unit_test(long_field_chains_are_refused_before_parsing),
      cmocka_unit_test(chain_depth_counts_links_not_text),
      cmocka_unit_test(a_megabyte_of_or_chain_stops_near_the_deadline),
  };
  return cmocka_run_group_tests_name("vm/load", tests, NULL, NULL);
}
