/* host/cli/changes_view.h -- the change set shown by the CLI: a summary (--changes), an export
   (--export-changes) and a unified diff (--diff), built on mbx_sandbox_changes_each. */
#ifndef MBX_HOST_CLI_CHANGES_VIEW_H
#define MBX_HOST_CLI_CHANGES_VIEW_H

#include <stdio.h>

#include "moonbox.h"

/* One line per change on out: "moonbox: modified /scratch/a.txt (12 bytes)". */
mbx_status mbxH_cli_changes_summary(mbx_sandbox *sb, FILE *out, mbx_error *err);
/* The changed files under dir (made if missing; refused if it already holds an export), at
   dir + their virtual path, and dir/.moonbox-changes.json: the change set without contents
   (the removals and the renames' "from" to apply). Nothing outside dir is written, no link
   in it followed. */
mbx_status mbxH_cli_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err);
/* The unified diff of every changed file against its host original (created files against
   /dev/null, removed ones to /dev/null, renames from their "from"), as `diff -u --label`
   prints it (host/cli/diff.h: the bounds). */
mbx_status mbxH_cli_changes_diff(mbx_sandbox *sb, FILE *out, mbx_error *err);

#endif
