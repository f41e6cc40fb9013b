/* stdlib/metatable.h -- the metatable policy: setmetatable and getmetatable as the guest sees
   them, and what the rest of the library reads of a value's metatable (stdlib/metatable.c). */
#ifndef MBX_STDLIB_METATABLE_H
#define MBX_STDLIB_METATABLE_H

#include <lua.h>

/* Push what the guest's getmetatable(v) returns for the value v at idx: nil, the guest's own
   metatable, or its __metatable field. Never a table moonbox made: the clone the VM uses for a
   guest metatable (stdlib/metatable.c), a pin, the string or FILE* metatable, the JSON array
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
   a clone of the guest's (stdlib/metatable.c), the guest's live field, else the metatable's own.
   Pushes the field and returns its type, or pushes nothing and returns LUA_TNIL. Raw reads
   only. What the library reads outside the VM's events (__tostring, __name, __pairs) goes
   through this, so a field set after setmetatable is seen as in stock Lua. */
int mbxL_getmetafield(lua_State *L, int idx, const char *field);
/* luaL_callmeta over mbxL_getmetafield: calls the guest's live event of the value at idx with
   that value, leaving one result; 0 (nothing pushed) when there is none. */
int mbxL_callmeta(lua_State *L, int idx, const char *event);

/* 1 when f is one of the C functions the policy puts between the VM and a guest metamethod (a
   walker or a live stub) or a store (a watch's __newindex, which raises stock's "table index is
   nil"): a frame that stock Lua does not have. */
int mbxL_is_metamethod_stub(lua_CFunction f);

/* Set setmetatable and getmetatable in the table on top of the stack (the globals), with the
   registry state they share (the clone cache, the shared pin). */
void mbxL_open_metatables(lua_State *L);

#endif
