/* stdlib/base.h -- what other stdlib files share of the base library: guest levels and
   xpcall frames (the metatable policy is stdlib/metatable.h). */
#ifndef MBX_STDLIB_BASE_H
#define MBX_STDLIB_BASE_H

#include <lua.h>

/* The stack level of L1 (L itself or another thread) that the guest calls level: moonbox's
   own C frames where stock Lua has none (a walker, a live stub, xpcall's guard around the
   handler) are skipped. Levels <= 0 are returned as they are; one past the stack's end stays
   past it. Charged to L's budget. What error and debug's level arguments go through. */
int mbxL_guest_level(lua_State *L, lua_State *L1, int level);

/* 1 when the frame at level of L1 is a walker or a live stub: a C frame of moonbox's that
   calls a guest metamethod for the VM, so the name stock gives that metamethod ("add",
   "metamethod") is this frame's own. O(level), pushes nothing. */
int mbxL_metamethod_frame(lua_State *L1, int level);

/* 1 when the thread at idx on L's stack has an xpcall frame that has not finished (or when
   that cannot be told for lack of stack room on L), else 0. Raw reads on L only: nothing raises, no guest code
   runs. What coroutine.close checks before it closes a suspended thread (Lua 5.4.4 bug
   3fe7be95, stdlib/base.c). */
int mbxL_xpcall_active(lua_State *L, int idx);

#endif
