/* stdlib/utf8.c -- the utf8 library guests see: char, charpattern and codes; the functions
   that scan whole strings in one C call wait for their metered versions. */
#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"

int mbxL_open_utf8(lua_State *L) {
  static const char *const unavailable[] = {"len", "offset", "codepoint", NULL};
  luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  mbxL_mark_unavailable(L, -1, "utf8", unavailable);
  lua_pop(L, 1);
  return 0;
}
