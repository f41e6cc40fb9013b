/* capabilities/stdin_source.h -- what the guest's io.stdin reads: bytes the host gave, or a
   descriptor read only as the guest asks, each wait bounded by the run's deadline and
   interrupt; what was read is kept, so a rewind or a reset reads it again. */
#ifndef MBX_CAPABILITIES_STDIN_SOURCE_H
#define MBX_CAPABILITIES_STDIN_SOURCE_H

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"

/* The most a source keeps: the bytes given, or everything read from a descriptor (a read
   past it fails with EFBIG). What was read must stay for rewinds, and it is host memory. */
#define MBXC_STDIN_KEPT_MAX ((size_t)64 * 1024 * 1024)

typedef struct mbxC_stdin {
  char *data;     /* the bytes given, or those read from fd so far */
  size_t len;     /* bytes in data */
  size_t cap;     /* bytes allocated (a descriptor's bytes grow it) */
  size_t pos;     /* how far the guest read */
  int fd;         /* -1, or a descriptor of the host's (borrowed) read as the guest asks */
  int fd_done;    /* the descriptor gave its end (or an error, reported once) */
  uint64_t epoch; /* bumped whenever the host replaces the source (mbxC_port.stdin_epoch) */
} mbxC_stdin;

void mbxC_stdin_init(mbxC_stdin *s);
void mbxC_stdin_free(mbxC_stdin *s);
/* From now on the guest reads a copy of these bytes (len 0: an empty stdin), from the first.
   0, or -1 when out of host memory (the old source is kept). */
int mbxC_stdin_set_bytes(mbxC_stdin *s, const char *data, size_t len);
/* From now on the guest reads fd (borrowed: it must stay open while the source uses it),
   each block when the guest asks for it; nothing is read now. */
void mbxC_stdin_set_fd(mbxC_stdin *s, int fd);
/* Up to len bytes at the guest's position into buf, *got 0 at the end. Kept bytes first;
   then, with a descriptor, one read(2) once poll(2) says it will not block, waiting no later
   than wait's deadline (MBXC_E_TIMEDOUT) and giving up when wait's interrupt is set (EINTR).
   0, or -1 with *e (the descriptor's read error, EFBIG past MBXC_STDIN_KEPT_MAX, ENOMEM). */
int mbxC_stdin_read(mbxC_stdin *s, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                    mbxC_port_error *e);

#endif
