/* tests/vm/test_vm.c -- unit tests of vm/vm.c: opening, closing, extra space, built-ins, panic. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/vm.h"

static const mbxV_config config = {.memory_limit = 8u << 20,
                                   .instruction_limit = 12345,
                                   .time_limit_ms = 678,
                                   .output_limit = 999,
                                   .source_limit = 4321,
                                   .address_key = 0xfeedfaceull};

static int setup(void **state) {
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  assert_int_equal(mbxV_vm_open(vm, &config), 1);
  *state = vm;
  return 0;
}

static int teardown(void **state) {
  mbxV_vm *vm = *state;
  mbxV_vm_close(vm);
  free(vm);
  return 0;
}

static void open_copies_the_config_and_wires_the_heap(void **state) {
  mbxV_vm *vm = *state;
  assert_non_null(vm->L);
  assert_ptr_equal(mbxV_from(vm->L), vm);
  assert_int_equal(vm->heap.limit, 8u << 20);
  assert_int_equal(vm->heap.ceiling, mbxV_heap_ceiling_for(8u << 20));
  assert_true(vm->heap.used > 0); /* the state itself lives in the guest heap */
  assert_non_null(vm->heap.blocks);
  assert_ptr_equal(vm->heap.on_pressure, mbxV_budget_on_pressure);
  assert_ptr_equal(vm->heap.pressure_ud, vm);
  assert_int_equal(vm->budget.instruction_limit, 12345);
  assert_int_equal(vm->budget.time_limit_ms, 678);
  assert_int_equal(vm->budget.running, 0);
  assert_int_equal(vm->output.limit, 999);
  assert_int_equal(vm->source_limit, 4321);
  assert_int_equal(vm->address_key, 0xfeedfaceull);
  assert_null(vm->panic_jmp);
  /* lua_newstate, not luaL_newstate: no warn function that could reach the host's stderr. */
  assert_int_equal(luaL_loadstring(vm->L, "return 1"), LUA_OK);
  lua_pop(vm->L, 1);
  /* No library is open. */
  lua_pushglobaltable(vm->L);
  lua_pushnil(vm->L);
  assert_int_equal(lua_next(vm->L, -2), 0);
  lua_pop(vm->L, 1);
}

/* Open wipes whatever the struct held before. */
static void open_clears_a_dirty_struct(void **state) {
  (void)state;
  mbxV_vm *vm = malloc(sizeof *vm);
  assert_non_null(vm);
  memset(vm, 0xA5, sizeof *vm);
  assert_int_equal(mbxV_vm_open(vm, &config), 1);
  /* The stdlib's area (close nesting, pause state, port) starts zeroed. */
  static const unsigned char zero_ext[MBXV_EXT_BYTES];
  assert_memory_equal(vm->ext, zero_ext, sizeof zero_ext);
  assert_null(vm->panic_jmp);
  assert_null(vm->output.data[0]);
  assert_int_equal(atomic_load(&vm->budget.trip), MBXV_TRIP_NONE);
  assert_int_equal(atomic_load(&vm->budget.interrupt), 0);
  mbxV_vm_close(vm);
  free(vm);
}

static void threads_share_the_extra_space(void **state) {
  mbxV_vm *vm = *state;
  lua_State *co = lua_newthread(vm->L);
  assert_ptr_equal(mbxV_from(co), vm);
  lua_State *co2 = lua_newthread(co); /* a thread made from a thread */
  assert_ptr_equal(mbxV_from(co2), vm);
  lua_settop(vm->L, 0);
}

static int probe(lua_State *L) {
  mbxV_vm *vm = lua_touserdata(L, lua_upvalueindex(1));
  int is_main = lua_pushthread(L); /* 1 only on the main thread */
  lua_pop(L, 1);
  lua_pushboolean(L, mbxV_from(L) == vm);
  lua_pushboolean(L, is_main);
  return 2;
}

static int open_stock_coroutines(lua_State *L) {
  luaL_requiref(L, "_G", luaopen_base, 1);
  luaL_requiref(L, "coroutine", luaopen_coroutine, 1);
  return 0;
}

/* A coroutine created by Lua code (not by the host) also finds the sandbox. */
static void guest_coroutines_find_the_vm(void **state) {
  mbxV_vm *vm = *state;
  lua_State *L = vm->L;
  lua_pushcfunction(L, open_stock_coroutines);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_OK);
  lua_pushlightuserdata(L, vm);
  lua_pushcclosure(L, probe, 1);
  lua_setglobal(L, "probe");
  const char *code = "local a, am = probe()\n"
                     "local b, bm = coroutine.wrap(function()\n"
                     "  return coroutine.wrap(function() return probe() end)()\n"
                     "end)()\n"
                     "return a, am, b, bm";
  assert_int_equal(luaL_loadstring(L, code), LUA_OK);
  assert_int_equal(lua_pcall(L, 0, 4, 0), LUA_OK);
  assert_true(lua_toboolean(L, 1));  /* main thread: our vm */
  assert_true(lua_toboolean(L, 2));  /* ... and it was the main thread */
  assert_true(lua_toboolean(L, 3));  /* nested coroutine: our vm */
  assert_false(lua_toboolean(L, 4)); /* ... on a thread that is not the main one */
  lua_settop(L, 0);
}

static void close_releases_everything(void **state) {
  (void)state;
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  assert_int_equal(mbxV_vm_open(vm, &config), 1);
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  assert_int_equal(luaL_loadstring(vm->L, "t = {} for i = 1, 1000 do t[i] = {} end"), LUA_OK);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  vm->output.data[0] = malloc(32); /* captured output is host memory, freed too */
  vm->output.cap[0] = 32;
  mbxV_vm_close(vm);
  assert_null(vm->L);
  assert_int_equal(vm->heap.used, 0);
  assert_null(vm->heap.blocks);
  assert_null(vm->output.data[0]);
  free(vm);
}

static void record_builtins_snapshots_the_globals(void **state) {
  mbxV_vm *vm = *state;
  lua_State *L = vm->L;
  lua_pushinteger(L, 1);
  lua_setglobal(L, "alpha");
  lua_pushinteger(L, 2);
  lua_setglobal(L, "beta");
  lua_pushcfunction(L, mbxV_record_builtins);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_OK);
  assert_int_equal(lua_gettop(L), 0);
  lua_pushinteger(L, 3);
  lua_setglobal(L, "gamma"); /* after the snapshot: not a built-in */
  assert_int_equal(lua_rawgetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins), LUA_TTABLE);
  int n = 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    n++;
    assert_int_equal(lua_type(L, -2), LUA_TSTRING);
    assert_int_equal(lua_type(L, -1), LUA_TBOOLEAN);
    assert_true(lua_toboolean(L, -1));
    lua_pop(L, 1);
  }
  assert_int_equal(n, 2);
  assert_int_equal(lua_getfield(L, -1, "alpha"), LUA_TBOOLEAN);
  assert_int_equal(lua_getfield(L, -2, "beta"), LUA_TBOOLEAN);
  assert_int_equal(lua_getfield(L, -3, "gamma"), LUA_TNIL);
  lua_settop(L, 0);
}

/* With the sandbox's stdlib: print and string are built-ins; the registry keys are distinct. */
static void sandbox_builtins_include_the_stdlib(void **state) {
  mbxV_vm *vm = *state;
  lua_State *L = vm->L;
  assert_ptr_not_equal(&mbxV_key_builtins, &mbxV_key_run_thread);
  lua_pushcfunction(L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_OK);
  assert_int_equal(lua_rawgetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins), LUA_TTABLE);
  const char *names[] = {"print", "string",    "table", "math",  "pcall",
                         "_G",    "coroutine", "io",    "debug", "package"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    assert_int_equal(lua_getfield(L, -1, names[i]), LUA_TBOOLEAN);
    lua_pop(L, 1);
  }
  assert_int_equal(lua_getfield(L, -1, "loadlib"), LUA_TNIL);
  lua_settop(L, 0);
}

/* An error outside every protected call reaches the panic handler, which marks the run
   internal_error and jumps to the host call's recovery point instead of aborting. */
static void panic_unwinds_to_the_recovery_point(void **state) {
  mbxV_vm *vm = *state;
  jmp_buf recovery;
  volatile int jumped = 0;
  vm->panic_jmp = &recovery;
  if (setjmp(recovery) == 0) {
    lua_pushliteral(vm->L, "unprotected");
    lua_error(vm->L);
    fail_msg("lua_error returned");
  } else {
    jumped = 1;
  }
  vm->panic_jmp = NULL;
  assert_int_equal(jumped, 1);
  assert_int_equal(atomic_load(&vm->budget.trip), MBXV_TRIP_INTERNAL);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_INTERNAL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(open_copies_the_config_and_wires_the_heap, setup, teardown),
      cmocka_unit_test(open_clears_a_dirty_struct),
      cmocka_unit_test_setup_teardown(threads_share_the_extra_space, setup, teardown),
      cmocka_unit_test_setup_teardown(guest_coroutines_find_the_vm, setup, teardown),
      cmocka_unit_test(close_releases_everything),
      cmocka_unit_test_setup_teardown(record_builtins_snapshots_the_globals, setup, teardown),
      cmocka_unit_test_setup_teardown(sandbox_builtins_include_the_stdlib, setup, teardown),
      cmocka_unit_test_setup_teardown(panic_unwinds_to_the_recovery_point, setup, teardown),
  };
  return cmocka_run_group_tests_name("vm/vm", tests, NULL, NULL);
}
