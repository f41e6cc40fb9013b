/* tests/capabilities/test_exec_uid.c -- unit tests of capabilities/exec_uid.c: the range's
   checks, uids held across processes by their locks, exhaustion, quarantine of a uid whose
   files may be left, and the namespace scope. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/exec_uid.h"

/* A fresh lock directory of our own under a fresh temporary directory. */
static char base[64];

static int setup(void **state) {
  (void)state;
  snprintf(base, sizeof base, "/tmp/mbx-uid-test-XXXXXX");
  if (mkdtemp(base) == NULL) return -1;
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
  return system(cmd) == 0 ? 0 : -1;
}

static void pool_in(mbxC_uid_pool *p, uint32_t first, uint32_t count) {
  char why[256];
  mbxC_uid_pool_init(p);
  snprintf(p->dir, sizeof p->dir, "%s/locks/uids", base);
  assert_int_equal(mbxC_uid_pool_set(p, first, count, why, sizeof why), 0);
}

static void range_checks(void **state) {
  (void)state;
  mbxC_uid_pool p;
  char why[256];
  mbxC_uid_pool_init(&p);
  /* The default lies past systemd's container range and clear of its dynamic users. */
  assert_true(p.first > 1879048191u);
  assert_true((uint64_t)p.first + p.count - 1 < 2147483648u);
  assert_int_equal(p.configured, 0);
  assert_int_equal(mbxC_uid_pool_set(&p, 100, 10, why, sizeof why), -1);
  assert_non_null(strstr(why, "below 1000"));
  assert_int_equal(mbxC_uid_pool_set(&p, 65000, 1000, why, sizeof why), -1);
  assert_non_null(strstr(why, "nobody"));
  assert_int_equal(mbxC_uid_pool_set(&p, 4294967000u, 1000, why, sizeof why), -1);
  assert_int_equal(mbxC_uid_pool_set(&p, 200000, 16, why, sizeof why), 0);
  assert_int_equal(p.configured, 1);
  assert_int_equal(mbxC_uid_pool_scope(&p, why, sizeof why), 1);
  assert_int_equal(mbxC_uid_pool_set(&p, 0, 0, why, sizeof why), 0);
  assert_int_equal(p.configured, 0);
  assert_int_equal(p.first, MBXC_UID_DEFAULT_FIRST);
}

/* Two processes with allocators over one range never hold the same uid: each child takes as
   many as it can, reports them on a pipe, and holds them until told to go. */
static void two_processes_never_share(void **state) {
  (void)state;
  mbxC_uid_pool p;
  pool_in(&p, 300000, 8);
  int report[2][2], go[2][2];
  pid_t kids[2];
  for (int k = 0; k < 2; k++) {
    assert_int_equal(pipe(report[k]), 0);
    assert_int_equal(pipe(go[k]), 0);
    kids[k] = fork();
    assert_true(kids[k] >= 0);
    if (kids[k] == 0) {
      mbxC_uid_pool mine;
      pool_in(&mine, 300000, 8);
      char why[256];
      mbxC_uid_lease l[8];
      int n = 0;
      /* Take 4 each, interleaved with the other child by timing alone. */
      for (; n < 4; n++)
        if (mbxC_uid_take(&mine, &l[n], why, sizeof why) != 0) break;
      for (int i = 0; i < n; i++)
        if (write(report[k][1], &l[i].uid, sizeof l[i].uid) != sizeof l[i].uid) _exit(2);
      close(report[k][1]);
      char c;
      if (read(go[k][0], &c, 1) < 0) _exit(3);
      for (int i = 0; i < n; i++)
        mbxC_uid_release(&l[i], 1);
      _exit(n == 4 ? 0 : 1);
    }
    close(report[k][1]);
    close(go[k][0]);
  }
  uint32_t seen[8];
  int count = 0;
  for (int k = 0; k < 2; k++) {
    uint32_t u;
    while (read(report[k][0], &u, sizeof u) == sizeof u) {
      for (int i = 0; i < count; i++)
        assert_int_not_equal(seen[i], u);
      assert_true(count < 8);
      seen[count++] = u;
    }
    close(report[k][0]);
  }
  assert_int_equal(count, 8);
  /* While both hold four, this process finds the range exhausted, named, with EAGAIN. */
  char why[256];
  mbxC_uid_lease extra;
  errno = 0;
  assert_int_equal(mbxC_uid_take(&p, &extra, why, sizeof why), -1);
  assert_int_equal(errno, EAGAIN);
  assert_non_null(strstr(why, "300000-300007"));
  for (int k = 0; k < 2; k++) {
    assert_int_equal(write(go[k][1], "x", 1), 1);
    close(go[k][1]);
    int ws;
    assert_int_equal(waitpid(kids[k], &ws, 0), kids[k]);
    assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  }
  /* Released clean: all free again. */
  assert_int_equal(mbxC_uid_take(&p, &extra, why, sizeof why), 0);
  mbxC_uid_release(&extra, 1);
}

/* A lease dies with its process (the kernel drops the flock), but the uid's file says busy:
   files of it may be left, so it is never handed out again. A uid released dirty is the same. */
static void crashed_or_dirty_uids_are_quarantined(void **state) {
  (void)state;
  mbxC_uid_pool p;
  pool_in(&p, 310000, 2);
  char why[256];
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    mbxC_uid_pool mine;
    pool_in(&mine, 310000, 2);
    mbxC_uid_lease l;
    /* Which uid it gets depends on where its search started (a random place): it says. */
    _exit(mbxC_uid_take(&mine, &l, why, sizeof why) == 0 ? 10 + (int)(l.uid - 310000) : 1);
  }
  int ws;
  assert_int_equal(waitpid(kid, &ws, 0), kid);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) >= 10 && WEXITSTATUS(ws) <= 11);
  uint32_t died = 310000 + (uint32_t)(WEXITSTATUS(ws) - 10),
           other = died == 310000 ? 310001 : 310000;
  mbxC_uid_lease a, b;
  assert_int_equal(mbxC_uid_take(&p, &a, why, sizeof why), 0);
  assert_int_equal(a.uid, other); /* the kid's died busy */
  mbxC_uid_release(&a, 0);        /* dirty */
  assert_int_equal(mbxC_uid_take(&p, &b, why, sizeof why), -1);
  assert_int_equal(mbxC_uid_quarantined(&p), 2);
  /* An operator who cleaned up removes the marks. */
  char path[300];
  snprintf(path, sizeof path, "%s/%u", p.dir, (unsigned)other);
  assert_int_equal(unlink(path), 0);
  assert_int_equal(mbxC_uid_take(&p, &b, why, sizeof why), 0);
  assert_int_equal(b.uid, other);
  mbxC_uid_release(&b, 1);
  assert_int_equal(mbxC_uid_quarantined(&p), 1);
}

/* A lease whose holder can leave no file (a worker zygote's) is free again when the holder
   dies without releasing it: no quarantine. */
static void a_lease_that_leaves_no_files_is_not_quarantined(void **state) {
  (void)state;
  mbxC_uid_pool p;
  pool_in(&p, 315000, 1);
  char why[256];
  pid_t kid = fork();
  assert_true(kid >= 0);
  if (kid == 0) {
    mbxC_uid_pool mine;
    pool_in(&mine, 315000, 1);
    mbxC_uid_lease l;
    if (mbxC_uid_take(&mine, &l, why, sizeof why) != 0) _exit(1);
    mbxC_uid_lease_leaves_no_files(&l);
    _exit(0);
  }
  int ws;
  assert_int_equal(waitpid(kid, &ws, 0), kid);
  assert_true(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
  mbxC_uid_lease l;
  assert_int_equal(mbxC_uid_take(&p, &l, why, sizeof why), 0);
  assert_int_equal(l.uid, 315000);
  mbxC_uid_release(&l, 1);
  assert_int_equal(mbxC_uid_quarantined(&p), 0);
}

/* The lock directory must be ours and writable by no one else. */
static void lock_dir_checked(void **state) {
  (void)state;
  mbxC_uid_pool p;
  pool_in(&p, 320000, 2);
  char why[256];
  mbxC_uid_lease l;
  assert_int_equal(mbxC_uid_take(&p, &l, why, sizeof why), 0);
  mbxC_uid_release(&l, 1);
  struct stat st;
  assert_int_equal(stat(p.dir, &st), 0);
  assert_int_equal(st.st_mode & 0777, 0700);
  assert_int_equal(chmod(p.dir, 0777), 0);
  assert_int_equal(mbxC_uid_take(&p, &l, why, sizeof why), -2);
  assert_non_null(strstr(why, "writable by no one else"));
  assert_int_equal(chmod(p.dir, 0700), 0);
  /* A link in place of the directory is not followed. */
  char real[160], link[160];
  snprintf(real, sizeof real, "%s/elsewhere", base);
  snprintf(link, sizeof link, "%s/linked", base);
  assert_int_equal(mkdir(real, 0700), 0);
  assert_int_equal(symlink(real, link), 0);
  snprintf(p.dir, sizeof p.dir, "%s", link);
  assert_int_equal(mbxC_uid_take(&p, &l, why, sizeof why), -2);
}

/* What a run of uid U left in a rw mount is given to the mount's owner, at any depth, links
   themselves and not what they point to; files of other uids are left alone. Only as root. */

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(range_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(two_processes_never_share, setup, teardown),
      cmocka_unit_test_setup_teardown(crashed_or_dirty_uids_are_quarantined, setup, teardown),
      cmocka_unit_test_setup_teardown(a_lease_that_leaves_no_files_is_not_quarantined, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(lock_dir_checked, setup, teardown),
  };
  return cmocka_run_group_tests_name("exec_uid", tests, NULL, NULL);
}
