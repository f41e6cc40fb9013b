/* tests/common/test_error.c -- unit tests of common/error.c: filling the public error record. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"

static void error_set_fills_and_truncates(void **state) {
  (void)state;
  mbxU_error_set(NULL, MBX_INVALID_ARGUMENT, "no record: %d", 1); /* must not crash */
  mbx_error err;
  memset(&err, 0x55, sizeof err);
  mbxU_error_set(&err, MBX_SOURCE_TOO_LARGE, "limit is %d bytes", 16);
  assert_int_equal(err.code, MBX_SOURCE_TOO_LARGE);
  assert_int_equal(err.line, 0);
  assert_string_equal(err.chunk, "");
  assert_string_equal(err.message, "limit is 16 bytes");
  char long_text[1000];
  memset(long_text, 'L', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  mbxU_error_set(&err, MBX_NO_MEMORY, "%s", long_text);
  assert_int_equal(strlen(err.message), sizeof err.message - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(error_set_fills_and_truncates)};
  return cmocka_run_group_tests_name("common/error", tests, NULL, NULL);
}
