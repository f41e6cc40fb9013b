/* tests/host/test_result.c -- unit tests of host/result.c: the result contract object. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <pthread.h>

#include "host/result.h"
#include "include/moonbox.h"
#include "vm/output.h"

/* An outcome as vm/run.c hands it over: everything malloc'd, taken over by the result. */
static mbxV_outcome outcome_ok(const char *value) {
  mbxV_outcome o;
  memset(&o, 0, sizeof o);
  o.status = MBXV_OK;
  o.value_json = strdup(value);
  o.value_len = strlen(value);
  o.instructions = 7;
  o.wall_us = 8;
  o.memory_peak = 9;
  o.output_bytes = 10;
  return o;
}

static mbxV_outcome outcome_failed(mbx_status status, const char *chunk, int line,
                                   const char *message, const char *traceback) {
  mbxV_outcome o = outcome_ok("null");
  o.status = (mbxV_status)status; /* the vm numbers its statuses as the public enum */
  o.failed = 1;
  snprintf(o.error.chunk, sizeof o.error.chunk, "%s", chunk);
  o.error.line = line;
  o.error.message = strdup(message);
  o.error.message_len = strlen(message);
  o.error.traceback = strdup(traceback);
  o.error.traceback_len = strlen(traceback);
  return o;
}

static mbx_result *make(mbxV_outcome o, const char *out, size_t out_len, const char *err,
                        size_t err_len) {
  mbxV_output output;
  mbxV_output_init(&output, 1u << 20);
  output.data[0] = out_len ? (char *)out : NULL;
  output.len[0] = out_len;
  output.data[1] = err_len ? (char *)err : NULL;
  output.len[1] = err_len;
  mbx_result *r = mbxH_result_new(&o, &output);
  assert_non_null(r);
  return r;
}

static void *json_of(void *r) {
  return (void *)mbx_result_json(r, NULL);
}

/* The contract is built on the first mbx_result_json and kept: later calls, and calls racing
   on other threads, all get the one published copy (the tsan preset runs this). */
static void the_contract_is_built_once(void **state) {
  (void)state;
  mbx_result *r = make(outcome_ok("42"), "out", 3, NULL, 0);
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_create(&t[i], NULL, json_of, r), 0);
  void *got[4];
  for (int i = 0; i < 4; i++)
    assert_int_equal(pthread_join(t[i], &got[i]), 0);
  size_t len = 0;
  const char *json = mbx_result_json(r, &len);
  assert_non_null(json);
  assert_int_equal(len, strlen(json));
  for (int i = 0; i < 4; i++)
    assert_ptr_equal(got[i], json);
  assert_non_null(strstr(json, "\"stdout\":\"out\""));
  mbx_result_free(r);
}

static void ok_contract_is_exact(void **state) {
  (void)state;
  mbx_result *r = make(outcome_ok("[1,null,3]"), "hi\n", 3, NULL, 0);
  size_t len = 0;
  const char *json = mbx_result_json(r, &len);
  const char *expect = "{\"error\":null,\"pending\":null,\"status\":\"ok\",\"stderr\":\"\","
                       "\"stdout\":\"hi\\n\",\"usage\":{\"exec_ms\":0,\"exec_runs\":0,"
                       "\"host_calls\":0,\"instructions\":7,"
                       "\"memory_peak\":9,\"output_bytes\":10,\"wall_us\":8},"
                       "\"value\":[1,null,3]}";
  assert_string_equal(json, expect);
  assert_int_equal(len, strlen(expect));
  assert_int_equal(mbx_result_status(r), MBX_OK);
  assert_string_equal(mbx_result_value_json(r, &len), "[1,null,3]");
  assert_int_equal(len, 10);
  mbx_result_free(r);
}

static void runtime_error_contract_is_exact(void **state) {
  (void)state;
  mbx_result *r = make(outcome_failed(MBX_RUNTIME_ERROR, "input", 3, "boom \"quoted\"",
                                      "stack traceback:\n\tinput:3: in main chunk"),
                       NULL, 0, "warn", 4);
  const char *expect =
      "{\"error\":{\"chunk\":\"input\",\"line\":3,\"message\":\"boom \\\"quoted\\\"\","
      "\"traceback\":\"stack traceback:\\n\\tinput:3: in main chunk\"},\"pending\":null,"
      "\"status\":\"runtime_error\",\"stderr\":\"warn\",\"stdout\":\"\",\"usage\":{"
      "\"exec_ms\":0,\"exec_runs\":0,"
      "\"host_calls\":0,\"instructions\":7,\"memory_peak\":9,\"output_bytes\":10,"
      "\"wall_us\":8},\"value\":null}";
  assert_string_equal(mbx_result_json(r, NULL), expect);
  assert_int_equal(mbx_result_status(r), MBX_RUNTIME_ERROR);
  size_t len;
  assert_string_equal(mbx_result_error_message(r, &len), "boom \"quoted\"");
  assert_int_equal(len, 13);
  assert_string_equal(mbx_result_traceback(r, &len), "stack traceback:\n\tinput:3: in main chunk");
  assert_string_equal(mbx_result_value_json(r, NULL), "null");
  assert_string_equal(mbx_result_stderr(r, &len), "warn");
  assert_int_equal(len, 4);
  mbx_result_free(r);
}

static void limit_contract_is_exact(void **state) {
  (void)state;
  mbx_result *r = make(
      outcome_failed(MBX_TIME_LIMIT, "", 0, "time limit exceeded (200 ms)", "stack traceback:"),
      NULL, 0, NULL, 0);
  const char *expect =
      "{\"error\":{\"chunk\":\"\",\"line\":0,\"message\":\"time limit exceeded (200 ms)\","
      "\"traceback\":\"stack traceback:\"},\"pending\":null,\"status\":\"time_limit\","
      "\"stderr\":\"\",\"stdout\":\"\",\"usage\":{\"exec_ms\":0,\"exec_runs\":0,"
      "\"host_calls\":0,\"instructions\":7,"
      "\"memory_peak\":9,\"output_bytes\":10,\"wall_us\":8},\"value\":null}";
  assert_string_equal(mbx_result_json(r, NULL), expect);
  mbx_result_free(r);
}

/* A negative line never reaches the JSON. */
static void negative_line_is_written_as_zero(void **state) {
  (void)state;
  mbx_result *r = make(outcome_failed(MBX_RUNTIME_ERROR, "x", -5, "m", ""), NULL, 0, NULL, 0);
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"line\":0,"));
  mbx_result_free(r);
}

/* The vm's statuses map one to one onto the public ones (host/result.c), refusals included;
   a value the vm never gives is never reported as a success. */
static void vm_statuses_map_exactly(void **state) {
  (void)state;
  static const struct {
    mbxV_status vm;
    mbx_status pub;
  } map[] = {{MBXV_OK, MBX_OK},
             {MBXV_SYNTAX_ERROR, MBX_SYNTAX_ERROR},
             {MBXV_RUNTIME_ERROR, MBX_RUNTIME_ERROR},
             {MBXV_MEMORY_LIMIT, MBX_MEMORY_LIMIT},
             {MBXV_INSTRUCTION_LIMIT, MBX_INSTRUCTION_LIMIT},
             {MBXV_TIME_LIMIT, MBX_TIME_LIMIT},
             {MBXV_OUTPUT_LIMIT, MBX_OUTPUT_LIMIT},
             {MBXV_HOST_CALL_LIMIT, MBX_HOST_CALL_LIMIT},
             {MBXV_INTERRUPTED, MBX_INTERRUPTED},
             {MBXV_PAUSED, MBX_PAUSED},
             {MBXV_INTERNAL_ERROR, MBX_INTERNAL_ERROR},
             {MBXV_INVALID_INPUT, MBX_INVALID_INPUT},
             {MBXV_SOURCE_TOO_LARGE, MBX_SOURCE_TOO_LARGE},
             {MBXV_NO_MEMORY, MBX_NO_MEMORY}};
  for (size_t i = 0; i < sizeof map / sizeof *map; i++) {
    assert_int_equal(mbxH_status_from_vm(map[i].vm), map[i].pub);
    assert_int_equal(map[i].vm >= MBXV_REFUSED_BASE, map[i].pub >= MBX_API_ERROR_BASE);
  }
  assert_int_equal(mbxH_status_from_vm((mbxV_status)55), MBX_INTERNAL_ERROR);
}

/* Every run status appears under its key. */
static void every_run_status_has_its_key(void **state) {
  (void)state;
  for (int s = MBX_OK; s <= MBX_INTERNAL_ERROR; s++) {
    mbxV_outcome o =
        s == MBX_OK ? outcome_ok("1") : outcome_failed((mbx_status)s, "input", 1, "m", "t");
    o.status = (mbxV_status)s;
    mbx_result *r = make(o, NULL, 0, NULL, 0);
    char want[64];
    snprintf(want, sizeof want, "\"status\":\"%s\",", mbx_status_key((mbx_status)s));
    assert_non_null(strstr(mbx_result_json(r, NULL), want));
    assert_int_equal(mbx_result_status(r), s);
    mbx_result_free(r);
  }
}

static void big_usage_numbers_are_exact(void **state) {
  (void)state;
  mbxV_outcome o = outcome_ok("null");
  o.instructions = UINT64_MAX;
  o.memory_peak = (1ull << 53) + 1;
  mbx_result *r = make(o, NULL, 0, NULL, 0);
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"instructions\":18446744073709551615,"));
  assert_non_null(strstr(mbx_result_json(r, NULL), "\"memory_peak\":9007199254740993,"));
  mbx_usage u;
  assert_int_equal(mbx_result_usage(r, &u), MBX_OK);
  assert_int_equal(u.instructions, UINT64_MAX);
  assert_int_equal(u.memory_peak, (1ull << 53) + 1);
  assert_int_equal(u.wall_us, 8);
  assert_int_equal(u.output_bytes, 10);
  assert_int_equal(u.host_calls, 0);
  mbx_result_free(r);
}

/* Output that is not valid UTF-8 becomes {"$bytes": base64}; the raw accessors keep the bytes. */
static void invalid_utf8_output_is_base64(void **state) {
  (void)state;
  mbx_result *r = make(outcome_ok("null"), "\xff", 1, "ab\xc3", 3);
  const char *json = mbx_result_json(r, NULL);
  assert_non_null(strstr(json, "\"stdout\":{\"$bytes\":\"/w==\"}"));
  assert_non_null(strstr(json, "\"stderr\":{\"$bytes\":\"YWLD\"}"));
  size_t len;
  assert_memory_equal(mbx_result_stdout(r, &len), "\xff", 2); /* bytes plus the terminator */
  assert_int_equal(len, 1);
  assert_memory_equal(mbx_result_stderr(r, &len), "ab\xc3", 4);
  assert_int_equal(len, 3);
  mbx_result_free(r);
}

static void nul_and_control_bytes_are_escaped(void **state) {
  (void)state;
  mbx_result *r = make(outcome_ok("null"), "a\0b\x01\"\\", 6, "\xc3\xa9t\xc3\xa9", 5);
  const char *json = mbx_result_json(r, NULL);
  assert_non_null(strstr(json, "\"stdout\":\"a\\u0000b\\u0001\\\"\\\\\""));
  assert_non_null(strstr(json, "\"stderr\":\"\xc3\xa9t\xc3\xa9\"")); /* valid UTF-8 as is */
  size_t len;
  assert_memory_equal(mbx_result_stdout(r, &len), "a\0b\x01\"\\", 7);
  assert_int_equal(len, 6);
  mbx_result_free(r);
}

static void result_error_fills_and_clears(void **state) {
  (void)state;
  mbx_error err;
  mbx_result *ok = make(outcome_ok("1"), NULL, 0, NULL, 0);
  memset(&err, 0x6B, sizeof err);
  assert_int_equal(mbx_result_error(ok, &err), 0);
  mbx_error zero;
  memset(&zero, 0, sizeof zero);
  assert_memory_equal(&err, &zero, sizeof err);
  assert_int_equal(mbx_result_error(ok, NULL), 0);
  size_t len = 5;
  assert_string_equal(mbx_result_error_message(ok, &len), "");
  assert_int_equal(len, 0);
  len = 5;
  assert_string_equal(mbx_result_traceback(ok, &len), "");
  assert_int_equal(len, 0);
  mbx_result_free(ok);

  mbx_result *bad =
      make(outcome_failed(MBX_RUNTIME_ERROR, "script.lua", 12, "it broke", "tb"), NULL, 0, NULL, 0);
  assert_int_equal(mbx_result_error(bad, &err), 1);
  assert_int_equal(err.code, MBX_RUNTIME_ERROR);
  assert_int_equal(err.line, 12);
  assert_string_equal(err.chunk, "script.lua");
  assert_string_equal(err.message, "it broke");
  assert_int_equal(mbx_result_error(bad, NULL), 1);
  mbx_result_free(bad);
}

static void result_error_truncates_to_fit(void **state) {
  (void)state;
  char msg[1000];
  memset(msg, 'M', sizeof msg - 1);
  msg[sizeof msg - 1] = '\0';
  char chunk[64];
  memset(chunk, 'C', sizeof chunk - 1);
  chunk[sizeof chunk - 1] = '\0';
  mbx_result *r = make(outcome_failed(MBX_MEMORY_LIMIT, chunk, 1, msg, ""), NULL, 0, NULL, 0);
  mbx_error err;
  assert_int_equal(mbx_result_error(r, &err), 1);
  assert_int_equal(strlen(err.message), sizeof err.message - 1);
  assert_int_equal(strlen(err.chunk), sizeof err.chunk - 1);
  assert_int_equal(err.code, MBX_MEMORY_LIMIT);
  size_t len;
  mbx_result_error_message(r, &len); /* the full message is still there */
  assert_int_equal(len, sizeof msg - 1);
  mbx_result_free(r);
  /* The cut never ends inside a UTF-8 character: a two-byte one straddles byte 255. */
  memset(msg, 'M', sizeof msg - 1);
  memcpy(msg + sizeof err.message - 2, "\xc3\xa9", 2);
  r = make(outcome_failed(MBX_RUNTIME_ERROR, "c", 1, msg, ""), NULL, 0, NULL, 0);
  assert_int_equal(mbx_result_error(r, &err), 1);
  assert_int_equal(strlen(err.message), sizeof err.message - 2);
  mbx_result_free(r);
}

static void accessors_on_null(void **state) {
  (void)state;
  size_t len = 77;
  assert_int_equal(mbx_result_status(NULL), MBX_INVALID_ARGUMENT);
  assert_null(mbx_result_json(NULL, &len));
  assert_int_equal(len, 0);
  assert_null(mbx_result_json(NULL, NULL));
  len = 77;
  assert_null(mbx_result_value_json(NULL, &len));
  assert_int_equal(len, 0);
  len = 77;
  assert_null(mbx_result_stdout(NULL, &len));
  assert_int_equal(len, 0);
  len = 77;
  assert_null(mbx_result_stderr(NULL, &len));
  assert_int_equal(len, 0);
  mbx_error err;
  memset(&err, 0x11, sizeof err);
  assert_int_equal(mbx_result_error(NULL, &err), 0);
  assert_int_equal(err.code, 0);
  assert_string_equal(err.message, "");
  len = 77;
  assert_string_equal(mbx_result_error_message(NULL, &len), "");
  assert_int_equal(len, 0);
  len = 77;
  assert_string_equal(mbx_result_traceback(NULL, &len), "");
  assert_int_equal(len, 0);
  mbx_usage u;
  assert_int_equal(mbx_result_usage(NULL, &u), MBX_INVALID_ARGUMENT);
  mbx_result *r = make(outcome_ok("1"), NULL, 0, NULL, 0);
  assert_int_equal(mbx_result_usage(r, NULL), MBX_INVALID_ARGUMENT);
  /* len may be NULL on every accessor. */
  assert_non_null(mbx_result_json(r, NULL));
  assert_non_null(mbx_result_value_json(r, NULL));
  assert_string_equal(mbx_result_stdout(r, NULL), "");
  assert_string_equal(mbx_result_stderr(r, NULL), "");
  mbx_result_free(r);
  mbx_result_free(NULL);
}

/* The same contract from a real run. */
static void contract_from_a_real_run(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  mbx_result *r = NULL;
  const char *code = "print('out') io.stderr:write('err') return x * 2";
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"x\": 21}", 9, &r, NULL), MBX_OK);
  mbx_usage u;
  assert_int_equal(mbx_result_usage(r, &u), MBX_OK);
  assert_int_equal(u.output_bytes, 7);
  /* The default policy has no instruction limit, so no count hook where the runtime has its
     deadline signal: nothing is counted, and the contract says null. */
  int counted = mbx_runtime_deadline_signal(rt) == 0;
  assert_int_equal(u.instructions_counted, counted);
  if (counted) assert_true(u.instructions > 0);
  assert_true(u.memory_peak > 0);
  char instructions[32] = "null";
  if (counted)
    snprintf(instructions, sizeof instructions, "%llu", (unsigned long long)u.instructions);
  char expect[512];
  snprintf(expect, sizeof expect,
           "{\"error\":null,\"pending\":null,\"status\":\"ok\",\"stderr\":\"err\","
           "\"stdout\":\"out\\n\",\"usage\":{\"exec_ms\":0,\"exec_runs\":0,"
           "\"host_calls\":0,\"instructions\":%s,"
           "\"memory_peak\":%llu,\"output_bytes\":7,\"wall_us\":%llu},\"value\":42}",
           instructions, (unsigned long long)u.memory_peak, (unsigned long long)u.wall_us);
  assert_string_equal(mbx_result_json(r, NULL), expect);
  mbx_result_free(r);

  code = "local x = 1\nerror('boom')";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &r, NULL), MBX_RUNTIME_ERROR);
  const char *json = mbx_result_json(r, NULL);
  const char *prefix = "{\"error\":{\"chunk\":\"input\",\"line\":2,\"message\":\"boom\","
                       "\"traceback\":\"stack traceback:\\n\\t";
  assert_memory_equal(json, prefix, strlen(prefix));
  assert_non_null(strstr(json, "\"status\":\"runtime_error\""));
  assert_non_null(strstr(json, "\"value\":null}"));
  mbx_result_free(r);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(ok_contract_is_exact),
      cmocka_unit_test(the_contract_is_built_once),
      cmocka_unit_test(runtime_error_contract_is_exact),
      cmocka_unit_test(limit_contract_is_exact),
      cmocka_unit_test(negative_line_is_written_as_zero),
      cmocka_unit_test(vm_statuses_map_exactly),
      cmocka_unit_test(every_run_status_has_its_key),
      cmocka_unit_test(big_usage_numbers_are_exact),
      cmocka_unit_test(invalid_utf8_output_is_base64),
      cmocka_unit_test(nul_and_control_bytes_are_escaped),
      cmocka_unit_test(result_error_fills_and_clears),
      cmocka_unit_test(result_error_truncates_to_fit),
      cmocka_unit_test(accessors_on_null),
      cmocka_unit_test(contract_from_a_real_run),
  };
  return cmocka_run_group_tests_name("host/result", tests, NULL, NULL);
}
