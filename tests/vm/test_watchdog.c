/* tests/vm/test_watchdog.c -- unit tests of vm/watchdog.c: the deadline and the host's
   interrupts delivered by signal to runs without a count hook, and every way back to the
   count hook. Wall bounds are generous (a loaded machine): each test asserts why a run ended,
   never how fast. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>

#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/run.h"
#include "vm/vm.h"
#include "vm/watchdog.h"

/* A stuck run fails the test by this bound instead of hanging it. */
#define GENEROUS_US (60u * 1000u * 1000u)

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* ---- the vm level: a vm with a watch, probes into it ---- */

static mbxV_watchdog *dog;
static mbxV_watch *the_watch;

/* Whether the thread running guest code has a count hook. */
static int lua_hooked(lua_State *L) {
  lua_pushboolean(L, (lua_gethookmask(L) & LUA_MASKCOUNT) != 0);
  return 1;
}

static int lua_generation(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)atomic_load(&the_watch->generation));
  return 1;
}

/* Queue the deadline signal to this very thread with the given generation: delivered before
   the call returns (the thread does not block it). */
static int lua_send(lua_State *L) {
  union sigval v = {.sival_ptr = (void *)(uintptr_t)luaL_checkinteger(L, 1)};
  assert_int_equal(pthread_sigqueue(pthread_self(), mbxV_watchdog_signal(dog), v), 0);
  return 0;
}

typedef struct vm_box {
  mbxV_vm vm;
  mbxV_watch watch;
} vm_box;

static vm_box *open_box(uint64_t instructions, uint64_t time_ms) {
  vm_box *b = calloc(1, sizeof *b);
  assert_non_null(b);
  mbxV_config cfg = {.memory_limit = 16u << 20,
                     .instruction_limit = instructions,
                     .time_limit_ms = time_ms,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .address_key = 5};
  assert_true(mbxV_vm_open(&b->vm, &cfg));
  lua_pushcfunction(b->vm.L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(b->vm.L, 0, 0, 0), LUA_OK);
  lua_register(b->vm.L, "hooked", lua_hooked);
  lua_register(b->vm.L, "generation", lua_generation);
  lua_register(b->vm.L, "send", lua_send);
  mbxV_watch_init(&b->watch, dog, &b->vm);
  b->vm.budget.watch = &b->watch;
  the_watch = &b->watch;
  return b;
}

static void close_box(vm_box *b) {
  mbxV_watch_fini(&b->watch);
  mbxV_vm_close(&b->vm);
  free(b);
}

static mbxV_status run(vm_box *b, const char *code, mbxV_outcome *out) {
  mbxV_refusal why;
  return mbxV_run(&b->vm, code, strlen(code), "=t", NULL, 0, out, &why);
}

static int setup(void **state) {
  (void)state;
  char why[160];
  dog = mbxV_watchdog_new(mbxV_watchdog_default_signal(), why, sizeof why);
  if (mbxV_watchdog_supported() && dog == NULL) fail_msg("no watchdog: %s", why);
  return 0;
}

static int teardown(void **state) {
  (void)state;
  mbxV_watchdog_free(dog);
  return 0;
}

#define NEEDS_SIGNALS()                                                                            \
  do {                                                                                             \
    if (!mbxV_watchdog_supported()) {                                                              \
      skip();                                                                                      \
    }                                                                                              \
  } while (0)

/* A plain loop under a deadline alone runs with no count hook, and the deadline stops it:
   time_limit, and the instruction count is not a count. With an instruction limit the hook
   is there and counts. */
static void loop_stopped_by_deadline_without_hook(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  vm_box *b = open_box(0, 150);
  mbxV_outcome out;
  uint64_t t0 = now_us();
  assert_int_equal(run(b,
                       "assert(not hooked(), 'a count hook is set') "
                       "local s = 0 for i = 1, 1e12 do s = s + i % 7 end return s",
                       &out),
                   MBXV_TIME_LIMIT);
  assert_true(now_us() - t0 < GENEROUS_US);
  assert_true(out.uncounted);
  assert_non_null(strstr(out.error.message, "time limit exceeded (150 ms)"));
  mbxV_outcome_free(&out);
  /* The sandbox runs again, still without a hook. */
  assert_int_equal(run(b, "return hooked()", &out), MBXV_OK);
  assert_string_equal(out.value_json, "false");
  mbxV_outcome_free(&out);
  close_box(b);

  b = open_box(1000000000, 150);
  assert_int_equal(run(b, "assert(hooked()) local s = 0 while true do s = s + 1 end", &out),
                   MBXV_TIME_LIMIT);
  assert_false(out.uncounted);
  assert_true(out.instructions > 0);
  mbxV_outcome_free(&out);
  close_box(b);
}

/* Signals of another generation (a run that ended, one not begun) are ignored, and so is the
   right generation before the deadline (the handler looks at the clock itself); after the
   deadline the right generation trips the run at once. */
static void stale_generations_are_ignored(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  vm_box *b = open_box(0, 60000);
  mbxV_outcome out;
  assert_int_equal(run(b, "return generation()", &out), MBXV_OK);
  long long first = atoll(out.value_json);
  mbxV_outcome_free(&out);
  assert_true(first != 0);
  /* After the run: no run on this thread, nothing happens. */
  union sigval v = {.sival_ptr = (void *)(uintptr_t)first};
  assert_int_equal(pthread_sigqueue(pthread_self(), mbxV_watchdog_signal(dog), v), 0);
  char code[512];
  snprintf(code, sizeof code,
           "local g = generation() assert(g ~= %lld) "
           "send(%lld) send(g + 1) send(g) "
           "local s = 0 for i = 1, 3e5 do s = s + i end return s",
           first, first);
  assert_int_equal(run(b, code, &out), MBXV_OK);
  assert_string_equal(out.value_json, "45000150000");
  mbxV_outcome_free(&out);
  close_box(b);

  /* Past the deadline, in a loop that the count hook would not see: the run's own generation
     trips it (the watchdog would too, a moment later). */
  b = open_box(0, 20);
  assert_int_equal(run(b,
                       "local s = 0 "
                       "for i = 1, 2e9 do s = s + i if i % 100000 == 0 then "
                       "send(generation()) end end",
                       &out),
                   MBXV_TIME_LIMIT);
  mbxV_outcome_free(&out);
  close_box(b);
}

/* The deadline inside nested coroutine resumes, deeper than the chain the handler arms
   directly, with pcall at every level: the trip is sticky and reaches the outermost run. */
static void deadline_inside_nested_coroutines(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  vm_box *b = open_box(0, 150);
  mbxV_outcome out;
  uint64_t t0 = now_us();
  assert_int_equal(run(b,
                       "local function deep(n) "
                       "  if n == 0 then local s = 0 while true do s = s + 1 end end "
                       "  local ok, e = "
                       "    pcall(coroutine.wrap(function() return deep(n - 1) end)) "
                       "  return ok, e "
                       "end "
                       "return deep(40)",
                       &out),
                   MBXV_TIME_LIMIT);
  assert_true(now_us() - t0 < GENEROUS_US);
  mbxV_outcome_free(&out);
  /* A generator resumed forever: the deadline lands in either thread. */
  assert_int_equal(run(b,
                       "local gen = coroutine.wrap(function() local i = 0 "
                       "  while true do i = i + 1 "
                       "    if i % 50 == 0 then coroutine.yield(i) end end end) "
                       "local s = 0 while true do s = s + gen() end",
                       &out),
                   MBXV_TIME_LIMIT);
  mbxV_outcome_free(&out);
  close_box(b);
}

/* A sandbox without runs leaves the watchdog's list after 100 ms (and the watchdog sleeps
   after 200 ms): its next run lists it again and wakes the watchdog, and its deadline holds. */
static void idle_watch_leaves_and_rejoins(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  vm_box *b = open_box(0, 100);
  mbxV_outcome out;
  for (int round = 0; round < 2; round++) {
    assert_int_equal(run(b, "return 1", &out), MBXV_OK);
    mbxV_outcome_free(&out);
    assert_int_equal(atomic_load(&b->watch.listed), 1);
    struct timespec ts = {0, 600 * 1000 * 1000};
    nanosleep(&ts, NULL);
    /* On a loaded machine the watchdog may not have looked yet: give it time. */
    for (int i = 0; i < 100 && atomic_load(&b->watch.listed); i++) {
      ts.tv_nsec = 50 * 1000 * 1000;
      nanosleep(&ts, NULL);
    }
    assert_int_equal(atomic_load(&b->watch.listed), 0);
    uint64_t t0 = now_us();
    assert_int_equal(run(b, "local s = 0 while true do s = s + 1 end", &out), MBXV_TIME_LIMIT);
    assert_true(now_us() - t0 < GENEROUS_US);
    assert_true(out.uncounted);
    mbxV_outcome_free(&out);
  }
  close_box(b);
}

/* What the handler does, called directly in a run's state: the trip first, then count 1 on
   the current thread and the first MBXV_WATCH_CHAIN threads of the resume chain; the deeper
   ones are armed as the chain unwinds (mbxV_budget_leave). The watch's own deadline is far
   away, so the watchdog sends nothing meanwhile. */
static void on_signal_arms_the_chain(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  enum { DEPTH = MBXV_WATCH_CHAIN + 4 };
  vm_box *b = open_box(0, 60000);
  lua_State *L = b->vm.L;
  lua_State *t[DEPTH], *prev[DEPTH];
  for (int i = 0; i < DEPTH; i++)
    t[i] = lua_newthread(L); /* anchored on L's stack */
  mbxV_budget_start(L);
  assert_true(b->vm.budget.no_hook);
  for (int i = 0; i < DEPTH; i++)
    prev[i] = mbxV_budget_enter(L, t[i]);
  for (int i = 0; i < DEPTH; i++)
    assert_int_equal(lua_gethookmask(t[i]), 0);
  /* Not due: the handler looks at the clock itself and does nothing. */
  mbxV_budget_on_signal(&b->vm);
  assert_int_equal(mbxV_tripped(L), MBXV_TRIP_NONE);
  b->vm.budget.deadline_ns = 1;
  mbxV_budget_on_signal(&b->vm);
  assert_int_equal(mbxV_tripped(L), MBXV_TRIP_TIME);
  for (int i = 0; i < DEPTH; i++) {
    int armed = i < MBXV_WATCH_CHAIN || i == DEPTH - 1;
    assert_int_equal((lua_gethookmask(t[i]) & LUA_MASKCOUNT) != 0, armed);
    if (armed) assert_int_equal(lua_gethookcount(t[i]), 1);
  }
  for (int i = DEPTH - 1; i >= 0; i--)
    mbxV_budget_leave(L, prev[i]);
  for (int i = 0; i < DEPTH; i++)
    assert_int_equal(lua_gethookcount(t[i]), 1);
  mbxV_budget_stop(L);
  lua_settop(L, 0);
  close_box(b);
}

/* Every lua_sethook of vm/ re-checks the trip after it returns: a handler that armed the
   thread inside it (its arm then overwritten) is made good. Simulated: the trip is set, as the
   handler sets it first, and an arm for "no hook" must come out as count 1. */
static void hook_set_rechecks_the_trip(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  vm_box *b = open_box(0, 60000);
  lua_State *L = b->vm.L;
  lua_State *co = lua_newthread(L);
  mbxV_budget_start(L);
  assert_true(b->vm.budget.no_hook);
  mbxV_hook_set(co, 0);
  assert_int_equal(lua_gethookmask(co), 0);
  atomic_store(&b->vm.budget.trip, MBXV_TRIP_TIME);
  mbxV_hook_set(co, 0);
  assert_true(lua_gethookmask(co) & LUA_MASKCOUNT);
  assert_int_equal(lua_gethookcount(co), 1);
  mbxV_budget_stop(L);
  lua_settop(L, 0);
  close_box(b);
}

/* ---- the public API: runtime, policy, sandbox ---- */

typedef struct api {
  mbx_runtime *rt;
  mbx_policy *p;
  mbx_sandbox *sb;
} api;

static void api_open(api *a, uint64_t time_ms, uint64_t instructions, int signo) {
  a->rt = mbx_runtime_new(NULL);
  assert_non_null(a->rt);
  if (signo >= 0) {
    mbx_error err;
    assert_int_equal(mbx_runtime_set_deadline_signal(a->rt, signo, &err), MBX_OK);
  }
  a->p = mbx_policy_new();
  mbx_policy_set_limit(a->p, MBX_LIMIT_TIME_MS, time_ms);
  mbx_policy_set_limit(a->p, MBX_LIMIT_INSTRUCTIONS, instructions);
  a->sb = NULL;
}

static void api_sandbox(api *a) {
  mbx_error err;
  a->sb = mbx_sandbox_new(a->rt, a->p, &err);
  assert_non_null(a->sb);
}

static void api_close(api *a) {
  mbx_sandbox_free(a->sb);
  mbx_policy_free(a->p);
  mbx_runtime_free(a->rt);
}

static mbx_status api_run(api *a, const char *code, mbx_result **r) {
  mbx_error err;
  return mbx_run(a->sb, code, strlen(code), NULL, 0, r, &err);
}

/* usage.instructions is null in the result JSON and not counted in mbx_usage; a policy with
   an instruction limit counts. */
static void usage_instructions_null_without_hook(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 200, 0, -1);
  assert_int_equal(mbx_runtime_deadline_signal(a.rt), mbxV_watchdog_default_signal());
  api_sandbox(&a);
  mbx_result *r = NULL;
  assert_int_equal(api_run(&a, "local s = 0 while true do s = s + 1 end", &r), MBX_TIME_LIMIT);
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"instructions\":null,"));
  mbx_usage u;
  assert_int_equal(mbx_result_usage(r, &u), MBX_OK);
  assert_int_equal(u.instructions_counted, 0);
  assert_int_equal(u.instructions, 0);
  mbx_result_free(r);
  api_close(&a);

  api_open(&a, 200, 100000000, -1);
  api_sandbox(&a);
  assert_int_equal(api_run(&a, "local s = 0 for i = 1, 1000 do s = s + i end return s", &r),
                   MBX_OK);
  assert_int_equal(mbx_result_usage(r, &u), MBX_OK);
  assert_int_equal(u.instructions_counted, 1);
  assert_true(u.instructions > 0);
  assert_null(strstr(mbx_result_json(r, NULL), "\"instructions\":null"));
  mbx_result_free(r);
  api_close(&a);
}

static void *interrupt_later(void *arg) {
  struct timespec ts = {0, 100 * 1000 * 1000};
  nanosleep(&ts, NULL);
  mbx_sandbox_interrupt(arg);
  return NULL;
}

/* mbx_sandbox_interrupt reaches a pure loop with no hook and no deadline (the signal path). */
static void interrupt_stops_a_loop_without_hook(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 0, 0, -1);
  api_sandbox(&a);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, interrupt_later, a.sb), 0);
  mbx_result *r = NULL;
  uint64_t t0 = now_us();
  assert_int_equal(api_run(&a, "while true do end", &r), MBX_INTERRUPTED);
  assert_true(now_us() - t0 < GENEROUS_US);
  pthread_join(t, NULL);
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"instructions\":null,"));
  mbx_result_free(r);
  api_close(&a);
}

/* A host function that sleeps past the deadline is never signalled (its nanosleep is not cut
   short: SA_RESTART does not restart it), its time moves the deadline, and the deadline still
   stops the guest afterwards. */
static int naps_cut_short;

static mbx_status nap(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  struct timespec ts = {0, 300 * 1000 * 1000}, rem = {0, 0};
  if (nanosleep(&ts, &rem) != 0) naps_cut_short++;
  return mbx_host_reply_json(reply, "\"slept\"", 7);
}

static void host_code_is_not_interrupted(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 100, 0, -1);
  mbx_error err;
  assert_int_equal(mbx_policy_add_function(a.p, "nap", nap, NULL, &err), MBX_OK);
  api_sandbox(&a);
  mbx_result *r = NULL;
  naps_cut_short = 0;
  assert_int_equal(api_run(&a, "local a = nap() local b = nap() return a .. b", &r), MBX_OK);
  assert_int_equal(naps_cut_short, 0);
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"value\":\"sleptslept\""));
  mbx_result_free(r);
  assert_int_equal(api_run(&a, "nap() while true do end", &r), MBX_TIME_LIMIT);
  assert_int_equal(naps_cut_short, 0);
  mbx_result_free(r);
  api_close(&a);
}

/* Runs that end right at their deadline, many times: a signal meant for one (sent as it
   ended) never trips the next. */
static void runs_ending_at_the_deadline(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 20, 0, -1);
  api_sandbox(&a);
  int stopped = 0, slow = 0;
  for (int i = 0; i < 40; i++) {
    mbx_result *r = NULL;
    /* From well inside the deadline to past it (the coarse clock's tick is 1-4 ms). */
    char code[128];
    snprintf(code, sizeof code, "local t = os.clock() while os.clock() - t < %.4f do end",
             0.002 + 0.0005 * i);
    mbx_status s = api_run(&a, code, &r);
    assert_true(s == MBX_OK || s == MBX_TIME_LIMIT);
    stopped += s == MBX_TIME_LIMIT;
    mbx_result_free(r);
    if (s != MBX_OK) {
      mbx_error err;
      assert_int_equal(mbx_sandbox_reset(a.sb, &err), MBX_OK);
    }
    /* The next run is not tripped by anything meant for the last one. It may still meet its
       own deadline on a loaded machine (the thread waits for a core): then the deadline did
       pass, at least 20 ms less one coarse tick (4 ms) after the run began. */
    s = api_run(&a, "local s = 0 for i = 1, 2e4 do s = s + i end return s", &r);
    mbx_usage u;
    mbx_result_usage(r, &u);
    if (s != MBX_OK) {
      assert_int_equal(s, MBX_TIME_LIMIT);
      if (u.wall_us < 15000)
        fail_msg("run %d: a clean run tripped after %llu us", i, (unsigned long long)u.wall_us);
      slow++;
      mbx_error err;
      assert_int_equal(mbx_sandbox_reset(a.sb, &err), MBX_OK);
    }
    mbx_result_free(r);
  }
  print_message("%d of 40 runs ended by the deadline; %d clean runs met theirs (load)\n", stopped,
                slow);
  api_close(&a);
}

/* A run on a thread that exits, then on another: each stopped by its deadline, and the
   signals that may still go to the dead thread's id harm no one. */
static void *run_on_thread(void *arg) {
  mbx_result *r = NULL;
  mbx_status s = api_run(arg, "while true do end", &r);
  mbx_result_free(r);
  return (void *)(intptr_t)s;
}

static void thread_exit(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 100, 0, -1);
  api_sandbox(&a);
  for (int i = 0; i < 3; i++) {
    pthread_t t;
    void *s = NULL;
    assert_int_equal(pthread_create(&t, NULL, run_on_thread, &a), 0);
    pthread_join(t, &s);
    assert_int_equal((intptr_t)s, MBX_TIME_LIMIT);
    mbx_error err;
    assert_int_equal(mbx_sandbox_reset(a.sb, &err), MBX_OK);
  }
  mbx_result *r = NULL;
  assert_int_equal(api_run(&a, "while true do end", &r), MBX_TIME_LIMIT);
  mbx_result_free(r);
  api_close(&a);
}

/* A host thread that blocks every signal (a sigwait or signalfd server's workers), the runtime
   made on another thread: its runs use the count hook, so a pure loop still stops at its
   deadline (the signal would never arrive), and a thread that lets the signal through keeps
   the signal path. */
typedef struct blocked_run {
  api *a;
  int block;
  mbx_status status;
  int counted;
} blocked_run;

static void *run_maybe_blocked(void *arg) {
  blocked_run *br = arg;
  if (br->block) {
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, NULL);
  }
  mbx_result *r = NULL;
  br->status = api_run(br->a, "while true do end", &r);
  mbx_usage u;
  mbx_result_usage(r, &u);
  br->counted = u.instructions_counted;
  mbx_result_free(r);
  return NULL;
}

static void blocking_thread_uses_the_count_hook(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  api a;
  api_open(&a, 100, 0, -1);
  api_sandbox(&a);
  for (int block = 1; block >= 0; block--) {
    blocked_run br = {&a, block, MBX_OK, 0};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, run_maybe_blocked, &br), 0);
    pthread_join(t, NULL);
    assert_int_equal(br.status, MBX_TIME_LIMIT);
    assert_int_equal(br.counted, block); /* the count hook only where the signal is blocked */
    mbx_error err;
    assert_int_equal(mbx_sandbox_reset(a.sb, &err), MBX_OK);
  }
  api_close(&a);
}

/* A host that replaces the handler: the watchdog sees it (every 10 ms while runs go on, and
   before any signal), never sends the signal into the host's handler, and the run falls back
   to the count hook at its next metered call; later runs use the count hook (and count). A
   signal the process handles already is refused by the setter, naming it. */
static volatile sig_atomic_t foreign_calls;
static void foreign(int sig) {
  (void)sig;
  foreign_calls++;
}

static void replaced_handler_falls_back(void **state) {
  (void)state;
  NEEDS_SIGNALS();
  int sig = SIGRTMAX - 7;
  api a;
  api_open(&a, 150, 0, sig);
  assert_int_equal(mbx_runtime_deadline_signal(a.rt), sig);
  api_sandbox(&a);
  mbx_result *r = NULL;
  assert_int_equal(api_run(&a, "return 1", &r), MBX_OK); /* the watchdog is up */
  mbx_result_free(r);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = foreign;
  sigemptyset(&sa.sa_mask);
  assert_int_equal(sigaction(sig, &sa, NULL), 0);
  assert_int_equal(
      api_run(&a, "local t = {'a'} while true do t[1] = table.concat(t) .. '' end", &r),
      MBX_TIME_LIMIT);
  mbx_usage u;
  mbx_result_usage(r, &u);
  assert_int_equal(u.instructions_counted, 0); /* it started without a hook */
  mbx_result_free(r);
  assert_int_equal(foreign_calls, 0);
  assert_int_equal(mbx_runtime_deadline_signal(a.rt), 0);
  mbx_error err;
  assert_int_equal(mbx_sandbox_reset(a.sb, &err), MBX_OK);
  assert_int_equal(api_run(&a, "while true do end", &r), MBX_TIME_LIMIT);
  mbx_result_usage(r, &u);
  assert_int_equal(u.instructions_counted, 1);
  assert_true(u.instructions > 0);
  mbx_result_free(r);
  assert_int_equal(foreign_calls, 0);
  mbx_sandbox_free(a.sb);
  a.sb = NULL;
  assert_int_equal(mbx_runtime_set_deadline_signal(a.rt, sig, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "already has a handler"));
  assert_int_equal(mbx_runtime_set_deadline_signal(a.rt, SIGINT, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "not SIGUSR1, SIGUSR2 or a real-time signal"));
  /* 0: the count hook, always. */
  assert_int_equal(mbx_runtime_set_deadline_signal(a.rt, 0, &err), MBX_OK);
  assert_int_equal(mbx_runtime_deadline_signal(a.rt), 0);
  api_close(&a);
}

/* The setter refuses while sandboxes are live, and a signal the calling thread blocks. */
static void setter_checks(void **state) {
  (void)state;
  api a;
  api_open(&a, 100, 0, -1);
  api_sandbox(&a);
  mbx_error err;
  assert_int_equal(mbx_runtime_set_deadline_signal(a.rt, SIGRTMAX - 8, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "while sandboxes are live"));
  mbx_sandbox_free(a.sb);
  a.sb = NULL;
  if (mbxV_watchdog_supported()) {
    sigset_t set, old;
    sigemptyset(&set);
    sigaddset(&set, SIGRTMAX - 8);
    pthread_sigmask(SIG_BLOCK, &set, &old);
    assert_int_equal(mbx_runtime_set_deadline_signal(a.rt, SIGRTMAX - 8, &err),
                     MBX_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "blocks it"));
    pthread_sigmask(SIG_SETMASK, &old, NULL);
  }
  assert_int_equal(mbx_runtime_set_deadline_signal(NULL, 0, &err), MBX_INVALID_ARGUMENT);
  api_close(&a);
}

/* Deterministic policies keep the count hook (their instruction counts are part of the run),
   and so does every run of a build under ThreadSanitizer, which defers signal handlers to its
   next intercepted call (a pure loop would never stop): the tsan preset checks that here. */
static void count_hook_where_signals_cannot_serve(void **state) {
  (void)state;
  api a;
  api_open(&a, 150, 0, -1);
  if (!mbxV_watchdog_supported()) {
    assert_int_equal(mbx_runtime_deadline_signal(a.rt), 0);
  } else {
    assert_int_not_equal(mbx_runtime_deadline_signal(a.rt), 0);
    mbx_error err;
    assert_int_equal(mbx_policy_set_deterministic(a.p, 1, &err), MBX_OK);
    /* Deterministic runs count their instructions: without a limit the policy is refused,
       with one far beyond the deadline the deadline still comes by the count hook. */
    assert_null(mbx_sandbox_new(a.rt, a.p, &err));
    assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
    assert_non_null(strstr(err.message, "a deterministic policy needs an instruction limit: "
                                        "set MBX_LIMIT_INSTRUCTIONS"));
    mbx_policy_set_limit(a.p, MBX_LIMIT_INSTRUCTIONS, (uint64_t)1 << 50);
  }
  api_sandbox(&a);
  mbx_result *r = NULL;
  uint64_t t0 = now_us();
  assert_int_equal(api_run(&a, "local s = 0 while true do s = s + 1 end", &r), MBX_TIME_LIMIT);
  assert_true(now_us() - t0 < GENEROUS_US);
  mbx_usage u;
  mbx_result_usage(r, &u);
  assert_int_equal(u.instructions_counted, 1);
  assert_true(u.instructions > 0);
  mbx_result_free(r);
  api_close(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(loop_stopped_by_deadline_without_hook),
      cmocka_unit_test(stale_generations_are_ignored),
      cmocka_unit_test(deadline_inside_nested_coroutines),
      cmocka_unit_test(idle_watch_leaves_and_rejoins),
      cmocka_unit_test(on_signal_arms_the_chain),
      cmocka_unit_test(hook_set_rechecks_the_trip),
      cmocka_unit_test(usage_instructions_null_without_hook),
      cmocka_unit_test(interrupt_stops_a_loop_without_hook),
      cmocka_unit_test(host_code_is_not_interrupted),
      cmocka_unit_test(runs_ending_at_the_deadline),
      cmocka_unit_test(thread_exit),
      cmocka_unit_test(blocking_thread_uses_the_count_hook),
      cmocka_unit_test(setter_checks),
      cmocka_unit_test(count_hook_where_signals_cannot_serve),
      /* Last: it leaves a foreign handler on its signal. */
      cmocka_unit_test(replaced_handler_falls_back),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
