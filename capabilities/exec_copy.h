/* capabilities/exec_copy.h -- what a process sees of the view's overlay and rw mounts and
   memory /tmp: a copy, and how the process's writes to it come back into the view. No Lua
   here. */
#ifndef MBX_CAPABILITIES_EXEC_COPY_H
#define MBX_CAPABILITIES_EXEC_COPY_H

/*
** bwrap 0.8 has no overlayfs, and the view's memory /tmp and overlay changes live in this
** process's heap, so a process cannot see them by a bind mount; and an rw mount bound as it is
** would take the process's writes straight to the host with no quota (the view charges only
** what passes through it). Instead each such root (the memory /tmp, every overlay and every rw
** mount) is a size-limited tmpfs of the sandbox, and:
**   1. before the run, a plan pass walks the roots through the view (what io.open sees),
**      counting entries and bytes against MBXC_EXEC_COPY_MAX and MBXC_EXEC_COPY_ENTRIES: an
**      overlay or rw mount past either is left out and bound read-only from its held dirfd
**      instead (the result's changes_error says so); /tmp past either refuses the exec;
**   2. once the helper runs, the send pass walks them again and streams the archive on a
**      socket to the shim (host/exec/helper.c, inside the sandbox, before the program starts),
**      which writes it into the tmpfs as it reads: the copy is never whole in this process
**      (64 KiB at a time) and its pages are the sandbox's (charged to its memory cgroup and
**      bounded by each tmpfs's size); what was sent is kept as an index of paths and sizes;
**   3. after the program ends the shim kills what is left of the run (so nothing changes
**      under it) and walks the roots again: a file whose bytes are those it unpacked comes
**      back as a name only (U), others whole; the library checks every entry (canonical, below
**      a root, not at or below an excluded path, within the caps) and applies what was
**      created, modified and removed through the view's own operations (quotas, whiteouts,
**      copy-up, the change set), all or nothing: the memory roots under a view mark restored
**      on any failure, then the rw mounts, whose writes reach the host, only once the quotas
**      are shown to hold for all of them.
** Paths the archive names are canonical virtual paths; what comes back is untrusted (the
** process wrote it).
**
** Archive items, as the exec request's: "<tag><decimal length>:<bytes>":
**   R root   W root of an rw mount   X excluded path   D directory   F "path\0bytes" (E: the
**   same, an executable host file; in the
**   index: "path\0size")   U path of a file as it went in (back only)   S path of another kind
**   (back only)   Z the end (a copy without it was cut short).
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/vfs.h"

#define MBXC_EXEC_COPY_MAX (64ull << 20) /* bytes of files copied in, all roots together */
#define MBXC_EXEC_COPY_ENTRIES 10000u    /* files and directories, each way */
#define MBXC_EXEC_COPY_DEPTH 64          /* directory depth below a root */
#define MBXC_EXEC_COPY_ROOTS (MBXC_VFS_MAX_MOUNTS + 1)

typedef struct mbxC_exec_copy {
  mbxC_vfs *v;
  const char *roots[MBXC_EXEC_COPY_ROOTS]; /* copied (borrowed: the caller's, for the call) */
  int rw[MBXC_EXEC_COPY_ROOTS];            /* root i is an rw mount */
  int host_fd[MBXC_EXEC_COPY_ROOTS];       /* its held host dirfd (-1: /tmp), for modes */
  size_t nroots;
  const char *const *excluded; /* borrowed too */
  size_t nex;
  uint64_t bytes;    /* file bytes in the copy */
  uint64_t rw_bytes; /* of them, under rw mounts */
  size_t entries;    /* files and directories in it */
  char note[200];    /* why a droppable root was left out ("" when none was) */
  /* The index of what the send pass sent (file bytes left out). */
  char *blob;
  size_t len, cap;
  int failed; /* out of host memory while building it */
  /* The send pass's socket and deadline. */
  int fd;
  const mbxC_wait *wait;
} mbxC_exec_copy;

/* The plan pass: walk roots[0..nroots) of v (directories; rw[i] set for an rw mount; host_fds[i]
   the mount's held dirfd or -1, whose executable files are sent executable;
   excluded[0..nex) and what lies below them left out, borrowed until the copy is freed) and
   count them into c. A root with droppable[i] set (the caller can bind it read-only instead)
   that passes a cap is left out, dropped[i] = 1 and c->note says why; any other root past a
   cap fails. 0, or -1 with *e (EFBIG past a cap, naming the root; ENOMEM; an fs error of the
   view). rw, host_fds, droppable and dropped may be NULL. */
int mbxC_exec_copy_plan(mbxC_exec_copy *c, mbxC_vfs *v, const char *const *roots, const int *rw,
                        const int *host_fds, size_t nroots, const char *const *excluded, size_t nex,
                        const int *droppable, int *dropped, mbxC_port_error *e);
/* The send pass: the archive on socket fd (non-blocking sends, polled in 50 ms slices against
   wait's deadline and interrupt), the index kept in c. 0, or -1 with *e (EPIPE the shim is
   gone, MBXC_E_TIMEDOUT, EINTR, EFBIG a host file grew past a cap since the plan, ENOMEM). */
int mbxC_exec_copy_send(mbxC_exec_copy *c, int fd, const mbxC_wait *wait, mbxC_port_error *e);
void mbxC_exec_copy_free(mbxC_exec_copy *c);
/* Room for need bytes in *buf, which grows by doubling from 4 KiB (the index here, the
   helper's request in exec.c): 0, or -1 out of memory with *buf and *cap unchanged. */
int mbxC_exec_reserve(char **buf, size_t *cap, size_t need);
/* Fill *e (errnum and the formatted message) and return -1: the errors of this file and of
   exec.c. */
int mbxC_exec_fail(mbxC_port_error *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Apply what came back (back[0..back_len), as the shim sent it) against what went in (in's
   index), with the view's quotas bytes_max and files_max (for the rw mounts' check): 0 with
   *applied the entries created, modified or removed, or -1 with why (nothing applied: the
   view is as it was before the call). */
int mbxC_exec_copy_apply(mbxC_vfs *v, const mbxC_exec_copy *in, const char *back, size_t back_len,
                         uint64_t bytes_max, uint64_t files_max, size_t *applied, char *why,
                         size_t why_size);

#endif
