/* stdlib/strbuild.c -- string.rep/pack/unpack: left out until their metered versions land
   (string.rep("", 2^62) loops in C with no memory growth: THREATS D3). */
#include <lauxlib.h>

#include "stdlib/stdlib.h"

void mbxL_install_builders(lua_State *L, int lib) {
  static const char *const unavailable[] = {"rep", "pack", "unpack", NULL};
  mbxL_mark_unavailable(L, lib, "string", unavailable);
}
