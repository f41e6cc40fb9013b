/* tests/capabilities/test_port_local.c -- unit tests of capabilities/port_local.c: the in-process
   port serves the policy's clock, seed and virtual environment, and nothing of the host's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/policy.h"
#include "capabilities/port_local.h"

static void policy_with_defaults(mbx_policy *p) {
  memset(p, 0xAB, sizeof *p);
  mbxC_policy_defaults(p);
}

static void clock_is_real_unless_fixed(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_port_local pl;
  char why[200];
  policy_with_defaults(&p);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  int64_t before = (int64_t)time(NULL);
  int64_t now = pl.port.wall_time(pl.port.ud);
  assert_true(now >= before && now <= (int64_t)time(NULL));
  mbxC_port_local_free(&pl);

  assert_int_equal(mbxC_policy_set_time(&p, 1700000000, why, sizeof why), 0);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  assert_int_equal(pl.port.wall_time(pl.port.ud), 1700000000);
  mbxC_port_local_free(&pl);
  assert_int_equal(mbxC_policy_set_time(&p, MBXC_MIN_TIME, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_time(&p, MBXC_MAX_TIME, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_time(&p, MBXC_MAX_TIME + 1, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "years 1 to 9999"));
  assert_int_equal(mbxC_policy_set_time(&p, INT64_MIN, why, sizeof why), MBXC_POLICY_INVALID);
  assert_int_equal(p.time, MBXC_MAX_TIME); /* a refused value changes nothing */
  mbxC_policy_clear(&p);
}

static void cpu_time_counts_from_the_run_start(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_port_local pl;
  policy_with_defaults(&p);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  volatile uint64_t x = 0;
  for (uint64_t i = 0; i < 20000000; i++)
    x += i;
  double busy = pl.port.cpu_time(pl.port.ud);
  assert_true(busy > 0.0);
  mbxC_port_local_run_begin(&pl);
  double fresh = pl.port.cpu_time(pl.port.ud);
  assert_true(fresh >= 0.0 && fresh < busy);
  mbxC_port_local_free(&pl);
}

static void seed_sequence(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_port_local a, b;
  uint64_t s1[2], s2[2], t1[2], t2[2];
  policy_with_defaults(&p);
  mbxC_policy_set_seed(&p, 42);
  assert_int_equal(mbxC_port_local_init(&a, &p), 0);
  assert_int_equal(mbxC_port_local_init(&b, &p), 0);
  /* The first draw is stock math.randomseed(42)'s pair; later draws repeat across ports. */
  a.port.random_seed(a.port.ud, s1);
  assert_int_equal(s1[0], 42);
  assert_int_equal(s1[1], 0);
  a.port.random_seed(a.port.ud, s2);
  b.port.random_seed(b.port.ud, t1);
  b.port.random_seed(b.port.ud, t2);
  assert_memory_equal(s1, t1, sizeof s1);
  assert_memory_equal(s2, t2, sizeof s2);
  assert_true(s2[0] != s1[0] || s2[1] != s1[1]);
  mbxC_port_local_free(&a);
  mbxC_port_local_free(&b);
  /* Without a seed: fresh randomness, different between ports. */
  policy_with_defaults(&p);
  assert_int_equal(mbxC_port_local_init(&a, &p), 0);
  assert_int_equal(mbxC_port_local_init(&b, &p), 0);
  a.port.random_seed(a.port.ud, s1);
  b.port.random_seed(b.port.ud, t1);
  assert_true(s1[0] != t1[0] || s1[1] != t1[1]);
  mbxC_port_local_free(&a);
  mbxC_port_local_free(&b);
}

static const char *env_get(mbxC_port_local *pl, const char *name) {
  size_t len = 12345;
  const char *v = pl->port.env_get(pl->port.ud, name, strlen(name), &len);
  if (v) assert_int_equal(len, strlen(v));
  return v;
}

static void env_is_virtual_and_copied(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_port_local pl;
  char why[200];
  policy_with_defaults(&p);
  /* The host's real environment is never consulted. */
  setenv("MBX_TEST_HOST_SECRET", "secret", 1);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  assert_null(env_get(&pl, "MBX_TEST_HOST_SECRET"));
  assert_null(env_get(&pl, "HOME"));
  assert_null(env_get(&pl, "PATH"));
  mbxC_port_local_free(&pl);

  assert_int_equal(mbxC_policy_set_env(&p, "API_URL", "https://x", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "EMPTY", "", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "GONE", "1", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "GONE", NULL, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "NEVER_SET", NULL, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "API_URL", "https://y", why, sizeof why), 0);
  assert_int_equal(p.env_count, 2);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  /* The port holds its own copy: the policy can change or go away. */
  assert_int_equal(mbxC_policy_set_env(&p, "API_URL", "changed", why, sizeof why), 0);
  mbxC_policy_clear(&p);
  assert_string_equal(env_get(&pl, "API_URL"), "https://y");
  assert_string_equal(env_get(&pl, "EMPTY"), "");
  assert_null(env_get(&pl, "GONE"));
  assert_null(env_get(&pl, "API"));
  assert_null(env_get(&pl, "API_URL2"));
  /* Lengths are exact: a name with a NUL in it matches nothing. */
  assert_null(pl.port.env_get(pl.port.ud, "API_URL\0x", 9, NULL));
  mbxC_port_local_free(&pl);
  mbxC_port_local_free(&pl); /* twice is harmless */
}

static void env_names_are_validated(void **state) {
  (void)state;
  mbx_policy p;
  char why[200];
  char long_name[MBXC_MAX_ENV_NAME + 2];
  policy_with_defaults(&p);
  static const char *const bad[] = {"", "A=B", "A B", "A\tB", "\x7f", "caf\xc3\xa9"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    assert_int_equal(mbxC_policy_set_env(&p, bad[i], "v", why, sizeof why), MBXC_POLICY_INVALID);
    assert_non_null(strstr(why, "mbx_policy_set_env"));
  }
  assert_int_equal(mbxC_policy_set_env(&p, NULL, "v", why, sizeof why), MBXC_POLICY_INVALID);
  memset(long_name, 'N', sizeof long_name - 1);
  long_name[sizeof long_name - 1] = '\0';
  assert_int_equal(mbxC_policy_set_env(&p, long_name, "v", why, sizeof why), MBXC_POLICY_INVALID);
  long_name[MBXC_MAX_ENV_NAME] = '\0';
  assert_int_equal(mbxC_policy_set_env(&p, long_name, "v", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&p, "lower.case-ok:1", "v", why, sizeof why), 0);
  char *big = malloc(MBXC_MAX_ENV_VALUE + 2);
  assert_non_null(big);
  memset(big, 'v', MBXC_MAX_ENV_VALUE + 1);
  big[MBXC_MAX_ENV_VALUE + 1] = '\0';
  assert_int_equal(mbxC_policy_set_env(&p, "BIG", big, why, sizeof why), MBXC_POLICY_INVALID);
  big[MBXC_MAX_ENV_VALUE] = '\0';
  assert_int_equal(mbxC_policy_set_env(&p, "BIG", big, why, sizeof why), 0);
  free(big);
  assert_int_equal(p.env_count, 3);
  /* At most MBXC_MAX_ENV_VARS names. */
  for (int i = 0; p.env_count < MBXC_MAX_ENV_VARS; i++) {
    char name[16];
    snprintf(name, sizeof name, "V%d", i);
    assert_int_equal(mbxC_policy_set_env(&p, name, "x", why, sizeof why), 0);
  }
  assert_int_equal(mbxC_policy_set_env(&p, "ONE_MORE", "x", why, sizeof why), MBXC_POLICY_INVALID);
  assert_int_equal(mbxC_policy_set_env(&p, "V0", "replaced", why, sizeof why), 0);
  mbxC_policy_clear(&p);
  assert_int_equal(p.env_count, 0);
}

static void public_setters(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_env(p, "A", "1", &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(p, "A=1", "1", &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "not allowed"));
  assert_int_equal(mbx_policy_set_env(NULL, "A", "1", &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_time(p, 0, NULL), MBX_OK);
  assert_int_equal(mbx_policy_set_time(p, MBXC_MAX_TIME + 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_time(NULL, 0, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_seed(p, UINT64_MAX, NULL), MBX_OK);
  assert_int_equal(mbx_policy_set_seed(NULL, 1, &err), MBX_INVALID_ARGUMENT);
  mbx_policy_free(p); /* frees the environment too (ASan checks) */
  mbx_policy_free(NULL);
}

/* stat, mkdir, remove and rename carry the run's wait to the view, as open, read, write and
   list do: a rename in an overlay copies a host file up, and stops at the deadline. */
static void every_fs_operation_takes_the_wait(void **state) {
  (void)state;
  char dir[] = "/tmp/moonbox-port-local.XXXXXX";
  assert_non_null(mkdtemp(dir));
  char file[sizeof dir + 16];
  snprintf(file, sizeof file, "%s/big.bin", dir);
  FILE *f = fopen(file, "w");
  assert_non_null(f);
  static char mib[1 << 20];
  memset(mib, 'b', sizeof mib);
  for (int i = 0; i < 2; i++)
    assert_int_equal(fwrite(mib, 1, sizeof mib, f), sizeof mib);
  fclose(f);
  mbx_policy p;
  mbxC_port_local pl;
  char why[200];
  policy_with_defaults(&p);
  assert_int_equal(mbxC_policy_mount(&p, "/data", 5, dir, MBXC_MOUNT_OVERLAY, why, sizeof why), 0);
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  mbxC_wait past = {.deadline_ns = 1};
  mbxC_port_error e;
  const char *from = "/data/big.bin", *to = "/data/moved.bin";
  assert_int_equal(pl.port.fs_rename(pl.port.ud, from, strlen(from), to, strlen(to), &past, &e),
                   -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  mbxC_fs_stat st;
  assert_int_equal(pl.port.fs_stat(pl.port.ud, to, strlen(to), NULL, &st, &e), -1);
  assert_int_equal(pl.port.fs_rename(pl.port.ud, from, strlen(from), to, strlen(to), NULL, &e), 0);
  assert_int_equal(pl.port.fs_stat(pl.port.ud, to, strlen(to), &past, &st, &e), 0);
  assert_int_equal(st.size, 2 << 20);
  assert_int_equal(pl.port.fs_mkdir(pl.port.ud, "/data/d", 7, &past, &e), 0);
  assert_int_equal(pl.port.fs_remove(pl.port.ud, "/data/d", 7, &past, &e), 0);
  mbxC_port_local_free(&pl);
  mbxC_policy_clear(&p);
  /* the overlay never touched the host */
  struct stat hs;
  assert_int_equal(stat(file, &hs), 0);
  assert_int_equal(hs.st_size, 2 << 20);
  assert_int_equal(unlink(file), 0);
  assert_int_equal(rmdir(dir), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(clock_is_real_unless_fixed),
      cmocka_unit_test(cpu_time_counts_from_the_run_start),
      cmocka_unit_test(seed_sequence),
      cmocka_unit_test(env_is_virtual_and_copied),
      cmocka_unit_test(env_names_are_validated),
      cmocka_unit_test(public_setters),
      cmocka_unit_test(every_fs_operation_takes_the_wait),
  };
  return cmocka_run_group_tests_name("capabilities/port_local", tests, NULL, NULL);
}
