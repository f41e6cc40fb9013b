/* capabilities/seeds.h -- sandboxes' random seeds from one secret per runtime: no system call
   per sandbox. */
#ifndef MBX_CAPABILITIES_SEEDS_H
#define MBX_CAPABILITIES_SEEDS_H

#include <stdatomic.h>
#include <stdint.h>

/*
** A runtime draws one 128-bit secret from the kernel (getrandom) when it is made; the seed
** words of draw n are SipHash-2-4 under that secret of (n, 0) and (n, 1), n a counter shared by
** every thread. SipHash is a pseudo-random function: a guest that recovers its own seed words
** from math.random's output (xoshiro256** is invertible) learns nothing about the words any
** other draw gave, its siblings' included, without the secret; and the counter never repeats,
** so no two draws of one secret collide. A fork() copies the secret and the counter into the
** child, which would then hand out its parent's next seeds: a pthread_atfork handler bumps a
** process-wide generation, and the first draw in the child draws a new secret (one getrandom
** per runtime per fork). A thread takes MBXC_SEEDS_BATCH counter values at a time (one
** atomic on the line every thread shares per batch, not per draw); its batch names the
** mbxC_seeds it came from by an instance number that never repeats in the process (an address
** could: a runtime freed and another made in its place), and is dropped at a fork.
*/
#define MBXC_SEEDS_BATCH 64
typedef struct mbxC_seeds {
  _Atomic uint64_t counter; /* taken MBXC_SEEDS_BATCH at a time by each thread */
  uint64_t instance;        /* unique per mbxC_seeds_init in the process: names a thread's batch */
  _Atomic uint64_t generation; /* the fork generation the secret was drawn in */
  uint64_t key[2];             /* written under the re-key lock only */
  _Atomic int rekeying;        /* a spin lock around a re-key (rare: after a fork) */
} mbxC_seeds;

/* Draw the secret (from getrandom; without kernel randomness, from the clocks). */
void mbxC_seeds_init(mbxC_seeds *s);
/* Two fresh seed words; any thread, no system call (but the first draw after a fork). */
void mbxC_seeds_draw(mbxC_seeds *s, uint64_t out[2]);

/* SipHash-2-4 of the 16 bytes (m0, m1) under key k: exposed for the tests' known vector. */
uint64_t mbxC_siphash_2_4(const uint64_t k[2], uint64_t m0, uint64_t m1);

#endif
