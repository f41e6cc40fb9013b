/* capabilities/port_wire.c -- the frames of port operations: the fields, and per operation its
   call and reply written and read, every size and count checked (capabilities/port_wire.h). */
#include "capabilities/port_wire.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "capabilities/exec.h" /* MBXC_EXEC_MAX_ARGS */
#include "include/moonbox.h"   /* MBX_HOST_ARGS_MAX */

void mbxC_wire_why(char *why, size_t size, const char *fmt, ...) {
  if (why == NULL || size == 0) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, size, fmt, ap);
  va_end(ap);
}

/* ---- writing ---- */

static void put(mbxC_wire_writer *w, const void *p, size_t n) {
  if (w->failed) return;
  if (n > MBXC_WIRE_MAX_FRAME + (size_t)MBXC_WIRE_HEADER - w->len) {
    w->failed = 1;
    return;
  }
  if (w->len + n > w->cap) {
    size_t cap = w->cap ? w->cap : 256;
    while (cap < w->len + n)
      cap *= 2;
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

void mbxC_wire_begin(mbxC_wire_writer *w, uint16_t version, uint16_t type) {
  w->len = 0;
  w->failed = 0;
  uint32_t zero = 0;
  put(w, &version, 2);
  put(w, &type, 2);
  put(w, &zero, 4);
}

void mbxC_wire_u8(mbxC_wire_writer *w, uint8_t v) {
  put(w, &v, 1);
}

void mbxC_wire_u32(mbxC_wire_writer *w, uint32_t v) {
  put(w, &v, 4);
}

void mbxC_wire_u64(mbxC_wire_writer *w, uint64_t v) {
  put(w, &v, 8);
}

void mbxC_wire_bytes(mbxC_wire_writer *w, const void *p, size_t n) {
  if (n > MBXC_WIRE_MAX_FRAME) {
    w->failed = 1;
    return;
  }
  mbxC_wire_u32(w, (uint32_t)n);
  put(w, p, n);
}

int mbxC_wire_finish(mbxC_wire_writer *w) {
  if (w->failed || w->len < MBXC_WIRE_HEADER) return -1;
  uint32_t n = (uint32_t)(w->len - MBXC_WIRE_HEADER);
  memcpy(w->data + 4, &n, 4);
  return 0;
}

void mbxC_wire_writer_free(mbxC_wire_writer *w) {
  free(w->data);
  *w = (mbxC_wire_writer){0};
}

/* ---- reading ---- */

int mbxC_wire_header(const unsigned char hdr[MBXC_WIRE_HEADER], uint16_t version,
                     int (*known)(unsigned type), uint32_t max, unsigned *type, uint32_t *len,
                     char *why, size_t why_size) {
  uint16_t v, t;
  uint32_t n;
  memcpy(&v, hdr, 2);
  memcpy(&t, hdr + 2, 2);
  memcpy(&n, hdr + 4, 4);
  if (v != version) {
    mbxC_wire_why(why, why_size, "frame of protocol version %u (expected %u)", v, version);
    return -1;
  }
  if (!known(t)) {
    mbxC_wire_why(why, why_size, "unknown frame type %u", t);
    return -1;
  }
  if (n > max || n > MBXC_WIRE_MAX_FRAME) {
    mbxC_wire_why(why, why_size, "frame of %u bytes, past the %u allowed", n,
                  max < MBXC_WIRE_MAX_FRAME ? max : MBXC_WIRE_MAX_FRAME);
    return -1;
  }
  *type = t;
  *len = n;
  return 0;
}

void mbxC_wire_reader_init(mbxC_wire_reader *r, const void *p, size_t n) {
  r->p = p;
  r->left = n;
  r->bad = 0;
}

static int take(mbxC_wire_reader *r, void *out, size_t n) {
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

uint8_t mbxC_wire_get_u8(mbxC_wire_reader *r) {
  uint8_t v;
  take(r, &v, 1);
  return v;
}

uint32_t mbxC_wire_get_u32(mbxC_wire_reader *r) {
  uint32_t v;
  take(r, &v, 4);
  return v;
}

uint64_t mbxC_wire_get_u64(mbxC_wire_reader *r) {
  uint64_t v;
  take(r, &v, 8);
  return v;
}

size_t mbxC_wire_get_bytes(mbxC_wire_reader *r, size_t max, const char **p) {
  uint32_t n = mbxC_wire_get_u32(r);
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

int mbxC_wire_end(const mbxC_wire_reader *r) {
  return r->bad || r->left != 0 ? -1 : 0;
}

int mbxC_wire_json_ok(const char *text, size_t len) {
  json_error_t e;
  json_t *j = json_loadb(text, len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &e);
  if (j == NULL) return 0;
  json_decref(j);
  return 1;
}

/* ---- the common parts of a call and of a reply ---- */

static int handle_ok(int64_t h) {
  return h >= 0 && h <= INT32_MAX;
}

static int op_known(unsigned op) {
  switch (op) {
#define WIRE_KNOWN_CASE(NAME, member, number, callback, outside_run) case MBXC_OP_##NAME:
    MBXC_PORT_OPS(WIRE_KNOWN_CASE)
#undef WIRE_KNOWN_CASE
    return 1;
  default:
    return 0;
  }
}

/* The calling side: start op's call (its header, the op, the wait's deadline). */
static mbxC_wire_writer *call_begin(mbxC_wire_client *cl, mbxC_port_op op, const mbxC_wait *wait) {
  cl->transport->begin(cl->transport->ctx, &cl->w);
  mbxC_wire_u8(&cl->w, (uint8_t)op);
  mbxC_wire_u64(&cl->w, wait ? wait->deadline_ns : 0);
  return &cl->w;
}

/* Send the call, read the reply into a reader over it. */
static void call_end(mbxC_wire_client *cl, mbxC_wire_reader *r) {
  const unsigned char *p;
  size_t n;
  cl->transport->round_trip(cl->transport->ctx, &cl->w, &p, &n);
  mbxC_wire_reader_init(r, p, n);
}

/* Bytes of the reply as a NUL-terminated string that stays valid until the next call. */
static const char *reply_bytes(mbxC_wire_client *cl, mbxC_wire_reader *r, size_t *len) {
  const char *p;
  size_t n = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &p);
  if (r->bad) cl->transport->broken(cl->transport->ctx);
  char *c = realloc(cl->copy, n + 1);
  if (c == NULL) cl->transport->broken(cl->transport->ctx);
  memcpy(c, p, n);
  c[n] = '\0';
  cl->copy = c;
  *len = n;
  return c;
}

/* The status that begins an fs or exec reply: the serving side writes it ... */
static int put_status(mbxC_wire_writer *w, int rc, const mbxC_port_error *e) {
  mbxC_wire_u8(w, rc != 0);
  if (rc != 0) {
    mbxC_wire_u32(w, (uint32_t)e->errnum);
    mbxC_wire_bytes(w, e->message, strnlen(e->message, sizeof e->message));
  }
  return rc;
}

/* ... and the calling side reads it: 0, or -1 with *e filled. */
static int get_status(mbxC_wire_client *cl, mbxC_wire_reader *r, mbxC_port_error *e) {
  if (mbxC_wire_get_u8(r) == 0) return 0;
  e->errnum = (int)mbxC_wire_get_u32(r);
  const char *p;
  size_t n = mbxC_wire_get_bytes(r, sizeof e->message - 1, &p);
  if (r->bad) cl->transport->broken(cl->transport->ctx);
  memcpy(e->message, p, n);
  e->message[n] = '\0';
  return -1;
}

/* The serving side's buffer for a read the caller asked for (c->i2 bytes, bounded by the
   decoder), or NULL with *e saying the host is out of memory. */
static char *read_buffer(const mbxC_wire_call *c, mbxC_port_error *e) {
  char *buf = malloc(c->i2 ? (size_t)c->i2 : 1);
  if (buf == NULL) {
    e->errnum = 12;
    snprintf(e->message, sizeof e->message, "Cannot allocate memory (host)");
  }
  return buf;
}

/* A read's reply (fs_read, stdin_read): its status, then at most len bytes into buf. */
static int reply_read(mbxC_wire_client *cl, mbxC_wire_reader *r, char *buf, size_t len, size_t *got,
                      mbxC_port_error *e) {
  if (get_status(cl, r, e) != 0) return -1;
  const char *p;
  size_t n = mbxC_wire_get_bytes(r, len, &p);
  if (r->bad) cl->transport->broken(cl->transport->ctx);
  memcpy(buf, p, n);
  *got = n;
  return 0;
}

/*
** ---- the operations ----
** Each in the order of MBXC_PORT_OPS: its call (the calling side's port operation, which
** writes the call and reads the reply), its checked decoding on the serving side (in
** mbxC_wire_get_call), and its answer (mbxC_wire_answer_<member>: the port's operation called,
** the reply written).
*/

/* -- wall_time: no arguments; the reply is the u64 time -- */

static int64_t call_wall_time(void *ud) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_WALL_TIME, NULL);
  call_end(cl, &r);
  return (int64_t)mbxC_wire_get_u64(&r);
}

void mbxC_wire_answer_wall_time(const mbxC_port *port, const mbxC_wire_call *c,
                                const mbxC_wait *wait, mbxC_wire_writer *w) {
  (void)c;
  (void)wait;
  mbxC_wire_u64(w, (uint64_t)port->wall_time(port->ud));
}

/* -- random_seed: no arguments; the reply is two u64 words -- */

static void call_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_RANDOM_SEED, NULL);
  call_end(cl, &r);
  seed[0] = mbxC_wire_get_u64(&r);
  seed[1] = mbxC_wire_get_u64(&r);
}

void mbxC_wire_answer_random_seed(const mbxC_port *port, const mbxC_wire_call *c,
                                  const mbxC_wait *wait, mbxC_wire_writer *w) {
  (void)c;
  (void)wait;
  uint64_t seed[2];
  port->random_seed(port->ud, seed);
  mbxC_wire_u64(w, seed[0]);
  mbxC_wire_u64(w, seed[1]);
}

/* -- env_get: the name; the reply is u8 defined, then the value's bytes if it is -- */

static const char *call_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_ENV_GET, NULL);
  mbxC_wire_bytes(&cl->w, name, name_len);
  call_end(cl, &r);
  if (!mbxC_wire_get_u8(&r)) return NULL;
  return reply_bytes(cl, &r, value_len);
}

void mbxC_wire_answer_env_get(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  (void)wait;
  size_t len = 0;
  const char *v = port->env_get(port->ud, c->a, c->a_len, &len);
  mbxC_wire_u8(w, v != NULL);
  if (v) mbxC_wire_bytes(w, v, len);
}

/* -- host_call: u64 index, the JSON array of arguments; the reply is u8 error, the bytes -- */

static mbxC_call_result call_host_call(void *ud, size_t index, const char *args, size_t args_len,
                                       const mbxC_wait *wait, const char **reply,
                                       size_t *reply_len) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_HOST_CALL, wait);
  mbxC_wire_u64(&cl->w, index);
  mbxC_wire_bytes(&cl->w, args, args_len);
  call_end(cl, &r);
  uint8_t res = mbxC_wire_get_u8(&r);
  *reply = reply_bytes(cl, &r, reply_len);
  return res ? MBXC_CALL_ERROR : MBXC_CALL_VALUE;
}

static int get_host_call(mbxC_wire_reader *r, const mbxC_grants *g, mbxC_wire_call *c, char *why,
                         size_t why_size) {
  c->index = mbxC_wire_get_u64(r);
  c->a_len = mbxC_wire_get_bytes(r, MBX_HOST_ARGS_MAX, &c->a);
  if (!r->bad && (c->index >= g->fn_count || g->fns[c->index].kind != MBXC_FN_SYNC)) {
    mbxC_wire_why(why, why_size, "host call of function %llu, not a granted synchronous function",
                  (unsigned long long)c->index);
    return -1;
  }
  /* What the host's callback is promised: one JSON array (of at most MBX_HOST_ARGS_MAX
     bytes, the bound above), as in-process mode encodes it. */
  if (!r->bad && (c->a_len == 0 || c->a[0] != '[' || !mbxC_wire_json_ok(c->a, c->a_len))) {
    mbxC_wire_why(why, why_size, "host call arguments that are not one JSON array");
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_host_call(const mbxC_port *port, const mbxC_wire_call *c,
                                const mbxC_wait *wait, mbxC_wire_writer *w) {
  const char *reply = "";
  size_t len = 0;
  mbxC_call_result r =
      port->host_call(port->ud, (size_t)c->index, c->a, c->a_len, wait, &reply, &len);
  mbxC_wire_u8(w, r == MBXC_CALL_ERROR);
  mbxC_wire_bytes(w, reply, len);
}

/* -- native_call: u64 index, u32 count, each argument ('z' as bytes, any other as its u64
   word); the reply is u8 error, the result's word (0 on error), the bytes -- */

static mbxC_call_result call_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                         const mbxC_wait *wait, mbxC_ffi_value *ret,
                                         const char **bytes, size_t *len) {
  mbxC_wire_client *cl = ud;
  const mbxC_ffi_sig *sig = &cl->grants->fns[index].sig;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_NATIVE_CALL, wait);
  mbxC_wire_u64(&cl->w, index);
  mbxC_wire_u32(&cl->w, (uint32_t)sig->nargs);
  for (int i = 0; i < sig->nargs; i++) {
    if (sig->args[i] == 'z')
      mbxC_wire_bytes(&cl->w, args[i].z, strlen(args[i].z));
    else
      mbxC_wire_u64(&cl->w, mbxC_ffi_word(sig->args[i], &args[i]));
  }
  call_end(cl, &r);
  uint8_t res = mbxC_wire_get_u8(&r);
  uint64_t word = mbxC_wire_get_u64(&r);
  *bytes = reply_bytes(cl, &r, len);
  if (res == 0 && !mbxC_ffi_from_word(sig->ret, word, ret))
    cl->transport->broken(cl->transport->ctx);
  return res ? MBXC_CALL_ERROR : MBXC_CALL_VALUE;
}

static int get_native_call(mbxC_wire_reader *r, const mbxC_grants *g, mbxC_wire_call *c, char *why,
                           size_t why_size) {
  c->index = mbxC_wire_get_u64(r);
  uint32_t nargs = mbxC_wire_get_u32(r);
  if (r->bad) return 0; /* reported as malformed by the caller */
  if (c->index >= g->fn_count || g->fns[c->index].kind != MBXC_FN_NATIVE) {
    mbxC_wire_why(why, why_size, "native call of function %llu, not a granted native function",
                  (unsigned long long)c->index);
    return -1;
  }
  const mbxC_ffi_sig *sig = &g->fns[c->index].sig;
  if (nargs != (uint32_t)sig->nargs) {
    mbxC_wire_why(why, why_size, "native call with %u arguments, its signature takes %d", nargs,
                  sig->nargs);
    return -1;
  }
  c->sig = sig;
  /* The 'z' strings are copied out NUL-terminated, after the frame is known to be whole. */
  const char *z[MBXC_FFI_MAX_ARGS];
  size_t zlen[MBXC_FFI_MAX_ARGS], ztotal = 0;
  for (int i = 0; i < sig->nargs; i++) {
    if (sig->args[i] == 'z') {
      zlen[i] = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_IO, &z[i]);
      if (!r->bad && memchr(z[i], '\0', zlen[i])) {
        mbxC_wire_why(why, why_size, "native call argument %d holds a NUL byte", i + 1);
        return -1;
      }
      ztotal += zlen[i] + 1;
    } else {
      uint64_t word = mbxC_wire_get_u64(r);
      if (!r->bad && !mbxC_ffi_from_word(sig->args[i], word, &c->args[i])) {
        mbxC_wire_why(why, why_size, "native call argument %d is not a value of type %s", i + 1,
                      mbxC_ffi_type_name(sig->args[i]));
        return -1;
      }
    }
  }
  if (r->bad || ztotal == 0) return 0;
  c->zbuf = malloc(ztotal);
  if (c->zbuf == NULL) {
    mbxC_wire_why(why, why_size, "out of host memory for a native call's arguments");
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
  return 0;
}

void mbxC_wire_answer_native_call(const mbxC_port *port, const mbxC_wire_call *c,
                                  const mbxC_wait *wait, mbxC_wire_writer *w) {
  const char *bytes = "";
  size_t len = 0;
  mbxC_ffi_value ret;
  memset(&ret, 0, sizeof ret);
  mbxC_call_result r =
      port->native_call(port->ud, (size_t)c->index, c->args, wait, &ret, &bytes, &len);
  mbxC_wire_u8(w, r == MBXC_CALL_ERROR);
  mbxC_wire_u64(w, r == MBXC_CALL_ERROR ? 0 : mbxC_ffi_word(c->sig->ret, &ret));
  mbxC_wire_bytes(w, bytes, bytes ? len : 0);
}

/* -- fs_open: the path, u64 flags; the reply is the status, then the u64 handle -- */

static int call_fs_open(void *ud, const char *path, size_t path_len, int flags,
                        const mbxC_wait *wait, int *handle, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_FS_OPEN, wait);
  mbxC_wire_bytes(&cl->w, path, path_len);
  mbxC_wire_u64(&cl->w, (uint64_t)flags);
  call_end(cl, &r);
  if (get_status(cl, &r, e) != 0) return -1;
  *handle = (int)mbxC_wire_get_u64(&r);
  return 0;
}

static int get_fs_open(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->a_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_PATH, &c->a);
  c->i1 = (int64_t)mbxC_wire_get_u64(r);
  /* Every MBXC_FS_* bit, the module-read ones included (capabilities/port.h). */
  if (!r->bad && (c->i1 < 0 || c->i1 > 255)) {
    mbxC_wire_why(why, why_size, "fs_open with flags %lld", (long long)c->i1);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_fs_open(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  int h = -1;
  int rc = port->fs_open(port->ud, c->a, c->a_len, (int)c->i1, wait, &h, &e);
  if (put_status(w, rc, &e) == 0) mbxC_wire_u64(w, (uint64_t)(int64_t)h);
}

/* -- fs_read: u64 handle, u64 length (at most MBXC_WIRE_MAX_IO); the reply is the status,
   then the bytes -- */

static int call_fs_read(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait,
                        size_t *got, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  if (len > MBXC_WIRE_MAX_IO) len = MBXC_WIRE_MAX_IO;
  call_begin(cl, MBXC_OP_FS_READ, wait);
  mbxC_wire_u64(&cl->w, (uint64_t)handle);
  mbxC_wire_u64(&cl->w, len);
  call_end(cl, &r);
  return reply_read(cl, &r, buf, len, got, e);
}

static int get_fs_read(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->i1 = (int64_t)mbxC_wire_get_u64(r);
  c->i2 = (int64_t)mbxC_wire_get_u64(r);
  if (!r->bad && (!handle_ok(c->i1) || c->i2 < 0 || c->i2 > (int64_t)MBXC_WIRE_MAX_IO)) {
    mbxC_wire_why(why, why_size, "fs_read of %lld bytes from handle %lld", (long long)c->i2,
                  (long long)c->i1);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_fs_read(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  size_t got = 0;
  char *buf = read_buffer(c, &e);
  int rc = -1;
  if (buf) {
    rc = port->fs_read(port->ud, (int)c->i1, buf, (size_t)c->i2, wait, &got, &e);
    if (got > (size_t)c->i2) got = (size_t)c->i2;
  }
  if (put_status(w, rc, &e) == 0) mbxC_wire_bytes(w, buf, got);
  free(buf);
}

/* -- fs_write: u64 handle, the bytes (at most MBXC_WIRE_MAX_IO); the reply is the status,
   then the u64 count written -- */

static int call_fs_write(void *ud, int handle, const char *buf, size_t len, const mbxC_wait *wait,
                         size_t *put_len, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  if (len > MBXC_WIRE_MAX_IO) len = MBXC_WIRE_MAX_IO;
  call_begin(cl, MBXC_OP_FS_WRITE, wait);
  mbxC_wire_u64(&cl->w, (uint64_t)handle);
  mbxC_wire_bytes(&cl->w, buf, len);
  call_end(cl, &r);
  if (get_status(cl, &r, e) != 0) return -1;
  uint64_t n = mbxC_wire_get_u64(&r);
  *put_len = n > len ? len : (size_t)n;
  return 0;
}

static int get_fs_write(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->i1 = (int64_t)mbxC_wire_get_u64(r);
  c->a_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_IO, &c->a);
  if (!r->bad && !handle_ok(c->i1)) {
    mbxC_wire_why(why, why_size, "fs_write to handle %lld", (long long)c->i1);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_fs_write(const mbxC_port *port, const mbxC_wire_call *c,
                               const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  size_t put_len = 0;
  int rc = port->fs_write(port->ud, (int)c->i1, c->a, c->a_len, wait, &put_len, &e);
  if (put_status(w, rc, &e) == 0) mbxC_wire_u64(w, put_len);
}

/* -- fs_seek: u64 handle, u64 whence (0-2), u64 offset; the reply is the status, then the
   u64 position -- */

static int call_fs_seek(void *ud, int handle, int whence, int64_t offset, int64_t *pos,
                        mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_FS_SEEK, NULL);
  mbxC_wire_u64(&cl->w, (uint64_t)handle);
  mbxC_wire_u64(&cl->w, (uint64_t)whence);
  mbxC_wire_u64(&cl->w, (uint64_t)offset);
  call_end(cl, &r);
  if (get_status(cl, &r, e) != 0) return -1;
  *pos = (int64_t)mbxC_wire_get_u64(&r);
  return 0;
}

static int get_fs_seek(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->i1 = (int64_t)mbxC_wire_get_u64(r);
  c->i2 = (int64_t)mbxC_wire_get_u64(r);
  c->i3 = (int64_t)mbxC_wire_get_u64(r);
  if (!r->bad && (!handle_ok(c->i1) || c->i2 < 0 || c->i2 > 2)) {
    mbxC_wire_why(why, why_size, "fs_seek on handle %lld with whence %lld", (long long)c->i1,
                  (long long)c->i2);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_fs_seek(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  (void)wait;
  mbxC_port_error e = {0, ""};
  int64_t pos = 0;
  int rc = port->fs_seek(port->ud, (int)c->i1, (int)c->i2, c->i3, &pos, &e);
  if (put_status(w, rc, &e) == 0) mbxC_wire_u64(w, (uint64_t)pos);
}

/* -- fs_close: u64 handle; the reply is the status -- */

static int call_fs_close(void *ud, int handle, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_FS_CLOSE, NULL);
  mbxC_wire_u64(&cl->w, (uint64_t)handle);
  call_end(cl, &r);
  return get_status(cl, &r, e);
}

static int get_fs_close(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->i1 = (int64_t)mbxC_wire_get_u64(r);
  if (!r->bad && !handle_ok(c->i1)) {
    mbxC_wire_why(why, why_size, "fs_close of handle %lld", (long long)c->i1);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_fs_close(const mbxC_port *port, const mbxC_wire_call *c,
                               const mbxC_wait *wait, mbxC_wire_writer *w) {
  (void)wait;
  mbxC_port_error e = {0, ""};
  put_status(w, port->fs_close(port->ud, (int)c->i1, &e), &e);
}

/* -- fs_list, fs_stat, fs_mkdir, fs_remove: the path; the reply is the status, then (list)
   the NUL-separated names or (stat) u8 is_dir, u8 is_file, u64 size, u64 mtime, u8 writable -- */

static int path_call(mbxC_wire_client *cl, mbxC_port_op op, const char *path, size_t len,
                     const mbxC_wait *wait, mbxC_wire_reader *r, mbxC_port_error *e) {
  call_begin(cl, op, wait);
  mbxC_wire_bytes(&cl->w, path, len);
  call_end(cl, r);
  return get_status(cl, r, e);
}

static int get_path(mbxC_wire_reader *r, mbxC_wire_call *c) {
  c->a_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_PATH, &c->a);
  return 0;
}

static int call_fs_list(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                        const char **names, size_t *names_len, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  if (path_call(cl, MBXC_OP_FS_LIST, path, path_len, wait, &r, e) != 0) return -1;
  *names = reply_bytes(cl, &r, names_len);
  return 0;
}

void mbxC_wire_answer_fs_list(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  const char *names = "";
  size_t names_len = 0;
  int rc = port->fs_list(port->ud, c->a, c->a_len, wait, &names, &names_len, &e);
  if (put_status(w, rc, &e) == 0) mbxC_wire_bytes(w, names, names_len);
}

static int call_fs_stat(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                        mbxC_fs_stat *st, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  if (path_call(cl, MBXC_OP_FS_STAT, path, path_len, wait, &r, e) != 0) return -1;
  st->is_dir = mbxC_wire_get_u8(&r);
  st->is_file = mbxC_wire_get_u8(&r);
  st->size = mbxC_wire_get_u64(&r);
  st->mtime = (int64_t)mbxC_wire_get_u64(&r);
  st->writable = mbxC_wire_get_u8(&r);
  return 0;
}

void mbxC_wire_answer_fs_stat(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                              mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  mbxC_fs_stat st = {0};
  if (put_status(w, port->fs_stat(port->ud, c->a, c->a_len, wait, &st, &e), &e) != 0) return;
  mbxC_wire_u8(w, (uint8_t)(st.is_dir != 0));
  mbxC_wire_u8(w, (uint8_t)(st.is_file != 0));
  mbxC_wire_u64(w, st.size);
  mbxC_wire_u64(w, (uint64_t)st.mtime);
  mbxC_wire_u8(w, (uint8_t)(st.writable != 0));
}

static int call_fs_mkdir(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                         mbxC_port_error *e) {
  mbxC_wire_reader r;
  return path_call(ud, MBXC_OP_FS_MKDIR, path, path_len, wait, &r, e);
}

void mbxC_wire_answer_fs_mkdir(const mbxC_port *port, const mbxC_wire_call *c,
                               const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  put_status(w, port->fs_mkdir(port->ud, c->a, c->a_len, wait, &e), &e);
}

static int call_fs_remove(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                          mbxC_port_error *e) {
  mbxC_wire_reader r;
  return path_call(ud, MBXC_OP_FS_REMOVE, path, path_len, wait, &r, e);
}

void mbxC_wire_answer_fs_remove(const mbxC_port *port, const mbxC_wire_call *c,
                                const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  put_status(w, port->fs_remove(port->ud, c->a, c->a_len, wait, &e), &e);
}

/* -- fs_rename: from, to; the reply is the status -- */

static int call_fs_rename(void *ud, const char *from, size_t from_len, const char *to,
                          size_t to_len, const mbxC_wait *wait, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_FS_RENAME, wait);
  mbxC_wire_bytes(&cl->w, from, from_len);
  mbxC_wire_bytes(&cl->w, to, to_len);
  call_end(cl, &r);
  return get_status(cl, &r, e);
}

static int get_fs_rename(mbxC_wire_reader *r, mbxC_wire_call *c) {
  c->a_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_PATH, &c->a);
  c->b_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_PATH, &c->b);
  return 0;
}

void mbxC_wire_answer_fs_rename(const mbxC_port *port, const mbxC_wire_call *c,
                                const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  put_status(w, port->fs_rename(port->ud, c->a, c->a_len, c->b, c->b_len, wait, &e), &e);
}

/* -- exec_run: the request (mbxC_wire_put_exec_request); the reply is the status, then the
   result (mbxC_wire_put_exec_result). The serving side checks the request against the policy
   and runs the program in its exec backend; the caller only describes it (a jailed worker
   could not spawn anything anyway: its filter kills execve, fork and clone of a process). The
   result's bytes point into the reply, valid until the next call. -- */

static int call_exec_run(void *ud, const mbxC_exec_request *req, const mbxC_wait *wait,
                         mbxC_exec_result *res, mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  call_begin(cl, MBXC_OP_EXEC_RUN, wait);
  mbxC_wire_put_exec_request(&cl->w, req);
  call_end(cl, &r);
  if (get_status(cl, &r, e) != 0) return -1;
  if (mbxC_wire_get_exec_result(&r, res) != 0) cl->transport->broken(cl->transport->ctx);
  return 0;
}

static int get_exec_request(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size);

void mbxC_wire_answer_exec_run(const mbxC_port *port, const mbxC_wire_call *c,
                               const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  mbxC_exec_result res;
  memset(&res, 0, sizeof res);
  if (put_status(w, port->exec_run(port->ud, &c->exec, wait, &res, &e), &e) == 0)
    mbxC_wire_put_exec_result(w, &res);
}

/* -- stdin_read: u64 length (at most MBXC_WIRE_MAX_IO); the reply is the status, then the
   bytes. The serving side holds the host's bytes and how far the guest read. -- */

static int call_stdin_read(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                           mbxC_port_error *e) {
  mbxC_wire_client *cl = ud;
  mbxC_wire_reader r;
  if (len > MBXC_WIRE_MAX_IO) len = MBXC_WIRE_MAX_IO;
  call_begin(cl, MBXC_OP_STDIN_READ, wait);
  mbxC_wire_u64(&cl->w, len);
  call_end(cl, &r);
  return reply_read(cl, &r, buf, len, got, e);
}

static int get_stdin_read(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  c->i2 = (int64_t)mbxC_wire_get_u64(r);
  if (!r->bad && (c->i2 < 0 || c->i2 > (int64_t)MBXC_WIRE_MAX_IO)) {
    mbxC_wire_why(why, why_size, "stdin_read of %lld bytes", (long long)c->i2);
    return -1;
  }
  return 0;
}

void mbxC_wire_answer_stdin_read(const mbxC_port *port, const mbxC_wire_call *c,
                                 const mbxC_wait *wait, mbxC_wire_writer *w) {
  mbxC_port_error e = {0, ""};
  size_t got = 0;
  char *buf = read_buffer(c, &e);
  int rc = -1;
  if (buf) {
    rc = port->stdin_read(port->ud, buf, (size_t)c->i2, wait, &got, &e);
    if (got > (size_t)c->i2) got = (size_t)c->i2;
  }
  if (put_status(w, rc, &e) == 0) mbxC_wire_bytes(w, buf, got);
  free(buf);
}

/* ---- every operation ---- */

int mbxC_wire_get_call(const void *payload, size_t n, const mbxC_grants *g, mbxC_wire_call *c,
                       char *why, size_t why_size) {
  memset(c, 0, sizeof *c);
  mbxC_wire_reader r;
  mbxC_wire_reader_init(&r, payload, n);
  uint8_t op = mbxC_wire_get_u8(&r);
  c->deadline_ns = mbxC_wire_get_u64(&r);
  if (r.bad || !op_known(op)) {
    mbxC_wire_why(why, why_size, "unknown port operation %u", op);
    return -1;
  }
  c->op = (mbxC_port_op)op;
  int rc = 0;
  switch (c->op) {
  case MBXC_OP_WALL_TIME:
  case MBXC_OP_RANDOM_SEED:
    break;
  case MBXC_OP_ENV_GET:
  case MBXC_OP_FS_LIST:
  case MBXC_OP_FS_STAT:
  case MBXC_OP_FS_MKDIR:
  case MBXC_OP_FS_REMOVE:
    rc = get_path(&r, c);
    break;
  case MBXC_OP_HOST_CALL:
    rc = get_host_call(&r, g, c, why, why_size);
    break;
  case MBXC_OP_NATIVE_CALL:
    rc = get_native_call(&r, g, c, why, why_size);
    break;
  case MBXC_OP_FS_OPEN:
    rc = get_fs_open(&r, c, why, why_size);
    break;
  case MBXC_OP_FS_READ:
    rc = get_fs_read(&r, c, why, why_size);
    break;
  case MBXC_OP_FS_WRITE:
    rc = get_fs_write(&r, c, why, why_size);
    break;
  case MBXC_OP_FS_SEEK:
    rc = get_fs_seek(&r, c, why, why_size);
    break;
  case MBXC_OP_FS_CLOSE:
    rc = get_fs_close(&r, c, why, why_size);
    break;
  case MBXC_OP_FS_RENAME:
    rc = get_fs_rename(&r, c);
    break;
  case MBXC_OP_EXEC_RUN:
    rc = get_exec_request(&r, c, why, why_size);
    break;
  case MBXC_OP_STDIN_READ:
    rc = get_stdin_read(&r, c, why, why_size);
    break;
  case MBXC_OP_COUNT:
    break;
  }
  if (rc != 0) return -1;
  if (mbxC_wire_end(&r) != 0) {
    mbxC_wire_call_free(c);
    mbxC_wire_why(why, why_size,
                  "a malformed port call (operation %u, %zu bytes): a field past the "
                  "frame's end or a bound, or bytes left over",
                  op, n);
    return -1;
  }
  return 0;
}

void mbxC_wire_call_free(mbxC_wire_call *c) {
  free(c->zbuf);
  c->zbuf = NULL;
  free(c->strs);
  c->strs = NULL;
}

void mbxC_wire_client_ops(mbxC_port *port) {
#define WIRE_CLIENT_OP(NAME, member, number, callback, outside_run) port->member = call_##member;
  MBXC_PORT_OPS(WIRE_CLIENT_OP)
#undef WIRE_CLIENT_OP
}

void mbxC_wire_client_free(mbxC_wire_client *cl) {
  mbxC_wire_writer_free(&cl->w);
  free(cl->copy);
  cl->copy = NULL;
}

/* ---- exec_run's request and result ---- */

void mbxC_wire_put_exec_request(mbxC_wire_writer *w, const mbxC_exec_request *req) {
  mbxC_wire_u32(w, (uint32_t)req->argc);
  for (size_t i = 0; i < req->argc; i++)
    mbxC_wire_bytes(w, req->argv[i], strlen(req->argv[i]));
  mbxC_wire_u8(w, req->stdin_bytes != NULL);
  mbxC_wire_bytes(w, req->stdin_bytes ? req->stdin_bytes : "",
                  req->stdin_bytes ? req->stdin_len : 0);
  mbxC_wire_u8(w, req->cwd != NULL);
  mbxC_wire_bytes(w, req->cwd ? req->cwd : "", req->cwd ? strlen(req->cwd) : 0);
  mbxC_wire_u32(w, (uint32_t)req->envc);
  for (size_t i = 0; i < req->envc; i++)
    mbxC_wire_bytes(w, req->env[i], strlen(req->env[i]));
  mbxC_wire_u64(w, req->timeout_ms);
}

/* One pass over an exec request's fields: the first (out NULL) checks each and counts the
   bytes of the copies; the second (out the copies' buffer) makes them. The stdlib sends only
   requests that pass (stdlib/proc.c): one that does not is a worker misbehaving. */
static int exec_fields(mbxC_wire_reader *r, mbxC_wire_call *c, char *out, size_t *total, char *why,
                       size_t why_size) {
  mbxC_exec_request *req = &c->exec;
  const char *p;
  size_t n;
  *total = 0;
  req->argc = mbxC_wire_get_u32(r);
  if (!r->bad && (req->argc == 0 || req->argc > MBXC_EXEC_MAX_ARGS)) {
    mbxC_wire_why(why, why_size, "exec_run with %zu arguments (1 to %d)", req->argc,
                  MBXC_EXEC_MAX_ARGS);
    return -1;
  }
  for (size_t i = 0; i < req->argc && !r->bad; i++) {
    n = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &p);
    if (!r->bad && memchr(p, '\0', n)) {
      mbxC_wire_why(why, why_size, "exec_run argument %zu holds a NUL byte", i + 1);
      return -1;
    }
    if (out) {
      memcpy(out + *total, p, n);
      out[*total + n] = '\0';
      c->strs[i] = out + *total;
    }
    *total += n + 1;
  }
  uint8_t has_stdin = mbxC_wire_get_u8(r);
  req->stdin_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &req->stdin_bytes);
  if (!has_stdin) req->stdin_bytes = NULL;
  uint8_t has_cwd = mbxC_wire_get_u8(r);
  n = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_PATH, &p);
  if (!r->bad && (has_stdin > 1 || has_cwd > 1 || (!has_stdin && req->stdin_len) ||
                  (!has_cwd && n) || memchr(p, '\0', n))) {
    mbxC_wire_why(why, why_size, "exec_run with a malformed stdin or working directory");
    return -1;
  }
  req->cwd = NULL;
  if (has_cwd && out) {
    memcpy(out + *total, p, n);
    out[*total + n] = '\0';
    req->cwd = out + *total;
  }
  if (has_cwd) *total += n + 1;
  req->envc = mbxC_wire_get_u32(r);
  if (!r->bad && req->envc > MBXC_WIRE_MAX_EXEC_ENV) {
    mbxC_wire_why(why, why_size, "exec_run with %zu environment entries (at most %d)", req->envc,
                  MBXC_WIRE_MAX_EXEC_ENV);
    return -1;
  }
  for (size_t i = 0; i < req->envc && !r->bad; i++) {
    n = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &p);
    const char *eq = r->bad ? NULL : memchr(p, '=', n);
    if (!r->bad && (eq == NULL || eq == p || memchr(p, '\0', n))) {
      mbxC_wire_why(why, why_size, "exec_run environment entry %zu is not NAME=VALUE", i + 1);
      return -1;
    }
    if (out) {
      memcpy(out + *total, p, n);
      out[*total + n] = '\0';
      c->strs[req->argc + i] = out + *total;
    }
    *total += n + 1;
  }
  req->timeout_ms = mbxC_wire_get_u64(r);
  return 0;
}

static int get_exec_request(mbxC_wire_reader *r, mbxC_wire_call *c, char *why, size_t why_size) {
  mbxC_wire_reader again = *r;
  size_t total;
  if (exec_fields(r, c, NULL, &total, why, why_size) != 0) return -1;
  if (r->bad) return 0; /* reported as malformed by the caller */
  size_t nstrs = (size_t)c->exec.argc + c->exec.envc;
  c->strs = malloc((nstrs ? nstrs : 1) * sizeof *c->strs); /* malloc(0) may be NULL */
  c->zbuf = malloc(total ? total : 1);
  if (c->strs == NULL || c->zbuf == NULL) {
    mbxC_wire_call_free(c);
    mbxC_wire_why(why, why_size, "out of host memory for an exec request");
    return -1;
  }
  exec_fields(&again, c, c->zbuf, &total, why, why_size);
  c->exec.argv = c->strs;
  c->exec.env = c->exec.envc ? c->strs + c->exec.argc : NULL;
  return 0;
}

void mbxC_wire_put_exec_result(mbxC_wire_writer *w, const mbxC_exec_result *res) {
  mbxC_wire_u64(w, (uint64_t)(int64_t)res->exit_code);
  mbxC_wire_u64(w, (uint64_t)(int64_t)res->signal);
  mbxC_wire_bytes(w, res->out ? res->out : "", res->out ? res->out_len : 0);
  mbxC_wire_bytes(w, res->err ? res->err : "", res->err ? res->err_len : 0);
  mbxC_wire_u8(w, (uint8_t)(res->timed_out != 0));
  mbxC_wire_u8(w, (uint8_t)(res->truncated != 0));
  mbxC_wire_u64(w, res->wall_ms);
  mbxC_wire_u32(w, res->limits);
  mbxC_wire_u8(w, (uint8_t)(res->memory_limit != 0));
  mbxC_wire_u8(w, (uint8_t)(res->pids_limit != 0));
  mbxC_wire_u64(w, res->changes);
  mbxC_wire_u8(w, (uint8_t)(res->changes_refused != 0));
  mbxC_wire_bytes(w, res->changes_error, strnlen(res->changes_error, sizeof res->changes_error));
}

int mbxC_wire_get_exec_result(mbxC_wire_reader *r, mbxC_exec_result *res) {
  memset(res, 0, sizeof *res);
  int64_t code = (int64_t)mbxC_wire_get_u64(r), sig = (int64_t)mbxC_wire_get_u64(r);
  if (code < INT32_MIN || code > INT32_MAX || sig < 0 || sig > INT32_MAX) r->bad = 1;
  res->exit_code = (int)code;
  res->signal = (int)sig;
  res->out_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &res->out);
  res->err_len = mbxC_wire_get_bytes(r, MBXC_WIRE_MAX_FRAME, &res->err);
  res->timed_out = mbxC_wire_get_u8(r);
  res->truncated = mbxC_wire_get_u8(r);
  res->wall_ms = mbxC_wire_get_u64(r);
  res->limits = mbxC_wire_get_u32(r);
  res->memory_limit = mbxC_wire_get_u8(r);
  res->pids_limit = mbxC_wire_get_u8(r);
  res->changes = mbxC_wire_get_u64(r);
  res->changes_refused = mbxC_wire_get_u8(r);
  const char *p;
  size_t n = mbxC_wire_get_bytes(r, sizeof res->changes_error - 1, &p);
  memcpy(res->changes_error, p, n);
  res->changes_error[n] = '\0';
  return r->bad ? -1 : 0;
}
