/* host/runtime.h -- the runtime handle: what every sandbox of one runtime shares. */
#ifndef MBX_HOST_RUNTIME_H
#define MBX_HOST_RUNTIME_H

/*
** host/ owns the front doors: the public C API (runtime.c, policy_api.c, sandbox.c,
** snapshot.c: argument checks and the handles' bookkeeping) and the result contract
** (result.c); host/backend/ the backends that run sandboxes under it (backend.h; inproc.c runs
** them in this process, worker.c each in a jailed moonbox-worker process, MBX_CAP_ISOLATE).
** Only the library part of host/ sees every layer: it builds the port from the policy
** (capabilities/), attaches it to the stdlib and drives the vm. The programs in the folders
** under host/ (cli, mcp, options, worker, fuzz, exec) are built on the public API, with the
** exceptions their CMake lists declare (tools/check-house).
*/

#include <locale.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "capabilities/exec.h"
#include "capabilities/seeds.h"
#include "host/backend/backend.h"
#include "include/moonbox.h"
#include "vm/arena.h"
#include "vm/bytecode_cache.h"
#include "vm/watchdog.h"

/* Cache-line size the layout below separates by (x86-64 and most arm64 cores). */
#define MBXH_CACHE_LINE 64

struct mbx_runtime {
  /* Read-mostly: set at creation or by the cap setters, read by every sandbox's cycle. */
  const mbxH_backend *backend; /* how this runtime's sandboxes run (host/backend/backend.h) */
  locale_t c_locale;           /* runs switch the calling thread to it with uselocale */
  uint64_t address_key;        /* seeds the hashes that stand in for addresses */
  uint64_t id;                 /* unique in the process (mbxH_sandbox_number's batches) */
  mbxV_pool *slots;            /* sandboxes' heap slots, reused by every thread (vm/arena.h) */
  mbxV_bcache *bytecode;       /* compiled top-level sources of mbx_run (vm/bytecode_cache.h) */
  _Atomic int bytecode_on;     /* 0 once MBX_CAP_BYTECODE_CACHE_BYTES is 0: skip even the hash */
  _Atomic uint64_t heap_cap;   /* 0 = none */
  /* MBX_CAP_ISOLATE: the worker pool (host/backend/worker_pool.h), made with the first
     isolated sandbox's runtime setting; NULL in-process. */
  struct mbxH_wpool *workers;
  _Atomic int one_tenant;  /* MBX_CAP_ONE_TENANT: a worker may serve sandboxes one after another */
  _Atomic int worker_spin; /* MBX_CAP_WORKER_SPIN: both ends of a round trip spin first */
  _Atomic unsigned worker_reexec; /* MBX_CAP_WORKER_REEXEC: workers per zygote (0: no limit) */
  char *paths[4]; /* mbx_runtime_set_path, indexed by mbx_runtime_path; NULL = default */
  /* The exec backend: bwrap and helper paths, the cached probe (capabilities/exec.h). Every
     sandbox's port points here: the runtime outlives its sandboxes. */
  mbxC_exec_backend exec;
  /* The deadline signal's watchdog (vm/watchdog.h; mbx_runtime_set_deadline_signal), NULL
     when runs use the count hook. Changed only while no sandbox is live. */
  mbxV_watchdog *dog;
  /* mbx_runtime_set_hibernate (host/hibernate.c): how long a sandbox stays idle before the
     sweep hibernates it (0: never), when the next sweep may run, and the sandboxes the sweep
     looks at (those made while it was on), linked under idle_lock. */
  _Atomic uint64_t hibernate_ns;
  _Atomic uint64_t next_sweep_ns;
  pthread_mutex_t idle_lock;
  struct mbx_sandbox *idle_head;
  /* What the backends take from the runtime (host/backend/backend.h): views of the fields
     here, filled in once by mbx_runtime_new. */
  mbxH_services services;
  /* Written by every sandbox's creation, run and free, from any thread: on cache lines of
     their own, so those writes do not evict the read-mostly fields above from the other
     threads' caches (false sharing; issue 10's 2-thread figures in docs/performance.md's git
     history). */
  _Alignas(MBXH_CACHE_LINE) mbxC_seeds seeds; /* math.random seeds (capabilities/seeds.h) */
  /* Sandbox numbers handed out, in batches per thread (mbxH_sandbox_number). */
  _Atomic uint64_t sandboxes_created;
  /* The resident estimate: the sum of the live sandboxes' heaps as of their last creation,
     run, reset or rewind (a run's own growth is bounded by its memory limit). */
  _Atomic uint64_t heap_total;
  char hot_end[MBXH_CACHE_LINE]; /* nothing allocated after the struct shares their line */
};

#endif
