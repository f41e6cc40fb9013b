/* capabilities/port_wire.h -- the frames of port operations: how a call and its reply cross a
   process boundary, and the checked reading of both. */
#ifndef MBX_CAPABILITIES_PORT_WIRE_H
#define MBX_CAPABILITIES_PORT_WIRE_H

/*
** A frame is an 8-byte header (u16 version, u16 type, u32 payload length, host byte order:
** both ends are the same build on the same machine) and its payload, a sequence of fields (u8,
** u32, u64 and byte strings as u32 length + bytes). Which versions and types there are is the
** protocol's that carries the frames (host/backend/worker_proto.h); this file owns the fields
** and the frames of the port's operations (capabilities/port.h, MBXC_PORT_OPS):
**   - a call's payload: u8 the operation, u64 the deadline of its wait (0: none), then its
**     arguments;
**   - a reply's payload: what the operation answers (an fs or exec operation first a u8
**     status, then either u32 errno + the message or its data).
**
** The side that serves the calls trusts nothing the caller sends: a header is refused for a
** wrong version, an unknown type or a length past the receiver's maximum before any payload
** byte is read or any memory is sized by it; every field is read through mbxC_wire_reader,
** which refuses a count or length past what is left of the frame (then every later read fails
** too: one check at the end suffices); a frame with bytes left over after its last field is
** refused as well; and mbxC_wire_get_call checks every argument against the sandbox's grants
** and bounds before a port sees it. The calling side (a jailed worker) trusts the serving side
** (its parent): a reply it cannot read ends it (mbxC_wire_transport.broken).
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"

#define MBXC_WIRE_HEADER 8
/* The largest frame either side accepts at all. */
#define MBXC_WIRE_MAX_FRAME ((uint32_t)256 << 20)
/* Bytes one fs_read, fs_write or stdin_read moves per port call (the stdlib asks for less). */
#define MBXC_WIRE_MAX_IO ((uint32_t)1 << 20)
/* Environment entries one forwarded exec request may carry (stdlib/proc.c allows 256). */
#define MBXC_WIRE_MAX_EXEC_ENV 256
/* Paths and names the guest gives: longer ones are refused by the port anyway. */
#define MBXC_WIRE_MAX_PATH ((size_t)1 << 16)

/* ---- writing ---- */

typedef struct mbxC_wire_writer {
  unsigned char *data;
  size_t len, cap;
  int failed; /* out of memory or past MBXC_WIRE_MAX_FRAME: do not send */
} mbxC_wire_writer;

/* Start a frame of this version and type (keeps the buffer's memory). */
void mbxC_wire_begin(mbxC_wire_writer *w, uint16_t version, uint16_t type);
void mbxC_wire_u8(mbxC_wire_writer *w, uint8_t v);
void mbxC_wire_u32(mbxC_wire_writer *w, uint32_t v);
void mbxC_wire_u64(mbxC_wire_writer *w, uint64_t v);
void mbxC_wire_bytes(mbxC_wire_writer *w, const void *p, size_t n);
/* Patch the header's length; 0, or -1 when the frame failed. */
int mbxC_wire_finish(mbxC_wire_writer *w);
void mbxC_wire_writer_free(mbxC_wire_writer *w);

/* ---- reading ---- */

/* Why a frame was refused, into why (size bytes; nothing when why is NULL): every decoder
   here and the worker protocol's say it the same way. */
void mbxC_wire_why(char *why, size_t size, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A header of a frame of `version`: 0 with *type and *len, or -1 with why filled (wrong
   version, a type known(type) refuses, a length past max). */
int mbxC_wire_header(const unsigned char hdr[MBXC_WIRE_HEADER], uint16_t version,
                     int (*known)(unsigned type), uint32_t max, unsigned *type, uint32_t *len,
                     char *why, size_t why_size);

typedef struct mbxC_wire_reader {
  const unsigned char *p;
  size_t left;
  int bad; /* a read went past the end: every later read fails */
} mbxC_wire_reader;

void mbxC_wire_reader_init(mbxC_wire_reader *r, const void *p, size_t n);
uint8_t mbxC_wire_get_u8(mbxC_wire_reader *r);
uint32_t mbxC_wire_get_u32(mbxC_wire_reader *r);
uint64_t mbxC_wire_get_u64(mbxC_wire_reader *r);
/* A byte string of at most max bytes: *p points into the frame (not NUL-terminated). */
size_t mbxC_wire_get_bytes(mbxC_wire_reader *r, size_t max, const char **p);
/* 0 when every read fit and nothing is left over, else -1. */
int mbxC_wire_end(const mbxC_wire_reader *r);

/* 1 when text is exactly one JSON value. */
int mbxC_wire_json_ok(const char *text, size_t len);

/* ---- a call, as the serving side decodes it ---- */

/* Fields point into the frame unless said otherwise. */
typedef struct mbxC_wire_call {
  mbxC_port_op op;
  uint64_t deadline_ns;
  uint64_t index; /* host_call, native_call */
  const char *a;  /* path, name, args, bytes to write, from */
  size_t a_len;
  const char *b; /* rename's to */
  size_t b_len;
  int64_t i1;              /* handle, flags */
  int64_t i2;              /* whence, read length */
  int64_t i3;              /* seek offset */
  const mbxC_ffi_sig *sig; /* native_call: the function's signature (in the grants) */
  mbxC_ffi_value args[MBXC_FFI_MAX_ARGS]; /* native: 'z' members point at zbuf copies */
  char *zbuf; /* malloc'd NUL-terminated copies of the 'z' arguments, or of exec's
                     argv, env and cwd */
  /* exec_run: argv and env point into zbuf (strs, malloc'd), stdin into the frame. */
  mbxC_exec_request exec;
  const char **strs;
} mbxC_wire_call;

/* Decode a call's payload against the sandbox's grants: a known operation, an index naming a
   granted function of the kind the operation serves, a native call carrying exactly its
   signature's arguments (each a value of its type, strings without a NUL), handles, flags,
   whence and lengths in range, an exec request within its limits. 0, or -1 with why filled.
   Free with mbxC_wire_call_free. */
int mbxC_wire_get_call(const void *payload, size_t n, const mbxC_grants *g, mbxC_wire_call *c,
                       char *why, size_t why_size);
void mbxC_wire_call_free(mbxC_wire_call *c);

/* ---- the serving side: one answer per operation ---- */

/* Answer c (decoded by mbxC_wire_get_call) from port with wait: call the operation and write
   its reply's payload into w (the frame's header is the caller's). One function per row of
   MBXC_PORT_OPS, mbxC_wire_answer_<member>: capabilities/port_serve.c picks c->op's. The port
   must serve the operation (a non-NULL member). */
#define MBXC_WIRE_ANSWER_DECL(NAME, member, number, callback, outside_run)                         \
  void mbxC_wire_answer_##member(const mbxC_port *port, const mbxC_wire_call *c,                   \
                                 const mbxC_wait *wait, mbxC_wire_writer *w);
MBXC_PORT_OPS(MBXC_WIRE_ANSWER_DECL)
#undef MBXC_WIRE_ANSWER_DECL

/* ---- the calling side: the operations of a remote port ---- */

/* How a call reaches the serving side (a worker's socket to its parent). */
typedef struct mbxC_wire_transport {
  void *ctx;
  /* Write a call frame's header into w (the carrying protocol's version and type). */
  void (*begin)(void *ctx, mbxC_wire_writer *w);
  /* Send the frame in w, wait for the reply and return its payload (valid until the next
     call). Does not return when the frame cannot be sent or no reply comes. */
  void (*round_trip)(void *ctx, mbxC_wire_writer *w, const unsigned char **reply,
                     size_t *reply_len);
  /* A reply broke the protocol (a field past its end, a value of no type): does not return. */
  __attribute__((noreturn)) void (*broken)(void *ctx);
} mbxC_wire_transport;

/* The calling side's state. A port whose ud points at one (or at a struct that begins with
   one) can take the operations mbxC_wire_client_ops installs. */
typedef struct mbxC_wire_client {
  const mbxC_wire_transport *transport;
  const mbxC_grants *grants; /* a native call's signature says how its arguments travel */
  mbxC_wire_writer w;        /* the call being written */
  char *copy;                /* NUL-terminated copy of the last reply's bytes */
} mbxC_wire_client;

/* Set every member of MBXC_PORT_OPS in port to the operation that forwards it through the
   client at port->ud (the caller then clears what the serving side does not serve). */
void mbxC_wire_client_ops(mbxC_port *port);
void mbxC_wire_client_free(mbxC_wire_client *cl);

/* ---- exec_run ---- */

/* Both directions in one place so that every field of the request and of the result is
   carried (tests/capabilities/test_port_wire.c compares each field of a round trip, and fails
   when a field is appended to mbxC_exec_request or mbxC_exec_result in capabilities/port.h
   until it is encoded here). The serving side's reading of the request is mbxC_wire_get_call;
   the result's byte members point into the frame. */
void mbxC_wire_put_exec_request(mbxC_wire_writer *w, const mbxC_exec_request *req);
void mbxC_wire_put_exec_result(mbxC_wire_writer *w, const mbxC_exec_result *res);
/* 0, or -1 when the result is malformed (a field past the frame's end). */
int mbxC_wire_get_exec_result(mbxC_wire_reader *r, mbxC_exec_result *res);

#endif
