/* host/backend/backend.h -- what runs a sandbox under the public API: the backend interface. */
#ifndef MBX_HOST_BACKEND_H
#define MBX_HOST_BACKEND_H

/*
** The public sandbox functions (host/sandbox.c, host/snapshot.c) check their arguments, take
** the sandbox (busy), refuse poisoned or wrongly paused sandboxes, and then call one of these
** operations; after a run or resume one shared epilogue poisons the sandbox on a limit, an
** interrupt or an internal error and brings the runtime's heap estimate up to date. A
** backend does the rest: the in-process backend (host/backend/inproc.c) runs the vm in this
** process; a worker backend (jailed processes, later) implements the same table, and the
** runtime picks one without any public function changing.
**
** Every operation except interrupt is called by the thread that holds the sandbox, never
** concurrently. An operation that fails fills err and returns its status; a run or resume
** returns a run status (< MBX_API_ERROR_BASE) with *out set, or an API status with nothing run.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port_record.h"
#include "capabilities/replay.h"
#include "capabilities/vfs.h"
#include "include/moonbox.h"

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
  mbx_status (*create)(mbx_runtime *rt, const mbx_policy *p, const mbxC_snap_header *snap,
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
  /* The bytes io.stdin reads (copied), from their start. NULL: not supported. */
  mbx_status (*set_stdin)(void *impl, const char *data, size_t len, mbx_error *err);
} mbxH_backend;

/* The backends there are. */
extern const mbxH_backend mbxH_inproc_backend;
extern const mbxH_backend mbxH_worker_backend; /* host/backend/worker.c */

#endif
