/* escape_driver.c -- runs one hostile script of tests/escape/ through the public API and checks
   the outcome its header declares (the header format is in tests/escape/README.md). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "moonbox.h"

/* The word every script prints (or returns) when its attack worked. */
#define ESCAPE_MARKER "ESCAPED"
/* What the guest would read if it reached the host's real stdin (io.read). */
#define STDIN_SECRET "HOST-STDIN-SECRET\n"
/* The wall bound of a run that ends on its deadline. The status check proves the run ended
   *because of* the deadline; the bound only proves it did not run on for long after it, so it
   is a generous multiple (the machine may be loaded by parallel tests and builds), never the
   tight residual docs/SECURITY-MODEL.md measures on an idle machine (THREATS.md section 9). */
#define WALL_SLACK_MS 1000
#define WALL_BOUND_FACTOR 2

/* The slack over the deadline. Sanitizer builds run C code several times slower, so their
   test presets widen it through ESCAPE_WALL_SLACK_MS (docs/SECURITY-MODEL.md states both). */
static long wall_slack_ms(void) {
  const char *env = getenv("ESCAPE_WALL_SLACK_MS");
  long v = env ? strtol(env, NULL, 10) : 0;
  return v > WALL_SLACK_MS ? v : WALL_SLACK_MS;
}

/* The sandbox thread's stack: glibc's default, well above the 1 MiB mbx_run requires. */
#define SANDBOX_STACK_BYTES (8u << 20)
/* A run that outlives its bound by this much is reported as a hang and the driver exits. */
#define HANG_GRACE_MS 10000
#define HANG_UNBOUNDED_MS 60000
#define MAX_LIST 16
#define NO_VALUE (-1)

/* ---------------------------------------------------------------------------------------- */
/* The parsed header of a script. */

typedef struct limit_setting {
  mbx_limit which;
  uint64_t value;
} limit_setting;

typedef struct script_spec {
  int expect; /* run status; NO_VALUE until the header names one */
  int accept[MAX_LIST];
  int n_accept;
  limit_setting limits[8];
  int n_limits;
  long interrupt_ms; /* NO_VALUE: no interrupt */
  const char *input; /* JSON object of globals for every run, or NULL */
  long max_wall_ms;  /* NO_VALUE: deadline + slack */
  const char *stdout_contains[MAX_LIST];
  int n_stdout_contains;
  const char *stdout_not_contains[MAX_LIST];
  int n_stdout_not_contains;
  const char *error_contains[MAX_LIST];
  int n_error_contains;
  int runs;
  int then_status;    /* NO_VALUE: no further run */
  int host_functions; /* grant host.echo, host.fail (sync) and host.fetch (external) */
  /* mounts: /virtual=fixture:mode ... (the fixture tree is described in README.md) */
  const char *mount_virtual[8], *mount_fixture[8];
  int mount_mode[8];
  int n_mounts;
  /* exec: /bin/sh ... (programs proc.run may start; the script is skipped where the exec
     backend is unavailable) */
  const char *exec_allow[8];
  int n_exec;
} script_spec;

/* Everything the sandbox thread needs and reports. */
typedef struct driver {
  const char *name;
  /* --hibernate: every run (and the further run) finds the sandbox hibernated
     (mbx_sandbox_hibernate), so each is also a wake: the same checks must hold. */
  int hibernate;
  char *source;
  size_t source_len;
  script_spec spec;
  mbx_sandbox *sandbox;
  uint64_t memory_limit, time_limit_ms, output_limit;
  /* --no-hook: the policy's instruction limit is 0 and the runtime has a deadline signal, so
     every run must have run without a count hook (usage.instructions null). */
  int want_uncounted;
  long wall_bound_ms;      /* per run, NO_VALUE when nothing bounds it */
  long last_wall_bound_ms; /* the last run's (it may be interrupted) */
  sem_t interrupt_go;      /* posted right before the run the interrupt targets */
  sem_t done;              /* posted when the sandbox thread finished everything */
  FILE *report;            /* failure messages, printed once the host fds are restored */
  int failures;
  /* The last run, for the success line. */
  int last_status;
  long last_wall_ms;
  uint64_t last_peak;
  char *header_lines[64]; /* copies the spec points into; freed at exit */
  int header_count;
} driver;

static void fail(driver *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* fail() is called from the sandbox thread and the interrupt thread. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void fail(driver *d, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&report_lock);
  fprintf(d->report, "FAIL escape/%s: ", d->name);
  vfprintf(d->report, fmt, ap);
  fputc('\n', d->report);
  va_end(ap);
  d->failures++;
  pthread_mutex_unlock(&report_lock);
}

static long now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---------------------------------------------------------------------------------------- */
/* Header parsing. */

static const int all_statuses[] = {0,  1,   2,   3,   4,   5,   6,   7,   8,  9,
                                   10, 100, 101, 102, 103, 104, 105, 106, 107};

/* The status whose JSON key is `key`; run statuses only unless api_too. NO_VALUE if none. */
static int status_from_key(const char *key, int api_too) {
  for (size_t i = 0; i < sizeof all_statuses / sizeof all_statuses[0]; i++) {
    int code = all_statuses[i];
    const char *k = mbx_status_key((mbx_status)code);
    if (!api_too && code >= MBX_API_ERROR_BASE) continue;
    if (k && strcmp(k, key) == 0) return code;
  }
  return NO_VALUE;
}

static const char *status_key(int code) {
  const char *k = mbx_status_key((mbx_status)code);
  return k ? k : "(unknown status)";
}

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t')
    s++;
  size_t n = strlen(s);
  while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
    s[--n] = '\0';
  return s;
}

/* "8M", "64k", "1e9", "0": a count with an optional binary suffix k/K, m/M, g/G. */
static int parse_amount(const char *text, int allow_suffix, uint64_t *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno != 0 || v < 0) return -1;
  double scale = 1;
  if (allow_suffix && *end) {
    switch (*end) {
    case 'k':
    case 'K':
      scale = 1024.0;
      break;
    case 'm':
    case 'M':
      scale = 1024.0 * 1024.0;
      break;
    case 'g':
    case 'G':
      scale = 1024.0 * 1024.0 * 1024.0;
      break;
    default:
      return -1;
    }
    end++;
  }
  if (*end) return -1;
  v *= scale;
  if (v > 1.8e19 || v != (double)(uint64_t)v) return -1;
  *out = (uint64_t)v;
  return 0;
}

/* "300ms", "2s", "150" (milliseconds). */
static int parse_duration_ms(const char *text, long *out) {
  char *end;
  errno = 0;
  double v = strtod(text, &end);
  if (end == text || errno != 0 || v < 0) return -1;
  if (strcmp(end, "s") == 0)
    v *= 1000;
  else if (strcmp(end, "ms") != 0 && *end != '\0')
    return -1;
  *out = (long)v;
  return 0;
}

static int parse_limits(script_spec *spec, char *text, const char **why) {
  for (char *save = NULL, *tok = strtok_r(text, " \t", &save); tok;
       tok = strtok_r(NULL, " \t", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      *why = "a limit must read name=value";
      return -1;
    }
    *eq = '\0';
    const char *name = tok, *value = eq + 1;
    limit_setting ls;
    int ok;
    if (strcmp(name, "memory") == 0) {
      ls.which = MBX_LIMIT_MEMORY;
      ok = parse_amount(value, 1, &ls.value);
    } else if (strcmp(name, "instructions") == 0) {
      ls.which = MBX_LIMIT_INSTRUCTIONS;
      ok = parse_amount(value, 0, &ls.value);
    } else if (strcmp(name, "time") == 0) {
      long ms;
      ls.which = MBX_LIMIT_TIME_MS;
      ok = parse_duration_ms(value, &ms);
      ls.value = (uint64_t)ms;
    } else if (strcmp(name, "output") == 0) {
      ls.which = MBX_LIMIT_OUTPUT;
      ok = parse_amount(value, 1, &ls.value);
    } else if (strcmp(name, "source") == 0) {
      ls.which = MBX_LIMIT_SOURCE;
      ok = parse_amount(value, 1, &ls.value);
    } else if (strcmp(name, "fs-tmp") == 0) {
      ls.which = MBX_LIMIT_FS_TMP;
      ok = parse_amount(value, 1, &ls.value);
    } else if (strcmp(name, "fs-bytes") == 0) {
      ls.which = MBX_LIMIT_FS_BYTES;
      ok = parse_amount(value, 1, &ls.value);
    } else if (strcmp(name, "fs-files") == 0) {
      ls.which = MBX_LIMIT_FS_FILES;
      ok = parse_amount(value, 0, &ls.value);
    } else if (strcmp(name, "open-files") == 0) {
      ls.which = MBX_LIMIT_FS_OPEN_FILES;
      ok = parse_amount(value, 0, &ls.value);
    } else {
      *why = "unknown limit (memory, instructions, time, output, source, fs-tmp, fs-bytes, "
             "fs-files, open-files)";
      return -1;
    }
    if (ok != 0) {
      *why = "bad limit value";
      return -1;
    }
    if (spec->n_limits == (int)(sizeof spec->limits / sizeof spec->limits[0])) {
      *why = "too many limits";
      return -1;
    }
    spec->limits[spec->n_limits++] = ls;
  }
  return 0;
}

static int add_to_list(const char **list, int *n, const char *value) {
  if (*n == MAX_LIST) return -1;
  list[(*n)++] = value;
  return 0;
}

/* Parses one "-- key: value" line. Returns 0 if the line is not a header key (a plain comment),
   1 if it was one, -1 on an error (why set). Modifies line in place; keeps pointers into it. */
static int parse_header_line(script_spec *spec, char *line, const char **why) {
  /* A key is lowercase letters and dashes right after "-- ", then a colon. Descriptive comments
     start with a capital letter or punctuation, so a misspelt key is an error, not a comment. */
  char *p = line + 2;
  if (*p != ' ') return 0;
  p++;
  char *key = p;
  while ((*p >= 'a' && *p <= 'z') || *p == '-')
    p++;
  if (p == key || *p != ':') return 0;
  *p = '\0';
  char *value = trim(p + 1);

  if (strcmp(key, "expect") == 0) {
    spec->expect = status_from_key(value, 0);
    if (spec->expect == NO_VALUE) {
      *why = "expect: unknown run status";
      return -1;
    }
  } else if (strcmp(key, "accept") == 0) {
    for (char *save = NULL, *tok = strtok_r(value, ", \t", &save); tok;
         tok = strtok_r(NULL, ", \t", &save)) {
      int st = status_from_key(tok, 0);
      if (st == NO_VALUE || spec->n_accept == MAX_LIST) {
        *why = "accept: unknown run status";
        return -1;
      }
      spec->accept[spec->n_accept++] = st;
    }
  } else if (strcmp(key, "limits") == 0) {
    if (parse_limits(spec, value, why) != 0) return -1;
  } else if (strcmp(key, "interrupt") == 0) {
    if (parse_duration_ms(value, &spec->interrupt_ms) != 0) {
      *why = "interrupt: bad duration";
      return -1;
    }
  } else if (strcmp(key, "max-wall") == 0) {
    if (parse_duration_ms(value, &spec->max_wall_ms) != 0) {
      *why = "max-wall: bad duration";
      return -1;
    }
  } else if (strcmp(key, "stdout-contains") == 0) {
    if (add_to_list(spec->stdout_contains, &spec->n_stdout_contains, value) != 0) {
      *why = "too many stdout-contains";
      return -1;
    }
  } else if (strcmp(key, "stdout-not-contains") == 0) {
    if (add_to_list(spec->stdout_not_contains, &spec->n_stdout_not_contains, value) != 0) {
      *why = "too many stdout-not-contains";
      return -1;
    }
  } else if (strcmp(key, "error-contains") == 0) {
    if (add_to_list(spec->error_contains, &spec->n_error_contains, value) != 0) {
      *why = "too many error-contains";
      return -1;
    }
  } else if (strcmp(key, "runs") == 0) {
    uint64_t n;
    if (parse_amount(value, 0, &n) != 0 || n < 1 || n > 100) {
      *why = "runs: must be 1..100";
      return -1;
    }
    spec->runs = (int)n;
  } else if (strcmp(key, "input") == 0) {
    spec->input = value;
  } else if (strcmp(key, "host-functions") == 0) {
    spec->host_functions = strcmp(value, "on") == 0;
  } else if (strcmp(key, "exec") == 0) {
    for (char *save = NULL, *tok = strtok_r(value, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save)) {
      if (tok[0] != '/' || spec->n_exec == 8) {
        *why = "exec: absolute program paths, at most 8";
        return -1;
      }
      spec->exec_allow[spec->n_exec++] = tok;
    }
  } else if (strcmp(key, "mounts") == 0) {
    for (char *save = NULL, *tok = strtok_r(value, " \t", &save); tok;
         tok = strtok_r(NULL, " \t", &save)) {
      char *eq = strchr(tok, '='), *colon = eq ? strchr(eq, ':') : NULL;
      if (!eq || !colon || spec->n_mounts == 8) {
        *why = "mounts: each is /virtual=fixture:ro, :rw or :overlay";
        return -1;
      }
      *eq = *colon = '\0';
      int mode = strcmp(colon + 1, "ro") == 0        ? MBX_MOUNT_RO
                 : strcmp(colon + 1, "rw") == 0      ? MBX_MOUNT_RW
                 : strcmp(colon + 1, "overlay") == 0 ? MBX_MOUNT_OVERLAY
                                                     : 0;
      if (mode == 0 || (strcmp(eq + 1, "tree") != 0 && strcmp(eq + 1, "work") != 0)) {
        *why = "mounts: the fixture is tree or work, the mode ro, rw or overlay";
        return -1;
      }
      spec->mount_virtual[spec->n_mounts] = tok;
      spec->mount_fixture[spec->n_mounts] = eq + 1;
      spec->mount_mode[spec->n_mounts++] = mode;
    }
  } else if (strcmp(key, "then") == 0) {
    spec->then_status = status_from_key(value, 1);
    if (spec->then_status == NO_VALUE) {
      *why = "then: unknown status";
      return -1;
    }
  } else {
    *why = "unknown header key (expect accept limits interrupt max-wall stdout-contains "
           "stdout-not-contains error-contains runs input then host-functions mounts exec)";
    return -1;
  }
  return 1;
}

/* The header is the run of lines starting with "--" at the top of the file. The values are
   copied (the source buffer is handed to the library unmodified). */
static int parse_header(driver *d) {
  script_spec *spec = &d->spec;
  memset(spec, 0, sizeof *spec);
  spec->expect = NO_VALUE;
  spec->interrupt_ms = NO_VALUE;
  spec->max_wall_ms = NO_VALUE;
  spec->then_status = NO_VALUE;
  spec->runs = 1;

  const char *p = d->source, *end = d->source + d->source_len;
  int line_no = 0;
  while (p < end && end - p >= 2 && p[0] == '-' && p[1] == '-') {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
    line_no++;
    char *line = strndup(p, n); /* kept until exit: the spec points into it */
    if (line && d->header_count < (int)(sizeof d->header_lines / sizeof *d->header_lines))
      d->header_lines[d->header_count++] = line;
    else {
      free(line);
      line = NULL;
    }
    if (!line) {
      fprintf(stderr, "escape_driver: out of memory\n");
      return -1;
    }
    const char *why = NULL;
    if (parse_header_line(spec, line, &why) < 0) {
      fprintf(stderr, "FAIL escape/%s: header line %d: %s\n", d->name, line_no, why);
      return -1;
    }
    p = nl ? nl + 1 : end;
  }
  if (spec->expect == NO_VALUE) {
    fprintf(stderr, "FAIL escape/%s: the header has no '-- expect: <status>' line\n", d->name);
    return -1;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Checks on one result. */

static int contains(const char *hay, size_t hay_len, const char *needle) {
  return hay && memmem(hay, hay_len, needle, strlen(needle)) != NULL;
}

static int status_expected(const script_spec *spec, int st) {
  if (st == spec->expect) return 1;
  for (int i = 0; i < spec->n_accept; i++)
    if (st == spec->accept[i]) return 1;
  return 0;
}

static void print_excerpt(FILE *f, const char *label, const char *s, size_t len) {
  const size_t max = 1500;
  fprintf(f, "  %s (%zu bytes): %.*s%s\n", label, len, (int)(len < max ? len : max), s ? s : "",
          len > max ? " [...]" : "");
}

/* Checks every run must pass: the marker, the memory ceiling, the output limit, wall time. */
static void check_common(driver *d, int run, const mbx_result *res, long wall_ms, long bound_ms) {
  size_t out_len, err_len, json_len, msg_len, tb_len, val_len;
  const char *out = mbx_result_stdout(res, &out_len);
  const char *errs = mbx_result_stderr(res, &err_len);
  const char *json = mbx_result_json(res, &json_len);
  const char *msg = mbx_result_error_message(res, &msg_len);
  const char *tb = mbx_result_traceback(res, &tb_len);
  const char *val = mbx_result_value_json(res, &val_len);
  struct {
    const char *what, *s;
    size_t len;
  } places[] = {{"stdout", out, out_len},  {"stderr", errs, err_len},
                {"value", val, val_len},   {"error message", msg, msg_len},
                {"traceback", tb, tb_len}, {"result JSON", json, json_len}};
  for (size_t i = 0; i < sizeof places / sizeof places[0]; i++)
    if (contains(places[i].s, places[i].len, ESCAPE_MARKER))
      fail(d, "run %d: \"%s\" appears in the %s: the attack worked", run, ESCAPE_MARKER,
           places[i].what);

  mbx_usage usage;
  if (mbx_result_usage(res, &usage) != MBX_OK) {
    fail(d, "run %d: mbx_result_usage failed", run);
    memset(&usage, 0, sizeof usage);
  }
  uint64_t ceiling = d->memory_limit + d->memory_limit / 4 + (1u << 20);
  if (usage.memory_peak > ceiling)
    fail(d, "run %d: usage.memory_peak %llu exceeds the documented ceiling 1.25*limit+1MiB = %llu",
         run, (unsigned long long)usage.memory_peak, (unsigned long long)ceiling);
  if (out_len + err_len > d->output_limit)
    fail(d, "run %d: captured output %zu bytes exceeds the output limit %llu", run,
         out_len + err_len, (unsigned long long)d->output_limit);
  if (bound_ms != NO_VALUE && wall_ms > bound_ms)
    fail(d, "run %d: took %ld ms wall, bound is %ld ms (deadline + %ld ms, or max-wall/interrupt)",
         run, wall_ms, bound_ms, wall_slack_ms());

  if (d->want_uncounted && usage.instructions_counted)
    fail(d, "run %d: --no-hook, but the run counted instructions (a count hook ran)", run);

  d->last_peak = usage.memory_peak;
}

static void check_last(driver *d, const mbx_result *res, int st) {
  const script_spec *spec = &d->spec;
  size_t out_len, msg_len;
  const char *out = mbx_result_stdout(res, &out_len);
  const char *msg = mbx_result_error_message(res, &msg_len);
  if (!status_expected(spec, st))
    fail(d, "status %s, expected %s%s", status_key(st), status_key(spec->expect),
         spec->n_accept ? " (or an accepted one)" : "");
  for (int i = 0; i < spec->n_stdout_contains; i++)
    if (!contains(out, out_len, spec->stdout_contains[i]))
      fail(d, "stdout does not contain \"%s\"", spec->stdout_contains[i]);
  for (int i = 0; i < spec->n_stdout_not_contains; i++)
    if (contains(out, out_len, spec->stdout_not_contains[i]))
      fail(d, "stdout contains \"%s\"", spec->stdout_not_contains[i]);
  for (int i = 0; i < spec->n_error_contains; i++)
    if (!contains(msg, msg_len, spec->error_contains[i]))
      fail(d, "the error message does not contain \"%s\"", spec->error_contains[i]);
}

static void dump_result(driver *d, const mbx_result *res) {
  size_t len;
  const char *json = mbx_result_json(res, &len);
  print_excerpt(d->report, "result", json, len);
}

/* ---------------------------------------------------------------------------------------- */
/* The sandbox thread: every run of the script, then the optional further run. */

static void hibernate_before_run(driver *d, int run) {
  if (!d->hibernate) return;
  mbx_error err;
  if (mbx_sandbox_hibernate(d->sandbox, &err) != MBX_OK || !mbx_sandbox_hibernated(d->sandbox))
    fail(d, "run %d: mbx_sandbox_hibernate: %s", run, err.message);
}

static void *sandbox_thread(void *arg) {
  driver *d = arg;
  const script_spec *spec = &d->spec;
  for (int run = 1; run <= spec->runs; run++) {
    int last = run == spec->runs;
    long bound = last ? d->last_wall_bound_ms : d->wall_bound_ms;
    mbx_result *res = NULL;
    mbx_error err;
    memset(&err, 0, sizeof err);
    hibernate_before_run(d, run);
    if (last && spec->interrupt_ms != NO_VALUE) sem_post(&d->interrupt_go);
    long t0 = now_ms();
    mbx_status st = mbx_run(d->sandbox, d->source, d->source_len, spec->input,
                            spec->input ? strlen(spec->input) : 0, &res, &err);
    long wall = now_ms() - t0;
    if (st >= MBX_API_ERROR_BASE || !res) {
      fail(d, "run %d: mbx_run returned API status %s (%s) and no result: %s", run, status_key(st),
           mbx_status_name(st), err.message);
      if (res) mbx_result_free(res);
      break;
    }
    if (mbx_result_status(res) != st)
      fail(d, "run %d: mbx_run returned %s but the result says %s", run, status_key(st),
           status_key(mbx_result_status(res)));
    int before = d->failures;
    check_common(d, run, res, wall, bound);
    if (!last && st != MBX_OK)
      fail(d, "run %d of %d: status %s; runs before the last must be ok", run, spec->runs,
           status_key(st));
    if (last) {
      check_last(d, res, st);
      d->last_status = st;
      d->last_wall_ms = wall;
    }
    /* ESCAPE_DRIVER_VERBOSE=1 shows every result, for writing and debugging scripts. */
    if (d->failures != before || getenv("ESCAPE_DRIVER_VERBOSE")) dump_result(d, res);
    mbx_result_free(res);
  }

  if (spec->then_status != NO_VALUE) {
    mbx_result *res = NULL;
    mbx_error err;
    memset(&err, 0, sizeof err);
    hibernate_before_run(d, spec->runs + 1);
    mbx_status st = mbx_run(d->sandbox, d->source, d->source_len, NULL, 0, &res, &err);
    if ((int)st != spec->then_status)
      fail(d, "further run: status %s, expected %s (%s)", status_key(st),
           status_key(spec->then_status), err.message);
    if (st >= MBX_API_ERROR_BASE && res)
      fail(d, "further run: API status %s but *out is not NULL", status_key(st));
    if (spec->then_status == MBX_SANDBOX_POISONED && !mbx_sandbox_poisoned(d->sandbox))
      fail(d, "further run: mbx_sandbox_poisoned() is 0 after a poisoning run");
    if (res) {
      check_common(d, spec->runs + 1, res, 0, NO_VALUE);
      mbx_result_free(res);
    }
  }

  /* Freeing must not run guest code either (finalizers are refused by construction). */
  mbx_sandbox_free(d->sandbox);
  d->sandbox = NULL;
  sem_post(&d->done);
  return NULL;
}

/* The host thread that interrupts the last run after the declared delay. */
static void *interrupt_thread(void *arg) {
  driver *d = arg;
  sem_wait(&d->interrupt_go);
  struct timespec ts = {d->spec.interrupt_ms / 1000, (d->spec.interrupt_ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  if (mbx_sandbox_interrupt(d->sandbox) != MBX_OK)
    fail(d, "mbx_sandbox_interrupt did not return MBX_OK");
  return NULL;
}

/* ---------------------------------------------------------------------------------------- */
/* Host file descriptors: during the runs stdout/stderr go to a scratch file (anything the
   library or the guest writes there, e.g. through warn("@on"), is a leak) and stdin holds a
   secret line (io.read must never see it). */

typedef struct host_fds {
  int saved_in, saved_out, saved_err;
  FILE *scratch;
} host_fds;

static int redirect_host_fds(host_fds *h) {
  int pipefd[2];
  fflush(NULL);
  h->scratch = tmpfile();
  if (!h->scratch || pipe(pipefd) != 0) return -1;
  if (write(pipefd[1], STDIN_SECRET, strlen(STDIN_SECRET)) < 0) return -1;
  close(pipefd[1]);
  h->saved_in = dup(0);
  h->saved_out = dup(1);
  h->saved_err = dup(2);
  if (h->saved_in < 0 || h->saved_out < 0 || h->saved_err < 0) return -1;
  dup2(pipefd[0], 0);
  close(pipefd[0]);
  dup2(fileno(h->scratch), 1);
  dup2(fileno(h->scratch), 2);
  return 0;
}

static void restore_host_fds(host_fds *h) {
  fflush(NULL);
  dup2(h->saved_in, 0);
  dup2(h->saved_out, 1);
  dup2(h->saved_err, 2);
}

/* ---------------------------------------------------------------------------------------- */

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  char *buf = malloc(cap);
  while (buf) {
    size_t got = fread(buf + n, 1, cap - n, f);
    n += got;
    if (n < cap) break;
    char *bigger = realloc(buf, cap *= 2);
    if (!bigger) {
      free(buf);
      buf = NULL;
    }
    buf = bigger;
  }
  fclose(f);
  *len = n;
  return buf;
}

static const char *script_name(const char *path) {
  const char *slash = strrchr(path, '/');
  const char *base = slash ? slash + 1 : path;
  char *name = strdup(base);
  if (!name) return base;
  char *dot = strrchr(name, '.');
  if (dot && strcmp(dot, ".lua") == 0) *dot = '\0';
  return name;
}

/* The host functions a script gets with "host-functions: on": an echo (its arguments come
   back as its value), one that always fails, and the natives host.hypot and host.int8. */
static mbx_status host_echo(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  return mbx_host_reply_json(reply, args, len);
}

static mbx_status host_fail(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  return mbx_host_reply_error(reply, "host says no", 12);
}

/* A native int8 identity ("c(c)"): what the guest passes must arrive exactly in range. */
static int8_t native_int8(int8_t x) {
  return x;
}

/* ---- the host tree of `mounts:` (tests/escape/README.md) ---- */

static char fixture[64];

static int write_text(const char *rel, const char *text) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", fixture, rel);
  FILE *f = fopen(p, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static int make_link(const char *target, const char *rel) {
  char p[256];
  snprintf(p, sizeof p, "%s/%s", fixture, rel);
  return symlink(target, p);
}

/* What lies outside every mount holds "ESCAPED", so a read of it fails the test by itself. */
static const char outside_secret[] = "ESCAPED: the guest read a file outside its mounts\n";

static int make_fixture(void) {
  char p[256], q[256];
  snprintf(fixture, sizeof fixture, "/tmp/mbx_escape_XXXXXX");
  if (mkdtemp(fixture) == NULL) return -1;
  const char *dirs[] = {"tree", "tree/sub", "work", "outside"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    snprintf(p, sizeof p, "%s/%s", fixture, dirs[i]);
    if (mkdir(p, 0755) != 0) return -1;
  }
  snprintf(p, sizeof p, "%s/outside/secret", fixture);
  if (write_text("outside/secret", outside_secret) != 0 ||
      write_text("outside/hard_target", "original\n") != 0 ||
      write_text("tree/x.txt", "inside\n") != 0 || write_text("tree/sub/y.txt", "below\n") != 0 ||
      write_text("work/keep.txt", "keep\n") != 0 || make_link(p, "tree/abs_link") != 0 ||
      make_link("../outside/secret", "tree/rel_link") != 0 ||
      make_link("chain2", "tree/chain1") != 0 || make_link("chain3", "tree/chain2") != 0 ||
      make_link("../outside/secret", "tree/chain3") != 0 ||
      make_link("../outside", "tree/dir_link") != 0 ||
      make_link("sub/../../outside/secret", "tree/dotdot_link") != 0 ||
      make_link("/proc/self/root", "tree/proc_root") != 0 ||
      make_link("/proc/self/cwd", "tree/proc_cwd") != 0 ||
      make_link("/dev/zero", "tree/dev_link") != 0 ||
      make_link("sub/y.txt", "tree/inside_link") != 0)
    return -1;
  snprintf(p, sizeof p, "%s/tree/fifo", fixture);
  if (mkfifo(p, 0644) != 0) return -1;
  /* A listening unix socket in the mount: opening it would connect to it. */
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s/tree/sock", fixture);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(fd, 1) != 0) return -1;
  /* A hard link into the rw mount of a file outside it. */
  snprintf(p, sizeof p, "%s/outside/hard_target", fixture);
  snprintf(q, sizeof q, "%s/work/hard", fixture);
  if (link(p, q) != 0) return -1;
  return 0;
}

static int file_is(const char *rel, const char *text) {
  char p[256], buf[256];
  snprintf(p, sizeof p, "%s/%s", fixture, rel);
  FILE *f = fopen(p, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  return strcmp(buf, text) == 0;
}

static int count_entries(const char *rel) {
  char p[300];
  snprintf(p, sizeof p, "%s/%s", fixture, rel);
  DIR *dir = opendir(p);
  int entries = 0;
  struct dirent *de;
  while (dir && (de = readdir(dir)) != NULL)
    entries++;
  if (dir) closedir(dir);
  return entries;
}

/* After the runs: nothing outside the mounts and nothing in a ro or overlay mount changed. */
static void check_fixture(driver *d) {
  if (!file_is("outside/secret", outside_secret)) fail(d, "outside/secret changed");
  if (!file_is("outside/hard_target", "original\n"))
    fail(d, "the file hard-linked into the rw mount was written through the link");
  int tree_rw = 0;
  for (int i = 0; i < d->spec.n_mounts; i++)
    tree_rw |=
        strcmp(d->spec.mount_fixture[i], "tree") == 0 && d->spec.mount_mode[i] == MBX_MOUNT_RW;
  if (!tree_rw && (!file_is("tree/x.txt", "inside\n") || !file_is("tree/sub/y.txt", "below\n")))
    fail(d, "a file of the read-only mount changed");
  int entries = count_entries("outside");
  if (entries != 4) fail(d, "outside/ holds %d entries, not the 2 files it had", entries - 2);
  /* ro and overlay: not one name of the tree appeared or went away either. */
  if (!tree_rw && (count_entries("tree") != 17 || count_entries("tree/sub") != 3))
    fail(d, "the read-only or overlay tree gained or lost entries");
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", fixture);
  if (system(cmd) != 0) fail(d, "could not remove the fixture %s", fixture);
}

/* The time limit of a script whose header sets none. A script that expects `ok` must never race
   a deadline (issue 27: on a fresh clone at load 13, scripts that churn 80 MiB or overflow a
   handler's stack ran past 2 s and failed twice): 30 s, which bounds a hang but not a loaded
   machine's honest work. Any other script ends on the limit it is about, so the default only
   bounds it: 2 s, or ESCAPE_DEFAULT_TIME_MS (sanitizer presets raise it, because there a deep
   recursion or millions of small strings can take longer than 2 s to reach that limit). Every
   script that expects time_limit sets its own `time`. */
#define OK_DEFAULT_TIME_MS 30000
static uint64_t default_time_ms(const script_spec *spec) {
  const char *env = getenv("ESCAPE_DEFAULT_TIME_MS");
  long v = env ? strtol(env, NULL, 10) : 0;
  if (spec->expect == MBX_OK && v < OK_DEFAULT_TIME_MS) v = OK_DEFAULT_TIME_MS;
  return v > 2000 ? (uint64_t)v : 2000;
}

/* Sets the policy's limits: the driver's default time, then the header's. */
static int build_policy(driver *d, mbx_policy *p) {
  mbx_error err;
  if (mbx_policy_set_limit_checked(p, MBX_LIMIT_TIME_MS, default_time_ms(&d->spec), &err) !=
      MBX_OK) {
    fprintf(stderr, "FAIL escape/%s: default time limit refused: %s\n", d->name, err.message);
    return -1;
  }
  for (int i = 0; i < d->spec.n_limits; i++) {
    const limit_setting *ls = &d->spec.limits[i];
    if (mbx_policy_set_limit_checked(p, ls->which, ls->value, &err) != MBX_OK) {
      fprintf(stderr, "FAIL escape/%s: limit %d=%llu refused: %s\n", d->name, (int)ls->which,
              (unsigned long long)ls->value, err.message);
      return -1;
    }
  }
  d->memory_limit = mbx_policy_get_limit(p, MBX_LIMIT_MEMORY);
  d->time_limit_ms = mbx_policy_get_limit(p, MBX_LIMIT_TIME_MS);
  d->output_limit = mbx_policy_get_limit(p, MBX_LIMIT_OUTPUT);
  return 0;
}

static void compute_bounds(driver *d) {
  const script_spec *spec = &d->spec;
  long bound = NO_VALUE;
  long extra = wall_slack_ms() - WALL_SLACK_MS;
  if (spec->max_wall_ms != NO_VALUE)
    bound = spec->max_wall_ms + extra;
  else if (d->time_limit_ms > 0)
    bound = WALL_BOUND_FACTOR * (long)d->time_limit_ms + WALL_SLACK_MS + extra;
  d->wall_bound_ms = bound;
  long last = bound;
  if (spec->interrupt_ms != NO_VALUE && spec->max_wall_ms == NO_VALUE) {
    long by_interrupt = spec->interrupt_ms + WALL_SLACK_MS + extra;
    if (last == NO_VALUE || by_interrupt < last) last = by_interrupt;
  }
  d->last_wall_bound_ms = last;
}

int main(int argc, char **argv) {
  int no_hook = argc == 3 && strcmp(argv[2], "--no-hook") == 0;
  int hibernate = argc == 3 && strcmp(argv[2], "--hibernate") == 0;
  if (argc != 2 && !no_hook && !hibernate && !(argc == 4 && strcmp(argv[2], "--isolate") == 0)) {
    fprintf(stderr, "usage: %s <script.lua> [--isolate WORKER | --no-hook | --hibernate]\n",
            argv[0]);
    return 2;
  }
  static driver d;
  d.hibernate = hibernate;
  d.name = script_name(argv[1]);
  d.source = read_file(argv[1], &d.source_len);
  if (!d.source) {
    fprintf(stderr, "FAIL escape/%s: cannot read %s: %s\n", d.name, argv[1], strerror(errno));
    return 1;
  }
  if (parse_header(&d) != 0) return 1;

  char *report_buf = NULL;
  size_t report_len = 0;
  d.report = open_memstream(&report_buf, &report_len);
  if (!d.report || sem_init(&d.interrupt_go, 0, 0) != 0 || sem_init(&d.done, 0, 0) != 0) {
    fprintf(stderr, "escape_driver: setup failed\n");
    return 1;
  }

  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *policy = mbx_policy_new();
  if (!rt || !policy) {
    fprintf(stderr, "FAIL escape/%s: runtime/policy creation failed: %s\n", d.name, err.message);
    return 1;
  }
  /* escape_driver SCRIPT --isolate WORKER: the same script and checks in a worker process
     (MBX_CAP_ISOLATE; tests/CMakeLists.txt runs the corpus both ways). */
  if (argc == 4 && strcmp(argv[2], "--isolate") == 0 &&
      (mbx_runtime_set_path(rt, MBX_PATH_WORKER, argv[3], &err) != MBX_OK ||
       mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err) != MBX_OK)) {
    fprintf(stderr, "FAIL escape/%s: isolation: %s\n", d.name, err.message);
    return 1;
  }
  if (build_policy(&d, policy) != 0) return 1;
  /* The policy has no instruction limit by default. A script about that limit (it sets one,
     or expects or accepts it) that sets none gets 1e9; so does every script in the plain run
     (escape_driver SCRIPT), which keeps the count-hook path under the whole corpus.
     escape_driver SCRIPT --no-hook: the same script and checks with no instruction limit
     (unless the script is about it), so the runs have no count hook and the deadline comes by
     signal (vm/watchdog.h). --isolate keeps the script's limits (the default policy's: no
     count hook in the worker either, its deadline signalled by the parent). */
  int about_instructions = d.spec.expect == MBX_INSTRUCTION_LIMIT, sets_instructions = 0;
  for (int i = 0; i < d.spec.n_limits; i++) {
    sets_instructions |= d.spec.limits[i].which == MBX_LIMIT_INSTRUCTIONS;
    about_instructions |=
        d.spec.limits[i].which == MBX_LIMIT_INSTRUCTIONS && d.spec.limits[i].value != 0;
  }
  for (int i = 0; i < d.spec.n_accept; i++)
    about_instructions |= d.spec.accept[i] == MBX_INSTRUCTION_LIMIT;
  int isolated = argc == 4;
  if (!sets_instructions && (about_instructions || (!no_hook && !isolated)))
    mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, 1000000000);
  if (no_hook && !about_instructions) mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, 0);
  /* With no instruction limit no run may count: in this process the runtime's watchdog
     delivers the deadline, in a worker its parent does (host/backend/worker.c). */
  if ((no_hook || isolated) && mbx_policy_get_limit(policy, MBX_LIMIT_INSTRUCTIONS) == 0)
    d.want_uncounted = mbx_runtime_deadline_signal(rt) != 0;
  if (d.spec.n_mounts > 0 && make_fixture() != 0) {
    fprintf(stderr, "FAIL escape/%s: cannot build the fixture tree: %s\n", d.name, strerror(errno));
    return 1;
  }
  for (int i = 0; i < d.spec.n_mounts; i++) {
    char host[128];
    snprintf(host, sizeof host, "%s/%s", fixture, d.spec.mount_fixture[i]);
    if (mbx_policy_mount(policy, d.spec.mount_virtual[i], host, d.spec.mount_mode[i], &err) !=
        MBX_OK) {
      fprintf(stderr, "FAIL escape/%s: mount %s: %s\n", d.name, d.spec.mount_virtual[i],
              err.message);
      return 1;
    }
  }
  if (d.spec.host_functions &&
      (mbx_policy_add_function(policy, "host.echo", host_echo, NULL, &err) != MBX_OK ||
       mbx_policy_add_function(policy, "host.fail", host_fail, NULL, &err) != MBX_OK ||
       mbx_policy_add_external(policy, "host.fetch", &err) != MBX_OK ||
       mbx_policy_bind_native(policy, "host.hypot", "d(dd)", (void (*)(void))hypot, &err) !=
           MBX_OK ||
       mbx_policy_bind_native(policy, "host.int8", "c(c)", (void (*)(void))native_int8, &err) !=
           MBX_OK)) {
    fprintf(stderr, "FAIL escape/%s: host functions: %s\n", d.name, err.message);
    return 1;
  }
  /* exec: the helper built beside the library (this driver's directory has none), and a skip
     (77) where the backend cannot run here (no user namespaces): the exec e2e test says why. */
  for (int i = 0; i < d.spec.n_exec; i++)
    if ((i == 0 &&
         mbx_runtime_set_path(rt, MBX_PATH_EXEC_HELPER, MBX_ESCAPE_EXEC_HELPER, &err) != MBX_OK) ||
        mbx_policy_allow_exec(policy, d.spec.exec_allow[i], &err) != MBX_OK) {
      fprintf(stderr, "FAIL escape/%s: exec %s: %s\n", d.name, d.spec.exec_allow[i], err.message);
      return 1;
    }
  if (d.spec.n_exec > 0) {
    char *status = NULL;
    if (mbx_runtime_exec_status(rt, &status, NULL, &err) != MBX_OK ||
        strstr(status, "\"available\":true") == NULL) {
      printf("SKIP escape/%s: the exec backend is unavailable here: %s\n", d.name,
             status ? status : err.message);
      mbx_free(status);
      return 77;
    }
    mbx_free(status);
  }
  compute_bounds(&d);
  d.sandbox = mbx_sandbox_new(rt, policy, &err);
  if (!d.sandbox) {
    fprintf(stderr, "FAIL escape/%s: mbx_sandbox_new failed: %s\n", d.name, err.message);
    return 1;
  }
  mbx_policy_free(policy);
  /* Builds without the arena (MBX_ARENA_MALLOC: the asan preset) cannot hibernate. */
  if (d.hibernate && mbx_sandbox_hibernate(d.sandbox, &err) == MBX_UNSUPPORTED) {
    fprintf(stderr, "SKIP escape/%s: %s\n", d.name, err.message);
    mbx_sandbox_free(d.sandbox);
    mbx_runtime_free(rt);
    fclose(d.report);
    free(report_buf);
    free(d.source);
    return 77;
  }

  host_fds fds;
  if (redirect_host_fds(&fds) != 0) {
    fprintf(stderr, "escape_driver: cannot redirect stdio: %s\n", strerror(errno));
    return 1;
  }

  pthread_attr_t attr;
  pthread_t runner, interrupter;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, SANDBOX_STACK_BYTES);
  if (d.spec.interrupt_ms != NO_VALUE &&
      pthread_create(&interrupter, NULL, interrupt_thread, &d) != 0) {
    restore_host_fds(&fds);
    fprintf(stderr, "escape_driver: cannot start the interrupt thread\n");
    return 1;
  }
  if (pthread_create(&runner, &attr, sandbox_thread, &d) != 0) {
    restore_host_fds(&fds);
    fprintf(stderr, "escape_driver: cannot start the sandbox thread\n");
    return 1;
  }

  /* Watchdog: a run the hook cannot stop would otherwise hang until ctest's timeout. */
  long budget_ms = HANG_UNBOUNDED_MS;
  if (d.wall_bound_ms != NO_VALUE)
    budget_ms = (long)(d.spec.runs + 1) * d.wall_bound_ms + HANG_GRACE_MS;
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += budget_ms / 1000;
  deadline.tv_nsec += (budget_ms % 1000) * 1000000;
  if (deadline.tv_nsec >= 1000000000) {
    deadline.tv_sec++;
    deadline.tv_nsec -= 1000000000;
  }
  int waited;
  while ((waited = sem_timedwait(&d.done, &deadline)) != 0 && errno == EINTR) {
  }
  if (waited != 0) {
    restore_host_fds(&fds);
    fprintf(stderr,
            "FAIL escape/%s: hang: the sandbox thread did not finish within %ld ms "
            "(a run ignored its limits, or mbx_sandbox_free ran guest code)\n",
            d.name, budget_ms);
    fflush(NULL);
    _exit(1);
  }
  pthread_join(runner, NULL);
  if (d.spec.interrupt_ms != NO_VALUE) {
    sem_post(&d.interrupt_go); /* in case the last run was never reached */
    pthread_join(interrupter, NULL);
  }
  mbx_runtime_free(rt);
  restore_host_fds(&fds);

  /* Anything that reached the host's own stdout/stderr during the runs is a leak. */
  long leaked = ftell(fds.scratch);
  if (leaked > 0) {
    char buf[512];
    rewind(fds.scratch);
    size_t n = fread(buf, 1, sizeof buf - 1, fds.scratch);
    buf[n] = '\0';
    fail(&d, "%ld bytes reached the host's stdout/stderr during the run: %s", leaked, buf);
  }
  if (d.spec.n_mounts > 0) check_fixture(&d);
  fclose(d.report);
  for (int i = 0; i < d.header_count; i++)
    free(d.header_lines[i]);
  if (d.failures) {
    fwrite(report_buf, 1, report_len, stderr);
    free(report_buf);
    return 1;
  }
  fwrite(report_buf, 1, report_len, stdout);
  free(report_buf);
  printf("escape/%s: pass status=%s wall=%ldms peak=%llu (memory limit %llu)\n", d.name,
         status_key(d.last_status), d.last_wall_ms, (unsigned long long)d.last_peak,
         (unsigned long long)d.memory_limit);
  return 0;
}
