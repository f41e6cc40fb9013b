/* host/changes.h -- the change set for the CLI: a summary, an export, a unified diff (the
   public mbx_sandbox_changes is in host/changes.c too). */
#ifndef MBX_HOST_CHANGES_H
#define MBX_HOST_CHANGES_H

#include <stdio.h>

#include "include/moonbox.h"

/* One line per change on out: "moonbox: modified /scratch/a.txt (12 bytes)". */
mbx_status mbxH_changes_summary(mbx_sandbox *sb, FILE *out, mbx_error *err);
/* The changed files under dir (made if missing; refused if it already holds an export), at
   dir + their virtual path, and dir/.moonbox-changes.json: the change set without contents
   (the removals and the renames' "from" to apply). Nothing outside dir is written, no link
   in it followed. */
mbx_status mbxH_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err);
/* The unified diff of every changed file against its host original (created files against
   /dev/null, removed ones to /dev/null, renames from their "from"), as `diff -u --label`
   prints it (host/diff.h: the bounds). */
mbx_status mbxH_changes_diff(mbx_sandbox *sb, FILE *out, mbx_error *err);

#endif
