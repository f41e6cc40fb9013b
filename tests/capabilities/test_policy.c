/* tests/capabilities/test_policy.c -- unit tests of capabilities/policy.c: defaults, ranges. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/policy.h"

static void defaults_match_the_header(void **state) {
  (void)state;
  mbx_policy p;
  memset(&p, 0xAB, sizeof p);
  mbxC_policy_defaults(&p);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_MEMORY), 64ull << 20);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_INSTRUCTIONS), 0);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_TIME_MS), 5000);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_OUTPUT), 1ull << 20);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_SOURCE), 64ull << 10);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_HOST_CALLS), 1000);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_RESULT), 0); /* = the output limit */
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_FS_TMP), 8ull << 20);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_FS_BYTES), 16ull << 20);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_FS_FILES), 1000);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_FS_OPEN_FILES), 64);
  assert_int_equal(p.fs.mount_count + p.fs.file_count, 0);
}

typedef struct range {
  mbx_limit which;
  uint64_t min, max;
  const char *name;
} range;

/* The documented ranges: memory >= 256 KiB, source 1..16 MiB, 0 allowed where it means "none". */
static const range ranges[] = {
    {MBX_LIMIT_MEMORY, 256ull << 10, 1ull << 40, "the memory limit"},
    {MBX_LIMIT_INSTRUCTIONS, 0, UINT64_MAX / 4, "the instruction limit"},
    {MBX_LIMIT_TIME_MS, 0, 86400ull * 1000, "the timeout"},
    {MBX_LIMIT_OUTPUT, 0, 1ull << 30, "the output limit"},
    {MBX_LIMIT_SOURCE, 1, 16ull << 20, "the source limit"},
    {MBX_LIMIT_HOST_CALLS, 0, UINT64_MAX / 4, "the host-call limit"},
    {MBX_LIMIT_RESULT, 0, 1ull << 30, "the result limit"},
    {MBX_LIMIT_FS_TMP, 0, 1ull << 40, "the size of /tmp"},
    {MBX_LIMIT_FS_BYTES, 0, 1ull << 40, "the write quota"},
    {MBX_LIMIT_FS_FILES, 0, 1000000, "the file quota"},
    {MBX_LIMIT_FS_OPEN_FILES, 1, 4096, "the open-file limit"},
};

static void expect_refused(mbx_limit which, uint64_t value, const char *name) {
  mbx_policy p, before;
  mbxC_policy_defaults(&p);
  before = p;
  char why[200] = "";
  assert_int_equal(mbxC_policy_set_limit(&p, which, value, why, sizeof why), -1);
  assert_memory_equal(&p, &before, sizeof p); /* nothing changed */
  assert_non_null(strstr(why, name));
  assert_non_null(strstr(why, "must be between"));
  char shown[32];
  snprintf(shown, sizeof shown, "not %llu", (unsigned long long)value);
  assert_non_null(strstr(why, shown));
}

static void expect_accepted(mbx_limit which, uint64_t value) {
  mbx_policy p;
  mbxC_policy_defaults(&p);
  char why[200] = "untouched";
  assert_int_equal(mbxC_policy_set_limit(&p, which, value, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_get_limit(&p, which), value);
}

static void every_limit_accepts_its_edges(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    expect_accepted(ranges[i].which, ranges[i].min);
    expect_accepted(ranges[i].which, ranges[i].max);
    expect_accepted(ranges[i].which, ranges[i].min + 1);
    expect_accepted(ranges[i].which, ranges[i].max - 1);
  }
}

static void every_limit_refuses_past_its_edges(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    if (ranges[i].min > 0) expect_refused(ranges[i].which, ranges[i].min - 1, ranges[i].name);
    expect_refused(ranges[i].which, ranges[i].max + 1, ranges[i].name);
    expect_refused(ranges[i].which, UINT64_MAX, ranges[i].name);
  }
}

/* Setting one limit leaves every other one alone. */
static void a_limit_changes_only_itself(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof ranges / sizeof *ranges; i++) {
    mbx_policy p;
    mbxC_policy_defaults(&p);
    char why[200];
    assert_int_equal(mbxC_policy_set_limit(&p, ranges[i].which, ranges[i].min + 7, why, sizeof why),
                     0);
    mbx_policy d;
    mbxC_policy_defaults(&d);
    for (size_t j = 0; j < sizeof ranges / sizeof *ranges; j++) {
      uint64_t want = i == j ? ranges[i].min + 7 : mbxC_policy_get_limit(&d, ranges[j].which);
      assert_int_equal(mbxC_policy_get_limit(&p, ranges[j].which), want);
    }
  }
}

static void unknown_limits_are_refused(void **state) {
  (void)state;
  const int unknown[] = {0, 17, -1, 100, 1 << 30};
  for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
    mbx_policy p, before;
    mbxC_policy_defaults(&p);
    before = p;
    char why[200] = "";
    assert_int_equal(mbxC_policy_set_limit(&p, (mbx_limit)unknown[i], 1, why, sizeof why), -1);
    assert_memory_equal(&p, &before, sizeof p);
    char expect[80];
    snprintf(expect, sizeof expect, "mbx_policy_set_limit: unknown limit %d", unknown[i]);
    assert_string_equal(why, expect);
    assert_int_equal(mbxC_policy_get_limit(&p, (mbx_limit)unknown[i]), 0);
  }
}

static void refusal_message_is_exact(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_policy_defaults(&p);
  char why[200];
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_MEMORY, 1000, why, sizeof why), -1);
  /* In words and the vocabulary's units, no C identifier: every front door puts its own name
     for the setting in front (--memory, Limits.memory, limits.memory). */
  assert_string_equal(why, "the memory limit must be between 256k and 1T, not 1000 bytes");
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_SOURCE, 0, why, sizeof why), -1);
  assert_string_equal(why, "the source limit must be between 1 bytes and 16M, not 0");
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_TIME_MS, 90000000, why, sizeof why), -1);
  assert_string_equal(why, "the timeout must be between 0 and 24h, not 25h");
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_EXEC_TIMEOUT_MS, 0, why, sizeof why), -1);
  assert_string_equal(why, "a program's timeout must be between 1ms and 24h, not 0");
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_EXEC_PIDS, 0, why, sizeof why), -1);
  assert_non_null(strstr(why, "a program's process limit must be between 1 and "));
}

/* A short message buffer is truncated and still terminated; nothing is written past it. */
static void refusal_message_is_truncated_to_fit(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_policy_defaults(&p);
  char why[16];
  memset(why, '#', sizeof why);
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_TIME_MS, UINT64_MAX, why, 10), -1);
  assert_int_equal(strlen(why), 9);
  assert_memory_equal(why, "the timeo", 9);
  for (size_t i = 10; i < sizeof why; i++)
    assert_int_equal(why[i], '#');
}

/* ---- mounts and files: every refusal names what was wrong ---- */

typedef struct path_case {
  const char *path;
  const char *needle; /* in the message */
} path_case;

static void mount_refusals(void **state) {
  (void)state;
  mbx_policy p;
  mbxC_policy_defaults(&p);
  char why[400];
  assert_int_equal(mbxC_policy_mount(&p, "/data", 5, "/tmp", MBXC_MOUNT_RO, why, sizeof why), 0);
  static const path_case bad[] = {
      {"data", "is relative"},
      {"/data/../etc", "not normalized"},
      {"/a//b", "did you mean \"/a/b\""},
      {"/a/", "not normalized"},
      {"/a/./b", "not normalized"},
      {"/", "cannot be mounted"},
      {"/tmp", "memory /tmp"},
      {"/tmp/x", "memory /tmp"},
      {"/data", "overlaps the mount at /data"},
      {"/data/sub", "overlaps the mount at /data"},
      {"", "empty"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    assert_int_equal(mbxC_policy_mount(&p, bad[i].path, strlen(bad[i].path), "/tmp", MBXC_MOUNT_RO,
                                       why, sizeof why),
                     MBXC_POLICY_INVALID);
    if (strstr(why, bad[i].needle) == NULL) fail_msg("%s: %s", bad[i].path, why);
  }
  assert_int_equal(mbxC_policy_mount(&p, "/a\0b", 4, "/tmp", MBXC_MOUNT_RO, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "NUL"));
  assert_int_equal(
      mbxC_policy_mount(&p, "/x", 2, "/nonexistent/mbx", MBXC_MOUNT_RO, why, sizeof why),
      MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "No such file or directory"));
  assert_int_equal(mbxC_policy_mount(&p, "/x", 2, "/etc/passwd", MBXC_MOUNT_RO, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "not a directory"));
  assert_int_equal(mbxC_policy_mount(&p, "/x", 2, "/tmp", 3, why, sizeof why), MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "mode 3"));
  assert_int_equal(p.fs.mount_count, 1); /* every refusal changed nothing */
  /* Host paths are resolved once: "/tmp/." is stored as "/tmp". */
  assert_int_equal(mbxC_policy_mount(&p, "/y", 2, "/tmp/.", MBXC_MOUNT_RW, why, sizeof why), 0);
  assert_string_equal(p.fs.mounts[1].host, "/tmp");
  /* Files: not under or above a mount, not a file's parent or child. */
  assert_int_equal(mbxC_policy_add_file(&p, "/in/a.txt", 9, "A", 1, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_add_file(&p, "/data/f", 7, "A", 1, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "overlaps the mount"));
  assert_int_equal(mbxC_policy_add_file(&p, "/in/a.txt/b", 11, "A", 1, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "overlaps the policy file /in/a.txt"));
  assert_int_equal(mbxC_policy_add_file(&p, "/in", 3, "A", 1, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_int_equal(mbxC_policy_mount(&p, "/in", 3, "/tmp", MBXC_MOUNT_RO, why, sizeof why),
                   MBXC_POLICY_INVALID);
  assert_non_null(strstr(why, "overlaps the policy file"));
  assert_int_equal(mbxC_policy_add_file(&p, "/in/a.txt", 9, "BB", 2, why, sizeof why), 0);
  assert_int_equal(p.fs.file_count, 1);
  assert_int_equal(p.fs.files[0].len, 2);
  mbxC_policy_clear(&p);
}

static void digest_covers_the_filesystem(void **state) {
  (void)state;
  mbx_policy a, b;
  char why[400];
  mbxC_policy_defaults(&a);
  mbxC_policy_defaults(&b);
  assert_int_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&b));
  assert_int_equal(mbxC_policy_add_file(&a, "/f", 2, "x", 1, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_add_file(&b, "/f", 2, "y", 1, why, sizeof why), 0);
  assert_int_not_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&b));
  assert_int_equal(mbxC_policy_add_file(&b, "/f", 2, "x", 1, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&b));
  assert_int_equal(mbxC_policy_mount(&a, "/m", 2, "/tmp", MBXC_MOUNT_RO, why, sizeof why), 0);
  assert_int_equal(mbxC_policy_mount(&b, "/m", 2, "/tmp", MBXC_MOUNT_RW, why, sizeof why), 0);
  assert_int_not_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&b));
  mbx_policy c;
  mbxC_policy_defaults(&c);
  assert_int_equal(mbxC_policy_copy_settings(&c, &a), 0);
  assert_int_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&c));
  assert_int_equal(mbxC_policy_set_limit(&c, MBX_LIMIT_FS_TMP, 5, why, sizeof why), 0);
  assert_int_not_equal(mbxC_policy_digest(&a), mbxC_policy_digest(&c));
  mbxC_policy_clear(&a);
  mbxC_policy_clear(&b);
  mbxC_policy_clear(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(mount_refusals),
      cmocka_unit_test(digest_covers_the_filesystem),
      cmocka_unit_test(defaults_match_the_header),
      cmocka_unit_test(every_limit_accepts_its_edges),
      cmocka_unit_test(every_limit_refuses_past_its_edges),
      cmocka_unit_test(a_limit_changes_only_itself),
      cmocka_unit_test(unknown_limits_are_refused),
      cmocka_unit_test(refusal_message_is_exact),
      cmocka_unit_test(refusal_message_is_truncated_to_fit),
  };
  return cmocka_run_group_tests_name("capabilities/policy", tests, NULL, NULL);
}
