/* host/backend/worker_proto.h -- the frames between the parent, the zygote and a jailed worker. */
#ifndef MBX_HOST_WORKER_PROTO_H
#define MBX_HOST_WORKER_PROTO_H

/*
** Every message is one frame: an 8-byte header (u16 version, u16 type, u32 payload length,
** host byte order: both ends are the same build on the same machine) and the payload, a
** sequence of fields (u8, u32, u64 and byte strings as u32 length + bytes). The parent trusts
** nothing a worker sends: a header is refused for a wrong version, an unknown type or a length
** past the receiver's maximum before any payload byte is read or any memory is sized by it,
** and every payload field is read through mbxH_wp_reader, which refuses a count or length past
** what is left of the frame (then every later read fails too: one check at the end suffices).
** A frame with bytes left over after its last field is refused as well.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"
#include "vm/run.h"

#define MBXH_WP_VERSION 4
#define MBXH_WP_HEADER 8
/* The largest frame either side accepts at all (a result may be this large; the parent's own
   per-sandbox bound is usually lower: mbxH_wp_result_max). */
#define MBXH_WP_MAX_FRAME ((uint32_t)256 << 20)
/* Bytes one fs_read or fs_write moves per port call (the stdlib asks for less). */
#define MBXH_WP_MAX_IO ((uint32_t)1 << 20)
/* The largest CREATE the parent has a zygote write into a worker it forks (MBXH_WP_REAP). */
#define MBXH_WP_PRIME_MAX ((uint32_t)64 << 10)
/* Environment entries one forwarded exec request may carry (stdlib/proc.c allows 256). */
#define MBXH_WP_MAX_EXEC_ENV 256

typedef enum mbxH_wp_type {
  /* parent -> worker */
  MBXH_WP_CREATE = 1,     /* the sandbox's configuration, grants, first seed: build */
  MBXH_WP_RUN = 2,        /* chunk name, code, inputs, io.stdin's epoch */
  MBXH_WP_RESUME = 3,     /* as_error, value, io.stdin's epoch */
  MBXH_WP_RESET = 4,      /* the new address key, the next seed */
  MBXH_WP_CHECKPOINT = 5,
  MBXH_WP_REWIND = 6,
  MBXH_WP_PORT_REPLY = 7, /* the answer to the worker's MBXH_WP_PORT_CALL */
  /* worker -> parent */
  MBXH_WP_STATUS = 20,    /* create/reset/checkpoint/rewind: code, heap bytes, message */
  MBXH_WP_DONE = 21,      /* a run or resume ended: its outcome */
  MBXH_WP_PORT_CALL = 22, /* a port operation for the parent to serve */
  /* parent <-> zygote */
  MBXH_WP_SPAWN = 40,     /* fork a worker */
  MBXH_WP_SPAWNED = 41,   /* its pid, the prime it got (0: none); socket and pidfd ride along */
  MBXH_WP_REAP = 42,      /* wait for a dead worker, fork n (the refill), the first primed;
                             on the control socket, or alone in a mailbox message */
  MBXH_WP_REAPED = 43,    /* its wait status */
  MBXH_WP_PROBE = 44,     /* what the jail applies (moonbox doctor) */
  MBXH_WP_PROBED = 45     /* u32 MBXH_JAIL_* | MBXH_WP_NS_* bits, u32 the probe child's us */
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

/* The port operations a worker forwards (MBXH_WP_PORT_CALL's first field). */
typedef enum mbxH_wp_op {
  MBXH_OP_WALL_TIME = 1,
  MBXH_OP_RANDOM_SEED,
  MBXH_OP_ENV_GET,
  MBXH_OP_HOST_CALL,
  MBXH_OP_NATIVE_CALL,
  MBXH_OP_FS_OPEN,
  MBXH_OP_FS_READ,
  MBXH_OP_FS_WRITE,
  MBXH_OP_FS_SEEK,
  MBXH_OP_FS_CLOSE,
  MBXH_OP_FS_LIST,
  MBXH_OP_FS_STAT,
  MBXH_OP_FS_MKDIR,
  MBXH_OP_FS_REMOVE,
  MBXH_OP_FS_RENAME,
  MBXH_OP_EXEC_RUN,   /* served by the parent's exec backend: the worker never spawns */
  MBXH_OP_STDIN_READ, /* io.stdin: the bytes and the read position stay in the parent */
  MBXH_OP_COUNT
} mbxH_wp_op;

/* ---- writing ---- */

typedef struct mbxH_wp_writer {
  unsigned char *data;
  size_t len, cap;
  int failed; /* out of memory or past MBXH_WP_MAX_FRAME: do not send */
} mbxH_wp_writer;

/* Start a frame of type (keeps the buffer's memory). */
void mbxH_wp_begin(mbxH_wp_writer *w, mbxH_wp_type type);
void mbxH_wp_u8(mbxH_wp_writer *w, uint8_t v);
void mbxH_wp_u32(mbxH_wp_writer *w, uint32_t v);
void mbxH_wp_u64(mbxH_wp_writer *w, uint64_t v);
void mbxH_wp_bytes(mbxH_wp_writer *w, const void *p, size_t n);
/* Patch the header's length; 0, or -1 when the frame failed. */
int mbxH_wp_finish(mbxH_wp_writer *w);
void mbxH_wp_writer_free(mbxH_wp_writer *w);

/* ---- reading ---- */

/* A header: 0 with *type and *len, or -1 with why filled (wrong version, unknown type, a
   length past max). */
int mbxH_wp_header(const unsigned char hdr[MBXH_WP_HEADER], uint32_t max, mbxH_wp_type *type,
                   uint32_t *len, char *why, size_t why_size);

typedef struct mbxH_wp_reader {
  const unsigned char *p;
  size_t left;
  int bad; /* a read went past the end: every later read fails */
} mbxH_wp_reader;

void mbxH_wp_reader_init(mbxH_wp_reader *r, const void *p, size_t n);
uint8_t mbxH_wp_get_u8(mbxH_wp_reader *r);
uint32_t mbxH_wp_get_u32(mbxH_wp_reader *r);
uint64_t mbxH_wp_get_u64(mbxH_wp_reader *r);
/* A byte string of at most max bytes: *p points into the frame (not NUL-terminated). */
size_t mbxH_wp_get_bytes(mbxH_wp_reader *r, size_t max, const char **p);
/* 0 when every read fit and nothing is left over, else -1. */
int mbxH_wp_end(const mbxH_wp_reader *r);

/* ---- the messages that carry structure ---- */

/* What a worker reports at the end of a run or resume (MBXH_WP_DONE). */
typedef struct mbxH_wp_done {
  mbxV_status status;
  char refusal[256];  /* status >= MBXV_REFUSED_BASE: why nothing ran */
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
void mbxH_wp_put_done(mbxH_wp_writer *w, mbxV_status s, const char *refusal,
                      const mbxV_outcome *o, const char *const stream[2],
                      const size_t stream_len[2], uint64_t output_total, int paused,
                      uint64_t heap);
/* Decode one (the parent's side): 0 with *d filled (free with mbxH_wp_done_free), or -1 with
   why filled and nothing to free. Checks every length against b and the status against the
   run statuses there are; the JSON texts are checked by the caller (mbxH_wp_json_ok). */
int mbxH_wp_get_done(const void *payload, size_t n, const mbxH_wp_bounds *b, mbxH_wp_done *d,
                     char *why, size_t why_size);
void mbxH_wp_done_free(mbxH_wp_done *d);

/* 1 when text is exactly one JSON value (what the result contract embeds verbatim). */
int mbxH_wp_json_ok(const char *text, size_t len);

/* A decoded port call (the parent's side): fields point into the frame. */
typedef struct mbxH_wp_call {
  mbxH_wp_op op;
  uint64_t deadline_ns;
  uint64_t index; /* host_call, native_call */
  const char *a;  /* path, name, args, bytes to write, from */
  size_t a_len;
  const char *b;  /* rename's to */
  size_t b_len;
  int64_t i1;     /* handle, flags */
  int64_t i2;     /* whence, read length */
  int64_t i3;     /* seek offset */
  mbxC_ffi_value args[MBXC_FFI_MAX_ARGS]; /* native: 'z' members point at zbuf copies */
  char *zbuf;     /* malloc'd NUL-terminated copies of the 'z' arguments, or of exec's
                     argv, env and cwd */
  /* exec_run: argv and env point into zbuf (strs, malloc'd), stdin into the frame. */
  mbxC_exec_request exec;
  const char **strs;
} mbxH_wp_call;

/* Decode a port call against the sandbox's grants: an index names a granted function of the
   kind the operation serves, a native call carries exactly its signature's arguments, each a
   value of its type. 0, or -1 with why filled. Free with mbxH_wp_call_free. */
int mbxH_wp_get_call(const void *payload, size_t n, const mbxC_grants *g, mbxH_wp_call *c,
                     char *why, size_t why_size);
void mbxH_wp_call_free(mbxH_wp_call *c);

/* exec_run across the socket, both directions in one place so that every field of the
   request and of the result is carried (tests/host/backend/test_worker_proto.c compares each field of
   a round trip, and fails when a field is appended to mbxC_exec_request or mbxC_exec_result in
   capabilities/port.h until it is encoded here). The worker encodes the request (the call's
   header already written) and decodes the result (its byte members point into the frame);
   the parent's side of the request is mbxH_wp_get_call. */
void mbxH_wp_put_exec_request(mbxH_wp_writer *w, const mbxC_exec_request *req);
void mbxH_wp_put_exec_result(mbxH_wp_writer *w, const mbxC_exec_result *res);
/* 0, or -1 when the result is malformed (a field past the frame's end). */
int mbxH_wp_get_exec_result(mbxH_wp_reader *r, mbxC_exec_result *res);

#endif
