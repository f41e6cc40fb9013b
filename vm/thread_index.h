/* vm/thread_index.h -- a small number per thread, for per-thread lines of shared structures. */
#ifndef MBX_VM_THREAD_INDEX_H
#define MBX_VM_THREAD_INDEX_H

/* Slots a structure keeps per thread (the pool's parking spots, the bytecode cache's hit
   counters). More threads than this share slots: users must stay correct then (atomics),
   only slower. */
#define MBXV_THREAD_SLOTS 16
/* The cache-line size those slots are padded to (x86-64 and most arm64 cores). */
#define MBXV_CACHE_LINE 64

/* This thread's slot, in [0, MBXV_THREAD_SLOTS): dealt in turn at a thread's first call, so
   two threads get two slots. Constant for the thread's life. */
unsigned mbxV_thread_index(void);

#endif
