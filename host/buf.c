/* host/buf.c -- a growable byte buffer on the host heap (result JSON, CLI input). */
#include "host/buf.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

void mbxH_buf_put(mbxH_buf *b, const char *p, size_t n) {
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

void mbxH_buf_puts(mbxH_buf *b, const char *s) {
  mbxH_buf_put(b, s, strlen(s));
}

void mbxH_buf_sink(void *buf, const char *p, size_t n) {
  mbxH_buf_put(buf, p, n);
}

char *mbxH_buf_take(mbxH_buf *b, size_t *len) {
  mbxH_buf_put(b, "", 0); /* make sure an empty buffer still yields "" */
  char *data = b->failed ? NULL : b->data;
  if (len) *len = data ? b->len : 0;
  if (data == NULL) free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
  return data;
}

void mbxH_buf_free(mbxH_buf *b) {
  free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
  b->failed = 0;
}
