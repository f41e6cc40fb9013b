/* tests/capabilities/test_exec_cgroup.c -- unit tests of capabilities/exec_cgroup.c: each
   controller located on its own from /proc/self/cgroup and mountinfo texts of the layouts a
   host can have (this VM's v1 + v2 mix, pure v2, a namespaced mount root, none), and, as root
   on a host that has them, a run's cgroups made with their limits, joined, killed through,
   read and removed. */
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
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/exec_cgroup.h"

/* This VM: memory, pids and freezer on v1, a v2 mount holding no controllers. */
static const char mixed_cgroup[] = "9:name=systemd:/\n8:pids:/\n6:freezer:/\n"
                                   "4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";
static const char mixed_mounts[] =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "37 31 0:34 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer\n"
    "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static void locates_each_controller_of_a_mixed_host(void **state) {
  (void)state;
  char dir[MBXC_CG_PATH_MAX], why[256];
  int v2 = -1;
  assert_int_equal(mbxC_cgroup_locate(mixed_cgroup, mixed_mounts, "memory", dir, sizeof dir, &v2,
                                      why, sizeof why),
                   1);
  assert_string_equal(dir, "/sys/fs/cgroup/memory/process_api/abc");
  assert_int_equal(v2, 0);
  assert_int_equal(
      mbxC_cgroup_locate(mixed_cgroup, mixed_mounts, "pids", dir, sizeof dir, &v2, why, sizeof why),
      1);
  assert_string_equal(dir, "/sys/fs/cgroup/pids");
  assert_int_equal(
      mbxC_cgroup_locate(mixed_cgroup, mixed_mounts, NULL, dir, sizeof dir, &v2, why, sizeof why),
      1);
  assert_string_equal(dir, "/sys/fs/cgroup/unified");
  assert_int_equal(v2, 1);
  /* "cpu" must not match "cpuacct", nor "memory" a name= hierarchy. */
  assert_int_equal(mbxC_cgroup_locate(mixed_cgroup, mixed_mounts, "cpuacct", dir, sizeof dir, &v2,
                                      why, sizeof why),
                   0);
  assert_non_null(strstr(why, "not mounted"));
  assert_int_equal(mbxC_cgroup_locate(mixed_cgroup, mixed_mounts, "hugetlb", dir, sizeof dir, &v2,
                                      why, sizeof why),
                   0);
  assert_non_null(strstr(why, "no cgroup v1 hierarchy has the hugetlb controller"));
}

static void locates_pure_v2_and_a_namespaced_root(void **state) {
  (void)state;
  char dir[MBXC_CG_PATH_MAX], why[256];
  int v2 = -1;
  const char cg[] = "0::/system.slice/agent.service\n";
  const char mi[] = "25 1 0:22 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n";
  assert_int_equal(mbxC_cgroup_locate(cg, mi, NULL, dir, sizeof dir, &v2, why, sizeof why), 1);
  assert_string_equal(dir, "/sys/fs/cgroup/system.slice/agent.service");
  assert_int_equal(mbxC_cgroup_locate(cg, mi, "memory", dir, sizeof dir, &v2, why, sizeof why), 0);
  /* A container whose mount shows a subtree: our path is taken below the mount's root. */
  const char cg2[] = "0::/kubepods/pod1/c1\n";
  const char mi2[] = "30 20 0:40 /kubepods/pod1 /sys/fs/cgroup ro - cgroup2 cgroup2 rw\n";
  assert_int_equal(mbxC_cgroup_locate(cg2, mi2, NULL, dir, sizeof dir, &v2, why, sizeof why), 1);
  assert_string_equal(dir, "/sys/fs/cgroup/c1");
  /* Our cgroup outside what the mount shows is refused, with the reason. */
  const char cg3[] = "0::/elsewhere\n";
  assert_int_equal(mbxC_cgroup_locate(cg3, mi2, NULL, dir, sizeof dir, &v2, why, sizeof why), 0);
  assert_non_null(strstr(why, "outside what its mount shows"));
  /* A prefix that is not a path component is outside too (/kubepods/pod10 vs /pod1). */
  const char cg4[] = "0::/kubepods/pod10\n";
  assert_int_equal(mbxC_cgroup_locate(cg4, mi2, NULL, dir, sizeof dir, &v2, why, sizeof why), 0);
}

static void no_cgroups_at_all(void **state) {
  (void)state;
  char dir[MBXC_CG_PATH_MAX], why[256];
  int v2 = -1;
  assert_int_equal(mbxC_cgroup_locate("", "", NULL, dir, sizeof dir, &v2, why, sizeof why), 0);
  assert_non_null(strstr(why, "no cgroup v2"));
  assert_int_equal(mbxC_cgroup_locate("0::/\n", "", NULL, dir, sizeof dir, &v2, why, sizeof why),
                   0);
  assert_non_null(strstr(why, "no cgroup2 file system is mounted"));
  assert_int_equal(mbxC_cgroup_locate("3:pids:relative\n", mixed_mounts, "pids", dir, sizeof dir,
                                      &v2, why, sizeof why),
                   0);
}

/* As root where the host has them: a run's cgroups through their whole life. */
static void a_run_cgroup_lives_and_goes(void **state) {
  (void)state;
  mbxC_cgroup_setup cg;
  mbxC_cgroup_probe(&cg);
  if (geteuid() != 0 || cg.parent[MBXC_CG_PIDS][0] == '\0' || cg.parent[MBXC_CG_KILL][0] == '\0') {
    printf("note: not root or no pids/kill cgroup here (%s / %s): the live half is skipped\n",
           cg.why[MBXC_CG_PIDS], cg.why[MBXC_CG_KILL]);
    return;
  }
  char name[64];
  snprintf(name, sizeof name, "moonbox-unit-%ld", (long)getpid());
  mbxC_cgroup_run run;
  mbxC_cgroup_run_create(&cg, name, 64u << 20, 5, &run);
  assert_true(run.dir[MBXC_CG_PIDS][0] != '\0');
  assert_true(run.dir[MBXC_CG_KILL][0] != '\0');
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    /* Join every cgroup of the run, then try to fork past pids.max and wait to be killed. */
    char buf[MBXC_CG_PATH_MAX + 16];
    for (int i = 0; mbxC_cgroup_run_procs(&run, i, buf, sizeof buf); i++) {
      FILE *f = fopen(buf, "w");
      if (f == NULL || fprintf(f, "%ld", (long)getpid()) < 0 || fclose(f) != 0) _exit(3);
    }
    int forked = 0;
    for (int i = 0; i < 20; i++) {
      pid_t p = fork();
      if (p == 0) {
        pause();
        _exit(0);
      }
      if (p > 0) forked++;
    }
    char c = (char)forked;
    if (write(ready[1], &c, 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char forked = 0;
  assert_int_equal(read(ready[0], &forked, 1), 1);
  close(ready[0]);
  /* pids.max 5: the child and at most four of its children. */
  assert_true(forked <= 4);
  /* The run's processes, counted in its cgroups (what RLIMIT_NPROC reached is read from). */
  assert_int_equal(mbxC_cgroup_run_count(&run), 1 + forked);
  int oom = -1, pids_max = -1;
  mbxC_cgroup_run_outcome(&run, &oom, &pids_max);
  assert_int_equal(pids_max, 1);
  assert_int_equal(oom, 0);
  /* The kill takes the child and its children; remove waits for them and leaves nothing. */
  char kept[MBXC_CG_JOBS][MBXC_CG_PATH_MAX];
  memcpy(kept, run.dir, sizeof kept);
  mbxC_cgroup_run_kill(&run);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == 9);
  assert_int_equal(mbxC_cgroup_run_remove(&run), 0);
  for (int j = 0; j < MBXC_CG_JOBS; j++) {
    struct stat st;
    if (kept[j][0]) assert_int_not_equal(stat(kept[j], &st), 0);
  }
  assert_int_equal(mbxC_cgroup_run_count(&run), -1); /* no cgroup left to count */
}

/* The v1 freezer kill, live where the host has a freezer hierarchy (this VM does, but prefers
   cgroup.kill): a setup made by hand with only the freezer as the kill job. */
static void a_freezer_kill_takes_the_tree(void **state) {
  (void)state;
  char *cgt = malloc(1 << 16), *mi = malloc(1 << 16);
  assert_non_null(cgt);
  assert_non_null(mi);
  FILE *f = fopen("/proc/self/cgroup", "r");
  size_t n = f ? fread(cgt, 1, (1 << 16) - 1, f) : 0;
  cgt[n] = '\0';
  if (f) fclose(f);
  f = fopen("/proc/self/mountinfo", "r");
  n = f ? fread(mi, 1, (1 << 16) - 1, f) : 0;
  mi[n] = '\0';
  if (f) fclose(f);
  mbxC_cgroup_setup cg;
  memset(&cg, 0, sizeof cg);
  char why[256];
  int v2 = 0;
  int found = mbxC_cgroup_locate(cgt, mi, "freezer", cg.parent[MBXC_CG_KILL], MBXC_CG_PATH_MAX, &v2,
                                 why, sizeof why);
  free(cgt);
  free(mi);
  if (geteuid() != 0 || !found) {
    printf("note: not root or no v1 freezer here (%s): skipped\n", found ? "not root" : why);
    return;
  }
  char name[64];
  snprintf(name, sizeof name, "moonbox-unit-fz-%ld", (long)getpid());
  mbxC_cgroup_run run;
  mbxC_cgroup_run_create(&cg, name, 0, 0, &run);
  assert_true(run.dir[MBXC_CG_KILL][0] != '\0');
  assert_int_equal(run.v2[MBXC_CG_KILL], 0);
  int ready[2];
  assert_int_equal(pipe(ready), 0);
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    char buf[MBXC_CG_PATH_MAX + 16];
    FILE *p = fopen(mbxC_cgroup_run_procs(&run, 0, buf, sizeof buf), "w");
    if (p == NULL || fprintf(p, "%ld", (long)getpid()) < 0 || fclose(p) != 0) _exit(3);
    /* A child of its own, in a new session: only the cgroup still knows it. */
    if (fork() == 0) {
      setsid();
      pause();
      _exit(0);
    }
    if (write(ready[1], "x", 1) != 1) _exit(4);
    pause();
    _exit(0);
  }
  close(ready[1]);
  char c;
  assert_int_equal(read(ready[0], &c, 1), 1);
  close(ready[0]);
  mbxC_cgroup_run_kill(&run);
  int status = 0;
  assert_int_equal(waitpid(child, &status, 0), child);
  assert_true(WIFSIGNALED(status) && WTERMSIG(status) == 9);
  /* remove waits for the grandchild too: it succeeds only once the cgroup is empty. */
  char dir[MBXC_CG_PATH_MAX];
  snprintf(dir, sizeof dir, "%s", run.dir[MBXC_CG_KILL]);
  assert_int_equal(mbxC_cgroup_run_remove(&run), 0);
  struct stat st;
  assert_int_not_equal(stat(dir, &st), 0);
}

/* Stale cgroups (as root where the pids cgroup is there): of three owners, only the one whose
   record exists and is unlocked loses its cgroups, and only the empty one; the live owner's and
   the unrecorded one's stay, and the dead owner's record goes when its last cgroup does. */
static void stale_cgroups_are_reaped_by_their_owner_record(void **state) {
  (void)state;
  mbxC_cgroup_setup cg;
  mbxC_cgroup_probe(&cg);
  if (geteuid() != 0 || cg.parent[MBXC_CG_PIDS][0] == '\0') {
    printf("note: not root or no pids cgroup here (%s): skipped\n", cg.why[MBXC_CG_PIDS]);
    return;
  }
  /* Only the pids hierarchy, so the test's cgroups are one directory each. */
  for (int j = 0; j < MBXC_CG_JOBS; j++)
    if (j != MBXC_CG_PIDS) cg.parent[j][0] = '\0';
  char dir[64];
  snprintf(dir, sizeof dir, "/tmp/mbx-cg-owners-XXXXXX");
  assert_non_null(mkdtemp(dir));
  mbxC_cgroup_owner live, dead;
  assert_int_equal(mbxC_cgroup_owner_open(&live, dir), 0);
  assert_int_equal(mbxC_cgroup_owner_open(&dead, dir), 0);
  assert_int_equal(strlen(live.token), 16);
  assert_string_not_equal(live.token, dead.token);
  /* The dead owner: its lock dropped as a killed process's is, its record left. */
  close(dead.fd);
  dead.fd = -1;
  const char *parent = cg.parent[MBXC_CG_PIDS];
  char busy[700], empty[700], empty2[700], alive[700], unrecorded[700];
  snprintf(busy, sizeof busy, "%s/moonbox-%s-1", parent, dead.token);
  snprintf(empty, sizeof empty, "%s/moonbox-%s-2", parent, dead.token);
  snprintf(alive, sizeof alive, "%s/moonbox-%s-1", parent, live.token);
  snprintf(unrecorded, sizeof unrecorded, "%s/moonbox-0123456789abcdef-1", parent);
  snprintf(empty2, sizeof empty2, "%s/moonbox-%s-3", parent, dead.token);
  assert_int_equal(mkdir(busy, 0755), 0);
  assert_int_equal(mkdir(empty, 0755), 0);
  assert_int_equal(mkdir(empty2, 0755), 0);
  assert_int_equal(mkdir(alive, 0755), 0);
  assert_int_equal(mkdir(unrecorded, 0755), 0);
  /* A process in one of the dead owner's cgroups. */
  pid_t child = fork();
  assert_true(child >= 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  char procs[720];
  snprintf(procs, sizeof procs, "%s/cgroup.procs", busy);
  FILE *f = fopen(procs, "w");
  assert_non_null(f);
  fprintf(f, "%ld", (long)child);
  assert_int_equal(fclose(f), 0);
  int left = -1;
  assert_int_equal(mbxC_cgroup_reap(&cg, dir, &left), 2);
  assert_int_equal(left, 1);
  struct stat st;
  assert_int_not_equal(stat(empty, &st), 0);
  assert_int_not_equal(stat(empty2, &st), 0);
  assert_int_equal(stat(busy, &st), 0);
  assert_int_equal(stat(alive, &st), 0);
  assert_int_equal(stat(unrecorded, &st), 0);
  char record[128];
  snprintf(record, sizeof record, "%s/%s", dir, dead.token);
  assert_int_equal(stat(record, &st), 0); /* a cgroup of it is left */
  /* Once the process is gone, the last one goes, and the record with it. */
  kill(child, SIGKILL);
  waitpid(child, NULL, 0);
  int reaped = 0;
  for (int i = 0; i < 100 && !reaped; i++) {
    reaped = mbxC_cgroup_reap(&cg, dir, &left);
    if (!reaped) usleep(10000);
  }
  assert_int_equal(reaped, 1);
  assert_int_not_equal(stat(busy, &st), 0);
  assert_int_not_equal(stat(record, &st), 0);
  rmdir(alive);
  rmdir(unrecorded);
  snprintf(record, sizeof record, "%s/%s", dir, live.token);
  assert_int_equal(stat(record, &st), 0);
  mbxC_cgroup_owner_close(&live);
  assert_int_not_equal(stat(record, &st), 0);
  rmdir(dir);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(locates_each_controller_of_a_mixed_host),
      cmocka_unit_test(locates_pure_v2_and_a_namespaced_root),
      cmocka_unit_test(no_cgroups_at_all),
      cmocka_unit_test(a_run_cgroup_lives_and_goes),
      cmocka_unit_test(a_freezer_kill_takes_the_tree),
      cmocka_unit_test(stale_cgroups_are_reaped_by_their_owner_record),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
