/* stdlib/stdlib.c -- builds the guest's global environment from the curated libraries. */
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

int mbxL_heap_fits(lua_State *L, size_t need) {
  const size_t slack = (size_t)64 * 1024;
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL) return 1;
  for (int round = 0; round < 2; round++) {
    size_t used = vm->heap.used + slack;
    if (used < vm->heap.ceiling && need <= vm->heap.ceiling - used) return 1;
    if (round == 0) {
      mbxV_charge(L, vm->heap.used / 64 + 1);
      lua_gc(L, LUA_GCCOLLECT);
    }
  }
  return 0;
}

int mbxL_open_sandbox(lua_State *L) {
  /* require comes last: it records the library tables the others made. */
  static const lua_CFunction openers[] = {
      mbxL_open_base,      mbxL_open_deterministic, mbxL_open_string, mbxL_open_table,
      mbxL_open_math,      mbxL_open_utf8,
      mbxL_open_coroutine, mbxL_open_io,     mbxL_open_os,    mbxL_open_json, mbxL_open_require};
  for (size_t i = 0; i < sizeof openers / sizeof *openers; i++) {
    openers[i](L);
    lua_settop(L, 0);
  }
  mbxV_record_builtins(L);
  /* luaL_argerror names a C function called from C (pcall(string.gsub)) by searching the
     registry's loaded-module table, including every field of _G: a guest-sized, unmetered C
     loop on each such error. The table becomes private, fixed-size copies of the libraries
     instead (not _G), so names still come out as 'string.gsub'; string.format is the stock
     one our wrapper calls. */
  static const char *const libs[] = {"string", "table", "math", "utf8", "coroutine",
                                     "os",     "io",    "json"};
  lua_newtable(L);
  int loaded = lua_gettop(L);
  for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
    if (lua_getglobal(L, libs[i]) != LUA_TTABLE) {
      lua_pop(L, 1);
      continue;
    }
    int lib = lua_gettop(L);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, lib)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, lib + 1);
    }
    lua_setfield(L, loaded, libs[i]);
    lua_pop(L, 1);
  }
  lua_getfield(L, loaded, "string");
  lua_getfield(L, -1, "format");
  lua_getupvalue(L, -1, 1);
  lua_setfield(L, -3, "format");
  lua_pop(L, 2);
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  return 0;
}

void mbxL_attach(lua_State *L, const mbxC_port *port) {
  mbxL_state *st = mbxL_state_of(L);
  memset(st, 0, sizeof *st);
  st->port = port;
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
  return (mbxC_wait){.deadline_ns = 0, .interrupted = interrupted,
                     .ctx = &mbxV_from(L)->budget};
}
