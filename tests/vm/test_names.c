/* tests/vm/test_names.c -- unit tests of vm/names.c: Lua's identifiers and reserved words. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "vm/names.h"

static int ident(const char *s) {
  return mbxV_is_identifier(s, strlen(s));
}

static void identifiers(void **state) {
  (void)state;
  assert_true(ident("x"));
  assert_true(ident("_private"));
  assert_true(ident("a1_B2"));
  assert_true(ident("_"));
  assert_false(ident(""));
  assert_false(ident("1x"));
  assert_false(ident("a-b"));
  assert_false(ident("a.b"));
  assert_false(ident("caf\xc3\xa9")); /* ASCII only: the C locale every run uses */
  assert_false(mbxV_is_identifier("a\0b", 3));
}

static void reserved_words_are_not_identifiers(void **state) {
  (void)state;
  static const char *const words[] = {"and",   "break", "do",       "else", "elseif", "end",
                                      "false", "for",   "function", "goto", "if",     "in",
                                      "local", "nil",   "not",      "or",   "repeat", "return",
                                      "then",  "true",  "until",    "while"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++) {
    assert_true(mbxV_is_reserved_word(words[i], strlen(words[i])));
    assert_false(ident(words[i]));
  }
  assert_false(mbxV_is_reserved_word("End", 3)); /* case matters, as in Lua */
  assert_true(ident("End"));
  assert_false(mbxV_is_reserved_word("en", 2));
  assert_true(ident("goto_"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(identifiers),
      cmocka_unit_test(reserved_words_are_not_identifiers),
  };
  return cmocka_run_group_tests_name("vm/names", tests, NULL, NULL);
}
