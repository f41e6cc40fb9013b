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
  /* 0: free; 1: a call holds it; 2: the idle sweep holds it for one hibernation (a call
     waits that out instead of failing: mbxH_busy_take). */
  _Atomic int busy;
  /* What mbx_sandbox_checkpoint saw, for the rewind (the state itself is the backend's). */
  int checkpoint_poisoned;
  mbx_status checkpoint_poisoned_by;
  /* Snapshots (deterministic policies): the blob's header (with the policy's mounts). */
  mbxC_snap_header snap;
  /* Hibernation (host/hibernate.c). asleep: the backend's state is out of memory; set and
     cleared by the thread holding busy. peeking: threads reading the backend's state without
     the claim (mbx_sandbox_interrupt, mbx_sandbox_paused); a hibernation waits for them to
     leave after setting asleep, and they read asleep after entering (a Dekker pair), so none
     reads a slot whose pages are going. asleep_paused answers mbx_sandbox_paused meanwhile. */
  _Atomic int asleep;
  _Atomic int peeking;
  _Atomic int asleep_paused; /* atomic: a peek that saw asleep may still read it at the next
                                hibernation's write (relaxed is enough: an int) */
  /* Listed in the runtime's idle sweep (made while mbx_runtime_set_hibernate was on):
     used_ns is when the last call on it ended (CLOCK_MONOTONIC_COARSE); the links are under
     the runtime's hibernate_lock. */
  int listed;
  _Atomic uint64_t used_ns;
  struct mbx_sandbox *idle_prev, *idle_next;
};

/* mbx_sandbox_new, and mbx_sandbox_restore with replay (taken over, also on failure). */
mbx_sandbox *mbxH_sandbox_create(mbx_runtime *rt, const mbx_policy *p, mbxC_replay_log *replay,
                                 mbx_error *err);
/* Take busy for a call: 0 when another call holds it. */
int mbxH_busy_take(mbx_sandbox *sb);
/* Take the sandbox for a call that must not overlap a run; fills err when it is busy. */
int mbxH_sandbox_claim(mbx_sandbox *sb, const char *fn, mbx_error *err);
/* The same, and a hibernated sandbox is woken (for calls that reach the backend's state);
   fills err and leaves the sandbox unclaimed when either fails, with *why the status. */
int mbxH_sandbox_claim_awake(mbx_sandbox *sb, const char *fn, mbx_status *why, mbx_error *err);
void mbxH_sandbox_release(mbx_sandbox *sb);

/* host/hibernate.c. With the sandbox claimed: bring it back if it is hibernated. */
mbx_status mbxH_wake(mbx_sandbox *sb, const char *fn, mbx_error *err);
/* A new sandbox joins the runtime's idle sweep (when hibernation is on), a freed one leaves
   it; and the sweep's chance to run, taken when a call on a sandbox ends. */
void mbxH_idle_join(mbx_sandbox *sb);
void mbxH_idle_leave(mbx_sandbox *sb);
void mbxH_idle_tick(mbx_runtime *rt);

#endif
