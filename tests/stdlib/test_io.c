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
#include "tests/support/snippet.h"


static void write_goes_to_stdout(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("io.write('a', 'b') io.write() io.write('c\\n')", &o), MBX_OK);
  assert_string_equal(o.out, "abc\n");
  assert_int_equal(o.err_len, 0);
  assert_int_equal(snippet_run("io.write('x\\0y')", &o), MBX_OK);
  assert_int_equal(o.out_len, 3);
  assert_memory_equal(o.out, "x\0y", 3);
}

static void file_write_goes_to_its_stream(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("io.stdout:write('out1') io.stderr:write('err1', 'err2') "
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
  snippet_outcome o;
  assert_int_equal(snippet_run("return io.write('a') == io.stdout, "
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
  snippet_outcome o;
  assert_int_equal(snippet_run("io.write(1, ' ', 2.5, ' ', -0.0, ' ', 2^63) io.stderr:write(7)", &o),
                   MBX_OK);
  assert_string_equal(o.out, "1 2.5 -0.0 9.2233720368548e+18");
  assert_string_equal(o.err, "7");
  snippet_check_error("io.write({})", MBX_RUNTIME_ERROR, "bad argument #1 to 'write'");
  snippet_check_error("io.write('a', nil)", MBX_RUNTIME_ERROR, "bad argument #2 to 'write'");
  snippet_check_error("io.stdout:write(true)", MBX_RUNTIME_ERROR, "string expected, got boolean");
  /* Arguments before the bad one are already written. */
  assert_int_equal(snippet_run("io.write('kept', {})", &o), MBX_RUNTIME_ERROR);
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
    snippet_check_value(code, want);
  }
  snippet_check_value("return io.type, io.stdin", "[null,null]");
  snippet_check_value("local n = 0 for k in pairs(io) do n = n + 1 end "
              "local m = 0 for k in pairs(io.stdout) do m = m + 1 end "
              "return n, m, io.stdout.close, io.stdout.read, io.stdout.seek, io.stdout.lines",
              "[11,1,null,null,null,null]");
}

static void output_limit_keeps_what_fits(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox_with(MBX_LIMIT_OUTPUT, 10);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb,
                          "io.write('12345') io.stdout:write('678') "
                          "io.stderr:write('abcdef') io.write('never') return 1",
                          &o),
                   MBX_OUTPUT_LIMIT);
  assert_string_equal(o.out, "12345678");
  assert_string_equal(o.err, "ab");
  assert_true(mbx_sandbox_poisoned(sb));
  mbx_sandbox_free(sb);

  /* A flood under pcall still ends the run, with exactly the limit kept. */
  sb = snippet_sandbox_with(MBX_LIMIT_OUTPUT, 1000);
  assert_int_equal(snippet_run_in(sb, "for i = 1, 1e6 do pcall(io.write, '0123456789abcdef') end", &o),
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
  return cmocka_run_group_tests_name("stdlib/io", tests, snippet_setup, snippet_teardown);
}
