/* vm/errors.h -- turning a failed chunk into a message, a position and a traceback, safely. */
#ifndef MBX_VM_ERRORS_H
#define MBX_VM_ERRORS_H

#include <stddef.h>

#include <lua.h>

#include "vm/status.h"

/* Error text is copied and truncated to this many bytes (THREATS P0 item 9). */
#define MBXV_ERROR_MAX 4096
/* Frames shown at the top and at the bottom of a long traceback. */
#define MBXV_TRACE_TOP 10
#define MBXV_TRACE_BOTTOM 11

typedef struct mbxV_error_info {
  char *message; /* malloc'd, without the "chunk:line:" prefix */
  size_t message_len;
  char *traceback; /* malloc'd, "" when none */
  size_t traceback_len;
  char chunk[64]; /* "" when unknown */
  int line;       /* 0 when unknown */
} mbxV_error_info;

/* The length of the longest prefix of s (len bytes) that is at most max bytes and does not
   end inside a UTF-8 sequence: len when len <= max. */
size_t mbxV_utf8_cut(const char *s, size_t len, size_t max);

/* Split "chunk:line: text" into its parts; returns 1 and fills chunk/line/offset of the text
   when msg starts with a position, 0 otherwise. */
int mbxV_error_split(const char *msg, size_t len, char *chunk, size_t chunk_size, int *line,
                     size_t *text_offset);

/*
** Describe the error object on top of thread co (a failed or yielded run thread), and build
** co's traceback. Reads the error object raw: a string or number is copied (truncated); any
** other value is reported by its type only, because calling its __tostring here would run
** guest code outside the budget (THREATS section 4). Call with (L = main thread) inside
** lua_pcall: it allocates from the guest heap. The traceback never iterates guest tables.
** override, when not NULL, replaces the message (e.g. the text of a tripped limit).
** Returns 0 on success, -1 when host memory ran out.
*/
int mbxV_error_describe(lua_State *L, lua_State *co, const char *override, mbxV_error_info *out);

/* Fill info from a plain message. With split, a leading "chunk:line:" position is moved into
   chunk/line (parser messages); without, the text is kept whole (messages built from guest
   data, such as JSON paths, whose keys could otherwise fake a position). */
int mbxV_error_from_message(const char *msg, size_t len, int split, mbxV_error_info *out);

void mbxV_error_info_free(mbxV_error_info *info);

/* The traceback of co from level first on ("stack traceback:" and one line per frame, the
   middle of a long stack skipped as in error tracebacks), written piece by piece to put.
   No addresses and no name searches through guest tables; getinfo's "n" for each frame
   shown. For debug.traceback: put may raise (a luaL_Buffer), and nothing here needs
   freeing. */
void mbxV_traceback_write(lua_State *co, int first, void (*put)(void *ud, const char *s, size_t n),
                          void *ud);

#endif
