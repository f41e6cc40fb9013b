/* vm/compat.h -- the one shim over differences between Lua 5.4 releases. */
#ifndef MBX_VM_COMPAT_H
#define MBX_VM_COMPAT_H

#include <lua.h>

/* 5.4.6 replaced lua_resetthread(L) with lua_closethread(L, from). */
#if LUA_VERSION_RELEASE_NUM >= 50406
#define mbxV_closethread(co, from) lua_closethread((co), (from))
#else
#define mbxV_closethread(co, from) ((void)(from), lua_resetthread(co))
#endif

#endif
