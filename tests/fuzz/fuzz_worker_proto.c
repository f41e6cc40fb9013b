/* tests/fuzz/fuzz_worker_proto.c -- libFuzzer harness of the parent's decoders of what a worker
   sends (host/backend/worker_proto.c; a port call's, capabilities/port_wire.c): a compromised
   worker controls every byte, so for each input
     - the first byte picks how the rest is read: 'D' a done report's payload, 'C' a port
       call's payload, anything else a stream of whole frames (header + payload, each decoded
       by its type) as the parent reads its socket;
     - a header is accepted only with the version, a known type and a length within the bound;
     - a decoded done report holds at most the bounds' bytes, its value (and pending call) is
       one JSON value, its status is a run status or a refusal, paused iff status is paused;
     - a decoded port call names a granted function of the right kind, its byte fields lie
       inside the frame, its native 'z' arguments are NUL-terminated copies without a NUL inside
       and its other arguments are values of their types; an exec request holds a program and
       at most its bounds of arguments and NAME=VALUE entries, each a C string copied out of the
       frame, and its stdin lies inside the frame.
   Any broken check aborts, so libFuzzer keeps the input. Run (tools/dev fuzz_smoke does):
     build/fuzz/tests/fuzz_worker_proto -max_len=4096 -max_total_time=60 build/fuzz/wp-corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/port_wire.h"
#include "host/backend/worker_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_worker_proto: check failed: %s (line %d)\n", #cond, __LINE__);         \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static const mbxC_grant_fn fns[] = {{"host.echo", MBXC_FN_SYNC, {0}},
                                    {"host.fetch", MBXC_FN_EXTERNAL, {0}},
                                    {"host.hypot", MBXC_FN_NATIVE, {'d', 2, {'d', 'd'}}},
                                    {"host.mix", MBXC_FN_NATIVE, {'o', 4, {'z', 'b', 'c', 'z'}}}};
static const mbxC_grants grants = {0, 4, fns};
static const mbxH_wp_bounds bounds = {.value_max = 512, .output_max = 256};

static int inside(const char *p, size_t n, const uint8_t *base, size_t size) {
  return n == 0 || ((const uint8_t *)p >= base && (const uint8_t *)p + n <= base + size);
}

static void done(const uint8_t *p, size_t n) {
  mbxH_wp_done d;
  char why[200];
  if (mbxH_wp_get_done(p, n, &bounds, &d, why, sizeof why) != 0) {
    CHECK(why[0] != '\0');
    return;
  }
  if (d.status >= MBXV_REFUSED_BASE) {
    CHECK(d.status == MBXV_INVALID_INPUT || d.status == MBXV_SOURCE_TOO_LARGE ||
          d.status == MBXV_NO_MEMORY);
    CHECK(strlen(d.refusal) < sizeof d.refusal);
    return;
  }
  CHECK(d.status <= MBXV_INTERNAL_ERROR);
  CHECK(d.outcome.value_json != NULL && d.outcome.value_len <= bounds.value_max + 4);
  CHECK(mbxH_wp_json_ok(d.outcome.value_json, d.outcome.value_len));
  CHECK((d.status == MBXV_PAUSED) == d.paused);
  CHECK((d.outcome.pending_json != NULL) == d.paused);
  if (d.outcome.pending_json) {
    CHECK(d.outcome.pending_len <= bounds.value_max);
    CHECK(mbxH_wp_json_ok(d.outcome.pending_json, d.outcome.pending_len));
  }
  CHECK(d.stream_len[0] + d.stream_len[1] <= bounds.output_max);
  if (d.outcome.failed) {
    CHECK(d.outcome.error.message && d.outcome.error.message_len <= MBXV_ERROR_MAX);
    CHECK(strlen(d.outcome.error.chunk) < sizeof d.outcome.error.chunk);
  }
  mbxH_wp_done_free(&d);
}

static void call(const uint8_t *p, size_t n) {
  mbxC_wire_call c;
  char why[200];
  if (mbxC_wire_get_call(p, n, &grants, &c, why, sizeof why) != 0) {
    CHECK(why[0] != '\0');
    return;
  }
  CHECK(c.op >= MBXC_OP_WALL_TIME && c.op < MBXC_OP_COUNT);
  CHECK(inside(c.a, c.a_len, p, n) && inside(c.b, c.b_len, p, n));
  if (c.op == MBXC_OP_HOST_CALL) CHECK(c.index < 4 && fns[c.index].kind == MBXC_FN_SYNC);
  if (c.op == MBXC_OP_NATIVE_CALL) {
    CHECK(c.index < 4 && fns[c.index].kind == MBXC_FN_NATIVE);
    const mbxC_ffi_sig *sig = &fns[c.index].sig;
    for (int i = 0; i < sig->nargs; i++) {
      if (sig->args[i] == 'z') {
        CHECK(c.args[i].z != NULL && strlen(c.args[i].z) <= MBXC_WIRE_MAX_IO);
      } else {
        mbxC_ffi_value v;
        CHECK(mbxC_ffi_from_word(sig->args[i], mbxC_ffi_word(sig->args[i], &c.args[i]), &v));
      }
    }
  }
  if (c.op == MBXC_OP_FS_READ) CHECK(c.i2 >= 0 && c.i2 <= (int64_t)MBXC_WIRE_MAX_IO);
  if (c.op == MBXC_OP_FS_SEEK) CHECK(c.i2 >= 0 && c.i2 <= 2);
  if (c.op == MBXC_OP_STDIN_READ) CHECK(c.i2 >= 0 && c.i2 <= (int64_t)MBXC_WIRE_MAX_IO);
  if (c.op == MBXC_OP_EXEC_RUN) {
    /* What the port's exec_run gets: C strings, a program, NAME=VALUE entries, stdin inside
       the frame. */
    const mbxC_exec_request *q = &c.exec;
    CHECK(q->argc >= 1 && q->argc <= 4096 && q->argv != NULL);
    for (size_t i = 0; i < q->argc; i++)
      CHECK(q->argv[i] != NULL && strlen(q->argv[i]) < n);
    CHECK(q->envc <= MBXC_WIRE_MAX_EXEC_ENV && (q->envc == 0) == (q->env == NULL));
    for (size_t i = 0; i < q->envc; i++) {
      const char *eq = strchr(q->env[i], '=');
      CHECK(eq != NULL && eq != q->env[i] && strlen(q->env[i]) < n);
    }
    CHECK(q->cwd == NULL || strlen(q->cwd) < n);
    CHECK(q->stdin_bytes != NULL || q->stdin_len == 0);
    CHECK(inside(q->stdin_bytes, q->stdin_len, p, n));
  }
  mbxC_wire_call_free(&c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0) return 0;
  if (data[0] == 'D') {
    done(data + 1, size - 1);
    return 0;
  }
  if (data[0] == 'C') {
    call(data + 1, size - 1);
    return 0;
  }
  const uint8_t *p = data + 1;
  size_t left = size - 1;
  while (left >= MBXH_WP_HEADER) {
    mbxH_wp_type type;
    uint32_t len;
    char why[200];
    if (mbxH_wp_header(p, 4096, &type, &len, why, sizeof why) != 0) return 0;
    CHECK(len <= 4096);
    p += MBXH_WP_HEADER;
    left -= MBXH_WP_HEADER;
    if (len > left) return 0; /* the parent would wait for the rest, then time out */
    if (type == MBXH_WP_DONE)
      done(p, len);
    else if (type == MBXH_WP_PORT_CALL)
      call(p, len);
    p += len;
    left -= len;
  }
  return 0;
}
