/* vm/load.h -- text-only loading with the parser under the budget. */
#ifndef MBX_VM_LOAD_H
#define MBX_VM_LOAD_H

#include <stddef.h>

#include <lua.h>

/* Bytes handed to the parser at a time; the budget is polled between pieces. */
#define MBXV_LOAD_PIECE 4096
/* Past this many bytes parsed, pieces shrink (vm/load.c, piece_size). */
#define MBXV_LOAD_PIECE_FULL 16384

/*
** Compile text as a chunk (mode "t": binary chunks are refused) and push the function, or
** push an error message. Lua's parser is C without hooks and is quadratic on long and/or
** chains, so the text is fed to it in pieces and the budget (deadline, interrupt,
** instructions, 1 per 16 bytes) is polled between them: a trip stops the parse within one
** piece's work. On a trip the (possibly truncated) function is discarded and LUA_ERRRUN is
** returned with the trip recorded. Otherwise returns lua_load's status.
*/
int mbxV_load_text(lua_State *L, const char *text, size_t len, const char *chunk_name);

#endif
