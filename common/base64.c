/* common/base64.c -- standard base64 (RFC 4648, with padding): the {"$bytes"} form of JSON
   that the library writes and reads, and the MCP server's inline files. */
#include "common/base64.h"

#include <stdint.h>

static const char base64_alphabet[] =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t mbxU_base64_encoded_len(size_t n) {
  return (n + 2) / 3 * 4;
}

void mbxU_base64_encode(const unsigned char *in, size_t n, char *out) {
  size_t i = 0;
  for (; n - i >= 3; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    *out++ = base64_alphabet[v >> 18];
    *out++ = base64_alphabet[(v >> 12) & 63];
    *out++ = base64_alphabet[(v >> 6) & 63];
    *out++ = base64_alphabet[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    *out++ = base64_alphabet[v >> 18];
    *out++ = base64_alphabet[(v >> 12) & 63];
    *out++ = '=';
    *out++ = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    *out++ = base64_alphabet[v >> 18];
    *out++ = base64_alphabet[(v >> 12) & 63];
    *out++ = base64_alphabet[(v >> 6) & 63];
    *out++ = '=';
  }
}

static int base64_value(unsigned char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}

size_t mbxU_base64_decode(const char *in, size_t n, unsigned char *out) {
  const unsigned char *p = (const unsigned char *)in;
  size_t written = 0;
  if (n % 4 != 0) return (size_t)-1;
  for (size_t i = 0; i < n; i += 4) {
    int last = i + 4 == n;
    /* Padding may only end the text: "xx==" carries one byte, "xxx=" two. */
    int pad = 0;
    if (last && p[i + 3] == '=') pad = p[i + 2] == '=' ? 2 : 1;
    int v[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4 - pad; k++) {
      v[k] = base64_value(p[i + k]);
      if (v[k] < 0) return (size_t)-1;
    }
    uint32_t bits =
        (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 | (uint32_t)v[3];
    /* Non-zero bits under the padding are rejected (RFC 4648 s3.5 allows it): each byte
       string then has exactly one encoding, so decode-then-encode gives back the input. */
    if ((pad == 2 && (bits & 0xFFFF) != 0) || (pad == 1 && (bits & 0xFF) != 0)) return (size_t)-1;
    out[written++] = (unsigned char)(bits >> 16);
    if (pad < 2) out[written++] = (unsigned char)(bits >> 8);
    if (pad < 1) out[written++] = (unsigned char)bits;
  }
  return written;
}
