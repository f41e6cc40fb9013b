/* vm/bytecode_cache.c -- per-runtime cache of bytecode we compiled from host-given source. */
#include "vm/bytecode_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "vm/budget.h"
#include "vm/load.h"

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
  mbxV_bcache_stats stats;
};

#define INITIAL_BUCKETS 256

mbxV_bcache *mbxV_bcache_new(size_t max_bytes) {
  mbxV_bcache *c = calloc(1, sizeof *c);
  if (c == NULL) return NULL;
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

const mbxV_bcache_entry *mbxV_bcache_get(mbxV_bcache *c, mbxV_bcache_key key, const char *src,
                                         size_t len, const char *chunk_name, unsigned flags) {
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
  pthread_mutex_unlock(&c->lock);
  return found;
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
  const mbxV_bcache_entry *e = mbxV_bcache_get(c, key, text, len, chunk_name, flags);
  if (e) {
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
