/* tests/common/test_buf.c -- unit tests of common/buf.c: the growable host byte buffer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"

static void empty_buffer_takes_as_empty_string(void **state) {
  (void)state;
  mbxU_buf b = {0};
  size_t len = 99;
  char *s = mbxU_buf_take(&b, &len);
  assert_non_null(s);
  assert_int_equal(len, 0);
  assert_string_equal(s, "");
  free(s);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.cap, 0);
}

static void put_and_puts_append_and_terminate(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "hello");
  assert_int_equal(b.len, 5);
  assert_string_equal(b.data, "hello");
  mbxU_buf_put(&b, ", world!!", 7);
  assert_int_equal(b.len, 12);
  assert_string_equal(b.data, "hello, world");
  assert_true(b.cap > b.len);
  assert_int_equal(b.failed, 0);
  size_t len = 0;
  char *s = mbxU_buf_take(&b, &len);
  assert_int_equal(len, 12);
  assert_string_equal(s, "hello, world");
  free(s);
}

static void zero_length_put_allocates_a_terminated_buffer(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_put(&b, NULL, 0);
  assert_non_null(b.data);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.data[0], '\0');
  mbxU_buf_free(&b);
  assert_null(b.data);
}

static void embedded_nul_bytes_are_kept(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_put(&b, "a\0b\0c", 5);
  size_t len = 0;
  char *s = mbxU_buf_take(&b, &len);
  assert_int_equal(len, 5);
  assert_memory_equal(s, "a\0b\0c", 6); /* plus the terminator */
  free(s);
}

/* Many small appends and one big one cross several doublings; the bytes stay in order. */
static void growth_keeps_every_byte(void **state) {
  (void)state;
  mbxU_buf b = {0};
  char expect[20000];
  size_t n = 0;
  for (int i = 0; n + 7 <= 10000; i++) {
    char piece[7];
    for (int k = 0; k < 7; k++)
      piece[k] = (char)('a' + (i + k) % 26);
    mbxU_buf_put(&b, piece, 7);
    memcpy(expect + n, piece, 7);
    n += 7;
  }
  char big[9000];
  memset(big, 'Z', sizeof big);
  mbxU_buf_put(&b, big, sizeof big);
  memcpy(expect + n, big, sizeof big);
  n += sizeof big;
  assert_int_equal(b.len, n);
  assert_true(b.cap >= n + 1);
  assert_memory_equal(b.data, expect, n);
  assert_int_equal(b.data[n], '\0');
  mbxU_buf_free(&b);
}

/* Exactly filling the capacity must still leave room for the terminator. */
static void exact_capacity_boundary(void **state) {
  (void)state;
  mbxU_buf b = {0};
  char block[255];
  memset(block, 'x', sizeof block);
  mbxU_buf_put(&b, block, 255); /* 255 + NUL = 256: fits the first allocation */
  assert_int_equal(b.cap, 256);
  mbxU_buf_put(&b, "y", 1); /* 256 + NUL: must grow */
  assert_int_equal(b.len, 256);
  assert_true(b.cap >= 257);
  assert_int_equal(b.data[255], 'y');
  assert_int_equal(b.data[256], '\0');
  mbxU_buf_free(&b);
}

static void sink_appends(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_sink(&b, "abc", 3);
  mbxU_buf_sink(&b, "def", 2);
  assert_int_equal(b.len, 5);
  assert_string_equal(b.data, "abcde");
  mbxU_buf_free(&b);
}

static void take_empties_and_buffer_is_reusable(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "first");
  char *one = mbxU_buf_take(&b, NULL); /* len may be NULL */
  assert_string_equal(one, "first");
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  mbxU_buf_puts(&b, "second");
  size_t len = 0;
  char *two = mbxU_buf_take(&b, &len);
  assert_string_equal(two, "second");
  assert_int_equal(len, 6);
  assert_ptr_not_equal(one, two);
  free(one);
  free(two);
}

/* A failed buffer ignores further writes, and take reports the failure once. */
static void failed_buffer_takes_as_null_and_resets(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "partial");
  b.failed = 1;
  mbxU_buf_puts(&b, " more");
  assert_int_equal(b.len, 7);
  size_t len = 42;
  assert_null(mbxU_buf_take(&b, &len));
  assert_int_equal(len, 0);
  assert_null(b.data);
  assert_int_equal(b.failed, 0);
  mbxU_buf_puts(&b, "ok");
  char *s = mbxU_buf_take(&b, &len);
  assert_string_equal(s, "ok");
  free(s);
}

/* A length no allocation can hold marks the buffer failed instead of overflowing cap. */
static void impossible_length_fails_cleanly(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "abc");
  mbxU_buf_put(&b, "x", SIZE_MAX - 16);
  assert_int_equal(b.failed, 1);
  assert_int_equal(b.len, 3);
  assert_null(mbxU_buf_take(&b, NULL));
}

/* n == SIZE_MAX: `n + 1` wraps to 0, so the growth check must not be fooled into skipping
   the reservation and copying SIZE_MAX bytes. The source pointer is never read. */
static void size_max_length_fails_cleanly(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "abc");
  mbxU_buf_put(&b, "x", SIZE_MAX);
  assert_int_equal(b.failed, 1);
  assert_int_equal(b.len, 3);
  mbxU_buf_free(&b);
  mbxU_buf_put(&b, "x", SIZE_MAX); /* also on an empty buffer */
  assert_int_equal(b.failed, 1);
  assert_int_equal(b.len, 0);
  mbxU_buf_free(&b);
}

static void free_resets_everything(void **state) {
  (void)state;
  mbxU_buf b = {0};
  mbxU_buf_puts(&b, "x");
  b.failed = 1;
  mbxU_buf_free(&b);
  assert_null(b.data);
  assert_int_equal(b.len, 0);
  assert_int_equal(b.cap, 0);
  assert_int_equal(b.failed, 0);
  mbxU_buf_free(&b); /* twice is fine */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(empty_buffer_takes_as_empty_string),
      cmocka_unit_test(put_and_puts_append_and_terminate),
      cmocka_unit_test(zero_length_put_allocates_a_terminated_buffer),
      cmocka_unit_test(embedded_nul_bytes_are_kept),
      cmocka_unit_test(growth_keeps_every_byte),
      cmocka_unit_test(exact_capacity_boundary),
      cmocka_unit_test(sink_appends),
      cmocka_unit_test(take_empties_and_buffer_is_reusable),
      cmocka_unit_test(failed_buffer_takes_as_null_and_resets),
      cmocka_unit_test(impossible_length_fails_cleanly),
      cmocka_unit_test(free_resets_everything),
      /* Last: before the fix it corrupts the heap (ASan aborts the process). */
      cmocka_unit_test(size_max_length_fails_cleanly),
  };
  return cmocka_run_group_tests_name("common/buf", tests, NULL, NULL);
}
