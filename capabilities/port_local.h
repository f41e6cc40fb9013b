/* capabilities/port_local.h -- the port served in-process, from a copy of the policy. */
#ifndef MBX_CAPABILITIES_PORT_LOCAL_H
#define MBX_CAPABILITIES_PORT_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "capabilities/exec.h"
#include "capabilities/hostfn.h"
#include "capabilities/policy.h"
#include "capabilities/port.h"
#include "capabilities/stdin_source.h"
#include "capabilities/vfs.h"

/* The in-process implementation: the policy's settings copied at sandbox creation, so the
   host may change or free the policy while sandboxes made from it live. */
typedef struct mbxC_port_local {
  mbxC_port port;           /* port.ud points at this struct: do not move it once initialized */
  mbxC_grants grants;       /* what port.grants points at */
  mbxC_grant_fn *grant_fns; /* grants.fns: names borrowed from host_fns */
  int time_fixed;
  int64_t time;
  int seed_fixed;
  uint64_t seed;
  uint64_t draws; /* random_seed calls so far */
  /* Where seeds come from without a policy seed: the runtime's secret (capabilities/seeds.h),
     set by the host after init; NULL: getrandom per draw. */
  struct mbxC_seeds *seeds;
  mbxC_env_var *env;
  size_t env_count;
  /* os.clock's origin: the thread CPU clock when the current run began, read lazily. Reading
     that clock is a system call (0.3-0.7 us, more than the rest of a small run), so a run or
     resume only notes the coarse wall clock; the first os.clock of the run reads the CPU
     clock and puts the origin the coarse wall time since the start before it. */
  uint64_t cpu_start_ns;
  uint64_t run_start_coarse_ns; /* CLOCK_MONOTONIC_COARSE at the run's start */
  int cpu_start_known;          /* cpu_start_ns is set for the current run */
  mbxC_hostfn_table host_fns;   /* copied from the policy: the callbacks and bindings */
  struct mbx_host_reply reply;  /* reused by every host call */
  char *native_out; /* MBX_NATIVE_OUT_MAX bytes for 'o' returns, made at the first one */
  char native_error[MBXC_MAX_HOSTFN_NAME + 128]; /* a native call's message for the guest */
  /* The filesystem view (capabilities/vfs.h): made at creation from fs_policy, a copy of the
     policy's settings, when it has mounts or files; otherwise from fs_spec (the quotas only)
     at the first file operation. */
  mbxC_vfs *vfs;
  mbxC_fs_spec fs_spec;     /* the quotas; no mounts or files */
  mbx_policy *fs_policy;    /* NULL without mounts and files */
  mbxC_port_error fs_error; /* why the last view could not be made */
  mbxC_vfs_mark *fs_mark;   /* the memory tree at the checkpoint; NULL: no view then */
  mbxC_vfs_tap fs_tap;      /* set on every view made (snapshots): fs_tapped */
  int fs_tapped;
  int fs_marked; /* a checkpoint was taken */
  /* exec (capabilities/exec.h): the policy's allow list and limits, the runtime's backend
     (NULL until mbxC_port_local_set_exec), the output buffers, programs started this run. */
  mbxC_exec_spec exec;
  mbxC_exec_backend *exec_backend;
  mbxC_exec_buffers exec_bufs;
  uint64_t exec_runs;
  /* io.stdin: the host's bytes or descriptor, and how far the guest read. */
  mbxC_stdin stdin_source;
} mbxC_port_local;

/* Copy what the port needs from p and fill pl->port. Returns 0, -1 when out of memory, or
   MBXC_PORT_LOCAL_FS_FAILED when the filesystem view cannot be made (a mounted host
   directory cannot be opened: pl->fs_error says which and why). pl is then empty and needs
   no mbxC_port_local_free. */
#define MBXC_PORT_LOCAL_FS_FAILED (-2)
int mbxC_port_local_init(mbxC_port_local *pl, const mbx_policy *p);
/* Serve exec_run through backend (the runtime's; it outlives the port) when the policy allows
   a program; without one exec_run stays NULL (the guest sees "not granted"). */
void mbxC_port_local_set_exec(mbxC_port_local *pl, mbxC_exec_backend *backend);
/* 1 when the policy allows at least one program (such a sandbox cannot be snapshotted). */
int mbxC_port_local_has_exec(const mbxC_port_local *pl);
/* Release the copies. Never fails; a zeroed pl is fine, and so is freeing twice. */
void mbxC_port_local_free(mbxC_port_local *pl);
/* A run begins on the calling thread: os.clock counts from here. */
void mbxC_port_local_run_begin(mbxC_port_local *pl);
/* A run ended (not paused): every open file is closed. */
void mbxC_port_local_run_end(mbxC_port_local *pl);
/* The sandbox is reset: the view is made again, so memory files and /tmp start empty.
   0, or -1 (pl->fs_error says why; the old view is kept). */
int mbxC_port_local_fs_reset(mbxC_port_local *pl);
/* mbx_sandbox_checkpoint / mbx_sandbox_rewind of the memory files (capabilities/vfs.h): take
   a mark (0, or -1 when out of host memory; *mark NULL when no view exists yet), keep it as
   the checkpoint's once the vm's checkpoint succeeded (or free it with mbxC_vfs_mark_free),
   and rewind to the kept one (0, or -1 when out of host memory). */
int mbxC_port_local_fs_mark(mbxC_port_local *pl, mbxC_vfs_mark **mark);
void mbxC_port_local_fs_keep(mbxC_port_local *pl, mbxC_vfs_mark *mark);
int mbxC_port_local_fs_rewind(mbxC_port_local *pl);
/* The bytes io.stdin reads from now on (copied; len 0: empty), from their start. 0, or -1
   when out of host memory (the old bytes are kept). */
int mbxC_port_local_set_stdin(mbxC_port_local *pl, const char *data, size_t len);
/* io.stdin reads fd (borrowed) from now on, as the guest asks (capabilities/stdin_source.h). */
void mbxC_port_local_set_stdin_fd(mbxC_port_local *pl, int fd);
/* 1 when the view reaches host directories (the policy has mounts). */
int mbxC_port_local_has_mounts(const mbxC_port_local *pl);
/* The record layer's tap on the filesystem view (capabilities/vfs.h), now and on every view
   made later (a reset makes a new one). */
void mbxC_port_local_set_fs_tap(mbxC_port_local *pl, const mbxC_vfs_tap *tap);

/* Where the port's own sequence stands (the random seeds drawn), for checkpoint/rewind and
   reset: a rewound sandbox draws the seeds it drew after the checkpoint again. */
uint64_t mbxC_port_local_position(const mbxC_port_local *pl);
void mbxC_port_local_seek(mbxC_port_local *pl, uint64_t position);

#endif
