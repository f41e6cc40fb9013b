/* bench/bench_metatables.c -- metatable costs in moonbox next to stock Lua, in one run.
   Each case is one Lua loop run in a moonbox sandbox (mbx_run: no instruction limit, so no count
   hook; a 120 s time limit) and in a stock lua_State (luaL_newstate + luaL_openlibs, Debian's liblua5.4), the
   two interleaved, 7 rounds each. Prints the median ns per iteration for both and the ratio
   (issue 26: setmetatable <= 1.2x, obj:m() through 1- and 3-level class chains <= 1.3x).
   The walked cases show what lookups cost where moonbox follows the chain in C: an object
   made before its class had __index (Programming in Lua's A:new), a 40-level chain. */
#include <lauxlib.h>
#include <lualib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moonbox.h"

#define ROUNDS 7
#define ITERATIONS 2000000

typedef struct bench_case {
  const char *name;
  const char *setup; /* run once before the timed loop, in the same chunk */
  const char *body;  /* the loop body */
} bench_case;

static const bench_case cases[] = {
    {"setmetatable({}, C)", "local C = {} C.__index = C", "local o = setmetatable({}, C)"},
    {"{} (allocation alone)", "", "local o = {}"},
    {"setmetatable({}, {__index = C}), a new metatable each", "local C = {}",
     "local o = setmetatable({}, {__index = C})"},
    {"C.m = nil C.m = f, a class in use (a new key)",
     "local C = {} C.__index = C setmetatable({}, C) local f = print", "C.m = nil C.m = f"},
    {"obj:m(), 1 level",
     "local A = {} A.__index = A function A:m() return 1 end "
     "local o = setmetatable({}, A)",
     "o:m()"},
    {"obj:m(), 3 levels",
     "local A = {} A.__index = A function A:m() return 1 end "
     "local B = setmetatable({}, A) B.__index = B local C = setmetatable({}, B) C.__index = C "
     "local o = setmetatable({}, C)",
     "o:m()"},
    {"obj:m(), PIL first object (walked)",
     "local A = {} function A:new() local o = setmetatable({}, self) self.__index = self "
     "return o end function A:m() return 1 end local o = A:new()",
     "o:m()"},
    {"object with 3 fields set after setmetatable", "local C = {} C.__index = C",
     "local o = setmetatable({}, C) o.x = 1 o.y = 2 o.z = 3"},
    {"a == b, two objects (no __eq)",
     "local C = {} C.__index = C local a, b = setmetatable({}, C), setmetatable({}, C) local n = 0",
     "if a == b then n = n + 1 end"},
    {"#obj (no __len)", "local C = {} C.__index = C local o = setmetatable({1, 2, 3}, C)",
     "local _ = #o"},
    {"a + b (__add)",
     "local V = {} V.__index = V V.__add = function(x, y) return x end "
     "local a, b = setmetatable({}, V), setmetatable({}, V)",
     "local _ = a + b"},
    {"obj.x, 40-level chain (walked)",
     "local t = {x = 1} for i = 1, 40 do t = setmetatable({}, {__index = t}) end local o = t",
     "local _ = o.x"},
};
#define CASE_COUNT (sizeof cases / sizeof *cases)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static void chunk_of(const bench_case *c, char *out, size_t size) {
  snprintf(out, size, "%s for i = 1, %d do %s end", c->setup, ITERATIONS, c->body);
}

/* Seconds for one run of the chunk in moonbox. */
static double run_moonbox(mbx_runtime *rt, const char *chunk) {
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 120000); /* the default policy's limit is short */
  mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0); /* no count hook: only metatable costs */
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  mbx_policy_free(p);
  if (sb == NULL) {
    fprintf(stderr, "bench_metatables: %s\n", err.message);
    exit(1);
  }
  mbx_result *res = NULL;
  double t0 = now_s();
  mbx_status s = mbx_run(sb, chunk, strlen(chunk), NULL, 0, &res, &err);
  double t1 = now_s();
  if (s != MBX_OK) {
    fprintf(stderr, "bench_metatables: %s: %s\n", mbx_status_str(s), chunk);
    exit(1);
  }
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  return t1 - t0;
}

/* Seconds for one run of the chunk in stock Lua. */
static double run_stock(const char *chunk) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  if (luaL_loadstring(L, chunk) != LUA_OK) {
    fprintf(stderr, "bench_metatables: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  double t0 = now_s();
  int status = lua_pcall(L, 0, 0, 0);
  double t1 = now_s();
  if (status != LUA_OK) {
    fprintf(stderr, "bench_metatables: %s\n", lua_tostring(L, -1));
    exit(1);
  }
  lua_close(L);
  return t1 - t0;
}

int main(void) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  if (rt == NULL) {
    fprintf(stderr, "bench_metatables: %s\n", err.message);
    return 1;
  }
  printf("%-36s %12s %12s %7s\n", "case (ns per iteration, median)", "stock", "moonbox", "ratio");
  for (size_t c = 0; c < CASE_COUNT; c++) {
    char chunk[1024];
    chunk_of(&cases[c], chunk, sizeof chunk);
    double stock[ROUNDS], ours[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
      stock[r] = run_stock(chunk);
      ours[r] = run_moonbox(rt, chunk);
    }
    qsort(stock, ROUNDS, sizeof *stock, by_value);
    qsort(ours, ROUNDS, sizeof *ours, by_value);
    double s_ns = stock[ROUNDS / 2] / ITERATIONS * 1e9, m_ns = ours[ROUNDS / 2] / ITERATIONS * 1e9;
    printf("%-36s %12.1f %12.1f %6.2fx\n", cases[c].name, s_ns, m_ns, m_ns / s_ns);
  }
  mbx_runtime_free(rt);
  return 0;
}
