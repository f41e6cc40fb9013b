/* host/check.h -- what host/check.c offers the rest of host/ besides mbx_check. */
#ifndef MBX_HOST_CHECK_H
#define MBX_HOST_CHECK_H

#include <stddef.h>

#include "include/moonbox.h"

/* The lua_dump of code compiled exactly as mbx_check compiles it (text only, in a throwaway
   state under p's limits; nothing runs), for readers of vm/chunk.h such as the fuzz engine's
   dictionary. *dump is malloc'd (free it). MBX_SYNTAX_ERROR with the message in err, a
   limit's status, MBX_SOURCE_TOO_LARGE, MBX_STACK_TOO_SMALL or MBX_NO_MEMORY otherwise. */
mbx_status mbxH_check_dump(const mbx_policy *p, const char *code, size_t len, char **dump,
                           size_t *dump_len, mbx_error *err);

#endif
