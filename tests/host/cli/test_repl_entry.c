/* tests/host/cli/test_repl_entry.c -- host/cli/repl_entry.c: the incomplete-chunk test, lines
   gathered into entries as lua -i gathers them (return first, "=EXPR", more lines while the
   chunk ends too early, syntax errors with their line, the source limit), and the wrapped
   chunk run in a real sandbox: values printed as lua -i prints them, line numbers kept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/cli/repl_entry.h"

static mbx_policy *policy;
static mbx_runtime *runtime;

static int setup(void **state) {
  (void)state;
  policy = mbx_policy_new();
  runtime = mbx_runtime_new(NULL);
  return policy && runtime ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  mbx_policy_free(policy);
  mbx_runtime_free(runtime);
  return 0;
}

/* Adds a line; returns the verdict, with the code (or "") in *code (freed by the caller). */
static mbxH_repl_verdict add(mbxH_repl_entry *e, const char *line, char **code, char *msg) {
  size_t code_len = 0;
  mbxH_repl_verdict v =
      mbxH_repl_add_line(e, policy, line, strlen(line), code, &code_len, msg, 512);
  if (v == MBXH_REPL_RUN) {
    assert_non_null(*code);
    assert_int_equal(strlen(*code), code_len);
  } else {
    assert_null(*code);
  }
  return v;
}

/* The entry's source inside the wrapped code: from the wrapper's head to its tail. */
static void assert_wraps(const char *code, const char *src) {
  size_t empty_len;
  char *empty = mbxH_repl_wrap("", 0, &empty_len);
  assert_non_null(empty);
  const char *tail = strstr(empty, "\nend)(...))");
  assert_non_null(tail);
  size_t head = (size_t)(tail - empty), tail_len = strlen(tail);
  assert_int_equal(strlen(code), head + strlen(src) + tail_len);
  assert_memory_equal(code, empty, head);
  assert_memory_equal(code + head, src, strlen(src));
  assert_string_equal(code + head + strlen(src), tail);
  free(empty);
}

static void incomplete_is_the_eof_suffix(void **state) {
  (void)state;
  assert_true(mbxH_repl_incomplete("'end' expected near <eof>"));
  assert_true(mbxH_repl_incomplete("unfinished string near <eof>"));
  assert_false(mbxH_repl_incomplete("<eof> expected near '='"));
  assert_false(mbxH_repl_incomplete("unexpected symbol near '1'"));
  assert_false(mbxH_repl_incomplete(""));
  assert_false(mbxH_repl_incomplete("eof>"));
}

static void wrap_keeps_line_one(void **state) {
  (void)state;
  size_t len;
  char *code = mbxH_repl_wrap("x = 1", 5, &len);
  assert_non_null(code);
  assert_int_equal(strlen(code), len);
  /* The entry starts on the first line: nothing before it has a newline. */
  const char *at = strstr(code, "x = 1");
  assert_non_null(at);
  assert_null(memchr(code, '\n', (size_t)(at - code)));
  /* A comment on the entry's last line cannot swallow the wrapper's end. */
  assert_string_equal(at + 5, "\nend)(...))");
  /* What the REPL leaves room for in the sandbox's source limit (host/cli/repl.c). */
  assert_int_equal(len, 5 + mbxH_repl_wrap_extra());
  free(code);
}

static void expression_first(void **state) {
  (void)state;
  mbxH_repl_entry e = {NULL, 0, 0, 0};
  char *code, msg[512];
  assert_int_equal(add(&e, "1 + 1", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "return 1 + 1");
  free(code);
  assert_int_equal(e.lines, 0);
  /* A statement is not an expression: run as it is. */
  assert_int_equal(add(&e, "x = 1", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "x = 1");
  free(code);
  /* "=EXPR" is "return EXPR". */
  assert_int_equal(add(&e, "=x, 2", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "return x, 2");
  free(code);
  mbxH_repl_entry_free(&e);
}

static void more_lines_while_incomplete(void **state) {
  (void)state;
  mbxH_repl_entry e = {NULL, 0, 0, 0};
  char *code, msg[512];
  assert_int_equal(add(&e, "function f(a)", &code, msg), MBXH_REPL_MORE);
  assert_int_equal(e.lines, 1);
  assert_int_equal(add(&e, "  return a * 2", &code, msg), MBXH_REPL_MORE);
  assert_int_equal(add(&e, "end", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "function f(a)\n  return a * 2\nend");
  free(code);
  assert_int_equal(e.lines, 0);
  /* Only the first line is tried with return: "return" on a later line is a statement. */
  assert_int_equal(add(&e, "do", &code, msg), MBXH_REPL_MORE);
  assert_int_equal(add(&e, "end 5", &code, msg), MBXH_REPL_SYNTAX);
  assert_string_equal(msg, "stdin:2: unexpected symbol near '5'");
  mbxH_repl_entry_free(&e);
}

static void syntax_error_clears_the_entry(void **state) {
  (void)state;
  mbxH_repl_entry e = {NULL, 0, 0, 0};
  char *code, msg[512];
  assert_int_equal(add(&e, "x = = 1", &code, msg), MBXH_REPL_SYNTAX);
  assert_string_equal(msg, "stdin:1: unexpected symbol near '='");
  assert_int_equal(e.lines, 0);
  /* "1 +" is incomplete as "return 1 +" but an error as a statement (as under lua -i). */
  assert_int_equal(add(&e, "1 +", &code, msg), MBXH_REPL_SYNTAX);
  assert_string_equal(msg, "stdin:1: unexpected symbol near '1'");
  /* The next entry starts afresh. */
  assert_int_equal(add(&e, "2", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "return 2");
  free(code);
  /* Cleared at a ">>" prompt (Ctrl-C): the next line is a first line again. */
  assert_int_equal(add(&e, "if x then", &code, msg), MBXH_REPL_MORE);
  mbxH_repl_entry_clear(&e);
  assert_int_equal(add(&e, "3", &code, msg), MBXH_REPL_RUN);
  assert_wraps(code, "return 3");
  free(code);
  mbxH_repl_entry_free(&e);
}

static void source_limit_ends_the_entry(void **state) {
  (void)state;
  mbx_policy *small = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(small, MBX_LIMIT_SOURCE, 1024), MBX_OK);
  mbxH_repl_entry e = {NULL, 0, 0, 0};
  char *code = NULL, msg[512], line[200];
  size_t code_len;
  memset(line, ' ', sizeof line - 1);
  line[sizeof line - 1] = '\0';
  memcpy(line, "t = {", 5);
  mbxH_repl_verdict v = MBXH_REPL_MORE;
  int lines = 0;
  while (v == MBXH_REPL_MORE && lines < 100) {
    v = mbxH_repl_add_line(&e, small, line, strlen(line), &code, &code_len, msg, sizeof msg);
    line[0] = '1';
    line[1] = ',';
    memset(line + 2, ' ', 3);
    lines++;
  }
  assert_int_equal(v, MBXH_REPL_FAILED);
  assert_true(lines > 1 && lines < 10);
  assert_non_null(strstr(msg, "source limit of 1024 bytes"));
  assert_int_equal(e.lines, 0);
  mbxH_repl_entry_free(&e);
  mbx_policy_free(small);
}

/* Runs one typed entry in sb; returns its stdout (static) and fills *status. */
static const char *run_entry(mbx_sandbox *sb, const char *line, mbx_status *status, char *err,
                             size_t err_size) {
  static char out[1024];
  mbxH_repl_entry e = {NULL, 0, 0, 0};
  char *code, msg[512];
  assert_int_equal(add(&e, line, &code, msg), MBXH_REPL_RUN);
  mbx_result *res = NULL;
  *status = mbx_run_named(sb, code, strlen(code), MBXH_REPL_CHUNK, NULL, 0, &res, NULL);
  assert_non_null(res);
  size_t len;
  const char *text = mbx_result_stdout(res, &len);
  assert_true(len < sizeof out);
  memcpy(out, text, len);
  out[len] = '\0';
  text = mbx_result_error_message(res, &len);
  (void)snprintf(err, err_size, "%.*s", (int)len, text);
  mbx_result_free(res);
  free(code);
  mbxH_repl_entry_free(&e);
  return out;
}

static void wrapped_entries_print_like_lua_i(void **state) {
  (void)state;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, policy, NULL);
  assert_non_null(sb);
  mbx_status st;
  char err[512];
  assert_string_equal(run_entry(sb, "1, nil, 'x'", &st, err, sizeof err), "1\tnil\tx\n");
  assert_int_equal(st, MBX_OK);
  assert_string_equal(run_entry(sb, "x = 5", &st, err, sizeof err), "");
  assert_string_equal(run_entry(sb, "x", &st, err, sizeof err), "5\n");
  assert_string_equal(run_entry(sb, "nil", &st, err, sizeof err), "nil\n");
  assert_string_equal(run_entry(sb, "return", &st, err, sizeof err), "");
  /* The entry's varargs are empty, as a main chunk's are under lua -i. */
  assert_string_equal(run_entry(sb, "select('#', ...)", &st, err, sizeof err), "0\n");
  /* An entry that removes select still has its own values counted. */
  assert_string_equal(run_entry(sb, "select = nil; return 1, 2", &st, err, sizeof err), "1\t2\n");
  assert_string_equal(run_entry(sb, "3", &st, err, sizeof err), "3\n");
  /* Errors keep the typed line numbers. */
  assert_string_equal(run_entry(sb, "error('boom')", &st, err, sizeof err), "");
  assert_int_equal(st, MBX_RUNTIME_ERROR);
  assert_non_null(strstr(err, "boom"));
  mbx_sandbox_free(sb);
}

/* Calls mbxH_repl_traceback and compares with want. */
static void assert_traceback(const char *tb, const char *want) {
  size_t len = 0;
  char *got = mbxH_repl_traceback(tb, strlen(tb), &len);
  assert_non_null(got);
  assert_int_equal(len, strlen(got));
  assert_string_equal(got, want);
  free(got);
}

static void traceback_reads_as_lua_i(void **state) {
  (void)state;
  /* The wrapper's main chunk goes; the entry's function is the main chunk. */
  assert_traceback("stack traceback:\n\t[C]: in global 'error'\n\tstdin:3: in function "
                   "<stdin:1>\n\tstdin:1: in main chunk",
                   "stack traceback:\n\t[C]: in global 'error'\n\tstdin:3: in main chunk");
  /* A returned call: the entry's frame is gone already. */
  assert_traceback("stack traceback:\n\tstdin:1: in function <stdin:1>\n\t(...tail calls...)\n"
                   "\tstdin:1: in main chunk",
                   "stack traceback:\n\tstdin:1: in function <stdin:1>\n\t(...tail calls...)");
  /* Other shapes are kept as they are. */
  static const char *const kept[] = {
      "stack traceback:\n\tstdin:1: in main chunk",
      "stack traceback:\n\tstdin:2: in local 'f'\n\tstdin:1: in main chunk",
      "stack traceback:\n\tstdin:1: in function <stdin:1>\n\tinput:1: in main chunk",
      "stack traceback:\n\tstdin:1: in function <stdin:2>\n\tstdin:1: in main chunk",
      "stack traceback:\n\tstdin:x: in function <stdin:1>\n\tstdin:1: in main chunk",
      "",
      "stdin:1: in main chunk",
  };
  for (size_t i = 0; i < sizeof kept / sizeof *kept; i++)
    assert_traceback(kept[i], kept[i]);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(incomplete_is_the_eof_suffix),
      cmocka_unit_test(wrap_keeps_line_one),
      cmocka_unit_test(expression_first),
      cmocka_unit_test(more_lines_while_incomplete),
      cmocka_unit_test(syntax_error_clears_the_entry),
      cmocka_unit_test(source_limit_ends_the_entry),
      cmocka_unit_test(wrapped_entries_print_like_lua_i),
      cmocka_unit_test(traceback_reads_as_lua_i),
  };
  return cmocka_run_group_tests_name("repl_entry", tests, setup, teardown);
}
