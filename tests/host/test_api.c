/* tests/host/test_api.c -- unit tests of the public C API (host/runtime.c, host/policy_api.c,
   host/sandbox.c and the in-process backend, host/backend/inproc.c). */
#include <locale.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "include/moonbox.h"

/* ---- helpers ---- */

typedef struct fixture {
  mbx_runtime *rt;
  mbx_policy *p;
} fixture;

static int setup(void **state) {
  fixture *f = calloc(1, sizeof *f);
  assert_non_null(f);
  mbx_error err;
  f->rt = mbx_runtime_new(&err);
  assert_non_null(f->rt);
  f->p = mbx_policy_new();
  assert_non_null(f->p);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  fixture *f = *state;
  mbx_policy_free(f->p);
  mbx_runtime_free(f->rt);
  free(f);
  return 0;
}

static mbx_sandbox *new_sandbox(fixture *f) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  return sb;
}

/* Run code and return the status; the result's value JSON is copied into value (may be NULL). */
static mbx_status run_code(mbx_sandbox *sb, const char *code, const char *inputs, char *value,
                           size_t value_size, mbx_error *err) {
  mbx_result *res = (mbx_result *)(uintptr_t)1; /* must be reset to NULL on API errors */
  mbx_status s = mbx_run(sb, code, strlen(code), inputs, inputs ? strlen(inputs) : 0, &res, err);
  if (s >= MBX_API_ERROR_BASE) {
    assert_null(res);
    if (err) assert_int_equal(err->code, s);
    return s;
  }
  assert_non_null(res);
  assert_int_equal(mbx_result_status(res), s);
  if (value) snprintf(value, value_size, "%s", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return s;
}

typedef struct thread_job {
  void *(*fn)(void *);
  void *arg;
} thread_job;

/* Run fn(arg) on a new thread with the given stack size and wait for it. */
static void on_thread(size_t stack, void *(*fn)(void *), void *arg) {
  pthread_attr_t attr;
  assert_int_equal(pthread_attr_init(&attr), 0);
  assert_int_equal(pthread_attr_setstacksize(&attr, stack), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, fn, arg), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_attr_destroy(&attr);
}

/* ---- basics ---- */

static void version_matches_the_header(void **state) {
  (void)state;
  assert_string_equal(mbx_version(), MBX_VERSION);
  assert_int_equal(mbx_version_number(), MBX_VERSION_NUMBER);
  assert_int_equal(MBX_VERSION_NUMBER, 1000);
}

static void the_header_example_runs(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_TIME_MS, 200), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  mbx_result *res = NULL;
  assert_int_equal(mbx_run(sb, "return x * 2", 12, "{\"x\": 21}", 9, &res, &err), MBX_OK);
  const char *json = mbx_result_json(res, NULL);
  assert_memory_equal(json, "{\"error\":null,", 14);
  assert_non_null(strstr(json, ",\"value\":42}"));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

/* MBX_LIMIT_RESULT reaches the run: a value longer than it ends as output_limit, whatever
   the output limit (issue 9, C.3). */
static void the_result_limit_reaches_the_run(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_RESULT, 100), MBX_OK);
  assert_int_equal(mbx_policy_get_limit(f->p, MBX_LIMIT_RESULT), 100);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(f->rt, f->p, &err);
  assert_non_null(sb);
  mbx_result *res = NULL;
  const char *fits = "return string.rep('x', 98)", *longer = "return string.rep('x', 99)";
  assert_int_equal(mbx_run(sb, fits, strlen(fits), NULL, 0, &res, &err), MBX_OK);
  mbx_result_free(res);
  assert_int_equal(mbx_run(sb, longer, strlen(longer), NULL, 0, &res, &err), MBX_OUTPUT_LIMIT);
  assert_string_equal(mbx_result_value_json(res, NULL), "null");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

static void null_arguments_everywhere(void **state) {
  fixture *f = *state;
  /* Destructors accept NULL. */
  mbx_free(NULL);
  mbx_runtime_free(NULL);
  mbx_policy_free(NULL);
  mbx_sandbox_free(NULL);
  mbx_result_free(NULL);
  /* Policy. */
  mbx_error err;
  assert_int_equal(mbx_policy_set_limit(NULL, MBX_LIMIT_MEMORY, 1u << 20), MBX_INVALID_ARGUMENT);
  memset(&err, 0, sizeof err);
  assert_int_equal(mbx_policy_set_limit_checked(NULL, MBX_LIMIT_MEMORY, 1u << 20, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "NULL"));
  assert_int_equal(mbx_policy_get_limit(NULL, MBX_LIMIT_MEMORY), 0);
  /* Sandbox. */
  memset(&err, 0, sizeof err);
  assert_null(mbx_sandbox_new(NULL, f->p, &err));
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  memset(&err, 0, sizeof err);
  assert_null(mbx_sandbox_new(f->rt, NULL, &err));
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_null(mbx_sandbox_new(NULL, NULL, NULL)); /* err may be NULL */
  assert_int_equal(mbx_sandbox_interrupt(NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_poisoned(NULL), 0);
  /* Run. */
  mbx_sandbox *sb = new_sandbox(f);
  mbx_result *res = (mbx_result *)(uintptr_t)1;
  memset(&err, 0, sizeof err);
  assert_int_equal(mbx_run(NULL, "return 1", 8, NULL, 0, &res, &err), MBX_INVALID_ARGUMENT);
  assert_null(res);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 0, NULL, &err), MBX_INVALID_ARGUMENT);
  res = (mbx_result *)(uintptr_t)1;
  assert_int_equal(mbx_run(sb, NULL, 5, NULL, 0, &res, &err), MBX_INVALID_ARGUMENT);
  assert_null(res);
  res = (mbx_result *)(uintptr_t)1;
  assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 3, &res, NULL), MBX_INVALID_ARGUMENT);
  assert_null(res);
  assert_int_equal(mbx_run_named(sb, "return 1", 8, "n", NULL, 0, NULL, NULL),
                   MBX_INVALID_ARGUMENT);
  /* NULL code with length 0 is the empty chunk. */
  assert_int_equal(mbx_run(sb, NULL, 0, NULL, 0, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "null");
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  mbx_sandbox_free(sb);
}

static void policy_through_the_api(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_policy_get_limit(f->p, MBX_LIMIT_MEMORY), 64ull << 20);
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_MEMORY, 1000), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_get_limit(f->p, MBX_LIMIT_MEMORY), 64ull << 20);
  assert_int_equal(mbx_policy_set_limit_checked(f->p, MBX_LIMIT_SOURCE, 0, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_string_equal(err.message, "the source limit must be between 1 bytes and 16M, not 0");
  assert_int_equal(mbx_policy_set_limit_checked(f->p, (mbx_limit)42, 1, &err),
                   MBX_INVALID_ARGUMENT);
  assert_string_equal(err.message, "mbx_policy_set_limit: unknown limit 42");
  assert_int_equal(mbx_policy_get_limit(f->p, (mbx_limit)42), 0);
  assert_int_equal(mbx_policy_set_limit_checked(f->p, MBX_LIMIT_TIME_MS, 0, NULL), MBX_OK);
  assert_int_equal(mbx_policy_get_limit(f->p, MBX_LIMIT_TIME_MS), 0);
}

/* The sandbox copies the policy: later changes and freeing it do not matter. */
static void sandbox_copies_the_policy(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 10000), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  assert_non_null(sb);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  mbx_policy_free(p);
  assert_int_equal(run_code(sb, "while true do end", NULL, NULL, 0, NULL), MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
  mbx_runtime_free(rt);
}

static mbx_status answer_42(void *userdata, const char *args_json, size_t args_len,
                            mbx_host_reply *reply) {
  (void)userdata, (void)args_json, (void)args_len;
  return mbx_host_reply_json(reply, "42", 2);
}

/* mbx_policy_copy: the settings, not the host functions; the two are independent after. */
static void policy_copy_holds_the_settings(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_null(mbx_policy_copy(NULL));
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 10000), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_EXEC_RUNS, 3), MBX_OK);
  assert_int_equal(mbx_policy_set_time(p, 86400, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_seed(p, 7, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(p, "WHO", "copy", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_file(p, "/data/f.txt", "bytes\0x", 7, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "answer", answer_42, NULL, &err), MBX_OK);
  mbx_policy *c = mbx_policy_copy(p);
  assert_non_null(c);
  /* Independent: p changed or freed after the copy leaves it as it was. */
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  mbx_policy_free(p);
  assert_int_equal(mbx_policy_get_limit(c, MBX_LIMIT_INSTRUCTIONS), 10000);
  assert_int_equal(mbx_policy_get_limit(c, MBX_LIMIT_EXEC_RUNS), 3);
  mbx_sandbox *sb = mbx_sandbox_new(rt, c, &err);
  assert_non_null(sb);
  char value[128];
  assert_int_equal(run_code(sb,
                            "return {os.time(), os.getenv('WHO'), "
                            "io.open('/data/f.txt'):read('a'), answer == nil}",
                            NULL, value, sizeof value, NULL),
                   MBX_OK);
  assert_string_equal(value, "[86400,\"copy\",\"bytes\\u0000x\",true]");
  assert_int_equal(run_code(sb, "while true do end", NULL, NULL, 0, NULL), MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
  /* The same seed, the same sequence as a sandbox of an equally seeded policy. */
  mbx_policy *q = mbx_policy_new();
  assert_int_equal(mbx_policy_set_seed(q, 7, &err), MBX_OK);
  char a[64], b[64];
  sb = mbx_sandbox_new(rt, c, &err);
  assert_int_equal(run_code(sb, "return math.random(1 << 40)", NULL, a, sizeof a, NULL), MBX_OK);
  mbx_sandbox_free(sb);
  sb = mbx_sandbox_new(rt, q, &err);
  assert_int_equal(run_code(sb, "return math.random(1 << 40)", NULL, b, sizeof b, NULL), MBX_OK);
  mbx_sandbox_free(sb);
  assert_string_equal(a, b);
  mbx_policy_free(q);
  mbx_policy_free(c);
  mbx_runtime_free(rt);
}

/* The documented minimum memory limit holds the standard library and runs code. */
static void minimum_memory_limit_is_usable(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_MEMORY, 256u << 10), MBX_OK);
  mbx_sandbox *sb = new_sandbox(f);
  char value[64];
  assert_int_equal(run_code(sb, "local t = {} for i = 1, 100 do t[i] = tostring(i) end return #t",
                            NULL, value, sizeof value, NULL),
                   MBX_OK);
  assert_string_equal(value, "100");
  mbx_sandbox_free(sb);
}

static void chunk_names(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  static const struct {
    const char *name;
    const char *chunk;
  } cases[] = {{NULL, "input"}, {"", "input"}, {"tool.lua", "tool.lua"}};
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mbx_result *res = NULL;
    assert_int_equal(mbx_run_named(sb, "\nerror('x')", 11, cases[i].name, NULL, 0, &res, NULL),
                     MBX_RUNTIME_ERROR);
    mbx_error err;
    assert_int_equal(mbx_result_error(res, &err), 1);
    assert_string_equal(err.chunk, cases[i].chunk);
    assert_int_equal(err.line, 2);
    mbx_result_free(res);
  }
  char longname[300];
  memset(longname, 'n', sizeof longname - 1);
  longname[sizeof longname - 1] = '\0';
  mbx_result *res = NULL;
  assert_int_equal(mbx_run_named(sb, "error('x')", 10, longname, NULL, 0, &res, NULL),
                   MBX_RUNTIME_ERROR);
  mbx_error err;
  mbx_result_error(res, &err);
  assert_true(strlen(err.chunk) > 0 && strlen(err.chunk) < sizeof err.chunk);
  assert_non_null(strstr(err.chunk, "nnnn"));
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

/* What moonbox.h says each call does with a NULL handle (its "NULL" section and each
   function's comment): nothing crashes, lengths come back 0, accessors give their safe value. */
static mbx_status reply_nothing(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud, (void)args, (void)len, (void)reply;
  return MBX_OK;
}

static void native_nothing(void) {}

static void null_handles_get_the_documented_answers(void **state) {
  fixture *f = *state;
  mbx_error err;
  size_t len;
  /* Status names: never NULL but the key. */
  assert_string_equal(mbx_status_name((mbx_status)-1), "MBX_UNKNOWN");
  assert_string_equal(mbx_status_str((mbx_status)-1), "unknown status");
  assert_null(mbx_status_key((mbx_status)-1));
  assert_string_equal(mbx_status_key(MBX_TIME_LIMIT), "time_limit");
  /* Runtime accessors and calls. */
  assert_int_equal(mbx_runtime_deadline_signal(NULL), 0);
  assert_int_equal(mbx_runtime_get_cap(NULL, MBX_CAP_SANDBOXES), 0);
  assert_int_equal(mbx_runtime_usage(NULL, MBX_CAP_SANDBOXES), 0);
  assert_int_equal(mbx_runtime_set_cap(NULL, MBX_CAP_SANDBOXES, 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_set_path(NULL, MBX_PATH_WORKER, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_set_deadline_signal(NULL, 0, NULL), MBX_INVALID_ARGUMENT);
  char *json = (char *)(uintptr_t)1;
  len = 99;
  memset(&err, 0, sizeof err);
  assert_int_equal(mbx_runtime_exec_status(NULL, &json, &len, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_ptr_equal(json, (char *)(uintptr_t)1); /* untouched, as documented */
  assert_int_equal(mbx_runtime_exec_status(f->rt, NULL, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_worker_status(NULL, &json, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_worker_status(f->rt, NULL, NULL, NULL), MBX_INVALID_ARGUMENT);
  /* Policy setters: MBX_INVALID_ARGUMENT for a NULL policy or a NULL required string. */
  assert_int_equal(mbx_policy_set_env(NULL, "A", "b", NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_env(f->p, NULL, "b", NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_seed(NULL, 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_time(NULL, 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_set_deterministic(NULL, 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_mount(NULL, "/data", "/", MBX_MOUNT_RO, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_mount(f->p, NULL, "/", MBX_MOUNT_RO, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_allow_exec(NULL, "/bin/sh", NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_allow_exec(f->p, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_file(NULL, "/f", "x", 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_file(f->p, NULL, "x", 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_file(f->p, "/f", NULL, 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_load_json(NULL, "{}", 2, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_load_json(f->p, NULL, 2, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(NULL, "t.f", reply_nothing, NULL, NULL),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(f->p, NULL, reply_nothing, NULL, NULL),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(f->p, "t.f", NULL, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_external(NULL, "t.g", NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_external(f->p, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_bind_native(NULL, "m.f", "v()", native_nothing, NULL),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_bind_native(f->p, "m.f", "v()", NULL, NULL), MBX_INVALID_ARGUMENT);
  /* Nothing of the refused calls reached the policy. */
  mbx_sandbox *sb = new_sandbox(f);
  char value[64];
  assert_int_equal(run_code(sb, "return type(t) .. type(m) .. tostring(os.getenv('A'))", NULL,
                            value, sizeof value, NULL),
                   MBX_OK);
  assert_string_equal(value, "\"nilnilnil\"");
  /* Host replies. */
  assert_int_equal(mbx_host_reply_json(NULL, "1", 1), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_host_reply_error(NULL, "no", 2), MBX_INVALID_ARGUMENT);
  /* Sandbox accessors and calls. */
  assert_int_equal(mbx_sandbox_paused(NULL), 0);
  assert_int_equal(mbx_sandbox_poisoned(NULL), 0);
  assert_int_equal(mbx_sandbox_interrupt(NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_reset(NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_checkpoint(NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_rewind(NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_set_stdin(NULL, "x", 1, NULL), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_set_stdin(sb, NULL, 1, NULL), MBX_INVALID_ARGUMENT);
  json = (char *)(uintptr_t)1;
  len = 99;
  assert_int_equal(mbx_sandbox_changes(NULL, 0, &json, &len, NULL), MBX_INVALID_ARGUMENT);
  assert_null(json);
  assert_int_equal(len, 0);
  assert_int_equal(mbx_sandbox_changes(sb, 0, NULL, NULL, NULL), MBX_INVALID_ARGUMENT);
  void *bytes = (void *)(uintptr_t)1;
  len = 99;
  assert_int_equal(mbx_sandbox_snapshot(NULL, &bytes, &len, NULL), MBX_INVALID_ARGUMENT);
  assert_null(bytes);
  assert_int_equal(len, 0);
  memset(&err, 0, sizeof err);
  assert_null(mbx_sandbox_restore(NULL, f->p, "x", 1, &err));
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_null(mbx_sandbox_restore(f->rt, NULL, "x", 1, NULL));
  assert_null(mbx_sandbox_restore(f->rt, f->p, NULL, 1, NULL));
  mbx_result *res = (mbx_result *)(uintptr_t)1;
  assert_int_equal(mbx_resume(NULL, "1", 1, &res, NULL), MBX_INVALID_ARGUMENT);
  assert_null(res);
  res = (mbx_result *)(uintptr_t)1;
  assert_int_equal(mbx_resume_error(NULL, "no", 2, &res, NULL), MBX_INVALID_ARGUMENT);
  assert_null(res);
  json = (char *)(uintptr_t)1;
  assert_int_equal(mbx_check(NULL, "x = 1", 5, &json, NULL, NULL), MBX_INVALID_ARGUMENT);
  assert_null(json);
  assert_int_equal(mbx_check(f->p, "x = 1", 5, NULL, NULL, NULL), MBX_INVALID_ARGUMENT);
  mbx_sandbox_free(sb);
  /* Result accessors: the safe value, every length 0. */
  assert_int_equal(mbx_result_status(NULL), MBX_INVALID_ARGUMENT);
  len = 99;
  assert_null(mbx_result_json(NULL, &len));
  assert_int_equal(len, 0);
  assert_null(mbx_result_json(NULL, NULL));
  len = 99;
  assert_null(mbx_result_value_json(NULL, &len));
  assert_int_equal(len, 0);
  len = 99;
  assert_null(mbx_result_stdout(NULL, &len));
  assert_int_equal(len, 0);
  len = 99;
  assert_null(mbx_result_stderr(NULL, &len));
  assert_int_equal(len, 0);
  memset(&err, 0x5a, sizeof err);
  assert_int_equal(mbx_result_error(NULL, &err), 0);
  assert_int_equal(err.code, 0);
  assert_int_equal(err.line, 0);
  assert_string_equal(err.chunk, "");
  assert_string_equal(err.message, "");
  assert_int_equal(mbx_result_error(NULL, NULL), 0);
  len = 99;
  assert_string_equal(mbx_result_error_message(NULL, &len), "");
  assert_int_equal(len, 0);
  len = 99;
  assert_string_equal(mbx_result_traceback(NULL, &len), "");
  assert_int_equal(len, 0);
  int64_t code = 7;
  assert_int_equal(mbx_result_exit_code(NULL, &code), 0);
  assert_int_equal(code, 7);
  assert_int_equal(mbx_result_exit_code(NULL, NULL), 0);
  mbx_usage usage;
  memset(&usage, 0x5a, sizeof usage);
  mbx_usage before = usage;
  assert_int_equal(mbx_result_usage(NULL, &usage), MBX_INVALID_ARGUMENT);
  assert_memory_equal(&usage, &before, sizeof usage);
}

/* The result of a run that succeeded: mbx_result_error clears err; message and traceback are
   "", never NULL; the status is a run status. */
static void a_successful_result_answers_empty(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  mbx_result *res = NULL;
  assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 0, &res, NULL), MBX_OK);
  assert_int_equal(mbx_result_status(res), MBX_OK);
  mbx_error err;
  memset(&err, 0x5a, sizeof err);
  assert_int_equal(mbx_result_error(res, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  size_t len = 99;
  assert_string_equal(mbx_result_error_message(res, &len), "");
  assert_int_equal(len, 0);
  len = 99;
  assert_string_equal(mbx_result_traceback(res, &len), "");
  assert_int_equal(len, 0);
  len = 99;
  assert_string_equal(mbx_result_stdout(res, &len), "");
  assert_int_equal(len, 0);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

/* The chunk name of mbx_run_named as moonbox.h documents it: the last 55 bytes of a long one
   after "...", whole up to 58 bytes, part of the bytecode cache's key, and a ':' in it keeps
   the message's prefix while the position still comes from the frame. */
static void chunk_names_as_documented(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  char name[128], want[128];
  static const size_t lengths[] = {58, 59, 120};
  for (size_t i = 0; i < sizeof lengths / sizeof *lengths; i++) {
    size_t n = lengths[i];
    memset(name, 0, sizeof name); /* the NUL after n bytes (n < sizeof name) */
    for (size_t j = 0; j < n; j++)
      name[j] = (char)('a' + j % 26);
    if (n <= 58)
      snprintf(want, sizeof want, "%s", name);
    else
      snprintf(want, sizeof want, "...%s", name + n - 55);
    mbx_result *res = NULL;
    assert_int_equal(mbx_run_named(sb, "error('x')", 10, name, NULL, 0, &res, NULL),
                     MBX_RUNTIME_ERROR);
    mbx_error err;
    assert_int_equal(mbx_result_error(res, &err), 1);
    assert_string_equal(err.chunk, want);
    assert_string_equal(err.message, "x");
    mbx_result_free(res);
  }
  /* The same source under two names: each run names its own chunk (two cache entries). */
  const char *names[] = {"one.lua", "two.lua", "one.lua"};
  for (size_t i = 0; i < 3; i++) {
    mbx_result *res = NULL;
    assert_int_equal(mbx_run_named(sb, "error('x')", 10, names[i], NULL, 0, &res, NULL),
                     MBX_RUNTIME_ERROR);
    mbx_error err;
    mbx_result_error(res, &err);
    assert_string_equal(err.chunk, names[i]);
    mbx_result_free(res);
  }
  mbx_result *res = NULL;
  assert_int_equal(mbx_run_named(sb, "\nerror('x')", 11, "a:b", NULL, 0, &res, NULL),
                   MBX_RUNTIME_ERROR);
  mbx_error err;
  mbx_result_error(res, &err);
  assert_string_equal(err.chunk, "a:b");
  assert_int_equal(err.line, 2);
  assert_string_equal(err.message, "a:b:2: x");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

/* ---- poisoning ---- */

static void expect_poisoned(mbx_sandbox *sb, const char *key) {
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  mbx_error err;
  memset(&err, 0, sizeof err);
  assert_int_equal(run_code(sb, "return 1", NULL, NULL, 0, &err), MBX_SANDBOX_POISONED);
  assert_int_equal(err.code, MBX_SANDBOX_POISONED);
  char want[128];
  snprintf(want, sizeof want, "this sandbox ended a run with %s and refuses further runs", key);
  if (strstr(err.message, want) == NULL) fail_msg("message: %s", err.message);
  assert_non_null(strstr(err.message, "create a new one"));
  /* Still refused the second time, and with err NULL. */
  assert_int_equal(run_code(sb, "return 1", NULL, NULL, 0, NULL), MBX_SANDBOX_POISONED);
}

static void limits_poison_the_sandbox(void **state) {
  (void)state;
  static const struct {
    mbx_limit limit;
    uint64_t value;
    const char *code;
    mbx_status status;
    const char *key;
  } cases[] = {
      {MBX_LIMIT_MEMORY, 1u << 20, "local t = {} for i = 1, 1e8 do t[i] = i end", MBX_MEMORY_LIMIT,
       "memory_limit"},
      {MBX_LIMIT_INSTRUCTIONS, 10000, "while true do end", MBX_INSTRUCTION_LIMIT,
       "instruction_limit"},
      {MBX_LIMIT_TIME_MS, 20, "while true do end", MBX_TIME_LIMIT, "time_limit"},
      {MBX_LIMIT_OUTPUT, 5, "print('more than five')", MBX_OUTPUT_LIMIT, "output_limit"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mbx_runtime *rt = mbx_runtime_new(NULL);
    mbx_policy *p = mbx_policy_new();
    if (cases[i].limit == MBX_LIMIT_TIME_MS)
      assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
    assert_int_equal(mbx_policy_set_limit(p, cases[i].limit, cases[i].value), MBX_OK);
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
    assert_non_null(sb);
    assert_int_equal(mbx_sandbox_poisoned(sb), 0);
    assert_int_equal(run_code(sb, cases[i].code, NULL, NULL, 0, NULL), cases[i].status);
    expect_poisoned(sb, cases[i].key);
    mbx_sandbox_free(sb);
    mbx_policy_free(p);
    mbx_runtime_free(rt);
  }
}

static void errors_do_not_poison(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_SOURCE, 64), MBX_OK);
  mbx_sandbox *sb = new_sandbox(f);
  mbx_error err;
  assert_int_equal(run_code(sb, "return = 1", NULL, NULL, 0, NULL), MBX_SYNTAX_ERROR);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  assert_int_equal(run_code(sb, "error('x')", NULL, NULL, 0, NULL), MBX_RUNTIME_ERROR);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  assert_int_equal(run_code(sb, "return {[true] = 1}", NULL, NULL, 0, NULL), MBX_RUNTIME_ERROR);
  assert_int_equal(run_code(sb, "return 1", "[1]", NULL, 0, &err), MBX_INVALID_INPUT);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  char big[100];
  memset(big, ' ', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal(run_code(sb, big, NULL, NULL, 0, &err), MBX_SOURCE_TOO_LARGE);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  char value[32];
  assert_int_equal(run_code(sb, "return 7", NULL, value, sizeof value, NULL), MBX_OK);
  assert_string_equal(value, "7");
  mbx_sandbox_free(sb);
}

/* ---- the C stack check ---- */

typedef struct stack_job {
  mbx_sandbox *sb;
  mbx_status status;
  mbx_error err;
  char value[32];
} stack_job;

static void *stack_job_run(void *arg) {
  stack_job *j = arg;
  mbx_result *res = NULL;
  j->status = mbx_run(j->sb, "return 40 + 2", 13, NULL, 0, &res, &j->err);
  if (res) snprintf(j->value, sizeof j->value, "%s", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return NULL;
}

static void small_stacks_are_refused(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  stack_job small = {.sb = sb};
  on_thread(256u << 10, stack_job_run, &small);
  assert_int_equal(small.status, MBX_STACK_TOO_SMALL);
  assert_int_equal(small.err.code, MBX_STACK_TOO_SMALL);
  assert_non_null(strstr(small.err.message, "KiB of C stack"));
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  /* The refusal left the sandbox idle: a big enough thread runs it. */
  stack_job big = {.sb = sb};
  on_thread(8u << 20, stack_job_run, &big);
  assert_int_equal(big.status, MBX_OK);
  assert_string_equal(big.value, "42");
  mbx_sandbox_free(sb);
}

/* ---- locale ---- */

static void runs_use_the_c_locale_and_restore_the_hosts(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  static const char *const comma_locales[] = {"de_DE.UTF-8", "de_DE.utf8",  "fr_FR.UTF-8",
                                              "nl_NL.UTF-8", "ru_RU.UTF-8", "de_DE"};
  const char *chosen = NULL;
  for (size_t i = 0; i < sizeof comma_locales / sizeof *comma_locales && !chosen; i++)
    if (setlocale(LC_NUMERIC, comma_locales[i]) && strcmp(localeconv()->decimal_point, ",") == 0)
      chosen = comma_locales[i];
  char value[128];
  assert_int_equal(run_code(sb, "return tostring(1.5), string.format('%.1f', 2.5), 1.5", NULL,
                            value, sizeof value, NULL),
                   MBX_OK);
  assert_string_equal(value, "[\"1.5\",\"2.5\",1.5]");
  if (chosen) {
    /* The host's locale is back. */
    assert_string_equal(localeconv()->decimal_point, ",");
    assert_string_equal(setlocale(LC_NUMERIC, NULL), chosen);
  } else {
    print_message("no comma-decimal locale installed: host-locale assertion skipped\n");
  }
  setlocale(LC_NUMERIC, "C");

  /* A thread-local host locale (uselocale) is restored too. */
  locale_t mine = newlocale(LC_ALL_MASK, "C.UTF-8", (locale_t)0);
  if (mine == (locale_t)0) mine = newlocale(LC_ALL_MASK, "POSIX", (locale_t)0);
  assert_true(mine != (locale_t)0);
  locale_t before = uselocale(mine);
  assert_int_equal(run_code(sb, "return tostring(0.25)", NULL, value, sizeof value, NULL), MBX_OK);
  assert_string_equal(value, "\"0.25\"");
  assert_true(uselocale((locale_t)0) == mine);
  uselocale(before);
  freelocale(mine);
  /* And the global locale again. */
  assert_true(uselocale((locale_t)0) == LC_GLOBAL_LOCALE);
  mbx_sandbox_free(sb);
}

/* ---- threads and interrupts (the tsan preset runs these) ---- */

#define THREADS 4
#define SANDBOXES_PER_THREAD 200

typedef struct worker {
  mbx_runtime *rt;
  const mbx_policy *p;
  int id;
  int failures;
  char first_failure[200];
} worker;

static void worker_fail(worker *w, const char *what) {
  if (w->failures++ == 0) snprintf(w->first_failure, sizeof w->first_failure, "%.199s", what);
}

static void *worker_run(void *arg) {
  worker *w = arg;
  for (int k = 0; k < SANDBOXES_PER_THREAD; k++) {
    mbx_error err;
    mbx_sandbox *sb = mbx_sandbox_new(w->rt, w->p, &err);
    if (sb == NULL) {
      worker_fail(w, err.message);
      continue;
    }
    long x = (long)w->id * 100000 + k;
    char inputs[64], expect[64];
    snprintf(inputs, sizeof inputs, "{\"x\": %ld}", x);
    snprintf(expect, sizeof expect, "[%ld,\"%ld\"]", 2 * x + 1, x);
    const char *code = "local s = 0 for i = 1, 100 do s = s + i end\n"
                       "return x * 2 + 1, tostring(x)";
    mbx_result *res = NULL;
    mbx_status s = mbx_run(sb, code, strlen(code), inputs, strlen(inputs), &res, &err);
    if (s != MBX_OK)
      worker_fail(w, mbx_status_name(s));
    else if (strcmp(mbx_result_value_json(res, NULL), expect) != 0)
      worker_fail(w, mbx_result_value_json(res, NULL));
    mbx_result_free(res);
    /* A second run on the same sandbox sees its own globals only. */
    res = NULL;
    s = mbx_run(sb, "return y == nil", 15, NULL, 0, &res, &err);
    if (s != MBX_OK || strcmp(mbx_result_value_json(res, NULL), "true") != 0)
      worker_fail(w, "second run");
    mbx_result_free(res);
    res = NULL;
    s = mbx_run(sb, "y = x return y", 14, NULL, 0, &res, &err);
    if (s != MBX_OK) worker_fail(w, "third run");
    mbx_result_free(res);
    mbx_sandbox_free(sb);
  }
  return NULL;
}

static void threads_share_one_runtime(void **state) {
  fixture *f = *state;
  worker workers[THREADS];
  pthread_t threads[THREADS];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  for (int i = 0; i < THREADS; i++) {
    workers[i] = (worker){.rt = f->rt, .p = f->p, .id = i};
    assert_int_equal(pthread_create(&threads[i], &attr, worker_run, &workers[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(threads[i], NULL);
  pthread_attr_destroy(&attr);
  for (int i = 0; i < THREADS; i++)
    if (workers[i].failures)
      fail_msg("thread %d: %d failures, first: %s", i, workers[i].failures,
               workers[i].first_failure);
}

typedef struct looper {
  mbx_sandbox *sb;
  atomic_int done;
  mbx_status status;
  mbx_error err;
} looper;

static void *looper_run(void *arg) {
  looper *l = arg;
  mbx_result *res = NULL;
  l->status = mbx_run(l->sb, "while true do end", 17, NULL, 0, &res, &l->err);
  mbx_result_free(res);
  atomic_store(&l->done, 1);
  return NULL;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void interrupt_stops_a_running_loop(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_TIME_MS, 10000), MBX_OK);
  mbx_sandbox *sb = new_sandbox(f);
  looper l = {.sb = sb};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, looper_run, &l), 0);
  /* Interrupt after ~50 ms, and again every 50 ms: an interrupt that lands before the run
     has started is discarded by design, so keep sending until the loop ends. */
  sleep_ms(50);
  for (int i = 0; i < 400 && !atomic_load(&l.done); i++) {
    assert_int_equal(mbx_sandbox_interrupt(sb), MBX_OK);
    sleep_ms(50);
  }
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  assert_int_equal(l.status, MBX_INTERRUPTED);
  expect_poisoned(sb, "interrupted");
  mbx_sandbox_free(sb);
}

static void interrupt_while_idle_is_discarded(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  assert_int_equal(mbx_sandbox_interrupt(sb), MBX_OK);
  assert_int_equal(mbx_sandbox_interrupt(sb), MBX_OK);
  char value[32];
  assert_int_equal(run_code(sb, "local n = 0 for i = 1, 100000 do n = n + 1 end return n", NULL,
                            value, sizeof value, NULL),
                   MBX_OK);
  assert_string_equal(value, "100000");
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  /* After a run, too. */
  assert_int_equal(mbx_sandbox_interrupt(sb), MBX_OK);
  assert_int_equal(run_code(sb, "return 1", NULL, value, sizeof value, NULL), MBX_OK);
  mbx_sandbox_free(sb);
}

/* ---- reset, checkpoint, rewind ---- */

/* Run code that must succeed and return its value JSON (malloc'd). */
static char *value_of(mbx_sandbox *sb, const char *code) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s != MBX_OK)
    fail_msg("%s: %s: %s", code, mbx_status_name(s),
             res ? mbx_result_error_message(res, NULL) : err.message);
  char *v = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return v;
}

static void expect_json_of(mbx_sandbox *sb, const char *code, const char *want) {
  char *v = value_of(sb, code);
  if (strcmp(v, want) != 0) fail_msg("%s: got %s, want %s", code, v, want);
  free(v);
}

/* A hostile guest trying to leave something behind that outlives a reset: globals, _G's
   metatable, library tables, the string metatable, modules cached by require, coroutines
   (suspended, with pending to-be-closed variables), upvalues of library functions. */
static const char hostile_script[] =
    "leaked = 'secret'\n"
    "pcall(setmetatable, _G, {__index = function(_, k) return 'ghost:' .. k end})\n"
    "string.custom = 1\n"
    "math.pi = 3\n"
    "table.insert = nil\n"
    "pcall(function() getmetatable('').__index = {upper = function() return 'x' end} end)\n"
    "pcall(function() getmetatable('').__index.upper = function() return 'x' end end)\n"
    "pcall(function() require('json').evil = true end)\n"
    "co = coroutine.create(function()\n"
    "  local c <close> = setmetatable({}, {__close = function() leaked2 = 1 end})\n"
    "  coroutine.yield(1)\n"
    "end)\n"
    "coroutine.resume(co)\n"
    "wrapped = coroutine.wrap(function() while true do coroutine.yield(leaked) end end)\n"
    "wrapped()\n"
    "math.randomseed(1)\n"
    "local t = {} for i = 1, 20000 do t[i] = {i} end\n"
    "big = t\n"
    "_G.print = nil\n"
    "return 1";

static const char pristine_check[] =
    "return {leaked = rawget(_G, 'leaked') == nil and leaked2 == nil, mt = getmetatable(_G) == nil,"
    " ghost = rawget(_G, 'nothing') == nil and nothing == nil, custom = string.custom == nil,"
    " pi = math.pi > 3.14, insert = type(table.insert) == 'function', upper = ('a'):upper() == 'A',"
    " json = require('json').evil == nil, co = co == nil and wrapped == nil,"
    " big = big == nil, print = type(print) == 'function'}";
static const char pristine_json[] =
    "{\"big\":true,\"co\":true,\"custom\":true,\"ghost\":true,\"insert\":true,\"json\":true,"
    "\"leaked\":true,\"mt\":true,\"pi\":true,\"print\":true,\"upper\":true}";

static void reset_returns_to_pristine(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_seed(f->p, 99, NULL), MBX_OK);
  mbx_sandbox *fresh = new_sandbox(f);
  char *first_randoms = value_of(fresh, "return {math.random(1 << 40), math.random(1 << 40)}");
  mbx_sandbox_free(fresh);
  mbx_sandbox *sb = new_sandbox(f);
  for (int round = 0; round < 3; round++) {
    expect_json_of(sb, pristine_check, pristine_json);
    /* The random sequence of a new sandbox from the same seeded policy. */
    char *randoms = value_of(sb, "return {math.random(1 << 40), math.random(1 << 40)}");
    assert_string_equal(randoms, first_randoms);
    free(randoms);
    free(value_of(sb, hostile_script));
    expect_json_of(sb, "return {leaked, nothing}", "[\"secret\",\"ghost:nothing\"]");
    assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  }
  /* A poisoned sandbox is usable again after a reset. */
  assert_int_equal(run_code(sb, "local s = 'x' while true do s = s .. s end", NULL, NULL, 0, NULL),
                   MBX_MEMORY_LIMIT);
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  expect_json_of(sb, pristine_check, pristine_json);
  /* So is one that ended by os.exit, with output and usage of its own run only. */
  mbx_result *res;
  const char *exiting = "print('before') os.exit(3)";
  assert_int_equal(mbx_run(sb, exiting, strlen(exiting), NULL, 0, &res, NULL), MBX_RUNTIME_ERROR);
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  assert_int_equal(mbx_run(sb, "return 1", 8, NULL, 0, &res, NULL), MBX_OK);
  size_t out_len;
  mbx_result_stdout(res, &out_len);
  assert_int_equal(out_len, 0);
  mbx_usage usage;
  assert_int_equal(mbx_result_usage(res, &usage), MBX_OK);
  assert_true(usage.memory_peak < 200 * 1024); /* not the 20000 tables of the hostile run */
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_reset(NULL, NULL), MBX_INVALID_ARGUMENT);
  free(first_randoms);
  mbx_sandbox_free(sb);
}

#ifndef MBX_ARENA_MALLOC
/* The fuzzing loop: checkpoint once, then mutate and rewind, 1000 times; every rewind gives
   exactly the state at the checkpoint (globals, upvalues, the random sequence). */
static void rewind_returns_to_the_checkpoint(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  free(value_of(sb, "counter = 10 local n = 0 function bump() n = n + 1 return n end "
                    "names = {'a', 'b'} return 1"));
  free(value_of(sb, "bump() bump() return 1"));
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_OK);
  char *at_checkpoint =
      value_of(sb, "return {counter, bump(), #names, math.random(1 << 40), math.random(1 << 40)}");
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  for (int i = 0; i < 1000; i++) {
    char code[512];
    snprintf(code, sizeof code,
             "counter = counter + %d names[#names + 1] = 'x' for k = 1, %d do bump() end "
             "extra%d = {} math.randomseed(%d) string.custom = %d "
             "local t = {} for k = 1, %d do t[k] = tostring(k) end keep = t return 1",
             i, i % 7, i, i, i, (i % 50) * 40);
    free(value_of(sb, code));
    assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
    char *now = value_of(
        sb, "return {counter, bump(), #names, math.random(1 << 40), math.random(1 << 40)}");
    if (strcmp(now, at_checkpoint) != 0)
      fail_msg("round %d: %s, at the checkpoint %s", i, now, at_checkpoint);
    free(now);
    if (i % 100 == 0)
      expect_json_of(sb, "return {extra0 == nil, string.custom == nil, keep == nil}",
                     "[true,true,true]");
    assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  }
  free(at_checkpoint);
  /* A new checkpoint replaces the old one. */
  free(value_of(sb, "counter = 99 return 1"));
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_OK);
  free(value_of(sb, "counter = 5 return 1"));
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  expect_json_of(sb, "return counter", "99");
  /* Reset keeps the checkpoint: rewinding after it goes back to the checkpoint. */
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  expect_json_of(sb, "return counter", "null");
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  expect_json_of(sb, "return counter", "99");
  mbx_sandbox_free(sb);
}

/* The poisoned flag belongs to the checkpoint: rewinding after a poisoning run un-poisons
   only if the checkpoint was taken before that run. */
static void rewind_and_poison(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_INSTRUCTIONS, 100000), MBX_OK);
  mbx_sandbox *sb = new_sandbox(f);
  mbx_error err;
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "no checkpoint"));
  free(value_of(sb, "x = 1 return 1"));
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_OK);
  assert_int_equal(run_code(sb, "x = 2 while true do end", NULL, NULL, 0, NULL),
                   MBX_INSTRUCTION_LIMIT);
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  expect_json_of(sb, "return x", "1");
  /* Poisoned again, checkpoint taken while poisoned: the rewind keeps it poisoned. */
  assert_int_equal(run_code(sb, "while true do end", NULL, NULL, 0, NULL), MBX_INSTRUCTION_LIMIT);
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_OK);
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  assert_int_equal(run_code(sb, "return 1", NULL, NULL, 0, NULL), MBX_SANDBOX_POISONED);
  /* A big run rewound: the heap estimate goes back down with it. */
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_OK);
  uint64_t before = mbx_runtime_usage(f->rt, MBX_CAP_HEAP_BYTES);
  free(value_of(sb, "big = string.rep('x', 1 << 20) return 1"));
  assert_true(mbx_runtime_usage(f->rt, MBX_CAP_HEAP_BYTES) > before + (1 << 20));
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_HEAP_BYTES), before);
  mbx_sandbox_free(sb);
}
#else
static void checkpoint_is_unsupported_without_arenas(void **state) {
  fixture *f = *state;
  mbx_sandbox *sb = new_sandbox(f);
  mbx_error err;
  assert_int_equal(mbx_sandbox_checkpoint(sb, &err), MBX_UNSUPPORTED);
  assert_non_null(strstr(err.message, "MBX_ARENA_MALLOC"));
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_UNSUPPORTED);
  assert_int_equal(err.code, MBX_UNSUPPORTED);
  mbx_sandbox_free(sb);
}
#endif

/* Reset, checkpoint and rewind refuse while a run is active on another thread. */
typedef struct busy_runner {
  mbx_sandbox *sb;
  atomic_int done;
  mbx_status status;
} busy_runner;

static void *busy_run(void *arg) {
  busy_runner *b = arg;
  mbx_result *res = NULL;
  b->status = mbx_run(b->sb, "while true do end", 17, NULL, 0, &res, NULL);
  mbx_result_free(res);
  atomic_store(&b->done, 1);
  return NULL;
}

static void reset_refuses_a_busy_sandbox(void **state) {
  fixture *f = *state;
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_TIME_MS, 10000), MBX_OK);
  mbx_sandbox *sb = new_sandbox(f);
  busy_runner b = {.sb = sb};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, busy_run, &b), 0);
  sleep_ms(100);
  mbx_error err;
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_SANDBOX_BUSY);
  assert_int_equal(mbx_sandbox_checkpoint(sb, NULL), MBX_SANDBOX_BUSY);
#ifndef MBX_ARENA_MALLOC
  assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_SANDBOX_BUSY);
#endif
  for (int i = 0; i < 400 && !atomic_load(&b.done); i++) {
    mbx_sandbox_interrupt(sb);
    sleep_ms(20);
  }
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  assert_int_equal(b.status, MBX_INTERRUPTED);
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  expect_json_of(sb, "return 1 + 1", "2");
  mbx_sandbox_free(sb);
}

/* ---- runtime caps ---- */

static void runtime_caps_refuse_with_the_caps_name(void **state) {
  fixture *f = *state;
  mbx_error err;
  assert_int_equal(mbx_runtime_get_cap(f->rt, MBX_CAP_SANDBOXES), 4096);
  assert_int_equal(mbx_runtime_get_cap(f->rt, MBX_CAP_RESERVED_BYTES), (uint64_t)8 << 40);
  assert_true(mbx_runtime_get_cap(f->rt, MBX_CAP_HEAP_BYTES) > 0);
  assert_int_equal(mbx_runtime_get_cap(f->rt, MBX_CAP_BYTECODE_CACHE_BYTES), 16u << 20);
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_SANDBOXES, 0, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_set_cap(f->rt, (mbx_runtime_cap)99, 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_set_cap(NULL, MBX_CAP_SANDBOXES, 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_runtime_get_cap(NULL, MBX_CAP_SANDBOXES), 0);

  /* Live sandboxes. */
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_SANDBOXES, 2, NULL), MBX_OK);
  mbx_sandbox *a = new_sandbox(f), *b = new_sandbox(f);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_SANDBOXES), 2);
  assert_null(mbx_sandbox_new(f->rt, f->p, &err));
  assert_int_equal(err.code, MBX_NO_MEMORY);
  assert_non_null(strstr(err.message, "MBX_CAP_SANDBOXES"));
  mbx_sandbox_free(b);
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_SANDBOXES, 4096, NULL), MBX_OK);

  /* Reserved address space, on a runtime of its own (idle slots of the fixture's runtime
     would be unmapped to make room): one 8 MiB slot (1 MiB limit) fits, two do not. */
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_MEMORY, 1 << 20), MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_RESERVED_BYTES, 9u << 20, NULL), MBX_OK);
  mbx_sandbox *c = mbx_sandbox_new(rt, f->p, &err);
  assert_non_null(c);
  assert_int_equal(mbx_runtime_usage(rt, MBX_CAP_RESERVED_BYTES), (8u << 20) + 2 * (64u << 10));
  assert_null(mbx_sandbox_new(rt, f->p, &err));
  assert_int_equal(err.code, MBX_NO_MEMORY);
  assert_non_null(strstr(err.message, "MBX_CAP_RESERVED_BYTES"));
  mbx_sandbox_free(c);
  /* The freed slot is idle, still reserved, and reused. */
  c = mbx_sandbox_new(rt, f->p, &err);
  assert_non_null(c);
  mbx_sandbox_free(c);
  mbx_runtime_free(rt);

  /* The resident estimate: a sandbox holding 2 MiB counts, and the next one is refused. */
  assert_int_equal(mbx_policy_set_limit(f->p, MBX_LIMIT_MEMORY, 64u << 20), MBX_OK);
  mbx_sandbox *e = new_sandbox(f);
  free(value_of(e, "big = string.rep('x', 2 << 20) return 1"));
  uint64_t heaps = mbx_runtime_usage(f->rt, MBX_CAP_HEAP_BYTES);
  assert_true(heaps > (2u << 20));
  assert_int_equal(mbx_runtime_set_cap(f->rt, MBX_CAP_HEAP_BYTES, heaps + 1024, NULL), MBX_OK);
  assert_null(mbx_sandbox_new(f->rt, f->p, &err));
  assert_non_null(strstr(err.message, "MBX_CAP_HEAP_BYTES"));
  /* A reset gives the memory back to the estimate, and a new sandbox fits again. */
  assert_int_equal(mbx_sandbox_reset(e, NULL), MBX_OK);
  mbx_sandbox *g = new_sandbox(f);
  mbx_sandbox_free(g);
  mbx_sandbox_free(e);
  mbx_sandbox_free(a);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_HEAP_BYTES), 0);
  assert_int_equal(mbx_runtime_usage(f->rt, MBX_CAP_SANDBOXES), 0);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest api[] = {
      cmocka_unit_test(version_matches_the_header),
      T(the_result_limit_reaches_the_run),
      T(the_header_example_runs),
      T(null_arguments_everywhere),
      T(policy_through_the_api),
      cmocka_unit_test(sandbox_copies_the_policy),
      cmocka_unit_test(policy_copy_holds_the_settings),
      T(minimum_memory_limit_is_usable),
      T(chunk_names),
      T(null_handles_get_the_documented_answers),
      T(a_successful_result_answers_empty),
      T(chunk_names_as_documented),
      cmocka_unit_test(limits_poison_the_sandbox),
      T(errors_do_not_poison),
      T(small_stacks_are_refused),
      T(runs_use_the_c_locale_and_restore_the_hosts),
      T(reset_returns_to_pristine),
#ifndef MBX_ARENA_MALLOC
      T(rewind_returns_to_the_checkpoint),
      T(rewind_and_poison),
#else
      T(checkpoint_is_unsupported_without_arenas),
#endif
      T(runtime_caps_refuse_with_the_caps_name),
  };
  const struct CMUnitTest threads[] = {
      T(threads_share_one_runtime),
      T(interrupt_stops_a_running_loop),
      T(interrupt_while_idle_is_discarded),
      T(reset_refuses_a_busy_sandbox),
  };
#undef T
  int failed = cmocka_run_group_tests_name("host/api", api, NULL, NULL);
  failed += cmocka_run_group_tests_name("host/api_threads", threads, NULL, NULL);
  return failed;
}
