/* vm/bytecode_cache.c -- per-runtime cache of bytecode we compiled from host-given source. */
#include "vm/bytecode_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "vm/budget.h"
#include "vm/load.h"
#include "vm/thread_index.h"

/* One allocation: the struct, then the chunk name (NUL-terminated), the source and the
   bytecode. Immutable once published, so readers need no lock while they hold a reference. */
struct mbxV_bcache_entry {
  mbxV_bcache_key key;
  struct mbxV_bcache_entry *chain;         /* next in the bucket */
  struct mbxV_bcache_entry *newer, *older; /* LRU list */
  size_t charge;                           /* bytes of this allocation */
  unsigned refs;                           /* readers holding it (under the lock) */
  int dead;                                /* unlinked; freed when refs drops to 0 */
  unsigned flags;
  size_t name_len, src_len, code_len;
  const char *name, *src, *code;
};

struct mbxV_bcache {
  pthread_mutex_t lock;
  mbxV_bcache_entry **buckets; /* power-of-two count */
  size_t nbuckets;
  mbxV_bcache_entry *newest, *oldest;
  size_t max_bytes;
  mbxV_bcache_stats stats; /* hits: those of the locked path only (see thread_hits) */
  /* Read by every thread's hit without the lock (see "this thread's last hit" below), on a
     line the hits never write: unique in the process, and the count of entries dropped. */
  _Alignas(MBXV_CACHE_LINE) uint64_t id;
  _Atomic uint64_t epoch; /* raised under the lock by every drop */
  /* Hits served from a thread's own copy, one counter line per thread slot, summed by
     mbxV_bcache_stats_get: a hit writes only its own thread's line. */
  struct {
    _Alignas(MBXV_CACHE_LINE) _Atomic uint64_t n;
  } thread_hits[MBXV_THREAD_SLOTS];
};

static _Atomic uint64_t next_cache_id = 1;

#define INITIAL_BUCKETS 256

mbxV_bcache *mbxV_bcache_new(size_t max_bytes) {
  mbxV_bcache *c = aligned_alloc(_Alignof(mbxV_bcache), sizeof *c);
  if (c == NULL) return NULL;
  memset(c, 0, sizeof *c);
  c->id = atomic_fetch_add(&next_cache_id, 1);
  c->buckets = calloc(INITIAL_BUCKETS, sizeof *c->buckets);
  if (c->buckets == NULL || pthread_mutex_init(&c->lock, NULL) != 0) {
    free(c->buckets);
    free(c);
    return NULL;
  }
  c->nbuckets = INITIAL_BUCKETS;
  c->max_bytes = max_bytes;
  return c;
}

void mbxV_bcache_free(mbxV_bcache *c) {
  if (c == NULL) return;
  for (mbxV_bcache_entry *e = c->newest, *next; e; e = next) {
    next = e->older;
    free(e);
  }
  free(c->buckets);
  pthread_mutex_destroy(&c->lock);
  free(c);
}

/* ---- under the lock ---- */

static mbxV_bcache_entry **bucket_of(mbxV_bcache *c, mbxV_bcache_key key) {
  return &c->buckets[key.low & (c->nbuckets - 1)];
}

static void lru_unlink(mbxV_bcache *c, mbxV_bcache_entry *e) {
  if (e->newer)
    e->newer->older = e->older;
  else
    c->newest = e->older;
  if (e->older)
    e->older->newer = e->newer;
  else
    c->oldest = e->newer;
  e->newer = e->older = NULL;
}

static void lru_push_newest(mbxV_bcache *c, mbxV_bcache_entry *e) {
  e->older = c->newest;
  e->newer = NULL;
  if (c->newest)
    c->newest->newer = e;
  else
    c->oldest = e;
  c->newest = e;
}

/* Take e out of the table and the list; free it now unless a reader still holds it. */
static void drop(mbxV_bcache *c, mbxV_bcache_entry *e) {
  for (mbxV_bcache_entry **link = bucket_of(c, e->key); *link; link = &(*link)->chain) {
    if (*link == e) {
      *link = e->chain;
      break;
    }
  }
  lru_unlink(c, e);
  c->stats.bytes -= e->charge;
  c->stats.entries--;
  atomic_fetch_add_explicit(&c->epoch, 1, memory_order_release);
  e->dead = 1;
  if (e->refs == 0) free(e);
}

static void evict_to(mbxV_bcache *c, size_t max_bytes) {
  while (c->oldest && c->stats.bytes > max_bytes) {
    drop(c, c->oldest);
    c->stats.evictions++;
  }
}

/* Double the bucket array when the chains get long; if that allocation fails, longer chains
   are merely slower. */
static void maybe_grow(mbxV_bcache *c) {
  if (c->stats.entries < c->nbuckets) return;
  size_t n = c->nbuckets * 2;
  mbxV_bcache_entry **b = calloc(n, sizeof *b);
  if (b == NULL) return;
  for (size_t i = 0; i < c->nbuckets; i++) {
    for (mbxV_bcache_entry *e = c->buckets[i], *next; e; e = next) {
      next = e->chain;
      mbxV_bcache_entry **head = &b[e->key.low & (n - 1)];
      e->chain = *head;
      *head = e;
    }
  }
  free(c->buckets);
  c->buckets = b;
  c->nbuckets = n;
}

static int same_key(mbxV_bcache_key a, mbxV_bcache_key b) {
  return a.low == b.low && a.high == b.high;
}

/* ---- the interface ---- */

void mbxV_bcache_set_max(mbxV_bcache *c, size_t max_bytes) {
  pthread_mutex_lock(&c->lock);
  c->max_bytes = max_bytes;
  evict_to(c, max_bytes);
  pthread_mutex_unlock(&c->lock);
}

size_t mbxV_bcache_max(mbxV_bcache *c) {
  pthread_mutex_lock(&c->lock);
  size_t n = c->max_bytes;
  pthread_mutex_unlock(&c->lock);
  return n;
}

void mbxV_bcache_stats_get(mbxV_bcache *c, mbxV_bcache_stats *out) {
  pthread_mutex_lock(&c->lock);
  *out = c->stats;
  pthread_mutex_unlock(&c->lock);
  for (int i = 0; i < MBXV_THREAD_SLOTS; i++)
    out->hits += atomic_load_explicit(&c->thread_hits[i].n, memory_order_relaxed);
}

mbxV_bcache_key mbxV_bcache_key_of(const char *src, size_t len, const char *chunk_name,
                                   unsigned flags) {
  /* Everything that changes the bytecode or its meaning goes into the seed, so a key is only
     ever compared with keys of the same chunk name, Lua release and flags. */
  uint64_t header = ((uint64_t)LUA_VERSION_RELEASE_NUM << 32) | flags;
  uint64_t seed = XXH3_64bits_withSeed(chunk_name, strlen(chunk_name), header);
  XXH128_hash_t h = XXH3_128bits_withSeed(src, len, seed);
  return (mbxV_bcache_key){h.low64, h.high64};
}

/* mbxV_bcache_get, and the epoch as of the hit (under the lock, while the entry is listed). */
static const mbxV_bcache_entry *lookup(mbxV_bcache *c, mbxV_bcache_key key, const char *src,
                                       size_t len, const char *chunk_name, unsigned flags,
                                       uint64_t *epoch) {
  size_t name_len = strlen(chunk_name);
  pthread_mutex_lock(&c->lock);
  mbxV_bcache_entry *found = NULL;
  for (mbxV_bcache_entry *e = *bucket_of(c, key); e; e = e->chain) {
    if (!same_key(e->key, key)) continue;
    /* The hash only finds the candidate: the bytes decide. A forged or colliding key must
       never hand one source's bytecode to another. */
    if (e->flags == flags && e->src_len == len && e->name_len == name_len &&
        memcmp(e->name, chunk_name, name_len) == 0 && memcmp(e->src, src, len) == 0)
      found = e;
    else
      c->stats.rejected++;
    break; /* at most one entry per key */
  }
  if (found) {
    found->refs++;
    lru_unlink(c, found);
    lru_push_newest(c, found);
    c->stats.hits++;
  } else {
    c->stats.misses++;
  }
  *epoch = atomic_load_explicit(&c->epoch, memory_order_relaxed);
  pthread_mutex_unlock(&c->lock);
  return found;
}

const mbxV_bcache_entry *mbxV_bcache_get(mbxV_bcache *c, mbxV_bcache_key key, const char *src,
                                         size_t len, const char *chunk_name, unsigned flags) {
  uint64_t epoch;
  return lookup(c, key, src, len, chunk_name, flags, &epoch);
}

void mbxV_bcache_release(mbxV_bcache *c, const mbxV_bcache_entry *e) {
  if (e == NULL) return;
  mbxV_bcache_entry *m = (mbxV_bcache_entry *)e;
  pthread_mutex_lock(&c->lock);
  int gone = --m->refs == 0 && m->dead;
  pthread_mutex_unlock(&c->lock);
  if (gone) free(m);
}

const char *mbxV_bcache_code(const mbxV_bcache_entry *e, size_t *len) {
  *len = e->code_len;
  return e->code;
}

int mbxV_bcache_put(mbxV_bcache *c, mbxV_bcache_key key, const char *src, size_t len,
                    const char *chunk_name, unsigned flags, const char *code, size_t code_len) {
  size_t name_len = strlen(chunk_name);
  size_t charge = sizeof(mbxV_bcache_entry) + name_len + 1 + len + code_len;
  if (charge < len || charge < code_len) return 0; /* overflow */
  /* Checked again under the lock; this only avoids building an entry that cannot stay. */
  if (charge > mbxV_bcache_max(c)) return 0;
  mbxV_bcache_entry *e = malloc(charge);
  if (e == NULL) return 0;
  char *p = (char *)(e + 1);
  memcpy(p, chunk_name, name_len + 1);
  e->name = p;
  p += name_len + 1;
  memcpy(p, src, len);
  e->src = p;
  p += len;
  memcpy(p, code, code_len);
  e->code = p;
  e->key = key;
  e->chain = e->newer = e->older = NULL;
  e->charge = charge;
  e->refs = 0;
  e->dead = 0;
  e->flags = flags;
  e->name_len = name_len;
  e->src_len = len;
  e->code_len = code_len;

  pthread_mutex_lock(&c->lock);
  if (charge > c->max_bytes) {
    pthread_mutex_unlock(&c->lock);
    free(e);
    return 0;
  }
  for (mbxV_bcache_entry *old = *bucket_of(c, key); old; old = old->chain) {
    if (same_key(old->key, key)) {
      drop(c, old); /* the same compile raced in from another thread, or a collision */
      break;
    }
  }
  maybe_grow(c);
  mbxV_bcache_entry **head = bucket_of(c, key);
  e->chain = *head;
  *head = e;
  lru_push_newest(c, e);
  c->stats.bytes += charge;
  c->stats.entries++;
  evict_to(c, c->max_bytes);
  pthread_mutex_unlock(&c->lock);
  return 1;
}

/* ---- this thread's last hit ----
**
** Two threads running the same source would otherwise meet on this cache's lock, its LRU
** list and the entry's reference count at every run: each writes lines the other reads next,
** and those lines cross between the cores twice per run (issue 10, 2-thread throughput). So a
** thread keeps a private copy of its last hit: name, source, flags, bytecode, and the cache's
** id and epoch as of that hit. The copy serves a run only while the epoch is unchanged, that
** is while no entry of that cache was dropped since, so the entry is still cached and the
** copy is exactly what a locked hit would return; it is compared byte for byte like any hit.
** Nothing shared is written but this thread's own hit counter. Every LAST_HIT_REFRESH-th use
** goes through the lock instead, so the entry stays recently used in the LRU order. The id
** tells caches apart without touching a freed one (ids are never reused). Host memory: one
** copy of at most LAST_HIT_MAX bytes per thread, freed when the thread exits.
*/

#define LAST_HIT_MAX ((size_t)16 << 10)
#define LAST_HIT_REFRESH 64

typedef struct last_hit {
  uint64_t cache_id; /* 0: empty */
  uint64_t epoch;
  unsigned uses; /* since the locked hit that made the copy */
  unsigned flags;
  mbxV_bcache_key key;
  size_t cap, name_len, src_len, code_len;
  char bytes[]; /* name, source, bytecode */
} last_hit;

static pthread_once_t last_hit_once = PTHREAD_ONCE_INIT;
/* Its destructor frees a thread's copy at the thread's exit (the library is not unloadable
   anyway: capabilities/seeds.c registers a pthread_atfork handler). */
static pthread_key_t last_hit_key;
static int last_hit_keyed;
static _Thread_local last_hit *my_last_hit;

/* At the thread's exit: its copy goes. */
static void forget_last_hit(void *h) {
  free(h);
  my_last_hit = NULL;
}

static void make_last_hit_key(void) {
  last_hit_keyed = pthread_key_create(&last_hit_key, forget_last_hit) == 0;
}

/* The copy, if it may serve this load. */
static const last_hit *last_hit_for(mbxV_bcache *c, mbxV_bcache_key key, const char *src,
                                    size_t len, const char *chunk_name, size_t name_len,
                                    unsigned flags) {
  last_hit *h = my_last_hit;
  if (h == NULL || h->cache_id != c->id || ++h->uses >= LAST_HIT_REFRESH ||
      atomic_load_explicit(&c->epoch, memory_order_acquire) != h->epoch || !same_key(h->key, key) ||
      h->flags != flags || h->src_len != len || h->name_len != name_len ||
      memcmp(h->bytes, chunk_name, name_len) != 0 || memcmp(h->bytes + name_len, src, len) != 0)
    return NULL;
  return h;
}

/* Keep a copy of e, hit at epoch; when it is too large or out of memory, keep none. */
static void remember(mbxV_bcache *c, const mbxV_bcache_entry *e, uint64_t epoch) {
  last_hit *h = my_last_hit;
  size_t need = e->name_len + e->src_len + e->code_len;
  if (h) h->cache_id = 0;
  pthread_once(&last_hit_once, make_last_hit_key);
  if (need > LAST_HIT_MAX || !last_hit_keyed) return;
  if (h == NULL || h->cap < need) {
    /* The key never names a block realloc may free: cleared first, set to the new one. */
    pthread_setspecific(last_hit_key, NULL);
    my_last_hit = NULL;
    last_hit *grown = realloc(h, sizeof *h + need);
    if (grown == NULL) {
      free(h);
      return;
    }
    if (pthread_setspecific(last_hit_key, grown) != 0) {
      free(grown);
      return;
    }
    h = grown;
    h->cap = need;
    my_last_hit = h;
  }
  memcpy(h->bytes, e->name, e->name_len);
  memcpy(h->bytes + e->name_len, e->src, e->src_len);
  memcpy(h->bytes + e->name_len + e->src_len, e->code, e->code_len);
  h->name_len = e->name_len;
  h->src_len = e->src_len;
  h->code_len = e->code_len;
  h->key = e->key;
  h->flags = e->flags;
  h->epoch = epoch;
  h->uses = 0;
  h->cache_id = c->id;
}

/* ---- the load step ---- */

typedef struct whole {
  const char *p;
  size_t n;
} whole;

static const char *read_whole(lua_State *L, void *ud, size_t *size) {
  (void)L;
  whole *w = ud;
  *size = w->n;
  w->n = 0;
  return *size ? w->p : NULL;
}

typedef struct dump_buf {
  char *p;
  size_t n, cap;
  int failed;
} dump_buf;

/* Host memory, not the guest heap: the copy is the runtime's, bounded by the cache size. */
static int write_dump(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  dump_buf *b = ud;
  if (b->n + n > b->cap) {
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->n + n)
      cap *= 2;
    char *grown = realloc(b->p, cap);
    if (grown == NULL) {
      b->failed = 1;
      return 1; /* stops lua_dump */
    }
    b->p = grown;
    b->cap = cap;
  }
  memcpy(b->p + b->n, p, n);
  b->n += n;
  return 0;
}

int mbxV_bcache_load(mbxV_bcache *c, lua_State *L, const char *text, size_t len,
                     const char *chunk_name, int *hit) {
  if (hit) *hit = 0;
  const unsigned flags = MBXV_BCACHE_TEXT_WITH_DEBUG;
  if (c == NULL) return mbxV_load_text(L, text, len, chunk_name);
  mbxV_bcache_key key = mbxV_bcache_key_of(text, len, chunk_name, flags);
  const last_hit *mine = last_hit_for(c, key, text, len, chunk_name, strlen(chunk_name), flags);
  if (mine) {
    atomic_fetch_add_explicit(&c->thread_hits[mbxV_thread_index()].n, 1, memory_order_relaxed);
    whole w = {mine->bytes + mine->name_len + mine->src_len, mine->code_len};
    if (hit) *hit = 1;
    return lua_load(L, read_whole, &w, chunk_name, "b");
  }
  uint64_t epoch;
  const mbxV_bcache_entry *e = lookup(c, key, text, len, chunk_name, flags, &epoch);
  if (e) {
    remember(c, e, epoch);
    /* Our own dump of this exact text: lua_load allocates on the guest heap (so the memory
       limit still applies) but never runs the parser. */
    whole w = {e->code, e->code_len};
    int status = lua_load(L, read_whole, &w, chunk_name, "b");
    mbxV_bcache_release(c, e);
    if (hit) *hit = 1;
    return status;
  }
  int status = mbxV_load_text(L, text, len, chunk_name);
  /* Only clean compiles: a parse cut short by a trip may have produced nothing usable, and a
     syntax error is cheap to reproduce. */
  if (status != LUA_OK || mbxV_tripped(L) != MBXV_TRIP_NONE) return status;
  dump_buf b = {0};
  /* strip = 0: the debug info is what keeps "input:12:" in error messages of cached runs. */
  if (lua_dump(L, write_dump, &b, 0) == 0 && !b.failed)
    mbxV_bcache_put(c, key, text, len, chunk_name, flags, b.p, b.n);
  free(b.p);
  return status;
}
