/* stdlib/math.c -- the math library guests see: stock; every function is O(1). */
#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"

int mbxL_open_math(lua_State *L) {
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_pop(L, 1);
  return 0;
}
