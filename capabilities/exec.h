/* capabilities/exec.h -- the exec backend: real programs, only inside a bubblewrap sandbox
   with seccomp, a non-root user and limits. No Lua here. */
#ifndef MBX_CAPABILITIES_EXEC_H
#define MBX_CAPABILITIES_EXEC_H

/*
** A guest never starts a process itself: proc.run (and os.execute / io.popen through /bin/sh)
** describe one program as data (capabilities/port.h mbxC_exec_request), port_local checks it
** against the policy's allow list, and this backend runs it:
**
**   library (this file)        posix_spawn, empty environment, fds 0-2 pipes, 3 the request
**     |                        (a memfd), 4 the status pipe, 5 the copy-back pipe, 6 the
**     |                        copy-in socket (exec_copy.h), 7.. the mounts' held dirfds
**     v
**   moonbox-exec (host/exec/helper.c, single-threaded: a multithreaded host cannot do this
**     |   itself)              setgroups(0), rlimits, a per-run host uid, the seccomp BPF and
**     |                        the --args list in fresh memfds, every other fd closed
**     v
**   /usr/bin/bwrap             namespaces (user, pid, net, ipc, uts, cgroup), the mount tree,
**     |                        --cap-drop ALL, the seccomp filter
**     v
**   moonbox-exec --shim        inside the sandbox: closes the fds it does not need (the mount
**     |                        dirfds bwrap needed), unpacks the copy of the view's overlay
**     |                        and rw mounts and /tmp as it streams in, starts the program,
**     |                        waits, sends the copy back and the program's wait status
**     v
**   the program
**
** The runtime owns the wall clock: a pidfd and poll, the whole tree killed at the deadline
** (killing bwrap kills the pid namespace), stdout and stderr drained to their cap and past it.
** The probe (bwrap version, user namespaces, a smoke run) runs once per runtime and is cached.
*/

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "capabilities/exec_cgroup.h"
#include "capabilities/exec_uid.h"
#include "capabilities/port.h"
#include "capabilities/vfs.h"

/* ---- the policy's part ---- */

#define MBXC_EXEC_MAX_ALLOW 64
#define MBXC_EXEC_MAX_ARGS 4096            /* argv entries of one request */
#define MBXC_EXEC_MAX_ARG_BYTES (1u << 20) /* all of argv and env together */
#define MBXC_EXEC_MAX_STDIN (64u << 20)

#define MBXC_DEFAULT_EXEC_TIMEOUT_MS 10000ull
#define MBXC_DEFAULT_EXEC_MEMORY (256ull << 20)
#define MBXC_DEFAULT_EXEC_PIDS 64ull
#define MBXC_DEFAULT_EXEC_OUTPUT (1ull << 20)
#define MBXC_DEFAULT_EXEC_RUNS 100ull
#define MBXC_MIN_EXEC_MEMORY (16ull << 20)
#define MBXC_MAX_EXEC_MEMORY (64ull << 30)
#define MBXC_MAX_EXEC_PIDS 4096ull
#define MBXC_MAX_EXEC_OUTPUT (256ull << 20)

typedef struct mbxC_exec_spec {
  char **allow; /* absolute sandbox paths of the programs that may be started */
  size_t allow_count;
  uint64_t timeout_ms; /* per program; the run's deadline still applies */
  uint64_t memory;     /* address space of each process (RLIMIT_AS), bytes */
  uint64_t pids;       /* processes of the sandbox's user (RLIMIT_NPROC) */
  uint64_t output;     /* bytes kept of stdout and of stderr each */
  uint64_t max_runs;   /* programs per mbx_run */
} mbxC_exec_spec;

void mbxC_exec_spec_defaults(mbxC_exec_spec *s);
void mbxC_exec_spec_clear(mbxC_exec_spec *s);
/* 0, or -1 when out of memory (dst cleared). */
int mbxC_exec_spec_copy(mbxC_exec_spec *dst, const mbxC_exec_spec *src);
/* Allow one program: an absolute, normalized path of at most 255 bytes. 0, -1 (why says
   what was wrong; nothing changed) or -2 (out of memory). Allowing a path twice is fine. */
int mbxC_exec_allow(mbxC_exec_spec *s, const char *program, char *why, size_t why_size);
/* The allowed path argv0 names: itself when it is an allowed path, or the one allowed path
   whose last component is argv0 when argv0 has no slash ("python3"). NULL: not allowed. */
const char *mbxC_exec_resolve(const mbxC_exec_spec *s, const char *argv0);

/* ---- one run, described ---- */

typedef struct mbxC_exec_mount {
  const char *path; /* virtual */
  int mode;         /* MBXC_MOUNT_RO / MBXC_MOUNT_RW */
  int dirfd;        /* held O_PATH fd of the host directory */
} mbxC_exec_mount;

typedef struct mbxC_exec_plan {
  const char *program; /* resolved, allowed sandbox path */
  const char *const *argv;
  size_t argc;
  const char *cwd;        /* sandbox path; NULL = "/tmp" */
  const char *const *env; /* "NAME=VALUE" entries: the policy's, then the request's */
  size_t envc;
  const mbxC_exec_mount *mounts;
  size_t mount_count;
  uint64_t tmp_bytes; /* size of the process's private /tmp */
  /* The policy's memory files: each is copied into a fresh memfd by the helper and bound
     read-only at its virtual path (bwrap --ro-bind-data), so the process sees what io.open
     does. */
  const mbxC_fs_file *files;
  size_t file_count;
  /* The copy of the view's overlay and rw mounts and memory /tmp (exec_copy.h), planned: sent
     to the shim once the helper runs (NULL: none; overlay and rw mounts are then bound as
     they are, overlays read-only), each copied mount's tmpfs size, and the most bytes of
     copy-back kept (past it: refused). */
  struct mbxC_exec_copy *copy;
  uint64_t tmp_slack; /* added to /tmp's tmpfs only: a page per copied entry */
  uint64_t overlay_bytes;
  size_t copy_back_cap;
} mbxC_exec_plan;

#define MBXC_EXEC_SHIM "/.moonbox/moonbox-exec"
/* The first fd the helper finds the mount dirfds at (plan->mounts[i] at 7 + i). */
#define MBXC_EXEC_FIRST_MOUNT_FD 7

/* A growable list of NUL-terminated strings. */
typedef struct mbxC_strlist {
  char **items;
  size_t count, cap;
} mbxC_strlist;
int mbxC_strlist_push(mbxC_strlist *l, const char *s);
void mbxC_strlist_free(mbxC_strlist *l);

/* The bwrap arguments of plan: the options (what goes into the --args memfd, so no host
   detail shows in the sandbox's /proc/1/cmdline), then from *command_at on "--", the shim
   and the program's argv (bwrap takes the command only from its real argv), for image (the host's
   /usr layout: which of /bin /sbin /lib /lib64 /lib32 are symlinks into /usr, probed once). 0 or -1
   (out of memory). */
typedef struct mbxC_exec_image {
  char links[6][32]; /* "usr/bin" when /bin is that symlink; "" when it is absent */
  int dirs[6];       /* 1 when it is a real directory (bound read-only) */
} mbxC_exec_image;
extern const char *const mbxC_exec_image_names[6];
void mbxC_exec_image_probe(mbxC_exec_image *img);
int mbxC_exec_build_args(const mbxC_exec_plan *plan, const mbxC_exec_image *img, mbxC_strlist *out,
                         size_t *command_at);

/* ---- the backend (one per runtime) ---- */

typedef struct mbxC_exec_backend {
  pthread_mutex_t lock;
  char bwrap[4096];  /* absolute */
  char helper[4096]; /* absolute; "" = not found (helper_error says why) */
  char helper_error[256];
  _Atomic int probed; /* read without the lock once set */
  int available;
  char reason[512];    /* why not available, with a hint */
  char version[64];    /* bwrap's, e.g. "0.8.0" */
  int userns;          /* user namespaces can be created */
  int uid_isolation;   /* running as root: each run gets its own host uid */
  mbxC_uid_pool uids;  /* where that uid comes from (exec_uid.h) */
  int uid_own;         /* the range is provably this process's (else: one uid, no rw mount) */
  char uid_scope[256]; /* why, either way */
  mbxC_exec_image image;
  mbxC_cgroup_setup cg;                       /* where per-run cgroups go (probed with the rest) */
  _Atomic uint64_t cgroup_runs, cgroup_leaks; /* runs so far; cgroups that could not be removed */
  mbxC_cgroup_owner cg_owner; /* this backend's owner record: its cgroups' names carry the token */
  uint64_t cgroup_reaped, cgroup_stale; /* a dead host's cgroups removed; left (not empty) */
} mbxC_exec_backend;

void mbxC_exec_backend_init(mbxC_exec_backend *b);
void mbxC_exec_backend_free(mbxC_exec_backend *b);
/* Set a path (bwrap or helper): must be absolute. The probe runs again at the next use. */
int mbxC_exec_backend_set(mbxC_exec_backend *b, int helper, const char *path, char *why,
                          size_t why_size);
/* Set the range of host uids runs take as root (exec_uid.h; count 0: the default). 0, or -1
   with why. The scope is found again at the next use. */
int mbxC_exec_backend_set_uids(mbxC_exec_backend *b, uint32_t first, uint32_t count, char *why,
                               size_t why_size);
/* Probe once (cached): 1 available, 0 not (b->reason). */
int mbxC_exec_probe(mbxC_exec_backend *b);
/* The probe's findings as one JSON object (malloc'd, NUL-terminated), NULL when out of
   memory: {"available", "reason", "bwrap", "bwrap_version", "helper", "user_namespaces",
   "uid_isolation", "seccomp", "limits", "cgroups", "shared_memory", "rw_mounts"}. */
char *mbxC_exec_status_json(mbxC_exec_backend *b);

/* Output buffers of a run, owned by the caller and reused. */
typedef struct mbxC_exec_buffers {
  char *out, *err;
  size_t out_cap, err_cap;
  char *back; /* the shim's copy-back of the run (exec_copy.h) */
  size_t back_cap, back_len;
  int back_over; /* it passed plan->copy_back_cap */
} mbxC_exec_buffers;
void mbxC_exec_buffers_free(mbxC_exec_buffers *bufs);

/* Run plan: 0 with *res filled (its bytes in bufs), or -1 with *e (errnum: ENOSYS backend
   unavailable, ENOENT program missing, MBXC_E_TIMEDOUT the run's deadline, EINTR
   interrupted, ENOMEM, EIO a setup failure). timeout_ms is the program's own timeout (its
   expiry is a result with timed_out); wait's deadline ends the call with MBXC_E_TIMEDOUT. */
int mbxC_exec_run(mbxC_exec_backend *b, const mbxC_exec_plan *plan, const mbxC_exec_spec *spec,
                  const char *stdin_bytes, size_t stdin_len, uint64_t timeout_ms,
                  const mbxC_wait *wait, mbxC_exec_buffers *bufs, mbxC_exec_result *res,
                  mbxC_port_error *e);

#endif
