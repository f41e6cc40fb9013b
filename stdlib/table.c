/* stdlib/table.c -- the table library guests see: stock pack, our own metered loops. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"
#include "vm/vm.h"

/* Every function here loops in C over a range or a __len the guest picks, and __index /
   __newindex may be C functions (rawlen, rawequal, ...) that run no VM instruction, so the
   count hook never fires meanwhile (THREATS D4). Each element read or write, and each sort
   comparison, is charged one instruction; the charge (which also checks the deadline, the
   interrupt and the memory flag) is paid every CHARGE_EVERY steps and at the end. */
#define CHARGE_EVERY 256u
/* Ranges up to this size are sorted by insertion, larger ones are partitioned. It is small so
   that an inconsistent comparator is reported ("invalid order function for sorting") for
   arrays of four elements or more, as stock does. */
#define SORT_INSERTION_MAX 3
/* Bytes of string comparison charged as one instruction (as the JSON codec's key sort). */
#define SORT_METER_BYTES 64u

#define TAB_R 1 /* read: __index */
#define TAB_W 2 /* write: __newindex */
#define TAB_L 4 /* length: __len */
#define TAB_RW (TAB_R | TAB_W)

/* Every loop here charges through one mbxV_meter (vm/budget.h): a step per element touched or
   comparison made, paid every CHARGE_EVERY steps and at the end. */
#define TABLE_METER(L) mbxV_meter_init((L), CHARGE_EVERY, 1)

static void get(mbxV_meter *m, int t, lua_Integer i) {
  lua_geti(m->L, t, i);
  mbxV_meter_add(m, 1);
}

/* t[i] = the value on top (popped). */
static void set(mbxV_meter *m, int t, lua_Integer i) {
  lua_seti(m->L, t, i);
  mbxV_meter_add(m, 1);
}

/* 1 if the metatable on the stack top has the field (raw); leaves the field's value pushed. */
static int has_field(lua_State *L, const char *key) {
  lua_pushstring(L, key);
  return lua_rawget(L, -2) != LUA_TNIL;
}

/* Stock semantics: a table, or any value whose metatable provides the metamethods the
   operation needs. */
static void check_table(lua_State *L, int arg, int what) {
  if (lua_type(L, arg) == LUA_TTABLE) return;
  if (lua_getmetatable(L, arg)) {
    int ok = 1;
    if (ok && (what & TAB_R)) {
      ok = has_field(L, "__index");
      lua_pop(L, 1);
    }
    if (ok && (what & TAB_W)) {
      ok = has_field(L, "__newindex");
      lua_pop(L, 1);
    }
    if (ok && (what & TAB_L)) {
      ok = has_field(L, "__len");
      lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (ok) return;
  }
  luaL_checktype(L, arg, LUA_TTABLE); /* raises "table expected, got X" */
}

/* #t (honouring __len) after checking t can be used that way. */
static lua_Integer length_of(lua_State *L, int arg, int what) {
  mbxV_cstack_check(L); /* __index, __newindex, __len and comparators re-enter Lua */
  check_table(L, arg, what | TAB_L);
  return luaL_len(L, arg);
}

/* ---- insert / remove / move ------------------------------------------------------------ */

static int t_insert(lua_State *L) {
  mbxV_meter m = TABLE_METER(L);
  lua_Integer first_empty = (lua_Integer)((lua_Unsigned)length_of(L, 1, TAB_RW) + 1u);
  lua_Integer pos;
  switch (lua_gettop(L)) {
  case 2:
    pos = first_empty;
    break;
  case 3:
    pos = luaL_checkinteger(L, 2);
    /* pos in [1, first_empty], tested in unsigned arithmetic like stock */
    luaL_argcheck(L, (lua_Unsigned)pos - 1u < (lua_Unsigned)first_empty, 2,
                  "position out of bounds");
    for (lua_Integer i = first_empty; i > pos; i--) { /* shift up: t[i] = t[i - 1] */
      get(&m, 1, i - 1);
      set(&m, 1, i);
    }
    break;
  default:
    return luaL_error(L, "wrong number of arguments to 'insert'");
  }
  set(&m, 1, pos);
  mbxV_meter_flush(&m);
  return 0;
}

static int t_remove(lua_State *L) {
  mbxV_meter m = TABLE_METER(L);
  lua_Integer size = length_of(L, 1, TAB_RW);
  lua_Integer pos = luaL_optinteger(L, 2, size);
  /* An explicit position must be in [1, size + 1]. Stock 5.4.4 blames argument #1 here (not
     the position, #2): kept, so messages match. */
  if (pos != size)
    luaL_argcheck(L, (lua_Unsigned)pos - 1u <= (lua_Unsigned)size, 1, "position out of bounds");
  get(&m, 1, pos);            /* the result */
  for (; pos < size; pos++) { /* shift down: t[pos] = t[pos + 1] */
    get(&m, 1, pos + 1);
    set(&m, 1, pos);
  }
  lua_pushnil(L);
  set(&m, 1, pos);
  mbxV_meter_flush(&m);
  return 1;
}

static int t_move(lua_State *L) {
  mbxV_meter m = TABLE_METER(L);
  mbxV_cstack_check(L);
  lua_Integer first = luaL_checkinteger(L, 2);
  lua_Integer last = luaL_checkinteger(L, 3);
  lua_Integer dest = luaL_checkinteger(L, 4);
  int target = !lua_isnoneornil(L, 5) ? 5 : 1;
  check_table(L, 1, TAB_R);
  check_table(L, target, TAB_W);
  if (last >= first) {
    luaL_argcheck(L, first > 0 || last < LUA_MAXINTEGER + first, 3, "too many elements to move");
    lua_Integer count = last - first + 1;
    luaL_argcheck(L, dest <= LUA_MAXINTEGER - count + 1, 4, "destination wrap around");
    /* Copy upwards unless the destination overlaps the source from above, as memmove. */
    if (dest > last || dest <= first || (target != 1 && !lua_compare(L, 1, target, LUA_OPEQ))) {
      for (lua_Integer i = 0; i < count; i++) {
        get(&m, 1, first + i);
        set(&m, target, dest + i);
      }
    } else {
      for (lua_Integer i = count - 1; i >= 0; i--) {
        get(&m, 1, first + i);
        set(&m, target, dest + i);
      }
    }
  }
  mbxV_meter_flush(&m);
  lua_pushvalue(L, target);
  return 1;
}

/* ---- concat / unpack ------------------------------------------------------------------- */

/* Before b grows by len bytes, the new block (the luaL_Buffer doubles it, and the old one is
   live until the copy) must fit under the ceiling, so a concat of guest-sized pieces stops
   cleanly instead of failing inside Lua. */
static void ensure_room(lua_State *L, luaL_Buffer *b, size_t len) {
  if (len > b->size - b->n) {
    size_t grown = b->size * 2 > b->n + len ? b->size * 2 : b->n + len;
    if (grown > LUAL_BUFFERSIZE && !mbxL_heap_fits(L, grown))
      luaL_error(L, "resulting string too large (not enough memory left in this sandbox)");
  }
}

static int t_concat(lua_State *L) {
  mbxV_meter m = TABLE_METER(L);
  lua_Integer last = length_of(L, 1, TAB_R);
  size_t sep_len;
  const char *sep = luaL_optlstring(L, 2, "", &sep_len);
  lua_Integer i = luaL_optinteger(L, 3, 1);
  last = luaL_optinteger(L, 4, last);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (; i <= last; i++) {
    get(&m, 1, i);
    size_t len;
    int type = lua_type(L, -1);
    if (type == LUA_TSTRING) {
      len = lua_rawlen(L, -1);
    } else if (type == LUA_TNUMBER) {
      lua_tolstring(L, -1, &len); /* converted in place, as luaL_addvalue would */
    } else {
      return luaL_error(L, "invalid value (%s) at index %I in table for 'concat'",
                        luaL_typename(L, -1), (LUAI_UACINT)i);
    }
    ensure_room(L, &b, len);
    /* luaL_addvalue, not addlstring after a pop: an __index may have made the string, and
       nothing else would anchor it while the buffer grows. */
    luaL_addvalue(&b);
    mbxV_meter_add(&m, len / 64);
    if (i == last) break; /* also keeps i + 1 from overflowing at LUA_MAXINTEGER */
    if (sep_len > 0) {    /* the separator is argument 2, anchored for the whole call */
      ensure_room(L, &b, sep_len);
      luaL_addlstring(&b, sep, sep_len);
      mbxV_meter_add(&m, sep_len / 64);
    }
  }
  if (b.n > LUAL_BUFFERSIZE && !mbxL_heap_fits(L, b.n)) /* the result is copied out of the buffer */
    return luaL_error(L, "resulting string too large (not enough memory left in this sandbox)");
  mbxV_meter_flush(&m);
  luaL_pushresult(&b);
  return 1;
}

static int t_unpack(lua_State *L) {
  mbxV_meter m = TABLE_METER(L);
  mbxV_cstack_check(L);
  lua_Integer i = luaL_optinteger(L, 2, 1);
  lua_Integer last = luaL_opt(L, luaL_checkinteger, 3, luaL_len(L, 1));
  if (i > last) return 0;
  lua_Unsigned count = (lua_Unsigned)last - (lua_Unsigned)i + 1u; /* 0 means 2^64 */
  /* The stack grows by reallocation: refuse before the allocator would have to. */
  if (count == 0 || count > (lua_Unsigned)INT_MAX ||
      (count > 1024 && !mbxL_heap_fits(L, (size_t)count * MBXL_STACK_SLOT_COST)) ||
      !lua_checkstack(L, (int)count))
    return luaL_error(L, "too many results to unpack");
  for (; i < last; i++)
    get(&m, 1, i);
  get(&m, 1, last);
  mbxV_meter_flush(&m);
  return (int)count;
}

/* ---- sort ------------------------------------------------------------------------------ */

/* An introsort written for this sandbox: quicksort with a median-of-three pivot, insertion
   sort for tiny ranges, and heapsort once the partitions degrade (so the worst case stays
   O(n log n) comparisons, each charged). Every index it touches lies in [lo, up] of the range
   being sorted, whatever the comparator answers; a comparator that says the pivot is less
   than itself, or runs a scan off its range, is reported as stock does. */

typedef struct sorter {
  mbxV_meter m;
  int has_comparator; /* else '<' (lua_compare, which may run __lt) */
} sorter;

/* a < b for the values at absolute stack indices a and b. */
static int less(sorter *s, int a, int b) {
  lua_State *L = s->m.L;
  if (!s->has_comparator) {
    /* Two strings are compared by l_strcmp, one strcoll per NUL-separated segment: up to
       about 8 ns per byte of the shorter one (32 MiB of NULs: 0.27 s), so the charge is by
       that length, and a long compare is followed by a look at the clock at once. */
    uint64_t cost = 1;
    if (lua_type(L, a) == LUA_TSTRING && lua_type(L, b) == LUA_TSTRING) {
      size_t la = lua_rawlen(L, a), lb = lua_rawlen(L, b);
      cost += (la < lb ? la : lb) / SORT_METER_BYTES;
    }
    mbxV_meter_add(&s->m, cost);
    return lua_compare(L, a, b, LUA_OPLT);
  }
  mbxV_meter_add(&s->m, 1);
  lua_pushvalue(L, 2);
  lua_pushvalue(L, a);
  lua_pushvalue(L, b);
  lua_call(L, 2, 1);
  int r = lua_toboolean(L, -1);
  lua_pop(L, 1);
  return r;
}

static int top(lua_State *L) {
  return lua_gettop(L);
}

/* Each shift writes the held value back at once, so the table is a permutation of its
   elements whenever the comparator runs (and so after a comparator error). */
static void insertion_sort(sorter *s, lua_Integer lo, lua_Integer up) {
  lua_State *L = s->m.L;
  for (lua_Integer i = lo + 1; i <= up; i++) {
    get(&s->m, 1, i);
    int v = top(L);
    for (lua_Integer j = i - 1; j >= lo; j--) {
      get(&s->m, 1, j);
      if (!less(s, v, top(L))) {
        lua_pop(L, 1);
        break;
      }
      set(&s->m, 1, j + 1); /* t[j + 1] = t[j] */
      lua_pushvalue(L, v);
      set(&s->m, 1, j);
    }
    lua_pop(L, 1);
  }
}

/* Restore the max-heap property below `root` in the heap t[base + 0 .. base + count - 1].
   The sifted value is written at each step, so the table stays a permutation. */
static void sift_down(sorter *s, lua_Integer base, lua_Integer root, lua_Integer count) {
  lua_State *L = s->m.L;
  get(&s->m, 1, base + root);
  int v = top(L);
  for (;;) {
    lua_Integer child = 2 * root + 1;
    if (child >= count) break;
    get(&s->m, 1, base + child);
    if (child + 1 < count) {
      get(&s->m, 1, base + child + 1);
      if (less(s, top(L) - 1, top(L))) {
        lua_remove(L, -2);
        child++;
      } else {
        lua_pop(L, 1);
      }
    }
    if (!less(s, v, top(L))) {
      lua_pop(L, 1);
      break;
    }
    set(&s->m, 1, base + root); /* the larger child moves up */
    lua_pushvalue(L, v);
    set(&s->m, 1, base + child);
    root = child;
  }
  lua_pop(L, 1);
}

static void heap_sort(sorter *s, lua_Integer lo, lua_Integer up) {
  lua_Integer count = up - lo + 1;
  for (lua_Integer start = count / 2 - 1; start >= 0; start--)
    sift_down(s, lo, start, count);
  for (lua_Integer end = count - 1; end > 0; end--) {
    get(&s->m, 1, lo);
    get(&s->m, 1, lo + end);
    set(&s->m, 1, lo);       /* t[lo] = old t[lo + end] */
    set(&s->m, 1, lo + end); /* t[lo + end] = old t[lo], the largest */
    sift_down(s, lo, 0, end);
  }
}

static int bad_order(lua_State *L) {
  return luaL_error(L, "invalid order function for sorting");
}

/* Swap the stack values at absolute indices a and b. */
static void swap_slots(lua_State *L, int a, int b) {
  lua_pushvalue(L, a);
  lua_copy(L, b, a);
  lua_replace(L, b);
}

/* Partition t[lo..up] (at least four elements) around a median-of-three pivot; returns the
   pivot's final index, in [lo + 1, up - 1]. */
static lua_Integer partition(sorter *s, lua_Integer lo, lua_Integer up) {
  lua_State *L = s->m.L;
  lua_Integer mid = lo + (up - lo) / 2;
  get(&s->m, 1, lo);
  get(&s->m, 1, mid);
  get(&s->m, 1, up);
  int x = top(L) - 2, y = top(L) - 1, z = top(L);
  if (less(s, y, x)) swap_slots(L, x, y);
  if (less(s, z, y)) {
    swap_slots(L, y, z);
    if (less(s, y, x)) swap_slots(L, x, y);
  }
  /* t[lo] <= pivot <= t[up] act as sentinels; the pivot waits at up - 1. */
  lua_pushvalue(L, x);
  set(&s->m, 1, lo);
  lua_pushvalue(L, z);
  set(&s->m, 1, up);
  get(&s->m, 1, up - 1);
  set(&s->m, 1, mid);
  lua_pushvalue(L, y);
  set(&s->m, 1, up - 1);
  lua_settop(L, y); /* the pivot stays on the stack */
  int pivot = y;
  lua_Integer i = lo, j = up - 1;
  for (;;) {
    for (;;) { /* up from the left to an element not below the pivot */
      get(&s->m, 1, ++i);
      if (!less(s, top(L), pivot)) break;
      if (i >= up - 1) bad_order(L);
      lua_pop(L, 1);
    }
    for (;;) { /* down from the right to an element not above the pivot */
      get(&s->m, 1, --j);
      if (!less(s, pivot, top(L))) break;
      if (j <= lo) bad_order(L);
      lua_pop(L, 1);
    }
    if (j < i) {
      lua_pop(L, 2);
      break;
    }
    set(&s->m, 1, i); /* t[i] = old t[j] */
    set(&s->m, 1, j); /* t[j] = old t[i] */
  }
  get(&s->m, 1, i); /* the pivot goes to i, and what was there to up - 1 */
  set(&s->m, 1, up - 1);
  set(&s->m, 1, i); /* pops the pivot */
  lua_settop(L, x - 1);
  return i;
}

static void sort_range(sorter *s, lua_Integer lo, lua_Integer up, int depth) {
  while (up - lo >= SORT_INSERTION_MAX) {
    if (depth-- == 0) {
      heap_sort(s, lo, up);
      return;
    }
    lua_Integer p = partition(s, lo, up);
    if (p - lo < up - p) { /* recurse into the smaller side: C depth O(log n) */
      sort_range(s, lo, p - 1, depth);
      lo = p + 1;
    } else {
      sort_range(s, p + 1, up, depth);
      up = p - 1;
    }
  }
  if (lo < up) insertion_sort(s, lo, up);
}

/* ---- sort: the plain-array fast path ---------------------------------------------------- */

/* A sort with no comparator of a table with no metatable whose elements t[1..n] are all
   integers, or all strings, is done on a C array of keys instead of through lua_geti /
   lua_seti / lua_compare per step: no guest code can run meanwhile (no comparator, no
   metamethod: integers and strings compare without one), so the table cannot change under
   the sort, and the outcome is the only one stock can give: equal integers, and equal
   strings, cannot be told apart, so any correct sort leaves the same array. Floats are
   left to the general path (-0.0 and 0.0 are equal but distinguishable, and NaN is no
   order). The keys live in a userdata on the guest heap (checked against the memory left
   first, else the general path runs), so a trip raised by a charge unwinds with nothing to
   free. Metering is the general path's: a step per element read or written, a step per
   comparison (strings: plus the shorter length / SORT_METER_BYTES, as `less`). */

typedef struct sort_key {
  const char *s; /* strings: the bytes, anchored by the table (and by `copy` below) */
  union {
    lua_Integer i; /* integers */
    size_t len;    /* strings */
  } v;
  lua_Integer from; /* strings: the element's index before the sort */
} sort_key;

typedef struct fast_sorter {
  mbxV_meter *m;
  int strings;
} fast_sorter;

/* Lua's order of two strings: strcoll of each NUL-terminated segment in turn, in the thread's
   locale, as lua_compare does (a string holds a NUL after its last byte). */
static int string_before(const sort_key *a, const sort_key *b) {
  const char *l = a->s, *r = b->s;
  size_t ll = a->v.len, lr = b->v.len;
  for (;;) {
    int c = strcoll(l, r);
    if (c != 0) return c < 0;
    size_t seg = strlen(l);  /* equal so far: both segments end here */
    if (seg == lr) return 0; /* r is exhausted: l is not shorter */
    if (seg == ll) return 1; /* l is exhausted and r goes on */
    seg++;
    l += seg;
    ll -= seg;
    r += seg;
    lr -= seg;
  }
}

static int key_before(fast_sorter *f, const sort_key *a, const sort_key *b) {
  if (!f->strings) {
    mbxV_meter_add(f->m, 1);
    return a->v.i < b->v.i;
  }
  size_t shorter = a->v.len < b->v.len ? a->v.len : b->v.len;
  mbxV_meter_add(f->m, 1 + shorter / SORT_METER_BYTES);
  return string_before(a, b);
}

static void key_swap(sort_key *a, sort_key *b) {
  sort_key t = *a;
  *a = *b;
  *b = t;
}

static void key_sift(fast_sorter *f, sort_key *k, size_t root, size_t count) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= count) return;
    if (child + 1 < count && key_before(f, &k[child], &k[child + 1])) child++;
    if (!key_before(f, &k[root], &k[child])) return;
    key_swap(&k[root], &k[child]);
    root = child;
  }
}

static void key_heap_sort(fast_sorter *f, sort_key *k, size_t count) {
  for (size_t start = count / 2; start-- > 0;)
    key_sift(f, k, start, count);
  for (size_t end = count - 1; end > 0; end--) {
    key_swap(&k[0], &k[end]);
    key_sift(f, k, 0, end);
  }
}

/* Introsort of k[0..count): median-of-three quicksort, insertion sort below 16 keys,
   heapsort past the depth limit, so the worst case is O(n log n) comparisons. The scans are
   bounded by the range whatever the comparisons answer. */
static void key_sort(fast_sorter *f, sort_key *k, size_t count, int depth) {
  while (count > 16) {
    if (depth-- == 0) {
      key_heap_sort(f, k, count);
      return;
    }
    size_t mid = count / 2, last = count - 1;
    if (key_before(f, &k[mid], &k[0])) key_swap(&k[mid], &k[0]);
    if (key_before(f, &k[last], &k[mid])) {
      key_swap(&k[last], &k[mid]);
      if (key_before(f, &k[mid], &k[0])) key_swap(&k[mid], &k[0]);
    }
    key_swap(&k[mid], &k[last - 1]); /* the pivot waits at last - 1; k[0] <= it <= k[last] */
    sort_key *pivot = &k[last - 1];
    size_t i = 0, j = last - 1;
    for (;;) {
      while (++i < last - 1 && key_before(f, &k[i], pivot)) {
      }
      while (--j > 0 && key_before(f, pivot, &k[j])) {
      }
      if (i >= j) break;
      key_swap(&k[i], &k[j]);
    }
    key_swap(&k[i], &k[last - 1]);
    /* k[0..i) <= k[i] <= k(i..count): the smaller side recursively (C depth O(log n)). */
    if (i < count - i - 1) {
      key_sort(f, k, i, depth);
      k += i + 1;
      count -= i + 1;
    } else {
      key_sort(f, k + i + 1, count - i - 1, depth);
      count = i;
    }
  }
  for (size_t i = 1; i < count; i++)
    for (size_t j = i; j > 0 && key_before(f, &k[j], &k[j - 1]); j--)
      key_swap(&k[j], &k[j - 1]);
}

/* Sorts t (argument 1) of n >= 2 elements on the fast path and returns 1, or returns 0 with
   the table untouched when the path does not apply (the reads it made are charged). */
static int sort_fast(lua_State *L, mbxV_meter *m, lua_Integer n) {
  if (lua_type(L, 1) != LUA_TTABLE || !lua_isnoneornil(L, 2)) return 0;
  if (lua_getmetatable(L, 1)) {
    lua_pop(L, 1);
    return 0;
  }
  size_t count = (size_t)n;
  size_t bytes = count * sizeof(sort_key);
  /* The keys, and for strings a copy of the elements (a table of count slots). */
  if (!mbxL_heap_fits(L, bytes + count * 2 * sizeof(sort_key))) return 0;
  lua_settop(L, 1);
  sort_key *k = lua_newuserdatauv(L, bytes, 0); /* index 2 */
  int strings = lua_rawgeti(L, 1, 1) == LUA_TSTRING;
  lua_pop(L, 1);
  if (strings) lua_createtable(L, (int)count, 0); /* index 3: the elements by old index */
  for (size_t i = 0; i < count; i++) {
    lua_Integer at = (lua_Integer)i + 1;
    int type = lua_rawgeti(L, 1, at);
    mbxV_meter_add(m, 1);
    if (strings) {
      if (type != LUA_TSTRING) {
        lua_settop(L, 1);
        return 0;
      }
      k[i].s = lua_tolstring(L, -1, &k[i].v.len);
      k[i].from = at;
      lua_rawseti(L, 3, at);
    } else {
      /* lua_isinteger, not lua_tointegerx: 3.0 converts, but is a float. */
      if (type != LUA_TNUMBER || !lua_isinteger(L, -1)) {
        lua_settop(L, 1);
        return 0;
      }
      k[i].v.i = lua_tointeger(L, -1);
      lua_pop(L, 1);
    }
  }
  fast_sorter f = {m, strings};
  int depth = 0;
  for (size_t c = count; c > 1; c >>= 1)
    depth += 2;
  key_sort(&f, k, count, depth);
  for (size_t i = 0; i < count; i++) {
    if (strings)
      lua_rawgeti(L, 3, k[i].from);
    else
      lua_pushinteger(L, k[i].v.i);
    lua_rawseti(L, 1, (lua_Integer)i + 1);
    mbxV_meter_add(m, 1);
  }
  lua_settop(L, 1);
  return 1;
}

static int t_sort(lua_State *L) {
  sorter s = {TABLE_METER(L), 0};
  lua_Integer n = length_of(L, 1, TAB_RW);
  if (n > 1) {
    luaL_argcheck(L, n < INT_MAX, 1, "array too big");
    if (!lua_isnoneornil(L, 2)) luaL_checktype(L, 2, LUA_TFUNCTION);
    if (sort_fast(L, &s.m, n)) {
      mbxV_meter_flush(&s.m);
      return 0;
    }
    lua_settop(L, 2);
    s.has_comparator = !lua_isnil(L, 2);
    int depth = 0;
    for (lua_Integer k = n; k > 1; k >>= 1)
      depth += 2;
    sort_range(&s, 1, n, depth);
    mbxV_meter_flush(&s.m);
  }
  return 0;
}

int mbxL_open_table(lua_State *L) {
  static const luaL_Reg metered[] = {{"insert", t_insert}, {"remove", t_remove}, {"move", t_move},
                                     {"concat", t_concat}, {"unpack", t_unpack}, {"sort", t_sort},
                                     {NULL, NULL}};
  luaL_requiref(L, LUA_TABLIBNAME, luaopen_table, 1);
  luaL_setfuncs(L, metered, 0);
  lua_pop(L, 1);
  return 0;
}
