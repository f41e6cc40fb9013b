/* capabilities/port_remote.c -- a port whose operations another process answers
   (capabilities/port_remote.h): port_wire's calls over a transport, and what is local. */
#include "capabilities/port_remote.h"

#include <stddef.h>
#include <string.h>
#include <time.h>

_Static_assert(offsetof(mbxC_remote, client) == 0, "the port's ud is also the wire's client");

/* os.clock: this process's run thread, measured here (the serving process's clock would show
   none of the guest's work). */
static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double remote_cpu_time(void *ud) {
  mbxC_remote *r = ud;
  return (double)(thread_cpu_ns() - r->cpu_start_ns) / 1e9;
}

static void remote_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_remote *r = ud;
  if (r->seed_ready) {
    seed[0] = r->seed[0];
    seed[1] = r->seed[1];
    r->seed_ready = 0;
    return;
  }
  r->forward_seed(ud, seed);
}

/* io.stdin's epoch: the serving side's, sent with every run and resume (the only times the
   guest reads), so read-ahead of bytes the host has replaced since is dropped as in-process. */
static uint64_t remote_stdin_epoch(void *ud) {
  return ((mbxC_remote *)ud)->stdin_epoch;
}

void mbxC_remote_init(mbxC_remote *r, const mbxC_wire_transport *t, const mbxC_grants *g,
                      uint32_t served) {
  r->client.transport = t;
  r->client.grants = g;
  mbxC_port *port = &r->port;
  port->version = MBXC_PORT_VERSION;
  port->ud = r;
  port->grants = g;
  mbxC_wire_client_ops(port);
  /* Only what the serving side's port serves: a NULL is "not granted" to the stdlib. */
#define REMOTE_SERVED(NAME, member, number, callback, outside_run)                                 \
  if (!(served & (1u << MBXC_OP_##NAME))) port->member = NULL;
  MBXC_PORT_OPS(REMOTE_SERVED)
#undef REMOTE_SERVED
  /* The clock, the environment and the seed are always there (the serving side's port has
     them: the mask says so). */
  r->forward_seed = port->random_seed;
  if (port->random_seed) port->random_seed = remote_random_seed;
  port->cpu_time = remote_cpu_time;
  port->stdin_epoch = port->stdin_read ? remote_stdin_epoch : NULL;
}

void mbxC_remote_run_begin(mbxC_remote *r, uint64_t stdin_epoch) {
  r->stdin_epoch = stdin_epoch;
  r->cpu_start_ns = thread_cpu_ns();
}

void mbxC_remote_set_seed(mbxC_remote *r, const uint64_t seed[2]) {
  r->seed[0] = seed[0];
  r->seed[1] = seed[1];
  r->seed_ready = 1;
}

void mbxC_remote_free(mbxC_remote *r) {
  mbxC_wire_client_free(&r->client);
  r->seed_ready = 0;
}
