/* capabilities/exec_cgroup.h -- the exec backend's cgroup limits: which controllers this host
   gives us (found controller by controller, not by cgroup version), one cgroup per run and
   controller, the whole tree killed through it, what ended the run, and no cgroup left behind.
   No Lua here. */
#ifndef MBX_CAPABILITIES_EXEC_CGROUP_H
#define MBX_CAPABILITIES_EXEC_CGROUP_H

/*
** A host can mix cgroup v1 and v2 (this project's VM: memory, pids and freezer on v1, a v2
** mount with no controllers but with cgroup.kill), be pure v2, or have none. Each job is
** located on its own:
**   memory   a v1 hierarchy with the memory controller, else v2 with memory enabled for our
**            cgroup's children (memory.max, memory.swap.max = 0 / memory.memsw.limit_in_bytes)
**   pids     the same for pids (pids.max)
**   kill     a v2 cgroup (cgroup.kill, Linux 5.14), else a v1 freezer (freeze, SIGKILL every
**            member, thaw)
** Each per-run cgroup is a child of the cgroup this process is in, in that hierarchy (so the
** host's own limits still hold), named moonbox-<token>-<n> (the owner record, below). The library creates it and writes
** the limits; the helper (still root) writes itself into cgroup.procs before it drops to the
** run's uid and becomes bwrap, so every process of the run is in it from the start. After the
** run the library kills what is left through it, reads whether the OOM killer or the pids limit
** acted, and removes it. Nothing enables a controller in the host's own cgroups: a v2 host
** whose cgroup does not delegate memory or pids gets those limits from rlimits instead, and
** the probe says why.
*/

#include <stddef.h>
#include <stdint.h>

enum { MBXC_CG_MEMORY, MBXC_CG_PIDS, MBXC_CG_KILL, MBXC_CG_JOBS };

#define MBXC_CG_PATH_MAX 512

/* Where each job's per-run cgroups go, found once per backend. */
typedef struct mbxC_cgroup_setup {
  char parent[MBXC_CG_JOBS][MBXC_CG_PATH_MAX]; /* our cgroup in that hierarchy; "" = none */
  int v2[MBXC_CG_JOBS];                        /* 1: a cgroup v2 directory; 0: v1 */
  char why[MBXC_CG_JOBS][512];                 /* why a job has no cgroup ("" when it has) */
} mbxC_cgroup_setup;

/* The directory of our cgroup for controller ("memory", "pids", "freezer"; NULL = the v2
   hierarchy itself) from the texts of /proc/self/cgroup and /proc/self/mountinfo, into out.
   1 found (*v2 says which version), 0 not (why says why). Reads no files: the probe hands it
   the texts, the unit test hands it others. */
int mbxC_cgroup_locate(const char *cgroup_text, const char *mountinfo_text, const char *controller,
                       char *out, size_t out_size, int *v2, char *why, size_t why_size);

/* Fill cg from this process's /proc files, checking each candidate by making (and removing) a
   child cgroup and finding the files it needs in it. */
void mbxC_cgroup_probe(mbxC_cgroup_setup *cg);

/* The per-run cgroups. */
typedef struct mbxC_cgroup_run {
  char dir[MBXC_CG_JOBS][MBXC_CG_PATH_MAX]; /* made for this run; "" = not made */
  int v2[MBXC_CG_JOBS];
  int shared[MBXC_CG_JOBS]; /* the same directory as an earlier job (pure v2: one for all) */
} mbxC_cgroup_run;

/* Make the run's cgroups named name with the limits written (memory bytes, pids tasks). A job
   whose cgroup cannot be made is left out (its dir ""), so the caller falls back to rlimits
   for it; what was made is what the result reports. */
void mbxC_cgroup_run_create(const mbxC_cgroup_setup *cg, const char *name, uint64_t memory,
                            uint64_t pids, mbxC_cgroup_run *run);
/* The distinct cgroup.procs files the helper must join, one per call with i = 0, 1, ...;
   NULL past the last. */
const char *mbxC_cgroup_run_procs(const mbxC_cgroup_run *run, int i, char *buf, size_t size);
/* SIGKILL every process of the run through the kill job's cgroup (cgroup.kill, or freeze,
   kill each member, thaw). Safe to call on an empty or absent cgroup. */
void mbxC_cgroup_run_kill(const mbxC_cgroup_run *run);
/* What the limits did: *oom the memory cgroup's OOM killer killed a process; *pids_max a fork
   was refused by pids.max. */
void mbxC_cgroup_run_outcome(const mbxC_cgroup_run *run, int *oom, int *pids_max);
/* The processes in the run's cgroups now (what RLIMIT_NPROC counts, the run having a uid of
   its own), or -1 when the run has no cgroup. */
long mbxC_cgroup_run_count(const mbxC_cgroup_run *run);
/* Kill what is left and remove the run's cgroups, waiting (bounded, about 2 s) for exiting
   members to leave. 0, or -1 when a directory could not be removed (a leak the backend counts). */
int mbxC_cgroup_run_remove(mbxC_cgroup_run *run);

/*
** Cgroups a dead host left behind (it was killed mid-run) are reaped at the backend's probe
** (the runtime's first program, moonbox doctor). What says a cgroup's owner is dead cannot be
** a pid (the same flaw as pid-derived uids: a pid is the owner's in its own pid namespace, and
** is reused): each backend draws a random token, names its cgroups moonbox-<token>-<n>, and
** holds an flock on <dir>/<token> (dir MBXC_CG_OWNER_DIR, root's, 0700; tmpfs, so it lives
** exactly as long as cgroups do, until a reboot) for its whole life; the kernel drops the lock
** when the process dies, however it dies. A reaper removes a moonbox-<token>-<n> only when that
** record exists and nobody holds its lock, and only when the cgroup holds no process; a
** cgroup with no record (an older version's, or an owner whose /run is not this one) is left
** alone.
*/
#define MBXC_CG_OWNER_DIR "/run/moonbox/cgroups"

typedef struct mbxC_cgroup_owner {
  char token[17]; /* 16 hex digits; "" when there is no record (names fall back to the pid) */
  int fd;         /* the held record; -1 none */
  char dir[256];
} mbxC_cgroup_owner;

/* Draw a token and take its record in dir: 0, or -1 (no record; o->token ""). */
int mbxC_cgroup_owner_open(mbxC_cgroup_owner *o, const char *dir);
/* Remove the record (the owner's cgroups are already gone) and drop the lock. */
void mbxC_cgroup_owner_close(mbxC_cgroup_owner *o);
/* Reap the stale moonbox-<token>-<n> cgroups under each of cg's parents whose owner record in
   dir is unlocked, and which hold no process; a record whose cgroups are all gone is removed.
   Returns how many cgroups were removed; *left (may be NULL) counts stale ones that could not be
   (a process still in it). */
int mbxC_cgroup_reap(const mbxC_cgroup_setup *cg, const char *dir, int *left);

#endif
