/* tests/host/test_worker_api.c -- what a worker's jail applies (host/worker_api.c,
   mbx_runtime_worker_status; moonbox doctor prints it), and that the workers really are in
   the namespaces it reports: a new pid and network namespace each, as root. */
#include <dirent.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "include/moonbox.h"

static json_t *status_of(const char *worker, int isolate) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, worker, &err), MBX_OK);
  if (isolate)
    assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
  char *text = NULL;
  size_t len = 0;
  assert_int_equal(mbx_runtime_worker_status(rt, &text, &len, &err), MBX_OK);
  assert_int_equal(strlen(text), len);
  json_t *j = json_loads(text, 0, NULL);
  assert_non_null(j);
  mbx_free(text);
  mbx_runtime_free(rt);
  return j;
}

/* The pids of this process's children. */
static int children(pid_t pid, pid_t *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)pid, (int)pid);
  FILE *f = fopen(path, "r");
  int n = 0, c;
  while (f && n < max && fscanf(f, "%d", &c) == 1)
    out[n++] = c;
  if (f) fclose(f);
  return n;
}

static void test_status_reports_the_jail(void **state) {
  (void)state;
  for (int isolate = 0; isolate < 2; isolate++) {
    json_t *j = status_of(MBX_TEST_WORKER, isolate);
    assert_true(json_is_true(json_object_get(j, "available")));
    assert_true(json_is_null(json_object_get(j, "reason")));
    assert_string_equal(json_string_value(json_object_get(j, "worker")), MBX_TEST_WORKER);
    assert_true(json_is_true(json_object_get(j, "no_new_privs")));
    /* The zygote's prebuilt program, not a compile per worker. */
    assert_string_equal(json_string_value(json_object_get(j, "seccomp")),
                        "allow-list (prebuilt BPF)");
    /* No capability is left on either path (read back with capget in the probe child). */
    assert_string_equal(json_string_value(json_object_get(j, "capabilities")), "none");
    /* What a worker's start cost in the probe: a fork, the jail, an exit -- more than zero,
       and a generous bound only (the machine is loaded). */
    json_t *us = json_object_get(j, "worker_start_us");
    assert_true(json_is_integer(us));
    assert_true(json_integer_value(us) > 0 && json_integer_value(us) < 10000000);
    if (geteuid() == 0) {
      /* As root every one of these is applied (this machine must show them). */
      /* An isolated runtime's zygote has a uid of its own from the exec uid range (issue
         25, 8); the probe of a runtime that is not isolated starts a zygote of its own with
         none, as nobody. */
      assert_string_equal(json_string_value(json_object_get(j, "uid")),
                          isolate ? "the zygote's own (one of exec.uids, held while it lives), "
                                    "no groups"
                                  : "nobody (65534, no groups)");
      assert_non_null(
          strstr(json_string_value(json_object_get(j, "user_namespace")), "none (root"));
      assert_true(json_is_true(json_object_get(j, "pid_namespace")));
      assert_true(json_is_true(json_object_get(j, "net_namespace")));
    } else {
      assert_true(json_is_boolean(json_object_get(j, "pid_namespace")));
    }
    json_decref(j);
  }
  /* The probe's zygote went with its runtime. */
  pid_t kids[8];
  assert_int_equal(children(getpid(), kids, 8), 0);
}

static void test_status_without_a_worker(void **state) {
  (void)state;
  json_t *j = status_of("/nonexistent/moonbox-worker", 0);
  assert_true(json_is_false(json_object_get(j, "available")));
  const char *why = json_string_value(json_object_get(j, "reason"));
  assert_non_null(why);
  assert_non_null(strstr(why, "/nonexistent/moonbox-worker"));
  assert_null(json_object_get(j, "pid_namespace"));
  json_decref(j);
  mbx_error err;
  assert_int_equal(mbx_runtime_worker_status(NULL, NULL, NULL, &err), MBX_INVALID_ARGUMENT);
}

static void ns_of(pid_t pid, const char *which, char *out, size_t size) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/ns/%s", (int)pid, which);
  ssize_t n = readlink(path, out, size - 1);
  if (n < 0) fail_msg("readlink %s", path);
  out[n] = '\0';
}

/* The status is not just what the zygote believes: the workers' namespaces, read from /proc,
   are not this process's, and the zygote's children are the namespace's init and the
   workers. */
static void test_workers_are_in_new_namespaces(void **state) {
  (void)state;
  json_t *j = status_of(MBX_TEST_WORKER, 0);
  int applied = json_is_true(json_object_get(j, "pid_namespace"));
  json_decref(j);
  if (!applied && geteuid() == 0) fail_msg("as root, the workers must get their namespaces");
  if (!applied || geteuid() != 0) {
    /* Not root: a worker's /proc/<pid>/ns links are not readable (it is not dumpable and in
       another user namespace), so only the report is checked (above). */
    print_message("SKIP: reading the workers' /proc/<pid>/ns needs root\n");
    skip();
  }
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, MBX_TEST_WORKER, &err), MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  mbx_result *res;
  assert_int_equal(mbx_run(sb, "return 1 + 1", 12, NULL, 0, &res, &err), MBX_OK);
  mbx_result_free(res);
  pid_t zygote[4], workers[64];
  assert_int_equal(children(getpid(), zygote, 4), 1);
  int n = children(zygote[0], workers, 64);
  assert_true(n >= 2); /* the init, the sandbox's worker (and warm ones) */
  char mine_pid[64], mine_net[64], pid_ns[64], net_ns[64], first_pid[64];
  int inits = 0;
  unsigned long zygote_uid = 0;
  ns_of(getpid(), "pid", mine_pid, sizeof mine_pid);
  ns_of(getpid(), "net", mine_net, sizeof mine_net);
  for (int i = 0; i < n; i++) {
    ns_of(workers[i], "pid", pid_ns, sizeof pid_ns);
    ns_of(workers[i], "net", net_ns, sizeof net_ns);
    assert_string_not_equal(pid_ns, mine_pid);
    assert_string_not_equal(net_ns, mine_net);
    /* One namespace for the zygote's workers (and its init). */
    if (i == 0)
      snprintf(first_pid, sizeof first_pid, "%s", pid_ns);
    else
      assert_string_equal(pid_ns, first_pid);
    /* The namespace's init (pid 1 there: the last NSpid), which only waits, runs under a
       filter of its own (issue 25, 8: it had none; a warm worker may still be in its jail). */
    char path[64], line[256], nspid[256] = "", seccomp[256] = "";
    snprintf(path, sizeof path, "/proc/%d/status", (int)workers[i]);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof line, f)) {
      if (strncmp(line, "NSpid:", 6) == 0) snprintf(nspid, sizeof nspid, "%s", line);
      if (strncmp(line, "Seccomp:", 8) == 0) snprintf(seccomp, sizeof seccomp, "%s", line);
      /* The zygote's own uid (issue 25, 8): not root, not the host's shared nobody, and the
         same for every child of one zygote (a warm worker still in its jail may be root). */
      unsigned long uid = 0;
      if (sscanf(line, "Uid:\t%lu", &uid) == 1 && uid != 0) {
        if (uid == 65534) fail_msg("zygote child %d runs as nobody", (int)workers[i]);
        if (zygote_uid == 0) zygote_uid = uid;
        assert_int_equal(uid, zygote_uid);
      }
    }
    fclose(f);
    const char *last = strrchr(nspid, '\t');
    int is_init = last && strtol(last + 1, NULL, 10) == 1;
    inits += is_init;
    if (is_init && strstr(seccomp, "2") == NULL)
      fail_msg("the pid namespace's init (%d) has no seccomp filter: %s", (int)workers[i], seccomp);
  }
  assert_int_equal(inits, 1);
  assert_true(zygote_uid != 0);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* Gone, or a zombie waiting for whoever reaps orphans: not running. */
static int ended(pid_t pid) {
  char path[64], line[128];
  snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
  FILE *f = fopen(path, "r");
  if (f == NULL) return 1;
  int zombie = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "State:", 6) == 0) zombie = strchr(line, 'Z') != NULL;
  fclose(f);
  return zombie;
}

static int all_ended(const pid_t *pids, int n) {
  /* Generous: the machine is loaded. */
  for (int tries = 0; tries < 3000; tries++) {
    int left = 0;
    for (int i = 0; i < n; i++)
      left += !ended(pids[i]);
    if (left == 0) return 1;
    usleep(10000);
  }
  return 0;
}

/* No process of a zygote outlives it: not its pid namespace's init (it once did, every time a
   runtime was freed: the zygote's last answer failed and it left without ending the init),
   not a worker, whether the runtime is freed or the zygote is killed from outside (a change
   of uid clears the parent-death signal: the jail sets it again after dropping root). */
static void test_nothing_outlives_the_zygote(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  for (int kill_it = 0; kill_it < 2; kill_it++) {
    mbx_runtime *rt = mbx_runtime_new(&err);
    assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, MBX_TEST_WORKER, &err), MBX_OK);
    assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    assert_non_null(sb);
    mbx_result *res;
    assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 0, &res, &err), MBX_OK);
    mbx_result_free(res);
    pid_t zygote[4], kids[64];
    assert_int_equal(children(getpid(), zygote, 4), 1);
    int n = children(zygote[0], kids, 64);
    assert_true(n >= 2);
    if (kill_it) {
      assert_int_equal(kill(zygote[0], SIGKILL), 0);
      if (!all_ended(kids, n)) fail_msg("a child of the killed zygote is still running");
      /* The runtime notices and starts a new zygote. */
      mbx_sandbox_free(sb);
      sb = mbx_sandbox_new(rt, p, &err);
      if (sb == NULL) fail_msg("after the zygote was killed: %s", err.message);
      assert_int_equal(mbx_run(sb, "return 2", 8, NULL, 0, &res, &err), MBX_OK);
      mbx_result_free(res);
      assert_int_equal(children(getpid(), zygote, 4), 1);
      n = children(zygote[0], kids, 64);
    }
    mbx_sandbox_free(sb);
    mbx_runtime_free(rt);
    if (!all_ended(kids, n)) fail_msg("a child of the freed runtime's zygote is still running");
  }
  mbx_policy_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_status_reports_the_jail),
      cmocka_unit_test(test_status_without_a_worker),
      cmocka_unit_test(test_workers_are_in_new_namespaces),
      cmocka_unit_test(test_nothing_outlives_the_zygote),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
