/* vm/json_text.h -- JSON text without Lua: UTF-8 checks, string escaping, numbers
   (the base64 of {"$bytes"} is common/base64.h). */
#ifndef MBX_VM_JSON_TEXT_H
#define MBX_VM_JSON_TEXT_H

#include <stddef.h>
#include <stdint.h>

/* Where JSON text goes: a luaL_Buffer inside the VM, a growable host buffer outside it. */
typedef void (*mbxV_sink_fn)(void *sink, const char *p, size_t n);

/* 1 if s[0..n) is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF), else 0. */
int mbxV_utf8_valid(const char *s, size_t n);

/* Write s[0..n) as a JSON string ("..." with the escapes JSON requires; "/" is not escaped,
   U+2028/U+2029 are escaped as \u2028/\u2029), or, when s is not valid UTF-8, as
   {"$bytes":"<base64 of the raw bytes>"}. */
void mbxV_json_put_string(mbxV_sink_fn put, void *sink, const char *s, size_t n);

/* Write an integer exactly, and a finite double in the shortest form that reads back to the
   same double ("%.17g" shortened; always with a '.' or exponent so it reads back as a float,
   e.g. 1.0 -> "1.0"). Returns 0 for NaN/inf (nothing written), 1 otherwise. */
void mbxV_json_put_integer(mbxV_sink_fn put, void *sink, int64_t v);
int mbxV_json_put_number(mbxV_sink_fn put, void *sink, double v);

#endif
