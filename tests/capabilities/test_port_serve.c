/* tests/capabilities/test_port_serve.c -- unit tests of capabilities/port_serve.c: the facts of
   MBXC_PORT_OPS the serving side checks a call against, and answers written from a port, down
   to their bytes (a port that answers past what was asked is held to the ask). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/port_serve.h"

static const mbxC_grant_fn fns[] = {{"host.echo", MBXC_FN_SYNC, {0}},
                                    {"host.nat", MBXC_FN_NATIVE, {'C', 0, {0}}}};
static const mbxC_grants grants = {0, 2, fns};

static int64_t one_wall_time(void *ud) {
  (void)ud;
  return 1;
}

/* Answers more than it was asked for: the serving side sends only what was asked. */
static int greedy_read(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait,
                       size_t *got, mbxC_port_error *e) {
  (void)ud;
  (void)handle;
  (void)wait;
  (void)e;
  memset(buf, 'x', len);
  *got = len + 100;
  return 0;
}

static int refusing_stdin(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                          mbxC_port_error *e) {
  (void)ud;
  (void)wait;
  (void)buf;
  (void)len;
  (void)got;
  e->errnum = 5;
  strcpy(e->message, "Input/output error");
  return -1;
}

static mbxC_call_result failing_native(void *ud, size_t index, const mbxC_ffi_value *args,
                                       const mbxC_wait *wait, mbxC_ffi_value *ret,
                                       const char **bytes, size_t *len) {
  (void)ud;
  (void)index;
  (void)args;
  (void)wait;
  ret->C = 200; /* not sent: an error carries no value */
  *bytes = "nope";
  *len = 4;
  return MBXC_CALL_ERROR;
}

static const mbxC_port partial = {.version = MBXC_PORT_VERSION,
                                  .grants = &grants,
                                  .wall_time = one_wall_time,
                                  .fs_read = greedy_read,
                                  .native_call = failing_native,
                                  .stdin_read = refusing_stdin};

static void test_facts(void **state) {
  (void)state;
  for (unsigned op = 0; op < MBXC_OP_COUNT + 3; op++) {
    int callback = op == MBXC_OP_HOST_CALL || op == MBXC_OP_NATIVE_CALL;
    int outside = op == MBXC_OP_WALL_TIME || op == MBXC_OP_RANDOM_SEED || op == MBXC_OP_ENV_GET;
    assert_int_equal(mbxC_serve_is_callback(op), callback);
    assert_int_equal(mbxC_serve_outside_run(op), outside);
  }
  assert_int_equal(mbxC_serve_has(&partial, MBXC_OP_WALL_TIME), 1);
  assert_int_equal(mbxC_serve_has(&partial, MBXC_OP_FS_READ), 1);
  assert_int_equal(mbxC_serve_has(&partial, MBXC_OP_RANDOM_SEED), 0);
  assert_int_equal(mbxC_serve_has(&partial, MBXC_OP_FS_RENAME), 0);
  assert_int_equal(mbxC_serve_has(&partial, 0), 0);
  assert_int_equal(mbxC_serve_has(&partial, MBXC_OP_COUNT), 0);
  assert_int_equal(mbxC_serve_mask(&partial), (1u << MBXC_OP_WALL_TIME) | (1u << MBXC_OP_FS_READ) |
                                                  (1u << MBXC_OP_NATIVE_CALL) |
                                                  (1u << MBXC_OP_STDIN_READ));
}

/* Decode the call in w, answer it from partial, return a reader over the reply. */
static void answer(mbxC_wire_writer *w, mbxC_wire_writer *reply, mbxC_wire_reader *r) {
  mbxC_wire_call c;
  char why[200];
  assert_int_equal(mbxC_wire_finish(w), 0);
  assert_int_equal(mbxC_wire_get_call(w->data + MBXC_WIRE_HEADER, w->len - MBXC_WIRE_HEADER,
                                      &grants, &c, why, sizeof why),
                   0);
  assert_true(mbxC_serve_has(&partial, c.op));
  mbxC_wait wait = {0, NULL, NULL};
  mbxC_wire_begin(reply, 1, 2);
  mbxC_serve_call(&partial, &c, &wait, reply);
  mbxC_wire_call_free(&c);
  assert_int_equal(mbxC_wire_finish(reply), 0);
  mbxC_wire_reader_init(r, reply->data + MBXC_WIRE_HEADER, reply->len - MBXC_WIRE_HEADER);
}

static void begin_call(mbxC_wire_writer *w, mbxC_port_op op) {
  mbxC_wire_begin(w, 1, 3);
  mbxC_wire_u8(w, (uint8_t)op);
  mbxC_wire_u64(w, 0);
}

static void test_answers(void **state) {
  (void)state;
  mbxC_wire_writer w = {0}, reply = {0};
  mbxC_wire_reader r;
  const char *p;
  /* wall_time: one u64 */
  begin_call(&w, MBXC_OP_WALL_TIME);
  answer(&w, &reply, &r);
  assert_int_equal(mbxC_wire_get_u64(&r), 1);
  assert_int_equal(mbxC_wire_end(&r), 0);
  /* fs_read: status 0, then exactly the bytes asked for */
  begin_call(&w, MBXC_OP_FS_READ);
  mbxC_wire_u64(&w, 3);
  mbxC_wire_u64(&w, 10);
  answer(&w, &reply, &r);
  assert_int_equal(mbxC_wire_get_u8(&r), 0);
  assert_int_equal(mbxC_wire_get_bytes(&r, 100, &p), 10);
  assert_memory_equal(p, "xxxxxxxxxx", 10);
  assert_int_equal(mbxC_wire_end(&r), 0);
  /* a read of 0 bytes is served too (the buffer is never malloc(0)) */
  begin_call(&w, MBXC_OP_FS_READ);
  mbxC_wire_u64(&w, 3);
  mbxC_wire_u64(&w, 0);
  answer(&w, &reply, &r);
  assert_int_equal(mbxC_wire_get_u8(&r), 0);
  assert_int_equal(mbxC_wire_get_bytes(&r, 100, &p), 0);
  assert_int_equal(mbxC_wire_end(&r), 0);
  /* stdin_read refused: status 1, errno, the message, nothing else */
  begin_call(&w, MBXC_OP_STDIN_READ);
  mbxC_wire_u64(&w, 16);
  answer(&w, &reply, &r);
  assert_int_equal(mbxC_wire_get_u8(&r), 1);
  assert_int_equal(mbxC_wire_get_u32(&r), 5);
  size_t n = mbxC_wire_get_bytes(&r, 300, &p);
  assert_int_equal(n, strlen("Input/output error"));
  assert_memory_equal(p, "Input/output error", n);
  assert_int_equal(mbxC_wire_end(&r), 0);
  /* a native call's error: the flag, a zero word, the message */
  begin_call(&w, MBXC_OP_NATIVE_CALL);
  mbxC_wire_u64(&w, 1);
  mbxC_wire_u32(&w, 0);
  answer(&w, &reply, &r);
  assert_int_equal(mbxC_wire_get_u8(&r), 1);
  assert_int_equal(mbxC_wire_get_u64(&r), 0);
  n = mbxC_wire_get_bytes(&r, 300, &p);
  assert_int_equal(n, 4);
  assert_memory_equal(p, "nope", 4);
  assert_int_equal(mbxC_wire_end(&r), 0);
  mbxC_wire_writer_free(&w);
  mbxC_wire_writer_free(&reply);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_facts),
      cmocka_unit_test(test_answers),
  };
  return cmocka_run_group_tests_name("port_serve", tests, NULL, NULL);
}
