/* tests/common/test_units.c -- unit tests of common/units.c: sizes, durations,
   counts, epochs and seeds, each value accepted exactly or refused with its message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#define MSG_SIZE 512
#include "common/units.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * 1024)
#define GIB (MIB * 1024)

/* ---------------------------------------------------------------------------------------- */
/* Helpers: each asserts one value parses to `want`, or fails with exactly `message`.         */

typedef int (*value_parser)(const char *, const char *, uint64_t *, char *, size_t);

static void check_parses(value_parser parse, const char *text, uint64_t want) {
  char msg[MSG_SIZE] = "";
  uint64_t got = 12345;
  int rc = parse("--opt", text, &got, msg, sizeof msg);
  if (rc != 0) fail_msg("'%s' was refused: %s", text, msg);
  if (got != want)
    fail_msg("'%s' parsed to %llu, want %llu", text, (unsigned long long)got,
             (unsigned long long)want);
}

static void check_refused(value_parser parse, const char *text, const char *message) {
  char msg[MSG_SIZE] = "";
  uint64_t got = 12345;
  int rc = parse("--opt", text, &got, msg, sizeof msg);
  if (rc != -1) fail_msg("'%s' was accepted as %llu", text, (unsigned long long)got);
  if (message != NULL)
    assert_string_equal(msg, message);
  else
    assert_true(strlen(msg) > 0);
  assert_true(strchr(msg, '\n') == NULL); /* one line */
}

#define SIZE_HINT "(use a number with an optional k, M, G or T suffix, e.g. 64M)"
#define DURATION_HINT                                                                              \
  "(use a number with a unit: ms, s, m or h, e.g. 500ms, 1.5s or 2m; 0 means no limit)"
#define COUNT_HINT "(use a whole number such as 1000000 or 1e9; 0 means no limit)"

/* ---------------------------------------------------------------------------------------- */
/* Sizes                                                                                     */

static void test_size_plain_bytes(void **state) {
  (void)state;
  check_parses(mbxU_parse_size, "0", 0);
  check_parses(mbxU_parse_size, "4096", 4096);
  check_parses(mbxU_parse_size, "007", 7);
  check_parses(mbxU_parse_size, "100b", 100);
  check_parses(mbxU_parse_size, "100B", 100);
  check_parses(mbxU_parse_size, "18446744073709551615", UINT64_MAX);
}

static void test_size_suffixes(void **state) {
  (void)state;
  check_parses(mbxU_parse_size, "1k", KIB);
  check_parses(mbxU_parse_size, "1K", KIB);
  check_parses(mbxU_parse_size, "2kb", 2 * KIB);
  check_parses(mbxU_parse_size, "3KiB", 3 * KIB);
  check_parses(mbxU_parse_size, "64M", 64 * MIB);
  check_parses(mbxU_parse_size, "64m", 64 * MIB);
  check_parses(mbxU_parse_size, "16MB", 16 * MIB);
  check_parses(mbxU_parse_size, "16MiB", 16 * MIB);
  check_parses(mbxU_parse_size, "16mib", 16 * MIB);
  check_parses(mbxU_parse_size, "1G", GIB);
  check_parses(mbxU_parse_size, "1gb", GIB);
  check_parses(mbxU_parse_size, "2GiB", 2 * GIB);
  check_parses(mbxU_parse_size, "15G", 15 * GIB);
}

static void test_size_exact_fractions(void **state) {
  (void)state;
  check_parses(mbxU_parse_size, "1.5M", MIB + MIB / 2);
  check_parses(mbxU_parse_size, "0.5k", 512);
  check_parses(mbxU_parse_size, "1.50k", 1536); /* trailing zeros are harmless */
  check_parses(mbxU_parse_size, "2.0", 2);
  check_parses(mbxU_parse_size, "0.25G", GIB / 4);
  check_refused(mbxU_parse_size, "0.1k", "--opt: '0.1k' is not a whole number of bytes " SIZE_HINT);
  check_refused(mbxU_parse_size, "1.5", "--opt: '1.5' is not a whole number of bytes " SIZE_HINT);
  check_refused(mbxU_parse_size, "0.000000000000000000001G", NULL);
}

static void test_size_errors(void **state) {
  (void)state;
  check_refused(mbxU_parse_size, "12Q", "--opt: '12Q' is not a size " SIZE_HINT);
  check_refused(mbxU_parse_size, "", "--opt: empty value " SIZE_HINT);
  check_refused(mbxU_parse_size, "-1M", "--opt: '-1M' is negative " SIZE_HINT);
  check_refused(mbxU_parse_size, "-0", "--opt: '-0' is negative " SIZE_HINT);
  check_refused(mbxU_parse_size, "99999999999999999999G",
                "--opt: '99999999999999999999G' is too large " SIZE_HINT);
  check_refused(mbxU_parse_size, "18446744073709551616",
                "--opt: '18446744073709551616' is too large " SIZE_HINT);
  check_refused(mbxU_parse_size, "17179869184G", NULL); /* exactly 2^64 */
  /* Blanks, signs, other bases and trailing junk are never skipped. */
  check_refused(mbxU_parse_size, " 64M", NULL);
  check_refused(mbxU_parse_size, "64M ", NULL);
  check_refused(mbxU_parse_size, "64 M", NULL);
  check_refused(mbxU_parse_size, "+64M", NULL);
  check_refused(mbxU_parse_size, "0x40", NULL);
  check_refused(mbxU_parse_size, "1e3", NULL);
  check_refused(mbxU_parse_size, "64MM", NULL);
  check_refused(mbxU_parse_size, "64Mx", NULL);
  check_refused(mbxU_parse_size, "1P", NULL);
  check_parses(mbxU_parse_size, "1T", 1ull << 40);
  check_refused(mbxU_parse_size, "M", NULL);
  check_refused(mbxU_parse_size, "1.", NULL);
  check_refused(mbxU_parse_size, ".5M", NULL);
  check_refused(mbxU_parse_size, "1..5M", NULL);
  check_refused(mbxU_parse_size, "1,5M", NULL);
}

static void test_size_message_quoting(void **state) {
  char long_value[100];
  (void)state;
  /* Control bytes are not echoed to the terminal. */
  check_refused(mbxU_parse_size, "1\033[2J", "--opt: '1?[2J' is not a size " SIZE_HINT);
  /* A long value is shortened, so the hint is never cut off. */
  memset(long_value, '7', sizeof long_value - 2);
  long_value[sizeof long_value - 2] = 'Q';
  long_value[sizeof long_value - 1] = '\0';
  check_refused(mbxU_parse_size, long_value,
                "--opt: '7777777777777777777777777777777777777777...' is not a size " SIZE_HINT);
}

/* ---------------------------------------------------------------------------------------- */
/* Durations                                                                                 */

static void test_duration_units(void **state) {
  (void)state;
  check_parses(mbxU_parse_duration, "500ms", 500);
  check_parses(mbxU_parse_duration, "2s", 2000);
  check_parses(mbxU_parse_duration, "1.5s", 1500);
  check_parses(mbxU_parse_duration, "0.001s", 1);
  check_parses(mbxU_parse_duration, "1m", 60000);
  check_parses(mbxU_parse_duration, "2min", 120000);
  check_parses(mbxU_parse_duration, "1h", 3600000);
  check_parses(mbxU_parse_duration, "2S", 2000);
  check_parses(mbxU_parse_duration, "100MS", 100);
  check_parses(mbxU_parse_duration, "0ms", 0);
  check_parses(mbxU_parse_duration, "0", 0); /* no unit needed to say "no limit" */
  check_parses(mbxU_parse_duration, "0.0", 0);
}

static void test_duration_errors(void **state) {
  (void)state;
  check_refused(mbxU_parse_duration, "500",
                "--opt: '500' has no unit (write e.g. 500ms or 500s; 0 means no limit)");
  check_refused(mbxU_parse_duration, "1.5", NULL);
  check_refused(mbxU_parse_duration, "5x", "--opt: '5x' is not a duration " DURATION_HINT);
  check_refused(mbxU_parse_duration, "", "--opt: empty value " DURATION_HINT);
  check_refused(mbxU_parse_duration, "-1s", "--opt: '-1s' is negative " DURATION_HINT);
  check_refused(mbxU_parse_duration, "1.5ms",
                "--opt: '1.5ms' is not a whole number of milliseconds " DURATION_HINT);
  check_refused(mbxU_parse_duration, "0.0001s", NULL);
  check_refused(mbxU_parse_duration, "99999999999999999999h",
                "--opt: '99999999999999999999h' is too large " DURATION_HINT);
  check_refused(mbxU_parse_duration, "ms", NULL);
  check_refused(mbxU_parse_duration, "2 s", NULL);
  check_refused(mbxU_parse_duration, "2s ", NULL);
  check_refused(mbxU_parse_duration, "1d", NULL);
  check_refused(mbxU_parse_duration, "1e3ms", NULL);
}

/* ---------------------------------------------------------------------------------------- */
/* Counts                                                                                    */

static void test_count_forms(void **state) {
  (void)state;
  check_parses(mbxU_parse_count, "0", 0);
  check_parses(mbxU_parse_count, "1000000", 1000000);
  check_parses(mbxU_parse_count, "1e9", 1000000000);
  check_parses(mbxU_parse_count, "1E9", 1000000000);
  check_parses(mbxU_parse_count, "1e+3", 1000);
  check_parses(mbxU_parse_count, "2.5e6", 2500000);
  check_parses(mbxU_parse_count, "1000e-3", 1);
  check_parses(mbxU_parse_count, "0e999", 0);
  check_parses(mbxU_parse_count, "1e19", 10000000000000000000u);
  check_parses(mbxU_parse_count, "18446744073709551615", UINT64_MAX);
}

static void test_count_errors(void **state) {
  (void)state;
  check_refused(mbxU_parse_count, "abc", "--opt: 'abc' is not a count " COUNT_HINT);
  check_refused(mbxU_parse_count, "", "--opt: empty value " COUNT_HINT);
  check_refused(mbxU_parse_count, "-5", "--opt: '-5' is negative " COUNT_HINT);
  check_refused(mbxU_parse_count, "1.5", "--opt: '1.5' is not a whole number " COUNT_HINT);
  check_refused(mbxU_parse_count, "1e-3", NULL);
  check_refused(mbxU_parse_count, "1.25e1", NULL);
  check_refused(mbxU_parse_count, "1e20", "--opt: '1e20' is too large " COUNT_HINT);
  check_refused(mbxU_parse_count, "1e99999999999999999999", NULL);
  check_refused(mbxU_parse_count, "18446744073709551616", NULL);
  check_refused(mbxU_parse_count, "1e", NULL);
  check_refused(mbxU_parse_count, "1e+", NULL);
  check_refused(mbxU_parse_count, "e9", NULL);
  check_refused(mbxU_parse_count, "10k", NULL);
  check_refused(mbxU_parse_count, "1e9 ", NULL);
  check_refused(mbxU_parse_count, "0x10", NULL);
}

static void check_epoch(const char *text, int64_t want) {
  char msg[MSG_SIZE] = "";
  int64_t got = 12345;
  if (mbxU_parse_epoch("--time", text, &got, msg, sizeof msg) != 0)
    fail_msg("'%s' was refused: %s", text, msg);
  if (got != want)
    fail_msg("'%s' parsed to %lld, want %lld", text, (long long)got, (long long)want);
}

static void check_epoch_refused(const char *text, const char *message) {
  char msg[MSG_SIZE] = "";
  int64_t got = 12345;
  assert_int_equal(mbxU_parse_epoch("--time", text, &got, msg, sizeof msg), -1);
  assert_string_equal(msg, message);
  assert_int_equal(got, 12345);
}

#define EPOCH_HINT "(use whole seconds since 1970-01-01 UTC, e.g. 1700000000)"

static void test_epoch_values(void **state) {
  (void)state;
  check_epoch("0", 0);
  check_epoch("1700000000", 1700000000);
  check_epoch("-86400", -86400);
  check_epoch("9223372036854775807", INT64_MAX);
  check_epoch("-9223372036854775808", INT64_MIN);
  check_epoch_refused("", "--time: empty value " EPOCH_HINT);
  check_epoch_refused("1e9", "--time: '1e9' is not a time " EPOCH_HINT);
  check_epoch_refused("1.5", "--time: '1.5' is not a time " EPOCH_HINT);
  check_epoch_refused("+5", "--time: '+5' is not a time " EPOCH_HINT);
  check_epoch_refused("5s", "--time: '5s' is not a time " EPOCH_HINT);
  check_epoch_refused("-", "--time: '-' is not a time " EPOCH_HINT);
  check_epoch_refused(" 5", "--time: ' 5' is not a time " EPOCH_HINT);
  check_epoch_refused("9223372036854775808",
                      "--time: '9223372036854775808' is not a time " EPOCH_HINT);
  check_epoch_refused("99999999999999999999",
                      "--time: '99999999999999999999' is too large " EPOCH_HINT);
}

static void test_seed_values(void **state) {
  (void)state;
  check_parses(mbxU_parse_seed, "0", 0);
  check_parses(mbxU_parse_seed, "42", 42);
  check_parses(mbxU_parse_seed, "18446744073709551615", UINT64_MAX);
  check_parses(mbxU_parse_seed, "-1", UINT64_MAX);
  check_parses(mbxU_parse_seed, "-9223372036854775808", (uint64_t)1 << 63);
  check_refused(mbxU_parse_seed, "18446744073709551616",
                "--opt: '18446744073709551616' is too large (at most 2^64 - 1)");
  check_refused(mbxU_parse_seed, "x", "--opt: 'x' is not a seed (use a whole number, e.g. 42)");
  check_refused(mbxU_parse_seed, "", "--opt: '' is not a seed (use a whole number, e.g. 42)");
  check_refused(mbxU_parse_seed, "4.2", NULL);
  check_refused(mbxU_parse_seed, "-x", NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_size_plain_bytes),     cmocka_unit_test(test_size_suffixes),
      cmocka_unit_test(test_size_exact_fractions), cmocka_unit_test(test_size_errors),
      cmocka_unit_test(test_size_message_quoting), cmocka_unit_test(test_duration_units),
      cmocka_unit_test(test_duration_errors),      cmocka_unit_test(test_count_forms),
      cmocka_unit_test(test_count_errors),         cmocka_unit_test(test_epoch_values),
      cmocka_unit_test(test_seed_values),
  };
  return cmocka_run_group_tests_name("host/options/values", tests, NULL, NULL);
}
