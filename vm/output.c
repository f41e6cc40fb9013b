/* vm/output.c -- captured stdout/stderr of a run, bounded by the output limit. */
#include "vm/output.h"

#include <stdlib.h>
#include <string.h>

void mbxV_output_init(mbxV_output *o, size_t limit) {
  memset(o, 0, sizeof *o);
  o->limit = limit;
}

void mbxV_output_reset(mbxV_output *o) {
  o->len[0] = o->len[1] = 0;
  o->total = 0;
}

void mbxV_output_free(mbxV_output *o) {
  free(o->data[0]);
  free(o->data[1]);
  o->data[0] = o->data[1] = NULL;
  o->cap[0] = o->cap[1] = 0;
  mbxV_output_reset(o);
}

/* Grow a stream to hold `need` bytes; the streams together never exceed the limit. */
static int reserve(mbxV_output *o, int stream, size_t need) {
  if (need <= o->cap[stream]) return 1;
  size_t cap = o->cap[stream] ? o->cap[stream] : 256;
  while (cap < need)
    cap *= 2;
  char *p = realloc(o->data[stream], cap);
  if (p == NULL) return 0;
  o->data[stream] = p;
  o->cap[stream] = cap;
  return 1;
}

mbxV_append_result mbxV_output_append(mbxV_output *o, int stream, const char *p, size_t n) {
  o->total += n;
  size_t used = o->len[0] + o->len[1];
  size_t room = o->limit > used ? o->limit - used : 0;
  size_t keep = n < room ? n : room;
  if (keep > 0) {
    if (!reserve(o, stream, o->len[stream] + keep)) return MBXV_APPEND_NO_MEMORY;
    memcpy(o->data[stream] + o->len[stream], p, keep);
    o->len[stream] += keep;
  }
  return keep < n ? MBXV_APPEND_OVER_LIMIT : MBXV_APPEND_OK;
}
