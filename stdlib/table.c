/* stdlib/table.c -- the table library guests see: table.pack only for now; the functions that
   loop in C over guest-chosen ranges wait for their metered versions. */
#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"

int mbxL_open_table(lua_State *L) {
  /* Each of these loops in C over a range or a __len the guest picks, and __index/__newindex
     may be C functions, so no VM instruction (and no hook) runs meanwhile (THREATS D4). */
  static const char *const unavailable[] = {"move",   "concat", "insert", "remove",
                                            "unpack", "sort",   NULL};
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  mbxL_mark_unavailable(L, -1, "table", unavailable);
  lua_pop(L, 1);
  return 0;
}
