/* host/backend/worker_spin.h -- the bounded spin before a blocking wait on a worker's socket, used by
   both ends of a round trip (host/backend/worker.c, host/worker/main.c) and by bench_worker's peer. */
#ifndef MBX_HOST_WORKER_SPIN_H
#define MBX_HOST_WORKER_SPIN_H

#include <stdint.h>

/* How long one end polls its socket before it blocks, where an answer or the next request is
   expected soon. On this VM waking a process that blocked costs 10-15 us (an idle vCPU halts;
   its wake-up is an IPI through the hypervisor): a round trip that both ends catch spinning
   pays none of it. An idle worker holds a CPU no longer than this after its last reply. Only
   with MBX_CAP_WORKER_SPIN (off by default: on busy cores it made fresh sandboxes slower). */
#define MBXH_SPIN_NS 20000u
/* A catch later than this into the spin counts as a miss for the back-off (see
   mbxH_spin_wait): the round trips a spin is for take a few microseconds of the other end's
   work when both ends have a CPU of their own. */
#define MBXH_SPIN_SLOW_NS 10000u
/* A gap this long between two looks at the socket means the CPU ran another task meanwhile: the
   spin stops (a miss), since on contended cores it only delays both ends. */
#define MBXH_SPIN_BUSY_NS 10000u
/* After a spin that caught nothing, caught it late or found its CPU contended, the next
   (2^misses - 1) waits do not spin, up to this many: on busy cores, or a host that pauses
   between calls, spinning stops within a few waits and then costs at most one bound in every
   MBXH_SPIN_SKIP_MAX + 1 waits. */
#define MBXH_SPIN_SKIP_MAX 63u

/* One end's adaptive state (zero-initialised: spin). */
typedef struct mbxH_spin {
  uint32_t misses; /* spins in a row that caught nothing */
  uint32_t skip;   /* waits left that do not spin */
} mbxH_spin;

/* 1 when this process may run on two CPUs or more (sched_getaffinity, asked once and
   remembered): on one CPU a spin only delays the other end. A worker asks before its seccomp
   filter is loaded. */
int mbxH_spin_usable(void);

/* Poll fd (MSG_PEEK | MSG_DONTWAIT recvmsg: nothing is consumed, the caller reads as before)
   until it has a byte or an end to read, or until now + MBXH_SPIN_NS or until_ns (CLOCK_MONOTONIC;
   0: no limit of its own), whichever is first. 1 when fd is readable (data, EOF or an error:
   the caller's read finds out which), 0 when the caller should block as before (the spin ran
   out, or s says not to spin now). EINTR is retried within the same bound. Only recvmsg and
   the vDSO clock: nothing a worker's jail does not already allow. */
int mbxH_spin_wait(mbxH_spin *s, int fd, uint64_t until_ns);

#endif
