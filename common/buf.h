/* common/buf.h -- a growable byte buffer on the heap (result JSON, the CLI's views and diffs). */
#ifndef MBX_COMMON_BUF_H
#define MBX_COMMON_BUF_H

#include <stddef.h>

typedef struct mbxU_buf {
  char *data; /* NUL-terminated once anything was written */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed: the contents are incomplete */
} mbxU_buf;

void mbxU_buf_put(mbxU_buf *b, const char *p, size_t n);
void mbxU_buf_puts(mbxU_buf *b, const char *s);
/* An mbxV_sink_fn over an mbxU_buf. */
void mbxU_buf_sink(void *buf, const char *p, size_t n);
/* Hand the bytes over (caller frees); NULL if anything failed. The buffer is emptied. */
char *mbxU_buf_take(mbxU_buf *b, size_t *len);
void mbxU_buf_free(mbxU_buf *b);

#endif
