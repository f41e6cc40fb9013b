/* vm/chunk.c -- a reader of Lua 5.4.4 binary chunks (lua_dump output), bounds-checked. */
#include "vm/chunk.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[] = {
#define MBXV_OPCODE_NAME_(name) #name,
    MBXV_OPCODES(MBXV_OPCODE_NAME_)
#undef MBXV_OPCODE_NAME_
};

const char *mbxV_op_name(unsigned op) {
  return op < MBXV_OP_COUNT ? op_names[op] : "?";
}

typedef struct reader {
  const unsigned char *p;
  size_t len, at;
  char *why;
  size_t why_size;
  int failed; /* -1 malformed, -2 out of memory */
} reader;

static void fail(reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail(reader *r, const char *fmt, ...) {
  if (r->failed) return;
  r->failed = -1;
  if (r->why == NULL || r->why_size == 0) return;
  int n = snprintf(r->why, r->why_size, "offset %zu: ", r->at);
  if (n < 0 || (size_t)n >= r->why_size) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->why + n, r->why_size - (size_t)n, fmt, ap);
  va_end(ap);
}

static void *alloc_n(reader *r, size_t n, size_t size) {
  if (r->failed || n == 0) return NULL;
  void *p = calloc(n, size); /* calloc checks n * size for overflow */
  if (p == NULL) {
    r->failed = -2;
    if (r->why && r->why_size) snprintf(r->why, r->why_size, "out of host memory");
  }
  return p;
}

static size_t left(const reader *r) {
  return r->len - r->at;
}

static int need(reader *r, size_t n, const char *what) {
  if (r->failed) return 0;
  if (n > left(r)) {
    fail(r, "truncated %s (%zu bytes needed, %zu left)", what, n, left(r));
    return 0;
  }
  return 1;
}

static uint8_t get_byte(reader *r, const char *what) {
  if (!need(r, 1, what)) return 0;
  return r->p[r->at++];
}

/* lua_dump's sizes: 7 bits per byte, most significant group first, the last byte flagged
   with 0x80. The value must fit in an int, as Lua's loader requires for every count. */
static size_t get_size(reader *r, const char *what) {
  size_t x = 0;
  for (;;) {
    if (!need(r, 1, what)) return 0;
    uint8_t b = r->p[r->at++];
    if (x > ((size_t)INT_MAX >> 7)) {
      fail(r, "%s does not fit in an int", what);
      return 0;
    }
    x = (x << 7) | (b & 0x7fu);
    if (b & 0x80u) break;
  }
  if (x > (size_t)INT_MAX) {
    fail(r, "%s does not fit in an int", what);
    return 0;
  }
  return x;
}

static int get_int(reader *r, const char *what) {
  return (int)get_size(r, what);
}

/* A count of elements that each take at least min_bytes of the rest: checked before anything
   is allocated for them, so a hostile count cannot ask for more memory than the input. */
static size_t get_count(reader *r, size_t min_bytes, const char *what) {
  size_t n = get_size(r, what);
  if (r->failed) return 0;
  if (min_bytes && n > left(r) / min_bytes) {
    fail(r, "%s %zu is more than the %zu bytes left can hold", what, n, left(r));
    return 0;
  }
  return n;
}

/* A string: size 0 is NULL; otherwise size - 1 bytes follow (no terminating NUL). */
static const char *get_string(reader *r, size_t *len, const char *what) {
  *len = 0;
  size_t size = get_size(r, what);
  if (r->failed || size == 0) return NULL;
  if (!need(r, size - 1, what)) return NULL;
  const char *s = (const char *)r->p + r->at;
  r->at += size - 1;
  *len = size - 1;
  return s;
}

static void get_bytes(reader *r, void *dst, size_t n, const char *what) {
  if (!need(r, n, what)) return;
  memcpy(dst, r->p + r->at, n);
  r->at += n;
}

static void read_constants(reader *r, mbxV_chunk_proto *f) {
  f->nk = get_count(r, 1, "constant count");
  f->k = alloc_n(r, f->nk, sizeof *f->k);
  for (size_t i = 0; i < f->nk && !r->failed; i++) {
    mbxV_chunk_const *k = &f->k[i];
    uint8_t tag = get_byte(r, "constant tag");
    switch (tag) {
    case MBXV_K_NIL:
    case MBXV_K_FALSE:
    case MBXV_K_TRUE:
      k->type = (mbxV_chunk_ktype)tag;
      break;
    case MBXV_K_INT:
      k->type = MBXV_K_INT;
      get_bytes(r, &k->i, sizeof k->i, "integer constant");
      break;
    case MBXV_K_FLOAT:
      k->type = MBXV_K_FLOAT;
      get_bytes(r, &k->n, sizeof k->n, "float constant");
      break;
    case MBXV_K_SHORTSTR:
    case MBXV_K_LONGSTR:
      k->type = (mbxV_chunk_ktype)tag;
      k->s = get_string(r, &k->len, "string constant");
      break;
    default:
      r->at--;
      fail(r, "unknown constant tag 0x%02x", tag);
      break;
    }
  }
}

static void read_upvalues(reader *r, mbxV_chunk_proto *f) {
  f->nupvals = get_count(r, 3, "upvalue count");
  f->upvals = alloc_n(r, f->nupvals, sizeof *f->upvals);
  for (size_t i = 0; i < f->nupvals && !r->failed; i++) {
    f->upvals[i].instack = get_byte(r, "upvalue");
    f->upvals[i].idx = get_byte(r, "upvalue");
    f->upvals[i].kind = get_byte(r, "upvalue");
  }
}

/* lineinfo holds one signed byte per instruction: the line's difference from the previous
   instruction's, or -128 where the line is given absolutely by the next abslineinfo entry
   (whose pc must be that instruction). The first instruction's base is linedefined. */
static void read_debug(reader *r, mbxV_chunk_proto *f) {
  size_t nline = get_count(r, 1, "line info size");
  if (r->failed) return;
  if (nline != 0 && nline != f->ncode) {
    fail(r, "line info has %zu entries for %zu instructions", nline, f->ncode);
    return;
  }
  const unsigned char *deltas = r->p + r->at;
  r->at += nline;
  /* Each entry is two sizes of at least one byte. */
  size_t nabs = get_count(r, 2, "absolute line info size");
  int *abs_pc = alloc_n(r, nabs, sizeof *abs_pc);
  int *abs_line = alloc_n(r, nabs, sizeof *abs_line);
  for (size_t i = 0; i < nabs && !r->failed; i++) {
    abs_pc[i] = get_int(r, "absolute line pc");
    abs_line[i] = get_int(r, "absolute line");
  }
  if (nline && !r->failed) {
    f->lines = alloc_n(r, nline, sizeof *f->lines);
    long long line = f->linedefined;
    size_t next_abs = 0;
    for (size_t pc = 0; pc < nline && !r->failed; pc++) {
      signed char d = (signed char)deltas[pc];
      if (d == -128) {
        while (next_abs < nabs && (size_t)abs_pc[next_abs] < pc)
          next_abs++;
        if (next_abs == nabs || (size_t)abs_pc[next_abs] != pc) {
          fail(r, "instruction %zu has no absolute line entry", pc);
          break;
        }
        line = abs_line[next_abs++];
      } else {
        line += d;
      }
      if (line < 0 || line > INT_MAX) {
        fail(r, "instruction %zu: line %lld out of range", pc, line);
        break;
      }
      if (f->lines) f->lines[pc] = (int)line;
    }
  }
  free(abs_pc);
  free(abs_line);
  f->nlocals = get_count(r, 3, "local variable count");
  f->locals = alloc_n(r, f->nlocals, sizeof *f->locals);
  for (size_t i = 0; i < f->nlocals && !r->failed; i++) {
    f->locals[i].name = get_string(r, &f->locals[i].name_len, "local variable name");
    f->locals[i].startpc = get_int(r, "local variable start");
    f->locals[i].endpc = get_int(r, "local variable end");
  }
  size_t nnames = get_count(r, 1, "upvalue name count");
  if (r->failed) return;
  if (nnames != 0 && nnames != f->nupvals) {
    fail(r, "%zu upvalue names for %zu upvalues", nnames, f->nupvals);
    return;
  }
  for (size_t i = 0; i < nnames && !r->failed; i++)
    f->upvals[i].name = get_string(r, &f->upvals[i].name_len, "upvalue name");
}

static void read_function(reader *r, mbxV_chunk_proto *f, int depth) {
  if (depth > MBXV_CHUNK_MAX_DEPTH) {
    fail(r, "functions nested more than %d deep", MBXV_CHUNK_MAX_DEPTH);
    return;
  }
  f->source = get_string(r, &f->source_len, "source name");
  f->linedefined = get_int(r, "line defined");
  f->lastlinedefined = get_int(r, "last line defined");
  f->numparams = get_byte(r, "parameter count");
  f->is_vararg = get_byte(r, "vararg flag");
  f->maxstacksize = get_byte(r, "stack size");
  f->ncode = get_count(r, 4, "instruction count");
  f->code = alloc_n(r, f->ncode, sizeof *f->code);
  f->code_at = r->at;
  if (f->code) get_bytes(r, f->code, f->ncode * sizeof *f->code, "instructions");
  read_constants(r, f);
  read_upvalues(r, f);
  /* A nested function takes at least 12 bytes (its fixed fields and empty counts). */
  f->nprotos = get_count(r, 12, "function count");
  f->protos = alloc_n(r, f->nprotos, sizeof *f->protos);
  for (size_t i = 0; i < f->nprotos && !r->failed; i++)
    read_function(r, &f->protos[i], depth + 1);
  read_debug(r, f);
}

static void free_function(mbxV_chunk_proto *f) {
  if (f->protos)
    for (size_t i = 0; i < f->nprotos; i++)
      free_function(&f->protos[i]);
  free(f->protos);
  free(f->code);
  free(f->lines);
  free(f->k);
  free(f->upvals);
  free(f->locals);
  memset(f, 0, sizeof *f);
}

/* The header lua_dump writes: signature, version 5.4, format 0, the corruption-detecting
   bytes, the sizes of Instruction, lua_Integer and lua_Number, and an integer and a float
   that fix the byte order and the float format. */
static void read_header(reader *r) {
  static const unsigned char start[] = {0x1b, 'L',  'u',  'a',  0x54, 0x00, 0x19, 0x93,
                                        '\r', '\n', 0x1a, '\n', 4,    8,    8};
  if (!need(r, sizeof start, "header")) return;
  for (size_t i = 0; i < sizeof start; i++) {
    if (r->p[r->at] != start[i]) {
      fail(r, "not a Lua 5.4 chunk of this build (header byte %zu is 0x%02x, expected 0x%02x)", i,
           r->p[r->at], start[i]);
      return;
    }
    r->at++;
  }
  int64_t check_int = 0;
  double check_num = 0;
  get_bytes(r, &check_int, sizeof check_int, "header");
  if (!r->failed && check_int != 0x5678) {
    r->at -= sizeof check_int;
    fail(r, "the header's integer is not 0x5678 (another byte order)");
    return;
  }
  get_bytes(r, &check_num, sizeof check_num, "header");
  if (!r->failed && check_num != 370.5) {
    r->at -= sizeof check_num;
    fail(r, "the header's float is not 370.5 (another float format)");
  }
}

int mbxV_chunk_read(const void *bytes, size_t len, mbxV_chunk *out, char *why, size_t why_size) {
  memset(out, 0, sizeof *out);
  if (why && why_size) why[0] = '\0';
  reader r = {.p = bytes, .len = bytes ? len : 0, .why = why, .why_size = why_size};
  read_header(&r);
  out->main_upvalues = get_byte(&r, "main upvalue count");
  read_function(&r, &out->main, 0);
  if (!r.failed && r.at != r.len) fail(&r, "%zu bytes after the chunk", r.len - r.at);
  if (!r.failed && out->main.nupvals != out->main_upvalues)
    fail(&r, "the main function has %zu upvalues, the header says %u", out->main.nupvals,
         out->main_upvalues);
  if (r.failed) {
    mbxV_chunk_free(out);
    return r.failed;
  }
  return 0;
}

void mbxV_chunk_free(mbxV_chunk *c) {
  if (c == NULL) return;
  free_function(&c->main);
  c->main_upvalues = 0;
}
