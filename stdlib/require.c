/* stdlib/require.c -- require(name) for the built-in modules only; no package table. */
#include <stdio.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"

/*
** There is no package library: no searchers, no package.path/cpath, no loadlib, nothing
** that could reach the host's files or shared objects. The modules are the library tables
** the sandbox already has, recorded when require is opened in a private registry table
** that no guest reference leads to, so reassigning the global `string` (or everything in
** _G) changes nothing require returns. The tables themselves are the guest's own, as the
** globals are, so changing their fields is visible both ways, as in stock Lua.
*/

static const char key_modules = 0; /* registry: module name -> library table */

/* Module names, and the global each one is. Aliases let code written for lua-cjson or
   dkjson run unchanged (the API they share: encode, decode, null). */
static const char *const modules[][2] = {
    {"coroutine", "coroutine"}, {"io", "io"},     {"json", "json"}, {"cjson", "json"},
    {"dkjson", "json"},         {"math", "math"}, {"os", "os"},     {"string", "string"},
    {"table", "table"},         {"utf8", "utf8"}, {"fs", "fs"},     {"debug", "debug"}};

#define AVAILABLE "coroutine, debug, fs, fuzz, io, json, math, os, string, table, utf8"

static int require_module(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_modules);
  lua_pushvalue(L, 1);
  if (lua_rawget(L, -2) == LUA_TTABLE) return 1;
  /* A name is quoted up to 64 bytes (and up to a NUL): enough to recognize it, and a huge
     name cannot make a huge message. */
  char shown[72];
  snprintf(shown, sizeof shown, "%.*s%s", (int)(len > 64 ? 64 : len), name, len > 64 ? "..." : "");
  return luaL_error(L, "module '%s' is not available in this sandbox (available: " AVAILABLE ")",
                    shown);
}

void mbxL_require_add(lua_State *L, const char *name, size_t name_len, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_modules);
  lua_pushlstring(L, name, name_len);
  lua_pushvalue(L, idx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

int mbxL_open_require(lua_State *L) {
  lua_createtable(L, 0, (int)(sizeof modules / sizeof *modules));
  for (size_t i = 0; i < sizeof modules / sizeof *modules; i++) {
    if (lua_getglobal(L, modules[i][1]) == LUA_TTABLE)
      lua_setfield(L, -2, modules[i][0]);
    else
      lua_pop(L, 1);
  }
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_modules);
  lua_pushcfunction(L, require_module);
  lua_setglobal(L, "require");
  return 0;
}
