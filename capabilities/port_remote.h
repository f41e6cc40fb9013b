/* capabilities/port_remote.h -- a port whose operations another process answers. */
#ifndef MBX_CAPABILITIES_PORT_REMOTE_H
#define MBX_CAPABILITIES_PORT_REMOTE_H

/*
** A remote port is an mbxC_port like any other for the stdlib, but each operation of
** MBXC_PORT_OPS is a round trip: its call is written as a frame (capabilities/port_wire.c),
** handed to a transport, and its answer read from the reply frame the serving process wrote
** (capabilities/port_serve.c). A jailed worker (host/worker/main.c) runs its sandbox on one;
** its transport is the socket to the parent, which owns every capability. The remote port
** answers by itself only what is this process's own: os.clock (its thread's CPU time since the
** run began), io.stdin's epoch (sent with each run), and a first reseed the serving side sent
** ahead (saving a round trip per sandbox).
**
** The serving side is trusted: a transport that fails or a reply that cannot be read ends the
** process (mbxC_wire_transport: round_trip and broken do not return), as a worker whose
** parent is gone has nothing left to do.
*/

#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/port_wire.h"

typedef struct mbxC_remote {
  mbxC_wire_client client; /* first: the port's ud is also the wire's client */
  mbxC_port port;
  void (*forward_seed)(void *ud, uint64_t seed[2]); /* the wire's random_seed */
  uint64_t cpu_start_ns;
  /* The seed the serving side drew for the next reseed; the next draw after it is a call. */
  uint64_t seed[2];
  int seed_ready;
  uint64_t stdin_epoch; /* the serving side's, from the last run or resume */
} mbxC_remote;

/* Make r's port (r->port): over transport t (borrowed: it must outlive r), for grants g
   (borrowed), forwarding the operations in served (bit 1u << op each: mbxC_serve_mask of the
   serving side's port); the others are NULL, "not granted" to the stdlib. r's buffers are kept
   when it is made again (a worker's next sandbox). */
void mbxC_remote_init(mbxC_remote *r, const mbxC_wire_transport *t, const mbxC_grants *g,
                      uint32_t served);
/* A run or resume begins: os.clock counts from here, io.stdin's epoch is the serving side's. */
void mbxC_remote_run_begin(mbxC_remote *r, uint64_t stdin_epoch);
/* The seed the next random_seed answers without a round trip. */
void mbxC_remote_set_seed(mbxC_remote *r, const uint64_t seed[2]);
void mbxC_remote_free(mbxC_remote *r);

#endif
