/* tests/fuzz/fuzz_run.c -- libFuzzer harness: arbitrary bytes as Lua source through mbx_run. */
/* Each input is one chunk of guest source, run through the public API exactly as a host would
   (mbx_run, no inputs) in a fresh sandbox with tiny budgets: 1 MiB of heap, 100k instructions,
   50 ms, 64 KiB of output (THREATS.md section 9, fuzzing item 1). After the run the harness
   checks the invariants the result contract promises and aborts, so libFuzzer saves the input,
   when one breaks:
     - mbx_run returns a run status, the same as mbx_result_status(); an API status only for
       MBX_SOURCE_TOO_LARGE on a source over the limit. Statuses this configuration cannot
       produce (paused, host_call_limit, interrupted, internal_error) count as violations;
     - a run that ended on a limit poisons the sandbox, and one that did not leaves it usable
       (a second run of `return 1` gives 1 or a limit);
     - usage.memory_peak stays at or below the allocator ceiling, 1.25 * limit + 1 MiB;
     - mbx_run returns within the deadline + WALL_SLACK_MS (measured here, not taken from
       usage). The machine is noisy, so an overrun is re-run once in a fresh sandbox and
       counts only if it happens again (the rule for the escape suite);
     - "ESCAPED" appears in no output, message, traceback or JSON. The seeds from tests/escape
       print it when an attack works, so a mutated seed can print it unconditionally: the check
       is skipped when the source itself holds the word (any case), and the host environment
       carries a canary holding it, which only a guest reading the real environment can see;
     - the result JSON and the value JSON are well-formed JSON (a small validator below), the
       result an object starting with {"error":.
   A host hang with no hook firing is libFuzzer's -timeout; a sanitizer report is a crash.

   Build (clang only; tests/CMakeLists.txt adds the target when the compiler is Clang):
     cmake --preset fuzz && cmake --build --preset fuzz
   Run (docs/fuzzing.md has the details; the seeds are copied at run time, never committed):
     bash tests/fuzz/seed_corpus.sh build/fuzz/corpus-run
     build/fuzz/tests/fuzz_run -dict=tests/fuzz/lua.dict -max_len=8192 -timeout=5 \
       -rss_limit_mb=2048 -artifact_prefix=build/fuzz/ -max_total_time=600 build/fuzz/corpus-run
   Environment: FUZZ_WALL_SLACK_MS widens the wall-time slack (default 100). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moonbox.h"

#define MEMORY_LIMIT (1u << 20)
#define INSTRUCTION_LIMIT 100000
#define TIME_LIMIT_MS 50
#define OUTPUT_LIMIT (64u << 10)
#define SOURCE_LIMIT (64u << 10)
/* The allocator's documented hard ceiling (moonbox.h, MBX_LIMIT_MEMORY). */
#define MEMORY_CEILING (MEMORY_LIMIT + MEMORY_LIMIT / 4 + (1u << 20))
/* Residual wall time allowed past the deadline (THREATS.md section 9). */
#define WALL_SLACK_MS 100
#define MARKER "ESCAPED"
/* Deeper JSON than this is reported as invalid; the codec's own depth limit is far lower. */
#define JSON_MAX_DEPTH 1000

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static mbx_runtime *runtime;
static mbx_policy *policy;
static long wall_slack_ms = WALL_SLACK_MS;

/* Print what broke, then the input, and abort: libFuzzer saves the input as a crash. */
static _Noreturn void violation(const char *what, const uint8_t *data, size_t size,
                                const mbx_result *res) {
  fprintf(stderr, "\nfuzz_run: INVARIANT VIOLATED: %s\n", what);
  if (res != NULL) fprintf(stderr, "result: %s\n", mbx_result_json(res, NULL));
  fprintf(stderr, "source (%zu bytes):\n", size);
  fwrite(data, 1, size, stderr);
  fputc('\n', stderr);
  abort();
}

/* ---------------------------------------------------------------------------------------- */
/* A strict JSON validator (RFC 8259 grammar; strings are checked for escapes and control
   bytes, not for UTF-8, which the contract encodes as {"$bytes": ...} itself). */

typedef struct json_cursor {
  const char *p, *end;
} json_cursor;

static void json_skip_space(json_cursor *c) {
  while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
    c->p++;
}

static int json_literal(json_cursor *c, const char *word) {
  size_t n = strlen(word);
  if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return 0;
  c->p += n;
  return 1;
}

static int json_is_digit(json_cursor *c) {
  return c->p < c->end && *c->p >= '0' && *c->p <= '9';
}

static int json_number(json_cursor *c) {
  if (c->p < c->end && *c->p == '-') c->p++;
  if (!json_is_digit(c)) return 0;
  if (*c->p == '0')
    c->p++;
  else
    while (json_is_digit(c))
      c->p++;
  if (c->p < c->end && *c->p == '.') {
    c->p++;
    if (!json_is_digit(c)) return 0;
    while (json_is_digit(c))
      c->p++;
  }
  if (c->p < c->end && (*c->p == 'e' || *c->p == 'E')) {
    c->p++;
    if (c->p < c->end && (*c->p == '+' || *c->p == '-')) c->p++;
    if (!json_is_digit(c)) return 0;
    while (json_is_digit(c))
      c->p++;
  }
  return 1;
}

static int json_string(json_cursor *c) {
  if (c->p >= c->end || *c->p != '"') return 0;
  c->p++;
  while (c->p < c->end) {
    unsigned char ch = (unsigned char)*c->p++;
    if (ch == '"') return 1;
    if (ch < 0x20) return 0;
    if (ch != '\\') continue;
    if (c->p >= c->end) return 0;
    ch = (unsigned char)*c->p++;
    if (ch == 'u') {
      for (int i = 0; i < 4; i++, c->p++)
        if (c->p >= c->end || strchr("0123456789abcdefABCDEF", *c->p) == NULL || *c->p == 0)
          return 0;
    } else if (strchr("\"\\/bfnrt", ch) == NULL || ch == 0) {
      return 0;
    }
  }
  return 0;
}

static int json_value(json_cursor *c, int depth) {
  if (depth > JSON_MAX_DEPTH) return 0;
  json_skip_space(c);
  if (c->p >= c->end) return 0;
  switch (*c->p) {
  case '{':
    c->p++;
    json_skip_space(c);
    if (c->p < c->end && *c->p == '}') return c->p++, 1;
    for (;;) {
      json_skip_space(c);
      if (!json_string(c)) return 0;
      json_skip_space(c);
      if (c->p >= c->end || *c->p++ != ':') return 0;
      if (!json_value(c, depth + 1)) return 0;
      json_skip_space(c);
      if (c->p >= c->end) return 0;
      if (*c->p == '}') return c->p++, 1;
      if (*c->p++ != ',') return 0;
    }
  case '[':
    c->p++;
    json_skip_space(c);
    if (c->p < c->end && *c->p == ']') return c->p++, 1;
    for (;;) {
      if (!json_value(c, depth + 1)) return 0;
      json_skip_space(c);
      if (c->p >= c->end) return 0;
      if (*c->p == ']') return c->p++, 1;
      if (*c->p++ != ',') return 0;
    }
  case '"':
    return json_string(c);
  case 't':
    return json_literal(c, "true");
  case 'f':
    return json_literal(c, "false");
  case 'n':
    return json_literal(c, "null");
  default:
    return json_number(c);
  }
}

/* 1 when s[0..len) is exactly one JSON value, optionally surrounded by whitespace. */
static int json_valid(const char *s, size_t len) {
  json_cursor c = {s, s + len};
  if (!json_value(&c, 0)) return 0;
  json_skip_space(&c);
  return c.p == c.end;
}

/* ---------------------------------------------------------------------------------------- */

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static int contains_marker(const char *s, size_t len) {
  return s != NULL && memmem(s, len, MARKER, sizeof MARKER - 1) != NULL;
}

/* Whether the source spells the marker itself, in any case (then printing it proves nothing). */
static int source_spells_marker(const uint8_t *data, size_t size) {
  static const char lower[] = "escaped";
  size_t n = sizeof lower - 1;
  for (size_t i = 0; i + n <= size; i++) {
    size_t k = 0;
    while (k < n && (data[i + k] | 0x20) == lower[k])
      k++;
    if (k == n) return 1;
  }
  return 0;
}

static int is_limit_status(mbx_status s) {
  return s == MBX_MEMORY_LIMIT || s == MBX_INSTRUCTION_LIMIT || s == MBX_TIME_LIMIT ||
         s == MBX_OUTPUT_LIMIT;
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  const char *slack = getenv("FUZZ_WALL_SLACK_MS");
  if (slack != NULL && strtol(slack, NULL, 10) > WALL_SLACK_MS)
    wall_slack_ms = strtol(slack, NULL, 10);
  /* The canary: a guest that reaches the host's real environment sees the marker. */
  setenv("MOONBOX_FUZZ_CANARY", MARKER, 1);
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  policy = mbx_policy_new();
  if (runtime == NULL || policy == NULL) abort();
  if (mbx_policy_set_limit(policy, MBX_LIMIT_MEMORY, MEMORY_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, INSTRUCTION_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_TIME_MS, TIME_LIMIT_MS) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_OUTPUT, OUTPUT_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_SOURCE, SOURCE_LIMIT) != MBX_OK)
    abort();
  /* A policy variable, so a guest reading os.getenv has something to find. */
  if (mbx_policy_set_env(policy, "FUZZ", "1", NULL) != MBX_OK) abort();
  return 0;
}

/* One run in a fresh sandbox; returns the result (NULL for an API status) and the wall time. */
static mbx_status run_once(const uint8_t *data, size_t size, mbx_result **res, uint64_t *wall_us) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, policy, &err);
  if (sb == NULL) {
    fprintf(stderr, "fuzz_run: mbx_sandbox_new: %s\n", err.message);
    abort();
  }
  uint64_t start = now_us();
  mbx_status st = mbx_run(sb, (const char *)data, size, NULL, 0, res, &err);
  *wall_us = now_us() - start;
  if (st < MBX_API_ERROR_BASE) {
    /* The sandbox's state after the run: poisoned exactly when a limit ended it. */
    int poisoned = mbx_sandbox_poisoned(sb);
    if (poisoned != is_limit_status(st))
      violation(poisoned ? "sandbox poisoned after a run that hit no limit"
                         : "sandbox not poisoned after a limit",
                data, size, *res);
    if (!poisoned) {
      mbx_result *again = NULL;
      mbx_status st2 = mbx_run(sb, "return 1", 8, NULL, 0, &again, &err);
      if (st2 >= MBX_API_ERROR_BASE)
        violation("a usable sandbox refused the next run", data, size, *res);
      const char *value = mbx_result_value_json(again, NULL);
      if (!(st2 == MBX_OK ? strcmp(value, "1") == 0 : is_limit_status(st2)))
        violation("the next run in the same sandbox did not return 1", data, size, again);
      mbx_result_free(again);
    }
  } else if (*res != NULL) {
    violation("an API status came with a result", data, size, NULL);
  }
  mbx_sandbox_free(sb);
  return st;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  mbx_result *res = NULL;
  uint64_t wall_us;
  mbx_status st = run_once(data, size, &res, &wall_us);

  if (st >= MBX_API_ERROR_BASE) {
    if (!(st == MBX_SOURCE_TOO_LARGE && size > SOURCE_LIMIT))
      violation(mbx_status_name(st), data, size, NULL);
    return 0;
  }
  if (size > SOURCE_LIMIT) violation("a source over the limit ran", data, size, res);
  if (mbx_result_status(res) != st)
    violation("mbx_run and mbx_result_status disagree", data, size, res);
  if (st == MBX_PAUSED || st == MBX_HOST_CALL_LIMIT || st == MBX_INTERRUPTED ||
      st == MBX_INTERNAL_ERROR)
    violation(mbx_status_name(st), data, size, res);

  mbx_usage usage;
  if (mbx_result_usage(res, &usage) != MBX_OK) violation("no usage", data, size, res);
  if (usage.memory_peak > MEMORY_CEILING)
    violation("memory_peak above the allocator ceiling", data, size, res);

  size_t json_len, value_len, out_len, err_len, msg_len, tb_len;
  const char *json = mbx_result_json(res, &json_len);
  const char *value = mbx_result_value_json(res, &value_len);
  const char *out = mbx_result_stdout(res, &out_len);
  const char *errout = mbx_result_stderr(res, &err_len);
  const char *msg = mbx_result_error_message(res, &msg_len);
  const char *tb = mbx_result_traceback(res, &tb_len);
  if (json == NULL || value == NULL || out == NULL || errout == NULL || msg == NULL || tb == NULL)
    violation("a result accessor returned NULL", data, size, res);
  if (json_len != strlen(json) || value_len != strlen(value))
    violation("a JSON length disagrees with its text", data, size, res);
  if (json_len < 10 || memcmp(json, "{\"error\":", 9) != 0 || json[json_len - 1] != '}' ||
      !json_valid(json, json_len))
    violation("the result JSON is not a valid object", data, size, res);
  if (!json_valid(value, value_len)) violation("the value JSON is not valid", data, size, res);
  if (out_len + err_len > OUTPUT_LIMIT)
    violation("captured output above the output limit", data, size, res);
  if (!source_spells_marker(data, size) &&
      (contains_marker(json, json_len) || contains_marker(out, out_len) ||
       contains_marker(errout, err_len) || contains_marker(msg, msg_len) ||
       contains_marker(tb, tb_len)))
    violation("ESCAPED in the output", data, size, res);
  mbx_result_free(res);

  uint64_t bound_us = (uint64_t)(TIME_LIMIT_MS + wall_slack_ms) * 1000u;
  if (wall_us > bound_us) {
    /* Once more before it counts: a noisy neighbour can stall any single run. */
    uint64_t first_us = wall_us;
    res = NULL;
    run_once(data, size, &res, &wall_us);
    if (wall_us > bound_us) {
      char what[128];
      snprintf(what, sizeof what, "wall time %llu us then %llu us, bound %llu us",
               (unsigned long long)first_us, (unsigned long long)wall_us,
               (unsigned long long)bound_us);
      violation(what, data, size, res);
    }
    mbx_result_free(res);
  }
  return 0;
}
