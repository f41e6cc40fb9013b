/* tests/common/test_status.c -- unit tests of common/status.c: names, keys and texts of mbx_status. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "include/moonbox.h"

/* The map, expanded once more here: the functions under test must agree with it entry by
   entry, and must know nothing outside it. */
typedef struct status_row {
  mbx_status code;
  const char *name;
  const char *key;
  const char *text;
} status_row;

static const status_row rows[] = {
#define ROW_(name, code, key, text) {MBX_##name, "MBX_" #name, key, text},
    MBX_STATUS_MAP(ROW_)
#undef ROW_
};
#define NROWS (sizeof rows / sizeof *rows)

static void every_value_has_its_name_key_and_text(void **state) {
  (void)state;
  assert_int_equal(NROWS, 20);
  for (size_t i = 0; i < NROWS; i++) {
    assert_string_equal(mbx_status_name(rows[i].code), rows[i].name);
    assert_string_equal(mbx_status_str(rows[i].code), rows[i].text);
    assert_non_null(mbx_status_key(rows[i].code));
    assert_string_equal(mbx_status_key(rows[i].code), rows[i].key);
  }
}

static void names_keys_and_texts_are_distinct(void **state) {
  (void)state;
  for (size_t i = 0; i < NROWS; i++) {
    for (size_t j = i + 1; j < NROWS; j++) {
      assert_int_not_equal(rows[i].code, rows[j].code);
      assert_string_not_equal(mbx_status_name(rows[i].code), mbx_status_name(rows[j].code));
      assert_string_not_equal(mbx_status_key(rows[i].code), mbx_status_key(rows[j].code));
      assert_string_not_equal(mbx_status_str(rows[i].code), mbx_status_str(rows[j].code));
    }
  }
}

/* "MBX_TIME_LIMIT" <-> "time_limit": the key is the lowercase name without the prefix. */
static void key_is_the_lowercase_name(void **state) {
  (void)state;
  for (size_t i = 0; i < NROWS; i++) {
    const char *name = mbx_status_name(rows[i].code);
    const char *key = mbx_status_key(rows[i].code);
    assert_memory_equal(name, "MBX_", 4);
    assert_int_equal(strlen(name) - 4, strlen(key));
    for (size_t k = 0; key[k]; k++) {
      char c = name[4 + k];
      if (c >= 'A' && c <= 'Z') c = (char)(c - 'A' + 'a');
      assert_int_equal(key[k], c);
    }
    assert_true(strlen(mbx_status_str(rows[i].code)) > 0);
  }
}

/* Run outcomes are 0..10 without a gap; API statuses start at MBX_API_ERROR_BASE. */
static void run_and_api_statuses_are_split_at_the_base(void **state) {
  (void)state;
  int runs = 0, apis = 0;
  for (size_t i = 0; i < NROWS; i++) {
    if ((int)rows[i].code < MBX_API_ERROR_BASE) {
      assert_int_equal((int)rows[i].code, runs);
      runs++;
    } else {
      assert_int_equal((int)rows[i].code, MBX_API_ERROR_BASE + apis);
      apis++;
    }
  }
  assert_int_equal(runs, 11);
  assert_int_equal(apis, 9);
  assert_int_equal(MBX_OK, 0);
  assert_int_equal(MBX_INTERNAL_ERROR, 10);
  assert_int_equal(MBX_INVALID_ARGUMENT, MBX_API_ERROR_BASE);
}

static void unknown_values_are_reported_as_unknown(void **state) {
  (void)state;
  const int unknown[] = {-1, 11, 12, 50, 99, 109, 200, 1000, -1000000};
  for (size_t i = 0; i < sizeof unknown / sizeof *unknown; i++) {
    mbx_status s = (mbx_status)unknown[i];
    assert_string_equal(mbx_status_name(s), "MBX_UNKNOWN");
    assert_string_equal(mbx_status_str(s), "unknown status");
    assert_null(mbx_status_key(s));
  }
}

/* The other direction of coverage: every code the functions know is a row of the map. */
static void the_functions_know_nothing_outside_the_map(void **state) {
  (void)state;
  size_t known = 0;
  for (int code = -64; code < 512; code++) {
    const char *name = mbx_status_name((mbx_status)code);
    const char *key = mbx_status_key((mbx_status)code);
    int in_map = 0;
    for (size_t i = 0; i < NROWS; i++)
      in_map |= (int)rows[i].code == code;
    if (in_map) {
      known++;
      assert_string_not_equal(name, "MBX_UNKNOWN");
      assert_non_null(key);
    } else {
      assert_string_equal(name, "MBX_UNKNOWN");
      assert_null(key);
      assert_string_equal(mbx_status_str((mbx_status)code), "unknown status");
    }
  }
  assert_int_equal(known, NROWS);
}

static void strings_are_static(void **state) {
  (void)state;
  /* The same pointer every time: nothing is allocated per call. */
  assert_ptr_equal(mbx_status_name(MBX_TIME_LIMIT), mbx_status_name(MBX_TIME_LIMIT));
  assert_ptr_equal(mbx_status_key(MBX_TIME_LIMIT), mbx_status_key(MBX_TIME_LIMIT));
  assert_string_equal(mbx_status_name(MBX_TIME_LIMIT), "MBX_TIME_LIMIT");
  assert_string_equal(mbx_status_str(MBX_TIME_LIMIT), "time limit exceeded");
  assert_string_equal(mbx_status_key(MBX_TIME_LIMIT), "time_limit");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_value_has_its_name_key_and_text),
      cmocka_unit_test(names_keys_and_texts_are_distinct),
      cmocka_unit_test(key_is_the_lowercase_name),
      cmocka_unit_test(run_and_api_statuses_are_split_at_the_base),
      cmocka_unit_test(unknown_values_are_reported_as_unknown),
      cmocka_unit_test(the_functions_know_nothing_outside_the_map),
      cmocka_unit_test(strings_are_static),
  };
  return cmocka_run_group_tests_name("common/status", tests, NULL, NULL);
}
