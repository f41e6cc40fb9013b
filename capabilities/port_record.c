/* capabilities/port_record.c -- record/replay as a layer over any port: live it forwards and
   logs each answer, replaying it answers from the log (capabilities/port_record.h). */
#include "capabilities/port_record.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "capabilities/hostfn.h"
#include "capabilities/policy.h"
#include "include/moonbox.h"

static const char replay_failed[] = "the snapshot replay diverged from its log";

void mbxC_port_record_diverge(mbxC_port_record *r, const char *fmt, ...) {
  if (r->diverged[0]) return; /* the first divergence is the one to report */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->diverged, sizeof r->diverged, fmt, ap);
  va_end(ap);
  if (!r->diverged[0]) snprintf(r->diverged, sizeof r->diverged, "the replay diverged");
}

/* Replaying: the record at the cursor, which must be an answer of type want. */
static int next_answer(mbxC_port_record *r, mbxC_rec_type want, mbxC_record *rec) {
  if (r->diverged[0]) return 0;
  if (!mbxC_replay_get(&r->log, r->cursor, rec)) {
    mbxC_port_record_diverge(r, "record %zu: the replay asked for %s past the end of the log",
                             r->cursor, mbxC_rec_type_name(want));
    return 0;
  }
  if (rec->type != want) {
    mbxC_port_record_diverge(r, "record %zu: the replay asked for %s where the log has %s",
                             r->cursor, mbxC_rec_type_name(want), mbxC_rec_type_name(rec->type));
    return 0;
  }
  r->cursor++;
  return 1;
}

/* ---- answers from outside the sandbox: from the log when replaying ---- */

static int64_t record_wall_time(void *ud) {
  mbxC_port_record *r = ud;
  if (r->replaying) {
    mbxC_record rec;
    if (!next_answer(r, MBXC_REC_WALL_TIME, &rec)) return 0;
    mbxC_reader rd = mbxC_reader_of(&rec);
    int64_t t = (int64_t)mbxC_read_u64(&rd);
    /* The blob is untrusted: a clock outside what os.date can show is refused. */
    if (t < MBXC_MIN_TIME || t > MBXC_MAX_TIME) {
      mbxC_port_record_diverge(r,
                               "record %zu: the recorded clock %lld is outside the years 1 "
                               "to 9999",
                               r->cursor - 1, (long long)t);
      return 0;
    }
    return t;
  }
  int64_t t = r->inner->wall_time(r->inner->ud);
  mbxC_replay_begin(&r->log, MBXC_REC_WALL_TIME);
  mbxC_replay_put_u64(&r->log, (uint64_t)t);
  mbxC_replay_end(&r->log);
  return t;
}

static double record_cpu_time(void *ud) {
  mbxC_port_record *r = ud;
  if (r->replaying) {
    mbxC_record rec;
    if (!next_answer(r, MBXC_REC_CPU_TIME, &rec)) return 0.0;
    mbxC_reader rd = mbxC_reader_of(&rec);
    uint64_t bits = mbxC_read_u64(&rd);
    double d;
    memcpy(&d, &bits, sizeof d);
    if (!isfinite(d) || d < 0) {
      mbxC_port_record_diverge(r,
                               "record %zu: the recorded CPU time is not a finite positive "
                               "number",
                               r->cursor - 1);
      return 0.0;
    }
    return d;
  }
  double d = r->inner->cpu_time(r->inner->ud);
  uint64_t bits;
  memcpy(&bits, &d, sizeof bits);
  mbxC_replay_begin(&r->log, MBXC_REC_CPU_TIME);
  mbxC_replay_put_u64(&r->log, bits);
  mbxC_replay_end(&r->log);
  return d;
}

static void record_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_port_record *r = ud;
  /* Drawn from the inner port in both modes, so its sequence (the seeds after a policy seed)
     stands where the original's did when the replay hands over to live answers. */
  r->inner->random_seed(r->inner->ud, seed);
  if (r->replaying) {
    mbxC_record rec;
    seed[0] = seed[1] = 0;
    if (!next_answer(r, MBXC_REC_RANDOM_SEED, &rec)) return;
    mbxC_reader rd = mbxC_reader_of(&rec);
    seed[0] = mbxC_read_u64(&rd);
    seed[1] = mbxC_read_u64(&rd);
    return;
  }
  mbxC_replay_begin(&r->log, MBXC_REC_RANDOM_SEED);
  mbxC_replay_put_u64(&r->log, seed[0]);
  mbxC_replay_put_u64(&r->log, seed[1]);
  mbxC_replay_end(&r->log);
}

/* ---- answers the policy decides: re-executed and checked when replaying ---- */

static const char *record_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  mbxC_port_record *r = ud;
  size_t len = 0;
  const char *value = r->inner->env_get(r->inner->ud, name, name_len, &len);
  if (r->replaying) {
    /* The environment is the policy's (its digest matched): the recorded answer must be
       what it says, or the replay took another path. */
    mbxC_record rec;
    if (!next_answer(r, MBXC_REC_ENV_GET, &rec)) return NULL;
    mbxC_reader rd = mbxC_reader_of(&rec);
    size_t rn, rv;
    const char *rname = mbxC_read_str(&rd, &rn);
    int found = mbxC_read_u8(&rd);
    const char *rvalue = mbxC_read_str(&rd, &rv);
    if (rn != name_len || memcmp(rname, name, rn) != 0 || found != (value != NULL) ||
        (value && (rv != len || memcmp(rvalue, value, rv) != 0))) {
      mbxC_port_record_diverge(r,
                               "record %zu: the replay looked up another environment "
                               "variable, or the policy's value differs from the recorded one",
                               r->cursor - 1);
      return NULL;
    }
  } else {
    mbxC_replay_begin(&r->log, MBXC_REC_ENV_GET);
    mbxC_replay_put_str(&r->log, name, name_len);
    mbxC_replay_put_u8(&r->log, value != NULL);
    mbxC_replay_put_str(&r->log, value ? value : "", value ? len : 0);
    mbxC_replay_end(&r->log);
  }
  if (value && value_len) *value_len = len;
  return value;
}

/* ---- granted functions: answers from outside ---- */

static mbxC_call_result record_host_call(void *ud, size_t index, const char *args, size_t args_len,
                                         const mbxC_wait *wait, const char **reply,
                                         size_t *reply_len) {
  mbxC_port_record *r = ud;
  const char *name = r->port.grants->fns[index].name;
  if (!r->replaying) {
    mbxC_call_result res =
        r->inner->host_call(r->inner->ud, index, args, args_len, wait, reply, reply_len);
    mbxC_replay_begin(&r->log, MBXC_REC_HOST_CALL);
    mbxC_replay_put_str(&r->log, name, strlen(name));
    mbxC_replay_put_str(&r->log, args, args_len);
    mbxC_replay_put_u8(&r->log, res == MBXC_CALL_ERROR);
    mbxC_replay_put_str(&r->log, *reply, *reply_len);
    mbxC_replay_end(&r->log);
    return res;
  }
  /* Answered from the log: the host's callback is not called again. */
  mbxC_record rec;
  *reply = replay_failed;
  *reply_len = sizeof replay_failed - 1;
  if (!next_answer(r, MBXC_REC_HOST_CALL, &rec)) return MBXC_CALL_ERROR;
  mbxC_reader rd = mbxC_reader_of(&rec);
  size_t fn_len, rargs_len, rreply_len;
  const char *fn = mbxC_read_str(&rd, &fn_len);
  const char *rargs = mbxC_read_str(&rd, &rargs_len);
  int is_error = mbxC_read_u8(&rd);
  const char *rreply = mbxC_read_str(&rd, &rreply_len);
  if (fn_len != strlen(name) || memcmp(fn, name, fn_len) != 0) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay called %s where the log has a call of "
                             "%.*s",
                             r->cursor - 1, name, (int)(fn_len > 128 ? 128 : fn_len), fn);
    return MBXC_CALL_ERROR;
  }
  if (rargs_len != args_len || memcmp(rargs, args, args_len) != 0) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay called %s with other arguments than the "
                             "log has",
                             r->cursor - 1, name);
    return MBXC_CALL_ERROR;
  }
  if (rreply_len > (is_error ? MBX_HOST_ERROR_MAX : MBX_HOST_REPLY_MAX)) {
    mbxC_port_record_diverge(r,
                             "record %zu: the recorded reply of %s is larger than a host may "
                             "send",
                             r->cursor - 1, name);
    return MBXC_CALL_ERROR;
  }
  *reply = rreply;
  *reply_len = rreply_len;
  return is_error ? MBXC_CALL_ERROR : MBXC_CALL_VALUE;
}

/* A native call's arguments, hashed: scalars as their words, 'z' strings by their bytes. */
static uint64_t native_args_hash(const mbxC_ffi_sig *sig, const mbxC_ffi_value *args) {
  XXH64_hash_t h = XXH3_64bits(sig->args, (size_t)sig->nargs);
  for (int i = 0; i < sig->nargs; i++) {
    uint64_t w = sig->args[i] == 'z' ? XXH3_64bits(args[i].z, strlen(args[i].z))
                                     : mbxC_ffi_word(sig->args[i], &args[i]);
    h = XXH3_64bits_withSeed(&w, sizeof w, h);
  }
  return h;
}

static mbxC_call_result record_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                           const mbxC_wait *wait, mbxC_ffi_value *ret,
                                           const char **bytes, size_t *len) {
  mbxC_port_record *r = ud;
  const mbxC_grant_fn *fn = &r->port.grants->fns[index];
  const mbxC_ffi_sig *sig = &fn->sig;
  if (!r->replaying) {
    const char *out = NULL;
    size_t out_len = 0;
    mbxC_call_result res =
        r->inner->native_call(r->inner->ud, index, args, wait, ret, &out, &out_len);
    unsigned char hash[8];
    uint64_t h = native_args_hash(sig, args);
    for (int i = 0; i < 8; i++)
      hash[i] = (unsigned char)(h >> (8 * i));
    int with_bytes = res == MBXC_CALL_ERROR || sig->ret == 'o';
    mbxC_replay_begin(&r->log, MBXC_REC_NATIVE_CALL);
    mbxC_replay_put_str(&r->log, fn->name, strlen(fn->name));
    mbxC_replay_put_str(&r->log, hash, 8);
    mbxC_replay_put_u8(&r->log, res == MBXC_CALL_ERROR);
    mbxC_replay_put_u64(&r->log, res == MBXC_CALL_ERROR ? 0 : mbxC_ffi_word(sig->ret, ret));
    mbxC_replay_put_str(&r->log, with_bytes ? out : "", with_bytes ? out_len : 0);
    mbxC_replay_end(&r->log);
    if (bytes) *bytes = out;
    if (len) *len = out_len;
    return res;
  }
  mbxC_record rec;
  memset(ret, 0, sizeof *ret);
  *bytes = replay_failed;
  *len = sizeof replay_failed - 1;
  if (!next_answer(r, MBXC_REC_NATIVE_CALL, &rec)) return MBXC_CALL_ERROR;
  mbxC_reader rd = mbxC_reader_of(&rec);
  size_t fn_len, n, hash_len;
  const char *rname = mbxC_read_str(&rd, &fn_len);
  const char *hash = mbxC_read_str(&rd, &hash_len);
  int is_error = mbxC_read_u8(&rd);
  uint64_t word = mbxC_read_u64(&rd);
  const char *rbytes = mbxC_read_str(&rd, &n);
  uint64_t mine = native_args_hash(sig, args), theirs = 0;
  for (size_t i = 0; hash_len == 8 && i < 8; i++)
    theirs |= (uint64_t)(unsigned char)hash[i] << (8 * i); /* little-endian */
  if (fn_len != strlen(fn->name) || memcmp(rname, fn->name, fn_len) != 0 || hash_len != 8 ||
      theirs != mine) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay called native %s, or with other "
                             "arguments, where the log has another call",
                             r->cursor - 1, fn->name);
    return MBXC_CALL_ERROR;
  }
  if (is_error) {
    if (n >= MBXC_MAX_HOSTFN_NAME + 128) {
      mbxC_port_record_diverge(r, "record %zu: the recorded error of %s is too long", r->cursor - 1,
                               fn->name);
      return MBXC_CALL_ERROR;
    }
    *bytes = rbytes;
    *len = n;
    return MBXC_CALL_ERROR;
  }
  int valid = mbxC_ffi_from_word(sig->ret, word, ret) &&
              (sig->ret != 'o' || word <= MBX_NATIVE_OUT_MAX) &&
              (sig->ret == 'o' ? n == word : n == 0);
  if (!valid) {
    mbxC_port_record_diverge(r,
                             "record %zu: the recorded result of %s is not a value of its "
                             "return type",
                             r->cursor - 1, fn->name);
    memset(ret, 0, sizeof *ret);
    return MBXC_CALL_ERROR;
  }
  *bytes = sig->ret == 'o' ? rbytes : NULL;
  *len = sig->ret == 'o' ? n : 0;
  return MBXC_CALL_VALUE;
}

/* ---- files: the operations are re-executed; the host mounts' answers come from the log ----
   Memory files (/tmp, the policy's files, whose contents are in the policy digest the
   restore checks) and the overlays' changes follow from the guest's own operations, so a
   replay that runs the same code against a fresh view makes them again: the port's fs
   operations pass through in both modes. What a host mount answered the view (a look, a
   read-only open, a read, a size, a directory's names) is an answer from outside: the
   view's tap (mbxC_port_record_fs_tap) logs it live and answers it from the log replaying,
   so a restore never asks the host (its files may have changed or gone). A write to a rw
   mount reaches the host and is not re-applied: the tap notes the mount and
   mbx_sandbox_snapshot refuses; a replay that would write is a divergence. */

static const mbxC_rec_type fs_types[] = {
    0, MBXC_REC_FS_LOOK, MBXC_REC_FS_OPEN, MBXC_REC_FS_READ, MBXC_REC_FS_SIZE, MBXC_REC_FS_LIST};

static int tap_replaying(void *ud) {
  return ((mbxC_port_record *)ud)->replaying;
}

static void count_host_bytes(mbxC_port_record *r, uint64_t n) {
  r->host_bytes = n > UINT64_MAX - r->host_bytes ? UINT64_MAX : r->host_bytes + n;
}

/* A recorded list of names is what a directory can hold: names of 1..255 bytes, each
   followed by a NUL, no '/', not "." or "..". */
static int names_ok(const char *p, size_t len) {
  size_t i = 0;
  while (i < len) {
    const char *end = memchr(p + i, '\0', len - i);
    if (end == NULL) return 0;
    size_t n = (size_t)(end - (p + i));
    if (n == 0 || n > 255 || memchr(p + i, '/', n) != NULL || (n == 1 && p[i] == '.') ||
        (n == 2 && p[i] == '.' && p[i + 1] == '.'))
      return 0;
    i += n + 1;
  }
  return 1;
}

static int tap_answer(void *ud, int kind, size_t mount, const char *rel, uint64_t a, uint64_t b,
                      mbxC_vfs_host *h) {
  mbxC_port_record *r = ud;
  if (kind < MBXC_VFS_TAP_LOOK || kind > MBXC_VFS_TAP_LIST) return -1;
  mbxC_rec_type type = fs_types[kind];
  size_t rel_len = rel ? strlen(rel) : 0;
  int with_bytes = kind == MBXC_VFS_TAP_READ || kind == MBXC_VFS_TAP_LIST;
  if (!r->replaying) {
    count_host_bytes(r, with_bytes ? h->len : 0);
    if (r->host_bytes > MBXC_SNAP_MAX_HOST_BYTES) {
      /* Past the cap the log stops growing (host memory); the snapshot is refused saying
         how much was read. */
      r->log.broken = 1;
      return 0;
    }
    size_t mlen = h->failed ? strnlen(h->e.message, sizeof h->e.message) : 0;
    mbxC_replay_begin(&r->log, type);
    mbxC_replay_put_u32(&r->log, (uint32_t)mount);
    mbxC_replay_put_str(&r->log, rel ? rel : "", rel_len);
    mbxC_replay_put_u64(&r->log, a);
    mbxC_replay_put_u64(&r->log, b);
    mbxC_replay_put_u32(&r->log, (uint32_t)h->err);
    mbxC_replay_put_u8(&r->log, (uint8_t)(h->walk != 0));
    mbxC_replay_put_u8(&r->log, (uint8_t)h->type);
    mbxC_replay_put_u64(&r->log, h->size);
    mbxC_replay_put_u64(&r->log, (uint64_t)h->mtime);
    mbxC_replay_put_u64(&r->log, h->nlink);
    mbxC_replay_put_u8(&r->log, (uint8_t)(h->failed != 0));
    mbxC_replay_put_u32(&r->log, h->failed ? (uint32_t)h->e.errnum : 0);
    mbxC_replay_put_str(&r->log, h->e.message, mlen);
    mbxC_replay_put_str(&r->log, with_bytes && h->len ? h->bytes : "", with_bytes ? h->len : 0);
    mbxC_replay_end(&r->log);
    return 0;
  }
  mbxC_record rec;
  memset(h, 0, sizeof *h);
  if (!next_answer(r, type, &rec)) return -1;
  size_t at = r->cursor - 1;
  mbxC_reader rd = mbxC_reader_of(&rec);
  size_t rrel_len, msg_len, n;
  uint32_t rmount = mbxC_read_u32(&rd);
  const char *rrel = mbxC_read_str(&rd, &rrel_len);
  uint64_t ra = mbxC_read_u64(&rd), rb = mbxC_read_u64(&rd);
  uint32_t err = mbxC_read_u32(&rd);
  int walk = mbxC_read_u8(&rd), ftype = mbxC_read_u8(&rd);
  uint64_t size = mbxC_read_u64(&rd), mtime = mbxC_read_u64(&rd), nlink = mbxC_read_u64(&rd);
  int failed = mbxC_read_u8(&rd);
  uint32_t errnum = mbxC_read_u32(&rd);
  const char *msg = mbxC_read_str(&rd, &msg_len);
  const char *bytes = mbxC_read_str(&rd, &n);
  if (rmount != mount || rrel_len != rel_len || (rel_len && memcmp(rrel, rel, rel_len) != 0) ||
      ra != a || rb != b) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay asked a host mount about another file "
                             "or range than the log has",
                             at);
    return -1;
  }
  /* The blob is untrusted (its shape was checked when it was decoded): every answer must be
     one a host could have given. */
  int valid = (failed ? errnum > 0 && n == 0 : errnum == 0) && msg_len < sizeof h->e.message &&
              size <= (uint64_t)INT64_MAX &&
              (kind == MBXC_VFS_TAP_READ ? n <= b && !err
               : kind == MBXC_VFS_TAP_LIST
                   ? (err ? n == 0 : n <= ((size_t)1 << 20) + 256 && names_ok(bytes, n))
                   : n == 0) &&
              (kind == MBXC_VFS_TAP_LOOK   ? !failed && (err ? ftype == 0 : ftype != 0)
               : kind == MBXC_VFS_TAP_LIST ? !failed && ftype == 0
                                           : !err && ftype == 0 && !walk);
  if (!valid) {
    mbxC_port_record_diverge(r,
                             "record %zu: the recorded %s is not an answer a host mount "
                             "gives",
                             at, mbxC_rec_type_name(type));
    return -1;
  }
  h->err = (int)err;
  h->walk = walk;
  h->type = ftype;
  h->size = size;
  h->mtime = (int64_t)mtime;
  h->nlink = nlink;
  h->failed = failed;
  h->e.errnum = (int)errnum;
  memcpy(h->e.message, msg, msg_len);
  h->e.message[msg_len] = '\0';
  h->bytes = bytes;
  h->len = n;
  count_host_bytes(r, n);
  return 0;
}

static int tap_wrote(void *ud, const char *mount_path) {
  mbxC_port_record *r = ud;
  if (r->replaying) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay wrote to the rw mount %.200s, which a "
                             "log never holds (a sandbox that wrote to a rw mount cannot be "
                             "snapshotted)",
                             r->cursor, mount_path);
    return -1;
  }
  if (!r->rw_written[0]) snprintf(r->rw_written, sizeof r->rw_written, "%s", mount_path);
  return 0;
}

mbxC_vfs_tap mbxC_port_record_fs_tap(mbxC_port_record *r) {
  return (mbxC_vfs_tap){
      .ud = r, .replaying = tap_replaying, .answer = tap_answer, .wrote = tap_wrote};
}

static const mbxC_port *inner_of(void *ud) {
  return ((mbxC_port_record *)ud)->inner;
}
static int record_fs_open(void *ud, const char *path, size_t path_len, int flags,
                          const mbxC_wait *wait, int *handle, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_open(in->ud, path, path_len, flags, wait, handle, e);
}
static int record_fs_read(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait,
                          size_t *got, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_read(in->ud, handle, buf, len, wait, got, e);
}
static int record_fs_write(void *ud, int handle, const char *buf, size_t len, const mbxC_wait *wait,
                           size_t *put, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_write(in->ud, handle, buf, len, wait, put, e);
}
static int record_fs_seek(void *ud, int handle, int whence, int64_t offset, int64_t *pos,
                          mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_seek(in->ud, handle, whence, offset, pos, e);
}
static int record_fs_close(void *ud, int handle, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_close(in->ud, handle, e);
}
static int record_fs_list(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                          const char **names, size_t *names_len, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_list(in->ud, path, path_len, wait, names, names_len, e);
}
static int record_fs_stat(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                          mbxC_fs_stat *st, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_stat(in->ud, path, path_len, wait, st, e);
}
static int record_fs_mkdir(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                           mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_mkdir(in->ud, path, path_len, wait, e);
}
static int record_fs_remove(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                            mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_remove(in->ud, path, path_len, wait, e);
}
/* io.stdin's bytes come from outside (the host's, or a descriptor's): logged live, answered
   from the log when replaying, so a restore never reads the host's stdin again. */
static int record_stdin_read(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                             mbxC_port_error *e) {
  mbxC_port_record *r = ud;
  *got = 0;
  if (!r->replaying) {
    int rc = r->inner->stdin_read(r->inner->ud, buf, len, wait, got, e);
    mbxC_replay_begin(&r->log, MBXC_REC_STDIN_READ);
    mbxC_replay_put_u64(&r->log, len);
    mbxC_replay_put_u8(&r->log, rc != 0);
    mbxC_replay_put_u32(&r->log, rc != 0 ? (uint32_t)e->errnum : 0);
    if (rc != 0)
      mbxC_replay_put_str(&r->log, e->message, strlen(e->message));
    else
      mbxC_replay_put_str(&r->log, buf, *got);
    mbxC_replay_end(&r->log);
    return rc;
  }
  mbxC_record rec;
  if (!next_answer(r, MBXC_REC_STDIN_READ, &rec)) {
    e->errnum = EIO;
    snprintf(e->message, sizeof e->message, "%s", replay_failed);
    return -1;
  }
  mbxC_reader rd = mbxC_reader_of(&rec);
  uint64_t asked = mbxC_read_u64(&rd);
  int failed = mbxC_read_u8(&rd);
  uint32_t errnum = mbxC_read_u32(&rd);
  size_t n;
  const char *bytes = mbxC_read_str(&rd, &n);
  if (asked != len) {
    mbxC_port_record_diverge(r, "record %zu: the replay read another amount of stdin",
                             r->cursor - 1);
    e->errnum = EIO;
    snprintf(e->message, sizeof e->message, "%s", replay_failed);
    return -1;
  }
  if (failed) {
    e->errnum = (int)errnum;
    snprintf(e->message, sizeof e->message, "%.*s", (int)n, bytes);
    return -1;
  }
  if (n) memcpy(buf, bytes, n); /* n <= asked == len: checked when the blob was decoded */
  *got = n;
  return 0;
}
static uint64_t record_stdin_epoch(void *ud) {
  const mbxC_port *in = ((mbxC_port_record *)ud)->inner;
  return in->stdin_epoch(in->ud);
}
static int record_fs_rename(void *ud, const char *from, size_t from_len, const char *to,
                            size_t to_len, const mbxC_wait *wait, mbxC_port_error *e) {
  const mbxC_port *in = inner_of(ud);
  return in->fs_rename(in->ud, from, from_len, to, to_len, wait, e);
}

/* ---- exec: an answer from outside, recorded live and replayed from the log ----
   A replay runs nothing: the program's result (or the error that stopped it) comes from the
   log, after the request is checked to be the one recorded (a hash of argv, stdin, cwd, env
   and timeout). */

static uint64_t exec_request_hash(const mbxC_exec_request *req) {
  XXH3_state_t *st = XXH3_createState();
  uint64_t h = 0;
  if (st == NULL) return 0;
  XXH3_64bits_reset(st);
  uint64_t n = req->argc;
  XXH3_64bits_update(st, &n, sizeof n);
  for (size_t i = 0; i < req->argc; i++)
    XXH3_64bits_update(st, req->argv[i], strlen(req->argv[i]) + 1);
  n = req->stdin_len;
  XXH3_64bits_update(st, &n, sizeof n);
  if (req->stdin_len) XXH3_64bits_update(st, req->stdin_bytes, req->stdin_len);
  XXH3_64bits_update(st, req->cwd ? req->cwd : "", req->cwd ? strlen(req->cwd) + 1 : 1);
  n = req->envc;
  XXH3_64bits_update(st, &n, sizeof n);
  for (size_t i = 0; i < req->envc; i++)
    XXH3_64bits_update(st, req->env[i], strlen(req->env[i]) + 1);
  XXH3_64bits_update(st, &req->timeout_ms, sizeof req->timeout_ms);
  h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

static int record_exec_run(void *ud, const mbxC_exec_request *req, const mbxC_wait *wait,
                           mbxC_exec_result *res, mbxC_port_error *e) {
  mbxC_port_record *r = ud;
  unsigned char hash[8];
  uint64_t h = exec_request_hash(req);
  for (int i = 0; i < 8; i++)
    hash[i] = (unsigned char)(h >> (8 * i));
  if (!r->replaying) {
    int rc = r->inner->exec_run(r->inner->ud, req, wait, res, e);
    mbxC_replay_begin(&r->log, MBXC_REC_EXEC);
    mbxC_replay_put_str(&r->log, hash, 8);
    mbxC_replay_put_u8(&r->log, rc != 0);
    mbxC_replay_put_u32(&r->log, rc != 0 ? (uint32_t)e->errnum : (uint32_t)res->exit_code);
    mbxC_replay_put_u32(&r->log, rc != 0 ? 0 : (uint32_t)res->signal);
    mbxC_replay_put_u8(&r->log, rc == 0 && res->timed_out);
    mbxC_replay_put_u8(&r->log, rc == 0 && res->truncated);
    mbxC_replay_put_u64(&r->log, rc != 0 ? 0 : res->wall_ms);
    mbxC_replay_put_str(&r->log, rc != 0 ? "" : res->out, rc != 0 ? 0 : res->out_len);
    if (rc != 0)
      mbxC_replay_put_str(&r->log, e->message, strlen(e->message));
    else
      mbxC_replay_put_str(&r->log, res->err, res->err_len);
    /* Appended (issue 12): the limits the run had and which one ended it. */
    mbxC_replay_put_u32(&r->log, rc != 0 ? 0 : res->limits);
    mbxC_replay_put_u8(&r->log, rc == 0 && res->memory_limit);
    mbxC_replay_put_u8(&r->log, rc == 0 && res->pids_limit);
    /* And what the process's writes did to the view (exec_copy.h). */
    mbxC_replay_put_u64(&r->log, rc != 0 ? 0 : res->changes);
    mbxC_replay_put_u8(&r->log, rc == 0 && res->changes_refused);
    mbxC_replay_put_str(&r->log, rc != 0 ? "" : res->changes_error,
                        rc != 0 ? 0 : strlen(res->changes_error));
    mbxC_replay_end(&r->log);
    return rc;
  }
  memset(res, 0, sizeof *res);
  e->errnum = 5; /* EIO */
  snprintf(e->message, sizeof e->message, "%s", replay_failed);
  mbxC_record rec;
  if (!next_answer(r, MBXC_REC_EXEC, &rec)) return -1;
  mbxC_reader rd = mbxC_reader_of(&rec);
  size_t hash_len, out_len, err_len;
  const char *rhash = mbxC_read_str(&rd, &hash_len);
  int is_error = mbxC_read_u8(&rd);
  uint32_t code = mbxC_read_u32(&rd), sig = mbxC_read_u32(&rd);
  int timed_out = mbxC_read_u8(&rd), truncated = mbxC_read_u8(&rd);
  uint64_t wall = mbxC_read_u64(&rd);
  const char *out = mbxC_read_str(&rd, &out_len);
  const char *err = mbxC_read_str(&rd, &err_len);
  /* A record written before the limit fields ends here: they read as 0. */
  unsigned limits = mbxC_read_u32(&rd);
  int memory_limit = mbxC_read_u8(&rd), pids_limit = mbxC_read_u8(&rd);
  uint64_t changes = mbxC_read_u64(&rd);
  int changes_refused = mbxC_read_u8(&rd);
  size_t cerr_len;
  const char *cerr = mbxC_read_str(&rd, &cerr_len);
  if (hash_len != 8 || memcmp(rhash, hash, 8) != 0) {
    mbxC_port_record_diverge(r,
                             "record %zu: the replay ran %s, or with other arguments, where "
                             "the log has another program",
                             r->cursor - 1, req->argc ? req->argv[0] : "(nothing)");
    return -1;
  }
  if (is_error) {
    e->errnum = (int)code;
    snprintf(e->message, sizeof e->message, "%.*s", (int)(err_len < 255 ? err_len : 255), err);
    return -1;
  }
  if (changes) {
    /* The process's writes into the view came from outside the log: a replay cannot make
       them, and a session without them would silently differ from the one recorded. */
    mbxC_port_record_diverge(r,
                             "record %zu: the program %s changed /tmp or an overlay mount (%llu "
                             "entries), which a snapshot cannot replay yet",
                             r->cursor - 1, req->argc ? req->argv[0] : "(nothing)",
                             (unsigned long long)changes);
    return -1;
  }
  res->exit_code = (int32_t)code;
  res->signal = (int)sig;
  res->timed_out = timed_out;
  res->truncated = truncated;
  res->wall_ms = wall;
  res->out = out;
  res->out_len = out_len;
  res->err = err;
  res->err_len = err_len;
  res->limits = limits;
  res->memory_limit = memory_limit;
  res->pids_limit = pids_limit;
  res->changes_refused = changes_refused;
  snprintf(res->changes_error, sizeof res->changes_error, "%.*s",
           (int)(cerr_len < sizeof res->changes_error ? cerr_len : sizeof res->changes_error - 1),
           cerr ? cerr : "");
  return 0;
}

/* ---- the layer ---- */

void mbxC_port_record_init(mbxC_port_record *r, const mbxC_port *inner, uint64_t chain0) {
  memset(r, 0, sizeof *r);
  r->inner = inner;
  r->chain0 = chain0;
  mbxC_replay_init(&r->log, chain0);
  /* Only what the inner port serves is wrapped; a capability it lacks stays NULL here too. */
  r->port = (mbxC_port){.version = MBXC_PORT_VERSION,
                        .ud = r,
                        .grants = inner->grants,
                        .wall_time = inner->wall_time ? record_wall_time : NULL,
                        .cpu_time = inner->cpu_time ? record_cpu_time : NULL,
                        .random_seed = inner->random_seed ? record_random_seed : NULL,
                        .env_get = inner->env_get ? record_env_get : NULL,
                        .host_call = inner->host_call ? record_host_call : NULL,
                        .native_call = inner->native_call ? record_native_call : NULL,
                        .fs_open = inner->fs_open ? record_fs_open : NULL,
                        .fs_read = inner->fs_read ? record_fs_read : NULL,
                        .fs_write = inner->fs_write ? record_fs_write : NULL,
                        .fs_seek = inner->fs_seek ? record_fs_seek : NULL,
                        .fs_close = inner->fs_close ? record_fs_close : NULL,
                        .fs_list = inner->fs_list ? record_fs_list : NULL,
                        .fs_stat = inner->fs_stat ? record_fs_stat : NULL,
                        .fs_mkdir = inner->fs_mkdir ? record_fs_mkdir : NULL,
                        .fs_remove = inner->fs_remove ? record_fs_remove : NULL,
                        .fs_rename = inner->fs_rename ? record_fs_rename : NULL,
                        .exec_run = inner->exec_run ? record_exec_run : NULL,
                        .stdin_read = inner->stdin_read ? record_stdin_read : NULL,
                        .stdin_epoch = inner->stdin_epoch ? record_stdin_epoch : NULL};
}

void mbxC_port_record_free(mbxC_port_record *r) {
  mbxC_replay_free(&r->log);
  r->replaying = 0;
}

void mbxC_port_record_restart(mbxC_port_record *r) {
  mbxC_replay_free(&r->log);
  mbxC_replay_init(&r->log, r->chain0);
  r->replaying = 0;
  r->cursor = 0;
  r->diverged[0] = '\0';
  r->host_bytes = 0;
  r->rw_written[0] = '\0';
  r->session++;
}

void mbxC_port_record_replay_begin(mbxC_port_record *r, mbxC_replay_log *log) {
  mbxC_replay_free(&r->log);
  r->log = *log;
  memset(log, 0, sizeof *log);
  r->replaying = 1;
  r->cursor = 0;
  r->diverged[0] = '\0';
}

int mbxC_port_record_replay_end(mbxC_port_record *r) {
  if (!r->diverged[0] && r->cursor != r->log.count)
    mbxC_port_record_diverge(r,
                             "record %zu: the replay reached the end with %zu of the log's "
                             "records left",
                             r->cursor, r->log.count - r->cursor);
  r->replaying = 0;
  return r->diverged[0] ? -1 : 0;
}

mbxC_record_mark mbxC_port_record_mark(const mbxC_port_record *r) {
  return (mbxC_record_mark){.count = r->log.count,
                            .broken = r->log.broken,
                            .host_bytes = r->host_bytes,
                            .session = r->session};
}

void mbxC_port_record_rewind(mbxC_port_record *r, mbxC_record_mark m) {
  if (m.session != r->session) {
    /* Across a restart the checkpoint's session's records are gone. */
    mbxC_port_record_break(r);
    return;
  }
  mbxC_replay_truncate(&r->log, m.count, r->chain0);
  r->log.broken = m.broken;
  /* What a rw mount was written stays written: a rewind does not undo the host's files. */
  r->host_bytes = m.host_bytes;
}

void mbxC_port_record_break(mbxC_port_record *r) {
  r->log.broken = 1;
}

int mbxC_port_record_broken(const mbxC_port_record *r) {
  return r->log.broken;
}

int mbxC_port_record_snapshot(const mbxC_port_record *r, const mbxC_snap_header *h, void **bytes,
                              size_t *len) {
  return mbxC_snap_encode(h, &r->log, bytes, len);
}

int mbxC_port_record_pending(const mbxC_port_record *r, mbxC_record *rec, size_t *at) {
  *at = r->cursor;
  return !r->diverged[0] && mbxC_replay_get(&r->log, r->cursor, rec);
}

size_t mbxC_port_record_cursor(const mbxC_port_record *r) {
  return r->cursor;
}

const char *mbxC_port_record_divergence(const mbxC_port_record *r) {
  return r->diverged;
}

/* ---- session records: appended live; written to a scratch log and compared with the
   record at the cursor when replaying ---- */

static mbxC_replay_log *session_target(mbxC_port_record *r, mbxC_replay_log *scratch) {
  if (!r->replaying) return &r->log;
  mbxC_replay_init(scratch, 0);
  return scratch;
}

static void session_check(mbxC_port_record *r, mbxC_replay_log *scratch) {
  if (!r->replaying) return;
  mbxC_record mine, theirs;
  if (r->diverged[0]) {
    /* already reported */
  } else if (scratch->broken || !mbxC_replay_get(scratch, 0, &mine)) {
    mbxC_port_record_diverge(r, "record %zu: out of host memory while checking the replay",
                             r->cursor);
  } else if (!mbxC_replay_get(&r->log, r->cursor, &theirs)) {
    mbxC_port_record_diverge(r, "record %zu: the replay made a %s past the end of the log",
                             r->cursor, mbxC_rec_type_name(mine.type));
  } else if (theirs.type != mine.type) {
    mbxC_port_record_diverge(r, "record %zu: the replay made a %s where the log has %s", r->cursor,
                             mbxC_rec_type_name(mine.type), mbxC_rec_type_name(theirs.type));
  } else if (theirs.len != mine.len || memcmp(theirs.payload, mine.payload, mine.len) != 0) {
    if (mine.type == MBXC_REC_OUTCOME) {
      mbxC_reader a = mbxC_reader_of(&mine), b = mbxC_reader_of(&theirs);
      unsigned sa = mbxC_read_u32(&a), sb = mbxC_read_u32(&b);
      mbxC_port_record_diverge(r,
                               "record %zu: the replayed call ended with status %u where the "
                               "original ended with %u, or with another value or host call "
                               "count",
                               r->cursor, sa, sb);
    } else {
      mbxC_port_record_diverge(r, "record %zu: the replay's %s differs from the log's", r->cursor,
                               mbxC_rec_type_name(mine.type));
    }
  } else {
    r->cursor++;
  }
  mbxC_replay_free(scratch);
}

void mbxC_port_record_run(mbxC_port_record *r, const char *chunk_name, const char *code,
                          size_t code_len, const char *inputs, size_t inputs_len) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(r, &scratch);
  const char *name = chunk_name ? chunk_name : "";
  mbxC_replay_begin(log, MBXC_REC_RUN);
  mbxC_replay_put_str(log, name, strlen(name));
  mbxC_replay_put_str(log, code ? code : "", code ? code_len : 0);
  mbxC_replay_put_u8(log, inputs != NULL);
  mbxC_replay_put_str(log, inputs ? inputs : "", inputs ? inputs_len : 0);
  mbxC_replay_end(log);
  session_check(r, &scratch);
}

void mbxC_port_record_resume(mbxC_port_record *r, int as_error, const char *value, size_t len) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(r, &scratch);
  mbxC_replay_begin(log, as_error ? MBXC_REC_RESUME_ERROR : MBXC_REC_RESUME);
  mbxC_replay_put_str(log, value ? value : "", value ? len : 0);
  mbxC_replay_end(log);
  session_check(r, &scratch);
}

void mbxC_port_record_outcome(mbxC_port_record *r, uint32_t status, uint64_t hash,
                              uint64_t host_calls) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(r, &scratch);
  mbxC_replay_begin(log, MBXC_REC_OUTCOME);
  mbxC_replay_put_u32(log, status);
  mbxC_replay_put_u64(log, hash);
  mbxC_replay_put_u64(log, host_calls);
  mbxC_replay_end(log);
  session_check(r, &scratch);
}
