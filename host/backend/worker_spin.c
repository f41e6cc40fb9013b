/* host/backend/worker_spin.c -- the bounded, adaptive spin before a blocking wait on a worker socket. */
#include "host/backend/worker_spin.h"

#include <errno.h>
#include <sched.h>
#include <stdatomic.h>
#include <sys/socket.h>
#include <time.h>

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int mbxH_spin_usable(void) {
  /* 0: not asked yet, 1: no, 2: yes. A race asks twice and gets the same answer. */
  static _Atomic int usable;
  int u = atomic_load(&usable);
  if (u == 0) {
    cpu_set_t set;
    CPU_ZERO(&set);
    u = sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) >= 2 ? 2 : 1;
    atomic_store(&usable, u);
  }
  return u == 2;
}

static void missed(mbxH_spin *s) {
  if (s->misses < 6) s->misses++;
  uint32_t skip = (1u << s->misses) - 1;
  s->skip = skip > MBXH_SPIN_SKIP_MAX ? MBXH_SPIN_SKIP_MAX : skip;
}

int mbxH_spin_wait(mbxH_spin *s, int fd, uint64_t until_ns) {
  if (!mbxH_spin_usable()) return 0;
  if (s->skip) {
    s->skip--;
    return 0;
  }
  uint64_t start = mono_ns(), last = start, end = start + MBXH_SPIN_NS;
  if (until_ns && until_ns < end) end = until_ns;
  for (;;) {
    char byte;
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    ssize_t r = recvmsg(fd, &msg, MSG_PEEK | MSG_DONTWAIT);
    if (r >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      /* A catch that came late is a miss all the same: the other end most likely waited for
         this CPU (the two ends share it, and this one kept it), and would have been quicker
         had this one slept. */
      if (mono_ns() - start > MBXH_SPIN_SLOW_NS)
        missed(s);
      else
        s->misses = 0;
      return 1;
    }
    uint64_t now = mono_ns();
    /* A gap between two looks: this end was preempted, the CPU is contended, and a task
       kept runnable by its spin waits for the running one's slice when its data comes where
       a woken one would preempt it. Block now, and back off. */
    if (now - last > MBXH_SPIN_BUSY_NS || now >= end) break;
    last = now;
    /* No sched_yield: under EEVDF a yield moves this task's deadline on, and the host
       thread that yielded in its spin was then preempted in the next call (a free took
       270-310 us instead of 40-60 in two of three runs at load 8). */
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
  missed(s);
  return 0;
}
