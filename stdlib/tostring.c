/* stdlib/tostring.c -- value to text for guests: luaL_tolstring without heap addresses. */
#include <stdio.h>

#include <lauxlib.h>
#include <xxhash.h>

#include "stdlib/base.h"
#include "stdlib/stdlib.h"
#include "vm/cstack.h"
#include "vm/vm.h"

/* A stable, per-object stand-in for its address: a keyed hash, meaningless outside this
   sandbox. Printing the real address would hand guests an ASLR bypass for any memory bug in
   the VM (THREATS E10). */
static unsigned long long hidden_address(lua_State *L, const void *p) {
  mbxV_vm *vm = mbxV_from(L);
  uint64_t key = vm ? vm->address_key : 0;
  return (unsigned long long)(XXH3_64bits_withSeed(&p, sizeof p, key) >> 16);
}

const char *mbxL_tolstring(lua_State *L, int idx, size_t *len) {
  idx = lua_absindex(L, idx);
  mbxV_cstack_check(L); /* __tostring may call tostring again, from C each time */
  /* The guest's live fields (a __tostring or __name set after setmetatable counts). */
  if (mbxL_callmeta(L, idx, "__tostring")) {
    if (!lua_isstring(L, -1)) luaL_error(L, "'__tostring' must return a string");
    return lua_tolstring(L, -1, len);
  }
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
  case LUA_TSTRING:
    lua_pushvalue(L, idx);
    break; /* converted below, on the copy */
  case LUA_TBOOLEAN:
    lua_pushstring(L, lua_toboolean(L, idx) ? "true" : "false");
    break;
  case LUA_TNIL:
    lua_pushliteral(L, "nil");
    break;
  default: {
    /* Deterministic mode: the sandbox's first-seen counter instead of the hash, so the text
       is the same in every process (the hash key is random per runtime). */
    unsigned long long shown = mbxL_deterministic(L)
                                   ? (unsigned long long)mbxL_object_number(L, idx)
                                   : hidden_address(L, lua_topointer(L, idx));
    int kind = mbxL_getmetafield(L, idx, "__name");
    const char *name = kind == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, idx);
    char buf[64];
    snprintf(buf, sizeof buf, ": 0x%012llx", shown);
    lua_pushstring(L, name);
    lua_pushstring(L, buf);
    lua_concat(L, 2);
    if (kind != LUA_TNIL) lua_remove(L, -2);
    break;
  }
  }
  return lua_tolstring(L, -1, len);
}
