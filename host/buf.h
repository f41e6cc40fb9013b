/* host/buf.h -- a growable byte buffer on the host heap (result JSON, CLI input). */
#ifndef MBX_HOST_BUF_H
#define MBX_HOST_BUF_H

#include <stddef.h>

typedef struct mbxH_buf {
  char *data; /* NUL-terminated once anything was written */
  size_t len;
  size_t cap;
  int failed; /* an allocation failed: the contents are incomplete */
} mbxH_buf;

void mbxH_buf_put(mbxH_buf *b, const char *p, size_t n);
void mbxH_buf_puts(mbxH_buf *b, const char *s);
/* An mbxV_sink_fn over an mbxH_buf. */
void mbxH_buf_sink(void *buf, const char *p, size_t n);
/* Hand the bytes over (caller frees); NULL if anything failed. The buffer is emptied. */
char *mbxH_buf_take(mbxH_buf *b, size_t *len);
void mbxH_buf_free(mbxH_buf *b);

#endif
