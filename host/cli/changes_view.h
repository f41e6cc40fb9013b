/* host/cli/changes_view.h -- the change set shown by the CLI: a summary (--changes), an export
   (--export-changes) and a unified diff (--diff), built on mbx_sandbox_changes_each. */
#ifndef MBX_HOST_CLI_CHANGES_VIEW_H
#define MBX_HOST_CLI_CHANGES_VIEW_H

#include <stdint.h>
#include <stdio.h>

#include "host/options/args.h"
#include "moonbox.h"

/* One line per change on out: "moonbox: modified /scratch/a.txt (12 bytes)". framed: first
   a line with a random nonce that ends what the script printed on the same stream (the
   caller has ended that output with a newline). */
mbx_status mbxH_cli_changes_summary(mbx_sandbox *sb, FILE *out, int framed, mbx_error *err);
/* The changed files under dir (made if missing; refused if it already holds an export), at
   dir + their virtual path, and dir/.moonbox-changes.json: the change set without contents
   (the removals and the renames' "from" to apply). Nothing outside dir is written, no link
   in it followed. */
mbx_status mbxH_cli_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err);
/* What --diff may spend (the caller derives them from the run's limits). */
typedef struct mbxH_cli_diff_limits {
  uint64_t max_out;      /* bytes of diff text (--diff-limit) */
  uint64_t max_original; /* bytes of one original read */
  uint64_t max_read;     /* bytes of originals read in all */
  uint64_t max_memory;   /* host bytes of one file's line tables */
  uint64_t deadline_ns;  /* CLOCK_MONOTONIC; 0: none */
} mbxH_cli_diff_limits;
typedef struct mbxH_cli_diff_report {
  uint64_t printed; /* bytes written */
  uint64_t read;    /* bytes of originals read */
  size_t not_shown; /* files named ("Files A and B differ (why)") instead of shown */
  size_t not_named; /* of those, past the cap even for that line: not even named */
  size_t timed_out; /* of those, because the deadline passed */
} mbxH_cli_diff_report;
/* The unified diff of every changed file against its host original (created files against
   /dev/null, removed ones to /dev/null, renames from their "from"), as `diff -u --label`
   prints it, written to out as it is made. Each file's diff is written whole or not at all:
   past a bound of lim (or host/cli/diff.h's) the file is named instead, with the reason. */
mbx_status mbxH_cli_changes_diff(mbx_sandbox *sb, FILE *out, const mbxH_cli_diff_limits *lim,
                                 mbxH_cli_diff_report *rep, mbx_error *err);

/* Opens path (NULL: nothing, *f NULL) for --diff=FILE or --changes=FILE: a regular file,
   made or emptied, no link followed. 0, or -1 with the message printed. */
int mbxH_cli_open_report(const char *option, const char *path, FILE **f);
/* After a run: releases the guest's heap (in-process, keeping its files), then --changes
   (changes_out, or stderr below a framing line: err_open says the script's last byte there
   was not a newline), --diff (diff_out, or stdout), --export-changes, as opt asks. */
mbx_status mbxH_cli_show_changes(const mbxH_cli_options *opt, const mbx_policy *p, mbx_sandbox *sb,
                                 int err_open, FILE *diff_out, FILE *changes_out, mbx_error *err);

#endif
