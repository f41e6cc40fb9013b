/* host/backend/worker_proto.h -- the frames between the parent, the zygote and a jailed worker. */
#ifndef MBX_HOST_WORKER_PROTO_H
#define MBX_HOST_WORKER_PROTO_H

/*
** Every message is one frame of capabilities/port_wire.h: an 8-byte header (u16 version, u16
** type, u32 payload length) and fields. The parent trusts nothing a worker sends: a header is
** refused for a wrong version, an unknown type or a length past the receiver's maximum before
** any payload byte is read or any memory is sized by it, and every payload field is read
** through mbxH_wp_reader (mbxC_wire_reader), which refuses a count or length past what is left
** of the frame (then every later read fails too: one check at the end suffices). A frame with
** bytes left over after its last field is refused as well. A worker's port calls
** (MBXH_WP_PORT_CALL) and the parent's answers (MBXH_WP_PORT_REPLY) carry the frames of port
** operations capabilities/port_wire.c writes and checks; this file adds the frames of the
** worker's life: its sandbox, its runs, the zygote's forks and reaps.
*/

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"
#include "capabilities/port_wire.h"
#include "vm/run.h"

#define MBXH_WP_VERSION 5
#define MBXH_WP_HEADER MBXC_WIRE_HEADER
/* The largest frame either side accepts at all (a result may be this large; the parent's own
   per-sandbox bound is usually lower: mbxH_wp_result_max). */
#define MBXH_WP_MAX_FRAME MBXC_WIRE_MAX_FRAME
/* The largest CREATE the parent has a zygote write into a worker it forks (MBXH_WP_REAP). */
#define MBXH_WP_PRIME_MAX ((uint32_t)64 << 10)
/* The signals the parent sends a worker during a run. The interrupt sets the run's interrupt
   flag. The deadline signal only asks the worker to look at its own run's deadline and
   interrupt flag (vm/watchdog.h, mbxV_watch_signal_here): a run with no instruction limit has
   no count hook there either, and the parent sends it at the run's deadline, and after an
   interrupt, every MBXH_WP_NUDGE_NS until the run is answered (a hook the handler armed can
   be lost in luaG_traceexec). A stale or early one changes nothing. */
#define MBXH_WP_INTERRUPT_SIGNAL SIGUSR1
#define MBXH_WP_DEADLINE_SIGNAL SIGUSR2
#define MBXH_WP_NUDGE_NS 1000000u
typedef enum mbxH_wp_type {
  /* parent -> worker */
  MBXH_WP_CREATE = 1, /* the sandbox's configuration, grants, first seed: build */
  MBXH_WP_RUN = 2,    /* chunk name, code, inputs, io.stdin's epoch */
  MBXH_WP_RESUME = 3, /* as_error, value, io.stdin's epoch */
  MBXH_WP_RESET = 4,  /* the new address key, the next seed */
  MBXH_WP_CHECKPOINT = 5,
  MBXH_WP_REWIND = 6,
  MBXH_WP_PORT_REPLY = 7, /* the answer to the worker's MBXH_WP_PORT_CALL */
  /* worker -> parent */
  MBXH_WP_STATUS = 20,    /* create/reset/checkpoint/rewind: code, heap bytes, message */
  MBXH_WP_DONE = 21,      /* a run or resume ended: its outcome */
  MBXH_WP_PORT_CALL = 22, /* a port operation for the parent to serve */
  /* parent <-> zygote */
  MBXH_WP_SPAWN = 40,   /* fork a worker */
  MBXH_WP_SPAWNED = 41, /* its pid, the prime it got (0: none); socket and pidfd ride along */
  MBXH_WP_REAP = 42,    /* wait for a dead worker, fork n (the refill), the first primed;
                             on the control socket, or alone in a mailbox message */
  MBXH_WP_REAPED = 43,  /* its wait status */
  MBXH_WP_PROBE = 44,   /* what the jail applies (moonbox doctor) */
  MBXH_WP_PROBED = 45   /* u32 MBXH_JAIL_* | MBXH_WP_NS_* bits, u32 the probe child's us */
} mbxH_wp_type;

/* The zygote's namespaces, in MBXH_WP_PROBED next to the jail's bits (MBXH_JAIL_*, below). */
#define MBXH_WP_NS_NET 0x100 /* the workers share a new, empty network namespace */
#define MBXH_WP_NS_PID 0x200 /* ... and a new pid namespace (no host process visible) */
/* What the jail applied in the probe child (host/worker/jail.c sets them, moonbox doctor reads
   them), in MBXH_WP_PROBED next to the namespaces' bits. */
#define MBXH_JAIL_UID_NOBODY 0x01 /* root dropped to 65534 with no groups */
#define MBXH_JAIL_USER_NS 0x02    /* not root: the zygote's user namespace, one for all workers */
#define MBXH_JAIL_NO_NEW_PRIVS 0x04
#define MBXH_JAIL_SECCOMP 0x08  /* the allow-list is loaded */
#define MBXH_JAIL_PREBUILT 0x10 /* ... from the zygote's prebuilt BPF program */
#define MBXH_JAIL_NO_CAPS 0x20  /* no capability left, read back with capget */
#define MBXH_JAIL_UID_OWN                                                                          \
  0x80 /* with UID_NOBODY: the zygote's own uid, not 65534 (0x40: the probe's failure) */

/* ---- writing and reading: capabilities/port_wire.h's, with this protocol's version ---- */

typedef mbxC_wire_writer mbxH_wp_writer;
typedef mbxC_wire_reader mbxH_wp_reader;

/* Start a frame of type (keeps the buffer's memory). */
static inline void mbxH_wp_begin(mbxH_wp_writer *w, mbxH_wp_type type) {
  mbxC_wire_begin(w, MBXH_WP_VERSION, (uint16_t)type);
}
static inline void mbxH_wp_u8(mbxH_wp_writer *w, uint8_t v) {
  mbxC_wire_u8(w, v);
}
static inline void mbxH_wp_u32(mbxH_wp_writer *w, uint32_t v) {
  mbxC_wire_u32(w, v);
}
static inline void mbxH_wp_u64(mbxH_wp_writer *w, uint64_t v) {
  mbxC_wire_u64(w, v);
}
static inline void mbxH_wp_bytes(mbxH_wp_writer *w, const void *p, size_t n) {
  mbxC_wire_bytes(w, p, n);
}
/* Patch the header's length; 0, or -1 when the frame failed. */
static inline int mbxH_wp_finish(mbxH_wp_writer *w) {
  return mbxC_wire_finish(w);
}
static inline void mbxH_wp_writer_free(mbxH_wp_writer *w) {
  mbxC_wire_writer_free(w);
}

/* A header: 0 with *type and *len, or -1 with why filled (wrong version, unknown type, a
   length past max). */
int mbxH_wp_header(const unsigned char hdr[MBXH_WP_HEADER], uint32_t max, mbxH_wp_type *type,
                   uint32_t *len, char *why, size_t why_size);

static inline void mbxH_wp_reader_init(mbxH_wp_reader *r, const void *p, size_t n) {
  mbxC_wire_reader_init(r, p, n);
}
static inline uint8_t mbxH_wp_get_u8(mbxH_wp_reader *r) {
  return mbxC_wire_get_u8(r);
}
static inline uint32_t mbxH_wp_get_u32(mbxH_wp_reader *r) {
  return mbxC_wire_get_u32(r);
}
static inline uint64_t mbxH_wp_get_u64(mbxH_wp_reader *r) {
  return mbxC_wire_get_u64(r);
}
/* A byte string of at most max bytes: *p points into the frame (not NUL-terminated). */
static inline size_t mbxH_wp_get_bytes(mbxH_wp_reader *r, size_t max, const char **p) {
  return mbxC_wire_get_bytes(r, max, p);
}
/* 0 when every read fit and nothing is left over, else -1. */
static inline int mbxH_wp_end(const mbxH_wp_reader *r) {
  return mbxC_wire_end(r);
}

/* ---- the messages that carry structure ---- */

/* What a worker reports at the end of a run or resume (MBXH_WP_DONE). */
typedef struct mbxH_wp_done {
  mbxV_status status;
  char refusal[256];    /* status >= MBXV_REFUSED_BASE: why nothing ran */
  mbxV_outcome outcome; /* malloc'd members, status < MBXV_REFUSED_BASE */
  char *stream[2];      /* captured stdout, stderr (malloc'd) */
  size_t stream_len[2];
  uint64_t output_total;
  int paused;
  uint64_t heap;
} mbxH_wp_done;

/* The bounds the parent holds a worker's report to: a sandbox's own limits. */
typedef struct mbxH_wp_bounds {
  size_t value_max;  /* the JSON text of a value or a pending call */
  size_t output_max; /* stdout + stderr */
} mbxH_wp_bounds;

/* Encode a done report (the worker's side; the outcome is read, not taken). */
void mbxH_wp_put_done(mbxH_wp_writer *w, mbxV_status s, const char *refusal, const mbxV_outcome *o,
                      const char *const stream[2], const size_t stream_len[2],
                      uint64_t output_total, int paused, uint64_t heap);
/* Decode one (the parent's side): 0 with *d filled (free with mbxH_wp_done_free), or -1 with
   why filled and nothing to free. Checks every length against b and the status against the
   run statuses there are; the JSON texts are checked by the caller (mbxH_wp_json_ok). */
int mbxH_wp_get_done(const void *payload, size_t n, const mbxH_wp_bounds *b, mbxH_wp_done *d,
                     char *why, size_t why_size);
void mbxH_wp_done_free(mbxH_wp_done *d);

/* 1 when text is exactly one JSON value (what the result contract embeds verbatim). */
static inline int mbxH_wp_json_ok(const char *text, size_t len) {
  return mbxC_wire_json_ok(text, len);
}

#endif
