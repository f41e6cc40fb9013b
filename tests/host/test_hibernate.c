/* tests/host/test_hibernate.c -- unit tests of host/hibernate.c through the public API: a
   hibernated sandbox, woken, is indistinguishable from one that never slept; the idle sweep;
   hibernation and wake from other threads; what memory it gives back. */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* MBX_ARENA_MALLOC builds (the asan preset) cannot hibernate: the heap is malloc blocks. */
#ifdef MBX_ARENA_MALLOC
#define NEEDS_THE_ARENA() skip()
#else
#define NEEDS_THE_ARENA() ((void)0)
#endif

/* A policy with a fixed seed, one memory file and an external function. */
static mbx_sandbox *session(mbx_runtime *rt, uint64_t memory) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_set_seed(p, 42, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "ask", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_file(p, "/data/in.txt", "hello", 5, &err), MBX_OK);
  if (memory) assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, memory), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

/* Run code; json gets the result, or only its value with values_only (the usage's
   instruction count depends on the bytecode cache: the first run of a text parses it). */
static int values_only;

static mbx_status run(mbx_sandbox *sb, const char *code, char *json, size_t size) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s >= MBX_API_ERROR_BASE) {
    snprintf(json, size, "API %s: %s", mbx_status_name(s), err.message);
    return s;
  }
  if (values_only && s == MBX_OK)
    snprintf(json, size, "%s", mbx_result_value_json(res, NULL));
  else
    snprintf(json, size, "%s", mbx_result_json(res, NULL));
  mbx_result_free(res);
  return s;
}

static void run_ok(mbx_sandbox *sb, const char *code, char *json, size_t size) {
  mbx_status s = run(sb, code, json, size);
  if (s != MBX_OK) fail_msg("%s: %s", code, json);
}

/* Globals the guest keeps: integers shaped like pointers into the slot space and past it,
   doubles whose bits look like pointers, string.pack bytes of both, nested tables, a
   closure with an upvalue, a coroutine suspended mid-way, a file written to /tmp. */
static const char *const build_state =
    "P = {} for i = 0, 63 do P[#P + 1] = 0x110000000000 + i * 0x100000008 end "
    "P[#P + 1] = math.mininteger P[#P + 1] = -1 "
    "D = {} for i = 1, 32 do D[i] = string.unpack('<d', string.pack('<j', 0x1100000000 + i * 8)) end "
    "S = string.pack('<jjdz', 0x123456789abc, P[7], D[3], 'tail') "
    "T = setmetatable({x = {y = {z = 'deep'}}}, {__index = function(t, k) return k .. '!' end}) "
    "local n = 0 COUNT = function() n = n + 1 return n end COUNT() "
    "CO = coroutine.create(function(a) local b = coroutine.yield(a + 1) return b * 2 end) "
    "assert(select(2, coroutine.resume(CO, 10)) == 11) "
    "local f = assert(io.open('/tmp/note.txt', 'w')) f:write('kept ', #P) f:close() "
    "R1 = math.random(1, 1 << 40) "
    "return #P";

/* Everything the state holds, read back; and what it does next (the random sequence, the
   closure, the coroutine, the memory). */
static const char *const read_state =
    "local parts = {} for i = 1, #P do parts[#parts + 1] = string.format('%x', P[i]) end "
    "for i = 1, #D do parts[#parts + 1] = string.format('%a', D[i]) end "
    "local a, b, c, d = string.unpack('<jjdz', S) "
    "parts[#parts + 1] = string.format('%x %x %a %s', a, b, c, d) "
    "parts[#parts + 1] = T.x.y.z .. T.missing "
    "parts[#parts + 1] = COUNT() .. ' ' .. select(2, coroutine.resume(CO, 21)) "
    "parts[#parts + 1] = assert(io.open('/tmp/note.txt')):read('a') "
    "parts[#parts + 1] = assert(io.open('/data/in.txt')):read('a') "
    "parts[#parts + 1] = R1 .. ' ' .. math.random(1, 1 << 40) .. ' ' .. math.random() "
    "parts[#parts + 1] = collectgarbage('count') "
    "return table.concat(parts, ',')";

/* Two sandboxes from the same policy, built the same way; one sleeps and is woken by the
   read. Their reads (the random draws and the heap's size included) are identical. */
static void woken_sandbox_is_the_one_that_slept(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *awake = session(snippet_runtime, 0), *slept = session(snippet_runtime, 0);
  static char a[16384], b[16384];
  values_only = 1;
  /* Both texts in the bytecode cache first: a miss parses in the guest heap, a hit loads the
     bytecode, and the heap's size (collectgarbage's count, in the read) would differ. */
  mbx_sandbox *warm = session(snippet_runtime, 0);
  run_ok(warm, build_state, a, sizeof a);
  run_ok(warm, read_state, a, sizeof a);
  mbx_sandbox_free(warm);
  run_ok(awake, build_state, a, sizeof a);
  run_ok(slept, build_state, b, sizeof b);
  assert_string_equal(a, b);
  mbx_error err;
  assert_int_equal(mbx_sandbox_hibernated(slept), 0);
  assert_int_equal(mbx_sandbox_hibernate(slept, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_hibernated(slept), 1);
  assert_int_equal(mbx_sandbox_hibernate(slept, &err), MBX_OK); /* asleep already: no-op */
  run_ok(awake, read_state, a, sizeof a);
  run_ok(slept, read_state, b, sizeof b);
  assert_int_equal(mbx_sandbox_hibernated(slept), 0);
  assert_non_null(strstr(b, "deepmissing!")); /* the read ran */
  assert_non_null(strstr(b, "kept 66"));
  assert_string_equal(a, b);
  /* Again, after the second run changed everything: sleeping twice is no different. */
  assert_int_equal(mbx_sandbox_hibernate(slept, &err), MBX_OK);
  run_ok(awake, read_state, a, sizeof a);
  run_ok(slept, read_state, b, sizeof b);
  assert_string_equal(a, b);
  values_only = 0;
  mbx_sandbox_free(awake);
  mbx_sandbox_free(slept);
}

/* A sandbox paused at an external call sleeps and is resumed where it stopped; paused answers
   from outside the state meanwhile, and an interrupt to it is discarded. */
static void paused_sandbox_sleeps_and_resumes(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *sb = session(snippet_runtime, 0);
  static char json[8192];
  mbx_status s = run(sb, "local x = 5 local got = ask(x) return got * x + math.random(1, 9)", json,
                     sizeof json);
  assert_int_equal(s, MBX_PAUSED);
  mbx_error err;
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_hibernated(sb), 1);
  assert_int_equal(mbx_sandbox_paused(sb), 1);
  assert_int_equal(mbx_sandbox_interrupt(sb), MBX_OK);
  assert_int_equal(mbx_sandbox_hibernated(sb), 1); /* neither woke it */
  /* A plain run is still refused as for a paused sandbox (it wakes it to look). */
  assert_int_equal(run(sb, "return 1", json, sizeof json), MBX_SANDBOX_PAUSED);
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  mbx_result *res = NULL;
  assert_int_equal(mbx_resume(sb, "7", 1, &res, &err), MBX_OK);
  size_t len;
  const char *value = mbx_result_value_json(res, &len);
  /* 35 plus the seed's first draw in 1..9: the same as a sandbox that never slept. */
  mbx_sandbox *other = session(snippet_runtime, 0);
  assert_int_equal(run(other, "local x = 5 local got = ask(x) return got * x + math.random(1, 9)",
                       json, sizeof json),
                   MBX_PAUSED);
  mbx_result *res2 = NULL;
  assert_int_equal(mbx_resume(other, "7", 1, &res2, &err), MBX_OK);
  assert_string_equal(value, mbx_result_value_json(res2, NULL));
  mbx_result_free(res);
  mbx_result_free(res2);
  mbx_sandbox_free(other);
  mbx_sandbox_free(sb);
}

/* A checkpoint taken before sleeping is rewound to after waking, and a sandbox woken by the
   rewind itself is rewound too. */
static void checkpoint_and_rewind_across_sleep(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *sb = session(snippet_runtime, 0);
  static char json[8192];
  mbx_error err;
  run_ok(sb, "X = 1 return X", json, sizeof json);
  assert_int_equal(mbx_sandbox_checkpoint(sb, &err), MBX_OK);
  run_ok(sb, "X = 2 Y = {} for i = 1, 1000 do Y[i] = i end return X", json, sizeof json);
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_hibernated(sb), 0);
  run_ok(sb, "return {X, Y == nil}", json, sizeof json);
  assert_non_null(strstr(json, "\"value\":[1,true]"));
  /* Checkpoint right after a wake, then rewind after another sleep. */
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_checkpoint(sb, &err), MBX_OK);
  run_ok(sb, "X = 3 return X", json, sizeof json);
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
  run_ok(sb, "return X", json, sizeof json);
  assert_non_null(strstr(json, "\"value\":1"));
  /* A reset of a sleeping sandbox. */
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  run_ok(sb, "return X == nil", json, sizeof json);
  assert_non_null(strstr(json, "\"value\":true"));
  /* Freed while asleep. */
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  mbx_sandbox_free(sb);
}

/* The memory limit counts what it counted before the sleep: the same allocation fails at the
   same point, and the usage reports the same heap. */
static void memory_limit_holds_after_wake(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *awake = session(snippet_runtime, 1u << 20),
              *slept = session(snippet_runtime, 1u << 20);
  static char a[8192], b[8192];
  const char *grow = "BIG = {} for i = 1, 20000 do BIG[i] = i end return collectgarbage('count')";
  run_ok(awake, grow, a, sizeof a);
  run_ok(slept, grow, b, sizeof b);
  mbx_error err;
  assert_int_equal(mbx_sandbox_hibernate(slept, &err), MBX_OK);
  const char *fill = "local t = {} for i = 1, 1e7 do t[i] = i end return #t";
  mbx_sandbox *warm = session(snippet_runtime, 1u << 20); /* the cache's parse, paid here */
  assert_int_equal(run(warm, fill, a, sizeof a), MBX_MEMORY_LIMIT);
  mbx_sandbox_free(warm);
  assert_int_equal(run(awake, fill, a, sizeof a), MBX_MEMORY_LIMIT);
  assert_int_equal(run(slept, fill, b, sizeof b), MBX_MEMORY_LIMIT);
  /* memory_peak and instructions included. */
  char *ua = strstr(a, "\"usage\""), *ub = strstr(b, "\"usage\"");
  assert_non_null(ua);
  assert_non_null(ub);
  char *wa = strstr(ua, "\"wall_us\""), *wb = strstr(ub, "\"wall_us\"");
  if (wa) *wa = '\0';
  if (wb) *wb = '\0';
  assert_string_equal(ua, ub);
  mbx_sandbox_free(awake);
  mbx_sandbox_free(slept);
}

typedef struct thread_job {
  mbx_sandbox *sb;
  char json[8192];
  mbx_status status;
  int hibernate; /* put it to sleep there instead of running */
} thread_job;

static void *on_thread(void *arg) {
  thread_job *j = arg;
  if (j->hibernate) {
    j->status = mbx_sandbox_hibernate(j->sb, NULL);
    return NULL;
  }
  j->status = run(j->sb, "COUNT = (COUNT or 0) + 1 return COUNT", j->json, sizeof j->json);
  return NULL;
}

/* Slept on one thread, woken on another, and the other way round. */
static void hibernate_and_wake_on_other_threads(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *sb = session(snippet_runtime, 0);
  static char json[8192];
  run_ok(sb, "COUNT = 10 return COUNT", json, sizeof json);
  mbx_error err;
  for (int round = 0; round < 3; round++) {
    assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
    thread_job j = {.sb = sb};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, on_thread, &j), 0);
    pthread_join(t, NULL);
    assert_int_equal(j.status, MBX_OK);
    char want[32];
    snprintf(want, sizeof want, "\"value\":%d", 11 + 2 * round);
    if (strstr(j.json, want) == NULL) fail_msg("%s lacks %s", j.json, want);
    thread_job h = {.sb = sb, .hibernate = 1};
    assert_int_equal(pthread_create(&t, NULL, on_thread, &h), 0);
    pthread_join(t, NULL);
    assert_int_equal(h.status, MBX_OK);
    assert_int_equal(mbx_sandbox_hibernated(sb), 1);
    run_ok(sb, "COUNT = COUNT + 1 return COUNT", json, sizeof json);
  }
  mbx_sandbox_free(sb);
}

typedef struct interrupter {
  mbx_sandbox *sb;
  _Atomic int stop;
  unsigned long sent;
  int ask_paused; /* also mbx_sandbox_paused */
} interrupter;

static void *interrupt_loop(void *arg) {
  interrupter *it = arg;
  while (!atomic_load(&it->stop)) {
    mbx_sandbox_interrupt(it->sb);
    if (it->ask_paused && mbx_sandbox_paused(it->sb) != 0) abort();
    it->sent++;
  }
  return NULL;
}

/* Interrupts from another thread while the sandbox sleeps and wakes over and over (by runs:
   they end ok or interrupted, never otherwise), then interrupts and paused() while it goes to
   sleep (as an owner's would while the runtime's sweep hibernates it): neither touches a slot
   without pages (that would crash). */
static void interrupts_race_hibernation(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_sandbox *sb = session(snippet_runtime, 0);
  interrupter it = {.sb = sb};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, interrupt_loop, &it), 0);
  static char json[8192];
  mbx_error err;
  for (int i = 0; i < 300; i++) {
    mbx_status s = mbx_sandbox_hibernate(sb, &err);
    if (s != MBX_OK) fail_msg("hibernate: %s", err.message);
    s = run(sb, "return 1", json, sizeof json);
    assert_true(s == MBX_OK || s == MBX_INTERRUPTED);
    if (s == MBX_INTERRUPTED) assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  }
  atomic_store(&it.stop, 1);
  pthread_join(t, NULL);
  assert_true(it.sent > 0);
  /* paused() races only the hibernation (as the owner's would race the sweep's): any other
     call on another thread at the same time is outside its contract. */
  for (int i = 0; i < 100; i++) {
    interrupter asker = {.sb = sb, .ask_paused = 1};
    assert_int_equal(pthread_create(&t, NULL, interrupt_loop, &asker), 0);
    assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
    atomic_store(&asker.stop, 1);
    pthread_join(t, NULL);
    assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK); /* wakes it */
  }
  mbx_sandbox_free(sb);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* The runtime's sweep: sandboxes idle past the setting sleep when a call on any sandbox ends;
   the one just used does not; each wakes on its next call with its state. */
static void idle_sweep_hibernates_idle_sandboxes(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_get_hibernate(rt), 0);
  /* 100 ms: the one just used must not look idle to the sweep its own call's end runs, even
     on a busy machine. */
  assert_int_equal(mbx_runtime_set_hibernate(rt, 100, &err), MBX_OK);
  assert_int_equal(mbx_runtime_get_hibernate(rt), 100);
  enum { N = 40 }; /* more than one sweep's 32 */
  mbx_sandbox *sb[N];
  static char json[8192];
  for (int i = 0; i < N; i++) {
    sb[i] = session(rt, 0);
    char code[64];
    snprintf(code, sizeof code, "ID = %d return ID", i);
    run_ok(sb[i], code, json, sizeof json);
  }
  /* Past the idle time (generously: the coarse clock's tick is a few ms), one call on sb[0]
     sweeps at most 32 (a slow machine may have put some to sleep already: sweeps run as the
     sandboxes are made too); the next call's end goes on with the rest. */
  int asleep = 0;
  for (int i = 1; i < N; i++)
    asleep += mbx_sandbox_hibernated(sb[i]);
  sleep_ms(150);
  run_ok(sb[0], "return ID", json, sizeof json);
  int after = 0;
  for (int i = 1; i < N; i++)
    after += mbx_sandbox_hibernated(sb[i]);
  int due = N - 1 - asleep;
  assert_int_equal(after - asleep, due < 32 ? due : 32);
  for (int tries = 0; tries < 40 && !mbx_sandbox_hibernated(sb[1]); tries++) {
    if (tries) sleep_ms(150);
    run_ok(sb[0], "return ID", json, sizeof json);
  }
  assert_int_equal(mbx_sandbox_hibernated(sb[0]), 0);
  for (int i = 1; i < N; i++)
    assert_int_equal(mbx_sandbox_hibernated(sb[i]), 1);
  for (int i = 0; i < N; i++) {
    run_ok(sb[i], "return ID", json, sizeof json);
    char want[32];
    snprintf(want, sizeof want, "\"value\":%d", i);
    assert_non_null(strstr(json, want));
  }
  /* Off: nothing sleeps any more. */
  assert_int_equal(mbx_runtime_set_hibernate(rt, 0, &err), MBX_OK);
  for (int i = 0; i < N; i++)
    run_ok(sb[i], "return ID", json, sizeof json);
  sleep_ms(250);
  run_ok(sb[0], "return ID", json, sizeof json);
  for (int i = 1; i < N; i++)
    assert_int_equal(mbx_sandbox_hibernated(sb[i]), 0);
  for (int i = 0; i < N; i++)
    mbx_sandbox_free(sb[i]);
  mbx_runtime_free(rt);
}

/* RssAnon + VmPTE of this process, in bytes. */
static uint64_t rss_and_page_tables(void) {
  FILE *f = fopen("/proc/self/status", "r");
  assert_non_null(f);
  char line[256];
  uint64_t total = 0;
  while (fgets(line, sizeof line, f)) {
    unsigned long long kb;
    if (sscanf(line, "RssAnon: %llu kB", &kb) == 1 || sscanf(line, "VmPTE: %llu kB", &kb) == 1)
      total += kb * 1024;
  }
  fclose(f);
  return total;
}

/* Sleeping sandboxes give their heap's pages and page tables back: 64 sessions holding about
   256 KiB each cost far less asleep (their images are a few KiB of zeros and small integers);
   awake again, they hold their data. */
static void hibernation_gives_memory_back(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  enum { N = 64 };
  mbx_sandbox *sb[N];
  static char json[8192];
  for (int i = 0; i < N; i++) {
    sb[i] = session(snippet_runtime, 0);
    run_ok(sb[i], "BIG = {} for i = 1, 16000 do BIG[i] = 0x110000000000 end return #BIG", json,
           sizeof json);
  }
  uint64_t awake = rss_and_page_tables();
  mbx_error err;
  for (int i = 0; i < N; i++)
    assert_int_equal(mbx_sandbox_hibernate(sb[i], &err), MBX_OK);
  uint64_t asleep = rss_and_page_tables();
  /* Each gave back at least 192 KiB of its 256 KiB table (one value: its image is small) and
     its ~40 KiB of libraries. */
  if (asleep + (uint64_t)N * (192u << 10) > awake)
    fail_msg("awake %llu KiB, asleep %llu KiB: less than %u KiB per sandbox given back",
             (unsigned long long)(awake >> 10), (unsigned long long)(asleep >> 10), 192u);
  for (int i = 0; i < N; i++) {
    run_ok(sb[i], "local s = 0 for i = 1, #BIG do s = s + (BIG[i] >> 40) end return s", json,
           sizeof json);
    assert_non_null(strstr(json, "\"value\":272000"));
    mbx_sandbox_free(sb[i]);
  }
}

/* A deterministic session's replay log is host memory: it keeps recording across a sleep
   (a snapshot of a sleeping sandbox needs no wake), and a restore of it replays to the same
   state as the session that slept. The runtime's heap estimate counts the sleeping heap. */
static void deterministic_log_and_heap_estimate_across_sleep(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_set_limit_checked(p, MBX_LIMIT_INSTRUCTIONS, 100000000, &err),
                   MBX_OK);
  assert_int_equal(mbx_policy_set_deterministic(p, 1, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_seed(p, 9, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  static char json[8192], again[8192];
  run_ok(sb, "N = math.random(1, 1000) T = {} for i = 1, 500 do T[i] = i * N end return N", json,
         sizeof json);
  uint64_t heap = mbx_runtime_usage(snippet_runtime, MBX_CAP_HEAP_BYTES);
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_runtime_usage(snippet_runtime, MBX_CAP_HEAP_BYTES), heap);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_hibernated(sb), 1); /* the log is host memory */
  mbx_free(blob);
  const char *next = "N = N + math.random(1, 1000) return N + #T";
  run_ok(sb, next, json, sizeof json);
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *restored = mbx_sandbox_restore(snippet_runtime, p, blob, len, &err);
  if (restored == NULL) fail_msg("mbx_sandbox_restore: %s", err.message);
  mbx_free(blob);
  const char *read = "return {N, #T, T[500], math.random(1, 1 << 30)}";
  run_ok(sb, read, json, sizeof json);
  run_ok(restored, read, again, sizeof again);
  char *va = strstr(json, "\"value\""), *vb = strstr(again, "\"value\"");
  assert_non_null(va);
  assert_non_null(vb);
  assert_string_equal(va, vb);
  mbx_sandbox_free(restored);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
}

static int whole_results(void **state) {
  (void)state;
  values_only = 0;
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup(woken_sandbox_is_the_one_that_slept, whole_results),
      cmocka_unit_test_setup(paused_sandbox_sleeps_and_resumes, whole_results),
      cmocka_unit_test_setup(checkpoint_and_rewind_across_sleep, whole_results),
      cmocka_unit_test_setup(memory_limit_holds_after_wake, whole_results),
      cmocka_unit_test_setup(hibernate_and_wake_on_other_threads, whole_results),
      cmocka_unit_test_setup(interrupts_race_hibernation, whole_results),
      cmocka_unit_test_setup(idle_sweep_hibernates_idle_sandboxes, whole_results),
      cmocka_unit_test_setup(hibernation_gives_memory_back, whole_results),
      cmocka_unit_test_setup(deterministic_log_and_heap_estimate_across_sleep, whole_results),
  };
  return cmocka_run_group_tests_name("host/hibernate", tests, snippet_setup, snippet_teardown);
}
