/* tests/stdlib/test_utf8.c -- unit tests of stdlib/utf8.c: char, charpattern and codes
   stay; len, offset and codepoint raise "not available". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"

/* ---- Running snippets: a fresh sandbox per snippet unless a test keeps its own. -------- */

static mbx_runtime *runtime;

/* What a run produced, copied out of the mbx_result so tests can assert after freeing it. */
typedef struct outcome {
  mbx_status status;
  char value[8192]; /* the value JSON when the run succeeded, else the full error message */
  char out[8192];   /* captured stdout (raw bytes, NUL-terminated) */
  size_t out_len;
  char err[8192]; /* captured stderr */
  size_t err_len;
} outcome;

static void copy_bytes(char *dst, size_t size, const char *src, size_t len) {
  if (len >= size) len = size - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

/* Run code in sb and fill *o. Returns the run status; fails the test on an API status. */
static mbx_status run_in(mbx_sandbox *sb, const char *code, outcome *o) {
  mbx_result *res = NULL;
  mbx_error err;
  memset(o, 0, sizeof *o);
  o->status = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (o->status >= MBX_API_ERROR_BASE)
    fail_msg("mbx_run refused %s: %s (%s)", code, mbx_status_name(o->status), err.message);
  assert_non_null(res);
  assert_int_equal(mbx_result_status(res), o->status);
  size_t len;
  const char *text =
      o->status == MBX_OK ? mbx_result_value_json(res, &len) : mbx_result_error_message(res, &len);
  copy_bytes(o->value, sizeof o->value, text, len);
  text = mbx_result_stdout(res, &o->out_len);
  copy_bytes(o->out, sizeof o->out, text, o->out_len);
  text = mbx_result_stderr(res, &o->err_len);
  copy_bytes(o->err, sizeof o->err, text, o->err_len);
  mbx_result_free(res);
  return o->status;
}

/* A sandbox with the default policy, or with one limit changed (which == 0: none). */
static mbx_sandbox *new_sandbox_with(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (which != 0) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static mbx_sandbox *new_sandbox(void) {
  return new_sandbox_with(0, 0);
}

/* Run code in a fresh default sandbox. */
static mbx_status run(const char *code, outcome *o) {
  mbx_sandbox *sb = new_sandbox();
  mbx_status s = run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

/* The snippet succeeds and returns exactly this JSON. */
static void check_value(const char *code, const char *json) {
  static outcome o;
  if (run(code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

/* The snippet ends with this status and its error message contains the fragment. */
static void check_error(const char *code, mbx_status status, const char *fragment) {
  static outcome o;
  run(code, &o);
  if (o.status != status)
    fail_msg("%s\n  ended with %s (%s), expected %s", code, mbx_status_name(o.status), o.value,
             mbx_status_name(status));
  if (strstr(o.value, fragment) == NULL)
    fail_msg("%s\n  error %s\n  does not contain %s", code, o.value, fragment);
}

static int group_setup(void **state) {
  (void)state;
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  return runtime == NULL ? -1 : 0;
}

static int group_teardown(void **state) {
  (void)state;
  mbx_runtime_free(runtime);
  runtime = NULL;
  return 0;
}

static void char_works(void **state) {
  (void)state;
  check_value("return utf8.char(72, 233, 8364), utf8.char()", "[\"Hé€\",\"\"]");
  check_value("return #utf8.char(0x10FFFF), #utf8.char(0x7FFFFFFF)", "[4,6]");
  check_error("return utf8.char(-1)", MBX_RUNTIME_ERROR, "value out of range");
}

static void charpattern_is_stock(void **state) {
  (void)state;
  check_value("return utf8.charpattern == '[\\0-\\x7F\\xC2-\\xFD][\\x80-\\xBF]*'", "true");
}

static void codes_iterates(void **state) {
  (void)state;
  check_value("local t = {} for p, c in utf8.codes('h\\u{E9}\\u{20AC}!') do "
              "t[#t + 1] = p t[#t + 1] = c end return t",
              "[1,104,2,233,4,8364,7,33]");
  check_error("for p, c in utf8.codes('a\\xffb') do end", MBX_RUNTIME_ERROR, "invalid UTF-8 code");
}

static void unavailable_functions_name_themselves(void **state) {
  (void)state;
  static const char *const names[] = {"len", "offset", "codepoint"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char code[128], message[128];
    snprintf(code, sizeof code, "return utf8.%s('abc', 1)", names[i]);
    snprintf(message, sizeof message, "utf8.%s is not available in this sandbox yet", names[i]);
    check_error(code, MBX_RUNTIME_ERROR, message);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(char_works),
      cmocka_unit_test(charpattern_is_stock),
      cmocka_unit_test(codes_iterates),
      cmocka_unit_test(unavailable_functions_name_themselves),
  };
  return cmocka_run_group_tests_name("stdlib/utf8", tests, group_setup, group_teardown);
}
