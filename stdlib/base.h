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
/* What stock debug.getmetatable(v) returns: the guest's own metatable of v even when it has a
   __metatable field (middleclass's specs read a protected class's instance dictionary this
   way), nil for none. A metatable moonbox made that stands for no guest table (the string or
   FILE* metatable, the JSON array marker) is reported as mbxL_getmetatable does, so none is
   handed out. Raw reads only. */
void mbxL_debug_getmetatable(lua_State *L, int idx);

/* Passed as a third argument to the base setmetatable (debug.setmetatable does), it lets a
   metatable the guest protected with __metatable be replaced, as stock debug.setmetatable
   does. Its address is the marker: no guest can make that light userdata. */
extern const char mbxL_setmetatable_unprotect;

/* luaL_getmetafield as the guest's metatable holds it now: for an object whose metatable is
   a clone of the guest's (stdlib/base.c), the guest's live field, else the metatable's own.
   Pushes the field and returns its type, or pushes nothing and returns LUA_TNIL. Raw reads
   only. What the library reads outside the VM's events (__tostring, __name, __pairs) goes
   through this, so a field set after setmetatable is seen as in stock Lua. */
int mbxL_getmetafield(lua_State *L, int idx, const char *field);
/* luaL_callmeta over mbxL_getmetafield: calls the guest's live event of the value at idx with
   that value, leaving one result; 0 (nothing pushed) when there is none. */
int mbxL_callmeta(lua_State *L, int idx, const char *event);

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
