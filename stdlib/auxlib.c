/* stdlib/auxlib.c -- helpers the libraries share (as Lua's lauxlib.c): refusal stubs, heap
   room, collection cost, the sandbox's per-run state and its host-time wait. */
#include "stdlib/stdlib.h"

#include <stdatomic.h>
#include <string.h>

#include <lauxlib.h>

#include "vm/budget.h"
#include "vm/vm.h"

static int refused(lua_State *L) {
  return luaL_error(L, "%s", lua_tostring(L, lua_upvalueindex(1)));
}

void mbxL_add_refusals(lua_State *L, int idx, const mbxL_refusal *list) {
  idx = lua_absindex(L, idx);
  for (; list->name; list++) {
    lua_pushstring(L, list->message);
    lua_pushcclosure(L, refused, 1);
    lua_setfield(L, idx, list->name);
  }
}

size_t mbxL_collect_cost(lua_State *L) {
  size_t bytes = (size_t)lua_gc(L, LUA_GCCOUNT) * 1024 + (size_t)lua_gc(L, LUA_GCCOUNTB);
  return bytes / 64 + 1;
}

int mbxL_heap_fits(lua_State *L, size_t need) {
  const size_t slack = (size_t)64 * 1024;
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL) return 1;
  for (int round = 0; round < 2; round++) {
    size_t used = vm->heap.used + slack;
    if (used < vm->heap.ceiling && need <= vm->heap.ceiling - used) return 1;
    if (round == 0) {
      mbxV_charge(L, mbxL_collect_cost(L));
      lua_gc(L, LUA_GCCOLLECT);
    }
  }
  return 0;
}

int mbxL_is_light_cfunction(lua_State *L, int idx) {
  if (!lua_iscfunction(L, idx)) return 0;
  if (lua_getupvalue(L, idx, 1) == NULL) return 1;
  lua_pop(L, 1);
  return 0;
}

void mbxL_attach(lua_State *L, const mbxC_port *port) {
  /* Only for a state of ours (the host attaches right after making it): no NULL path. */
  mbxV_vm *vm = mbxV_from(L);
  memset(vm->ext, 0, sizeof vm->ext);
  mbxL_state_of(L)->port = port;
}

void mbxL_run_begin(lua_State *L) {
  mbxL_state *st = mbxL_state_of(L);
  st->close_nesting = 0;
  st->pause_chain_broken = 0;
}

static int interrupted(const void *ctx) {
  const mbxV_budget *b = ctx;
  return atomic_load_explicit(&b->interrupt, memory_order_acquire) != 0;
}

mbxC_wait mbxL_host_wait(lua_State *L) {
  return (mbxC_wait){.deadline_ns = 0, .interrupted = interrupted, .ctx = &mbxV_from(L)->budget};
}
