/* vm/thread_index.c -- a small number per thread, for per-thread lines of shared structures. */
#include "vm/thread_index.h"

#include <stdatomic.h>

static _Atomic unsigned next_index;
static _Thread_local unsigned index_plus_one; /* 0: not dealt yet */

unsigned mbxV_thread_index(void) {
  if (index_plus_one == 0)
    index_plus_one =
        atomic_fetch_add_explicit(&next_index, 1, memory_order_relaxed) % MBXV_THREAD_SLOTS + 1;
  return index_plus_one - 1;
}
