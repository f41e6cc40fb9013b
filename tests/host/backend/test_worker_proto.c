/* tests/host/backend/test_worker_proto.c -- unit tests of host/backend/worker_proto.c: frames round-trip, and
   the parent's decoders refuse every malformed, truncated or oversized message. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/backend/worker_proto.h"

static const mbxH_wp_bounds bounds = {.value_max = 1000, .output_max = 100};

/* A done report of a finished run with the given value. */
static void put_done(mbxH_wp_writer *w, mbxV_status s, const char *value, const char *pending,
                     const char *out) {
  mbxV_outcome o;
  memset(&o, 0, sizeof o);
  o.status = s;
  o.value_json = (char *)value;
  o.value_len = strlen(value);
  o.instructions = 42;
  o.host_calls = 3;
  o.exec_runs = 2;
  o.exec_ms = 17;
  if (pending) {
    o.pending_json = (char *)pending;
    o.pending_len = strlen(pending);
  }
  o.failed = s == MBXV_RUNTIME_ERROR;
  if (o.failed) {
    o.error.message = (char *)"boom";
    o.error.message_len = 4;
    o.error.traceback = (char *)"tb";
    o.error.traceback_len = 2;
    strcpy(o.error.chunk, "input");
    o.error.line = 7;
  }
  const char *streams[2] = {out, ""};
  size_t lens[2] = {strlen(out), 0};
  mbxH_wp_put_done(w, s, "", &o, streams, lens, strlen(out), s == MBXV_PAUSED, 4096);
  assert_int_equal(mbxH_wp_finish(w), 0);
}

static int decode(const mbxH_wp_writer *w, mbxH_wp_done *d, char *why) {
  mbxH_wp_type type;
  uint32_t len;
  assert_int_equal(mbxH_wp_header(w->data, MBXH_WP_MAX_FRAME, &type, &len, why, 200), 0);
  assert_int_equal(type, MBXH_WP_DONE);
  assert_int_equal(len, w->len - MBXH_WP_HEADER);
  return mbxH_wp_get_done(w->data + MBXH_WP_HEADER, len, &bounds, d, why, 200);
}

static void test_done_round_trip(void **state) {
  (void)state;
  mbxH_wp_writer w = {0};
  mbxH_wp_done d;
  char why[200];
  put_done(&w, MBXV_RUNTIME_ERROR, "[1,\"x\",null]", NULL, "hello\n");
  assert_int_equal(decode(&w, &d, why), 0);
  assert_int_equal(d.status, MBXV_RUNTIME_ERROR);
  assert_string_equal(d.outcome.value_json, "[1,\"x\",null]");
  assert_string_equal(d.outcome.error.message, "boom");
  assert_string_equal(d.outcome.error.chunk, "input");
  assert_int_equal(d.outcome.error.line, 7);
  assert_int_equal(d.outcome.instructions, 42);
  assert_int_equal(d.outcome.host_calls, 3);
  assert_int_equal(d.outcome.exec_runs, 2);
  assert_int_equal(d.outcome.exec_ms, 17);
  assert_string_equal(d.stream[0], "hello\n");
  assert_int_equal(d.heap, 4096);
  assert_int_equal(d.paused, 0);
  mbxH_wp_done_free(&d);
  put_done(&w, MBXV_PAUSED, "null", "{\"args\":[],\"function\":\"f\"}", "");
  assert_int_equal(decode(&w, &d, why), 0);
  assert_int_equal(d.paused, 1);
  assert_string_equal(d.outcome.pending_json, "{\"args\":[],\"function\":\"f\"}");
  mbxH_wp_done_free(&d);
  mbxH_wp_writer_free(&w);
}

static void test_header_refusals(void **state) {
  (void)state;
  unsigned char hdr[MBXH_WP_HEADER];
  mbxH_wp_type type;
  uint32_t len;
  char why[200];
  uint16_t v = MBXH_WP_VERSION + 1, t = MBXH_WP_DONE;
  uint32_t n = 10;
  memcpy(hdr, &v, 2);
  memcpy(hdr + 2, &t, 2);
  memcpy(hdr + 4, &n, 4);
  assert_int_equal(mbxH_wp_header(hdr, 100, &type, &len, why, sizeof why), -1);
  assert_non_null(strstr(why, "version"));
  v = MBXH_WP_VERSION;
  t = 999;
  memcpy(hdr, &v, 2);
  memcpy(hdr + 2, &t, 2);
  assert_int_equal(mbxH_wp_header(hdr, 100, &type, &len, why, sizeof why), -1);
  assert_non_null(strstr(why, "unknown frame type 999"));
  t = MBXH_WP_DONE;
  n = 101;
  memcpy(hdr + 2, &t, 2);
  memcpy(hdr + 4, &n, 4);
  assert_int_equal(mbxH_wp_header(hdr, 100, &type, &len, why, sizeof why), -1);
  assert_non_null(strstr(why, "past the 100 allowed"));
  n = UINT32_MAX;
  memcpy(hdr + 4, &n, 4);
  assert_int_equal(mbxH_wp_header(hdr, UINT32_MAX, &type, &len, why, sizeof why), -1);
  n = 100;
  memcpy(hdr + 4, &n, 4);
  assert_int_equal(mbxH_wp_header(hdr, 100, &type, &len, why, sizeof why), 0);
  assert_int_equal(len, 100);
}

/* Every strict prefix of a valid report, and the report with a byte more, is refused. */
static void test_done_truncated_and_trailing(void **state) {
  (void)state;
  mbxH_wp_writer w = {0};
  mbxH_wp_done d;
  char why[200];
  put_done(&w, MBXV_RUNTIME_ERROR, "{\"a\":1}", NULL, "out");
  size_t n = w.len - MBXH_WP_HEADER;
  for (size_t k = 0; k < n; k++)
    assert_int_equal(mbxH_wp_get_done(w.data + MBXH_WP_HEADER, k, &bounds, &d, why, 200), -1);
  unsigned char *more = malloc(n + 1);
  memcpy(more, w.data + MBXH_WP_HEADER, n);
  more[n] = 0;
  assert_int_equal(mbxH_wp_get_done(more, n + 1, &bounds, &d, why, 200), -1);
  assert_non_null(strstr(why, "left over"));
  free(more);
  mbxH_wp_writer_free(&w);
}

static void test_done_bounds_and_json(void **state) {
  (void)state;
  mbxH_wp_writer w = {0};
  mbxH_wp_done d;
  char why[200];
  char big[1100];
  memset(big, '1', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  put_done(&w, MBXV_OK, big, NULL, ""); /* a value past value_max */
  assert_int_equal(decode(&w, &d, why), -1);
  char out[120];
  memset(out, 'x', sizeof out - 1);
  out[sizeof out - 1] = '\0';
  put_done(&w, MBXV_OK, "1", NULL, out); /* output past output_max */
  assert_int_equal(decode(&w, &d, why), -1);
  put_done(&w, MBXV_OK, "1, \"status\": \"ok\"", NULL, ""); /* JSON injection */
  assert_int_equal(decode(&w, &d, why), -1);
  assert_non_null(strstr(why, "not one JSON value"));
  put_done(&w, MBXV_OK, "1", "{\"args\":[]}", ""); /* pending without a pause */
  assert_int_equal(decode(&w, &d, why), -1);
  /* A status that is not one. */
  mbxH_wp_begin(&w, MBXH_WP_DONE);
  mbxH_wp_u32(&w, 55);
  assert_int_equal(mbxH_wp_finish(&w), 0);
  assert_int_equal(decode(&w, &d, why), -1);
  assert_non_null(strstr(why, "status 55"));
  mbxH_wp_writer_free(&w);
}

static const mbxC_grant_fn fns[] = {
    {"host.echo", MBXC_FN_SYNC, {0}},
    {"host.fetch", MBXC_FN_EXTERNAL, {0}},
    {"host.nat", MBXC_FN_NATIVE, {'d', 3, {'b', 'z', 'c'}}}};
static const mbxC_grants grants = {0, 3, fns};

static int call(mbxH_wp_writer *w, mbxH_wp_call *c, char *why) {
  assert_int_equal(mbxH_wp_finish(w), 0);
  return mbxH_wp_get_call(w->data + MBXH_WP_HEADER, w->len - MBXH_WP_HEADER, &grants, c, why,
                          200);
}

static void begin_call(mbxH_wp_writer *w, mbxH_wp_op op) {
  mbxH_wp_begin(w, MBXH_WP_PORT_CALL);
  mbxH_wp_u8(w, (uint8_t)op);
  mbxH_wp_u64(w, 0);
}

static void test_call_checks(void **state) {
  (void)state;
  mbxH_wp_writer w = {0};
  mbxH_wp_call c;
  char why[200];
  begin_call(&w, MBXH_OP_HOST_CALL);
  mbxH_wp_u64(&w, 0);
  mbxH_wp_bytes(&w, "[1]", 3);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.a_len, 3);
  mbxH_wp_call_free(&c);
  /* an external function, or past the table, is not a host call */
  for (uint64_t i = 1; i < 5; i += 2) {
    begin_call(&w, MBXH_OP_HOST_CALL);
    mbxH_wp_u64(&w, i);
    mbxH_wp_bytes(&w, "[]", 2);
    assert_int_equal(call(&w, &c, why), -1);
    assert_non_null(strstr(why, "not a granted synchronous function"));
  }
  /* native: the signature's arguments, each of its type */
  begin_call(&w, MBXH_OP_NATIVE_CALL);
  mbxH_wp_u64(&w, 2);
  mbxH_wp_u32(&w, 3);
  mbxH_wp_u64(&w, 1);
  mbxH_wp_bytes(&w, "abc", 3);
  mbxH_wp_u64(&w, (uint64_t)(int64_t)-5);
  assert_int_equal(call(&w, &c, why), 0);
  assert_string_equal(c.args[1].z, "abc");
  assert_int_equal(c.args[2].c, -5);
  mbxH_wp_call_free(&c);
  begin_call(&w, MBXH_OP_NATIVE_CALL);
  mbxH_wp_u64(&w, 2);
  mbxH_wp_u32(&w, 2);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "2 arguments"));
  begin_call(&w, MBXH_OP_NATIVE_CALL);
  mbxH_wp_u64(&w, 2);
  mbxH_wp_u32(&w, 3);
  mbxH_wp_u64(&w, 2); /* not a bool */
  mbxH_wp_bytes(&w, "abc", 3);
  mbxH_wp_u64(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "type bool"));
  begin_call(&w, MBXH_OP_NATIVE_CALL);
  mbxH_wp_u64(&w, 2);
  mbxH_wp_u32(&w, 3);
  mbxH_wp_u64(&w, 0);
  mbxH_wp_bytes(&w, "a\0c", 3);
  mbxH_wp_u64(&w, 300); /* not an int8 either */
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "NUL"));
  /* fs: bounded reads, valid handles and whence */
  begin_call(&w, MBXH_OP_FS_READ);
  mbxH_wp_u64(&w, 1);
  mbxH_wp_u64(&w, (uint64_t)MBXH_WP_MAX_IO + 1);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXH_OP_FS_SEEK);
  mbxH_wp_u64(&w, 1);
  mbxH_wp_u64(&w, 3);
  mbxH_wp_u64(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXH_OP_FS_CLOSE);
  mbxH_wp_u64(&w, (uint64_t)-1);
  assert_int_equal(call(&w, &c, why), -1);
  /* trailing bytes, unknown operations, a length past the frame */
  begin_call(&w, MBXH_OP_WALL_TIME);
  mbxH_wp_u8(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXH_OP_COUNT);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXH_OP_FS_STAT);
  mbxH_wp_u32(&w, 1000);
  mbxH_wp_u8(&w, 'x');
  assert_int_equal(call(&w, &c, why), -1);
  mbxH_wp_writer_free(&w);
}

/* exec_run's request and result cross the socket whole: every field of each struct comes back
   as it went. The size checks fail when a field is appended to mbxC_exec_request or
   mbxC_exec_result (capabilities/port.h) until it is encoded in worker_proto.c and compared
   here: a forwarded program's result must equal the in-process one field by field. */
static void test_exec_round_trip(void **state) {
  (void)state;
  assert_int_equal(sizeof(mbxC_exec_request),
                   offsetof(mbxC_exec_request, timeout_ms) + sizeof(uint64_t));
  assert_int_equal(sizeof(mbxC_exec_result),
                   offsetof(mbxC_exec_result, changes_error) + 200 + 4 /* tail padding */);
  const char *argv[] = {"/bin/sh", "-c", "echo hi"};
  const char *env[] = {"A=1", "B==x"};
  mbxC_exec_request req = {.argv = argv, .argc = 3, .stdin_bytes = "in\0put", .stdin_len = 6,
                           .cwd = "/tmp/w", .env = env, .envc = 2, .timeout_ms = 1234};
  mbxH_wp_writer w = {0};
  mbxH_wp_call c;
  char why[200];
  mbxH_wp_begin(&w, MBXH_WP_PORT_CALL);
  mbxH_wp_u8(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u64(&w, 99);
  mbxH_wp_put_exec_request(&w, &req);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.op, MBXH_OP_EXEC_RUN);
  assert_int_equal(c.deadline_ns, 99);
  assert_int_equal(c.exec.argc, 3);
  for (size_t i = 0; i < 3; i++) assert_string_equal(c.exec.argv[i], argv[i]);
  assert_int_equal(c.exec.stdin_len, 6);
  assert_memory_equal(c.exec.stdin_bytes, "in\0put", 6);
  assert_string_equal(c.exec.cwd, "/tmp/w");
  assert_int_equal(c.exec.envc, 2);
  for (size_t i = 0; i < 2; i++) assert_string_equal(c.exec.env[i], env[i]);
  assert_int_equal(c.exec.timeout_ms, 1234);
  mbxH_wp_call_free(&c);
  /* NULL stdin and cwd stay NULL (the port's defaults: no input, the process's /tmp) */
  mbxC_exec_request bare = {.argv = argv, .argc = 1};
  mbxH_wp_begin(&w, MBXH_WP_PORT_CALL);
  mbxH_wp_u8(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u64(&w, 0);
  mbxH_wp_put_exec_request(&w, &bare);
  assert_int_equal(call(&w, &c, why), 0);
  assert_null(c.exec.stdin_bytes);
  assert_null(c.exec.cwd);
  assert_null(c.exec.env);
  assert_int_equal(c.exec.envc, 0);
  assert_int_equal(c.exec.timeout_ms, 0);
  mbxH_wp_call_free(&c);
  /* the result, as the worker reads the parent's reply */
  mbxC_exec_result res = {.exit_code = -1, .signal = 9, .out = "o\0ut", .out_len = 4,
                          .err = "err", .err_len = 3, .timed_out = 1, .truncated = 1,
                          .wall_ms = 77, .limits = 5, .memory_limit = 1, .pids_limit = 1,
                          .changes = 3, .changes_refused = 1, .changes_error = "too big"};
  mbxH_wp_begin(&w, MBXH_WP_PORT_REPLY);
  mbxH_wp_put_exec_result(&w, &res);
  assert_int_equal(mbxH_wp_finish(&w), 0);
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, w.data + MBXH_WP_HEADER, w.len - MBXH_WP_HEADER);
  mbxC_exec_result got;
  assert_int_equal(mbxH_wp_get_exec_result(&r, &got), 0);
  assert_int_equal(mbxH_wp_end(&r), 0);
  assert_int_equal(got.exit_code, res.exit_code);
  assert_int_equal(got.signal, res.signal);
  assert_int_equal(got.out_len, res.out_len);
  assert_memory_equal(got.out, res.out, res.out_len);
  assert_int_equal(got.err_len, res.err_len);
  assert_memory_equal(got.err, res.err, res.err_len);
  assert_int_equal(got.timed_out, res.timed_out);
  assert_int_equal(got.truncated, res.truncated);
  assert_int_equal(got.wall_ms, res.wall_ms);
  assert_int_equal(got.limits, res.limits);
  assert_int_equal(got.memory_limit, res.memory_limit);
  assert_int_equal(got.pids_limit, res.pids_limit);
  assert_int_equal(got.changes, res.changes);
  assert_int_equal(got.changes_refused, res.changes_refused);
  assert_string_equal(got.changes_error, res.changes_error);
  /* cut short: refused */
  mbxH_wp_reader_init(&r, w.data + MBXH_WP_HEADER, w.len - MBXH_WP_HEADER - 1);
  assert_int_equal(mbxH_wp_get_exec_result(&r, &got), -1);
  mbxH_wp_writer_free(&w);
}

/* An exec request the stdlib could not have sent is a worker misbehaving: refused with what
   was wrong, before anything is allocated by its counts. */
static void test_exec_call_checks(void **state) {
  (void)state;
  mbxH_wp_writer w = {0};
  mbxH_wp_call c;
  char why[200];
  const char *argv[] = {"sh"};
  const char *bad_env[][1] = {{"NOEQUALS"}, {"=v"}};
  for (int i = 0; i < 2; i++) {
    mbxC_exec_request req = {.argv = argv, .argc = 1, .env = bad_env[i], .envc = 1};
    begin_call(&w, MBXH_OP_EXEC_RUN);
    mbxH_wp_put_exec_request(&w, &req);
    assert_int_equal(call(&w, &c, why), -1);
    assert_non_null(strstr(why, "not NAME=VALUE"));
  }
  /* no program, a count past the bound, an argument or cwd with a NUL */
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "0 arguments"));
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, UINT32_MAX);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "arguments (1 to"));
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, 1);
  mbxH_wp_bytes(&w, "s\0h", 3);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "NUL"));
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, 1);
  mbxH_wp_bytes(&w, "sh", 2);
  mbxH_wp_u8(&w, 0);
  mbxH_wp_bytes(&w, "", 0);
  mbxH_wp_u8(&w, 1);
  mbxH_wp_bytes(&w, "/t\0mp", 5);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "working directory"));
  /* stdin bytes flagged absent, an env count past the bound */
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, 1);
  mbxH_wp_bytes(&w, "sh", 2);
  mbxH_wp_u8(&w, 0);
  mbxH_wp_bytes(&w, "x", 1);
  mbxH_wp_u8(&w, 0);
  mbxH_wp_bytes(&w, "", 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_u32(&w, 1);
  mbxH_wp_bytes(&w, "sh", 2);
  mbxH_wp_u8(&w, 0);
  mbxH_wp_bytes(&w, "", 0);
  mbxH_wp_u8(&w, 0);
  mbxH_wp_bytes(&w, "", 0);
  mbxH_wp_u32(&w, MBXH_WP_MAX_EXEC_ENV + 1);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "environment entries"));
  /* every prefix of a good request is malformed, and so is one with a byte left over */
  mbxC_exec_request req = {.argv = argv, .argc = 1, .stdin_bytes = "x", .stdin_len = 1,
                           .cwd = "/tmp", .env = (const char *const[]){"A=1"}, .envc = 1,
                           .timeout_ms = 5};
  begin_call(&w, MBXH_OP_EXEC_RUN);
  mbxH_wp_put_exec_request(&w, &req);
  assert_int_equal(mbxH_wp_finish(&w), 0);
  size_t whole = w.len - MBXH_WP_HEADER;
  for (size_t n = 0; n < whole; n++) {
    assert_int_equal(mbxH_wp_get_call(w.data + MBXH_WP_HEADER, n, &grants, &c, why, 200), -1);
    mbxH_wp_call_free(&c);
  }
  mbxH_wp_u8(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  /* stdin_read: bounded like fs_read */
  begin_call(&w, MBXH_OP_STDIN_READ);
  mbxH_wp_u64(&w, 4096);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.i2, 4096);
  mbxH_wp_call_free(&c);
  begin_call(&w, MBXH_OP_STDIN_READ);
  mbxH_wp_u64(&w, (uint64_t)MBXH_WP_MAX_IO + 1);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "stdin_read"));
  mbxH_wp_writer_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_done_round_trip),
      cmocka_unit_test(test_header_refusals),
      cmocka_unit_test(test_done_truncated_and_trailing),
      cmocka_unit_test(test_done_bounds_and_json),
      cmocka_unit_test(test_call_checks),
      cmocka_unit_test(test_exec_round_trip),
      cmocka_unit_test(test_exec_call_checks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
