/* host/cli/diff.h -- unified diffs of two byte strings, as `diff -u --label A --label B` prints
   them, bounded in time and memory for hostile inputs. */
#ifndef MBX_HOST_CLI_DIFF_H
#define MBX_HOST_CLI_DIFF_H

#include <stddef.h>
#include <stdint.h>

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

/* What mbxH_diff_stream may spend: max_out bytes of diff text (a longer diff is not written
   at all), max_memory bytes of host memory for its line tables and edit script (25 bytes a
   line, of either side), besides the bounded search above. */
typedef struct mbxH_diff_limits {
  uint64_t max_out;
  uint64_t max_memory;
} mbxH_diff_limits;
typedef void (*mbxH_diff_sink)(void *to, const char *p, size_t n);
enum {
  MBXH_DIFF_NO_MEMORY = -1,
  MBXH_DIFF_SHOWN = 0,          /* written (nothing when a and b are equal) */
  MBXH_DIFF_FALLBACK = 1,       /* written, with the search's bound hit (one changed middle) */
  MBXH_DIFF_TOO_LARGE = 2,      /* nothing written: *size bytes, past max_out */
  MBXH_DIFF_TOO_MANY_LINES = 3, /* nothing written: past max_memory or MBXH_DIFF_MAX_LINES */
};

/* Write to sink, in pieces as they are made (the diff is never built whole), the unified
   diff (3 lines of context) turning a into b, with the headers "--- label_a" and "+++
   label_b"; nothing when they are equal; "Binary files label_a and label_b differ" when
   either holds a NUL byte. The text is measured before a byte of it is written, so it is
   written whole or not at all. *size: the bytes written, or those it would take
   (MBXH_DIFF_TOO_LARGE). Returns one of the MBXH_DIFF_* above. */
int mbxH_diff_stream(const char *label_a, const char *a, size_t alen, const char *label_b,
                     const char *b, size_t blen, const mbxH_diff_limits *lim, mbxH_diff_sink sink,
                     void *to, uint64_t *size);

/* The same, unbounded in output, appended to out ("Files label_a and label_b differ (more
   lines than --diff compares)" past MBXH_DIFF_MAX_LINES). Returns 1 when a bound was hit
   (that line, or the search's fallback was printed), 0 otherwise; out->failed says whether
   host memory ran out. */
int mbxH_diff_unified(const char *label_a, const char *a, size_t alen, const char *label_b,
                      const char *b, size_t blen, mbxU_buf *out);

#endif
