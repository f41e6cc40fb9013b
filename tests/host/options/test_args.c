/* tests/host/options/test_args.c -- unit tests of host/options/args.c: command lines and their
   messages, exit codes, chunk names (the values themselves: test_values.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "host/options/args.h"
#include "moonbox.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * 1024)

/* ---------------------------------------------------------------------------------------- */
/* Helpers                                                                                   */

/* Parses a NULL-terminated argv (argv[0] included); returns mbxH_cli_parse's result. */
static int parse_argv(const char *const *args, mbxH_cli_options *opt, char *msg, size_t msg_size) {
  char *argv[32];
  int argc = 0;
  while (args[argc] != NULL) {
    argv[argc] = (char *)args[argc];
    argc++;
  }
  argv[argc] = NULL;
  return mbxH_cli_parse(argc, argv, opt, msg, msg_size);
}

#define PARSE_OK(opt, ...)                                                                         \
  do {                                                                                             \
    const char *const args_[] = {"moonbox", __VA_ARGS__, NULL};                                    \
    char msg_[MBXH_CLI_MSG_SIZE] = "";                                                             \
    if (parse_argv(args_, (opt), msg_, sizeof msg_) != 0) fail_msg("refused: %s", msg_);           \
  } while (0)

#define PARSE_FAILS(message, ...)                                                                  \
  do {                                                                                             \
    const char *const args_[] = {"moonbox", __VA_ARGS__, NULL};                                    \
    char msg_[MBXH_CLI_MSG_SIZE] = "";                                                             \
    mbxH_cli_options opt_;                                                                         \
    assert_int_equal(parse_argv(args_, &opt_, msg_, sizeof msg_), -1);                             \
    assert_string_equal(msg_, (message));                                                          \
  } while (0)

#define SIZE_HINT "(use a number with an optional k, M, G or T suffix, e.g. 64M)"
#define COUNT_HINT "(use a whole number such as 1000000 or 1e9; 0 means no limit)"
#define EPOCH_HINT "(use whole seconds since 1970-01-01 UTC, e.g. 1700000000)"

/* ---------------------------------------------------------------------------------------- */
/* Command lines                                                                             */

static void test_top_level_commands(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "--help");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
  PARSE_OK(&opt, "-h");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
  PARSE_OK(&opt, "help");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
  PARSE_OK(&opt, "--version");
  assert_int_equal(opt.command, MBXH_CLI_VERSION);
  PARSE_OK(&opt, "-v");
  assert_int_equal(opt.command, MBXH_CLI_VERSION);
  PARSE_OK(&opt, "run", "--help");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
  PARSE_OK(&opt, "doctor", "--help");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
  PARSE_OK(&opt, "doctor", "--json");
  assert_int_equal(opt.command, MBXH_CLI_DOCTOR);
  PARSE_FAILS("moonbox doctor takes only --json, --exec-uids or --help, not '--verbose'", "doctor",
              "--verbose");
  PARSE_OK(&opt, "run", "--version", "script.lua");
  assert_int_equal(opt.command, MBXH_CLI_VERSION);
  PARSE_FAILS(
      "unknown command 'walk' (the commands are run, resume, check, fuzz, doctor, mcp and repl; see moonbox --help)",
      "walk");
  PARSE_FAILS("unknown option '--json' (options go after the command: moonbox run [OPTIONS] "
              "FILE; see moonbox --help)",
              "--json");
}

static void test_no_command(void **state) {
  char *argv[] = {(char *)"moonbox", NULL};
  char msg[MBXH_CLI_MSG_SIZE];
  mbxH_cli_options opt;
  (void)state;
  assert_int_equal(mbxH_cli_parse(1, argv, &opt, msg, sizeof msg), -1);
  assert_string_equal(msg, "no command given (use moonbox run FILE, or see moonbox --help)");
}

static void test_script_sources(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "script.lua");
  assert_int_equal(opt.command, MBXH_CLI_RUN);
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_FILE);
  assert_string_equal(opt.script, "script.lua");
  assert_int_equal(opt.json, 0);
  assert_int_equal(opt.memory.set, 0);
  assert_null(opt.input_json);
  assert_null(opt.input_file);

  PARSE_OK(&opt, "run", "-e", "return 1+1");
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_CODE);
  assert_string_equal(opt.script, "return 1+1");

  /* -e's value is taken as is, even when it looks like an option. */
  PARSE_OK(&opt, "run", "-e", "-- just a comment");
  assert_string_equal(opt.script, "-- just a comment");
  PARSE_OK(&opt, "run", "-e", "");
  assert_string_equal(opt.script, "");

  PARSE_OK(&opt, "run", "-");
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_STDIN);
}

static void test_option_order(void **state) {
  mbxH_cli_options before, after;
  (void)state;
  PARSE_OK(&before, "run", "--json", "--memory", "16M", "--timeout", "2s", "s.lua");
  PARSE_OK(&after, "run", "--json", "--memory", "16M", "--timeout", "2s", "s.lua");
  assert_int_equal(before.json, 1);
  assert_int_equal(after.json, 1);
  assert_int_equal(before.memory.set, 1);
  assert_int_equal(before.memory.value, 16 * MIB);
  assert_int_equal(after.memory.value, 16 * MIB);
  assert_int_equal(before.timeout_ms.value, 2000);
  assert_int_equal(after.timeout_ms.value, 2000);
  assert_string_equal(before.script, "s.lua");
  assert_string_equal(after.script, "s.lua");
}

static void test_every_option(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--memory", "1M", "--instructions", "1e6", "--timeout", "500ms",
           "--output-limit", "1k", "--source-limit", "2k", "--input", "{\"x\":1}", "--json", "-e",
           "return x");
  assert_true(opt.memory.set && opt.memory.value == MIB);
  assert_true(opt.instructions.set && opt.instructions.value == 1000000);
  assert_true(opt.timeout_ms.set && opt.timeout_ms.value == 500);
  assert_true(opt.output.set && opt.output.value == KIB);
  assert_true(opt.source.set && opt.source.value == 2 * KIB);
  assert_string_equal(opt.input_json, "{\"x\":1}");
  assert_int_equal(opt.json, 1);

  PARSE_OK(&opt, "run", "--instructions", "0", "--timeout", "0", "--input-file", "in.json",
           "s.lua");
  assert_true(opt.instructions.set && opt.instructions.value == 0);
  assert_true(opt.timeout_ms.set && opt.timeout_ms.value == 0);
  assert_string_equal(opt.input_file, "in.json");
}

/* --policy, --mount, --file: the shape here, the paths in the library. */
static void test_files_options(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--policy", "p.json", "--mount", "./data:/data", "--mount",
           "/srv/a:b:/work:rw", "--file", "/in/x.csv=x.csv", "-e", "return 1");
  assert_string_equal(opt.policy_file, "p.json");
  assert_int_equal(opt.mount_count, 2);
  assert_int_equal(opt.file_count, 1);
  assert_string_equal(opt.files[0], "/in/x.csv=x.csv");
  char host[64], virt[64], msg[MBXH_CLI_MSG_SIZE];
  int mode;
  assert_int_equal(mbxH_cli_split_mount(opt.mounts[0], host, sizeof host, virt, sizeof virt, &mode,
                                        msg, sizeof msg),
                   0);
  assert_string_equal(host, "./data");
  assert_string_equal(virt, "/data");
  assert_int_equal(mode, 1);
  /* A host directory may contain ':': the virtual path starts at the last ":/". */
  assert_int_equal(mbxH_cli_split_mount(opt.mounts[1], host, sizeof host, virt, sizeof virt, &mode,
                                        msg, sizeof msg),
                   0);
  assert_string_equal(host, "/srv/a:b");
  assert_string_equal(virt, "/work");
  assert_int_equal(mode, 2);
  assert_int_equal(mbxH_cli_split_mount("d:/o:overlay", host, sizeof host, virt, sizeof virt, &mode,
                                        msg, sizeof msg),
                   0);
  assert_int_equal(mode, 4);
  assert_int_equal(mbxH_cli_split_mount("averyveryverylonghostdirectory:/x", host, 8, virt,
                                        sizeof virt, &mode, msg, sizeof msg),
                   -1);
  assert_non_null(strstr(msg, "too long"));
  PARSE_FAILS("--mount: 'data' is not HOSTDIR:/PATH[:ro|rw] (e.g. ./data:/data)", "run", "--mount",
              "data", "-e", "1");
  PARSE_FAILS("--mount: ':/data' is not HOSTDIR:/PATH[:ro|rw] (e.g. ./data:/data)", "run",
              "--mount", ":/data", "-e", "1");
  /* A mode typo is refused, never read as part of the virtual path (which would mount
     read-only at "/d:wr"); a ':' before the last '/' is part of the path. */
  PARSE_FAILS("--mount: unknown mode 'wr' in './data:/d:wr' (the modes are ro, rw and overlay, "
              "e.g. ./data:/data:rw)",
              "run", "--mount", "./data:/d:wr", "-e", "1");
  PARSE_FAILS("--mount: unknown mode 'RW' in 'd:/x:RW' (the modes are ro, rw and overlay, e.g. "
              "./data:/data:rw)",
              "run", "--mount", "d:/x:RW", "-e", "1");
  PARSE_FAILS("--mount: unknown mode '' in 'd:/x:' (the modes are ro, rw and overlay, e.g. "
              "./data:/data:rw)",
              "run", "--mount", "d:/x:", "-e", "1");
  assert_int_equal(mbxH_cli_split_mount("d:/a:b/c:rw", host, sizeof host, virt, sizeof virt, &mode,
                                        msg, sizeof msg),
                   0);
  assert_string_equal(virt, "/a:b/c");
  assert_int_equal(mode, 2);
  PARSE_FAILS("--file: 'x.csv' is not /VIRTUAL=HOSTFILE (e.g. --file /input/orders.csv=orders.csv)",
              "run", "--file", "x.csv", "-e", "1");
  PARSE_FAILS("--file: '/x=' is not /VIRTUAL=HOSTFILE (e.g. --file /input/orders.csv=orders.csv)",
              "run", "--file", "/x=", "-e", "1");
  PARSE_FAILS("--policy: empty file name (e.g. --policy policy.json)", "run", "--policy", "", "-e",
              "1");
}

static void test_equals_form(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--memory=16M", "--timeout=1.5s", "--input={\"a\":\"b=c\"}", "s.lua");
  assert_int_equal(opt.memory.value, 16 * MIB);
  assert_int_equal(opt.timeout_ms.value, 1500);
  assert_string_equal(opt.input_json, "{\"a\":\"b=c\"}"); /* split at the first '=' only */
  PARSE_FAILS("--memory: empty value " SIZE_HINT, "run", "--memory=", "s.lua");
  PARSE_FAILS("--json takes no value (remove '=1')", "run", "--json=1", "s.lua");
  PARSE_FAILS("--memory: '12Q' is not a size " SIZE_HINT, "run", "--memory=12Q", "s.lua");
}

/* --diff and --changes: flags alone, a file after '=' (never the next argument: `--diff
   agent.lua` runs agent.lua); --diff-limit a size. */
static void test_report_files(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--diff", "--changes", "s.lua");
  assert_true(opt.diff && opt.changes);
  assert_null(opt.diff_file);
  assert_null(opt.changes_file);
  assert_string_equal(opt.script, "s.lua");
  PARSE_OK(&opt, "run", "--diff=d.patch", "--changes=c.txt", "--diff-limit", "4M", "s.lua");
  assert_true(opt.diff && opt.changes);
  assert_string_equal(opt.diff_file, "d.patch");
  assert_string_equal(opt.changes_file, "c.txt");
  assert_true(opt.diff_limit.set);
  assert_int_equal(opt.diff_limit.value, 4 * MIB);
  PARSE_FAILS("--diff=: empty file name (e.g. --diff=changes.txt)", "run", "--diff=", "s.lua");
  PARSE_FAILS("--diff-limit: '1Q' is not a size " SIZE_HINT, "run", "--diff-limit", "1Q", "s.lua");
}

static void test_last_limit_wins(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--memory", "1M", "--memory", "2M", "s.lua");
  assert_int_equal(opt.memory.value, 2 * MIB);
}

static void test_double_dash(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--json", "--", "--weird.lua");
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_FILE);
  assert_string_equal(opt.script, "--weird.lua");
  assert_int_equal(opt.json, 1);

  PARSE_OK(&opt, "run", "--", "--json");
  assert_string_equal(opt.script, "--json");
  assert_int_equal(opt.json, 0);

  PARSE_OK(&opt, "run", "--", "-");
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_STDIN);

  /* What follows FILE is the script's, options or not (lua(1)). */
  PARSE_OK(&opt, "run", "--", "--", "-x");
  assert_string_equal(opt.script, "--");
  assert_int_equal(opt.script_argc, 1);
  assert_string_equal(opt.script_args[0], "-x");
}

static void test_missing_values(void **state) {
  (void)state;
  PARSE_FAILS("--memory needs a value (e.g. --memory 64M)", "run", "-e", "", "--memory");
  PARSE_FAILS("--instructions needs a value (e.g. --instructions 1e9)", "run", "-e", "",
              "--instructions");
  PARSE_FAILS("--timeout needs a value (e.g. --timeout 2s)", "run", "-e", "", "--timeout");
  PARSE_FAILS("--output-limit needs a value (e.g. --output-limit 1M)", "run", "-e", "",
              "--output-limit");
  PARSE_FAILS("--source-limit needs a value (e.g. --source-limit 64k)", "run", "-e", "",
              "--source-limit");
  PARSE_FAILS("--input needs a value (e.g. --input '{\"x\": 1}')", "run", "-e", "", "--input");
  PARSE_FAILS("--input-file needs a value (e.g. --input-file inputs.json)", "run", "-e", "",
              "--input-file");
  PARSE_FAILS("-e needs a value (e.g. -e 'return 1 + 1')", "run", "-e");
  /* The next argument is the value, so a forgotten value is reported as a bad one. */
  PARSE_FAILS("--memory: '--json' is not a size " SIZE_HINT, "run", "--memory", "--json", "s.lua");
  PARSE_FAILS("--memory: '-5' is negative " SIZE_HINT, "run", "--memory", "-5", "s.lua");
  PARSE_FAILS("--input: empty value (e.g. --input '{\"x\": 1}')", "run", "--input", "", "s.lua");
  PARSE_FAILS("--input-file: empty value (e.g. --input-file inputs.json)", "run", "--input-file",
              "", "s.lua");
}

static void test_bad_options(void **state) {
  (void)state;
  PARSE_FAILS("unknown option '--foo' (see moonbox run --help)", "run", "--foo", "s.lua");
  PARSE_FAILS("unknown option '--foo' (see moonbox run --help)", "run", "--foo=1", "s.lua");
  PARSE_FAILS("unknown option '-x' (see moonbox run --help)", "run", "-x", "s.lua");
  PARSE_FAILS("unknown option '--mem' (see moonbox run --help)", "run", "--mem", "1M", "s.lua");
  PARSE_FAILS("unknown option '-e=return' (see moonbox run --help)", "run", "-e=return");
  PARSE_FAILS("unknown option '--JSON' (see moonbox run --help)", "run", "--JSON", "s.lua");
  PARSE_FAILS("--timeout: '500' has no unit (write e.g. 500ms or 500s; 0 means no limit)", "run",
              "--timeout", "500", "s.lua");
  PARSE_FAILS("--instructions: '1.5' is not a whole number " COUNT_HINT, "run", "--instructions",
              "1.5", "s.lua");
  PARSE_FAILS("--output-limit: '1x' is not a size " SIZE_HINT, "run", "--output-limit", "1x",
              "s.lua");
  PARSE_FAILS("--source-limit: '-1' is negative " SIZE_HINT, "run", "--source-limit=-1", "s.lua");
}

static void test_script_conflicts(void **state) {
  (void)state;
  PARSE_FAILS("no script given (use moonbox run FILE, moonbox run -e CODE, or - to read stdin)",
              "run");
  PARSE_FAILS("no script given (use moonbox run FILE, moonbox run -e CODE, or - to read stdin)",
              "run", "--json", "--memory", "1M");
  PARSE_FAILS("two scripts given (-e CODE and 'a.lua'); give exactly one of FILE, -e CODE or -",
              "run", "-e", "return 1", "a.lua");
  PARSE_FAILS("two scripts given (-e CODE and -e CODE); give exactly one of FILE, -e CODE or -",
              "run", "-e", "return 1", "-e", "return 2");
  {
    /* After FILE or -, everything is the script's arguments (lua(1)): no second script. */
    mbxH_cli_options opt;
    PARSE_OK(&opt, "run", "--json", "a.lua", "b.lua", "-e", "return 1", "--json");
    assert_string_equal(opt.script, "a.lua");
    assert_int_equal(opt.script_argc, 4);
    assert_string_equal(opt.script_args[3], "--json");
    PARSE_OK(&opt, "run", "-", "a.lua");
    assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_STDIN);
    assert_int_equal(opt.script_argc, 1);
    PARSE_OK(&opt, "run", "-e", "return 1", "--json");
    assert_int_equal(opt.script_argc, 0);
    assert_int_equal(opt.json, 1);
  }
  PARSE_FAILS("empty script file name (give FILE, -e CODE or - for stdin)", "run", "");
  PARSE_FAILS("--input and --input-file cannot both be given (use one of them)", "run", "--input",
              "{}", "--input-file", "x.json", "s.lua");
  PARSE_FAILS("--input-file -: stdin already holds the script (put the inputs in a file)", "run",
              "--input-file", "-", "-");
}

static void test_input_file_stdin_allowed(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "--input-file", "-", "-e", "return x");
  assert_string_equal(opt.input_file, "-");
}

/* ---------------------------------------------------------------------------------------- */
/* Chunk names, exit codes, usage                                                            */

static void test_chunk_name(void **state) {
  char buf[16];
  (void)state;
  mbxH_cli_chunk_name("a.lua", buf, sizeof buf);
  assert_string_equal(buf, "a.lua");
  mbxH_cli_chunk_name("dir/fifteen.lua", buf, sizeof buf); /* 15 bytes: fits exactly */
  assert_string_equal(buf, "dir/fifteen.lua");
  mbxH_cli_chunk_name("long/dir/sixteen.lua", buf, sizeof buf);
  assert_string_equal(buf, ".../sixteen.lua");
  assert_int_equal(strlen(buf), sizeof buf - 1);
  /* "é" is two bytes; the cut would fall inside it, so the name starts after it. */
  mbxH_cli_chunk_name("aaaa/\xC3\xA9tude_x.lua", buf, 15);
  assert_string_equal(buf, "...tude_x.lua");
  mbxH_cli_chunk_name("anything", buf, 3);
  assert_string_equal(buf, "");
}

static void test_exit_codes(void **state) {
  (void)state;
  assert_int_equal(mbxH_cli_exit_code(MBX_OK), 0);
  assert_int_equal(mbxH_cli_exit_code(MBX_SYNTAX_ERROR), 1);
  assert_int_equal(mbxH_cli_exit_code(MBX_RUNTIME_ERROR), 1);
  assert_int_equal(mbxH_cli_exit_code(MBX_INVALID_INPUT), 2);
  assert_int_equal(mbxH_cli_exit_code(MBX_MEMORY_LIMIT), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_INSTRUCTION_LIMIT), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_TIME_LIMIT), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_OUTPUT_LIMIT), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_HOST_CALL_LIMIT), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_INTERRUPTED), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_SOURCE_TOO_LARGE), 3);
  assert_int_equal(mbxH_cli_exit_code(MBX_INTERNAL_ERROR), 70);
  assert_int_equal(mbxH_cli_exit_code(MBX_PAUSED), 4);
  assert_int_equal(MBXH_CLI_EXIT_PAUSED, 4);
  assert_int_equal(mbxH_cli_exit_code(MBX_INVALID_ARGUMENT), 70);
  assert_int_equal(mbxH_cli_exit_code(MBX_SANDBOX_POISONED), 70);
  assert_int_equal(mbxH_cli_exit_code(MBX_STACK_TOO_SMALL), 70);
  assert_int_equal(mbxH_cli_exit_code(MBX_NO_MEMORY), 70);
  assert_int_equal(mbxH_cli_exit_code(-1), 70);
}

static void test_seed_time_env_options(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "-e", "return 1");
  assert_false(opt.seed.set);
  assert_false(opt.time_set);
  assert_int_equal(opt.env_count, 0);
  PARSE_OK(&opt, "run", "--seed", "7", "--time=-5", "--env", "A=1", "--env=B=x=y", "--env",
           "C=", "-e", "return 1");
  assert_true(opt.seed.set && opt.seed.value == 7);
  assert_true(opt.time_set && opt.time == -5);
  assert_int_equal(opt.env_count, 3);
  assert_string_equal(opt.env[0], "A=1");
  assert_string_equal(opt.env[1], "B=x=y");
  assert_string_equal(opt.env[2], "C=");
  PARSE_FAILS("--env: 'NOEQUALS' is not NAME=VALUE (e.g. --env API_URL=https://example.com)", "run",
              "--env", "NOEQUALS", "s.lua");
  PARSE_FAILS("--env: '=x' is not NAME=VALUE (e.g. --env API_URL=https://example.com)", "run",
              "--env", "=x", "s.lua");
  PARSE_FAILS("--seed needs a value (e.g. --seed 42)", "run", "-e", "", "--seed");
  PARSE_FAILS("--time: 'now' is not a time " EPOCH_HINT, "run", "--time", "now", "s.lua");
}

/* --deterministic is a flag: off unless given, refuses a value, and leaves --json alone. */
static void test_deterministic_flag(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "-e", "return 1");
  assert_false(opt.deterministic);
  PARSE_OK(&opt, "run", "--deterministic", "--seed", "1", "s.lua");
  assert_true(opt.deterministic);
  assert_false(opt.json);
  assert_true(opt.seed.set && opt.seed.value == 1);
  PARSE_OK(&opt, "run", "--json", "--deterministic", "s.lua");
  assert_true(opt.deterministic && opt.json);
  PARSE_FAILS("--deterministic takes no value (remove '=1')", "run", "--deterministic=1", "s.lua");
}

static void test_exit_code_for_os_exit(void **state) {
  (void)state;
  assert_int_equal(mbxH_cli_exit_code_for_exit(0), 0);
  assert_int_equal(mbxH_cli_exit_code_for_exit(1), 1);
  assert_int_equal(mbxH_cli_exit_code_for_exit(3), 3);
  assert_int_equal(mbxH_cli_exit_code_for_exit(255), 255);
  assert_int_equal(mbxH_cli_exit_code_for_exit(256), 1); /* not 0: that would read as success */
  assert_int_equal(mbxH_cli_exit_code_for_exit(-1), 1);
  assert_int_equal(mbxH_cli_exit_code_for_exit(INT64_MIN), 1);
}

static void test_usage_lists_every_option(void **state) {
  static const char *const names[] = {
      "--memory", "--instructions", "--timeout", "--output-limit", "--source-limit",
      "--input ", "--input-file",   "--json",    "--help",         "--version",
      "-e CODE",  "moonbox run",    "--seed N",  "--time EPOCH",   "--env NAME=VALUE"};
  const char *usage = mbxH_cli_usage(MBXH_CLI_RUN);
  size_t i;
  (void)state;
  for (i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strstr(usage, names[i]) == NULL) fail_msg("usage does not mention %s", names[i]);
  }
  assert_int_equal(usage[strlen(usage) - 1], '\n');
}

/* Each command's --help is its own: its usage and exactly the options it takes. */
static void test_help_per_command(void **state) {
  mbxH_cli_options opt;
  (void)state;
  static const struct {
    const char *argv1;
    mbxH_cli_command whose;
  } asked[] = {{"run", MBXH_CLI_RUN}, {"resume", MBXH_CLI_RESUME}, {"check", MBXH_CLI_CHECK},
               {"mcp", MBXH_CLI_MCP}, {"repl", MBXH_CLI_REPL},     {"doctor", MBXH_CLI_DOCTOR}};
  for (size_t i = 0; i < sizeof asked / sizeof *asked; i++) {
    PARSE_OK(&opt, asked[i].argv1, "--help");
    assert_int_equal(opt.command, MBXH_CLI_HELP);
    assert_int_equal(opt.help_for, asked[i].whose);
  }
  PARSE_OK(&opt, "--help");
  assert_int_equal(opt.help_for, MBXH_CLI_HELP);
  PARSE_OK(&opt, "help", "mcp");
  assert_int_equal(opt.help_for, MBXH_CLI_MCP);
  const char *all = mbxH_cli_usage(MBXH_CLI_HELP);
  static const char *const commands[] = {"  run ",    "  resume ", "  check ", "  fuzz ",
                                         "  doctor ", "  mcp ",    "  repl "};
  for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
    if (strstr(all, commands[i]) == NULL) fail_msg("the overview does not list%s", commands[i]);
  const char *run = mbxH_cli_usage(MBXH_CLI_RUN);
  assert_non_null(strstr(run, "  --diff[=FILE]"));
  assert_null(strstr(run, "--value"));
  const char *resume = mbxH_cli_usage(MBXH_CLI_RESUME);
  assert_non_null(strstr(resume, "  --value JSON"));
  assert_null(strstr(resume, "--diff"));
  const char *mcp = mbxH_cli_usage(MBXH_CLI_MCP);
  assert_non_null(strstr(mcp, "Usage: moonbox mcp"));
  assert_non_null(strstr(mcp, "  --isolate process|none"));
  assert_null(strstr(mcp, "--input"));
  assert_null(strstr(mcp, "  --pause-on NAME"));
  assert_null(strstr(mcp, "  --diff"));
  assert_null(strstr(mcp, "  --stdin"));
  /* A long value stands alone on its line, the help below it. */
  assert_non_null(strstr(mcp, "  --mount HOSTDIR:/PATH[:ro|rw|overlay]\n"));
  const char *repl = mbxH_cli_usage(MBXH_CLI_REPL);
  assert_non_null(strstr(repl, "Usage: moonbox repl"));
  assert_non_null(strstr(repl, "  --memory SIZE"));
  assert_non_null(strstr(repl, "  --input JSON"));
  assert_null(strstr(repl, "  --pause-on NAME"));
  assert_null(strstr(repl, "  --stdin"));
  assert_null(strstr(repl, "  --json"));
  /* (each call rebuilds the one buffer: mcp is not read after this) */
  assert_non_null(strstr(mbxH_cli_usage(MBXH_CLI_DOCTOR), "--exec-uids FIRST-LAST"));
}

/* ---------------------------------------------------------------------------------------- */
/* Pauses, snapshots and resume                                                              */

static void test_pause_on_and_snapshot_out(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "run", "-e", "return 1");
  assert_int_equal(opt.pause_count, 0);
  assert_null(opt.snapshot_out);
  PARSE_OK(&opt, "run", "--pause-on", "tools.fetch", "--pause-on=tools.ask", "--snapshot-out",
           "snap.bin", "s.lua");
  assert_int_equal(opt.command, MBXH_CLI_RUN);
  assert_int_equal(opt.pause_count, 2);
  assert_string_equal(opt.pause_on[0], "tools.fetch");
  assert_string_equal(opt.pause_on[1], "tools.ask");
  assert_string_equal(opt.snapshot_out, "snap.bin");
  assert_string_equal(opt.script, "s.lua");
  assert_false(opt.deterministic); /* --snapshot-out implies it when the policy is built */
  PARSE_OK(&opt, "run", "--snapshot-out=a", "--snapshot-out", "b", "-e", "return 1");
  assert_string_equal(opt.snapshot_out, "b"); /* the last one wins */
  PARSE_FAILS("--pause-on: empty name (e.g. --pause-on tools.fetch)", "run", "--pause-on", "",
              "s.lua");
  PARSE_FAILS("--pause-on needs a value (e.g. --pause-on tools.fetch)", "run", "-e", "",
              "--pause-on");
  PARSE_FAILS("--snapshot-out: empty file name (e.g. --snapshot-out snap.bin)", "run",
              "--snapshot-out=", "s.lua");
  PARSE_FAILS("--snapshot-out needs a value (e.g. --snapshot-out snap.bin)", "run", "-e", "",
              "--snapshot-out");
}

static void test_pause_on_cap(void **state) {
  char *argv[2 * MBXH_CLI_MAX_PAUSE + 8];
  char msg[MBXH_CLI_MSG_SIZE] = "";
  mbxH_cli_options opt;
  int argc = 0, i;
  (void)state;
  argv[argc++] = "moonbox";
  argv[argc++] = "run";
  argv[argc++] = "-e";
  argv[argc++] = "";
  for (i = 0; i <= MBXH_CLI_MAX_PAUSE; i++) {
    argv[argc++] = "--pause-on";
    argv[argc++] = "t.f";
  }
  argv[argc] = NULL;
  assert_int_equal(mbxH_cli_parse(argc, argv, &opt, msg, sizeof msg), -1);
  assert_string_equal(msg, "--pause-on: at most 256 functions can be given");
  assert_int_equal(mbxH_cli_parse(argc - 2, argv, &opt, msg, sizeof msg), 0); /* 256 fit */
  assert_int_equal(opt.pause_count, MBXH_CLI_MAX_PAUSE);
}

static void test_resume_command(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "resume", "snap.bin", "--value", "{\"ok\":true}");
  assert_int_equal(opt.command, MBXH_CLI_RESUME);
  assert_string_equal(opt.snapshot, "snap.bin");
  assert_string_equal(opt.resume_value, "{\"ok\":true}");
  assert_null(opt.resume_error);
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_NONE);
  assert_false(opt.json);
  assert_null(opt.snapshot_out);

  /* Every policy option of run, in any order, with --json and --snapshot-out. */
  PARSE_OK(&opt, "resume", "--error", "not found", "--memory", "16M", "--instructions", "1e6",
           "--timeout", "2s", "--output-limit", "64k", "--source-limit", "1M", "--seed", "7",
           "--time", "0", "--env", "A=1", "--pause-on", "tools.fetch", "--deterministic", "--json",
           "--snapshot-out", "next.bin", "snap.bin");
  assert_string_equal(opt.snapshot, "snap.bin");
  assert_null(opt.resume_value);
  assert_string_equal(opt.resume_error, "not found");
  assert_true(opt.memory.set && opt.memory.value == 16 * MIB);
  assert_true(opt.instructions.set && opt.instructions.value == 1000000);
  assert_true(opt.timeout_ms.set && opt.timeout_ms.value == 2000);
  assert_true(opt.output.set && opt.output.value == 64 * KIB);
  assert_true(opt.source.set && opt.source.value == MIB);
  assert_true(opt.seed.set && opt.seed.value == 7);
  assert_true(opt.time_set && opt.time == 0);
  assert_int_equal(opt.env_count, 1);
  assert_int_equal(opt.pause_count, 1);
  assert_string_equal(opt.pause_on[0], "tools.fetch");
  assert_true(opt.deterministic && opt.json);
  assert_string_equal(opt.snapshot_out, "next.bin");

  /* An empty error message is a message; - is stdin; -- ends the options. */
  PARSE_OK(&opt, "resume", "-", "--error=");
  assert_string_equal(opt.snapshot, "-");
  assert_string_equal(opt.resume_error, "");
  PARSE_OK(&opt, "resume", "--value", "null", "--", "-odd.bin");
  assert_string_equal(opt.snapshot, "-odd.bin");
  assert_string_equal(opt.resume_value, "null");
  /* The value of --value is the next argument even when it starts with '-'. */
  PARSE_OK(&opt, "resume", "s.bin", "--value", "-5");
  assert_string_equal(opt.resume_value, "-5");
  PARSE_OK(&opt, "resume", "--help");
  assert_int_equal(opt.command, MBXH_CLI_HELP);
}

static void test_resume_errors(void **state) {
  (void)state;
  PARSE_FAILS("no snapshot given (use moonbox resume SNAPSHOT --value JSON, with the file moonbox "
              "run --snapshot-out wrote)",
              "resume", "--value", "1");
  PARSE_FAILS("no snapshot given (use moonbox resume SNAPSHOT --value JSON, with the file moonbox "
              "run --snapshot-out wrote)",
              "resume");
  PARSE_FAILS("no answer given (resume needs --value JSON or --error MESSAGE: what the paused call "
              "returns or raises)",
              "resume", "snap.bin");
  PARSE_FAILS("--value and --error cannot both be given (the paused call either returns a value "
              "or raises an error)",
              "resume", "snap.bin", "--value", "1", "--error", "x");
  PARSE_FAILS("two snapshots given ('a.bin' and 'b.bin'); give exactly one SNAPSHOT file", "resume",
              "a.bin", "b.bin", "--value", "1");
  PARSE_FAILS("empty snapshot file name (give SNAPSHOT, or - for stdin)", "resume", "", "--value",
              "1");
  PARSE_FAILS("--value: empty value (give one JSON value, e.g. --value '{\"ok\": true}')", "resume",
              "s.bin", "--value", "");
  PARSE_FAILS("--value needs a value (e.g. --value '{\"ok\": true}')", "resume", "s.bin",
              "--value");
  PARSE_FAILS("--error needs a value (e.g. --error 'not found')", "resume", "s.bin", "--error");
  PARSE_FAILS("unknown option '--bogus' (see moonbox resume --help)", "resume", "s.bin", "--bogus");
  /* Options of one command only. */
  PARSE_FAILS("-e is an option of moonbox run, not of resume (resume continues the script and "
              "inputs recorded in the snapshot)",
              "resume", "s.bin", "--value", "1", "-e", "return 1");
  PARSE_FAILS("--input is an option of moonbox run, not of resume (resume continues the script "
              "and inputs recorded in the snapshot)",
              "resume", "s.bin", "--value", "1", "--input", "{}");
  PARSE_FAILS("--input-file is an option of moonbox run, not of resume (resume continues the "
              "script and inputs recorded in the snapshot)",
              "resume", "s.bin", "--value", "1", "--input-file=x.json");
  PARSE_FAILS("--value is an option of moonbox resume (it answers a paused call), not of run",
              "run", "--value", "1", "s.lua");
  PARSE_FAILS("--error is an option of moonbox resume (it answers a paused call), not of run",
              "run", "--error", "x", "s.lua");
  /* Policy values are checked as for run. */
  PARSE_FAILS("--memory: '12Q' is not a size " SIZE_HINT, "resume", "s.bin", "--value", "1",
              "--memory", "12Q");
  PARSE_FAILS(
      "unknown command 'resum' (the commands are run, resume, check, fuzz, doctor, mcp and repl; see moonbox --help)",
      "resum", "s.bin");
}

static void test_find_pending(void **state) {
  static const char paused[] =
      "{\"error\":null,\"pending\":{\"args\":[[1,\"x]\"],{\"a\":\"\\\"]}\"},null],"
      "\"function\":\"tools.fetch\"},\"status\":\"paused\"}";
  static const char no_args[] =
      "{\"error\":null,\"pending\":{\"args\":[],\"function\":\"t.f\"},\"status\":\"paused\"}";
  static const char done[] = "{\"error\":null,\"pending\":null,\"status\":\"ok\"}";
  static const char cut[] = "{\"error\":null,\"pending\":{\"args\":[\"abc";
  const char *fn = NULL, *args = NULL;
  size_t fn_len = 0, args_len = 0;
  (void)state;
  assert_int_equal(mbxH_cli_find_pending(paused, strlen(paused), &fn, &fn_len, &args, &args_len),
                   0);
  assert_int_equal(fn_len, strlen("tools.fetch"));
  assert_memory_equal(fn, "tools.fetch", fn_len);
  assert_int_equal(args_len, strlen("[[1,\"x]\"],{\"a\":\"\\\"]}\"},null]"));
  assert_memory_equal(args, "[[1,\"x]\"],{\"a\":\"\\\"]}\"},null]", args_len);
  assert_int_equal(mbxH_cli_find_pending(no_args, strlen(no_args), &fn, &fn_len, &args, &args_len),
                   0);
  assert_memory_equal(fn, "t.f", 3);
  assert_int_equal(args_len, 2);
  assert_int_equal(mbxH_cli_find_pending(done, strlen(done), &fn, &fn_len, &args, &args_len), -1);
  assert_int_equal(mbxH_cli_find_pending(cut, strlen(cut), &fn, &fn_len, &args, &args_len), -1);
  assert_int_equal(mbxH_cli_find_pending("", 0, &fn, &fn_len, &args, &args_len), -1);
}

static void test_usage_mentions_resume(void **state) {
  static const char *const names[] = {"moonbox resume", "--pause-on NAME", "--snapshot-out FILE",
                                      "--value JSON",   "--error MESSAGE", "4 paused"};
  const char *usage = mbxH_cli_usage(MBXH_CLI_RESUME);
  size_t i;
  (void)state;
  for (i = 0; i < sizeof names / sizeof names[0]; i++) {
    if (strstr(usage, names[i]) == NULL) fail_msg("usage does not mention %s", names[i]);
  }
}

static void test_check_command(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "check", "--json", "--pause-on", "tools.fetch", "script.lua");
  assert_int_equal(opt.command, MBXH_CLI_CHECK);
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_FILE);
  assert_string_equal(opt.script, "script.lua");
  assert_true(opt.json);
  assert_int_equal(opt.pause_count, 1);
  PARSE_OK(&opt, "check", "-e", "return x", "--input", "{\"x\":1}");
  assert_int_equal(opt.script_kind, MBXH_CLI_SCRIPT_CODE);
  assert_string_equal(opt.input_json, "{\"x\":1}");
  PARSE_FAILS("no script given (use moonbox check FILE, moonbox check -e CODE, or - to read "
              "stdin)",
              "check");
  PARSE_FAILS("--snapshot-out: moonbox check runs nothing, so nothing pauses", "check",
              "--snapshot-out", "s.bin", "x.lua");
  PARSE_FAILS("unknown option '--nope' (see moonbox check --help)", "check", "--nope");
  PARSE_FAILS("--value is an option of moonbox resume (it answers a paused call), not of check",
              "check", "--value", "1", "x.lua");
  if (strstr(mbxH_cli_usage(MBXH_CLI_CHECK), "moonbox check [OPTIONS] (FILE | -e CODE | -)") ==
      NULL)
    fail_msg("usage does not mention moonbox check");
}

/* moonbox mcp takes the policy options only (the server's caps), never a script. */
static void test_mcp_command(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "mcp");
  assert_int_equal(opt.command, MBXH_CLI_MCP);
  PARSE_OK(&opt, "mcp", "--timeout", "2s", "--memory", "16M", "--policy", "p.json", "--file",
           "/in/a=a.txt", "--deterministic");
  assert_int_equal(opt.command, MBXH_CLI_MCP);
  assert_true(opt.timeout_ms.set);
  assert_int_equal(opt.timeout_ms.value, 2000);
  assert_string_equal(opt.policy_file, "p.json");
  assert_int_equal(opt.file_count, 1);
  PARSE_FAILS("moonbox mcp takes no script ('x.lua'): the client sends the code in tools/call",
              "mcp", "x.lua");
  PARSE_FAILS("--json is not an option of moonbox mcp (it takes the policy options: limits, "
              "--policy, --mount, --file, --env, --seed, --time, --deterministic, and --isolate)",
              "mcp", "--json");
  PARSE_FAILS("--pause-on is not an option of moonbox mcp (it takes the policy options: "
              "limits, --policy, --mount, --file, --env, --seed, --time, --deterministic, "
              "and --isolate)",
              "mcp", "--pause-on", "f");
  PARSE_FAILS("unknown option '--bogus' (see moonbox mcp --help)", "mcp", "--bogus");
  /* worker mode is the server's default; --isolate none opts out */
  PARSE_OK(&opt, "mcp");
  assert_int_equal(opt.isolate, 1);
  PARSE_OK(&opt, "mcp", "--isolate", "none");
  assert_int_equal(opt.isolate, 0);
  PARSE_OK(&opt, "mcp", "--isolate", "process", "--timeout", "1s");
  assert_int_equal(opt.isolate, 1);
  PARSE_OK(&opt, "run", "-e", "1");
  assert_int_equal(opt.isolate, 0);
  PARSE_FAILS("--isolate: 'bogus' is not process or none (e.g. --isolate process)", "mcp",
              "--isolate", "bogus");
  /* --hibernate-after: on by default in this process, off (and refused) in worker mode. */
  PARSE_OK(&opt, "mcp");
  assert_int_equal(opt.hibernate_after_ms, 0);
  PARSE_OK(&opt, "mcp", "--isolate", "none");
  assert_int_equal(opt.hibernate_after_ms, MBXH_CLI_HIBERNATE_DEFAULT_MS);
  PARSE_OK(&opt, "mcp", "--hibernate-after", "5m", "--isolate", "none");
  assert_int_equal(opt.hibernate_after_ms, 300000);
  PARSE_OK(&opt, "mcp", "--isolate", "none", "--hibernate-after=0");
  assert_int_equal(opt.hibernate_after_ms, 0);
  PARSE_OK(&opt, "mcp", "--hibernate-after", "0");
  assert_int_equal(opt.hibernate_after_ms, 0);
  PARSE_FAILS("--hibernate-after: the sessions live in jailed worker processes (--isolate "
              "process, the default), which cannot hibernate; add --isolate none to run the "
              "calls in this process, or leave --hibernate-after out",
              "mcp", "--hibernate-after", "30s");
  PARSE_FAILS("--hibernate-after: '30' has no unit (write e.g. 30ms or 30s; 0 means no limit)",
              "mcp", "--isolate", "none", "--hibernate-after", "30");
  PARSE_FAILS("--hibernate-after is an option of moonbox mcp, not of run", "run",
              "--hibernate-after", "1s", "-e", "1");
}

/* moonbox mcp --http-session-prefix NAME: the backend's name at the front of every session id
   it mints (docs/cli.md, "Scale-out"): short, letters, digits and '-', so that a proxy's
   pattern on Mcp-Session-Id reads it and the header stays a plain token. */
static void test_mcp_session_prefix(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "mcp", "--http", "127.0.0.1:0", "--http-session-prefix", "a");
  assert_string_equal(opt.http[MBXH_CLI_HTTP_SESSION_PREFIX], "a");
  PARSE_OK(&opt, "mcp", "--http-session-prefix=eu-west-2");
  assert_string_equal(opt.http[MBXH_CLI_HTTP_SESSION_PREFIX], "eu-west-2");
  PARSE_OK(&opt, "mcp", "--http-session-prefix", "0123456789abcdef"); /* 16: the most */
  assert_int_equal(strlen(opt.http[MBXH_CLI_HTTP_SESSION_PREFIX]), MBXH_CLI_SESSION_PREFIX_MAX);
  PARSE_OK(&opt, "mcp");
  assert_null(opt.http[MBXH_CLI_HTTP_SESSION_PREFIX]);
  PARSE_FAILS("--http-session-prefix: '0123456789abcdefg' is not a name of 1 to 16 letters, "
              "digits or '-' (e.g. --http-session-prefix a)",
              "mcp", "--http-session-prefix", "0123456789abcdefg");
  PARSE_FAILS("--http-session-prefix: '' is not a name of 1 to 16 letters, digits or '-' "
              "(e.g. --http-session-prefix a)",
              "mcp", "--http-session-prefix", "");
  PARSE_FAILS("--http-session-prefix: 'a b' is not a name of 1 to 16 letters, digits or '-' "
              "(e.g. --http-session-prefix a)",
              "mcp", "--http-session-prefix", "a b");
  PARSE_FAILS("--http-session-prefix: 'a_b' is not a name of 1 to 16 letters, digits or '-' "
              "(e.g. --http-session-prefix a)",
              "mcp", "--http-session-prefix=a_b");
  PARSE_FAILS("--http-session-prefix: 'a??X-Evil: 1' is not a name of 1 to 16 letters, "
              "digits or '-' (e.g. --http-session-prefix a)",
              "mcp", "--http-session-prefix", "a\r\nX-Evil: 1");
  PARSE_FAILS("--http-session-prefix is an option of moonbox mcp, not of run", "run",
              "--http-session-prefix", "a", "-e", "1");
}

/* moonbox repl: the policy options and starting globals; no script, no run-only views. */
static void test_repl_command(void **state) {
  mbxH_cli_options opt;
  (void)state;
  PARSE_OK(&opt, "repl");
  assert_int_equal(opt.command, MBXH_CLI_REPL);
  PARSE_OK(&opt, "repl", "--memory", "8M", "--instructions", "1e6", "--input", "{\"a\":1}",
           "--mount", "./d:/d:overlay", "--isolate", "process");
  assert_int_equal(opt.command, MBXH_CLI_REPL);
  assert_int_equal(opt.memory.value, 8u << 20);
  assert_int_equal(opt.instructions.value, 1000000);
  assert_string_equal(opt.input_json, "{\"a\":1}");
  assert_int_equal(opt.mount_count, 1);
  assert_int_equal(opt.isolate, 1);
  PARSE_OK(&opt, "repl", "-v");
  assert_int_equal(opt.command, MBXH_CLI_VERSION);
  PARSE_OK(&opt, "run", "-v");
  assert_int_equal(opt.command, MBXH_CLI_VERSION);
  PARSE_FAILS("moonbox repl takes no script ('s.lua'): type the code at its prompt, or pipe it "
              "in (moonbox repl < FILE)",
              "repl", "s.lua");
  PARSE_FAILS("--stdin is not an option of moonbox repl (it takes the policy options: limits, "
              "--policy, --mount, --file, --module, --env, --seed, --time, --deterministic, "
              "--allow-exec, --isolate, and --input or --input-file for starting globals)",
              "repl", "--stdin", "x");
  PARSE_FAILS("--input-file -: stdin is the prompt's (put the inputs in a file)", "repl",
              "--input-file", "-");
  PARSE_FAILS("--input and --input-file cannot both be given (use one of them)", "repl", "--input",
              "{}", "--input-file", "x.json");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_check_command),
      cmocka_unit_test(test_repl_command),
      cmocka_unit_test(test_mcp_command),
      cmocka_unit_test(test_mcp_session_prefix),
      cmocka_unit_test(test_top_level_commands),
      cmocka_unit_test(test_no_command),
      cmocka_unit_test(test_script_sources),
      cmocka_unit_test(test_option_order),
      cmocka_unit_test(test_every_option),
      cmocka_unit_test(test_equals_form),
      cmocka_unit_test(test_report_files),
      cmocka_unit_test(test_last_limit_wins),
      cmocka_unit_test(test_double_dash),
      cmocka_unit_test(test_missing_values),
      cmocka_unit_test(test_files_options),
      cmocka_unit_test(test_bad_options),
      cmocka_unit_test(test_script_conflicts),
      cmocka_unit_test(test_input_file_stdin_allowed),
      cmocka_unit_test(test_chunk_name),
      cmocka_unit_test(test_exit_codes),
      cmocka_unit_test(test_seed_time_env_options),
      cmocka_unit_test(test_deterministic_flag),
      cmocka_unit_test(test_exit_code_for_os_exit),
      cmocka_unit_test(test_usage_lists_every_option),
      cmocka_unit_test(test_help_per_command),
      cmocka_unit_test(test_pause_on_and_snapshot_out),
      cmocka_unit_test(test_pause_on_cap),
      cmocka_unit_test(test_resume_command),
      cmocka_unit_test(test_resume_errors),
      cmocka_unit_test(test_find_pending),
      cmocka_unit_test(test_usage_mentions_resume),
  };
  return cmocka_run_group_tests_name("host/cli_args", tests, NULL, NULL);
}
