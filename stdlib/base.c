/* stdlib/base.c -- the base library, with every entry that could escape or outrun the
   budget replaced: print, tostring, load, setmetatable, collectgarbage, pcall, xpcall. */
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/heap.h"
#include "vm/json.h"
#include "vm/load.h"
#include "vm/output.h"
#include "vm/vm.h"

/* Registry keys of the metatable policy. */
static const char key_original = 0;  /* clone[key] = the guest's metatable */
static const char key_protected = 0; /* clone[key] = true when the guest set __metatable */
static const char key_last_mt = 0;   /* one-entry cache: the last metatable cloned ... */
static const char key_last_clone = 0; /* ... and its clone */

static int base_print(lua_State *L) {
  int n = lua_gettop(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int i = 1; i <= n; i++) {
    if (i > 1) luaL_addchar(&b, '\t');
    mbxL_tolstring(L, i, NULL);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '\n');
  luaL_pushresult(&b);
  size_t len;
  const char *line = lua_tolstring(L, -1, &len);
  mbxV_output_write(L, MBXV_STDOUT, line, len);
  return 0;
}

static int base_tostring(lua_State *L) {
  luaL_checkany(L, 1);
  mbxL_tolstring(L, 1, NULL);
  return 1;
}

/* Text only, at most MBXL_LOAD_MAX bytes, bound to the sandbox's globals unless an env is
   given (THREATS E4, E5, D9). Reader functions are drained first, under the budget. */
static int base_load(lua_State *L) {
  size_t len = 0;
  const char *text = NULL;
  int has_env = !lua_isnone(L, 4);
  const char *mode = luaL_optstring(L, 3, "bt");
  if (strchr(mode, 't') == NULL) {
    luaL_pushfail(L);
    lua_pushliteral(L, "attempt to load a text chunk (mode is 'b'): binary chunks are not "
                       "allowed in this sandbox");
    return 2;
  }
  const char *chunk_name;
  if (lua_type(L, 1) == LUA_TSTRING) {
    text = lua_tolstring(L, 1, &len);
    chunk_name = luaL_optstring(L, 2, text);
    if (len > MBXL_LOAD_MAX) {
      luaL_pushfail(L);
      lua_pushfstring(L, "load: the chunk is %d bytes; this sandbox compiles at most %d per call",
                      (int)(len > 0x7fffffff ? 0x7fffffff : len), MBXL_LOAD_MAX);
      return 2;
    }
  } else {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    chunk_name = luaL_optstring(L, 2, "=(load)");
    luaL_Buffer b;
    lua_settop(L, 4);
    luaL_buffinit(L, &b);
    for (;;) {
      /* As in stock load, a failing reader makes load return nil and the message; a trip
         inside it is rethrown by mbxV_check. */
      lua_pushvalue(L, 1);
      int called = lua_pcall(L, 0, 1, 0);
      mbxV_check(L);
      if (called != LUA_OK) {
        luaL_pushfail(L);
        lua_insert(L, -2);
        return 2;
      }
      if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        break;
      }
      if (!lua_isstring(L, -1)) {
        luaL_pushfail(L);
        lua_pushliteral(L, "reader function must return a string");
        return 2;
      }
      size_t piece;
      lua_tolstring(L, -1, &piece);
      if (piece == 0) {
        lua_pop(L, 1);
        break;
      }
      if (luaL_bufflen(&b) + piece > MBXL_LOAD_MAX) {
        luaL_pushfail(L);
        lua_pushfstring(L, "load: the chunk exceeds %d bytes, the most this sandbox compiles "
                           "per call", MBXL_LOAD_MAX);
        return 2;
      }
      luaL_addvalue(&b);
    }
    luaL_pushresult(&b);
    text = lua_tolstring(L, -1, &len);
  }
  /* The parser is C without hooks: it is polled as it goes (vm/load.c), and a trip there is
     raised here. */
  mbxV_charge(L, len / 16 + 1);
  int status = mbxV_load_text(L, text, len, chunk_name);
  mbxV_check(L);
  if (status != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (has_env) {
    lua_pushvalue(L, 4);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

/* The clone is reused while the metatable's fields are unchanged: object-heavy code calls
   setmetatable with one class table millions of times. The check is exact: every field of mt
   is in the clone with the same value, and the clone holds nothing else but __metatable
   (which is mt itself when mt has none) and its private light-userdata keys. */
static int cached_clone_matches(lua_State *L, int mt) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key_last_mt) != LUA_TTABLE ||
      !lua_rawequal(L, -1, mt)) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pop(L, 1);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_last_clone);
  int clone = lua_gettop(L);
  int same = 1;
  long fields = 0, clone_fields = 0;
  lua_pushnil(L);
  while (lua_next(L, mt)) {
    fields++;
    lua_pushvalue(L, -2);
    lua_rawget(L, clone);
    same = lua_rawequal(L, -1, -2);
    lua_pop(L, 2);
    if ((fields & 1023) == 0) mbxV_charge(L, 1024);
    if (!same) {
      lua_pop(L, 1); /* the key lua_next left */
      break;
    }
  }
  if (same) {
    lua_pushnil(L);
    while (lua_next(L, clone)) {
      lua_pop(L, 1);
      if (lua_type(L, -1) != LUA_TLIGHTUSERDATA) clone_fields++;
      if ((clone_fields & 1023) == 0) mbxV_charge(L, 1024);
    }
    lua_pushliteral(L, "__metatable");
    int mt_has_meta = lua_rawget(L, mt) != LUA_TNIL;
    lua_pop(L, 1);
    same = clone_fields == fields + (mt_has_meta ? 0 : 1);
    if (same && !mt_has_meta) { /* the clone's __metatable must then be mt itself */
      lua_pushliteral(L, "__metatable");
      lua_rawget(L, clone);
      same = lua_rawequal(L, -1, mt);
      lua_pop(L, 1);
    }
  }
  if (!same) {
    lua_pop(L, 1);
    return 0;
  }
  return 1; /* the clone is on the stack */
}

/* Push a frozen shallow clone of the metatable at mt: the object gets the clone, so fields
   added to mt later (a __gc, __mode or __concat placeholder swapped in) never take effect
   (THREATS P0 item 4). clone.__metatable makes getmetatable return the guest's own table. */
static void push_clone(lua_State *L, int mt) {
  if (cached_clone_matches(L, mt)) return;
  lua_newtable(L);
  int clone = lua_gettop(L);
  int fields = 0;
  lua_pushnil(L);
  while (lua_next(L, mt)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, clone);
    if ((++fields & 1023) == 0) mbxV_charge(L, 1024);
  }
  lua_pushliteral(L, "__metatable");
  if (lua_rawget(L, mt) != LUA_TNIL) {
    lua_pushboolean(L, 1);
    lua_rawsetp(L, clone, &key_protected);
    lua_pop(L, 1); /* the clone already holds the guest's __metatable value */
  } else {
    lua_pop(L, 1);
    lua_pushvalue(L, mt);
    lua_setfield(L, clone, "__metatable");
  }
  lua_pushvalue(L, mt);
  lua_rawsetp(L, clone, &key_original);
  lua_pushvalue(L, mt);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_last_mt);
  lua_pushvalue(L, clone);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_last_clone);
}

static int base_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  lua_settop(L, 2);
  if (lua_getmetatable(L, 1)) {
    /* Our clones carry __metatable for getmetatable's sake; only a __metatable the guest
       wrote itself protects the object. */
    int ours = lua_rawgetp(L, -1, &key_original) != LUA_TNIL || mbxV_json_is_array_marker(L, -2);
    lua_pop(L, 1);
    int protected_ = ours ? (lua_rawgetp(L, -1, &key_protected) != LUA_TNIL)
                          : (lua_getfield(L, -1, "__metatable") != LUA_TNIL);
    lua_pop(L, 2);
    if (protected_) return luaL_error(L, "cannot change a protected metatable");
  }
  if (t == LUA_TNIL) {
    lua_setmetatable(L, 1);
    return 1;
  }
  static const char *const refused[][2] = {
      {"__gc", "finalizers run with the budget switched off"},
      {"__mode", "weak tables can reach a use-after-free in this Lua version"},
      {"__concat", "__concat metamethods can corrupt memory in this Lua version"}};
  for (size_t i = 0; i < sizeof refused / sizeof *refused; i++) {
    lua_pushstring(L, refused[i][0]);
    if (lua_rawget(L, 2) != LUA_TNIL)
      return luaL_error(L, "setmetatable: metatables with '%s' are not allowed in this sandbox (%s)",
                        refused[i][0], refused[i][1]);
    lua_pop(L, 1);
  }
  push_clone(L, 2);
  lua_setmetatable(L, 1);
  lua_settop(L, 1);
  return 1;
}

static int base_collectgarbage(lua_State *L) {
  static const char *const options[] = {"collect", "step", "count", "isrunning", NULL};
  const char *opt = luaL_optstring(L, 1, "collect");
  int which = -1;
  for (int i = 0; options[i]; i++)
    if (strcmp(options[i], opt) == 0) which = i;
  mbxV_vm *vm = mbxV_from(L);
  switch (which) {
  case 0: /* a full collection is O(heap): charge it */
    mbxV_charge(L, vm->heap.used / 64 + 1);
    lua_gc(L, LUA_GCCOLLECT);
    lua_pushinteger(L, 0);
    return 1;
  case 1: {
    lua_Integer step = luaL_optinteger(L, 2, 0);
    mbxV_charge(L, vm->heap.used / 64 + 1);
    if (step < 0 || step > (1 << 20)) step = 1 << 20;
    lua_pushboolean(L, lua_gc(L, LUA_GCSTEP, (int)step));
    return 1;
  }
  case 2: {
    int kb = lua_gc(L, LUA_GCCOUNT), rest = lua_gc(L, LUA_GCCOUNTB);
    lua_pushnumber(L, (lua_Number)kb + ((lua_Number)rest / 1024));
    return 1;
  }
  case 3:
    lua_pushboolean(L, lua_gc(L, LUA_GCISRUNNING));
    return 1;
  default:
    return luaL_error(L,
                      "collectgarbage: option '%s' is not allowed in this sandbox (allowed: "
                      "collect, step, count, isrunning)",
                      opt);
  }
}

/* pcall and xpcall: a tripped limit is rethrown, so guest code cannot swallow it (THREATS
   D6). Written with continuations so a yield inside still crosses them. */
static int finish_pcall(lua_State *L, int status, lua_KContext extra) {
  mbxV_check(L);
  if (status != LUA_OK && status != LUA_YIELD) {
    lua_pushboolean(L, 0);
    lua_pushvalue(L, -2);
    return 2;
  }
  return lua_gettop(L) - (int)extra;
}

static int base_pcall(lua_State *L) {
  luaL_checkany(L, 1);
  mbxV_check(L);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  int status = lua_pcallk(L, lua_gettop(L) - 2, LUA_MULTRET, 0, 0, finish_pcall);
  return finish_pcall(L, status, 0);
}

/* The message handler runs before the stack unwinds, at the point of the error. When that
   error is a trip raised by the hook, Lua has not yet re-enabled hooks on this thread, so a
   guest handler would run unmetered (an endless loop in it would hang the host). Once the
   run has tripped the guest handler is skipped and the error passes through unchanged. */
static int guarded_handler(lua_State *L) {
  if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
    lua_settop(L, 1);
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

static int base_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  mbxV_check(L);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, guarded_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);
  int status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, 2, finish_pcall);
  return finish_pcall(L, status, 2);
}

int mbxL_open_base(lua_State *L) {
  static const luaL_Reg replaced[] = {{"print", base_print},
                                      {"tostring", base_tostring},
                                      {"load", base_load},
                                      {"setmetatable", base_setmetatable},
                                      {"collectgarbage", base_collectgarbage},
                                      {"pcall", base_pcall},
                                      {"xpcall", base_xpcall},
                                      {NULL, NULL}};
  static const char *const removed[] = {"dofile", "loadfile", "warn"};
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_setfuncs(L, replaced, 0);
  for (size_t i = 0; i < sizeof removed / sizeof *removed; i++) {
    lua_pushnil(L);
    lua_setfield(L, -2, removed[i]);
  }
  lua_pop(L, 1);
  return 0;
}
