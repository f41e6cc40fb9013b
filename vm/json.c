/* vm/json.c -- the Lua <-> JSON codec: guest values to JSON text and JSON text to guest values. */
#include "vm/json.h"

#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

#include "common/base64.h"
#include "vm/budget.h"
#include "vm/json_text.h"
#include "vm/names.h"

/* Work is charged in batches: mbxV_charge checks clocks and limits, too dear for every byte,
   but a batch of 256 units keeps the unmetered stretch short. */
#define METER_BATCH 256
/* Units per this many bytes of string scanned, copied or compared. */
#define METER_BYTES 64
/* Keys in an error path are cut at this many bytes, so a 1 MiB key cannot fill the message. */
#define PATH_KEY_MAX 40

/* The registry key of the per-state metatable that marks a decoded [] as an array. */
static const char array_marker_key = 0;

/* A light userdata NULL needs no allocation and no registry entry, compares equal across
   states and cannot be forged by a guest into anything else (guests cannot make light
   userdata at all). */
void mbxV_json_push_null(lua_State *L) {
  lua_pushlightuserdata(L, NULL);
}

int mbxV_json_is_null(lua_State *L, int idx) {
  return lua_islightuserdata(L, idx) && lua_touserdata(L, idx) == NULL;
}

/* ---- Encoding -------------------------------------------------------------------------- */

/* One step from a container to a value, kept so an error can name the whole path. */
typedef enum step_kind { STEP_INDEX, STEP_INTEGER_KEY, STEP_STRING_KEY } step_kind;
typedef struct path_step {
  step_kind kind;
  lua_Integer index; /* STEP_INDEX, STEP_INTEGER_KEY */
  const char *key;   /* STEP_STRING_KEY: kept alive by the table being walked */
  size_t key_len;
} path_step;

/* A key of an object being written: its text (what is sorted and written) and the slot in
   the scratch key table where the Lua key itself is kept (to fetch the value, and to keep
   the string alive whatever a finalizer does to the table meanwhile). */
typedef struct key_entry {
  const char *text;
  size_t len;
  lua_Integer slot;
} key_entry;

typedef struct encoder {
  lua_State *L;
  /* The output starts in a buffer on the C stack (most texts are small: no guest allocation
     but the final string), then lives in a userdata at stack slot out_slot and grows by
     replacement. Not a
     luaL_Buffer: that wants its box at the top of the stack at every call, which a recursive
     walk holding tables and keys on the stack cannot give it. Either way the bytes come
     from the guest allocator and are collected if an error unwinds us. */
  int out_slot;
  char *out;
  size_t out_len, out_cap;
  size_t max_len;   /* longest text allowed (SIZE_MAX: none); past it, the output limit trips */
  mbxV_meter meter; /* units of work, charged every METER_BATCH (vm/budget.h) */
  const char *root;
  int root_arg;          /* > 0: the root is "root(#root_arg)", an argument of a call */
  const char *too_large; /* non-NULL: past max_len raise "<too_large>: ..." instead of tripping */
  int result_forms;      /* a run's result: values JSON cannot hold take a reserved form */
  int nsteps;            /* length of the path to the current value */
  path_step steps[MBXV_JSON_MAX_DEPTH];  /* the path itself */
  const void *open[MBXV_JSON_MAX_DEPTH]; /* tables being written, for cycle detection */
} encoder;

/* Bytes of the first output buffer, on the C stack. */
#define ENCODE_STACK_BUFFER 256

static void out_reserve(encoder *e, size_t n) {
  if (n > e->max_len - e->out_len) {
    if (e->too_large)
      luaL_error(e->L, "%s: the arguments exceed %d bytes of JSON, the most a host call takes",
                 e->too_large, (int)e->max_len);
    /* A run's result is output (issue 9, C.3): past the limit it ends the run as stdout
       does, before the text can grow any further. */
    mbxV_trip_set(e->L, MBXV_TRIP_OUTPUT);
    luaL_error(e->L, "result too large");
  }
  if (e->out_cap - e->out_len >= n) return;
  size_t cap = e->out_cap;
  while (cap - e->out_len < n) {
    if (cap > SIZE_MAX / 2) luaL_error(e->L, "JSON text too large");
    cap *= 2;
  }
  char *grown = lua_newuserdatauv(e->L, cap, 0);
  memcpy(grown, e->out, e->out_len);
  lua_replace(e->L, e->out_slot); /* the old buffer (if not the C stack's) becomes garbage */
  e->out = grown;
  e->out_cap = cap;
}

/* The mbxV_sink_fn the text writers feed. */
static void out_put(void *sink, const char *p, size_t n) {
  encoder *e = sink;
  out_reserve(e, n);
  memcpy(e->out + e->out_len, p, n);
  e->out_len += n;
}

static void out_char(encoder *e, char c) {
  if (e->out_len == e->out_cap) out_reserve(e, 1);
  e->out[e->out_len++] = c;
}

/* A key a guest could write as t.name in Lua. */
static int is_identifier(const char *s, size_t n) {
  return n <= PATH_KEY_MAX && mbxV_is_identifier(s, n);
}

/* ["key"] with Lua escapes, shortened: the path is for a human, and ends up in a fixed-size
   error message, so it must stay short and printable. */
static void add_quoted_key(luaL_Buffer *b, const char *s, size_t n) {
  size_t shown = n;
  int utf8 = mbxV_utf8_valid(s, n);
  if (shown > PATH_KEY_MAX) {
    shown = PATH_KEY_MAX;
    /* Do not cut a UTF-8 sequence in half. */
    while (utf8 && shown > 0 && ((unsigned char)s[shown] & 0xC0) == 0x80)
      shown--;
  }
  luaL_addstring(b, "[\"");
  for (size_t i = 0; i < shown; i++) {
    unsigned char c = (unsigned char)s[i];
    if (c == '"' || c == '\\') {
      luaL_addchar(b, '\\');
      luaL_addchar(b, (char)c);
    } else if (c < 0x20 || c == 0x7F || (c >= 0x80 && !utf8)) {
      char esc[8];
      esc[0] = '\\';
      esc[1] = (char)('0' + c / 100);
      esc[2] = (char)('0' + c / 10 % 10);
      esc[3] = (char)('0' + c % 10);
      luaL_addlstring(b, esc, 4);
    } else {
      luaL_addchar(b, (char)c);
    }
  }
  if (shown < n) luaL_addstring(b, "...");
  luaL_addstring(b, "\"]");
}

/* Push the path of the value nsteps steps from the root, e.g. "value[3].name". */
static void push_path(encoder *e, int nsteps) {
  lua_State *L = e->L;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  luaL_addstring(&b, e->root);
  if (e->root_arg > 0) {
    lua_pushfstring(L, "(#%d)", e->root_arg);
    luaL_addvalue(&b);
  }
  for (int i = 0; i < nsteps; i++) {
    const path_step *step = &e->steps[i];
    if (step->kind == STEP_STRING_KEY) {
      if (is_identifier(step->key, step->key_len)) {
        luaL_addchar(&b, '.');
        luaL_addlstring(&b, step->key, step->key_len);
      } else {
        add_quoted_key(&b, step->key, step->key_len);
      }
    } else {
      lua_pushfstring(L, "[%I]", (LUAI_UACINT)step->index);
      luaL_addvalue(&b);
    }
  }
  luaL_pushresult(&b);
}

/* Raise "<path>: <what>", the path being the first nsteps steps from the root. Building the
   message on the stack is fine here: we are about to unwind it. */
static void encode_error(encoder *e, int nsteps, const char *what) {
  push_path(e, nsteps);
  lua_pushfstring(e->L, "%s: %s", lua_tostring(e->L, -1), what);
  lua_error(e->L);
}

/* The one-member objects a run's result uses for values JSON cannot hold (docs/result.md):
   each value is a short description, never an address. Reserved both ways: a guest table
   that would look like one cannot be a result, and a run's inputs cannot contain one. */
static const char *const reserved_forms[] = {"$function", "$thread", "$userdata", "$number",
                                             "$cycle"};
#define RESERVED_FORMS (sizeof reserved_forms / sizeof reserved_forms[0])

static void put_form(encoder *e, const char *name, const char *text, size_t len) {
  out_put(e, "{\"", 2);
  out_put(e, name, strlen(name));
  out_put(e, "\":", 2);
  mbxV_json_put_string(out_put, e, text, len);
  out_char(e, '}');
}

/* {"$function": "main.lua:3"} for a Lua function (its chunk and first line; "main.lua" for a
   main chunk), {"$function": "builtin"} for a C function. */
static void put_function(encoder *e, int idx) {
  lua_State *L = e->L;
  lua_Debug ar;
  lua_pushvalue(L, idx);
  lua_getinfo(L, ">S", &ar);
  if (ar.what[0] == 'C') {
    put_form(e, "$function", "builtin", 7);
    return;
  }
  char where[LUA_IDSIZE + 24];
  int n = ar.what[0] == 'm' ? snprintf(where, sizeof where, "%s", ar.short_src)
                            : snprintf(where, sizeof where, "%s:%d", ar.short_src, ar.linedefined);
  put_form(e, "$function", where, n > 0 && (size_t)n < sizeof where ? (size_t)n : strlen(where));
}

/* {"$thread": status}, the status coroutine.status would give (never "running": the result
   is encoded after the chunk returned). */
static void put_thread(encoder *e, int idx) {
  lua_State *co = lua_tothread(e->L, idx);
  lua_Debug ar;
  const char *status = "dead";
  if (lua_status(co) == LUA_YIELD) {
    status = "suspended";
  } else if (lua_status(co) == LUA_OK) {
    if (lua_getstack(co, 0, &ar))
      status = "normal";
    else if (lua_gettop(co) > 0)
      status = "suspended"; /* not started yet */
  }
  put_form(e, "$thread", status, strlen(status));
}

/* {"$userdata": name}: the metatable's __name read raw (e.g. "FILE*"), else "userdata". */
static void put_userdata(encoder *e, int idx) {
  lua_State *L = e->L;
  size_t len = 8;
  const char *name = "userdata";
  int kind = lua_type(L, idx) == LUA_TUSERDATA ? luaL_getmetafield(L, idx, "__name") : LUA_TNIL;
  if (kind == LUA_TSTRING) {
    const char *s = lua_tolstring(L, -1, &len);
    if (len <= 64 && mbxV_utf8_valid(s, len))
      name = s;
    else
      len = 8;
  }
  put_form(e, "$userdata", name, len);
  if (kind != LUA_TNIL) lua_pop(L, 1);
}

static void put_number_form(encoder *e, double x) {
  const char *text = x != x ? "nan" : x > 0 ? "inf" : "-inf";
  put_form(e, "$number", text, strlen(text));
}

static void encode_value(encoder *e, int idx);

/* What kind of table key this is: 1 string, 2 integer; otherwise raises. The key is at the
   top of the stack and is only inspected, never converted (lua_tolstring on a number key
   would change the key under lua_next). */
static int check_key(encoder *e, int depth_steps) {
  lua_State *L = e->L;
  switch (lua_type(L, -1)) {
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (!mbxV_utf8_valid(s, len)) {
      /* A key cannot take the {"$bytes":...} form: only strings can be object keys. */
      e->steps[depth_steps].kind = STEP_STRING_KEY;
      e->steps[depth_steps].key = s;
      e->steps[depth_steps].key_len = len;
      encode_error(e, depth_steps + 1, "cannot encode a table key that is not valid UTF-8 as JSON");
    }
    return 1;
  }
  case LUA_TNUMBER:
    if (lua_isinteger(L, -1)) return 2;
    encode_error(e, depth_steps, "cannot encode a table with a non-integer number key as JSON");
    break;
  default:
    encode_error(
        e, depth_steps,
        lua_pushfstring(L, "cannot encode a table with a %s key as JSON", luaL_typename(L, -1)));
  }
  return 0;
}

/* What check_key would say of the key on top, without raising: 1 string, 2 integer, 0 bad. */
static int key_kind(lua_State *L) {
  switch (lua_type(L, -1)) {
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    return mbxV_utf8_valid(s, len) ? 1 : 0;
  }
  case LUA_TNUMBER:
    return lua_isinteger(L, -1) ? 2 : 0;
  default:
    return 0;
  }
}

/* The bad key a table's error names: the first in a fixed order, not the first lua_next
   visits. Strings that are not UTF-8 come first (the least in byte order: the error shows
   the key), then non-integer numbers, then the other types by type tag (the error shows
   only the type, so which key of a type does not matter). */
enum { BAD_UTF8 = 1, BAD_FLOAT = 2, BAD_TYPE = 2 }; /* BAD_TYPE + a type tag (>= 1): >= 3 */
typedef struct bad_key {
  int rank;         /* 0 none, BAD_UTF8, BAD_FLOAT, or BAD_TYPE + lua_type */
  const char *text; /* BAD_UTF8: the key, anchored by the table */
  size_t len;
} bad_key;

static void note_bad_key(lua_State *L, bad_key *worst) {
  int type = lua_type(L, -1);
  int rank = type == LUA_TSTRING ? BAD_UTF8 : type == LUA_TNUMBER ? BAD_FLOAT : BAD_TYPE + type;
  if (worst->rank != 0 && rank > worst->rank) return;
  if (rank == BAD_UTF8) {
    size_t len;
    const char *s = lua_tolstring(L, -1, &len);
    if (worst->rank == BAD_UTF8) {
      size_t n = len < worst->len ? len : worst->len;
      int c = memcmp(s, worst->text, n);
      if (c > 0 || (c == 0 && len >= worst->len)) return;
    }
    worst->text = s;
    worst->len = len;
  }
  worst->rank = rank;
}

/* The error check_key gives for that key. */
static void raise_bad_key(encoder *e, const bad_key *worst) {
  if (worst->rank == BAD_UTF8) {
    e->steps[e->nsteps] =
        (path_step){.kind = STEP_STRING_KEY, .key = worst->text, .key_len = worst->len};
    encode_error(e, e->nsteps + 1, "cannot encode a table key that is not valid UTF-8 as JSON");
  }
  if (worst->rank == BAD_FLOAT)
    encode_error(e, e->nsteps, "cannot encode a table with a non-integer number key as JSON");
  encode_error(e, e->nsteps,
               lua_pushfstring(e->L, "cannot encode a table with a %s key as JSON",
                               lua_typename(e->L, worst->rank - BAD_TYPE)));
}

/* The explicit marker for "this table is an array", needed for an empty one. Read raw: the
   codec never runs guest code (a __index here would be a metamethod call). */
static int has_array_marker(lua_State *L, int t) {
  if (!lua_getmetatable(L, t)) return 0;
  lua_pushliteral(L, "__jsontype");
  lua_rawget(L, -2);
  size_t len;
  const char *s = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &len) : NULL;
  int marked = s != NULL && len == 5 && memcmp(s, "array", 5) == 0;
  lua_pop(L, 2);
  return marked;
}

static int key_less(const key_entry *a, const key_entry *b) {
  size_t n = a->len < b->len ? a->len : b->len;
  int c = memcmp(a->text, b->text, n);
  return c < 0 || (c == 0 && a->len < b->len);
}

/* Bottom-up merge sort, ours rather than qsort so the work is metered as it goes: sorting a
   million keys must count against the budget, and be stoppable by it. The charge per merge is
   each output key's 1 + len/METER_BYTES (a bound on the comparisons that placed it), which
   does not depend on the input order: that order comes from Lua's per-process string hash
   seed, and deterministic mode needs the same instruction count in every process. */
static void sort_keys(encoder *e, key_entry *keys, key_entry *scratch, size_t n) {
  key_entry *from = keys, *to = scratch;
  for (size_t width = 1; width < n; width *= 2) {
    for (size_t lo = 0; lo < n; lo += 2 * width) {
      size_t mid = lo + width < n ? lo + width : n;
      size_t hi = lo + 2 * width < n ? lo + 2 * width : n;
      size_t i = lo, j = mid, k = lo;
      while (i < mid && j < hi)
        to[k++] = key_less(&from[j], &from[i]) ? from[j++] : from[i++];
      while (i < mid)
        to[k++] = from[i++];
      while (j < hi)
        to[k++] = from[j++];
      uint64_t cost = 0;
      for (k = lo; k < hi; k++)
        cost += 1 + to[k].len / METER_BYTES;
      mbxV_meter_add(&e->meter, cost);
    }
    key_entry *swap = from;
    from = to;
    to = swap;
  }
  if (from != keys) memcpy(keys, from, n * sizeof *keys);
}

/* Write table t (absolute index) as an array of its values 1..n, read raw. */
static void encode_array(encoder *e, int t, lua_Integer n) {
  out_char(e, '[');
  for (lua_Integer i = 1; i <= n; i++) {
    if (i > 1) out_char(e, ',');
    lua_rawgeti(e->L, t, i);
    e->steps[e->nsteps] = (path_step){.kind = STEP_INDEX, .index = i};
    e->nsteps++;
    encode_value(e, lua_gettop(e->L));
    e->nsteps--;
    lua_pop(e->L, 1);
  }
  out_char(e, ']');
}

/* Write table t (absolute index) as an object of count keys, sorted. */
static void encode_object(encoder *e, int t, size_t count, size_t integer_keys) {
  lua_State *L = e->L;
  enum { DIGITS = 24 }; /* room for any lua_Integer in decimal */
  if (count > (SIZE_MAX / 4) / (2 * sizeof(key_entry) + DIGITS))
    luaL_error(L, "JSON object too large");
  /* Scratch memory from the guest heap (charged, and collected if we unwind): the entries,
     the merge sort's second array, and the decimal text of the integer keys. */
  key_entry *entries =
      lua_newuserdatauv(L, count * 2 * sizeof(key_entry) + integer_keys * DIGITS, 0);
  key_entry *sort_space = entries + count;
  char *digits = (char *)(entries + 2 * count);
  lua_createtable(L, (int)(count < INT_MAX ? count : INT_MAX), 0); /* slot -> Lua key */
  int keys = lua_gettop(L);

  /* Second walk, to collect. A __gc finalizer run by an allocation above could have changed
     the table since the first walk, so the counts are bounds, checked again. */
  size_t n = 0, ni = 0;
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int kind = check_key(e, e->nsteps);
    if (n == count || (kind == 2 && ni == integer_keys))
      encode_error(e, e->nsteps, "table changed while being encoded as JSON");
    key_entry *entry = &entries[n];
    if (kind == 1) {
      entry->text = lua_tolstring(L, -1, &entry->len);
    } else {
      char *text = digits + DIGITS * ni++;
      entry->text = text;
      entry->len =
          (size_t)snprintf(text, DIGITS, LUA_INTEGER_FMT, (LUAI_UACINT)lua_tointeger(L, -1));
    }
    entry->slot = (lua_Integer)++n;
    lua_pushvalue(L, -1);
    lua_rawseti(L, keys, entry->slot);
    mbxV_meter_add(&e->meter, 1);
  }
  sort_keys(e, entries, sort_space, n);

  out_char(e, '{');
  for (size_t i = 0; i < n; i++) {
    /* 1 and "1" would both be written as "1": a duplicate key whose value depends on the
       reader. Refuse rather than pick one silently. */
    if (i > 0 && entries[i].len == entries[i - 1].len &&
        memcmp(entries[i].text, entries[i - 1].text, entries[i].len) == 0)
      encode_error(e, e->nsteps,
                   lua_pushfstring(L, "cannot encode a table with both %s and \"%s\" as keys",
                                   entries[i].text, entries[i].text));
    if (i > 0) out_char(e, ',');
    mbxV_json_put_string(out_put, e, entries[i].text, entries[i].len);
    out_char(e, ':');
    lua_rawgeti(L, keys, entries[i].slot);
    path_step *step = &e->steps[e->nsteps];
    if (lua_type(L, -1) == LUA_TSTRING) {
      *step =
          (path_step){.kind = STEP_STRING_KEY, .key = entries[i].text, .key_len = entries[i].len};
    } else {
      *step = (path_step){.kind = STEP_INTEGER_KEY, .index = lua_tointeger(L, -1)};
    }
    lua_rawget(L, t);
    e->nsteps++;
    encode_value(e, lua_gettop(L));
    e->nsteps--;
    lua_pop(L, 1);
    mbxV_meter_add(&e->meter, 1 + entries[i].len / METER_BYTES);
  }
  out_char(e, '}');
  lua_pop(L, 2); /* keys, entries */
}

static void encode_table(encoder *e, int t) {
  lua_State *L = e->L;
  int depth = e->nsteps + 1; /* the root table is at depth 1 */
  char what[48];
  if (depth > MBXV_JSON_MAX_DEPTH) {
    snprintf(what, sizeof what, "nesting deeper than %d", MBXV_JSON_MAX_DEPTH);
    encode_error(e, e->nsteps, what);
  }
  const void *self = lua_topointer(L, t);
  for (int i = 0; i < depth - 1; i++) {
    if (e->open[i] != self) continue;
    if (!e->result_forms)
      encode_error(e, e->nsteps, "cannot encode a cycle (a table that contains itself) as JSON");
    /* {"$cycle": "value.sub"}: the path of the enclosing table this one is. */
    push_path(e, i);
    size_t len;
    const char *path = lua_tolstring(L, -1, &len);
    mbxV_meter_add(&e->meter, 1 + len / METER_BYTES);
    put_form(e, "$cycle", path, len);
    lua_pop(L, 1);
    return;
  }
  e->open[depth - 1] = self;
  /* Per level: the table's scratch and key table, then a key and a value (lua_next), plus
     whatever the error path pushes. */
  if (!lua_checkstack(L, 8)) luaL_error(L, "stack overflow while encoding JSON");

  /* First walk: validate the keys and decide array or object. Distinct integer keys whose
     minimum is >= 1 and maximum equals their count are exactly 1..n. */
  size_t count = 0, integer_keys = 0;
  lua_Integer max_key = 0;
  int all_positive_integers = 1;
  bad_key worst = {0, NULL, 0};
  lua_pushnil(L);
  while (lua_next(L, t)) {
    lua_pop(L, 1);
    int kind = key_kind(L);
    if (kind == 0) {
      note_bad_key(L, &worst);
      all_positive_integers = 0;
    } else if (kind == 2) {
      lua_Integer k = lua_tointeger(L, -1);
      integer_keys++;
      if (k < 1) all_positive_integers = 0;
      if (k > max_key) max_key = k;
    } else {
      all_positive_integers = 0;
    }
    count++;
    mbxV_meter_add(&e->meter, 1);
  }
  /* The walk ran to the end and was charged per key whatever it met, so neither the error
     nor the instruction count depends on the order lua_next took (Lua's string hash seed
     and addresses, different in every process: issue 9, E.5). check_key raises the error. */
  if (worst.rank != 0) raise_bad_key(e, &worst);
  int sequence = count > 0 && all_positive_integers && (uint64_t)max_key == count;
  /* {"$bytes": "<base64>"} is how a string that is not UTF-8 is written: a table with that
     one key would be read back as a byte string (issue 9, E.4), so it is refused. */
  if (count == 1 && integer_keys == 0) {
    lua_pushliteral(L, "$bytes");
    int reserved = lua_rawget(L, t) != LUA_TNIL;
    lua_pop(L, 1);
    if (reserved)
      encode_error(e, e->nsteps,
                   "cannot encode a table whose only key is \"$bytes\" as JSON (that form is "
                   "reserved for byte strings; add another key or rename it)");
    for (size_t i = 0; e->result_forms && i < RESERVED_FORMS; i++) {
      lua_pushstring(L, reserved_forms[i]);
      reserved = lua_rawget(L, t) != LUA_TNIL;
      lua_pop(L, 1);
      if (reserved)
        encode_error(e, e->nsteps,
                     lua_pushfstring(L,
                                     "cannot encode a table whose only key is \"%s\" as a "
                                     "result (that form is reserved for values JSON cannot "
                                     "hold; add another key or rename it)",
                                     reserved_forms[i]));
    }
  }
  int marked = has_array_marker(L, t);
  if (marked && count > 0 && !sequence)
    encode_error(e, e->nsteps,
                 "cannot encode a table marked as a JSON array whose keys are not 1..n");
  if (sequence || (marked && count == 0)) {
    encode_array(e, t, (lua_Integer)count);
  } else if (count == 0) {
    out_put(e, "{}", 2);
  } else {
    encode_object(e, t, count, integer_keys);
  }
}

static void encode_value(encoder *e, int idx) {
  lua_State *L = e->L;
  mbxV_meter_add(&e->meter, 1);
  switch (lua_type(L, idx)) {
  case LUA_TNIL:
    out_put(e, "null", 4);
    return;
  case LUA_TBOOLEAN:
    if (lua_toboolean(L, idx)) {
      out_put(e, "true", 4);
    } else {
      out_put(e, "false", 5);
    }
    return;
  case LUA_TNUMBER:
    if (lua_isinteger(L, idx)) {
      mbxV_json_put_integer(out_put, e, (int64_t)lua_tointeger(L, idx));
    } else if (!mbxV_json_put_number(out_put, e, (double)lua_tonumber(L, idx))) {
      if (!e->result_forms) encode_error(e, e->nsteps, "cannot encode NaN or infinity as JSON");
      put_number_form(e, (double)lua_tonumber(L, idx));
    }
    return;
  case LUA_TSTRING: {
    size_t len;
    const char *s = lua_tolstring(L, idx, &len);
    mbxV_meter_add(&e->meter, len / METER_BYTES);
    mbxV_json_put_string(out_put, e, s, len);
    return;
  }
  case LUA_TTABLE:
    encode_table(e, idx);
    return;
  case LUA_TLIGHTUSERDATA:
    if (mbxV_json_is_null(L, idx)) {
      out_put(e, "null", 4);
      return;
    }
    break;
  default:
    break;
  }
  if (e->result_forms) {
    switch (lua_type(L, idx)) {
    case LUA_TFUNCTION:
      put_function(e, idx);
      return;
    case LUA_TTHREAD:
      put_thread(e, idx);
      return;
    default:
      put_userdata(e, idx);
      return;
    }
  }
  encode_error(e, e->nsteps,
               lua_pushfstring(L, "cannot encode a %s as JSON", luaL_typename(L, idx)));
}

/* The stack effect is +1: the buffer's slot is reused for the result, so an error at any
   point leaves only garbage the collector owns. */
static void encode_text(lua_State *L, int idx, const char *root_path, size_t max_len,
                        int result_forms);

void mbxV_json_encode(lua_State *L, int idx, const char *root_path) {
  encode_text(L, idx, root_path, SIZE_MAX, 0);
}

/* The arguments as one array into e, which starts in buf (cap bytes, the caller's) and
   grows into a userdata in the slot this pushes. */
static void encode_args_into(encoder *e, lua_State *L, int first, int n, const char *fn_name,
                             size_t max_len, char *buf, size_t cap) {
  first = lua_absindex(L, first);
  e->L = L;
  e->max_len = max_len;
  e->root = fn_name;
  e->root_arg = 0;
  e->too_large = fn_name;
  e->result_forms = 0;
  e->nsteps = 0;
  e->meter = mbxV_meter_init(L, METER_BATCH, 1);
  e->out_cap = cap;
  e->out_len = 0;
  luaL_checkstack(L, 8, "encoding JSON");
  e->out = buf;
  lua_pushnil(L); /* the slot a grown buffer takes */
  e->out_slot = lua_gettop(L);
  out_char(e, '[');
  for (int i = 0; i < n; i++) {
    if (i > 0) out_char(e, ',');
    e->root_arg = i + 1;
    encode_value(e, first + i);
  }
  out_char(e, ']');
  mbxV_meter_flush(&e->meter);
}

void mbxV_json_encode_args(lua_State *L, int first, int n, const char *fn_name, size_t max_len) {
  encoder e;
  char first_buffer[ENCODE_STACK_BUFFER];
  encode_args_into(&e, L, first, n, fn_name, max_len, first_buffer, sizeof first_buffer);
  lua_pushlstring(L, e.out, e.out_len);
  lua_replace(L, e.out_slot);
}

const char *mbxV_json_encode_args_text(lua_State *L, int first, int n, const char *fn_name,
                                       size_t max_len, char *buf, size_t cap, size_t *len) {
  encoder e;
  encode_args_into(&e, L, first, n, fn_name, max_len, buf, cap);
  /* NUL-terminated, as a Lua string would be (the host's documented convenience); the NUL is
     not part of the text, so it does not count against max_len. */
  e.max_len++;
  out_reserve(&e, 1);
  e.out[e.out_len] = '\0';
  *len = e.out_len;
  return e.out;
}

static void encode_text(lua_State *L, int idx, const char *root_path, size_t max_len,
                        int result_forms) {
  encoder e;
  idx = lua_absindex(L, idx);
  e.L = L;
  e.max_len = max_len;
  e.root = root_path != NULL ? root_path : "value";
  e.root_arg = 0;
  e.too_large = NULL;
  e.result_forms = result_forms;
  e.nsteps = 0;
  e.meter = mbxV_meter_init(L, METER_BATCH, 1);
  char first_buffer[ENCODE_STACK_BUFFER];
  e.out_cap = sizeof first_buffer;
  e.out_len = 0;
  luaL_checkstack(L, 8, "encoding JSON");
  e.out = first_buffer;
  lua_pushnil(L); /* the slot a grown buffer takes */
  e.out_slot = lua_gettop(L);
  encode_value(&e, idx);
  /* Pay the remainder of the last batch, so many small encodes cannot each run free. */
  mbxV_meter_flush(&e.meter);
  lua_pushlstring(L, e.out, e.out_len);
  lua_replace(L, e.out_slot);
}

void mbxV_json_encode_result(lua_State *L, int idx, const char *root_path, size_t max_len) {
  encode_text(L, idx, root_path, max_len, 1);
}

/* ---- Decoding -------------------------------------------------------------------------- */

/* A recursive-descent parser over (text, len): the text is not NUL-terminated and may hold
   NULs, so every read goes through pos < len. */
typedef struct decoder {
  lua_State *L;
  const unsigned char *text;
  size_t len;
  size_t pos;
  size_t metered_pos; /* bytes up to here are paid for */
  int depth;
  int refuse_result_forms; /* a run's inputs: the result's reserved forms are refused */
  mbxV_meter meter;
} decoder;

/* Raise "<what> at line L, column C" for the byte at pos. Lines and columns are only
   counted here, on the error path, so parsing does not pay for them. */
static void decode_error_at(decoder *d, size_t pos, const char *what) {
  lua_Integer line = 1, column = 1;
  for (size_t i = 0; i < pos && i < d->len; i++) {
    if (d->text[i] == '\n') {
      line++;
      column = 1;
    } else {
      column++;
    }
  }
  lua_pushfstring(d->L, "%s at line %I, column %I", what, (LUAI_UACINT)line, (LUAI_UACINT)column);
  lua_error(d->L);
}

static void decode_error(decoder *d, const char *what) {
  decode_error_at(d, d->pos, what);
}

/* Name what sits at pos, for "unexpected ..." messages. */
static void decode_unexpected(decoder *d) {
  if (d->pos >= d->len) decode_error(d, "unexpected end of input");
  unsigned char c = d->text[d->pos];
  if (c == 0) decode_error(d, "unexpected NUL byte");
  if (c >= 0x20 && c < 0x7F)
    decode_error(d, lua_pushfstring(d->L, "unexpected character '%c'", (int)c));
  char what[40];
  snprintf(what, sizeof what, "unexpected byte 0x%02X", (unsigned)c);
  decode_error(d, what);
}

/* Charge for one value and for the bytes read since the last charge. */
static void decode_meter(decoder *d) {
  uint64_t units = 1 + (d->pos - d->metered_pos) / METER_BYTES;
  d->metered_pos += (d->pos - d->metered_pos) / METER_BYTES * METER_BYTES;
  mbxV_meter_add(&d->meter, units);
}

static void skip_space(decoder *d) {
  while (d->pos < d->len) {
    unsigned char c = d->text[d->pos];
    if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
    d->pos++;
  }
}

static int peek(const decoder *d) {
  return d->pos < d->len ? d->text[d->pos] : -1;
}

static void decode_value(decoder *d);

/* true, false and null are case-sensitive and complete words: "nul" or "True" are errors,
   and "nullx" fails afterwards as trailing data. */
static void decode_literal(decoder *d, const char *word) {
  size_t n = strlen(word);
  if (d->len - d->pos < n || memcmp(d->text + d->pos, word, n) != 0)
    decode_error(d, "invalid literal (expected true, false or null)");
  d->pos += n;
}

static int is_digit(int c) {
  return c >= '0' && c <= '9';
}

/* RFC 8259 s6 exactly: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?. No '+', no leading
   zeros, no hex, no NaN/Infinity: whatever we accept we must also be able to write back, and
   other parsers must read the same number from the same text. */
static void decode_number(decoder *d) {
  lua_State *L = d->L;
  size_t start = d->pos;
  int negative = 0, integral = 1;
  if (peek(d) == '-') {
    negative = 1;
    d->pos++;
  }
  if (peek(d) == '0') {
    d->pos++;
    if (is_digit(peek(d))) decode_error(d, "invalid number (leading zero)");
  } else if (is_digit(peek(d))) {
    while (is_digit(peek(d)))
      d->pos++;
  } else {
    decode_error(d, "invalid number (expected a digit)");
  }
  if (peek(d) == '.') {
    integral = 0;
    d->pos++;
    if (!is_digit(peek(d))) decode_error(d, "invalid number (expected a digit after '.')");
    while (is_digit(peek(d)))
      d->pos++;
  }
  if (peek(d) == 'e' || peek(d) == 'E') {
    integral = 0;
    d->pos++;
    if (peek(d) == '+' || peek(d) == '-') d->pos++;
    if (!is_digit(peek(d))) decode_error(d, "invalid number (expected a digit in the exponent)");
    while (is_digit(peek(d)))
      d->pos++;
  }
  if (integral) {
    /* Accumulate negatively: the magnitude of math.mininteger does not fit positive. */
    lua_Integer v = 0;
    int fits = 1;
    for (size_t i = start + (size_t)negative; i < d->pos; i++) {
      int digit = d->text[i] - '0';
      if (v < (LUA_MININTEGER + digit) / 10) {
        fits = 0;
        break;
      }
      v = v * 10 - digit;
    }
    if (fits && !negative && v == LUA_MININTEGER) fits = 0;
    if (fits) {
      lua_pushinteger(L, negative ? v : -v);
      return;
    }
  }
  /* strtod needs a terminated string; the text is not one (it may even hold NULs). */
  size_t n = d->pos - start;
  char local[64];
  const char *copy;
  if (n < sizeof local) {
    memcpy(local, d->text + start, n);
    local[n] = '\0';
    copy = local;
  } else {
    copy = lua_pushlstring(L, (const char *)d->text + start, n);
  }
  double v = strtod(copy, NULL);
  if (copy != local) lua_pop(L, 1);
  /* Refuse rather than make an infinity, which could not be encoded back. */
  if (!isfinite(v)) decode_error_at(d, start, "number out of range");
  lua_pushnumber(L, (lua_Number)v);
}

static int hex_value(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* The four hex digits of a \u escape; pos is at the 'u'. */
static unsigned read_hex4(decoder *d) {
  unsigned v = 0;
  if (d->len - d->pos < 5) decode_error(d, "invalid \\u escape (expected 4 hex digits)");
  for (size_t i = 1; i <= 4; i++) {
    int h = hex_value(d->text[d->pos + i]);
    if (h < 0) decode_error(d, "invalid \\u escape (expected 4 hex digits)");
    v = v << 4 | (unsigned)h;
  }
  d->pos += 5;
  return v;
}

static void add_utf8(luaL_Buffer *b, unsigned cp) {
  char s[4];
  size_t n;
  if (cp < 0x80) {
    s[0] = (char)cp;
    n = 1;
  } else if (cp < 0x800) {
    s[0] = (char)(0xC0 | cp >> 6);
    s[1] = (char)(0x80 | (cp & 0x3F));
    n = 2;
  } else if (cp < 0x10000) {
    s[0] = (char)(0xE0 | cp >> 12);
    s[1] = (char)(0x80 | (cp >> 6 & 0x3F));
    s[2] = (char)(0x80 | (cp & 0x3F));
    n = 3;
  } else {
    s[0] = (char)(0xF0 | cp >> 18);
    s[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    s[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    s[3] = (char)(0x80 | (cp & 0x3F));
    n = 4;
  }
  luaL_addlstring(b, s, n);
}

/* One escape (pos at the backslash) appended to b. */
static void decode_escape(decoder *d, luaL_Buffer *b) {
  size_t at = d->pos;
  d->pos++;
  int c = peek(d);
  const char *plain = NULL;
  switch (c) {
  case '"':
    plain = "\"";
    break;
  case '\\':
    plain = "\\";
    break;
  case '/':
    plain = "/";
    break;
  case 'b':
    plain = "\b";
    break;
  case 'f':
    plain = "\f";
    break;
  case 'n':
    plain = "\n";
    break;
  case 'r':
    plain = "\r";
    break;
  case 't':
    plain = "\t";
    break;
  case 'u':
    break;
  default:
    decode_error_at(d, at, "invalid escape in string");
  }
  if (plain != NULL) {
    luaL_addchar(b, plain[0]);
    d->pos++;
    return;
  }
  unsigned cp = read_hex4(d);
  if (cp >= 0xDC00 && cp <= 0xDFFF) decode_error_at(d, at, "lone UTF-16 surrogate in \\u escape");
  if (cp >= 0xD800 && cp <= 0xDBFF) {
    /* A high surrogate must be followed at once by a low one: together they are one code
       point above U+FFFF. Alone it has no UTF-8 form (RFC 3629 forbids encoding it). */
    if (d->len - d->pos < 2 || d->text[d->pos] != '\\' || d->text[d->pos + 1] != 'u')
      decode_error_at(d, at, "lone UTF-16 surrogate in \\u escape");
    d->pos++;
    unsigned low = read_hex4(d);
    if (low < 0xDC00 || low > 0xDFFF) decode_error_at(d, at, "lone UTF-16 surrogate in \\u escape");
    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
  }
  add_utf8(b, cp);
}

/* Decode the string whose opening quote is at pos, and push it. */
static void decode_string(decoder *d) {
  lua_State *L = d->L;
  size_t start = ++d->pos;
  luaL_Buffer b;
  int buffered = 0; /* strings without escapes are pushed straight from the text */
  size_t run = start;
  for (;;) {
    if (d->pos >= d->len) decode_error(d, "unterminated string");
    unsigned char c = d->text[d->pos];
    if (c == '"') break;
    if (c == '\\') {
      if (!buffered) {
        luaL_buffinit(L, &b);
        buffered = 1;
      }
      luaL_addlstring(&b, (const char *)d->text + run, d->pos - run);
      decode_escape(d, &b);
      run = d->pos;
    } else if (c < 0x20) {
      decode_error(d, "control character in string (must be escaped)");
    } else if (c < 0x80) {
      d->pos++;
    } else {
      /* JSON text is UTF-8 (RFC 8259 s8.1): bytes that are not would come out as a string
         no JSON writer produced, so refuse them here. The lead byte gives the length. */
      size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
      if (d->len - d->pos < need || !mbxV_utf8_valid((const char *)d->text + d->pos, need))
        decode_error(d, "invalid UTF-8 in string");
      d->pos += need;
    }
  }
  if (buffered) {
    luaL_addlstring(&b, (const char *)d->text + run, d->pos - run);
    luaL_pushresult(&b);
  } else {
    lua_pushlstring(L, (const char *)d->text + start, d->pos - start);
  }
  d->pos++; /* the closing quote */
}

/* Turn the one-member object {"$bytes": "<base64>"} at the top of the stack into the byte
   string it stands for (the encoder's form for strings that are not UTF-8). */
static void decode_bytes_object(decoder *d, size_t value_pos) {
  lua_State *L = d->L;
  lua_pushliteral(L, "$bytes");
  lua_rawget(L, -2);
  /* The one-member {"$bytes": ...} form is reserved both ways (the encoder refuses a table
     that would take it), so the host can rely on it: it is a byte string or an error. */
  if (lua_type(L, -1) != LUA_TSTRING)
    decode_error_at(d, value_pos,
                    "{\"$bytes\": ...} is reserved for byte strings: its value "
                    "must be a base64 string");
  size_t n;
  const char *s = lua_tolstring(L, -1, &n);
  luaL_Buffer b;
  unsigned char *out = (unsigned char *)luaL_buffinitsize(L, &b, n / 4 * 3 + 1);
  size_t written = mbxU_base64_decode(s, n, out);
  if (written == (size_t)-1) decode_error_at(d, value_pos, "invalid base64 in {\"$bytes\": ...}");
  luaL_pushresultsize(&b, written);
  lua_replace(L, -3); /* the string takes the table's place */
  lua_pop(L, 1);
}

static void enter(decoder *d) {
  if (++d->depth > MBXV_JSON_MAX_DEPTH) {
    char what[48];
    snprintf(what, sizeof what, "nesting deeper than %d", MBXV_JSON_MAX_DEPTH);
    decode_error(d, what);
  }
  /* The container, a key and a value, plus room for a string buffer's box. */
  if (!lua_checkstack(d->L, 6)) decode_error(d, "stack overflow");
}

/* The marker is made once per state and kept in the registry, so every decoded [] shares it
   (no allocation per empty array). It is shared and set from C, so guests must never reach
   it: a guest that could add __gc, __mode or __concat to it would arm them on every decoded
   array, past the setmetatable policy (THREATS P0 item 4). getmetatable returns a decoy
   {__jsontype = "array"} instead; setmetatable treats the marker as replaceable. */
static void push_array_marker(lua_State *L) {
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &array_marker_key) == LUA_TTABLE) return;
  lua_pop(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushliteral(L, "__jsontype");
  lua_pushliteral(L, "array");
  lua_rawset(L, -3);
  lua_pushliteral(L, "__metatable");
  lua_createtable(L, 0, 1);
  lua_pushliteral(L, "__jsontype");
  lua_pushliteral(L, "array");
  lua_rawset(L, -3);
  lua_rawset(L, -3);
  lua_pushvalue(L, -1);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &array_marker_key);
}

int mbxV_json_is_array_marker(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &array_marker_key);
  int is = lua_rawequal(L, -1, idx);
  lua_pop(L, 1);
  return is;
}

void mbxV_json_set_array_marker(lua_State *L, int idx) {
  idx = lua_absindex(L, idx);
  push_array_marker(L);
  lua_setmetatable(L, idx);
}

static void decode_array(decoder *d) {
  lua_State *L = d->L;
  enter(d);
  d->pos++;
  lua_newtable(L);
  skip_space(d);
  if (peek(d) == ']') {
    /* An empty table is {} by default; the marker keeps [] an array on the way back. */
    push_array_marker(L);
    lua_setmetatable(L, -2);
    d->pos++;
    d->depth--;
    return;
  }
  for (lua_Integer i = 1;; i++) {
    decode_value(d);
    lua_rawseti(L, -2, i);
    skip_space(d);
    int c = peek(d);
    if (c == ']') break;
    if (c != ',') decode_error(d, "expected ',' or ']' after an array element");
    d->pos++;
    skip_space(d);
  }
  d->pos++;
  d->depth--;
}

static void decode_object(decoder *d) {
  lua_State *L = d->L;
  enter(d);
  d->pos++;
  lua_newtable(L);
  skip_space(d);
  if (peek(d) == '}') {
    d->pos++;
    d->depth--;
    return;
  }
  size_t members = 0, bytes_value_pos = 0;
  int first_is_bytes = 0;
  const char *first_form = NULL;
  for (;;) {
    if (peek(d) != '"') decode_error(d, "expected a string key in an object");
    decode_string(d);
    if (members == 0) {
      size_t n;
      const char *key = lua_tolstring(L, -1, &n);
      first_is_bytes = n == 6 && memcmp(key, "$bytes", 6) == 0;
      for (size_t i = 0; d->refuse_result_forms && i < RESERVED_FORMS; i++)
        if (strlen(reserved_forms[i]) == n && memcmp(key, reserved_forms[i], n) == 0)
          first_form = reserved_forms[i];
    }
    skip_space(d);
    if (peek(d) != ':') decode_error(d, "expected ':' after an object key");
    d->pos++;
    skip_space(d);
    if (members == 0) bytes_value_pos = d->pos;
    decode_value(d);
    lua_rawset(L, -3); /* a repeated key overwrites: the last one wins */
    members++;
    skip_space(d);
    int c = peek(d);
    if (c == '}') break;
    if (c != ',') decode_error(d, "expected ',' or '}' after an object member");
    d->pos++;
    skip_space(d);
  }
  d->pos++;
  d->depth--;
  if (members == 1 && first_is_bytes) decode_bytes_object(d, bytes_value_pos);
  if (members == 1 && first_form != NULL) {
    char what[160];
    snprintf(what, sizeof what,
             "{\"%s\": ...} is a result's form for a value JSON cannot hold; an input "
             "cannot contain it",
             first_form);
    decode_error_at(d, bytes_value_pos, what);
  }
}

/* The first byte decides the kind of value (JSON is LL(1)). */
static void decode_value(decoder *d) {
  decode_meter(d);
  switch (peek(d)) {
  case '{':
    decode_object(d);
    break;
  case '[':
    decode_array(d);
    break;
  case '"':
    decode_string(d);
    break;
  case 't':
    decode_literal(d, "true");
    lua_pushboolean(d->L, 1);
    break;
  case 'f':
    decode_literal(d, "false");
    lua_pushboolean(d->L, 0);
    break;
  case 'n':
    decode_literal(d, "null");
    mbxV_json_push_null(d->L);
    break;
  default:
    if (peek(d) == '-' || is_digit(peek(d))) {
      decode_number(d);
    } else {
      decode_unexpected(d);
    }
  }
}

static void decode_text(lua_State *L, const char *text, size_t len, int refuse_result_forms) {
  decoder d = {.L = L,
               .text = (const unsigned char *)text,
               .len = len,
               .refuse_result_forms = refuse_result_forms,
               .meter = mbxV_meter_init(L, METER_BATCH, 1)};
  luaL_checkstack(L, 8, "decoding JSON");
  /* RFC 8259 s8.1: a BOM must not be added, and a parser may refuse it. Refusing keeps one
     spelling for one document. */
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0)
    decode_error(&d, "UTF-8 byte order mark is not allowed");
  skip_space(&d);
  decode_value(&d);
  skip_space(&d);
  if (d.pos < d.len) {
    if (d.text[d.pos] == 0) decode_error(&d, "unexpected NUL byte after the JSON value");
    decode_error(&d, "unexpected data after the JSON value");
  }
  mbxV_meter_add(&d.meter, (d.pos - d.metered_pos) / METER_BYTES);
  mbxV_meter_flush(&d.meter);
}

void mbxV_json_decode(lua_State *L, const char *text, size_t len) {
  decode_text(L, text, len, 0);
}

void mbxV_json_decode_input(lua_State *L, const char *text, size_t len) {
  decode_text(L, text, len, 1);
}
