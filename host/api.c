/* host/api.c -- the public C API: runtime, policy, sandbox, run, interrupt. */
#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <lua.h>
#include <xxhash.h>

#include "capabilities/ffi.h"
#include "capabilities/policy.h"
#include "capabilities/port_local.h"
#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "host/result.h"
#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/bytecode_cache.h"
#include "vm/errors.h"
#include "vm/run.h"
#include "vm/vm.h"

/* mbx_run refuses to start with less C stack than this: Lua recurses in C up to 200 levels,
   and the most stack-hungry nesting measured needs more than 256 KiB (THREATS section 1). */
#define MBXH_MIN_STACK ((size_t)1 << 20)

struct mbx_runtime {
  locale_t c_locale;      /* runs switch the calling thread to it with uselocale */
  uint64_t address_key;   /* seeds the hashes that stand in for addresses */
  _Atomic uint64_t sandboxes_created;
  mbxV_pool *slots;       /* sandboxes' heap slots, reused by every thread (vm/arena.h) */
  mbxV_bcache *bytecode;  /* compiled top-level sources of mbx_run (vm/bytecode_cache.h) */
  _Atomic int bytecode_on; /* 0 once MBX_CAP_BYTECODE_CACHE_BYTES is 0: skip even the hash */
  /* The resident estimate: the sum of the live sandboxes' heaps as of their last creation,
     run, reset or rewind (a run's own growth is bounded by its memory limit). */
  _Atomic uint64_t heap_total;
  _Atomic uint64_t heap_cap; /* 0 = none */
};

/* Address space all slots may reserve by default: 8 TiB of the 128 TiB a 47-bit address
   space offers. With the default 64 MiB limit (512 MiB slots) the cap on live sandboxes
   binds first; with 1 GiB limits (8 GiB slots) this one does, at about a thousand. */
#define MBXH_DEFAULT_RESERVED_CAP ((uint64_t)8 << 40)

struct mbx_sandbox {
  mbx_runtime *rt;
  mbxV_vm *vm;            /* lives at a fixed address inside its slot */
  mbxC_port_local port; /* the policy's clock, seed, environment and functions, copied */
  /* Deterministic policies only: the record/replay layer over port (snapshots); the stdlib
     then talks to record.port instead of port.port. */
  mbxC_port_record record;
  int recording;
  mbxV_config cfg;        /* what the sandbox was made with, for mbx_sandbox_reset */
  uint64_t heap_counted;  /* this sandbox's share of rt->heap_total */
  int poisoned;
  mbx_status poisoned_by;
  _Atomic int busy;
  /* mbx_sandbox_checkpoint: the state's bytes, and the host-side state that goes with them
     (the output buffers are per run: nothing of them is kept). */
  mbxV_checkpoint checkpoint;
  int checkpoint_poisoned;
  mbx_status checkpoint_poisoned_by;
  uint64_t checkpoint_draws; /* port seeds drawn: math.randomseed() continues from here */
  uint64_t host_call_limit;  /* MBX_LIMIT_HOST_CALLS, for the budget after every restore */
  /* Snapshots (deterministic policies): the blob's fixed header, the log's generation (a
     reset starts a new log) and where the log stood at the checkpoint. */
  mbxC_snap_header snap;
  uint64_t log_generation;
  uint64_t checkpoint_log_generation;
  mbxC_record_mark checkpoint_log;
};

MBX_API const char *mbx_version(void) {
  return MBX_VERSION;
}

MBX_API int mbx_version_number(void) {
  return MBX_VERSION_NUMBER;
}

MBX_API void mbx_free(void *p) {
  free(p);
}

/* ---- runtime ---- */

MBX_API mbx_runtime *mbx_runtime_new(mbx_error *err) {
  mbx_runtime *rt = calloc(1, sizeof *rt);
  if (rt == NULL) {
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  rt->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (rt->c_locale == (locale_t)0) {
    free(rt);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: cannot create the C locale");
    return NULL;
  }
  if (getrandom(&rt->address_key, sizeof rt->address_key, 0) != sizeof rt->address_key) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rt->address_key = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)rt;
  }
  rt->slots = mbxV_pool_new(MBXV_POOL_DEFAULT_CAP);
  rt->bytecode = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  if (rt->slots == NULL || rt->bytecode == NULL) {
    mbxV_pool_free(rt->slots);
    mbxV_bcache_free(rt->bytecode);
    freelocale(rt->c_locale);
    free(rt);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  mbxV_pool_set_caps(rt->slots, MBXV_POOL_DEFAULT_CAP, (size_t)MBXH_DEFAULT_RESERVED_CAP);
  atomic_store(&rt->bytecode_on, 1);
  /* Past the machine's memory the estimate would end in the OOM killer, not an error. */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  atomic_store(&rt->heap_cap, pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0);
  return rt;
}

MBX_API void mbx_runtime_free(mbx_runtime *rt) {
  if (rt == NULL) return;
  mbxV_bcache_free(rt->bytecode);
  mbxV_pool_free(rt->slots);
  freelocale(rt->c_locale);
  free(rt);
}

MBX_API mbx_status mbx_runtime_set_cap(mbx_runtime *rt, mbx_runtime_cap which, uint64_t value,
                                       mbx_error *err) {
  if (rt == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_cap: the runtime is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  unsigned slots;
  size_t reserved;
  mbxV_pool_get_caps(rt->slots, &slots, &reserved);
  switch (which) {
  case MBX_CAP_SANDBOXES:
    if (value == 0 || value > UINT32_MAX) {
      mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                     "mbx_runtime_set_cap: MBX_CAP_SANDBOXES must be 1 to %u, not %llu",
                     (unsigned)UINT32_MAX, (unsigned long long)value);
      return MBX_INVALID_ARGUMENT;
    }
    mbxV_pool_set_caps(rt->slots, (unsigned)value, reserved);
    return MBX_OK;
  case MBX_CAP_RESERVED_BYTES:
    if (value > SIZE_MAX) value = 0; /* more than the address space: no cap */
    mbxV_pool_set_caps(rt->slots, slots, (size_t)value);
    return MBX_OK;
  case MBX_CAP_HEAP_BYTES:
    atomic_store(&rt->heap_cap, value);
    return MBX_OK;
  case MBX_CAP_BYTECODE_CACHE_BYTES:
    if (value > SIZE_MAX) value = SIZE_MAX;
    mbxV_bcache_set_max(rt->bytecode, (size_t)value);
    atomic_store(&rt->bytecode_on, value != 0);
    return MBX_OK;
  }
  mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_cap: unknown cap %d", (int)which);
  return MBX_INVALID_ARGUMENT;
}

MBX_API uint64_t mbx_runtime_get_cap(const mbx_runtime *rt, mbx_runtime_cap which) {
  if (rt == NULL) return 0;
  mbx_runtime *m = (mbx_runtime *)rt; /* the getters lock: nothing observable changes */
  unsigned slots;
  size_t reserved;
  mbxV_pool_get_caps(m->slots, &slots, &reserved);
  switch (which) {
  case MBX_CAP_SANDBOXES:
    return slots;
  case MBX_CAP_RESERVED_BYTES:
    return reserved;
  case MBX_CAP_HEAP_BYTES:
    return atomic_load(&m->heap_cap);
  case MBX_CAP_BYTECODE_CACHE_BYTES:
    return mbxV_bcache_max(m->bytecode);
  }
  return 0;
}

MBX_API uint64_t mbx_runtime_usage(const mbx_runtime *rt, mbx_runtime_cap which) {
  if (rt == NULL) return 0;
  mbx_runtime *m = (mbx_runtime *)rt;
  mbxV_bcache_stats stats;
  switch (which) {
  case MBX_CAP_SANDBOXES:
    return mbxV_pool_live(m->slots);
  case MBX_CAP_RESERVED_BYTES:
    return mbxV_pool_reserved(m->slots);
  case MBX_CAP_HEAP_BYTES:
    return atomic_load(&m->heap_total);
  case MBX_CAP_BYTECODE_CACHE_BYTES:
    mbxV_bcache_stats_get(m->bytecode, &stats);
    return stats.bytes;
  }
  return 0;
}

/* ---- policy ---- */

MBX_API mbx_policy *mbx_policy_new(void) {
  mbx_policy *p = malloc(sizeof *p);
  if (p) mbxC_policy_defaults(p);
  return p;
}

MBX_API void mbx_policy_free(mbx_policy *p) {
  if (p == NULL) return;
  mbxC_policy_clear(p);
  free(p);
}

MBX_API mbx_status mbx_policy_set_env(mbx_policy *p, const char *name, const char *value,
                                      mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_env: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  switch (mbxC_policy_set_env(p, name, value, why, sizeof why)) {
  case 0:
    return MBX_OK;
  case MBXC_POLICY_NO_MEMORY:
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_policy_set_env: out of memory");
    return MBX_NO_MEMORY;
  default:
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_set_time(mbx_policy *p, int64_t epoch_seconds, mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_time: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_time(p, epoch_seconds, why, sizeof why) != 0) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_seed(mbx_policy *p, uint64_t seed, mbx_error *err) {
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_seed: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbxC_policy_set_seed(p, seed);
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_deterministic(mbx_policy *p, int on, mbx_error *err) {
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_deterministic: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbxC_policy_set_deterministic(p, on);
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit_checked(mbx_policy *p, mbx_limit which, uint64_t value,
                                                mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_limit: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_limit(p, which, value, why, sizeof why) != 0) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value) {
  return mbx_policy_set_limit_checked(p, which, value, NULL);
}

MBX_API uint64_t mbx_policy_get_limit(const mbx_policy *p, mbx_limit which) {
  return p ? mbxC_policy_get_limit(p, which) : 0;
}

static mbx_status add_hostfn(mbx_policy *p, const char *fn_name, const char *name,
                             mbxC_fn_kind kind, mbx_host_fn fn, void *userdata,
                             mbx_error *err) {
  char why[300];
  if (p == NULL || (kind == MBXC_FN_SYNC && fn == NULL)) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s: the policy and the callback must not be NULL",
                   fn_name);
    return MBX_INVALID_ARGUMENT;
  }
  switch (mbxC_hostfn_add(&p->host_fns, name, kind, fn, userdata, why, sizeof why)) {
  case 0:
    return MBX_OK;
  case MBXC_HOSTFN_NO_MEMORY:
    mbxV_error_set(err, MBX_NO_MEMORY, "%s: out of memory", fn_name);
    return MBX_NO_MEMORY;
  default:
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "%s: %s", fn_name, why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_add_function(mbx_policy *p, const char *name, mbx_host_fn fn,
                                           void *userdata, mbx_error *err) {
  return add_hostfn(p, "mbx_policy_add_function", name, MBXC_FN_SYNC, fn, userdata, err);
}

MBX_API mbx_status mbx_policy_add_external(mbx_policy *p, const char *name, mbx_error *err) {
  return add_hostfn(p, "mbx_policy_add_external", name, MBXC_FN_EXTERNAL, NULL, NULL, err);
}

MBX_API mbx_status mbx_policy_bind_native(mbx_policy *p, const char *name, const char *signature,
                                          void (*fn)(void), mbx_error *err) {
  char why[300];
  if (p == NULL || fn == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_bind_native: the policy and the function must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  /* Describe, validate, then act: the signature is parsed and prepared before the name is
     stored, and a refused name releases the prepared call. */
  int made;
  mbxC_native *native = mbxC_native_new(signature, fn, &made, why, sizeof why);
  if (native == NULL) {
    if (made == MBXC_FFI_NO_MEMORY) {
      mbxV_error_set(err, MBX_NO_MEMORY, "mbx_policy_bind_native: out of memory");
      return MBX_NO_MEMORY;
    }
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_bind_native: %s", why);
    return MBX_INVALID_ARGUMENT;
  }
  int added = mbxC_hostfn_add_native(&p->host_fns, name, native, why, sizeof why);
  if (added == 0) return MBX_OK;
  mbxC_native_unref(native);
  if (added == MBXC_HOSTFN_NO_MEMORY) {
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_policy_bind_native: out of memory");
    return MBX_NO_MEMORY;
  }
  mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_bind_native: %s", why);
  return MBX_INVALID_ARGUMENT;
}

/* ---- sandbox ---- */

static int run_protected(lua_State *L, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  return lua_pcall(L, 0, 0, 0) == LUA_OK;
}

/* Give a freshly restored state (new or reset) what depends on the policy: a slot's
   template was built with no port, so math.random is seeded again and the host functions
   are installed here. Returns 0 when either step fails (guest heap too small). */
static int attach_port(mbx_sandbox *sb) {
  mbxL_attach(sb->vm->L, sb->recording ? &sb->record.port : &sb->port.port);
  sb->vm->budget.host_call_limit = sb->host_call_limit;
  return run_protected(sb->vm->L, mbxL_reseed) &&
         run_protected(sb->vm->L, mbxL_open_host_functions);
}

/* mbx_sandbox_new, and mbx_sandbox_restore with replay: the port answers from that log (it
   takes the log over, also on failure). */
static mbx_sandbox *sandbox_new(mbx_runtime *rt, const mbx_policy *p, mbxC_replay_log *replay,
                                mbx_error *err) {
  mbx_sandbox *sb = calloc(1, sizeof *sb);
  if (sb == NULL) {
    if (replay) mbxC_replay_free(replay);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return NULL;
  }
  sb->rt = rt;
  mbxV_config cfg = {.memory_limit = (size_t)p->memory,
                     .instruction_limit = p->instructions,
                     .time_limit_ms = p->time_ms,
                     .output_limit = (size_t)p->output,
                     .source_limit = (size_t)p->source,
                     .address_key = rt->address_key ^ atomic_fetch_add(&rt->sandboxes_created, 1)};
  if (mbxC_port_local_init(&sb->port, p) != 0) {
    if (replay) mbxC_replay_free(replay);
    free(sb);
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return NULL;
  }
  if (p->deterministic) {
    /* Only a deterministic sandbox can be replayed: only it keeps a log. */
    sb->snap = (mbxC_snap_header){.format = MBXC_SNAP_FORMAT,
                                  .lua_version = LUA_VERSION_RELEASE_NUM,
                                  .moonbox_version = MBX_VERSION_NUMBER,
                                  .build_id = mbxC_build_id(),
                                  .policy_digest = mbxC_policy_digest(p),
                                  .seed_fixed = p->seed_fixed != 0,
                                  .seed = p->seed_fixed ? p->seed : 0,
                                  .time_fixed = p->time_fixed != 0,
                                  .time = p->time_fixed ? p->time : 0};
    mbxC_port_record_init(&sb->record, &sb->port.port, mbxC_snap_chain0(&sb->snap));
    sb->recording = 1;
    if (replay) mbxC_port_record_replay_begin(&sb->record, replay);
  }
  if (replay) mbxC_replay_free(replay); /* taken over above, or of no use */
  sb->cfg = cfg;
  sb->host_call_limit = p->host_calls;
  /* A slot's template was built with no port (it holds nothing of one sandbox); math.random
     is seeded from this sandbox's port once the state is in place. */
  mbxV_new_result made = mbxV_vm_new(rt->slots, &cfg, mbxL_open_sandbox, &sb->vm);
  uint64_t heap_total = 0, heap_cap = atomic_load(&rt->heap_cap);
  if (made == MBXV_NEW_OK) {
    sb->heap_counted = sb->vm->heap.used;
    heap_total = atomic_fetch_add(&rt->heap_total, sb->heap_counted) + sb->heap_counted;
    if (heap_cap && heap_total > heap_cap) {
      atomic_fetch_sub(&rt->heap_total, sb->heap_counted);
      mbxV_vm_free(sb->vm);
      mbxC_port_record_free(&sb->record);
      mbxC_port_local_free(&sb->port);
      free(sb);
      mbxV_error_set(err, MBX_NO_MEMORY,
                     "mbx_sandbox_new: the live sandboxes' guest heaps would total %llu KiB, "
                     "past the runtime's cap MBX_CAP_HEAP_BYTES (%llu KiB); free or reset "
                     "sandboxes, or raise the cap with mbx_runtime_set_cap",
                     (unsigned long long)(heap_total >> 10), (unsigned long long)(heap_cap >> 10));
      return NULL;
    }
    if (attach_port(sb)) return sb;
    atomic_fetch_sub(&rt->heap_total, sb->heap_counted);
    mbxV_vm_free(sb->vm);
  }
  mbxC_port_record_free(&sb->record);
  mbxC_port_local_free(&sb->port);
  free(sb);
  if (made == MBXV_NEW_CAP)
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: %llu sandboxes are live in this runtime, its cap "
                   "MBX_CAP_SANDBOXES; free some, or raise the cap with mbx_runtime_set_cap",
                   (unsigned long long)mbx_runtime_get_cap(rt, MBX_CAP_SANDBOXES));
  else if (made == MBXV_NEW_RESERVE_CAP)
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: reserving %zu MiB of address space for the sandbox's heap "
                   "(8x MBX_LIMIT_MEMORY) would pass the runtime's cap MBX_CAP_RESERVED_BYTES "
                   "(%llu MiB, %llu MiB reserved); free sandboxes, lower the memory limit or "
                   "raise the cap",
                   mbxV_slot_size_for(cfg.memory_limit) >> 20,
                   (unsigned long long)(mbx_runtime_get_cap(rt, MBX_CAP_RESERVED_BYTES) >> 20),
                   (unsigned long long)(mbx_runtime_usage(rt, MBX_CAP_RESERVED_BYTES) >> 20));
  else if (made == MBXV_NEW_NO_SPACE)
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: cannot reserve %zu MiB of address space for the sandbox's "
                   "heap (8x MBX_LIMIT_MEMORY); lower the limit or free sandboxes",
                   mbxV_slot_size_for(cfg.memory_limit) >> 20);
  else
    mbxV_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: the standard library does not fit in the memory limit "
                   "(raise MBX_LIMIT_MEMORY)");
  return NULL;
}

MBX_API mbx_sandbox *mbx_sandbox_new(mbx_runtime *rt, const mbx_policy *p, mbx_error *err) {
  if (rt == NULL || p == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_new: the runtime and the policy "
                   "must not be NULL");
    return NULL;
  }
  return sandbox_new(rt, p, NULL, err);
}

MBX_API void mbx_sandbox_free(mbx_sandbox *sb) {
  if (sb == NULL) return;
  atomic_fetch_sub(&sb->rt->heap_total, sb->heap_counted);
  mbxV_checkpoint_free(&sb->checkpoint);
  mbxV_vm_free(sb->vm);
  mbxC_port_record_free(&sb->record);
  mbxC_port_local_free(&sb->port);
  free(sb);
}

MBX_API mbx_status mbx_sandbox_interrupt(mbx_sandbox *sb) {
  if (sb == NULL) return MBX_INVALID_ARGUMENT;
  atomic_store_explicit(&sb->vm->budget.interrupt, 1, memory_order_release);
  return MBX_OK;
}

MBX_API int mbx_sandbox_poisoned(const mbx_sandbox *sb) {
  return sb ? sb->poisoned : 0;
}

MBX_API int mbx_sandbox_paused(const mbx_sandbox *sb) {
  return sb && sb->vm && sb->vm->L ? sb->vm->paused : 0;
}

/* Bring rt->heap_total up to date with this sandbox's heap (unsigned arithmetic wraps, so a
   shrink is a subtraction). */
static void count_heap(mbx_sandbox *sb) {
  uint64_t now = sb->vm->L ? sb->vm->heap.used : 0;
  atomic_fetch_add(&sb->rt->heap_total, now - sb->heap_counted);
  sb->heap_counted = now;
}

/* Take the sandbox for a call that must not overlap a run; fills err when it is busy. */
static int claim(mbx_sandbox *sb, const char *fn, mbx_error *err) {
  if (!atomic_exchange(&sb->busy, 1)) return 1;
  mbxV_error_set(err, MBX_SANDBOX_BUSY, "%s: the sandbox is running on another thread", fn);
  return 0;
}

MBX_API mbx_status mbx_sandbox_reset(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_reset: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (!claim(sb, "mbx_sandbox_reset", err)) return MBX_SANDBOX_BUSY;
  /* A fresh address key, as a new sandbox would get: hashes shown in place of addresses must
     not match across the reset. */
  sb->cfg.address_key = sb->rt->address_key ^ atomic_fetch_add(&sb->rt->sandboxes_created, 1);
  mbx_status s = MBX_OK;
  if (mbxV_vm_reset(sb->vm, &sb->cfg, mbxL_open_sandbox) != MBXV_NEW_OK) {
    s = MBX_NO_MEMORY;
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_reset: out of host memory while building "
                                       "the pristine state; the sandbox refuses runs until a "
                                       "reset succeeds");
  } else {
    /* Seeded again from the port's first draw, exactly as mbx_sandbox_new seeds: with a
       policy seed the sequence is the new sandbox's, without one it is fresh randomness. */
    mbxC_port_local_seek(&sb->port, 0);
    /* The pristine state is a new session: its log starts again (the seed draw below is its
       first record). */
    if (sb->recording) {
      mbxC_port_record_restart(&sb->record);
      sb->log_generation++;
    }
    if (!attach_port(sb)) {
      s = MBX_NO_MEMORY;
      mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_reset: could not seed math.random or "
                                         "install the host functions");
    }
  }
  sb->poisoned = s != MBX_OK;
  sb->poisoned_by = s != MBX_OK ? MBX_INTERNAL_ERROR : MBX_OK;
  count_heap(sb);
  atomic_store(&sb->busy, 0);
  return s;
}

MBX_API mbx_status mbx_sandbox_checkpoint(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_checkpoint: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (!claim(sb, "mbx_sandbox_checkpoint", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = MBX_OK;
  switch (mbxV_vm_checkpoint(sb->vm, &sb->checkpoint)) {
  case MBXV_CHECKPOINT_OK:
    sb->checkpoint_poisoned = sb->poisoned;
    sb->checkpoint_poisoned_by = sb->poisoned_by;
    sb->checkpoint_draws = mbxC_port_local_position(&sb->port);
    sb->checkpoint_log_generation = sb->log_generation;
    sb->checkpoint_log = mbxC_port_record_mark(&sb->record);
    break;
  case MBXV_CHECKPOINT_NO_MEMORY:
    s = MBX_NO_MEMORY;
    mbxV_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_checkpoint: out of host memory for the "
                                       "copy; the previous checkpoint (if any) is kept");
    break;
  case MBXV_CHECKPOINT_UNSUPPORTED:
    s = MBX_UNSUPPORTED;
    mbxV_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_checkpoint: not available in this build "
                                         "(MBX_ARENA_MALLOC: the guest heap is not one arena)");
    break;
  }
  atomic_store(&sb->busy, 0);
  return s;
}

MBX_API mbx_status mbx_sandbox_rewind(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_rewind: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
#ifdef MBX_ARENA_MALLOC
  mbxV_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_rewind: not available in this build "
                                       "(MBX_ARENA_MALLOC: the guest heap is not one arena)");
  return MBX_UNSUPPORTED;
#else
  if (!claim(sb, "mbx_sandbox_rewind", err)) return MBX_SANDBOX_BUSY;
  if (sb->checkpoint.len == 0) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_rewind: the sandbox has no "
                                              "checkpoint (call mbx_sandbox_checkpoint first)");
    return MBX_INVALID_ARGUMENT;
  }
  mbxV_vm_rewind(sb->vm, &sb->checkpoint);
  sb->poisoned = sb->checkpoint_poisoned;
  sb->poisoned_by = sb->checkpoint_poisoned_by;
  mbxC_port_local_seek(&sb->port, sb->checkpoint_draws);
  if (sb->recording) {
    /* The log goes back with the state. Across a reset the records of the checkpoint's
       session are gone: the sandbox cannot be snapshotted until its next reset. */
    if (sb->checkpoint_log_generation == sb->log_generation)
      mbxC_port_record_rewind(&sb->record, sb->checkpoint_log);
    else
      mbxC_port_record_break(&sb->record);
  }
  count_heap(sb);
  atomic_store(&sb->busy, 0);
  return MBX_OK;
#endif
}

/* Free C stack below the current frame, from the thread's stack bounds (queried once per
   thread: pthread_getattr_np costs microseconds to milliseconds). */
static size_t stack_left(void) {
  static _Thread_local uintptr_t low;
  static _Thread_local int known;
  if (!known) {
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void *addr;
      size_t size;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) low = (uintptr_t)addr;
      pthread_attr_destroy(&attr);
    }
    known = 1;
  }
  char here;
  uintptr_t sp = (uintptr_t)&here;
  if (low == 0 || sp < low) return SIZE_MAX; /* unknown: do not refuse */
  return sp - low;
}

/* The outcome record after a run or resume: what a replay must reproduce. */
static void log_outcome(mbx_sandbox *sb, mbx_status s, const mbxV_outcome *o) {
  if (!sb->recording) return;
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
  /* Not the instruction count: it is not reproducible (capabilities/replay.h). */
  mbxC_port_record_outcome(&sb->record, (uint32_t)s, hash, host_calls);
}

static int poisons(mbx_status s) {
  return s != MBX_OK && s != MBX_SYNTAX_ERROR && s != MBX_RUNTIME_ERROR && s != MBX_PAUSED;
}

MBX_API mbx_status mbx_run_named(mbx_sandbox *sb, const char *code, size_t code_len,
                                 const char *chunk_name, const char *inputs_json,
                                 size_t inputs_len, mbx_result **out, mbx_error *err) {
  if (out) *out = NULL;
  if (sb == NULL || out == NULL || (code == NULL && code_len > 0) ||
      (inputs_json == NULL && inputs_len > 0)) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_run: the sandbox and out must not be NULL, nor code/inputs with a length");
    return MBX_INVALID_ARGUMENT;
  }
  /* busy first: only the thread that owns the run may read what the run writes. */
  if (atomic_exchange(&sb->busy, 1)) {
    mbxV_error_set(err, MBX_SANDBOX_BUSY, "mbx_run: the sandbox is already running on "
                                          "another thread");
    return MBX_SANDBOX_BUSY;
  }
  if (sb->poisoned) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_SANDBOX_POISONED,
                   "this sandbox ended a run with %s and refuses further runs; reset it "
                   "(mbx_sandbox_reset), rewind it to an earlier checkpoint, or free it and "
                   "create a new one",
                   mbx_status_key(sb->poisoned_by));
    return MBX_SANDBOX_POISONED;
  }
  if (mbx_sandbox_paused(sb)) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_SANDBOX_PAUSED,
                   "mbx_run: the sandbox is paused at an external call; continue it with "
                   "mbx_resume or mbx_resume_error, or abandon the run with mbx_sandbox_reset");
    return MBX_SANDBOX_PAUSED;
  }
  if (stack_left() < MBXH_MIN_STACK) {
    atomic_store(&sb->busy, 0);
    mbxV_error_set(err, MBX_STACK_TOO_SMALL,
                   "mbx_run: less than 1 MiB of C stack is left on this thread; run sandboxes "
                   "on a thread with a larger stack (e.g. 8 MiB)");
    return MBX_STACK_TOO_SMALL;
  }
  /* The C locale for the run: a host setlocale would change number formatting and string
     comparison, and strcoll over-reads in 5.4.4 (THREATS section 5, f623b969). */
  locale_t host_locale = uselocale(sb->rt->c_locale);
  /* Lua keeps LUA_IDSIZE - 1 bytes of a chunk name; keep the end of a long one, where the
     file name is ("...dir/script.lua"). */
  char name[LUA_IDSIZE];
  const char *given = chunk_name && *chunk_name ? chunk_name : "input";
  size_t given_len = strlen(given), room = sizeof name - 2;
  if (given_len > room) snprintf(name, sizeof name, "=...%s", given + given_len - (room - 3));
  else snprintf(name, sizeof name, "=%s", given);
  mbxV_outcome outcome;
  mbxC_port_local_run_begin(&sb->port);
  mbxL_run_begin(sb->vm->L);
  /* A source past the limit touches nothing (mbxV_run_cached refuses it): not a session
     event. */
  int logged = sb->recording && code_len <= sb->cfg.source_limit;
  if (logged) mbxC_port_record_run(&sb->record, chunk_name, code, code_len, inputs_json, inputs_len);
  const char *code_text = code ? code : "";
  /* Deterministic mode bypasses the bytecode cache: a hit skips the parse and its charge, so
     the instruction count (and os.clock, which reads it) would depend on what ran before. */
  mbxV_bcache *cache = atomic_load(&sb->rt->bytecode_on) && !sb->port.grants.deterministic
                           ? sb->rt->bytecode
                           : NULL;
  mbx_status s = mbxV_run_cached(sb->vm, cache, code_text, code_len, name, inputs_json,
                                 inputs_len, &outcome, err);
  uselocale(host_locale);
  if (logged) log_outcome(sb, s, &outcome);
  if (s < MBX_API_ERROR_BASE) {
    if (poisons(s)) {
      sb->poisoned = 1;
      sb->poisoned_by = s;
    }
    *out = mbxH_result_new(&outcome, &sb->vm->output);
    if (*out == NULL) {
      mbxV_error_set(err, MBX_NO_MEMORY, "mbx_run: out of host memory for the result");
      s = MBX_NO_MEMORY;
    }
    count_heap(sb);
  }
  atomic_store(&sb->busy, 0);
  return s;
}

MBX_API mbx_status mbx_run(mbx_sandbox *sb, const char *code, size_t code_len,
                           const char *inputs_json, size_t inputs_len, mbx_result **out,
                           mbx_error *err) {
  return mbx_run_named(sb, code, code_len, "input", inputs_json, inputs_len, out, err);
}

/* mbx_resume and mbx_resume_error: the checks of mbx_run, then vm/run.c continues the run. */
static mbx_status resume(mbx_sandbox *sb, const char *fn, const char *value, size_t len,
                         int as_error, mbx_result **out, mbx_error *err) {
  if (out) *out = NULL;
  if (sb == NULL || out == NULL || (value == NULL && len > 0)) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "%s: the sandbox and out must not be NULL, nor the value with a length", fn);
    return MBX_INVALID_ARGUMENT;
  }
  if (atomic_exchange(&sb->busy, 1)) {
    mbxV_error_set(err, MBX_SANDBOX_BUSY, "%s: the sandbox is running on another thread", fn);
    return MBX_SANDBOX_BUSY;
  }
  mbx_status s = MBX_OK;
  if (sb->poisoned) {
    s = MBX_SANDBOX_POISONED;
    mbxV_error_set(err, s, "%s: this sandbox ended a run with %s and refuses further runs", fn,
                   mbx_status_key(sb->poisoned_by));
  } else if (!mbx_sandbox_paused(sb)) {
    s = MBX_INVALID_ARGUMENT;
    mbxV_error_set(err, s, "%s: the sandbox is not paused at an external call", fn);
  } else if (stack_left() < MBXH_MIN_STACK) {
    s = MBX_STACK_TOO_SMALL;
    mbxV_error_set(err, s, "%s: less than 1 MiB of C stack is left on this thread", fn);
  }
  if (s != MBX_OK) {
    atomic_store(&sb->busy, 0);
    return s;
  }
  if (as_error && len > MBX_HOST_ERROR_MAX) len = MBX_HOST_ERROR_MAX;
  locale_t host_locale = uselocale(sb->rt->c_locale);
  mbxC_port_local_run_begin(&sb->port);
  mbxL_run_begin(sb->vm->L);
  mbxV_outcome outcome;
  if (sb->recording) mbxC_port_record_resume(&sb->record, as_error, value, len);
  s = mbxV_resume(sb->vm, value, len, as_error, &outcome, err);
  uselocale(host_locale);
  log_outcome(sb, s, &outcome);
  if (s < MBX_API_ERROR_BASE) {
    if (poisons(s)) {
      sb->poisoned = 1;
      sb->poisoned_by = s;
    }
    *out = mbxH_result_new(&outcome, &sb->vm->output);
    if (*out == NULL) {
      mbxV_error_set(err, MBX_NO_MEMORY, "%s: out of host memory for the result", fn);
      s = MBX_NO_MEMORY;
    }
    count_heap(sb);
  }
  atomic_store(&sb->busy, 0);
  return s;
}

MBX_API mbx_status mbx_resume(mbx_sandbox *sb, const char *value_json, size_t len,
                              mbx_result **out, mbx_error *err) {
  return resume(sb, "mbx_resume", value_json, len, 0, out, err);
}

MBX_API mbx_status mbx_resume_error(mbx_sandbox *sb, const char *message, size_t len,
                                    mbx_result **out, mbx_error *err) {
  return resume(sb, "mbx_resume_error", message ? message : "", message ? len : 0, 1, out,
                err);
}

/* ---- snapshots ---- */

MBX_API mbx_status mbx_sandbox_snapshot(mbx_sandbox *sb, void **bytes, size_t *len,
                                        mbx_error *err) {
  if (bytes) *bytes = NULL;
  if (len) *len = 0;
  if (sb == NULL || bytes == NULL || len == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_snapshot: the sandbox, bytes and len must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (!claim(sb, "mbx_sandbox_snapshot", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = MBX_OK;
  if (!sb->recording) {
    s = MBX_INVALID_ARGUMENT;
    mbxV_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox's policy is not deterministic; "
                   "create the sandbox from a policy with mbx_policy_set_deterministic "
                   "to snapshot it");
  } else if (sb->poisoned) {
    s = MBX_SANDBOX_POISONED;
    mbxV_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox ended a run with %s; a poisoned "
                   "sandbox cannot be snapshotted",
                   mbx_status_key(sb->poisoned_by));
  } else if (sb->record.log.broken) {
    s = MBX_UNSUPPORTED;
    mbxV_error_set(err, s,
                   "mbx_sandbox_snapshot: the sandbox's replay log is incomplete (it "
                   "outgrew %zu MiB, the host ran out of memory, or the sandbox was "
                   "rewound across a reset); mbx_sandbox_reset starts a new one",
                   MBXC_SNAP_MAX_LOG >> 20);
  } else {
    mbxC_snap_header h = sb->snap;
    h.paused = (uint8_t)(mbx_sandbox_paused(sb) != 0);
    if (mbxC_snap_encode(&h, &sb->record.log, bytes, len) != 0) {
      s = MBX_NO_MEMORY;
      mbxV_error_set(err, s, "mbx_sandbox_snapshot: out of host memory for the blob");
    }
  }
  atomic_store(&sb->busy, 0);
  return s;
}

/* Replay every session record of the port's log through the normal run path. Returns 0, or
   -1 with sb->record.diverged saying where and why. */
static int replay_session(mbx_sandbox *sb) {
  mbxC_port_record *pl = &sb->record;
  while (!pl->diverged[0]) {
    mbxC_record r;
    size_t at = pl->cursor;
    if (!mbxC_replay_get(&pl->log, at, &r)) break;
    mbxC_reader rd = mbxC_reader_of(&r);
    mbx_result *res = NULL;
    mbx_error e = {0};
    mbx_status s;
    size_t name_len, code_len, inputs_len, value_len;
    if (r.type == MBXC_REC_RUN) {
      const char *name = mbxC_read_str(&rd, &name_len);
      const char *code = mbxC_read_str(&rd, &code_len);
      int has_inputs = mbxC_read_u8(&rd);
      const char *inputs = mbxC_read_str(&rd, &inputs_len);
      /* The chunk name as a C string (the record holds at most LUA_IDSIZE-ish bytes in
         practice, but any length is accepted: only its end is kept). */
      char *name_z = malloc(name_len + 1);
      if (name_z == NULL) {
        snprintf(pl->diverged, sizeof pl->diverged, "record %zu: out of host memory", at);
        break;
      }
      memcpy(name_z, name, name_len);
      name_z[name_len] = '\0';
      if (strlen(name_z) != name_len) {
        free(name_z);
        snprintf(pl->diverged, sizeof pl->diverged,
                 "record %zu: the recorded chunk name holds a NUL byte", at);
        break;
      }
      s = mbx_run_named(sb, code, code_len, name_z, has_inputs ? inputs : NULL, inputs_len, &res,
                        &e);
      free(name_z);
    } else if (r.type == MBXC_REC_RESUME || r.type == MBXC_REC_RESUME_ERROR) {
      const char *value = mbxC_read_str(&rd, &value_len);
      s = r.type == MBXC_REC_RESUME ? mbx_resume(sb, value_len ? value : NULL, value_len, &res, &e)
                                    : mbx_resume_error(sb, value, value_len, &res, &e);
    } else {
      snprintf(pl->diverged, sizeof pl->diverged,
               "record %zu: the log has %s where a run or a resume was expected", at,
               mbxC_rec_type_name(r.type));
      break;
    }
    if (s < MBX_API_ERROR_BASE) mbx_result_free(res);
    if (!pl->diverged[0] && pl->cursor == at)
      snprintf(pl->diverged, sizeof pl->diverged,
               "record %zu: the replay could not make this "
               "%s: %s",
               at, mbxC_rec_type_name(r.type), e.message);
  }
  return pl->diverged[0] ? -1 : 0;
}

MBX_API mbx_sandbox *mbx_sandbox_restore(mbx_runtime *rt, const mbx_policy *p, const void *bytes,
                                         size_t len, mbx_error *err) {
  if (rt == NULL || p == NULL || bytes == NULL) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_restore: the runtime, the policy and the bytes must not be NULL");
    return NULL;
  }
  if (!p->deterministic) {
    mbxV_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_restore: the policy is not deterministic; snapshots are made "
                   "and restored under a policy with mbx_policy_set_deterministic");
    return NULL;
  }
  char why[300];
  mbxC_snap_header h;
  mbxC_replay_log log;
  if (mbxC_snap_decode(bytes, len, LUA_VERSION_RELEASE_NUM, MBX_VERSION_NUMBER, &h, &log, why,
                       sizeof why) != 0) {
    mbxV_error_set(err, MBX_INVALID_INPUT, "mbx_sandbox_restore: %s", why);
    return NULL;
  }
  uint64_t digest = mbxC_policy_digest(p);
  if (h.policy_digest != digest) {
    mbxC_replay_free(&log);
    mbxV_error_set(err, MBX_INVALID_INPUT,
                   "mbx_sandbox_restore: the snapshot was made under another policy (digest "
                   "%016llx, this policy's is %016llx): limits, clock, seed, environment and "
                   "host functions must be the same",
                   (unsigned long long)h.policy_digest, (unsigned long long)digest);
    return NULL;
  }
  mbx_sandbox *sb = sandbox_new(rt, p, &log, err);
  if (sb == NULL) return NULL;
  /* The sandbox's own creation consumed its seed record; now the session, run by run. */
  int ok = replay_session(sb) == 0 && mbxC_port_record_replay_end(&sb->record) == 0;
  if (ok && (sb->poisoned || mbx_sandbox_paused(sb) != h.paused)) {
    snprintf(sb->record.diverged, sizeof sb->record.diverged,
             "the replay ended %s where the snapshot was taken %s",
             sb->poisoned             ? "poisoned"
             : mbx_sandbox_paused(sb) ? "paused"
                                      : "idle",
             h.paused ? "paused" : "idle");
    ok = 0;
  }
  if (!ok) {
    mbxV_error_set(err, MBX_INVALID_INPUT,
                   "mbx_sandbox_restore: the replay diverged from the "
                   "snapshot: %s",
                   sb->record.diverged);
    mbx_sandbox_free(sb);
    return NULL;
  }
  return sb;
}
