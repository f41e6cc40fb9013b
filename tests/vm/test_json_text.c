/* tests/vm/test_json_text.c -- unit tests of vm/json_text.c: UTF-8, escaping, numbers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/base64.h"
#include "vm/json_text.h"

/* A sink writing into a fixed buffer; every test starts from an empty one. */
typedef struct text_sink {
  char buf[4096];
  size_t len;
  int calls;
} text_sink;

static void sink_put(void *sink, const char *p, size_t n) {
  text_sink *t = sink;
  assert_true(t->len + n < sizeof t->buf);
  memcpy(t->buf + t->len, p, n);
  t->len += n;
  t->buf[t->len] = '\0';
  t->calls++;
}

static const char *put_string(text_sink *t, const char *s, size_t n) {
  t->len = 0;
  t->calls = 0;
  t->buf[0] = '\0';
  mbxV_json_put_string(sink_put, t, s, n);
  return t->buf;
}

static const char *put_number(text_sink *t, double v) {
  t->len = 0;
  t->buf[0] = '\0';
  assert_int_equal(mbxV_json_put_number(sink_put, t, v), 1);
  return t->buf;
}

static const char *put_integer(text_sink *t, int64_t v) {
  t->len = 0;
  t->buf[0] = '\0';
  mbxV_json_put_integer(sink_put, t, v);
  return t->buf;
}

#define VALID(lit) mbxV_utf8_valid(lit, sizeof(lit) - 1)

static void test_utf8_accepts_well_formed(void **state) {
  (void)state;
  assert_true(mbxV_utf8_valid("", 0));
  assert_true(VALID("plain ascii"));
  assert_true(VALID("nul\0inside"));
  assert_true(VALID("\xC2\x80"));         /* U+0080, smallest 2-byte */
  assert_true(VALID("\xDF\xBF"));         /* U+07FF */
  assert_true(VALID("\xE0\xA0\x80"));     /* U+0800, smallest 3-byte */
  assert_true(VALID("\xED\x9F\xBF"));     /* U+D7FF, just below the surrogates */
  assert_true(VALID("\xEE\x80\x80"));     /* U+E000, just above them */
  assert_true(VALID("\xEF\xBF\xBF"));     /* U+FFFF */
  assert_true(VALID("\xF0\x90\x80\x80")); /* U+10000 */
  assert_true(VALID("\xF4\x8F\xBF\xBF")); /* U+10FFFF, the last code point */
  assert_true(VALID("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"));
}

static void test_utf8_rejects_malformed(void **state) {
  (void)state;
  assert_false(VALID("\x80")); /* lone continuation byte */
  assert_false(VALID("\xBF"));
  assert_false(VALID("\xC0\x80"));     /* overlong NUL */
  assert_false(VALID("\xC1\xBF"));     /* overlong 2-byte */
  assert_false(VALID("\xE0\x80\x80")); /* overlong 3-byte */
  assert_false(VALID("\xE0\x9F\xBF"));
  assert_false(VALID("\xF0\x80\x80\x80")); /* overlong 4-byte */
  assert_false(VALID("\xF0\x8F\xBF\xBF"));
  assert_false(VALID("\xED\xA0\x80"));     /* U+D800, a surrogate */
  assert_false(VALID("\xED\xBF\xBF"));     /* U+DFFF */
  assert_false(VALID("\xF4\x90\x80\x80")); /* U+110000 */
  assert_false(VALID("\xF5\x80\x80\x80"));
  assert_false(VALID("\xFF"));
  assert_false(VALID("\xFE"));
  assert_false(VALID("\xE2\x82")); /* truncated */
  assert_false(VALID("\xF0\x9F\x98"));
  assert_false(VALID("ok\xC3"));   /* truncated at the end */
  assert_false(VALID("\xC3\x28")); /* bad continuation */
  assert_false(VALID("\xE2\x28\xA1"));
  assert_false(VALID("\xF0\x9F\x28\x80"));
  /* The length bounds the scan: a valid sequence cut by n is invalid. */
  assert_false(mbxV_utf8_valid("\xC3\xA9", 1));
}

static void test_string_escapes(void **state) {
  text_sink t;
  (void)state;
  assert_string_equal(put_string(&t, "", 0), "\"\"");
  assert_string_equal(put_string(&t, "hi", 2), "\"hi\"");
  assert_string_equal(put_string(&t, "a\"b\\c/d", 7), "\"a\\\"b\\\\c/d\"");
  assert_string_equal(put_string(&t, "\b\f\n\r\t", 5), "\"\\b\\f\\n\\r\\t\"");
  assert_string_equal(put_string(&t, "\x01\x1f\x0b", 3), "\"\\u0001\\u001f\\u000b\"");
  assert_string_equal(put_string(&t, "a\0b", 3), "\"a\\u0000b\"");
  assert_string_equal(put_string(&t, "\x7f", 1), "\"\x7f\"");
  /* UTF-8 passes through; U+2028/U+2029 are escaped, U+2027 and U+202A are not. */
  assert_string_equal(put_string(&t, "caf\xC3\xA9", 5), "\"caf\xC3\xA9\"");
  assert_string_equal(put_string(&t, "x\xE2\x80\xA8y\xE2\x80\xA9", 8), "\"x\\u2028y\\u2029\"");
  assert_string_equal(put_string(&t, "\xE2\x80\xA7\xE2\x80\xAA", 6),
                      "\"\xE2\x80\xA7\xE2\x80\xAA\"");
  assert_string_equal(put_string(&t, "\xF0\x9F\x98\x80", 4), "\"\xF0\x9F\x98\x80\"");
}

static void test_string_copies_runs(void **state) {
  text_sink t;
  (void)state;
  /* Plain text goes out in one piece between the quotes, not byte by byte. */
  put_string(&t, "a fairly long plain string", 26);
  assert_int_equal(t.calls, 3);
}

static void test_string_invalid_utf8_as_bytes(void **state) {
  text_sink t;
  (void)state;
  assert_string_equal(put_string(&t, "\xff", 1), "{\"$bytes\":\"/w==\"}");
  assert_string_equal(put_string(&t, "hi\xC0", 3), "{\"$bytes\":\"aGnA\"}");
  assert_string_equal(put_string(&t, "\xED\xA0\x80", 3), "{\"$bytes\":\"7aCA\"}");
  /* Longer than one 48-byte chunk: the chunks must join into the one-shot encoding. */
  unsigned char raw[200];
  char expect[300];
  for (size_t i = 0; i < sizeof raw; i++)
    raw[i] = (unsigned char)(255 - i);
  for (size_t n = 95; n <= 200; n += 7) {
    mbxU_base64_encode(raw, n, expect);
    expect[mbxU_base64_encoded_len(n)] = '\0';
    put_string(&t, (const char *)raw, n);
    assert_int_equal(t.len, 11 + strlen(expect) + 2);
    assert_memory_equal(t.buf, "{\"$bytes\":\"", 11);
    assert_memory_equal(t.buf + 11, expect, strlen(expect));
    assert_string_equal(t.buf + 11 + strlen(expect), "\"}");
  }
}

static void test_integers(void **state) {
  text_sink t;
  (void)state;
  assert_string_equal(put_integer(&t, 0), "0");
  assert_string_equal(put_integer(&t, -1), "-1");
  assert_string_equal(put_integer(&t, 9007199254740993), "9007199254740993");
  assert_string_equal(put_integer(&t, INT64_MAX), "9223372036854775807");
  assert_string_equal(put_integer(&t, INT64_MIN), "-9223372036854775808");
}

static void test_numbers_shortest(void **state) {
  text_sink t;
  (void)state;
  assert_string_equal(put_number(&t, 1.0), "1.0");
  assert_string_equal(put_number(&t, 0.0), "0.0");
  assert_string_equal(put_number(&t, -0.0), "-0.0");
  assert_string_equal(put_number(&t, 0.1), "0.1");
  assert_string_equal(put_number(&t, 1.5), "1.5");
  assert_string_equal(put_number(&t, -2.25), "-2.25");
  assert_string_equal(put_number(&t, 1e300), "1e+300");
  assert_string_equal(put_number(&t, 1e-7), "1e-07");
  assert_string_equal(put_number(&t, 100.0), "100.0");
  assert_string_equal(put_number(&t, 1.0 / 3.0), "0.3333333333333333");  /* 16 digits */
  assert_string_equal(put_number(&t, 0.1 + 0.2), "0.30000000000000004"); /* 17 digits */
  assert_string_equal(put_number(&t, 9007199254740992.0), "9007199254740992.0");
  assert_string_equal(put_number(&t, 1.7976931348623157e308), "1.7976931348623157e+308");
}

static void test_numbers_round_trip(void **state) {
  text_sink t;
  (void)state;
  /* Any finite double must read back bit for bit, whatever its magnitude. */
  uint64_t x = 0x9E3779B97F4A7C15u;
  for (int i = 0; i < 20000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double v;
    memcpy(&v, &x, sizeof v);
    if (!isfinite(v)) continue;
    put_number(&t, v);
    assert_true(strchr(t.buf, '.') != NULL || strchr(t.buf, 'e') != NULL);
    double back = strtod(t.buf, NULL);
    assert_memory_equal(&back, &v, sizeof v);
  }
  double tiny = 4.9406564584124654e-324; /* the smallest subnormal */
  put_number(&t, tiny);
  assert_true(strtod(t.buf, NULL) == tiny);
}

static void test_numbers_refuse_nonfinite(void **state) {
  text_sink t = {.len = 0, .calls = 0};
  (void)state;
  assert_int_equal(mbxV_json_put_number(sink_put, &t, NAN), 0);
  assert_int_equal(mbxV_json_put_number(sink_put, &t, INFINITY), 0);
  assert_int_equal(mbxV_json_put_number(sink_put, &t, -INFINITY), 0);
  assert_int_equal(t.calls, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_utf8_accepts_well_formed),
      cmocka_unit_test(test_utf8_rejects_malformed),
      cmocka_unit_test(test_string_escapes),
      cmocka_unit_test(test_string_copies_runs),
      cmocka_unit_test(test_string_invalid_utf8_as_bytes),
      cmocka_unit_test(test_integers),
      cmocka_unit_test(test_numbers_shortest),
      cmocka_unit_test(test_numbers_round_trip),
      cmocka_unit_test(test_numbers_refuse_nonfinite),
  };
  return cmocka_run_group_tests_name("vm/json_text", tests, NULL, NULL);
}
