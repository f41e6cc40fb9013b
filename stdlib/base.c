/* stdlib/base.c -- the base library, with every entry that could escape or outrun the
   budget replaced: print, tostring, load, collectgarbage, pcall, xpcall, error, warn
   (setmetatable and getmetatable: stdlib/metatable.c). */
#include "stdlib/base.h"

#include <limits.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/metatable.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"
#include "vm/heap.h"
#include "vm/json.h"
#include "vm/load.h"
#include "vm/output.h"
#include "vm/vm.h"

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
  /* A number is a chunk too: stock load takes anything lua_tolstring converts. */
  if (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER) {
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
      mbxV_cstack_check(L); /* a reader may call load again: each level re-enters */
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
        lua_pushfstring(L,
                        "load: the chunk exceeds %d bytes, the most this sandbox compiles "
                        "per call",
                        MBXL_LOAD_MAX);
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
  mbxV_cstack_check(L); /* the parser recurses up to 200 levels in C */
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
/*
** collectgarbage: every stock option, with stock results (issue 26, item 6).
**  - "collect" and "step" are charged (a full collection is O(heap), THREATS D8); step sizes
**    are clamped to 2^20 KiB.
**  - "stop"/"restart" are honoured: LUA_GCSTOP only stops Lua's own automatic steps. The
**    memory limit's collection (vm/budget.c, before a memory trip) is lua_gc(LUA_GCCOLLECT),
**    which runs luaC_fullgc whatever gcstp says (5.4.4 lapi.c), so a stopped collector still
**    gets its garbage collected before the limit ends a run.
**  - "incremental", "setpause" and "setstepmul" set the parameters, clamped: a huge step
**    multiplier (or step size) makes one allocation do a whole cycle, O(heap) inside one
**    instruction the budget never sees, on every allocation; a pause under 50% keeps the
**    collector running all the time. Within the clamps every setting costs what stock costs.
**  - "generational" is accepted and does nothing: switching modes in 5.4.4 sets a wrong pause
**    (a1f77a23, unpatched in Debian), and the generational collector's speed is the same
**    work moved around. The mode name is remembered in the registry (in the sandbox's own
**    memory: kept across runs, checkpoints and rewinds) so both options return the previous
**    mode as stock does. A new sandbox reports "generational", as the stand-alone lua5.4
**    (lua.c switches to it at start) that programs and moonbox's compat tests run under.
*/
static const char key_gc_mode = 0; /* registry: true once the guest asked for incremental */

#define GC_PAUSE_MIN 50
#define GC_PAUSE_MAX 1000
#define GC_STEPMUL_MAX 400
#define GC_STEPSIZE_MAX 13 /* log2 of bytes: stock's default, 8 KiB */

static int clamp_param(lua_Integer v, int lo, int hi) {
  if (v == 0) return 0; /* 0: leave the parameter as it is */
  return v < lo ? lo : v > hi ? hi : (int)v;
}

/* Push the mode the guest last chose ("generational" before any choice), and record the new
   one (generational = 1 or 0). */
static void swap_gc_mode(lua_State *L, int generational) {
  int was_incremental = lua_rawgetp(L, LUA_REGISTRYINDEX, &key_gc_mode) != LUA_TNIL;
  lua_pop(L, 1);
  if (generational)
    lua_pushnil(L);
  else
    lua_pushboolean(L, 1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_gc_mode);
  lua_pushstring(L, was_incremental ? "incremental" : "generational");
}

static int base_collectgarbage(lua_State *L) {
  static const char *const options[] = {"collect",      "step",        "count",    "isrunning",
                                        "stop",         "restart",     "setpause", "setstepmul",
                                        "generational", "incremental", NULL};
  switch (luaL_checkoption(L, 1, "collect", options)) {
  case 0: /* a full collection is O(heap): charge it */
    mbxV_charge(L, mbxL_collect_cost(L));
    lua_gc(L, LUA_GCCOLLECT);
    lua_pushinteger(L, 0);
    return 1;
  case 1: {
    lua_Integer step = luaL_optinteger(L, 2, 0);
    mbxV_charge(L, mbxL_collect_cost(L));
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
  case 4:
    lua_pushinteger(L, lua_gc(L, LUA_GCSTOP));
    return 1;
  case 5:
    lua_pushinteger(L, lua_gc(L, LUA_GCRESTART));
    return 1;
  case 6:
    lua_pushinteger(L, lua_gc(L, LUA_GCSETPAUSE,
                              clamp_param(luaL_optinteger(L, 2, 0), GC_PAUSE_MIN, GC_PAUSE_MAX)));
    return 1;
  case 7:
    lua_pushinteger(
        L, lua_gc(L, LUA_GCSETSTEPMUL, clamp_param(luaL_optinteger(L, 2, 0), 1, GC_STEPMUL_MAX)));
    return 1;
  case 8: /* a documented no-op (a1f77a23): the collector stays incremental */
    luaL_optinteger(L, 2, 0);
    luaL_optinteger(L, 3, 0);
    swap_gc_mode(L, 1);
    return 1;
  default: {
    int pause = clamp_param(luaL_optinteger(L, 2, 0), GC_PAUSE_MIN, GC_PAUSE_MAX);
    int stepmul = clamp_param(luaL_optinteger(L, 3, 0), 1, GC_STEPMUL_MAX);
    int stepsize = clamp_param(luaL_optinteger(L, 4, 0), 1, GC_STEPSIZE_MAX);
    lua_gc(L, LUA_GCINC, pause, stepmul, stepsize);
    swap_gc_mode(L, 0);
    return 1;
  }
  }
}

/*
** warn(msg1, ...): stock's, writing to the run's captured stderr (never the host's: THREATS
** D11) in the format of the stand-alone lua ("Lua warning: " and the pieces, then a newline),
** off until "@on" as there. A single argument starting with '@' is a control message: "@on"
** and "@off" switch, any other is ignored. The switch lives in the registry, so it lasts
** across the runs of one sandbox as it lasts in one lua_State.
*/
static const char key_warn_on = 0; /* registry: true once "@on" was seen */

static int base_warn(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checkstring(L, 1);
  for (int i = 2; i <= n; i++)
    luaL_checkstring(L, i);
  size_t len;
  const char *first = lua_tolstring(L, 1, &len);
  if (n == 1 && len > 0 && first[0] == '@') {
    if (strcmp(first, "@on") == 0 || strcmp(first, "@off") == 0) {
      lua_pushboolean(L, first[2] == 'n');
      lua_rawsetp(L, LUA_REGISTRYINDEX, &key_warn_on);
    }
    return 0;
  }
  int on = lua_rawgetp(L, LUA_REGISTRYINDEX, &key_warn_on) == LUA_TBOOLEAN && lua_toboolean(L, -1);
  lua_pop(L, 1);
  if (!on) return 0;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, "Lua warning: ");
  for (int i = 1; i <= n; i++) {
    lua_pushvalue(L, i);
    luaL_addvalue(&b);
  }
  luaL_addchar(&b, '\n');
  luaL_pushresult(&b);
  const char *text = lua_tolstring(L, -1, &len);
  mbxV_output_write(L, MBXV_STDERR, text, len);
  return 0;
}

/* Only reachable when a later run resumes a coroutine that a trip suspended (os.exit does not
   poison the sandbox): it cannot go on from the middle of the stopped run. */
static int resumed_after_trip(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return luaL_error(L, "this coroutine was stopped when its run ended (os.exit or a limit)");
}

/* Active xpcall frames per thread, {[thread] = box holding the count} with weak keys (a
   dead thread's entry goes with it). Lua 5.4.4 bug 3fe7be95: a thread suspended inside xpcall
   keeps its message handler as a stack offset (L->errfunc), and lua_resetthread runs the
   thread's __close handlers without clearing it, so one that raises calls whatever the offset
   points at: past the end of the stack when a collection shrank it first (stock lua5.4:
   SIGSEGV). Debian ships no lstate.h, so the offset is out of reach; coroutine.close refuses
   a suspended thread whose count is not 0 instead (stdlib/coroutine.c). Every thread counts,
   the run thread too: a released one (a pause not resumed, a trip) stays suspended, and a
   guest that kept it from coroutine.running() could close it in a later run. A count, not a
   walk of the frames: a coroutine may be 200k calls deep. */
static const char key_xpcall_frames = 0;

/* L's count: a box (full userdata) per thread, made on the thread's first xpcall (which may
   raise then, before the protected call starts). The box lives as long as the thread (an
   ephemeron entry), so the frame keeps a pointer to it as its continuation context and
   finish_xpcall decrements it with no lookup. NULL without stack room for the lookup. */
static lua_Integer *xpcall_count(lua_State *L) {
  if (!lua_checkstack(L, 3)) return NULL;
  lua_pushthread(L);
  lua_rawget(L, lua_upvalueindex(1)); /* the table: xpcall's upvalue */
  lua_Integer *count = lua_touserdata(L, -1);
  lua_pop(L, 1);
  if (count == NULL) {
    count = lua_newuserdatauv(L, sizeof *count, 0);
    *count = 0;
    lua_pushthread(L);
    lua_insert(L, -2);
    lua_rawset(L, lua_upvalueindex(1));
  }
  return count;
}

int mbxL_xpcall_active(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (!lua_checkstack(L, 2)) return 1; /* cannot tell: say yes (the refusal is the safe side) */
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key_xpcall_frames) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0;
  }
  lua_pushvalue(L, idx); /* from L's stack: a suspended thread's own may have no free slot */
  lua_rawget(L, -2);
  const lua_Integer *count = lua_touserdata(L, -1);
  int active = count != NULL && *count > 0;
  lua_pop(L, 2);
  return active;
}

/* pcall and xpcall: a tripped limit is never swallowed (THREATS D6). Rethrowing it would be
   caught by the next pcall down, and the next: inside a coroutine Lua does not bound pcall
   nesting by its C-call limit, and each catch walks the whole call chain (luaD_shrinkstack),
   so unwinding N levels costs O(N^2) in C where no meter runs (tests/fuzz found it:
   nest_pcall_retry_unwind). Where the thread can yield, the trip suspends it in one step
   instead: the run (or the resume wrapper above, which rethrows) sees the trip at once.
   Written with continuations so a yield inside still crosses them. */
static int finish_pcall(lua_State *L, int status, lua_KContext extra) {
  if (mbxV_tripped(L) != MBXV_TRIP_NONE && lua_isyieldable(L))
    return lua_yieldk(L, 0, 0, resumed_after_trip);
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
  mbxV_cstack_check(L);
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
  /* The handler runs at the depth of the error; an error here calls the handler again, which
     Lua bounds by its count ("error in error handling"). */
  mbxV_cstack_check(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 1);
  return 1;
}

/* The xpcall's frame is done (returned, caught an error, or either after a yield; every
   ending comes here): Lua has restored the message handler of the frame below. */
/*
** Guest levels. Stock Lua calls a metamethod, and an xpcall message handler, straight from
** the frame that needs it; moonbox puts one C frame between them in three places: a walker
** (an __index read live), a live stub (an event read live) and xpcall's guard around the
** handler. Code that counts levels would see that frame where stock has none: error("...",
** 2) in an __index function would name the C frame (no position) instead of the line that
** indexed, and debug.getinfo(3) in a strict-globals __index would see "C". So the level
** arguments of error and of debug's functions are guest levels, mapped here to the stack's
** by skipping those frames. Each step re-walks the CallInfo list from the top (lua_getstack
** is O(level)), so the scan is charged to the budget and stops at GUEST_LEVEL_SCAN levels:
** past it, levels are counted as the stack's (a hidden frame deeper than that shifts them).
*/
#define GUEST_LEVEL_SCAN 256

static int hidden_frame(lua_State *L1, lua_Debug *ar) {
  if (!lua_checkstack(L1, 1) || !lua_getinfo(L1, "f", ar)) return 0;
  lua_CFunction f = lua_tocfunction(L1, -1);
  lua_pop(L1, 1);
  return f != NULL && (mbxL_is_metamethod_stub(f) || f == guarded_handler);
}

int mbxL_guest_level(lua_State *L, lua_State *L1, int level) {
  if (level <= 0) return level;
  lua_Debug ar;
  int seen = 0, actual = 1;
  for (; actual <= GUEST_LEVEL_SCAN && lua_getstack(L1, actual, &ar); actual++) {
    mbxV_charge_light(L, (uint64_t)actual);
    if (!hidden_frame(L1, &ar) && ++seen == level) return actual;
  }
  int hidden = actual - 1 - seen;
  return level > INT_MAX - hidden ? INT_MAX : level + hidden;
}

int mbxL_metamethod_frame(lua_State *L1, int level) {
  lua_Debug ar;
  if (!lua_getstack(L1, level, &ar) || !lua_checkstack(L1, 1) || !lua_getinfo(L1, "f", &ar))
    return 0;
  lua_CFunction f = lua_tocfunction(L1, -1);
  lua_pop(L1, 1);
  return f != NULL && mbxL_is_metamethod_stub(f);
}

/* error as stock's (lbaselib.c), the position taken at the guest level. */
static int base_error(lua_State *L) {
  int level = (int)luaL_optinteger(L, 2, 1);
  lua_settop(L, 1);
  if (lua_type(L, 1) == LUA_TSTRING && level > 0) {
    luaL_where(L, mbxL_guest_level(L, L, level));
    lua_pushvalue(L, 1);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int finish_xpcall(lua_State *L, int status, lua_KContext count) {
  --*(lua_Integer *)count;
  return finish_pcall(L, status, 2);
}

static int base_xpcall(lua_State *L) {
  int n = lua_gettop(L);
  luaL_checktype(L, 2, LUA_TFUNCTION);
  mbxV_check(L);
  mbxV_cstack_check(L);
  lua_pushvalue(L, 2);
  lua_pushcclosure(L, guarded_handler, 1);
  lua_replace(L, 2);
  lua_pushboolean(L, 1);
  lua_pushvalue(L, 1);
  lua_rotate(L, 3, 2);
  /* Last before the call: nothing after it raises, so finish_xpcall always undoes it. */
  lua_Integer *count = xpcall_count(L);
  if (count == NULL) return luaL_error(L, "stack overflow");
  ++*count;
  int status = lua_pcallk(L, n - 2, LUA_MULTRET, 2, (lua_KContext)count, finish_xpcall);
  return finish_xpcall(L, status, (lua_KContext)count);
}

int mbxL_open_base(lua_State *L) {
  static const luaL_Reg replaced[] = {{"print", base_print},
                                      {"tostring", base_tostring},
                                      {"error", base_error},
                                      {"load", base_load},
                                      {"collectgarbage", base_collectgarbage},
                                      {"pcall", base_pcall},
                                      {"warn", base_warn},
                                      {NULL, NULL}};
  static const char *const removed[] = {"dofile", "loadfile"};
  luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
  luaL_setfuncs(L, replaced, 0);
  mbxL_open_metatables(L);
  /* xpcall's frame counts: its upvalue (no registry lookup per call), and in the registry
     for coroutine.close (mbxL_xpcall_active). */
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_xpcall_frames);
  lua_pushcclosure(L, base_xpcall, 1);
  lua_setfield(L, -2, "xpcall");
  for (size_t i = 0; i < sizeof removed / sizeof *removed; i++) {
    lua_pushnil(L);
    lua_setfield(L, -2, removed[i]);
  }
  lua_pop(L, 1);
  return 0;
}
