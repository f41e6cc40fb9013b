/* host/runtime.c -- the public C API of the runtime: versions, mbx_free, caps and usage. */
#include "host/runtime.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "host/helper_path.h"
#include "host/backend/worker_pool.h"

#include <limits.h>
#include <string.h>

/* Address space all slots may reserve by default: 8 TiB of the 128 TiB a 47-bit address
   space offers. With the default 64 MiB limit (512 MiB slots) the cap on live sandboxes
   binds first; with 1 GiB limits (8 GiB slots) this one does, at about a thousand. */
#define MBXH_DEFAULT_RESERVED_CAP ((uint64_t)8 << 40)

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

/* Runtime ids: a thread's batch of sandbox numbers (mbxH_sandbox_number) names the runtime it
   came from by id, never by pointer (a freed runtime's address may be a new runtime's). */
static _Atomic uint64_t next_runtime_id = 1;

MBX_API mbx_runtime *mbx_runtime_new(mbx_error *err) {
  /* Aligned, so the hot fields' cache lines are the runtime's alone (host/runtime.h). */
  mbx_runtime *rt = aligned_alloc(_Alignof(mbx_runtime), sizeof *rt);
  if (rt == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  memset(rt, 0, sizeof *rt);
  if (pthread_mutex_init(&rt->idle_lock, NULL) != 0) {
    free(rt);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  rt->id = atomic_fetch_add(&next_runtime_id, 1);
  rt->c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
  if (rt->c_locale == (locale_t)0) {
    pthread_mutex_destroy(&rt->idle_lock);
    free(rt);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: cannot create the C locale");
    return NULL;
  }
  if (getrandom(&rt->address_key, sizeof rt->address_key, 0) != sizeof rt->address_key) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    rt->address_key = ((uint64_t)ts.tv_nsec << 32) ^ (uint64_t)ts.tv_sec ^ (uintptr_t)rt;
  }
  mbxC_seeds_init(&rt->seeds);
  rt->slots = mbxV_pool_new(MBXV_POOL_DEFAULT_CAP);
  rt->bytecode = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  if (rt->slots == NULL || rt->bytecode == NULL) {
    mbxV_pool_free(rt->slots);
    mbxV_bcache_free(rt->bytecode);
    freelocale(rt->c_locale);
    pthread_mutex_destroy(&rt->idle_lock);
    free(rt);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_new: out of memory");
    return NULL;
  }
  mbxV_pool_set_caps(rt->slots, MBXV_POOL_DEFAULT_CAP, (size_t)MBXH_DEFAULT_RESERVED_CAP);
  atomic_store(&rt->bytecode_on, 1);
  atomic_store(&rt->worker_reexec, MBX_DEFAULT_WORKER_REEXEC);
  rt->backend = &mbxH_inproc_backend;
  mbxC_exec_backend_init(&rt->exec);
  mbx_error herr;
  if (mbxH_helper_path("moonbox-exec", NULL, rt->exec.helper, sizeof rt->exec.helper, &herr) !=
      MBX_OK) {
    rt->exec.helper[0] = '\0';
    snprintf(rt->exec.helper_error, sizeof rt->exec.helper_error, "%s", herr.message);
  }
  /* The default deadline signal when it is free; taken by the host, the count hook. */
  rt->dog = mbxV_watchdog_new(mbxV_watchdog_default_signal(), NULL, 0);
  /* Past the machine's memory the estimate would end in the OOM killer, not an error. */
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  atomic_store(&rt->heap_cap, pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0);
  rt->services = (mbxH_services){.c_locale = rt->c_locale,
                                 .address_key = rt->address_key,
                                 .runtime_id = rt->id,
                                 .sandboxes_created = &rt->sandboxes_created,
                                 .slots = rt->slots,
                                 .bytecode = rt->bytecode,
                                 .bytecode_on = &rt->bytecode_on,
                                 .seeds = &rt->seeds,
                                 .exec = &rt->exec,
                                 .dog = &rt->dog,
                                 .workers = &rt->workers,
                                 .one_tenant = &rt->one_tenant,
                                 .worker_spin = &rt->worker_spin};
  return rt;
}

MBX_API void mbx_runtime_free(mbx_runtime *rt) {
  if (rt == NULL) return;
  mbxH_wpool_free(rt->workers);
  mbxV_watchdog_free(rt->dog);
  for (int i = 0; i < 4; i++)
    free(rt->paths[i]);
  mbxV_bcache_free(rt->bytecode);
  mbxV_pool_free(rt->slots);
  freelocale(rt->c_locale);
  mbxC_exec_backend_free(&rt->exec);
  pthread_mutex_destroy(&rt->idle_lock);
  free(rt);
}

static int sandboxes_live(mbx_runtime *rt) {
  return mbxV_pool_live(rt->slots) + mbxH_wpool_live(rt->workers) > 0;
}

/* MBX_CAP_ISOLATE: switch the backend while no sandbox is live (a sandbox keeps the backend
   it was made with, but the pool it uses must outlive it). */
static mbx_status set_isolation(mbx_runtime *rt, uint64_t value, mbx_error *err) {
  if (value > MBX_ISOLATE_PROCESS) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_cap: MBX_CAP_ISOLATE must be "
                   "MBX_ISOLATE_NONE (0) or MBX_ISOLATE_PROCESS (1), not %llu",
                   (unsigned long long)value);
    return MBX_INVALID_ARGUMENT;
  }
  if ((value == MBX_ISOLATE_PROCESS) == (rt->workers != NULL)) return MBX_OK;
  if (sandboxes_live(rt)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_cap: MBX_CAP_ISOLATE cannot "
                   "change while sandboxes are live; free them first");
    return MBX_INVALID_ARGUMENT;
  }
  if (value == MBX_ISOLATE_NONE) {
    mbxH_wpool_free(rt->workers);
    rt->workers = NULL;
    rt->backend = &mbxH_inproc_backend;
    return MBX_OK;
  }
  char path[PATH_MAX];
  mbx_status s =
      mbxH_helper_path("moonbox-worker", rt->paths[MBX_PATH_WORKER], path, sizeof path, err);
  if (s != MBX_OK) return s;
  rt->workers = mbxH_wpool_new(path);
  if (rt->workers == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_set_cap: out of memory");
    return MBX_NO_MEMORY;
  }
  mbxH_wpool_set_reexec(rt->workers, atomic_load(&rt->worker_reexec));
  mbxH_wpool_set_uids(rt->workers, &rt->exec.uids);
  rt->backend = &mbxH_worker_backend;
  return MBX_OK;
}

MBX_API mbx_status mbx_runtime_set_deadline_signal(mbx_runtime *rt, int signo, mbx_error *err) {
  if (rt == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_deadline_signal: the runtime is "
                   "NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (sandboxes_live(rt)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_deadline_signal: the signal "
                   "cannot change while sandboxes are live; free them first");
    return MBX_INVALID_ARGUMENT;
  }
  if (signo == mbxV_watchdog_signal(rt->dog) && mbxV_watchdog_usable(rt->dog)) return MBX_OK;
  mbxV_watchdog *dog = NULL;
  if (signo != 0) {
    char why[160];
    dog = mbxV_watchdog_new(signo, why, sizeof why);
    if (dog == NULL) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "mbx_runtime_set_deadline_signal: %s (choose "
                     "a free real-time signal, or 0 for the count hook)",
                     why);
      return MBX_INVALID_ARGUMENT;
    }
  }
  mbxV_watchdog_free(rt->dog);
  rt->dog = dog;
  return MBX_OK;
}

MBX_API int mbx_runtime_deadline_signal(const mbx_runtime *rt) {
  return rt && mbxV_watchdog_usable(rt->dog) ? mbxV_watchdog_signal(rt->dog) : 0;
}

MBX_API mbx_status mbx_runtime_set_path(mbx_runtime *rt, mbx_runtime_path which, const char *path,
                                        mbx_error *err) {
  if (rt == NULL || which < MBX_PATH_BWRAP || which > MBX_PATH_WORKER) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_path: %s",
                   rt ? "unknown path (MBX_PATH_BWRAP, MBX_PATH_EXEC_HELPER or MBX_PATH_WORKER)"
                      : "the runtime is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (path && (path[0] != '/' || strlen(path) >= PATH_MAX)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_path: the path must be absolute "
                   "and shorter than %d bytes, not \"%.100s\"",
                   PATH_MAX, path);
    return MBX_INVALID_ARGUMENT;
  }
  if (which == MBX_PATH_WORKER && rt->workers && mbxH_wpool_live(rt->workers) > 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_path: the worker's path cannot "
                   "change while isolated sandboxes are live");
    return MBX_INVALID_ARGUMENT;
  }
  char *copy = NULL;
  if (path && (copy = strdup(path)) == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_set_path: out of memory");
    return MBX_NO_MEMORY;
  }
  free(rt->paths[which]);
  rt->paths[which] = copy;
  if (which == MBX_PATH_BWRAP || which == MBX_PATH_EXEC_HELPER) {
    /* The exec backend keeps its own absolute copies and probes again at its next use. */
    char full[PATH_MAX], why[200];
    if (which == MBX_PATH_BWRAP) {
      snprintf(full, sizeof full, "%s", copy ? copy : "/usr/bin/bwrap");
    } else {
      mbx_status s = mbxH_helper_path("moonbox-exec", copy, full, sizeof full, err);
      if (s != MBX_OK) return s;
    }
    if (mbxC_exec_backend_set(&rt->exec, which == MBX_PATH_EXEC_HELPER, full, why, sizeof why) !=
        0) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_path: %s", why);
      return MBX_INVALID_ARGUMENT;
    }
  }
  if (which == MBX_PATH_WORKER && rt->workers) {
    /* Isolated already: the next sandboxes use the new worker. */
    char full[PATH_MAX];
    mbx_status s = mbxH_helper_path("moonbox-worker", copy, full, sizeof full, err);
    if (s != MBX_OK) return s;
    mbxH_wpool *pool = mbxH_wpool_new(full);
    if (pool == NULL) {
      mbxU_error_set(err, MBX_NO_MEMORY, "mbx_runtime_set_path: out of memory");
      return MBX_NO_MEMORY;
    }
    mbxH_wpool_set_reexec(pool, atomic_load(&rt->worker_reexec));
    mbxH_wpool_set_uids(pool, &rt->exec.uids);
    mbxH_wpool_free(rt->workers);
    rt->workers = pool;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_runtime_set_exec_uids(mbx_runtime *rt, uint32_t first, uint32_t count,
                                             mbx_error *err) {
  if (rt == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_exec_uids: the runtime is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  char why[200];
  if (mbxC_exec_backend_set_uids(&rt->exec, first, count, why, sizeof why) != 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_exec_uids: %s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_runtime_set_cap(mbx_runtime *rt, mbx_runtime_cap which, uint64_t value,
                                       mbx_error *err) {
  if (rt == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_cap: the runtime is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  unsigned slots;
  size_t reserved;
  mbxV_pool_get_caps(rt->slots, &slots, &reserved);
  switch (which) {
  case MBX_CAP_SANDBOXES:
    if (value == 0 || value > UINT32_MAX) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
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
  case MBX_CAP_ISOLATE:
    return set_isolation(rt, value, err);
  case MBX_CAP_ONE_TENANT:
    if (value > 1) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "mbx_runtime_set_cap: MBX_CAP_ONE_TENANT must "
                     "be 0 (a worker per sandbox) or 1 (the sandboxes are one tenant), not %llu",
                     (unsigned long long)value);
      return MBX_INVALID_ARGUMENT;
    }
    atomic_store(&rt->one_tenant, (int)value);
    return MBX_OK;
  case MBX_CAP_WORKER_SPIN:
    if (value > 1) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "mbx_runtime_set_cap: MBX_CAP_WORKER_SPIN must "
                     "be 0 (block at once) or 1 (spin up to 20 us first), not %llu",
                     (unsigned long long)value);
      return MBX_INVALID_ARGUMENT;
    }
    atomic_store(&rt->worker_spin, (int)value);
    return MBX_OK;
  case MBX_CAP_WORKER_REEXEC:
    if (value > UINT32_MAX) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "mbx_runtime_set_cap: MBX_CAP_WORKER_REEXEC must be at most 4294967295 "
                     "workers (0: a zygote is re-executed only after a crash), not %llu",
                     (unsigned long long)value);
      return MBX_INVALID_ARGUMENT;
    }
    atomic_store(&rt->worker_reexec, (unsigned)value);
    mbxH_wpool_set_reexec(rt->workers, (unsigned)value);
    return MBX_OK;
  }
  mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_runtime_set_cap: unknown cap %d", (int)which);
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
  case MBX_CAP_ISOLATE:
    return m->workers ? MBX_ISOLATE_PROCESS : MBX_ISOLATE_NONE;
  case MBX_CAP_ONE_TENANT:
    return (uint64_t)atomic_load(&m->one_tenant);
  case MBX_CAP_WORKER_SPIN:
    return (uint64_t)atomic_load(&m->worker_spin);
  case MBX_CAP_WORKER_REEXEC:
    return atomic_load(&m->worker_reexec);
  }
  return 0;
}

MBX_API uint64_t mbx_runtime_usage(const mbx_runtime *rt, mbx_runtime_cap which) {
  if (rt == NULL) return 0;
  mbx_runtime *m = (mbx_runtime *)rt;
  mbxV_bcache_stats stats;
  switch (which) {
  case MBX_CAP_SANDBOXES:
    return mbxV_pool_live(m->slots) + mbxH_wpool_live(m->workers);
  case MBX_CAP_RESERVED_BYTES:
    return mbxV_pool_reserved(m->slots);
  case MBX_CAP_HEAP_BYTES:
    return atomic_load(&m->heap_total);
  case MBX_CAP_BYTECODE_CACHE_BYTES:
    mbxV_bcache_stats_get(m->bytecode, &stats);
    return stats.bytes;
  case MBX_CAP_ISOLATE:
    return mbxH_wpool_live(m->workers);
  case MBX_CAP_ONE_TENANT:
    return mbxH_wpool_kept(m->workers);
  case MBX_CAP_WORKER_SPIN:
    return (uint64_t)atomic_load(&m->worker_spin);
  case MBX_CAP_WORKER_REEXEC:
    return atomic_load(&m->worker_reexec);
  }
  return 0;
}
