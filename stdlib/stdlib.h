/* stdlib/stdlib.h -- what guest code sees: the curated, metered standard library. */
#ifndef MBX_STDLIB_STDLIB_H
#define MBX_STDLIB_STDLIB_H

#include <lua.h>

/* Depth of nested coroutine.close / wrap error paths we allow: 5.4.4 resets the C-call count
   in lua_resetthread, so a chain of __close handlers closing coroutines overflows the C stack
   (upstream 1e64c139; THREATS 0.1). */
#define MBXL_MAX_CLOSE_NESTING 100
/* Bytes of source one guest `load` call may compile (the parser is unmetered C). */
#define MBXL_LOAD_MAX 16384

/* Open everything a sandbox sees into L's globals, install the wrappers, and record the
   built-in names. A lua_CFunction: run it with lua_pcall on a fresh state. */
int mbxL_open_sandbox(lua_State *L);

/* The openers, one per library (each a lua_CFunction that leaves nothing on the stack). */
int mbxL_open_base(lua_State *L);
int mbxL_open_string(lua_State *L);
int mbxL_open_table(lua_State *L);
int mbxL_open_math(lua_State *L);
int mbxL_open_utf8(lua_State *L);
int mbxL_open_coroutine(lua_State *L);
int mbxL_open_io(lua_State *L);

/* Push the guest-visible text of the value at idx, like luaL_tolstring but with a keyed hash
   in place of any address (no heap addresses reach the guest: THREATS E10). Runs __tostring
   (guest code, under the budget) and honours __name. */
const char *mbxL_tolstring(lua_State *L, int idx, size_t *len);

/* Install string.find/match/gmatch/gsub (stdlib/pattern.c) and string.rep/pack/unpack
   (stdlib/strbuild.c) into the string library table at lib. */
void mbxL_install_patterns(lua_State *L, int lib);
void mbxL_install_builders(lua_State *L, int lib);

/* Replace the named fields of the table at idx with functions that raise "<lib>.<name> is not
   available in this sandbox yet ..." (functions whose stock versions run unbounded C loops
   until metered versions replace them). names ends with NULL. */
void mbxL_mark_unavailable(lua_State *L, int idx, const char *lib, const char *const *names);

#endif
