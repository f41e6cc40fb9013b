/* capabilities/port.c -- the in-process port: clock, CPU time, random seed and virtual env. */
#include "capabilities/port.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <xxhash.h>

static int64_t local_wall_time(void *ud) {
  mbxC_port_local *pl = ud;
  if (pl->time_fixed) return pl->time;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  /* The calling thread's CPU time, not the process's (what stock os.clock reports): other
     sandboxes and host threads in the same process must not show up in a guest's figure,
     nor reveal how busy the host is. */
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double local_cpu_time(void *ud) {
  mbxC_port_local *pl = ud;
  uint64_t now = thread_cpu_ns();
  return now > pl->cpu_start_ns ? (double)(now - pl->cpu_start_ns) / 1e9 : 0.0;
}

/* splitmix64: a fixed, well-mixed sequence from one word, for the seeds that follow a
   policy seed (math.randomseed() with no argument stays reproducible). */
static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void local_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_port_local *pl = ud;
  uint64_t n = pl->draws++;
  if (pl->seed_fixed) {
    if (n == 0) {
      seed[0] = pl->seed;
      seed[1] = 0;
    } else {
      seed[0] = splitmix64(pl->seed ^ splitmix64(2 * n));
      seed[1] = splitmix64(pl->seed ^ splitmix64(2 * n + 1));
    }
    return;
  }
  if (getrandom(seed, 2 * sizeof *seed, 0) == (ssize_t)(2 * sizeof *seed)) return;
  /* No kernel randomness (a seccomp filter, an old kernel): the clocks still differ between
     sandboxes, and the draw counter between calls. No address is used: it would tell the
     guest where the host's heap is. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  seed[0] = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ n);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  seed[1] = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ~n);
}

static const char *local_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  mbxC_port_local *pl = ud;
  for (size_t i = 0; i < pl->env_count; i++) {
    const mbxC_env_var *v = &pl->env[i];
    if (strlen(v->name) == name_len && memcmp(v->name, name, name_len) == 0) {
      if (value_len) *value_len = v->value_len;
      return v->value;
    }
  }
  return NULL;
}

static char *dup_bytes(const char *s, size_t n) {
  char *copy = malloc(n + 1);
  if (copy) {
    memcpy(copy, s, n);
    copy[n] = '\0';
  }
  return copy;
}

static mbxC_call_result local_host_call(void *ud, size_t index, const char *args,
                                        size_t args_len, const char **reply,
                                        size_t *reply_len) {
  mbxC_port_local *pl = ud;
  return mbxC_hostfn_call(&pl->host_fns.fns[index], &pl->reply, args, args_len, reply,
                          reply_len);
}

static mbxC_call_result native_error(mbxC_port_local *pl, const char **bytes, size_t *len) {
  *bytes = pl->native_error;
  *len = strlen(pl->native_error);
  return MBXC_CALL_ERROR;
}

static mbxC_call_result local_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                          mbxC_ffi_value *ret, const char **bytes, size_t *len) {
  mbxC_port_local *pl = ud;
  const mbxC_hostfn *fn = &pl->host_fns.fns[index];
  if (mbxC_native_sig(fn->native)->ret != 'o') {
    mbxC_native_call(fn->native, args, NULL, 0, ret);
    return MBXC_CALL_VALUE;
  }
  if (pl->native_out == NULL && (pl->native_out = malloc(MBX_NATIVE_OUT_MAX)) == NULL) {
    snprintf(pl->native_error, sizeof pl->native_error, "%s: out of host memory", fn->name);
    return native_error(pl, bytes, len);
  }
  mbxC_native_call(fn->native, args, pl->native_out, MBX_NATIVE_OUT_MAX, ret);
  /* A length past the buffer means the function wrote past it or lies about it: either way
     its bytes cannot be trusted, and none of them reach the guest. */
  if (ret->o > MBX_NATIVE_OUT_MAX) {
    snprintf(pl->native_error, sizeof pl->native_error,
             "%s: the native function returned length %zu, more than its %u-byte buffer", fn->name,
             ret->o, (unsigned)MBX_NATIVE_OUT_MAX);
    return native_error(pl, bytes, len);
  }
  *bytes = pl->native_out;
  *len = ret->o;
  return MBXC_CALL_VALUE;
}

/* ---- the replay log: every answer above, recorded (live) or read back (replaying) ---- */

static void diverge(mbxC_port_local *pl, const char *fmt, ...) {
  if (pl->diverged[0]) return; /* the first divergence is the one to report */
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(pl->diverged, sizeof pl->diverged, fmt, ap);
  va_end(ap);
  if (!pl->diverged[0]) snprintf(pl->diverged, sizeof pl->diverged, "the replay diverged");
}

/* Replaying: the record at the cursor, which must be an answer of type want. */
static int next_answer(mbxC_port_local *pl, mbxC_rec_type want, mbxC_record *r) {
  if (pl->diverged[0]) return 0;
  if (!mbxC_replay_get(&pl->log, pl->cursor, r)) {
    diverge(pl, "record %zu: the replay asked for %s past the end of the log", pl->cursor,
            mbxC_rec_type_name(want));
    return 0;
  }
  if (r->type != want) {
    diverge(pl, "record %zu: the replay asked for %s where the log has %s", pl->cursor,
            mbxC_rec_type_name(want), mbxC_rec_type_name(r->type));
    return 0;
  }
  pl->cursor++;
  return 1;
}

static const char replay_failed[] = "the snapshot replay diverged from its log";

static int64_t port_wall_time(void *ud) {
  mbxC_port_local *pl = ud;
  if (pl->replaying) {
    mbxC_record r;
    if (!next_answer(pl, MBXC_REC_WALL_TIME, &r)) return pl->time_fixed ? pl->time : 0;
    mbxC_reader rd = mbxC_reader_of(&r);
    int64_t t = (int64_t)mbxC_read_u64(&rd);
    /* The blob is untrusted: a clock outside what os.date can show is refused. */
    if (t < MBXC_MIN_TIME || t > MBXC_MAX_TIME) {
      diverge(pl, "record %zu: the recorded clock %lld is outside the years 1 to 9999",
              pl->cursor - 1, (long long)t);
      return pl->time_fixed ? pl->time : 0;
    }
    return t;
  }
  int64_t t = local_wall_time(pl);
  if (pl->logging) {
    mbxC_replay_begin(&pl->log, MBXC_REC_WALL_TIME);
    mbxC_replay_put_u64(&pl->log, (uint64_t)t);
    mbxC_replay_end(&pl->log);
  }
  return t;
}

static double port_cpu_time(void *ud) {
  mbxC_port_local *pl = ud;
  if (pl->replaying) {
    mbxC_record r;
    if (!next_answer(pl, MBXC_REC_CPU_TIME, &r)) return 0.0;
    mbxC_reader rd = mbxC_reader_of(&r);
    uint64_t bits = mbxC_read_u64(&rd);
    double d;
    memcpy(&d, &bits, sizeof d);
    if (!isfinite(d) || d < 0) {
      diverge(pl, "record %zu: the recorded CPU time is not a finite positive number",
              pl->cursor - 1);
      return 0.0;
    }
    return d;
  }
  double d = local_cpu_time(pl);
  if (pl->logging) {
    uint64_t bits;
    memcpy(&bits, &d, sizeof bits);
    mbxC_replay_begin(&pl->log, MBXC_REC_CPU_TIME);
    mbxC_replay_put_u64(&pl->log, bits);
    mbxC_replay_end(&pl->log);
  }
  return d;
}

static void port_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_port_local *pl = ud;
  if (pl->replaying) {
    mbxC_record r;
    seed[0] = seed[1] = 0;
    pl->draws++;
    if (!next_answer(pl, MBXC_REC_RANDOM_SEED, &r)) return;
    mbxC_reader rd = mbxC_reader_of(&r);
    seed[0] = mbxC_read_u64(&rd);
    seed[1] = mbxC_read_u64(&rd);
    return;
  }
  local_random_seed(pl, seed);
  if (pl->logging) {
    mbxC_replay_begin(&pl->log, MBXC_REC_RANDOM_SEED);
    mbxC_replay_put_u64(&pl->log, seed[0]);
    mbxC_replay_put_u64(&pl->log, seed[1]);
    mbxC_replay_end(&pl->log);
  }
}

static const char *port_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  mbxC_port_local *pl = ud;
  size_t len = 0;
  const char *value = local_env_get(pl, name, name_len, &len);
  if (pl->replaying) {
    /* The environment is the policy's (its digest matched): the recorded answer must be
       what it says, or the replay took another path. */
    mbxC_record r;
    if (!next_answer(pl, MBXC_REC_ENV_GET, &r)) return NULL;
    mbxC_reader rd = mbxC_reader_of(&r);
    size_t rn, rv;
    const char *rname = mbxC_read_str(&rd, &rn);
    int found = mbxC_read_u8(&rd);
    const char *rvalue = mbxC_read_str(&rd, &rv);
    if (rn != name_len || memcmp(rname, name, rn) != 0 || found != (value != NULL) ||
        (value && (rv != len || memcmp(rvalue, value, rv) != 0))) {
      diverge(pl,
              "record %zu: the replay looked up another environment variable, or the "
              "policy's value differs from the recorded one",
              pl->cursor - 1);
      return NULL;
    }
  } else if (pl->logging) {
    mbxC_replay_begin(&pl->log, MBXC_REC_ENV_GET);
    mbxC_replay_put_str(&pl->log, name, name_len);
    mbxC_replay_put_u8(&pl->log, value != NULL);
    mbxC_replay_put_str(&pl->log, value ? value : "", value ? len : 0);
    mbxC_replay_end(&pl->log);
  }
  if (value && value_len) *value_len = len;
  return value;
}

static mbxC_call_result port_host_call(void *ud, size_t index, const char *args, size_t args_len,
                                       const char **reply, size_t *reply_len) {
  mbxC_port_local *pl = ud;
  const char *name = pl->host_fns.fns[index].name;
  if (pl->replaying) {
    /* Answered from the log: the host's callback is not called again. */
    mbxC_record r;
    *reply = replay_failed;
    *reply_len = sizeof replay_failed - 1;
    if (!next_answer(pl, MBXC_REC_HOST_CALL, &r)) return MBXC_CALL_ERROR;
    mbxC_reader rd = mbxC_reader_of(&r);
    size_t fn_len, rargs_len, rreply_len;
    const char *fn = mbxC_read_str(&rd, &fn_len);
    const char *rargs = mbxC_read_str(&rd, &rargs_len);
    int is_error = mbxC_read_u8(&rd);
    const char *rreply = mbxC_read_str(&rd, &rreply_len);
    if (fn_len != strlen(name) || memcmp(fn, name, fn_len) != 0) {
      diverge(pl, "record %zu: the replay called %s where the log has a call of %.*s",
              pl->cursor - 1, name, (int)(fn_len > 128 ? 128 : fn_len), fn);
      return MBXC_CALL_ERROR;
    }
    if (rargs_len != args_len || memcmp(rargs, args, args_len) != 0) {
      diverge(pl, "record %zu: the replay called %s with other arguments than the log has",
              pl->cursor - 1, name);
      return MBXC_CALL_ERROR;
    }
    if (rreply_len > (is_error ? MBX_HOST_ERROR_MAX : MBX_HOST_REPLY_MAX)) {
      diverge(pl, "record %zu: the recorded reply of %s is larger than a host may send",
              pl->cursor - 1, name);
      return MBXC_CALL_ERROR;
    }
    *reply = rreply;
    *reply_len = rreply_len;
    return is_error ? MBXC_CALL_ERROR : MBXC_CALL_VALUE;
  }
  mbxC_call_result res = local_host_call(pl, index, args, args_len, reply, reply_len);
  if (pl->logging) {
    mbxC_replay_begin(&pl->log, MBXC_REC_HOST_CALL);
    mbxC_replay_put_str(&pl->log, name, strlen(name));
    mbxC_replay_put_str(&pl->log, args, args_len);
    mbxC_replay_put_u8(&pl->log, res == MBXC_CALL_ERROR);
    mbxC_replay_put_str(&pl->log, *reply, *reply_len);
    mbxC_replay_end(&pl->log);
  }
  return res;
}

/* A native call's arguments, hashed: scalars as 64-bit words, 'z' strings with their length. */
static uint64_t native_args_hash(const mbxC_ffi_sig *sig, const mbxC_ffi_value *args) {
  XXH64_hash_t h = XXH3_64bits(sig->args, (size_t)sig->nargs);
  for (int i = 0; i < sig->nargs; i++) {
    uint64_t w = 0;
    const mbxC_ffi_value *v = &args[i];
    switch (sig->args[i]) {
    case 'b':
      w = v->b;
      break;
    case 'c':
      w = (uint64_t)(int64_t)v->c;
      break;
    case 'C':
      w = v->C;
      break;
    case 's':
      w = (uint64_t)(int64_t)v->s;
      break;
    case 'S':
      w = v->S;
      break;
    case 'i':
      w = (uint64_t)(int64_t)v->i;
      break;
    case 'I':
      w = v->I;
      break;
    case 'l':
      w = (uint64_t)v->l;
      break;
    case 'L':
      w = v->L;
      break;
    case 'f': {
      uint32_t b;
      memcpy(&b, &v->f, 4);
      w = b;
      break;
    }
    case 'd':
      memcpy(&w, &v->d, 8);
      break;
    case 'z':
      w = XXH3_64bits(v->z, strlen(v->z));
      break;
    default:
      break;
    }
    h = XXH3_64bits_withSeed(&w, sizeof w, h);
  }
  return h;
}

static uint64_t native_ret_word(char letter, const mbxC_ffi_value *ret) {
  uint64_t w = 0;
  switch (letter) {
  case 'b':
    w = ret->b;
    break;
  case 'c':
    w = (uint64_t)(int64_t)ret->c;
    break;
  case 'C':
    w = ret->C;
    break;
  case 's':
    w = (uint64_t)(int64_t)ret->s;
    break;
  case 'S':
    w = ret->S;
    break;
  case 'i':
    w = (uint64_t)(int64_t)ret->i;
    break;
  case 'I':
    w = ret->I;
    break;
  case 'l':
    w = (uint64_t)ret->l;
    break;
  case 'L':
    w = ret->L;
    break;
  case 'f': {
    uint32_t b;
    memcpy(&b, &ret->f, 4);
    w = b;
    break;
  }
  case 'd':
    memcpy(&w, &ret->d, 8);
    break;
  case 'o':
    w = ret->o;
    break;
  default:
    break;
  }
  return w;
}

/* The inverse of native_ret_word; 0 when the word is not a value of that type. */
static int native_ret_set(char letter, uint64_t w, mbxC_ffi_value *ret) {
  memset(ret, 0, sizeof *ret);
  switch (letter) {
  case 'v':
    return w == 0;
  case 'b':
    ret->b = (uint8_t)w;
    return w <= 1;
  case 'c':
    ret->c = (int8_t)w;
    return (uint64_t)(int64_t)ret->c == w;
  case 'C':
    ret->C = (uint8_t)w;
    return ret->C == w;
  case 's':
    ret->s = (int16_t)w;
    return (uint64_t)(int64_t)ret->s == w;
  case 'S':
    ret->S = (uint16_t)w;
    return ret->S == w;
  case 'i':
    ret->i = (int32_t)w;
    return (uint64_t)(int64_t)ret->i == w;
  case 'I':
    ret->I = (uint32_t)w;
    return ret->I == w;
  case 'l':
    ret->l = (int64_t)w;
    return 1;
  case 'L':
    ret->L = w;
    return 1;
  case 'f': {
    uint32_t b = (uint32_t)w;
    memcpy(&ret->f, &b, 4);
    return b == w;
  }
  case 'd':
    memcpy(&ret->d, &w, 8);
    return 1;
  case 'o':
    ret->o = (size_t)w;
    return w <= MBX_NATIVE_OUT_MAX;
  default:
    return 0;
  }
}

static mbxC_call_result port_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                         mbxC_ffi_value *ret, const char **bytes, size_t *len) {
  mbxC_port_local *pl = ud;
  const mbxC_hostfn *fn = &pl->host_fns.fns[index];
  const mbxC_ffi_sig *sig = mbxC_native_sig(fn->native);
  if (pl->replaying) {
    mbxC_record r;
    memset(ret, 0, sizeof *ret);
    *bytes = replay_failed;
    *len = sizeof replay_failed - 1;
    if (!next_answer(pl, MBXC_REC_NATIVE_CALL, &r)) return MBXC_CALL_ERROR;
    mbxC_reader rd = mbxC_reader_of(&r);
    size_t fn_len, n;
    const char *rname = mbxC_read_str(&rd, &fn_len);
    size_t hash_len;
    const char *hash = mbxC_read_str(&rd, &hash_len);
    int is_error = mbxC_read_u8(&rd);
    uint64_t word = mbxC_read_u64(&rd);
    const char *rbytes = mbxC_read_str(&rd, &n);
    uint64_t mine = native_args_hash(sig, args), theirs = 0;
    for (size_t i = 0; hash_len == 8 && i < 8; i++)
      theirs |= (uint64_t)(unsigned char)hash[i] << (8 * i); /* little-endian */
    if (fn_len != strlen(fn->name) || memcmp(rname, fn->name, fn_len) != 0 || hash_len != 8 ||
        theirs != mine) {
      diverge(pl,
              "record %zu: the replay called native %s, or with other arguments, where "
              "the log has another call",
              pl->cursor - 1, fn->name);
      return MBXC_CALL_ERROR;
    }
    if (is_error) {
      if (n >= sizeof pl->native_error) {
        diverge(pl, "record %zu: the recorded error of %s is too long", pl->cursor - 1, fn->name);
        return MBXC_CALL_ERROR;
      }
      *bytes = rbytes;
      *len = n;
      return MBXC_CALL_ERROR;
    }
    if (!native_ret_set(sig->ret, word, ret) || (sig->ret == 'o' ? n != word : n != 0)) {
      diverge(pl, "record %zu: the recorded result of %s is not a value of its return type",
              pl->cursor - 1, fn->name);
      memset(ret, 0, sizeof *ret);
      return MBXC_CALL_ERROR;
    }
    *bytes = sig->ret == 'o' ? rbytes : NULL;
    *len = sig->ret == 'o' ? n : 0;
    return MBXC_CALL_VALUE;
  }
  const char *out = NULL;
  size_t out_len = 0;
  mbxC_call_result res = local_native_call(pl, index, args, ret, &out, &out_len);
  if (pl->logging) {
    unsigned char hash[8];
    uint64_t h = native_args_hash(sig, args);
    for (int i = 0; i < 8; i++)
      hash[i] = (unsigned char)(h >> (8 * i));
    mbxC_replay_begin(&pl->log, MBXC_REC_NATIVE_CALL);
    mbxC_replay_put_str(&pl->log, fn->name, strlen(fn->name));
    mbxC_replay_put_str(&pl->log, hash, 8);
    mbxC_replay_put_u8(&pl->log, res == MBXC_CALL_ERROR);
    mbxC_replay_put_u64(&pl->log, res == MBXC_CALL_ERROR ? 0 : native_ret_word(sig->ret, ret));
    int with_bytes = res == MBXC_CALL_ERROR || sig->ret == 'o';
    mbxC_replay_put_str(&pl->log, with_bytes ? out : "", with_bytes ? out_len : 0);
    mbxC_replay_end(&pl->log);
  }
  if (bytes) *bytes = out;
  if (len) *len = out_len;
  return res;
}

int mbxC_port_local_init(mbxC_port_local *pl, const mbx_policy *p) {
  memset(pl, 0, sizeof *pl);
  pl->port = (mbxC_port){.ud = pl,
                         .wall_time = port_wall_time,
                         .cpu_time = port_cpu_time,
                         .random_seed = port_random_seed,
                         .env_get = port_env_get,
                         .host_fns = &pl->host_fns,
                         .host_call = port_host_call,
                         .native_call = port_native_call};
  pl->time_fixed = p->time_fixed;
  pl->time = p->time;
  pl->seed_fixed = p->seed_fixed;
  pl->seed = p->seed;
  pl->port.deterministic = p->deterministic;
  pl->cpu_start_ns = thread_cpu_ns();
  if (mbxC_hostfn_copy(&pl->host_fns, &p->host_fns) != 0) return -1;
  if (p->env_count == 0) return 0;
  /* A copy, so the host may change or free the policy while sandboxes made from it live. */
  pl->env = calloc(p->env_count, sizeof *pl->env);
  if (pl->env == NULL) {
    mbxC_port_local_free(pl);
    return -1;
  }
  for (size_t i = 0; i < p->env_count; i++) {
    mbxC_env_var *v = &pl->env[i];
    v->name = dup_bytes(p->env[i].name, strlen(p->env[i].name));
    v->value = dup_bytes(p->env[i].value, p->env[i].value_len);
    v->value_len = p->env[i].value_len;
    pl->env_count = i + 1;
    if (v->name == NULL || v->value == NULL) {
      mbxC_port_local_free(pl);
      return -1;
    }
  }
  return 0;
}

void mbxC_port_local_free(mbxC_port_local *pl) {
  for (size_t i = 0; i < pl->env_count; i++) {
    free(pl->env[i].name);
    free(pl->env[i].value);
  }
  free(pl->env);
  pl->env = NULL;
  pl->env_count = 0;
  mbxC_hostfn_clear(&pl->host_fns);
  mbxC_host_reply_free(&pl->reply);
  free(pl->native_out);
  pl->native_out = NULL;
  mbxC_replay_free(&pl->log);
  pl->logging = pl->replaying = 0;
}

void mbxC_port_local_run_begin(mbxC_port_local *pl) {
  pl->cpu_start_ns = thread_cpu_ns();
}

void mbxC_port_log_begin(mbxC_port_local *pl, uint64_t chain0) {
  mbxC_replay_free(&pl->log);
  mbxC_replay_init(&pl->log, chain0);
  pl->chain0 = chain0;
  pl->logging = 1;
  pl->replaying = 0;
  pl->cursor = 0;
  pl->diverged[0] = '\0';
}

void mbxC_port_replay_begin(mbxC_port_local *pl, mbxC_replay_log *log) {
  mbxC_replay_free(&pl->log);
  pl->log = *log;
  memset(log, 0, sizeof *log);
  pl->logging = 1;
  pl->replaying = 1;
  pl->cursor = 0;
  pl->diverged[0] = '\0';
}

int mbxC_port_replay_end(mbxC_port_local *pl) {
  if (!pl->diverged[0] && pl->cursor != pl->log.count)
    diverge(pl, "record %zu: the replay reached the end with %zu of the log's records left",
            pl->cursor, pl->log.count - pl->cursor);
  pl->replaying = 0;
  return pl->diverged[0] ? -1 : 0;
}

/* Session records go to the log when live; when replaying they are written to a scratch log
   and compared with the record at the cursor. */
static mbxC_replay_log *session_target(mbxC_port_local *pl, mbxC_replay_log *scratch) {
  if (pl->replaying) {
    mbxC_replay_init(scratch, 0);
    return scratch;
  }
  return pl->logging ? &pl->log : NULL;
}

static void session_check(mbxC_port_local *pl, mbxC_replay_log *scratch) {
  if (!pl->replaying) return;
  mbxC_record mine, theirs;
  if (pl->diverged[0]) {
    /* already reported */
  } else if (scratch->broken || !mbxC_replay_get(scratch, 0, &mine)) {
    diverge(pl, "record %zu: out of host memory while checking the replay", pl->cursor);
  } else if (!mbxC_replay_get(&pl->log, pl->cursor, &theirs)) {
    diverge(pl, "record %zu: the replay made a %s past the end of the log", pl->cursor,
            mbxC_rec_type_name(mine.type));
  } else if (theirs.type != mine.type) {
    diverge(pl, "record %zu: the replay made a %s where the log has %s", pl->cursor,
            mbxC_rec_type_name(mine.type), mbxC_rec_type_name(theirs.type));
  } else if (theirs.len != mine.len || memcmp(theirs.payload, mine.payload, mine.len) != 0) {
    if (mine.type == MBXC_REC_OUTCOME) {
      mbxC_reader a = mbxC_reader_of(&mine), b = mbxC_reader_of(&theirs);
      unsigned sa = mbxC_read_u32(&a), sb = mbxC_read_u32(&b);
      diverge(pl,
              "record %zu: the replayed call ended with status %u where the original "
              "ended with %u, or with another value or host call count",
              pl->cursor, sa, sb);
    } else {
      diverge(pl, "record %zu: the replay's %s differs from the log's", pl->cursor,
              mbxC_rec_type_name(mine.type));
    }
  } else {
    pl->cursor++;
  }
  mbxC_replay_free(scratch);
}

void mbxC_port_session_run(mbxC_port_local *pl, const char *chunk_name, const char *code,
                           size_t code_len, const char *inputs, size_t inputs_len) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(pl, &scratch);
  if (log == NULL) return;
  const char *name = chunk_name ? chunk_name : "";
  mbxC_replay_begin(log, MBXC_REC_RUN);
  mbxC_replay_put_str(log, name, strlen(name));
  mbxC_replay_put_str(log, code ? code : "", code ? code_len : 0);
  mbxC_replay_put_u8(log, inputs != NULL);
  mbxC_replay_put_str(log, inputs ? inputs : "", inputs ? inputs_len : 0);
  mbxC_replay_end(log);
  session_check(pl, &scratch);
}

void mbxC_port_session_resume(mbxC_port_local *pl, int as_error, const char *value, size_t len) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(pl, &scratch);
  if (log == NULL) return;
  mbxC_replay_begin(log, as_error ? MBXC_REC_RESUME_ERROR : MBXC_REC_RESUME);
  mbxC_replay_put_str(log, value ? value : "", value ? len : 0);
  mbxC_replay_end(log);
  session_check(pl, &scratch);
}

void mbxC_port_session_outcome(mbxC_port_local *pl, uint32_t status, uint64_t hash,
                               uint64_t host_calls) {
  mbxC_replay_log scratch;
  mbxC_replay_log *log = session_target(pl, &scratch);
  if (log == NULL) return;
  mbxC_replay_begin(log, MBXC_REC_OUTCOME);
  mbxC_replay_put_u32(log, status);
  mbxC_replay_put_u64(log, hash);
  mbxC_replay_put_u64(log, host_calls);
  mbxC_replay_end(log);
  session_check(pl, &scratch);
}
