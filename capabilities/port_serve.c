/* capabilities/port_serve.c -- answering a remote port's calls from any port
   (capabilities/port_serve.h): each row of MBXC_PORT_OPS, expanded. */
#include "capabilities/port_serve.h"

int mbxC_serve_has(const mbxC_port *port, unsigned op) {
  switch (op) {
#define SERVE_HAS_CASE(NAME, member, number, callback, outside_run)                                \
  case MBXC_OP_##NAME:                                                                             \
    return port->member != NULL;
    MBXC_PORT_OPS(SERVE_HAS_CASE)
#undef SERVE_HAS_CASE
  default:
    return 0;
  }
}

uint32_t mbxC_serve_mask(const mbxC_port *port) {
  uint32_t served = 0;
  for (unsigned op = 0; op < MBXC_OP_COUNT; op++)
    if (mbxC_serve_has(port, op)) served |= 1u << op;
  return served;
}

int mbxC_serve_is_callback(unsigned op) {
  switch (op) {
#define SERVE_CALLBACK_CASE(NAME, member, number, callback, outside_run)                           \
  case MBXC_OP_##NAME:                                                                             \
    return callback;
    MBXC_PORT_OPS(SERVE_CALLBACK_CASE)
#undef SERVE_CALLBACK_CASE
  default:
    return 0;
  }
}

int mbxC_serve_outside_run(unsigned op) {
  switch (op) {
#define SERVE_OUTSIDE_CASE(NAME, member, number, callback, outside_run)                            \
  case MBXC_OP_##NAME:                                                                             \
    return outside_run;
    MBXC_PORT_OPS(SERVE_OUTSIDE_CASE)
#undef SERVE_OUTSIDE_CASE
  default:
    return 0;
  }
}

void mbxC_serve_call(const mbxC_port *port, const mbxC_wire_call *c, const mbxC_wait *wait,
                     mbxC_wire_writer *w) {
  switch (c->op) {
#define SERVE_CALL_CASE(NAME, member, number, callback, outside_run)                               \
  case MBXC_OP_##NAME:                                                                             \
    mbxC_wire_answer_##member(port, c, wait, w);                                                   \
    break;
    MBXC_PORT_OPS(SERVE_CALL_CASE)
#undef SERVE_CALL_CASE
  case MBXC_OP_COUNT:
    break;
  }
}
