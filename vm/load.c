/* vm/load.c -- text-only loading with the parser under the budget. */
#include "vm/load.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vm/budget.h"
#include "vm/chunk.h"

typedef struct pieces {
  const char *next;
  size_t left;
  int started;
} pieces;

static const char *read_piece(lua_State *L, void *ud, size_t *size) {
  pieces *p = ud;
  /* Polled before every piece but the first: by then the parser has done the work the
     previous piece asked for. Ending the input early is how a reader stops lua_load. */
  if (p->started && mbxV_poll(L, MBXV_LOAD_PIECE / 16) != MBXV_TRIP_NONE) p->left = 0;
  p->started = 1;
  size_t n = p->left < MBXV_LOAD_PIECE ? p->left : MBXV_LOAD_PIECE;
  *size = n;
  const char *piece = p->next;
  p->next += n;
  p->left -= n;
  return n ? piece : NULL;
}

/*
** Lua 5.4.4's wrong `break` out of a generic for (upstream 997f11f5, fixed in 5.4.5; Debian
** does not carry it). When the loop body has a local captured by a closure, the break's
** CLOSE names the first loop variable's register (A + 4) instead of the loop's base A, so
** the closing value in A + 3 is never closed and stays on the thread's to-be-closed list.
** A later `local x <close>` at a lower register then walks that list backwards past the
** stack's end writing 2-byte markers: a host SIGSEGV or heap corruption
** (tests/escape/lua_bug_break_tbc.lua).
**
** The instruction after a TFORLOOP is the loop's own exit: its break label, which the
** fixed compiler closes at A, and every other instruction the 5.4.4 compiler puts there
** closes at most A (the loop's variables are gone by then). So a CLOSE above A there is
** exactly the bug, and rewriting it to CLOSE A is exactly the fixed compiler's output.
**
** fix_break_close counts those instructions in f and its nested functions, and rewrites
** them in bytes (the dump f was read from) unless bytes is NULL.
*/
static unsigned fix_break_close(unsigned char *bytes, const mbxV_chunk_proto *f) {
  unsigned fixed = 0;
  for (size_t pc = 0; pc + 1 < f->ncode; pc++) {
    uint32_t loop = f->code[pc], next = f->code[pc + 1];
    if (mbxV_op(loop) != MBXV_OP_TFORLOOP || mbxV_op(next) != MBXV_OP_CLOSE ||
        mbxV_arg_a(next) <= mbxV_arg_a(loop))
      continue;
    uint32_t good = (next & ~(0xffu << 7)) | (mbxV_arg_a(loop) << 7);
    if (bytes) memcpy(bytes + f->code_at + (pc + 1) * sizeof good, &good, sizeof good);
    fixed++;
  }
  for (size_t i = 0; i < f->nprotos; i++)
    fixed += fix_break_close(bytes, &f->protos[i]);
  return fixed;
}

typedef struct dump_buf {
  unsigned char *p;
  size_t n, cap;
  int failed;
} dump_buf;

/* Host memory, freed before returning: the dump is about the size of the function just
   compiled on the guest heap, whose source the source limits bound. */
static int write_dump(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  dump_buf *b = ud;
  if (n > SIZE_MAX - b->n) b->failed = 1;
  if (!b->failed && b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + n && cap <= SIZE_MAX / 2)
      cap *= 2;
    unsigned char *grown = cap >= b->n + n ? realloc(b->p, cap) : NULL;
    if (grown == NULL)
      b->failed = 1;
    else {
      b->p = grown;
      b->cap = cap;
    }
  }
  if (b->failed) return 1; /* stops lua_dump */
  memcpy(b->p + b->n, p, n);
  b->n += n;
  return 0;
}

typedef struct whole {
  const unsigned char *p;
  size_t n;
} whole;

static const char *read_whole(lua_State *L, void *ud, size_t *size) {
  (void)L;
  whole *w = ud;
  *size = w->n;
  w->n = 0;
  return *size ? (const char *)w->p : NULL;
}

/* Dump the function on top (strip: without debug information) into b and read it into c.
   Returns 0, or -1 with nothing to free. */
static int dump_and_read(lua_State *L, int strip, dump_buf *b, mbxV_chunk *c) {
  char why[128];
  *b = (dump_buf){0};
  if (lua_dump(L, write_dump, b, strip) == 0 && !b->failed &&
      mbxV_chunk_read(b->p, b->n, c, why, sizeof why) == 0)
    return 0;
  free(b->p);
  return -1;
}

/* The function compiled from text is on top. Replace it with the corrected one if it has the
   bug's pattern. The check reads a stripped dump (about a third of the full one's cost:
   measured on a 15 KB chunk); only a function that needs the fix is dumped again whole, so
   its debug information survives the reload. Fails closed: a function that cannot be
   checked is not run. */
static int fix_upstream_bugs(lua_State *L, const char *chunk_name) {
  dump_buf b;
  mbxV_chunk c;
  if (dump_and_read(L, 1, &b, &c) != 0) goto no_memory;
  unsigned found = fix_break_close(NULL, &c.main);
  mbxV_chunk_free(&c);
  free(b.p);
  if (found == 0) return LUA_OK;
  if (dump_and_read(L, 0, &b, &c) != 0) goto no_memory;
  fix_break_close(b.p, &c.main);
  mbxV_chunk_free(&c);
  lua_pop(L, 1);
  whole w = {b.p, b.n};
  /* Our own dump, operands changed: lua_load trusts it as it trusts the bytecode cache's
     (vm/bytecode_cache.c); it allocates on the guest heap. */
  int status = lua_load(L, read_whole, &w, chunk_name, "b");
  free(b.p);
  return status;
no_memory:
  lua_pop(L, 1);
  lua_pushliteral(L, "not enough memory");
  return LUA_ERRMEM;
}

/* Does the text hold "break"? memchr to each 'k' (rarer in Lua than 'b'), as vm/run.c's
   names_env: a small run's fixed cost has no room for memmem's set-up. */
static int names_break(const char *p, size_t n) {
  const char *end = p + n, *k;
  while ((k = memchr(p, 'k', (size_t)(end - p))) != NULL) {
    if (k - (end - n) >= 4 && memcmp(k - 4, "brea", 4) == 0) return 1;
    p = k + 1;
  }
  return 0;
}

int mbxV_load_text(lua_State *L, const char *text, size_t len, const char *chunk_name) {
  pieces p = {text, len, 0};
  int status = lua_load(L, read_piece, &p, chunk_name, "t");
  if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
    lua_pop(L, 1);
    lua_pushliteral(L, "the parse was stopped by a limit");
    return LUA_ERRRUN;
  }
  /* Only a chunk with a `break` can have the pattern; the word anywhere (a string, a
     comment) just costs a dump and a scan. */
  if (status == LUA_OK && names_break(text, len)) status = fix_upstream_bugs(L, chunk_name);
  return status;
}
