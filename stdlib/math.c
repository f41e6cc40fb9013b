/* stdlib/math.c -- the math library guests see: stock functions (each O(1)), with the random
   generator seeded without the host's addresses. */
#include <sys/random.h>

#include <lauxlib.h>
#include <lualib.h>
#include <xxhash.h>

#include "stdlib/stdlib.h"
#include "vm/vm.h"

/* Call the stock randomseed (upvalue 1) with two explicit seeds; returns what it returns. */
static int seed_with(lua_State *L, lua_Integer a, lua_Integer b) {
  lua_settop(L, 0);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushinteger(L, a);
  lua_pushinteger(L, b);
  lua_call(L, 2, LUA_MULTRET);
  return lua_gettop(L);
}

/* Stock math.randomseed() with no argument seeds from time(NULL) and the address of the
   lua_State, and returns both: a heap address handed to the guest (THREATS E10). Here the
   no-argument form draws fresh seeds from the kernel instead. */
static int math_randomseed(lua_State *L) {
  if (!lua_isnone(L, 1)) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  lua_Integer seeds[2] = {0, 0};
  if (getrandom(seeds, sizeof seeds, 0) != (ssize_t)sizeof seeds) {
    mbxV_vm *vm = mbxV_from(L);
    seeds[0] = (lua_Integer)XXH3_64bits_withSeed(seeds, sizeof seeds, vm->address_key + 1);
  }
  return seed_with(L, seeds[0], seeds[1]);
}

int mbxL_open_math(lua_State *L) {
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_getfield(L, -1, "randomseed");
  lua_pushcclosure(L, math_randomseed, 1);
  /* luaopen_math seeded the generator from an address too: reseed from the sandbox's key,
     a value that says nothing about the host. */
  mbxV_vm *vm = mbxV_from(L);
  uint64_t key = vm ? vm->address_key : 0;
  lua_pushvalue(L, -1);
  lua_getupvalue(L, -1, 1);
  lua_remove(L, -2);
  lua_pushinteger(L, (lua_Integer)XXH3_64bits_withSeed("math.random", 11, key));
  lua_pushinteger(L, (lua_Integer)XXH3_64bits_withSeed("math.random", 11, ~key));
  lua_call(L, 2, 0);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
  return 0;
}
