/* tests/host/test_exec_api.c -- the exec backend through the public API (host/exec_api.c,
   host/helper_path.c): paths, the probe and its unavailable path, mounts resolved once,
   usage and the snapshot refusal. Runs real programs where the backend is available. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/helper_path.h"
#include "include/moonbox.h"

#ifndef MBX_TEST_EXEC_HELPER
#error "tests/CMakeLists.txt passes the helper's path"
#endif

static mbx_runtime *runtime(void) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_EXEC_HELPER, MBX_TEST_EXEC_HELPER, &err),
                   MBX_OK);
  return rt;
}

static int available(mbx_runtime *rt) {
  char *json;
  mbx_error err;
  assert_int_equal(mbx_runtime_exec_status(rt, &json, NULL, &err), MBX_OK);
  int ok = strstr(json, "\"available\":true") != NULL;
  if (!ok) fprintf(stderr, "exec backend unavailable: %s\n", json);
  mbx_free(json);
  return ok;
}

/* Run code; the value's JSON (malloc'd). */
static char *run(mbx_runtime *rt, mbx_policy *p, const char *code, mbx_usage *usage) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  mbx_result *res = NULL;
  assert_true(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err) < MBX_API_ERROR_BASE);
  size_t len;
  const char *v = mbx_result_value_json(res, &len);
  char *copy = strndup(v ? v : "null", v ? len : 4);
  if (usage) mbx_result_usage(res, usage);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  return copy;
}

static void paths_are_checked(void **state) {
  (void)state;
  mbx_error err;
  mbx_runtime *rt = runtime();
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_BWRAP, "bwrap", &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "absolute"));
  assert_int_equal(mbx_runtime_set_path(rt, (mbx_runtime_path)99, "/x", &err),
                   MBX_INVALID_ARGUMENT);
  /* A path set reaches the backend (probed again), and NULL puts the default back. */
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_BWRAP, "/nonexistent/bwrap", &err), MBX_OK);
  char *json;
  assert_int_equal(mbx_runtime_exec_status(rt, &json, NULL, &err), MBX_OK);
  assert_non_null(strstr(json, "\"bwrap\":\"/nonexistent/bwrap\""));
  assert_non_null(strstr(json, "\"available\":false"));
  mbx_free(json);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_BWRAP, NULL, &err), MBX_OK);
  assert_int_equal(mbx_runtime_exec_status(rt, &json, NULL, &err), MBX_OK);
  assert_non_null(strstr(json, "\"bwrap\":\"/usr/bin/bwrap\""));
  mbx_free(json);
  char out[4096];
  assert_int_equal(mbxH_helper_path("moonbox-exec", "relative/x", out, sizeof out, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbxH_helper_path("moonbox-exec", NULL, out, sizeof out, &err), MBX_OK);
  /* A static link: next to the program (this test's directory) when it is there, else where
     an install puts it, <libexecdir>/moonbox relative to the program's directory. */
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  assert_true(n > 0);
  exe[n] = '\0';
  *strrchr(exe, '/') = '\0';
  char want[4200];
  snprintf(want, sizeof want, "%s/moonbox-exec", exe);
  if (access(want, X_OK) != 0)
    snprintf(want, sizeof want, "%s/%s/moonbox-exec", exe, MBX_LIBEXEC_FROM_BIN);
  assert_string_equal(out, want);
  mbx_runtime_free(rt);
}

/* bwrap that is not bwrap: the probe says why, the guest gets the reason, nothing runs. */
static void unavailable_backend(void **state) {
  (void)state;
  char dir[] = "/tmp/moonbox-test-exec-XXXXXX";
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755); /* the helper runs bwrap as the run's unprivileged uid */
  char fake[200];
  snprintf(fake, sizeof fake, "%s/bwrap", dir);
  FILE *f = fopen(fake, "w");
  assert_non_null(f);
  /* Answers the version check like bwrap 0.8 but fails every sandbox. */
  fputs("#!/bin/sh\n[ \"$1\" = --version ] && { echo 'bubblewrap 0.8.0'; exit 0; }\n"
        "echo 'bwrap: No permissions to create new namespace' >&2; exit 1\n",
        f);
  fclose(f);
  chmod(fake, 0755);
  mbx_error err;
  const char *cases[][2] = {{"/bin/false", "did not answer"},
                            {"/nonexistent/bwrap", "install bubblewrap"},
                            {fake, "No permissions to create new namespace"}};
  for (size_t i = 0; i < 3; i++) {
    mbx_runtime *rt = runtime();
    assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_BWRAP, cases[i][0], &err), MBX_OK);
    char *json;
    assert_int_equal(mbx_runtime_exec_status(rt, &json, NULL, &err), MBX_OK);
    assert_non_null(strstr(json, "\"available\":false"));
    if (strstr(json, cases[i][1]) == NULL) fail_msg("%s: %s", cases[i][0], json);
    mbx_free(json);
    mbx_policy *p = mbx_policy_new();
    assert_int_equal(mbx_policy_allow_exec(p, "/bin/sh", &err), MBX_OK);
    char *v =
        run(rt, p, "local r, m, e = proc.run{'sh', '-c', 'exit 0'} return {r == nil, m, e}", NULL);
    if (strstr(v, "the exec backend is unavailable") == NULL || strstr(v, ",38]") == NULL)
      fail_msg("%s", v);
    free(v);
    mbx_policy_free(p);
    mbx_runtime_free(rt);
  }
  unlink(fake);
  rmdir(dir);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* The view resolves a mount once; the process sees that directory even after the host path
   is replaced (bwrap binds the held dirfd, not the name). */
static void mounts_are_resolved_once(void **state) {
  (void)state;
  mbx_runtime *rt = runtime();
  if (!available(rt)) {
    mbx_runtime_free(rt);
    skip();
  }
  char dir[] = "/tmp/moonbox-test-exec-XXXXXX";
  assert_non_null(mkdtemp(dir));
  chmod(dir, 0755);
  char a[200], moved[200], file[240];
  snprintf(a, sizeof a, "%s/a", dir);
  snprintf(moved, sizeof moved, "%s/a.moved", dir);
  assert_int_equal(mkdir(a, 0755), 0);
  snprintf(file, sizeof file, "%s/f", a);
  write_file(file, "old");
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_allow_exec(p, "/bin/sh", &err), MBX_OK);
  assert_int_equal(mbx_policy_mount(p, "/data", a, MBX_MOUNT_RO, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err); /* the view opens the directory here */
  assert_non_null(sb);
  assert_int_equal(rename(a, moved), 0);
  assert_int_equal(mkdir(a, 0755), 0);
  write_file(file, "new");
  const char *code = "return proc.run{'sh', '-c', 'cat /data/f'}.stdout";
  mbx_result *res = NULL;
  assert_true(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err) < MBX_API_ERROR_BASE);
  const char *v = mbx_result_value_json(res, NULL);
  assert_non_null(v);
  assert_string_equal(v, "\"old\"");
  mbx_usage u;
  assert_int_equal(mbx_result_usage(res, &u), MBX_OK);
  assert_int_equal(u.exec_runs, 1);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  unlink(file);
  rmdir(a);
  snprintf(file, sizeof file, "%s/f", moved);
  unlink(file);
  rmdir(moved);
  rmdir(dir);
  mbx_runtime_free(rt);
}

static void limits_and_snapshots(void **state) {
  (void)state;
  mbx_runtime *rt = runtime();
  if (!available(rt)) {
    mbx_runtime_free(rt);
    skip();
  }
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_allow_exec(p, "/bin/sh", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit_checked(p, MBX_LIMIT_EXEC_RUNS, 2, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit_checked(p, MBX_LIMIT_EXEC_PIDS, 0, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_limit_checked(p, MBX_LIMIT_EXEC_MEMORY, 1024, &err),
                   MBX_INVALID_ARGUMENT);
  mbx_usage u;
  char *v = run(rt, p,
                "local a = proc.run{'sh', '-c', 'exit 0'} local b = proc.run{'sh', '-c', 'exit 1'}"
                " local c, m, e = proc.run{'sh', '-c', 'exit 2'} return {a.code, b.code, m, e}",
                &u);
  if (strstr(v, "[0,1,\"sh: the run already started 2 programs (exec.max_runs)\",11]") == NULL)
    fail_msg("%s", v);
  assert_int_equal(u.exec_runs, 2);
  free(v);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* A snapshot records each program's result: the restored sandbox replays it without running
   anything (its runtime's bwrap is /bin/false, so a real run would fail), and the result it
   sees is the recorded one, not a new one. */
static void snapshots_replay_exec_results(void **state) {
  (void)state;
  mbx_runtime *rt = runtime();
  if (!available(rt)) {
    mbx_runtime_free(rt);
    skip();
  }
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_allow_exec(p, "/bin/sh", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_deterministic(p, 1, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 1000000000), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  const char *code = "x = proc.run{'sh', '-c', 'cat /proc/sys/kernel/random/uuid', stdin = 'i'}"
                     " local y, m = proc.run{'nope'} return x.stdout .. (m or '')";
  mbx_result *res = NULL;
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
  char *live = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  assert_non_null(strstr(live, "not on the policy"));
  void *bytes;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &bytes, &len, &err), MBX_OK);
  mbx_sandbox_free(sb);
  mbx_runtime *rt2 = runtime();
  assert_int_equal(mbx_runtime_set_path(rt2, MBX_PATH_BWRAP, "/bin/false", &err), MBX_OK);
  mbx_sandbox *back = mbx_sandbox_restore(rt2, p, bytes, len, &err);
  if (back == NULL) fail_msg("restore: %s", err.message);
  const char *again = "return x.stdout .. ' ' .. x.code";
  assert_int_equal(mbx_run(back, again, strlen(again), NULL, 0, &res, &err), MBX_OK);
  const char *v = mbx_result_value_json(res, NULL);
  assert_true(strncmp(v, live, 37) == 0); /* the same uuid: the recorded answer */
  mbx_result_free(res);
  mbx_sandbox_free(back);
  mbx_free(bytes);
  free(live);
  mbx_policy_free(p);
  mbx_runtime_free(rt2);
  mbx_runtime_free(rt);
}

/* ---- per-run uids: two runtimes of one process never share one ---- */

typedef struct uid_run {
  mbx_runtime *rt;
  mbx_policy *p;
  char *out;
} uid_run;

static void *run_for_uid(void *arg) {
  uid_run *u = arg;
  /* Long enough that the two runs overlap. */
  u->out = run(u->rt, u->p, "return proc.run{'sh', '-c', 'id -u; sleep 1'}.stdout", NULL);
  return NULL;
}

static void concurrent_runs_get_their_own_uids(void **state) {
  (void)state;
  if (geteuid() != 0) skip(); /* per-run uids are only made when running as root */
  mbx_runtime *a = runtime(), *b = runtime();
  if (!available(a)) {
    mbx_runtime_free(a);
    mbx_runtime_free(b);
    skip();
  }
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_allow_exec(p, "/bin/sh", &err), MBX_OK);
  uid_run ua = {a, p, NULL}, ub = {b, p, NULL};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, run_for_uid, &ua), 0);
  assert_int_equal(pthread_create(&tb, NULL, run_for_uid, &ub), 0);
  pthread_join(ta, NULL);
  pthread_join(tb, NULL);
  /* Both ran as an unprivileged uid ("\"1073741824\\n\""), and not the same one (each
     runtime's first run: the old per-backend counter gave both the same). */
  assert_true(ua.out[0] == '"' && ua.out[1] != '0');
  assert_true(ub.out[0] == '"' && ub.out[1] != '0');
  if (strcmp(ua.out, ub.out) == 0) fail_msg("both runs had the host uid %s", ua.out);
  free(ua.out);
  free(ub.out);
  mbx_policy_free(p);
  mbx_runtime_free(a);
  mbx_runtime_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(paths_are_checked),
      cmocka_unit_test(unavailable_backend),
      cmocka_unit_test(mounts_are_resolved_once),
      cmocka_unit_test(limits_and_snapshots),
      cmocka_unit_test(snapshots_replay_exec_results),
      cmocka_unit_test(concurrent_runs_get_their_own_uids),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
