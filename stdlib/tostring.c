/* stdlib/tostring.c -- value to text for guests: luaL_tolstring without heap addresses. */
#include <stdio.h>

#include <lauxlib.h>
#include <xxhash.h>

#include "stdlib/metatable.h"
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

/* The digits tostring shows after the type name: the object's number in deterministic mode
   (the hash key is random per runtime), else the keyed hash of its address. */
static unsigned long long shown_address(lua_State *L, int idx) {
  return mbxL_deterministic(L) ? (unsigned long long)mbxL_object_number(L, idx)
                               : hidden_address(L, lua_topointer(L, idx));
}

const char *mbxL_pointer_text(lua_State *L, int idx, char *buf, size_t size) {
  idx = lua_absindex(L, idx);
  if (lua_topointer(L, idx) == NULL) return NULL;
  unsigned long long shown;
  if (lua_type(L, idx) == LUA_TSTRING && mbxL_deterministic(L)) {
    /* Strings have no object number (they are values to the canonical order): a hash of the
       bytes, the same in every process. Equal long strings share it, where stock's
       addresses tell two copies apart. */
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    shown = (unsigned long long)(XXH3_64bits(s, len) >> 16);
  } else {
    shown = shown_address(L, idx);
  }
  snprintf(buf, size, "0x%012llx", shown);
  return buf;
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
    unsigned long long shown = shown_address(L, idx);
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
