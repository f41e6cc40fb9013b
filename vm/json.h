/* vm/json.h -- the Lua <-> JSON codec: inputs into the guest, results out of it. Every byte it
   allocates comes from the guest heap (charged to the sandbox), and its loops are metered. */
#ifndef MBX_VM_JSON_H
#define MBX_VM_JSON_H

#include <stddef.h>

#include <lua.h>

/* Nesting limit of both directions. */
#define MBXV_JSON_MAX_DEPTH 128

/* The value JSON null decodes to, and encodes from: a light userdata NULL (what cjson uses).
   Guests will see it as json.null. */
void mbxV_json_push_null(lua_State *L);
int mbxV_json_is_null(lua_State *L, int idx);

/* 1 if the table at idx is the shared metatable of decoded empty arrays (never handed to
   guests: getmetatable shows a decoy, and setmetatable may replace it). */
int mbxV_json_is_array_marker(lua_State *L, int idx);
/* Give the table at idx the array marker as its metatable (json.array): an empty table then
   encodes as []. Sets it raw, past the setmetatable policy, which is safe only because the
   marker is never handed to guests. The caller checks the table has no metatable of its own. */
void mbxV_json_set_array_marker(lua_State *L, int idx);

/*
** Encode the value at idx as JSON text and push it as a Lua string.
** - nil and json.null -> null; booleans; integers exact (int64); floats finite only;
** - strings: valid UTF-8 as JSON strings, anything else as {"$bytes":"<base64>"};
** - tables, read raw (no __index/__pairs/__len, never a metamethod): a table whose keys are
**   exactly 1..n is an array; the empty table is {} unless it has the array marker (a
**   metatable whose raw field "__jsontype" is "array", set by the stdlib's json.array); any
**   other table is an object whose keys must be strings or integers (integers are written as
**   decimal strings); keys are emitted sorted bytewise.
** - functions, userdata other than json.null, threads, NaN, inf, cycles, non-string/integer
**   keys and nesting deeper than MBXV_JSON_MAX_DEPTH raise a Lua error naming the path, e.g.
**   "value[3].name: cannot encode a function as JSON" (root_path is the name of the root,
**   e.g. "value"; array elements are 1-based as in Lua; keys that are not identifiers are
**   written as ["key"]).
** The work is charged to the run's budget (mbxV_charge) as it goes, so a huge table cannot
** run unmetered. Must run inside a protected call: raises on error or on a trip.
*/
void mbxV_json_encode(lua_State *L, int idx, const char *root_path);
/* The same, for a run's result, which never fails because of what it holds (docs/result.md):
** values JSON cannot hold take a reserved one-member form instead of raising --
**   {"$function": "main.lua:3"} (a Lua function's chunk and first line; "builtin" for C),
**   {"$thread": "suspended"} (coroutine.status), {"$userdata": "FILE*"} (__name, read raw),
**   {"$number": "nan" | "inf" | "-inf"}, and {"$cycle": "value.sub"} for a table that is one
**   of its own enclosing tables (the path of that table).
** A guest table whose only key is one of those names raises (the forms are reserved, as
** {"$bytes"} is). Keys JSON cannot hold and nesting deeper than MBXV_JSON_MAX_DEPTH still
** raise. Text longer than max_len bytes trips the output limit (MBXV_TRIP_OUTPUT, sticky) and
** raises before the buffer grows past it. */
void mbxV_json_encode_result(lua_State *L, int idx, const char *root_path, size_t max_len);
/* The arguments first .. first+n-1 of a call to fn_name as one JSON array, pushed, in one
   pass and one buffer (what a host call sends). Errors name the argument
   ("tools.search(#2).filter: ..."); a text past max_len raises "fn_name: the arguments exceed
   max_len bytes of JSON, the most a host call takes" before it grows any further. */
void mbxV_json_encode_args(lua_State *L, int first, int n, const char *fn_name, size_t max_len);
/* The same text, NUL-terminated, without making it a Lua string (a host call only reads it):
   written into buf (cap bytes, the caller's) while it fits, else into a userdata in the one
   slot this pushes (nil when unused). The text stays valid while buf and that slot do. */
const char *mbxV_json_encode_args_text(lua_State *L, int first, int n, const char *fn_name,
                                       size_t max_len, char *buf, size_t cap, size_t *len);

/*
** Decode JSON text (RFC 8259; a leading UTF-8 BOM is refused; duplicate keys: last wins)
** and push the value. Objects and arrays become tables (an empty JSON array gets the array
** marker so it encodes back as []), null becomes json.null, integers without fraction or
** exponent that fit int64 become Lua integers (others become floats), strings are byte
** strings; an object that is exactly {"$bytes": "<base64>"} becomes the decoded byte
** string. On malformed text raises a Lua error "<what> at line L, column C" (e.g. "expected
** ',' or '}' after an object member at line 1, column 17"). Charged to the budget as it
** goes; must run inside a protected call.
*/
void mbxV_json_decode(lua_State *L, const char *text, size_t len);
/* The same, for a run's inputs: a one-member object whose key is one of the result's
   reserved forms ("$function", "$thread", "$userdata", "$number", "$cycle") raises, so a
   result handed back as an input is refused rather than read as a plain table. */
void mbxV_json_decode_input(lua_State *L, const char *text, size_t len);

#endif
