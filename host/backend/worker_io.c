/* host/backend/worker_io.c -- the worker backend's blocking fd I/O: every read and write to a
   worker or the zygote ends by a deadline, which an interrupt may shorten. */
#include "host/backend/worker_io.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

uint64_t mbxH_io_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Now past d->at: 1, else 0 (applying an interrupt seen since the last look). */
int mbxH_io_expired(mbxH_io_deadline *d) {
  uint64_t now = mbxH_io_now_ns();
  if (d->interrupted && !d->cut && atomic_load(d->interrupted)) {
    uint64_t grace = now + (uint64_t)MBXH_WORKER_GRACE_MS * 1000000u;
    if (grace < d->at) d->at = grace;
    d->cut = 1;
  }
  return now >= d->at;
}

/* Wait for fd to be ready for events until d's deadline. 1 ready, 0 timed out, -1 error or
   hang-up with nothing to read. While an interrupt may still come, it sleeps at most 50 ms at
   a time, so a worker that ignores its interrupt signal cannot hold the caller past the
   grace period. */
int mbxH_io_wait(int fd, short events, mbxH_io_deadline *d) {
  for (;;) {
    if (mbxH_io_expired(d)) return 0;
    /* The clock read again: past d->at since mbxH_io_expired's look, d->at - now would wrap to a
       poll of INT_MAX ms (review 13, S1). */
    uint64_t now = mbxH_io_now_ns();
    if (now >= d->at) return 0;
    uint64_t ms = (d->at - now + 999999) / 1000000;
    if (d->interrupted && !d->cut && ms > 50) ms = 50;
    if (d->tick) {
      uint64_t next = d->tick(d->tick_ctx, now);
      if (next != 0) {
        uint64_t until = next > now ? (next - now + 999999) / 1000000 : 0;
        if (until < ms) ms = until;
      }
    }
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) continue;
    if (p.revents & events) return 1;
    return -1;
  }
}

mbxH_io_result mbxH_io_write_all(int fd, const void *p, size_t n, mbxH_io_deadline *d) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      b += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = mbxH_io_wait(fd, POLLOUT, d);
      if (r == 0) return MBXH_IO_TIMEOUT;
      if (r < 0) return MBXH_IO_CLOSED;
      continue;
    }
    return MBXH_IO_CLOSED;
  }
  return MBXH_IO_OK;
}

/* At least min bytes into p and at most max (*got: how many). wait_first: wait before the
   first read (the answer needs the peer's work: a read now would only fail). */
mbxH_io_result mbxH_io_read_some(int fd, void *p, size_t min, size_t max, mbxH_io_deadline *d,
                                 int wait_first, size_t *got) {
  unsigned char *b = p;
  *got = 0;
  if (wait_first && !d->spin) {
    int w = mbxH_io_wait(fd, POLLIN, d);
    if (w == 0) return MBXH_IO_TIMEOUT;
    if (w < 0) return MBXH_IO_CLOSED;
  }
  while (*got < min) {
    ssize_t r = recv(fd, b + *got, max - *got, MSG_DONTWAIT);
    if (r > 0) {
      *got += (size_t)r;
      continue;
    }
    if (r == 0) return MBXH_IO_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      /* Never past the deadline: the spin ends at d->at too, and an interrupt seen since the
         last look is applied first. */
      if (d->spin && !mbxH_io_expired(d) && mbxH_spin_wait(d->spin, fd, d->at)) continue;
      int w = mbxH_io_wait(fd, POLLIN, d);
      if (w == 0) return MBXH_IO_TIMEOUT;
      if (w < 0) return MBXH_IO_CLOSED;
      continue;
    }
    return MBXH_IO_CLOSED;
  }
  return MBXH_IO_OK;
}

mbxH_io_result mbxH_io_read_all(int fd, void *p, size_t n, mbxH_io_deadline *d) {
  size_t got;
  return mbxH_io_read_some(fd, p, n, n, d, 0, &got);
}

int mbxH_io_grow(unsigned char **buf, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  unsigned char *b = realloc(*buf, n);
  if (b == NULL) return -1;
  *buf = b;
  *cap = n;
  return 0;
}

void mbxH_io_close(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}
