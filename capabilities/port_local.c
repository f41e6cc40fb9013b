/* capabilities/port_local.c -- the port served in-process: clock, CPU time, random seeds, the
   virtual environment, host callbacks and native calls, from a copy of the policy. */
#include "capabilities/port_local.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "capabilities/ffi.h"
#include "common/bytes.h"

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

static mbxC_call_result local_host_call(void *ud, size_t index, const char *args,
                                        size_t args_len, const mbxC_wait *wait,
                                        const char **reply, size_t *reply_len) {
  mbxC_port_local *pl = ud;
  (void)wait; /* host time: the callback decides how long it takes (capabilities/port.h) */
  return mbxC_hostfn_call(&pl->host_fns.fns[index], &pl->reply, args, args_len, reply,
                          reply_len);
}

static mbxC_call_result native_error(mbxC_port_local *pl, const char **bytes, size_t *len) {
  *bytes = pl->native_error;
  *len = strlen(pl->native_error);
  return MBXC_CALL_ERROR;
}

static mbxC_call_result local_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                          const mbxC_wait *wait, mbxC_ffi_value *ret,
                                          const char **bytes, size_t *len) {
  mbxC_port_local *pl = ud;
  (void)wait; /* host time, as for host callbacks */
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

/* The grants descriptor the stdlib reads: names, kinds and native signatures, as plain data
   (the callbacks and the prepared calls stay here). */
static int grant_functions(mbxC_port_local *pl) {
  if (pl->host_fns.count == 0) return 0;
  pl->grant_fns = calloc(pl->host_fns.count, sizeof *pl->grant_fns);
  if (pl->grant_fns == NULL) return -1;
  for (size_t i = 0; i < pl->host_fns.count; i++) {
    const mbxC_hostfn *fn = &pl->host_fns.fns[i];
    pl->grant_fns[i].name = fn->name;
    pl->grant_fns[i].kind = fn->kind;
    if (fn->kind == MBXC_FN_NATIVE) pl->grant_fns[i].sig = *mbxC_native_sig(fn->native);
  }
  pl->grants.fns = pl->grant_fns;
  pl->grants.fn_count = pl->host_fns.count;
  return 0;
}

int mbxC_port_local_init(mbxC_port_local *pl, const mbx_policy *p) {
  memset(pl, 0, sizeof *pl);
  /* Only the operations this port serves: the filesystem and exec stay NULL (not granted)
     until their issues land. */
  pl->port = (mbxC_port){.version = MBXC_PORT_VERSION,
                         .ud = pl,
                         .grants = &pl->grants,
                         .wall_time = local_wall_time,
                         .cpu_time = local_cpu_time,
                         .random_seed = local_random_seed,
                         .env_get = local_env_get,
                         .host_call = local_host_call,
                         .native_call = local_native_call};
  pl->time_fixed = p->time_fixed;
  pl->time = p->time;
  pl->seed_fixed = p->seed_fixed;
  pl->seed = p->seed;
  pl->grants.deterministic = p->deterministic;
  pl->cpu_start_ns = thread_cpu_ns();
  if (mbxC_hostfn_copy(&pl->host_fns, &p->host_fns) != 0) return -1;
  if (grant_functions(pl) != 0) {
    mbxC_port_local_free(pl);
    return -1;
  }
  if (p->env_count == 0) return 0;
  /* A copy, so the host may change or free the policy while sandboxes made from it live. */
  pl->env = calloc(p->env_count, sizeof *pl->env);
  if (pl->env == NULL) {
    mbxC_port_local_free(pl);
    return -1;
  }
  for (size_t i = 0; i < p->env_count; i++) {
    mbxC_env_var *v = &pl->env[i];
    v->name = mbxU_dup_bytes(p->env[i].name, strlen(p->env[i].name));
    v->value = mbxU_dup_bytes(p->env[i].value, p->env[i].value_len);
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
  free(pl->grant_fns);
  pl->grant_fns = NULL;
  pl->grants.fns = NULL;
  pl->grants.fn_count = 0;
}

void mbxC_port_local_run_begin(mbxC_port_local *pl) {
  pl->cpu_start_ns = thread_cpu_ns();
}

uint64_t mbxC_port_local_position(const mbxC_port_local *pl) {
  return pl->draws;
}

void mbxC_port_local_seek(mbxC_port_local *pl, uint64_t position) {
  pl->draws = position;
}
