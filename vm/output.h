/* vm/output.h -- captured stdout/stderr of a run, bounded by the output limit. */
#ifndef MBX_VM_OUTPUT_H
#define MBX_VM_OUTPUT_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

enum { MBXV_STDOUT = 0, MBXV_STDERR = 1 };

/* Host memory (not the guest heap): its size is bounded by `limit`, which the host set. */
typedef struct mbxV_output {
  char *data[2];
  size_t len[2];
  size_t cap[2];
  size_t limit;    /* bytes of stdout + stderr per run */
  uint64_t total;  /* bytes the guest tried to write this run, including dropped ones */
} mbxV_output;

void mbxV_output_init(mbxV_output *o, size_t limit);
/* Empty both streams for a new run (keeps the buffers). */
void mbxV_output_reset(mbxV_output *o);
void mbxV_output_free(mbxV_output *o);
/* Append guest output. Past the limit the bytes that fit are kept, the run trips with
   MBXV_TRIP_OUTPUT and this raises; call it only from a C function Lua called. */
void mbxV_output_write(lua_State *L, int stream, const char *p, size_t n);

#endif
