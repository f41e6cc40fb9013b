/* vm/vm.c -- one sandbox's Lua state: creation, teardown and the panic recovery point. */
#include "vm/vm.h"

#include <string.h>

#include <lauxlib.h>

const char mbxV_key_builtins = 0;
const char mbxV_key_run_thread = 0;

/* An error escaped every protected call: the state may be inconsistent. Never return into
   Lua (the default handler aborts the whole host): mark the run internal_error and unwind
   to the host call's own recovery point. The sandbox is poisoned and only freed. */
static int on_panic(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  atomic_store(&vm->budget.trip, MBXV_TRIP_INTERNAL);
  if (vm->panic_jmp) longjmp(*vm->panic_jmp, 1);
  return 0; /* unreachable in practice: every host entry sets panic_jmp */
}

int mbxV_vm_open(mbxV_vm *vm, const mbxV_config *cfg) {
  memset(vm, 0, sizeof *vm);
  mbxV_heap_init(&vm->heap, cfg->memory_limit);
  vm->heap.on_pressure = mbxV_budget_on_pressure;
  vm->heap.pressure_ud = vm;
  vm->budget.instruction_limit = cfg->instruction_limit;
  vm->budget.time_limit_ms = cfg->time_limit_ms;
  mbxV_output_init(&vm->output, cfg->output_limit);
  vm->source_limit = cfg->source_limit;
  vm->address_key = cfg->address_key;
  /* lua_newstate, not luaL_newstate: the latter installs a warn function that writes to the
     host's stderr once a script calls warn("@on") (THREATS D11). */
  lua_State *L = lua_newstate(mbxV_heap_alloc, &vm->heap);
  if (L == NULL) {
    mbxV_heap_release_all(&vm->heap);
    return 0;
  }
  /* Threads created later copy the main thread's extra space, so every thread finds vm. */
  *(mbxV_vm **)lua_getextraspace(L) = vm;
  lua_atpanic(L, on_panic);
  vm->L = L;
  return 1;
}

void mbxV_vm_close(mbxV_vm *vm) {
  mbxV_heap_release_all(&vm->heap);
  mbxV_output_free(&vm->output);
  vm->L = NULL;
}

int mbxV_record_builtins(lua_State *L) {
  lua_newtable(L);
  lua_pushglobaltable(L);
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, 1);
    lua_rawset(L, -5);
  }
  lua_pop(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins);
  return 0;
}
