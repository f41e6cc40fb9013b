/* vm/arena.h -- guest heap slots: fixed-address reservations, an in-slot allocator, templates. */
#ifndef MBX_VM_ARENA_H
#define MBX_VM_ARENA_H

#include <pthread.h>
#include <stddef.h>

/*
** A slot is one private anonymous reservation (MAP_NORESERVE: address space, not memory) of a
** power-of-two size class of at least 8x the sandbox's memory limit, between two PROT_NONE
** guard regions so a linear overflow faults instead of reaching a neighbouring mapping. It is
** placed at a random address far from the libraries (vm/arena.c), because guests can observe
** the low bits of addresses inside their slot through hash order.
**
** Layout:  [ mbxV_arena header | user area (the mbxV_vm) | blocks ... bump -> | free | guard ]
**
** Everything the allocator knows lives in the header, and everything Lua knows lives in the
** blocks, so a byte copy of the used prefix [base, bump) is a complete snapshot of a Lua state
** and its allocator. Copied back to the same address, it is that state again: the pointers in
** it are all absolute and all point inside the slot (or at static code and data).
*/

/* Allocator granule: every block is 16-byte aligned (Lua needs 8). */
#define MBXV_ARENA_GRANULE 16
/* Blocks up to this size come from per-size free lists (multiples of 16); larger blocks are
   runs of whole pages. */
#define MBXV_ARENA_SMALL_MAX 4096
#define MBXV_ARENA_CLASSES (MBXV_ARENA_SMALL_MAX / MBXV_ARENA_GRANULE)
#define MBXV_ARENA_PAGE 4096
/* PROT_NONE bytes before and after each slot. */
#define MBXV_ARENA_GUARD ((size_t)64 << 10)
/* Smallest slot: 8x the smallest memory limit a policy accepts (256 KiB). */
#define MBXV_ARENA_MIN_SLOT ((size_t)2 << 20)
/* Dirty bytes past the template that a freed slot keeps resident: the next sandbox in the slot
   almost always touches them again, and a madvise plus the page faults that follow it cost more
   than the tiny run they would serve. Everything beyond is returned to the OS. */
#define MBXV_ARENA_KEEP_RESIDENT ((size_t)64 << 10)
/* Live slots a pool allows by default (reserved address space: 4096 x 512 MiB = 2 TiB for
   the default 64 MiB limit, well inside the 128 TiB of a 47-bit address space). */
#define MBXV_POOL_DEFAULT_CAP 4096u

/* A free run of whole pages. The node lives in the run's own first bytes, so the list costs no
   memory outside the slot and is part of every snapshot. */
typedef struct mbxV_free_run {
  struct mbxV_free_run *next;
  size_t pages;
} mbxV_free_run;

/* The slot header, at the slot's base address. */
typedef struct mbxV_arena {
  char *base;          /* == (char *)this */
  char *end;           /* end of the usable bytes (the guard starts here) */
  char *bump;          /* everything in [bump, end) has never been handed out */
  char *high;          /* highest bump since the last trim: pages below it may be dirty */
  char *user;          /* the user area: fixed address, inside the snapshot */
  mbxV_free_run *runs; /* free page runs, sorted by address, never adjacent */
  void *small[MBXV_ARENA_CLASSES]; /* free blocks of 16, 32, ... 4096 bytes (LIFO lists) */
} mbxV_arena;

/* Lay an empty arena over [base, base + size) (size a multiple of MBXV_ARENA_PAGE), with a
   zeroed user area of user_size bytes right after the header. */
mbxV_arena *mbxV_arena_init(void *base, size_t size, size_t user_size);

/* Lua's allocation contract without the accounting (vm/heap.c does that): ptr NULL = new block
   (osize is ignored), nsize 0 = free (returns NULL), otherwise resize keeping the contents.
   Returns NULL only when a growth does not fit in the slot (then ptr is untouched). A shrink
   never fails. osize must be the size the block was last given (Lua guarantees it), because
   blocks carry no header. */
void *mbxV_arena_realloc(mbxV_arena *a, void *ptr, size_t osize, size_t nsize);

/* Bytes of the used prefix [base, bump): what a snapshot has to copy. */
size_t mbxV_arena_prefix(const mbxV_arena *a);

/* Return to the OS (MADV_DONTNEED) every page that lies wholly in free space: inside free page
   runs and between the bump pointer and the high-water mark. Only when no Lua code can be
   running in the arena: the pages read back as zeros afterwards. Returns the bytes returned. */
size_t mbxV_arena_trim(mbxV_arena *a);

/* Forget every block (the arena is empty again) but keep the user area's contents; the
   high-water mark is kept so a later trim still finds the dirty pages. */
void mbxV_arena_clear(mbxV_arena *a, size_t user_size);

/* ---- slots and the pool ---- */

typedef struct mbxV_pool mbxV_pool;

/* Host-side descriptor of a slot: stays valid (same address) for the slot's whole life, so the
   state inside the slot may point at it. */
typedef struct mbxV_slot {
  mbxV_pool *pool;
  mbxV_arena *arena;    /* == the slot's base address */
  size_t size;          /* usable bytes, a power of two */
  unsigned size_class;  /* log2(size) */
  char *template_bytes; /* malloc'd copy of a pristine prefix, or NULL */
  size_t template_len;
  struct mbxV_slot *next; /* idle list link */
} mbxV_slot;

typedef enum mbxV_take_result {
  MBXV_TAKE_OK = 0,
  MBXV_TAKE_CAP,         /* the pool's cap on live slots is reached */
  MBXV_TAKE_RESERVE_CAP, /* the slot would pass the pool's cap on reserved address space */
  MBXV_TAKE_NO_SPACE     /* the reservation (or its descriptor) could not be made */
} mbxV_take_result;

/* The reservation size for a memory limit: a power of two >= 8 * limit (and >= 2 MiB).
   0 when it would not fit in a size_t. */
size_t mbxV_slot_size_for(size_t limit);

/* A pool of slots, shared by the threads of one runtime (a mutex guards it). cap bounds the
   slots reserved at once; 0 means MBXV_POOL_DEFAULT_CAP. NULL when out of memory. */
mbxV_pool *mbxV_pool_new(unsigned cap);
/* Unmap every idle slot and free the pool. Every slot must have been given back. */
void mbxV_pool_free(mbxV_pool *p);
/* Slots currently handed out. */
unsigned mbxV_pool_live(mbxV_pool *p);
/* Address space currently reserved by the pool's slots (live and idle, guards included). */
size_t mbxV_pool_reserved(mbxV_pool *p);
/* The caps: live slots (0 = MBXV_POOL_DEFAULT_CAP) and reserved bytes (0 = none). Lowering a
   cap below the current figure only refuses new slots; nothing live is touched. */
void mbxV_pool_set_caps(mbxV_pool *p, unsigned cap, size_t reserve_cap);
void mbxV_pool_get_caps(mbxV_pool *p, unsigned *cap, size_t *reserve_cap);

/* Hand out a slot of the size class for limit: an idle one of that class (its template, if
   any, kept) or a fresh reservation. The arena inside is not initialised. To stay under the
   caps, idle slots of other classes may be unmapped first. */
mbxV_take_result mbxV_pool_take(mbxV_pool *p, size_t limit, mbxV_slot **out);
/* Take the slot back (from any thread): its dirty pages past the template (beyond
   MBXV_ARENA_KEEP_RESIDENT) are returned to the OS first. Nothing in the slot may be used
   afterwards. */
void mbxV_pool_give(mbxV_slot *s);

/* Copy the arena's used prefix aside as the slot's template (replacing any earlier one).
   Returns 0 when out of host memory (the slot then simply has no template). */
int mbxV_slot_snapshot(mbxV_slot *s);
/* Copy the template back over the arena: the state is exactly as it was at the snapshot. */
void mbxV_slot_restore(mbxV_slot *s);
/* Copy a snapshot of this slot's prefix (len bytes, from mbxV_arena_prefix at the time) back
   over the arena, except the bytes [hole_at, hole_at + hole_len), which keep their current
   contents (state that belongs to the sandbox, not to the snapshot, and may be written by
   another thread). Pages the replaced state dirtied past the restored prefix (beyond
   MBXV_ARENA_KEEP_RESIDENT) are returned to the OS. No Lua code may be running. */
void mbxV_slot_restore_prefix(mbxV_slot *s, const char *bytes, size_t len, size_t hole_at,
                              size_t hole_len);

#endif
