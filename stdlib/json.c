/* stdlib/json.c -- the `json` library: the run's own Lua <-> JSON codec (vm/json.c) for guests. */
#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/json.h"

/*
** The codec is the one that converts inputs and results, so its memory comes from the guest
** heap and its loops are charged to the budget; nothing here copies or walks data itself.
** Its errors carry no position (it raises from deep inside), so each call runs it under a
** pcall and raises again with the caller's "chunk:line:" and the function's name in front.
*/

static int do_encode(lua_State *L) {
  mbxV_json_encode(L, 1, "value");
  return 1;
}

static int do_decode(lua_State *L) {
  size_t len;
  const char *text = lua_tolstring(L, 1, &len);
  mbxV_json_decode(L, text, len);
  return 1;
}

/* Call f on the value at index 1; on failure raise "<where>json.<name>: <message>". A trip
   (a limit reached inside the codec) is rethrown as it is, and so is out-of-memory. */
static int call_codec(lua_State *L, lua_CFunction f, const char *name) {
  lua_settop(L, 1);
  lua_pushcfunction(L, f);
  lua_insert(L, 1);
  int status = lua_pcall(L, 1, 1, 0);
  mbxV_check(L);
  if (status == LUA_OK) return 1;
  if (status == LUA_ERRMEM) return lua_error(L);
  luaL_where(L, 1);
  lua_pushfstring(L, "json.%s: ", name);
  lua_pushvalue(L, -3);
  lua_concat(L, 3);
  return lua_error(L);
}

/* json.encode(value): JSON text; keys sorted, integers exact, {} for an empty table. */
static int json_encode(lua_State *L) {
  luaL_checkany(L, 1);
  return call_codec(L, do_encode, "encode");
}

/* json.decode(text): the value; null decodes to json.null. */
static int json_decode(lua_State *L) {
  luaL_checkstring(L, 1);
  return call_codec(L, do_decode, "decode");
}

/* json.array([t]): t (or a new table) marked so that it encodes as an array even when empty.
   A table with a metatable of its own is refused rather than stripped of it: the guest can
   add __jsontype = "array" to that metatable instead. */
static int json_array(lua_State *L) {
  if (lua_isnoneornil(L, 1)) {
    lua_settop(L, 0);
    lua_newtable(L);
  } else {
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
  }
  if (lua_getmetatable(L, 1)) {
    int marked = mbxV_json_is_array_marker(L, -1);
    lua_pop(L, 1);
    if (!marked)
      return luaL_error(L, "json.array: the table already has a metatable (add "
                           "__jsontype = \"array\" to that metatable instead)");
    return 1;
  }
  mbxV_json_set_array_marker(L, 1);
  return 1;
}

int mbxL_open_json(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"encode", json_encode}, {"decode", json_decode}, {"array", json_array}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  mbxV_json_push_null(L);
  lua_setfield(L, -2, "null");
  lua_setglobal(L, "json");
  return 0;
}
