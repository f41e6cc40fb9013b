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
  o.uncounted = s == MBXV_RUNTIME_ERROR; /* a run without a count hook: one bit on the wire */
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
  assert_int_equal(d.outcome.uncounted, 1);
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

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_done_round_trip),
      cmocka_unit_test(test_header_refusals),
      cmocka_unit_test(test_done_truncated_and_trailing),
      cmocka_unit_test(test_done_bounds_and_json),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
