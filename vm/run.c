/* vm/run.c -- one run: bind inputs, load text, resume the chunk's thread, collect the outcome. */
#include "vm/run.h"
#include "common/bytes.h"

#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <xxhash.h>

#include "vm/bytecode_cache.h"
#include "vm/compat.h"
#include "vm/cstack.h"
#include "vm/first_run.h"
#include "vm/json.h"
#include "vm/json_text.h"
#include "vm/names.h"

const char mbxV_key_pending = 0;

/* What the protected steps of a run exchange with mbxV_run. */
typedef struct run_step {
  const char *code;
  size_t code_len;
  const char *chunk_name;
  const char *inputs;
  size_t inputs_len;
  mbxV_bcache *cache; /* the runtime's bytecode cache, or NULL */
  int hit;            /* the load was a bytecode cache hit */
  int nargs;          /* script arguments passed to the chunk as `...` (inputs key "...") */
  enum { STEP_INPUTS, STEP_LOAD, STEP_READY } reached;
  char *bad_input;    /* malloc'd: why the inputs were refused */
  char *syntax_error; /* malloc'd: the parser's message */
  size_t syntax_len;
  lua_State *co; /* the run thread */
  int nres;      /* values the chunk returned */
  char *value;   /* malloc'd JSON of those values */
  size_t value_len;
  mbxV_error_info *describe_into;
  const char *describe_override;
  char *step_error; /* malloc'd: the message of the last failed protected step */
  size_t step_error_len;
} run_step;

static int is_identifier(const char *s, size_t n) {
  return n <= 200 && mbxV_is_identifier(s, n);
}

static char *dup_printf(const char *fmt, const char *a) {
  size_t n = strlen(fmt) + strlen(a) + 1;
  char *p = malloc(n);
  if (p) snprintf(p, n, fmt, a);
  return p;
}

/*
** The inputs key "..." (never a Lua identifier, so no input's name) carries the script
** arguments as `lua` gives them: an array of strings, the script's name first. It becomes the
** global `arg` with stock's layout (arg[0] the script, arg[1..n] the arguments; no negative
** indices: nothing of the host's command line reaches the guest) and the main chunk's `...`.
** Pushes the arg table (nil without the key, st->nargs -1) after removing the key from the
** inputs at idx; 0 with st->bad_input when the value is not such an array.
*/
static int script_args(lua_State *L, run_step *st, int inputs) {
  st->nargs = -1;
  if (lua_getfield(L, inputs, "...") == LUA_TNIL) return 1;
  int given = lua_gettop(L);
  lua_pushliteral(L, "...");
  lua_pushnil(L);
  lua_rawset(L, inputs);
  lua_Integer n = lua_type(L, given) == LUA_TTABLE ? (lua_Integer)lua_rawlen(L, given) : 0;
  if (n < 1 || n > 100000) {
    st->bad_input = dup_printf("inputs: '...' (the script arguments) must be an array of "
                               "strings, the script's name first%s",
                               "");
    return 0;
  }
  lua_createtable(L, (int)n - 1, 1);
  for (lua_Integer i = 1; i <= n; i++) {
    if (lua_rawgeti(L, given, i) != LUA_TSTRING) {
      st->bad_input = dup_printf("inputs: '...' (the script arguments) must hold only "
                                 "strings%s",
                                 "");
      return 0;
    }
    lua_rawseti(L, -2, i - 1);
  }
  lua_remove(L, given);
  st->nargs = (int)n - 1;
  return 1;
}

/* Decode the inputs object and check every key before binding any: a refused input leaves
   the sandbox exactly as it was. Globals are set raw, so a guest __newindex on _G from an
   earlier run never sees host data flowing in. */
static int bind_inputs(lua_State *L, run_step *st) {
  mbxV_json_decode_input(L, st->inputs, st->inputs_len);
  int is_array = 0;
  if (lua_type(L, -1) == LUA_TTABLE && lua_getmetatable(L, -1)) {
    is_array = mbxV_json_is_array_marker(L, -1); /* [] decodes to an empty marked table */
    lua_pop(L, 1);
  }
  if (lua_type(L, -1) != LUA_TTABLE || is_array) {
    st->bad_input = dup_printf("inputs must be a JSON object whose keys become globals%s", "");
    return 0;
  }
  int inputs = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins);
  int builtins = lua_gettop(L);
  /* Every key is checked before the verdict, and the one named is the least bad key (by
     kind, then byte order), not the first lua_next meets: that order follows the string
     hash seed, different in every process (issue 9, E.5). */
  int worst_kind = 0;       /* 1 not an identifier, 2 shadows a built-in */
  const char *worst = NULL; /* anchored as a key of inputs */
  size_t worst_len = 0;
  lua_pushnil(L);
  while (lua_next(L, inputs)) {
    lua_pop(L, 1);
    if (lua_type(L, -1) != LUA_TSTRING) {
      st->bad_input = dup_printf("inputs must be a JSON object, not an array%s", "");
      return 0;
    }
    size_t n;
    const char *key = lua_tolstring(L, -1, &n);
    int kind = 0;
    if (n == 3 && memcmp(key, "...", 3) == 0) continue; /* the script arguments */
    if (!is_identifier(key, n)) {
      kind = 1;
    } else {
      lua_pushvalue(L, -1);
      if (lua_rawget(L, builtins) != LUA_TNIL) kind = 2;
      lua_pop(L, 1);
    }
    if (kind == 0 || (worst_kind != 0 && kind > worst_kind)) continue;
    if (kind == worst_kind) {
      size_t m = n < worst_len ? n : worst_len;
      int c = memcmp(key, worst, m);
      if (c > 0 || (c == 0 && n >= worst_len)) continue;
    }
    worst_kind = kind;
    worst = key;
    worst_len = n;
  }
  if (worst_kind != 0) {
    char shown[80];
    snprintf(shown, sizeof shown, "%.*s", (int)(worst_len < 64 ? worst_len : 64), worst);
    st->bad_input =
        worst_kind == 1
            ? dup_printf("inputs: key '%s' is not a Lua identifier (use letters, digits and "
                         "'_', not starting with a digit or a keyword)",
                         shown)
            : dup_printf("inputs: key '%s' would shadow the built-in global of that name "
                         "(rename the input)",
                         shown);
    return 0;
  }
  if (!script_args(L, st, inputs)) return 0;
  int args = lua_gettop(L);
  lua_pushglobaltable(L);
  int globals = lua_gettop(L);
  lua_pushnil(L);
  while (lua_next(L, inputs)) {
    lua_pushvalue(L, -2);
    lua_insert(L, -2);
    lua_rawset(L, globals);
  }
  if (st->nargs >= 0) {
    lua_pushvalue(L, args);
    lua_setfield(L, globals, "arg");
  }
  lua_copy(L, args, inputs);
  lua_settop(L, inputs); /* the arg table (or nil) stays for step_prepare */
  return 1;
}

/* The last chunk's function, kept for the next run of the same text (a REPL, an agent loop
   re-running a tool script, a benchmark): undumping its bytecode again was most of a small
   run's cost. A chunk's function is immutable but for its one upvalue, _ENV, which the reused
   function shares with the closures its earlier runs made: so only a text that never names
   _ENV is kept (without the debug library, naming it is the only way to assign it), and the
   difference between a fresh and a kept function cannot be observed. Only where the bytecode
   cache is used (never in deterministic mode: see inproc.c), only small texts (their copy
   lives on the guest heap, compared byte for byte: no hash decides). */
#define MEMO_MAX_TEXT 4096
static const char key_memo_text = 0, key_memo_name = 0;

/* Does the text hold "_ENV"? memchr to each '_': glibc's memmem set-up alone was about 160
   instructions a run, 4% of a small run's fixed cost. */
static int names_env(const char *p, size_t n) {
  const char *end = p + n, *u;
  while ((u = memchr(p, '_', (size_t)(end - p))) != NULL) {
    if ((size_t)(end - u) < 4) return 0;
    if (u[1] == 'E' && u[2] == 'N' && u[3] == 'V') return 1;
    p = u + 1;
  }
  return 0;
}

static int memo_wanted(const run_step *st) {
  return st->cache != NULL && st->code_len <= MEMO_MAX_TEXT && !names_env(st->code, st->code_len);
}

/* The kept strings' bytes through the vm's pointers to them (vm/vm.h: the registry anchors
   the strings, and Lua never moves a live string): no registry lookup. */
static int same_bytes(const char *kept, size_t kept_len, const char *p, size_t n) {
  return kept != NULL && kept_len == n && memcmp(kept, p, n) == 0;
}

/* Push the kept function when st's text and chunk name are the kept ones (no allocation, no
   raise: a raw read of the registry). */
static int memo_push(lua_State *L, const run_step *st) {
  mbxV_vm *vm = mbxV_from(L);
  /* A kept text passed memo_wanted's _ENV scan when it was kept: the byte match stands for
     it (the cache condition is the one thing that may differ from run to run). */
  if (st->cache == NULL || vm->memo_ref <= 0 ||
      !same_bytes(vm->memo_text, vm->memo_text_len, st->code, st->code_len) ||
      !same_bytes(vm->memo_name, vm->memo_name_len, st->chunk_name, strlen(st->chunk_name)))
    return 0;
  /* An integer key of the registry (its array part): a light-userdata key cost a hash
     lookup. */
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, vm->memo_ref) == LUA_TFUNCTION) return 1;
  lua_pop(L, 1);
  return 0;
}

/* Keep the function on top of L (just loaded) for the next run, when the last run had the
   same text too; allocates (may raise). */
static void memo_keep(lua_State *L, const run_step *st) {
  if (!memo_wanted(st) || mbxV_tripped(L) != MBXV_TRIP_NONE) return;
  mbxV_vm *vm = mbxV_from(L);
  uint64_t hash = XXH3_64bits(st->code, st->code_len) | 1; /* never the 0 of "none yet" */
  int again = vm->last_text_hash == hash;
  vm->last_text_hash = hash;
  if (!again) return; /* a hash only decides when to keep; the match is byte for byte */
  /* The text goes last: an allocation that fails half way leaves no text, so no stale
     function can ever be matched (clearing a key allocates nothing). The vm's pointers go
     first, before anything that may raise, and are set again only once all is anchored. */
  vm->memo_text = vm->memo_name = NULL;
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_memo_text);
  lua_pushvalue(L, -1);
  if (vm->memo_ref > 0)
    lua_rawseti(L, LUA_REGISTRYINDEX, vm->memo_ref); /* an existing key */
  else
    vm->memo_ref = luaL_ref(L, LUA_REGISTRYINDEX); /* may raise: no ref */
  const char *name = lua_pushstring(L, st->chunk_name);
  size_t name_len = strlen(st->chunk_name);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_memo_name);
  const char *text = lua_pushlstring(L, st->code, st->code_len);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_memo_text);
  vm->memo_name = name; /* anchored by the registry from here on */
  vm->memo_name_len = name_len;
  vm->memo_text = text;
  vm->memo_text_len = st->code_len;
}

void mbxV_memo_forget_upvalue(lua_State *L, const void *id) {
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL || vm->memo_ref <= 0 || vm->memo_text == NULL) return;
  /* A raw read of an existing registry slot, on a stack with room for one value (the
     debug functions call this from a frame with LUA_MINSTACK slots free). */
  if (lua_rawgeti(L, LUA_REGISTRYINDEX, vm->memo_ref) == LUA_TFUNCTION &&
      lua_upvalueid(L, -1, 1) == id) {
    vm->memo_text = vm->memo_name = NULL; /* memo_push matches nothing until kept again */
    vm->last_text_hash = 0;
  }
  lua_pop(L, 1);
}

/* The anchored run thread when it is idle (status OK, an empty stack), else NULL. */
static lua_State *idle_run_thread(const mbxV_vm *vm) {
  lua_State *co = vm->run_thread;
  return co != NULL && lua_status(co) == LUA_OK && lua_gettop(co) == 0 ? co : NULL;
}

/* Protected: inputs, then the parser, then the run thread. */
static int step_prepare(lua_State *L) {
  run_step *st = lua_touserdata(L, 1);
  lua_settop(L, 0);
  st->reached = STEP_INPUTS;
  if (st->inputs && !bind_inputs(L, st)) return 0;
  st->reached = STEP_LOAD;
  /* Text only, always: binary chunks can crash 5.4.4 just by being loaded (THREATS E4). The
     one exception is bytecode the cache holds, which we dumped ourselves from this very text
     (vm/bytecode_cache.h); guest `load` never goes this way. */
  if (memo_push(L, st)) {
    /* The same text as the last run's: its function again, nothing loaded. */
  } else if (mbxV_bcache_load(st->cache, L, st->code, st->code_len, st->chunk_name, &st->hit) !=
             LUA_OK) {
    size_t n = 0;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : "syntax error";
    if (n == 0) n = strlen(msg);
    st->syntax_error = mbxU_dup_bytes(msg, n);
    st->syntax_len = n;
    return 0;
  } else {
    memo_keep(L, st);
  }
  mbxV_check(L);
  /* The run thread of the last run that ended well is reused (it is idle: status OK, an
     empty stack): a new thread per run cost a tenth of a small run. Any other ending
     released it (step_release), and a new one is made and anchored. */
  mbxV_vm *vm = mbxV_from(L);
  lua_State *co = idle_run_thread(vm);
  if (co == NULL) {
    vm->run_thread = NULL;
    co = lua_newthread(L);
    lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_run_thread); /* anchored across runs */
    vm->run_thread = co;
  }
  lua_xmove(L, co, 1);
  if (st->nargs > 0) {
    /* The arg table bind_inputs left at 1: its arguments become the chunk's `...`. */
    if (!lua_checkstack(co, st->nargs + 1)) luaL_error(L, "too many script arguments");
    for (int i = 1; i <= st->nargs; i++) {
      lua_rawgeti(L, 1, i);
      lua_xmove(L, co, 1);
    }
  }
  st->co = co;
  st->reached = STEP_READY;
  return 0;
}

/* The common live run without a protected step: no inputs, the kept function of the same
   text, the idle run thread, no trip. Nothing here allocates or raises: memo_push is a raw
   read, lua_xmove moves one value onto an empty thread's stack (LUA_MINSTACK free slots), and
   a trip already set sends the run down the protected way (whose mbxV_check raises it, as
   ever). Returns 1 when done (st as step_prepare leaves it), 0 when nothing was touched. */
static int prepare_fast(lua_State *L, run_step *st) {
  mbxV_vm *vm = mbxV_from(L);
  lua_State *co = idle_run_thread(vm);
  if (st->inputs != NULL || co == NULL || mbxV_tripped(L) != MBXV_TRIP_NONE ||
      !lua_checkstack(L, 1) || !memo_push(L, st))
    return 0;
  lua_xmove(L, co, 1);
  st->co = co;
  st->reached = STEP_READY;
  return 1;
}

/* Protected: the chunk's return values as JSON (one as itself, several as an array). */
static int step_encode(lua_State *L) {
  run_step *st = lua_touserdata(L, 1);
  lua_settop(L, 0);
  lua_State *co = st->co;
  int n = st->nres;
  /* The result is output too: bounded by MBX_LIMIT_RESULT (issue 9, C.3). */
  size_t room = mbxV_from(L)->result_limit;
  if (n == 0) {
    lua_pushliteral(L, "null");
  } else if (n == 1) {
    lua_xmove(co, L, 1);
    mbxV_json_encode_result(L, 1, "value", room);
  } else {
    /* Encode each value on its own (a nil in the middle stays null, which a table could not
       express), popping from the top of co. */
    luaL_checkstack(L, 4, "too many results");
    lua_createtable(L, n, 0);
    for (int i = n; i >= 1; i--) {
      char path[32];
      snprintf(path, sizeof path, "value[%d]", i);
      lua_xmove(co, L, 1);
      mbxV_json_encode_result(L, 2, path, room);
      size_t len = lua_rawlen(L, -1) + 1; /* and its comma */
      room = room > len ? room - len : 0;
      lua_rawseti(L, 1, i);
      lua_pop(L, 1);
    }
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addchar(&b, '[');
    for (int i = 1; i <= n; i++) {
      if (i > 1) luaL_addchar(&b, ',');
      lua_rawgeti(L, 1, i);
      luaL_addvalue(&b);
    }
    luaL_addchar(&b, ']');
    luaL_pushresult(&b);
  }
  size_t len;
  const char *json = lua_tolstring(L, -1, &len);
  st->value = mbxU_dup_bytes(json, len);
  st->value_len = len;
  if (st->value == NULL) return luaL_error(L, "out of host memory");
  return 0;
}

/* A fixed buffer the JSON text writers fill, for the fast path below. */
typedef struct small_text {
  char data[256];
  size_t len;
  int overflow;
} small_text;

static void small_put(void *sink, const char *p, size_t n) {
  small_text *t = sink;
  if (t->overflow || n > sizeof t->data - t->len) {
    t->overflow = 1;
    return;
  }
  memcpy(t->data + t->len, p, n);
  t->len += n;
}

/* The common case without a protected step, a Lua buffer or any guest allocation: no value,
   or one nil, boolean, finite number or short string. Gives exactly step_encode's text and
   charge (one unit for a value, none for no value); returns 0 (nothing done, co untouched) for any other value, or a text
   past the result limit, which step_encode then handles (and refuses) as ever. On a trip
   found by the charge, st->value stays NULL and the trip is set. */
#define SMALL_STRING_MAX 32 /* escaped or as {"$bytes": ...}, well inside small_text */
static int encode_small(lua_State *L, run_step *st, mbxV_outcome *out) {
  lua_State *co = st->co;
  small_text t = {.len = 0, .overflow = 0};
  if (st->nres == 0) {
    small_put(&t, "null", 4);
  } else if (st->nres == 1) {
    switch (lua_type(co, -1)) {
    case LUA_TNIL:
      small_put(&t, "null", 4);
      break;
    case LUA_TBOOLEAN:
      if (lua_toboolean(co, -1))
        small_put(&t, "true", 4);
      else
        small_put(&t, "false", 5);
      break;
    case LUA_TNUMBER:
      if (lua_isinteger(co, -1))
        mbxV_json_put_integer(small_put, &t, lua_tointeger(co, -1));
      else if (!mbxV_json_put_number(small_put, &t, lua_tonumber(co, -1)))
        return 0;
      break;
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(co, -1, &n);
      if (n > SMALL_STRING_MAX) return 0;
      mbxV_json_put_string(small_put, &t, s, n);
      break;
    }
    default:
      return 0;
    }
  } else {
    return 0;
  }
  if (t.overflow || t.len > mbxV_from(L)->result_limit) return 0;
  if (st->nres == 1) {
    lua_pop(co, 1);
    /* step_encode's meter pays one unit for a scalar (and checks the limits with it). */
    if (mbxV_poll(L, 1) != MBXV_TRIP_NONE) return 1;
  }
  if (t.len < sizeof out->value_inline) {
    /* No allocation: the text goes into the outcome itself (st->value is then moved there,
       never freed). */
    memcpy(out->value_inline, t.data, t.len);
    out->value_inline[t.len] = '\0';
    st->value = out->value_inline;
  } else {
    st->value = mbxU_dup_bytes(t.data, t.len);
  }
  st->value_len = t.len;
  return 1;
}

/* Protected: describe the error on top of co. */
static int step_describe(lua_State *L) {
  run_step *st = lua_touserdata(L, 1);
  if (mbxV_error_describe(L, st->co, st->describe_override, st->describe_into) != 0)
    return luaL_error(L, "out of host memory");
  return 0;
}

/* Protected: drop the run thread's anchor (and a pending call) so they can be collected. */
static int step_release(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  vm->run_thread = NULL;
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_run_thread);
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_pending);
  vm->pending_set = 0;
  return 0;
}

/* 1 when the layer above asked for the run thread's yield as a host pause: the pending call
   is in the registry (mbxV_set_pending keeps the flag with it). */
static int pending_call_set(lua_State *L) {
  return mbxV_from(L)->pending_set;
}

void mbxV_set_pending(lua_State *L) {
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_pending);
  mbxV_from(L)->pending_set = 1;
}

/* Protected: copy the pending call's JSON out of the registry (stdlib/hostcall.c put it
   there) for the result. */
static int step_pending(lua_State *L) {
  run_step *st = lua_touserdata(L, 1);
  size_t len = 0;
  const char *json = NULL;
  if (lua_rawgetp(L, LUA_REGISTRYINDEX, &mbxV_key_pending) == LUA_TSTRING)
    json = lua_tolstring(L, -1, &len);
  if (json == NULL) {
    json = "null";
    len = 4;
  }
  st->value = mbxU_dup_bytes(json, len);
  st->value_len = len;
  if (st->value == NULL) return luaL_error(L, "out of host memory");
  lua_pushnil(L);
  lua_rawsetp(L, LUA_REGISTRYINDEX, &mbxV_key_pending);
  mbxV_from(L)->pending_set = 0;
  return 0;
}

/* Protected: the value (or error message) mbx_resume passes down, decoded onto L. */
typedef struct resume_value {
  const char *text;
  size_t len;
  int as_error;
  int pushed;
} resume_value;

static int step_resume_value(lua_State *L) {
  resume_value *rv = lua_touserdata(L, 1);
  lua_settop(L, 0);
  /* The answer goes down as (true, value...) or (false, message): see mbxV_resume. */
  lua_pushboolean(L, !rv->as_error);
  if (rv->as_error) {
    lua_pushlstring(L, rv->text ? rv->text : "", rv->len);
  } else if (rv->len > 0) {
    mbxV_json_decode(L, rv->text, rv->len);
    if (mbxV_json_is_null(L, -1)) {
      lua_pop(L, 1);
      lua_pushnil(L); /* a top-level null is the call returning nil, as for sync calls */
    }
  }
  rv->pushed = lua_gettop(L);
  return rv->pushed;
}

static int protected_step(lua_State *L, lua_CFunction f, run_step *st) {
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, st);
  int rc = lua_pcall(L, 1, 0, 0);
  if (rc != LUA_OK) {
    size_t n = 0;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : "error";
    if (n == 0) n = strlen(msg);
    free(st->step_error);
    st->step_error = mbxU_dup_bytes(msg, n);
    st->step_error_len = st->step_error ? n : 0;
    lua_pop(L, 1);
  }
  return rc;
}

/* Like protected_step, but the step's results stay on L. */
static int protected_step_keep(lua_State *L, lua_CFunction f, void *arg, char **error) {
  lua_pushcfunction(L, f);
  lua_pushlightuserdata(L, arg);
  int rc = lua_pcall(L, 1, LUA_MULTRET, 0);
  if (rc != LUA_OK) {
    size_t n = 0;
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &n) : "error";
    if (n == 0) n = strlen(msg);
    *error = mbxU_dup_bytes(msg, n);
    lua_pop(L, 1);
  }
  return rc;
}

static mbxV_status status_of_trip(mbxV_trip t) {
  switch (t) {
  case MBXV_TRIP_MEMORY:
    return MBXV_MEMORY_LIMIT;
  case MBXV_TRIP_INSTRUCTIONS:
    return MBXV_INSTRUCTION_LIMIT;
  case MBXV_TRIP_TIME:
    return MBXV_TIME_LIMIT;
  case MBXV_TRIP_OUTPUT:
    return MBXV_OUTPUT_LIMIT;
  case MBXV_TRIP_INTERRUPT:
    return MBXV_INTERRUPTED;
  case MBXV_TRIP_INTERNAL:
    return MBXV_INTERNAL_ERROR;
  case MBXV_TRIP_EXIT:
    return MBXV_RUNTIME_ERROR;
  case MBXV_TRIP_HOST_CALLS:
    return MBXV_HOST_CALL_LIMIT;
  default:
    return MBXV_OK;
  }
}

/* Fill out->error for a failed run; the trip (if any) decides the status and the text. */
static void fail_with_thread(lua_State *L, run_step *st, mbxV_outcome *out, mbxV_status status,
                             const char *override) {
  char trip_text[MBXV_TRIP_MESSAGE_MAX];
  mbxV_trip t = mbxV_tripped(L);
  if (t == MBXV_TRIP_EXIT) {
    mbxV_vm *vm = mbxV_from(L);
    out->exited = 1;
    out->exit_code = vm->budget.exit_code;
    /* os.exit() ends a run normally: no value (null), the output kept, and no error. */
    if (vm->budget.exit_code == 0) {
      out->status = MBXV_OK;
      return;
    }
  }
  if (t != MBXV_TRIP_NONE) {
    status = status_of_trip(t);
    mbxV_trip_message(L, t, trip_text, sizeof trip_text);
    override = trip_text;
  }
  out->status = status;
  out->failed = 1;
  st->describe_into = &out->error;
  st->describe_override = override;
  if (protected_step(L, step_describe, st) != LUA_OK) {
    const char *msg = override ? override : "(the error could not be described: out of memory)";
    mbxV_error_from_message(msg, strlen(msg), 0, &out->error);
  }
}

static void fail_with_message(lua_State *L, mbxV_outcome *out, mbxV_status status, const char *msg,
                              size_t len, int split) {
  char trip_text[MBXV_TRIP_MESSAGE_MAX];
  mbxV_trip t = mbxV_tripped(L);
  if (t != MBXV_TRIP_NONE) {
    status = status_of_trip(t);
    mbxV_trip_message(L, t, trip_text, sizeof trip_text);
    msg = trip_text;
    len = strlen(trip_text);
  }
  out->status = status;
  out->failed = 1;
  mbxV_error_from_message(msg, len, split, &out->error);
}

/* A run may end with the heap over the limit if no instruction followed the allocation. */
static void check_heap_at_end(lua_State *L, mbxV_vm *vm) {
  if (!mbxV_heap_over_limit(&vm->heap)) return;
  lua_gc(L, LUA_GCCOLLECT);
  if (mbxV_heap_over_limit(&vm->heap)) mbxV_trip_set(L, MBXV_TRIP_MEMORY);
}

/* os.exit right after an allocation past the limit (no instruction between them for the hook
   to look): the memory limit wins over the exit, as it would have an instruction later. */
static void check_heap_after_exit(lua_State *L, mbxV_vm *vm) {
  if (mbxV_tripped(L) != MBXV_TRIP_EXIT || !mbxV_heap_over_limit(&vm->heap)) return;
  lua_gc(L, LUA_GCCOLLECT);
  if (mbxV_heap_over_limit(&vm->heap)) atomic_store(&vm->budget.trip, MBXV_TRIP_MEMORY);
}

/* The chunk failed with a plain error (described in out, traceback included): close its
   pending to-be-closed variables, as stock lua_pcall does, under what is left of the budget.
   A handler that raises replaces the error, and a trip or os.exit inside one decides the
   outcome; either way out is described again (from the thread's error object alone: the
   frames are gone). After a trip nothing is closed: no guest code runs once a limit is hit,
   and the hook of the failed thread could not stop a handler (THREATS D6). */
static void close_after_error(mbxV_vm *vm, run_step *st, mbxV_outcome *out) {
  lua_State *L = vm->L;
  lua_State *co = st->co;
  if (mbxV_tripped(L) != MBXV_TRIP_NONE || lua_gettop(co) == 0 || !lua_checkstack(L, 2)) return;
  lua_pushvalue(co, -1);
  lua_xmove(co, L, 1); /* the error as described */
  lua_State *previous = mbxV_budget_enter(L, co);
  int closed = mbxV_closethread(co, L);
  mbxV_budget_leave(L, previous);
  int replaced = mbxV_tripped(L) != MBXV_TRIP_NONE;
  if (!replaced && closed != LUA_OK && lua_gettop(co) > 0) {
    lua_pushvalue(co, -1);
    lua_xmove(co, L, 1);
    replaced = !lua_rawequal(L, -1, -2);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  if (!replaced) return;
  if (closed == LUA_ERRMEM && mbxV_tripped(L) == MBXV_TRIP_NONE) mbxV_trip_set(L, MBXV_TRIP_MEMORY);
  mbxV_error_info_free(&out->error);
  memset(&out->error, 0, sizeof out->error);
  out->failed = 0;
  fail_with_thread(L, st, out, MBXV_RUNTIME_ERROR, NULL);
}

/* Resume the run thread st->co with nargs values already on it, and turn what comes back
   into out: the values, an error, or a pause. The run thread and the pending call stay
   anchored while paused; anything else releases them. */
static void resume_and_collect(mbxV_vm *vm, run_step *st, int nargs, mbxV_outcome *out) {
  lua_State *L = vm->L;
  lua_State *co = st->co;
  vm->budget.run_thread = co;
  vm->paused = 0;
  lua_State *previous = mbxV_budget_enter(L, co);
  int nres = 0;
  int status = lua_resume(co, L, nargs, &nres);
  mbxV_budget_leave(L, previous);
  if (status == LUA_OK) {
    check_heap_at_end(L, vm);
    check_heap_after_exit(L, vm);
    st->nres = nres;
    if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
      fail_with_thread(L, st, out, MBXV_RUNTIME_ERROR, NULL);
    } else if (encode_small(L, st, out)) {
      if (st->value != NULL) {
        out->status = MBXV_OK;
        out->value_json = st->value;
        out->value_len = st->value_len;
        st->value = NULL;
      } else if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
        fail_with_message(L, out, MBXV_RUNTIME_ERROR, "", 0, 0);
      } else {
        fail_with_message(L, out, MBXV_RUNTIME_ERROR, "out of host memory", 18, 0);
      }
    } else if (protected_step(L, step_encode, st) != LUA_OK) {
      /* The encoder's message names the offending path; a trip wins over it. */
      const char *msg = st->step_error ? st->step_error : "the result could not be encoded";
      fail_with_message(L, out, MBXV_RUNTIME_ERROR, msg, strlen(msg), 0);
    } else {
      out->status = MBXV_OK;
      out->value_json = st->value;
      out->value_len = st->value_len;
      st->value = NULL;
    }
  } else if (status == LUA_YIELD && pending_call_set(L) && mbxV_tripped(L) == MBXV_TRIP_NONE) {
    /* An external host function suspended the run (stdlib/hostcall.c): it put the pending
       call in the registry before yielding. A trip suspends a thread too (base.c
       finish_pcall) but never sets the pending call, and wins if both. */
    lua_pop(co, nres);
    if (protected_step(L, step_pending, st) != LUA_OK) {
      vm->paused = 0;
      fail_with_message(L, out, MBXV_INTERNAL_ERROR, "out of host memory for the pending call", 39,
                        0);
    } else {
      vm->paused = 1;
      out->status = MBXV_PAUSED;
      out->pending_json = st->value;
      out->pending_len = st->value_len;
      st->value = NULL;
      return;
    }
  } else if (status == LUA_YIELD) {
    vm->paused = 0;
    /* A yield out of the main chunk is not a pause: only host functions pause a run. */
    fail_with_thread(L, st, out, MBXV_RUNTIME_ERROR, "attempt to yield from outside a coroutine");
  } else {
    /* LUA_ERRMEM is no proof: lua_error turns a guest's error("not enough memory") into
       it (the message is Lua's preregistered one). Only the heap knows whether it refused
       a block; without that this is a runtime error carrying a guest string. */
    if (status == LUA_ERRMEM && mbxV_tripped(L) == MBXV_TRIP_NONE && vm->heap.refused)
      mbxV_trip_set(L, MBXV_TRIP_MEMORY);
    check_heap_after_exit(L, vm);
    fail_with_thread(L, st, out, MBXV_RUNTIME_ERROR, NULL);
    close_after_error(vm, st, out);
  }
  vm->paused = 0;
  /* A run that ended well leaves its thread idle for the next one (step_prepare reuses it);
     every other ending drops it, and whatever its stack still holds. */
  if (status == LUA_OK && lua_gettop(co) == 0 && !pending_call_set(L)) return;
  protected_step(L, step_release, st);
}

/* The end of every run or resume: no recovery point any more, the budget stopped, and the
   usage figures of the result. */
static void record_usage(mbxV_vm *vm, mbxV_outcome *out, uint64_t started) {
  vm->panic_jmp = NULL;
  out->instructions = vm->budget.instructions;
  out->uncounted = vm->budget.uncounted; /* no count hook ran: the number means nothing */
  out->host_calls = vm->budget.host_calls;
  out->exec_runs = vm->budget.exec_runs;
  out->exec_ms = vm->budget.exec_ms;
  mbxV_budget_stop(vm->L);
  out->wall_us = (mbxV_now_ns() - started) / 1000;
  out->memory_peak = vm->heap.peak;
  out->output_bytes = vm->output.total;
}

/* The first run of a fresh sandbox (fresh: the bytes its state was restored from, or NULL;
   fresh_gen: their generation): the slot's recorded preparation of this text when one fits
   (vm/first_run.h), else the preparation, recorded when the slot saw the same first run last
   time. Only where the
   bytecode cache is used (a replay stands for a cache hit), without inputs or a trip. */
static int prepare_first(lua_State *L, mbxV_vm *vm, const char *fresh, uint64_t fresh_gen,
                         run_step *st) {
  if (fresh == NULL || st->cache == NULL || st->inputs != NULL ||
      mbxV_tripped(L) != MBXV_TRIP_NONE || atomic_load(&vm->budget.interrupt))
    return protected_step(L, step_prepare, st);
  if (mbxV_first_run_replay(vm, fresh, fresh_gen, st->code, st->code_len, st->chunk_name)) {
    st->co = vm->run_thread;
    st->hit = 1;
    st->reached = STEP_READY;
    return LUA_OK;
  }
  size_t len;
  char *before = mbxV_first_run_begin(vm, st->code, st->code_len, st->chunk_name, &len);
  int rc = protected_step(L, step_prepare, st);
  if (before == NULL) return rc;
  if (rc == LUA_OK && st->reached == STEP_READY && st->hit && mbxV_tripped(L) == MBXV_TRIP_NONE &&
      !vm->heap.refused)
    mbxV_first_run_end(vm, fresh, fresh_gen, before, len, st->code, st->code_len, st->chunk_name);
  else
    free(before);
  return rc;
}

/* A failed run's value, null, in the outcome itself. */
static void set_null_value(mbxV_outcome *out) {
  memcpy(out->value_inline, "null", 5);
  out->value_json = out->value_inline;
  out->value_len = 4;
}

mbxV_status mbxV_run(mbxV_vm *vm, const char *code, size_t code_len, const char *chunk_name,
                     const char *inputs, size_t inputs_len, mbxV_outcome *out, mbxV_refusal *err) {
  return mbxV_run_cached(vm, NULL, code, code_len, chunk_name, inputs, inputs_len, out, err);
}

mbxV_status mbxV_run_cached(mbxV_vm *vm, mbxV_bcache *cache, const char *code, size_t code_len,
                            const char *chunk_name, const char *inputs, size_t inputs_len,
                            mbxV_outcome *out, mbxV_refusal *err) {
  memset(out, 0, sizeof *out);
  if (code_len > vm->source_limit) {
    mbxV_refuse(err, MBXV_SOURCE_TOO_LARGE,
                "the script is %zu bytes; the source limit is %zu bytes (raise "
                "MBX_LIMIT_SOURCE, or split the script)",
                code_len, vm->source_limit);
    return MBXV_SOURCE_TOO_LARGE;
  }
  lua_State *L = vm->L;
  run_step st = {.code = code,
                 .code_len = code_len,
                 .chunk_name = chunk_name,
                 .inputs = inputs,
                 .inputs_len = inputs_len,
                 .cache = cache};
  volatile mbxV_status api = MBXV_OK;
  jmp_buf recovery;
  uint64_t started = mbxV_now_ns();
  mbxV_output_reset(&vm->output);
  mbxV_budget_start(L);
  mbxV_cstack_arm(L); /* the guest's C depth is measured from this frame */
  vm->panic_jmp = &recovery;
  if (setjmp(recovery) != 0) {
    /* lua_atpanic: an error escaped every protected call. The state is not touched again. */
    out->status = MBXV_INTERNAL_ERROR;
    out->failed = 1;
    const char *msg = "internal error: an error escaped the runtime's protected calls";
    mbxV_error_from_message(msg, strlen(msg), 0, &out->error);
    goto finish;
  }

  /* Only the first run after mbxV_vm_new may take a recorded preparation. */
  const char *fresh = vm->fresh_source;
  uint64_t fresh_gen = vm->fresh_gen;
  vm->fresh_source = NULL;
  vm->fresh_gen = 0;
  int rc = prepare_fast(L, &st) ? LUA_OK : prepare_first(L, vm, fresh, fresh_gen, &st);
  if (st.reached != STEP_READY) {
    if (mbxV_tripped(L) != MBXV_TRIP_NONE || (rc == LUA_ERRMEM)) {
      if (mbxV_tripped(L) == MBXV_TRIP_NONE) mbxV_trip_set(L, MBXV_TRIP_MEMORY);
      fail_with_message(L, out, MBXV_MEMORY_LIMIT, "", 0, 0);
    } else if (st.reached == STEP_INPUTS) {
      api = MBXV_INVALID_INPUT;
      if (st.bad_input)
        mbxV_refuse(err, MBXV_INVALID_INPUT, "%s", st.bad_input);
      else
        mbxV_refuse(err, MBXV_INVALID_INPUT, "inputs are not valid JSON: %s",
                    st.step_error ? st.step_error : "unknown error");
    } else if (st.syntax_error) {
      fail_with_message(L, out, MBXV_SYNTAX_ERROR, st.syntax_error, st.syntax_len, 1);
    } else {
      fail_with_message(L, out, MBXV_INTERNAL_ERROR, "could not prepare the run", 25, 0);
    }
    goto finish;
  }

  vm->budget.host_calls = 0; /* counted over the run, across its resumes */
  vm->budget.exec_runs = vm->budget.exec_ms = 0;
  resume_and_collect(vm, &st, st.nargs > 0 ? st.nargs : 0, out);

finish:
  record_usage(vm, out, started);
  free(st.bad_input);
  free(st.syntax_error);
  free(st.value);
  free(st.step_error);
  if (api != MBXV_OK) {
    mbxV_outcome_free(out);
    return api;
  }
  if (out->value_json == NULL) set_null_value(out);
  if (out->value_json == NULL || (out->failed && out->error.message == NULL)) {
    mbxV_outcome_free(out);
    mbxV_refuse(err, MBXV_NO_MEMORY, "out of host memory while collecting the result");
    return MBXV_NO_MEMORY;
  }
  return out->status;
}

mbxV_status mbxV_resume(mbxV_vm *vm, const char *value, size_t len, int as_error, mbxV_outcome *out,
                        mbxV_refusal *err) {
  memset(out, 0, sizeof *out);
  lua_State *L = vm->L;
  run_step st = {0};
  jmp_buf recovery;
  uint64_t started = mbxV_now_ns();
  mbxV_output_reset(&vm->output);
  /* A fresh window per call: the deadline, instruction count and output are per
     mbx_run/mbx_resume; host_calls is not reset (the whole run's). */
  mbxV_budget_start(L);
  mbxV_cstack_arm(L); /* the guest's C depth is measured from this frame */
  vm->panic_jmp = &recovery;
  if (setjmp(recovery) != 0) {
    vm->paused = 0;
    out->status = MBXV_INTERNAL_ERROR;
    out->failed = 1;
    const char *msg = "internal error: an error escaped the runtime's protected calls";
    mbxV_error_from_message(msg, strlen(msg), 0, &out->error);
    goto finish;
  }
  st.co = vm->run_thread; /* anchored by the registry (vm/vm.h) */
  if (st.co == NULL || lua_status(st.co) != LUA_YIELD) {
    vm->paused = 0;
    const char *msg = "internal error: the paused run's thread is missing";
    fail_with_message(L, out, MBXV_INTERNAL_ERROR, msg, strlen(msg), 0);
    goto finish;
  }
  resume_value rv = {.text = value, .len = value ? len : 0, .as_error = as_error};
  char *why = NULL;
  int base = lua_gettop(L);
  if (protected_step_keep(L, step_resume_value, &rv, &why) != LUA_OK) {
    lua_settop(L, base);
    if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
      /* The value did not fit in the memory limit: that ends the run like any trip. */
      free(why);
      vm->paused = 0;
      fail_with_message(L, out, MBXV_MEMORY_LIMIT, "", 0, 0);
      protected_step(L, step_release, &st);
      goto finish;
    }
    vm->panic_jmp = NULL;
    mbxV_budget_stop(L);
    mbxV_refuse(err, MBXV_INVALID_INPUT, "mbx_resume: the value is not valid JSON: %s",
                why ? why : "out of memory");
    free(why);
    return MBXV_INVALID_INPUT;
  }
  int nargs = lua_gettop(L) - base;
  if (!lua_checkstack(st.co, nargs + 1)) {
    lua_settop(L, base);
    vm->paused = 0;
    fail_with_message(L, out, MBXV_MEMORY_LIMIT, "memory limit exceeded", 21, 0);
    protected_step(L, step_release, &st);
    goto finish;
  }
  lua_xmove(L, st.co, nargs);
  resume_and_collect(vm, &st, nargs, out);

finish:
  record_usage(vm, out, started);
  free(st.value);
  free(st.step_error);
  if (out->value_json == NULL) set_null_value(out);
  if (out->value_json == NULL || (out->failed && out->error.message == NULL)) {
    mbxV_outcome_free(out);
    mbxV_refuse(err, MBXV_NO_MEMORY, "out of host memory while collecting the result");
    return MBXV_NO_MEMORY;
  }
  return out->status;
}

void mbxV_outcome_free(mbxV_outcome *out) {
  if (out->value_json != out->value_inline) free(out->value_json);
  out->value_json = NULL;
  free(out->pending_json);
  out->pending_json = NULL;
  mbxV_error_info_free(&out->error);
}

void mbxV_outcome_move(mbxV_outcome *dst, const mbxV_outcome *src) {
  *dst = *src;
  if (src->value_json == src->value_inline) dst->value_json = dst->value_inline;
}
