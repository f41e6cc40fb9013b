/* capabilities/seeds.c -- sandboxes' random seeds from one secret per runtime (seeds.h). */
#include "capabilities/seeds.h"

#include <pthread.h>
#include <sched.h>
#include <sys/random.h>
#include <time.h>

/* ---- SipHash-2-4 (Aumasson and Bernstein), over exactly two little-endian words ---- */

static uint64_t rotl(uint64_t x, int b) {
  return (x << b) | (x >> (64 - b));
}

typedef struct sip {
  uint64_t v0, v1, v2, v3;
} sip;

static void sip_round(sip *s) {
  s->v0 += s->v1;
  s->v1 = rotl(s->v1, 13);
  s->v1 ^= s->v0;
  s->v0 = rotl(s->v0, 32);
  s->v2 += s->v3;
  s->v3 = rotl(s->v3, 16);
  s->v3 ^= s->v2;
  s->v0 += s->v3;
  s->v3 = rotl(s->v3, 21);
  s->v3 ^= s->v0;
  s->v2 += s->v1;
  s->v1 = rotl(s->v1, 17);
  s->v1 ^= s->v2;
  s->v2 = rotl(s->v2, 32);
}

static void sip_absorb(sip *s, uint64_t m) {
  s->v3 ^= m;
  sip_round(s);
  sip_round(s);
  s->v0 ^= m;
}

uint64_t mbxC_siphash_2_4(const uint64_t k[2], uint64_t m0, uint64_t m1) {
  sip s = {k[0] ^ 0x736f6d6570736575ull, k[1] ^ 0x646f72616e646f6dull, k[0] ^ 0x6c7967656e657261ull,
           k[1] ^ 0x7465646279746573ull};
  sip_absorb(&s, m0);
  sip_absorb(&s, m1);
  sip_absorb(&s, (uint64_t)16 << 56); /* the last block: the message length (16), no tail */
  s.v2 ^= 0xff;
  for (int i = 0; i < 4; i++)
    sip_round(&s);
  return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}

/* ---- fork generations ---- */

static _Atomic uint64_t fork_generation = 1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static _Atomic uint64_t next_instance = 1;

/* This thread's counter values not yet used: [next, end) of the seeds `instance` in fork
   generation `generation`. */
typedef struct seed_batch {
  uint64_t instance, generation, next, end;
} seed_batch;
static _Thread_local seed_batch tl_batch;

static void after_fork_in_child(void) {
  atomic_fetch_add(&fork_generation, 1);
}

static void install_atfork(void) {
  pthread_atfork(NULL, NULL, after_fork_in_child);
}

static void draw_key(uint64_t key[2]) {
  if (getrandom(key, 2 * sizeof *key, 0) == (ssize_t)(2 * sizeof *key)) return;
  /* No kernel randomness (a seccomp filter, an old kernel): the clocks, as port_local did. No
     address is mixed in: seeds are the guest's to recover, and must not locate the heap. */
  struct timespec a, b;
  clock_gettime(CLOCK_REALTIME, &a);
  clock_gettime(CLOCK_MONOTONIC, &b);
  uint64_t k[2] = {(uint64_t)a.tv_nsec ^ ((uint64_t)a.tv_sec << 30),
                   (uint64_t)b.tv_nsec ^ ((uint64_t)b.tv_sec << 30)};
  key[0] = mbxC_siphash_2_4(k, 1, 0);
  key[1] = mbxC_siphash_2_4(k, 2, 0);
}

void mbxC_seeds_init(mbxC_seeds *s) {
  pthread_once(&atfork_once, install_atfork);
  atomic_store(&s->counter, 0);
  s->instance = atomic_fetch_add(&next_instance, 1);
  atomic_store(&s->rekeying, 0);
  draw_key(s->key);
  atomic_store(&s->generation, atomic_load(&fork_generation));
}

void mbxC_seeds_draw(mbxC_seeds *s, uint64_t out[2]) {
  uint64_t now = atomic_load_explicit(&fork_generation, memory_order_acquire);
  if (atomic_load_explicit(&s->generation, memory_order_acquire) != now) {
    /* The first draw since a fork, in the child: a secret of its own. Other threads wait
       (the lock is held for one getrandom). */
    while (atomic_exchange_explicit(&s->rekeying, 1, memory_order_acquire))
      sched_yield();
    if (atomic_load_explicit(&s->generation, memory_order_relaxed) != now) {
      draw_key(s->key);
      atomic_store_explicit(&s->generation, now, memory_order_release);
    }
    atomic_store_explicit(&s->rekeying, 0, memory_order_release);
  }
  seed_batch *b = &tl_batch;
  if (b->instance != s->instance || b->generation != now || b->next == b->end) {
    b->next = atomic_fetch_add_explicit(&s->counter, MBXC_SEEDS_BATCH, memory_order_relaxed);
    b->end = b->next + MBXC_SEEDS_BATCH;
    b->instance = s->instance;
    b->generation = now;
  }
  uint64_t n = b->next++;
  out[0] = mbxC_siphash_2_4(s->key, n, 0);
  out[1] = mbxC_siphash_2_4(s->key, n, 1);
}
