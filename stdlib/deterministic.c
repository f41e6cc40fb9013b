/* stdlib/deterministic.c -- deterministic mode: pairs/next in a canonical order, object numbers. */
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "stdlib/metatable.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"
#include "vm/vm.h"

/*
** Why: Lua's string-hash seed is random per process and table/function keys hash by address,
** so stock `pairs` order differs between two processes running the same script. In
** deterministic mode (a policy switch read from the port at call time: a sandbox's state is
** restored from a template built without a port) `next` and `pairs` walk a table in one
** canonical order: integers ascending, strings bytewise (a prefix first), false then true,
** floats ascending, then other keys by their object number.
**
** Object numbers come from a per-sandbox counter, given the first time the canonical sort
** (or tostring) sees an object. Objects first seen together in one sort are numbered in
** address order: within one sandbox's heap arena that is the order of their blocks, which a
** deterministic run reproduces in any process (it is the one input here that is not
** Lua-visible; see docs/compat.md for where it can still differ).
**
** Registry state, built at open so a slot's template has it:
**  - numbers: {[object] = number}, weak in KEYS only. Its values are integers, so the table
**    cannot form the ephemeron chains that make the collector quadratic (see the clone cache
**    in stdlib/metatable.c); a dead object's entry simply goes. It is never a metatable and is
**    written with lua_rawset only (the 5.4.4 finishset bug needs both).
**  - counter: the last number given.
**  - next_cache: {table, order, last position} for plain `next` calls, strong, one entry,
**    replaced by the next table traversed with `next` (so it pins at most one table and its
**    order). `pairs` needs no cache: its iterator holds the order as an upvalue, and the
**    order goes with the iterator.
**
** A traversal costs O(n log n) to start (all metered: one unit per key per pass and one per
** element moved by the merge sort, charged in batches) and O(1) per step, plus a binary
** search when the caller passes a key other than the last one returned.
*/

static const char key_numbers = 0;
static const char key_counter = 0;
static const char key_next_cache = 0;

/* Classes in canonical order. */
enum { CLASS_INTEGER, CLASS_STRING, CLASS_BOOLEAN, CLASS_FLOAT, CLASS_OBJECT };

/* One key reduced to what the order compares, so the sort runs in plain C. Kept to 24 bytes:
   the sort holds two arrays of these. */
typedef struct canon_key {
  int32_t cls;
  uint32_t slot; /* where the key sits in the unsorted key table (1-based) */
  union {
    lua_Integer integer; /* integers; objects: the number (0: not numbered yet) */
    lua_Number number;   /* floats */
    const char *str;     /* strings: anchored by the key table the sort works from */
  } v;
  uintptr_t extra; /* strings: the length; objects: the address (the tie-break); booleans */
} canon_key;

/* Work charged per batch: the sort and the scans poll the budget this often. */
#define CHARGE_BATCH 1024

int mbxL_deterministic(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  return port != NULL && port->grants != NULL && port->grants->deterministic;
}

/* The next number from the sandbox's counter. */
static lua_Integer take_number(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_counter);
  lua_Integer n = lua_tointeger(L, -1) + 1;
  lua_pop(L, 1);
  lua_pushinteger(L, n);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_counter);
  return n;
}

/* Give the value at idx a number in the table at numbers (both absolute indices). */
static lua_Integer assign_number(lua_State *L, int idx, int numbers) {
  lua_Integer n = take_number(L);
  lua_pushvalue(L, idx);
  lua_pushinteger(L, n);
  lua_rawset(L, numbers);
  return n;
}

lua_Integer mbxL_object_number(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  luaL_checkstack(L, 4, "object number");
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key_numbers) != LUA_TTABLE) {
    lua_pop(L, 1);
    return 0; /* not a sandbox state: nothing to number with */
  }
  int numbers = lua_gettop(L);
  lua_pushvalue(L, idx);
  lua_Integer n = lua_rawget(L, numbers) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
  lua_pop(L, 1);
  if (n == 0) n = assign_number(L, idx, numbers);
  lua_pop(L, 1);
  return n;
}

/* Reduce the key at idx (absolute) to a canon_key; numbers is the registry's table. */
static void classify(lua_State *L, int idx, int numbers, canon_key *k) {
  memset(k, 0, sizeof *k);
  switch (lua_type(L, idx)) {
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      k->cls = CLASS_INTEGER;
      k->v.integer = lua_tointeger(L, idx);
    } else {
      k->cls = CLASS_FLOAT;
      k->v.number = lua_tonumber(L, idx);
    }
    break;
  case LUA_TSTRING: {
    size_t len;
    k->cls = CLASS_STRING;
    k->v.str = lua_tolstring(L, idx, &len); /* a string already: no conversion in place */
    k->extra = len;
    break;
  }
  case LUA_TBOOLEAN:
    k->cls = CLASS_BOOLEAN;
    k->extra = (uintptr_t)lua_toboolean(L, idx);
    break;
  default:
    k->cls = CLASS_OBJECT;
    lua_pushvalue(L, idx);
    k->v.integer = lua_rawget(L, numbers) == LUA_TNUMBER ? lua_tointeger(L, -1) : 0;
    lua_pop(L, 1);
    k->extra = (uintptr_t)lua_topointer(L, idx);
    break;
  }
}

static int sign(int less, int greater) {
  return less ? -1 : greater ? 1 : 0;
}

/* The canonical order. Objects: numbered ones by number, then unnumbered ones by address
   (they are numbered in that order right after the sort, so the result stays sorted). */
static int compare(const canon_key *a, const canon_key *b) {
  if (a->cls != b->cls) return a->cls < b->cls ? -1 : 1;
  switch (a->cls) {
  case CLASS_INTEGER:
    return sign(a->v.integer<b->v.integer, a->v.integer> b->v.integer);
  case CLASS_FLOAT:
    return sign(a->v.number<b->v.number, a->v.number> b->v.number);
  case CLASS_BOOLEAN:
    return sign(a->extra<b->extra, a->extra> b->extra);
  case CLASS_STRING: {
    size_t common = a->extra < b->extra ? a->extra : b->extra;
    int c = memcmp(a->v.str, b->v.str, common);
    return c != 0 ? sign(c<0, c> 0) : sign(a->extra<b->extra, a->extra> b->extra);
  }
  default:
    if (a->v.integer != b->v.integer) {
      if (a->v.integer == 0) return 1;
      if (b->v.integer == 0) return -1;
      return a->v.integer < b->v.integer ? -1 : 1;
    }
    return a->v.integer == 0 ? sign(a->extra<b->extra, a->extra> b->extra) : 0;
  }
}

/* Bottom-up merge sort of a[0..n) using tmp; returns whichever buffer holds the result. Our
   own loop rather than qsort so the budget is charged as it goes: mbxV_charge may raise, and
   raising out of qsort would leak its buffer (both buffers here are Lua userdata). */
static canon_key *sort_keys(lua_State *L, canon_key *a, canon_key *tmp, size_t n) {
  mbxV_meter work = mbxV_meter_init(L, CHARGE_BATCH, 1);
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n;
      size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      size_t i = lo, j = mid, k = lo;
      while (k < hi) {
        /* Stable: on a tie the left run wins (ties only between equal keys: never). */
        if (j >= hi || (i < mid && compare(&a[j], &a[i]) >= 0))
          tmp[k++] = a[i++];
        else
          tmp[k++] = a[j++];
        mbxV_meter_add(&work, 1);
      }
    }
    canon_key *swap = a;
    a = tmp;
    tmp = swap;
  }
  mbxV_meter_add(&work, 1);
  mbxV_meter_flush(&work);
  return a;
}

/* Push the keys of the table at t in canonical order, as an array (a new table). */
static void push_order(lua_State *L, int t) {
  t = lua_absindex(L, t);
  int base = lua_gettop(L);
  luaL_checkstack(L, 12, "pairs");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_numbers);
  int numbers = lua_gettop(L);
  size_t n = 0;
  mbxV_meter counting = mbxV_meter_init(L, CHARGE_BATCH, 1);
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    n++;
    mbxV_meter_add(&counting, 1);
  }
  mbxV_meter_add(&counting, 1);
  mbxV_meter_flush(&counting);
  /* Two key buffers and two key arrays (16-byte slots); refused up front rather than failing
     inside Lua with an emergency collection at a moment the guest chose. */
  size_t need = n * (2 * sizeof(canon_key) + 32);
  if (n > (size_t)INT32_MAX || (n > 0 && need / n != 2 * sizeof(canon_key) + 32) ||
      !mbxL_heap_fits(L, need))
    luaL_error(L,
               "not enough memory left in this sandbox for the canonical order of %I keys "
               "(deterministic mode)",
               (lua_Integer)n);
  canon_key *keys = lua_newuserdatauv(L, n ? n * sizeof *keys : 1, 0);
  canon_key *tmp = lua_newuserdatauv(L, n ? n * sizeof *tmp : 1, 0);
  lua_createtable(L, (int)n, 0);
  int raw = lua_gettop(L);
  size_t count = 0;
  mbxV_meter copying = mbxV_meter_init(L, CHARGE_BATCH, 1);
  lua_pushnil(L);
  /* No Lua code runs in this loop, so the table holds the same n keys as above. */
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    if (count == n) continue;
    lua_pushvalue(L, -1);
    lua_rawseti(L, raw, (lua_Integer)count + 1);
    classify(L, lua_gettop(L), numbers, &keys[count]);
    keys[count].slot = (uint32_t)count + 1;
    count++;
    mbxV_meter_add(&copying, 1); /* the remainder is not charged, as for every scan */
  }
  n = count;
  canon_key *sorted = sort_keys(L, keys, tmp, n);
  lua_createtable(L, (int)n, 0);
  int order = lua_gettop(L);
  mbxV_meter ordering = mbxV_meter_init(L, CHARGE_BATCH, 1);
  for (size_t i = 0; i < n; i++) {
    lua_rawgeti(L, raw, sorted[i].slot);
    if (sorted[i].cls == CLASS_OBJECT && sorted[i].v.integer == 0)
      sorted[i].v.integer = assign_number(L, lua_gettop(L), numbers);
    lua_rawseti(L, order, (lua_Integer)i + 1);
    mbxV_meter_add(&ordering, 1);
  }
  mbxV_meter_add(&ordering, 1);
  mbxV_meter_flush(&ordering);
  lua_copy(L, order, base + 1);
  lua_settop(L, base + 1);
}

/* The position in order (n keys) of the first key greater than the key at kidx. */
static lua_Integer upper_bound(lua_State *L, int order, lua_Integer n, int kidx) {
  canon_key k, probe;
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_numbers);
  int numbers = lua_gettop(L);
  classify(L, kidx, numbers, &k);
  lua_Integer lo = 1, hi = n + 1, probes = 1;
  while (lo < hi) {
    lua_Integer mid = lo + (hi - lo) / 2;
    lua_rawgeti(L, order, mid);
    classify(L, lua_gettop(L), numbers, &probe); /* order anchors the string */
    lua_pop(L, 1);
    if (compare(&probe, &k) <= 0)
      lo = mid + 1;
    else
      hi = mid;
    probes++;
  }
  lua_pop(L, 1);
  mbxV_charge(L, (uint64_t)probes);
  return lo;
}

/* Where a traversal continues after the key at kidx (nil: the start), given the position of
   the key returned last: the next slot when kidx is that key (the loop case, O(1)), else a
   binary search, which also places a key deleted from the table or never in it. */
static lua_Integer position_after(lua_State *L, int order, lua_Integer n, lua_Integer last,
                                  int kidx) {
  if (lua_isnil(L, kidx)) return 1;
  if (last >= 1 && last <= n) {
    lua_rawgeti(L, order, last);
    int same = lua_rawequal(L, -1, kidx);
    lua_pop(L, 1);
    if (same) return last + 1;
  }
  return upper_bound(L, order, n, kidx);
}

/* From pos on, push the first key of order still present in the table at t, and its value;
   return its position, or 0 (nothing pushed) at the end. Keys whose value became nil during
   the traversal are skipped, as stock next never returns them either. */
static lua_Integer scan(lua_State *L, int t, int order, lua_Integer pos, lua_Integer n) {
  mbxV_meter skipped = mbxV_meter_init(L, CHARGE_BATCH, 1);
  for (; pos <= n; pos++) {
    lua_rawgeti(L, order, pos);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, t) != LUA_TNIL) return pos;
    lua_pop(L, 2);
    mbxV_meter_add(&skipped, 1); /* charged per batch; the remainder rides on the caller */
  }
  return 0;
}

/* The iterator pairs returns in deterministic mode: upvalue 1 the order, upvalue 2 the
   position of the key returned last. */
static int ordered_iterator(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  int order = lua_upvalueindex(1);
  lua_Integer n = (lua_Integer)lua_rawlen(L, order);
  lua_Integer last = lua_tointeger(L, lua_upvalueindex(2));
  lua_Integer pos = scan(L, 1, order, position_after(L, order, n, last, 2), n);
  if (pos == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, pos);
  lua_replace(L, lua_upvalueindex(2));
  return 2;
}

/* next(t, k) in deterministic mode, through the one-entry cache. A call with k == nil starts
   a traversal: the order is built afresh (the table may have changed since the last one). */
static int ordered_next(lua_State *L) {
  luaL_checkstack(L, 8, "next");
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_next_cache);
  int cache = lua_gettop(L);
  lua_rawgeti(L, cache, 1);
  int cached = !lua_isnil(L, 2) && lua_rawequal(L, -1, 1);
  lua_pop(L, 1);
  if (cached) {
    lua_rawgeti(L, cache, 2);
  } else {
    push_order(L, 1);
    lua_pushvalue(L, 1);
    lua_rawseti(L, cache, 1);
    lua_pushvalue(L, -1);
    lua_rawseti(L, cache, 2);
    lua_pushinteger(L, 0);
    lua_rawseti(L, cache, 3);
  }
  int order = lua_gettop(L);
  lua_Integer n = (lua_Integer)lua_rawlen(L, order);
  lua_rawgeti(L, cache, 3);
  lua_Integer last = lua_tointeger(L, -1);
  lua_pop(L, 1);
  lua_Integer pos = scan(L, 1, order, position_after(L, order, n, last, 2), n);
  if (pos == 0) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushinteger(L, pos);
  lua_rawseti(L, cache, 3);
  return 2;
}

/* next: stock behaviour (one port check more) unless the mode is on. */
static int det_next(lua_State *L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_settop(L, 2);
  if (mbxL_deterministic(L)) return ordered_next(L);
  if (lua_next(L, 1)) return 2;
  lua_pushnil(L);
  return 1;
}

static int pairs_continue(lua_State *L, int status, lua_KContext ctx) {
  (void)L;
  (void)status;
  (void)ctx;
  return 3;
}

/* pairs: __pairs is honoured exactly as stock 5.4 does (called with t, three results, a
   continuation so a yield inside it still works), in both modes. */
static int det_pairs(lua_State *L) {
  luaL_checkany(L, 1);
  if (mbxL_getmetafield(L, 1, "__pairs") != LUA_TNIL) { /* live: set after setmetatable counts */
    mbxV_cstack_check(L);
    lua_pushvalue(L, 1);
    lua_callk(L, 1, 3, 0, pairs_continue);
    return 3;
  }
  if (lua_type(L, 1) == LUA_TTABLE && mbxL_deterministic(L)) {
    push_order(L, 1);
    lua_pushinteger(L, 0);
    lua_pushcclosure(L, ordered_iterator, 2);
  } else {
    lua_pushvalue(L, lua_upvalueindex(1)); /* == the global next, as in stock Lua */
  }
  lua_pushvalue(L, 1);
  lua_pushnil(L);
  return 3;
}

int mbxL_open_deterministic(lua_State *L) {
  lua_newtable(L);
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "k");
  lua_setfield(L, -2, "__mode");
  lua_setmetatable(L, -2);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_numbers);
  lua_pushinteger(L, 0);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_counter);
  lua_createtable(L, 3, 0);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_next_cache);
  /* Installed whatever the policy: the template this state may become is shared by every
     policy, so the wrappers decide at call time. */
  lua_pushglobaltable(L);
  /* Closures, not light C functions: those hash by code address (stdlib/stdlib.c). pairs
     returns next itself, its upvalue. */
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, det_next, 1);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "next");
  lua_pushcclosure(L, det_pairs, 1);
  lua_setfield(L, -2, "pairs");
  lua_pop(L, 1);
  return 0;
}
