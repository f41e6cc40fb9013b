/* vm/bytecode_cache.h -- per-runtime cache of bytecode we compiled from host-given source. */
#ifndef MBX_VM_BYTECODE_CACHE_H
#define MBX_VM_BYTECODE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include <lua.h>

/*
** Parsing a 1.2 KB snippet costs ~17 us; loading the bytecode the parser produced for it costs
** ~2 us. The cache keeps, per runtime, the lua_dump of chunks that mbxV_load_text compiled
** successfully from the source text mbx_run was given, and loads it back (mode "b") when the
** exact same text, chunk name, Lua release and load flags come again.
**
** What makes loading bytecode safe here (Lua 5.4.4 crashes on malformed binary chunks,
** THREATS E4): only bytes this process dumped from a function it parsed itself are ever
** stored, a hit is confirmed by comparing the full source (never by the hash alone), and guest
** `load` calls never come here: they stay text-only, and they stay out of the cache because a
** hit-or-miss timing would tell one tenant what another ran.
**
** Thread-safe: one mutex guards the table and the LRU list; an entry handed out by
** mbxV_bcache_get is immutable and stays valid, even if evicted meanwhile, until released.
** Bounded: entries are charged their whole host allocation and the least recently used ones
** are dropped once the total passes the maximum.
*/

#define MBXV_BCACHE_DEFAULT_BYTES ((size_t)16 << 20)
/* Load flags in the key: compiled from text (mode "t"), debug info kept (lua_dump strip 0,
   so error messages keep their chunk:line). */
#define MBXV_BCACHE_TEXT_WITH_DEBUG 1u

typedef struct mbxV_bcache mbxV_bcache;
typedef struct mbxV_bcache_entry mbxV_bcache_entry;

/* XXH3-128 of the source, seeded with a hash of chunk name, Lua release and flags. */
typedef struct mbxV_bcache_key {
  uint64_t low, high;
} mbxV_bcache_key;

/* NULL when out of memory. max_bytes 0 disables caching (lookups miss, puts are dropped). */
mbxV_bcache *mbxV_bcache_new(size_t max_bytes);
/* Every entry must have been released. NULL is a no-op. */
void mbxV_bcache_free(mbxV_bcache *c);
/* Change the bound, evicting down to it at once. */
void mbxV_bcache_set_max(mbxV_bcache *c, size_t max_bytes);
size_t mbxV_bcache_max(mbxV_bcache *c);

typedef struct mbxV_bcache_stats {
  size_t bytes; /* charged bytes of the cached entries */
  size_t entries;
  uint64_t hits, misses, evictions;
  uint64_t rejected; /* hash matched, source did not (a collision or a forged key) */
} mbxV_bcache_stats;
void mbxV_bcache_stats_get(mbxV_bcache *c, mbxV_bcache_stats *out);

mbxV_bcache_key mbxV_bcache_key_of(const char *src, size_t len, const char *chunk_name,
                                   unsigned flags);

/* The entry for key whose source, chunk name and flags are exactly these (it becomes the most
   recently used), or NULL. A returned entry must be given to mbxV_bcache_release. */
const mbxV_bcache_entry *mbxV_bcache_get(mbxV_bcache *c, mbxV_bcache_key key, const char *src,
                                         size_t len, const char *chunk_name, unsigned flags);
void mbxV_bcache_release(mbxV_bcache *c, const mbxV_bcache_entry *e);
/* The entry's bytecode (a lua_dump). */
const char *mbxV_bcache_code(const mbxV_bcache_entry *e, size_t *len);

/* Store code for key, copying everything. An entry already under key is replaced. Returns 1
   if stored, 0 if not (larger than the bound, or out of memory). Internal: the key is trusted
   to be mbxV_bcache_key_of(src, ...) — tests pass a forged one to prove hits are verified. */
int mbxV_bcache_put(mbxV_bcache *c, mbxV_bcache_key key, const char *src, size_t len,
                    const char *chunk_name, unsigned flags, const char *code, size_t code_len);

/*
** The load step of mbx_run: push the compiled chunk of text or an error message, returning
** what mbxV_load_text returns. With c != NULL, a cached compile of this exact text is loaded
** from its bytecode (no parser, so no metering either: the work is bounded by bytes we
** produced), and a successful, untripped text compile is dumped and stored. *hit (may be NULL)
** tells which way it went. Never call it for guest-supplied text: see above.
*/
int mbxV_bcache_load(mbxV_bcache *c, lua_State *L, const char *text, size_t len,
                     const char *chunk_name, int *hit);

#endif
