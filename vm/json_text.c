/* vm/json_text.c -- JSON text without Lua: UTF-8 checks, string escaping, numbers. */
#include "vm/json_text.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"

/* Escapes for the control characters: JSON forbids them raw inside strings (RFC 8259 s7). */
static const char *const control_escapes[0x20] = {
    "\\u0000", "\\u0001", "\\u0002", "\\u0003", "\\u0004", "\\u0005", "\\u0006", "\\u0007",
    "\\b",     "\\t",     "\\n",     "\\u000b", "\\f",     "\\r",     "\\u000e", "\\u000f",
    "\\u0010", "\\u0011", "\\u0012", "\\u0013", "\\u0014", "\\u0015", "\\u0016", "\\u0017",
    "\\u0018", "\\u0019", "\\u001a", "\\u001b", "\\u001c", "\\u001d", "\\u001e", "\\u001f"};

int mbxV_utf8_valid(const char *s, size_t n) {
  const unsigned char *p = (const unsigned char *)s;
  size_t i = 0;
  while (i < n) {
    unsigned c = p[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    /* The ranges of the second byte come from RFC 3629 s4: they are what rules out overlong
       forms (E0 80..9F, F0 80..8F), UTF-16 surrogates (ED A0..BF) and code points above
       U+10FFFF (F4 90..BF). C0, C1 and F5..FF never start a sequence. */
    size_t need;
    unsigned lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      need = 1;
    } else if (c >= 0xE0 && c <= 0xEF) {
      need = 2;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      need = 3;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return 0;
    }
    if (n - i - 1 < need) return 0;
    if (p[i + 1] < lo || p[i + 1] > hi) return 0;
    for (size_t k = 2; k <= need; k++)
      if ((p[i + k] & 0xC0) != 0x80) return 0;
    i += need + 1;
  }
  return 1;
}

/* Invalid UTF-8 cannot be a JSON string, and silently replacing bytes would corrupt binary
   data, so the bytes travel base64-encoded in a wrapper object the decoder recognises. */
static void put_bytes_object(mbxV_sink_fn put, void *sink, const char *s, size_t n) {
  /* 48 input bytes make exactly 64 output characters with no padding, so chunks join up. */
  char chunk[64];
  put(sink, "{\"$bytes\":\"", 11);
  while (n > 0) {
    size_t take = n < 48 ? n : 48;
    mbxU_base64_encode((const unsigned char *)s, take, chunk);
    put(sink, chunk, mbxU_base64_encoded_len(take));
    s += take;
    n -= take;
  }
  put(sink, "\"}", 2);
}

void mbxV_json_put_string(mbxV_sink_fn put, void *sink, const char *s, size_t n) {
  if (!mbxV_utf8_valid(s, n)) {
    put_bytes_object(put, sink, s, n);
    return;
  }
  const unsigned char *p = (const unsigned char *)s;
  size_t run = 0; /* start of the bytes not yet written: they are copied in runs, not singly */
  put(sink, "\"", 1);
  for (size_t i = 0; i < n; i++) {
    const char *escape = NULL;
    size_t skip = 1;
    if (p[i] < 0x20) {
      escape = control_escapes[p[i]];
    } else if (p[i] == '"') {
      escape = "\\\"";
    } else if (p[i] == '\\') {
      escape = "\\\\";
    } else if (p[i] == 0xE2 && p[i + 1] == 0x80 && (p[i + 2] == 0xA8 || p[i + 2] == 0xA9)) {
      /* U+2028/U+2029 are legal in JSON but end a line in JavaScript: output pasted into a
         <script> or eval'd by an old engine would break (or be injected into). The text is
         valid UTF-8, so the two bytes after an E2 lead byte exist. */
      escape = p[i + 2] == 0xA8 ? "\\u2028" : "\\u2029";
      skip = 3;
    }
    if (escape == NULL) continue;
    if (i > run) put(sink, s + run, i - run);
    put(sink, escape, strlen(escape));
    i += skip - 1;
    run = i + 1;
  }
  if (n > run) put(sink, s + run, n - run);
  put(sink, "\"", 1);
}

void mbxV_json_put_integer(mbxV_sink_fn put, void *sink, int64_t v) {
  /* By hand: snprintf's format machinery was most of the cost of a small run's result. The
     magnitude is taken as unsigned, so INT64_MIN needs no special case. */
  char buf[24];
  char *end = buf + sizeof buf, *p = end;
  uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
  do {
    *--p = (char)('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (v < 0) *--p = '-';
  put(sink, p, (size_t)(end - p));
}

int mbxV_json_put_number(mbxV_sink_fn put, void *sink, double v) {
  if (!isfinite(v)) return 0;
  /* 17 significant digits always read back to the same double (IEEE 754 binary64), but often
     show noise (0.1 -> 0.10000000000000001); the first shorter precision that round-trips is
     the one a reader expects. strtod and %g both follow the "C" locale a run uses. */
  char buf[40];
  int len = 0;
  for (int precision = 15; precision <= 17; precision++) {
    len = snprintf(buf, sizeof buf - 2, "%.*g", precision, v);
    if (strtod(buf, NULL) == v) break;
  }
  /* Keep the float-ness visible: "1" would read back as an integer, so 1.0 becomes "1.0". */
  if (strpbrk(buf, ".e") == NULL) {
    buf[len++] = '.';
    buf[len++] = '0';
  }
  put(sink, buf, (size_t)len);
  return 1;
}
