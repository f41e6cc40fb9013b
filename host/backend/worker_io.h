/* host/backend/worker_io.h -- deadlines and blocking fd I/O for the worker backend and its pool. */
#ifndef MBX_HOST_WORKER_IO_H
#define MBX_HOST_WORKER_IO_H

/*
** The parent never blocks on a worker or on the zygote without a deadline: a worker may be a
** guest's (hostile, hung, or killed), and the zygote may be stopped or starved. Every fd here is
** non-blocking; a wait is a poll bounded by the deadline, so what the other end does (or fails
** to do) costs the caller at most the time it was given.
*/

#include <stddef.h>
#include <stdint.h>

#include "host/backend/worker_spin.h"

/* The hard SIGKILL backstop of a run: 2x its time limit plus this grace, or the default when
   it has none (the time the host's callbacks take does not count; file operations do). Also
   how long a worker has to stop after mbx_sandbox_interrupt. */
#define MBXH_WORKER_GRACE_MS 2000
#define MBXH_WORKER_BACKSTOP_DEFAULT_MS 120000
/* Creating, resetting, checkpointing: no guest code runs, but a worker may still hang. */
#define MBXH_WORKER_CONTROL_MS 30000

/* A deadline (ns, CLOCK_MONOTONIC) that an interrupt shortens: once *interrupted is set, the
   worker has MBXH_WORKER_GRACE_MS more, whatever the run's own budget (NULL: no interrupt). */
typedef struct mbxH_io_deadline {
  uint64_t at;
  _Atomic int *interrupted;
  int cut; /* the interrupt was seen and at shortened */
  /* A reply is expected soon (a call to a worker): spin a bounded while before blocking
     (host/backend/worker_spin.h; NULL: block at once, as for the zygote). */
  mbxH_spin *spin;
  /* Called at every wake of a wait (NULL: none), it returns when it wants to be called next
     (0: no time of its own): the worker backend's deadline signal to a run past its deadline
     (host/backend/worker.c), which no count hook in the worker would otherwise stop. */
  uint64_t (*tick)(void *ctx, uint64_t now);
  void *tick_ctx;
} mbxH_io_deadline;

typedef enum mbxH_io_result { MBXH_IO_OK = 0, MBXH_IO_TIMEOUT, MBXH_IO_CLOSED } mbxH_io_result;

/* Now, in ns of CLOCK_MONOTONIC (the clock every deadline here reads). */
uint64_t mbxH_io_now_ns(void);
/* Now past d->at: 1, else 0 (applying an interrupt seen since the last look). */
int mbxH_io_expired(mbxH_io_deadline *d);
/* Wait for fd to be ready for events (POLLIN, POLLOUT) until d's deadline. 1 ready, 0 timed
   out, -1 error or hang-up with nothing to read. */
int mbxH_io_wait(int fd, short events, mbxH_io_deadline *d);
/* All n bytes of p to the socket fd (never SIGPIPE), by d's deadline. */
mbxH_io_result mbxH_io_write_all(int fd, const void *p, size_t n, mbxH_io_deadline *d);
/* At least min bytes into p and at most max (*got: how many). wait_first: wait before the
   first read (the answer needs the peer's work: a read now would only fail). */
mbxH_io_result mbxH_io_read_some(int fd, void *p, size_t min, size_t max, mbxH_io_deadline *d,
                                 int wait_first, size_t *got);
/* Exactly n bytes into p. */
mbxH_io_result mbxH_io_read_all(int fd, void *p, size_t n, mbxH_io_deadline *d);
/* *buf (of *cap bytes) holds at least n: 0, or -1 when out of memory (*buf is kept). */
int mbxH_io_grow(unsigned char **buf, size_t *cap, size_t n);
/* Close *fd unless it is -1 already, and make it -1. */
void mbxH_io_close(int *fd);

#endif
