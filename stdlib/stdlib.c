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
  return 0;
}
