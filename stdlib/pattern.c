/* stdlib/pattern.c -- string.find/match/gmatch/gsub: left out until the metered matcher lands
   (the stock matcher backtracks in C without a hook: THREATS D1). */
#include <lauxlib.h>

#include "stdlib/stdlib.h"

void mbxL_install_patterns(lua_State *L, int lib) {
  static const char *const unavailable[] = {"find", "match", "gmatch", "gsub", NULL};
  mbxL_mark_unavailable(L, lib, "string", unavailable);
}
