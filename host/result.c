/* host/result.c -- the result contract object built from a run's outcome. */
#include "host/result.h"

#include <xxhash.h>

#include "capabilities/port_record.h"
#include "common/bytes.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "vm/errors.h"
#include "vm/json_text.h"

static void put_key(mbxU_buf *b, const char *key) {
  mbxU_buf_puts(b, "\"");
  mbxU_buf_puts(b, key);
  mbxU_buf_puts(b, "\":");
}

static void put_string(mbxU_buf *b, const char *s, size_t n) {
  mbxV_json_put_string(mbxU_buf_sink, b, s, n);
}

static void put_u64(mbxU_buf *b, uint64_t v) {
  char num[32];
  snprintf(num, sizeof num, "%" PRIu64, v);
  mbxU_buf_puts(b, num);
}

/* Keys in sorted order at every level, as the contract promises. */
static void write_contract(mbxU_buf *b, const mbx_result *r) {
  const mbxV_outcome *o = &r->outcome;
  mbxU_buf_puts(b, "{");
  put_key(b, "error");
  if (o->failed) {
    mbxU_buf_puts(b, "{");
    put_key(b, "chunk");
    put_string(b, o->error.chunk, strlen(o->error.chunk));
    mbxU_buf_puts(b, ",");
    put_key(b, "line");
    put_u64(b, (uint64_t)(o->error.line > 0 ? o->error.line : 0));
    mbxU_buf_puts(b, ",");
    put_key(b, "message");
    put_string(b, o->error.message, o->error.message_len);
    mbxU_buf_puts(b, ",");
    put_key(b, "traceback");
    put_string(b, o->error.traceback, o->error.traceback_len);
    mbxU_buf_puts(b, "}");
  } else {
    mbxU_buf_puts(b, "null");
  }
  mbxU_buf_puts(b, ",");
  put_key(b, "pending");
  if (o->pending_json)
    mbxU_buf_put(b, o->pending_json, o->pending_len);
  else
    mbxU_buf_puts(b, "null");
  mbxU_buf_puts(b, ",");
  put_key(b, "status");
  mbxU_buf_puts(b, "\"");
  mbxU_buf_puts(b, mbx_status_key(r->status));
  mbxU_buf_puts(b, "\",");
  put_key(b, "stderr");
  put_string(b, r->stream[1], r->stream_len[1]);
  mbxU_buf_puts(b, ",");
  put_key(b, "stdout");
  put_string(b, r->stream[0], r->stream_len[0]);
  mbxU_buf_puts(b, ",");
  put_key(b, "usage");
  mbxU_buf_puts(b, "{");
  put_key(b, "exec_ms");
  put_u64(b, r->usage.exec_ms);
  mbxU_buf_puts(b, ",");
  put_key(b, "exec_runs");
  put_u64(b, r->usage.exec_runs);
  mbxU_buf_puts(b, ",");
  put_key(b, "host_calls");
  put_u64(b, r->usage.host_calls);
  mbxU_buf_puts(b, ",");
  put_key(b, "instructions");
  /* A run without a count hook counted nothing: null, never a made-up number. */
  if (r->usage.instructions_counted)
    put_u64(b, r->usage.instructions);
  else
    mbxU_buf_puts(b, "null");
  mbxU_buf_puts(b, ",");
  put_key(b, "memory_peak");
  put_u64(b, r->usage.memory_peak);
  mbxU_buf_puts(b, ",");
  put_key(b, "output_bytes");
  put_u64(b, r->usage.output_bytes);
  mbxU_buf_puts(b, ",");
  put_key(b, "wall_us");
  put_u64(b, r->usage.wall_us);
  mbxU_buf_puts(b, "},");
  put_key(b, "value");
  mbxU_buf_put(b, o->value_json, o->value_len);
  mbxU_buf_puts(b, "}");
}

static const char empty_stream[1] = "";

mbx_status mbxH_status_from_vm(mbxV_status s) {
  switch (s) {
  case MBXV_OK:
    return MBX_OK;
  case MBXV_SYNTAX_ERROR:
    return MBX_SYNTAX_ERROR;
  case MBXV_RUNTIME_ERROR:
    return MBX_RUNTIME_ERROR;
  case MBXV_MEMORY_LIMIT:
    return MBX_MEMORY_LIMIT;
  case MBXV_INSTRUCTION_LIMIT:
    return MBX_INSTRUCTION_LIMIT;
  case MBXV_TIME_LIMIT:
    return MBX_TIME_LIMIT;
  case MBXV_OUTPUT_LIMIT:
    return MBX_OUTPUT_LIMIT;
  case MBXV_HOST_CALL_LIMIT:
    return MBX_HOST_CALL_LIMIT;
  case MBXV_INTERRUPTED:
    return MBX_INTERRUPTED;
  case MBXV_PAUSED:
    return MBX_PAUSED;
  case MBXV_INTERNAL_ERROR:
    return MBX_INTERNAL_ERROR;
  case MBXV_INVALID_INPUT:
    return MBX_INVALID_INPUT;
  case MBXV_SOURCE_TOO_LARGE:
    return MBX_SOURCE_TOO_LARGE;
  case MBXV_NO_MEMORY:
    return MBX_NO_MEMORY;
  }
  return MBX_INTERNAL_ERROR; /* not a status the vm gives: never reported as a success */
}

mbx_result *mbxH_result_new(mbxV_outcome *outcome, const mbxV_output *output) {
  mbx_result *r = calloc(1, sizeof *r);
  if (r == NULL) {
    mbxV_outcome_free(outcome);
    return NULL;
  }
  mbxV_outcome_move(&r->outcome, outcome);
  r->status = mbxH_status_from_vm(outcome->status);
  r->usage.instructions_counted = !outcome->uncounted;
  r->usage.instructions = outcome->uncounted ? 0 : outcome->instructions;
  r->usage.memory_peak = outcome->memory_peak;
  r->usage.wall_us = outcome->wall_us;
  r->usage.output_bytes = outcome->output_bytes;
  r->usage.host_calls = outcome->host_calls;
  r->usage.exec_runs = outcome->exec_runs;
  r->usage.exec_ms = outcome->exec_ms;
  for (int i = 0; i < 2; i++) {
    /* Most runs print nothing: an empty stream is the shared "" (never freed). */
    r->stream[i] = output->len[i] == 0 ? (char *)empty_stream
                                       : mbxU_dup_bytes(output->data[i], output->len[i]);
    r->stream_len[i] = output->len[i];
    if (r->stream[i] == NULL) {
      mbx_result_free(r);
      return NULL;
    }
  }
  return r;
}

MBX_API mbx_status mbx_result_status(const mbx_result *r) {
  return r ? r->status : MBX_INVALID_ARGUMENT;
}

MBX_API const char *mbx_result_json(const mbx_result *r, size_t *len) {
  if (len) *len = 0;
  if (r == NULL) return NULL;
  mbx_result *m = (mbx_result *)r; /* the cache of the text: nothing observable changes */
  char *json = atomic_load_explicit(&m->json, memory_order_acquire);
  if (json == NULL) {
    mbxU_buf b = {0};
    write_contract(&b, r);
    size_t n;
    char *made = mbxU_buf_take(&b, &n);
    if (made == NULL) return NULL; /* out of host memory: a later call tries again */
    atomic_store_explicit(&m->json_len, n, memory_order_relaxed);
    if (atomic_compare_exchange_strong_explicit(&m->json, &json, made, memory_order_acq_rel,
                                                memory_order_acquire))
      json = made;
    else
      free(made); /* another thread published its copy first: json now points at it */
  }
  if (len) *len = atomic_load_explicit(&m->json_len, memory_order_relaxed);
  return json;
}

MBX_API const char *mbx_result_value_json(const mbx_result *r, size_t *len) {
  if (len) *len = r ? r->outcome.value_len : 0;
  return r ? r->outcome.value_json : NULL;
}

MBX_API const char *mbx_result_stdout(const mbx_result *r, size_t *len) {
  if (len) *len = r ? r->stream_len[0] : 0;
  return r ? r->stream[0] : NULL;
}

MBX_API const char *mbx_result_stderr(const mbx_result *r, size_t *len) {
  if (len) *len = r ? r->stream_len[1] : 0;
  return r ? r->stream[1] : NULL;
}

MBX_API int mbx_result_error(const mbx_result *r, mbx_error *err) {
  if (err) memset(err, 0, sizeof *err);
  if (r == NULL || !r->outcome.failed) return 0;
  if (err) {
    err->code = (int)r->status;
    err->line = r->outcome.error.line;
    snprintf(err->chunk, sizeof err->chunk, "%s", r->outcome.error.chunk);
    /* Cut on a character boundary, as the 4096-byte cut is (issue 9, E.3). */
    size_t shown = mbxV_utf8_cut(r->outcome.error.message, r->outcome.error.message_len,
                                 sizeof err->message - 1);
    snprintf(err->message, sizeof err->message, "%.*s", (int)shown, r->outcome.error.message);
  }
  return 1;
}

MBX_API const char *mbx_result_error_message(const mbx_result *r, size_t *len) {
  int has = r && r->outcome.failed;
  if (len) *len = has ? r->outcome.error.message_len : 0;
  return has ? r->outcome.error.message : "";
}

MBX_API const char *mbx_result_traceback(const mbx_result *r, size_t *len) {
  int has = r && r->outcome.failed && r->outcome.error.traceback;
  if (len) *len = has ? r->outcome.error.traceback_len : 0;
  return has ? r->outcome.error.traceback : "";
}

MBX_API int mbx_result_exit_code(const mbx_result *r, int64_t *code) {
  if (r == NULL || !r->outcome.exited) return 0;
  if (code) *code = r->outcome.exit_code;
  return 1;
}

MBX_API mbx_status mbx_result_usage(const mbx_result *r, mbx_usage *usage) {
  if (r == NULL || usage == NULL) return MBX_INVALID_ARGUMENT;
  *usage = r->usage;
  return MBX_OK;
}

MBX_API void mbx_result_free(mbx_result *r) {
  if (r == NULL) return;
  mbxV_outcome_free(&r->outcome);
  for (int i = 0; i < 2; i++)
    if (r->stream[i] != empty_stream) free(r->stream[i]);
  free(atomic_load(&r->json));
  free(r);
}

void mbxH_log_outcome(struct mbxC_port_record *record, mbx_status s, const mbxV_outcome *o) {
  uint64_t hash = 0, host_calls = 0;
  if (s < MBX_API_ERROR_BASE) {
    XXH64_hash_t h =
        XXH3_64bits(o->value_json ? o->value_json : "", o->value_json ? o->value_len : 0);
    h = XXH3_64bits_withSeed(o->pending_json ? o->pending_json : "",
                             o->pending_json ? o->pending_len : 0, h);
    h = XXH3_64bits_withSeed(o->error.message ? o->error.message : "",
                             o->error.message ? o->error.message_len : 0, h);
    hash = h;
    host_calls = o->host_calls;
  }
  mbxC_port_record_outcome(record, (uint32_t)s, hash, host_calls);
}
