/* host/fuzz/main.c -- moonbox-fuzz: libFuzzer driving fuzz(data) of a Lua target in a sandbox. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.h"
#include "host/options/args.h"
#include "host/options/fuzz_flags.h"
#include "host/options/policy.h"
#include "host/fuzz/dict.h"
#include "moonbox.h"
#include "vm/coverage.h"

/*
** The engine of `moonbox fuzz` (docs/fuzzing.md). Its own executable because libFuzzer owns
** the whole argv (a positional script path would be a corpus directory) and its -fork, -jobs
** and -merge children run argv[0] again with the same arguments: the target and every moonbox
** option travel as --moonbox-... flags, which libFuzzer skips and passes on (host/cli/fuzz.h).
**
** One process, one sandbox, one thread: FILE's top level runs once, the sandbox is
** checkpointed, and each input rewinds to the checkpoint and runs fuzz(data). libFuzzer sees
** the guest's line edges (vm/coverage.h) as its extra 8-bit counters, the target's constants
** and failed string.find/match searches as compare hints.
** Deterministic mode, a fixed seed and clock and the instruction clock make a finding's
** traceback the same in every process (--reproduce prints it). libFuzzer owns SIGALRM and
** SIGUSR1/2: the sandbox's deadline is checked by its count hook, which coverage keeps on.
*/

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*cb)(const uint8_t *data, size_t size));
void __sanitizer_cov_8bit_counters_init(uint8_t *start, uint8_t *stop);
void __sanitizer_cov_pcs_init(const uintptr_t *pcs_beg, const uintptr_t *pcs_end);
void __sanitizer_weak_hook_memcmp(void *caller_pc, const void *s1, const void *s2, size_t n,
                                  int result);

/* 32 Ki counters: room for a few thousand lines' edges with few collisions, and small enough
   that libFuzzer's scan of them after each input stays in the noise. */
#define MAP_SIZE ((size_t)1 << 15)
/* mbx_run needs >= 1 MiB of C stack; the main thread's size depends on ulimit -s. */
#define ENGINE_STACK ((size_t)16 << 20)
#define TARGET_MAX ((size_t)16 << 20)
#define INPUT_MAX ((size_t)64 << 20)
/* The per-input defaults when neither an option nor --policy sets them. */
#define DEFAULT_INSTRUCTIONS 10000000u
#define DEFAULT_MEMORY ((uint64_t)64 << 20)
#define DEFAULT_EPOCH 1700000000

enum { FIND_ERRORS = 1, FIND_INSTRUCTIONS = 2, FIND_MEMORY = 4, FIND_TIME = 8 };

/* The data global the driver reads and removes before it calls fuzz. */
#define DATA_GLOBAL "__moonbox_fuzz_data"
static const char driver[] = "local data = " DATA_GLOBAL "; " DATA_GLOBAL " = nil; fuzz(data)";

static uint8_t counters[MAP_SIZE];
static uintptr_t pc_table[2 * MAP_SIZE];

typedef struct engine {
  int argc;
  char **argv;
  const char *target;
  const char *reproduce;
  unsigned findings;
  int coverage;
  int dictionary;
  char dict_path[4096]; /* the dictionary: /proc/PID/fd/N of this process, or "" */
  char *code;
  size_t code_len;
  char chunk[256];
  mbx_policy *policy;
  mbx_runtime *rt;
  mbx_sandbox *sb;
  /* 0 in builds without checkpoints (MBX_ARENA_MALLOC, for ASan): each input then resets
     the sandbox and runs the top level again, slower but just as isolated. */
  int checkpointed;
  mbxV_coverage cov;
  char *json;
  size_t json_cap;
  int in_run; /* an input is running: exit() from another thread must not free the sandbox */
  int exit_code;
} engine;

static engine E;

static void fail(const char *fmt, const char *a, const char *b) {
  fprintf(stderr, "moonbox-fuzz: ");
  fprintf(stderr, fmt, a, b);
  fputc('\n', stderr);
}

static int parse_findings(const char *list) {
  unsigned set = 0;
  const char *p = list;
  while (*p) {
    size_t n = strcspn(p, ",");
    static const struct {
      const char *name;
      unsigned bit;
    } kinds[] = {{"errors", FIND_ERRORS},
                 {"instructions", FIND_INSTRUCTIONS},
                 {"memory", FIND_MEMORY},
                 {"time", FIND_TIME}};
    size_t i;
    for (i = 0; i < sizeof kinds / sizeof *kinds; i++)
      if (strlen(kinds[i].name) == n && strncmp(kinds[i].name, p, n) == 0) break;
    if (i == sizeof kinds / sizeof *kinds) {
      fprintf(stderr,
              "moonbox-fuzz: --findings: unknown kind '%.*s' (use errors, instructions, memory, "
              "time, comma-separated)\n",
              (int)(n > 40 ? 40 : n), p);
      return -1;
    }
    set |= kinds[i].bit;
    p += n;
    if (*p == ',') p++;
  }
  if (set == 0) {
    fprintf(stderr, "moonbox-fuzz: --findings: empty (e.g. --findings errors,instructions)\n");
    return -1;
  }
  E.findings = set;
  return 0;
}

static char *read_file(const char *what, const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size > max) {
    fprintf(stderr, "moonbox-fuzz: %s %s: %s\n", what, path,
            f == NULL              ? strerror(errno)
            : !S_ISREG(st.st_mode) ? "not a regular file"
                                   : "the file is too large");
    if (f) fclose(f);
    return NULL;
  }
  char *data = malloc((size_t)st.st_size + 1);
  *len = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
  fclose(f);
  if (data == NULL) fprintf(stderr, "moonbox-fuzz: out of memory\n");
  return data;
}

/* The --moonbox-option= flags, parsed as `moonbox run OPTIONS FILE` would parse them. */
static int make_policy(void) {
  char **args = calloc((size_t)E.argc + 3, sizeof *args);
  int n = 0;
  if (args == NULL) return -1;
  args[n++] = "moonbox";
  args[n++] = "run";
  for (int i = 1; i < E.argc; i++)
    if (strncmp(E.argv[i], MBXH_FUZZ_FLAG_OPTION, strlen(MBXH_FUZZ_FLAG_OPTION)) == 0)
      args[n++] = E.argv[i] + strlen(MBXH_FUZZ_FLAG_OPTION);
  args[n++] = (char *)E.target;
  mbxH_cli_options opt;
  char msg[MBXH_CLI_MSG_SIZE];
  int rc = mbxH_cli_parse(n, args, &opt, msg, sizeof msg);
  free(args);
  if (rc != 0) {
    fprintf(stderr, "moonbox-fuzz: %s\n", msg);
    return -1;
  }
  int code;
  E.policy = mbxH_cli_make_policy(&opt, &code);
  if (E.policy == NULL) return -1;
  /* Per-input defaults, unless an option or the policy file chose a value. */
  mbx_policy *fresh = mbx_policy_new();
  if (fresh == NULL) return -1;
  if (mbx_policy_get_limit(E.policy, MBX_LIMIT_INSTRUCTIONS) ==
      mbx_policy_get_limit(fresh, MBX_LIMIT_INSTRUCTIONS))
    (void)mbx_policy_set_limit(E.policy, MBX_LIMIT_INSTRUCTIONS, DEFAULT_INSTRUCTIONS);
  if (mbx_policy_get_limit(E.policy, MBX_LIMIT_MEMORY) ==
      mbx_policy_get_limit(fresh, MBX_LIMIT_MEMORY))
    (void)mbx_policy_set_limit(E.policy, MBX_LIMIT_MEMORY, DEFAULT_MEMORY);
  mbx_policy_free(fresh);
  mbx_error err;
  memset(&err, 0, sizeof err);
  if (!opt.seed.set) (void)mbx_policy_set_seed(E.policy, 0, &err);
  if (!opt.time_set) (void)mbx_policy_set_time(E.policy, DEFAULT_EPOCH, &err);
  if (mbx_policy_set_deterministic(E.policy, 1, &err) != MBX_OK) {
    fail("deterministic mode: %s%s", err.message, "");
    return -1;
  }
  return 0;
}

static int parse_args(int argc, char **argv) {
  E.argc = argc;
  E.argv = argv;
  E.findings = FIND_ERRORS;
  E.coverage = 1;
  E.dictionary = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
#define FLAG_VALUE(flag) (strncmp(a, flag, strlen(flag)) == 0 ? a + strlen(flag) : NULL)
    const char *v;
    if ((v = FLAG_VALUE(MBXH_FUZZ_FLAG_TARGET)) != NULL)
      E.target = v;
    else if ((v = FLAG_VALUE(MBXH_FUZZ_FLAG_REPRODUCE)) != NULL)
      E.reproduce = v;
    else if ((v = FLAG_VALUE(MBXH_FUZZ_FLAG_FINDINGS)) != NULL) {
      if (parse_findings(v) != 0) return -1;
    } else if (strcmp(a, MBXH_FUZZ_FLAG_NO_COVERAGE) == 0)
      E.coverage = 0;
    else if (strcmp(a, MBXH_FUZZ_FLAG_NO_DICTIONARY) == 0)
      E.dictionary = 0;
    else if (strcmp(a, MBXH_FUZZ_FLAG_DICTIONARY_DONE) == 0)
      E.dictionary = 0;
    else if (strncmp(a, "--moonbox-", 10) == 0 && FLAG_VALUE(MBXH_FUZZ_FLAG_OPTION) == NULL) {
      fail("unknown flag '%s' (run it as moonbox fuzz FILE ...; see moonbox fuzz --help)%s", a, "");
      return -1;
    }
#undef FLAG_VALUE
  }
  if (E.target == NULL) {
    fail("no target: give %sFILE (or run moonbox fuzz FILE ...)%s", MBXH_FUZZ_FLAG_TARGET, "");
    return -1;
  }
  return make_policy();
}

/* Builds {"__moonbox_fuzz_data": {"$bytes": "<base64>"}} in E.json. */
static int input_json(const uint8_t *data, size_t size, size_t *len) {
  static const char head[] = "{\"" DATA_GLOBAL "\":{\"$bytes\":\"";
  size_t need = sizeof head + mbxU_base64_encoded_len(size) + 8;
  if (need > E.json_cap) {
    char *p = realloc(E.json, need);
    if (p == NULL) return -1;
    E.json = p;
    E.json_cap = need;
  }
  char *o = E.json;
  memcpy(o, head, sizeof head - 1);
  o += sizeof head - 1;
  mbxU_base64_encode(data, size, o);
  o += mbxU_base64_encoded_len(size);
  memcpy(o, "\"}}", 3);
  o += 3;
  *len = (size_t)(o - E.json);
  return 0;
}

/* Prints a failed run of the top level and returns -1. */
static int top_level_failed(mbx_status s, mbx_result *res, const mbx_error *err) {
  if (res == NULL) {
    fprintf(stderr, "moonbox-fuzz: %s: %s\n", E.target, err->message);
  } else {
    fprintf(stderr, "moonbox-fuzz: %s: the top level failed (%s):\n%s\n", E.target,
            mbx_status_key(s), mbx_result_traceback(res, NULL));
    mbx_result_free(res);
  }
  return -1;
}

/* Runs FILE's top level in the (fresh or reset) sandbox and checks it defined fuzz. */
static int run_top_level(void) {
  mbx_result *res = NULL;
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status s = mbx_run_named(E.sb, E.code, E.code_len, E.chunk, NULL, 0, &res, &err);
  if (s != MBX_OK) return top_level_failed(s, res, &err);
  mbx_result_free(res);
  static const char check[] = "return type(fuzz)";
  s = mbx_run_named(E.sb, check, sizeof check - 1, "(fuzz driver)", NULL, 0, &res, &err);
  if (s != MBX_OK) return top_level_failed(s, res, &err);
  size_t len;
  const char *v = mbx_result_value_json(res, &len);
  int ok = len == 10 && memcmp(v, "\"function\"", 10) == 0;
  mbx_result_free(res);
  if (!ok) {
    fprintf(stderr,
            "moonbox-fuzz: %s defines no global function fuzz (add: function fuzz(data) ... "
            "end; data is the input as a string)\n",
            E.target);
    return -1;
  }
  return 0;
}

static int setup(void) {
  size_t len;
  uint64_t source_limit = mbx_policy_get_limit(E.policy, MBX_LIMIT_SOURCE);
  E.code =
      read_file("target", E.target, source_limit < TARGET_MAX ? source_limit : TARGET_MAX, &len);
  if (E.code == NULL) return -1;
  E.code_len = len;
  mbxH_cli_chunk_name(E.target, E.chunk, sizeof E.chunk);
  mbx_error err;
  memset(&err, 0, sizeof err);
  E.rt = mbx_runtime_new(&err);
  if (E.rt == NULL) {
    fail("%s%s", err.message, "");
    return -1;
  }
  E.sb = mbx_sandbox_new(E.rt, E.policy, &err);
  if (E.sb == NULL) {
    fail("%s%s", err.message, "");
    return -1;
  }
  if (E.coverage) {
    E.cov.counters = counters;
    E.cov.mask = MAP_SIZE - 1;
    mbxV_coverage_set(&E.cov);
  }
  if (run_top_level() != 0) return -1;
  mbx_status s = mbx_sandbox_checkpoint(E.sb, &err);
  if (s == MBX_OK) {
    E.checkpointed = 1;
  } else if (s != MBX_UNSUPPORTED) {
    fail("checkpoint: %s%s", err.message, "");
    return -1;
  }
  return 0;
}

/* One input: back to the state after the top level, then fuzz(data). */
static mbx_status run_input(const uint8_t *data, size_t size, mbx_result **res) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  *res = NULL;
  if (E.checkpointed) {
    if (mbx_sandbox_rewind(E.sb, &err) != MBX_OK) goto broken;
  } else {
    if (mbx_sandbox_reset(E.sb, &err) != MBX_OK || run_top_level() != 0) goto broken;
  }
  size_t len;
  if (input_json(data, size, &len) != 0) {
    snprintf(err.message, sizeof err.message, "out of memory");
    goto broken;
  }
  mbxV_coverage_restart();
  E.in_run = 1;
  mbx_status s =
      mbx_run_named(E.sb, driver, sizeof driver - 1, "(fuzz driver)", E.json, len, res, &err);
  E.in_run = 0;
  if (s < MBX_API_ERROR_BASE) return s;
broken:
  /* No run happened: the engine cannot go on, and the input is not the target's fault. */
  fprintf(stderr, "moonbox-fuzz: cannot run an input: %s\n", err.message);
  exit(MBXH_CLI_EXIT_INTERNAL);
}

static unsigned finding_kind(mbx_status s) {
  switch (s) {
  case MBX_RUNTIME_ERROR:
    return FIND_ERRORS;
  case MBX_INSTRUCTION_LIMIT:
    return FIND_INSTRUCTIONS;
  case MBX_MEMORY_LIMIT:
    return FIND_MEMORY;
  case MBX_TIME_LIMIT:
    return FIND_TIME;
  default:
    return 0;
  }
}

/* The report of a finding: the same bytes for the same input in every process. */
static void report(mbx_status s, const mbx_result *res) {
  fprintf(stderr, "moonbox-fuzz: finding (%s): %s\n%s\n", mbx_status_key(s),
          mbx_result_error_message(res, NULL), mbx_result_traceback(res, NULL));
  fflush(stderr);
}

static int one_input(const uint8_t *data, size_t size) {
  mbx_result *res;
  mbx_status s = run_input(data, size, &res);
  /* A constant feature: every input that ran is seen, so libFuzzer's corpus is never empty
     even with --moonbox-no-coverage. */
  counters[0] = 1;
  if (E.findings & finding_kind(s)) {
    report(s, res);
    /* libFuzzer's deadly-signal handler writes the input as crash-<sha1>. */
    abort();
  }
  mbx_result_free(res);
  return 0;
}

static void compare_hint(const char *subject, size_t subject_len, const char *wanted,
                         size_t wanted_len) {
  /* libFuzzer keeps compare words of up to 64 bytes; the subject is padded with NULs, so a
     short input still yields the whole literal as a word to insert. */
  unsigned char a[64], b[64];
  size_t n = wanted_len < sizeof b ? wanted_len : sizeof b;
  size_t k = subject_len < n ? subject_len : n;
  memcpy(a, subject, k);
  memset(a + k, 0, n - k);
  memcpy(b, wanted, n);
  if (n < 2 || memcmp(a, b, n) == 0) return;
  __sanitizer_weak_hook_memcmp((void *)(uintptr_t)compare_hint, a, b, n, 1);
}

static int reproduce(void) {
  size_t len;
  char *data = read_file("--reproduce", E.reproduce, INPUT_MAX, &len);
  if (data == NULL) return MBXH_CLI_EXIT_USAGE;
  mbx_result *res;
  mbx_status s = run_input((const uint8_t *)data, len, &res);
  free(data);
  size_t n;
  const char *out = mbx_result_stdout(res, &n);
  fwrite(out, 1, n, stdout);
  fflush(stdout);
  out = mbx_result_stderr(res, &n);
  fwrite(out, 1, n, stderr);
  int rc = 0;
  if (E.findings & finding_kind(s)) {
    report(s, res);
    rc = 1;
  } else {
    fprintf(stderr, "moonbox-fuzz: no finding (%s)\n", mbx_status_key(s));
  }
  mbx_result_free(res);
  return rc;
}

/*
** The dictionary: the user's -dict=FILE (if any) followed by the target's constants, written
** to a file under $TMPDIR (or /tmp) that is removed at once and kept open: libFuzzer and the
** -fork, -jobs, -merge and -minimize_crash children (which live no longer than this process)
** read it as /proc/PID/fd/N, and nothing is left behind however the process ends (a crash
** ends it with _Exit, past every atexit handler). Returns 0 with E.dict_path set, or -1.
*/
static int write_dictionary(const char *user_dict) {
  char path[4096];
  const char *dir = getenv("TMPDIR");
  if (dir == NULL || dir[0] != '/' || strlen(dir) > 4000) dir = "/tmp";
  snprintf(path, sizeof path, "%s/moonbox-fuzz-XXXXXX.dict", dir);
  int fd = mkstemps(path, 5);
  int copy = fd >= 0 ? dup(fd) : -1;
  FILE *f = copy >= 0 ? fdopen(copy, "w") : NULL;
  if (fd >= 0) unlink(path);
  if (f == NULL) {
    fprintf(stderr,
            "moonbox-fuzz: cannot create the dictionary %s: %s (set TMPDIR, or give "
            "--no-dictionary)\n",
            path, strerror(errno));
    if (fd >= 0) close(fd);
    if (copy >= 0) close(copy);
    return -1;
  }
  if (user_dict != NULL) {
    size_t len;
    char *text = read_file("-dict", user_dict, INPUT_MAX, &len);
    if (text == NULL) {
      fclose(f);
      return -1;
    }
    fwrite(text, 1, len, f);
    if (len > 0 && text[len - 1] != '\n') fputc('\n', f);
    free(text);
  }
  mbx_error err;
  memset(&err, 0, sizeof err);
  int n = mbxH_fuzz_dict_write(E.policy, E.code, E.code_len, f, &err);
  if (fclose(f) != 0 || n < 0) {
    fprintf(stderr, "moonbox-fuzz: the dictionary of %s: %s\n", E.target,
            n < 0 ? err.message : strerror(errno));
    return -1;
  }
  snprintf(E.dict_path, sizeof E.dict_path, "/proc/%ld/fd/%d", (long)getpid(), fd);
  return 0;
}

/* libFuzzer gets the whole argv: it skips the --moonbox- flags and hands them to its
   children. With the dictionary, -dict= names the file written here and
   --moonbox-dictionary-done tells the children not to write their own. */
static int fuzz(void) {
  for (size_t i = 0; i < MAP_SIZE; i++)
    pc_table[2 * i] = i + 1; /* flags 0: no function entries for -print_funcs to name */
  __sanitizer_cov_8bit_counters_init(counters, counters + MAP_SIZE);
  __sanitizer_cov_pcs_init(pc_table, pc_table + 2 * MAP_SIZE);
  mbxV_compare_hint = compare_hint;
  char **argv = calloc((size_t)E.argc + 3, sizeof *argv);
  if (argv == NULL) return MBXH_CLI_EXIT_INTERNAL;
  int argc = 0;
  const char *user_dict = NULL;
  for (int i = 0; i < E.argc; i++) {
    if (E.dictionary && strncmp(E.argv[i], "-dict=", 6) == 0)
      user_dict = E.argv[i] + 6; /* folded into ours */
    else
      argv[argc++] = E.argv[i];
  }
  static char dict_flag[4096 + 8];
  static char done_flag[] = MBXH_FUZZ_FLAG_DICTIONARY_DONE;
  if (E.dictionary) {
    if (write_dictionary(user_dict) != 0) return MBXH_CLI_EXIT_USAGE;
    snprintf(dict_flag, sizeof dict_flag, "-dict=%s", E.dict_path);
    argv[argc++] = dict_flag;
    argv[argc++] = done_flag;
  }
  argv[argc] = NULL;
  return LLVMFuzzerRunDriver(&argc, &argv, one_input);
}

/* At exit (libFuzzer ends with exit() after its last run; a crash ends with _Exit and skips
   this): everything freed, so LeakSanitizer builds report real leaks only. The guest heap's
   blocks are reachable only through the slot's mapping, which LSan does not scan. */
static void release(void) {
  if (E.in_run) return;
  mbxV_coverage_set(NULL);
  mbxV_compare_hint = NULL;
  if (E.sb) mbx_sandbox_free(E.sb);
  if (E.rt) mbx_runtime_free(E.rt);
  if (E.policy) mbx_policy_free(E.policy);
  free(E.code);
  free(E.json);
  memset(&E, 0, sizeof E);
}

static void *engine_main(void *arg) {
  (void)arg;
  atexit(release);
  if (setup() != 0) {
    E.exit_code = 1;
    return NULL;
  }
  if (E.reproduce != NULL) {
    E.exit_code = reproduce();
    return NULL;
  }
  E.exit_code = fuzz();
  return NULL;
}

int main(int argc, char **argv) {
  if (parse_args(argc, argv) != 0) return MBXH_CLI_EXIT_USAGE;
  pthread_attr_t attr;
  pthread_t t;
  if (pthread_attr_init(&attr) != 0 || pthread_attr_setstacksize(&attr, ENGINE_STACK) != 0 ||
      pthread_create(&t, &attr, engine_main, NULL) != 0) {
    fprintf(stderr, "moonbox-fuzz: cannot start the engine thread\n");
    return MBXH_CLI_EXIT_INTERNAL;
  }
  pthread_join(t, NULL);
  return E.exit_code;
}
