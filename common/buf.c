/* common/buf.c -- a growable byte buffer on the heap (result JSON, the CLI's views and diffs). */
#include "common/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void mbxU_buf_put(mbxU_buf *b, const char *p, size_t n) {
  if (b->failed) return;
  if (n >= SIZE_MAX - b->len) { /* len + n + 1 would wrap */
    b->failed = 1;
    return;
  }
  if (n + 1 > b->cap - b->len || b->data == NULL) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n + 1) {
      if (cap > ((size_t)-1) / 2) {
        b->failed = 1;
        return;
      }
      cap *= 2;
    }
    char *data = realloc(b->data, cap);
    if (data == NULL) {
      b->failed = 1;
      return;
    }
    b->data = data;
    b->cap = cap;
  }
  if (n) memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void mbxU_buf_puts(mbxU_buf *b, const char *s) {
  mbxU_buf_put(b, s, strlen(s));
}

void mbxU_buf_sink(void *buf, const char *p, size_t n) {
  mbxU_buf_put(buf, p, n);
}

char *mbxU_buf_take(mbxU_buf *b, size_t *len) {
  mbxU_buf_put(b, "", 0); /* make sure an empty buffer still yields "" */
  char *data = b->failed ? NULL : b->data;
  if (len) *len = data ? b->len : 0;
  if (data == NULL) free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
  return data;
}

void mbxU_buf_free(mbxU_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
