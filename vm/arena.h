/* vm/arena.h -- guest heap slots: fixed-address reservations, an in-slot allocator, templates. */
#ifndef MBX_VM_ARENA_H
#define MBX_VM_ARENA_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/*
** A slot is one private anonymous reservation (MAP_NORESERVE: address space, not memory) of a
** power-of-two size class of at least 8x the sandbox's memory limit, between two PROT_NONE
** guard regions so a linear overflow faults instead of reaching a neighbouring mapping. It is
** placed at a random address far from the libraries (vm/arena.c), because guests can observe
** the low bits of addresses inside their slot through hash order.
**
** Layout:  [ mbxV_arena header | user area (the mbxV_vm) | blocks ... bump -> | free | guard ]
**
** Everything the allocator knows lives in the header and in the blocks' own boundary tags,
** and everything Lua knows lives in the blocks, so a byte copy of the used prefix
** [base, bump) is a complete snapshot of a Lua state and its allocator. Copied back to the
** same address, it is that state again: the pointers in it are all absolute and all point
** inside the slot (or at static code and data). Copied into another slot of the same size
** class, placed congruent modulo 2^32, it is that state again once the base difference is
** added to the words that point into the prefix (mbxV_shared: one template per size class,
** vm/arena.c says why that is sound).
**
** The allocator is a TLSF (two-level segregated fit) over boundary-tagged blocks: every block
** starts with one size word; a free block also holds its list links and, in its last word, a
** pointer to its start, so freeing merges with both neighbours in O(1) and any free space
** serves any size (a per-size free list would keep memory freed at one size from every
** other: issue 9, C.1). What the guest is charged (mbxV_arena_charged) is resident memory:
** every page of the used prefix except the pages wholly inside free blocks, which are
** returned to the OS (MADV_DONTNEED) in batches, so fragmentation costs the guest, not the
** host.
*/

/* Allocator granule: every block and payload is 8-byte aligned (Lua needs 8: LUAI_MAXALIGN). */
#define MBXV_ARENA_GRANULE 8
#define MBXV_ARENA_PAGE 4096
/* Bytes of a block before its payload (its size word), and the smallest block: a free block
   needs its size word, two list links and its trailing start pointer. */
#define MBXV_ARENA_HEADER 8
#define MBXV_ARENA_MIN_BLOCK 32
/* TLSF geometry: 8 second-level lists per power of two; sizes below 64 bytes are one first
   level of exact 8-byte classes; the last first level (blocks from 2^40 up) takes every
   larger size. 35 x 8 list heads: the control block is 2.3 KiB, in every template. */
#define MBXV_TLSF_SL_LOG2 3
#define MBXV_TLSF_SL (1 << MBXV_TLSF_SL_LOG2)
#define MBXV_TLSF_FL_SHIFT (MBXV_TLSF_SL_LOG2 + 3)
#define MBXV_TLSF_FL_MAX_LOG2 40
#define MBXV_TLSF_FL (MBXV_TLSF_FL_MAX_LOG2 - MBXV_TLSF_FL_SHIFT + 1)
/* Pages that may be resident although no block uses them (freed pages not yet returned)
   whatever the owner's memory limit: past this many, and past what the limit leaves (the
   arena's free_allowance), every free block's inside pages go back to the OS. Resident memory
   stays within max(the limit, the charge + 1 MiB), and a guest that frees and builds the same
   megabytes again reuses pages it already has instead of faulting them in each time. */
#define MBXV_ARENA_RETURN_BATCH 256
/* PROT_NONE bytes before and after each slot. */
#define MBXV_ARENA_GUARD ((size_t)64 << 10)
/* Smallest slot: 8x the smallest memory limit a policy accepts (256 KiB). */
#define MBXV_ARENA_MIN_SLOT ((size_t)2 << 20)
/* Dirty bytes past the template that a freed slot keeps resident: the next sandbox in the slot
   almost always touches them again, and a madvise plus the page faults that follow it cost more
   than the tiny run they would serve. Everything beyond is returned to the OS. */
#define MBXV_ARENA_KEEP_RESIDENT ((size_t)64 << 10)
/* Slots of a pool that keep a relocated copy of their class's shared template (mbxV_slot). */
#define MBXV_RELOC_COPIES 16u
/* Live slots a pool allows by default (reserved address space: 4096 x 512 MiB = 2 TiB for
   the default 64 MiB limit, well inside the 128 TiB of a 47-bit address space). */
#define MBXV_POOL_DEFAULT_CAP 4096u

/* The slot header, at the slot's base address. */
typedef struct mbxV_arena {
  char *base;         /* == (char *)this */
  char *end;          /* end of the usable bytes (the guard starts here) */
  char *heap;         /* the first block */
  char *bump;         /* everything in [bump, end) has never been handed out; the block
                          ending at bump, if any, is never free (it would have merged) */
  char *high;         /* highest bump since the last trim: pages below it may be dirty */
  char *user;         /* the user area: fixed address, inside the snapshot */
  size_t free_inside; /* pages wholly inside free blocks (beyond their tags): not charged */
  size_t unreturned;  /* pages freed since the last return to the OS (an upper bound) */
  /* Bytes the charge plus the unreturned pages may reach before freed pages go back to the
     OS (the owner's memory limit, set for each sandbox: vm/vm.c); 0 returns them each batch. */
  size_t free_allowance;
  size_t moving_peak; /* the charge while a moved block's two copies both existed, for the
                          heap's peak (it reads and clears it); 0 when none since */
  /* Set while a template is built (vm/vm.c): every byte handed out, grown into or left as the
     slack of a shrunk block is zeroed, so the template holds only what Lua wrote (no stale
     bytes a relocation could take for a pointer). 0 in every template and every sandbox. */
  int zero_fill;
  uint64_t fl_bitmap; /* first levels with a non-empty list */
  uint8_t sl_bitmap[MBXV_TLSF_FL];
  char *free_lists[MBXV_TLSF_FL][MBXV_TLSF_SL];
} mbxV_arena;

/* Lay an empty arena over [base, base + size) (size a multiple of MBXV_ARENA_PAGE), with a
   zeroed user area of user_size bytes right after the header. */
mbxV_arena *mbxV_arena_init(void *base, size_t size, size_t user_size);

/* Lua's allocation contract without the accounting (vm/heap.c does that): ptr NULL = new block
   (osize is ignored), nsize 0 = free (returns NULL), otherwise resize keeping the contents.
   Returns NULL only when a growth does not fit in the slot (then ptr is untouched). A shrink
   never fails and never moves. osize is the size Lua gave the block last (only its first
   osize bytes are copied when a growth moves it). */
void *mbxV_arena_realloc(mbxV_arena *a, void *ptr, size_t osize, size_t nsize);
/* The same, but a growth that would take mbxV_arena_charged past cap is refused (NULL, ptr
   untouched) — measured while a moved block's old and new copies both exist. */
void *mbxV_arena_realloc_within(mbxV_arena *a, void *ptr, size_t osize, size_t nsize, size_t cap);

/* Bytes the arena holds resident for its owner: every page of the used prefix [base, bump)
   (header, user area and blocks) except the pages wholly inside free blocks. A page that
   holds one live byte is charged whole. */
static inline size_t mbxV_arena_charged(const mbxV_arena *a) {
  size_t prefix = (size_t)(a->bump - a->base) + MBXV_ARENA_PAGE - 1;
  return prefix / MBXV_ARENA_PAGE * MBXV_ARENA_PAGE - a->free_inside * MBXV_ARENA_PAGE;
}

/* Bytes of the used prefix [base, bump): what a snapshot has to copy. */
size_t mbxV_arena_prefix(const mbxV_arena *a);
/* Copy the first len bytes of the arena (len <= the prefix) to dst: a memcpy, except that
   ASan builds lift the poison on free space around it. */
void mbxV_arena_copy_out(const mbxV_arena *a, char *dst, size_t len);
/* A host buffer for a copy of a prefix (a template, a shape, a checkpoint): page-aligned, so
   a restore's memcpy into the page-aligned slot never has its source 16 bytes short of a page
   boundary relative to it (glibc's memcpy on this VM's AMD EPYC took 55 us instead of 1.4 us
   for 49 KB at that offset, and malloc gives any). Released with free(). NULL: no memory. */
void *mbxV_copy_alloc(size_t len);

/* Return to the OS (MADV_DONTNEED) every page that lies wholly in free space: inside free
   blocks (beyond their tags) and between the bump pointer and the high-water mark. Safe while
   Lua runs (the allocator does it itself every MBXV_ARENA_RETURN_BATCH freed pages): no one
   reads free space. Returns the bytes returned. */
size_t mbxV_arena_trim(mbxV_arena *a);

/* Forget every block (the arena is empty again) but keep the user area's contents; the
   high-water mark is kept so a later trim still finds the dirty pages. */
void mbxV_arena_clear(mbxV_arena *a, size_t user_size);

/* ---- slots and the pool ---- */

typedef struct mbxV_pool mbxV_pool;

/* A pristine template shared by every congruent slot of one size class (one per class per
   pool, written once, freed with the pool): the used prefix of the slot it was built in, and
   the indexes of the words in it that hold a pointer into that prefix. A slot at another base
   gets the bytes with `delta` added to exactly those words (vm/arena.c: why that is sound). */
typedef struct mbxV_shared {
  char *bytes;
  size_t len;
  uintptr_t base;  /* the address it was built at */
  uint32_t *reloc; /* word indexes into bytes, ascending */
  size_t nreloc;
} mbxV_shared;

/* Host-side descriptor of a slot: stays valid (same address) for the slot's whole life, so the
   state inside the slot may point at it. */
typedef struct mbxV_slot {
  mbxV_pool *pool;
  mbxV_arena *arena;    /* == the slot's base address */
  size_t size;          /* usable bytes, a power of two */
  unsigned size_class;  /* log2(size) */
  char *template_bytes; /* malloc'd copy of a pristine prefix, or NULL */
  size_t template_len;
  /* One shaped template (vm/vm.h, mbxV_vm_shape_save): the pristine state with one policy
     shape's host functions installed, and the exact shape description it was built for
     (compared in full: no digest, so no collision). A newer shape replaces it. */
  char *shape_bytes;
  size_t shape_len;
  char *shape_key;
  size_t shape_key_len;
  size_t shape_peak; /* heap.peak right after the install: what that install needed */
  /* The slot's base is congruent to the pool's other slots modulo 2^32 (vm/arena.c): it may
     use its class's shared template. 0 for a slot mmap placed anywhere (TSan builds, or a
     full slot space). */
  int congruent;
  /* The class's shared plain template already relocated to this slot, so restoring it is one
     memcpy, as in the slot that built it; kept for at most MBXV_RELOC_COPIES slots of a pool
     (a few busy slots get it, 10,000 live sandboxes do not pay 10,000 copies). */
  char *reloc_copy;
  /* vm/first_run.h: what preparing one repeated text did to this slot's pristine state, for
     the next fresh sandbox here to replay (NULL until a text came twice). */
  struct mbxV_first_run *first_run;
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

/* The shared template of s's size class, or NULL (none built yet, or s is not congruent). */
const mbxV_shared *mbxV_slot_shared(const mbxV_slot *s);
/* Make the arena's used prefix its class's shared template, if the class has none and s is
   congruent. Called right after a pristine state was built in the arena with zero_fill set
   (and before anything else ran in it); the words [hole_at, hole_at + hole_len) belong to one
   sandbox and are set again after every restore, so they are never relocated. Refuses (0;
   the caller keeps a per-slot template instead) when a word that points into the prefix is
   misaligned or a non-pointer could be mistaken for one (vm/arena.c), or out of host memory.
   Returns 1 when the class has a shared template afterwards (this one or a racing one). */
int mbxV_slot_share(mbxV_slot *s, size_t hole_at, size_t hole_len);
/* A shaped template shared by a size class (vm/vm.h, mbxV_vm_shape_save): the plain shared
   template with one policy shape's host functions installed, its exact shape description and
   the peak its install reached. One per class per pool; a newer shape replaces it (holders
   keep theirs alive through the count). */
typedef struct mbxV_shape {
  mbxV_shared t;
  char *key;
  size_t key_len;
  size_t peak;
  unsigned refs; /* under the pool's lock: the pool's own reference and every holder's */
  /* Set under the pool's lock when the shape is made, never repeated in the pool (from 1): a
     shape freed and made again at the same address is another shape for whoever keyed
     something by the old one's bytes (vm/first_run.c). */
  uint64_t gen;
} mbxV_shape;

/* The class's shaped template when it was made for exactly this key and limit held its
   install's peak, with a reference the caller drops with mbxV_pool_shape_put; else NULL
   (also for a slot that is not congruent). */
mbxV_shape *mbxV_pool_shape_get(mbxV_slot *s, const char *key, size_t key_len, size_t limit);
void mbxV_pool_shape_put(mbxV_pool *p, mbxV_shape *sh);
/* Make the arena's used prefix its class's shaped template for key (replacing the class's
   last one), like mbxV_slot_share: the state must have been restored from the class's shared
   template and the install run with zero_fill set. Returns 1 when kept. */
int mbxV_slot_share_shape(mbxV_slot *s, const char *key, size_t key_len, size_t peak,
                          size_t hole_at, size_t hole_len);

/* Copy the shared template t over s's arena, except [hole_at, hole_at + hole_len) (which
   keeps its contents; hole_len 0 for none), and relocate it to s's base: every pointer word
   gets s's base minus t's added, and the arena's own bounds (end, the high-water mark) are
   set for s. Pages the replaced state dirtied past the prefix (beyond
   MBXV_ARENA_KEEP_RESIDENT) are returned to the OS. The caller re-points whatever in its user
   area refers to host memory of one slot (the vm's slot descriptor). */
void mbxV_slot_restore_shared(mbxV_slot *s, const mbxV_shared *t, size_t hole_at, size_t hole_len);
/* The bytes the last mbxV_slot_restore_shared of s copied from when they were the class's
   plain template in the slot that built it, or this slot's relocated copy of it (both live
   as long as the pool); NULL after any other restore, and in slots that relocate in place.
   What vm/first_run.c keys a recording by. */
const char *mbxV_slot_plain_source(const mbxV_slot *s, const mbxV_shared *t);
/* The same for a restore from the class's shaped template sh (held by the caller): sh's bytes
   in the slots that may keep a recording (the one that built sh, and those
   mbxV_slot_plain_source names a source for), with *gen set to sh's generation; NULL
   elsewhere. The pair, not the pointer, names the bytes: a later shape may reuse the address. */
const char *mbxV_slot_shape_source(const mbxV_slot *s, const mbxV_shape *sh, uint64_t *gen);
/* Write n runs {offset, length} of bytes (concatenated) into s's arena, where Lua's own
   allocation would have written them (vm/first_run.c), and raise the high-water mark over
   the blocks they add as block_new does. ASan builds lift and restore the free space's
   poison around it, as a restore does. extent: the end of the last run. */
void mbxV_slot_patch(mbxV_slot *s, const uint32_t (*runs)[2], size_t n, const char *bytes,
                     size_t extent);

/* Copy the arena's used prefix aside as the slot's template (replacing any earlier one).
   Returns 0 when out of host memory (the slot then simply has no template). */
int mbxV_slot_snapshot(mbxV_slot *s);
/* Copy the template back over the arena: the state is exactly as it was at the snapshot. */
void mbxV_slot_restore(mbxV_slot *s);
/* The same for any snapshot of this slot's prefix (len bytes from mbxV_arena_prefix). */
void mbxV_slot_restore_bytes(mbxV_slot *s, const char *bytes, size_t len);
/* Shaped templates restored (hits) and saved (misses that built one) by this pool's slots:
   counters for tests and benchmarks. */
/* Forget the slot's shaped template, if any. */
void mbxV_slot_drop_shape(mbxV_slot *s);
void mbxV_pool_shape_counts(mbxV_pool *p, uint64_t *hits, uint64_t *saves);
void mbxV_pool_count_shape(mbxV_pool *p, int hit);
/* Copy a snapshot of this slot's prefix (len bytes, from mbxV_arena_prefix at the time) back
   over the arena, except the bytes [hole_at, hole_at + hole_len), which keep their current
   contents (state that belongs to the sandbox, not to the snapshot, and may be written by
   another thread). Pages the replaced state dirtied past the restored prefix (beyond
   MBXV_ARENA_KEEP_RESIDENT) are returned to the OS. No Lua code may be running. */
void mbxV_slot_restore_prefix(mbxV_slot *s, const char *bytes, size_t len, size_t hole_at,
                              size_t hole_len);

/* ---- hibernation (vm/hibernate.c) ---- */

/* The pristine bytes a hibernation image of s is a delta against: the slot's own template, or
   its class's shared plain template (its relocated copy where s keeps one). When the bytes are
   the shared template as built elsewhere, *reloc lists its pointer words (*nreloc of them) and
   *delta is what s adds to each (as mbxV_slot_restore_shared does); else *nreloc is 0. NULL
   (*len 0) when the slot has no template. Valid while s is held: nothing replaces them then. */
const char *mbxV_slot_reference(const mbxV_slot *s, size_t *len, const uint32_t **reloc,
                                size_t *nreloc, uintptr_t *delta);
/* Release every page of s and the page tables under them, keeping its address range reserved
   (one PROT_NONE mapping over the slot and its guards). Nothing in the slot may be read until
   mbxV_slot_take_pages. Returns 0 when the kernel refused (the range is then in an unknown
   state: take the pages back before any use). */
int mbxV_slot_release_pages(mbxV_slot *s);
/* Make s's usable range readable and writable again (zero pages), with its first len bytes
   faulted in and, in ASan builds, unpoisoned for the caller to write. Returns 0 when the
   kernel refused (no memory for the mapping); the slot then stays without pages. */
int mbxV_slot_take_pages(mbxV_slot *s, size_t len);
/* After the caller wrote the arena's prefix back: ASan builds poison its free space again. */
void mbxV_slot_pages_written(mbxV_slot *s);

#endif
