/* vm/output.h -- captured stdout/stderr of a run, bounded by the output limit. */
#ifndef MBX_VM_OUTPUT_H
#define MBX_VM_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

enum { MBXV_STDOUT = 0, MBXV_STDERR = 1 };

/* Host memory (not the guest heap): its size is bounded by `limit`, which the host set. */
typedef struct mbxV_output {
  char *data[2];
  size_t len[2];
  size_t cap[2];
  size_t limit;   /* bytes of stdout + stderr per run */
  uint64_t total; /* bytes the guest tried to write this run, including dropped ones */
} mbxV_output;

void mbxV_output_init(mbxV_output *o, size_t limit);
/* Empty both streams for a new run (keeps the buffers). */
void mbxV_output_reset(mbxV_output *o);
void mbxV_output_free(mbxV_output *o);
typedef enum mbxV_append_result {
  MBXV_APPEND_OK = 0,
  MBXV_APPEND_OVER_LIMIT, /* the bytes that fit were kept, the rest dropped */
  MBXV_APPEND_NO_MEMORY   /* host memory: nothing was kept */
} mbxV_append_result;
/* Append guest output to a stream, keeping what fits in the limit. Guest code writes through
   the meter (mbxV_output_write in vm/budget.h), which turns a refusal into a trip. */
mbxV_append_result mbxV_output_append(mbxV_output *o, int stream, const char *p, size_t n);

#endif
