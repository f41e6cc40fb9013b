/* host/hibernate.c -- the public C API of hibernation: idle sandboxes' heaps out of memory and
   back on their next call, explicitly or by the runtime's idle sweep. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/error.h"
#include "host/runtime.h"
#include "host/sandbox.h"
#include "vm/budget.h"

/* The sweep runs at most this often per idle period (and at most every millisecond): a
   sandbox idle past the period is hibernated within a quarter of it more, by the first call
   that ends on any of the runtime's sandboxes. */
#define SWEEPS_PER_PERIOD 4
#define SWEEP_MIN_NS 1000000u
/* Hibernations one sweep does at most: the sweep runs on the thread whose call just ended, and
   holds the list's lock (mbx_sandbox_new and _free of listed sandboxes wait for it). When
   more are due, the next call's end sweeps again at once. */
#define SWEEP_MAX_SLEEPS 32

/* With sb claimed and awake: move its state out of memory. asleep goes up before the state
   is read, and the peeking threads (interrupt, paused) are waited out, so none of them reads
   the slot while its pages go (host/sandbox.h). */
static mbx_status hibernate_claimed(mbx_sandbox *sb, mbx_error *err) {
  if (atomic_load(&sb->asleep)) return MBX_OK;
  atomic_store_explicit(&sb->asleep_paused, sb->backend->paused(sb->impl), memory_order_relaxed);
  atomic_store(&sb->asleep, 1);
  while (atomic_load(&sb->peeking) != 0) {
    /* A peek is a few loads and one store: spinning is shorter than any sleep. */
  }
  mbx_status s = sb->backend->hibernate(sb->impl, err);
  if (s != MBX_OK) atomic_store(&sb->asleep, 0);
  return s;
}

mbx_status mbxH_wake(mbx_sandbox *sb, const char *fn, mbx_error *err) {
  if (!atomic_load_explicit(&sb->asleep, memory_order_relaxed)) return MBX_OK;
  mbx_error why;
  mbx_status s = sb->backend->wake(sb->impl, &why);
  if (s == MBX_OK) {
    atomic_store(&sb->asleep, 0);
    return MBX_OK;
  }
  if (s == MBX_INTERNAL_ERROR) {
    sb->poisoned = 1;
    sb->poisoned_by = MBX_INTERNAL_ERROR;
  }
  mbxU_error_set(err, s, "%s: %s", fn, why.message);
  return s;
}

MBX_API mbx_status mbx_sandbox_hibernate(mbx_sandbox *sb, mbx_error *err) {
  if (sb == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_hibernate: the sandbox is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (sb->backend->hibernate == NULL) {
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_sandbox_hibernate: the %s backend keeps its sandboxes in their own "
                   "processes; it does not hibernate them",
                   sb->backend->name);
    return MBX_UNSUPPORTED;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_hibernate", err)) return MBX_SANDBOX_BUSY;
  mbx_status s = hibernate_claimed(sb, err);
  atomic_store(&sb->busy, 0); /* not a use: the idle clock is not restarted */
  return s;
}

MBX_API int mbx_sandbox_hibernated(const mbx_sandbox *sb) {
  return sb ? atomic_load(&sb->asleep) : 0;
}

MBX_API mbx_status mbx_runtime_set_hibernate(mbx_runtime *rt, uint64_t idle_ms, mbx_error *err) {
  if (rt == NULL || idle_ms > UINT64_MAX / 1000000u) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_runtime_set_hibernate: the runtime must not be NULL and idle_ms must "
                   "fit in 64 bits of nanoseconds");
    return MBX_INVALID_ARGUMENT;
  }
  if (rt->backend->hibernate == NULL && idle_ms != 0) {
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_runtime_set_hibernate: the %s backend keeps its sandboxes in their own "
                   "processes; it does not hibernate them",
                   rt->backend->name);
    return MBX_UNSUPPORTED;
  }
  atomic_store(&rt->hibernate_ns, idle_ms * 1000000u);
  atomic_store(&rt->next_sweep_ns, 0);
  return MBX_OK;
}

MBX_API uint64_t mbx_runtime_get_hibernate(const mbx_runtime *rt) {
  return rt ? atomic_load(&rt->hibernate_ns) / 1000000u : 0;
}

void mbxH_idle_join(mbx_sandbox *sb) {
  mbx_runtime *rt = sb->rt;
  if (atomic_load_explicit(&rt->hibernate_ns, memory_order_relaxed) == 0 ||
      sb->backend->hibernate == NULL)
    return;
  atomic_store(&sb->used_ns, mbxV_now_coarse_ns());
  pthread_mutex_lock(&rt->idle_lock);
  sb->idle_prev = NULL;
  sb->idle_next = rt->idle_head;
  if (rt->idle_head) rt->idle_head->idle_prev = sb;
  rt->idle_head = sb;
  sb->listed = 1;
  pthread_mutex_unlock(&rt->idle_lock);
  mbxH_idle_tick(rt);
}

void mbxH_idle_leave(mbx_sandbox *sb) {
  if (!sb->listed) return;
  mbx_runtime *rt = sb->rt;
  /* Taking the lock also waits out a sweep that holds this sandbox right now. */
  pthread_mutex_lock(&rt->idle_lock);
  if (sb->idle_prev)
    sb->idle_prev->idle_next = sb->idle_next;
  else
    rt->idle_head = sb->idle_next;
  if (sb->idle_next) sb->idle_next->idle_prev = sb->idle_prev;
  sb->listed = 0;
  pthread_mutex_unlock(&rt->idle_lock);
}

/* Hibernate every listed sandbox idle for idle_ns or more that no call holds. A sandbox in
   use is skipped, never waited for; the sweep holds one with busy = 2, which a call that
   starts meanwhile waits out (mbxH_busy_take) and then finds hibernated and wakes: the owner
   never sees the sweep but as the wake's few microseconds. */
static void sweep(mbx_runtime *rt, uint64_t now, uint64_t idle_ns) {
  int slept = 0;
  pthread_mutex_lock(&rt->idle_lock);
  for (mbx_sandbox *sb = rt->idle_head; sb != NULL; sb = sb->idle_next) {
    if (slept == SWEEP_MAX_SLEEPS) {
      atomic_store(&rt->next_sweep_ns, 0); /* the rest at the next call's end */
      break;
    }
    if (atomic_load_explicit(&sb->asleep, memory_order_relaxed)) continue;
    uint64_t used = atomic_load_explicit(&sb->used_ns, memory_order_relaxed);
    if (used >= now || now - used < idle_ns) continue;
    int free_now = 0;
    if (!atomic_compare_exchange_strong(&sb->busy, &free_now, 2)) continue;
    /* Read again under the claim: a call that ended meanwhile made it young. */
    used = atomic_load_explicit(&sb->used_ns, memory_order_relaxed);
    if (used < now && now - used >= idle_ns && hibernate_claimed(sb, NULL) == MBX_OK) slept++;
    atomic_store(&sb->busy, 0);
  }
  pthread_mutex_unlock(&rt->idle_lock);
}

void mbxH_idle_tick(mbx_runtime *rt) {
  uint64_t idle_ns = atomic_load_explicit(&rt->hibernate_ns, memory_order_relaxed);
  if (idle_ns == 0) return;
  uint64_t now = mbxV_now_coarse_ns();
  uint64_t next = atomic_load_explicit(&rt->next_sweep_ns, memory_order_relaxed);
  if (now < next) return;
  uint64_t period = idle_ns / SWEEPS_PER_PERIOD;
  if (period < SWEEP_MIN_NS) period = SWEEP_MIN_NS;
  /* One thread sweeps; the others go on. */
  if (!atomic_compare_exchange_strong(&rt->next_sweep_ns, &next, now + period)) return;
  sweep(rt, now, idle_ns);
}
