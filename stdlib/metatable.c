/* stdlib/metatable.c -- the metatable policy (THREATS P0 item 4, issue 26 item 3):
   setmetatable gives the VM a moonbox-made copy of the guest's metatable (a clone), never the
   guest's table itself, with walkers and live stubs where the guest's live fields must be read;
   getmetatable hands back the guest's own table. */
#include "stdlib/metatable.h"

#include <string.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"
#include "vm/json.h"

/* Registry keys of the metatable policy. */
static const char key_original = 0;       /* clone[key] = the guest's metatable */
static const char key_protected = 0;      /* clone[key] = true when the guest set __metatable */
static const char key_events = 0;         /* clone[key] = bit i set when event_names[i] is in it */
static const char key_clone_cache = 0;    /* registry: {[mt] = clone}, weak (see clone_cache) */
static const char key_depth = 0;          /* clone[key] = its chain depth (see chain_depth) */
static const char key_limit = 0;          /* pin[key] = the depth its table may not exceed */
static const char key_pin_only = 0;       /* pin[key] = true: a pin standing for "no metatable" */
static const char key_pin_zero = 0;       /* registry: the shared pin of limit 0, no metatable */
static const char key_mode = 0;           /* clone[key] = the guest's __mode (see push_new_clone) */
static const char key_guest_index = 0;    /* clone[key] = the guest's __index a walker stands for */
static const char key_guest_newindex = 0; /* the same for __newindex */
static const char key_watch = 0;          /* watch[key] = {[clone] = true} (see start_watch) */
static const char key_weak_kv = 0;        /* registry: {__mode = "kv"}, the clone sets' mode */

/* Every field of a metatable that Lua 5.4 or this library ever reads: the events of ltm.c
   (less __gc, which is accepted and never copied, so never run, and __concat, which
   setmetatable refuses outright), and the fields luaL_tolstring, pairs and the JSON codec
   look up. The clone holds these and nothing else (plus __metatable, the __concat refusal and
   the private keys above): only C reads a clone (guests never reach one), so other fields
   would be dead weight, and the cache check below costs one raw read per name whatever the
   size of the class table. */
static const char *const event_names[] = {
    "__index", "__newindex", "__len",  "__eq",    "__add",      "__sub", "__mul",
    "__mod",   "__pow",      "__div",  "__idiv",  "__band",     "__bor", "__bxor",
    "__shl",   "__shr",      "__unm",  "__bnot",  "__lt",       "__le",  "__call",
    "__close", "__tostring", "__name", "__pairs", "__jsontype", "__mode"};
#define EVENT_COUNT ((int)(sizeof event_names / sizeof *event_names))
/* Positions in event_names of the events the chain, call and weak-table rules read. */
#define EVENT_INDEX 0
#define EVENT_NEWINDEX 1
#define EVENT_LEN 2
#define EVENT_EQ 3
#define EVENT_ARITH_FIRST 4 /* __add .. __bnot: arithmetic and bitwise, in ltm.c's order */
#define EVENT_BAND 11
#define EVENT_SHR 15
#define EVENT_BNOT 17
#define EVENT_LT 18
#define EVENT_LE 19
#define EVENT_CALL 20
#define EVENT_CLOSE 21
#define EVENT_JSONTYPE 25
#define EVENT_MODE 26
/* The events a clone holds a live stub for when the guest's metatable lacks them (see
   live_event): __add through __call, those whose absence makes stock Lua raise. */
#define EVENT_LIVE_FIRST EVENT_ARITH_FIRST
#define EVENT_LIVE_LAST EVENT_CALL

/* A __call that is not a function, refused at setmetatable and, added later, at the call. */
#define CALL_REFUSAL                                                                               \
  "%s'__call' must be a function in this sandbox (got a %s; a callable table as __call makes "     \
  "one call retry without end)"

/* Events no clone ever holds, and why: the clone holds a refusal that raises when the event
   fires instead (concat_refused). */
static const char *const refused_fields[][2] = {
    {"__concat", "__concat metamethods can corrupt memory in this Lua version"}};
#define REFUSED_COUNT ((int)(sizeof refused_fields / sizeof *refused_fields))

/* setmetatable is a C closure whose upvalues are these names as Lua strings, so the hot path
   pushes a key with a stack copy instead of interning a C string (measured: the lookups
   dominate a cache hit). Guests cannot reach a C closure's upvalues (no debug library). */
#define UPV_EVENT(i) lua_upvalueindex(1 + (i))
#define UPV_METATABLE lua_upvalueindex(1 + EVENT_COUNT)
#define UPV_REFUSED(i) lua_upvalueindex(2 + EVENT_COUNT + (i))
#define UPV_CONCAT lua_upvalueindex(2 + EVENT_COUNT + REFUSED_COUNT)
#define UPV_WALK_INDEX lua_upvalueindex(3 + EVENT_COUNT + REFUSED_COUNT)
#define UPV_WALK_NEWINDEX lua_upvalueindex(4 + EVENT_COUNT + REFUSED_COUNT)
#define UPV_LIVE lua_upvalueindex(5 + EVENT_COUNT + REFUSED_COUNT)  /* {[i] = live stub} */
#define UPV_WATCH lua_upvalueindex(6 + EVENT_COUNT + REFUSED_COUNT) /* watch_store */
#define UPVALUE_COUNT (EVENT_COUNT + 6 + REFUSED_COUNT)

/*
** The clone cache: object-heavy code calls setmetatable with the same few class tables
** millions of times, so a clone is reused while every event it recorded and __metatable still
** hold the values they had when the clone was made (rawequal), and no event it reads only
** then has appeared (events_match). That is exactly what the clone could disagree on, so
** reuse is invisible; any other change (a method added to the class table itself, an event
** a walker or live stub reads live) cannot matter.
**
** The cache is registry[&key_clone_cache] = {[mt] = clone} with __mode = "kv", in the
** registry only: guests never see it, so they can neither read a clone out of it (and write
** __gc into that) nor make it anybody's metatable. Why this is safe and why "kv":
**  - Debian 5.4.4's luaV_finishset use-after-free (upstream 983bc433; THREATS section 0)
**    needs a weak table that is the *metatable* of something, holding a __newindex table that
**    an emergency collection frees mid-assignment. This table is never a metatable, is only
**    written with lua_rawset (no __newindex path at all), and the allocator does not run
**    emergency collections below its ceiling (THREATS P0 item 8).
**  - Weak values as well as keys, not an ephemeron (weak keys only): a clone is frozen, so
**    once its class changes it can hold the only reference to a table that is itself a key
**    of the cache (the class's old __index, a class too). An ephemeron table then makes the
**    collector's atomic phase re-traverse the whole table once per link of such a chain:
**    quadratic, in C, unmetered. Measured with stock lua5.4, 40 000 stale entries cost 9 s
**    in one collectgarbage() (0.01 ms with "kv"). With "kv" the table is never traversed
**    for marking. The price is a miss after a collection that found no live object using
**    the clone: one fresh clone per class per GC cycle.
**  - Neither a dead class nor its clone is kept alive: entries go once nothing else holds
**    the clone (objects using it) or the class. A miss for one class never evicts another.
*/

/* The events whose appearance in mt makes a clone stale: those a clone reads only when it is
   made (where mt lacked them then, nothing stands in the clone for them: no walker, no live
   stub, no live read by the library; see live_event), and __index, whose walker reads it
   live but at a C call per lookup: objects set up once the class has its __index get a clone
   the VM follows directly (Programming in Lua's A:new sets it after the first object). An
   arithmetic, order or __call event added later is served by the live stub. */
static const int read_at_setmetatable[] = {EVENT_INDEX, EVENT_NEWINDEX, EVENT_LEN, EVENT_EQ,
                                           EVENT_CLOSE, EVENT_JSONTYPE, EVENT_MODE};

/* Push what clone recorded of event i, whose name is at name: the field itself, except for
   __mode, which the clone keeps under key_mode (it holds __mode itself only outside
   deterministic mode, see push_new_clone). */
static void push_recorded(lua_State *L, int clone, int i, int name) {
  if (i == EVENT_MODE) {
    lua_rawgetp(L, clone, &key_mode);
    return;
  }
  if (i == EVENT_INDEX || i == EVENT_NEWINDEX) {
    if (lua_rawgetp(L, clone, i == EVENT_INDEX ? &key_guest_index : &key_guest_newindex) !=
        LUA_TNIL)
      return; /* a walker stands in the clone for this value */
    lua_pop(L, 1);
  }
  lua_pushvalue(L, name);
  lua_rawget(L, clone);
}

/* The event fields of mt still agree with clone: every event clone recorded still holds the
   same value in mt (rawequal), and none of read_at_setmetatable has appeared. An event
   added since that a live stub reads needs no new clone. Constant work whatever the size of
   mt: one raw read per recorded event and seven. */
static int events_match(lua_State *L, int mt, int clone, lua_Integer present) {
  int base = lua_gettop(L), same = 1;
  for (lua_Integer bits = present; same && bits; bits &= bits - 1) {
    int i = __builtin_ctzll((unsigned long long)bits);
    lua_pushvalue(L, UPV_EVENT(i));
    lua_rawget(L, mt);
    push_recorded(L, clone, i, UPV_EVENT(i));
    same = lua_rawequal(L, -1, -2);
    lua_settop(L, base);
  }
  /* A __call read live (a function at setmetatable) must still be one for the clone to be
     reused: setmetatable refuses any other. */
  if (same && !((present >> EVENT_CALL) & 1)) {
    lua_pushvalue(L, UPV_EVENT(EVENT_CALL));
    int type = lua_rawget(L, mt);
    same = type == LUA_TNIL || type == LUA_TFUNCTION;
    lua_settop(L, base);
  }
  int n = (int)(sizeof read_at_setmetatable / sizeof *read_at_setmetatable);
  for (int k = 0; same && k < n; k++) {
    int i = read_at_setmetatable[k];
    if ((present >> i) & 1) continue;
    lua_pushvalue(L, UPV_EVENT(i));
    int type = lua_rawget(L, mt);
    if (type == LUA_TFUNCTION && i == EVENT_INDEX) {
      same = 1; /* the walker the clone holds calls it */
    } else if (type == LUA_TFUNCTION && i == EVENT_NEWINDEX) {
      lua_pushvalue(L, UPV_EVENT(i));
      same = lua_rawget(L, clone) == LUA_TFUNCTION; /* the walker, if anything */
    } else {
      same = type == LUA_TNIL;
    }
    lua_settop(L, base);
  }
  return same;
}

/* 1 if the clone at index clone still matches the metatable at mt (see above). Bounded work
   whatever mt holds. Called from meta_setmetatable's frame (it reads that closure's
   upvalues). */
static int clone_matches(lua_State *L, int mt, int clone) {
  int base = lua_gettop(L);
  lua_rawgetp(L, clone, &key_events);
  lua_Integer present = lua_tointeger(L, -1);
  lua_pop(L, 1);
  int same = events_match(L, mt, clone, present);
  if (same) {
    /* __metatable: the clone holds the guest's value (and key_protected), or mt itself. */
    lua_pushvalue(L, UPV_METATABLE);
    int guest_protects = lua_rawget(L, mt) != LUA_TNIL;
    int was_protected = lua_rawgetp(L, clone, &key_protected) != LUA_TNIL;
    lua_pop(L, 1);
    if (!guest_protects) {
      lua_pop(L, 1);
      lua_pushvalue(L, mt);
    }
    lua_pushvalue(L, UPV_METATABLE);
    lua_rawget(L, clone);
    same = guest_protects == was_protected && lua_rawequal(L, -1, -2);
  }
  lua_settop(L, base);
  return same;
}

/*
** Bounded __index/__newindex chains (issue 9, B.2). luaV_finishget and luaV_finishset follow
** table-valued __index/__newindex links inside one VM instruction, up to Lua's MAXTAGLOOP
** (2000), and no hook fires between links. Each link is a full key lookup, which a guest can
** make cost a memcmp of a multi-MiB key (every table of the chain keyed by the same long
** string, looked up with an equal-length one that differs at the end) or a walk of a bucket
** of colliding integer keys: measured 88 s and 7.5 s in one instruction. So every clone
** records its depth, a bound on the links a lookup starting at an object that uses it can
** follow, and setmetatable refuses a clone deeper than MBXL_CHAIN_MAX. A chain of distinct
** tables visits each at most once, so its bucket walks together cost at most the heap; only
** a shared long key multiplies, by at most MBXL_CHAIN_MAX.
**
** A depth is computed from the depths its targets have when the clone is made, so it stays a
** bound only if no target gets deeper later. So each table that becomes the __index or
** __newindex of a clone is pinned: its metatable becomes a pin, a private copy of what it
** had (or, for a table without one, a shared empty pin that getmetatable reports as nil)
** plus a limit, the depth it had when it last became a target. setmetatable on a pinned
** table refuses a clone deeper than the limit, and keeps the table pinned (also for nil).
** By induction every recorded depth stays a bound, and no loop can form: closing one would
** make a target deeper than its own limit (a table as its own __index is refused outright).
**
** Why a pin in the target's metatable rather than a registry set of targets: the set would
** need weak keys not to keep every target alive for the sandbox's life (one per object in
** code that gives each object a fresh __index table), and weak tables are what Debian
** 5.4.4's finishset use-after-free needs (THREATS section 0). A pin lives and dies with its
** table. Its price: one private metatable copy (about 100 bytes plus the events) for each
** target that had a metatable of its own, made once; nothing for the others.
*/

/* The depth of table t: that of its clone or pin, 0 without a metatable (or with the one
   metatable C sets on guest data, the JSON array marker, which has no __index). */
static lua_Integer table_depth(lua_State *L, int t) {
  if (!lua_getmetatable(L, t)) return 0;
  lua_Integer depth = lua_rawgetp(L, -1, &key_depth) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 2);
  return depth;
}

/* The links a lookup may follow through the __index or __newindex value at idx: a table is
   one link plus its own chain; a string goes through the string metatable to the private
   library copy (two links, set from C, no metatable); a function ends the VM's walk (it is
   called: guest code under the hook, or a walker, metered per link), and anything else
   raises. */
static lua_Integer link_depth(lua_State *L, int idx) {
  switch (lua_type(L, idx)) {
  case LUA_TNIL:
  case LUA_TFUNCTION:
    return 0;
  case LUA_TTABLE:
    return 1 + table_depth(L, idx);
  case LUA_TSTRING:
    return 2;
  default:
    return 1;
  }
}

/* The limit of the pinned table at t, or -1 when it is not pinned. */
static lua_Integer pin_limit(lua_State *L, int t) {
  if (!lua_getmetatable(L, t)) return -1;
  lua_Integer limit = lua_rawgetp(L, -1, &key_limit) == LUA_TNUMBER ? lua_tointeger(L, -1) : -1;
  lua_pop(L, 2);
  return limit;
}

static void register_copy(lua_State *L, int copy);

/* Give the table at t the metatable at mt (a clone, the array marker, or nil for none),
   pinned at limit: a private copy of mt's fields plus the limit, or the shared zero pin. */
static void set_pinned(lua_State *L, int t, int mt, lua_Integer limit) {
  t = lua_absindex(L, t);
  mt = lua_absindex(L, mt);
  if (lua_isnil(L, mt) && limit == 0) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_pin_zero);
    lua_setmetatable(L, t);
    return;
  }
  lua_createtable(L, 0, 8);
  if (lua_isnil(L, mt)) {
    lua_pushboolean(L, 1);
    lua_rawsetp(L, -2, &key_pin_only);
  } else {
    /* Bounded: a clone holds at most the events plus a few private keys. */
    lua_pushnil(L);
    while (lua_next(L, mt)) {
      if (lua_touserdata(L, -2) == &key_limit) {
        lua_pop(L, 1);
        continue;
      }
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    }
  }
  lua_pushinteger(L, limit);
  lua_rawsetp(L, -2, &key_limit);
  register_copy(L, lua_gettop(L));
  lua_setmetatable(L, t);
}

/* The table at t becomes a target of a new clone: pin it at its current depth (a limit only
   ever goes down). */
static void pin_target(lua_State *L, int t) {
  t = lua_absindex(L, t);
  lua_Integer depth = table_depth(L, t), limit = pin_limit(L, t);
  if (limit >= 0) {
    if (limit > depth) { /* a private pin (the shared one has limit 0) */
      lua_getmetatable(L, t);
      lua_pushinteger(L, depth);
      lua_rawsetp(L, -2, &key_limit);
      lua_pop(L, 1);
    }
    return;
  }
  if (!lua_getmetatable(L, t)) lua_pushnil(L);
  set_pinned(L, t, lua_gettop(L), depth);
  lua_pop(L, 1);
}

/*
** Watches: events added to a metatable after setmetatable (issue 26, item 3). A clone is
** made once per guest metatable, so without help `mt.__newindex = f` set after
** setmetatable(_G, mt) (Lua's classic strict.lua, pl.strict), or an __eq, __len, __close,
** __mode, __jsontype or __metatable added later, would be ignored by the objects set up
** before, silently. A walker or a live stub in the clone would see them, but at a C call on
** every new key, ==, # of every object.
**
** So a guest metatable mt that has no metatable of its own gets a hidden one, its watch,
** when a clone of it is first made: a table holding __newindex = watch_store and, under
** key_watch, the set of the clones made of mt since (and of every private copy of one: a pin,
** a walked copy), {[clone] = true}. A new key stored into mt goes through watch_store (a plain rawset, as stock
** does with no metatable), which passes an event among those above on to each of those
** clones that lacks it, as if the clone had been made with it; base rawset does the same.
** The guest never sees a watch: getmetatable and debug.getmetatable report nil
** (key_pin_only, as a pin standing for "no metatable"), setmetatable(mt, nil) keeps it. What
** a watch does not cover, as before (docs/compat.md): a value *replaced* in mt (no store
** into an existing key passes through a metatable) reaches objects set up afterwards; a
** metatable that has a metatable of the guest's (setmetatable(mt, X), then its watch goes)
** is read when each clone is made.
**
** Safety: a watch is strong and never has __mode, so the VM still never sees a weak
** metatable (983bc433). What is passed on keeps every chain depth a bound: a __newindex that
** is not a function goes in as the walker (depth 0, metered per link) with the guest's value
** under key_guest_newindex, a function is called by the VM as one added at setmetatable;
** __index is never passed on (a walker reads an absent one live already), nor are the events
** a live stub serves. __mode is passed on outside deterministic mode only. The work is one
** raw store per clone, charged, and no guest code runs inside watch_store.
**
** The set is weak ("kv", as the clone cache and for the same reasons: never a metatable,
** written raw, never traversed for marking), so a clone no object uses goes, and with it
** what it held: a class whose __index is replaced in a loop keeps no old clones alive (nor,
** through them, the old values). In deterministic mode it is strong, as every weak table
** there, so that the work a store does (and is charged) is the same in every process: the
** clones made of one metatable stay as long as it does (one per replaced event value seen by
** setmetatable). A metatable used once, the common `setmetatable(o, {__index = ...})`, costs
** two small tables, the watch and its set.
*/

/* Push the watch of the table at m and return 1, or push nothing and return 0 when m is
   not watched. */
static int push_watch(lua_State *L, int m) {
  if (!lua_getmetatable(L, m)) return 0;
  if (lua_rawgetp(L, -1, &key_watch) != LUA_TNIL) {
    lua_pop(L, 1);
    return 1;
  }
  lua_pop(L, 2);
  return 0;
}

/* Append the table at copy (a clone, or a private copy of one) to the watch of the guest
   metatable it stands for, when that has one. */
static void register_copy(lua_State *L, int copy) {
  copy = lua_absindex(L, copy);
  if (lua_rawgetp(L, copy, &key_original) == LUA_TTABLE && push_watch(L, -1)) {
    lua_rawgetp(L, -1, &key_watch);
    lua_pushvalue(L, copy);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 2);
  }
  lua_pop(L, 1);
}

/* The pinned table at t is about to get another metatable: where its pin is a private copy of
   a clone (it is private to t, see set_pinned), take it out of its guest metatable's watch.
   Clones are shared and stay; a private copy would otherwise stay in the set after t dropped
   it, and in deterministic mode, where the set is strong, for as long as the metatable lives:
   setmetatable(t, mt) in a loop on a chain target grew the heap by a copy per call (about
   850 bytes) where stock runs in constant memory, and every later event stored into mt
   visited each of them. */
static void unregister_pin(lua_State *L, int t) {
  if (!lua_getmetatable(L, t)) return;
  int pin = lua_gettop(L);
  if (lua_rawgetp(L, pin, &key_limit) == LUA_TNUMBER &&
      lua_rawgetp(L, pin, &key_original) == LUA_TTABLE && push_watch(L, -1) &&
      lua_rawgetp(L, -1, &key_watch) == LUA_TTABLE) {
    lua_pushvalue(L, pin);
    lua_pushnil(L);
    lua_rawset(L, -3);
  }
  lua_settop(L, pin - 1);
}

/* Make the table at w a watch (called from meta_setmetatable's frame: UPV_WATCH). */
static void add_watch_fields(lua_State *L, int w) {
  w = lua_absindex(L, w);
  lua_createtable(L, 0, 1);
  if (!mbxL_deterministic(L)) {
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_weak_kv);
    lua_setmetatable(L, -2);
  }
  lua_rawsetp(L, w, &key_watch);
  lua_pushvalue(L, UPV_EVENT(EVENT_NEWINDEX));
  lua_pushvalue(L, UPV_WATCH);
  lua_rawset(L, w);
}

/* Watch the guest metatable at m where it can be: where it has no metatable of the guest's
   (none, or a pin standing for none: a private pin becomes the watch, the shared one is
   replaced by a watch with its limit). Returns 1 when m is watched, 0 where it has one (a
   clone, a pin copied from one) or the JSON array marker. Leaves the stack as it was. */
static int start_watch(lua_State *L, int m) {
  m = lua_absindex(L, m);
  if (push_watch(L, m)) {
    lua_pop(L, 1);
    return 1;
  }
  int had = lua_getmetatable(L, m);
  if (had) {
    int stands_for_none = lua_rawgetp(L, -1, &key_pin_only) != LUA_TNIL;
    lua_pop(L, 1);
    if (!stands_for_none) {
      lua_pop(L, 1);
      return 0;
    }
    lua_rawgetp(L, LUA_REGISTRYINDEX, &key_pin_zero);
    int shared = lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
    if (!shared) {
      add_watch_fields(L, -1);
      lua_pop(L, 1);
      return 1;
    }
    lua_pop(L, 1);
  }
  lua_createtable(L, 0, 4);
  lua_pushboolean(L, 1);
  lua_rawsetp(L, -2, &key_pin_only);
  if (had) {
    lua_pushinteger(L, 0);
    lua_rawsetp(L, -2, &key_limit);
  }
  add_watch_fields(L, -1);
  lua_setmetatable(L, m);
  return 1;
}

/*
** Walkers: __index and __newindex followed in metered C instead of by the VM. A clone holds
** walk_index or walk_newindex (one C closure each per sandbox, made at open, whose upvalue is
** the event's name; recognised by their C function) in
** place of the guest's value wherever the VM may not follow it itself:
**  - an absent __index: the walker reads the guest's *live* field at each lookup, so the
**    class pattern that sets `self.__index = self` after `setmetatable({}, self)` works;
**  - a table that is its own __index/__newindex (`setmetatable(M, M)`), a chain deeper than
**    MBXL_CHAIN_MAX, and a pinned table whose new chain would be deeper than its limit (the
**    clone is then private to it, see meta_setmetatable): where the clone used to be refused.
** A walker follows the chain as luaV_finishget/finishset do (a table: a raw lookup, then its
** metatable; a function: called; another value: indexed as Lua would), reading each
** metatable's clone entry, or the guest's live field where that entry is a walker. Each link
** is charged 8 + key length / 64 instructions (mbxV_charge_light: the clock is read once per
** 1024 instructions charged, so a link over a key of 64 KiB or more polls the deadline, and
** cheap links poll it every 128), and at 2000 links it raises stock's
** "'__index' chain too long; possible loop". A function found on the chain is called with
** lua_callk (a yield crosses it) after the C stack check. What the walk holds is on its own
** stack, so an emergency collection cannot free a table it uses (983bc433).
*/
#define WALK_MAX_LINKS 2000 /* stock's MAXTAGLOOP */

static int walk_index(lua_State *L);
static int walk_newindex(lua_State *L);

/* Push the handler of the running walker's event (its name is the walker's upvalue) for a
   lookup that reached a value whose metatable is at mt: the metatable's own entry, or where
   that entry is the walker, the guest's live field. Returns its type. Raw reads only. */
static int push_handler(lua_State *L, int mt, lua_CFunction walker) {
  lua_pushvalue(L, lua_upvalueindex(1));
  if (lua_rawget(L, mt) != LUA_TFUNCTION || lua_tocfunction(L, -1) != walker)
    return lua_type(L, -1);
  if (lua_rawgetp(L, mt, &key_original) != LUA_TTABLE) {
    lua_pop(L, 2);
    lua_pushnil(L);
    return LUA_TNIL;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  int type = lua_rawget(L, -2);
  lua_replace(L, -3);
  lua_pop(L, 1);
  return type;
}

/* What one link costs: a raw lookup, whose key compare is a memcmp for a long string, plus
   the walker's own reads of the metatable and its clone entry. Measured on the release build,
   a walked link takes the time of about 10 plain VM instructions under the count hook (a
   2000-link walk under an instruction limit ran 11x as long as a plain loop of the same
   budget at 1 a link), so a link is charged as 8. */
#define WALK_LINK_COST 8
static uint64_t link_cost(lua_State *L, int key) {
  size_t len = 0;
  if (lua_type(L, key) == LUA_TSTRING) lua_tolstring(L, key, &len);
  return WALK_LINK_COST + len / 64;
}

static int walk_index_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 1;
}

static int walk_index(lua_State *L) {
  lua_settop(L, 2); /* 1 the object, 2 the key */
  uint64_t cost = link_cost(L, 2);
  lua_pushvalue(L, 1); /* 3: where the lookup is */
  for (int links = 0; links < WALK_MAX_LINKS; links++) {
    mbxV_charge_light(L, cost);
    if (!lua_getmetatable(L, 3)) {
      lua_pushnil(L);
      return 1;
    }
    int type = push_handler(L, 4, walk_index); /* 5 */
    if (type == LUA_TNIL) return 1;
    if (type == LUA_TFUNCTION) {
      lua_pushvalue(L, 3);
      lua_pushvalue(L, 2);
      mbxV_cstack_check(L);
      lua_callk(L, 2, 1, 0, walk_index_done);
      return 1;
    }
    if (type != LUA_TTABLE) { /* e.g. a string: one lookup through its metatable */
      lua_pushvalue(L, 2);
      lua_gettable(L, 5);
      return 1;
    }
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 5) != LUA_TNIL) return 1;
    lua_copy(L, 5, 3);
    lua_settop(L, 3);
  }
  return luaL_error(L, "'__index' chain too long; possible loop");
}

static int walk_newindex_done(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 0;
}

static int walk_newindex(lua_State *L) {
  lua_settop(L, 3); /* 1 the object, 2 the key, 3 the value */
  uint64_t cost = link_cost(L, 2);
  lua_pushvalue(L, 1); /* 4: where the assignment is */
  for (int links = 0; links < WALK_MAX_LINKS; links++) {
    mbxV_charge_light(L, cost);
    int type = lua_getmetatable(L, 4) ? push_handler(L, 5, walk_newindex) : LUA_TNIL;
    if (type == LUA_TNIL) { /* a table reached with no handler: the key is absent in it */
      lua_settop(L, 4);
      luaL_checktype(L, 4, LUA_TTABLE); /* only tables get here: objects and chain links */
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 3);
      lua_rawset(L, 4);
      return 0;
    }
    /* 5 the metatable, 6 the handler */
    if (type == LUA_TFUNCTION) {
      lua_pushvalue(L, 4);
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 3);
      mbxV_cstack_check(L);
      lua_callk(L, 3, 0, 0, walk_newindex_done);
      return 0;
    }
    if (type != LUA_TTABLE) {
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 3);
      lua_settable(L, 6);
      return 0;
    }
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 6) != LUA_TNIL) { /* present: a plain store into this table */
      lua_pushvalue(L, 2);
      lua_pushvalue(L, 3);
      lua_rawset(L, 6);
      return 0;
    }
    lua_copy(L, 6, 4);
    lua_settop(L, 4);
  }
  return luaL_error(L, "'__newindex' chain too long; possible loop");
}

/* watch_store and the base rawset: their upvalues. */
#define UPV_WATCHED_EVENTS lua_upvalueindex(1) /* {[name] = i} of the events passed on */
#define UPV_WATCH_WALKER lua_upvalueindex(2)   /* walk_newindex */
#define WATCHED_METATABLE EVENT_COUNT          /* __metatable's number in that table */

/* Give the clone at c the event number i, name at k, value at v, unless it has one. */
static void pass_to_clone(lua_State *L, int c, int i, int k, int v) {
  if (i == WATCHED_METATABLE) {
    /* An unprotected clone holds the guest's table as its __metatable. */
    int protected_ = lua_rawgetp(L, c, &key_protected) != LUA_TNIL;
    lua_pop(L, 1);
    if (protected_) return;
    lua_pushvalue(L, k);
    lua_pushvalue(L, v);
    lua_rawset(L, c);
    lua_pushboolean(L, 1);
    lua_rawsetp(L, c, &key_protected);
    return;
  }
  lua_rawgetp(L, c, &key_events);
  lua_Integer present = lua_tointeger(L, -1);
  lua_pop(L, 1);
  if ((present >> i) & 1) return; /* a value it had: a replaced value is not passed on */
  if (i == EVENT_MODE) {
    lua_pushvalue(L, v);
    lua_rawsetp(L, c, &key_mode);
    if (mbxL_deterministic(L)) goto recorded;
  } else if (i == EVENT_NEWINDEX) {
    /* The walker, which reads mt's field live (a function as at setmetatable; anything
       else at depth 0, so no recorded depth changes). */
    if (lua_type(L, v) == LUA_TFUNCTION) {
      lua_pushvalue(L, k);
      lua_pushvalue(L, UPV_WATCH_WALKER);
      lua_rawset(L, c);
      return; /* read live, as if mt lacked it: no bit */
    }
    lua_pushvalue(L, v);
    lua_rawsetp(L, c, &key_guest_newindex);
    lua_pushvalue(L, k);
    lua_pushvalue(L, UPV_WATCH_WALKER);
    lua_rawset(L, c);
    goto recorded;
  }
  lua_pushvalue(L, k);
  lua_pushvalue(L, v);
  lua_rawset(L, c);
recorded:
  lua_pushinteger(L, present | ((lua_Integer)1 << i));
  lua_rawsetp(L, c, &key_events);
}

/* What visiting one member of a watch's set costs, in instructions, and how often the visits
   are charged. A visit is a lua_next step and a raw read of a clone, each a cache miss once
   the clones outgrow the CPU caches: measured (release build, 20 000 clones) about 310 ns, the
   time of some 50 plain VM instructions under the count hook (6 ns) or 13 allocating ones
   (24 ns). Charged 1 a visit, stores into a metatable with 20 000 clones ran 5e7
   instructions' worth in 55 s (dev build) where a plain loop runs them in 0.9 s, so an
   instruction limit (deterministic mode's only stop) bounded little; and charged after the
   loop, a set of a million clones ran between two clock reads. */
#define WATCH_VISIT_COST 32
#define WATCH_METER_BATCH 4096

/* k = v was just stored raw into the table at m: pass it on to the clones m's watch holds
   when k names an event passed on (see the watches above). */
static void pass_on(lua_State *L, int m, int k, int v) {
  if (lua_type(L, k) != LUA_TSTRING || lua_isnil(L, v)) return;
  lua_pushvalue(L, k);
  if (lua_rawget(L, UPV_WATCHED_EVENTS) != LUA_TNUMBER) {
    lua_pop(L, 1);
    return;
  }
  int i = (int)lua_tointeger(L, -1);
  lua_pop(L, 1);
  if (!push_watch(L, m)) return;
  int w = lua_gettop(L);
  if (lua_rawgetp(L, w, &key_watch) == LUA_TTABLE) {
    int set = lua_gettop(L);
    /* A charge may end the run midway (a trip is sticky), or collect: the set is on the stack
       and so is the clone being visited, so neither goes, and lua_next steps over entries a
       collection cleared. */
    mbxV_meter meter = mbxV_meter_init(L, WATCH_METER_BATCH, 1);
    mbxV_meter_add(&meter, 1);
    lua_pushnil(L);
    while (lua_next(L, set)) {
      lua_pop(L, 1);
      pass_to_clone(L, lua_gettop(L), i, k, v);
      mbxV_meter_add(&meter, WATCH_VISIT_COST);
    }
    mbxV_meter_flush(&meter);
  }
  lua_settop(L, w - 1);
}

/* The __newindex of a watch: a new key stored into a watched metatable, at argument 1. */
static int watch_store(lua_State *L) {
  lua_settop(L, 3);
  luaL_checktype(L, 1, LUA_TTABLE);
  /* Stock raises these from the instruction that stores: name its line, not this frame. */
  if (lua_isnil(L, 2) ||
      (lua_type(L, 2) == LUA_TNUMBER && lua_tonumber(L, 2) != lua_tonumber(L, 2))) {
    luaL_where(L, 1);
    lua_pushstring(L, lua_isnil(L, 2) ? "table index is nil" : "table index is NaN");
    lua_concat(L, 2);
    return lua_error(L);
  }
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, 1);
  pass_on(L, 1, 2, 3);
  return 0;
}

/* rawset as stock's, which also passes an event stored into a watched metatable on. */
static int meta_rawset(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_checkany(L, 2);
  luaL_checkany(L, 3);
  lua_settop(L, 3);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, 3);
  lua_rawset(L, 1);
  pass_on(L, 1, 2, 3);
  lua_settop(L, 1);
  return 1;
}

/*
** Live stubs: an event the guest's metatable lacked when setmetatable ran. The VM reads a
** clone's fields, and a clone is made once per metatable (cached), so `mt.__add = f` set
** after objects exist would otherwise be ignored by them without a word. Each clone holds a
** stub (live_event, one C closure per event and sandbox, recognised by its C function) for
** every VM event from __len to __call that mt lacked, which does at the moment of use what
** stock Lua does with the guest's live fields (raw reads, as ltm.c's):
**  - binary events (and __unm, __bnot, called with the operand twice): the first
**    operand's handler, then the second's, called with both, one result; where the stub is
**    not the first operand's own (the VM found none there, or the string library's arithmetic
**    passes on to the second operand), only the second's, so a handler is never asked twice;
**  - none found: __le tries `not (b < a)` as Debian's 5.4.4 does (LUA_COMPAT_LT_LE), and the
**    rest raise stock's message (without its "(local 'x')" detail);
**  - __call: the live __call, which must be a function as at setmetatable, with every
**    argument and result.
** Where mt had the event, the clone holds mt's value itself: the VM calls it directly, at
** stock speed. A stub is reached only where stock Lua would call a metamethod or raise, so
** working programs pay nothing. Not stubbed: __eq and __len (a stub would make every ==
** between two distinct objects, and every # of an object, a C call: 15x and 27x stock in
** bench_metatables), __newindex (see push_new_clone) and __close (checked where the variable
** is declared); an absent one of those is read at setmetatable.
*/
static int live_event(lua_State *L);
static int live_own(lua_State *L);

/* 1 for the C functions of live stubs: live_event, and live_own, which stands for a function
   mt had at setmetatable. */
static int is_live_stub(lua_CFunction f) {
  return f == live_event || f == live_own;
}

/* Push the handler the value at v has for the event named at name, as stock would find it
   now: its metatable's raw field, or where that is a live stub, the guest's live field.
   Returns its type. */
static int push_live_handler(lua_State *L, int v, int name) {
  if (!lua_getmetatable(L, v)) {
    lua_pushnil(L);
    return LUA_TNIL;
  }
  lua_pushvalue(L, name);
  int type = lua_rawget(L, -2);
  if (type == LUA_TFUNCTION && is_live_stub(lua_tocfunction(L, -1))) {
    lua_pop(L, 1);
    if (lua_rawgetp(L, -1, &key_original) == LUA_TTABLE) {
      lua_pushvalue(L, name);
      type = lua_rawget(L, -2);
      lua_remove(L, -2);
    } else {
      lua_pop(L, 1);
      lua_pushnil(L);
      type = LUA_TNIL;
    }
  }
  lua_remove(L, -2);
  return type;
}

/* 1 when the value at v has a live stub for the event named at name. */
static int has_live_stub(lua_State *L, int v, int name) {
  if (!lua_getmetatable(L, v)) return 0;
  lua_pushvalue(L, name);
  int stub = lua_rawget(L, -2) == LUA_TFUNCTION && is_live_stub(lua_tocfunction(L, -1));
  lua_pop(L, 2);
  return stub;
}

/* The name stock's messages give the value at idx: its live __name, or its type. */
static const char *shown_type(lua_State *L, int idx) {
  int type = mbxL_getmetafield(L, idx, "__name");
  if (type == LUA_TSTRING) return lua_tostring(L, -1);
  if (type != LUA_TNIL) lua_pop(L, 1);
  return luaL_typename(L, idx);
}

static int live_event_done(lua_State *L, int status, lua_KContext negate) {
  (void)status;
  if (negate) lua_pushboolean(L, !lua_toboolean(L, -1));
  return 1;
}

static int live_call_done(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  return lua_gettop(L);
}

/* Call the handler on top with the operands at a and b; one result (negated for the
   __le-by-__lt rule). */
static int call_handler(lua_State *L, int a, int b, int negate) {
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  mbxV_cstack_check(L);
  lua_callk(L, 2, 1, negate, live_event_done);
  return live_event_done(L, LUA_OK, negate);
}

static int live_call(lua_State *L) {
  int n = lua_gettop(L); /* 1 the object, then the arguments */
  int type = push_live_handler(L, 1, lua_upvalueindex(1));
  if (type == LUA_TNIL) return luaL_error(L, "attempt to call a %s value", shown_type(L, 1));
  if (type != LUA_TFUNCTION) return luaL_error(L, CALL_REFUSAL, "", luaL_typename(L, -1));
  lua_insert(L, 1);
  mbxV_cstack_check(L);
  lua_callk(L, n, LUA_MULTRET, 0, live_call_done);
  return lua_gettop(L);
}

static int live_event(lua_State *L) {
  int event = (int)lua_tointeger(L, lua_upvalueindex(2));
  if (event == EVENT_CALL) return live_call(L);
  lua_settop(L, 2);
  int name = lua_upvalueindex(1), own = has_live_stub(L, 1, name);
  /* A string operand's handler is the string library's arithmetic, which would only pass the
     event on to the other operand (this stub) or raise its own message: given below. */
  for (int k = own ? 1 : 2; k <= 2; k++) {
    if (lua_type(L, k) == LUA_TSTRING) continue;
    if (push_live_handler(L, k, name) != LUA_TNIL) return call_handler(L, 1, 2, 0);
    lua_pop(L, 1);
  }
  switch (event) {
  case EVENT_LE:
    /* a <= b as not (b < a): the second operand's __lt first, then the first's. */
    for (int k = 2; k >= 1; k--) {
      if (push_live_handler(L, k, lua_upvalueindex(3)) != LUA_TNIL) return call_handler(L, 2, 1, 1);
      lua_pop(L, 1);
    }
    /* FALLTHROUGH */
  case EVENT_LT: {
    const char *t1 = shown_type(L, 1), *t2 = shown_type(L, 2);
    if (strcmp(t1, t2) == 0) return luaL_error(L, "attempt to compare two %s values", t1);
    return luaL_error(L, "attempt to compare %s with %s", t1, t2);
  }
  default: {
    int bitwise = (event >= EVENT_BAND && event <= EVENT_SHR) || event == EVENT_BNOT;
    if (!bitwise && (lua_type(L, 1) == LUA_TSTRING || lua_type(L, 2) == LUA_TSTRING)) {
      /* The string library's message (lstrlib.c trymt), placed where the arithmetic is: one
         level further up when the string library called this stub. */
      luaL_where(L, !own && lua_type(L, 1) == LUA_TSTRING ? 2 : 1);
      lua_pushfstring(L, "attempt to %s a '%s' with a '%s'", lua_tostring(L, name) + 2,
                      luaL_typename(L, 1), luaL_typename(L, 2));
      lua_concat(L, 2);
      return lua_error(L);
    }
    int bad = lua_type(L, 1) == LUA_TNUMBER ? 2 : 1;
    return luaL_error(L, "attempt to perform %s on a %s value",
                      bitwise ? "bitwise operation" : "arithmetic", shown_type(L, bad));
  }
  }
}

/* The live stub of an arithmetic, bitwise, order or __call event for which mt had a function
   at setmetatable: upvalues as live_event's, and mt. It calls mt's field of the moment, so a
   function replaced later is seen as in stock (middleclass's metamethod updates); where that
   is no longer a function, live_event does what stock would with the live fields. Measured
   against the function itself in the clone: one raw read and a C frame per operator. */
static int live_own(lua_State *L) {
  lua_pushvalue(L, lua_upvalueindex(1));
  if (lua_rawget(L, lua_upvalueindex(4)) != LUA_TFUNCTION) {
    lua_pop(L, 1);
    return live_event(L);
  }
  lua_insert(L, 1);
  mbxV_cstack_check(L);
  if (lua_tointeger(L, lua_upvalueindex(2)) == EVENT_CALL) {
    lua_callk(L, lua_gettop(L) - 1, LUA_MULTRET, 0, live_call_done);
    return lua_gettop(L);
  }
  lua_settop(L, 3); /* the VM passes the two operands (a unary event: the operand twice) */
  lua_callk(L, 2, 1, 0, live_event_done);
  return 1;
}

/* Push the stubs' table: [i] = the live stub of event i (upvalues: its name, i, and for __le
   the name "__lt"). */
static void push_live_stubs(lua_State *L) {
  lua_createtable(L, EVENT_LIVE_LAST + 1, 0);
  for (int i = EVENT_LIVE_FIRST; i <= EVENT_LIVE_LAST; i++) {
    lua_pushstring(L, event_names[i]);
    lua_pushinteger(L, i);
    lua_pushstring(L, event_names[EVENT_LT]);
    lua_pushcclosure(L, live_event, 3);
    lua_rawseti(L, -2, i);
  }
}

int mbxL_getmetafield(lua_State *L, int idx, const char *field) {
  if (!lua_getmetatable(L, idx)) return LUA_TNIL;
  if (lua_rawgetp(L, -1, &key_original) == LUA_TTABLE)
    lua_remove(L, -2);
  else
    lua_pop(L, 1);
  lua_pushstring(L, field);
  int type = lua_rawget(L, -2);
  if (type == LUA_TNIL)
    lua_pop(L, 2);
  else
    lua_remove(L, -2);
  return type;
}

int mbxL_callmeta(lua_State *L, int idx, const char *event) {
  idx = lua_absindex(L, idx);
  if (mbxL_getmetafield(L, idx, event) == LUA_TNIL) return 0;
  lua_pushvalue(L, idx);
  lua_call(L, 1, 1);
  return 1;
}

/* Put the walker of event i (EVENT_INDEX or EVENT_NEWINDEX) into the table at clone in place
   of its value, keeping that value for the cache check (push_recorded). */
static void install_walker(lua_State *L, int clone, int i) {
  lua_pushvalue(L, UPV_EVENT(i));
  lua_rawget(L, clone);
  lua_rawsetp(L, clone, i == EVENT_INDEX ? &key_guest_index : &key_guest_newindex);
  lua_pushvalue(L, UPV_EVENT(i));
  lua_pushvalue(L, i == EVENT_INDEX ? UPV_WALK_INDEX : UPV_WALK_NEWINDEX);
  lua_rawset(L, clone);
}

/* The chain depth of the table at clone (its __index/__newindex entries), recorded in it. */
static lua_Integer record_depth(lua_State *L, int clone) {
  lua_pushvalue(L, UPV_EVENT(EVENT_INDEX));
  lua_rawget(L, clone);
  lua_pushvalue(L, UPV_EVENT(EVENT_NEWINDEX));
  lua_rawget(L, clone);
  lua_Integer via_index = link_depth(L, -2), via_newindex = link_depth(L, -1);
  lua_pop(L, 2);
  lua_Integer depth = via_index > via_newindex ? via_index : via_newindex;
  lua_pushinteger(L, depth);
  lua_rawsetp(L, clone, &key_depth);
  return depth;
}

/* Build a frozen shallow clone of the metatable at mt and push it: the object gets the
   clone, so fields added to mt later (a __call, a deeper __index) never take effect (THREATS
   P0 item 4). clone.__metatable makes getmetatable return the guest's own table. Checks the
   call and chain rules, and raises before anything is recorded. Called from
   meta_setmetatable's frame.

   Weak tables: the clone copies mt's __mode, so the *object* is weak as in stock Lua, while
   the clone itself, the only table the VM ever uses as a metatable, is strong and has no
   metatable of its own (guests never reach it). That is why Debian 5.4.4's luaV_finishset
   use-after-free (983bc433) stays out of reach: it needs a metatable that is itself weak, so
   that an emergency collection frees the __newindex table the assignment is using; a clone
   holds its __newindex strongly whatever the guest does to mt. In deterministic mode the
   clone does not hold __mode (collection points differ between processes, so weak entries
   would vanish at different moments in a replay): the object is strong. Either way the
   guest's value is kept under key_mode, for the cache check. __gc is never copied: a clone
   never arms a finalizer, so none runs (finalizers run with hooks off, lgc.c GCTM). */
static void push_new_clone(lua_State *L, int obj, int mt) {
  /* Sized for the usual clone (the live stubs of what mt lacks, a few private keys): no
     rehash while it fills. */
  lua_createtable(L, 0, 24);
  int clone = lua_gettop(L);
  lua_Integer present = 0;
  int newindex_live = 0;
  lua_Integer own_live = 0; /* events given a live_own above: no live_event below */
  for (int i = 0; i < EVENT_COUNT; i++) {
    lua_pushvalue(L, UPV_EVENT(i));
    lua_pushvalue(L, -1);
    if (lua_rawget(L, mt) == LUA_TNIL) {
      lua_pop(L, 2);
      continue;
    }
    /* Lua retries a __call that is not a function without bound inside one OP_CALL (or
       one __close while unwinding, where no instruction runs at all), shifting a growing
       argument list: `setmetatable(t, {__call = t}); t()` hangs stock Lua. A function is
       always called at the first step. */
    if (i == EVENT_CALL && lua_type(L, -1) != LUA_TFUNCTION)
      luaL_error(L, CALL_REFUSAL, "setmetatable: ", luaL_typename(L, -1));
    /* An __index or __newindex function is read live, as if mt lacked it: the walker
       installed below calls mt's field of the moment, so a function replaced later
       (pl.strict.module's __index over a module's own) is seen as in stock. The price is a
       C frame before each call of it. */
    if (lua_type(L, -1) == LUA_TFUNCTION && (i == EVENT_INDEX || i == EVENT_NEWINDEX)) {
      if (i == EVENT_NEWINDEX) newindex_live = 1;
      lua_pop(L, 2);
      continue;
    }
    /* An operator's function is read live too, through live_own (no bit: as for a stub). */
    if (lua_type(L, -1) == LUA_TFUNCTION && i >= EVENT_LIVE_FIRST && i <= EVENT_LIVE_LAST) {
      lua_pop(L, 1);
      lua_pushvalue(L, -1);
      lua_pushinteger(L, i);
      lua_pushvalue(L, UPV_EVENT(EVENT_LT));
      lua_pushvalue(L, mt);
      lua_pushcclosure(L, live_own, 4); /* the name's copy is its first upvalue */
      lua_rawset(L, clone);
      own_live |= (lua_Integer)1 << i;
      continue;
    }
    present |= (lua_Integer)1 << i;
    if (i == EVENT_MODE) {
      lua_pushvalue(L, -1);
      lua_rawsetp(L, clone, &key_mode);
      if (mbxL_deterministic(L)) {
        lua_pop(L, 2);
        continue;
      }
    }
    lua_rawset(L, clone);
  }
  /* A __concat added to mt later must not silently do nothing: every clone carries the
     refusal, which raises when the event fires (see concat_refused). */
  lua_pushvalue(L, UPV_REFUSED(0));
  lua_pushvalue(L, UPV_CONCAT);
  lua_rawset(L, clone);
  /* Where the VM may not follow the guest's value itself, a walker does (see above): an
     absent __index (read live at each lookup), the object itself, a chain too deep. (Not an
     absent __newindex: a walker there would cost a C call for every new key of an object,
     about 125 ns each in bench_metatables, to serve a __newindex added later.) */
  if (!(present & ((lua_Integer)1 << EVENT_INDEX))) {
    lua_pushvalue(L, UPV_EVENT(EVENT_INDEX));
    lua_pushvalue(L, UPV_WALK_INDEX);
    lua_rawset(L, clone);
  }
  if (newindex_live) {
    lua_pushvalue(L, UPV_EVENT(EVENT_NEWINDEX));
    lua_pushvalue(L, UPV_WALK_NEWINDEX);
    lua_rawset(L, clone);
  }
  /* Every other event the VM reads that mt lacks gets a live stub, so an event added to mt
     later is seen by the objects set up before it (live_event). */
  for (int i = EVENT_LIVE_FIRST; i <= EVENT_LIVE_LAST; i++)
    if (!((present | own_live) & ((lua_Integer)1 << i))) {
      lua_pushvalue(L, UPV_EVENT(i));
      lua_rawgeti(L, UPV_LIVE, i);
      lua_rawset(L, clone);
    }
  for (int i = EVENT_INDEX; i <= EVENT_NEWINDEX; i++) {
    lua_pushvalue(L, UPV_EVENT(i));
    if (lua_rawget(L, clone) == LUA_TTABLE && lua_rawequal(L, -1, obj)) install_walker(L, clone, i);
    lua_pop(L, 1);
  }
  if (record_depth(L, clone) > MBXL_CHAIN_MAX) {
    for (int i = EVENT_INDEX; i <= EVENT_NEWINDEX; i++) {
      lua_pushvalue(L, UPV_EVENT(i));
      int deep = lua_rawget(L, clone) == LUA_TTABLE || lua_type(L, -1) == LUA_TSTRING;
      lua_pop(L, 1);
      if (deep) install_walker(L, clone, i);
    }
    record_depth(L, clone);
  }
  lua_pushinteger(L, present);
  lua_rawsetp(L, clone, &key_events);
  lua_pushvalue(L, UPV_METATABLE);
  lua_pushvalue(L, -1);
  if (lua_rawget(L, mt) != LUA_TNIL) {
    lua_pushboolean(L, 1);
    lua_rawsetp(L, clone, &key_protected);
  } else {
    lua_pop(L, 1);
    lua_pushvalue(L, mt);
  }
  lua_rawset(L, clone);
  lua_pushvalue(L, mt);
  lua_rawsetp(L, clone, &key_original);
}

/* Push the clone for the metatable at mt, from the cache when it still matches. Sets *fresh
   when it was just built (then neither cached nor its targets recorded yet). */
static void push_clone(lua_State *L, int obj, int mt, int cache, int *fresh) {
  lua_pushvalue(L, mt);
  if (lua_rawget(L, cache) == LUA_TTABLE && clone_matches(L, mt, lua_gettop(L))) {
    *fresh = 0;
    return;
  }
  lua_pop(L, 1);
  *fresh = 1;
  push_new_clone(L, obj, mt);
}

/* The __concat of every clone. No guest __concat ever runs (Debian 5.4.4's luaV_concat reads
   a stale stack pointer after a concat metamethod returns: the regression of its
   CVE-2022-33099 backport that upstream fixed in 603b2c64, reachable whenever any concat
   metamethod runs, since the stack can move on entry to one), and setmetatable accepts a
   metatable that has one, so this raises when the event fires: the refusal if either
   operand's guest metatable holds a __concat now, else stock's own "attempt to concatenate"
   error (without stock's "(local 'x')" detail). It never returns into luaV_concat, so the
   stale pointer is never used. */
#define UPV_CONCAT_NAME lua_upvalueindex(1) /* concat_refused's upvalue: "__concat" */
static int concat_refused(lua_State *L) {
  for (int i = 1; i <= 2; i++) {
    if (!lua_getmetatable(L, i)) continue;
    int guest = lua_rawgetp(L, -1, &key_original) == LUA_TTABLE;
    lua_pushvalue(L, UPV_CONCAT_NAME);
    if (guest && lua_rawget(L, -2) != LUA_TNIL) /* raw: never a guest metamethod here */
      return luaL_error(L,
                        "attempt to concatenate a value whose metatable has '__concat': "
                        "'__concat' metamethods are not allowed in this sandbox (%s)",
                        refused_fields[0][1]);
    lua_settop(L, 2);
  }
  int bad = lua_type(L, 1) == LUA_TSTRING || lua_type(L, 1) == LUA_TNUMBER ? 2 : 1;
  return luaL_error(L, "attempt to concatenate a %s value", shown_type(L, bad));
}

const char mbxL_setmetatable_unprotect = 0;

static int meta_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_checktype(L, 1, LUA_TTABLE);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  /* debug.setmetatable's marker: no guest can make this light userdata. */
  int unprotect = lua_islightuserdata(L, 3) && lua_touserdata(L, 3) == &mbxL_setmetatable_unprotect;
  lua_settop(L, 2);
  lua_Integer limit = -1;
  int watched = 0;
  if (lua_getmetatable(L, 1)) {
    /* Our clones and pins carry __metatable for getmetatable's sake; only a __metatable the
       guest wrote itself protects the object. */
    limit = lua_rawgetp(L, -1, &key_limit) == LUA_TNUMBER ? lua_tointeger(L, -1) : -1;
    lua_pop(L, 1);
    watched = lua_rawgetp(L, -1, &key_watch) != LUA_TNIL;
    lua_pop(L, 1);
    int ours = watched || limit >= 0 || lua_rawgetp(L, -1, &key_original) != LUA_TNIL ||
               mbxV_json_is_array_marker(L, -2);
    if (!watched && limit < 0) lua_pop(L, 1);
    int protected_ = ours ? (lua_rawgetp(L, -1, &key_protected) != LUA_TNIL)
                          : (lua_getfield(L, -1, "__metatable") != LUA_TNIL);
    lua_pop(L, 2);
    /* debug.setmetatable passes over a __metatable the guest set itself (as stock does),
       never over one a metatable moonbox did not make holds (a host module's). */
    if (protected_ && !(unprotect && ours))
      return luaL_error(L, "cannot change a protected metatable");
  }
  if (t == LUA_TNIL) {
    if (watched) /* a watch already reads as no metatable, and keeps watching */
      ;
    else if (limit >= 0) {
      unregister_pin(L, 1);
      set_pinned(L, 1, 2, limit); /* a target stays pinned */
    } else
      lua_setmetatable(L, 1);
    /* The table lost a metatable of the guest's, and its watch with it (setmetatable(t, X)
       replaced that): where its clone is still cached, objects set up since share that clone
       without making a new one, so nothing would watch t again and an event added to it now
       would reach none of them, silently. Watch it again, starting with that clone. */
    if (!watched) {
      lua_rawgetp(L, LUA_REGISTRYINDEX, &key_clone_cache);
      lua_pushvalue(L, 1);
      if (lua_rawget(L, -2) == LUA_TTABLE && start_watch(L, 1)) register_copy(L, -1);
    }
    lua_settop(L, 1);
    return 1;
  }
  /* A __concat in mt is no reason to refuse the metatable: the clone never holds it, and its
     refusal raises where `..` reaches it (concat_refused). A class may carry one and be used
     for everything else (Penlight's List). */
  lua_checkstack(L, 16); /* the check and the clone use a few slots above the two arguments */
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_clone_cache); /* 3 */
  int fresh;
  push_clone(L, 1, 2, 3, &fresh); /* 4 */
  lua_rawgetp(L, 4, &key_depth);
  lua_Integer depth = lua_tointeger(L, -1);
  lua_pop(L, 1);
  /* A table some chain runs through may not get deeper (see above): it gets a private copy
     of the clone whose chain entries are walkers (depth 0), so lookups through it leave the
     VM here and go on in metered C. */
  int walked = depth > limit && limit >= 0;
  if (fresh) {
    for (int i = EVENT_INDEX; i <= EVENT_NEWINDEX; i++) {
      lua_pushvalue(L, UPV_EVENT(i));
      if (lua_rawget(L, 4) == LUA_TTABLE) pin_target(L, -1);
      lua_pop(L, 1);
    }
    /* mt is watched from now on, so an event added to it reaches this clone (see the
       watches above), and the one this replaces in the cache, which objects set up before
       mt could be watched may use; not when mt is the object itself, whose watch the clone
       replaces. */
    int mt_watched = !lua_rawequal(L, 1, 2) && start_watch(L, 2);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, 3) == LUA_TTABLE && mt_watched) register_copy(L, -1);
    lua_pop(L, 1);
    lua_pushvalue(L, 2);
    lua_pushvalue(L, 4);
    lua_rawset(L, 3);
    if (mt_watched) register_copy(L, 4);
  } else if (!lua_rawequal(L, 1, 2)) {
    /* A clone made while mt could not be watched (it had a metatable of its own, since
       removed): watch mt from now on, with the clone in use. The usual hit (mt watched, or
       with a metatable of the guest's) costs one or two raw reads here. */
    int startable = 1;
    if (lua_getmetatable(L, 2)) {
      startable = lua_rawgetp(L, -1, &key_watch) == LUA_TNIL &&
                  lua_rawgetp(L, -2, &key_pin_only) != LUA_TNIL;
      lua_settop(L, 4);
    }
    if (startable && start_watch(L, 2)) register_copy(L, 4);
  }
  if (walked) {
    lua_createtable(L, 0, 8); /* 5: bounded, a clone holds the events and a few keys */
    lua_pushnil(L);
    while (lua_next(L, 4)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, 5);
    }
    for (int i = EVENT_INDEX; i <= EVENT_NEWINDEX; i++) {
      lua_pushvalue(L, UPV_EVENT(i));
      int chained = lua_rawget(L, 5) == LUA_TTABLE || lua_type(L, -1) == LUA_TSTRING;
      lua_pop(L, 1);
      if (chained) install_walker(L, 5, i);
    }
    record_depth(L, 5);
    lua_replace(L, 4);
  }
  if (limit >= 0) {
    unregister_pin(L, 1);
    set_pinned(L, 1, 4, limit);
  } else
    lua_setmetatable(L, 1);
  lua_settop(L, 1);
  return 1;
}

/* getmetatable as stock, except that a pin standing for "no metatable" is reported as nil.
   Every metatable moonbox sets (clones, pins, the string and FILE* metatables, the JSON array
   marker) carries __metatable, so none is ever handed out. */
void mbxL_getmetatable(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (!lua_getmetatable(L, idx)) {
    lua_pushnil(L);
    return;
  }
  if (lua_rawgetp(L, -1, &key_pin_only) != LUA_TNIL) {
    lua_pop(L, 2);
    lua_pushnil(L);
    return;
  }
  lua_pop(L, 1);
  if (luaL_getmetafield(L, idx, "__metatable") != LUA_TNIL) lua_remove(L, -2);
}

void mbxL_debug_getmetatable(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  if (lua_getmetatable(L, idx)) {
    /* A clone, or a pin copied from one, names the guest's table under key_original. */
    if (lua_rawgetp(L, -1, &key_original) == LUA_TTABLE) {
      lua_remove(L, -2);
      return;
    }
    lua_pop(L, 2);
  }
  mbxL_getmetatable(L, idx);
}

static int meta_getmetatable(lua_State *L) {
  luaL_checkany(L, 1);
  mbxL_getmetatable(L, 1);
  return 1;
}

/* setmetatable with its upvalues (the names it reads), and its clone cache. The cache's own
   metatable is set here from C: it is the only __mode the sandbox holds. Built at open, so a
   slot's template already has both. */
void mbxL_open_metatables(lua_State *L) {
  int globals = lua_gettop(L);
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "kv");
  lua_setfield(L, -2, "__mode");
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_weak_kv);
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_clone_cache);
  /* The shared pin of tables that had no metatable when they became a target. */
  lua_createtable(L, 0, 2);
  lua_pushboolean(L, 1);
  lua_rawsetp(L, -2, &key_pin_only);
  lua_pushinteger(L, 0);
  lua_rawsetp(L, -2, &key_limit);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_pin_zero);
  luaL_checkstack(L, UPVALUE_COUNT, "setmetatable");
  for (int i = 0; i < EVENT_COUNT; i++)
    lua_pushstring(L, event_names[i]);
  lua_pushliteral(L, "__metatable");
  for (int i = 0; i < REFUSED_COUNT; i++)
    lua_pushstring(L, refused_fields[i][0]);
  lua_pushstring(L, refused_fields[0][0]);
  lua_pushcclosure(L, concat_refused, 1);
  lua_pushstring(L, event_names[EVENT_INDEX]);
  lua_pushcclosure(L, walk_index, 1);
  lua_pushstring(L, event_names[EVENT_NEWINDEX]);
  lua_pushcclosure(L, walk_newindex, 1);
  push_live_stubs(L);
  /* The events a watch passes on, and its walker; shared by watch_store and rawset. */
  static const int watched[] = {EVENT_NEWINDEX, EVENT_LEN,      EVENT_EQ,
                                EVENT_CLOSE,    EVENT_JSONTYPE, EVENT_MODE};
  int n = (int)(sizeof watched / sizeof *watched);
  lua_createtable(L, 0, n + 1);
  for (int k = 0; k < n; k++) {
    lua_pushinteger(L, watched[k]);
    lua_setfield(L, -2, event_names[watched[k]]);
  }
  lua_pushinteger(L, WATCHED_METATABLE);
  lua_setfield(L, -2, "__metatable");
  lua_pushvalue(L, -3); /* walk_newindex */
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_pushcclosure(L, meta_rawset, 2);
  lua_setfield(L, globals, "rawset");
  lua_pushcclosure(L, watch_store, 2);
  lua_pushcclosure(L, meta_setmetatable, UPVALUE_COUNT);
  lua_setfield(L, -2, "setmetatable");
  lua_pushcfunction(L, meta_getmetatable);
  lua_setfield(L, -2, "getmetatable");
}

int mbxL_is_metamethod_stub(lua_CFunction f) {
  return f == walk_index || f == walk_newindex || is_live_stub(f) || f == watch_store;
}
