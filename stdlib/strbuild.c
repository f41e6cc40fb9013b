/* stdlib/strbuild.c -- string.rep, pack and unpack, metered and checked against the ceiling. */
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/vm.h"

/* Stock 5.4 caps results of rep and the sizes read from pack formats at INT_MAX. */
#define STOCK_MAXSIZE ((size_t)INT_MAX)
/* Bytes copied between two charges: a charge also checks the deadline, so a long copy is
   interrupted within about a millisecond. */
#define COPY_BATCH ((size_t)1 << 20)
/* Worst-case alignment padding of one pack item: maxalign is at most 16. */
#define MAX_ALIGN_PAD 15
/* What a number argument of 's'/'z' can grow to once converted to text. */
#define NUMBER_TEXT_MAX 64

static size_t add_sat(size_t a, size_t b) {
  return a > SIZE_MAX - b ? SIZE_MAX : a + b;
}

static size_t mul_sat(size_t a, size_t b) {
  return b != 0 && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

static int too_large(lua_State *L, size_t bytes) {
  return luaL_error(L,
                    "resulting string too large (%I bytes; not enough memory left in this "
                    "sandbox)",
                    (lua_Integer)(bytes > (size_t)LUA_MAXINTEGER ? LUA_MAXINTEGER : bytes));
}

/* ---- string.rep ------------------------------------------------------------------------ */

/* Stock rep with an empty string and separator passes its size check and then loops n times
   doing nothing, in C, for up to 2^63 rounds (THREATS D3). Here that case returns at once,
   the size is checked against the memory left before the buffer exists, and the copy (by
   doubling what is already written) is charged 1 per 64 bytes. */
static int str_rep(lua_State *L) {
  size_t len, sep_len;
  const char *s = luaL_checklstring(L, 1, &len);
  lua_Integer n = luaL_checkinteger(L, 2);
  const char *sep = luaL_optlstring(L, 3, "", &sep_len);
  if (n <= 0 || len + sep_len == 0) {
    lua_pushliteral(L, "");
    return 1;
  }
  size_t unit = len + sep_len; /* cannot wrap: both strings exist in memory */
  if (unit > STOCK_MAXSIZE / (lua_Unsigned)n) return luaL_error(L, "resulting string too large");
  size_t total = unit * (size_t)n - sep_len;
  /* The buffer and the final string are both live while the result is created. */
  if (total > LUAL_BUFFERSIZE && !mbxL_heap_fits(L, 2 * total)) return too_large(L, total);
  mbxV_charge(L, 1);
  luaL_Buffer b;
  char *out = luaL_buffinitsize(L, &b, total);
  memcpy(out, s, len);
  size_t done = len;
  if (n > 1) {
    memcpy(out + done, sep, sep_len);
    done += sep_len;
  }
  /* out[0..done) now holds at least one period ("s" then "sep"). Each round copies an
     already written stretch that starts at the same phase of the period as `done`, so the
     copied text continues the pattern; the written part roughly doubles per round. */
  mbxV_meter copied = mbxV_meter_init(L, COPY_BATCH, 64);
  mbxV_meter_add(&copied, done);
  while (done < total) {
    size_t from = done % unit;
    size_t chunk = done - from;
    if (chunk > total - done) chunk = total - done;
    if (chunk > COPY_BATCH) chunk = COPY_BATCH;
    memcpy(out + done, out + from, chunk);
    done += chunk;
    mbxV_meter_add(&copied, chunk);
  }
  mbxV_meter_flush(&copied);
  luaL_pushresultsize(&b, total);
  return 1;
}

/* ---- string.pack / string.unpack ------------------------------------------------------- */

/* A walk over a pack format that bounds what stock pack/unpack will do with it, following
   the rules of the manual (§6.4.2) and string.packsize. It never raises: on a malformed
   option it stops, since stock raises there too, after doing the work of the items before. */
typedef struct format_bound {
  size_t items; /* options that take an argument / produce a result */
  size_t bytes; /* upper bound of the packed size */
  int variable; /* an 's' or 'z' item: its size depends on the data (unpack) */
} format_bound;

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

/* Stock reads at most as many digits as keep the number under INT_MAX; the digits after that
   are read as the next options (and rejected). */
static int read_count(const char **fmt, int dflt) {
  if (!is_digit(**fmt)) return dflt;
  int a = 0;
  do {
    a = a * 10 + (*(*fmt)++ - '0');
  } while (is_digit(**fmt) && a <= (INT_MAX - 9) / 10);
  return a;
}

/* Size of an integral option with an optional [1,16] count; -1 when out of range. */
static int read_int_size(const char **fmt, int dflt) {
  int size = read_count(fmt, dflt);
  return size < 1 || size > 16 ? -1 : size;
}

/* Length a string argument of 's'/'z' will have once stock converts it. */
static size_t arg_length(lua_State *L, int arg) {
  switch (lua_type(L, arg)) {
  case LUA_TSTRING:
    return lua_rawlen(L, arg);
  case LUA_TNUMBER:
    return NUMBER_TEXT_MAX;
  default:
    return 0; /* stock raises on it */
  }
}

/* Parse one option at *fmt. Returns its fixed size (0 for configuration options), or -1 when
   the option is malformed. *takes_arg says whether it consumes an argument; *kind is the
   option letter. */
static long long read_option(const char **fmt, int *takes_arg, char *kind) {
  char opt = *(*fmt)++;
  *kind = opt;
  *takes_arg = 1;
  switch (opt) {
  case 'b':
  case 'B':
    return 1;
  case 'h':
  case 'H':
    return (long long)sizeof(short);
  case 'l':
  case 'L':
    return (long long)sizeof(long);
  case 'j':
  case 'J':
    return (long long)sizeof(lua_Integer);
  case 'T':
    return (long long)sizeof(size_t);
  case 'f':
    return (long long)sizeof(float);
  case 'n':
    return (long long)sizeof(lua_Number);
  case 'd':
    return (long long)sizeof(double);
  case 'i':
  case 'I':
    return read_int_size(fmt, (int)sizeof(int));
  case 's':
    return read_int_size(fmt, (int)sizeof(size_t));
  case 'c': {
    int size = read_count(fmt, -1);
    return size < 0 ? -1 : size;
  }
  case 'z':
    return 0;
  }
  *takes_arg = 0;
  switch (opt) {
  case 'x':
    return 1;
  case 'X':
  case ' ':
  case '<':
  case '>':
  case '=':
    return 0;
  case '!':
    return read_int_size(fmt, 8) < 0 ? -1 : 0;
  default:
    return -1;
  }
}

/* Bound the work of the format fmt (argument 1) over arguments from `first_arg` (pack) or,
   with first_arg == 0, over unpacked data (unpack). */
static format_bound bound_format(lua_State *L, const char *fmt, int first_arg) {
  format_bound fb = {0, 0, 0};
  int arg = first_arg;
  while (*fmt != '\0') {
    int takes_arg;
    char kind;
    long long size = read_option(&fmt, &takes_arg, &kind);
    if (size < 0) break;
    if (kind == 'X') { /* aligns to the next option, which is otherwise ignored */
      if (*fmt == '\0' || read_option(&fmt, &takes_arg, &kind) < 0) break;
      fb.bytes = add_sat(fb.bytes, MAX_ALIGN_PAD);
      continue;
    }
    fb.bytes = add_sat(fb.bytes, (size_t)size + (size > 1 ? MAX_ALIGN_PAD : 0));
    if (!takes_arg) continue;
    fb.items++;
    if (kind == 's' || kind == 'z') {
      fb.variable = 1;
      if (first_arg > 0) fb.bytes = add_sat(fb.bytes, arg_length(L, arg) + 1);
    }
    arg++;
  }
  return fb;
}

/* A format of at most SHORT_FORMAT_MAX characters without 'c', 's' or 'z' (the options whose
   size comes from the data or from a count up to INT_MAX): each character adds at most 16
   bytes and 15 of padding and at most one item, so the work is at most 31 bytes and one item
   per character, under LUAL_BUFFERSIZE with its items' stack slots, and needs no memory
   check and no walk. It is charged as the walk would at most (items + bytes / 64 + 1 <=
   length + SHORT_FORMAT_MAX * 31 / 64 + 1), without the walk. */
#define SHORT_FORMAT_MAX 10
#define SHORT_FORMAT_CHARGE(len) ((len) + SHORT_FORMAT_MAX * 31 / 64 + 1)

static int is_short_fixed_format(const char *fmt, size_t len) {
  if (len > SHORT_FORMAT_MAX) return 0;
  for (size_t i = 0; i < len; i++)
    if (fmt[i] == 'c' || fmt[i] == 's' || fmt[i] == 'z') return 0;
  return 1;
}

/* The first byte unpack reads (0-based) for position argument pos, as the manual defines it:
   negative counts back from the end, 0 and anything before the start mean the first byte. */
static size_t start_of(lua_Integer pos, size_t data_len) {
  if (pos > 0) return (size_t)pos - 1;
  /* 0u - pos, not -pos: the magnitude of math.mininteger does not fit a lua_Integer (signed
     overflow; UBSan aborts the host: issue 9, E.6). */
  if (pos == 0 || 0u - (lua_Unsigned)pos > data_len) return 0;
  return data_len + (size_t)pos;
}

/* The first byte stock unpack reads, from its optional position argument (never raises: a
   bad argument is stock's to report). */
static size_t unpack_start(lua_State *L, size_t data_len) {
  int is_integer;
  lua_Integer pos = lua_tointegerx(L, 3, &is_integer);
  return start_of(is_integer ? pos : 1, data_len);
}

/* ---- short plain formats: packed and unpacked here ----------------------------------- */

/* A short fixed format whose options are all integers of 1 to 8 bytes, floats, doubles,
   padding bytes, spaces and endianness marks (no '!', so no alignment; no 'X', 'c', 's' or
   'z') is packed and unpacked here, in one pass over a parsed copy, instead of by stock
   (which parses the format per option, builds through a luaL_Buffer and reads its arguments
   through more calls). Any other format goes to stock, which then raises its own errors: a
   format this parser accepts has none, so the errors left (arguments, data length, position)
   are raised here with stock's words, in stock's order. */
typedef struct plain_item {
  char kind;          /* 'i' signed, 'u' unsigned, 'f' float, 'd' double/number, 'x' a pad byte */
  unsigned char size; /* bytes */
  unsigned char little;
} plain_item;

typedef struct plain_format {
  plain_item items[SHORT_FORMAT_MAX];
  int count;
} plain_format;

static int native_little(void) {
  const uint16_t one = 1;
  unsigned char first;
  memcpy(&first, &one, 1);
  return first == 1;
}

/* Parse fmt (stock reads it up to its first NUL; the callers pass at most SHORT_FORMAT_MAX
   characters) into *pf; 0 when it holds anything the plain path does not do. */
static int parse_plain_format(const char *fmt, plain_format *pf) {
  int little = native_little();
  pf->count = 0;
  while (*fmt != '\0') {
    char opt = *fmt++;
    plain_item item = {0, 0, 0};
    switch (opt) {
    case ' ':
      continue;
    case '<':
      little = 1;
      continue;
    case '>':
      little = 0;
      continue;
    case '=':
      little = native_little();
      continue;
    case 'b':
    case 'B':
      item.size = 1;
      break;
    case 'h':
    case 'H':
      item.size = (unsigned char)sizeof(short);
      break;
    case 'l':
    case 'L':
      item.size = (unsigned char)sizeof(long);
      break;
    case 'j':
    case 'J':
      item.size = (unsigned char)sizeof(lua_Integer);
      break;
    case 'T':
      item.size = (unsigned char)sizeof(size_t);
      break;
    case 'i':
    case 'I': {
      int size = read_count(&fmt, (int)sizeof(int));
      if (size < 1 || size > (int)sizeof(lua_Integer)) return 0; /* stock: 9-16 or its error */
      item.size = (unsigned char)size;
      break;
    }
    case 'f':
      item.kind = 'f';
      item.size = (unsigned char)sizeof(float);
      break;
    case 'd':
    case 'n':
      item.kind = 'd';
      item.size = (unsigned char)sizeof(double);
      break;
    case 'x':
      item.kind = 'x';
      item.size = 1;
      break;
    default:
      return 0;
    }
    if (item.kind == 0) item.kind = (opt >= 'a' && opt <= 'z') ? 'i' : 'u';
    if (item.size > sizeof(lua_Integer) || pf->count == SHORT_FORMAT_MAX) return 0;
    item.little = (unsigned char)little;
    pf->items[pf->count++] = item;
  }
  return 1;
}

/* Copy size bytes of the native-order value at from to out in the item's byte order. */
static void put_ordered(char *out, const void *from, size_t size, int little) {
  if (little == native_little()) {
    memcpy(out, from, size);
    return;
  }
  const char *in = from;
  for (size_t k = 0; k < size; k++)
    out[k] = in[size - 1 - k];
}

static void put_integer(char *out, lua_Unsigned v, size_t size, int little) {
  for (size_t k = 0; k < size; k++, v >>= 8)
    out[little ? k : size - 1 - k] = (char)(v & 0xFFu);
}

static lua_Unsigned get_integer(const char *in, size_t size, int little) {
  lua_Unsigned v = 0;
  for (size_t k = 0; k < size; k++)
    v = (v << 8) | (unsigned char)in[little ? size - 1 - k : k];
  return v;
}

static int pack_plain(lua_State *L, const plain_format *pf) {
  char out[SHORT_FORMAT_MAX * sizeof(lua_Integer)];
  size_t len = 0;
  int arg = 2;
  /* Stock pushes a mark above the arguments, so the first missing one reads "got nil", not
     "got no value". */
  lua_pushnil(L);
  for (int k = 0; k < pf->count; k++) {
    const plain_item *it = &pf->items[k];
    size_t bits = (size_t)it->size * 8;
    switch (it->kind) {
    case 'x':
      out[len++] = 0; /* stock's LUAL_PACKPADBYTE */
      continue;
    case 'i': {
      lua_Integer v = luaL_checkinteger(L, arg);
      if (bits < 64) {
        lua_Integer lim = (lua_Integer)1 << (bits - 1);
        luaL_argcheck(L, -lim <= v && v < lim, arg, "integer overflow");
      }
      put_integer(out + len, (lua_Unsigned)v, it->size, it->little);
      break;
    }
    case 'u': {
      lua_Integer v = luaL_checkinteger(L, arg);
      if (bits < 64)
        luaL_argcheck(L, (lua_Unsigned)v < ((lua_Unsigned)1 << bits), arg, "unsigned overflow");
      put_integer(out + len, (lua_Unsigned)v, it->size, it->little);
      break;
    }
    case 'f': {
      float f = (float)luaL_checknumber(L, arg);
      put_ordered(out + len, &f, sizeof f, it->little);
      break;
    }
    default: { /* 'd' */
      double d = (double)luaL_checknumber(L, arg);
      put_ordered(out + len, &d, sizeof d, it->little);
      break;
    }
    }
    len += it->size;
    arg++;
  }
  lua_pushlstring(L, out, len);
  return 1;
}

static int unpack_plain(lua_State *L, const plain_format *pf, const char *data, size_t data_len) {
  size_t pos = start_of(luaL_optinteger(L, 3, 1), data_len);
  luaL_argcheck(L, pos <= data_len, 3, "initial position out of string");
  luaL_checkstack(L, pf->count + 1, "too many results");
  int results = 0;
  for (int k = 0; k < pf->count; k++) {
    const plain_item *it = &pf->items[k];
    luaL_argcheck(L, it->size <= data_len - pos, 2, "data string too short");
    const char *in = data + pos;
    pos += it->size;
    switch (it->kind) {
    case 'x':
      continue;
    case 'i':
    case 'u': {
      lua_Unsigned v = get_integer(in, it->size, it->little);
      if (it->kind == 'i' && it->size < sizeof(lua_Integer)) { /* sign-extend */
        lua_Unsigned sign = (lua_Unsigned)1 << (it->size * 8 - 1);
        v = (v ^ sign) - sign;
      }
      lua_pushinteger(L, (lua_Integer)v);
      break;
    }
    case 'f': {
      float f;
      put_ordered((char *)&f, in, sizeof f, it->little);
      lua_pushnumber(L, (lua_Number)f);
      break;
    }
    default: { /* 'd' */
      double d;
      put_ordered((char *)&d, in, sizeof d, it->little);
      lua_pushnumber(L, (lua_Number)d);
      break;
    }
    }
    results++;
  }
  lua_pushinteger(L, (lua_Integer)pos + 1);
  return results + 1;
}

/* Call the stock function kept in upvalue 1 on our own frame: its argument errors then name
   this function ('pack'), as they would in stock Lua. */
static int call_stock(lua_State *L) {
  lua_CFunction stock = lua_tocfunction(L, lua_upvalueindex(1));
  return stock(L);
}

/* Stock pack fills 'c' padding one byte at a time and grows its buffer by doubling, all in
   C: string.pack("c2000000000", "") allocates and loops for gigabytes. The bound is checked
   against the memory left (buffer growth keeps up to three times the result live), then
   charged, before stock runs. */
static int str_pack(lua_State *L) {
  size_t len;
  const char *fmt = luaL_checklstring(L, 1, &len);
  plain_format pf;
  if (len <= SHORT_FORMAT_MAX && parse_plain_format(fmt, &pf)) {
    mbxV_charge_light(L, SHORT_FORMAT_CHARGE(len));
    return pack_plain(L, &pf);
  }
  if (is_short_fixed_format(fmt, len)) {
    mbxV_charge_light(L, SHORT_FORMAT_CHARGE(len));
    return call_stock(L);
  }
  format_bound fb = bound_format(L, fmt, 2);
  if (fb.bytes > LUAL_BUFFERSIZE && !mbxL_heap_fits(L, mul_sat(fb.bytes, 3)))
    return too_large(L, fb.bytes);
  /* Light: a small format does not read the clock per call; a large bound (1024 and more)
     always takes the full check (vm/budget.h). */
  mbxV_charge_light(L, fb.items + fb.bytes / 64 + 1);
  return call_stock(L);
}

/* Stock unpack reads each item once, so its work is bounded by the format and the data; what
   it allocates (the result strings and the stack slots) is checked against the memory left,
   and the bytes it consumed are charged once it returns (its last result is the next
   position). */
static int str_unpack(lua_State *L) {
  size_t len;
  const char *fmt = luaL_checklstring(L, 1, &len);
  size_t data_len;
  const char *data = luaL_checklstring(L, 2, &data_len);
  plain_format pf;
  if (len <= SHORT_FORMAT_MAX && parse_plain_format(fmt, &pf)) {
    mbxV_charge_light(L, SHORT_FORMAT_CHARGE(len));
    return unpack_plain(L, &pf, data, data_len);
  }
  if (is_short_fixed_format(fmt, len)) { /* reads at most SHORT_FORMAT_MAX * 31 bytes */
    mbxV_charge_light(L, SHORT_FORMAT_CHARGE(len));
    return call_stock(L);
  }
  format_bound fb = bound_format(L, fmt, 0);
  size_t start = unpack_start(L, data_len);
  size_t left = start < data_len ? data_len - start : 0;
  size_t bytes = fb.variable || fb.bytes > left ? left : fb.bytes;
  size_t need = add_sat(bytes, mul_sat(fb.items, 64));
  if (need > LUAL_BUFFERSIZE && !mbxL_heap_fits(L, need))
    return luaL_error(L, "string.unpack: the results do not fit in the memory left in this "
                         "sandbox");
  mbxV_charge_light(L, fb.items + 1);
  int nres = call_stock(L);
  lua_Integer next = lua_tointeger(L, -1);
  if (next > 0 && (size_t)next - 1 >= start + 64) mbxV_charge(L, ((size_t)next - 1 - start) / 64);
  return nres;
}

void mbxL_install_builders(lua_State *L, int lib) {
  lib = lua_absindex(L, lib);
  lua_pushcfunction(L, str_rep);
  lua_setfield(L, lib, "rep");
  static const struct {
    const char *name;
    lua_CFunction wrapper;
  } wrapped[] = {{"pack", str_pack}, {"unpack", str_unpack}};
  for (size_t i = 0; i < sizeof wrapped / sizeof *wrapped; i++) {
    lua_getfield(L, lib, wrapped[i].name);
    lua_pushcclosure(L, wrapped[i].wrapper, 1);
    lua_setfield(L, lib, wrapped[i].name);
  }
}
