/* capabilities/exec_uid.h -- the host uids programs run as on a root host: a range, one lock
   per uid that every user of the range shares, and what a run leaves behind fixed up. No Lua. */
#ifndef MBX_CAPABILITIES_EXEC_UID_H
#define MBX_CAPABILITIES_EXEC_UID_H
/*
** As root the exec helper drops to a host uid of the run's own, so one run's RLIMIT_NPROC and
** files are not another's. What makes the uid the run's own:
**
** - It comes from a range, never from a pid: a pid is the caller's in its own pid namespace
**   (two moonbox processes that are pid 1 in two containers got the same uids) and is reused.
**   The default range, 1879048192-1879113727 (0x70000000 + 65536), lies just past systemd's
**   container range (524288-1879048191) and far from its dynamic users (61184-65519) and from
**   what /etc/subuid hands out (100000 up, 65536 a user). An operator sets another with
**   exec.uids (mbx_runtime_set_exec_uids, `--exec-uids FIRST-LAST`).
** - Each uid of the range is held, for the whole run, by an flock on <dir>/<uid> (dir
**   /var/lib/moonbox/uids, root's, 0700, kept across reboots as the files are): every process of every runtime that sees that directory
**   takes uids from the same locks, across pid namespaces. Processes that do not share the
**   directory (two containers) cannot share locks, which is why a process that cannot prove
**   the range is its own (a pid or user namespace other than the initial one, and no range
**   set) does not pretend to: it runs every program as one uid (mbxC_uid_pool_scope).
** - Programs never write the host's directories (rw mounts are copies the view applies after
**   the program: capabilities/exec_copy.c), so no file of a run's uid outlives the run. The
**   lock file says "busy" while a run holds the uid and is emptied when the run ends; a uid
**   whose file is not empty (its run's host died mid-run, and processes of it may live on) is
**   never taken again: quarantined, until an operator removes the file.
** - When every uid of the range is held or quarantined, the run is refused (EAGAIN) with the
**   range named, rather than waited for: a wait would spend the guest's deadline on another
**   tenant's programs.
*/
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define MBXC_UID_DEFAULT_FIRST 1879048192u /* 0x70000000 */
#define MBXC_UID_DEFAULT_COUNT 65536u
#define MBXC_UID_LOCK_DIR "/var/lib/moonbox/uids"

typedef struct mbxC_uid_pool {
  uint32_t first, count;        /* the range */
  int configured;               /* set by the operator (exec.uids), not the default */
  char dir[256];                /* the lock directory */
  _Atomic uint32_t next;        /* where the next search starts (an offset in the range) */
  _Atomic int started;          /* the first search of this process started at random */
  _Atomic uint64_t quarantined; /* uids this process found dirty and skipped */
} mbxC_uid_pool;

/* The default range, lock directory MBXC_UID_LOCK_DIR. */
void mbxC_uid_pool_init(mbxC_uid_pool *p);
/* Set the range [first, first + count): count 0 goes back to the default. -1 when it is
   empty past 2^32, holds 0 or 65534 (nobody) or 4294967295, or reaches below 1000 (system
   users); why says which. */
int mbxC_uid_pool_set(mbxC_uid_pool *p, uint32_t first, uint32_t count, char *why, size_t why_size);

/* Whether the range is provably this process's own: 1 when the operator set it, or this
   process is in the initial pid and user namespaces (the lock directory is then the
   host's); 0 otherwise, with why saying what was found. */
int mbxC_uid_pool_scope(const mbxC_uid_pool *p, char *why, size_t why_size);

typedef struct mbxC_uid_lease {
  uint32_t uid;
  int fd; /* the held lock file; -1 when none */
} mbxC_uid_lease;

/* Take a free uid: 0 with *l held; -1 (errno EAGAIN) every uid is held or quarantined; -2 the
   lock directory is unusable (not a directory, not root's, writable by others); why says
   which. */
int mbxC_uid_take(mbxC_uid_pool *p, mbxC_uid_lease *l, char *why, size_t why_size);

/* For a holder whose processes can create no file (a worker zygote's): the busy mark is
   cleared at once, so the uid is free again however the holder ends (a host that exits
   without freeing its runtime included), not quarantined. */
void mbxC_uid_lease_leaves_no_files(mbxC_uid_lease *l);

/* Release l: clean (the run ended with all its processes) frees the uid for the next run;
   otherwise it stays quarantined. l->fd is closed either way. */
void mbxC_uid_release(mbxC_uid_lease *l, int clean);

/* How many lock files in the pool's directory mark a quarantined uid of the range (for
   moonbox doctor); -1 when the directory cannot be read. */
long mbxC_uid_quarantined(const mbxC_uid_pool *p);

/* Open dir (an O_PATH fd), making it and its parents when missing (0755, the last 0700): a
   directory of this process's euid that no one else can write, reached without following a
   link. -1 with why. The exec backend's other owner records use it too (exec_cgroup.h). */
int mbxC_lock_dir_open(const char *dir, char *why, size_t why_size);

#endif
