/* tests/capabilities/test_port_wire.c -- unit tests of capabilities/port_wire.c: the fields
   and the frames of port operations round-trip, and the serving side's decoder refuses every
   call the stdlib could not have sent (a hostile caller controls every byte). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/port_wire.h"

/* The carrying protocol's version and frame types are its own: any will do here. */
#define TEST_VERSION 4
#define TEST_CALL 22
#define TEST_REPLY 7

static int known_type(unsigned type) {
  return type == TEST_CALL || type == TEST_REPLY;
}

/* The fields: a header is refused for its version, its type or its length before anything is
   read by it; a read past the end fails and every read after it too. */
static void test_fields(void **state) {
  (void)state;
  mbxC_wire_writer w = {0};
  unsigned type;
  uint32_t len;
  char why[200];
  mbxC_wire_begin(&w, TEST_VERSION, TEST_CALL);
  mbxC_wire_u8(&w, 7);
  mbxC_wire_u32(&w, 0xdeadbeef);
  mbxC_wire_u64(&w, UINT64_MAX - 1);
  mbxC_wire_bytes(&w, "a\0b", 3);
  assert_int_equal(mbxC_wire_finish(&w), 0);
  assert_int_equal(
      mbxC_wire_header(w.data, TEST_VERSION, known_type, 1000, &type, &len, why, sizeof why), 0);
  assert_int_equal(type, TEST_CALL);
  assert_int_equal(len, 1 + 4 + 8 + 4 + 3);
  assert_int_equal(
      mbxC_wire_header(w.data, TEST_VERSION + 1, known_type, 1000, &type, &len, why, sizeof why),
      -1);
  assert_non_null(strstr(why, "protocol version"));
  assert_int_equal(
      mbxC_wire_header(w.data, TEST_VERSION, known_type, len - 1, &type, &len, why, sizeof why),
      -1);
  assert_non_null(strstr(why, "past the"));
  w.data[2] = 99;
  assert_int_equal(
      mbxC_wire_header(w.data, TEST_VERSION, known_type, 1000, &type, &len, why, sizeof why), -1);
  assert_non_null(strstr(why, "unknown frame type 99"));
  mbxC_wire_reader r;
  mbxC_wire_reader_init(&r, w.data + MBXC_WIRE_HEADER, w.len - MBXC_WIRE_HEADER);
  const char *p;
  assert_int_equal(mbxC_wire_get_u8(&r), 7);
  assert_int_equal(mbxC_wire_get_u32(&r), 0xdeadbeef);
  assert_int_equal(mbxC_wire_get_u64(&r), UINT64_MAX - 1);
  assert_int_equal(mbxC_wire_get_bytes(&r, 3, &p), 3);
  assert_memory_equal(p, "a\0b", 3);
  assert_int_equal(mbxC_wire_end(&r), 0);
  /* a string past its bound, then past the frame */
  mbxC_wire_reader_init(&r, w.data + MBXC_WIRE_HEADER, w.len - MBXC_WIRE_HEADER);
  mbxC_wire_get_u8(&r);
  mbxC_wire_get_u32(&r);
  mbxC_wire_get_u64(&r);
  assert_int_equal(mbxC_wire_get_bytes(&r, 2, &p), 0);
  assert_int_equal(mbxC_wire_end(&r), -1);
  mbxC_wire_reader_init(&r, w.data + MBXC_WIRE_HEADER, 3);
  mbxC_wire_get_u32(&r);
  assert_int_equal(mbxC_wire_get_u8(&r), 0);
  assert_int_equal(mbxC_wire_end(&r), -1);
  /* a byte string longer than any frame fails the writer */
  mbxC_wire_begin(&w, TEST_VERSION, TEST_CALL);
  mbxC_wire_bytes(&w, "", (size_t)MBXC_WIRE_MAX_FRAME + 1);
  assert_int_equal(mbxC_wire_finish(&w), -1);
  mbxC_wire_writer_free(&w);
}

static const mbxC_grant_fn fns[] = {{"host.echo", MBXC_FN_SYNC, {0}},
                                    {"host.fetch", MBXC_FN_EXTERNAL, {0}},
                                    {"host.nat", MBXC_FN_NATIVE, {'d', 3, {'b', 'z', 'c'}}}};
static const mbxC_grants grants = {0, 3, fns};

static int call(mbxC_wire_writer *w, mbxC_wire_call *c, char *why) {
  assert_int_equal(mbxC_wire_finish(w), 0);
  return mbxC_wire_get_call(w->data + MBXC_WIRE_HEADER, w->len - MBXC_WIRE_HEADER, &grants, c, why,
                            200);
}

static void begin_call(mbxC_wire_writer *w, mbxC_port_op op) {
  mbxC_wire_begin(w, TEST_VERSION, TEST_CALL);
  mbxC_wire_u8(w, (uint8_t)op);
  mbxC_wire_u64(w, 0);
}

static void test_call_checks(void **state) {
  (void)state;
  mbxC_wire_writer w = {0};
  mbxC_wire_call c;
  char why[200];
  begin_call(&w, MBXC_OP_HOST_CALL);
  mbxC_wire_u64(&w, 0);
  mbxC_wire_bytes(&w, "[1]", 3);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.a_len, 3);
  mbxC_wire_call_free(&c);
  /* an external function, or past the table, is not a host call */
  for (uint64_t i = 1; i < 5; i += 2) {
    begin_call(&w, MBXC_OP_HOST_CALL);
    mbxC_wire_u64(&w, i);
    mbxC_wire_bytes(&w, "[]", 2);
    assert_int_equal(call(&w, &c, why), -1);
    assert_non_null(strstr(why, "not a granted synchronous function"));
  }
  /* native: the signature's arguments, each of its type */
  begin_call(&w, MBXC_OP_NATIVE_CALL);
  mbxC_wire_u64(&w, 2);
  mbxC_wire_u32(&w, 3);
  mbxC_wire_u64(&w, 1);
  mbxC_wire_bytes(&w, "abc", 3);
  mbxC_wire_u64(&w, (uint64_t)(int64_t)-5);
  assert_int_equal(call(&w, &c, why), 0);
  assert_string_equal(c.args[1].z, "abc");
  assert_int_equal(c.args[2].c, -5);
  mbxC_wire_call_free(&c);
  begin_call(&w, MBXC_OP_NATIVE_CALL);
  mbxC_wire_u64(&w, 2);
  mbxC_wire_u32(&w, 2);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "2 arguments"));
  begin_call(&w, MBXC_OP_NATIVE_CALL);
  mbxC_wire_u64(&w, 2);
  mbxC_wire_u32(&w, 3);
  mbxC_wire_u64(&w, 2); /* not a bool */
  mbxC_wire_bytes(&w, "abc", 3);
  mbxC_wire_u64(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "type bool"));
  begin_call(&w, MBXC_OP_NATIVE_CALL);
  mbxC_wire_u64(&w, 2);
  mbxC_wire_u32(&w, 3);
  mbxC_wire_u64(&w, 0);
  mbxC_wire_bytes(&w, "a\0c", 3);
  mbxC_wire_u64(&w, 300); /* not an int8 either */
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "NUL"));
  /* fs: bounded reads, valid handles and whence */
  begin_call(&w, MBXC_OP_FS_READ);
  mbxC_wire_u64(&w, 1);
  mbxC_wire_u64(&w, (uint64_t)MBXC_WIRE_MAX_IO + 1);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXC_OP_FS_SEEK);
  mbxC_wire_u64(&w, 1);
  mbxC_wire_u64(&w, 3);
  mbxC_wire_u64(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXC_OP_FS_CLOSE);
  mbxC_wire_u64(&w, (uint64_t)-1);
  assert_int_equal(call(&w, &c, why), -1);
  /* trailing bytes, unknown operations, a length past the frame */
  begin_call(&w, MBXC_OP_WALL_TIME);
  mbxC_wire_u8(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXC_OP_COUNT);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXC_OP_FS_STAT);
  mbxC_wire_u32(&w, 1000);
  mbxC_wire_u8(&w, 'x');
  assert_int_equal(call(&w, &c, why), -1);
  mbxC_wire_writer_free(&w);
}

/* exec_run's request and result cross the socket whole: every field of each struct comes back
   as it went. The size checks fail when a field is appended to mbxC_exec_request or
   mbxC_exec_result (capabilities/port.h) until it is encoded in port_wire.c and compared
   here: a forwarded program's result must equal the in-process one field by field. */
static void test_exec_round_trip(void **state) {
  (void)state;
  assert_int_equal(sizeof(mbxC_exec_request),
                   offsetof(mbxC_exec_request, timeout_ms) + sizeof(uint64_t));
  assert_int_equal(sizeof(mbxC_exec_result),
                   offsetof(mbxC_exec_result, changes_error) + 200 + 4 /* tail padding */);
  const char *argv[] = {"/bin/sh", "-c", "echo hi"};
  const char *env[] = {"A=1", "B==x"};
  mbxC_exec_request req = {.argv = argv,
                           .argc = 3,
                           .stdin_bytes = "in\0put",
                           .stdin_len = 6,
                           .cwd = "/tmp/w",
                           .env = env,
                           .envc = 2,
                           .timeout_ms = 1234};
  mbxC_wire_writer w = {0};
  mbxC_wire_call c;
  char why[200];
  mbxC_wire_begin(&w, TEST_VERSION, TEST_CALL);
  mbxC_wire_u8(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u64(&w, 99);
  mbxC_wire_put_exec_request(&w, &req);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.op, MBXC_OP_EXEC_RUN);
  assert_int_equal(c.deadline_ns, 99);
  assert_int_equal(c.exec.argc, 3);
  for (size_t i = 0; i < 3; i++)
    assert_string_equal(c.exec.argv[i], argv[i]);
  assert_int_equal(c.exec.stdin_len, 6);
  assert_memory_equal(c.exec.stdin_bytes, "in\0put", 6);
  assert_string_equal(c.exec.cwd, "/tmp/w");
  assert_int_equal(c.exec.envc, 2);
  for (size_t i = 0; i < 2; i++)
    assert_string_equal(c.exec.env[i], env[i]);
  assert_int_equal(c.exec.timeout_ms, 1234);
  mbxC_wire_call_free(&c);
  /* NULL stdin and cwd stay NULL (the port's defaults: no input, the process's /tmp) */
  mbxC_exec_request bare = {.argv = argv, .argc = 1};
  mbxC_wire_begin(&w, TEST_VERSION, TEST_CALL);
  mbxC_wire_u8(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u64(&w, 0);
  mbxC_wire_put_exec_request(&w, &bare);
  assert_int_equal(call(&w, &c, why), 0);
  assert_null(c.exec.stdin_bytes);
  assert_null(c.exec.cwd);
  assert_null(c.exec.env);
  assert_int_equal(c.exec.envc, 0);
  assert_int_equal(c.exec.timeout_ms, 0);
  mbxC_wire_call_free(&c);
  /* the result, as the worker reads the parent's reply */
  mbxC_exec_result res = {.exit_code = -1,
                          .signal = 9,
                          .out = "o\0ut",
                          .out_len = 4,
                          .err = "err",
                          .err_len = 3,
                          .timed_out = 1,
                          .truncated = 1,
                          .wall_ms = 77,
                          .limits = 5,
                          .memory_limit = 1,
                          .pids_limit = 1,
                          .changes = 3,
                          .changes_refused = 1,
                          .changes_error = "too big"};
  mbxC_wire_begin(&w, TEST_VERSION, TEST_REPLY);
  mbxC_wire_put_exec_result(&w, &res);
  assert_int_equal(mbxC_wire_finish(&w), 0);
  mbxC_wire_reader r;
  mbxC_wire_reader_init(&r, w.data + MBXC_WIRE_HEADER, w.len - MBXC_WIRE_HEADER);
  mbxC_exec_result got;
  assert_int_equal(mbxC_wire_get_exec_result(&r, &got), 0);
  assert_int_equal(mbxC_wire_end(&r), 0);
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
  mbxC_wire_reader_init(&r, w.data + MBXC_WIRE_HEADER, w.len - MBXC_WIRE_HEADER - 1);
  assert_int_equal(mbxC_wire_get_exec_result(&r, &got), -1);
  mbxC_wire_writer_free(&w);
}

/* An exec request the stdlib could not have sent is a worker misbehaving: refused with what
   was wrong, before anything is allocated by its counts. */
static void test_exec_call_checks(void **state) {
  (void)state;
  mbxC_wire_writer w = {0};
  mbxC_wire_call c;
  char why[200];
  const char *argv[] = {"sh"};
  const char *bad_env[][1] = {{"NOEQUALS"}, {"=v"}};
  for (int i = 0; i < 2; i++) {
    mbxC_exec_request req = {.argv = argv, .argc = 1, .env = bad_env[i], .envc = 1};
    begin_call(&w, MBXC_OP_EXEC_RUN);
    mbxC_wire_put_exec_request(&w, &req);
    assert_int_equal(call(&w, &c, why), -1);
    assert_non_null(strstr(why, "not NAME=VALUE"));
  }
  /* no program, a count past the bound, an argument or cwd with a NUL */
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "0 arguments"));
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, UINT32_MAX);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "arguments (1 to"));
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, 1);
  mbxC_wire_bytes(&w, "s\0h", 3);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "NUL"));
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, 1);
  mbxC_wire_bytes(&w, "sh", 2);
  mbxC_wire_u8(&w, 0);
  mbxC_wire_bytes(&w, "", 0);
  mbxC_wire_u8(&w, 1);
  mbxC_wire_bytes(&w, "/t\0mp", 5);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "working directory"));
  /* stdin bytes flagged absent, an env count past the bound */
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, 1);
  mbxC_wire_bytes(&w, "sh", 2);
  mbxC_wire_u8(&w, 0);
  mbxC_wire_bytes(&w, "x", 1);
  mbxC_wire_u8(&w, 0);
  mbxC_wire_bytes(&w, "", 0);
  assert_int_equal(call(&w, &c, why), -1);
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_u32(&w, 1);
  mbxC_wire_bytes(&w, "sh", 2);
  mbxC_wire_u8(&w, 0);
  mbxC_wire_bytes(&w, "", 0);
  mbxC_wire_u8(&w, 0);
  mbxC_wire_bytes(&w, "", 0);
  mbxC_wire_u32(&w, MBXC_WIRE_MAX_EXEC_ENV + 1);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "environment entries"));
  /* every prefix of a good request is malformed, and so is one with a byte left over */
  mbxC_exec_request req = {.argv = argv,
                           .argc = 1,
                           .stdin_bytes = "x",
                           .stdin_len = 1,
                           .cwd = "/tmp",
                           .env = (const char *const[]){"A=1"},
                           .envc = 1,
                           .timeout_ms = 5};
  begin_call(&w, MBXC_OP_EXEC_RUN);
  mbxC_wire_put_exec_request(&w, &req);
  assert_int_equal(mbxC_wire_finish(&w), 0);
  size_t whole = w.len - MBXC_WIRE_HEADER;
  for (size_t n = 0; n < whole; n++) {
    assert_int_equal(mbxC_wire_get_call(w.data + MBXC_WIRE_HEADER, n, &grants, &c, why, 200), -1);
    mbxC_wire_call_free(&c);
  }
  mbxC_wire_u8(&w, 0);
  assert_int_equal(call(&w, &c, why), -1);
  /* stdin_read: bounded like fs_read */
  begin_call(&w, MBXC_OP_STDIN_READ);
  mbxC_wire_u64(&w, 4096);
  assert_int_equal(call(&w, &c, why), 0);
  assert_int_equal(c.i2, 4096);
  mbxC_wire_call_free(&c);
  begin_call(&w, MBXC_OP_STDIN_READ);
  mbxC_wire_u64(&w, (uint64_t)MBXC_WIRE_MAX_IO + 1);
  assert_int_equal(call(&w, &c, why), -1);
  assert_non_null(strstr(why, "stdin_read"));
  mbxC_wire_writer_free(&w);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fields),
      cmocka_unit_test(test_call_checks),
      cmocka_unit_test(test_exec_round_trip),
      cmocka_unit_test(test_exec_call_checks),
  };
  return cmocka_run_group_tests_name("port_wire", tests, NULL, NULL);
}
