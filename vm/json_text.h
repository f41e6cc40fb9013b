/* vm/json_text.h -- JSON text without Lua: UTF-8 checks, string escaping, base64, numbers. */
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

/* Standard base64 (RFC 4648, with padding). encode writes 4*ceil(n/3) bytes to out.
   decode returns the number of bytes written to out (which needs 3*(n/4) bytes), or
   (size_t)-1 for malformed input. */
size_t mbxV_base64_encoded_len(size_t n);
void mbxV_base64_encode(const unsigned char *in, size_t n, char *out);
size_t mbxV_base64_decode(const char *in, size_t n, unsigned char *out);

#endif
