/* tests/stdlib/test_strbuild.c -- unit tests of stdlib/strbuild.c: rep, pack and unpack. */
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

#define MiB (1024u * 1024u)

/* ---- string.rep ------------------------------------------------------------------------ */

static void rep_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return string.rep('ab', 3, ','), #string.rep('x', 1000, 'yy'), "
                      "string.rep('a', 1, ','), string.rep('a', -1), string.rep('', 3, '-'), "
                      "('-'):rep(3), string.rep('a', 0, 'sep'), string.rep(12, 2)",
                      "[\"ab,ab,ab\",2998,\"a\",\"\",\"--\",\"---\",\"\",\"1212\"]");
  /* Long results are built by copying what is already written: check the period survives
     every copy (odd period, copies larger than one charge batch). */
  snippet_check_value("local s = string.rep('abcdefg', 1000000, '12') local ok = true "
                      "for k = 0, 999998, 9973 do ok = ok and s:sub(9 * k + 1, 9 * k + 9) == "
                      "'abcdefg12' end return #s, ok, s:sub(-9)",
                      "[8999998,true,\"12abcdefg\"]");
  snippet_check_value(
      "local s = string.rep('abc', 100000, '-') local ok = true "
      "for i = 1, #s - 3, 4 do ok = ok and s:sub(i, i + 3) == 'abc-' end return #s, ok",
      "[399999,true]");
}

static void rep_errors_like_stock(void **state) {
  (void)state;
  check_error("string.rep()", "bad argument #1 to 'rep' (string expected, got no value)");
  check_error("string.rep('x', 1.5)", "bad argument #2 to 'rep' (number has no integer "
                                      "representation)");
  check_error("string.rep('x', 2, {})", "bad argument #3 to 'rep' (string expected, got table)");
  check_error("string.rep('x', 2^31)", "resulting string too large");
}

/* Stock rep('', n) loops n times in C doing nothing (THREATS D3): it must return at once. */
static void rep_of_empty_returns_at_once(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 10000, 2000};
  const snippet_outcome *o =
      snippet_check_ends(lim,
                         "return #string.rep('', 2^62), #string.rep('', math.maxinteger, ''), "
                         "#(''):rep(math.maxinteger)",
                         MBX_OK, NULL);
  assert_string_equal(o->value, "[0,0,0]");
  assert_true(o->usage.instructions < 10000);
}

/* A result that cannot fit in the memory left is refused before anything is allocated. */
static void rep_too_large_is_refused_without_allocating(void **state) {
  (void)state;
  snippet_limits lim = {8 * MiB, SNIPPET_KEEP, SNIPPET_KEEP};
  const snippet_outcome *o = snippet_check_ends(lim, "return string.rep('x', 2^40)",
                                                MBX_RUNTIME_ERROR, "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  o = snippet_check_ends(lim, "return string.rep('x', 2^30)", MBX_RUNTIME_ERROR,
                         "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  o = snippet_check_ends(lim, "return string.rep('abc', 2^28, 'defgh')", MBX_RUNTIME_ERROR,
                         "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  /* The refusal is an ordinary error; the sandbox goes on. */
  o = snippet_check_ends(
      lim, "local ok = pcall(string.rep, 'x', 2^30) return ok, #string.rep('x', 1000)", MBX_OK,
      NULL);
  assert_string_equal(o->value, "[false,1000]");
}

static void rep_is_charged(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 100000,
                        SNIPPET_KEEP}; /* 16 MiB at one instruction per 64 bytes: 262144 */
  snippet_check_ends(lim, "return #string.rep('x', 2^24)", MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits enough = {SNIPPET_KEEP, 1000000, SNIPPET_KEEP};
  const snippet_outcome *o =
      snippet_check_ends(enough, "return #string.rep('x', 2^24)", MBX_OK, NULL);
  assert_string_equal(o->value, "16777216");
  assert_true(o->usage.instructions >= (1u << 24) / 64);
}

/* ---- string.pack / string.unpack ------------------------------------------------------- */

static void pack_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return string.byte(string.pack('<i4', 7), 1, -1)", "[7,0,0,0]");
  snippet_check_value("return string.byte(string.pack('>i2h', 1, -2), 1, -1)", "[0,1,255,254]");
  snippet_check_value("return #string.pack('<!8 b d', 1, 2), string.packsize('<!8 b d')",
                      "[16,16]");
  snippet_check_value("return string.pack('c5', 'ab') == 'ab\\0\\0\\0', string.pack('z', 'ab') == "
                      "'ab\\0', string.pack('<s1', 'xyz') == '\\3xyz', ('i4'):pack(1) == "
                      "string.pack('i4', 1)",
                      "[true,true,true,true]");
  snippet_check_value("return string.unpack('<i2 i2', '\\1\\0\\2\\0')", "[1,2,5]");
  snippet_check_value("return string.unpack('z B', 'hi\\0\\9')", "[\"hi\",9,5]");
  snippet_check_value("return string.unpack('<s1', '\\3xyz')", "[\"xyz\",5]");
  snippet_check_value("return string.unpack('c2', 'abcd', 3)", "[\"cd\",5]");
  snippet_check_value("return string.unpack('<i4', 'xx\\1\\0\\0\\0', -4)", "[1,7]");
  snippet_check_value("return string.unpack('<d', string.pack('<d', 1.5))", "[1.5,9]");
  snippet_check_value("return string.unpack('<i16', ('\\255'):rep(16))", "[-1,17]");
  snippet_check_value("return #string.pack('c1000000', '')", "1000000");
}

static void pack_errors_like_stock(void **state) {
  (void)state;
  check_error("string.pack('y', 1)", "invalid format option 'y'");
  check_error("string.pack('i17', 1)", "integral size (17) out of limits [1,16]");
  check_error("string.pack('c', 1)", "missing size for format option 'c'");
  check_error("string.pack('c2', 'abc')", "bad argument #2 to 'pack' (string longer than given "
                                          "size)");
  check_error("string.pack('Xz', 1)", "invalid next option for option 'X'");
  check_error("string.pack('!3i4', 1)", "format asks for alignment not power of 2");
  check_error("string.pack('i4', 2^31)", "bad argument #2 to 'pack' (integer overflow)");
  check_error("string.pack('i4')", "bad argument #2 to 'pack' (number expected, got nil)");
  check_error("string.pack('i49', 1)", "integral size (49) out of limits [1,16]");
  check_error("string.pack('i4 9', 1)", "invalid format option '9'");
  /* Stock would pad 999999999 bytes before it reaches the stray '9'; that is refused first. */
  check_error("string.pack('c99999999999', '')", "resulting string too large");
  check_error("string.unpack('i4', 'abc')", "bad argument #2 to 'unpack' (data string too short)");
  check_error("string.unpack('i4', 'abcd', 6)", "initial position out of string");
  check_error("string.unpack('z', 'abc')", "unfinished string for format 'z'");
}

/* Stock pack pads 'c' items byte by byte and doubles its buffer: one call could leap past the
   ceiling. The bound (fixed sizes, 'c' counts, lengths of 's'/'z' arguments) is refused
   before stock runs. */
static void pack_too_large_is_refused_without_allocating(void **state) {
  (void)state;
  snippet_limits lim = {8 * MiB, SNIPPET_KEEP, SNIPPET_KEEP};
  const snippet_outcome *o = snippet_check_ends(lim, "return string.pack('c1000000000', '')",
                                                MBX_RUNTIME_ERROR, "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  o = snippet_check_ends(lim, "return string.pack('i4c2000000000', 1, '')", MBX_RUNTIME_ERROR,
                         "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  /* Work before a malformed option counts: stock would pad before it reaches the error. */
  o = snippet_check_ends(lim, "return string.pack('c2000000000y', '')", MBX_RUNTIME_ERROR,
                         "resulting string too large");
  assert_true(o->usage.memory_peak < MiB);
  o = snippet_check_ends(
      lim, "local s = ('x'):rep(4 * 1024 * 1024) return #string.pack('zs4z', s, s, s)",
      MBX_RUNTIME_ERROR, "resulting string too large");
  assert_true(o->usage.memory_peak < 10 * MiB); /* the 4 MiB argument, built by rep */
  snippet_check_value("local s = ('x'):rep(4 * 1024 * 1024) return #string.pack('zs4z', s, s, s)",
                      "12582918");
}

static void pack_and_unpack_are_charged(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 100000, SNIPPET_KEEP};
  snippet_check_ends(lim, "return #string.pack('c10000000', '')", MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim,
                     "local s = ('x'):rep(2^23) for i = 1, 10 do string.unpack('c' .. #s, s) end",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits enough = {SNIPPET_KEEP, 1000000, SNIPPET_KEEP};
  snippet_check_ends(enough, "local s = ('x'):rep(2^23) return #string.unpack('c' .. #s, s)",
                     MBX_OK, NULL);
}

/* The short plain formats (packed and unpacked by moonbox itself, not by stock) are charged
   like every short fixed format: the format's length + 5 per call ('<i4': 8). Against the
   same loop calling an uncharged function, 1000 calls cost at least 8000 more. */
static void plain_formats_are_charged(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 10000000, SNIPPET_KEEP};
  const char *loops[][2] = {
      {"for i = 1, 1000 do local x = string.pack('<i4', i) end",
       "for i = 1, 1000 do local x = string.len('<i4', i) end"},
      {"local d = '\\1\\0\\0\\0' for i = 1, 1000 do local x = string.unpack('<i4', d) end",
       "local d = '\\1\\0\\0\\0' for i = 1, 1000 do local x = string.len('<i4', d) end"},
  };
  for (size_t k = 0; k < sizeof loops / sizeof loops[0]; k++) {
    uint64_t charged = snippet_check_ends(lim, loops[k][0], MBX_OK, NULL)->usage.instructions;
    uint64_t plain = snippet_check_ends(lim, loops[k][1], MBX_OK, NULL)->usage.instructions;
    assert_true(charged >= plain + 1000 * 8);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rep_works_like_stock),
      cmocka_unit_test(rep_errors_like_stock),
      cmocka_unit_test(rep_of_empty_returns_at_once),
      cmocka_unit_test(rep_too_large_is_refused_without_allocating),
      cmocka_unit_test(rep_is_charged),
      cmocka_unit_test(pack_works_like_stock),
      cmocka_unit_test(pack_errors_like_stock),
      cmocka_unit_test(pack_too_large_is_refused_without_allocating),
      cmocka_unit_test(pack_and_unpack_are_charged),
      cmocka_unit_test(plain_formats_are_charged),
  };
  return cmocka_run_group_tests_name("stdlib/strbuild", tests, snippet_setup, snippet_teardown);
}
