/* tests/common/test_bytes.c -- unit tests of common/bytes.c: the shared byte-copy helper. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/bytes.h"

static void copies_bytes_with_a_terminator(void **state) {
  (void)state;
  char *c = mbxU_dup_bytes("a\0b", 3);
  assert_non_null(c);
  assert_memory_equal(c, "a\0b", 3);
  assert_int_equal(c[3], '\0');
  free(c);
  char *e = mbxU_dup_bytes(NULL, 0);
  assert_non_null(e);
  assert_string_equal(e, "");
  free(e);
  char *part = mbxU_dup_bytes("hello", 2);
  assert_string_equal(part, "he");
  free(part);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(copies_bytes_with_a_terminator)};
  return cmocka_run_group_tests_name("common/bytes", tests, NULL, NULL);
}
