/* common/base64.h -- standard base64 (RFC 4648, with padding), shared by the library (the
   {"$bytes"} form of JSON) and the programs (the MCP server's inline files). */
#ifndef MBX_COMMON_BASE64_H
#define MBX_COMMON_BASE64_H

#include <stddef.h>

/* encode writes 4*ceil(n/3) bytes to out (no NUL). decode returns the number of bytes written
   to out (which needs 3*(n/4) bytes), or (size_t)-1 for malformed input: a length that is not
   a multiple of 4, a byte outside the alphabet, padding anywhere but at the end, or non-zero
   bits under the padding (so each byte string has exactly one encoding). */
size_t mbxU_base64_encoded_len(size_t n);
void mbxU_base64_encode(const unsigned char *in, size_t n, char *out);
size_t mbxU_base64_decode(const char *in, size_t n, unsigned char *out);

#endif
