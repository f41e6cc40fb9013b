/* stdlib/utf8.c -- the utf8 library guests see: stock char, metered len/offset/codepoint/codes. */
#include <limits.h>
#include <stdint.h>

#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/vm.h"

#define MAX_UNICODE 0x10FFFFu
#define MAX_UTF 0x7FFFFFFFu
/* len, offset and codepoint scan a guest string of any length in one C call, where the count
   hook never fires (THREATS 0.2, 8.6). They charge one instruction per SCAN_BYTES_PER_STEP
   bytes, paid every SCAN_BATCH bytes (the charge also checks the deadline). */
#define SCAN_BATCH 4096u
#define SCAN_BYTES_PER_STEP 16u

#define SCAN_METER(L) mbxV_meter_init((L), SCAN_BATCH, SCAN_BYTES_PER_STEP)

/* A string position as the manual defines it: negative counts back from the end; one before
   the start maps to 0. */
static lua_Integer relative(lua_Integer pos, size_t len) {
  if (pos >= 0) return pos;
  if ((size_t)0 - (size_t)pos > len) return 0;
  return (lua_Integer)len + pos + 1;
}

static int is_continuation(const unsigned char *s, size_t len, lua_Integer i) {
  return (size_t)i < len && (s[i] & 0xC0) == 0x80;
}

/* Decode the sequence at s (avail bytes left in the string). Returns its length, or 0 when it
   is not valid: a continuation byte first, a missing continuation, more than five of them,
   an overlong form, or (strict) a surrogate or a value past U+10FFFF. Lua's extended UTF-8
   allows up to six bytes and values up to 2^31 - 1. */
static size_t decode(const unsigned char *s, size_t avail, uint32_t *code, int strict) {
  static const uint32_t smallest[] = {0, 0x80, 0x800, 0x10000u, 0x200000u, 0x4000000u};
  unsigned lead = s[0];
  uint32_t value;
  size_t extra = 0;
  if (lead < 0x80) {
    value = lead;
  } else {
    while (extra < 7 && (lead & (0x40u >> extra)))
      extra++; /* ones after the top bit */
    if (extra == 0 || extra > 5 || extra >= avail) return 0;
    value = lead & (0x3Fu >> extra);
    for (size_t k = 1; k <= extra; k++) {
      if ((s[k] & 0xC0) != 0x80) return 0;
      value = (value << 6) | (s[k] & 0x3Fu);
    }
    if (value < smallest[extra] || value > MAX_UTF) return 0;
  }
  if (strict && (value > MAX_UNICODE || (value >= 0xD800u && value <= 0xDFFFu))) return 0;
  if (code) *code = value;
  return extra + 1;
}

/* utf8.len(s [, i [, j [, lax]]]) */
static int u_len(lua_State *L) {
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  lua_Integer posi = relative(luaL_optinteger(L, 2, 1), len);
  lua_Integer posj = relative(luaL_optinteger(L, 3, -1), len);
  int lax = lua_toboolean(L, 4);
  luaL_argcheck(L, 1 <= posi && --posi <= (lua_Integer)len, 2, "initial position out of bounds");
  luaL_argcheck(L, --posj < (lua_Integer)len, 3, "final position out of bounds");
  mbxV_meter m = SCAN_METER(L);
  lua_Integer n = 0;
  while (posi <= posj) {
    size_t step = decode(s + posi, len - (size_t)posi, NULL, !lax);
    if (step == 0) {
      mbxV_meter_flush(&m);
      luaL_pushfail(L);
      lua_pushinteger(L, posi + 1);
      return 2;
    }
    posi += (lua_Integer)step;
    n++;
    mbxV_meter_add(&m, step);
  }
  mbxV_meter_flush(&m);
  lua_pushinteger(L, n);
  return 1;
}

/* utf8.codepoint(s [, i [, j [, lax]]]) */
static int u_codepoint(lua_State *L) {
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  lua_Integer posi = relative(luaL_optinteger(L, 2, 1), len);
  lua_Integer pose = relative(luaL_optinteger(L, 3, posi), len);
  int lax = lua_toboolean(L, 4);
  luaL_argcheck(L, posi >= 1, 2, "out of bounds");
  luaL_argcheck(L, pose <= (lua_Integer)len, 3, "out of bounds");
  if (posi > pose) return 0;
  if (pose - posi >= INT_MAX) return luaL_error(L, "string slice too long");
  int count = (int)(pose - posi) + 1;
  /* One stack slot per result: refuse growth that cannot fit before the allocator has to. */
  if (count > 1024 && !mbxL_heap_fits(L, (size_t)count * MBXL_STACK_SLOT_COST))
    return luaL_error(L, "stack overflow (string slice too long)");
  luaL_checkstack(L, count, "string slice too long");
  mbxV_meter m = SCAN_METER(L);
  int n = 0;
  const unsigned char *p = s + posi - 1, *end = s + pose;
  while (p < end) {
    uint32_t code;
    size_t step = decode(p, len - (size_t)(p - s), &code, !lax);
    if (step == 0) return luaL_error(L, "invalid UTF-8 code");
    lua_pushinteger(L, (lua_Integer)code);
    n++;
    p += step;
    mbxV_meter_add(&m, step);
  }
  mbxV_meter_flush(&m);
  return n;
}

/* utf8.offset(s, n [, i]) */
static int u_offset(lua_State *L) {
  size_t len;
  const unsigned char *s = (const unsigned char *)luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  lua_Integer posi = relative(luaL_optinteger(L, 3, n >= 0 ? 1 : (lua_Integer)len + 1), len);
  luaL_argcheck(L, 1 <= posi && --posi <= (lua_Integer)len, 3, "position out of bounds");
  mbxV_meter m = SCAN_METER(L);
  if (n == 0) { /* the start of the character that holds byte i */
    while (posi > 0 && is_continuation(s, len, posi)) {
      posi--;
      mbxV_meter_add(&m, 1);
    }
  } else {
    if (is_continuation(s, len, posi))
      return luaL_error(L, "initial position is a continuation byte");
    if (n < 0) {
      while (n < 0 && posi > 0) { /* back to the start of the previous character */
        do {
          posi--;
          mbxV_meter_add(&m, 1);
        } while (posi > 0 && is_continuation(s, len, posi));
        n++;
      }
    } else {
      n--; /* the character at i is the first one */
      while (n > 0 && posi < (lua_Integer)len) {
        do {
          posi++;
          mbxV_meter_add(&m, 1);
        } while (is_continuation(s, len, posi));
        n--;
      }
    }
  }
  mbxV_meter_flush(&m);
  if (n == 0)
    lua_pushinteger(L, posi + 1);
  else
    luaL_pushfail(L);
  return 1;
}

/* Longest run of continuation bytes a valid string has before a character (those of the one
   before it: Lua's extended UTF-8 has up to five). */
#define CONTINUATIONS_MAX 5

/* Skip the continuation bytes from s[n] on (the tail of a run longer than CONTINUATIONS_MAX):
   only a string that is not UTF-8 has one, and it can be the whole string, so this scan is
   metered like len's. */
static lua_Unsigned skip_long_run(lua_State *L, const unsigned char *s, size_t len,
                                  lua_Unsigned n) {
  mbxV_meter m = SCAN_METER(L);
  while (n < len && (s[n] & 0xC0) == 0x80) {
    n++;
    mbxV_meter_add(&m, 1);
  }
  mbxV_meter_flush(&m);
  return n;
}

/* One step of utf8.codes: (s, position of the previous character) -> the next character's
   position and code, or nothing at the end. As in stock 5.4.4, the continuation bytes after
   the previous position are skipped, however many there are (5.4.4 does not raise on stray
   ones; later versions do): stock skips them in C unmetered, 83 ms per call on 128 MiB of
   0x80 bytes for one VM instruction (THREATS D, "no guest work escapes the meter"). Here a
   valid string's run (at most CONTINUATIONS_MAX) is O(1) and anything longer is metered. */
static int codes_step(lua_State *L, int strict) {
  size_t len;
  /* lua_tolstring first: this runs once per character, and luaL_checklstring is one more
     call around it; it is called only to raise stock's error. */
  const char *text = lua_tolstring(L, 1, &len);
  if (text == NULL) text = luaL_checklstring(L, 1, &len);
  const unsigned char *s = (const unsigned char *)text;
  lua_Unsigned n = (lua_Unsigned)lua_tointeger(L, 2); /* negative: past any end, as stock */
  for (int k = 0; n < len && (s[n] & 0xC0) == 0x80; k++, n++)
    if (k == CONTINUATIONS_MAX) {
      n = skip_long_run(L, s, len, n);
      break;
    }
  if (n >= len) return 0;
  uint32_t code;
  if (decode(s + n, len - (size_t)n, &code, strict) == 0)
    return luaL_error(L, "invalid UTF-8 code");
  lua_pushinteger(L, (lua_Integer)n + 1);
  lua_pushinteger(L, (lua_Integer)code);
  return 2;
}

static int codes_step_strict(lua_State *L) {
  return codes_step(L, 1);
}

static int codes_step_lax(lua_State *L) {
  return codes_step(L, 0);
}

/* utf8.codes(s [, lax]). Guests never get these light functions: stdlib.c replaces codes by a
   wrapper that returns closures made from them (no code addresses, issue 9 D). */
static int u_codes(lua_State *L) {
  int lax = lua_toboolean(L, 2);
  luaL_checkstring(L, 1);
  lua_pushcfunction(L, lax ? codes_step_lax : codes_step_strict);
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

int mbxL_open_utf8(lua_State *L) {
  static const luaL_Reg metered[] = {{"len", u_len},
                                     {"offset", u_offset},
                                     {"codepoint", u_codepoint},
                                     {"codes", u_codes},
                                     {NULL, NULL}};
  luaL_requiref(L, LUA_UTF8LIBNAME, luaopen_utf8, 1);
  luaL_setfuncs(L, metered, 0);
  lua_pop(L, 1);
  return 0;
}
