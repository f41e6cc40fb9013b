/* stdlib/fuzz.c -- require("fuzz").provider(data): structured values taken from fuzz input. */
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"

/*
** A FuzzedDataProvider in the manner of LLVM's: integers and booleans are taken from the end
** of the input, byte strings from the front, so a mutation of the bytes that pick choices does
** not shift the data and the other way round. It is a pure function of its input string (no
** capability, no host state), so it is a stdlib module in every sandbox, not only under
** `moonbox fuzz`: the same target runs under `moonbox run` with a saved input and takes the
** same path. Not a global: a target defines the global function `fuzz`. Every call is charged
** like the other library functions (one instruction plus the bytes it copies / 64), and what
** it returns lives in the guest heap under its limit.
*/

typedef struct provider {
  size_t front; /* bytes consumed from the front */
  size_t back;  /* bytes consumed from the back */
} provider;

static const char key_provider_mt = 0;

/* The provider at argument 1 and its input string (the userdata's user value). */
static provider *check_provider(lua_State *L, const char **data, size_t *len) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_provider_mt);
  provider *p = lua_touserdata(L, 1);
  if (p == NULL || !lua_getmetatable(L, 1) || !lua_rawequal(L, -1, -2))
    luaL_typeerror(L, 1, "fuzz provider (call methods with ':', e.g. fdp:int(1, 6))");
  lua_pop(L, 2);
  lua_getiuservalue(L, 1, 1);
  *data = lua_tolstring(L, -1, len);
  lua_pop(L, 1); /* the user value keeps the string alive */
  return p;
}

static size_t remaining(const provider *p, size_t len) {
  return len - p->front - p->back;
}

/* Up to 8 bytes from the back, as many as the width of range needs; 0 when none are left. */
static uint64_t take_integer(provider *p, const char *data, size_t len, uint64_t range) {
  uint64_t result = 0;
  for (unsigned offset = 0; offset < 64 && (range >> offset) > 0 && remaining(p, len) > 0;
       offset += 8) {
    p->back++;
    result = (result << 8) | (uint8_t)data[len - p->back];
  }
  if (range != UINT64_MAX) result %= range + 1;
  return result;
}

/* fdp:int(lo, hi): an integer in [lo, hi] (default the whole 64-bit range); lo with no input. */
static int p_int(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  lua_Integer lo = luaL_optinteger(L, 2, LUA_MININTEGER);
  lua_Integer hi = luaL_optinteger(L, 3, LUA_MAXINTEGER);
  luaL_argcheck(L, lo <= hi, 3, "the range is empty (hi must be at least lo)");
  mbxV_charge(L, 1);
  uint64_t range = (uint64_t)hi - (uint64_t)lo;
  lua_pushinteger(L, (lua_Integer)((uint64_t)lo + take_integer(p, data, len, range)));
  return 1;
}

/* fdp:bool(): the low bit of one byte from the back (false with no input). */
static int p_bool(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  mbxV_charge(L, 1);
  lua_pushboolean(L, (int)(take_integer(p, data, len, 255) & 1));
  return 1;
}

/* Push the next n bytes from the front (fewer when the input runs out). */
static void push_front(lua_State *L, provider *p, const char *data, size_t len, size_t n) {
  size_t left = remaining(p, len);
  if (n > left) n = left;
  mbxV_charge(L, 1 + n / 64);
  lua_pushlstring(L, data + p->front, n);
  p->front += n;
}

static size_t check_count(lua_State *L, int arg) {
  lua_Integer n = luaL_checkinteger(L, arg);
  luaL_argcheck(L, n >= 0, arg, "the count must not be negative");
  return (uint64_t)n > SIZE_MAX ? SIZE_MAX : (size_t)n;
}

/* fdp:bytes(n): the next n bytes (fewer at the end of the input). */
static int p_bytes(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  push_front(L, p, data, len, check_count(L, 2));
  return 1;
}

/* fdp:string(max): a string of 0..max bytes, its length taken like fdp:int(0, max). */
static int p_string(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  size_t max = check_count(L, 2);
  size_t n = (size_t)take_integer(p, data, len, (uint64_t)max);
  push_front(L, p, data, len, n);
  return 1;
}

/* fdp:choice(t): one of t[1..#t] (#t as the raw length: no guest code runs here). */
static int p_choice(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  luaL_checktype(L, 2, LUA_TTABLE);
  lua_Unsigned n = lua_rawlen(L, 2);
  luaL_argcheck(L, n > 0, 2, "the table has no elements to choose from (t[1] is nil)");
  mbxV_charge(L, 1);
  lua_rawgeti(L, 2, (lua_Integer)(1 + take_integer(p, data, len, (uint64_t)n - 1)));
  return 1;
}

/* fdp:remaining(): bytes not yet consumed. */
static int p_remaining(lua_State *L) {
  const char *data;
  size_t len;
  provider *p = check_provider(L, &data, &len);
  lua_pushinteger(L, (lua_Integer)remaining(p, len));
  return 1;
}

/* fuzz.provider(data) */
static int f_provider(lua_State *L) {
  luaL_checktype(L, 1, LUA_TSTRING);
  mbxV_charge(L, 1);
  provider *p = lua_newuserdatauv(L, sizeof *p, 1);
  p->front = p->back = 0;
  lua_pushvalue(L, 1);
  lua_setiuservalue(L, -2, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_provider_mt);
  lua_setmetatable(L, -2);
  return 1;
}

int mbxL_open_fuzz(lua_State *L) {
  static const luaL_Reg methods[] = {
      {"int", p_int},       {"bool", p_bool},           {"bytes", p_bytes}, {"string", p_string},
      {"choice", p_choice}, {"remaining", p_remaining}, {NULL, NULL}};
  lua_createtable(L, 0, 3);
  luaL_newlib(L, methods);
  lua_setfield(L, -2, "__index");
  lua_pushliteral(L, "fuzz provider");
  lua_setfield(L, -2, "__name");
  /* The guest sees `false` for getmetatable(fdp): it cannot reach the methods table. */
  lua_pushboolean(L, 0);
  lua_setfield(L, -2, "__metatable");
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_provider_mt);
  lua_createtable(L, 0, 1);
  lua_pushcfunction(L, f_provider);
  lua_setfield(L, -2, "provider");
  mbxL_require_add(L, "fuzz", 4, -1);
  lua_pop(L, 1);
  return 0;
}
