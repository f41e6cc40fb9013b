/* bench/bench_clock.h -- the clock and the sort orders the benchmarks share (header only:
   each bench is one program). */
#ifndef MBX_BENCH_CLOCK_H
#define MBX_BENCH_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t bench_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline double bench_now_us(void) {
  return (double)bench_now_ns() / 1e3;
}

/* qsort orders: ascending doubles, ascending uint64_t. */
static inline int bench_by_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static inline int bench_by_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

#endif
