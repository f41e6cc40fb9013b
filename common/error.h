/* common/error.h -- filling the public error record (include/moonbox.h's mbx_error). */
#ifndef MBX_COMMON_ERROR_H
#define MBX_COMMON_ERROR_H

#include "include/moonbox.h"

/* Fill err (may be NULL): code, no position, a printf-style message (truncated to fit). */
void mbxU_error_set(mbx_error *err, mbx_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
