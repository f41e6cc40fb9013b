/* vm/load.c -- text-only loading with the parser under the budget. */
#include "vm/load.h"

#include <stdint.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "vm/budget.h"
#include "vm/chunk.h"

typedef struct pieces {
  const char *next;
  size_t left, done;
  int started;
} pieces;

/* The size of the next piece once `done` bytes went to the parser. The parser's quadratic
   cases (an `or`/`and` or `elseif` chain walks its whole jump list at each link) make a
   piece's work grow with the text already parsed: pieces shrink past MBXV_LOAD_PIECE_FULL
   bytes so that piece size times bytes done stays about the same, and the work between two
   polls stays that of a 4 KiB piece at 16 KiB, never below 64 bytes. */
static size_t piece_size(size_t done) {
  if (done <= MBXV_LOAD_PIECE_FULL) return MBXV_LOAD_PIECE;
  size_t n = (size_t)MBXV_LOAD_PIECE * MBXV_LOAD_PIECE_FULL / done;
  return n < 64 ? 64 : n;
}

static const char *read_piece(lua_State *L, void *ud, size_t *size) {
  pieces *p = ud;
  size_t want = piece_size(p->done);
  /* Polled before every piece but the first: by then the parser has done the work the
     previous piece asked for. Ending the input early is how a reader stops lua_load. */
  if (p->started && mbxV_poll(L, want / 16 + 1) != MBXV_TRIP_NONE) p->left = 0;
  p->started = 1;
  size_t n = p->left < want ? p->left : want;
  *size = n;
  const char *piece = p->next;
  p->next += n;
  p->left -= n;
  p->done += n;
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

/*
** Lua 5.4.4's getobjname (upstream 7923dbbf, fixed in 5.4.7; not in Debian's package) names
** the variable in an error message by walking back through the instructions that computed
** it, one C recursion per link: an error at the end of `x.a.a.a...` (one GETFIELD per `.a`)
** recursed 100,000 deep and overflowed the host's 8 MiB C stack (12,000 links, 24 KB of
** source, on a 1 MiB thread; the guest's 16 KiB `load` reaches 8,000). The same walk serves
** lua_getinfo's "n", so tracebacks and argument errors take it too.
**
** chain_depth bounds that recursion for every instruction of f, replaying getobjname's rules
** forward: depth[r] is the depth of the walk that starts at the last instruction writing
** register r, with findsetreg's idea of "writing" (LOADNIL its range, CALL and TAILCALL every
** register from A, TFORCALL from A + 2, any other instruction that sets A, register A). A
** MOVE from a lower register, a GETFIELD, a GETTABLE and a SELF with a register key recurse;
** nothing else does. It never underestimates: getobjname stops earlier at a named local, at a
** register set under a jump, or at a constant key, and the bound ignores all three.
*/
#define MAX_NAME_CHAIN 200

/* Opcodes whose A operand is a register they set (lopcodes.c's "A" mode column of 5.4.4). */
static int sets_a(unsigned op) {
  switch (op) {
  case MBXV_OP_SETUPVAL:
  case MBXV_OP_SETTABUP:
  case MBXV_OP_SETTABLE:
  case MBXV_OP_SETI:
  case MBXV_OP_SETFIELD:
  case MBXV_OP_MMBIN:
  case MBXV_OP_MMBINI:
  case MBXV_OP_MMBINK:
  case MBXV_OP_CLOSE:
  case MBXV_OP_TBC:
  case MBXV_OP_JMP:
  case MBXV_OP_EQ:
  case MBXV_OP_LT:
  case MBXV_OP_LE:
  case MBXV_OP_EQK:
  case MBXV_OP_EQI:
  case MBXV_OP_LTI:
  case MBXV_OP_LEI:
  case MBXV_OP_GTI:
  case MBXV_OP_GEI:
  case MBXV_OP_TEST:
  case MBXV_OP_RETURN:
  case MBXV_OP_RETURN0:
  case MBXV_OP_RETURN1:
  case MBXV_OP_TFORPREP:
  case MBXV_OP_TFORCALL:
  case MBXV_OP_SETLIST:
  case MBXV_OP_EXTRAARG:
    return 0;
  default:
    return op < MBXV_OP_COUNT;
  }
}

/* The deepest walk in f (not its nested functions: each has its own code), and in *at the
   instruction where it starts. */
static unsigned chain_depth(const mbxV_chunk_proto *f, const unsigned *active, size_t *at) {
  unsigned depth[256] = {0}, worst = 0;
  /* getobjname stops at once at a register that holds a named local at that pc. */
#define FROM(r) (active && active[pc] > (r) ? 0u : depth[(r)])
  for (size_t pc = 0; pc < f->ncode; pc++) {
    uint32_t i = f->code[pc];
    unsigned op = mbxV_op(i), a = mbxV_arg_a(i), b = mbxV_arg_b(i), c = mbxV_arg_c(i), d = 0;
    switch (op) {
    case MBXV_OP_MOVE:
      if (b < a) d = 1 + FROM(b);
      break;
    case MBXV_OP_GETFIELD:
      d = 1 + FROM(b);
      break;
    case MBXV_OP_GETTABLE:
      d = 1 + (FROM(b) > FROM(c) ? FROM(b) : FROM(c));
      break;
    case MBXV_OP_SELF:
      d = mbxV_arg_k(i) ? 0 : 1 + FROM(c);
      break;
    default:
      break;
    }
    if (d > worst) {
      worst = d;
      *at = pc;
    }
    switch (op) {
    case MBXV_OP_LOADNIL:
      for (unsigned r = a; r <= a + b && r < 256; r++)
        depth[r] = 0;
      break;
    case MBXV_OP_TFORCALL:
      for (unsigned r = a + 2; r < 256; r++)
        depth[r] = 0;
      break;
    case MBXV_OP_CALL:
    case MBXV_OP_TAILCALL:
      for (unsigned r = a; r < 256; r++)
        depth[r] = 0;
      break;
    default:
      if (sets_a(op)) depth[a] = d;
      break;
    }
  }
  return worst;
#undef FROM
}

/* active[pc]: how many locals are live at pc. Locals take registers in the order they become
   live, so register r holds a named local at pc exactly when active[pc] > r (luaF_getlocalname's
   test). NULL without debug information or host memory: the bound then ignores names. */
static unsigned *active_locals(const mbxV_chunk_proto *f) {
  if (f->nlocals == 0 || f->ncode == 0) return NULL;
  long long *delta = calloc(f->ncode + 1, sizeof *delta);
  unsigned *active = malloc(f->ncode * sizeof *active);
  if (delta && active) {
    for (size_t i = 0; i < f->nlocals; i++) {
      const mbxV_chunk_local *v = &f->locals[i];
      size_t from = v->startpc < 0 ? 0 : (size_t)v->startpc;
      size_t to = v->endpc < 0 ? 0 : (size_t)v->endpc;
      if (to > f->ncode) to = f->ncode;
      if (from >= to) continue;
      delta[from]++;
      delta[to]--;
    }
    long long n = 0;
    for (size_t pc = 0; pc < f->ncode; pc++) {
      n += delta[pc];
      active[pc] = n < 0 ? 0u : (unsigned)n;
    }
  } else {
    free(active);
    active = NULL;
  }
  free(delta);
  return active;
}

/* The first function of f's tree (f first, then its nested ones) with a walk deeper than
   MAX_NAME_CHAIN, and in *at where; NULL if none. With names, the locals' names stop walks as
   they stop getobjname's: a stripped dump's answer is only a reason to look again with them. */
static const mbxV_chunk_proto *too_deep(const mbxV_chunk_proto *f, int names, size_t *at) {
  unsigned *active = names ? active_locals(f) : NULL;
  unsigned depth = chain_depth(f, active, at);
  free(active);
  if (depth > MAX_NAME_CHAIN) return f;
  for (size_t i = 0; i < f->nprotos; i++) {
    const mbxV_chunk_proto *g = too_deep(&f->protos[i], names, at);
    if (g) return g;
  }
  return NULL;
}

/* The chunk's name as Lua's messages show it (luaO_chunkid's rules): "=name" and "@file" without
   their mark, any other (the source itself) as [string "its first line..."]. */
static void chunk_id(char *out, size_t size, const char *name) {
  if (name[0] == '=' || name[0] == '@') {
    snprintf(out, size, "%s", name + 1);
    return;
  }
  size_t line = strcspn(name, "\n"), max = size - sizeof "[string \"...\"]";
  int cut = name[line] != '\0' || line > max;
  snprintf(out, size, "[string \"%.*s%s\"]", (int)(line < max ? line : max), name,
           cut ? "..." : "");
}

/* The stripped dump showed a walk that may be too deep: look again with the locals' names.
   Replace the function on top with the refusal, naming the line, or leave it and return
   LUA_OK if the names stop every walk in time. Refuses when the full dump cannot be read. */
static int refuse_chain(lua_State *L, const char *chunk_name) {
  dump_buf b;
  mbxV_chunk c;
  int line = 0;
  if (dump_and_read(L, 0, &b, &c) == 0) {
    size_t at = 0;
    const mbxV_chunk_proto *f = too_deep(&c.main, 1, &at);
    if (f && f->lines) line = f->lines[at];
    mbxV_chunk_free(&c);
    free(b.p);
    if (f == NULL) return LUA_OK;
  }
  lua_pop(L, 1);
  char name[60]; /* LUA_IDSIZE */
  chunk_id(name, sizeof name, chunk_name);
  lua_pushfstring(L,
                  "%s:%d: expression too complex (more than %d chained indexings: Lua 5.4.4 "
                  "could overflow the C stack naming a value in an error)",
                  name, line, MAX_NAME_CHAIN);
  return LUA_ERRSYNTAX;
}

/* The function compiled from text is on top. Refuse it if naming a value could overflow the
   C stack (7923dbbf), replace it with the corrected one if it has the wrong CLOSE (997f11f5).
   The check reads a stripped dump (about a third of the full one's cost: measured on a 15 KB
   chunk); only a function that needs the fix is dumped again whole, so its debug information
   survives the reload. Fails closed: a function that cannot be checked is not run. */
static int check_upstream_bugs(lua_State *L, const char *chunk_name, int has_break) {
  dump_buf b;
  mbxV_chunk c;
  if (dump_and_read(L, 1, &b, &c) != 0) goto no_memory;
  size_t at;
  int deep = too_deep(&c.main, 0, &at) != NULL;
  unsigned found = has_break ? fix_break_close(NULL, &c.main) : 0;
  mbxV_chunk_free(&c);
  free(b.p);
  if (deep) {
    int status = refuse_chain(L, chunk_name);
    if (status != LUA_OK) return status;
  }
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
  pieces p = {text, len, 0, 0};
  int status = lua_load(L, read_piece, &p, chunk_name, "t");
  if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
    lua_pop(L, 1);
    lua_pushliteral(L, "the parse was stopped by a limit");
    return LUA_ERRRUN;
  }
  /* Only a chunk with a `break` can have the pattern; the word anywhere (a string, a
     comment) just costs a dump and a scan. */
  /* A chain of MAX_NAME_CHAIN links takes at least that many tokens (each link is a `.`, `[`,
     `:` or a name), so a shorter text needs no check unless it has a `break`. */
  int has_break = status == LUA_OK && names_break(text, len);
  if (status == LUA_OK && (has_break || len > MAX_NAME_CHAIN))
    status = check_upstream_bugs(L, chunk_name, has_break);
  return status;
}
