/* host/sandbox.h -- the public sandbox handle: bookkeeping shared by every backend. */
#ifndef MBX_HOST_SANDBOX_H
#define MBX_HOST_SANDBOX_H

#include <stdatomic.h>
#include <stdint.h>

#include "capabilities/replay.h"
#include "host/backend/backend.h"
#include "include/moonbox.h"

struct mbx_sandbox {
  mbx_runtime *rt;
  const mbxH_backend *backend;
  void *impl;            /* the backend's part */
  uint64_t heap_counted; /* this sandbox's share of rt->heap_total */
  int poisoned;
  mbx_status poisoned_by;
  _Atomic int busy;
  /* What mbx_sandbox_checkpoint saw, for the rewind (the state itself is the backend's). */
  int checkpoint_poisoned;
  mbx_status checkpoint_poisoned_by;
  /* Snapshots (deterministic policies): the blob's header (with the policy's mounts). */
  mbxC_snap_header snap;
};

/* mbx_sandbox_new, and mbx_sandbox_restore with replay (taken over, also on failure). */
mbx_sandbox *mbxH_sandbox_create(mbx_runtime *rt, const mbx_policy *p, mbxC_replay_log *replay,
                                 mbx_error *err);
/* Take the sandbox for a call that must not overlap a run; fills err when it is busy. */
int mbxH_sandbox_claim(mbx_sandbox *sb, const char *fn, mbx_error *err);
void mbxH_sandbox_release(mbx_sandbox *sb);

#endif
