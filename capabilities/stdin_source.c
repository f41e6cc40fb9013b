/* capabilities/stdin_source.c -- io.stdin's bytes: given, or read lazily from a descriptor
   (capabilities/stdin_source.h). */
#include "capabilities/stdin_source.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "common/bytes.h"

/* A wait on the descriptor looks at the interrupt this often. */
#define POLL_SLICE_MS 50
/* The most one read(2) asks for (the guest's own reads are smaller still). */
#define READ_BLOCK ((size_t)64 * 1024)

void mbxC_stdin_init(mbxC_stdin *s) {
  memset(s, 0, sizeof *s);
  s->fd = -1;
}

void mbxC_stdin_free(mbxC_stdin *s) {
  free(s->data);
  mbxC_stdin_init(s);
}

int mbxC_stdin_set_bytes(mbxC_stdin *s, const char *data, size_t len) {
  char *copy = NULL;
  if (len && (copy = mbxU_dup_bytes(data, len)) == NULL) return -1;
  uint64_t epoch = s->epoch;
  mbxC_stdin_free(s);
  s->data = copy;
  s->len = s->cap = len;
  /* The guest's io.stdin may hold read-ahead of the old bytes: the new epoch drops it. */
  s->epoch = epoch + 1;
  return 0;
}

void mbxC_stdin_set_fd(mbxC_stdin *s, int fd) {
  uint64_t epoch = s->epoch;
  mbxC_stdin_free(s);
  s->fd = fd;
  s->epoch = epoch + 1;
}

static void fail(mbxC_port_error *e, int errnum, const char *message) {
  e->errnum = errnum;
  snprintf(e->message, sizeof e->message, "%s", message);
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wait until fd is readable (1), or the deadline or the interrupt came (-1 with *e). */
static int wait_readable(int fd, const mbxC_wait *wait, mbxC_port_error *e) {
  for (;;) {
    if (wait && wait->interrupted && wait->interrupted(wait->ctx)) {
      fail(e, EINTR, "interrupted while waiting for standard input");
      return -1;
    }
    int slice = POLL_SLICE_MS;
    if (wait && wait->deadline_ns) {
      uint64_t now = now_ns();
      if (now >= wait->deadline_ns) {
        fail(e, MBXC_E_TIMEDOUT, "the run's time limit passed while waiting for standard input");
        return -1;
      }
      uint64_t left_ms = (wait->deadline_ns - now + 999999u) / 1000000u;
      if (left_ms < (uint64_t)slice) slice = (int)left_ms;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int r = poll(&p, 1, slice);
    if (r > 0) return 1; /* readable, at its end, or failed: read(2) says which */
    if (r < 0 && errno != EINTR) {
      fail(e, errno, strerror(errno));
      return -1;
    }
  }
}

/* Read one more block of the descriptor into the kept bytes. 0 (fd_done set at its end), or
   -1 with *e. */
static int read_more(mbxC_stdin *s, size_t want, const mbxC_wait *wait, mbxC_port_error *e) {
  if (s->len >= MBXC_STDIN_KEPT_MAX) {
    fail(e, EFBIG, "more than 64 MiB of standard input read (the most a sandbox keeps)");
    return -1;
  }
  if (want > READ_BLOCK) want = READ_BLOCK;
  if (want > MBXC_STDIN_KEPT_MAX - s->len) want = MBXC_STDIN_KEPT_MAX - s->len;
  if (s->cap - s->len < want) {
    size_t cap = s->cap ? s->cap : READ_BLOCK;
    while (cap - s->len < want)
      cap *= 2;
    if (cap > MBXC_STDIN_KEPT_MAX) cap = MBXC_STDIN_KEPT_MAX;
    char *grown = realloc(s->data, cap);
    if (grown == NULL) {
      fail(e, ENOMEM, "out of host memory for standard input");
      return -1;
    }
    s->data = grown;
    s->cap = cap;
  }
  if (wait_readable(s->fd, wait, e) < 0) return -1;
  /* Ask for no more than is there: if another reader drains a shared pipe between the poll and
     the read, a blocking read would wait past the deadline. */
  int avail = 0;
  if (ioctl(s->fd, FIONREAD, &avail) == 0 && avail > 0 && (size_t)avail < want)
    want = (size_t)avail;
  ssize_t n;
  do
    n = read(s->fd, s->data + s->len, want);
  while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0; /* poll again */
  if (n <= 0) {
    s->fd_done = 1;
    if (n < 0) {
      fail(e, errno, strerror(errno));
      return -1;
    }
    return 0;
  }
  s->len += (size_t)n;
  return 0;
}

int mbxC_stdin_read(mbxC_stdin *s, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                    mbxC_port_error *e) {
  *got = 0;
  if (len == 0) return 0;
  while (s->pos >= s->len && s->fd >= 0 && !s->fd_done)
    if (read_more(s, len, wait, e) != 0) return -1;
  size_t left = s->len - s->pos, take = left < len ? left : len;
  if (take) memcpy(buf, s->data + s->pos, take);
  s->pos += take;
  *got = take;
  return 0;
}
