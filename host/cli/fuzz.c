/* host/cli/fuzz.c -- `moonbox fuzz`: checks its options and execs the moonbox-fuzz engine. */
#include "host/cli/fuzz.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host/options/args.h"
#include "host/options/policy.h"

static const char fuzz_usage[] =
    "Usage: moonbox fuzz FILE [OPTIONS] [LIBFUZZER FLAGS] [CORPUS_DIR... | INPUT...]\n"
    "\n"
    "Coverage-guided fuzzing of the Lua function fuzz(data) that FILE defines, with\n"
    "libFuzzer. FILE's top level runs once; every input then runs fuzz(data) in the sandbox\n"
    "rewound to the state after it. Guest line coverage guides the search; the string and\n"
    "number constants of FILE are a dictionary. See docs/fuzzing.md.\n"
    "\n"
    "Options:\n"
    "  --findings LIST        what is a finding: errors (the default), instructions, memory,\n"
    "                         time, comma-separated (e.g. errors,instructions)\n"
    "  --reproduce INPUT      run one input (a crash- file) and print its traceback\n"
    "  --no-coverage          do not collect guest line coverage (for comparison)\n"
    "  --no-dictionary        do not hand FILE's constants to libFuzzer as a dictionary\n"
    "  --memory, --instructions, --timeout, --output-limit, --source-limit, --seed,\n"
    "  --time, --env, --policy, --mount, --file, --module, --no-script-modules: as for\n"
    "                         moonbox run, per input (require finds the modules beside FILE)\n"
    "                         (defaults: --memory 64M --instructions 10M --seed 0\n"
    "                         --time 1700000000; deterministic mode is always on)\n"
    "\n"
    "Every other argument goes to libFuzzer: -runs=N, -seed=N, -max_total_time=S,\n"
    "-dict=FILE, -fork=N, -jobs=N, -merge=1, -artifact_prefix=DIR/, corpus directories.\n"
    "Exit status: libFuzzer's (0: no finding; 1: a finding, written as crash-<sha1>);\n"
    "with --reproduce 1 for a finding, 0 for none; 2 usage error.\n";

const char *mbxH_cli_fuzz_usage(void) {
  return fuzz_usage;
}

static void set_msg(char *msg, size_t size, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, size, fmt, ap);
  va_end(ap);
}

static char *join(const char *a, const char *b, const char *c) {
  size_t la = strlen(a), lb = strlen(b), lc = c ? strlen(c) : 0;
  char *s = malloc(la + lb + lc + 2);
  if (s == NULL) return NULL;
  memcpy(s, a, la);
  memcpy(s + la, b, lb);
  if (c) {
    s[la + lb] = '=';
    memcpy(s + la + lb + 1, c, lc + 1);
  } else {
    s[la + lb] = '\0';
  }
  return s;
}

void mbxH_cli_fuzz_free_argv(char **out) {
  for (char **p = out; p && *p; p++)
    free(*p);
}

/* Run options that mean nothing per input, and why. */
static const char *refused(const char *name, size_t len) {
  static const struct {
    const char *name, *why;
  } list[] = {
      {"-e", "the target is FILE"},
      {"--input", "every input is the fuzz input"},
      {"--input-file", "every input is the fuzz input (give a corpus directory)"},
      {"--json", "findings are written as libFuzzer artifacts"},
      {"--pause-on", "a paused input could never be resumed"},
      {"--snapshot-out", "inputs never pause"},
      {"--value", "it is an option of moonbox resume"},
      {"--error", "it is an option of moonbox resume"},
      {"--isolate", "the engine reads the guest's coverage in its own process; each input is "
                    "already bounded by the sandbox's limits"},
  };
  for (size_t i = 0; i < sizeof list / sizeof *list; i++)
    if (strlen(list[i].name) == len && strncmp(list[i].name, name, len) == 0) return list[i].why;
  return NULL;
}

int mbxH_cli_fuzz_argv(int argc, char *const argv[], char **out, char *msg, size_t msg_size) {
  int n = 0, have_target = 0;
  out[0] = NULL;
  for (int i = 2; i < argc; i++) {
    const char *arg = argv[i];
    char *made = NULL;
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "-help=1") == 0) {
      fputs(fuzz_usage, stdout);
      mbxH_cli_fuzz_free_argv(out);
      out[0] = NULL;
      return 0;
    }
    if (!have_target) {
      if (arg[0] == '-') {
        set_msg(msg, msg_size,
                "fuzz: the target FILE comes first (moonbox fuzz FILE "
                "[OPTIONS] ...; see moonbox fuzz --help)");
        goto fail;
      }
      made = join(MBXH_FUZZ_FLAG_TARGET, arg, NULL);
      have_target = 1;
    } else if (strncmp(arg, "--", 2) == 0 && arg[2] != '\0') {
      const char *eq = strchr(arg, '=');
      size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
      const char *value = eq ? eq + 1 : NULL;
      int takes = -1;
      const char *flag = NULL;
      if (len == 10 && strncmp(arg, "--findings", len) == 0)
        flag = MBXH_FUZZ_FLAG_FINDINGS, takes = 1;
      else if (len == 11 && strncmp(arg, "--reproduce", len) == 0)
        flag = MBXH_FUZZ_FLAG_REPRODUCE, takes = 1;
      else if (len == 13 && strncmp(arg, "--no-coverage", len) == 0)
        flag = MBXH_FUZZ_FLAG_NO_COVERAGE, takes = 0;
      else if (len == 15 && strncmp(arg, "--no-dictionary", len) == 0)
        flag = MBXH_FUZZ_FLAG_NO_DICTIONARY, takes = 0;
      else if (refused(arg, len) != NULL) {
        set_msg(msg, msg_size, "fuzz: %.*s is not an option of moonbox fuzz (%s)", (int)len, arg,
                refused(arg, len));
        goto fail;
      } else
        takes = mbxH_cli_option_arity(arg, len);
      if (takes < 0) {
        set_msg(msg, msg_size,
                "fuzz: unknown option '%.*s' (libFuzzer flags take one dash, e.g. -runs=1000; "
                "see moonbox fuzz --help)",
                (int)(len > 64 ? 64 : len), arg);
        goto fail;
      }
      if (takes == 0 && value != NULL) {
        set_msg(msg, msg_size, "fuzz: %.*s takes no value", (int)len, arg);
        goto fail;
      }
      if (takes == 1 && value == NULL) {
        if (i + 1 >= argc) {
          set_msg(msg, msg_size, "fuzz: %.*s needs a value (see moonbox fuzz --help)", (int)len,
                  arg);
          goto fail;
        }
        value = argv[++i];
      }
      if (flag != NULL) {
        made = takes ? join(flag, value, NULL) : join(flag, "", NULL);
      } else {
        /* A run option for the policy, in one argument: --moonbox-option=--memory=64M. */
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)len, arg);
        made = join(MBXH_FUZZ_FLAG_OPTION, name, takes ? value : NULL);
      }
    } else {
      made = join(arg, "", NULL); /* libFuzzer's: -flag=value, corpus directories, inputs */
    }
    if (made == NULL) {
      set_msg(msg, msg_size, "out of memory");
      goto fail;
    }
    out[n++] = made;
    out[n] = NULL;
  }
  if (!have_target) {
    set_msg(msg, msg_size,
            "fuzz: no target given (moonbox fuzz FILE [OPTIONS]; see moonbox "
            "fuzz --help)");
    goto fail;
  }
  return n;
fail:
  mbxH_cli_fuzz_free_argv(out);
  out[0] = NULL;
  return -1;
}

int mbxH_cli_fuzz_engine_path(char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = '\0';
  char *slash = strrchr(self, '/');
  if (slash) *slash = '\0';
  int k = snprintf(out, size, "%s/%s", self, MBXH_FUZZ_ENGINE);
  return k < 0 || (size_t)k >= size ? -1 : 0;
}

int mbxH_cli_fuzz(int argc, char **argv) {
  char msg[MBXH_CLI_MSG_SIZE];
  char **args = calloc((size_t)argc + 2, sizeof *args);
  if (args == NULL) {
    fprintf(stderr, "moonbox: out of memory\n");
    return MBXH_CLI_EXIT_INTERNAL;
  }
  int n = mbxH_cli_fuzz_argv(argc, argv, args + 1, msg, sizeof msg);
  if (n <= 0) {
    if (n < 0) fprintf(stderr, "moonbox: %s\n", msg);
    free(args);
    return n < 0 ? MBXH_CLI_EXIT_USAGE : 0;
  }
  /* Next to this binary (shared contract 3: never PATH). */
  char path[PATH_MAX];
  if (mbxH_cli_fuzz_engine_path(path, sizeof path) != 0 || access(path, X_OK) != 0) {
    fprintf(stderr,
            "moonbox: fuzz: the fuzz engine %s is not installed next to moonbox (it is built "
            "only when libFuzzer is found: apt-get install clang libclang-rt-14-dev, then "
            "configure and build again)\n",
            MBXH_FUZZ_ENGINE);
    mbxH_cli_fuzz_free_argv(args + 1);
    free(args);
    return MBXH_CLI_EXIT_USAGE;
  }
  args[0] = path;
  fflush(stdout);
  execv(path, args);
  fprintf(stderr, "moonbox: fuzz: cannot run %s: %s\n", path, strerror(errno));
  mbxH_cli_fuzz_free_argv(args + 1);
  free(args);
  return MBXH_CLI_EXIT_INTERNAL;
}
