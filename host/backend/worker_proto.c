/* host/backend/worker_proto.c -- frames between the parent, the zygote and a worker: their
   headers, and the done report read with every size and count checked
   (host/backend/worker_proto.h; the fields and the port's frames: capabilities/port_wire.c). */
#include "host/backend/worker_proto.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- reading ---- */

static int known_type(unsigned t) {
  return (t >= MBXH_WP_CREATE && t <= MBXH_WP_PORT_REPLY) ||
         (t >= MBXH_WP_STATUS && t <= MBXH_WP_PORT_CALL) ||
         (t >= MBXH_WP_SPAWN && t <= MBXH_WP_PROBED);
}

int mbxH_wp_header(const unsigned char hdr[MBXH_WP_HEADER], uint32_t max, mbxH_wp_type *type,
                   uint32_t *len, char *why, size_t why_size) {
  unsigned t;
  if (mbxC_wire_header(hdr, MBXH_WP_VERSION, known_type, max, &t, len, why, why_size) != 0)
    return -1;
  *type = (mbxH_wp_type)t;
  return 0;
}

/* ---- done ---- */

void mbxH_wp_put_done(mbxH_wp_writer *w, mbxV_status s, const char *refusal, const mbxV_outcome *o,
                      const char *const stream[2], const size_t stream_len[2],
                      uint64_t output_total, int paused, uint64_t heap) {
  mbxH_wp_begin(w, MBXH_WP_DONE);
  mbxH_wp_u32(w, (uint32_t)s);
  if (s >= MBXV_REFUSED_BASE) {
    mbxH_wp_bytes(w, refusal, strlen(refusal));
  } else {
    mbxH_wp_bytes(w, o->value_json, o->value_json ? o->value_len : 0);
    mbxH_wp_u8(w, (uint8_t)(o->failed != 0));
    if (o->failed) {
      mbxH_wp_bytes(w, o->error.message, o->error.message ? o->error.message_len : 0);
      mbxH_wp_bytes(w, o->error.traceback, o->error.traceback ? o->error.traceback_len : 0);
      mbxH_wp_bytes(w, o->error.chunk, strnlen(o->error.chunk, sizeof o->error.chunk));
      mbxH_wp_u64(w, (uint64_t)(int64_t)o->error.line);
    }
    mbxH_wp_u64(w, o->instructions);
    mbxH_wp_u8(w, (uint8_t)(o->uncounted != 0));
    mbxH_wp_u64(w, o->wall_us);
    mbxH_wp_u64(w, o->memory_peak);
    mbxH_wp_u64(w, o->output_bytes);
    mbxH_wp_u8(w, (uint8_t)(o->exited != 0));
    mbxH_wp_u64(w, (uint64_t)o->exit_code);
    mbxH_wp_u64(w, o->host_calls);
    mbxH_wp_u64(w, o->exec_runs);
    mbxH_wp_u64(w, o->exec_ms);
    mbxH_wp_bytes(w, o->pending_json, o->pending_json ? o->pending_len : 0);
    for (int i = 0; i < 2; i++)
      mbxH_wp_bytes(w, stream[i], stream_len[i]);
    mbxH_wp_u64(w, output_total);
  }
  mbxH_wp_u8(w, (uint8_t)(paused != 0));
  mbxH_wp_u64(w, heap);
}

static char *dup_bytes(const char *p, size_t n) {
  char *d = malloc(n + 1);
  if (d == NULL) return NULL;
  if (n) memcpy(d, p, n);
  d[n] = '\0';
  return d;
}

static int run_status(uint32_t s) {
  return s <= MBXV_INTERNAL_ERROR;
}

static int refusal_status(uint32_t s) {
  return s == MBXV_INVALID_INPUT || s == MBXV_SOURCE_TOO_LARGE || s == MBXV_NO_MEMORY;
}

int mbxH_wp_get_done(const void *payload, size_t n, const mbxH_wp_bounds *b, mbxH_wp_done *d,
                     char *why, size_t why_size) {
  memset(d, 0, sizeof *d);
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, payload, n);
  uint32_t s = mbxH_wp_get_u32(&r);
  if (r.bad) {
    mbxC_wire_why(why, why_size, "a malformed done report (%zu bytes): shorter than its status", n);
    return -1;
  }
  if (!(run_status(s) || refusal_status(s))) {
    mbxC_wire_why(why, why_size, "a run ended with status %u, not a status there is", s);
    return -1;
  }
  d->status = (mbxV_status)s;
  const char *p, *value = NULL, *msg = NULL, *tb = NULL, *chunk = NULL, *pending = NULL;
  const char *streams[2] = {NULL, NULL};
  size_t value_len = 0, msg_len = 0, tb_len = 0, chunk_len = 0, pending_len = 0;
  if (!run_status(s)) {
    size_t len = mbxH_wp_get_bytes(&r, sizeof d->refusal - 1, &p);
    memcpy(d->refusal, p, len);
    d->refusal[len] = '\0';
  } else {
    mbxV_outcome *o = &d->outcome;
    o->status = d->status;
    value_len = mbxH_wp_get_bytes(&r, b->value_max, &value);
    o->failed = mbxH_wp_get_u8(&r);
    if (o->failed > 1) r.bad = 1;
    if (o->failed) {
      /* The vm cuts messages at MBXV_ERROR_MAX; a traceback has a bounded frame count. */
      msg_len = mbxH_wp_get_bytes(&r, MBXV_ERROR_MAX, &msg);
      tb_len = mbxH_wp_get_bytes(&r, 64 * MBXV_ERROR_MAX, &tb);
      chunk_len = mbxH_wp_get_bytes(&r, sizeof o->error.chunk - 1, &chunk);
      int64_t line = (int64_t)mbxH_wp_get_u64(&r);
      if (line < 0 || line > INT32_MAX) r.bad = 1;
      o->error.line = (int)line;
    }
    o->instructions = mbxH_wp_get_u64(&r);
    o->uncounted = mbxH_wp_get_u8(&r);
    if (o->uncounted > 1) r.bad = 1;
    o->wall_us = mbxH_wp_get_u64(&r);
    o->memory_peak = mbxH_wp_get_u64(&r);
    o->output_bytes = mbxH_wp_get_u64(&r);
    o->exited = mbxH_wp_get_u8(&r);
    if (o->exited > 1) r.bad = 1;
    o->exit_code = (int64_t)mbxH_wp_get_u64(&r);
    o->host_calls = mbxH_wp_get_u64(&r);
    o->exec_runs = mbxH_wp_get_u64(&r);
    o->exec_ms = mbxH_wp_get_u64(&r);
    pending_len = mbxH_wp_get_bytes(&r, b->value_max, &pending);
    size_t out_left = b->output_max;
    for (int i = 0; i < 2; i++) {
      d->stream_len[i] = mbxH_wp_get_bytes(&r, out_left, &streams[i]);
      out_left -= d->stream_len[i];
    }
    d->output_total = mbxH_wp_get_u64(&r);
    if (!r.bad && (s == MBXV_PAUSED) != (pending_len > 0)) {
      mbxC_wire_why(why, why_size, "a run %s a pending call",
                    s == MBXV_PAUSED ? "paused without" : "ended with");
      return -1;
    }
  }
  uint8_t paused = mbxH_wp_get_u8(&r);
  d->heap = mbxH_wp_get_u64(&r);
  if (paused > 1) r.bad = 1;
  d->paused = paused;
  if (mbxH_wp_end(&r) != 0) {
    mbxC_wire_why(why, why_size,
                  "a malformed done report (%zu bytes): a field past the frame's end, past "
                  "the sandbox's limits, or bytes left over",
                  n);
    return -1;
  }
  if (!run_status(s)) return 0;
  if (d->paused != (s == MBXV_PAUSED)) {
    mbxC_wire_why(why, why_size, "a run reported status %u with paused=%d", s, d->paused);
    return -1;
  }
  mbxV_outcome *o = &d->outcome;
  o->value_json = value_len ? dup_bytes(value, value_len) : dup_bytes("null", 4);
  o->value_len = value_len ? value_len : 4;
  if (o->failed) {
    o->error.message = dup_bytes(msg, msg_len);
    o->error.message_len = msg_len;
    o->error.traceback = dup_bytes(tb, tb_len);
    o->error.traceback_len = tb_len;
    memcpy(o->error.chunk, chunk, chunk_len);
    o->error.chunk[chunk_len] = '\0';
  }
  if (pending_len) {
    o->pending_json = dup_bytes(pending, pending_len);
    o->pending_len = pending_len;
  }
  for (int i = 0; i < 2; i++)
    d->stream[i] = dup_bytes(streams[i], d->stream_len[i]);
  int oom = o->value_json == NULL || (o->failed && (!o->error.message || !o->error.traceback)) ||
            (pending_len && !o->pending_json) || !d->stream[0] || !d->stream[1];
  if (oom) {
    mbxH_wp_done_free(d);
    mbxC_wire_why(why, why_size, "out of host memory for a worker's report");
    return -1;
  }
  if (!mbxH_wp_json_ok(o->value_json, o->value_len) ||
      (o->pending_json && !mbxH_wp_json_ok(o->pending_json, o->pending_len))) {
    mbxH_wp_done_free(d);
    mbxC_wire_why(why, why_size, "a run's value or pending call is not one JSON value");
    return -1;
  }
  return 0;
}

void mbxH_wp_done_free(mbxH_wp_done *d) {
  mbxV_outcome_free(&d->outcome);
  for (int i = 0; i < 2; i++)
    free(d->stream[i]);
  memset(d, 0, sizeof *d);
}
