/* vm/heap.c -- the guest allocator: limit accounting, hard ceiling, release-all teardown. */
#include "vm/heap.h"

#include <stdlib.h>

#include <lua.h>

#include "vm/arena.h"

/* Each block carries a small header linking it into the heap's live list. That lets a sandbox
   be torn down by freeing the list instead of calling lua_close, which would run guest code
   (finalizers, pending __close) after the budget is gone. 16 bytes keeps malloc's alignment. */
struct mbxV_block {
  mbxV_block *next;
  mbxV_block *prev;
};

#define HEADER sizeof(mbxV_block)

size_t mbxV_heap_ceiling_for(size_t limit) {
  return limit + limit / 4 + ((size_t)1 << 20);
}

void mbxV_heap_init(mbxV_heap *h, size_t limit) {
  h->limit = limit;
  h->ceiling = mbxV_heap_ceiling_for(limit);
  h->used = 0;
  h->peak = 0;
  h->large_live = 0;
  h->largest_string = 0;
  h->blocks = NULL;
  h->arena = NULL;
  h->on_pressure = NULL;
  h->pressure_ud = NULL;
  h->pressure_pending = 0;
  h->refused = 0;
}

int mbxV_heap_over_limit(const mbxV_heap *h) {
  return h->used > h->limit;
}

static void link_block(mbxV_heap *h, mbxV_block *b) {
  b->prev = NULL;
  b->next = h->blocks;
  if (h->blocks) h->blocks->prev = b;
  h->blocks = b;
}

static void unlink_block(mbxV_heap *h, mbxV_block *b) {
  if (b->prev)
    b->prev->next = b->next;
  else
    h->blocks = b->next;
  if (b->next) b->next->prev = b->prev;
}

static void account_large(mbxV_heap *h, size_t osize, size_t nsize) {
  if (osize >= MBXV_LARGE_BLOCK) h->large_live -= osize;
  if (nsize >= MBXV_LARGE_BLOCK) h->large_live += nsize;
}

static void account(mbxV_heap *h, size_t osize, size_t nsize) {
  h->used = h->used - osize + nsize;
  if (h->used > h->peak) h->peak = h->used;
  account_large(h, osize, nsize);
}

/* With an arena, `used` is what the arena holds resident (whole pages: vm/arena.h), so page
   rounding and fragmentation are the guest's, and the ceiling bounds real memory. */
static void account_arena(mbxV_heap *h, size_t osize, size_t nsize) {
  h->used = mbxV_arena_charged(h->arena);
  if (h->used > h->peak) h->peak = h->used;
  size_t moving = h->arena->moving_peak; /* a growth that moved: both copies at once */
  h->arena->moving_peak = 0;
  if (moving > h->peak) h->peak = moving;
  account_large(h, osize, nsize);
}

/* Lua answers NULL with an emergency collection and a catchable "not enough memory". That
   collection is harmless here only because guests can have neither finalizers nor weak
   tables; the refusal itself ends the run (the budget trips the memory limit). */
static void *refuse(mbxV_heap *h) {
  h->refused = 1;
  if (h->on_pressure) h->on_pressure(h->pressure_ud);
  return NULL;
}

void *mbxV_heap_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  mbxV_heap *h = ud;
  int notable = 0; /* a new longest string the budget should size its hook interval by */
  /* When ptr is NULL, osize encodes the object type, not a size (Lua manual 4.6). */
  if (ptr == NULL) {
    /* The biggest string block ever made here, an upper bound of the largest live string
       (strings never grow or shrink): the budget sizes its hook interval by it, since one
       `<` of NUL-laden strings costs about 8 ns per byte in one instruction (issue 9, B.3). */
    if (osize == LUA_TSTRING && nsize > h->largest_string) {
      h->largest_string = nsize;
      notable = nsize >= MBXV_NOTABLE_STRING;
    }
    osize = 0;
  }
  if (nsize == 0) {
    if (ptr && h->arena) {
      mbxV_arena_realloc(h->arena, ptr, osize, 0);
      account_arena(h, osize, 0);
    } else if (ptr) {
      mbxV_block *b = (mbxV_block *)ptr - 1;
      unlink_block(h, b);
      free(b);
      account(h, osize, 0);
    }
    return NULL;
  }
  /* Shrinks never fail: Lua assumes they succeed. Growth is refused only past the ceiling. */
  size_t grow = nsize > osize ? nsize - osize : 0;
  void *result;
  if (h->arena) {
    /* The arena measures the growth in resident pages, with both copies of a moved block
       counted, and refuses what would pass the ceiling. Below it, it fails only when the
       slot (8x the limit) is used up. Shrinks never fail. */
    result = mbxV_arena_realloc_within(h->arena, ptr, osize, nsize, h->ceiling);
    if (result == NULL) return refuse(h);
    account_arena(h, osize, nsize);
  } else {
    if (grow > 0 && (nsize > SIZE_MAX - HEADER || h->used + grow > h->ceiling)) return refuse(h);
    mbxV_block *old = ptr ? (mbxV_block *)ptr - 1 : NULL;
    if (old) unlink_block(h, old);
    mbxV_block *b = realloc(old, HEADER + nsize);
    if (b == NULL) {
      if (old) link_block(h, old); /* realloc failure leaves the old block intact */
      return NULL;
    }
    link_block(h, b);
    result = b + 1;
    account(h, osize, nsize);
  }
  /* A large block means an instruction that copies or scans megabytes may follow (or just
     ran): have the hook look at the clock at the next instruction. Costs one hook call per
     block of at least 256 KiB, nothing next to copying it. */
  int large = nsize >= MBXV_LARGE_BLOCK || notable;
  if (h->on_pressure && grow > 0 && (large || (h->used > h->limit && !h->pressure_pending))) {
    h->pressure_pending = 1;
    h->on_pressure(h->pressure_ud);
  }
  return result;
}

void mbxV_heap_release_all(mbxV_heap *h) {
  mbxV_block *b = h->arena ? NULL : h->blocks;
  while (b) {
    mbxV_block *next = b->next;
    free(b);
    b = next;
  }
  h->blocks = NULL;
  h->used = 0;
  h->large_live = 0;
}
