/* capabilities/port.h -- the one interface through which the stdlib reaches outside the VM.
 */
#ifndef MBX_CAPABILITIES_PORT_H
#define MBX_CAPABILITIES_PORT_H

/*
** capabilities/ owns what the host grants a sandbox: the policy, the host functions and native
** bindings, the record/replay log of everything the guest observed, and this port, the table
** of operations the stdlib calls. This header is the whole interface and only the interface:
** plain C, standard headers only, no Lua, no policy, no log, no host pointer. The stdlib
** includes it and nothing else of capabilities/.
**
** Like sqlite3_vfs, the port is a versioned table of function pointers with one `ud` passed
** back to every operation. Implementations:
**   - capabilities/port_local.c serves it in-process from a copy of the policy;
**   - capabilities/port_record.c wraps *any* port: live it forwards and records each answer,
**     replaying it answers from the log (snapshots);
**   - capabilities/port_remote.c is the table on the far side of a transport: each operation
**     is a frame (capabilities/port_wire.c) another process answers from its own port
**     (capabilities/port_serve.c). A worker process runs its sandbox on one, the parent
**     serves it from the sandbox's port_local (or port_record) over the worker's socket.
**
** Rules every operation follows:
**   - It is called on the thread running the sandbox, never concurrently, never re-entered, and
**     never calls back into the VM. It never raises or longjmps: failures come back as values.
**   - Bytes it returns stay valid until the next operation on the same port.
**   - A NULL operation is a capability this port does not serve: the stdlib reports it to the
**     guest as not granted (an fs operation gives the guest `nil, message, errno`).
**
** Whose time is it (one rule for every operation): *who decides how long it takes pays for
** it*. When the host decides (a host callback, a native function, a clock or environment
** read), the time is host time: the run's deadline moves on by it and the guest's CPU clock
** does not count it; the operation gets an mbxC_wait carrying only the interrupt. When the
** guest decides (the program exec runs, how much a file read or write moves, and in worker
** mode the round trip that carries such work), the time is guest time: it counts against the
** deadline, and the operation gets an mbxC_wait with the run's deadline and must return by it
** with MBXC_E_TIMEDOUT (the stdlib then ends the run with time_limit).
**
** Adding an operation: append a member at the end of mbxC_port (never reorder: a worker
** built against an older table must still find the old members where they were), bump
** MBXC_PORT_VERSION, document its answer and its time class here; give it a row in
** MBXC_PORT_OPS (below) and its frames in capabilities/port_wire.c (the encoding of its call
** and reply, the checked decoding of both, its answer from a port): port_remote and
** port_serve then forward it with nothing more; serve it in port_local.c; give it a record
** type and a replay class in capabilities/replay.h and port_record.c (answers from outside the
** sandbox are replayed from the log, effects inside the sandbox are re-executed); then call it
** from the stdlib.
*/

#include <stddef.h>
#include <stdint.h>

#define MBXC_PORT_VERSION 4

/* ---- native function values: the signature alphabet ---- */

/*
** The type letters of a native signature ("d(dd)"), as one X-macro every layer expands:
**   X(letter, member of mbxC_ffi_value, C type of the member, libffi type (ffi_type_<x>),
**     name in messages, integer bits (0: not an integer), signed, where it may appear:
**     'r' return only, 'a' argument only, 'b' both)
** There is deliberately no pointer type: the guest never holds an address. Strings go in as
** 'z' (a borrowed NUL-terminated copy valid for the call) and come out as 'o' (bytes the
** function writes into a buffer moonbox owns; the member is the length it reported).
*/
#define MBXC_FFI_TYPES(X)                                                                          \
  X('v', o, size_t, void, "void", 0, 0, 'r')                                                       \
  X('b', b, uint8_t, uint8, "bool", 0, 0, 'b')                                                     \
  X('c', c, int8_t, sint8, "int8", 8, 1, 'b')                                                      \
  X('C', C, uint8_t, uint8, "uint8", 8, 0, 'b')                                                    \
  X('s', s, int16_t, sint16, "int16", 16, 1, 'b')                                                  \
  X('S', S, uint16_t, uint16, "uint16", 16, 0, 'b')                                                \
  X('i', i, int32_t, sint32, "int32", 32, 1, 'b')                                                  \
  X('I', I, uint32_t, uint32, "uint32", 32, 0, 'b')                                                \
  X('l', l, int64_t, sint64, "int64", 64, 1, 'b')                                                  \
  X('L', L, uint64_t, uint64, "uint64", 64, 0, 'b')                                                \
  X('f', f, float, float, "float", 0, 0, 'b')                                                      \
  X('d', d, double, double, "double", 0, 0, 'b')                                                   \
  X('z', z, const char *, pointer, "const char *", 0, 0, 'a')                                      \
  X('o', o, size_t, uint64, "output string", 0, 0, 'r')

/* The letters, in the order error messages list them. */
#define MBXC_FFI_ALPHABET "v b c C s S i I l L f d z o"

#define MBXC_FFI_MAX_ARGS 16
/* The longest signature text: "r(" + MBXC_FFI_MAX_ARGS letters + ")". */
#define MBXC_FFI_MAX_SIGNATURE (MBXC_FFI_MAX_ARGS + 3)

/* One converted C value; the member is the one its type letter names. Each member sits at
   offset 0, so a pointer to the union is a pointer to the value for libffi. */
typedef union mbxC_ffi_value {
  uint8_t b; /* bool: 0 or 1 */
  int8_t c;
  uint8_t C;
  int16_t s;
  uint16_t S;
  int32_t i;
  uint32_t I;
  int64_t l;
  uint64_t L;
  float f;
  double d;
  const char *z; /* 'z' argument: NUL-terminated, borrowed for the call */
  size_t o;      /* 'o' return: the length the function reported */
} mbxC_ffi_value;

/* A parsed signature: the type letters. */
typedef struct mbxC_ffi_sig {
  char ret; /* 'v', 'o' or a scalar letter */
  int nargs;
  char args[MBXC_FFI_MAX_ARGS]; /* scalar letters or 'z' */
} mbxC_ffi_sig;

/* Integer width of a letter (0 for any other letter); *is_signed gets its signedness. */
static inline int mbxC_ffi_int_bits(char letter, int *is_signed) {
  switch (letter) {
#define MBXC_FFI_BITS_CASE(t, m, ct, ft, name, bits, sgn, where)                                   \
  case t:                                                                                          \
    *is_signed = sgn;                                                                              \
    return bits;
    MBXC_FFI_TYPES(MBXC_FFI_BITS_CASE)
#undef MBXC_FFI_BITS_CASE
  default:
    *is_signed = 0;
    return 0;
  }
}

/* The C type name of a letter ("int8", "const char *"...), "unknown" for any other byte. */
static inline const char *mbxC_ffi_type_name(char letter) {
  switch (letter) {
#define MBXC_FFI_NAME_CASE(t, m, ct, ft, name, bits, sgn, where)                                   \
  case t:                                                                                          \
    return name;
    MBXC_FFI_TYPES(MBXC_FFI_NAME_CASE)
#undef MBXC_FFI_NAME_CASE
  default:
    return "unknown";
  }
}

/* A scalar or 'o' value as one 64-bit word (integers sign- or zero-extended, floats by their
   bits): how values are hashed, logged and carried across a process boundary. */
static inline uint64_t mbxC_ffi_word(char letter, const mbxC_ffi_value *v) {
  int is_signed, bits = mbxC_ffi_int_bits(letter, &is_signed);
  uint64_t w = 0;
  if (bits) {
    int64_t s = bits == 8 ? v->c : bits == 16 ? v->s : bits == 32 ? v->i : v->l;
    uint64_t u = bits == 8 ? v->C : bits == 16 ? v->S : bits == 32 ? v->I : v->L;
    return is_signed ? (uint64_t)s : u;
  }
  switch (letter) {
  case 'b':
    return v->b;
  case 'f': {
    uint32_t b;
    __builtin_memcpy(&b, &v->f, sizeof b);
    return b;
  }
  case 'd':
    __builtin_memcpy(&w, &v->d, sizeof w);
    return w;
  case 'o':
    return v->o;
  default:
    return 0;
  }
}

/* The inverse of mbxC_ffi_word: 1 when w is a value of that type ('v' takes only 0). */
static inline int mbxC_ffi_from_word(char letter, uint64_t w, mbxC_ffi_value *v) {
  int is_signed, bits = mbxC_ffi_int_bits(letter, &is_signed);
  __builtin_memset(v, 0, sizeof *v);
  if (bits) {
    switch (bits) {
    case 8:
      if (is_signed)
        v->c = (int8_t)w;
      else
        v->C = (uint8_t)w;
      break;
    case 16:
      if (is_signed)
        v->s = (int16_t)w;
      else
        v->S = (uint16_t)w;
      break;
    case 32:
      if (is_signed)
        v->i = (int32_t)w;
      else
        v->I = (uint32_t)w;
      break;
    default:
      v->L = w;
      return 1;
    }
    return mbxC_ffi_word(letter, v) == w;
  }
  switch (letter) {
  case 'v':
    return w == 0;
  case 'b':
    v->b = (uint8_t)w;
    return w <= 1;
  case 'f': {
    uint32_t b = (uint32_t)w;
    __builtin_memcpy(&v->f, &b, sizeof b);
    return b == w;
  }
  case 'd':
    __builtin_memcpy(&v->d, &w, sizeof w);
    return 1;
  case 'o':
    v->o = (size_t)w;
    return 1;
  default:
    return 0;
  }
}

/* ---- what the guest was granted: plain data the stdlib reads ---- */

/* How a granted function's call reaches the host. */
typedef enum mbxC_fn_kind {
  MBXC_FN_SYNC = 1,     /* a host callback answers at once */
  MBXC_FN_EXTERNAL = 2, /* the run pauses; the host answers with mbx_resume */
  MBXC_FN_NATIVE = 3    /* a C function called through libffi, described by sig */
} mbxC_fn_kind;

typedef struct mbxC_grant_fn {
  const char *name; /* validated dotted path: "tools.search" */
  mbxC_fn_kind kind;
  mbxC_ffi_sig sig; /* MBXC_FN_NATIVE only */
} mbxC_grant_fn;

typedef struct mbxC_grants {
  /* Deterministic mode: canonical pairs/next order, counter ids in tostring, os.clock from
     the instruction count. A plain field: pairs/next read it on every call. */
  int deterministic;
  size_t fn_count;
  const mbxC_grant_fn *fns; /* indexes are what host_call / native_call take */
} mbxC_grants;

/* ---- cancellation and errors ---- */

/* Passed to every operation that can block (see "whose time is it" above). */
typedef struct mbxC_wait {
  uint64_t deadline_ns; /* CLOCK_MONOTONIC; 0 = host time, no deadline */
  /* Nonzero once the host has interrupted the run (mbx_sandbox_interrupt): a blocking
     operation polls it and gives up. NULL = cannot be interrupted. */
  int (*interrupted)(const void *ctx);
  const void *ctx;
} mbxC_wait;

/* What a call of a granted function gave the guest. */
typedef enum mbxC_call_result {
  MBXC_CALL_VALUE = 0, /* *reply is JSON (length 0: the function returns nothing) */
  MBXC_CALL_ERROR = 1  /* *reply is the message to raise */
} mbxC_call_result;

/* An fs or exec failure: errnum is a POSIX errno value the guest sees as the third result of
   its `nil, message, errno`; message is its text and the reason in parentheses ("No such
   file or directory (not in the sandbox view; mounts: /data ro, /tmp)"), without the path:
   the stdlib prefixes the path as the guest wrote it, as stock Lua does. */
#define MBXC_E_TIMEDOUT 110 /* ETIMEDOUT: a guest-time operation reached the deadline */
typedef struct mbxC_port_error {
  int errnum;
  char message[256];
} mbxC_port_error;

/* fs: what open asks for, and what stat tells. */
enum {
  MBXC_FS_READ = 1,
  MBXC_FS_WRITE = 2,
  MBXC_FS_CREATE = 4,
  MBXC_FS_TRUNCATE = 8,
  MBXC_FS_APPEND = 16,
  MBXC_FS_EXCLUSIVE = 32,
  /* A module read (require, loadfile, dofile): read-only, and it also sees what the view
     serves to module reads only (capabilities/vfs.h: a module folder, registered modules). */
  MBXC_FS_MODULE = 64,
  /* With MBXC_FS_MODULE: path is a module name the host registered (mbx_policy_add_module),
     not a path. */
  MBXC_FS_MODULE_NAME = 128
};
/* Bytes of one module file or registered module (require, loadfile, dofile compile it whole;
   real modules reach 90 KiB). */
#define MBXC_MODULE_MAX (1 << 20)
typedef struct mbxC_fs_stat {
  int is_dir;
  int is_file; /* a regular file; neither flag: something else (a FIFO, a device...) */
  uint64_t size;
  int64_t mtime; /* seconds since the epoch */
  int writable;
} mbxC_fs_stat;

/* exec: one request, described as data (never a shell string), and its outcome. */
typedef struct mbxC_exec_request {
  const char *const *argv; /* argv[0] is a virtual path or a program name on the image */
  size_t argc;
  const char *stdin_bytes;
  size_t stdin_len;
  const char *cwd;        /* virtual path; NULL = "/tmp" (the process's private, writable /tmp) */
  const char *const *env; /* "NAME=VALUE" entries added to the policy's environment */
  size_t envc;
  uint64_t timeout_ms; /* 0 = the policy's exec timeout; never more than it */
} mbxC_exec_request;
typedef struct mbxC_exec_result {
  int exit_code;   /* -1 when killed by a signal */
  int signal;      /* 0 unless killed */
  const char *out; /* bounded, valid until the next operation */
  size_t out_len;
  const char *err;
  size_t err_len;
  int timed_out; /* the program's own timeout killed the whole process tree */
  int truncated; /* stdout or stderr was longer than the policy's exec output cap */
  uint64_t wall_ms;
  /* -- appended (issue 12): the limits the run had, and which one ended it -- */
  unsigned limits;  /* MBXC_EXEC_LIMIT_* bits applied to this run */
  int memory_limit; /* the memory cgroup's OOM killer killed a process of the run */
  int pids_limit;   /* a fork or clone of the run was refused: pids.max, or RLIMIT_NPROC when
                       the run's processes reached it */
  /* -- appended (issue 12): the process's writes to the view's overlay mounts and /tmp
     (capabilities/exec_copy.h) -- */
  uint64_t changes;        /* entries created, modified or removed in the view */
  int changes_refused;     /* nothing was applied: changes_error says why */
  char changes_error[200]; /* why something was not carried back ("" when all was): the
                              refusal, or an overlay too big to copy, seen read-only */
} mbxC_exec_result;
/* mbxC_exec_result.limits: memory and pids through a per-run cgroup, the whole tree killed
   through cgroup.kill or a v1 freezer; the rlimit fallbacks when a cgroup is not there; and
   without a memory cgroup, memfd_create and shmget refused (no rlimit counts their pages).
   X(name, bit, the word proc.run's `limits` string and the docs use). */
#define MBXC_EXEC_LIMITS(X)                                                                        \
  X(CGROUP_MEMORY, 1u, "cgroup-memory")                                                            \
  X(CGROUP_PIDS, 2u, "cgroup-pids")                                                                \
  X(CGROUP_KILL, 4u, "cgroup-kill")                                                                \
  X(FREEZER_KILL, 8u, "freezer-kill")                                                              \
  X(RLIMIT_AS, 16u, "rlimit-as")                                                                   \
  X(RLIMIT_NPROC, 32u, "rlimit-nproc")                                                             \
  X(NO_SHARED_MEMORY, 64u, "no-shared-memory")
#define MBXC_EXEC_LIMIT_ENUM(name, bit, word) MBXC_EXEC_LIMIT_##name = bit,
enum { MBXC_EXEC_LIMITS(MBXC_EXEC_LIMIT_ENUM) };
#undef MBXC_EXEC_LIMIT_ENUM

/* ---- the operations a port forwards ---- */

/*
** Every operation a remote port forwards to the process that serves it, once, as one X-macro
** (capabilities/port_wire.c, port_remote.c and port_serve.c expand it):
**   X(NAME: MBXC_OP_<NAME>, the member of mbxC_port, its number on the wire (its frames'
**     first byte: never reused or renumbered),
**     callback: 1 when the host's own code answers (a host or a native function): host time,
**     moved out of the serving side's deadline, and counted against the sandbox's host-call
**     limit,
**     outside_run: 1 when it may be asked while no run is going (the serving side waits for
**     another answer): only what reaches none of the host's callbacks, files or programs)
** cpu_time and stdin_epoch are not here: a remote port answers them itself (its own thread's
** clock; the epoch the serving side sends with every run and resume).
*/
#define MBXC_PORT_OPS(X)                                                                           \
  X(WALL_TIME, wall_time, 1, 0, 1)                                                                 \
  X(RANDOM_SEED, random_seed, 2, 0, 1)                                                             \
  X(ENV_GET, env_get, 3, 0, 1)                                                                     \
  X(HOST_CALL, host_call, 4, 1, 0)                                                                 \
  X(NATIVE_CALL, native_call, 5, 1, 0)                                                             \
  X(FS_OPEN, fs_open, 6, 0, 0)                                                                     \
  X(FS_READ, fs_read, 7, 0, 0)                                                                     \
  X(FS_WRITE, fs_write, 8, 0, 0)                                                                   \
  X(FS_SEEK, fs_seek, 9, 0, 0)                                                                     \
  X(FS_CLOSE, fs_close, 10, 0, 0)                                                                  \
  X(FS_LIST, fs_list, 11, 0, 0)                                                                    \
  X(FS_STAT, fs_stat, 12, 0, 0)                                                                    \
  X(FS_MKDIR, fs_mkdir, 13, 0, 0)                                                                  \
  X(FS_REMOVE, fs_remove, 14, 0, 0)                                                                \
  X(FS_RENAME, fs_rename, 15, 0, 0)                                                                \
  X(EXEC_RUN, exec_run, 16, 0, 0)                                                                  \
  X(STDIN_READ, stdin_read, 17, 0, 0)

typedef enum mbxC_port_op {
#define MBXC_PORT_OP_ENUM(NAME, member, number, callback, outside_run) MBXC_OP_##NAME = number,
  MBXC_PORT_OPS(MBXC_PORT_OP_ENUM)
#undef MBXC_PORT_OP_ENUM
      MBXC_OP_COUNT /* one past the highest number (a served-set is a 32-bit mask of 1u << op) */
} mbxC_port_op;

/* ---- the table ---- */

typedef struct mbxC_port {
  int version; /* MBXC_PORT_VERSION of the implementation */
  void *ud;    /* passed to every operation */
  const mbxC_grants *grants;

  /* -- version 1: clock, randomness, environment (host time) -- */
  /* Wall-clock seconds since the Unix epoch (UTC): the real clock, or the policy's fixed
     time. */
  int64_t (*wall_time)(void *ud);
  /* CPU seconds the current run has used so far (os.clock), of this thread only. */
  double (*cpu_time)(void *ud);
  /* Two words to seed math.random with. The first call for a sandbox gives its initial
     seed; later calls (math.randomseed() with no argument) give fresh ones. With a policy
     seed N the first call gives {N, 0} and later calls a fixed sequence derived from N;
     without one, kernel randomness. */
  void (*random_seed)(void *ud, uint64_t seed[2]);
  /* The value of the virtual environment variable name, or NULL when the policy does not
     define it. NUL-terminated, *value_len its length, valid until the port is freed. Nothing
     is read from the host's environment. */
  const char *(*env_get)(void *ud, const char *name, size_t name_len, size_t *value_len);

  /* -- version 1: granted functions (host time) -- */
  /* Call synchronous function `index` of grants->fns with its arguments as one JSON array.
     MBXC_CALL_VALUE: *reply the JSON value (length 0: none); MBXC_CALL_ERROR: *reply the
     message the guest's error carries. The host's callback runs in here. */
  mbxC_call_result (*host_call)(void *ud, size_t index, const char *args, size_t args_len,
                                const mbxC_wait *wait, const char **reply, size_t *reply_len);
  /* Call native function `index` with its sig.nargs arguments, already converted and
     range-checked. MBXC_CALL_VALUE: the result in *ret (for an 'o' return also the bytes in
     *bytes and *len); MBXC_CALL_ERROR: *bytes the message for the guest. */
  mbxC_call_result (*native_call)(void *ud, size_t index, const mbxC_ffi_value *args,
                                  const mbxC_wait *wait, mbxC_ffi_value *ret, const char **bytes,
                                  size_t *len);

  /* -- the filesystem view (capabilities/vfs.c serves it in port_local) and exec
     (capabilities/exec.c; NULL unless the policy allows a program: the guest sees it as not
     granted). Handles are integers a port hands out,
     carrying a generation so a stale one is refused; paths are the guest's own bytes (the
     port normalizes them; relative ones are taken from "/").
     Each returns 0, or -1 with *e filled. Reads and writes move at most len bytes per call
     (the stdlib loops, charging the budget between blocks) and are guest time. -- */
  int (*fs_open)(void *ud, const char *path, size_t path_len, int flags, const mbxC_wait *wait,
                 int *handle, mbxC_port_error *e);
  int (*fs_read)(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                 mbxC_port_error *e);
  int (*fs_write)(void *ud, int handle, const char *buf, size_t len, const mbxC_wait *wait,
                  size_t *put, mbxC_port_error *e);
  int (*fs_seek)(void *ud, int handle, int whence, int64_t offset, int64_t *pos,
                 mbxC_port_error *e);
  int (*fs_close)(void *ud, int handle, mbxC_port_error *e);
  /* The names in directory path, as NUL-separated bytes in *names (valid until the next
     operation). */
  int (*fs_list)(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                 const char **names, size_t *names_len, mbxC_port_error *e);
  /* stat, mkdir, remove and rename are guest time too: a rename in an overlay copies a host
     file up, a directory's rename or removal scans the node table, each as large as the
     quotas let the guest make it, so each gets the run's wait and stops at its deadline. */
  int (*fs_stat)(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                 mbxC_fs_stat *st, mbxC_port_error *e);
  int (*fs_mkdir)(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                  mbxC_port_error *e);
  int (*fs_remove)(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                   mbxC_port_error *e);
  int (*fs_rename)(void *ud, const char *from, size_t from_len, const char *to, size_t to_len,
                   const mbxC_wait *wait, mbxC_port_error *e);
  /* Run one program in the exec backend (guest time: wait carries the deadline). 0 with *res
     (its bytes valid until the next operation), or -1 with *e: EACCES not on the allow
     list or no exec granted, ENOENT no such program in the sandbox, ENOSYS the backend is
     unusable (the message says why), EAGAIN the run's exec count is spent, MBXC_E_TIMEDOUT
     the run's deadline (the process tree is killed first). */
  int (*exec_run)(void *ud, const mbxC_exec_request *req, const mbxC_wait *wait,
                  mbxC_exec_result *res, mbxC_port_error *e);
  /* io.stdin: the next at most len bytes of what the host supplied (mbx_sandbox_set_stdin,
     or a descriptor read as the guest asks: mbx_sandbox_set_stdin_fd), *got 0 at the end.
     Guest time (since version 4): a wait for the descriptor ends at wait's deadline with
     MBXC_E_TIMEDOUT, or with EINTR once the run is interrupted. NULL: the guest's stdin is
     empty. */
  int (*stdin_read)(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                    mbxC_port_error *e);

  /* -- version 3 -- */
  /* io.stdin: a number that changes whenever the host replaces the bytes
     (mbx_sandbox_set_stdin). Read-ahead the guest took under another number came from the old
     bytes and is dropped before the next read. Host state, no time. NULL: never changes. */
  uint64_t (*stdin_epoch)(void *ud);
} mbxC_port;

#endif
