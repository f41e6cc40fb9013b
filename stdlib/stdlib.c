/* stdlib/stdlib.c -- builds the guest's global environment from the curated libraries. */
#include "stdlib/stdlib.h"

#include <stdatomic.h>
#include <stdlib.h>
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

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Push a table of the functions of the table at lib, by name, in byte order of the names;
   a function already in seen (function -> true) is left out, and every copied one is added
   to it. The names stay anchored as keys of lib while the array of them is in use. */
static void copy_functions(lua_State *L, int lib, int seen) {
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, lib)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) n++;
    lua_pop(L, 1);
  }
  const char **names = lua_newuserdatauv(L, (n ? n : 1) * sizeof *names, 0);
  size_t k = 0;
  lua_pushnil(L);
  while (lua_next(L, lib)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) names[k++] = lua_tostring(L, -2);
    lua_pop(L, 1);
  }
  qsort(names, n, sizeof *names, by_name);
  lua_createtable(L, 0, (int)n);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawget(L, lib);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, seen) != LUA_TNIL) {
      lua_pop(L, 2);
      continue;
    }
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushboolean(L, 1);
    lua_rawset(L, seen);
    lua_setfield(L, -2, names[i]);
  }
  lua_remove(L, -2); /* the names */
}

/* ---- no code addresses in guest-visible functions (issue 9, D) ----
   Lua hashes a light C function by its code address, and next/pairs walk a table in hash
   order: probing a few table sizes recovers the low bits of the addresses of liblua5.4 and of
   this binary (an ASLR bypass). A C closure with an upvalue is a heap object in the sandbox's
   slot instead, placed at a random address far from the libraries (vm/arena.c). So every C
   function a guest can reach is made a closure: the library tables in one sweep once they are
   all open, and the few stock functions that push a light C function when called (ipairs,
   utf8.codes) through wrappers that push closures made here. stdlib/deterministic.c makes its
   next/pairs closures itself. tests/stdlib/test_stdlib.c walks what a guest reaches. */

int mbxL_is_light_cfunction(lua_State *L, int idx) {
  if (!lua_iscfunction(L, idx)) return 0;
  if (lua_getupvalue(L, idx, 1) == NULL) return 1;
  lua_pop(L, 1);
  return 0;
}

/* The closure standing for the light C function on top of the stack (replaced by it): one per
   function, remembered in the table at map, so every copy of it stays one value. */
static void close_top(lua_State *L, int map) {
  if (!mbxL_is_light_cfunction(L, -1)) return;
  lua_pushvalue(L, -1);
  if (lua_rawget(L, map) != LUA_TNIL) {
    lua_replace(L, -2);
    return;
  }
  lua_pop(L, 1);
  lua_CFunction f = lua_tocfunction(L, -1);
  lua_pushboolean(L, 0); /* the upvalue: its value does not matter, only that it exists */
  lua_pushcclosure(L, f, 1);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_rawset(L, map);
  lua_replace(L, -2);
}

/* Every light C function among the values of the table at idx becomes its closure. */
static void close_fields(lua_State *L, int idx, int map) {
  idx = lua_absindex(L, idx);
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (mbxL_is_light_cfunction(L, -1)) {
      close_top(L, map);
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, idx); /* an existing field: allowed during the traversal */
    } else {
      lua_pop(L, 1);
    }
  }
}

/* ipairs(t): stock's, with its iterator as a closure (upvalue 1). */
static int closed_ipairs(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* utf8.codes(s [, lax]): stock 5.4.4's, with its two iterators as closures (upvalues 1 and 2:
   strict and lax). */
static int closed_codes(lua_State *L) {
  int lax = lua_toboolean(L, 2);
  luaL_checkstring(L, 1);
  lua_pushvalue(L, lua_upvalueindex(lax ? 2 : 1));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* Call the stock factory below the nargs arguments on top and leave the closure for the
   iterator it returns in their place. */
static void push_stock_iterator(lua_State *L, int map, int nargs) {
  lua_call(L, nargs, 1);
  close_top(L, map);
}

static void hide_code_addresses(lua_State *L) {
  lua_newtable(L);
  int map = lua_gettop(L);
  lua_pushglobaltable(L);
  int g = lua_gettop(L);
  if (lua_getfield(L, g, "ipairs") == LUA_TFUNCTION) {
    lua_newtable(L);
    push_stock_iterator(L, map, 1);
    lua_pushcclosure(L, closed_ipairs, 1);
    lua_setfield(L, g, "ipairs");
  }
  lua_settop(L, g);
  if (lua_getfield(L, g, "utf8") == LUA_TTABLE && lua_getfield(L, -1, "codes") == LUA_TFUNCTION) {
    int codes = lua_gettop(L);
    lua_pushvalue(L, codes);
    lua_pushliteral(L, "");
    push_stock_iterator(L, map, 1);
    lua_pushvalue(L, codes);
    lua_pushliteral(L, "");
    lua_pushboolean(L, 1);
    push_stock_iterator(L, map, 2);
    lua_pushcclosure(L, closed_codes, 2);
    lua_setfield(L, codes - 1, "codes");
  }
  lua_settop(L, g);
  /* The file methods (stdlib/io.c) are reached as io.stdout.write, through the metatable's
     __index (the metatable itself is hidden from getmetatable; its metamethods too). */
  if (luaL_getmetatable(L, "FILE*") == LUA_TTABLE) {
    close_fields(L, -1, map);
    if (lua_getfield(L, -1, "__index") == LUA_TTABLE) close_fields(L, -1, map);
  }
  lua_settop(L, g);
  close_fields(L, g, map);
  lua_pushnil(L);
  while (lua_next(L, g)) {
    if (lua_type(L, -1) == LUA_TTABLE) close_fields(L, -1, map);
    lua_pop(L, 1);
  }
  lua_settop(L, map - 1);
}

int mbxL_open_sandbox(lua_State *L) {
  /* require comes after the globals: it records the library tables the others made (fuzz,
     a module only, adds itself to it). */
  static const lua_CFunction openers[] = {
      mbxL_open_base,      mbxL_open_deterministic, mbxL_open_string, mbxL_open_table,
      mbxL_open_math,      mbxL_open_utf8,
      mbxL_open_coroutine, mbxL_open_io,     mbxL_open_os,    mbxL_open_proc,  mbxL_open_json,
      mbxL_open_require,   mbxL_open_fuzz};
  for (size_t i = 0; i < sizeof openers / sizeof *openers; i++) {
    openers[i](L);
    lua_settop(L, 0);
  }
  hide_code_addresses(L);
  mbxV_record_builtins(L);
  /* luaL_argerror names a C function called from C (pcall(string.gsub)) by searching the
     registry's loaded-module table, including every field of _G: a guest-sized, unmetered C
     loop on each such error. The table becomes private, fixed-size copies of the libraries
     instead, functions only, so names still come out as 'string.gsub' and, from the copy of
     _G's built-ins, 'setmetatable' (stock drops the "_G." prefix). The search walks the
     table with lua_next, whose order depends on the string hash seed (per process): each
     function is copied under one name only, the first in byte order of library then field
     name, so the name found is the same in every process (issue 9, E.5). */
  static const char *const libs[] = {"_G",   "coroutine", "fs",   "io",    "json", "math",
                                     "os",   "proc",      "string", "table", "utf8"};
  lua_newtable(L);
  int loaded = lua_gettop(L);
  lua_newtable(L);
  int seen = lua_gettop(L);
  for (size_t i = 0; i < sizeof libs / sizeof *libs; i++) {
    if (lua_getglobal(L, libs[i]) != LUA_TTABLE) {
      lua_pop(L, 1);
      continue;
    }
    copy_functions(L, lua_gettop(L), seen);
    lua_setfield(L, loaded, libs[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1); /* seen */
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
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
  return (mbxC_wait){.deadline_ns = 0, .interrupted = interrupted,
                     .ctx = &mbxV_from(L)->budget};
}
