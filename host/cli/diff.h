/* host/cli/diff.h -- unified diffs of two byte strings, as `diff -u --label A --label B` prints
   them, bounded in time and memory for hostile inputs. */
#ifndef MBX_HOST_CLI_DIFF_H
#define MBX_HOST_CLI_DIFF_H

#include <stddef.h>

#include "common/buf.h"

/* The edit search is Myers' O((N+M)D) greedy algorithm on lines (after the common prefix
   and suffix are set aside), bounded: at most MBXH_DIFF_MAX_EDITS edits (its trace then
   holds at most (D+1)^2 4-byte entries: 4 MiB) and MBXH_DIFF_MAX_STEPS line comparisons.
   Past either bound the differing middle is printed as one hunk (every old line removed,
   every new line added): still a correct diff, just not a minimal one. */
#define MBXH_DIFF_MAX_EDITS 1024
#define MBXH_DIFF_MAX_STEPS 50000000ull
/* Files with more lines than this on either side are named, not diffed ("Files A and B differ
   (more lines than --diff compares)"): the line tables live on the host heap. */
#define MBXH_DIFF_MAX_LINES (1u << 20)

/* Append to out the unified diff (3 lines of context) turning a into b, with the headers
   "--- label_a" and "+++ label_b"; nothing when they are equal; "Binary files label_a and
   label_b differ" when either holds a NUL byte. Returns 1 when the bound was hit (the
   fallback was printed), 0 otherwise; out->failed says whether host memory ran out. */
int mbxH_diff_unified(const char *label_a, const char *a, size_t alen, const char *label_b,
                      const char *b, size_t blen, mbxU_buf *out);

#endif
