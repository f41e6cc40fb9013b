/* tests/vm/test_budget.c -- unit tests of vm/budget.c: the meter and its sticky trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/run.h"
#include "vm/vm.h"

/* Guest-callable probes into the budget (added after the stdlib, as host globals). */
static int lua_charge(lua_State *L) {
  mbxV_charge(L, (uint64_t)luaL_checkinteger(L, 1));
  return 0;
}

/* light_loop(n [, sleep_ms]): sleep (past a short deadline), then n light charges of one
   instruction in C with no VM instruction between them; light_calls() says how many were
   made before one raised. */
static int light_calls_made;
static int lua_light_loop(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  lua_Integer sleep_ms = luaL_optinteger(L, 2, 0);
  if (sleep_ms > 0) {
    struct timespec ts = {0, (long)sleep_ms * 1000000L};
    nanosleep(&ts, NULL);
  }
  light_calls_made = 0;
  for (lua_Integer i = 0; i < n; i++) {
    light_calls_made++;
    mbxV_charge_light(L, 1);
  }
  return 0;
}

static int lua_light_calls(lua_State *L) {
  lua_pushinteger(L, light_calls_made);
  return 1;
}

static int lua_set_interrupt(lua_State *L) {
  atomic_store(&mbxV_from(L)->budget.interrupt, 1);
  return 0;
}

static int lua_charged(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)mbxV_from(L)->budget.instructions);
  return 1;
}

static mbxV_vm *open_vm(size_t memory, uint64_t instructions, uint64_t time_ms) {
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = memory,
                     .instruction_limit = instructions,
                     .time_limit_ms = time_ms,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .address_key = 3};
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  lua_register(vm->L, "charge", lua_charge);
  lua_register(vm->L, "set_interrupt", lua_set_interrupt);
  lua_register(vm->L, "charged", lua_charged);
  lua_register(vm->L, "light_loop", lua_light_loop);
  lua_register(vm->L, "light_calls", lua_light_calls);
  return vm;
}

static void close_vm(mbxV_vm *vm) {
  mbxV_vm_close(vm);
  free(vm);
}

/* Run code, return the status; the outcome's message and counters are copied out. */
typedef struct ran {
  mbxV_status status;
  char message[256];
  char value[256];
  uint64_t instructions;
  uint64_t wall_us;
  uint64_t memory_peak;
} ran;

static ran run(mbxV_vm *vm, const char *code) {
  mbxV_outcome out;
  mbxV_refusal err;
  ran r = {0};
  r.status = mbxV_run(vm, code, strlen(code), "=input", NULL, 0, &out, &err);
  assert_true(r.status < MBX_API_ERROR_BASE);
  if (out.failed) snprintf(r.message, sizeof r.message, "%s", out.error.message);
  snprintf(r.value, sizeof r.value, "%s", out.value_json);
  r.instructions = out.instructions;
  r.wall_us = out.wall_us;
  r.memory_peak = out.memory_peak;
  mbxV_outcome_free(&out);
  assert_int_equal(vm->budget.running, 0);
  return r;
}

static void expect_status(mbxV_vm *vm, const char *code, mbx_status want) {
  ran r = run(vm, code);
  /* The vm numbers its statuses as the public enum (vm/status.h). */
  if ((int)r.status != (int)want)
    fail_msg("%s: status %s (%s), expected %s", code, mbx_status_name((mbx_status)r.status),
             r.message, mbx_status_name(want));
}

/* ---- limits through real runs ---- */

static void instruction_limit_stops_a_loop(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 100000, 0);
  ran r = run(vm, "while true do end");
  assert_int_equal(r.status, MBX_INSTRUCTION_LIMIT);
  assert_string_equal(r.message, "instruction limit exceeded (100000 instructions)");
  /* Granularity: one hook interval past the limit. */
  assert_true(r.instructions > 100000);
  assert_true(r.instructions <= 100000 + 2 * MBXV_HOOK_COUNT);
  assert_string_equal(r.value, "null");
  close_vm(vm);
}

/* The limit is per run: a run under it succeeds after another one used most of it. */
static void instruction_limit_is_per_run(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 100000, 0);
  for (int i = 0; i < 5; i++) {
    ran r = run(vm, "for i = 1, 20000 do end return 'ok'");
    assert_int_equal(r.status, MBX_OK);
    assert_string_equal(r.value, "\"ok\"");
    assert_true(r.instructions >= 20000 && r.instructions <= 100000);
  }
  close_vm(vm);
}

static void time_limit_with_no_instruction_limit(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 50);
  ran r = run(vm, "while true do end");
  assert_int_equal(r.status, MBX_TIME_LIMIT);
  assert_string_equal(r.message, "time limit exceeded (50 ms)");
  assert_true(r.instructions > 0);
  assert_true(r.wall_us < 30u * 1000 * 1000); /* did not hang */
  close_vm(vm);
}

/* Trips are sticky: pcall, xpcall handlers, coroutines and __close cannot swallow them. */
static void trips_are_sticky(void **state) {
  (void)state;
  static const char *const swallowers[] = {
      "pcall(function() while true do end end) return 'escaped'",
      "while true do pcall(function() while true do end end) end",
      "xpcall(function() while true do end end, function() while true do end end) "
      "return 'escaped'",
      "while true do xpcall(function() while true do end end, function(m) return m end) end",
      "local co = coroutine.create(function() while true do end end)\n"
      "local ok, e = coroutine.resume(co) return 'escaped', ok, e",
      "while true do pcall(coroutine.wrap(function() while true do end end)) end",
      "local co = coroutine.wrap(function() while true do coroutine.yield() end end)\n"
      "while true do pcall(co) end",
      "local ok = pcall(function()\n"
      "  local x <close> = setmetatable({}, {__close = function() while true do end end})\n"
      "  while true do end\n"
      "end) return 'escaped', ok",
      "while true do local ok = pcall(error, 'x') end",
  };
  mbx_status kinds[] = {MBX_INSTRUCTION_LIMIT, MBX_TIME_LIMIT};
  for (size_t k = 0; k < 2; k++) {
    for (size_t i = 0; i < sizeof swallowers / sizeof *swallowers; i++) {
      mbxV_vm *vm = kinds[k] == MBX_INSTRUCTION_LIMIT ? open_vm(64u << 20, 200000, 0)
                                                      : open_vm(64u << 20, 0, 30);
      expect_status(vm, swallowers[i], kinds[k]);
      close_vm(vm);
    }
  }
}

static void interrupt_flag_stops_the_run(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 20000);
  ran r = run(vm, "set_interrupt() while true do end");
  assert_int_equal(r.status, MBX_INTERRUPTED);
  assert_string_equal(r.message, "interrupted by the host");
  close_vm(vm);
  vm = open_vm(64u << 20, 0, 20000);
  expect_status(vm, "set_interrupt() pcall(function() while true do end end) return 1",
                MBX_INTERRUPTED);
  close_vm(vm);
}

/* An interrupt raised before a run starts is discarded by the run's start. */
static void interrupt_before_the_run_is_discarded(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 100000, 0);
  atomic_store(&vm->budget.interrupt, 1);
  ran r = run(vm, "return 5");
  assert_int_equal(r.status, MBX_OK);
  assert_string_equal(r.value, "5");
  close_vm(vm);
}

/* mbxV_charge adds to the counter and trips only past the limit (strictly greater). The run
   itself may charge a little before the chunk starts (parse work), hence charged() - base. */
static void charge_semantics(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 10000, 0);
  ran r = run(vm, "local base = charged() charge(3000) charge(3000) return charged() - base");
  assert_int_equal(r.status, MBX_OK);
  assert_string_equal(r.value, "6000");
  /* Exactly the limit is fine (no return value: encoding it would charge too). */
  r = run(vm, "charge(10000 - charged()) exact = charged()");
  assert_int_equal(r.status, MBX_OK);
  assert_int_equal(r.instructions, 10000);
  r = run(vm, "return exact");
  assert_string_equal(r.value, "10000");
  r = run(vm, "charge(10000 - charged()) charge(1) return 'unreached'");
  assert_int_equal(r.status, MBX_INSTRUCTION_LIMIT);
  assert_string_equal(r.message, "instruction limit exceeded (10000 instructions)");
  assert_true(r.instructions >= 10001);
  close_vm(vm);
  vm = open_vm(64u << 20, 10000, 0);
  expect_status(vm, "local ok = pcall(charge, 20000) return ok", MBX_INSTRUCTION_LIMIT);
  close_vm(vm);
}

/* mbxV_charge_light counts exactly as mbxV_charge (the same trip point at the instruction
   limit), sees an interrupt at the first call, and sees a passed deadline within
   MBXV_LIGHT_CHECK_EVERY instructions of light charges even when no VM instruction runs. */
static void light_charge_semantics(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 10000, 0);
  ran r = run(vm, "local base = charged() light_loop(3000) return charged() - base");
  assert_int_equal(r.status, MBX_OK);
  assert_string_equal(r.value, "3000");
  r = run(vm, "light_loop(10000 - charged()) exact = charged()");
  assert_int_equal(r.status, MBX_OK);
  assert_int_equal(r.instructions, 10000);
  r = run(vm, "light_loop(20000) return 'unreached'");
  assert_int_equal(r.status, MBX_INSTRUCTION_LIMIT);
  assert_int_equal(r.instructions, 10001);
  close_vm(vm);

  vm = open_vm(64u << 20, 0, 0);
  r = run(vm, "set_interrupt() light_loop(100000)");
  assert_int_equal(r.status, MBX_INTERRUPTED);
  r = run(vm, "return light_calls()");
  assert_string_equal(r.value, "1");
  close_vm(vm);

  vm = open_vm(64u << 20, 0, 5);
  /* 50 ms asleep past a 5 ms deadline, then light charges only: the clock is read within
     MBXV_LIGHT_CHECK_EVERY of them (pcall cannot keep the run going). */
  r = run(vm, "pcall(light_loop, 10000000, 50) return 'unreached'");
  assert_int_equal(r.status, MBX_TIME_LIMIT);
  close_vm(vm);
  assert_true(light_calls_made >= 1);
  assert_true(light_calls_made <= (int)MBXV_LIGHT_CHECK_EVERY + 1);
}

/* Each coroutine resume is charged a hook interval, so short coroutines are not free. */
static void coroutine_resumes_are_charged(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 1000000, 0);
  ran r = run(vm, "for i = 1, 1000 do coroutine.wrap(function() end)() end return charged()");
  assert_int_equal(r.status, MBX_OK);
  assert_true(r.instructions >= 1000u * MBXV_HOOK_COUNT_COROUTINE);
  r = run(vm, "for i = 1, 100000 do coroutine.wrap(function() end)() end return 1");
  assert_int_equal(r.status, MBX_INSTRUCTION_LIMIT);
  close_vm(vm);
}

static void memory_trip_after_a_full_collection(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(1u << 20, 0, 20000);
  /* Garbage well past the limit: collected, never a trip. */
  ran r = run(vm, "local n = 0\n"
                  "for i = 1, 200 do local t = {} for k = 1, 2000 do t[k] = k end n = n + #t end\n"
                  "return n");
  assert_int_equal(r.status, MBX_OK);
  assert_string_equal(r.value, "400000");
  assert_true(r.memory_peak <= mbxV_heap_ceiling_for(1u << 20));
  /* Live data past the limit: a trip, and the run can not swallow it. */
  r = run(vm, "keep = {} pcall(function() for i = 1, 1e8 do keep[i] = i end end) return 1");
  assert_int_equal(r.status, MBX_MEMORY_LIMIT);
  assert_string_equal(r.message, "memory limit exceeded (1048576 bytes)");
  assert_true(r.memory_peak > (1u << 20));
  assert_true(r.memory_peak <= mbxV_heap_ceiling_for(1u << 20));
  close_vm(vm);
}

/* ---- the functions, directly ---- */

static int call_charge_and_check(lua_State *L) {
  mbxV_charge(L, UINT64_MAX);
  mbxV_check(L);
  lua_pushboolean(L, 1);
  return 1;
}

/* A state that is not a sandbox (NULL extra space): charge and check do nothing. */
static void charge_is_a_noop_without_a_sandbox(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  *(void **)lua_getextraspace(L) = NULL;
  lua_pushcfunction(L, call_charge_and_check);
  assert_int_equal(lua_pcall(L, 0, 1, 0), LUA_OK);
  assert_true(lua_toboolean(L, -1));
  assert_int_equal(mbxV_tripped(L), MBXV_TRIP_NONE);
  lua_close(L);
}

/* Outside a run (budget not started) charging does nothing either. */
static void charge_is_a_noop_outside_a_run(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 10, 0);
  lua_pushcfunction(vm->L, call_charge_and_check);
  assert_int_equal(lua_pcall(vm->L, 0, 1, 0), LUA_OK);
  assert_int_equal(vm->budget.instructions, 0);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  lua_settop(vm->L, 0);
  close_vm(vm);
}

static void trip_messages(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(300000, 777, 55);
  vm->output.limit = 4096;
  static const struct {
    mbxV_trip trip;
    const char *text;
  } cases[] = {
      {MBXV_TRIP_MEMORY, "memory limit exceeded (300000 bytes)"},
      {MBXV_TRIP_INSTRUCTIONS, "instruction limit exceeded (777 instructions)"},
      {MBXV_TRIP_TIME, "time limit exceeded (55 ms)"},
      {MBXV_TRIP_OUTPUT, "output limit exceeded (4096 bytes)"},
      {MBXV_TRIP_INTERRUPT, "interrupted by the host"},
      {MBXV_TRIP_INTERNAL, "internal error in the runtime"},
      {MBXV_TRIP_NONE, "no limit tripped"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char buf[96];
    mbxV_trip_message(vm->L, cases[i].trip, buf, sizeof buf);
    assert_string_equal(buf, cases[i].text);
  }
  char tiny[8];
  mbxV_trip_message(vm->L, MBXV_TRIP_TIME, tiny, sizeof tiny);
  assert_string_equal(tiny, "time li");
  close_vm(vm);
}

static void first_trip_wins_and_start_clears_it(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 1000);
  mbxV_budget_start(vm->L);
  assert_int_equal(vm->budget.running, 1);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  mbxV_trip_set(vm->L, MBXV_TRIP_TIME);
  mbxV_trip_set(vm->L, MBXV_TRIP_MEMORY);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_TIME);
  vm->budget.instructions = 999;
  atomic_store(&vm->budget.interrupt, 1);
  mbxV_budget_stop(vm->L);
  assert_int_equal(vm->budget.running, 0);
  assert_null(vm->budget.current);
  assert_null(vm->budget.run_thread);
  uint64_t before = mbxV_now_coarse_ns();
  mbxV_budget_start(vm->L);
  uint64_t after = mbxV_now_coarse_ns();
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  assert_int_equal(vm->budget.instructions, 0);
  assert_int_equal(atomic_load(&vm->budget.interrupt), 0);
  /* The deadline is the start plus the limit, on the coarse clock. */
  assert_true(vm->budget.deadline_ns >= before + 1000u * 1000000u);
  assert_true(vm->budget.deadline_ns <= after + 1000u * 1000000u);
  mbxV_budget_stop(vm->L);
  vm->budget.time_limit_ms = 0;
  mbxV_budget_start(vm->L);
  assert_int_equal(vm->budget.deadline_ns, 0);
  mbxV_budget_stop(vm->L);
  close_vm(vm);
}

static int call_check(lua_State *L) {
  mbxV_check(L);
  return 0;
}

static void check_raises_only_when_tripped(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 0);
  lua_pushcfunction(vm->L, call_check);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  mbxV_trip_set(vm->L, MBXV_TRIP_INTERRUPT);
  lua_pushcfunction(vm->L, call_check);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_ERRRUN);
  assert_string_equal(lua_tostring(vm->L, -1), "interrupted by the host");
  lua_settop(vm->L, 0);
  close_vm(vm);
}

/* enter makes co current and returns the previous thread; leave restores it. */
static void enter_and_leave_track_the_current_thread(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 0);
  lua_State *co = lua_newthread(vm->L);
  mbxV_budget_start(vm->L);
  vm->budget.run_thread = co;
  assert_null(mbxV_budget_enter(vm->L, co));
  assert_ptr_equal(vm->budget.current, co);
  assert_int_equal(lua_gethookcount(co), MBXV_HOOK_COUNT);
  assert_int_equal(lua_gethookmask(co), LUA_MASKCOUNT);
  lua_State *inner = lua_newthread(vm->L);
  assert_ptr_equal(mbxV_budget_enter(vm->L, inner), co);
  assert_int_equal(lua_gethookcount(inner), MBXV_HOOK_COUNT_COROUTINE);
  /* A trip while inner runs: the thread we go back to is re-armed at count 1. */
  mbxV_trip_set(vm->L, MBXV_TRIP_TIME);
  assert_int_equal(lua_gethookcount(inner), 1);
  mbxV_budget_leave(vm->L, co);
  assert_ptr_equal(vm->budget.current, co);
  assert_int_equal(lua_gethookcount(co), 1);
  mbxV_budget_leave(vm->L, NULL);
  mbxV_budget_stop(vm->L);
  lua_settop(vm->L, 0);
  close_vm(vm);
}

/* Pressure (or a large block) re-arms the current thread at count 1. */
static void pressure_rearms_the_hook(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(64u << 20, 0, 0);
  lua_State *co = lua_newthread(vm->L);
  mbxV_budget_on_pressure(vm); /* not running: nothing to do, no crash */
  mbxV_budget_start(vm->L);
  vm->budget.run_thread = co;
  mbxV_budget_enter(vm->L, co);
  assert_int_equal(lua_gethookcount(co), MBXV_HOOK_COUNT);
  mbxV_budget_on_pressure(vm);
  assert_int_equal(lua_gethookcount(co), 1);
  mbxV_budget_leave(vm->L, NULL);
  mbxV_budget_stop(vm->L);
  lua_settop(vm->L, 0);
  close_vm(vm);
}

/* The interval while large blocks are live (issue 9, B.3): the allowance over the largest
   string the heap ever held, or over the live large bytes / 16, between 1 and 32. */
static int interval_with(mbxV_vm *vm, lua_State *co, size_t large_live, size_t largest_string,
                         uint64_t time_limit_ms) {
  size_t saved_live = vm->heap.large_live, saved_string = vm->heap.largest_string;
  vm->heap.large_live = large_live;
  vm->heap.largest_string = largest_string;
  vm->budget.time_limit_ms = time_limit_ms;
  mbxV_budget_enter(vm->L, co);
  int count = lua_gethookcount(co);
  mbxV_budget_leave(vm->L, NULL);
  vm->heap.large_live = saved_live;
  vm->heap.largest_string = saved_string;
  return count;
}

static void interval_follows_the_largest_string(void **state) {
  (void)state;
  const size_t mib = 1u << 20;
  mbxV_vm *vm = open_vm(256u << 20, 0, 0);
  lua_State *co = lua_newthread(vm->L);
  mbxV_budget_start(vm->L);
  vm->budget.run_thread = co;
  assert_int_equal(interval_with(vm, co, 0, 0, 0), MBXV_HOOK_COUNT);
  /* Tables (no large string): 8 MiB * 16 over the live large bytes. */
  assert_int_equal(interval_with(vm, co, 1 * mib, 0, 0), MBXV_HOOK_COUNT_LARGE);
  assert_int_equal(interval_with(vm, co, 64 * mib, 0, 0), 2);
  assert_int_equal(interval_with(vm, co, 256 * mib, 0, 0), 1);
  /* Strings: 8 MiB over the largest one, whatever else is live. */
  assert_int_equal(interval_with(vm, co, 1 * mib, 1 * mib, 0), 8);
  assert_int_equal(interval_with(vm, co, 2 * mib, 2 * mib, 0), 4);
  assert_int_equal(interval_with(vm, co, 16 * mib, 16 * mib, 0), 1);
  assert_int_equal(interval_with(vm, co, 1 * mib, MBXV_LARGE_BLOCK - 1, 0), MBXV_HOOK_COUNT_LARGE);
  /* A longer deadline allows a quarter of itself: 3 s is 93.75 MB at 8 ns a byte. */
  assert_int_equal(interval_with(vm, co, 16 * mib, 16 * mib, 3000), 5);
  assert_int_equal(interval_with(vm, co, 16 * mib, 16 * mib, 100), 1);
  assert_int_equal(interval_with(vm, co, 16 * mib, 1 * mib, 60000), MBXV_HOOK_COUNT_LARGE);
  /* A freed string is still counted while any large block lives; with none, only a string
     under a large block may still be live. */
  assert_int_equal(interval_with(vm, co, 0, 16 * mib, 0), MBXV_HOOK_COUNT_LARGE);
  /* Strings under a large block count too (fuzz_hostile: 200 KB of NULs compared a thousand
     times between two hooks took 1.6 s): from MBXV_NOTABLE_STRING on, 8 MiB over them. */
  assert_int_equal(interval_with(vm, co, 0, MBXV_NOTABLE_STRING - 1, 0), MBXV_HOOK_COUNT);
  assert_int_equal(interval_with(vm, co, 0, 16 * 1024, 0), 512);
  assert_int_equal(interval_with(vm, co, 0, 200000, 0), 41);
  vm->budget.time_limit_ms = 0;
  mbxV_budget_stop(vm->L);
  lua_settop(vm->L, 0);
  close_vm(vm);
}

static void clocks_are_monotonic(void **state) {
  (void)state;
  uint64_t a = mbxV_now_ns(), b = mbxV_now_ns();
  assert_true(b >= a);
  uint64_t c = mbxV_now_coarse_ns(), d = mbxV_now_coarse_ns();
  assert_true(d >= c);
  assert_true(a > 0 && c > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(instruction_limit_stops_a_loop),
      cmocka_unit_test(instruction_limit_is_per_run),
      cmocka_unit_test(time_limit_with_no_instruction_limit),
      cmocka_unit_test(trips_are_sticky),
      cmocka_unit_test(interrupt_flag_stops_the_run),
      cmocka_unit_test(interrupt_before_the_run_is_discarded),
      cmocka_unit_test(charge_semantics),
      cmocka_unit_test(light_charge_semantics),
      cmocka_unit_test(coroutine_resumes_are_charged),
      cmocka_unit_test(memory_trip_after_a_full_collection),
      cmocka_unit_test(charge_is_a_noop_without_a_sandbox),
      cmocka_unit_test(charge_is_a_noop_outside_a_run),
      cmocka_unit_test(trip_messages),
      cmocka_unit_test(first_trip_wins_and_start_clears_it),
      cmocka_unit_test(check_raises_only_when_tripped),
      cmocka_unit_test(enter_and_leave_track_the_current_thread),
      cmocka_unit_test(pressure_rearms_the_hook),
      cmocka_unit_test(interval_follows_the_largest_string),
      cmocka_unit_test(clocks_are_monotonic),
  };
  return cmocka_run_group_tests_name("vm/budget", tests, NULL, NULL);
}
