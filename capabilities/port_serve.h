/* capabilities/port_serve.h -- answering a remote port's calls from any port. */
#ifndef MBX_CAPABILITIES_PORT_SERVE_H
#define MBX_CAPABILITIES_PORT_SERVE_H

/*
** The serving side of capabilities/port_remote.c: the calls a remote port sends, decoded and
** checked by mbxC_wire_get_call, are answered here from whatever port the serving process
** holds (port_local, or port_record around it), the same table in-process mode gives the
** stdlib. What the serving process adds (host/backend/worker.c: which calls it takes when,
** deadlines, host-time accounting) it decides with the facts below, all read from
** MBXC_PORT_OPS, before it calls mbxC_serve_call.
*/

#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/port_wire.h"

/* Whether port serves op: its member is not NULL (a NULL one is a capability the sandbox was
   not granted, and a call of it is a protocol error). 0 for a number that is no operation. */
int mbxC_serve_has(const mbxC_port *port, unsigned op);
/* The operations port serves, bit 1u << op each: what its remote port is told to forward
   (mbxC_remote_init), every other member being NULL there too. */
uint32_t mbxC_serve_mask(const mbxC_port *port);
/* Whether op is answered by the host's own code (a host or native function, the `callback`
   column): host time, and a call the sandbox's host-call limit counts. */
int mbxC_serve_is_callback(unsigned op);
/* Whether op may be asked while no run is going (the `outside_run` column). */
int mbxC_serve_outside_run(unsigned op);

/* Answer c from port, which serves c->op (mbxC_serve_has), with wait: the reply's payload
   into w, after the header its caller wrote. The port's bytes are copied into w: they may go
   with the port's next operation. */
void mbxC_serve_call(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                     mbxC_wire_writer *w);

#endif
