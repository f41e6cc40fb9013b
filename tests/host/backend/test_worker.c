/* Also the test of host/backend/worker_pool.c and worker_io.c (the pool and its I/O). */
/* tests/host/backend/test_worker.c -- worker mode (host/backend/worker.c, host/worker/main.c): the public API
   with MBX_CAP_ISOLATE, and a worker that crashes, spins in C, makes forbidden system calls,
   writes bad frames or is killed from outside -- each contained, reported with its own reason,
   and the next run succeeding on a new worker; no process or fd leaks over many sandboxes. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "include/moonbox.h"

/* A generous bound on a contained failure (the machine is loaded): the point of each test is
   the reason, the bound only proves nothing hung. */
#define GENEROUS_MS 30000

/* The workers under test: the build's, or the copies a non-root run was given (main). */
static const char *g_worker = MBX_TEST_WORKER;
static const char *g_worker_hooks = MBX_TEST_WORKER_HOOKS;

typedef struct fixture {
  mbx_runtime *rt;
  mbx_policy *p;
} fixture;

static mbx_runtime *isolated(const char *worker) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, worker, &err), MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
  return rt;
}

static int setup_plain(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->rt = isolated(g_worker);
  f->p = mbx_policy_new();
  *state = f;
  return 0;
}

static int setup_hooks(void **state) {
  fixture *f = calloc(1, sizeof *f);
  f->rt = isolated(g_worker_hooks);
  f->p = mbx_policy_new();
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mbx_policy_free(f->p);
  mbx_runtime_free(f->rt);
  free(f);
  return 0;
}

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Run code; returns the status, *res the result (caller frees). */
static mbx_status run(mbx_sandbox *sb, const char *code, mbx_result **res) {
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, res, &err);
  if (s >= MBX_API_ERROR_BASE) fail_msg("mbx_run: %s", err.message);
  return s;
}

static void want_value(mbx_sandbox *sb, const char *code, const char *value) {
  mbx_result *res;
  mbx_status s = run(sb, code, &res);
  if (s != MBX_OK) fail_msg("%s: %s", code, mbx_result_json(res, NULL));
  assert_string_equal(mbx_result_value_json(res, NULL), value);
  mbx_result_free(res);
}

/* ---- the API through a worker ---- */

static void test_results_match_in_process(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_runtime *local = mbx_runtime_new(&err);
  mbx_sandbox *a = mbx_sandbox_new(f->rt, f->p, &err);
  mbx_sandbox *b = mbx_sandbox_new(local, f->p, &err);
  assert_non_null(a);
  assert_non_null(b);
  static const char *const codes[] = {
      "return 1 + 1",
      "print('out') io.stderr:write('err') return {x = 1, y = {true, 'z'}}",
      "error('boom')",
      "local t = {} for i = 1, 3000 do t[i] = (i * 7919) % 1000 end table.sort(t) "
      "return t[1], t[3000], os.date('!%Y-%m-%d', 86400)",
      "return string.rep('x', 10) .. tostring(1/0)",
      "return (",
  };
  for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
    mbx_result *ra, *rb;
    mbx_status sa = run(a, codes[i], &ra), sb_ = run(b, codes[i], &rb);
    assert_int_equal(sa, sb_);
    assert_string_equal(mbx_result_value_json(ra, NULL), mbx_result_value_json(rb, NULL));
    assert_string_equal(mbx_result_stdout(ra, NULL), mbx_result_stdout(rb, NULL));
    assert_string_equal(mbx_result_stderr(ra, NULL), mbx_result_stderr(rb, NULL));
    size_t la = 0, lb = 0;
    const char *ma = mbx_result_error_message(ra, &la), *mb = mbx_result_error_message(rb, &lb);
    if (ma || mb) assert_string_equal(ma, mb);
    mbx_result_free(ra);
    mbx_result_free(rb);
  }
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
  mbx_runtime_free(local);
}

static mbx_status echo(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  return mbx_host_reply_json(reply, args, len);
}

static mbx_status refuse(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  return mbx_host_reply_error(reply, "refused by host", 15);
}

static void test_host_functions_pause_resume(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_policy_add_function(f->p, "host.echo", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(f->p, "host.refuse", refuse, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(f->p, "host.fetch", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(f->p, "GREETING", "hi", &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "return host.echo(1, 'a', {b = true})", "[1,\"a\",{\"b\":true}]");
  want_value(sb, "return select(2, pcall(host.refuse))", "\"refused by host\"");
  want_value(sb, "return os.getenv('GREETING'), os.getenv('HOME')", "[\"hi\",null]");
  mbx_result *res;
  assert_int_equal(run(sb, "local v = host.fetch('u') return v.n + 1", &res), MBX_PAUSED);
  mbx_result_free(res);
  assert_true(mbx_sandbox_paused(sb));
  assert_int_equal(mbx_resume(sb, "{\"n\": 41}", 9, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "42");
  mbx_result_free(res);
  assert_false(mbx_sandbox_paused(sb));
  /* state survives between runs, reset clears it */
  want_value(sb, "counter = 5 return counter", "5");
  want_value(sb, "return counter", "5");
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  want_value(sb, "return counter", "null");
  mbx_sandbox_free(sb);
}

static void test_files_stay_in_the_parent(void **state) {
  fixture *f = *state;
  mbx_error err;
  char dir[] = "/tmp/mbx_worker_test_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/data.txt", dir);
  FILE *fp = fopen(path, "w");
  fputs("line one\nline two\n", fp);
  fclose(fp);
  assert_int_equal(mbx_policy_mount(f->p, "/data", dir, MBX_MOUNT_RO, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb,
             "local f = assert(io.open('/data/data.txt')) local s = f:read('a') f:close() "
             "return s",
             "\"line one\\nline two\\n\"");
  want_value(sb,
             "local f = assert(io.open('/tmp/x', 'w')) f:write('abc') f:close() "
             "return io.open('/tmp/x'):read('a')",
             "\"abc\"");
  want_value(sb, "return (select(2, io.open('/data/nope')))",
             "\"/data/nope: No such file or directory\"");
  want_value(sb, "return (select(2, io.open('/data/new', 'w')) or ''):find('Read%-only') ~= nil",
             "true");
  mbx_sandbox_free(sb);
  unlink(path);
  rmdir(dir);
}

static void test_checkpoint_rewind(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "x = 1 return x", "1");
  mbx_status s = mbx_sandbox_checkpoint(sb, &err);
  if (s == MBX_UNSUPPORTED) { /* the asan preset (MBX_ARENA_MALLOC), as in-process */
    mbx_sandbox_free(sb);
    skip();
  }
  assert_int_equal(s, MBX_OK);
  want_value(sb, "x = 2 return x", "2");
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
  want_value(sb, "return x", "1");
  mbx_sandbox_free(sb);
}

/* io.stdin and the memory files live in the parent: a script of runs, checkpoint, rewind and
   reset gives the same values and the same change sets in a worker as in-process. Each step's
   text is collected for both sandboxes and compared; a few are also pinned, so two backends
   wrong the same way do not pass. */
#define STEPS 16
typedef struct steps {
  char *text[STEPS];
  int n;
  int rewound; /* the build has checkpoints (not MBX_ARENA_MALLOC) */
} steps;

static void step_value(steps *st, mbx_sandbox *sb, const char *code) {
  mbx_result *res;
  mbx_status s = run(sb, code, &res);
  if (s != MBX_OK) fail_msg("%s: %s", code, mbx_result_json(res, NULL));
  st->text[st->n++] = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
}

static void step_changes(steps *st, mbx_sandbox *sb) {
  mbx_error err;
  char *json = NULL;
  assert_int_equal(mbx_sandbox_changes(sb, MBX_CHANGES_CONTENT, &json, NULL, &err), MBX_OK);
  st->text[st->n++] = strdup(json);
  mbx_free(json);
}

static void stdin_and_files_script(mbx_sandbox *sb, steps *st) {
  mbx_error err;
  static const char in[] = "a\nb\nc\n";
  assert_int_equal(mbx_sandbox_set_stdin(sb, in, sizeof in - 1, &err), MBX_OK);
  step_value(st, sb, "local f = io.open('/tmp/f', 'w') f:write('1') f:close() return io.read('l')");
  mbx_status s = mbx_sandbox_checkpoint(sb, &err);
  st->rewound = s == MBX_OK;
  if (s != MBX_OK) assert_int_equal(s, MBX_UNSUPPORTED);
  step_value(st, sb,
             "local f = io.open('/tmp/f', 'w') f:write('2') f:close() "
             "io.open('/tmp/g', 'w'):close() return io.read('l')");
  step_changes(st, sb);
  if (st->rewound) {
    assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
    step_value(st, sb,
               "return {io.open('/tmp/f'):read('a'), io.open('/tmp/g') == nil, "
               "io.read('l')}");
    step_changes(st, sb);
  }
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  step_value(st, sb, "return {io.open('/tmp/f') == nil, io.read('l'), io.read('a')}");
  step_changes(st, sb);
  /* New bytes replace the guest's read-ahead of the old ones (in the worker's state). */
  assert_int_equal(mbx_sandbox_set_stdin(sb, "old-1\nold-2\n", 12, &err), MBX_OK);
  step_value(st, sb, "return io.read('l')");
  assert_int_equal(mbx_sandbox_set_stdin(sb, "new-1\n", 6, &err), MBX_OK);
  step_value(st, sb, "return {io.read('l'), io.read('l')}");
}

static void test_stdin_and_files_match_in_process(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_runtime *local = mbx_runtime_new(&err);
  mbx_sandbox *a = mbx_sandbox_new(f->rt, f->p, &err);
  mbx_sandbox *b = mbx_sandbox_new(local, f->p, &err);
  assert_non_null(a);
  assert_non_null(b);
  steps sa = {0}, sb_ = {0};
  stdin_and_files_script(a, &sa);
  stdin_and_files_script(b, &sb_);
  assert_int_equal(sa.n, sb_.n);
  assert_int_equal(sa.rewound, sb_.rewound);
  for (int i = 0; i < sa.n; i++)
    assert_string_equal(sa.text[i], sb_.text[i]);
  assert_string_equal(sa.text[0], "\"a\"");
  assert_string_equal(sa.text[1], "\"b\"");
  assert_non_null(strstr(sa.text[2], "\"/tmp/g\""));
  if (sa.rewound) {
    assert_string_equal(sa.text[3], "[\"1\",true,\"b\"]");
    assert_null(strstr(sa.text[4], "\"/tmp/g\""));
  }
  assert_string_equal(sa.text[sa.n - 4], "[true,\"a\",\"b\\nc\\n\"]");
  assert_string_equal(sa.text[sa.n - 3], "[]");
  assert_string_equal(sa.text[sa.n - 2], "\"old-1\"");
  assert_string_equal(sa.text[sa.n - 1], "[\"new-1\"]");
  for (int i = 0; i < sa.n; i++) {
    free(sa.text[i]);
    free(sb_.text[i]);
  }
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
  mbx_runtime_free(local);
}

/* A paused run's snapshot, restored into another isolated sandbox (the log is the parent's:
   the worker only re-executes), then resumed. */
static void test_snapshot_restore(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_policy_add_external(f->p, "host.fetch", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_deterministic(f->p, 1, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_INSTRUCTIONS, 1000000000), MBX_OK);
  assert_int_equal(mbx_policy_set_seed(f->p, 7, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "base = math.random(1000) return base > 0", "true");
  mbx_result *res;
  assert_int_equal(run(sb, "local v = host.fetch('x') return v + base", &res), MBX_PAUSED);
  mbx_result_free(res);
  void *bytes;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &bytes, &len, &err), MBX_OK);
  assert_int_equal(mbx_resume(sb, "1", 1, &res, &err), MBX_OK);
  char expected[64];
  snprintf(expected, sizeof expected, "%s", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_sandbox *again = mbx_sandbox_restore(f->rt, f->p, bytes, len, &err);
  if (again == NULL) fail_msg("restore: %s", err.message);
  mbx_free(bytes);
  assert_true(mbx_sandbox_paused(again));
  assert_int_equal(mbx_resume(again, "1", 1, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), expected);
  mbx_result_free(res);
  mbx_sandbox_free(again);
}

typedef struct interrupter {
  mbx_sandbox *sb;
  int delay_ms;
} interrupter;

static void *interrupt_later(void *arg) {
  interrupter *it = arg;
  struct timespec ts = {0, it->delay_ms * 1000000L};
  nanosleep(&ts, NULL);
  mbx_sandbox_interrupt(it->sb);
  return NULL;
}

static void test_interrupt(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  interrupter it = {sb, 200};
  pthread_t t;
  pthread_create(&t, NULL, interrupt_later, &it);
  mbx_result *res;
  assert_int_equal(run(sb, "while true do end", &res), MBX_INTERRUPTED);
  /* The default policy: no count hook in the worker, its interrupt signal arms the hook. */
  mbx_usage u;
  assert_int_equal(mbx_result_usage(res, &u), MBX_OK);
  assert_int_equal(u.instructions_counted, mbx_runtime_deadline_signal(f->rt) == 0);
  mbx_result_free(res);
  pthread_join(t, NULL);
  mbx_sandbox_free(sb);
}

/* Hibernation is in-process only (the heap is the worker's): both calls refuse, naming the
   backend, and the sandbox runs on. */
static void test_hibernate_refused(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_runtime_set_hibernate(f->rt, 10, &err), MBX_UNSUPPORTED);
  assert_non_null(strstr(err.message, "worker"));
  assert_int_equal(mbx_runtime_set_hibernate(f->rt, 0, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "X = 4 return X", "4");
  assert_int_equal(mbx_sandbox_hibernate(sb, &err), MBX_UNSUPPORTED);
  assert_int_equal(mbx_sandbox_hibernated(sb), 0);
  want_value(sb, "return X", "4");
  mbx_sandbox_free(sb);
}

/* A loop with no instruction limit (the default policy) has no count hook in the worker: the
   parent signals the worker at the deadline, and the run ends on time_limit (not the backstop)
   with nothing counted -- also deep in coroutines under pcall. With an instruction limit the
   worker counts again. (Where signals cannot serve -- ThreadSanitizer, whose runtime then has
   no deadline signal either -- the count hook stops it, counted.) */
static void test_deadline_without_count_hook(void **state) {
  fixture *f = *state;
  mbx_error err;
  int signals = mbx_runtime_deadline_signal(f->rt) != 0;
  static const char *const loops[] = {
      "local s = 0 while true do s = s + 1 end",
      "local function spin() while true do end end "
      "local co = coroutine.wrap(function() "
      "  return pcall(coroutine.wrap(function() return pcall(spin) end)) end) "
      "return co()"};
  mbx_policy *p = mbx_policy_new();
  mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 200);
  for (int with_limit = 0; with_limit < 2; with_limit++) {
    mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, with_limit ? (uint64_t)1 << 50 : 0);
    for (size_t i = 0; i < sizeof loops / sizeof *loops; i++) {
      mbx_sandbox *sb = mbx_sandbox_new(f->rt, p, &err);
      assert_non_null(sb);
      mbx_result *res;
      uint64_t t0 = now_ms();
      mbx_status s = run(sb, loops[i], &res);
      if (s != MBX_TIME_LIMIT) fail_msg("%s: %s", loops[i], mbx_result_json(res, NULL));
      assert_true(now_ms() - t0 < GENEROUS_MS);
      mbx_usage u;
      assert_int_equal(mbx_result_usage(res, &u), MBX_OK);
      assert_int_equal(u.instructions_counted, with_limit || !signals);
      mbx_result_free(res);
      mbx_sandbox_free(sb);
    }
  }
  mbx_policy_free(p);
}

/* ---- misbehaving workers (moonbox-worker-test's hooks) ---- */

static void expect_contained(fixture *f, uint64_t time_ms, const char *code, const char *reason) {
  mbx_error err;
  if (time_ms) mbx_policy_set_limit(f->p, MBX_LIMIT_TIME_MS, time_ms);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "return 'before'", "\"before\"");
  uint64_t t0 = now_ms();
  mbx_result *res;
  mbx_status s = run(sb, code, &res);
  uint64_t took = now_ms() - t0;
  const char *msg = mbx_result_error_message(res, NULL);
  if (s != MBX_INTERNAL_ERROR || msg == NULL || strstr(msg, reason) == NULL)
    fail_msg("%s: expected internal_error with \"%s\", got %s", code, reason,
             mbx_result_json(res, NULL));
  mbx_result_free(res);
  assert_true(took < GENEROUS_MS);
  /* Poisoned like any internal error; the reset takes a new worker, which runs fine. */
  assert_true(mbx_sandbox_poisoned(sb));
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  want_value(sb, "return 'after'", "\"after\"");
  mbx_sandbox_free(sb);
  /* And a new sandbox of the runtime works too. */
  sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "return 1 + 1", "2");
  mbx_sandbox_free(sb);
}

static void test_wild_pointer(void **state) {
  expect_contained(*state, 0, "__test_wild_pointer()", "worker crashed (signal 11)");
}

static void test_abort(void **state) {
  /* The filter lets abort() signal its own process (and only that). */
  expect_contained(*state, 0, "__test_abort()", "worker crashed (signal 6)");
}

static void test_spin_in_c(void **state) {
  /* 2 x 300 ms + the grace: the backstop, not the (in-C unreachable) deadline, ends it. */
  expect_contained(*state, 300, "__test_spin()", "worker killed: wall-clock backstop");
}

static void test_forbidden_syscalls(void **state) {
  expect_contained(*state, 0, "__test_syscall('open')", "seccomp filter");
  expect_contained(*state, 0, "__test_syscall('socket')", "seccomp filter");
  expect_contained(*state, 0, "__test_syscall('execve')", "seccomp filter");
}

/* The socket and futex calls by their arguments (issue 25, 6): AF_UNIX MSG_OOB is the path of
   CVE-2025-38236 (Chrome's renderer policy blocks it), the priority-inheritance futex
   operations Chromium's baseline policy refuses; a worker needs neither. The forms the worker
   does use still return, with FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME in the operation
   (the filter masks them off before it compares). */
static void test_socket_and_futex_arguments(void **state) {
  static const char *const killed[] = {
      "sock_sendmsg_oob", "sock_sendmsg",          "sock_recvmsg_oob",     "sock_sendto_oob",
      "futex_lock_pi",    "futex_lock_pi_private", "futex_wait_requeue_pi"};
  char code[96];
  for (size_t i = 0; i < sizeof killed / sizeof killed[0]; i++) {
    snprintf(code, sizeof code, "__test_syscall('%s')", killed[i]);
    expect_contained(*state, 0, code, "seccomp filter");
  }
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  /* Nothing is in the socket (-1, EAGAIN); nobody waits on the word (0 woken); the word is
     not the expected value (-1, EAGAIN): each returns, and the worker lives on. */
  want_value(sb, "return __test_syscall('sock_recvmsg_peek')", "-1");
  want_value(sb, "return __test_syscall('futex_wake')", "0");
  want_value(sb, "return __test_syscall('futex_wait_bitset_realtime')", "-1");
  want_value(sb, "return 'alive'", "\"alive\"");
  mbx_sandbox_free(sb);
}

static void test_bad_frames(void **state) {
  expect_contained(*state, 0, "__test_frame('garbage')",
                   "worker protocol error: frame of "
                   "protocol version");
  expect_contained(*state, 0, "__test_frame('oversized')",
                   "worker protocol error: frame of "
                   "4294967294 bytes");
  expect_contained(*state, 0, "__test_frame('short')",
                   "worker protocol error: a malformed "
                   "done report");
  /* The worker sends one frame and waits for its answer: bytes behind it are refused, not
     kept for later (the parent reads a small frame whole in one read). */
  expect_contained(*state, 0, "__test_frame('trailing')",
                   "worker protocol error: bytes past "
                   "the end of its frame");
  /* exec_run forged past the stdlib: refused by the decoder, or not granted (no exec here) */
  expect_contained(*state, 0, "__test_frame('exec_bad')",
                   "worker protocol error: exec_run "
                   "with 0 arguments");
  expect_contained(*state, 0, "__test_frame('exec_ungranted')",
                   "worker protocol error: "
                   "operation 16 is not granted");
}

/* Every worker of a runtime has the same uid (nobody as root; the host's own uid in the
   zygote's one user namespace otherwise) and, with a pid namespace, sees its siblings' pids:
   the filter, not the uid, keeps one from signalling, tracing or reading another. Worker a
   says its pid; worker b, made right after it by the same zygote, aims a call at it and must
   be killed by the filter; a must be unharmed (a kill that went through would have ended it).
   Each call gets a new pair: after b's crash the next sandbox's creation may re-execute the
   zygote, and a later pair comes from the new one. */
static void test_a_worker_cannot_reach_a_sibling(void **state) {
  fixture *f = *state;
  const char *calls[] = {"kill",       "tgkill",   "ptrace",        "process_vm_readv",
                         "pidfd_open", "cpuclock", "cpuclock_sleep"};
  for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++) {
    mbx_error err;
    mbx_sandbox *a = mbx_sandbox_new(f->rt, f->p, &err);
    assert_non_null(a);
    mbx_result *res;
    assert_int_equal(run(a, "return __test_pid()", &res), MBX_OK);
    char pid[32];
    snprintf(pid, sizeof pid, "%s", mbx_result_value_json(res, NULL));
    mbx_result_free(res);
    assert_true(atol(pid) > 0);
    /* Its own clocks stay allowed: os.clock reads this thread's CPU clock (a system call). */
    want_value(a, "local c = os.clock() while os.clock() == c do end return os.clock() > 0",
               "true");
    mbx_sandbox *b = mbx_sandbox_new(f->rt, f->p, &err);
    assert_non_null(b);
    char code[96];
    snprintf(code, sizeof code, "return __test_syscall('%s', %s)", calls[i], pid);
    mbx_status s = run(b, code, &res);
    const char *msg = mbx_result_error_message(res, NULL);
    if (s != MBX_INTERNAL_ERROR || msg == NULL || strstr(msg, "seccomp filter") == NULL)
      fail_msg("%s: expected the seccomp filter to kill the caller, got %s", code,
               mbx_result_json(res, NULL));
    mbx_result_free(res);
    want_value(a, "return __test_pid()", pid);
    mbx_sandbox_free(b);
    mbx_sandbox_free(a);
  }
}

/* Whether this process may make a user namespace (a child tries). */
static int user_namespaces_allowed(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(unshare(CLONE_NEWUSER) == 0 ? 0 : 1);
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

/* The jail's report names the path this process's uid takes (moonbox doctor): as root each
   worker drops to nobody; otherwise one user namespace is shared; no capability either way. */
static void test_jail_report_names_the_path(void **state) {
  fixture *f = *state;
  char *json = NULL;
  mbx_error err;
  assert_int_equal(mbx_runtime_worker_status(f->rt, &json, NULL, &err), MBX_OK);
  assert_non_null(strstr(json, "\"capabilities\":\"none\""));
  if (geteuid() == 0) {
    /* An isolated runtime's zygote has a uid of its own (issue 25, 8), not nobody. */
    assert_non_null(strstr(json, "\"uid\":\"the zygote's own"));
    assert_non_null(strstr(json, "\"user_namespace\":\"none (root"));
  } else if (!user_namespaces_allowed()) {
    print_message("user namespaces are off here: only the capabilities are checked\n");
  } else {
    assert_non_null(strstr(json, "\"uid\":\"its own non-root uid, in a user namespace\""));
    assert_non_null(strstr(json, "\"user_namespace\":\"shared"));
  }
  assert_non_null(strstr(json, "\"worker_start_us\":"));
  mbx_free(json);
}

/* ---- a worker that lies: the parent enforces the limits itself ---- */

typedef struct counted {
  int calls;
  int during_checkpoint;
} counted;

static mbx_status count_calls(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  counted *c = ud;
  c->calls++;
  /* The callback is promised NUL-terminated arguments. */
  assert_int_equal(args[len], '\0');
  if (strstr(args, "during CHECKPOINT")) c->during_checkpoint++;
  return mbx_host_reply_json(reply, "true", 4);
}

static void test_parent_holds_host_call_limit(void **state) {
  fixture *f = *state;
  mbx_error err;
  counted c = {0, 0};
  assert_int_equal(mbx_policy_add_function(f->p, "host.count", count_calls, &c, &err), MBX_OK);
  mbx_policy_set_limit(f->p, MBX_LIMIT_HOST_CALLS, 3);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  /* An honest worker stops the fourth call itself. */
  mbx_result *res;
  assert_int_equal(run(sb, "for i = 1, 10 do host.count() end", &res), MBX_HOST_CALL_LIMIT);
  mbx_result_free(res);
  assert_int_equal(c.calls, 3);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  /* One that calls past its own count is stopped by the parent at the same limit. */
  c.calls = 0;
  assert_int_equal(run(sb, "__test_host_flood(50)", &res), MBX_INTERNAL_ERROR);
  assert_non_null(
      strstr(mbx_result_error_message(res, NULL), "more host calls than the sandbox's limit (3)"));
  mbx_result_free(res);
  assert_int_equal(c.calls, 3);
  mbx_sandbox_free(sb);
}

static void test_no_callbacks_outside_a_run(void **state) {
  fixture *f = *state;
  mbx_error err;
  counted c = {0, 0};
  assert_int_equal(mbx_policy_add_function(f->p, "host.count", count_calls, &c, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "__test_call_at_checkpoint() return host.count()", "true");
  assert_int_equal(c.calls, 1);
  /* The worker makes a host call while the parent waits for its CHECKPOINT answer. */
  assert_int_equal(mbx_sandbox_checkpoint(sb, &err), MBX_INTERNAL_ERROR);
  assert_non_null(strstr(err.message, "outside a run"));
  assert_int_equal(c.during_checkpoint, 0);
  assert_int_equal(c.calls, 1);
  mbx_sandbox_free(sb);
}

static void test_port_call_flood_hits_backstop(void **state) {
  /* Port calls served back to back in C, never waiting in poll: the backstop (2 x 300 ms +
     the grace) is checked between frames too, so it still ends the run. */
  expect_contained(*state, 300, "__test_port_flood()", "worker killed: wall-clock backstop");
}

static void test_interrupt_of_a_worker_that_ignores_it(void **state) {
  fixture *f = *state;
  mbx_error err;
  /* No time limit: without the interrupt only the 120 s default backstop would end it. */
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  interrupter it = {sb, 200};
  pthread_t t;
  pthread_create(&t, NULL, interrupt_later, &it);
  uint64_t t0 = now_ms();
  mbx_result *res;
  assert_int_equal(run(sb, "__test_spin()", &res), MBX_INTERNAL_ERROR);
  uint64_t took = now_ms() - t0;
  assert_non_null(strstr(mbx_result_error_message(res, NULL),
                         "did not stop within the grace period after mbx_sandbox_interrupt"));
  mbx_result_free(res);
  pthread_join(t, NULL);
  assert_true(took < GENEROUS_MS);
  mbx_sandbox_free(sb);
}

static void test_reset_takes_new_worker(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  /* The worker would acknowledge a RESET and keep the previous principal's state. */
  want_value(sb, "__test_fake_reset() secret = 'from the first user' return 1", "1");
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  want_value(sb, "return secret", "null");
  mbx_sandbox_free(sb);
}

/* ---- process and fd accounting ---- */

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The pids of a process's children (its every thread's). */
static int children_of(pid_t pid, pid_t *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
  DIR *d = opendir(path);
  int n = 0;
  if (d == NULL) return 0;
  for (struct dirent *e; (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char cp[320];
    snprintf(cp, sizeof cp, "/proc/%d/task/%s/children", (int)pid, e->d_name);
    FILE *f = fopen(cp, "r");
    if (!f) continue;
    int c;
    while (n < max && fscanf(f, "%d", &c) == 1)
      out[n++] = c;
    fclose(f);
  }
  closedir(d);
  return n;
}

/* Workers: the zygote's children (the zygote is this process's only child here). */
static int count_workers(pid_t *zygote) {
  pid_t kids[16], workers[256];
  int n = children_of(getpid(), kids, 16);
  if (n == 0) return 0;
  *zygote = kids[0];
  return children_of(kids[0], workers, 256);
}

/* A crash re-executes the zygote (fresh ASLR) for the next sandbox a second later; the old
   zygote is the init of its workers' pid namespace, so it is retired, not stopped, while a live
   sandbox's worker is its child: a guest crashing its own worker must not end a neighbour's
   sandbox (found by wroot: "worker lost" in a's next run). Once a is freed the retired zygote
   goes: this process is left with one zygote. */
static void test_a_crash_does_not_end_a_neighbour(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *a = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(a);
  want_value(a, "x = 41 return __test_pid() > 0", "true");
  mbx_sandbox *b = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(b);
  mbx_result *res;
  assert_int_equal(run(b, "__test_wild_pointer()", &res), MBX_INTERNAL_ERROR);
  mbx_result_free(res);
  mbx_sandbox_free(b);
  struct timespec pause = {1, 200000000}; /* past the re-execution's one-second rate limit */
  nanosleep(&pause, NULL);
  mbx_sandbox *c = mbx_sandbox_new(f->rt, f->p, &err); /* made by a new zygote */
  assert_non_null(c);
  want_value(c, "return 'c'", "\"c\"");
  pid_t kids[16];
  assert_int_equal(children_of(getpid(), kids, 16), 2); /* the retired zygote and the new one */
  want_value(a, "x = x + 1 return x", "42");            /* a's worker, its state, are still there */
  mbx_sandbox_free(a);
  mbx_sandbox_free(c);
  mbx_sandbox *d = mbx_sandbox_new(f->rt, f->p, &err); /* sweeps the retired zygote */
  want_value(d, "return x", "null");
  assert_int_equal(children_of(getpid(), kids, 16), 1);
  mbx_sandbox_free(d);
}

typedef struct killer {
  int delay_ms;
  int killed;
} killer;

static void *kill_worker_later(void *arg) {
  killer *k = arg;
  struct timespec ts = {0, k->delay_ms * 1000000L};
  nanosleep(&ts, NULL);
  pid_t zygote = 0, kids[16], workers[256];
  if (children_of(getpid(), kids, 16) < 1) return NULL;
  zygote = kids[0];
  int n = children_of(zygote, workers, 256);
  /* The running worker is the one using CPU; killing every worker is simpler and also fine:
     idle warm ones are replaced. */
  for (int i = 0; i < n; i++)
    k->killed += kill(workers[i], SIGKILL) == 0;
  return NULL;
}

static void test_killed_from_outside(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  killer k = {300, 0};
  pthread_t t;
  pthread_create(&t, NULL, kill_worker_later, &k);
  mbx_result *res;
  assert_int_equal(run(sb, "while true do end", &res), MBX_INTERNAL_ERROR);
  assert_non_null(strstr(mbx_result_error_message(res, NULL), "worker crashed (signal 9)"));
  mbx_result_free(res);
  pthread_join(t, NULL);
  assert_true(k.killed >= 1);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  want_value(sb, "return 'again'", "\"again\"");
  mbx_sandbox_free(sb);
}

static void test_many_sandboxes_no_leaks(void **state) {
  fixture *f = *state;
  mbx_error err;
  int fds_start = count_fds(); /* no zygote yet */
  /* Warm up: the zygote and the warm pool exist from here on. */
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  want_value(sb, "return 0", "0");
  mbx_sandbox_free(sb);
  int fds0 = count_fds();
  pid_t zygote = 0;
  int workers0 = count_workers(&zygote);
  for (int i = 0; i < 300; i++) {
    sb = mbx_sandbox_new(f->rt, f->p, &err);
    if (sb == NULL) fail_msg("sandbox %d: %s", i, err.message);
    want_value(sb, "return 6 * 7", "42");
    if (i % 50 == 0) {
      mbx_result *res;
      run(sb, "__test_wild_pointer()", &res); /* some crash on the way */
      mbx_result_free(res);
    }
    mbx_sandbox_free(sb);
  }
  /* 100 runs on one sandbox: the same worker, no growth either. */
  sb = mbx_sandbox_new(f->rt, f->p, &err);
  for (int i = 0; i < 100; i++)
    want_value(sb, "x = (x or 0) + 1 return x > 0", "true");
  mbx_sandbox_free(sb);
  /* The same fds but for the warm pool's (2 fds per warm worker, at most 2 warm workers, and
     how many of them the parent has received yet depends on timing). */
  int fds1 = count_fds();
  assert_true(fds1 <= fds0 + 4 && fds1 >= fds0 - 4);
  pid_t z2 = 0;
  int workers1 = count_workers(&z2);
  /* The pool keeps the same few warm workers (reaps of freed ones may still be queued). */
  assert_true(workers1 <= workers0 + 4);
  mbx_runtime_free(f->rt);
  f->rt = isolated(g_worker_hooks);
  pid_t kids[16];
  assert_int_equal(children_of(getpid(), kids, 16), 0); /* the zygote is gone with its runtime */
  assert_int_equal(count_fds(), fds_start); /* its socket, the warm workers' sockets, pidfds */
}

static void test_bad_settings(void **state) {
  (void)state;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, "relative/worker", &err),
                   MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "absolute"));
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, 2, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, "/nonexistent/moonbox-worker", &err),
                   MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, 1, &err), MBX_OK);
  mbx_policy *p = mbx_policy_new();
  assert_null(mbx_sandbox_new(rt, p, &err));
  assert_int_equal(err.code, MBX_UNSUPPORTED);
  assert_non_null(strstr(err.message, "/nonexistent/moonbox-worker"));
  /* A live sandbox pins the mode. */
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, g_worker, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  assert_int_equal(mbx_runtime_get_cap(rt, MBX_CAP_ISOLATE), MBX_ISOLATE_PROCESS);
  assert_int_equal(mbx_runtime_usage(rt, MBX_CAP_SANDBOXES), 1);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, 0, &err), MBX_INVALID_ARGUMENT);
  mbx_sandbox_free(sb);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, 0, &err), MBX_OK);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* ---- one tenant (MBX_CAP_ONE_TENANT) ---- */

/* The value of `code` as an integer (the hooks worker's __test_served counts the sandboxes its
   process has served). */
static long long int_of(mbx_sandbox *sb, const char *code) {
  mbx_result *res;
  if (run(sb, code, &res) != MBX_OK) fail_msg("%s: %s", code, mbx_result_json(res, NULL));
  long long v = strtoll(mbx_result_value_json(res, NULL), NULL, 10);
  mbx_result_free(res);
  return v;
}

/* One sandbox after another, each writing a global and a checkpoint: `leak` is never there at
   the start, and the number of sandboxes the worker served says whether it was reused. */
static int sandboxes_in_turn(fixture *f, const mbx_policy *p, int count) {
  mbx_error err;
  int reused = 0;
  for (int i = 0; i < count; i++) {
    mbx_sandbox *sb = mbx_sandbox_new(f->rt, p, &err);
    if (sb == NULL) fail_msg("sandbox %d: %s", i, err.message);
    want_value(sb, "return leak", "null");
    if (int_of(sb, "leak = 'secret' .. 1 return __test_served()") > 1) reused++;
    /* A checkpoint the next sandbox must not inherit (not in MBX_ARENA_MALLOC builds). */
    mbx_status ck = mbx_sandbox_checkpoint(sb, &err);
    if (ck != MBX_UNSUPPORTED) assert_int_equal(ck, MBX_OK);
    mbx_sandbox_free(sb);
  }
  return reused;
}

static void test_without_one_tenant_no_worker_is_shared(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_runtime_get_cap(f->rt, MBX_CAP_ONE_TENANT), 0);
  /* Every sandbox's worker served it alone: none is ever reused. */
  assert_int_equal(sandboxes_in_turn(f, f->p, 12), 0);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_ONE_TENANT), 0);
}

/* Siblings of one zygote share its layout (libc base, canary, pointer guard); a zygote is
   re-executed every MBX_CAP_WORKER_REEXEC workers, so a leak in one sandbox says nothing of
   sandboxes made after that many more (issue 25, 8). Counted by where libc is mapped. */
static int layouts_in_turn(fixture *f, int n) {
  intptr_t seen[64];
  int distinct = 0;
  mbx_error err;
  for (int i = 0; i < n; i++) {
    mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
    assert_non_null(sb);
    intptr_t at = (intptr_t)int_of(sb, "return __test_layout()");
    mbx_sandbox_free(sb);
    int known = 0;
    for (int k = 0; k < distinct; k++)
      known |= seen[k] == at;
    if (!known && distinct < 64) seen[distinct++] = at;
  }
  return distinct;
}

static void test_zygote_reexec_every_n_workers(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_runtime_get_cap(f->rt, MBX_CAP_WORKER_REEXEC), MBX_DEFAULT_WORKER_REEXEC);
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_WORKER_REEXEC, 0, &err), MBX_OK);
  /* Never re-executed (no crash): one layout for all. */
  assert_int_equal(layouts_in_turn(f, 12), 1);
  /* Every 4 workers (the warm ones count): 12 sandboxes see several zygotes. */
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_WORKER_REEXEC, 4, &err), MBX_OK);
  assert_true(layouts_in_turn(f, 12) >= 3);
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_WORKER_REEXEC, 1ull << 32, &err),
                   MBX_INVALID_ARGUMENT);
}

static void test_one_tenant_reuses_after_a_reset(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_ONE_TENANT, 2, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "MBX_CAP_ONE_TENANT"));
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_ONE_TENANT, 1, &err), MBX_OK);
  /* In turn, the first sandbox's worker serves every later one (reset in between: the global
     and the checkpoint of the last sandbox are gone). */
  assert_int_equal(sandboxes_in_turn(f, f->p, 12), 11);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_ONE_TENANT), 1);
  /* Another memory limit: the kept worker's address-space limit is not for it. */
  mbx_policy *big = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(big, MBX_LIMIT_MEMORY, 32u << 20), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, big, &err);
  assert_int_equal(int_of(sb, "return __test_served()"), 1);
  mbx_sandbox_free(sb);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_ONE_TENANT), 2);
  /* A poisoned sandbox's worker is never kept: the next sandbox is a new worker's first. */
  mbx_policy *tight = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(tight, MBX_LIMIT_INSTRUCTIONS, 100000), MBX_OK);
  sb = mbx_sandbox_new(f->rt, tight, &err);
  assert_true(int_of(sb, "return __test_served()") > 1); /* it took the kept one */
  mbx_result *res;
  assert_int_equal(run(sb, "while true do end", &res), MBX_INSTRUCTION_LIMIT);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  sb = mbx_sandbox_new(f->rt, tight, &err);
  assert_int_equal(int_of(sb, "return __test_served()"), 1);
  mbx_sandbox_free(sb);
  /* Two live at once never share: each has its own worker. */
  mbx_sandbox *a = mbx_sandbox_new(f->rt, f->p, &err), *b = mbx_sandbox_new(f->rt, f->p, &err);
  want_value(a, "x = 'a' return x", "\"a\"");
  want_value(b, "return x", "null");
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
  mbx_policy_free(big);
  mbx_policy_free(tight);
}

/* The value of code's run, as JSON (caller frees). */
static char *value_of(mbx_sandbox *sb, const char *code) {
  mbx_result *res;
  if (run(sb, code, &res) != MBX_OK) fail_msg("%s: %s", code, mbx_result_json(res, NULL));
  char *v = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return v;
}

/* A new sandbox, once the worker the zygote forks after a free has had time to start. */
static mbx_sandbox *new_after_a_pause(fixture *f, const mbx_policy *p) {
  struct timespec ts = {0, 100000000};
  nanosleep(&ts, NULL);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  return sb;
}

/* A freed sandbox's policy primes the worker forked to replace it (its CREATE written into its
   socket by the zygote: the state is built before it is asked for). The next sandbox of that
   policy takes it, with a pristine state, its own seed and a worker no one used; a sandbox of
   another policy, or one whose seed the policy fixes, never does. */
static void test_a_freed_sandbox_primes_the_next(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "return __test_primed()", "false"); /* nothing was freed yet */
  char *random1 = value_of(sb, "leak = 1 return math.random(1 << 40)");
  mbx_sandbox_free(sb);

  sb = new_after_a_pause(f, f->p);
  want_value(sb, "return __test_primed()", "true");
  assert_int_equal(int_of(sb, "return __test_served()"), 1);
  want_value(sb, "return leak", "null");
  char *random2 = value_of(sb, "return math.random(1 << 40)");
  assert_string_not_equal(random1, random2); /* its own first seed */
  mbx_sandbox_free(sb);

  /* Another policy (a tight instruction limit): not the primed worker, and its limit holds. */
  mbx_policy *tight = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(tight, MBX_LIMIT_INSTRUCTIONS, 100000), MBX_OK);
  sb = new_after_a_pause(f, tight);
  want_value(sb, "return __test_primed()", "false");
  mbx_result *res;
  assert_int_equal(run(sb, "while true do end", &res), MBX_INSTRUCTION_LIMIT);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  /* Freeing it primed a worker for the tight policy in place of the default one's (the most
     recently freed policy wins): the next default sandbox is not given that worker, and has
     no instruction limit; the one after it is primed again. */
  sb = new_after_a_pause(f, f->p);
  want_value(sb, "return __test_primed()", "false");
  want_value(sb, "local n = 0 for i = 1, 300000 do n = n + 1 end return n", "300000");
  mbx_sandbox_free(sb);
  sb = new_after_a_pause(f, f->p);
  want_value(sb, "return __test_primed()", "true");
  want_value(sb, "local n = 0 for i = 1, 300000 do n = n + 1 end return n", "300000");
  mbx_sandbox_free(sb);

  /* A fixed seed: never primed (its first draw is the policy's seed), the same numbers in
     every sandbox. */
  mbx_policy *seeded = mbx_policy_new();
  assert_int_equal(mbx_policy_set_seed(seeded, 42, &err), MBX_OK);
  char *fixed[2];
  for (int i = 0; i < 2; i++) {
    sb = new_after_a_pause(f, seeded);
    want_value(sb, "return __test_primed()", "false");
    fixed[i] = value_of(sb, "return math.random(1 << 40)");
    mbx_sandbox_free(sb);
  }
  assert_string_equal(fixed[0], fixed[1]);
  free(fixed[0]);
  free(fixed[1]);
  free(random1);
  free(random2);
  mbx_policy_free(tight);
  mbx_policy_free(seeded);
}

/* When a process started (clock ticks since boot: /proc/pid/stat's 22nd field). */
static unsigned long long start_time(pid_t pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return ~0ull;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  const char *at = strrchr(buf, ')'); /* the command may hold spaces */
  unsigned long long t = ~0ull;
  if (at == NULL) return t;
  at += 2; /* field 3 */
  for (int field = 3; field < 22 && at; field++) {
    at = strchr(at, ' ');
    if (at) at++;
  }
  if (at) t = strtoull(at, NULL, 10);
  return t;
}

/* A primed worker killed while it waits warm (its answer to the CREATE it was written is still
   in its socket): the next sandbox is not handed the dead worker, it gets another one and runs
   (review 11, W3: the first run failed with "worker crashed"). */
static void test_a_primed_worker_killed_while_warm(void **state) {
  fixture *f = *state;
  for (int round = 0; round < 4; round++) {
    mbx_error err;
    mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
    if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
    want_value(sb, "return 1", "1");
    mbx_sandbox_free(sb); /* primes the worker forked to replace it */
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    /* Every warm worker (every child of the zygote but the oldest, its pid namespace's
       init), the primed one among them: the pool then holds only dead ones (review 11, W5
       and T1). */
    pid_t kids[16], workers[64];
    assert_int_equal(children_of(getpid(), kids, 16), 1);
    int n = children_of(kids[0], workers, 64);
    assert_true(n >= 2);
    int oldest = 0;
    for (int i = 1; i < n; i++)
      if (start_time(workers[i]) < start_time(workers[oldest])) oldest = i;
    for (int i = 0; i < n; i++)
      if (i != oldest) assert_int_equal(kill(workers[i], SIGKILL), 0);
    nanosleep(&ts, NULL);
    sb = new_after_a_pause(f, f->p);
    want_value(sb, "return 2", "2");
    mbx_sandbox_free(sb);
  }
  /* The zygote killed while a primed worker waits: that worker is gone with it, and the next
     sandbox runs on a new zygote's. */
  pid_t kids[16];
  assert_int_equal(children_of(getpid(), kids, 16), 1);
  assert_int_equal(kill(kids[0], SIGKILL), 0);
  mbx_sandbox *sb = new_after_a_pause(f, f->p);
  want_value(sb, "return 3", "3");
  mbx_sandbox_free(sb);
}

/* The host pid of the zygote's child whose pid in the workers' namespace is ns_pid (its
   /proc status's NSpid line ends in it), or 0. */
static pid_t worker_host_pid(long ns_pid) {
  pid_t kids[16], workers[64];
  if (children_of(getpid(), kids, 16) != 1) return 0;
  int n = children_of(kids[0], workers, 64);
  for (int i = 0; i < n; i++) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)workers[i]);
    FILE *f = fopen(path, "r");
    if (f == NULL) continue;
    long inner = -1; /* the last pid of the line: the innermost namespace's */
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "NSpid:", 6) != 0) continue;
      char *at = line + 6, *end;
      for (long v = strtol(at, &end, 10); end != at; v = strtol(at, &end, 10)) {
        inner = v;
        at = end;
      }
    }
    fclose(f);
    if (inner == ns_pid) return workers[i];
  }
  return 0;
}

/* A sandbox's worker killed from outside, then the sandbox freed without a run to notice:
   the zygote reaps it at once, with nothing more asked of the pool. (A freed sandbox's reap
   goes to the zygote's mailbox, which wakes nobody, before the kill whose SIGCHLD wakes the
   zygote; a worker dead already had woken it before, so its reap must go where it does.) */
static void test_a_dead_worker_freed_is_reaped(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_after_a_pause(f, f->p);
  mbx_result *res;
  assert_int_equal(run(sb, "return __test_pid()", &res), MBX_OK);
  long ns_pid = strtol(mbx_result_value_json(res, NULL), NULL, 10);
  mbx_result_free(res);
  pid_t pid = worker_host_pid(ns_pid);
  assert_true(pid > 0);
  assert_int_equal(kill(pid, SIGKILL), 0);
  struct timespec ts = {0, 100000000};
  nanosleep(&ts, NULL); /* dead, a zombie of the zygote's */
  char path[64];
  snprintf(path, sizeof path, "/proc/%d", (int)pid);
  assert_int_equal(access(path, F_OK), 0);
  mbx_sandbox_free(sb);
  int gone = 0;
  for (int i = 0; i < 300 && !gone; i++) {
    gone = access(path, F_OK) != 0;
    ts.tv_nsec = 10000000;
    if (!gone) nanosleep(&ts, NULL);
  }
  if (!gone) fail_msg("the freed sandbox's dead worker %d is still a zombie after 3 s", (int)pid);
  /* and the pool still serves */
  sb = new_after_a_pause(f, f->p);
  want_value(sb, "return 1", "1");
  mbx_sandbox_free(sb);
}

/* The zygote is started by whichever host thread makes the first isolated sandbox, and a
   worker's signal mask and ignored signals are the zygote's: a host thread that blocks every
   signal (for sigwait or a signalfd, as hosts do) must not leave the workers deaf to the
   interrupt (SIGUSR1), and a host that ignores SIGCHLD must not lose its workers' ends. */
typedef struct first_sandbox {
  fixture *f;
  mbx_sandbox *sb;
} first_sandbox;

static void *make_with_signals_blocked(void *arg) {
  first_sandbox *fs = arg;
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, NULL);
  mbx_error err;
  fs->sb = mbx_sandbox_new(fs->f->rt, fs->f->p, &err);
  return NULL;
}

static void test_a_zygote_started_by_a_thread_blocking_signals(void **state) {
  fixture *f = *state;
  first_sandbox fs = {f, NULL};
  pthread_t t;
  pthread_create(&t, NULL, make_with_signals_blocked, &fs);
  pthread_join(t, NULL);
  assert_non_null(fs.sb);
  mbx_sandbox_free(fs.sb);
  /* Another sandbox of the same zygote, run and interrupted from threads that block nothing. */
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  interrupter it = {sb, 200};
  pthread_create(&t, NULL, interrupt_later, &it);
  mbx_result *res;
  mbx_status s = run(sb, "while true do end", &res);
  if (s != MBX_INTERRUPTED) fail_msg("expected interrupted, got %s", mbx_result_json(res, NULL));
  mbx_result_free(res);
  pthread_join(t, NULL);
  mbx_sandbox_free(sb);
}

static void test_a_host_that_ignores_sigchld(void **state) {
  fixture *f = *state;
  struct sigaction ign = {0}, old;
  ign.sa_handler = SIG_IGN;
  sigemptyset(&ign.sa_mask);
  sigaction(SIGCHLD, &ign, &old);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err); /* the zygote starts here */
  sigaction(SIGCHLD, &old, NULL);
  assert_non_null(sb);
  mbx_result *res;
  mbx_status s = run(sb, "__test_wild_pointer()", &res);
  const char *msg = mbx_result_error_message(res, NULL);
  if (s != MBX_INTERNAL_ERROR || msg == NULL || strstr(msg, "worker crashed (signal 11)") == NULL)
    fail_msg("expected \"worker crashed (signal 11)\", got %s", mbx_result_json(res, NULL));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

/* One sandbox of another policy does not turn priming off: the next freed sandbox's policy
   replaces a primed worker the host has moved on from (review 11, W4). */
static void test_priming_follows_the_policy_in_use(void **state) {
  fixture *f = *state;
  mbx_policy *other = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(other, MBX_LIMIT_INSTRUCTIONS, 1000000), MBX_OK);
  mbx_sandbox *sb = new_after_a_pause(f, other);
  want_value(sb, "return 1", "1");
  mbx_sandbox_free(sb); /* a worker primed for `other` */
  int primed = 0;
  for (int i = 0; i < 6; i++) {
    sb = new_after_a_pause(f, f->p);
    mbx_result *res;
    assert_int_equal(run(sb, "return __test_primed()", &res), MBX_OK);
    primed += strcmp(mbx_result_value_json(res, NULL), "true") == 0;
    mbx_result_free(res);
    mbx_sandbox_free(sb);
  }
  /* The first one cannot be (nothing of this policy was freed before it); the rest are. */
  assert_true(primed >= 4);
  mbx_policy_free(other);
}

/* ---- scale: many live workers, many runs ---- */

static int env_count(const char *name, int fallback) {
  const char *v = getenv(name);
  int n = v && *v ? atoi(v) : fallback;
  return n > 0 ? n : fallback;
}

/* All of a process's children, however many. */
static int all_children(pid_t pid) {
  static pid_t kids[8192];
  return children_of(pid, kids, 8192);
}

static long rss_kb(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, "VmRSS:", 6) == 0) kb = strtol(line + 6, NULL, 10);
  if (f) fclose(f);
  return kb;
}

/* MBX_TEST_LIVE_WORKERS (default 200; the benchmark runs 1,000) isolated sandboxes alive at
   once, each in its own worker, then freed: the workers and fds are back to where they
   started. */
static void test_many_live_workers(void **state) {
  fixture *f = *state;
  mbx_error err;
  int n = env_count("MBX_TEST_LIVE_WORKERS", 200);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  want_value(sb, "return 0", "0");
  mbx_sandbox_free(sb);
  int fds0 = count_fds();
  pid_t kids[4];
  assert_int_equal(children_of(getpid(), kids, 4), 1);
  int procs0 = all_children(kids[0]);
  mbx_sandbox **sbs = calloc((size_t)n, sizeof *sbs);
  for (int i = 0; i < n; i++) {
    sbs[i] = mbx_sandbox_new(f->rt, f->p, &err);
    if (sbs[i] == NULL) fail_msg("sandbox %d of %d: %s", i, n, err.message);
    want_value(sbs[i], "n = (n or 0) + 1 return n", "1");
  }
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_SANDBOXES), n);
  assert_true(all_children(kids[0]) >= n);
  assert_true(count_fds() >= fds0 + 2 * n - 4); /* a socket and a pidfd each */
  for (int i = 0; i < n; i++)
    want_value(sbs[i], "n = n + 1 return n", "2");
  for (int i = 0; i < n; i++)
    mbx_sandbox_free(sbs[i]);
  free(sbs);
  /* The freed workers are reaped as the zygote gets to them: wait for that, generously. */
  uint64_t until = now_ms() + GENEROUS_MS;
  while (all_children(kids[0]) > procs0 + 2 && now_ms() < until) {
    sb = mbx_sandbox_new(f->rt, f->p, &err); /* reads the zygote's queued answers */
    mbx_sandbox_free(sb);
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
  }
  assert_true(all_children(kids[0]) <= procs0 + 2);
  int fds1 = count_fds();
  assert_true(fds1 <= fds0 + 4 && fds1 >= fds0 - 4);
}

/* A host with no stdin, stdout or stderr (a daemon that closed them): the zygote's sockets
   come out of socketpair as fds 0-2, where the zygote's own file actions write, and must
   still reach it as its fds 3 and 4. Run as this binary with those fds closed
   (--no-stdio: exit 0 when an isolated sandbox ran). */
static int run_without_stdio(void) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  if (rt == NULL || mbx_runtime_set_path(rt, MBX_PATH_WORKER, g_worker, &err) != MBX_OK ||
      mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err) != MBX_OK)
    return 1;
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  if (sb == NULL) return 2;
  mbx_result *res;
  int rc = 3;
  if (mbx_run(sb, "return 40 + 2", 13, NULL, 0, &res, &err) == MBX_OK) {
    const char *json = mbx_result_json(res, NULL);
    rc = json && strstr(json, "\"value\":42") ? 0 : 4;
    mbx_result_free(res);
  }
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return rc;
}

static void test_a_host_without_stdio(void **state) {
  (void)state;
  pid_t pid = fork();
  if (pid == 0) {
    close(0);
    close(1);
    close(2);
    execl("/proc/self/exe", "test_worker", "--no-stdio", (char *)NULL);
    _exit(127);
  }
  assert_true(pid > 0);
  int st;
  assert_int_equal(waitpid(pid, &st, 0), pid);
  assert_true(WIFEXITED(st));
  assert_int_equal(WEXITSTATUS(st), 0);
}

/* A zygote that falls behind on its answers: the frees of many live sandboxes while it is
   stopped, then one more sandbox. What the zygote owes the parent must always fit in its
   socket: else it blocks writing its answers while the parent, blocked writing more of its
   frees, reads none, and a free waits the 10 s the zygote is given before it is replaced
   (1,000 frees in a row, with nothing stopped, hung so one run in two). */
static void *continue_later(void *arg) {
  struct timespec ts = {0, 300000000};
  nanosleep(&ts, NULL);
  kill(*(pid_t *)arg, SIGCONT);
  return NULL;
}

static void test_frees_while_the_zygote_lags(void **state) {
  fixture *f = *state;
  mbx_error err;
  int n = env_count("MBX_TEST_LAG_WORKERS", 700);
  /* One zygote for all of them (700 live workers would otherwise span three: a re-exec every
     MBX_DEFAULT_WORKER_REEXEC), the one stopped below. */
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_WORKER_REEXEC, 0, &err), MBX_OK);
  mbx_sandbox **sbs = calloc((size_t)n, sizeof *sbs);
  for (int i = 0; i < n; i++) {
    sbs[i] = mbx_sandbox_new(f->rt, f->p, &err);
    if (sbs[i] == NULL) fail_msg("sandbox %d of %d: %s", i, n, err.message);
    want_value(sbs[i], "return 1", "1");
  }
  pid_t kids[4];
  assert_int_equal(children_of(getpid(), kids, 4), 1);
  pid_t zygote = kids[0];
  assert_int_equal(kill(zygote, SIGSTOP), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, continue_later, &zygote), 0);
  uint64_t t0 = now_ms();
  for (int i = 0; i < n; i++)
    mbx_sandbox_free(sbs[i]);
  uint64_t took = now_ms() - t0;
  pthread_join(t, NULL);
  free(sbs);
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  want_value(sb, "return 2", "2");
  mbx_sandbox_free(sb);
  print_message("%d frees with the zygote stopped for 300 ms: %llu ms\n", n,
                (unsigned long long)took);
  /* The same zygote serves on: one given up (a free timed out on it) is replaced. */
  assert_int_equal(children_of(getpid(), kids, 4), 1);
  assert_int_equal(kids[0], zygote);
}

/* A burst of crashes slows worker creation down (pool_take sleeps CRASH_PENALTY_NS before
   giving out a worker): that sleep must not hold the pool, or every other thread's free (and
   run that loses its worker) waits behind each creating thread's sleep in turn: 8 threads
   making sandboxes after a crash burst had frees of healthy sandboxes take over 1 s. */
static void *make_three(void *arg) {
  fixture *f = arg;
  mbx_error err;
  for (int i = 0; i < 3; i++) {
    mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
    if (sb) mbx_sandbox_free(sb);
  }
  return NULL;
}

static void test_a_free_does_not_wait_for_the_crash_penalty(void **state) {
  fixture *f = *state;
  mbx_error err;
  mbx_sandbox *healthy = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(healthy);
  want_value(healthy, "return 1", "1");
  for (int i = 0; i < 4; i++) { /* CRASH_BURST crashes within the window */
    mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
    assert_non_null(sb);
    mbx_result *res;
    assert_int_equal(run(sb, "__test_wild_pointer()", &res), MBX_INTERNAL_ERROR);
    mbx_result_free(res);
    mbx_sandbox_free(sb);
  }
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, make_three, f), 0);
  struct timespec wait = {0, 30 * 1000000};
  nanosleep(&wait, NULL); /* the makers are in their penalty sleeps */
  uint64_t t0 = now_ms();
  mbx_sandbox_free(healthy);
  uint64_t took = now_ms() - t0;
  for (int i = 0; i < 4; i++)
    pthread_join(t[i], NULL);
  print_message("a free while 4 threads make sandboxes after a crash burst: %llu ms\n",
                (unsigned long long)took);
  assert_true(took < 100); /* one CRASH_PENALTY_NS; with the sleep under the lock, several */
}

/* Under ASan a worker starts in tens of milliseconds and freed memory sits in the
   quarantine (the RSS grows by design): fewer runs, and no RSS bound. */
#if defined(__SANITIZE_ADDRESS__)
#define POOL_RUNS_DEFAULT 500
#define RSS_BOUNDED 0
#else
#define POOL_RUNS_DEFAULT 10000
#define RSS_BOUNDED 1
#endif

/* MBX_TEST_POOL_RUNS (default 10,000; 500 under ASan) runs through the pool, each on a fresh
   sandbox (a worker taken, created, run, freed, reaped; MBX_TEST_RUNS_PER_SANDBOX to run more
   on each), with no growth in processes, fds or this process's RSS. */
static void test_ten_thousand_runs(void **state) {
  fixture *f = *state;
  mbx_error err;
  int n = env_count("MBX_TEST_POOL_RUNS", POOL_RUNS_DEFAULT);
  int per = env_count("MBX_TEST_RUNS_PER_SANDBOX", 1);
  mbx_sandbox *sb = NULL;
  int fds0 = 0, procs0 = 0;
  long rss0 = 0;
  pid_t kids[4];
  uint64_t t0 = now_ms();
  for (int i = 0; i < n; i++) {
    if (i % per == 0) {
      mbx_sandbox_free(sb);
      sb = mbx_sandbox_new(f->rt, f->p, &err);
      if (sb == NULL) fail_msg("run %d: %s", i, err.message);
    }
    want_value(sb, "local t = {} for i = 1, 20 do t[i] = i end return #t", "20");
    if (i == n / 10) {
      /* The baseline once the pool, the buffers and malloc's arenas are warm. */
      fds0 = count_fds();
      assert_int_equal(children_of(getpid(), kids, 4), 1);
      procs0 = all_children(kids[0]);
      rss0 = rss_kb();
    }
  }
  mbx_sandbox_free(sb);
  /* The zygote reaps a freed worker when that worker's death wakes it (the reap waits in
     its mailbox): the last few may still be dying. A leak would not go away. */
  int procs1 = all_children(kids[0]);
  for (int i = 0; i < 300 && procs1 > procs0 + 4; i++) {
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
    procs1 = all_children(kids[0]);
  }
  int fds1 = count_fds();
  long rss1 = rss_kb();
  print_message("%d runs (%d sandboxes) in %llu ms; workers %d -> %d, fds %d -> %d, RSS %ld -> "
                "%ld KiB\n",
                n, (n + per - 1) / per, (unsigned long long)(now_ms() - t0), procs0, procs1, fds0,
                fds1, rss0, rss1);
  /* Warm workers and queued reaps vary by a few; a leak would be one per sandbox. */
  assert_true(procs1 <= procs0 + 4);
  assert_true(fds1 <= fds0 + 4);
  if (RSS_BOUNDED) assert_true(rss1 <= rss0 + 2048);
}

/* ---- the same core cases as a non-root user (ctest host/backend/test_worker_nonroot) ---- */

/* The cases that show a non-root host's path works as root's does: create and run, host
   functions and pause/resume, files through the parent, a crash contained, the jail's
   forbidden calls, siblings out of reach, and the report of the path taken. */
static const struct CMUnitTest nonroot_tests[] = {
    cmocka_unit_test_setup_teardown(test_results_match_in_process, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_host_functions_pause_resume, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_files_stay_in_the_parent, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_wild_pointer, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_forbidden_syscalls, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_socket_and_futex_arguments, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_worker_cannot_reach_a_sibling, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_jail_report_names_the_path, setup_plain, teardown),
};

#define NONROOT_UID 65534
#define SKIPPED 77

static int copy_file(const char *from, const char *to) {
  int in = open(from, O_RDONLY | O_CLOEXEC);
  int out = in < 0 ? -1 : open(to, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
  char buf[65536];
  ssize_t n = 0;
  while (out >= 0 && (n = read(in, buf, sizeof buf)) > 0)
    if (write(out, buf, (size_t)n) != n) n = -1;
  int ok = in >= 0 && out >= 0 && n == 0 && fchmod(out, 0755) == 0;
  if (in >= 0) close(in);
  if (out >= 0 && close(out) != 0) ok = 0;
  return ok ? 0 : -1;
}

/* As root: this binary and both workers copied into a fresh 0755 directory under /tmp (the
   build directory may sit under a home that user cannot enter, as CI's fresh clone under
   /root does), then run there by setpriv as uid and gid 65534 with no groups and no
   capabilities. Its exit status, or 77 with the reason when privileges cannot be dropped. */
static int rerun_as_nonroot(void) {
  const char *setpriv = "/usr/bin/setpriv";
  if (access(setpriv, X_OK) != 0) {
    printf("SKIP: %s (util-linux) is missing: cannot run as a non-root user\n", setpriv);
    return SKIPPED;
  }
  /* Whether this process may change its uid at all (a container may forbid it). */
  pid_t probe = fork();
  if (probe == 0)
    _exit(setresgid(NONROOT_UID, NONROOT_UID, NONROOT_UID) == 0 &&
                  setresuid(NONROOT_UID, NONROOT_UID, NONROOT_UID) == 0
              ? 0
              : 1);
  int st;
  if (probe < 0 || waitpid(probe, &st, 0) != probe || !WIFEXITED(st) || WEXITSTATUS(st)) {
    printf("SKIP: cannot drop privileges to uid %d here (setresuid refused)\n", NONROOT_UID);
    return SKIPPED;
  }
  char dir[] = "/tmp/mbx_nonroot_XXXXXX";
  if (mkdtemp(dir) == NULL || chmod(dir, 0755) != 0) {
    printf("test_worker --nonroot: mkdtemp under /tmp: %s\n", strerror(errno));
    return 1;
  }
  char self[300], worker[300], hooks[300];
  snprintf(self, sizeof self, "%s/test_worker", dir);
  snprintf(worker, sizeof worker, "%s/moonbox-worker", dir);
  snprintf(hooks, sizeof hooks, "%s/moonbox-worker-test", dir);
  int rc = 1;
  if (copy_file("/proc/self/exe", self) != 0 || copy_file(MBX_TEST_WORKER, worker) != 0 ||
      copy_file(MBX_TEST_WORKER_HOOKS, hooks) != 0) {
    printf("test_worker --nonroot: copying the binaries into %s: %s\n", dir, strerror(errno));
  } else {
    pid_t pid = fork();
    if (pid == 0) {
      if (chdir("/") != 0) _exit(1);
      char uid[32], gid[32];
      snprintf(uid, sizeof uid, "--reuid=%d", NONROOT_UID);
      snprintf(gid, sizeof gid, "--regid=%d", NONROOT_UID);
      char *argv[] = {"setpriv",
                      uid,
                      gid,
                      "--clear-groups",
                      "--inh-caps=-all",
                      "--bounding-set=-all",
                      "--",
                      self,
                      "--nonroot-in",
                      dir,
                      NULL};
      execv(setpriv, argv);
      _exit(127);
    }
    if (pid > 0 && waitpid(pid, &st, 0) == pid)
      rc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  }
  unlink(self);
  unlink(worker);
  unlink(hooks);
  rmdir(dir);
  return rc;
}

static const struct CMUnitTest all_tests[] = {
    cmocka_unit_test_setup_teardown(test_results_match_in_process, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_host_functions_pause_resume, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_files_stay_in_the_parent, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_checkpoint_rewind, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_stdin_and_files_match_in_process, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_interrupt, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_deadline_without_count_hook, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_snapshot_restore, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_hibernate_refused, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_wild_pointer, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_abort, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_spin_in_c, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_forbidden_syscalls, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_socket_and_futex_arguments, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_bad_frames, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_killed_from_outside, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_crash_does_not_end_a_neighbour, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_parent_holds_host_call_limit, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_no_callbacks_outside_a_run, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_port_call_flood_hits_backstop, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_interrupt_of_a_worker_that_ignores_it, setup_hooks,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_reset_takes_new_worker, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_many_sandboxes_no_leaks, setup_hooks, teardown),
    cmocka_unit_test(test_bad_settings),
    cmocka_unit_test_setup_teardown(test_without_one_tenant_no_worker_is_shared, setup_hooks,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_one_tenant_reuses_after_a_reset, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_zygote_reexec_every_n_workers, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_freed_sandbox_primes_the_next, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_primed_worker_killed_while_warm, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_priming_follows_the_policy_in_use, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_dead_worker_freed_is_reaped, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_a_zygote_started_by_a_thread_blocking_signals, setup_plain,
                                    teardown),
    cmocka_unit_test_setup_teardown(test_a_host_that_ignores_sigchld, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_many_live_workers, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_frees_while_the_zygote_lags, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_a_free_does_not_wait_for_the_crash_penalty, setup_hooks,
                                    teardown),
    cmocka_unit_test(test_a_host_without_stdio),
    cmocka_unit_test_setup_teardown(test_ten_thousand_runs, setup_plain, teardown),
    cmocka_unit_test_setup_teardown(test_a_worker_cannot_reach_a_sibling, setup_hooks, teardown),
    cmocka_unit_test_setup_teardown(test_jail_report_names_the_path, setup_plain, teardown),
};

int main(int argc, char **argv) {
  /* host/backend/test_worker_nonroot: the core cases as a non-root user -- as root through setpriv
     (above), already non-root as it is. */
  if (argc == 2 && strcmp(argv[1], "--nonroot") == 0) {
    if (geteuid() == 0) return rerun_as_nonroot();
    return cmocka_run_group_tests_name("worker_nonroot", nonroot_tests, NULL, NULL);
  }
  if (argc == 2 && strcmp(argv[1], "--no-stdio") == 0) return run_without_stdio();
  if (argc == 3 && strcmp(argv[1], "--nonroot-in") == 0) {
    static char worker[300], hooks[300];
    if (geteuid() == 0) {
      printf("test_worker --nonroot-in: still root; setpriv did not drop the uid\n");
      return 1;
    }
    snprintf(worker, sizeof worker, "%s/moonbox-worker", argv[2]);
    snprintf(hooks, sizeof hooks, "%s/moonbox-worker-test", argv[2]);
    g_worker = worker;
    g_worker_hooks = hooks;
    return cmocka_run_group_tests_name("worker_nonroot", nonroot_tests, NULL, NULL);
  }
  /* MBX_TEST_FILTER=test_name_glob runs only the matching cases (the whole file takes minutes
     on a loaded machine). */
  if (getenv("MBX_TEST_FILTER")) cmocka_set_test_filter(getenv("MBX_TEST_FILTER"));
  return cmocka_run_group_tests(all_tests, NULL, NULL);
}
