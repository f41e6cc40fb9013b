/* tests/host/cli/test_fuzz.c -- unit tests of host/cli/fuzz.c: the engine's argv and path. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/cli/fuzz.h"

#define MAX_ARGS 32

/* Translates argv (after "moonbox fuzz") and joins the result with '|', or returns the error. */
static const char *translate(const char *const *args, char *buf, size_t size) {
  char *argv[MAX_ARGS] = {"moonbox", "fuzz"};
  int argc = 2;
  for (; args[argc - 2] != NULL; argc++)
    argv[argc] = (char *)args[argc - 2];
  char *out[MAX_ARGS + 1];
  char msg[320];
  int n = mbxH_cli_fuzz_argv(argc, argv, out, msg, sizeof msg);
  if (n < 0) {
    snprintf(buf, size, "error: %s", msg);
    return buf;
  }
  buf[0] = '\0';
  for (int i = 0; i < n; i++) {
    strncat(buf, out[i], size - strlen(buf) - 1);
    if (i + 1 < n) strncat(buf, "|", size - strlen(buf) - 1);
  }
  assert_null(out[n]);
  mbxH_cli_fuzz_free_argv(out);
  return buf;
}

#define CHECK(want, ...)                                                                           \
  do {                                                                                             \
    const char *args_[] = {__VA_ARGS__, NULL};                                                     \
    char buf_[2048];                                                                               \
    assert_string_equal(translate(args_, buf_, sizeof buf_), want);                                \
  } while (0)

static void options_become_single_flags(void **state) {
  (void)state;
  CHECK("--moonbox-target=t.lua|--moonbox-option=--memory=16M|-runs=5|corpus|"
        "--moonbox-findings=errors,time|--moonbox-no-coverage",
        "t.lua", "--memory", "16M", "-runs=5", "corpus", "--findings=errors,time", "--no-coverage");
  /* Both spellings of a value; flags without one; libFuzzer's flags untouched, in order. */
  CHECK("--moonbox-target=t.lua|--moonbox-option=--mount=./lib:/lib|"
        "--moonbox-option=--deterministic|-fork=2|--moonbox-reproduce=crash-1",
        "t.lua", "--mount=./lib:/lib", "--deterministic", "-fork=2", "--reproduce", "crash-1");
  CHECK("--moonbox-target=t.lua|--moonbox-no-dictionary|-dict=x.dict", "t.lua", "--no-dictionary",
        "-dict=x.dict");
}

static void bad_arguments_say_what_to_do(void **state) {
  (void)state;
  CHECK("error: fuzz: the target FILE comes first (moonbox fuzz FILE [OPTIONS] ...; see "
        "moonbox fuzz --help)",
        "-runs=5", "t.lua");
  CHECK("error: fuzz: --memory needs a value (see moonbox fuzz --help)", "t.lua", "--memory");
  CHECK("error: fuzz: --no-coverage takes no value", "t.lua", "--no-coverage=1");
  CHECK("error: fuzz: --json is not an option of moonbox fuzz (findings are written as "
        "libFuzzer artifacts)",
        "t.lua", "--json");
  CHECK("error: fuzz: unknown option '--runs' (libFuzzer flags take one dash, e.g. -runs=1000; "
        "see moonbox fuzz --help)",
        "t.lua", "--runs=5");
}

static void no_target(void **state) {
  (void)state;
  char *argv[] = {"moonbox", "fuzz"};
  char *out[4];
  char msg[320];
  assert_int_equal(mbxH_cli_fuzz_argv(2, argv, out, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "no target given"));
}

/* The engine is looked up next to this executable, whatever the working directory. */
static void engine_next_to_the_executable(void **state) {
  (void)state;
  char self[4096], want[4200], path[4200];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  assert_true(n > 0);
  self[n] = '\0';
  *strrchr(self, '/') = '\0';
  snprintf(want, sizeof want, "%s/" MBXH_FUZZ_ENGINE, self);
  assert_int_equal(mbxH_cli_fuzz_engine_path(path, sizeof path), 0);
  assert_string_equal(path, want);
  assert_int_equal(mbxH_cli_fuzz_engine_path(path, strlen(want)), -1);
  assert_int_equal(mbxH_cli_fuzz_engine_path(path, strlen(want) + 1), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(options_become_single_flags),
      cmocka_unit_test(bad_arguments_say_what_to_do),
      cmocka_unit_test(no_target),
      cmocka_unit_test(engine_next_to_the_executable),
  };
  return cmocka_run_group_tests_name("host/cli_fuzz", tests, NULL, NULL);
}
