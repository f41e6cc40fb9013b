/* vm/arena.c -- guest heap slots: in-slot allocator, madvise of free pages, templates, pool. */
#include "vm/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#define PAGE MBXV_ARENA_PAGE

static size_t align_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

static char *page_up(char *p) {
  return (char *)align_up((uintptr_t)p, PAGE);
}

static char *run_end(const mbxV_free_run *r) {
  return (char *)r + r->pages * PAGE;
}

/* The bytes a block of n bytes really occupies: a multiple of 16 up to the small maximum,
   whole pages above it. Blocks carry no header, so this must depend on n alone. */
static size_t footprint(size_t n) {
  return n <= MBXV_ARENA_SMALL_MAX ? align_up(n, MBXV_ARENA_GRANULE) : align_up(n, PAGE);
}

mbxV_arena *mbxV_arena_init(void *base, size_t size, size_t user_size) {
  mbxV_arena *a = base;
  memset(a, 0, sizeof *a);
  a->base = base;
  a->end = a->base + size;
  a->user = a->base + align_up(sizeof *a, MBXV_ARENA_GRANULE);
  memset(a->user, 0, user_size);
  a->bump = a->user + align_up(user_size, MBXV_ARENA_GRANULE);
  a->high = a->bump;
  return a;
}

size_t mbxV_arena_prefix(const mbxV_arena *a) {
  return (size_t)(a->bump - a->base);
}

/* ---- small blocks ---- */

/* n: a multiple of 16 between 16 and MBXV_ARENA_SMALL_MAX. Any such piece of free space can
   join a list, which is what lets shrinks and page-alignment gaps never waste memory. */
static void small_push(mbxV_arena *a, char *p, size_t n) {
  void **head = &a->small[n / MBXV_ARENA_GRANULE - 1];
  *(void **)p = *head;
  *head = p;
}

static void bump_to(mbxV_arena *a, char *to) {
  a->bump = to;
  if (to > a->high) a->high = to;
}

/* ---- page runs ---- */

/* First fit over the free runs. */
static char *runs_take(mbxV_arena *a, size_t pages) {
  for (mbxV_free_run **link = &a->runs; *link; link = &(*link)->next) {
    mbxV_free_run *r = *link;
    if (r->pages < pages) continue;
    if (r->pages == pages) {
      *link = r->next;
    } else {
      mbxV_free_run *rest = (mbxV_free_run *)((char *)r + pages * PAGE);
      mbxV_free_run *after = r->next;
      rest->pages = r->pages - pages;
      rest->next = after;
      *link = rest;
    }
    return (char *)r;
  }
  return NULL;
}

/* Free [p, p + pages * PAGE): insert in address order, merge with the free neighbours, and give
   a run that ends at the bump pointer back to the bump region (so the tail stays one piece and
   the high-water mark can be trimmed). */
static void runs_insert(mbxV_arena *a, char *p, size_t pages) {
  mbxV_free_run **link = &a->runs, **prev_link = NULL;
  while (*link && (char *)*link < p) {
    prev_link = link;
    link = &(*link)->next;
  }
  mbxV_free_run *next = *link, *r, **r_link;
  if (prev_link && run_end(*prev_link) == p) {
    r = *prev_link;
    r->pages += pages;
    r_link = prev_link;
  } else {
    r = (mbxV_free_run *)p;
    r->pages = pages;
    r->next = next;
    *link = r;
    r_link = link;
  }
  if (next && run_end(r) == (char *)next) {
    r->pages += next->pages;
    r->next = next->next;
  }
  if (run_end(r) == a->bump) {
    *r_link = r->next; /* NULL: nothing free lies above the bump pointer */
    a->bump = (char *)r;
  }
}

static char *pages_new(mbxV_arena *a, size_t pages) {
  char *p = runs_take(a, pages);
  if (p) return p;
  char *start = page_up(a->bump);
  if (start > a->end || (size_t)(a->end - start) / PAGE < pages) return NULL;
  if (start != a->bump) small_push(a, a->bump, (size_t)(start - a->bump));
  bump_to(a, start + pages * PAGE);
  return start;
}

/* Grow the run at p from old_bytes to new_bytes without moving it: from the bump region when
   it ends there, or from a free run that starts right after it. */
static int pages_grow_in_place(mbxV_arena *a, char *p, size_t old_bytes, size_t new_bytes) {
  char *after = p + old_bytes;
  size_t extra = new_bytes - old_bytes;
  if (after == a->bump) {
    if ((size_t)(a->end - a->bump) < extra) return 0;
    bump_to(a, a->bump + extra);
    return 1;
  }
  for (mbxV_free_run **link = &a->runs; *link && (char *)*link <= after; link = &(*link)->next) {
    mbxV_free_run *r = *link;
    if ((char *)r != after) continue;
    size_t need = extra / PAGE;
    if (r->pages < need) return 0;
    if (r->pages == need) {
      *link = r->next;
    } else {
      mbxV_free_run *rest = (mbxV_free_run *)(after + extra);
      mbxV_free_run *following = r->next;
      rest->pages = r->pages - need;
      rest->next = following;
      *link = rest;
    }
    return 1;
  }
  return 0;
}

/* ---- blocks ---- */

static void *block_new(mbxV_arena *a, size_t n) {
  if (n > (size_t)(a->end - a->base)) return NULL;
  size_t size = footprint(n);
  if (n > MBXV_ARENA_SMALL_MAX) return pages_new(a, size / PAGE);
  void **head = &a->small[size / MBXV_ARENA_GRANULE - 1];
  if (*head) {
    void *p = *head;
    *head = *(void **)p;
    return p;
  }
  if ((size_t)(a->end - a->bump) >= size) {
    char *p = a->bump;
    bump_to(a, p + size);
    return p;
  }
  /* The tail is exhausted: carve the block out of a free page, the rest of the page joins the
     list of its size. */
  char *page = runs_take(a, 1);
  if (page == NULL) return NULL;
  if (size < PAGE) small_push(a, page + size, PAGE - size);
  return page;
}

/* Free the bytes [p + keep, p + size) of a block whose footprint is size, keeping the first
   keep bytes (a footprint too) allocated. keep = 0 frees the whole block. */
static void block_free_tail(mbxV_arena *a, char *p, size_t size, size_t keep) {
  if (size <= MBXV_ARENA_SMALL_MAX) {
    if (size > keep) small_push(a, p + keep, size - keep);
    return;
  }
  if (keep == 0) {
    runs_insert(a, p, size / PAGE);
    return;
  }
  /* A page run keeps its first `kept` pages; a small remainder of the last kept page becomes
     a small free block. */
  size_t kept = align_up(keep, PAGE);
  if (kept > keep) small_push(a, p + keep, kept - keep);
  if (size > kept) runs_insert(a, p + kept, (size - kept) / PAGE);
}

void *mbxV_arena_realloc(mbxV_arena *a, void *ptr, size_t osize, size_t nsize) {
  if (ptr == NULL) return nsize ? block_new(a, nsize) : NULL;
  size_t old_size = footprint(osize);
  if (nsize == 0) {
    block_free_tail(a, ptr, old_size, 0);
    return NULL;
  }
  if (nsize > (size_t)(a->end - a->base)) return NULL;
  size_t new_size = footprint(nsize);
  if (new_size == old_size) return ptr;
  /* Shrinks never fail (Lua assumes they cannot): keep the block where it is and free its
     tail, which is always a valid small block or page run. */
  if (new_size < old_size) {
    block_free_tail(a, ptr, old_size, new_size);
    return ptr;
  }
  if (osize > MBXV_ARENA_SMALL_MAX && pages_grow_in_place(a, ptr, old_size, new_size)) return ptr;
  void *moved = block_new(a, nsize);
  if (moved == NULL) return NULL; /* the slot is exhausted; the old block stays valid */
  memcpy(moved, ptr, osize);
  block_free_tail(a, ptr, old_size, 0);
  return moved;
}

/* ---- returning pages to the OS ---- */

static size_t os_page(void) {
  long n = sysconf(_SC_PAGESIZE);
  return n > 0 ? (size_t)n : PAGE;
}

/* MADV_DONTNEED on the OS pages wholly inside [lo, hi): private anonymous pages are dropped and
   read back as zeros, so resident memory falls without unmapping the reservation. */
static size_t give_back(char *lo, char *hi, size_t page) {
  char *from = (char *)align_up((uintptr_t)lo, page);
  char *to = (char *)((uintptr_t)hi / page * page);
  if (from >= to) return 0;
  if (madvise(from, (size_t)(to - from), MADV_DONTNEED) != 0) return 0;
  return (size_t)(to - from);
}

size_t mbxV_arena_trim(mbxV_arena *a) {
  size_t page = os_page(), total = 0;
  /* A run's first page holds its list node: it stays. */
  for (mbxV_free_run *r = a->runs; r; r = r->next)
    total += give_back((char *)r + sizeof *r, run_end(r), page);
  total += give_back(a->bump, a->high, page);
  a->high = a->bump;
  return total;
}

/* ---- slots ---- */

struct mbxV_pool {
  pthread_mutex_t lock;
  mbxV_slot *idle[sizeof(size_t) * 8]; /* by size class: log2 of the slot size */
  unsigned idle_count;
  unsigned live;
  unsigned cap;
  size_t reserved;     /* address space of every mapped slot, idle ones and guards included */
  size_t reserve_cap;  /* 0 = none */
};

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

/* A PROT_NONE reservation of len bytes at a random page in the slot space, or MAP_FAILED. */
static void *reserve_at_random(size_t len) {
#if MBXV_RANDOM_SLOTS
  uintptr_t span = SLOT_SPACE_HIGH - SLOT_SPACE_LOW;
  if (len >= span) return MAP_FAILED;
  for (int i = 0; i < SLOT_PLACE_TRIES; i++) {
    uint64_t r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) return MAP_FAILED;
    uintptr_t at = SLOT_SPACE_LOW + (uintptr_t)(r % ((span - len) / PAGE)) * PAGE;
    void *p = mmap((void *)at, len, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == (void *)at) return p;
    if (p != MAP_FAILED) munmap(p, len); /* a kernel that took the flag as a mere hint */
    else if (errno != EEXIST) return MAP_FAILED;
  }
#else
  (void)len;
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
  void *base = reserve_at_random(len);
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
  return s;
}

static void slot_unmap(mbxV_slot *s) {
  munmap((char *)s->arena - MBXV_ARENA_GUARD, reservation(s->size));
  free(s->template_bytes);
  free(s);
}

mbxV_pool *mbxV_pool_new(unsigned cap) {
  mbxV_pool *p = calloc(1, sizeof *p);
  if (p == NULL) return NULL;
  if (pthread_mutex_init(&p->lock, NULL) != 0) {
    free(p);
    return NULL;
  }
  p->cap = cap ? cap : MBXV_POOL_DEFAULT_CAP;
  return p;
}

void mbxV_pool_free(mbxV_pool *p) {
  if (p == NULL) return;
  for (size_t c = 0; c < sizeof p->idle / sizeof *p->idle; c++) {
    while (p->idle[c]) {
      mbxV_slot *s = p->idle[c];
      p->idle[c] = s->next;
      p->reserved -= reservation(s->size);
      slot_unmap(s);
    }
  }
  pthread_mutex_destroy(&p->lock);
  free(p);
}

unsigned mbxV_pool_live(mbxV_pool *p) {
  pthread_mutex_lock(&p->lock);
  unsigned n = p->live;
  pthread_mutex_unlock(&p->lock);
  return n;
}

size_t mbxV_pool_reserved(mbxV_pool *p) {
  pthread_mutex_lock(&p->lock);
  size_t n = p->reserved;
  pthread_mutex_unlock(&p->lock);
  return n;
}

void mbxV_pool_set_caps(mbxV_pool *p, unsigned cap, size_t reserve_cap) {
  pthread_mutex_lock(&p->lock);
  p->cap = cap ? cap : MBXV_POOL_DEFAULT_CAP;
  p->reserve_cap = reserve_cap;
  pthread_mutex_unlock(&p->lock);
}

void mbxV_pool_get_caps(mbxV_pool *p, unsigned *cap, size_t *reserve_cap) {
  pthread_mutex_lock(&p->lock);
  *cap = p->cap;
  *reserve_cap = p->reserve_cap;
  pthread_mutex_unlock(&p->lock);
}

/* Under the lock: does one more mapping of `need` bytes pass a cap? */
static int over_caps(const mbxV_pool *p, size_t need) {
  return p->live + p->idle_count >= p->cap ||
         (p->reserve_cap && (p->reserved > p->reserve_cap || need > p->reserve_cap - p->reserved));
}

/* Under the lock: unlink one idle slot (any class) so its reservation can be unmapped. */
static mbxV_slot *idle_pop_any(mbxV_pool *p) {
  for (size_t c = 0; c < sizeof p->idle / sizeof *p->idle; c++) {
    if (p->idle[c] == NULL) continue;
    mbxV_slot *s = p->idle[c];
    p->idle[c] = s->next;
    p->idle_count--;
    p->reserved -= reservation(s->size);
    return s;
  }
  return NULL;
}

mbxV_take_result mbxV_pool_take(mbxV_pool *p, size_t limit, mbxV_slot **out) {
  *out = NULL;
  size_t size = mbxV_slot_size_for(limit);
  if (size == 0 || size > SIZE_MAX - MBXV_ARENA_GUARD) return MBXV_TAKE_NO_SPACE;
  unsigned cls = log2_of(size);
  mbxV_slot *evicted = NULL;
  pthread_mutex_lock(&p->lock);
  if (p->live >= p->cap) {
    pthread_mutex_unlock(&p->lock);
    return MBXV_TAKE_CAP;
  }
  mbxV_slot *s = p->idle[cls];
  if (s) {
    p->idle[cls] = s->next;
    p->idle_count--;
    p->live++;
    pthread_mutex_unlock(&p->lock);
    s->next = NULL;
    *out = s;
    return MBXV_TAKE_OK;
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
  if (p->live + p->idle_count >= p->cap) refused = MBXV_TAKE_CAP;
  else if (over_caps(p, need)) refused = MBXV_TAKE_RESERVE_CAP;
  if (refused == MBXV_TAKE_OK) {
    p->live++; /* counted now, so racing takes cannot pass the caps while we map */
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
    p->live--;
    p->reserved -= need;
    pthread_mutex_unlock(&p->lock);
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
  char *high = a->high;
  if (high < base || high > limit) high = limit;
  char *keep = base + s->template_len + MBXV_ARENA_KEEP_RESIDENT;
  if (high > keep) give_back(keep, high, os_page());
  mbxV_pool *p = s->pool;
  pthread_mutex_lock(&p->lock);
  s->next = p->idle[s->size_class];
  p->idle[s->size_class] = s;
  p->idle_count++;
  p->live--;
  pthread_mutex_unlock(&p->lock);
}

int mbxV_slot_snapshot(mbxV_slot *s) {
  size_t len = mbxV_arena_prefix(s->arena);
  char *copy = malloc(len);
  if (copy == NULL) return 0;
  memcpy(copy, s->arena, len);
  free(s->template_bytes);
  s->template_bytes = copy;
  s->template_len = len;
  return 1;
}

void mbxV_slot_restore(mbxV_slot *s) {
  memcpy(s->arena, s->template_bytes, s->template_len);
}

void mbxV_slot_restore_prefix(mbxV_slot *s, const char *bytes, size_t len, size_t hole_at,
                              size_t hole_len) {
  mbxV_arena *a = s->arena;
  char *base = (char *)a, *limit = base + s->size;
  /* The dirty extent of the state being replaced, clamped like mbxV_pool_give does. */
  char *old_high = a->high;
  if (old_high < base || old_high > limit) old_high = limit;
  memcpy(base, bytes, hole_at);
  memcpy(base + hole_at + hole_len, bytes + hole_at + hole_len, len - hole_at - hole_len);
  /* Past the restored prefix everything is free again: give back what the replaced state
     dirtied there, beyond the small slack the next run will almost surely touch again. */
  char *keep = base + len + MBXV_ARENA_KEEP_RESIDENT;
  if (old_high > keep) give_back(keep, old_high, os_page());
  else keep = old_high;
  /* Below `keep` pages may still be dirty: the high-water mark must cover them (for trim). */
  if (keep > a->high) a->high = keep;
}

void mbxV_arena_clear(mbxV_arena *a, size_t user_size) {
  /* Unlike mbxV_arena_init, the user area is left alone: it holds the vm being rebuilt. */
  a->runs = NULL;
  memset(a->small, 0, sizeof a->small);
  a->bump = a->user + align_up(user_size, MBXV_ARENA_GRANULE);
  if (a->high < a->bump) a->high = a->bump;
}
