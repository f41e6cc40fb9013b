/* vm/heap.h -- the guest heap: a lua_Alloc with a limit and a hard ceiling (malloc or arena). */
#ifndef MBX_VM_HEAP_H
#define MBX_VM_HEAP_H

#include <stddef.h>
#include <stdint.h>

/* Blocks at least this big count as "large": while any is live, single instructions can be
   expensive (comparing or hashing them), so the budget checks the clock more often. */
#define MBXV_LARGE_BLOCK (256 * 1024)
/* A new longest string of at least this many bytes is reported to the budget too (see
   on_pressure): comparing it may cost milliseconds inside one instruction. */
#define MBXV_NOTABLE_STRING (8 * 1024)

typedef struct mbxV_block mbxV_block;
struct mbxV_arena;

typedef struct mbxV_heap {
  size_t limit;      /* soft limit: past it the run is stopped at its next instruction */
  size_t ceiling;    /* hard limit: past it allocations fail (never reached by normal code) */
  size_t used;       /* live bytes: with an arena, the resident pages it holds (whole pages,
                         fragmentation included: mbxV_arena_charged); on malloc, Lua's sizes */
  size_t peak;       /* highest `used` ever seen */
  size_t large_live; /* bytes in live blocks >= MBXV_LARGE_BLOCK */
  /* The biggest string ever allocated in this heap (Lua names the type of a new object in
     the allocator's osize; strings never change size): a bound of the largest live one. */
  size_t largest_string;
  mbxV_block *blocks; /* every live block, so the whole heap can be released without lua_close */
  /* When set, blocks come from this slot arena (vm/arena.h) instead of malloc: no per-block
     header, no live list (the slot is reset as a whole). The accounting is the same. */
  struct mbxV_arena *arena;
  /* Called (with `pressure_ud`) when a growth takes `used` over `limit` (not again while
     `pressure_pending` is set: the budget clears it once it has looked), at every growth
     to a block of at least MBXV_LARGE_BLOCK, and when a string longer than any before (and
     at least MBXV_NOTABLE_STRING) is made. The budget re-arms the running thread's hook at
     count 1 there, so the limits are checked at the next instruction. May be NULL. */
  void (*on_pressure)(void *pressure_ud);
  void *pressure_ud;
  int pressure_pending;
  int refused; /* a growth past the ceiling was refused (the callback runs too) */
} mbxV_heap;

/* ceiling = 1.25 * limit + 1 MiB: room for the error paths (message, traceback) of a run
   that went over the limit, so Lua's allocator almost never fails (a refusal sets the sticky
   memory trip, and guests hold no finalizers or weak tables an emergency collection could
   run: shared/THREATS.md P0 item 8), and yet close enough to the limit that the process's
   resident memory stays within 1.25x the limit plus a constant (issue 9, C). */
size_t mbxV_heap_ceiling_for(size_t limit);
void mbxV_heap_init(mbxV_heap *h, size_t limit);
/* The lua_Alloc: ud is the mbxV_heap. */
void *mbxV_heap_alloc(void *ud, void *ptr, size_t osize, size_t nsize);
/* 1 while used > limit. */
int mbxV_heap_over_limit(const mbxV_heap *h);
/* Free every live block at once (the lua_State is gone afterwards; no Lua code runs). With an
   arena only the counters are cleared: the slot's owner resets the arena itself. */
void mbxV_heap_release_all(mbxV_heap *h);

#endif
