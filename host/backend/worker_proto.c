/* host/backend/worker_proto.c -- frames between the parent, the zygote and a worker: writing, and
   reading with every size and count checked (host/backend/worker_proto.h). */
#include "host/backend/worker_proto.h"

#include "include/moonbox.h" /* MBX_HOST_ARGS_MAX */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capabilities/exec.h"

/* Paths and names the guest gives: longer ones are refused by the port anyway. */
#define WP_MAX_PATH ((size_t)1 << 16)

static void say(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t size, const char *fmt, ...) {
  if (why == NULL || size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
}

/* ---- writing ---- */

static void put(mbxH_wp_writer *w, const void *p, size_t n) {
  if (w->failed) return;
  if (n > MBXH_WP_MAX_FRAME + (size_t)MBXH_WP_HEADER - w->len) {
    w->failed = 1;
    return;
  }
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n) cap *= 2;
    unsigned char *d = realloc(w->data, cap);
    if (d == NULL) {
      w->failed = 1;
      return;
    }
    w->data = d;
    w->cap = cap;
  }
  if (n) memcpy(w->data + w->len, p, n);
  w->len += n;
}

void mbxH_wp_begin(mbxH_wp_writer *w, mbxH_wp_type type) {
  w->len = 0;
  w->failed = 0;
  uint16_t v = MBXH_WP_VERSION, t = (uint16_t)type;
  uint32_t zero = 0;
  put(w, &v, 2);
  put(w, &t, 2);
  put(w, &zero, 4);
}

void mbxH_wp_u8(mbxH_wp_writer *w, uint8_t v) {
  put(w, &v, 1);
}

void mbxH_wp_u32(mbxH_wp_writer *w, uint32_t v) {
  put(w, &v, 4);
}

void mbxH_wp_u64(mbxH_wp_writer *w, uint64_t v) {
  put(w, &v, 8);
}

void mbxH_wp_bytes(mbxH_wp_writer *w, const void *p, size_t n) {
  if (n > MBXH_WP_MAX_FRAME) {
    w->failed = 1;
    return;
  }
  mbxH_wp_u32(w, (uint32_t)n);
  put(w, p, n);
}

int mbxH_wp_finish(mbxH_wp_writer *w) {
  if (w->failed || w->len < MBXH_WP_HEADER) return -1;
  uint32_t n = (uint32_t)(w->len - MBXH_WP_HEADER);
  memcpy(w->data + 4, &n, 4);
  return 0;
}

void mbxH_wp_writer_free(mbxH_wp_writer *w) {
  free(w->data);
  *w = (mbxH_wp_writer){0};
}

/* ---- reading ---- */

static int known_type(unsigned t) {
  return (t >= MBXH_WP_CREATE && t <= MBXH_WP_PORT_REPLY) || (t >= MBXH_WP_STATUS && t <= MBXH_WP_PORT_CALL) ||
         (t >= MBXH_WP_SPAWN && t <= MBXH_WP_PROBED);
}

int mbxH_wp_header(const unsigned char hdr[MBXH_WP_HEADER], uint32_t max, mbxH_wp_type *type,
                   uint32_t *len, char *why, size_t why_size) {
  uint16_t v, t;
  uint32_t n;
  memcpy(&v, hdr, 2);
  memcpy(&t, hdr + 2, 2);
  memcpy(&n, hdr + 4, 4);
  if (v != MBXH_WP_VERSION) {
    say(why, why_size, "frame of protocol version %u (expected %u)", v, MBXH_WP_VERSION);
    return -1;
  }
  if (!known_type(t)) {
    say(why, why_size, "unknown frame type %u", t);
    return -1;
  }
  if (n > max || n > MBXH_WP_MAX_FRAME) {
    say(why, why_size, "frame of %u bytes, past the %u allowed", n,
        max < MBXH_WP_MAX_FRAME ? max : MBXH_WP_MAX_FRAME);
    return -1;
  }
  *type = (mbxH_wp_type)t;
  *len = n;
  return 0;
}

void mbxH_wp_reader_init(mbxH_wp_reader *r, const void *p, size_t n) {
  r->p = p;
  r->left = n;
  r->bad = 0;
}

static int take(mbxH_wp_reader *r, void *out, size_t n) {
  if (r->bad || r->left < n) {
    r->bad = 1;
    memset(out, 0, n);
    return 0;
  }
  memcpy(out, r->p, n);
  r->p += n;
  r->left -= n;
  return 1;
}

uint8_t mbxH_wp_get_u8(mbxH_wp_reader *r) {
  uint8_t v;
  take(r, &v, 1);
  return v;
}

uint32_t mbxH_wp_get_u32(mbxH_wp_reader *r) {
  uint32_t v;
  take(r, &v, 4);
  return v;
}

uint64_t mbxH_wp_get_u64(mbxH_wp_reader *r) {
  uint64_t v;
  take(r, &v, 8);
  return v;
}

size_t mbxH_wp_get_bytes(mbxH_wp_reader *r, size_t max, const char **p) {
  uint32_t n = mbxH_wp_get_u32(r);
  if (r->bad || n > max || n > r->left) {
    r->bad = 1;
    *p = "";
    return 0;
  }
  *p = (const char *)r->p;
  r->p += n;
  r->left -= n;
  return n;
}

int mbxH_wp_end(const mbxH_wp_reader *r) {
  return r->bad || r->left != 0 ? -1 : 0;
}

/* ---- done ---- */

void mbxH_wp_put_done(mbxH_wp_writer *w, mbxV_status s, const char *refusal,
                      const mbxV_outcome *o, const char *const stream[2],
                      const size_t stream_len[2], uint64_t output_total, int paused,
                      uint64_t heap) {
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
    mbxH_wp_u64(w, o->wall_us);
    mbxH_wp_u64(w, o->memory_peak);
    mbxH_wp_u64(w, o->output_bytes);
    mbxH_wp_u8(w, (uint8_t)(o->exited != 0));
    mbxH_wp_u64(w, (uint64_t)o->exit_code);
    mbxH_wp_u64(w, o->host_calls);
    mbxH_wp_u64(w, o->exec_runs);
    mbxH_wp_u64(w, o->exec_ms);
    mbxH_wp_bytes(w, o->pending_json, o->pending_json ? o->pending_len : 0);
    for (int i = 0; i < 2; i++) mbxH_wp_bytes(w, stream[i], stream_len[i]);
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
    say(why, why_size, "a malformed done report (%zu bytes): shorter than its status", n);
    return -1;
  }
  if (!(run_status(s) || refusal_status(s))) {
    say(why, why_size, "a run ended with status %u, not a status there is", s);
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
      say(why, why_size, "a run %s a pending call", s == MBXV_PAUSED ? "paused without" :
                                                    "ended with");
      return -1;
    }
  }
  uint8_t paused = mbxH_wp_get_u8(&r);
  d->heap = mbxH_wp_get_u64(&r);
  if (paused > 1) r.bad = 1;
  d->paused = paused;
  if (mbxH_wp_end(&r) != 0) {
    say(why, why_size, "a malformed done report (%zu bytes): a field past the frame's end, past "
        "the sandbox's limits, or bytes left over", n);
    return -1;
  }
  if (!run_status(s)) return 0;
  if (d->paused != (s == MBXV_PAUSED)) {
    say(why, why_size, "a run reported status %u with paused=%d", s, d->paused);
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
  for (int i = 0; i < 2; i++) d->stream[i] = dup_bytes(streams[i], d->stream_len[i]);
  int oom = o->value_json == NULL || (o->failed && (!o->error.message || !o->error.traceback)) ||
            (pending_len && !o->pending_json) || !d->stream[0] || !d->stream[1];
  if (oom) {
    mbxH_wp_done_free(d);
    say(why, why_size, "out of host memory for a worker's report");
    return -1;
  }
  if (!mbxH_wp_json_ok(o->value_json, o->value_len) ||
      (o->pending_json && !mbxH_wp_json_ok(o->pending_json, o->pending_len))) {
    mbxH_wp_done_free(d);
    say(why, why_size, "a run's value or pending call is not one JSON value");
    return -1;
  }
  return 0;
}

void mbxH_wp_done_free(mbxH_wp_done *d) {
  mbxV_outcome_free(&d->outcome);
  for (int i = 0; i < 2; i++) free(d->stream[i]);
  memset(d, 0, sizeof *d);
}

int mbxH_wp_json_ok(const char *text, size_t len) {
  json_error_t e;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
  if (j == NULL) return 0;
  json_decref(j);
  return 1;
}

/* ---- port calls ---- */

static int get_exec_request(mbxH_wp_reader *r, mbxH_wp_call *c, char *why, size_t why_size);

static int handle_ok(int64_t h) {
  return h >= 0 && h <= INT32_MAX;
}

int mbxH_wp_get_call(const void *payload, size_t n, const mbxC_grants *g, mbxH_wp_call *c,
                     char *why, size_t why_size) {
  memset(c, 0, sizeof *c);
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, payload, n);
  uint8_t op = mbxH_wp_get_u8(&r);
  c->deadline_ns = mbxH_wp_get_u64(&r);
  if (r.bad || op < MBXH_OP_WALL_TIME || op >= MBXH_OP_COUNT) {
    say(why, why_size, "unknown port operation %u", op);
    return -1;
  }
  c->op = (mbxH_wp_op)op;
  switch (c->op) {
  case MBXH_OP_WALL_TIME:
  case MBXH_OP_RANDOM_SEED:
    break;
  case MBXH_OP_ENV_GET:
  case MBXH_OP_FS_LIST:
  case MBXH_OP_FS_STAT:
  case MBXH_OP_FS_MKDIR:
  case MBXH_OP_FS_REMOVE:
    c->a_len = mbxH_wp_get_bytes(&r, WP_MAX_PATH, &c->a);
    break;
  case MBXH_OP_HOST_CALL:
    c->index = mbxH_wp_get_u64(&r);
    c->a_len = mbxH_wp_get_bytes(&r, MBX_HOST_ARGS_MAX, &c->a);
    if (!r.bad && (c->index >= g->fn_count || g->fns[c->index].kind != MBXC_FN_SYNC)) {
      say(why, why_size, "host call of function %llu, not a granted synchronous function",
          (unsigned long long)c->index);
      return -1;
    }
    /* What the host's callback is promised: one JSON array (of at most MBX_HOST_ARGS_MAX
       bytes, the bound above), as in-process mode encodes it. */
    if (!r.bad && (c->a_len == 0 || c->a[0] != '[' || !mbxH_wp_json_ok(c->a, c->a_len))) {
      say(why, why_size, "host call arguments that are not one JSON array");
      return -1;
    }
    break;
  case MBXH_OP_NATIVE_CALL: {
    c->index = mbxH_wp_get_u64(&r);
    uint32_t nargs = mbxH_wp_get_u32(&r);
    if (r.bad) break;
    if (c->index >= g->fn_count || g->fns[c->index].kind != MBXC_FN_NATIVE) {
      say(why, why_size, "native call of function %llu, not a granted native function",
          (unsigned long long)c->index);
      return -1;
    }
    const mbxC_ffi_sig *sig = &g->fns[c->index].sig;
    if (nargs != (uint32_t)sig->nargs) {
      say(why, why_size, "native call with %u arguments, its signature takes %d", nargs,
          sig->nargs);
      return -1;
    }
    /* The 'z' strings are copied out NUL-terminated, after the frame is known to be whole. */
    const char *z[MBXC_FFI_MAX_ARGS];
    size_t zlen[MBXC_FFI_MAX_ARGS], ztotal = 0;
    for (int i = 0; i < sig->nargs; i++) {
      if (sig->args[i] == 'z') {
        zlen[i] = mbxH_wp_get_bytes(&r, MBXH_WP_MAX_IO, &z[i]);
        if (!r.bad && memchr(z[i], '\0', zlen[i])) {
          say(why, why_size, "native call argument %d holds a NUL byte", i + 1);
          return -1;
        }
        ztotal += zlen[i] + 1;
      } else {
        uint64_t word = mbxH_wp_get_u64(&r);
        if (!r.bad && !mbxC_ffi_from_word(sig->args[i], word, &c->args[i])) {
          say(why, why_size, "native call argument %d is not a value of type %s", i + 1,
              mbxC_ffi_type_name(sig->args[i]));
          return -1;
        }
      }
    }
    if (r.bad) break;
    if (ztotal) {
      c->zbuf = malloc(ztotal);
      if (c->zbuf == NULL) {
        say(why, why_size, "out of host memory for a native call's arguments");
        return -1;
      }
      char *at = c->zbuf;
      for (int i = 0; i < sig->nargs; i++) {
        if (sig->args[i] != 'z') continue;
        memcpy(at, z[i], zlen[i]);
        at[zlen[i]] = '\0';
        c->args[i].z = at;
        at += zlen[i] + 1;
      }
    }
    break;
  }
  case MBXH_OP_FS_OPEN:
    c->a_len = mbxH_wp_get_bytes(&r, WP_MAX_PATH, &c->a);
    c->i1 = (int64_t)mbxH_wp_get_u64(&r);
    if (!r.bad && (c->i1 < 0 || c->i1 > 63)) {
      say(why, why_size, "fs_open with flags %lld", (long long)c->i1);
      return -1;
    }
    break;
  case MBXH_OP_FS_READ:
    c->i1 = (int64_t)mbxH_wp_get_u64(&r);
    c->i2 = (int64_t)mbxH_wp_get_u64(&r);
    if (!r.bad && (!handle_ok(c->i1) || c->i2 < 0 || c->i2 > (int64_t)MBXH_WP_MAX_IO)) {
      say(why, why_size, "fs_read of %lld bytes from handle %lld", (long long)c->i2,
          (long long)c->i1);
      return -1;
    }
    break;
  case MBXH_OP_FS_WRITE:
    c->i1 = (int64_t)mbxH_wp_get_u64(&r);
    c->a_len = mbxH_wp_get_bytes(&r, MBXH_WP_MAX_IO, &c->a);
    if (!r.bad && !handle_ok(c->i1)) {
      say(why, why_size, "fs_write to handle %lld", (long long)c->i1);
      return -1;
    }
    break;
  case MBXH_OP_FS_SEEK:
    c->i1 = (int64_t)mbxH_wp_get_u64(&r);
    c->i2 = (int64_t)mbxH_wp_get_u64(&r);
    c->i3 = (int64_t)mbxH_wp_get_u64(&r);
    if (!r.bad && (!handle_ok(c->i1) || c->i2 < 0 || c->i2 > 2)) {
      say(why, why_size, "fs_seek on handle %lld with whence %lld", (long long)c->i1,
          (long long)c->i2);
      return -1;
    }
    break;
  case MBXH_OP_FS_CLOSE:
    c->i1 = (int64_t)mbxH_wp_get_u64(&r);
    if (!r.bad && !handle_ok(c->i1)) {
      say(why, why_size, "fs_close of handle %lld", (long long)c->i1);
      return -1;
    }
    break;
  case MBXH_OP_FS_RENAME:
    c->a_len = mbxH_wp_get_bytes(&r, WP_MAX_PATH, &c->a);
    c->b_len = mbxH_wp_get_bytes(&r, WP_MAX_PATH, &c->b);
    break;
  case MBXH_OP_EXEC_RUN:
    if (get_exec_request(&r, c, why, why_size) != 0) return -1;
    break;
  case MBXH_OP_STDIN_READ:
    c->i2 = (int64_t)mbxH_wp_get_u64(&r);
    if (!r.bad && (c->i2 < 0 || c->i2 > (int64_t)MBXH_WP_MAX_IO)) {
      say(why, why_size, "stdin_read of %lld bytes", (long long)c->i2);
      return -1;
    }
    break;
  case MBXH_OP_COUNT:
    break;
  }
  if (mbxH_wp_end(&r) != 0) {
    mbxH_wp_call_free(c);
    say(why, why_size, "a malformed port call (operation %u, %zu bytes): a field past the "
        "frame's end or a bound, or bytes left over", op, n);
    return -1;
  }
  return 0;
}

void mbxH_wp_call_free(mbxH_wp_call *c) {
  free(c->zbuf);
  c->zbuf = NULL;
  free(c->strs);
  c->strs = NULL;
}

/* ---- exec_run ---- */

void mbxH_wp_put_exec_request(mbxH_wp_writer *w, const mbxC_exec_request *req) {
  mbxH_wp_u32(w, (uint32_t)req->argc);
  for (size_t i = 0; i < req->argc; i++) mbxH_wp_bytes(w, req->argv[i], strlen(req->argv[i]));
  mbxH_wp_u8(w, req->stdin_bytes != NULL);
  mbxH_wp_bytes(w, req->stdin_bytes ? req->stdin_bytes : "", req->stdin_bytes ? req->stdin_len : 0);
  mbxH_wp_u8(w, req->cwd != NULL);
  mbxH_wp_bytes(w, req->cwd ? req->cwd : "", req->cwd ? strlen(req->cwd) : 0);
  mbxH_wp_u32(w, (uint32_t)req->envc);
  for (size_t i = 0; i < req->envc; i++) mbxH_wp_bytes(w, req->env[i], strlen(req->env[i]));
  mbxH_wp_u64(w, req->timeout_ms);
}

/* One pass over an exec request's fields: the first (out NULL) checks each and counts the
   bytes of the copies; the second (out the copies' buffer) makes them. The stdlib sends only
   requests that pass (stdlib/proc.c): one that does not is a worker misbehaving. */
static int exec_fields(mbxH_wp_reader *r, mbxH_wp_call *c, char *out, size_t *total, char *why,
                       size_t why_size) {
  mbxC_exec_request *req = &c->exec;
  const char *p;
  size_t n;
  *total = 0;
  req->argc = mbxH_wp_get_u32(r);
  if (!r->bad && (req->argc == 0 || req->argc > MBXC_EXEC_MAX_ARGS)) {
    say(why, why_size, "exec_run with %zu arguments (1 to %d)", req->argc, MBXC_EXEC_MAX_ARGS);
    return -1;
  }
  for (size_t i = 0; i < req->argc && !r->bad; i++) {
    n = mbxH_wp_get_bytes(r, MBXH_WP_MAX_FRAME, &p);
    if (!r->bad && memchr(p, '\0', n)) {
      say(why, why_size, "exec_run argument %zu holds a NUL byte", i + 1);
      return -1;
    }
    if (out) {
      memcpy(out + *total, p, n);
      out[*total + n] = '\0';
      c->strs[i] = out + *total;
    }
    *total += n + 1;
  }
  uint8_t has_stdin = mbxH_wp_get_u8(r);
  req->stdin_len = mbxH_wp_get_bytes(r, MBXH_WP_MAX_FRAME, &req->stdin_bytes);
  if (!has_stdin) req->stdin_bytes = NULL;
  uint8_t has_cwd = mbxH_wp_get_u8(r);
  n = mbxH_wp_get_bytes(r, WP_MAX_PATH, &p);
  if (!r->bad && (has_stdin > 1 || has_cwd > 1 || (!has_stdin && req->stdin_len) ||
                  (!has_cwd && n) || memchr(p, '\0', n))) {
    say(why, why_size, "exec_run with a malformed stdin or working directory");
    return -1;
  }
  req->cwd = NULL;
  if (has_cwd && out) {
    memcpy(out + *total, p, n);
    out[*total + n] = '\0';
    req->cwd = out + *total;
  }
  if (has_cwd) *total += n + 1;
  req->envc = mbxH_wp_get_u32(r);
  if (!r->bad && req->envc > MBXH_WP_MAX_EXEC_ENV) {
    say(why, why_size, "exec_run with %zu environment entries (at most %d)", req->envc,
        MBXH_WP_MAX_EXEC_ENV);
    return -1;
  }
  for (size_t i = 0; i < req->envc && !r->bad; i++) {
    n = mbxH_wp_get_bytes(r, MBXH_WP_MAX_FRAME, &p);
    const char *eq = r->bad ? NULL : memchr(p, '=', n);
    if (!r->bad && (eq == NULL || eq == p || memchr(p, '\0', n))) {
      say(why, why_size, "exec_run environment entry %zu is not NAME=VALUE", i + 1);
      return -1;
    }
    if (out) {
      memcpy(out + *total, p, n);
      out[*total + n] = '\0';
      c->strs[req->argc + i] = out + *total;
    }
    *total += n + 1;
  }
  req->timeout_ms = mbxH_wp_get_u64(r);
  return 0;
}

static int get_exec_request(mbxH_wp_reader *r, mbxH_wp_call *c, char *why, size_t why_size) {
  mbxH_wp_reader again = *r;
  size_t total;
  if (exec_fields(r, c, NULL, &total, why, why_size) != 0) return -1;
  if (r->bad) return 0; /* reported as malformed by the caller */
  size_t nstrs = (size_t)c->exec.argc + c->exec.envc;
  c->strs = malloc((nstrs ? nstrs : 1) * sizeof *c->strs); /* malloc(0) may be NULL */
  c->zbuf = malloc(total ? total : 1);
  if (c->strs == NULL || c->zbuf == NULL) {
    mbxH_wp_call_free(c);
    say(why, why_size, "out of host memory for an exec request");
    return -1;
  }
  exec_fields(&again, c, c->zbuf, &total, why, why_size);
  c->exec.argv = c->strs;
  c->exec.env = c->exec.envc ? c->strs + c->exec.argc : NULL;
  return 0;
}

void mbxH_wp_put_exec_result(mbxH_wp_writer *w, const mbxC_exec_result *res) {
  mbxH_wp_u64(w, (uint64_t)(int64_t)res->exit_code);
  mbxH_wp_u64(w, (uint64_t)(int64_t)res->signal);
  mbxH_wp_bytes(w, res->out ? res->out : "", res->out ? res->out_len : 0);
  mbxH_wp_bytes(w, res->err ? res->err : "", res->err ? res->err_len : 0);
  mbxH_wp_u8(w, (uint8_t)(res->timed_out != 0));
  mbxH_wp_u8(w, (uint8_t)(res->truncated != 0));
  mbxH_wp_u64(w, res->wall_ms);
  mbxH_wp_u32(w, res->limits);
  mbxH_wp_u8(w, (uint8_t)(res->memory_limit != 0));
  mbxH_wp_u8(w, (uint8_t)(res->pids_limit != 0));
  mbxH_wp_u64(w, res->changes);
  mbxH_wp_u8(w, (uint8_t)(res->changes_refused != 0));
  mbxH_wp_bytes(w, res->changes_error, strnlen(res->changes_error, sizeof res->changes_error));
}

int mbxH_wp_get_exec_result(mbxH_wp_reader *r, mbxC_exec_result *res) {
  memset(res, 0, sizeof *res);
  int64_t code = (int64_t)mbxH_wp_get_u64(r), sig = (int64_t)mbxH_wp_get_u64(r);
  if (code < INT32_MIN || code > INT32_MAX || sig < 0 || sig > INT32_MAX) r->bad = 1;
  res->exit_code = (int)code;
  res->signal = (int)sig;
  res->out_len = mbxH_wp_get_bytes(r, MBXH_WP_MAX_FRAME, &res->out);
  res->err_len = mbxH_wp_get_bytes(r, MBXH_WP_MAX_FRAME, &res->err);
  res->timed_out = mbxH_wp_get_u8(r);
  res->truncated = mbxH_wp_get_u8(r);
  res->wall_ms = mbxH_wp_get_u64(r);
  res->limits = mbxH_wp_get_u32(r);
  res->memory_limit = mbxH_wp_get_u8(r);
  res->pids_limit = mbxH_wp_get_u8(r);
  res->changes = mbxH_wp_get_u64(r);
  res->changes_refused = mbxH_wp_get_u8(r);
  const char *p;
  size_t n = mbxH_wp_get_bytes(r, sizeof res->changes_error - 1, &p);
  memcpy(res->changes_error, p, n);
  res->changes_error[n] = '\0';
  return r->bad ? -1 : 0;
}
