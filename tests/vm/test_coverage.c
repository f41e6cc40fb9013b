/* tests/vm/test_coverage.c -- unit tests of vm/coverage.c and its hook composition in budget.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>

#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "tests/support/snippet.h"
#include "vm/budget.h"
#include "vm/coverage.h"
#include "vm/vm.h"

#define MAP 4096
static uint8_t counters[MAP];
static mbxV_coverage cov = {.counters = counters, .mask = MAP - 1};

static void map_on(void) {
  memset(counters, 0, sizeof counters);
  mbxV_coverage_set(&cov);
  mbxV_coverage_restart();
}

static size_t edges(void) {
  size_t n = 0;
  for (size_t i = 0; i < MAP; i++)
    n += counters[i] != 0;
  return n;
}

/* Edges of code run in a fresh sandbox with the map on; the run must succeed. */
static size_t edges_of(const char *code) {
  snippet_outcome o;
  map_on();
  mbx_status s = snippet_run(code, &o);
  mbxV_coverage_set(NULL);
  if (s != MBX_OK) fail_msg("%s: %s", code, o.value);
  return edges();
}

/* n statements on lines of their own. */
static char *lines(const char *before, int n, const char *after) {
  size_t cap = strlen(before) + strlen(after) + (size_t)n * 16 + 1;
  char *s = malloc(cap);
  assert_non_null(s);
  size_t len = (size_t)snprintf(s, cap, "%s", before);
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(s + len, cap - len, "x = x + %d\n", i);
  snprintf(s + len, cap - len, "%s", after);
  return s;
}

static void lines_make_edges(void **state) {
  (void)state;
  char *code = lines("x = 0\n", 40, "return x\n");
  size_t n = edges_of(code);
  free(code);
  /* 42 line events, so about 41 distinct edges (a few may collide in 4096 counters). */
  assert_true(n >= 35);
  assert_true(n <= 45);
}

static void no_map_no_edges(void **state) {
  (void)state;
  memset(counters, 0, sizeof counters);
  mbxV_coverage_set(NULL);
  snippet_outcome o;
  assert_int_equal(snippet_run("local x = 0\nx = x + 1\nreturn x", &o), MBX_OK);
  assert_int_equal(edges(), 0);
}

/* The coroutine wrappers arm new threads through the same function: its lines are seen. */
static void lines_inside_coroutines_count(void **state) {
  (void)state;
  char *deep = lines("x = 0\nlocal co = coroutine.wrap(function()\n", 40, "end)\nco()\n");
  char *shallow = lines("x = 0\nlocal co = coroutine.wrap(function()\n", 1, "end)\nco()\n");
  size_t d = edges_of(deep), s = edges_of(shallow);
  free(deep);
  free(shallow);
  assert_true(d >= s + 30);
  char *resumed = lines("x = 0\nlocal co = coroutine.create(function()\ncoroutine.yield()\n", 40,
                        "end)\ncoroutine.resume(co)\ncoroutine.resume(co)\n");
  assert_true(edges_of(resumed) >= s + 30);
  free(resumed);
}

/* A large block re-arms the hook at count 1 (memory pressure): line events must stay. */
static void lines_after_memory_pressure_count(void **state) {
  (void)state;
  char *big = lines("x = 0\nlocal s = string.rep('x', 8 << 20)\n", 40, "return #s\n");
  char *small = lines("x = 0\nlocal s = string.rep('x', 8 << 20)\n", 1, "return #s\n");
  size_t b = edges_of(big), s = edges_of(small);
  free(big);
  free(small);
  assert_true(b >= s + 30);
}

/* Every place the budget arms a thread composes the line mask while a map is set. */
static void every_arm_keeps_the_line_mask(void **state) {
  (void)state;
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = 64u << 20,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .address_key = 3};
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_State *co = lua_newthread(vm->L);
  map_on();
  mbxV_budget_start(vm->L);
  vm->budget.run_thread = co;
  mbxV_budget_enter(vm->L, co);
  assert_int_equal(lua_gethookmask(co), LUA_MASKCOUNT | LUA_MASKLINE);
  mbxV_budget_on_pressure(vm);
  assert_int_equal(lua_gethookcount(co), 1);
  assert_int_equal(lua_gethookmask(co), LUA_MASKCOUNT | LUA_MASKLINE);
  mbxV_trip_set(co, MBXV_TRIP_INTERRUPT);
  assert_int_equal(lua_gethookmask(co), LUA_MASKCOUNT | LUA_MASKLINE);
  mbxV_budget_leave(vm->L, NULL);
  mbxV_budget_stop(vm->L);
  mbxV_coverage_set(NULL);
  /* Without a map: the count hook alone. */
  mbxV_budget_start(vm->L);
  mbxV_budget_enter(vm->L, co);
  assert_int_equal(lua_gethookmask(co), LUA_MASKCOUNT);
  mbxV_budget_leave(vm->L, NULL);
  mbxV_budget_stop(vm->L);
  lua_settop(vm->L, 0);
  mbxV_vm_close(vm);
  free(vm);
}

/* The same run gives the same map (fresh sandboxes), and coverage changes no count. */
static void maps_are_deterministic_and_free_of_charge(void **state) {
  (void)state;
  static const char code[] = "local t = {}\nfor i = 1, 3000 do\n  if i % 3 == 0 then\n"
                             "    t[#t + 1] = i\n  end\nend\nreturn #t";
  static uint8_t first[MAP];
  /* Counted: an instruction limit asks for the count hook, coverage or not. */
  const snippet_limits counted = {SNIPPET_KEEP, 1000000000, SNIPPET_KEEP};
  snippet_outcome o;
  /* The first run of a source compiles it (charged); the later ones load the cached code. */
  assert_int_equal(snippet_run_with(counted, code, &o), MBX_OK);
  assert_int_equal(snippet_run_with(counted, code, &o), MBX_OK);
  uint64_t without = o.usage.instructions;
  map_on();
  assert_int_equal(snippet_run_with(counted, code, &o), MBX_OK);
  assert_int_equal(o.usage.instructions, without);
  memcpy(first, counters, sizeof first);
  map_on();
  assert_int_equal(snippet_run_with(counted, code, &o), MBX_OK);
  mbxV_coverage_set(NULL);
  assert_memory_equal(first, counters, sizeof first);
  /* Saturating counters: the loop's edges ran 1000+ times and read 255, not a wrap. */
  size_t full = 0;
  for (size_t i = 0; i < MAP; i++)
    full += first[i] == 255;
  assert_true(full >= 2);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lines_make_edges),
      cmocka_unit_test(no_map_no_edges),
      cmocka_unit_test(lines_inside_coroutines_count),
      cmocka_unit_test(lines_after_memory_pressure_count),
      cmocka_unit_test(every_arm_keeps_the_line_mask),
      cmocka_unit_test(maps_are_deterministic_and_free_of_charge),
  };
  return cmocka_run_group_tests_name("vm/coverage", tests, snippet_setup, snippet_teardown);
}
