/* common/bytes.c -- the byte-copy helper every layer shares. */
#include "common/bytes.h"

#include <stdlib.h>
#include <string.h>

char *mbxU_dup_bytes(const char *s, size_t n) {
  char *copy = malloc(n + 1);
  if (copy == NULL) return NULL;
  if (n) memcpy(copy, s, n);
  copy[n] = '\0';
  return copy;
}
