/* stdlib/base.h -- what other stdlib files share of the base library. */
#ifndef MBX_STDLIB_BASE_H
#define MBX_STDLIB_BASE_H

#include <lua.h>

/* Push what the guest's getmetatable(v) returns for the value v at idx: nil, the guest's own
   metatable, or its __metatable field. Never a table moonbox made: the clone the VM uses for a
   guest metatable (stdlib/base.c), a pin, the string or FILE* metatable, the JSON array
   marker (each carries __metatable, or stands for "no metatable"). Raw reads only: no guest
   code runs. Anything that hands a metatable to the guest (e.g. debug.getmetatable) uses this,
   so the two always agree. */
void mbxL_getmetatable(lua_State *L, int idx);

#endif
