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
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_INSTRUCTIONS), 1000000000ull);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_TIME_MS), 5000);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_OUTPUT), 1ull << 20);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_SOURCE), 64ull << 10);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_HOST_CALLS), 1000);
  assert_int_equal(mbxC_policy_get_limit(&p, MBX_LIMIT_RESULT), 0); /* = the output limit */
}

typedef struct range {
  mbx_limit which;
  uint64_t min, max;
  const char *name;
} range;

/* The documented ranges: memory >= 256 KiB, source 1..16 MiB, 0 allowed where it means "none". */
static const range ranges[] = {
    {MBX_LIMIT_MEMORY, 256ull << 10, 1ull << 40, "MBX_LIMIT_MEMORY"},
    {MBX_LIMIT_INSTRUCTIONS, 0, UINT64_MAX / 4, "MBX_LIMIT_INSTRUCTIONS"},
    {MBX_LIMIT_TIME_MS, 0, 86400ull * 1000, "MBX_LIMIT_TIME_MS"},
    {MBX_LIMIT_OUTPUT, 0, 1ull << 30, "MBX_LIMIT_OUTPUT"},
    {MBX_LIMIT_SOURCE, 1, 16ull << 20, "MBX_LIMIT_SOURCE"},
    {MBX_LIMIT_HOST_CALLS, 0, UINT64_MAX / 4, "MBX_LIMIT_HOST_CALLS"},
    {MBX_LIMIT_RESULT, 0, 1ull << 30, "MBX_LIMIT_RESULT"},
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
  const int unknown[] = {0, 8, -1, 100, 1 << 30};
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
  assert_string_equal(why, "MBX_LIMIT_MEMORY (bytes) must be between 262144 and 1099511627776, "
                           "not 1000");
  assert_int_equal(mbxC_policy_set_limit(&p, MBX_LIMIT_SOURCE, 0, why, sizeof why), -1);
  assert_string_equal(why, "MBX_LIMIT_SOURCE (bytes) must be between 1 and 16777216, not 0");
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
  assert_memory_equal(why, "MBX_LIMIT", 9);
  for (size_t i = 10; i < sizeof why; i++)
    assert_int_equal(why[i], '#');
}

int main(void) {
  const struct CMUnitTest tests[] = {
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
