/* tests/stdlib/test_utf8.c -- unit tests of stdlib/utf8.c: stock semantics, metered scans. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* ---- Running snippets: a fresh sandbox per snippet. ------------------------------------ */

/* A failing snippet: runtime_error with this fragment in its message. */
static void check_error(const char *code, const char *fragment) {
  snippet_check_ends(snippet_defaults, code, MBX_RUNTIME_ERROR, fragment);
}

/* A 16 MiB string built by doubling, in `s` (the guest has no cheaper way to a long string
   that does not itself go through the functions under test). */
#define LONG_STRING(unit) "local s = '" unit "' while #s < 16 * 1024 * 1024 do s = s .. s end "

static void char_works(void **state) {
  (void)state;
  snippet_check_value("return utf8.char(72, 233, 8364), utf8.char()", "[\"Hé€\",\"\"]");
  snippet_check_value("return #utf8.char(0x10FFFF), #utf8.char(0x7FFFFFFF)", "[4,6]");
  check_error("return utf8.char(-1)", "value out of range");
}

static void charpattern_is_stock(void **state) {
  (void)state;
  snippet_check_value("return utf8.charpattern == '[\\0-\\x7F\\xC2-\\xFD][\\x80-\\xBF]*'", "true");
}

static void codes_iterates(void **state) {
  (void)state;
  snippet_check_value("local t = {} for p, c in utf8.codes('h\\u{E9}\\u{20AC}!') do "
                      "t[#t + 1] = p t[#t + 1] = c end return t",
                      "[1,104,2,233,4,8364,7,33]");
  check_error("for p, c in utf8.codes('a\\xffb') do end", "invalid UTF-8 code");
}

static void library_has_its_functions(void **state) {
  (void)state;
  snippet_check_value("return type(utf8.len), type(utf8.offset), type(utf8.codepoint), "
                      "type(utf8.codes), type(utf8.char)",
                      "[\"function\",\"function\",\"function\",\"function\",\"function\"]");
}

/* ---- len ------------------------------------------------------------------------------- */

static void len_works_like_stock(void **state) {
  (void)state;
  snippet_check_value(
      "return utf8.len('h\\u{E9}llo'), utf8.len(''), utf8.len('abc', 4), "
      "utf8.len('abc', -1), utf8.len('h\\u{E9}llo', 1, 2), utf8.len('h\\u{E9}llo', -3, -1)",
      "[5,0,0,1,2,3]");
  /* Invalid sequences: fail plus the position of the first bad byte. */
  snippet_check_value("local a, b = utf8.len('a\\xffb') return a, b", "[null,2]");
  snippet_check_value("local a, b = utf8.len('h\\u{E9}llo', 3) return a, b", "[null,3]");
  snippet_check_value("local a, b = utf8.len('\\xC0\\x80') return a, b", "[null,1]"); /* overlong */
  snippet_check_value("local a, b = utf8.len('ab\\xe9') return a, b", "[null,3]"); /* truncated */
  snippet_check_value("local a, b = utf8.len('\\xF8\\x88\\x80\\x80\\x80\\x80') return a, b",
                      "[null,1]");
  /* Surrogates and values past U+10FFFF only with lax. */
  snippet_check_value(
      "local a, b = utf8.len('\\u{D800}') return a, b, utf8.len('\\u{D800}', 1, -1, true)",
      "[null,1,1]");
  snippet_check_value("local a, b = utf8.len('\\xF4\\x90\\x80\\x80') return a, b, "
                      "utf8.len('\\xF4\\x90\\x80\\x80', 1, -1, true), "
                      "utf8.len('\\u{7FFFFFFF}', 1, -1, true)",
                      "[null,1,1,1]");
  /* A sequence may run past j: j only says where the last one starts. */
  snippet_check_value("return utf8.len('\\u{E9}', 1, 1)", "1");
}

static void len_errors_like_stock(void **state) {
  (void)state;
  check_error("utf8.len('abc', 5)", "bad argument #2 to 'len' (initial position out of bounds)");
  check_error("utf8.len('abc', 0)", "bad argument #2 to 'len' (initial position out of bounds)");
  check_error("utf8.len('abc', 1, 4)", "bad argument #3 to 'len' (final position out of bounds)");
  check_error("utf8.len()", "bad argument #1 to 'len' (string expected, got no value)");
}

/* ---- codepoint ------------------------------------------------------------------------- */

static void codepoint_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return utf8.codepoint('h\\u{E9}llo', 1, -1)", "[104,233,108,108,111]");
  snippet_check_value("return utf8.codepoint('abc'), utf8.codepoint('abc', -1), "
                      "select('#', utf8.codepoint('abc', 2, 1))",
                      "[97,99,0]");
  snippet_check_value("return utf8.codepoint('\\u{D800}', 1, 1, true), "
                      "utf8.codepoint('\\u{7FFFFFFF}', 1, 1, true)",
                      "[55296,2147483647]");
  snippet_check_value("return select('#', utf8.codepoint(('a'):rep(100000), 1, -1))", "100000");
}

static void codepoint_errors_like_stock(void **state) {
  (void)state;
  check_error("utf8.codepoint('abc', 0)", "bad argument #2 to 'codepoint' (out of bounds)");
  check_error("utf8.codepoint('abc', 1, 4)", "bad argument #3 to 'codepoint' (out of bounds)");
  check_error("utf8.codepoint('\\xff')", "invalid UTF-8 code");
  check_error("utf8.codepoint('\\u{D800}')", "invalid UTF-8 code");
  check_error("utf8.codepoint('h\\u{E9}', 3)", "invalid UTF-8 code");
  check_error("utf8.codepoint(('a'):rep(1100000), 1, -1)", "stack overflow (string slice too "
                                                           "long)");
}

/* One stack slot per result: growth that cannot fit is refused before the allocator has to. */
static void codepoint_refuses_what_cannot_fit(void **state) {
  (void)state;
  snippet_limits lim = {1024 * 1024, SNIPPET_KEEP, SNIPPET_KEEP};
  const snippet_outcome *o =
      snippet_check_ends(lim, "return utf8.codepoint(('a'):rep(500000), 1, -1)", MBX_RUNTIME_ERROR,
                         "string slice too long");
  assert_true(o->usage.memory_peak < 2 * 1024 * 1024);
}

/* ---- offset ---------------------------------------------------------------------------- */

static void offset_works_like_stock(void **state) {
  (void)state;
  snippet_check_value(
      "return utf8.offset('h\\u{E9}llo', 3), utf8.offset('h\\u{E9}llo', -1), "
      "utf8.offset('h\\u{E9}llo', 0, 3), utf8.offset('abc', 5), utf8.offset('abc', 4), "
      "utf8.offset('abc', -4), utf8.offset('abc', 0), utf8.offset('abc', -1, 2), "
      "utf8.offset('', 1), utf8.offset('', -1)",
      "[4,6,2,null,4,null,1,1,1,null]");
}

static void offset_errors_like_stock(void **state) {
  (void)state;
  check_error("utf8.offset('h\\u{E9}llo', 1, 3)", "initial position is a continuation byte");
  check_error("utf8.offset('abc', 1, 5)", "bad argument #3 to 'offset' (position out of bounds)");
  check_error("utf8.offset('abc', 1, -5)", "bad argument #3 to 'offset' (position out of "
                                           "bounds)");
  check_error("utf8.offset('abc')", "bad argument #2 to 'offset' (number expected, got no "
                                    "value)");
}

/* ---- metering -------------------------------------------------------------------------- */

/* Each function scans a guest-sized string in one C call: it is charged per byte scanned. */
static void scans_are_charged(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 200000,
                        SNIPPET_KEEP}; /* 16 MiB at one instruction per 16 bytes: 1048576 */
  snippet_check_ends(lim, LONG_STRING("a") "return utf8.len(s)", MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, LONG_STRING("\\u{E9}") "return utf8.offset(s, -1)", MBX_OK, NULL);
  snippet_check_ends(lim, LONG_STRING("\\u{E9}") "return utf8.offset(s, 2^40)",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, LONG_STRING("\\x80") "return utf8.offset(s, 0, #s)",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, LONG_STRING("a") "for i = 1, 100 do utf8.codepoint(s, 1, 900000) end",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits deadline = {SNIPPET_KEEP, 0, 30};
  const snippet_outcome *o = snippet_check_ends(
      deadline, LONG_STRING("a") "for i = 1, 1e6 do utf8.len(s) end", MBX_TIME_LIMIT, NULL);
  (void)o;
  snippet_limits enough = {SNIPPET_KEEP, 10000000, SNIPPET_KEEP};
  o = snippet_check_ends(enough, LONG_STRING("\\u{E9}") "return utf8.len(s)", MBX_OK, NULL);
  assert_string_equal(o->value, "8388608");
  assert_true(o->usage.instructions >= (16u << 20) / 16);
}

/* utf8.codes skips the continuation bytes after the position it is given, as many as there
   are (5.4.4's semantics): a run longer than a valid string can hold is charged per byte, so
   an iterator call over 16 MiB of stray 0x80 bytes is not one instruction's worth. */
static void codes_long_runs_are_charged(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 400000, SNIPPET_KEEP}; /* 16 MiB at 1 per 16 bytes: 1048576 */
  snippet_check_ends(lim,
                     LONG_STRING("\\x80") "local f = utf8.codes(s) for i = 1, 1000 do f(s, 0) end",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits deadline = {SNIPPET_KEEP, 0, 30};
  snippet_check_ends(deadline,
                     LONG_STRING("\\x80") "local f = utf8.codes(s) for i = 1, 1e6 do f(s, 0) end",
                     MBX_TIME_LIMIT, NULL);
  snippet_limits enough = {SNIPPET_KEEP, 10000000, SNIPPET_KEEP};
  const snippet_outcome *o = snippet_check_ends(
      enough,
      LONG_STRING("\\x80") "local t = {} for p, c in utf8.codes('a' .. s .. 'b') do "
                           "t[#t + 1] = p t[#t + 1] = c end return t",
      MBX_OK, NULL);
  assert_string_equal(o->value, "[1,97,16777218,98]");
  assert_true(o->usage.instructions >= (16u << 20) / 16);
  /* A valid string's runs (at most five bytes) are not charged per byte. */
  o = snippet_check_ends(enough,
                         "local n = 0 for p, c in utf8.codes(('\\u{10348}'):rep(1000)) do "
                         "n = n + 1 end return n",
                         MBX_OK, NULL);
  assert_string_equal(o->value, "1000");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(char_works),
      cmocka_unit_test(charpattern_is_stock),
      cmocka_unit_test(codes_iterates),
      cmocka_unit_test(codes_long_runs_are_charged),
      cmocka_unit_test(library_has_its_functions),
      cmocka_unit_test(len_works_like_stock),
      cmocka_unit_test(len_errors_like_stock),
      cmocka_unit_test(codepoint_works_like_stock),
      cmocka_unit_test(codepoint_errors_like_stock),
      cmocka_unit_test(codepoint_refuses_what_cannot_fit),
      cmocka_unit_test(offset_works_like_stock),
      cmocka_unit_test(offset_errors_like_stock),
      cmocka_unit_test(scans_are_charged),
  };
  return cmocka_run_group_tests_name("stdlib/utf8", tests, snippet_setup, snippet_teardown);
}
