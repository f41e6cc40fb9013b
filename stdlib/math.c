/* stdlib/math.c -- the math library guests see: stock functions (each O(1)), with the random
   generator seeded from the port (the policy's seed, or fresh randomness), never an address. */
#include <sys/random.h>

#include <lauxlib.h>
#include <lualib.h>
#include <xxhash.h>

#include "capabilities/port.h"
#include "stdlib/stdlib.h"
#include "vm/vm.h"

/* Two seed words from the port: with a policy seed a fixed sequence, so a run with --seed is
   reproducible even when it calls math.randomseed(); otherwise kernel randomness. Without a
   port (a state the host did not equip), from the kernel, then from the sandbox's key. */
static void draw_seeds(lua_State *L, lua_Integer seeds[2]) {
  mbxV_vm *vm = mbxV_from(L);
  const mbxC_port *port = mbxL_port(L);
  if (port) {
    uint64_t words[2];
    port->random_seed(port->ud, words);
    seeds[0] = (lua_Integer)words[0];
    seeds[1] = (lua_Integer)words[1];
    return;
  }
  seeds[0] = seeds[1] = 0;
  if (getrandom(seeds, 2 * sizeof *seeds, 0) != (ssize_t)(2 * sizeof *seeds)) {
    uint64_t key = vm ? vm->address_key : 0;
    seeds[0] = (lua_Integer)XXH3_64bits_withSeed("math.random", 11, key);
    seeds[1] = (lua_Integer)XXH3_64bits_withSeed("math.random", 11, ~key);
  }
}

static const char key_stock_randomseed = 0;

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
   no-argument form draws its seeds from the port instead. */
static int math_randomseed(lua_State *L) {
  if (!lua_isnone(L, 1)) {
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
  }
  lua_Integer seeds[2];
  draw_seeds(L, seeds);
  return seed_with(L, seeds[0], seeds[1]);
}

int mbxL_open_math(lua_State *L) {
  luaL_requiref(L, LUA_MATHLIBNAME, luaopen_math, 1);
  lua_getfield(L, -1, "randomseed");
  lua_pushcclosure(L, math_randomseed, 1);
  /* luaopen_math seeded the generator from an address too: reseed from the port. With a
     policy seed N this is stock math.randomseed(N), so the sequence matches stock Lua's. */
  lua_Integer seeds[2];
  draw_seeds(L, seeds);
  lua_pushvalue(L, -1);
  lua_getupvalue(L, -1, 1);
  lua_remove(L, -2);
  lua_pushinteger(L, seeds[0]);
  lua_pushinteger(L, seeds[1]);
  lua_call(L, 2, 0);
  /* The stock randomseed, for mbxL_reseed: the guest cannot reach the registry, so a sandbox
     restored from a template finds it even if a template-mate replaced math.randomseed. */
  lua_getupvalue(L, -1, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_stock_randomseed);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
  return 0;
}

int mbxL_reseed(lua_State *L) {
  lua_Integer seeds[2];
  draw_seeds(L, seeds);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_stock_randomseed);
  lua_pushinteger(L, seeds[0]);
  lua_pushinteger(L, seeds[1]);
  lua_call(L, 2, 0);
  return 0;
}
