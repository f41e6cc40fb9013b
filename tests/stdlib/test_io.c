/* tests/stdlib/test_io.c -- unit tests of stdlib/io.c: io.write and io.stdout/io.stderr
   write into the captured streams; nothing reaches a host file. */
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

static void write_goes_to_stdout(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("io.write('a', 'b') io.write() io.write('c\\n')", &o), MBX_OK);
  assert_string_equal(o.out, "abc\n");
  assert_int_equal(o.err_len, 0);
  assert_int_equal(run("io.write('x\\0y')", &o), MBX_OK);
  assert_int_equal(o.out_len, 3);
  assert_memory_equal(o.out, "x\0y", 3);
}

static void file_write_goes_to_its_stream(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("io.stdout:write('out1') io.stderr:write('err1', 'err2') "
                       "io.write('out2') print('p')",
                       &o),
                   MBX_OK);
  assert_string_equal(o.out, "out1out2p\n");
  assert_int_equal(o.out_len, 10);
  assert_string_equal(o.err, "err1err2");
  assert_int_equal(o.err_len, 8);
}

static void writes_chain(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("return io.write('a') == io.stdout, "
                       "io.stdout:write('b'):write('c') == io.stdout, "
                       "io.stderr:write('d'):write('e') == io.stderr",
                       &o),
                   MBX_OK);
  assert_string_equal(o.value, "[true,true,true]");
  assert_string_equal(o.out, "abc");
  assert_string_equal(o.err, "de");
}

static void numbers_are_written_tables_refused(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("io.write(1, ' ', 2.5, ' ', -0.0, ' ', 2^63) io.stderr:write(7)", &o),
                   MBX_OK);
  assert_string_equal(o.out, "1 2.5 -0.0 9.2233720368548e+18");
  assert_string_equal(o.err, "7");
  check_error("io.write({})", MBX_RUNTIME_ERROR, "bad argument #1 to 'write'");
  check_error("io.write('a', nil)", MBX_RUNTIME_ERROR, "bad argument #2 to 'write'");
  check_error("io.stdout:write(true)", MBX_RUNTIME_ERROR, "string expected, got boolean");
  /* Arguments before the bad one are already written. */
  assert_int_equal(run("io.write('kept', {})", &o), MBX_RUNTIME_ERROR);
  assert_string_equal(o.out, "kept");
}

static void no_host_file_functions(void **state) {
  (void)state;
  /* The file functions are stubs that say why they are unavailable, and reach nothing. */
  static const char *const stubs[][2] = {
      {"open", "io.open is not available: this policy grants no files"},
      {"lines", "io.lines is not available: this policy grants no files"},
      {"read", "io.read is not available: the sandbox has no standard input"},
      {"popen", "io.popen is not available: this policy grants no exec"},
      {"tmpfile", "io.tmpfile is not available: this policy grants no files"},
      {"input", "io.input is not available: the sandbox has no standard input"},
      {"output", "io.output is not available: output goes to io.stdout only"},
      {"close", "io.close is not available: this policy grants no files"}};
  for (size_t i = 0; i < sizeof stubs / sizeof *stubs; i++) {
    char code[160], want[200];
    snprintf(code, sizeof code, "return pcall(io.%s, '/etc/passwd', 'r')", stubs[i][0]);
    snprintf(want, sizeof want, "[false,\"%s\"]", stubs[i][1]);
    check_value(code, want);
  }
  check_value("return io.type, io.stdin", "[null,null]");
  check_value("local n = 0 for k in pairs(io) do n = n + 1 end "
              "local m = 0 for k in pairs(io.stdout) do m = m + 1 end "
              "return n, m, io.stdout.close, io.stdout.read, io.stdout.seek, io.stdout.lines",
              "[11,1,null,null,null,null]");
}

static void output_limit_keeps_what_fits(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox_with(MBX_LIMIT_OUTPUT, 10);
  outcome o;
  assert_int_equal(run_in(sb,
                          "io.write('12345') io.stdout:write('678') "
                          "io.stderr:write('abcdef') io.write('never') return 1",
                          &o),
                   MBX_OUTPUT_LIMIT);
  assert_string_equal(o.out, "12345678");
  assert_string_equal(o.err, "ab");
  assert_true(mbx_sandbox_poisoned(sb));
  mbx_sandbox_free(sb);

  /* A flood under pcall still ends the run, with exactly the limit kept. */
  sb = new_sandbox_with(MBX_LIMIT_OUTPUT, 1000);
  assert_int_equal(run_in(sb, "for i = 1, 1e6 do pcall(io.write, '0123456789abcdef') end", &o),
                   MBX_OUTPUT_LIMIT);
  assert_int_equal(o.out_len, 1000);
  assert_memory_equal(o.out, "0123456789abcdef", 16);
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(write_goes_to_stdout),
      cmocka_unit_test(file_write_goes_to_its_stream),
      cmocka_unit_test(writes_chain),
      cmocka_unit_test(numbers_are_written_tables_refused),
      cmocka_unit_test(no_host_file_functions),
      cmocka_unit_test(output_limit_keeps_what_fits),
  };
  return cmocka_run_group_tests_name("stdlib/io", tests, group_setup, group_teardown);
}
