/* capabilities/exec_copy.h -- what a process sees of the view's overlay mounts and memory /tmp:
   a copy, and how the process's writes to it come back into the view. No Lua here. */
#ifndef MBX_CAPABILITIES_EXEC_COPY_H
#define MBX_CAPABILITIES_EXEC_COPY_H

/*
** bwrap 0.8 has no overlayfs, and the view's memory /tmp and overlay changes live in this
** process's heap, so a process cannot see them by a bind mount. Instead each such root (the
** memory /tmp and every overlay mount) is a size-limited tmpfs of the sandbox, and:
**   1. before the run, the library walks the root through the view (what io.open sees: the
**      host files of an overlay with the guest's changes over them) into an archive, bounded
**      by MBXC_EXEC_COPY_MAX bytes and MBXC_EXEC_COPY_ENTRIES entries: an overlay past either
**      is left out and bound read-only from its host directory instead (the result's
**      changes_error says so); /tmp past either refuses the exec, naming it;
**   2. the shim (host/exec/helper.c, inside the sandbox, before the program starts) writes the
**      archive into the tmpfs; after the program ends it walks the roots again and sends what
**      is there back on a pipe (regular files and directories; anything else is named and
**      left out);
**   3. the library compares the two and applies what was created, modified and removed to
**      the view through its own operations (so quotas, whiteouts and copy-up hold, and the
**      changes show in the change set), all or nothing: a view mark is taken first and
**      restored when any step fails (a quota, a cap), and the result says why.
** Paths the archive names are canonical virtual paths; what comes back is untrusted (the
** process wrote it) and is checked entry by entry: canonical, below a root, not at or below
** an excluded path (another mount's point, a policy file), within the caps.
**
** Archive items, as the exec request's: "<tag><decimal length>:<bytes>":
**   R root   X excluded path   D directory   F "path\0bytes"   S path of another kind (back
**   only)   Z the end (back only: a copy-back without it was cut short).
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/vfs.h"

#define MBXC_EXEC_COPY_MAX (64ull << 20) /* bytes of files copied in, all roots together */
#define MBXC_EXEC_COPY_ENTRIES 10000u    /* files and directories, each way */
#define MBXC_EXEC_COPY_DEPTH 64          /* directory depth below a root */

typedef struct mbxC_exec_copy {
  char *blob; /* the archive sent to the shim */
  size_t len, cap;
  uint64_t bytes; /* file bytes in it */
  size_t entries; /* files and directories in it */
  size_t nroots;  /* roots in it */
  int failed;     /* out of host memory while building */
  char note[200]; /* why a droppable root was left out ("" when none was) */
} mbxC_exec_copy;

/* Walk roots[0..nroots) of v (directories; excluded[0..nex) and what lies below them left
   out) into c. A root with droppable[i] set (an overlay mount: the caller can bind it
   read-only instead) that passes a cap is left out, dropped[i] = 1 and c->note says why; any
   other root past a cap fails the build. 0, or -1 with *e (EFBIG past a cap, naming the root;
   ENOMEM; an fs error of the view). droppable and dropped may be NULL. */
int mbxC_exec_copy_build(mbxC_exec_copy *c, mbxC_vfs *v, const char *const *roots, size_t nroots,
                         const char *const *excluded, size_t nex, const int *droppable,
                         int *dropped, mbxC_port_error *e);
void mbxC_exec_copy_free(mbxC_exec_copy *c);
/* Room for need bytes in *buf, which grows by doubling from 4 KiB (the archive here, the
   helper's request in exec.c): 0, or -1 out of memory with *buf and *cap unchanged. */
int mbxC_exec_reserve(char **buf, size_t *cap, size_t need);
/* Fill *e (errnum and the formatted message) and return -1: the errors of this file and of
   exec.c. */
int mbxC_exec_fail(mbxC_port_error *e, int errnum, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Apply what came back (back[0..back_len), as the shim sent it) against what went in: 0 with
   *applied the entries created, modified or removed, or -1 with why (nothing applied: the view
   is as it was before the call). */
int mbxC_exec_copy_apply(mbxC_vfs *v, const mbxC_exec_copy *in, const char *back, size_t back_len,
                         size_t *applied, char *why, size_t why_size);

#endif
