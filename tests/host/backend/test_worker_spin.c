/* tests/host/backend/test_worker_spin.c -- the bounded spin before a blocking wait (host/backend/worker_spin.c):
   it catches a byte without consuming it, gives up at its bound, backs off after misses, and an
   idle worker stops using CPU after its last reply; a warm worker's prepared state is never
   shared between sandboxes. */
#include <dirent.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/backend/worker_spin.h"
#include "include/moonbox.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void pair(int sv[2]) {
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

static void test_catches_a_byte_without_consuming_it(void **state) {
  (void)state;
  int sv[2];
  pair(sv);
  mbxH_spin s = {0};
  assert_int_equal(write(sv[1], "x", 1), 1);
  assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), mbxH_spin_usable() ? 1 : 0);
  char c = 0;
  assert_int_equal(read(sv[0], &c, 1), 1); /* still there for the caller's own read */
  assert_int_equal(c, 'x');
  close(sv[0]);
  close(sv[1]);
}

static void test_an_end_is_readable(void **state) {
  (void)state;
  if (!mbxH_spin_usable()) skip();
  int sv[2];
  pair(sv);
  mbxH_spin s = {0};
  close(sv[1]); /* the caller's read must see the EOF at once, not after a spin */
  assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), 1);
  close(sv[0]);
}

static void test_gives_up_at_its_bound_and_backs_off(void **state) {
  (void)state;
  if (!mbxH_spin_usable()) skip();
  int sv[2];
  pair(sv);
  mbxH_spin s = {0};
  uint64_t t0 = now_ns();
  assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), 0);
  uint64_t spent = now_ns() - t0;
  assert_true(spent >= MBXH_SPIN_BUSY_NS); /* the bound, or a preemption past the gap */
  assert_true(spent < 1000000000u);        /* generous: only proves the spin ended by itself */
  /* An earlier limit of the caller's (a deadline) ends it first. */
  s = (mbxH_spin){0};
  t0 = now_ns();
  assert_int_equal(mbxH_spin_wait(&s, sv[0], now_ns() + 1000), 0);
  /* Misses in a row: ever more waits do not spin, never more than MBXH_SPIN_SKIP_MAX. */
  unsigned spun = 0, waits = 0;
  for (s = (mbxH_spin){0}; waits < 400; waits++) {
    uint32_t before = s.skip;
    assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), 0);
    if (before == 0) spun++;
    assert_true(s.skip <= MBXH_SPIN_SKIP_MAX);
  }
  assert_true(spun < 20); /* 1 + 1 + 2 + ... then one in every 64 */
  assert_true(spun >= 400 / (MBXH_SPIN_SKIP_MAX + 1));
  /* A quick catch makes the next wait spin again at once (a catch this thread was preempted
     through counts as late, a miss: on a loaded machine it may take a few tries). */
  int quick = 0;
  for (int tries = 0; tries < 200 && !quick; tries++) {
    while (s.skip)
      assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), 0);
    assert_int_equal(write(sv[1], "y", 1), 1);
    assert_int_equal(mbxH_spin_wait(&s, sv[0], 0), 1);
    char c;
    assert_int_equal(read(sv[0], &c, 1), 1);
    quick = s.misses == 0 && s.skip == 0;
  }
  assert_true(quick);
  close(sv[0]);
  close(sv[1]);
}

/* ---- through real workers ---- */

/* An isolated runtime whose round trips spin first (MBX_CAP_WORKER_SPIN). */
static mbx_runtime *isolated(void) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, MBX_TEST_WORKER, &err), MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
  assert_int_equal(mbx_runtime_get_cap(rt, MBX_CAP_WORKER_SPIN), 0); /* off by default */
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_WORKER_SPIN, 1, &err), MBX_OK);
  assert_int_equal(mbx_runtime_get_cap(rt, MBX_CAP_WORKER_SPIN), 1);
  return rt;
}

static void test_the_cap_takes_0_or_1(void **state) {
  (void)state;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_WORKER_SPIN, 2, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "MBX_CAP_WORKER_SPIN must be 0"));
  assert_int_equal(mbx_runtime_get_cap(rt, MBX_CAP_WORKER_SPIN), 0);
  mbx_runtime_free(rt);
}

static void want(mbx_sandbox *sb, const char *code, const char *value) {
  mbx_result *res;
  mbx_error err;
  if (mbx_run(sb, code, strlen(code), NULL, 0, &res, &err) != MBX_OK)
    fail_msg("%s: %s", code, res ? mbx_result_json(res, NULL) : err.message);
  if (strcmp(mbx_result_value_json(res, NULL), value) != 0)
    fail_msg("%s: %s, not %s", code, mbx_result_value_json(res, NULL), value);
  mbx_result_free(res);
}

/* CPU time (ns, /proc/PID/schedstat's first field) of every process below this one: the
   zygote, the pid namespace's init and the workers. */
static uint64_t cpu_of(pid_t pid, int depth) {
  char path[96];
  uint64_t total = 0;
  if (depth > 0) {
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    unsigned long long ns = 0;
    if (f && fscanf(f, "%llu", &ns) == 1) total += ns;
    if (f) fclose(f);
  }
  if (depth > 3) return total;
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char cp[320];
    snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", (int)pid, e->d_name);
    FILE *f = fopen(cp, "r");
    int kid;
    while (f && fscanf(f, "%d", &kid) == 1)
      total += cpu_of(kid, depth + 1);
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return total;
}

static void sleep_ms(unsigned ms) {
  struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* An idle worker holds no CPU past the spin's bound after its last reply: a few hundred
   milliseconds after it, its CPU time (and every other worker's) has stopped growing. A
   worker that kept spinning would add most of the wait (a share of it on a busy machine). */
static void test_an_idle_worker_stops_spinning(void **state) {
  (void)state;
  mbx_runtime *rt = isolated();
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  for (int i = 0; i < 200; i++)
    want(sb, "return 1+1", "2");
  sleep_ms(100); /* the spin after the last reply, and the pool's refill, are over */
  uint64_t c0 = cpu_of(getpid(), 0);
  sleep_ms(500);
  uint64_t grew = cpu_of(getpid(), 0) - c0;
  if (grew >= 10000000u)
    fail_msg("the workers used %llu us of CPU while idle", (unsigned long long)(grew / 1000));
  /* And it still answers at once after the pause (the spin's state does not strand it). */
  want(sb, "return 40+2", "42");
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* What a warm worker prepares before its hand-out (a state from the plain template, a run of
   ours) is never what the next sandbox sees of the last one: globals, library tables, the
   string metatable, the registry's loaded table, across many fresh sandboxes. */
static void test_prepared_state_is_never_shared(void **state) {
  (void)state;
  mbx_runtime *rt = isolated();
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  for (int i = 0; i < 8; i++) {
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    assert_non_null(sb);
    want(sb,
         "return leak == nil and string.leak == nil and math.leak == nil and "
         "getmetatable('').leak == nil and table.leak == nil",
         "true");
    want(sb,
         "leak = 'g' string.leak = 's' math.leak = 'm' getmetatable('').leak = 'mt' "
         "table.leak = 't' return leak .. string.leak .. math.leak .. table.leak .. "
         "getmetatable('').leak",
         "\"gsmtmt\"");
    want(sb, "return leak", "\"g\""); /* within one sandbox, state lives on */
    mbx_sandbox_free(sb);
  }
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_catches_a_byte_without_consuming_it),
      cmocka_unit_test(test_an_end_is_readable),
      cmocka_unit_test(test_gives_up_at_its_bound_and_backs_off),
      cmocka_unit_test(test_the_cap_takes_0_or_1),
      cmocka_unit_test(test_an_idle_worker_stops_spinning),
      cmocka_unit_test(test_prepared_state_is_never_shared),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
