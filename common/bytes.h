/* common/bytes.h -- the byte-copy helper every layer shares. */
#ifndef MBX_COMMON_BYTES_H
#define MBX_COMMON_BYTES_H

/*
** common/ holds the leaf units every layer may use and that depend on nothing of moonbox but
** the public header: the status names (status.c, the public mbx_status_* functions) and this
** helper. Nothing here knows Lua, the policy or the host.
*/

#include <stddef.h>

/* A malloc'd copy of n bytes of s with a NUL after them (s may hold NULs; NULL s with n == 0
   gives ""). NULL when out of memory. Release with free. */
char *mbxU_dup_bytes(const char *s, size_t n);

#endif
