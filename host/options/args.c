/* cli_args.c -- parses the moonbox command line and its size, duration and count values. */
#include "host/options/args.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "moonbox.h"

/*
** Values are parsed by hand rather than with strtoull/strtod: those skip leading blanks,
** accept "-5" as a huge unsigned number, round "1.1e-9" silently and depend on the locale.
** A limit is a security setting, so a value is either exactly what was written or an error.
*/

#define SIZE_HINT "use a number with an optional k, M or G suffix, e.g. 64M"
#define DURATION_HINT                                                                              \
  "use a number with a unit: ms, s, m or h, e.g. 500ms, 1.5s or 2m; 0 means no limit"
#define COUNT_HINT "use a whole number such as 1000000 or 1e9; 0 means no limit"

/* How many bytes of a user's value are quoted back in a message. */
#define QUOTE_MAX 40

typedef struct unit {
  const char *name; /* lowercase; matched case-insensitively */
  uint64_t scale;
} unit;

static const unit size_units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1024},
    {"kb", 1024},
    {"kib", 1024},
    {"m", 1024 * 1024},
    {"mb", 1024 * 1024},
    {"mib", 1024 * 1024},
    {"g", 1024 * 1024 * 1024},
    {"gb", 1024 * 1024 * 1024},
    {"gib", 1024 * 1024 * 1024},
};

static const unit duration_units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"min", 60 * 1000}, {"h", 60 * 60 * 1000},
};

/* A decimal number as written, "12.50" = digits "12" and "50". */
typedef struct decimal_text {
  const char *int_digits;
  size_t int_len;
  const char *frac_digits;
  size_t frac_len;
} decimal_text;

typedef enum value_check { VALUE_OK, VALUE_TOO_LARGE, VALUE_NOT_WHOLE } value_check;

typedef enum option_id {
  OPT_HELP,
  OPT_VERSION,
  OPT_JSON,
  OPT_EVAL,
  OPT_MEMORY,
  OPT_INSTRUCTIONS,
  OPT_TIMEOUT,
  OPT_OUTPUT_LIMIT,
  OPT_SOURCE_LIMIT,
  OPT_INPUT,
  OPT_INPUT_FILE,
  OPT_SEED,
  OPT_TIME,
  OPT_ENV,
  OPT_DETERMINISTIC,
  OPT_PAUSE_ON,
  OPT_SNAPSHOT_OUT,
  OPT_VALUE,
  OPT_ERROR,
  OPT_POLICY,
  OPT_MOUNT,
  OPT_FILE,
  OPT_ISOLATE,
  OPT_ALLOW_EXEC,
  OPT_CHANGES,
  OPT_EXPORT_CHANGES,
  OPT_DIFF,
  OPT_STDIN
} option_id;

typedef struct option_spec {
  const char *name;
  option_id id;
  int takes_value;
  const char *example; /* shown when the value is missing */
  int only;            /* FOR_BOTH, or the one command that takes it */
} option_spec;

enum { FOR_BOTH = 0, FOR_RUN = 1, FOR_RESUME = 2 };

static const option_spec run_options[] = {
    {"--help", OPT_HELP, 0, NULL, 0},
    {"-h", OPT_HELP, 0, NULL, 0},
    {"--version", OPT_VERSION, 0, NULL, 0},
    {"--json", OPT_JSON, 0, NULL, 0},
    {"-e", OPT_EVAL, 1, "-e 'return 1 + 1'", FOR_RUN},
    {"--memory", OPT_MEMORY, 1, "--memory 64M", 0},
    {"--instructions", OPT_INSTRUCTIONS, 1, "--instructions 1e9", 0},
    {"--timeout", OPT_TIMEOUT, 1, "--timeout 2s", 0},
    {"--output-limit", OPT_OUTPUT_LIMIT, 1, "--output-limit 1M", 0},
    {"--source-limit", OPT_SOURCE_LIMIT, 1, "--source-limit 64k", 0},
    {"--input", OPT_INPUT, 1, "--input '{\"x\": 1}'", FOR_RUN},
    {"--input-file", OPT_INPUT_FILE, 1, "--input-file inputs.json", FOR_RUN},
    {"--seed", OPT_SEED, 1, "--seed 42", 0},
    {"--time", OPT_TIME, 1, "--time 1700000000", 0},
    {"--env", OPT_ENV, 1, "--env API_URL=https://example.com", 0},
    {"--deterministic", OPT_DETERMINISTIC, 0, NULL, 0},
    {"--pause-on", OPT_PAUSE_ON, 1, "--pause-on tools.fetch", 0},
    {"--snapshot-out", OPT_SNAPSHOT_OUT, 1, "--snapshot-out snap.bin", 0},
    {"--value", OPT_VALUE, 1, "--value '{\"ok\": true}'", FOR_RESUME},
    {"--error", OPT_ERROR, 1, "--error 'not found'", FOR_RESUME},
    {"--policy", OPT_POLICY, 1, "--policy policy.json", 0},
    {"--mount", OPT_MOUNT, 1, "--mount ./data:/data", 0},
    {"--file", OPT_FILE, 1, "--file /input/orders.csv=orders.csv", 0},
    {"--isolate", OPT_ISOLATE, 1, "--isolate process", 0},
    {"--allow-exec", OPT_ALLOW_EXEC, 1, "--allow-exec /usr/bin/python3", 0},
    {"--changes", OPT_CHANGES, 0, NULL, FOR_RUN},
    {"--export-changes", OPT_EXPORT_CHANGES, 1, "--export-changes ./changes", FOR_RUN},
    {"--diff", OPT_DIFF, 0, NULL, FOR_RUN},
    {"--stdin", OPT_STDIN, 1, "--stdin data.txt", FOR_RUN},
};

static const char usage_text[] =
    "Usage: moonbox run [OPTIONS] (FILE | -e CODE | -)\n"
    "       moonbox resume [OPTIONS] SNAPSHOT (--value JSON | --error MESSAGE)\n"
    "       moonbox check [OPTIONS] (FILE | -e CODE | -)\n"
    "       moonbox fuzz FILE [OPTIONS] [LIBFUZZER FLAGS] [CORPUS...]  (moonbox fuzz --help)\n"
    "       moonbox doctor [--json]   (what the exec backend found, and why not)\n"
    "       moonbox mcp [POLICY OPTIONS]   (an MCP server on stdin/stdout; docs/mcp.md)\n"
    "       moonbox --help | --version\n"
    "\n"
    "Runs an untrusted Lua 5.4 script in a sandbox with memory, instruction, time and\n"
    "output limits. The script's output is passed through; its return value is printed\n"
    "as JSON.\n"
    "\n"
    "Script (exactly one):\n"
    "  FILE                   run the Lua source in FILE\n"
    "  -e CODE                run CODE\n"
    "  -                      read the script from standard input\n"
    "\n"
    "Options:\n"
    "  --memory SIZE          live heap limit (default 64M; at least 256k)\n"
    "  --instructions N       VM instruction limit, e.g. 1e9 (0 = unlimited)\n"
    "  --timeout DURATION     wall-clock limit: 500ms, 2s, 1.5s, 1m (0 = unlimited; default 5s)\n"
    "  --output-limit SIZE    stdout + stderr limit (default 1M)\n"
    "  --source-limit SIZE    script size limit (default 64k, at most 16M)\n"
    "  --input JSON           a JSON object whose keys become globals\n"
    "  --input-file PATH      the same, read from PATH (- = standard input)\n"
    "  --seed N               seed math.random with N (reproducible runs)\n"
    "  --time EPOCH           fix os.time/os.date at EPOCH seconds since 1970 (UTC)\n"
    "  --env NAME=VALUE       a variable for os.getenv (repeatable; nothing else is visible)\n"
    "  --deterministic        canonical pairs order, counter ids in tostring, os.clock\n"
    "                         counting instructions (with --seed and --time: same output\n"
    "                         in every run)\n"
    "  --pause-on NAME        grant NAME (e.g. tools.fetch) as an external function: the\n"
    "                         run stops at its first call and exits 4 (repeatable)\n"
    "  --snapshot-out FILE    when the run pauses, write a snapshot of it to FILE (turns\n"
    "                         --deterministic on)\n"
    "  --policy FILE          load limits, env, seed, time and files from a JSON policy\n"
    "                         (docs/policy.md); the options here override its values\n"
    "  --mount HOSTDIR:/PATH[:ro|rw|overlay]\n"
    "                         show HOSTDIR at /PATH (ro: read-only, the default; rw: writes\n"
    "                         reach HOSTDIR; overlay: writes stay in the sandbox's memory)\n"
    "                         (repeatable)\n"
    "  --file /PATH=HOSTFILE  a read-only copy of HOSTFILE at /PATH (repeatable)\n"
    "  --stdin FILE           what io.stdin and io.read read (- = standard input; without\n"
    "                         it, input piped or redirected from a file is used)\n"
    "  --isolate process|none run the script in a jailed worker process (moonbox-worker:\n"
    "                         no files, no network, no system calls but compute) or in\n"
    "                         this process (none, the default; moonbox mcp defaults to\n"
    "                         process)\n"
    "  --allow-exec PROGRAM   let proc.run start PROGRAM (an absolute path, e.g. /bin/sh) in\n"
    "                         the exec sandbox (bubblewrap); /bin/sh also enables os.execute\n"
    "                         and io.popen (repeatable; see moonbox doctor)\n"
    "  --json                 print one JSON object with status, value, output and usage\n"
    "  --changes              after the run, list what the script changed in overlays and\n"
    "                         /tmp on stderr (under \"changes\" with --json)\n"
    "  --export-changes DIR   write the changed files under DIR (a new directory), with\n"
    "                         the manifest DIR/.moonbox-changes.json (removals, renames)\n"
    "  --diff                 print a unified diff of the changes on stdout, after the output\n"
    "  -h, --help             show this help\n"
    "  --version              show the version\n"
    "\n"
    "Resume (continues a paused run from its snapshot, in this or another process):\n"
    "  SNAPSHOT               the file --snapshot-out wrote (- = standard input)\n"
    "  --value JSON           the paused call returns this JSON value\n"
    "  --error MESSAGE        the paused call raises this error (catchable with pcall)\n"
    "  The policy options (--memory, --instructions, --timeout, --output-limit,\n"
    "  --source-limit, --seed, --time, --env, --pause-on) must be those of the run that\n"
    "  wrote the snapshot. --json and --snapshot-out work as for run.\n"
    "\n"
    "Check (compiles the script under the policy and runs nothing):\n"
    "  Lists the global names the script reads or writes that the policy does not provide\n"
    "  (the standard library, --pause-on functions, --input keys are provided), with line\n"
    "  numbers, and syntax errors. Exit 0 clean, 1 with findings, 2 on bad usage. --json\n"
    "  prints {\"globals\":[...],\"ok\":...,\"syntax_error\":...}.\n"
    "\n"
    "SIZE takes k, M or G suffixes (also KiB, MiB, GiB; powers of 1024). Options may come\n"
    "before or after the script; -- ends the options. Both --opt VALUE and --opt=VALUE work.\n"
    "\n"
    "Exit status: 0 ok, 1 script error, 2 usage or input error (also a bad snapshot),\n"
    "3 limit exceeded or interrupted, 4 paused at a --pause-on function, 70 internal\n"
    "error; os.exit(N) exits with N (1 when N is not 0..255).\n";

const char *mbxH_cli_usage(void) {
  return usage_text;
}

/* ---------------------------------------------------------------------------------------- */
/* Messages                                                                                  */

static void set_msg(char *msg, size_t msg_size, const char *fmt, ...) {
  va_list ap;
  if (msg == NULL || msg_size == 0) return;
  va_start(ap, fmt);
  (void)vsnprintf(msg, msg_size, fmt, ap);
  va_end(ap);
}

/*
** Copies a user's value for quoting in a message: control bytes become '?' (a value is echoed
** to a terminal, and escape sequences in it could rewrite what the user sees) and a long
** value is cut at a UTF-8 boundary and marked with "...".
*/
static void quote_value(const char *text, char *buf, size_t size) {
  size_t len = strlen(text), n = len, i;
  int cut = 0;
  if (n > QUOTE_MAX || n > size - 4) {
    n = QUOTE_MAX < size - 4 ? QUOTE_MAX : size - 4;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
      n--;
    cut = 1;
  }
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    buf[i] = (c < 0x20 || c == 0x7F) ? '?' : (char)c;
  }
  if (cut) {
    memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n] = '\0';
}

/* ---------------------------------------------------------------------------------------- */
/* Numbers                                                                                   */

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int equals_ignore_case(const char *a, const char *lowercase) {
  for (; *a != '\0' && *lowercase != '\0'; a++, lowercase++) {
    if (lower(*a) != *lowercase) return 0;
  }
  return *a == '\0' && *lowercase == '\0';
}

/* Scans DIGITS[.DIGITS] at p; returns the end, or NULL when p does not start with a digit or
   the point is not followed by one ("1." and ".5" are refused as likely typos). */
static const char *scan_decimal(const char *p, decimal_text *d) {
  d->int_digits = p;
  while (is_digit(*p))
    p++;
  d->int_len = (size_t)(p - d->int_digits);
  d->frac_digits = p;
  d->frac_len = 0;
  if (d->int_len == 0) return NULL;
  if (*p == '.') {
    d->frac_digits = ++p;
    while (is_digit(*p))
      p++;
    d->frac_len = (size_t)(p - d->frac_digits);
    if (d->frac_len == 0) return NULL;
  }
  return p;
}

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return 1;
  *out = a * b;
  return 0;
}

/*
** Exactly d * scale * 10^exp10 as a whole number. The digits are gathered into one integer N
** and the result is N * scale / 10^k. Because N * scale is formed first, a value with a fraction
** within a factor 10^k of 2^64 is reported too large although it would fit; no limit is
** anywhere near that range, so the simpler arithmetic is worth it.
*/
static value_check decimal_value(const decimal_text *d, uint64_t scale, long exp10, uint64_t *out) {
  size_t frac_len = d->frac_len, i;
  uint64_t n = 0, product;
  long shift;
  while (frac_len > 0 && d->frac_digits[frac_len - 1] == '0')
    frac_len--; /* "1.50" is "1.5": trailing zeros never make a value inexact */
  for (i = 0; i < d->int_len + frac_len; i++) {
    char c = i < d->int_len ? d->int_digits[i] : d->frac_digits[i - d->int_len];
    if (mul_overflows(n, 10, &n) || n > UINT64_MAX - (uint64_t)(c - '0')) return VALUE_TOO_LARGE;
    n += (uint64_t)(c - '0');
  }
  if (n == 0) {
    *out = 0;
    return VALUE_OK;
  }
  shift = exp10 - (long)frac_len;
  for (; shift > 0; shift--) {
    if (mul_overflows(n, 10, &n)) return VALUE_TOO_LARGE;
  }
  if (mul_overflows(n, scale, &product)) return VALUE_TOO_LARGE;
  if (shift < 0) {
    uint64_t divisor = 1;
    /* product < 2^64 < 10^20, so a nonzero product is never a multiple of 10^20. */
    if (shift < -19) return VALUE_NOT_WHOLE;
    for (; shift < 0; shift++)
      divisor *= 10;
    if (product % divisor != 0) return VALUE_NOT_WHOLE;
    product /= divisor;
  }
  *out = product;
  return VALUE_OK;
}

static const unit *find_unit(const unit *units, size_t count, const char *name) {
  size_t i;
  for (i = 0; i < count; i++) {
    if (equals_ignore_case(name, units[i].name)) return &units[i];
  }
  return NULL;
}

/* The checks every kind of value shares; returns 1 when the value was refused. */
static int refuse_blank_or_negative(const char *option, const char *text, const char *hint,
                                    char *msg, size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  if (text[0] == '\0') {
    set_msg(msg, msg_size, "%s: empty value (%s)", option, hint);
    return 1;
  }
  if (text[0] == '-' && is_digit(text[1])) {
    quote_value(text, quoted, sizeof quoted);
    set_msg(msg, msg_size, "%s: '%s' is negative (%s)", option, quoted, hint);
    return 1;
  }
  return 0;
}

int mbxH_cli_parse_size(const char *option, const char *text, uint64_t *out, char *msg,
                        size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  const unit *u;
  if (refuse_blank_or_negative(option, text, SIZE_HINT, msg, msg_size)) return -1;
  quote_value(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  u = end ? find_unit(size_units, sizeof size_units / sizeof size_units[0], end) : NULL;
  if (u == NULL) {
    set_msg(msg, msg_size, "%s: '%s' is not a size (%s)", option, quoted, SIZE_HINT);
    return -1;
  }
  switch (decimal_value(&d, u->scale, 0, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    set_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, SIZE_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  set_msg(msg, msg_size, "%s: '%s' is not a whole number of bytes (%s)", option, quoted, SIZE_HINT);
  return -1;
}

int mbxH_cli_parse_duration(const char *option, const char *text, uint64_t *out, char *msg,
                            size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  const unit *u;
  uint64_t value;
  if (refuse_blank_or_negative(option, text, DURATION_HINT, msg, msg_size)) return -1;
  quote_value(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  if (end != NULL && *end == '\0') {
    /* "--timeout 5" is ambiguous (5 s? 5 ms?); only 0 means the same in every unit. */
    if (decimal_value(&d, 1, 0, &value) == VALUE_OK && value == 0) {
      *out = 0;
      return 0;
    }
    set_msg(msg, msg_size, "%s: '%s' has no unit (write e.g. %sms or %ss; 0 means no limit)",
            option, quoted, quoted, quoted);
    return -1;
  }
  u = end ? find_unit(duration_units, sizeof duration_units / sizeof duration_units[0], end) : NULL;
  if (u == NULL) {
    set_msg(msg, msg_size, "%s: '%s' is not a duration (%s)", option, quoted, DURATION_HINT);
    return -1;
  }
  switch (decimal_value(&d, u->scale, 0, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    set_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, DURATION_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  set_msg(msg, msg_size, "%s: '%s' is not a whole number of milliseconds (%s)", option, quoted,
          DURATION_HINT);
  return -1;
}

int mbxH_cli_parse_count(const char *option, const char *text, uint64_t *out, char *msg,
                         size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  long exp10 = 0;
  if (refuse_blank_or_negative(option, text, COUNT_HINT, msg, msg_size)) return -1;
  quote_value(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  if (end != NULL && (*end == 'e' || *end == 'E')) {
    int negative = 0;
    end++;
    if (*end == '+' || *end == '-') negative = *end++ == '-';
    if (!is_digit(*end)) {
      end = NULL;
    } else {
      /* Clamped: past 10^100 the result is too large (or not whole) either way. */
      for (; is_digit(*end); end++) {
        if (exp10 < 100) exp10 = exp10 * 10 + (*end - '0');
      }
      if (negative) exp10 = -exp10;
    }
  }
  if (end == NULL || *end != '\0') {
    set_msg(msg, msg_size, "%s: '%s' is not a count (%s)", option, quoted, COUNT_HINT);
    return -1;
  }
  switch (decimal_value(&d, 1, exp10, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    set_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, COUNT_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  set_msg(msg, msg_size, "%s: '%s' is not a whole number (%s)", option, quoted, COUNT_HINT);
  return -1;
}

#define EPOCH_HINT "use whole seconds since 1970-01-01 UTC, e.g. 1700000000"

int mbxH_cli_parse_epoch(const char *option, const char *text, int64_t *out, char *msg,
                         size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  const char *p = text;
  int negative = 0;
  uint64_t magnitude = 0;
  quote_value(text, quoted, sizeof quoted);
  if (text[0] == '\0') {
    set_msg(msg, msg_size, "%s: empty value (%s)", option, EPOCH_HINT);
    return -1;
  }
  if (*p == '-') {
    negative = 1;
    p++;
  }
  if (!is_digit(*p)) {
    set_msg(msg, msg_size, "%s: '%s' is not a time (%s)", option, quoted, EPOCH_HINT);
    return -1;
  }
  for (; is_digit(*p); p++) {
    /* 2^63 fits the magnitude of INT64_MIN; anything larger is refused. */
    if (magnitude > ((uint64_t)1 << 63) / 10 ||
        magnitude * 10 + (uint64_t)(*p - '0') > ((uint64_t)1 << 63)) {
      set_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, EPOCH_HINT);
      return -1;
    }
    magnitude = magnitude * 10 + (uint64_t)(*p - '0');
  }
  if (*p != '\0' || (!negative && magnitude == ((uint64_t)1 << 63))) {
    set_msg(msg, msg_size, "%s: '%s' is not a time (%s)", option, quoted, EPOCH_HINT);
    return -1;
  }
  if (negative)
    *out = magnitude == ((uint64_t)1 << 63) ? INT64_MIN : -(int64_t)magnitude;
  else
    *out = (int64_t)magnitude;
  return 0;
}

#define SEED_HINT "use a whole number, e.g. 42"

int mbxH_cli_parse_seed(const char *option, const char *text, uint64_t *out, char *msg,
                        size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  const char *p = text;
  uint64_t value = 0;
  quote_value(text, quoted, sizeof quoted);
  if (text[0] == '-') {
    /* A negative seed is the same 64 bits as math.randomseed(-N) uses. */
    int64_t negative;
    if (mbxH_cli_parse_epoch(option, text, &negative, msg, msg_size) != 0) {
      set_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
      return -1;
    }
    *out = (uint64_t)negative;
    return 0;
  }
  if (!is_digit(*p)) {
    set_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
    return -1;
  }
  for (; is_digit(*p); p++) {
    if (mul_overflows(value, 10, &value) || value > UINT64_MAX - (uint64_t)(*p - '0')) {
      set_msg(msg, msg_size, "%s: '%s' is too large (at most 2^64 - 1)", option, quoted);
      return -1;
    }
    value += (uint64_t)(*p - '0');
  }
  if (*p != '\0') {
    set_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
    return -1;
  }
  *out = value;
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Command line                                                                              */

/* How a script source is named in a "two scripts given" message. */
static void describe_script(mbxH_cli_script kind, const char *script, char *buf, size_t size) {
  char quoted[QUOTE_MAX + 4];
  if (kind == MBXH_CLI_SCRIPT_CODE) {
    (void)snprintf(buf, size, "-e CODE");
  } else if (kind == MBXH_CLI_SCRIPT_STDIN) {
    (void)snprintf(buf, size, "- (stdin)");
  } else {
    quote_value(script, quoted, sizeof quoted);
    (void)snprintf(buf, size, "'%s'", quoted);
  }
}

static int set_script(mbxH_cli_options *opt, mbxH_cli_script kind, const char *script, char *msg,
                      size_t msg_size) {
  char before[QUOTE_MAX + 8], now[QUOTE_MAX + 8];
  if (opt->script_kind != MBXH_CLI_SCRIPT_NONE) {
    describe_script(opt->script_kind, opt->script, before, sizeof before);
    describe_script(kind, script, now, sizeof now);
    set_msg(msg, msg_size, "two scripts given (%s and %s); give exactly one of FILE, -e CODE or -",
            before, now);
    return -1;
  }
  if (kind == MBXH_CLI_SCRIPT_FILE && script[0] == '\0') {
    set_msg(msg, msg_size, "empty script file name (give FILE, -e CODE or - for stdin)");
    return -1;
  }
  opt->script_kind = kind;
  opt->script = script;
  return 0;
}

static const option_spec *find_option(const char *arg, size_t name_len) {
  size_t i;
  for (i = 0; i < sizeof run_options / sizeof run_options[0]; i++) {
    const char *name = run_options[i].name;
    if (strlen(name) == name_len && strncmp(name, arg, name_len) == 0) return &run_options[i];
  }
  return NULL;
}

/* Stores one option's value; returns -1 with msg filled when the value is refused. */
static int apply_option(mbxH_cli_options *opt, const option_spec *spec, const char *value,
                        char *msg, size_t msg_size) {
  mbxH_cli_limit *limit = NULL;
  int rc = 0;
  switch (spec->id) {
  case OPT_HELP:
  case OPT_VERSION:
  case OPT_JSON:
  case OPT_DETERMINISTIC:
  case OPT_CHANGES:
  case OPT_DIFF:
    break; /* flags are handled by the caller */
  case OPT_EVAL:
    return set_script(opt, MBXH_CLI_SCRIPT_CODE, value, msg, msg_size);
  case OPT_MEMORY:
    limit = &opt->memory;
    rc = mbxH_cli_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_INSTRUCTIONS:
    limit = &opt->instructions;
    rc = mbxH_cli_parse_count(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_TIMEOUT:
    limit = &opt->timeout_ms;
    rc = mbxH_cli_parse_duration(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_OUTPUT_LIMIT:
    limit = &opt->output;
    rc = mbxH_cli_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_SOURCE_LIMIT:
    limit = &opt->source;
    rc = mbxH_cli_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_SEED:
    limit = &opt->seed;
    rc = mbxH_cli_parse_seed(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_TIME:
    rc = mbxH_cli_parse_epoch(spec->name, value, &opt->time, msg, msg_size);
    if (rc == 0) opt->time_set = 1;
    break;
  case OPT_ENV: {
    /* The name is checked by the library (mbx_policy_set_env); only the shape is here. */
    const char *eq = strchr(value, '=');
    char quoted[QUOTE_MAX + 4];
    quote_value(value, quoted, sizeof quoted);
    if (eq == NULL || eq == value) {
      set_msg(msg, msg_size, "--env: '%s' is not NAME=VALUE (e.g. %s)", quoted, spec->example);
      return -1;
    }
    if (opt->env_count == MBXH_CLI_MAX_ENV) {
      set_msg(msg, msg_size, "--env: at most %d variables can be given", MBXH_CLI_MAX_ENV);
      return -1;
    }
    opt->env[opt->env_count++] = value;
    break;
  }
  case OPT_PAUSE_ON:
    /* The name is checked by the library (mbx_policy_add_external). */
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--pause-on: empty name (e.g. %s)", spec->example);
      return -1;
    }
    if (opt->pause_count == MBXH_CLI_MAX_PAUSE) {
      set_msg(msg, msg_size, "--pause-on: at most %d functions can be given", MBXH_CLI_MAX_PAUSE);
      return -1;
    }
    opt->pause_on[opt->pause_count++] = value;
    break;
  case OPT_STDIN:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--stdin: empty file name (e.g. %s, or - for standard input)",
              spec->example);
      return -1;
    }
    opt->stdin_file = value;
    break;
  case OPT_EXPORT_CHANGES:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--export-changes: empty directory name (e.g. %s)", spec->example);
      return -1;
    }
    opt->export_changes = value;
    break;
  case OPT_SNAPSHOT_OUT:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--snapshot-out: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->snapshot_out = value;
    break;
  case OPT_VALUE:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--value: empty value (give one JSON value, e.g. %s)", spec->example);
      return -1;
    }
    opt->resume_value = value;
    break;
  case OPT_ERROR:
    opt->resume_error = value; /* an empty message is a message */
    break;
  case OPT_POLICY:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "--policy: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->policy_file = value;
    break;
  case OPT_MOUNT: {
    /* The shape here; the paths are checked by the library (mbx_policy_mount). */
    char host[8], virt[8];
    int mode;
    if (mbxH_cli_split_mount(value, host, 0, virt, 0, &mode, msg, msg_size) != 0) return -1;
    if (opt->mount_count == MBXH_CLI_MAX_MOUNTS) {
      set_msg(msg, msg_size, "--mount: at most %d mounts can be given", MBXH_CLI_MAX_MOUNTS);
      return -1;
    }
    opt->mounts[opt->mount_count++] = value;
    break;
  }
  case OPT_ISOLATE:
    if (strcmp(value, "process") == 0 || strcmp(value, "none") == 0) {
      opt->isolate = value[0] == 'p';
      return 0;
    } else {
      char quoted[QUOTE_MAX + 4];
      quote_value(value, quoted, sizeof quoted);
      set_msg(msg, msg_size, "--isolate: '%s' is not process or none (e.g. %s)", quoted,
              spec->example);
      return -1;
    }
  case OPT_ALLOW_EXEC:
    /* The shape here; the library checks the path (mbx_policy_allow_exec). */
    if (value[0] != '/') {
      char quoted[QUOTE_MAX + 4];
      quote_value(value, quoted, sizeof quoted);
      set_msg(msg, msg_size, "--allow-exec: '%s' is not an absolute path (e.g. %s)", quoted,
              spec->example);
      return -1;
    }
    if (opt->allow_exec_count == MBXH_CLI_MAX_EXEC) {
      set_msg(msg, msg_size, "--allow-exec: at most %d programs can be allowed",
              MBXH_CLI_MAX_EXEC);
      return -1;
    }
    opt->allow_exec[opt->allow_exec_count++] = value;
    break;
  case OPT_FILE: {
    const char *eq = strchr(value, '=');
    char quoted[QUOTE_MAX + 4];
    quote_value(value, quoted, sizeof quoted);
    if (value[0] != '/' || eq == NULL || eq[1] == '\0') {
      set_msg(msg, msg_size, "--file: '%s' is not /VIRTUAL=HOSTFILE (e.g. %s)", quoted,
              spec->example);
      return -1;
    }
    if (opt->file_count == MBXH_CLI_MAX_FILES) {
      set_msg(msg, msg_size, "--file: at most %d files can be given", MBXH_CLI_MAX_FILES);
      return -1;
    }
    opt->files[opt->file_count++] = value;
    break;
  }
  case OPT_INPUT:
  case OPT_INPUT_FILE:
    if (value[0] == '\0') {
      set_msg(msg, msg_size, "%s: empty value (e.g. %s)", spec->name, spec->example);
      return -1;
    }
    if (spec->id == OPT_INPUT)
      opt->input_json = value;
    else
      opt->input_file = value;
    break;
  }
  if (rc == 0 && limit != NULL)
    limit->set = 1; /* a repeated limit option: the last one wins, as in most tools */
  return rc;
}

int mbxH_cli_split_mount(const char *value, char *host, size_t host_size, char *virt,
                         size_t virt_size, int *mode, char *msg, size_t msg_size) {
  static const struct {
    const char *suffix;
    int mode;
  } modes[] = {{":ro", 1}, {":rw", 2}, {":overlay", 4}};
  char quoted[QUOTE_MAX + 4];
  size_t len = strlen(value);
  quote_value(value, quoted, sizeof quoted);
  *mode = 1;
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    size_t n = strlen(modes[i].suffix);
    if (len > n && strcmp(value + len - n, modes[i].suffix) == 0) {
      *mode = modes[i].mode;
      len -= n;
      break;
    }
  }
  /* The virtual path starts at the last ":/" (host directories may contain ':'). */
  const char *split = NULL;
  for (size_t i = 0; i + 1 < len; i++)
    if (value[i] == ':' && value[i + 1] == '/') split = value + i;
  if (split == NULL || split == value) {
    set_msg(msg, msg_size, "--mount: '%s' is not HOSTDIR:/PATH[:ro|rw] (e.g. ./data:/data)",
            quoted);
    return -1;
  }
  size_t host_len = (size_t)(split - value), virt_len = len - host_len - 1;
  if (host_size == 0 && virt_size == 0) return 0; /* the shape only */
  if (host_len + 1 > host_size || virt_len + 1 > virt_size) {
    set_msg(msg, msg_size, "--mount: '%s' is too long", quoted);
    return -1;
  }
  memcpy(host, value, host_len);
  host[host_len] = '\0';
  memcpy(virt, split + 1, virt_len);
  virt[virt_len] = '\0';
  return 0;
}

/* The SNAPSHOT argument of moonbox resume: exactly one. */
static int set_snapshot(mbxH_cli_options *opt, const char *path, char *msg, size_t msg_size) {
  char before[QUOTE_MAX + 4], now[QUOTE_MAX + 4];
  if (opt->snapshot != NULL) {
    quote_value(opt->snapshot, before, sizeof before);
    quote_value(path, now, sizeof now);
    set_msg(msg, msg_size, "two snapshots given ('%s' and '%s'); give exactly one SNAPSHOT file",
            before, now);
    return -1;
  }
  if (path[0] == '\0') {
    set_msg(msg, msg_size, "empty snapshot file name (give SNAPSHOT, or - for stdin)");
    return -1;
  }
  opt->snapshot = path;
  return 0;
}

/* A positional argument: the script of run, the snapshot of resume. */
static int set_positional(mbxH_cli_options *opt, const char *arg, char *msg, size_t msg_size) {
  if (opt->command == MBXH_CLI_MCP) {
    char quoted[QUOTE_MAX + 4];
    quote_value(arg, quoted, sizeof quoted);
    set_msg(msg, msg_size,
            "moonbox mcp takes no script ('%s'): the client sends the code in tools/call", quoted);
    return -1;
  }
  if (opt->command == MBXH_CLI_RESUME) return set_snapshot(opt, arg, msg, msg_size);
  if (strcmp(arg, "-") == 0) return set_script(opt, MBXH_CLI_SCRIPT_STDIN, NULL, msg, msg_size);
  return set_script(opt, MBXH_CLI_SCRIPT_FILE, arg, msg, msg_size);
}

/* The checks of a whole resume command line. */
static int check_resume(const mbxH_cli_options *opt, char *msg, size_t msg_size) {
  if (opt->snapshot == NULL) {
    set_msg(msg, msg_size,
            "no snapshot given (use moonbox resume SNAPSHOT --value JSON, with the file "
            "moonbox run --snapshot-out wrote)");
    return -1;
  }
  if (opt->resume_value != NULL && opt->resume_error != NULL) {
    set_msg(msg, msg_size, "--value and --error cannot both be given (the paused call either "
                           "returns a value or raises an error)");
    return -1;
  }
  if (opt->resume_value == NULL && opt->resume_error == NULL) {
    set_msg(msg, msg_size, "no answer given (resume needs --value JSON or --error MESSAGE: "
                           "what the paused call returns or raises)");
    return -1;
  }
  return 0;
}

/* moonbox mcp takes the policy options only: what a run may use. The script, its inputs and
   the output format come from each tools/call; pauses and snapshots have no MCP form. */
static int mcp_takes(const option_spec *spec) {
  switch (spec->id) {
  case OPT_EVAL:
  case OPT_INPUT:
  case OPT_INPUT_FILE:
  case OPT_JSON:
  case OPT_PAUSE_ON:
  case OPT_SNAPSHOT_OUT:
  case OPT_VALUE:
  case OPT_ERROR:
    return 0;
  default:
    return 1;
  }
}

/* argv here starts after "run", "resume" or "mcp"; opt->command says which. */
static int parse_run(int argc, char *const argv[], mbxH_cli_options *opt, char *msg,
                     size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  int i, options_ended = 0;
  const char *command_name = opt->command == MBXH_CLI_RESUME  ? "resume"
                             : opt->command == MBXH_CLI_CHECK ? "check"
                             : opt->command == MBXH_CLI_MCP   ? "mcp"
                                                              : "run";
  for (i = 0; i < argc; i++) {
    const char *arg = argv[i], *value = NULL, *eq;
    const option_spec *spec;
    size_t name_len;
    if (!options_ended && strcmp(arg, "--") == 0) {
      options_ended = 1;
      continue;
    }
    if (options_ended || arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (set_positional(opt, arg, msg, msg_size) != 0) return -1;
      continue;
    }
    /* Only long options take "=VALUE": "-e=x" would otherwise be ambiguous with Lua code. */
    eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    spec = find_option(arg, name_len);
    if (spec == NULL) {
      char name[QUOTE_MAX + 4];
      quote_value(arg, quoted, sizeof quoted);
      if (eq != NULL && name_len < sizeof name) {
        memcpy(name, arg, name_len); /* "--foo=1" is reported as '--foo' */
        name[name_len] = '\0';
        quote_value(name, quoted, sizeof quoted);
      }
      set_msg(msg, msg_size, "unknown option '%s' (see moonbox %s --help)", quoted, command_name);
      return -1;
    }
    if (opt->command == MBXH_CLI_MCP && !mcp_takes(spec)) {
      set_msg(msg, msg_size,
              "%s is not an option of moonbox mcp (it takes the policy options: limits, "
              "--policy, --mount, --file, --env, --seed, --time, --deterministic, and "
              "--isolate)",
              spec->name);
      return -1;
    }
    if (opt->command != MBXH_CLI_MCP && spec->only != FOR_BOTH &&
        spec->only != (opt->command == MBXH_CLI_RESUME ? FOR_RESUME : FOR_RUN)) {
      if (spec->only == FOR_RESUME)
        set_msg(msg, msg_size,
                "%s is an option of moonbox resume (it answers a paused call), not of %s",
                spec->name, command_name);
      else
        set_msg(msg, msg_size,
                "%s is an option of moonbox run, not of resume (resume continues the script "
                "and inputs recorded in the snapshot)",
                spec->name);
      return -1;
    }
    if (!spec->takes_value) {
      if (eq != NULL) {
        quote_value(eq + 1, quoted, sizeof quoted);
        set_msg(msg, msg_size, "%s takes no value (remove '=%s')", spec->name, quoted);
        return -1;
      }
      if (spec->id == OPT_HELP || spec->id == OPT_VERSION) {
        opt->command = spec->id == OPT_HELP ? MBXH_CLI_HELP : MBXH_CLI_VERSION;
        return 0;
      }
      /* --json and --deterministic; with --json given twice, the second is a no-op. */
      if (spec->id == OPT_DETERMINISTIC)
        opt->deterministic = 1;
      else if (spec->id == OPT_CHANGES)
        opt->changes = 1;
      else if (spec->id == OPT_DIFF)
        opt->diff = 1;
      else
        opt->json = 1;
      continue;
    }
    if (eq != NULL) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      /* The next argument is the value even when it starts with '-': "-e '-- a comment'",
         and "--memory -5" then reports a negative size rather than a missing one. */
      value = argv[++i];
    } else {
      set_msg(msg, msg_size, "%s needs a value (e.g. %s)", spec->name, spec->example);
      return -1;
    }
    if (apply_option(opt, spec, value, msg, msg_size) != 0) return -1;
  }
  if (opt->command == MBXH_CLI_RESUME) return check_resume(opt, msg, msg_size);
  if (opt->command == MBXH_CLI_MCP) return 0;
  if (opt->command == MBXH_CLI_CHECK && opt->script_kind == MBXH_CLI_SCRIPT_NONE) {
    set_msg(msg, msg_size, "no script given (use moonbox check FILE, moonbox check -e CODE, "
                           "or - to read stdin)");
    return -1;
  }
  if (opt->command == MBXH_CLI_CHECK && opt->snapshot_out != NULL) {
    set_msg(msg, msg_size, "--snapshot-out: moonbox check runs nothing, so nothing pauses");
    return -1;
  }
  if (opt->script_kind == MBXH_CLI_SCRIPT_NONE) {
    set_msg(msg, msg_size,
            "no script given (use moonbox run FILE, moonbox run -e CODE, or - to read stdin)");
    return -1;
  }
  if (opt->input_json != NULL && opt->input_file != NULL) {
    set_msg(msg, msg_size, "--input and --input-file cannot both be given (use one of them)");
    return -1;
  }
  if (opt->input_file != NULL && strcmp(opt->input_file, "-") == 0 &&
      opt->script_kind == MBXH_CLI_SCRIPT_STDIN) {
    set_msg(msg, msg_size,
            "--input-file -: stdin already holds the script (put the inputs in a file)");
    return -1;
  }
  return 0;
}

int mbxH_cli_parse(int argc, char *const argv[], mbxH_cli_options *opt, char *msg,
                   size_t msg_size) {
  char quoted[QUOTE_MAX + 4];
  const char *command;
  memset(opt, 0, sizeof *opt);
  opt->command = MBXH_CLI_RUN;
  if (msg != NULL && msg_size > 0) msg[0] = '\0';
  if (argc < 2) {
    set_msg(msg, msg_size, "no command given (use moonbox run FILE, or see moonbox --help)");
    return -1;
  }
  command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0) {
    opt->command = MBXH_CLI_HELP;
    return 0;
  }
  if (strcmp(command, "--version") == 0 || strcmp(command, "version") == 0) {
    opt->command = MBXH_CLI_VERSION;
    return 0;
  }
  if (strcmp(command, "run") == 0) return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  if (strcmp(command, "doctor") == 0) {
    opt->command = MBXH_CLI_DOCTOR;
    for (int i = 2; i < argc; i++) {
      if (strcmp(argv[i], "--json") == 0) {
        opt->json = 1;
        continue;
      }
      quote_value(argv[i], quoted, sizeof quoted);
      set_msg(msg, msg_size, "moonbox doctor takes only --json, not '%s'", quoted);
      return -1;
    }
    return 0;
  }
  if (strcmp(command, "mcp") == 0) {
    opt->command = MBXH_CLI_MCP;
    /* The server runs many agents' code for as long as it lives: each call in a jailed worker
       unless --isolate none opts out. */
    opt->isolate = 1;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  if (strcmp(command, "resume") == 0) {
    opt->command = MBXH_CLI_RESUME;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  if (strcmp(command, "check") == 0) {
    opt->command = MBXH_CLI_CHECK;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  quote_value(command, quoted, sizeof quoted);
  if (command[0] == '-')
    set_msg(msg, msg_size,
            "unknown option '%s' (options go after the command: moonbox run "
            "[OPTIONS] FILE; see moonbox --help)",
            quoted);
  else
    set_msg(msg, msg_size,
            "unknown command '%s' (the commands are run, resume, check, doctor and mcp; see "
            "moonbox --help)",
            quoted);
  return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* Chunk names and exit codes                                                                */

void mbxH_cli_chunk_name(const char *path, char *buf, size_t size) {
  size_t len = strlen(path);
  const char *tail;
  if (size == 0) return;
  if (len < size) {
    memcpy(buf, path, len + 1);
    return;
  }
  if (size < 4) {
    buf[0] = '\0';
    return;
  }
  tail = path + len - (size - 4);
  while (((unsigned char)*tail & 0xC0) == 0x80)
    tail++; /* start on a character, not inside one */
  memcpy(buf, "...", 3);
  memcpy(buf + 3, tail, strlen(tail) + 1);
}

int mbxH_cli_exit_code_for_exit(int64_t code) {
  if (code >= 0 && code <= 255) return (int)code;
  return 1;
}

int mbxH_cli_exit_code(int status) {
  switch (status) {
  case MBX_OK:
    return 0;
  case MBX_SYNTAX_ERROR:
  case MBX_RUNTIME_ERROR:
    return 1;
  case MBX_INVALID_INPUT:
    return 2;
  case MBX_MEMORY_LIMIT:
  case MBX_INSTRUCTION_LIMIT:
  case MBX_TIME_LIMIT:
  case MBX_OUTPUT_LIMIT:
  case MBX_HOST_CALL_LIMIT:
  case MBX_INTERRUPTED:
  case MBX_SOURCE_TOO_LARGE:
    return 3;
  case MBX_PAUSED:
    return MBXH_CLI_EXIT_PAUSED;
  default:
    /* MBX_INTERNAL_ERROR and API statuses that mean the CLI itself misused the library. */
    return 70;
  }
}

/* ---------------------------------------------------------------------------------------- */
/* The pending call of a paused result                                                       */

/* The end of the JSON array or object starting at p (its closing bracket + 1), or NULL. */
static const char *skip_container(const char *p, const char *end) {
  int depth = 0, in_string = 0;
  for (; p < end; p++) {
    char c = *p;
    if (in_string) {
      if (c == '\\')
        p++; /* the escaped byte cannot end the string */
      else if (c == '"')
        in_string = 0;
    } else if (c == '"') {
      in_string = 1;
    } else if (c == '[' || c == '{') {
      depth++;
    } else if (c == ']' || c == '}') {
      if (--depth == 0) return p + 1;
    }
  }
  return NULL;
}

int mbxH_cli_find_pending(const char *json, size_t len, const char **fn, size_t *fn_len,
                          const char **args, size_t *args_len) {
  static const char key[] = "\"pending\":{\"args\":";
  static const char fkey[] = ",\"function\":\"";
  const char *end = json + len, *p, *args_end, *name, *name_end;
  size_t klen = sizeof key - 1, flen = sizeof fkey - 1;
  /* "error" is the only key before "pending" and is null in a paused result, so the first
     occurrence is the member itself (an error message cannot come first). */
  for (p = json; p + klen <= end; p++) {
    if (memcmp(p, key, klen) == 0) break;
  }
  if (p + klen > end) return -1;
  p += klen;
  if (p >= end || *p != '[') return -1;
  args_end = skip_container(p, end);
  if (args_end == NULL || (size_t)(end - args_end) < flen || memcmp(args_end, fkey, flen) != 0)
    return -1;
  name = args_end + flen;
  name_end = memchr(name, '"', (size_t)(end - name));
  if (name_end == NULL || name_end == name) return -1;
  *fn = name;
  *fn_len = (size_t)(name_end - name);
  *args = p;
  *args_len = (size_t)(args_end - p);
  return 0;
}

int mbxH_cli_option_arity(const char *name, size_t name_len) {
  const option_spec *spec = find_option(name, name_len);
  return spec == NULL ? -1 : spec->takes_value;
}
