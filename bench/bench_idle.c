/* bench/bench_idle.c -- what idle sessions cost: N live sandboxes, N hibernated ones and N raw
   Lua states (luaL_newstate + luaL_openlibs), each counted in its own child process as the
   growth of RSS + page tables (VmRSS + VmPTE); and a wake's latency (issue 28, item 3).
   Usage: bench_idle [sessions (default 10000)] [wake samples (default 2000)] */
#include <lauxlib.h>
#include <malloc.h>
#include <lua.h>
#include <lualib.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moonbox.h"
#include "bench_clock.h"

/* What one session holds between its calls: a little state, as an agent session would. */
static const char session_code[] = "history = history or {} history[#history + 1] = 'step' "
                                   "count = (count or 0) + 1 return count";

typedef struct mem {
  uint64_t rss, pte; /* bytes */
  uint64_t heap;     /* bytes malloc has handed out (mallinfo2) */
} mem;

static mem mem_now(void) {
  struct mallinfo2 mi = mallinfo2();
  mem m = {0, 0, mi.uordblks + mi.hblkhd};
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return m;
  char line[256];
  unsigned long long kb;
  while (fgets(line, sizeof line, f)) {
    if (sscanf(line, "VmRSS: %llu kB", &kb) == 1) m.rss = kb << 10;
    if (sscanf(line, "VmPTE: %llu kB", &kb) == 1) m.pte = kb << 10;
  }
  fclose(f);
  return m;
}

static uint64_t median(uint64_t *v, size_t n) {
  qsort(v, n, sizeof *v, bench_by_u64);
  return v[n / 2];
}

static void die(const char *what, const mbx_error *err) {
  fprintf(stderr, "bench_idle: %s: %s\n", what, err ? err->message : "failed");
  exit(1);
}

static mbx_runtime *runtime(size_t sessions) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  if (rt == NULL) die("mbx_runtime_new", &err);
  if (mbx_runtime_set_cap(rt, MBX_CAP_SANDBOXES, sessions + 16, &err) != MBX_OK)
    die("mbx_runtime_set_cap", &err);
  return rt;
}

static void run_once(mbx_sandbox *sb, const char *code) {
  mbx_result *res = NULL;
  mbx_error err;
  if (mbx_run(sb, code, strlen(code), NULL, 0, &res, &err) != MBX_OK) die("mbx_run", &err);
  mbx_result_free(res);
}

static void report(const char *name, size_t n, mem before, mem after, FILE *out) {
  double rss = (double)(after.rss - before.rss), pte = (double)(after.pte - before.pte);
  double heap = (double)(after.heap - before.heap);
  fprintf(out, "%-34s %8.1f MB   %6.2f KiB/session (page tables %5.2f KiB, malloc'd %5.2f KiB)\n",
          name, (rss + pte) / 1e6, (rss + pte) / 1024.0 / (double)n, pte / 1024.0 / (double)n,
          heap / 1024.0 / (double)n);
}

static void case_raw_lua(size_t n) {
  lua_State **states = calloc(n, sizeof *states);
  mem before = mem_now();
  for (size_t i = 0; i < n; i++) {
    states[i] = luaL_newstate();
    luaL_openlibs(states[i]);
    if (luaL_dostring(states[i], session_code) != LUA_OK) exit(1);
    lua_settop(states[i], 0);
  }
  report("raw Lua (newstate + openlibs)", n, before, mem_now(), stdout);
}

static void case_moonbox(size_t n, int hibernate) {
  mbx_runtime *rt = runtime(n);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox **sb = calloc(n, sizeof *sb);
  mbx_error err;
  /* One sandbox first, so the runtime's templates and caches are not counted per session. */
  mbx_sandbox *warm = mbx_sandbox_new(rt, p, &err);
  if (warm == NULL) die("mbx_sandbox_new", &err);
  run_once(warm, session_code);
  mem before = mem_now();
  uint64_t slept_ns = 0;
  for (size_t i = 0; i < n; i++) {
    sb[i] = mbx_sandbox_new(rt, p, &err);
    if (sb[i] == NULL) die("mbx_sandbox_new", &err);
    run_once(sb[i], session_code);
    if (hibernate) {
      uint64_t t0 = bench_now_ns();
      if (mbx_sandbox_hibernate(sb[i], &err) != MBX_OK) die("mbx_sandbox_hibernate", &err);
      slept_ns += bench_now_ns() - t0;
    }
  }
  report(hibernate ? "moonbox hibernated" : "moonbox live idle", n, before, mem_now(), stdout);
  if (hibernate)
    printf("%-34s %8.2f us mean\n", "  hibernate one", (double)slept_ns / 1e3 / (double)n);
}

/* The machine's floor under any wake that gets its pages back: a PROT_NONE range made
   readable and writable again at the same address, and `pages` pages of it faulted in and
   written (what mbxV_slot_take_pages and the decompression do, without the decompression).
   On a virtual machine whose page faults exit to the hypervisor this dominates. */
static uint64_t floor_once(char *range, size_t len, size_t pages) {
  uint64_t t0 = bench_now_ns();
  if (mmap(range, len, PROT_READ | PROT_WRITE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) != range)
    exit(1);
  (void)madvise(range, pages * 4096, 23 /* MADV_POPULATE_WRITE */);
  memset(range, 1, pages * 4096);
  uint64_t t = bench_now_ns() - t0;
  mmap(range, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return t;
}

/* The wake: `return 1+1` on a hibernated sandbox against the same on a live one, medians of
   interleaved samples on sessions of the same shape. */
static void case_wake(size_t samples) {
  mbx_runtime *rt = runtime(64);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  mbx_sandbox *live = mbx_sandbox_new(rt, p, &err), *sleepy = mbx_sandbox_new(rt, p, &err);
  if (live == NULL || sleepy == NULL) die("mbx_sandbox_new", &err);
  for (int i = 0; i < 3; i++) {
    run_once(live, session_code);
    run_once(sleepy, session_code);
  }
  const char *tiny = "return 1+1";
  run_once(live, tiny);
  run_once(sleepy, tiny);
  uint64_t *woken = calloc(samples, sizeof *woken), *awake = calloc(samples, sizeof *awake);
  uint64_t *sleep = calloc(samples, sizeof *sleep), *floor = calloc(samples, sizeof *floor);
  /* 13 pages: an idle session's 50 KiB heap prefix. */
  size_t range_len = (size_t)512 << 20, pages = 13;
  char *range =
      mmap(NULL, range_len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (range == MAP_FAILED) die("mmap", NULL);
  for (size_t i = 0; i < samples; i++) {
    floor[i] = floor_once(range, range_len, pages);
    uint64_t t0 = bench_now_ns();
    if (mbx_sandbox_hibernate(sleepy, &err) != MBX_OK) die("mbx_sandbox_hibernate", &err);
    uint64_t t1 = bench_now_ns();
    run_once(sleepy, tiny);
    uint64_t t2 = bench_now_ns();
    run_once(live, tiny);
    uint64_t t3 = bench_now_ns();
    sleep[i] = t1 - t0;
    woken[i] = t2 - t1;
    awake[i] = t3 - t2;
  }
  double w = (double)median(woken, samples) / 1e3, a = (double)median(awake, samples) / 1e3;
  printf("%-34s %8.2f us median\n", "`return 1+1` on a live sandbox", a);
  printf("%-34s %8.2f us median\n", "`return 1+1` on a hibernated one", w);
  printf("%-34s %8.2f us (the difference of the medians)\n", "  wake", w - a);
  printf("%-34s %8.2f us median (map + fault in + write %zu pages)\n",
         "  the machine's floor under it", (double)median(floor, samples) / 1e3, pages);
  printf("%-34s %8.2f us median\n", "  hibernate one (same session)",
         (double)median(sleep, samples) / 1e3);
}

/* Each case in a child of its own: the figures do not see each other's heaps. */
static void in_child(void (*fn)(size_t, int), size_t n, int arg) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    fn(n, arg);
    fflush(stdout);
    _exit(0);
  }
  int status;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    fprintf(stderr, "bench_idle: a case failed\n");
}

static void raw_case(size_t n, int arg) {
  (void)arg;
  case_raw_lua(n);
}

static void moonbox_case(size_t n, int hibernate) {
  case_moonbox(n, hibernate);
}

static void wake_case(size_t n, int arg) {
  (void)arg;
  case_wake(n);
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
  size_t samples = argc > 2 ? strtoul(argv[2], NULL, 10) : 2000;
  printf("bench_idle: %zu idle sessions each (the growth of VmRSS + VmPTE over them), "
         "moonbox %s, Lua %s\n",
         n, mbx_version(), LUA_RELEASE);
  in_child(raw_case, n, 0);
  in_child(moonbox_case, n, 0);
  in_child(moonbox_case, n, 1);
  in_child(wake_case, samples, 0);
  return 0;
}
