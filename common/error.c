/* common/error.c -- filling the public error record without allocating. */
#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>

void mbxU_error_set(mbx_error *err, mbx_status code, const char *fmt, ...) {
  if (err == NULL) return;
  err->code = (int)code;
  err->line = 0;
  err->chunk[0] = '\0';
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->message, sizeof err->message, fmt, ap);
  va_end(ap);
}
