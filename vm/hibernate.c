/* vm/hibernate.c -- an idle sandbox's heap out of memory and back: same slot, same address. */
#include "vm/hibernate.h"

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <lz4.h>

#include "vm/arena.h"

/* What the image of a slot is a delta against (vm/arena.h, mbxV_slot_reference). */
typedef struct reference {
  const uint64_t *words;
  size_t nwords;
  const uint32_t *reloc; /* pointer words of a template built at another address */
  size_t nreloc;
  uint64_t delta;
} reference;

static void reference_of(mbxV_slot *s, reference *r) {
  size_t len;
  const char *bytes = mbxV_slot_reference(s, &len, &r->reloc, &r->nreloc, &r->delta);
  r->words = (const uint64_t *)(const void *)bytes;
  r->nwords = bytes ? len / sizeof(uint64_t) : 0;
}

/* words[0, n) ^= the reference, as it would read once restored into this slot: a word the
   template relocates gets the slot's delta first. Its own inverse, so it both makes and
   undoes the delta. */
static void xor_reference(uint64_t *words, size_t n, const reference *r) {
  size_t common = n < r->nwords ? n : r->nwords;
  for (size_t i = 0; i < common; i++)
    words[i] ^= r->words[i];
  for (size_t k = 0; k < r->nreloc && r->reloc[k] < common; k++) {
    size_t i = r->reloc[k];
    words[i] ^= r->words[i] ^ (r->words[i] + r->delta);
  }
}

#ifndef MBX_ARENA_MALLOC
/* A hibernation's working memory (the delta, then the compressed bytes: about twice the
   prefix), kept per thread and reused: allocated and freed per hibernation, buffers of that
   size between the small long-lived images would leave malloc's heap fragmented, resident
   holes that cost about as much per session as the images themselves. */
static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;

typedef struct scratch {
  size_t cap;
  size_t mapped; /* its own mapping (past SCRATCH_KEEP), else malloc's */
  char bytes[];  /* 16 bytes in: 8-byte aligned for the word-wise delta */
} scratch;
_Static_assert(offsetof(scratch, bytes) % sizeof(uint64_t) == 0, "the delta is read by words");

/* Past SCRATCH_KEEP, the scratch is a mapping of its own, unmapped when done: freed to malloc,
   a buffer of that size stays resident in the heap (malloc's mmap threshold grows with the
   blocks it frees), and a server hibernating an 8 MiB session grew by 8 MiB instead of
   shrinking by it. */
#define SCRATCH_KEEP ((size_t)1 << 20)

static void scratch_free(void *p) {
  scratch *sc = p;
  if (sc == NULL) return;
  if (sc->mapped)
    munmap(sc, sizeof *sc + sc->cap);
  else
    free(sc);
}

static void scratch_make_key(void) {
  scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0;
}

/* At least n bytes of this thread's scratch, or NULL. */
static char *scratch_get(size_t n) {
  pthread_once(&scratch_once, scratch_make_key);
  if (!scratch_ok) return NULL;
  scratch *sc = pthread_getspecific(scratch_key);
  if (sc && sc->cap >= n) return sc->bytes;
  size_t cap = n + n / 4;
  scratch *grown;
  int mapped = cap > SCRATCH_KEEP;
  if (mapped) {
    void *m =
        mmap(NULL, sizeof *sc + cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    grown = m == MAP_FAILED ? NULL : m;
  } else {
    grown = mbxV_copy_alloc(sizeof *sc + cap);
  }
  if (grown == NULL) return NULL;
  grown->cap = cap;
  grown->mapped = mapped;
  if (pthread_setspecific(scratch_key, grown) != 0) {
    scratch_free(grown);
    return NULL;
  }
  scratch_free(sc);
  return grown->bytes;
}

/* Past SCRATCH_KEEP, this thread's scratch is freed once a hibernation is done with it: a
   thread that once hibernated a large heap (incompressible: its scratch is 2.5 times the heap)
   must not keep that much host memory, uncounted by any sandbox, for the rest of its life. The
   small common case keeps its buffer (the fragmentation above). */
static void scratch_done(void) {
  scratch *sc = scratch_ok ? pthread_getspecific(scratch_key) : NULL;
  if (sc == NULL || !sc->mapped) return;
  if (pthread_setspecific(scratch_key, NULL) == 0) scratch_free(sc);
}

#endif

mbxV_hibernate_result mbxV_vm_hibernate(mbxV_vm *vm, mbxV_image *img) {
#ifdef MBX_ARENA_MALLOC
  (void)vm;
  (void)img;
  return MBXV_HIBERNATE_UNSUPPORTED;
#else
  mbxV_slot *s = vm->slot;
  /* The prefix is a whole number of words: the arena hands out 8-byte granules from a
     page-aligned base. */
  size_t len = mbxV_arena_prefix(s->arena);
  if (len > (size_t)LZ4_MAX_INPUT_SIZE) return MBXV_HIBERNATE_NO_MEMORY;
  int bound = LZ4_compressBound((int)len);
  size_t delta_room = (len + 63) / 64 * 64;
  char *delta = scratch_get(delta_room + (size_t)bound);
  if (delta == NULL) return MBXV_HIBERNATE_NO_MEMORY;
  char *packed = delta + delta_room;
  /* Host memory the sleeping state would point at for nothing: the output buffers are per
     call (every run and resume empties them first), so they are released and regrown. */
  mbxV_output_free(&vm->output);
  /* A first run recorded over the pristine bytes (vm/first_run.h) may not be replayed over a
     state that has been away: mark it touched, as any change before a first run is. */
  mbxV_vm_touched(vm);
  /* Free space goes back to the OS first: it reads as zeros, which compress to nothing. */
  mbxV_arena_trim(s->arena);
  mbxV_arena_copy_out(s->arena, delta, len);
  reference r;
  reference_of(s, &r);
  xor_reference((uint64_t *)(void *)delta, len / sizeof(uint64_t), &r);
  int n = LZ4_compress_default(delta, packed, (int)len, bound);
  char *fit = n > 0 ? malloc((size_t)n) : NULL;
  if (fit != NULL) memcpy(fit, packed, (size_t)n);
  scratch_done();
  if (fit == NULL) return MBXV_HIBERNATE_NO_MEMORY;
  if (!mbxV_slot_release_pages(s)) {
    /* The kernel kept the old mapping or left the range unmapped: put the state back. */
    img->slot = s;
    img->bytes = fit;
    img->packed = (size_t)n;
    img->len = len;
    if (mbxV_vm_wake(img) != MBXV_WAKE_OK) return MBXV_HIBERNATE_OK; /* asleep after all */
    return MBXV_HIBERNATE_NO_MEMORY;
  }
  img->slot = s;
  img->bytes = fit;
  img->packed = (size_t)n;
  img->len = len;
  return MBXV_HIBERNATE_OK;
#endif
}

mbxV_wake_result mbxV_vm_wake(mbxV_image *img) {
  if (img->bytes == NULL) return MBXV_WAKE_OK;
  mbxV_slot *s = img->slot;
  if (!mbxV_slot_take_pages(s, img->len)) return MBXV_WAKE_NO_MEMORY;
  char *base = (char *)s->arena;
  int n = LZ4_decompress_safe(img->bytes, base, (int)img->packed, (int)img->len);
  if (n != (int)img->len) return MBXV_WAKE_CORRUPT;
  reference r;
  reference_of(s, &r);
  xor_reference((uint64_t *)(void *)base, img->len / sizeof(uint64_t), &r);
  mbxV_slot_pages_written(s);
  free(img->bytes);
  img->bytes = NULL;
  img->packed = img->len = 0;
  return MBXV_WAKE_OK;
}

void mbxV_vm_free_hibernated(mbxV_image *img) {
  if (img->bytes == NULL) return;
  mbxV_slot *s = img->slot;
  free(img->bytes);
  img->bytes = NULL;
  img->packed = img->len = 0;
  /* Zero pages, none touched: the pool takes a slot whose header names no state (vm/arena.c
     treats that as clean). Without pages back the slot cannot be reused: it is left mapped
     PROT_NONE, and the pool still counts it (address space only). */
  if (mbxV_slot_take_pages(s, 0)) mbxV_pool_give(s);
}
