/* tests/fuzz/fuzz_hostile.c -- libFuzzer harness: hostile *programs*, built from the input. */
/* fuzz_run mutates bytes of Lua source, so most of its inputs die in the parser. This harness
   reads the input as a recipe instead and writes a program that always parses, made of the
   constructs issue 9 found dangerous, nested into one another:
     - __index / __newindex chains (long-string keys, colliding integer keys), __call tables;
     - coroutines closing each other, __close handlers, to-be-closed variables in the chunk;
     - long and NUL-laden strings compared and sorted;
     - re-entrant callbacks: gsub functions, sort comparators, __tostring, __lt, load readers,
       pcall / xpcall handlers, json.encode of deep tables;
     - heap pressure: tables of strings, string doubling, collectgarbage (stopped, tuned);
     - weak tables (a weak metatable's __newindex table grown under pressure: 983bc433's
       shape), __mode, __gc and __concat changed after setmetatable; events added after
       setmetatable, read live through the clone's stubs;
     - watches: events added, replaced and removed after objects use a metatable, rawset
       into one, loops of __newindex tables added later;
     - debug: locals and upvalues of every level read and written, C levels included.
   Each construct is wrapped in pcall so the program goes on after an error; a tripped limit
   stays tripped (sticky). The run uses small budgets (4 MiB, 3M instructions, 100 ms) and
   the harness aborts, so libFuzzer saves the recipe, when:
     - the host crashes or a sanitizer reports (libFuzzer itself);
     - mbx_run returns an API status, or internal_error, or a status the result disagrees on;
     - the run ends later than 2 x its deadline + FUZZ_WALL_SLACK_MS (default 200 ms; an
       overrun is run once more in a fresh sandbox and counts only if it happens again);
     - usage.memory_peak passes the allocator's ceiling (1.25 x limit + 1 MiB). Resident
       memory of the whole process is bounded by libFuzzer's -rss_limit_mb (the CI smoke
       passes 2048; tests/vm/test_rss.c measures the tight bound in a child process).
   Build: cmake --preset fuzz && cmake --build --preset fuzz
   Run:   build/fuzz/tests/fuzz_hostile -max_len=256 -timeout=10 -rss_limit_mb=2048 \
            -max_total_time=600 build/fuzz/corpus-hostile */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moonbox.h"

#define MEMORY_LIMIT (4u << 20)
#define INSTRUCTION_LIMIT 3000000
#define TIME_LIMIT_MS 100
#define MEMORY_CEILING (MEMORY_LIMIT + MEMORY_LIMIT / 4 + (1u << 20))
#define WALL_SLACK_MS 200
#define MAX_DEPTH 4
#define MAX_SOURCE (48u << 10)

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mbx_runtime *runtime;
static mbx_policy *policy;
static long wall_slack_ms = WALL_SLACK_MS;

/* The recipe: bytes read one at a time; past the end every read is 0. */
typedef struct recipe {
  const uint8_t *p;
  size_t left;
} recipe;

static unsigned next_byte(recipe *r) {
  if (r->left == 0) return 0;
  r->left--;
  return *r->p++;
}

/* The program being written; writes past MAX_SOURCE are dropped (the statement structure is
   closed by the caller, so a cut program still parses: every construct is one line). */
typedef struct program {
  char text[MAX_SOURCE];
  size_t len;
  int full;
} program;

static void emit(program *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(program *g, const char *fmt, ...) {
  if (g->full) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(g->text + g->len, sizeof g->text - g->len, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof g->text - g->len) {
    g->full = 1;
    g->text[g->len] = '\0';
    return;
  }
  g->len += (size_t)n;
}

/* A size from one byte, spread over 1 .. 2^22 (small values most often). */
static unsigned size_of(unsigned b) {
  return 1u << (b % 23);
}

static void construct(program *g, recipe *r, int depth);

/* A body for a callback: another construct while the depth allows, else a little work. */
static void body(program *g, recipe *r, int depth) {
  if (depth < MAX_DEPTH && (next_byte(r) & 1))
    construct(g, r, depth + 1);
  else
    emit(g, "local _x = 0 for _i = 1, %u do _x = _x + _i end ", size_of(next_byte(r) % 12));
}

/* One statement, wrapped in pcall: `pcall(function() ... end)`. */
static void construct(program *g, recipe *r, int depth) {
  unsigned kind = next_byte(r) % 22, a = next_byte(r), b = next_byte(r);
  emit(g, "pcall(function() ");
  switch (kind) {
  case 0: /* an __index chain of tables keyed by one long string */
    emit(g,
         "local k = string.rep('k', %u) local t = {[k .. 'x'] = 1} "
         "for i = 1, %u do t = setmetatable({[k .. 'y'] = i}, {__index = t}) end "
         "local _ = t[k .. 'z'] ",
         size_of(a), a % 40);
    break;
  case 1: /* a chain of colliding integer keys, then __newindex through it */
    emit(g,
         "local t = {} for i = 1, %u do t[i * 2^20] = i end "
         "for i = 1, %u do t = setmetatable({}, {__newindex = t, __index = t}) end "
         "t[7 * 2^20 + 1] = 1 local _ = t[3] ",
         size_of(a % 14), b % 30);
    break;
  case 2: /* __call to a table (refused) and to a function */
    emit(g, "local t = {} setmetatable(t, {__call = t}) t() ");
    break;
  case 3: /* coroutines closing each other from __close handlers */
    emit(g, "local function chain(n) if n == 0 then return end "
            "local co = coroutine.create(function() "
            "local x <close> = setmetatable({}, {__close = function() ");
    body(g, r, depth);
    emit(g,
         " chain(n - 1) end}) coroutine.yield() end) "
         "coroutine.resume(co) coroutine.close(co) end chain(%u) ",
         a % 64);
    break;
  case 4: /* long NUL-laden strings compared */
    emit(g,
         "local s = string.rep('\\0', %u) .. 'a' local u = s .. 'b' local n = 0 "
         "for i = 1, %u do if s < u then n = n + 1 end end ",
         size_of(a), b);
    break;
  case 5: /* table.sort of NUL strings, with and without a comparator */
    emit(g,
         "local t = {} for i = 1, %u do t[i] = string.rep('\\0', %u) .. (i %% 7) end "
         "table.sort(t) table.sort(t, function(x, y) ",
         a % 64 + 2, size_of(b % 18));
    body(g, r, depth);
    emit(g, " return x > y end) ");
    break;
  case 6: /* a gsub callback that re-enters */
    emit(g, "string.gsub(string.rep('x', %u), '.', function(c) ", size_of(a % 16));
    body(g, r, depth);
    emit(g, " return c end) ");
    break;
  case 7: /* __tostring and __lt through library C functions */
    emit(g, "local mt = {__tostring = function() ");
    body(g, r, depth);
    emit(g, " return 'x' end, __lt = function() return true end} "
            "local o = setmetatable({}, mt) local _ = tostring(o) .. string.format('%%s', o) "
            "local t = {o, setmetatable({}, mt), setmetatable({}, mt)} table.sort(t) ");
    break;
  case 8: /* a load reader that re-enters and returns pieces */
    emit(g, "local n = 0 load(function() n = n + 1 if n > %u then return nil end ", a % 50);
    body(g, r, depth);
    emit(g, " return 'local _ = 1 ' end) ");
    break;
  case 9: /* pcall / xpcall with handlers that raise again */
    emit(g, "xpcall(function() error(setmetatable({}, {__tostring = function() ");
    body(g, r, depth);
    emit(g, " return 'e' end})) end, function(e) error(e, 0) end) ");
    break;
  case 10: /* json.encode of a deep and wide table */
    emit(g,
         "local t = {} local c = t for i = 1, %u do c.n = {} c = c.n end "
         "for i = 1, %u do t[i] = string.rep('j', %u) end pcall(json.encode, t) ",
         a % 200, b, size_of(a % 12));
    break;
  case 11: /* heap pressure: a table of strings */
    emit(g, "local t = {} for i = 1, %u do t[i] = string.rep('m', %u) .. i end ", size_of(a % 16),
         size_of(b % 14));
    break;
  case 12: /* string doubling */
    emit(g, "local s = 'd' for i = 1, %u do s = s .. s end ", a % 26);
    break;
  case 13: /* a full collection, charged */
    emit(g, "collectgarbage('collect') collectgarbage('step', %u) ", a);
    break;
  case 15: /* debug from inside the body: every level's locals and upvalues read and written,
              C levels included (refused), a field chain named by getinfo "n" */
    emit(g,
         "local function _probe() for _l = 2, %u do local _i = debug.getinfo(_l, 'nSluf') "
         "if not _i then break end for _n = -2, %u do pcall(debug.setlocal, _l + 1, _n, "
         "debug.getlocal(_l, _n)) end if _i.func then pcall(debug.setupvalue, _i.func, 1, "
         "select(2, debug.getupvalue(_i.func, 1))) end end return debug.traceback('t', %u) end "
         "local _d = {x = {x = {x = {}}}} pcall(_probe) table.sort({3, 1, 2}, function(p, q) "
         "_probe() return p < q end) ",
         a % 24 + 2, b % 12, a % 5);
    body(g, r, depth);
    emit(g, " _probe() local _ = _d.x.x.x.x ");
    break;
  case 16: /* the collector stopped, tuned and switched, then heap pressure; warnings */
    emit(g,
         "collectgarbage('stop') collectgarbage('setpause', %u) collectgarbage('setstepmul', "
         "%u) collectgarbage('generational') collectgarbage('incremental', %u, %u) "
         "warn('@on') warn('w', '%u') ",
         a, b * 1000, b, a * 997, a);
    body(g, r, depth);
    emit(g, " collectgarbage('restart') ");
    break;
  case 14: /* a wrapped coroutine whose body errors with a to-be-closed variable */
    emit(g, "local f = coroutine.wrap(function() local x <close> = setmetatable({}, "
            "{__close = function() ");
    body(g, r, depth);
    emit(g, " end}) error('w') end) pcall(f) ");
    break;
  case 17: /* weak tables: a weak metatable's __newindex table grown under heap pressure (the
              983bc433 shape), weak caches, and __mode/__gc changed after setmetatable */
    emit(g,
         "local h = {} local mt = setmetatable({__newindex = h}, {__mode = '%s'}) "
         "local t = setmetatable({}, mt) for i = 1, %u do t[-i] = i end h = nil "
         "local c = setmetatable({}, {__mode = 'k'}) for i = 1, %u do c[{}] = i end "
         "mt.__mode = 'kv' mt.__gc = function() while true do end end "
         "local g = {} for i = 1, %u do g[i] = {i} end g = nil t[{}] = 1 ",
         a & 1 ? "v" : "kv", size_of(a % 20), b, size_of(b % 18));
    break;
  case 18: /* __concat added after setmetatable (refused when it fires), __gc never run */
    emit(g, "local mt = {__gc = function() ");
    body(g, r, depth);
    emit(g, " end} local o = setmetatable({}, mt) mt.__concat = function() ");
    body(g, r, depth);
    emit(g, " return 'c' end local _ = pcall(function() return 'a' .. o .. %u end) ", a);
    break;
  case 19: /* events added after setmetatable, read live through the clone's stubs: nested
              operations with string and number operands, __le by __lt, a late __call and
              __concat accepted at setmetatable, error levels counted through the stubs */
    emit(g, "local mt = {__concat = function() return 'c' end} local o = setmetatable({}, mt) "
            "local p = setmetatable({}, {}) mt.__add = function(x, y) ");
    body(g, r, depth);
    emit(g,
         " return o end mt.__lt = function(x, y) error('lt', %u) end "
         "mt.__call = function(self, n) if n > 0 then return self(n - 1) end return o + '1' end "
         "for _, f in ipairs{function() return o + p + 1 end, function() return '2' - o end, "
         "function() return o <= p end, function() return p < o end, "
         "function() return o(%u) end, function() return o .. 'x' end, "
         "function() return -p end} do pcall(f) end ",
         a % 4, size_of(b % 10));
    break;
  case 20: /* watches (issue 26): events added to a metatable after objects use it, through a
              store and rawset (__newindex tables walked, __eq, __len, __close, __mode,
              __metatable), functions replaced and removed (operators, __call, __index read
              live), the metatable given and losing a metatable of its own, and a chain of
              __newindex tables added later closing a loop */
    emit(g,
         "local mt, objs = {}, {} for i = 1, %u do objs[i] = setmetatable({}, mt) end "
         "local sink = setmetatable({}, mt) mt.__newindex = %s "
         "rawset(mt, '__eq', function() return true end) mt.__len = function() return %u end "
         "mt.__add = function(x, y) ",
         a % 40 + 1, a & 1 ? "sink" : "function(t, k, v) rawset(t, k, v) end", b);
    body(g, r, depth);
    emit(
        g,
        " return x end mt.__close = function() end mt.__mode = '%s' "
        "local o = objs[1] pcall(function() o.k = 1 end) local _ = (o == objs[#objs]) and #o "
        "do local c <close> = o end mt.__add = nil pcall(function() return o + 1 end) "
        "mt.__call = function(self, n) return n end pcall(o, 1) mt.__index = function() return 1 end "
        "setmetatable(mt, {__index = mt}) mt.__unm = function() return 0 end setmetatable(mt, nil) "
        "mt.__metatable = 'locked' local ms = {} for i = 1, %u do ms[i] = {} "
        "local x = setmetatable({}, ms[i]) ms[i].__newindex = x end "
        "for i = 1, #ms do ms[i].__newindex = setmetatable({}, ms[i %% #ms + 1]) end "
        "pcall(function() setmetatable({}, ms[1]).z = 1 end) ",
        b & 1 ? "k" : "v", b % 60 + 2);
    break;
  default: /* deep recursion, plain */
    emit(g, "local function f(n) if n == 0 then return 0 end return 1 + f(n - 1) end f(%u) ",
         size_of(a % 20));
    break;
  }
  emit(g, "end)\n");
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static _Noreturn void violation(const char *what, const program *g, const mbx_result *res) {
  fprintf(stderr, "\nfuzz_hostile: INVARIANT VIOLATED: %s\n", what);
  if (res != NULL) fprintf(stderr, "result: %.2000s\n", mbx_result_json(res, NULL));
  fprintf(stderr, "program (%zu bytes):\n%s\n", g->len, g->text);
  abort();
}

/* Run the program in a fresh sandbox; returns the wall time, *out the result. */
static long run_once(const program *g, mbx_status *status, mbx_result **out) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, policy, &err);
  if (sb == NULL) {
    fprintf(stderr, "fuzz_hostile: mbx_sandbox_new: %s\n", err.message);
    abort();
  }
  long t0 = now_ms();
  *status = mbx_run(sb, g->text, g->len, NULL, 0, out, &err);
  long wall = now_ms() - t0;
  mbx_sandbox_free(sb);
  return wall;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *slack = getenv("FUZZ_WALL_SLACK_MS");
  if (slack && atol(slack) > wall_slack_ms) wall_slack_ms = atol(slack);
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  policy = mbx_policy_new();
  if (runtime == NULL || policy == NULL) abort();
  if (mbx_policy_set_limit(policy, MBX_LIMIT_MEMORY, MEMORY_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, INSTRUCTION_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_TIME_MS, TIME_LIMIT_MS) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_OUTPUT, 64u << 10) != MBX_OK)
    abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static program g;
  g.len = 0;
  g.full = 0;
  g.text[0] = '\0';
  recipe r = {data, size};
  while (r.left > 0 && !g.full)
    construct(&g, &r, 0);
  if (g.full) return 0; /* a cut program might not parse; libFuzzer moves on */
  emit(&g, "return 'done'\n");

  mbx_status status;
  mbx_result *res = NULL;
  long wall = run_once(&g, &status, &res);
  if (status >= MBX_API_ERROR_BASE) violation("mbx_run returned an API status", &g, res);
  if (mbx_result_status(res) != status) violation("the result disagrees on the status", &g, res);
  if (status == MBX_INTERNAL_ERROR || status == MBX_PAUSED || status == MBX_HOST_CALL_LIMIT ||
      status == MBX_INTERRUPTED)
    violation("a status this configuration cannot produce", &g, res);
  if (status == MBX_SYNTAX_ERROR) violation("a generated program does not parse", &g, res);
  mbx_usage usage;
  if (mbx_result_usage(res, &usage) != MBX_OK) violation("no usage", &g, res);
  if (usage.memory_peak > MEMORY_CEILING) violation("memory peak past the ceiling", &g, res);
  long bound = 2 * TIME_LIMIT_MS + wall_slack_ms;
  if (wall > bound) {
    /* A loaded machine: count it only if a fresh sandbox overruns again. */
    mbx_result_free(res);
    res = NULL;
    wall = run_once(&g, &status, &res);
    if (wall > bound) {
      char what[128];
      snprintf(what, sizeof what, "the run took %ld ms, past 2 x the %d ms deadline + %ld ms", wall,
               TIME_LIMIT_MS, wall_slack_ms);
      violation(what, &g, res);
    }
  }
  mbx_result_free(res);
  return 0;
}
