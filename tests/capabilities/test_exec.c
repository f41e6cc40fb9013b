/* tests/capabilities/test_exec.c -- the exec backend's policy part and argument list
   (capabilities/exec.c), without running anything. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/exec.h"
#include "capabilities/exec_copy.h"
#include "capabilities/vfs.h"

static void allow_list_validates(void **state) {
  (void)state;
  mbxC_exec_spec s;
  mbxC_exec_spec_defaults(&s);
  char why[300];
  const char *bad[] = {"sh", "", "/", "/usr/../bin/sh", "/bin//sh", "/bin/sh/", "./sh"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    assert_int_equal(mbxC_exec_allow(&s, bad[i], why, sizeof why), -1);
    assert_non_null(strstr(why, "absolute, normalized path"));
  }
  assert_int_equal(mbxC_exec_allow(&s, NULL, why, sizeof why), -1);
  char longp[300];
  memset(longp, 'a', sizeof longp);
  longp[0] = '/';
  longp[299] = '\0';
  assert_int_equal(mbxC_exec_allow(&s, longp, why, sizeof why), -1);
  assert_int_equal(s.allow_count, 0);
  assert_int_equal(mbxC_exec_allow(&s, "/bin/sh", why, sizeof why), 0);
  assert_int_equal(mbxC_exec_allow(&s, "/bin/sh", why, sizeof why), 0); /* twice: once */
  assert_int_equal(s.allow_count, 1);
  for (int i = 1; i < MBXC_EXEC_MAX_ALLOW; i++) {
    char p[32];
    snprintf(p, sizeof p, "/usr/bin/p%d", i);
    assert_int_equal(mbxC_exec_allow(&s, p, why, sizeof why), 0);
  }
  assert_int_equal(mbxC_exec_allow(&s, "/usr/bin/one-more", why, sizeof why), -1);
  assert_non_null(strstr(why, "at most 64"));
  mbxC_exec_spec copy;
  assert_int_equal(mbxC_exec_spec_copy(&copy, &s), 0);
  assert_int_equal(copy.allow_count, MBXC_EXEC_MAX_ALLOW);
  assert_string_equal(copy.allow[0], "/bin/sh");
  assert_ptr_not_equal(copy.allow[0], s.allow[0]);
  mbxC_exec_spec_clear(&copy);
  mbxC_exec_spec_clear(&s);
  assert_int_equal(s.allow_count, 0);
}

static void resolve_by_path_or_name(void **state) {
  (void)state;
  mbxC_exec_spec s;
  mbxC_exec_spec_defaults(&s);
  char why[200];
  assert_int_equal(mbxC_exec_allow(&s, "/bin/sh", why, sizeof why), 0);
  assert_int_equal(mbxC_exec_allow(&s, "/usr/bin/python3", why, sizeof why), 0);
  assert_string_equal(mbxC_exec_resolve(&s, "sh"), "/bin/sh");
  assert_string_equal(mbxC_exec_resolve(&s, "/bin/sh"), "/bin/sh");
  assert_string_equal(mbxC_exec_resolve(&s, "python3"), "/usr/bin/python3");
  /* Another path to the same name is not the allowed path. */
  assert_null(mbxC_exec_resolve(&s, "/usr/bin/sh"));
  assert_null(mbxC_exec_resolve(&s, "./sh"));
  assert_null(mbxC_exec_resolve(&s, "bin/sh"));
  assert_null(mbxC_exec_resolve(&s, "python"));
  assert_null(mbxC_exec_resolve(&s, ""));
  assert_null(mbxC_exec_resolve(&s, NULL));
  mbxC_exec_spec_clear(&s);
}

static ssize_t find(const mbxC_strlist *l, const char *s, size_t from) {
  for (size_t i = from; i < l->count; i++)
    if (strcmp(l->items[i], s) == 0) return (ssize_t)i;
  return -1;
}

static void argument_list(void **state) {
  (void)state;
  mbxC_exec_image img;
  memset(&img, 0, sizeof img);
  strcpy(img.links[0], "usr/bin"); /* /bin -> usr/bin */
  img.dirs[3] = 1;                 /* /lib64 a real directory */
  const char *argv[] = {"sh", "-c", "echo $HOME", "--", "--bind"};
  const char *env[] = {"A=1", "B=two words"};
  mbxC_exec_mount mounts[] = {{"/data", MBXC_MOUNT_RO, 9}, {"/out", MBXC_MOUNT_RW, 10}};
  mbxC_exec_plan plan = {.program = "/bin/sh",
                         .argv = argv,
                         .argc = 5,
                         .cwd = "/data",
                         .env = env,
                         .envc = 2,
                         .mounts = mounts,
                         .mount_count = 2,
                         .tmp_bytes = 1 << 20};
  mbxC_strlist l = {0};
  size_t at = 0;
  assert_int_equal(mbxC_exec_build_args(&plan, &img, &l, &at), 0);
  /* The namespaces one by one, never --unshare-all or a shared network. */
  const char *must[] = {
      "--unshare-user",    "--disable-userns", "--unshare-ipc", "--unshare-pid",
      "--as-pid-1",        "--unshare-net",    "--unshare-uts", "--unshare-cgroup-try",
      "--die-with-parent", "--new-session",    "--clearenv"};
  for (size_t i = 0; i < sizeof must / sizeof *must; i++) {
    ssize_t k = find(&l, must[i], 0);
    assert_true(k >= 0 && (size_t)k < at);
  }
  assert_int_equal(find(&l, "--unshare-all", 0), -1);
  assert_int_equal(find(&l, "--share-net", 0), -1);
  ssize_t cap = find(&l, "--cap-drop", 0);
  assert_true(cap >= 0);
  assert_string_equal(l.items[cap + 1], "ALL");
  /* The image. */
  ssize_t usr = find(&l, "/usr", 0);
  assert_true(usr > 0);
  assert_string_equal(l.items[usr - 1], "--ro-bind");
  ssize_t bin = find(&l, "/bin", 0);
  assert_true(bin > 1);
  assert_string_equal(l.items[bin - 2], "--symlink");
  assert_string_equal(l.items[bin - 1], "usr/bin");
  ssize_t lib64 = find(&l, "/lib64", 0);
  assert_string_equal(l.items[lib64 - 1], "--ro-bind");
  assert_string_equal(l.items[lib64 + 1], "/lib64");
  assert_int_equal(find(&l, "/sbin", 0), -1); /* absent on this image */
  /* /dev read-only with a /dev/shm capped like /tmp (bwrap's /dev tmpfs has no size), then
     the size-capped private /tmp. */
  ssize_t shm = find(&l, "--tmpfs", 0);
  assert_string_equal(l.items[shm + 1], "/dev/shm");
  assert_string_equal(l.items[shm - 2], "--size");
  assert_string_equal(l.items[shm - 1], "1048576");
  ssize_t devro = find(&l, "--remount-ro", 0);
  assert_true(devro > shm);
  assert_string_equal(l.items[devro + 1], "/dev");
  ssize_t tmp = find(&l, "--tmpfs", (size_t)shm + 1);
  assert_string_equal(l.items[tmp + 1], "/tmp");
  assert_string_equal(l.items[tmp - 2], "--size");
  assert_string_equal(l.items[tmp - 1], "1048576");
  /* Mounts through the helper's copies of the held dirfds, never a host path. */
  ssize_t m0 = find(&l, "/proc/self/fd/7", 0), m1 = find(&l, "/proc/self/fd/8", 0);
  assert_string_equal(l.items[m0 - 1], "--ro-bind");
  assert_string_equal(l.items[m0 + 1], "/data");
  assert_string_equal(l.items[m1 - 1], "--bind");
  assert_string_equal(l.items[m1 + 1], "/out");
  /* The root made read-only after every bind (the helper copies the shim in before). */
  ssize_t ro = find(&l, "--remount-ro", (size_t)devro + 1);
  assert_true(ro > m1 && (size_t)ro < at);
  assert_string_equal(l.items[ro + 1], "/");
  /* The environment and the working directory. */
  ssize_t a = find(&l, "A", 0);
  assert_string_equal(l.items[a - 1], "--setenv");
  assert_string_equal(l.items[a + 1], "1");
  ssize_t b = find(&l, "B", 0);
  assert_string_equal(l.items[b + 1], "two words");
  ssize_t cd = find(&l, "--chdir", 0);
  assert_string_equal(l.items[cd + 1], "/data");
  /* The command: "--", the shim, the program, then the guest's argv untouched (its "--" and
     "--bind" are words of the command, after bwrap's options end). */
  assert_string_equal(l.items[at], "--");
  assert_string_equal(l.items[at + 1], MBXC_EXEC_SHIM);
  assert_string_equal(l.items[at + 2], "--shim");
  assert_string_equal(l.items[at + 3], "/bin/sh");
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(l.items[at + 4 + i], argv[i]);
  assert_int_equal(l.count, at + 9);
  mbxC_strlist_free(&l);
  /* No cwd: the private /tmp. */
  plan.cwd = NULL;
  assert_int_equal(mbxC_exec_build_args(&plan, &img, &l, &at), 0);
  assert_string_equal(l.items[find(&l, "--chdir", 0) + 1], "/tmp");
  mbxC_strlist_free(&l);
  /* An overlay mount with the view's copy (exec_copy.h) is a tmpfs of its own size, the host
     directory never bound; without a copy it is the host directory read-only. */
  mbxC_exec_mount three[] = {mounts[0], mounts[1], {"/ws", MBXC_MOUNT_OVERLAY, 11}};
  plan.mounts = three;
  plan.mount_count = 3;
  mbxC_exec_copy copy = {0};
  plan.copy = &copy;
  plan.overlay_bytes = 123456;
  assert_int_equal(mbxC_exec_build_args(&plan, &img, &l, &at), 0);
  assert_int_equal(find(&l, "/proc/self/fd/9", 0), -1);
  ssize_t ws = find(&l, "/ws", 0);
  assert_true(ws > 3 && (size_t)ws < at);
  assert_string_equal(l.items[ws - 1], "--tmpfs");
  assert_string_equal(l.items[ws - 2], "123456");
  assert_string_equal(l.items[ws - 3], "--size");
  /* So is an rw mount (/out): its writes come back through the view, within the quotas. */
  assert_int_equal(find(&l, "/proc/self/fd/8", 0), -1);
  ssize_t rwout = find(&l, "/out", 0);
  assert_true(rwout > 3 && (size_t)rwout < at);
  assert_string_equal(l.items[rwout - 1], "--tmpfs");
  assert_string_equal(l.items[rwout - 2], "123456");
  mbxC_strlist_free(&l);
  plan.copy = NULL;
  assert_int_equal(mbxC_exec_build_args(&plan, &img, &l, &at), 0);
  ws = find(&l, "/proc/self/fd/9", 0);
  assert_true(ws > 0);
  assert_string_equal(l.items[ws - 1], "--ro-bind");
  assert_string_equal(l.items[ws + 1], "/ws");
  mbxC_strlist_free(&l);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(allow_list_validates),
      cmocka_unit_test(resolve_by_path_or_name),
      cmocka_unit_test(argument_list),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
