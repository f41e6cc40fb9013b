/* vm/arena.c -- guest heap slots: in-slot allocator, madvise of free pages, templates, pool. */
#include "vm/arena.h"
#include "vm/first_run.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "vm/thread_index.h"

#if defined(__SANITIZE_ADDRESS__)
#define MBXV_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MBXV_ASAN 1
#endif
#endif
#ifdef MBXV_ASAN
#include <sanitizer/asan_interface.h>
/* Free space is poisoned, so a stray read or write by Lua (or by us) into a free block, the
   unused tail of a block or the bytes just past the bump pointer is reported (the asan-arena
   preset runs the real arena; the asan preset puts Lua on malloc instead). */
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define PAGE MBXV_ARENA_PAGE
#define HEADER MBXV_ARENA_HEADER
#define MIN_BLOCK MBXV_ARENA_MIN_BLOCK
#define SL MBXV_TLSF_SL
#define SL_LOG2 MBXV_TLSF_SL_LOG2
#define FL MBXV_TLSF_FL
#define FL_SHIFT MBXV_TLSF_FL_SHIFT
/* Sizes below this map linearly into first level 0. */
#define SMALL_BLOCK ((size_t)1 << FL_SHIFT)
/* Bytes of poisoned redzone kept right past the bump pointer in ASan builds. */
#define BUMP_REDZONE 256

/* Flags in the low bits of a block's size word (sizes are multiples of 8). */
#define FREE_BIT ((size_t)1)      /* this block is free */
#define PREV_FREE_BIT ((size_t)2) /* the block right before this one is free */
#define CLEAN_BIT ((size_t)4)     /* free, and its inside pages were returned to the OS */
#define FLAGS ((size_t)7)

static size_t align_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

/* ---- boundary tags ---- */

/* Block layout: [size word | payload ...]; free: [size word | next | prev | ... | start]. */
static size_t *word(char *b) {
  return (size_t *)(void *)b;
}
static size_t block_size(char *b) {
  return *word(b) & ~FLAGS;
}
static int is_free(char *b) {
  return (*word(b) & FREE_BIT) != 0;
}
static char **next_free(char *b) {
  return (char **)(void *)(b + HEADER);
}
static char **prev_free(char *b) {
  return (char **)(void *)(b + 2 * HEADER);
}
static char **start_tag(char *b, size_t size) {
  return (char **)(void *)(b + size - sizeof(char *));
}

/* The block size that serves a payload of n bytes. */
static size_t block_for(size_t n) {
  size_t size = align_up(n + HEADER, MBXV_ARENA_GRANULE);
  return size < MIN_BLOCK ? MIN_BLOCK : size;
}

/* Whole pages inside the free block [b, b + size) that hold none of its tags: these are not
   charged and are the ones returned to the OS. */
static size_t inside_pages(char *b, size_t size) {
  uintptr_t lo = align_up((uintptr_t)b + 3 * HEADER, PAGE);
  uintptr_t hi = ((uintptr_t)b + size - sizeof(char *)) / PAGE * PAGE;
  return hi > lo ? (hi - lo) / PAGE : 0;
}

/* Set or clear the PREV_FREE flag of the block that follows [b, b + size), if any. */
static void mark_next(mbxV_arena *a, char *b, size_t size, int prev_is_free) {
  char *n = b + size;
  if (n >= a->bump) return;
  if (prev_is_free)
    *word(n) |= PREV_FREE_BIT;
  else
    *word(n) &= ~PREV_FREE_BIT;
}

/* ---- the two-level index ---- */

static int log2_floor(size_t n) {
  return (int)(sizeof(unsigned long long) * 8 - 1) - __builtin_clzll((unsigned long long)n);
}

/* The list a free block of `size` bytes belongs to. */
static void list_of(size_t size, int *fl, int *sl) {
  if (size < SMALL_BLOCK) {
    *fl = 0;
    *sl = (int)(size / MBXV_ARENA_GRANULE);
    return;
  }
  int f = log2_floor(size);
  *sl = (int)(size >> (f - SL_LOG2)) ^ SL;
  *fl = f - FL_SHIFT + 1;
  if (*fl >= FL) {
    *fl = FL - 1;
    *sl = SL - 1;
  }
}

/* The first list whose every block can serve `size` (good fit: rounds size up to the next
   list boundary), or the last list, where blocks must be checked one by one. */
static void list_for_request(size_t size, int *fl, int *sl) {
  if (size >= SMALL_BLOCK) {
    size_t round = ((size_t)1 << (log2_floor(size) - SL_LOG2)) - 1;
    size = size > SIZE_MAX - round ? SIZE_MAX : size + round;
  }
  list_of(size, fl, sl);
}

static void list_insert(mbxV_arena *a, char *b, size_t size) {
  int fl, sl;
  list_of(size, &fl, &sl);
  char *head = a->free_lists[fl][sl];
  *next_free(b) = head;
  *prev_free(b) = NULL;
  if (head) *prev_free(head) = b;
  a->free_lists[fl][sl] = b;
  a->fl_bitmap |= (uint64_t)1 << fl;
  a->sl_bitmap[fl] |= (uint8_t)(1u << sl);
  a->free_inside += inside_pages(b, size);
}

static void list_remove(mbxV_arena *a, char *b, size_t size) {
  int fl, sl;
  list_of(size, &fl, &sl);
  char *n = *next_free(b), *p = *prev_free(b);
  if (n) *prev_free(n) = p;
  if (p)
    *next_free(p) = n;
  else {
    a->free_lists[fl][sl] = n;
    if (n == NULL) {
      a->sl_bitmap[fl] &= (uint8_t) ~(1u << sl);
      if (a->sl_bitmap[fl] == 0) a->fl_bitmap &= ~((uint64_t)1 << fl);
    }
  }
  a->free_inside -= inside_pages(b, size);
}

/* Blocks of a size's own list looked at when no list above it has one: a block there may fit
   although the list does not guarantee it. Bounded, so an allocation stays O(1). */
#define OWN_LIST_LOOKS 8

/* A free block of at least `size` bytes, unlinked, or NULL. */
static char *list_take(mbxV_arena *a, size_t size) {
  int fl, sl;
  list_for_request(size, &fl, &sl);
  if (!(a->sl_bitmap[fl] & (~0u << sl)) &&
      !(fl + 1 < 64 && (a->fl_bitmap & (~(uint64_t)0 << (fl + 1))))) {
    int ofl, osl;
    list_of(size, &ofl, &osl);
    char *b = a->free_lists[ofl][osl];
    for (int i = 0; b && i < OWN_LIST_LOOKS; i++, b = *next_free(b)) {
      if (block_size(b) >= size) {
        list_remove(a, b, block_size(b));
        return b;
      }
    }
  }
  unsigned sl_map = a->sl_bitmap[fl] & (~0u << sl);
  if (sl_map == 0) {
    uint64_t fl_map = fl + 1 < 64 ? a->fl_bitmap & (~(uint64_t)0 << (fl + 1)) : 0;
    if (fl_map == 0) return NULL;
    fl = __builtin_ctzll(fl_map);
    sl_map = a->sl_bitmap[fl];
  }
  sl = __builtin_ctz(sl_map);
  char *b = a->free_lists[fl][sl];
  /* Only the last list (2^40 bytes and up) is not size-sorted: its blocks are checked. */
  while (b && block_size(b) < size)
    b = *next_free(b);
  if (b == NULL) return NULL;
  list_remove(a, b, block_size(b));
  return b;
}

/* ---- free space ---- */

/* The bytes right past the bump pointer are poisoned, so a read or write past the last block
   is reported in ASan builds. */
static void poison_redzone(mbxV_arena *a) {
  size_t room = (size_t)(a->end - a->bump);
  POISON(a->bump, room < BUMP_REDZONE ? room : BUMP_REDZONE);
}

/* Make [b, b + size) a free block (in a list, tagged). clean: its inside pages are known to
   be back with the OS already. The caller poisons what became free space. */
static void make_free(mbxV_arena *a, char *b, size_t size, int clean) {
  UNPOISON(b, 3 * HEADER);
  UNPOISON(b + size - sizeof(char *), sizeof(char *));
  *word(b) = size | FREE_BIT | (clean ? CLEAN_BIT : 0);
  *start_tag(b, size) = b;
  list_insert(a, b, size);
  mark_next(a, b, size, 1);
}

/* Poison the part of [lo, hi) that lies beyond the tags of the free block [b, b + size):
   only what just became free, so a merge never re-poisons a large neighbour (O(freed)). */
static void poison_freed(char *b, size_t size, char *lo, char *hi) {
  char *from = b + 3 * HEADER, *to = b + size - sizeof(char *);
  if (lo > from) from = lo;
  if (hi < to) to = hi;
  if (to > from) POISON(from, (size_t)(to - from));
}

static void give_back(char *lo, char *hi);

/* Return every free block's inside pages and the dirty pages past the bump pointer. */
static size_t return_free_pages(mbxV_arena *a) {
  size_t total = 0;
  /* Only blocks of at least a page plus their tags can have an inside page. */
  int fl0, sl0;
  list_of(PAGE, &fl0, &sl0);
  for (int fl = fl0; fl < FL; fl++) {
    if (!(a->fl_bitmap & ((uint64_t)1 << fl))) continue;
    for (int sl = 0; sl < SL; sl++) {
      for (char *b = a->free_lists[fl][sl]; b; b = *next_free(b)) {
        size_t size = block_size(b);
        if ((*word(b) & CLEAN_BIT) || inside_pages(b, size) == 0) continue;
        char *lo = (char *)align_up((uintptr_t)b + 3 * HEADER, PAGE);
        char *hi = (char *)(((uintptr_t)b + size - sizeof(char *)) / PAGE * PAGE);
        give_back(lo, hi);
        total += (size_t)(hi - lo);
        *word(b) |= CLEAN_BIT;
      }
    }
  }
  char *top = (char *)align_up((uintptr_t)a->bump, PAGE);
  if (a->high > top) {
    give_back(top, a->high);
    total += (size_t)(a->high - top);
  }
  a->high = a->bump;
  a->unreturned = 0;
  return total;
}

/* Pages were freed: return them all once a batch has piled up and the charge plus what was
   freed would pass the allowance (vm/arena.h: MBXV_ARENA_RETURN_BATCH). */
static void note_freed(mbxV_arena *a, size_t pages) {
  a->unreturned += pages;
  if (a->unreturned < MBXV_ARENA_RETURN_BATCH) return;
  size_t allowance = a->free_allowance / PAGE;
  if (a->unreturned <= allowance && mbxV_arena_charged(a) / PAGE <= allowance - a->unreturned)
    return;
  return_free_pages(a);
}

/* Free the block [b, b + size) (its flags already read): merge with free neighbours, or give
   it back to the bump region when it ends there. */
static void release(mbxV_arena *a, char *b, size_t size, int prev_is_free) {
  size_t before = 0;
  /* What becomes free space: the block, the start tag of a free block before it and the
     head of a free block after it. */
  char *freed_lo = b - sizeof(char *), *freed_hi = b + size + 3 * HEADER;
  if (prev_is_free) {
    char *p = *(char **)(void *)(b - sizeof(char *));
    size_t psize = block_size(p);
    before += inside_pages(p, psize);
    list_remove(a, p, psize);
    b = p;
    size += psize;
  }
  char *n = b + size;
  if (n == a->bump) {
    /* The tail shrinks: its pages are dirty past the bump pointer until returned. */
    char *old_top = (char *)align_up((uintptr_t)a->bump, PAGE);
    a->bump = b;
    char *top = (char *)align_up((uintptr_t)b, PAGE);
    POISON(b, (size_t)(n - b) < BUMP_REDZONE ? (size_t)(n - b) : BUMP_REDZONE);
    note_freed(a, (size_t)(old_top - top) / PAGE);
    return;
  }
  if (is_free(n)) {
    size_t nsize = block_size(n);
    before += inside_pages(n, nsize);
    list_remove(a, n, nsize);
    size += nsize;
  }
  make_free(a, b, size, 0);
  poison_freed(b, size, freed_lo, freed_hi);
  size_t inside = inside_pages(b, size);
  note_freed(a, inside > before ? inside - before : 0);
}

/* Give up the tail [b + keep, b + size) of the live block b (keep a block size). */
static void shrink_to(mbxV_arena *a, char *b, size_t size, size_t keep) {
  if (size - keep < MIN_BLOCK) return;
  *word(b) = keep | (*word(b) & PREV_FREE_BIT);
  char *tail = b + keep;
  *word(tail) = size - keep; /* a live block for a moment: its predecessor is live */
  release(a, tail, size - keep, 0);
}

/* ---- blocks ---- */

static char *block_new(mbxV_arena *a, size_t size) {
  char *b = list_take(a, size);
  if (b) {
    size_t have = block_size(b);
    int clean = (*word(b) & CLEAN_BIT) != 0;
    UNPOISON(b, size);
    if (a->zero_fill) memset(b + HEADER, 0, size - HEADER);
    if (have - size >= MIN_BLOCK) {
      *word(b) = size; /* the block before a free block is never free */
      make_free(a, b + size, have - size, clean);
    } else {
      *word(b) = have;
      mark_next(a, b, have, 0);
    }
    return b;
  }
  if ((size_t)(a->end - a->bump) < size) return NULL;
  b = a->bump;
  a->bump += size;
  if (a->bump > a->high) a->high = a->bump;
  UNPOISON(b, size);
  poison_redzone(a);
  *word(b) = size; /* the block that ended at bump is live */
  if (a->zero_fill) memset(b + HEADER, 0, size - HEADER);
  return b;
}

/* Grow the live block b from size to want bytes where it is: from the bump region when it
   ends there, or from a free block right after it. */
static int grow_in_place(mbxV_arena *a, char *b, size_t size, size_t want) {
  char *n = b + size;
  size_t extra = want - size;
  if (n == a->bump) {
    if ((size_t)(a->end - a->bump) < extra) return 0;
    a->bump += extra;
    if (a->bump > a->high) a->high = a->bump;
    UNPOISON(n, extra);
    poison_redzone(a);
    if (a->zero_fill) memset(n, 0, extra);
    *word(b) = want | (*word(b) & PREV_FREE_BIT);
    return 1;
  }
  if (!is_free(n)) return 0;
  size_t nsize = block_size(n);
  if (size + nsize < want) return 0;
  int clean = (*word(n) & CLEAN_BIT) != 0;
  list_remove(a, n, nsize);
  UNPOISON(n, extra);
  if (a->zero_fill) memset(n, 0, extra);
  if (size + nsize - want >= MIN_BLOCK) {
    make_free(a, b + want, size + nsize - want, clean);
  } else {
    want = size + nsize;
    mark_next(a, b, want, 0);
  }
  *word(b) = want | (*word(b) & PREV_FREE_BIT);
  return 1;
}

/* Poison the unused tail of a live block: its payload is n bytes. */
static void poison_slack(char *b, size_t n) {
  size_t used = HEADER + n, size = block_size(b);
  if (size > used) POISON(b + used, size - used);
}

void *mbxV_arena_realloc_within(mbxV_arena *a, void *ptr, size_t osize, size_t nsize, size_t cap) {
  if (nsize > (size_t)(a->end - a->base)) return NULL;
  if (ptr == NULL) {
    if (nsize == 0) return NULL;
    char *b = block_new(a, block_for(nsize));
    if (b == NULL) return NULL;
    if (mbxV_arena_charged(a) > cap) {
      release(a, b, block_size(b), (*word(b) & PREV_FREE_BIT) != 0);
      return NULL;
    }
    poison_slack(b, nsize);
    return b + HEADER;
  }
  char *b = (char *)ptr - HEADER;
  size_t size = block_size(b);
  if (nsize == 0) {
    release(a, b, size, (*word(b) & PREV_FREE_BIT) != 0);
    return NULL;
  }
  size_t want = block_for(nsize);
  if (want <= size) {
    /* Shrinks never fail (Lua assumes they cannot) and never move. */
    UNPOISON(b + HEADER, size - HEADER);
    shrink_to(a, b, size, want);
    if (a->zero_fill) memset(b + HEADER + nsize, 0, block_size(b) - HEADER - nsize);
    poison_slack(b, nsize);
    return ptr;
  }
  if (grow_in_place(a, b, size, want)) {
    if (mbxV_arena_charged(a) <= cap) {
      /* The old slack [HEADER + osize, size) was poisoned by the last poison_slack and
         grow_in_place unpoisons only what it added: open the whole payload first. */
      UNPOISON(b + HEADER, block_size(b) - HEADER);
      poison_slack(b, nsize);
      return ptr;
    }
    shrink_to(a, b, block_size(b), size); /* undo: the block is as it was */
    return NULL;
  }
  char *moved = block_new(a, want);
  if (moved == NULL) return NULL;      /* the slot is exhausted; the old block stays valid */
  size_t both = mbxV_arena_charged(a); /* both copies count while both exist */
  if (both > cap) {
    release(a, moved, block_size(moved), (*word(moved) & PREV_FREE_BIT) != 0);
    return NULL;
  }
  if (both > a->moving_peak) a->moving_peak = both;
  UNPOISON(b + HEADER, size - HEADER);
  memcpy(moved + HEADER, ptr, osize < nsize ? osize : nsize);
  poison_slack(moved, nsize);
  /* moved may have been carved right after b, so read b's flags only now. */
  release(a, b, block_size(b), (*word(b) & PREV_FREE_BIT) != 0);
  return moved + HEADER;
}

void *mbxV_arena_realloc(mbxV_arena *a, void *ptr, size_t osize, size_t nsize) {
  return mbxV_arena_realloc_within(a, ptr, osize, nsize, SIZE_MAX);
}

mbxV_arena *mbxV_arena_init(void *base, size_t size, size_t user_size) {
  mbxV_arena *a = base;
  UNPOISON(base, align_up(sizeof *a, 16) + align_up(user_size, 16));
  memset(a, 0, sizeof *a);
  a->base = base;
  a->end = a->base + size;
  a->user = a->base + align_up(sizeof *a, 16);
  memset(a->user, 0, user_size);
  a->heap = a->user + align_up(user_size, 16);
  a->bump = a->heap;
  a->high = a->bump;
  return a;
}

size_t mbxV_arena_prefix(const mbxV_arena *a) {
  return (size_t)(a->bump - a->base);
}

void mbxV_arena_clear(mbxV_arena *a, size_t user_size) {
  /* Unlike mbxV_arena_init, the user area is left alone: it holds the vm being rebuilt. */
  memset(a->free_lists, 0, sizeof a->free_lists);
  memset(a->sl_bitmap, 0, sizeof a->sl_bitmap);
  a->fl_bitmap = 0;
  a->free_inside = 0;
  a->unreturned = 0;
  a->heap = a->user + align_up(user_size, 16);
  UNPOISON(a->heap, (size_t)(a->bump > a->heap ? a->bump - a->heap : 0));
  a->bump = a->heap;
  if (a->high < a->bump) a->high = a->bump;
}

/* ---- returning pages to the OS ---- */

static size_t os_page(void) {
  long n = sysconf(_SC_PAGESIZE);
  return n > 0 ? (size_t)n : PAGE;
}

/* MADV_DONTNEED on the OS pages wholly inside [lo, hi): private anonymous pages are dropped and
   read back as zeros, so resident memory falls without unmapping the reservation. */
static size_t give_back_pages(char *lo, char *hi, size_t page) {
  char *from = (char *)align_up((uintptr_t)lo, page);
  char *to = (char *)((uintptr_t)hi / page * page);
  if (from >= to) return 0;
  if (madvise(from, (size_t)(to - from), MADV_DONTNEED) != 0) return 0;
  return (size_t)(to - from);
}

static void give_back(char *lo, char *hi) {
  give_back_pages(lo, hi, os_page());
}

size_t mbxV_arena_trim(mbxV_arena *a) {
  return return_free_pages(a);
}

/* ASan builds: a byte copy of the prefix must neither read nor write poisoned bytes, so the
   prefix is unpoisoned around it and the free blocks poisoned again afterwards (the slack of
   live blocks stays unpoisoned: their payload sizes are Lua's). */
static void unpoison_prefix(mbxV_arena *a, size_t len) {
  (void)a;
  (void)len;
  UNPOISON(a, len);
}

static void repoison_prefix(mbxV_arena *a) {
#ifdef MBXV_ASAN
  for (char *b = a->heap; b < a->bump; b += block_size(b))
    if (is_free(b) && block_size(b) > 4 * HEADER)
      POISON(b + 3 * HEADER, block_size(b) - 4 * HEADER);
  poison_redzone(a);
#else
  (void)a;
#endif
}

void *mbxV_copy_alloc(size_t len) {
  size_t page = 4096, rounded = (len + page - 1) & ~(page - 1);
  return aligned_alloc(page, rounded ? rounded : page);
}

void mbxV_arena_copy_out(const mbxV_arena *a, char *dst, size_t len) {
  mbxV_arena *m = (mbxV_arena *)a;
  unpoison_prefix(m, len);
  memcpy(dst, a, len);
  repoison_prefix(m);
}

/* ---- slots ---- */

/* Parking spots of idle slots in front of the pool's lock, one per thread slot (see
   mbxV_pool_give). */
#define POOL_SPOTS MBXV_THREAD_SLOTS
#define CACHE_LINE MBXV_CACHE_LINE

struct mbxV_pool {
  pthread_mutex_t lock;
  unsigned mapped;    /* slots mapped, live and idle: only map and unmap change it */
  size_t reserved;    /* address space of every mapped slot, idle ones and guards included */
  size_t reserve_cap; /* 0 = none */
  mbxV_slot *idle[sizeof(size_t) * 8]; /* by size class: log2 of the slot size */
  /* Live slots, exact: a take raises it with a compare-and-swap bounded by cap, so racing
     takes never pass the cap, and no lock is needed when a parked slot serves the take. On
     its own line: every take and give writes it. */
  _Alignas(CACHE_LINE) _Atomic unsigned live;
  _Atomic unsigned cap;
  _Atomic uint64_t shape_hits, shape_saves; /* written by cycles too: the same line */
  /* A thread gives a slot to its own spot when the spot is empty and takes from it first:
     two threads cycling sandboxes each reuse their own slot without the lock, and each spot
     has a line of its own, so they write no line in common but `live`. A parked slot is idle
     like a listed one (counted in `mapped`, evicted under the caps: drain_spots). */
  struct {
    _Alignas(CACHE_LINE) _Atomic(mbxV_slot *) slot;
  } spot[POOL_SPOTS];
  /* Read-mostly from here, on lines of their own. Every slot placed at random has a base
     congruent to `low` modulo 2^32 (a page in [2 GiB, 3 GiB), drawn per pool), so a template
     relocated between them moves every pointer by a multiple of 2^32 (see mbxV_slot_share).
     0: no congruent placement (TSan builds). */
  _Alignas(CACHE_LINE) uintptr_t low;
  /* One shared template per size class, set once (compare-and-swap), freed with the pool. */
  _Atomic(mbxV_shared *) shared[sizeof(size_t) * 8];
  /* One shaped template per size class (replaced under the lock), and its prefix length for
     mbxV_pool_give, which reads it without the lock. */
  mbxV_shape *shape[sizeof(size_t) * 8];
  _Atomic size_t shape_len[sizeof(size_t) * 8];
  uint64_t shape_gen;            /* under the lock: the last mbxV_shape.gen given */
  _Atomic unsigned reloc_copies; /* slots holding a reloc_copy */
};

static void shape_free(mbxV_shape *sh) {
  free(sh->t.bytes);
  free(sh->t.reloc);
  free(sh->key);
  free(sh);
}

/* What one slot of a size class reserves: a guard on each side. */
static size_t reservation(size_t size) {
  return MBXV_ARENA_GUARD + size + MBXV_ARENA_GUARD;
}

size_t mbxV_slot_size_for(size_t limit) {
  if (limit > SIZE_MAX / 16) return 0;
  size_t want = 8 * limit, size = MBXV_ARENA_MIN_SLOT;
  while (size < want)
    size *= 2;
  return size;
}

static unsigned log2_of(size_t size) {
  unsigned n = 0;
  while (((size_t)1 << n) < size)
    n++;
  return n;
}

/* Where slots are placed (issue 9, D). Guest-visible iteration order hashes heap objects by
   address, so a guest can learn the low bits of the addresses in its slot; mmap(NULL) puts a
   slot right next to the shared libraries, which would make those bits an ASLR bypass. Slots
   go at random addresses instead, between 17 TiB and 80 TiB: clear of the libraries and the
   stack (near 128 TiB), of the PIE binary and its brk heap (near 85 TiB), and of ASan's
   shadow (below 16 TiB). ThreadSanitizer only allows mappings in its own application ranges,
   which are those near the libraries: its builds keep mmap(NULL). */
#if defined(__SANITIZE_THREAD__)
#define MBXV_RANDOM_SLOTS 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MBXV_RANDOM_SLOTS 0
#endif
#endif
#if !defined(MBXV_RANDOM_SLOTS) && UINTPTR_MAX > 0xffffffffu && defined(MAP_FIXED_NOREPLACE)
#define MBXV_RANDOM_SLOTS 1
#endif
#ifndef MBXV_RANDOM_SLOTS
#define MBXV_RANDOM_SLOTS 0
#endif
#define SLOT_SPACE_LOW ((uintptr_t)0x110000000000u)
#define SLOT_SPACE_HIGH ((uintptr_t)0x500000000000u)
/* Collisions with earlier mappings are rare in 63 TiB; tries past this mean the range is not
   usable here (a kernel with a smaller address space), and placement falls back to mmap. */
#define SLOT_PLACE_TRIES 32

#define FOUR_GIB ((uintptr_t)1 << 32)

/* A PROT_NONE reservation of len bytes in the slot space whose usable part (past the first
   guard) starts at `low` modulo 2^32, in a random 4 GiB unit, or MAP_FAILED. The slot space
   holds about 16,000 such units: the high bits stay random per slot, the low 32 are the
   pool's (a guest learns low bits of its own slot's addresses through hash order already;
   the siblings' low bits are the same ones, and their high bits are not revealed). */
static void *reserve_at_random(size_t len, uintptr_t low) {
#if MBXV_RANDOM_SLOTS
  uintptr_t span = SLOT_SPACE_HIGH - SLOT_SPACE_LOW;
  if (len >= span - 2 * FOUR_GIB) return MAP_FAILED;
  uintptr_t units = (span - len) / FOUR_GIB - 1;
  for (int i = 0; i < SLOT_PLACE_TRIES; i++) {
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) return MAP_FAILED;
    uintptr_t at = SLOT_SPACE_LOW + (uintptr_t)(r % units) * FOUR_GIB + low - MBXV_ARENA_GUARD;
    void *p = mmap((void *)at, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (void *)at) return p;
    if (p != MAP_FAILED)
      munmap(p, len); /* a kernel that took the flag as a mere hint */
    else if (errno != EEXIST)
      return MAP_FAILED;
  }
#else
  (void)len;
  (void)low;
#endif
  return MAP_FAILED;
}

static mbxV_slot *slot_map(mbxV_pool *p, size_t size) {
  mbxV_slot *s = calloc(1, sizeof *s);
  if (s == NULL) return NULL;
  /* Address space only: MAP_NORESERVE makes even thousands of 512 MiB reservations free until
     pages are touched. The guards on both sides stay PROT_NONE, so a linear overflow or
     underflow faults instead of reaching whatever the random placement put next door. */
  size_t len = reservation(size);
  void *base = p->low ? reserve_at_random(len, p->low) : MAP_FAILED;
  if (base == MAP_FAILED)
    base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (base == MAP_FAILED) {
    free(s);
    return NULL;
  }
  char *usable = (char *)base + MBXV_ARENA_GUARD;
  if (mprotect(usable, size, PROT_READ | PROT_WRITE) != 0) {
    munmap(base, len);
    free(s);
    return NULL;
  }
  s->pool = p;
  s->arena = (mbxV_arena *)usable;
  s->size = size;
  s->size_class = log2_of(size);
  s->congruent = p->low && ((uintptr_t)usable & (FOUR_GIB - 1)) == p->low;
  return s;
}

static void slot_unmap(mbxV_slot *s) {
  munmap((char *)s->arena - MBXV_ARENA_GUARD, reservation(s->size));
  if (s->reloc_copy) atomic_fetch_sub(&s->pool->reloc_copies, 1);
  free(s->reloc_copy);
  free(s->template_bytes);
  mbxV_slot_drop_shape(s);
  mbxV_first_run_free(s->first_run);
  free(s);
}

mbxV_pool *mbxV_pool_new(unsigned cap) {
  mbxV_pool *p = aligned_alloc(_Alignof(mbxV_pool), sizeof *p); /* the lines above are its own */
  if (p == NULL) return NULL;
  memset(p, 0, sizeof *p);
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    return NULL;
  }
  atomic_store(&p->cap, cap ? cap : MBXV_POOL_DEFAULT_CAP);
#if MBXV_RANDOM_SLOTS
  uint64_t r;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) == (ssize_t)sizeof r)
    p->low = ((uintptr_t)2 << 30) + (uintptr_t)(r % ((FOUR_GIB / 4) / PAGE)) * PAGE;
#endif
  return p;
}

/* Under the lock: s onto its class's idle list. */
static void idle_push(mbxV_pool *p, mbxV_slot *s) {
  s->next = p->idle[s->size_class];
  p->idle[s->size_class] = s;
}

/* Under the lock: every parked slot onto its class's idle list. */
static void drain_spots(mbxV_pool *p) {
  for (int i = 0; i < POOL_SPOTS; i++) {
    mbxV_slot *s = atomic_exchange_explicit(&p->spot[i].slot, NULL, memory_order_acquire);
    if (s) idle_push(p, s);
  }
}

void mbxV_pool_free(mbxV_pool *p) {
  if (p == NULL) return;
  drain_spots(p);
  for (size_t c = 0; c < sizeof p->idle / sizeof *p->idle; c++) {
    while (p->idle[c]) {
      mbxV_slot *s = p->idle[c];
      p->idle[c] = s->next;
      p->reserved -= reservation(s->size);
      slot_unmap(s);
    }
    if (p->shape[c]) shape_free(p->shape[c]); /* every holder is gone: no slot is live */
    mbxV_shared *t = atomic_load(&p->shared[c]);
    if (t) {
      free(t->bytes);
      free(t->reloc);
      free(t);
    }
  }
  pthread_mutex_destroy(&p->lock);
  free(p);
}

unsigned mbxV_pool_live(mbxV_pool *p) {
  return atomic_load(&p->live);
}

size_t mbxV_pool_reserved(mbxV_pool *p) {
  pthread_mutex_lock(&p->lock);
  size_t n = p->reserved;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void mbxV_pool_set_caps(mbxV_pool *p, unsigned cap, size_t reserve_cap) {
  pthread_mutex_lock(&p->lock);
  atomic_store(&p->cap, cap ? cap : MBXV_POOL_DEFAULT_CAP);
  p->reserve_cap = reserve_cap;
  pthread_mutex_unlock(&p->lock);
}

void mbxV_pool_get_caps(mbxV_pool *p, unsigned *cap, size_t *reserve_cap) {
  pthread_mutex_lock(&p->lock);
  *cap = atomic_load(&p->cap);
  *reserve_cap = p->reserve_cap;
  pthread_mutex_unlock(&p->lock);
}

/* Under the lock: does one more mapping of `need` bytes pass a cap? */
static int over_caps(const mbxV_pool *p, size_t need) {
  return p->mapped >= atomic_load_explicit(&p->cap, memory_order_relaxed) ||
         (p->reserve_cap && (p->reserved > p->reserve_cap || need > p->reserve_cap - p->reserved));
}

/* Under the lock: unlink one idle slot (any class) so its reservation can be unmapped. */
static mbxV_slot *idle_pop_any(mbxV_pool *p) {
  for (size_t c = 0; c < sizeof p->idle / sizeof *p->idle; c++) {
    if (p->idle[c] == NULL) continue;
    mbxV_slot *s = p->idle[c];
    p->idle[c] = s->next;
    p->mapped--;
    p->reserved -= reservation(s->size);
    return s;
  }
  return NULL;
}

static _Atomic(mbxV_slot *) *my_spot(mbxV_pool *p) {
  return &p->spot[mbxV_thread_index()].slot;
}

/* One more live slot, unless the cap is reached: a compare-and-swap, so racing takes never
   pass the cap. Called only once the take has its slot (or its mapping is allowed), so `live`
   never counts a take that is then refused. */
static int count_live(mbxV_pool *p) {
  unsigned n = atomic_load_explicit(&p->live, memory_order_relaxed);
  do {
    if (n >= atomic_load_explicit(&p->cap, memory_order_relaxed)) return 0;
  } while (!atomic_compare_exchange_weak_explicit(&p->live, &n, n + 1, memory_order_acquire,
                                                  memory_order_relaxed));
  return 1;
}

mbxV_take_result mbxV_pool_take(mbxV_pool *p, size_t limit, mbxV_slot **out) {
  *out = NULL;
  size_t size = mbxV_slot_size_for(limit);
  if (size == 0 || size > SIZE_MAX - MBXV_ARENA_GUARD) return MBXV_TAKE_NO_SPACE;
  unsigned cls = log2_of(size);
  _Atomic(mbxV_slot *) *spot = my_spot(p);
  mbxV_slot *parked = NULL;
  /* A plain load first: an empty spot is not written. Nothing of a parked slot is read
     before the exchange makes it ours (an eviction may unmap it until then). */
  if (atomic_load_explicit(spot, memory_order_relaxed))
    parked = atomic_exchange_explicit(spot, NULL, memory_order_acquire);
  if (parked && parked->size_class == cls && count_live(p)) {
    *out = parked;
    return MBXV_TAKE_OK;
  }
  mbxV_slot *evicted = NULL;
  pthread_mutex_lock(&p->lock);
  if (parked) idle_push(p, parked); /* another class, or the cap is reached: idle again */
  mbxV_slot *s = p->idle[cls];
  if (s == NULL) {
    drain_spots(p); /* other threads' parked slots, before mapping a new one */
    s = p->idle[cls];
  }
  if (s) {
    int ok = count_live(p);
    if (ok) p->idle[cls] = s->next;
    pthread_mutex_unlock(&p->lock);
    if (!ok) return MBXV_TAKE_CAP;
    s->next = NULL;
    *out = s;
    return MBXV_TAKE_OK;
  }
  if (atomic_load_explicit(&p->live, memory_order_relaxed) >=
      atomic_load_explicit(&p->cap, memory_order_relaxed)) {
    pthread_mutex_unlock(&p->lock); /* refused before anything idle is unmapped */
    return MBXV_TAKE_CAP;
  }
  /* The caps bound reserved slots and address space, idle slots included: unmap idle slots
     of other classes while a new reservation would pass either. */
  size_t need = reservation(size);
  while (over_caps(p, need)) {
    mbxV_slot *victim = idle_pop_any(p);
    if (victim == NULL) break;
    victim->next = evicted;
    evicted = victim;
  }
  mbxV_take_result refused = MBXV_TAKE_OK;
  if (p->mapped >= atomic_load_explicit(&p->cap, memory_order_relaxed))
    refused = MBXV_TAKE_CAP;
  else if (over_caps(p, need))
    refused = MBXV_TAKE_RESERVE_CAP;
  else if (!count_live(p))
    refused = MBXV_TAKE_CAP; /* a parked slot's take passed us */
  if (refused == MBXV_TAKE_OK) {
    p->mapped++; /* counted now, so racing takes cannot pass the caps while we map */
    p->reserved += need;
  }
  pthread_mutex_unlock(&p->lock);
  while (evicted) {
    mbxV_slot *next = evicted->next;
    slot_unmap(evicted);
    evicted = next;
  }
  if (refused != MBXV_TAKE_OK) return refused;
  s = slot_map(p, size);
  if (s == NULL) {
    pthread_mutex_lock(&p->lock);
    p->mapped--;
    p->reserved -= need;
    pthread_mutex_unlock(&p->lock);
    atomic_fetch_sub_explicit(&p->live, 1, memory_order_release);
    return MBXV_TAKE_NO_SPACE;
  }
  *out = s;
  return MBXV_TAKE_OK;
}

void mbxV_pool_give(mbxV_slot *s) {
  if (s == NULL) return;
  /* Whatever lies past the template is free once the slot is idle: the next sandbox starts
     from the template. Read the high-water mark from the dead state, clamped in case that
     state was never initialised. */
  mbxV_arena *a = s->arena;
  char *base = (char *)a, *limit = base + s->size;
  char *high = (char *)align_up((uintptr_t)a->high, PAGE); /* the page bump is on is dirty */
  if (high < base || high > limit) high = limit;
  size_t pristine = s->shape_len > s->template_len ? s->shape_len : s->template_len;
  const mbxV_shared *t = mbxV_slot_shared(s);
  if (t && t->len > pristine) pristine = t->len;
  size_t shaped = atomic_load_explicit(&s->pool->shape_len[s->size_class], memory_order_relaxed);
  if (t && shaped > pristine) pristine = shaped;
  char *keep = base + pristine + MBXV_ARENA_KEEP_RESIDENT;
  if (high > keep) give_back_pages(keep, high, os_page());
  mbxV_pool *p = s->pool;
  /* Parked, or listed; idle before it stops counting as live, so `live` never undercounts
     the slots in use. */
  mbxV_slot *none = NULL;
  if (!atomic_compare_exchange_strong_explicit(my_spot(p), &none, s, memory_order_release,
                                               memory_order_relaxed)) {
    pthread_mutex_lock(&p->lock);
    idle_push(p, s);
    pthread_mutex_unlock(&p->lock);
  }
  atomic_fetch_sub_explicit(&p->live, 1, memory_order_release);
}

int mbxV_slot_snapshot(mbxV_slot *s) {
  size_t len = mbxV_arena_prefix(s->arena);
  char *copy = mbxV_copy_alloc(len);
  if (copy == NULL) return 0;
  mbxV_arena_copy_out(s->arena, copy, len);
  free(s->template_bytes);
  s->template_bytes = copy;
  s->template_len = len;
  /* A shaped template was built from the old one: it goes with it. */
  mbxV_slot_drop_shape(s);
  return 1;
}

/* The bytes a copy of len bytes over the slot's current state may touch poisoned: the larger
   prefix and the redzone past its bump pointer (a dead state's bump is clamped). */
static size_t copy_extent(mbxV_slot *s, size_t len) {
  char *base = (char *)s->arena, *bump = s->arena->bump;
  size_t cur = bump >= base && bump <= base + s->size ? (size_t)(bump - base) : s->size;
  if (cur < len) cur = len;
  return s->size - cur < BUMP_REDZONE ? s->size : cur + BUMP_REDZONE;
}

void mbxV_slot_restore_bytes(mbxV_slot *s, const char *bytes, size_t len) {
  unpoison_prefix(s->arena, copy_extent(s, len));
  memcpy(s->arena, bytes, len);
  repoison_prefix(s->arena);
}

void mbxV_slot_restore(mbxV_slot *s) {
  mbxV_slot_restore_bytes(s, s->template_bytes, s->template_len);
}

void mbxV_slot_drop_shape(mbxV_slot *s) {
  free(s->shape_bytes);
  free(s->shape_key);
  s->shape_bytes = s->shape_key = NULL;
  s->shape_len = s->shape_key_len = s->shape_peak = 0;
}

void mbxV_pool_shape_counts(mbxV_pool *p, uint64_t *hits, uint64_t *saves) {
  *hits = atomic_load(&p->shape_hits);
  *saves = atomic_load(&p->shape_saves);
}

void mbxV_pool_count_shape(mbxV_pool *p, int hit) {
  atomic_fetch_add_explicit(hit ? &p->shape_hits : &p->shape_saves, 1, memory_order_relaxed);
}

void mbxV_slot_restore_prefix(mbxV_slot *s, const char *bytes, size_t len, size_t hole_at,
                              size_t hole_len) {
  mbxV_arena *a = s->arena;
  char *base = (char *)a, *limit = base + s->size;
  /* The dirty extent of the state being replaced, clamped like mbxV_pool_give does. */
  char *old_high = (char *)align_up((uintptr_t)a->high, PAGE);
  if (old_high < base || old_high > limit) old_high = limit;
  unpoison_prefix(a, copy_extent(s, len));
  memcpy(base, bytes, hole_at);
  memcpy(base + hole_at + hole_len, bytes + hole_at + hole_len, len - hole_at - hole_len);
  repoison_prefix(a);
  /* Past the restored prefix everything is free again: give back what the replaced state
     dirtied there, beyond the small slack the next run will almost surely touch again. */
  char *keep = base + len + MBXV_ARENA_KEEP_RESIDENT;
  if (old_high > keep)
    give_back_pages(keep, old_high, os_page());
  else
    keep = old_high;
  /* Below `keep` pages may still be dirty: the high-water mark must cover them (for trim). */
  if (keep > a->high) a->high = keep;
}

/* ---- templates shared by a size class ---- */

/*
** Why relocating one build is sound. A template is a byte copy of a pristine state: the arena
** header, the vm struct and Lua's blocks, built with zero_fill (every byte not written by Lua
** is zero) before any guest code, port or policy touched it. Its words are pointers into the
** prefix, pointers elsewhere (static code and data: the same in every slot) and data. A word
** whose value lies in [base, base + len] is taken for a pointer into the prefix and moved; the
** scheme is wrong only if a data word lies there. Every slot is placed congruent to the pool's
** `low` modulo 2^32, with `low` in [2 GiB, 3 GiB) and the prefix far below 1 GiB, so such a
** value has its top 16 bits zero, bits 40-47 at 0x11-0x4f (the slot space) and bits 24-31 at
** 0x80 or above. A template's data is the libraries' own: ASCII text and zero slack (byte 3
** below 0x80), 32-bit hashes, sizes and flags packed with small fields (bits 24-31 are a
** length, a log2 size or a flag byte: below 0x80; or the top 32 bits are a count far below
** 0x1100), IEEE doubles of the libraries' constants (a value in range would be a subnormal)
** and small integers. mbxV_slot_share checks what it can of that: the build ran with
** zero_fill, the prefix's window is in one 4 GiB unit with bit 31 set, and every word taken
** for a pointer is 8-byte aligned (Lua's objects, arrays and the allocator's blocks all are;
** a misaligned one is data, and the class then keeps per-slot templates).
**
** Because every move is a multiple of 2^32, the low 32 bits of every pointer stay as they were
** built: Lua hashes pointer keys (tables, functions, light userdata) by exactly those bits, so
** every table keeps its layout, and a data word mistaken for a pointer would only ever change
** in its top 32 bits. The string-hash seed and the strings' hashes travel with the bytes: the
** template was built once, so all its sandboxes share that seed (math.random and the address
** key are reseeded per sandbox by the layers above).
*/

const mbxV_shared *mbxV_slot_shared(const mbxV_slot *s) {
  if (!s->congruent) return NULL;
  return atomic_load_explicit(&s->pool->shared[s->size_class], memory_order_acquire);
}

/* Word indexes of bytes[0, len) (a copy of the prefix built at base) whose value points into
   [base, base + len], skipping the hole; NULL with *n = SIZE_MAX when one is misaligned. */
static uint32_t *find_pointers(const char *bytes, size_t len, uintptr_t base, size_t hole_at,
                               size_t hole_len, size_t *n) {
  size_t words = len / sizeof(uintptr_t), count = 0, cap = 256;
  uint32_t *idx = malloc(cap * sizeof *idx);
  *n = 0;
  if (idx == NULL) return NULL;
  const uintptr_t *w = (const uintptr_t *)(const void *)bytes;
  for (size_t i = 0; i < words; i++) {
    size_t at = i * sizeof(uintptr_t);
    if (at >= hole_at && at < hole_at + hole_len) continue;
    if (w[i] - base > len) continue;
    if (w[i] & (sizeof(uintptr_t) - 1)) {
      free(idx);
      *n = SIZE_MAX;
      return NULL;
    }
    if (count == cap) {
      uint32_t *grown = realloc(idx, 2 * cap * sizeof *idx);
      if (grown == NULL) {
        free(idx);
        return NULL;
      }
      idx = grown;
      cap *= 2;
    }
    idx[count++] = (uint32_t)i;
  }
  *n = count;
  return idx;
}

/* Fill t from s's arena: the copy of its prefix and its relocation list (see above). 0 when
   the premises do not hold or out of host memory (t is then untouched). */
static int capture(mbxV_slot *s, mbxV_shared *t, size_t hole_at, size_t hole_len) {
  mbxV_arena *a = s->arena;
  uintptr_t base = (uintptr_t)a;
  size_t len = mbxV_arena_prefix(a);
  /* The window [base, base + len] stays in one 4 GiB unit with bit 31 set (see above), and
     every word index fits the 32-bit relocation list. */
  if (!s->congruent || (base & (FOUR_GIB / 2)) == 0 || (base >> 32) != ((base + len) >> 32) ||
      len / sizeof(uintptr_t) > UINT32_MAX || len % sizeof(uintptr_t) != 0)
    return 0;
  char *bytes = mbxV_copy_alloc(len);
  if (bytes == NULL) return 0;
  mbxV_arena_copy_out(a, bytes, len);
  size_t n;
  uint32_t *reloc = find_pointers(bytes, len, base, hole_at, hole_len, &n);
  if (reloc == NULL) {
    free(bytes);
    return 0;
  }
  t->bytes = bytes;
  t->len = len;
  t->base = base;
  t->reloc = reloc;
  t->nreloc = n;
  return 1;
}

int mbxV_slot_share(mbxV_slot *s, size_t hole_at, size_t hole_len) {
  mbxV_arena *a = s->arena;
  mbxV_pool *p = s->pool;
  int built_clean = a->zero_fill;
  a->zero_fill = 0; /* from here on the state is a sandbox's: no more zeroing */
  if (!s->congruent || !built_clean) return 0;
  if (atomic_load_explicit(&p->shared[s->size_class], memory_order_acquire)) return 1;
  mbxV_shared *t = calloc(1, sizeof *t);
  if (t == NULL) return 0;
  if (!capture(s, t, hole_at, hole_len)) {
    free(t);
    return 0;
  }
  mbxV_shared *none = NULL;
  if (!atomic_compare_exchange_strong_explicit(&p->shared[s->size_class], &none, t,
                                               memory_order_acq_rel, memory_order_acquire)) {
    free(t->bytes); /* another thread's build won: the class has one */
    free(t->reloc);
    free(t);
  }
  return 1;
}

/* Give s a copy of the plain template t relocated by delta, if the pool's budget of such
   copies allows (the shared template lives as long as the pool: the copy never goes stale). */
static void keep_relocated(mbxV_slot *s, const mbxV_shared *t, uintptr_t delta) {
  unsigned n = atomic_load(&s->pool->reloc_copies);
  do {
    if (n >= MBXV_RELOC_COPIES) return;
  } while (!atomic_compare_exchange_weak(&s->pool->reloc_copies, &n, n + 1));
  char *copy = mbxV_copy_alloc(t->len);
  if (copy == NULL) {
    atomic_fetch_sub(&s->pool->reloc_copies, 1);
    return;
  }
  memcpy(copy, t->bytes, t->len);
  uintptr_t *w = (uintptr_t *)(void *)copy;
  for (size_t i = 0; i < t->nreloc; i++)
    w[t->reloc[i]] += delta;
  s->reloc_copy = copy;
}

void mbxV_slot_restore_shared(mbxV_slot *s, const mbxV_shared *t, size_t hole_at, size_t hole_len) {
  mbxV_arena *a = s->arena;
  char *base = (char *)a, *limit = base + s->size;
  /* The dirty extent of the state being replaced. A slot never used before holds zeros (its
     header does not name it): nothing there is dirty. */
  char *old_high = (char *)align_up((uintptr_t)a->high, PAGE);
  if (a->base != base)
    old_high = base;
  else if (old_high < base || old_high > limit)
    old_high = limit;
  unpoison_prefix(a, copy_extent(s, t->len));
  uintptr_t delta = (uintptr_t)base - t->base; /* a multiple of 2^32, possibly "negative" */
  const char *src = t->bytes;
  int plain = t == atomic_load_explicit(&s->pool->shared[s->size_class], memory_order_acquire);
  if (delta != 0 && plain && s->reloc_copy == NULL) keep_relocated(s, t, delta);
  if (delta != 0 && plain && s->reloc_copy) {
    src = s->reloc_copy; /* relocated once already */
    delta = 0;
  }
  if (hole_len == 0) {
    memcpy(base, src, t->len);
  } else {
    memcpy(base, src, hole_at);
    memcpy(base + hole_at + hole_len, src + hole_at + hole_len, t->len - hole_at - hole_len);
  }
  if (delta != 0) {
    uintptr_t *w = (uintptr_t *)(void *)base;
    for (size_t i = 0; i < t->nreloc; i++)
      w[t->reloc[i]] += delta;
  }
  /* The explicit fix-ups: the header's words that point past the prefix. */
  a->end = limit;
  repoison_prefix(a);
  char *keep = base + t->len + MBXV_ARENA_KEEP_RESIDENT;
  if (old_high > keep)
    give_back_pages(keep, old_high, os_page());
  else
    keep = old_high;
  /* Below `keep` pages may be dirty (the replaced state's, or the copy's own). */
  a->high = keep > a->bump ? keep : a->bump;
}

const char *mbxV_slot_plain_source(const mbxV_slot *s, const mbxV_shared *t) {
  if (t == NULL || t != atomic_load_explicit(&s->pool->shared[s->size_class], memory_order_acquire))
    return NULL;
  /* The copy mbxV_slot_restore_shared took: the template itself in the slot that built it,
     the relocated copy in a slot that keeps one. A slot that relocates in place (past
     MBXV_RELOC_COPIES) gets NULL: what a recording keeps in host memory then stays bounded
     by the same few slots per class. */
  if ((uintptr_t)s->arena == t->base) return t->bytes;
  return s->reloc_copy;
}

const char *mbxV_slot_shape_source(const mbxV_slot *s, const mbxV_shape *sh, uint64_t *gen) {
  *gen = sh->gen;
  /* A slot other than sh's builder relocates sh in place, the same bytes every time (the
     delta is the slot's); it may record only where it may for the plain template, so the
     recordings' host memory stays with the same few slots per class. */
  if ((uintptr_t)s->arena == sh->t.base) return sh->t.bytes;
  const mbxV_shared *plain =
      atomic_load_explicit(&s->pool->shared[s->size_class], memory_order_acquire);
  return mbxV_slot_plain_source(s, plain) ? sh->t.bytes : NULL;
}

void mbxV_slot_patch(mbxV_slot *s, const uint32_t (*runs)[2], size_t n, const char *bytes,
                     size_t extent) {
  mbxV_arena *a = s->arena;
  char *base = (char *)a;
  unpoison_prefix(a, extent);
  for (size_t i = 0; i < n; i++) {
    memcpy(base + runs[i][0], bytes, runs[i][1]);
    bytes += runs[i][1];
  }
  if (a->bump > a->high) a->high = a->bump;
  repoison_prefix(a);
}

/* ---- shaped templates shared by a size class ---- */

mbxV_shape *mbxV_pool_shape_get(mbxV_slot *s, const char *key, size_t key_len, size_t limit) {
  if (!s->congruent || key == NULL) return NULL;
  mbxV_pool *p = s->pool;
  pthread_mutex_lock(&p->lock);
  mbxV_shape *sh = p->shape[s->size_class];
  if (sh && sh->key_len == key_len && sh->peak <= limit && memcmp(sh->key, key, key_len) == 0)
    sh->refs++;
  else
    sh = NULL;
  pthread_mutex_unlock(&p->lock);
  return sh;
}

void mbxV_pool_shape_put(mbxV_pool *p, mbxV_shape *sh) {
  if (sh == NULL) return;
  pthread_mutex_lock(&p->lock);
  int last = --sh->refs == 0;
  pthread_mutex_unlock(&p->lock);
  if (last) shape_free(sh);
}

int mbxV_slot_share_shape(mbxV_slot *s, const char *key, size_t key_len, size_t peak,
                          size_t hole_at, size_t hole_len) {
  mbxV_pool *p = s->pool;
  mbxV_shape *sh = calloc(1, sizeof *sh);
  char *k = malloc(key_len ? key_len : 1);
  if (sh == NULL || k == NULL || !capture(s, &sh->t, hole_at, hole_len)) {
    free(sh);
    free(k);
    return 0;
  }
  memcpy(k, key, key_len);
  sh->key = k;
  sh->key_len = key_len;
  sh->peak = peak;
  sh->refs = 1; /* the pool's */
  pthread_mutex_lock(&p->lock);
  sh->gen = ++p->shape_gen;
  mbxV_shape *old = p->shape[s->size_class];
  p->shape[s->size_class] = sh;
  atomic_store_explicit(&p->shape_len[s->size_class], sh->t.len, memory_order_relaxed);
  int last = old && --old->refs == 0;
  pthread_mutex_unlock(&p->lock);
  if (last) shape_free(old);
  return 1;
}

/* ---- hibernation: the slot's pages released, the address kept (vm/hibernate.c) ---- */

/*
** A slot's state is only ever valid at its own address (its pointers are absolute, and guest
** integers, doubles and string.pack bytes may look like pointers, so nothing can relocate a
** live state). Hibernation therefore keeps the address: the whole reservation, guards
** included, is replaced by one fresh PROT_NONE mapping. A MAP_FIXED mmap unmaps what was there
** and maps the new range under one hold of the address-space lock, so no other mapping can
** take the range in between; and since no mapping is left in the slot's 4 GiB unit while the
** old one goes, the kernel frees the page tables under it too (a PTE page and a PMD page per
** slot: 8 KiB that a mere MADV_DONTNEED would keep).
*/

const char *mbxV_slot_reference(const mbxV_slot *s, size_t *len, const uint32_t **reloc,
                                size_t *nreloc, uintptr_t *delta) {
  *reloc = NULL;
  *nreloc = 0;
  *delta = 0;
  if (s->template_bytes) {
    *len = s->template_len;
    return s->template_bytes;
  }
  const mbxV_shared *t = mbxV_slot_shared(s);
  if (t == NULL) {
    *len = 0;
    return NULL;
  }
  *len = t->len;
  if ((uintptr_t)s->arena == t->base) return t->bytes;
  if (s->reloc_copy) return s->reloc_copy;
  *reloc = t->reloc;
  *nreloc = t->nreloc;
  *delta = (uintptr_t)s->arena - t->base;
  return t->bytes;
}

int mbxV_slot_release_pages(mbxV_slot *s) {
  char *start = (char *)s->arena - MBXV_ARENA_GUARD;
  void *p = mmap(start, reservation(s->size), PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  return p == (void *)start;
}

int mbxV_slot_take_pages(mbxV_slot *s, size_t len) {
  char *base = (char *)s->arena;
  /* The usable part only: the guards stay PROT_NONE. A fresh mapping rather than mprotect, so
     this works whatever state a failed release left the range in. */
  void *p = mmap(base, s->size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  if (p != (void *)base) return 0;
  size_t want = align_up(len, PAGE);
#ifdef MADV_POPULATE_WRITE
  /* One call faults in the pages the caller is about to write, instead of one fault each. */
  if (want > 0) (void)madvise(base, want < s->size ? want : s->size, MADV_POPULATE_WRITE);
#endif
  /* The header the fresh pages hold is zeros (copy_extent would take the whole slot). */
  unpoison_prefix(s->arena, s->size - len < BUMP_REDZONE ? s->size : len + BUMP_REDZONE);
  return 1;
}

void mbxV_slot_pages_written(mbxV_slot *s) {
  repoison_prefix(s->arena);
}
