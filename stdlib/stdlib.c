/* stdlib/stdlib.c -- builds the guest's global environment from the curated libraries. */
#include "stdlib/stdlib.h"

#include <lauxlib.h>

#include "vm/vm.h"

static int unavailable(lua_State *L) {
  return luaL_error(L,
                    "%s is not available in this sandbox yet: its stock version runs "
                    "unmetered in C (see docs/compat.md)",
                    lua_tostring(L, lua_upvalueindex(1)));
}

void mbxL_mark_unavailable(lua_State *L, int idx, const char *lib, const char *const *names) {
  idx = lua_absindex(L, idx);
  for (; *names; names++) {
    lua_pushfstring(L, "%s.%s", lib, *names);
    lua_pushcclosure(L, unavailable, 1);
    lua_setfield(L, idx, *names);
  }
}

int mbxL_open_sandbox(lua_State *L) {
  static const lua_CFunction openers[] = {mbxL_open_base, mbxL_open_string, mbxL_open_table,
                                          mbxL_open_math, mbxL_open_utf8,   mbxL_open_coroutine,
                                          mbxL_open_io};
  for (size_t i = 0; i < sizeof openers / sizeof *openers; i++) {
    openers[i](L);
    lua_settop(L, 0);
  }
  mbxV_record_builtins(L);
  /* luaL_argerror names a C function called from C by searching the registry's loaded-module
     table, including every field of _G: a guest-sized, unmetered C loop on each such error.
     Only our wrappers call stock functions from C, so the table shrinks to the names they
     need: the stock string.format behind ours, so its errors still say 'format'. */
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_getglobal(L, "string");
  lua_getfield(L, -1, "format");
  lua_getupvalue(L, -1, 1);
  lua_setfield(L, -4, "format");
  lua_pop(L, 2);
  lua_setfield(L, -2, "string");
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  return 0;
}
