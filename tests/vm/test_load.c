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

/* Lua 5.4.4 bug 997f11f5: leaving a generic for whose body has a captured local skipped the
   close of its closing value. Without the rewrite in vm/load.c the `local y <close>` below
   walks the stale to-be-closed list past the stack (SIGSEGV); with it, the log is 5.4.5's. */
static const char break_close_code[] =
    "local log = {}\n"
    "local mt = {__close = function(o) log[#log + 1] = o.name end}\n"
    "local later = setmetatable({name = 'later'}, mt)\n"
    "local function f()\n"
    "  for k in next, {1, 2}, nil, setmetatable({name = 'loop'}, mt) do\n"
    "    local function g() return k end\n"
    "    break\n"
    "  end\n"
    "  log[#log + 1] = 'after'\n"
    "  local y <close> = later\n"
    "end\n"
    "f()\n"
    "return table.concat(log, ' ')\n";

static void break_out_of_generic_for_closes_its_closing_value(void **state) {
  (void)state;
  char value[64];
  assert_int_equal(
      run(break_close_code, strlen(break_close_code), 5000, 1 << 20, value, sizeof value), MBX_OK);
  assert_string_equal(value, "\"loop after later\"");
}

/* The same chunk through the guest's load: every compile goes through mbxV_load_text. */
static void break_close_is_fixed_in_guest_load_too(void **state) {
  (void)state;
  char code[2048];
  snprintf(code, sizeof code, "return assert(load([==[%s]==]))()", break_close_code);
  char value[64];
  assert_int_equal(run(code, strlen(code), 5000, 1 << 20, value, sizeof value), MBX_OK);
  assert_string_equal(value, "\"loop after later\"");
}

/* A loop left without the bug's pattern (no captured local: the compiler already closes at
   the loop's base) and a chunk whose only "break" is in a string are run as compiled. */
static void chunks_without_the_pattern_are_unchanged(void **state) {
  (void)state;
  const char *code = "local log = {}\n"
                     "local mt = {__close = function(o) log[#log + 1] = o.name end}\n"
                     "for k in next, {1}, nil, setmetatable({name = 'loop'}, mt) do break end\n"
                     "log[#log + 1] = 'break'\n"
                     "return table.concat(log, ' ')\n";
  char value[64];
  assert_int_equal(run(code, strlen(code), 5000, 1 << 20, value, sizeof value), MBX_OK);
  assert_string_equal(value, "\"loop break\"");
}

/* "local x = {} x.a = x return x.a.a ... .a + 1": the error names the last value by walking
   back through the links, one C recursion each in Lua 5.4.4 (7923dbbf). */
static char *name_chain(size_t links, size_t *len) {
  size_t cap = 64 + links * 2;
  char *s = malloc(cap);
  size_t n = (size_t)snprintf(s, cap, "local x = {} x.a = x return x");
  for (size_t i = 0; i < links; i++)
    n += (size_t)snprintf(s + n, cap - n, ".a");
  n += (size_t)snprintf(s + n, cap - n, " + 1");
  *len = n;
  return s;
}

/* 100,000 links overflowed this 8 MiB thread's C stack (SIGSEGV) before vm/load.c refused
   them; now the chunk is a syntax error that says why. */
static void deep_name_chains_are_refused_at_compile(void **state) {
  (void)state;
  size_t len;
  char *code = name_chain(100000, &len);
  char value[64];
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_SOURCE, 1 << 20), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 30000), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  mbx_result *res = NULL;
  assert_int_equal(mbx_run(sb, code, len, NULL, 0, &res, &err), MBX_SYNTAX_ERROR);
  const char *msg = mbx_result_error_message(res, NULL);
  assert_non_null(msg);
  assert_non_null(strstr(msg, "expression too complex (more than 200 chained indexings"));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  free(code);
  /* 200 links is the most allowed, and names its value as stock does. */
  code = name_chain(199, &len);
  assert_int_equal(run(code, len, 5000, 1 << 20, value, sizeof value), MBX_RUNTIME_ERROR);
  free(code);
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
      cmocka_unit_test(break_out_of_generic_for_closes_its_closing_value),
      cmocka_unit_test(break_close_is_fixed_in_guest_load_too),
      cmocka_unit_test(chunks_without_the_pattern_are_unchanged),
      cmocka_unit_test(deep_name_chains_are_refused_at_compile),
      cmocka_unit_test(a_megabyte_of_or_chain_stops_near_the_deadline),
  };
  return cmocka_run_group_tests_name("vm/load", tests, NULL, NULL);
}
