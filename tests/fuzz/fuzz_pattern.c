/* tests/fuzz/fuzz_pattern.c -- libFuzzer differential harness: our pattern matcher vs stock. */
/* Each input is one call of string.find, match, gmatch or gsub with a fuzzed pattern, subject,
   init and replacement. It runs first through our functions (stdlib/pattern.c, compiled from
   the library's sources with coverage) in a moonbox vm whose instruction limit caps the
   matching steps; only if ours finished within that cap does the same call run through the
   stock string library of a plain luaL_openlibs state (ours counts the same backtracking
   steps as stock, so stock then finishes quickly too). Any difference in results or error
   messages aborts with both sides printed.

   Stock is never asked to reuse a gmatch iterator after an error: Debian's 5.4.4 crashes
   there (upstream efddc230). Argument errors are never provoked, since stock names the
   function "string.find" through package.loaded and the sandbox cannot.

   Build (clang only; tests/CMakeLists.txt adds the target when the compiler is Clang):
     CC=clang cmake -S . -B build/fuzz -DCMAKE_BUILD_TYPE=Debug -DMBX_BENCH=OFF
     cmake --build build/fuzz --target fuzz_pattern
   Run (a corpus directory keeps what was found; the dictionary holds pattern syntax):
     mkdir -p build/fuzz/corpus
     build/fuzz/tests/fuzz_pattern -dict=tests/fuzz/pattern.dict -max_len=256 \
       -max_total_time=600 build/fuzz/corpus
   Input layout: [op][arg][pattern length][replacement length][pattern][replacement][subject]. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/vm.h"

/* Matching steps ours may take before the input is skipped; stock at the same work takes
   well under a millisecond. */
#define STEP_CAP 200000
/* gmatch results compared per input. */
#define MAX_ITERATIONS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct call {
  int op; /* 0 find, 1 match, 2 gmatch, 3 gsub */
  int plain;
  int repl_kind; /* gsub: 0 string, 1 table, 2 function */
  int has_arg;   /* init (find/match/gmatch) or max count (gsub) given */
  lua_Integer arg;
  const char *pattern, *repl, *subject;
  size_t pattern_len, repl_len, subject_len;
} call;

/* What one side produced, flattened into text so the two can be compared with memcmp. */
typedef struct transcript {
  char *text;
  size_t len, cap;
} transcript;

static void put(transcript *t, const char *s, size_t n) {
  if (t->len + n + 1 > t->cap) {
    size_t cap = (t->len + n + 1) * 2;
    char *p = realloc(t->text, cap);
    if (p == NULL) abort();
    t->text = p;
    t->cap = cap;
  }
  memcpy(t->text + t->len, s, n);
  t->len += n;
  t->text[t->len] = '\0';
}

static void put_str(transcript *t, const char *s) {
  put(t, s, strlen(s));
}

/* Append the values from index first to the top, then pop them. */
static void put_values(transcript *t, lua_State *L, int first) {
  char num[64];
  int top = lua_gettop(L);
  snprintf(num, sizeof num, "(%d)", top - first + 1);
  put_str(t, num);
  for (int i = first; i <= top; i++) {
    switch (lua_type(L, i)) {
    case LUA_TSTRING: {
      size_t n;
      const char *s = lua_tolstring(L, i, &n);
      snprintf(num, sizeof num, " s%zu:", n);
      put_str(t, num);
      put(t, s, n);
      break;
    }
    case LUA_TNUMBER:
      if (lua_isinteger(L, i))
        snprintf(num, sizeof num, " i:%lld", (long long)lua_tointeger(L, i));
      else
        snprintf(num, sizeof num, " f:%.17g", lua_tonumber(L, i));
      put_str(t, num);
      break;
    default:
      put_str(t, " ");
      put_str(t, lua_typename(L, lua_type(L, i)));
      break;
    }
  }
  lua_settop(L, first - 1);
}

/* The function replacement, identical in both states: keeps every match whose first
   capture has odd length, and otherwise returns the capture count and the first capture. */
static int repl_function(lua_State *L) {
  int n = lua_gettop(L);
  size_t len = 0;
  if (lua_type(L, 1) == LUA_TSTRING)
    lua_tolstring(L, 1, &len);
  else if (lua_type(L, 1) == LUA_TNUMBER)
    return 1; /* a position: returned as is */
  if (len % 2 == 1) return 0;
  lua_pushfstring(L, "<%d:", n);
  lua_pushvalue(L, 1);
  lua_concat(L, 2);
  return 1;
}

static void push_replacement(lua_State *L, const call *c) {
  switch (c->repl_kind) {
  case 0:
    lua_pushlstring(L, c->repl, c->repl_len);
    break;
  case 1: /* a table: a hit, a false (keep), a number, and a bad value */
    lua_createtable(L, 0, 4);
    lua_pushliteral(L, "A");
    lua_setfield(L, -2, "a");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "b");
    lua_pushinteger(L, 7);
    lua_setfield(L, -2, "c");
    lua_pushboolean(L, 1);
    lua_setfield(L, -2, "d");
    lua_pushliteral(L, "one");
    lua_rawseti(L, -2, 1);
    break;
  default:
    lua_pushcfunction(L, repl_function);
    break;
  }
}

/* Run the call in L with the functions of the table at lib; returns 0 when the run was cut
   short by the step cap (only ours has one). */
static int run_call(lua_State *L, int lib, const call *c, transcript *t, int metered) {
  static const char *const names[] = {"find", "match", "gmatch", "gsub"};
  int base = lua_gettop(L);
  lua_getfield(L, lib, names[c->op]);
  lua_pushlstring(L, c->subject, c->subject_len);
  lua_pushlstring(L, c->pattern, c->pattern_len);
  int nargs = 2;
  if (c->op == 3) {
    push_replacement(L, c);
    nargs++;
  }
  if (c->has_arg) {
    lua_pushinteger(L, c->arg);
    nargs++;
  }
  if (c->op == 0 && c->plain) {
    if (!c->has_arg) {
      lua_pushnil(L);
      nargs++;
    }
    lua_pushboolean(L, 1);
    nargs++;
  }
  int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
  if (metered && mbxV_tripped(L) != MBXV_TRIP_NONE) return 0;
  if (status != LUA_OK) {
    put_str(t, "error: ");
    put_str(t, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
    lua_settop(L, base);
    return 1;
  }
  if (c->op != 2) {
    put_values(t, L, base + 1);
    return 1;
  }
  /* gmatch: call the iterator until it returns nothing, or raises (then never again). */
  int iterator = lua_gettop(L);
  for (int i = 0; i < MAX_ITERATIONS; i++) {
    lua_pushvalue(L, iterator);
    status = lua_pcall(L, 0, LUA_MULTRET, 0);
    if (metered && mbxV_tripped(L) != MBXV_TRIP_NONE) return 0;
    if (status != LUA_OK) {
      put_str(t, " error: ");
      put_str(t, lua_tostring(L, -1) ? lua_tostring(L, -1) : "(not a string)");
      break;
    }
    int got = lua_gettop(L) - iterator;
    put_str(t, " |");
    put_values(t, L, iterator + 1);
    if (got == 0) break;
  }
  lua_settop(L, base);
  return 1;
}

static mbxV_vm ours_vm;
static lua_State *ours, *stock;
static int ours_lib, stock_lib;

static void setup(void) {
  mbxV_config cfg = {.memory_limit = 64u << 20,
                     .instruction_limit = STEP_CAP,
                     .time_limit_ms = 0,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .address_key = 1};
  if (!mbxV_vm_open(&ours_vm, &cfg)) abort();
  ours = ours_vm.L;
  lua_newtable(ours);
  mbxL_install_patterns(ours, -1);
  ours_lib = lua_gettop(ours);
  stock = luaL_newstate();
  luaL_openlibs(stock);
  lua_getglobal(stock, "string");
  stock_lib = lua_gettop(stock);
}

static size_t take(const uint8_t **data, size_t *size, size_t want) {
  if (want > *size) want = *size;
  *data += want;
  *size -= want;
  return want;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (ours == NULL) setup();
  if (size < 4) return 0;
  call c = {0};
  c.op = data[0] & 3;
  c.plain = (data[0] >> 2) & 1;
  c.repl_kind = ((data[0] >> 3) & 3) % 3;
  c.has_arg = data[1] != 0;
  c.arg = (int8_t)data[1];
  if (data[1] == 0x80) c.arg = (data[0] & 0x80) ? LUA_MININTEGER : LUA_MAXINTEGER;
  size_t want_pattern = data[2], want_repl = data[3];
  data += 4;
  size -= 4;
  c.pattern = (const char *)data;
  c.pattern_len = take(&data, &size, want_pattern);
  c.repl = (const char *)data;
  c.repl_len = take(&data, &size, want_repl);
  c.subject = (const char *)data;
  c.subject_len = size;

  transcript mine = {0}, theirs = {0};
  mbxV_budget_start(ours);
  int finished = run_call(ours, ours_lib, &c, &mine, 1);
  mbxV_budget_stop(ours);
  lua_settop(ours, ours_lib);
  if (finished) {
    run_call(stock, stock_lib, &c, &theirs, 0);
    lua_settop(stock, stock_lib);
    if (mine.len != theirs.len || memcmp(mine.text, theirs.text, mine.len) != 0) {
      fprintf(stderr, "DIFFERENCE op=%d plain=%d repl_kind=%d arg=%s%lld\n", c.op, c.plain,
              c.repl_kind, c.has_arg ? "" : "(none) ", (long long)c.arg);
      fprintf(stderr, "pattern (%zu): ", c.pattern_len);
      fwrite(c.pattern, 1, c.pattern_len, stderr);
      fprintf(stderr, "\nrepl (%zu): ", c.repl_len);
      fwrite(c.repl, 1, c.repl_len, stderr);
      fprintf(stderr, "\nsubject (%zu): ", c.subject_len);
      fwrite(c.subject, 1, c.subject_len, stderr);
      fprintf(stderr, "\nours:  %s\nstock: %s\n", mine.text ? mine.text : "",
              theirs.text ? theirs.text : "");
      abort();
    }
  }
  free(mine.text);
  free(theirs.text);
  return 0;
}
