/* host/backend/backend.h -- what runs a sandbox under the public API: the backend interface. */
#ifndef MBX_HOST_BACKEND_H
#define MBX_HOST_BACKEND_H

/*
** The public sandbox functions (host/sandbox.c, host/snapshot.c) check their arguments, take
** the sandbox (busy), refuse poisoned or wrongly paused sandboxes, and then call one of these
** operations; after a run or resume one shared epilogue poisons the sandbox on a limit, an
** interrupt or an internal error and brings the runtime's heap estimate up to date. A
** backend does the rest: the in-process backend (host/backend/inproc.c) runs the vm in this
** process; the worker backend (host/backend/worker.c, MBX_CAP_ISOLATE) runs it in a jailed
** process behind the same table, and the runtime picks one without any public function
** changing. What both build on the host's side of a sandbox (its port, the record layer,
** its vm config) is written once, in host/backend/shared.c.
**
** A backend sees the runtime only through mbxH_services: the runtime (host/runtime.c)
** includes this folder, never the reverse.
**
** Every operation except interrupt is called by the thread that holds the sandbox, never
** concurrently. An operation that fails fills err and returns its status; a run or resume
** returns a run status (< MBX_API_ERROR_BASE) with *out set, or an API status with nothing run.
*/

#include <locale.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "capabilities/exec.h"
#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "capabilities/seeds.h"
#include "capabilities/vfs.h"
#include "include/moonbox.h"
#include "vm/arena.h"
#include "vm/bytecode_cache.h"
#include "vm/watchdog.h"

struct mbxH_wpool;

/* What a backend takes from the runtime that makes its sandboxes. The runtime fills it in
   once, inside itself (host/runtime.h), and outlives its sandboxes, so a backend may keep the
   pointer for a sandbox's life. What a cap setter may change while sandboxes are live is
   reached through a pointer and read where it is used, as the runtime's own field was. */
typedef struct mbxH_services {
  locale_t c_locale;    /* runs switch the calling thread to it with uselocale */
  uint64_t address_key; /* the runtime's secret; a sandbox's key is it ^ a sandbox number */
  /* Sandbox numbers (mbxH_sandbox_number): the runtime's counter, which threads take from in
     batches, and the id that names the runtime in a thread's batch. */
  uint64_t runtime_id;
  _Atomic uint64_t *sandboxes_created;
  /* Sandboxes' heap slots (vm/arena.h): its caps are MBX_CAP_SANDBOXES and
     MBX_CAP_RESERVED_BYTES. */
  mbxV_pool *slots;
  mbxV_bcache *bytecode;          /* compiled sources of mbx_run (vm/bytecode_cache.h) */
  const _Atomic int *bytecode_on; /* 0 once MBX_CAP_BYTECODE_CACHE_BYTES is 0: skip the hash */
  mbxC_seeds *seeds;              /* math.random seeds (capabilities/seeds.h) */
  mbxC_exec_backend *exec;        /* where a sandbox's programs run (capabilities/exec.h) */
  /* The deadline signal's watchdog and the worker pool (MBX_CAP_ISOLATE): the runtime
     replaces them only while no sandbox is live; NULL when there is none. */
  mbxV_watchdog *const *dog;
  struct mbxH_wpool *const *workers;
  const _Atomic int *one_tenant;  /* MBX_CAP_ONE_TENANT */
  const _Atomic int *worker_spin; /* MBX_CAP_WORKER_SPIN */
} mbxH_services;

typedef struct mbxH_run_args {
  const char *fn; /* the public function, for messages: "mbx_run" */
  const char *code;
  size_t code_len;
  const char *chunk_name; /* as given (NULL or "" = "input") */
  const char *inputs;     /* JSON object or NULL */
  size_t inputs_len;
} mbxH_run_args;

#define MBXH_BACKEND_VERSION 1

typedef struct mbxH_backend {
  int version;
  const char *name; /* "in-process" */
  /* Make the backend's part of a sandbox under p. snap (deterministic policies only, else
     NULL) is the header of the snapshots the sandbox may make: its port is then wrapped in
     the record/replay layer, the log chained from it. replay (NULL: none) is a decoded
     snapshot log whose answers the new sandbox's port replays; it is taken over, also on
     failure. */
  mbx_status (*create)(const mbxH_services *svc, const mbx_policy *p, const mbxC_snap_header *snap,
                       mbxC_replay_log *replay, void **impl, mbx_error *err);
  /* Release everything; never fails. */
  void (*destroy)(void *impl);
  /* A run status with *out the result (NULL when host memory ran out for it), or an API
     status with nothing run. */
  mbx_status (*run)(void *impl, const mbxH_run_args *a, mbx_result **out, mbx_error *err);
  mbx_status (*resume)(void *impl, const char *fn, const char *value, size_t len, int as_error,
                       mbx_result **out, mbx_error *err);
  /* Back to the pristine state; on failure the sandbox refuses runs until a reset works. */
  mbx_status (*reset)(void *impl, mbx_error *err);
  mbx_status (*checkpoint)(void *impl, mbx_error *err);
  /* Back to the last checkpoint (MBX_INVALID_ARGUMENT when there is none). */
  mbx_status (*rewind)(void *impl, mbx_error *err);
  /* Ask the active run to stop at its next check. Any thread, any time. */
  void (*interrupt)(void *impl);
  /* The last run or resume paused at an external call. */
  int (*paused)(const void *impl);
  /* Bytes the sandbox's guest heap holds now (the runtime's resident estimate). */
  uint64_t (*heap_bytes)(const void *impl);
  /* The record/replay layer over the sandbox's port: NULL unless the policy is
     deterministic (only such sandboxes keep the log that snapshots are made of). */
  mbxC_port_record *(*recorder)(void *impl);
  /* The sandbox's filesystem view, for the change set (host/changes.c): NULL when none was
     made yet (nothing was written) or the backend keeps it elsewhere. */
  mbxC_vfs *(*files)(void *impl);
  /* What io.stdin reads from now on: data (copied) from its start, or with fd >= 0 that
     descriptor as the guest asks (mbx_sandbox_set_stdin_fd). NULL: not supported. */
  mbx_status (*set_stdin)(void *impl, const char *data, size_t len, int fd, mbx_error *err);
  /* Hibernation (host/hibernate.c; NULL: not supported). hibernate moves the idle sandbox's
     state out of memory; until wake brings it back, no other operation but destroy, files,
     recorder and set_stdin may be called (the public layer answers paused and interrupt
     itself meanwhile). Both fail without changing anything but a wake's CORRUPT, which
     leaves a sandbox that only destroy may follow. */
  mbx_status (*hibernate)(void *impl, mbx_error *err);
  mbx_status (*wake)(void *impl, mbx_error *err);
} mbxH_backend;

/* The backends there are. */
extern const mbxH_backend mbxH_inproc_backend;
extern const mbxH_backend mbxH_worker_backend; /* host/backend/worker.c */

#endif
