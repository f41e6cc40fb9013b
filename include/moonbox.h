/*
** moonbox.h -- the one public header of libmoonbox: run untrusted Lua 5.4 in-process.
**
** This file is the reference documentation of the C API.
**
** OVERVIEW
**   A host creates one mbx_runtime, describes what guest code may do with an mbx_policy
**   (limits, a virtual environment, a fixed clock or seed, files and mounts, programs in the
**   exec backend, host and native functions), and opens any number of mbx_sandbox handles
**   from them, in this process or each in a jailed worker process (MBX_CAP_ISOLATE). mbx_run() executes one chunk of Lua source in a sandbox and yields an
**   mbx_result: a status, the chunk's return values as JSON, the captured stdout/stderr, an
**   error with chunk and line when the run failed, and usage figures.
**
**     mbx_error err;
**     mbx_runtime *rt = mbx_runtime_new(&err);
**     mbx_policy *p = mbx_policy_new();
**     mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 200);
**     mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
**     mbx_result *res;
**     if (mbx_run(sb, "return x * 2", 12, "{\"x\": 21}", 9, &res, &err) >= MBX_API_ERROR_BASE)
**       fprintf(stderr, "%s\n", err.message);        // the run did not happen
**     else
**       puts(mbx_result_json(res, NULL));            // {"error":null,...,"value":42}
**     mbx_result_free(res); mbx_sandbox_free(sb); mbx_policy_free(p); mbx_runtime_free(rt);
**
** OWNERSHIP
**   - What a *_new function returns is released by the matching *_free function. Every *_free
**     accepts NULL (a no-op), never allocates and never fails.
**   - A returned `const char *` is borrowed from the handle it came from and stays valid until
**     that handle is freed (results are immutable).
**   - Inputs (source, JSON, names) are copied; nothing the caller passes is kept borrowed.
**   - Bytes are passed as (pointer, length): Lua strings may hold NUL bytes. Strings this API
**     returns are also NUL-terminated for convenience.
**
** NULL
**   Every function says what it does with a NULL handle, and none crashes on one: a *_free is
**   a no-op, a fallible call returns MBX_INVALID_ARGUMENT (err says which argument), and an
**   accessor returns the safe value its comment names (0, NULL, "" or MBX_INVALID_ARGUMENT),
**   setting any length it reports to 0. A NULL `len` out-parameter is always allowed.
**
** ERRORS
**   Every fallible call returns an mbx_status and takes an optional caller-owned mbx_error *
**   last (NULL is allowed). The struct has a fixed size, is filled without allocating (so it
**   works after out-of-memory) and maps directly onto ctypes/cffi structures.
**
** THREADS
**   An mbx_runtime is thread-safe. A policy is thread-safe once no thread modifies it any more
**   (sandboxes copy what they need from it at creation). An mbx_sandbox is used by one thread
**   at a time; it may move between threads between calls. mbx_sandbox_interrupt() is the one
**   call that may be made on a sandbox from any thread while another thread runs, resets or
**   rewinds it.
**   Sandboxes live in heap slots the runtime pools and hands to whichever thread creates the
**   next sandbox: a sandbox created on one thread may be run and freed on another, and a slot
**   freed on one thread is reused by any. No thread-local state ties a sandbox to a thread.
**   C STACK: run sandboxes on threads with a stack of at least 1 MiB (the smallest the library
**   is tested on; glibc's default is 8 MiB, musl's 128 KiB is too small). mbx_run() and
**   mbx_resume() need 896 KiB free below their caller's frame and refuse with
**   MBX_STACK_TOO_SMALL otherwise (sanitizer builds: 1.5 MiB free on a 1.625 MiB stack,
**   2.5 MiB under ThreadSanitizer).
**   Guest code never uses more than those 896 KiB below the caller's frame, whatever it does
**   (nested coroutine closes, callbacks, metamethods): past 640 KiB every re-entry into Lua
**   fails with "C stack overflow", and the rest is the reserve for Lua's own nesting. A host
**   that runs sandboxes on a stack of its own (a fiber, a switched stack) must leave 896 KiB
**   below the call; the free-stack check cannot see such stacks and does not refuse.
**
** LOCALE
**   mbx_run() switches the calling thread to the "C" locale for the duration of the run
**   (uselocale) and restores the host's locale afterwards.
*/
#ifndef MOONBOX_H
#define MOONBOX_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MBX_BUILDING) && defined(__GNUC__)
#define MBX_API __attribute__((visibility("default")))
#else
#define MBX_API
#endif

#define MBX_VERSION "0.1.0"
/* major * 1000000 + minor * 1000 + patch */
#define MBX_VERSION_NUMBER 1000

/* The version of the library actually linked (may differ from the header's). */
MBX_API const char *mbx_version(void);
MBX_API int mbx_version_number(void);

/*
** STATUS CODES
**   X(NAME, code, key, text): MBX_NAME = code; `key` is the lowercase spelling used in the
**   result JSON ("status": "time_limit"); `text` is a short human description.
**   Codes below MBX_API_ERROR_BASE are outcomes of a run (the result contract); codes at or
**   above it are API statuses: the call did not produce a result.
*/
#define MBX_STATUS_MAP(X)                                                                          \
  X(OK, 0, "ok", "success")                                                                        \
  X(SYNTAX_ERROR, 1, "syntax_error", "the script does not compile")                                \
  X(RUNTIME_ERROR, 2, "runtime_error", "the script raised an error")                               \
  X(MEMORY_LIMIT, 3, "memory_limit", "memory limit exceeded")                                      \
  X(INSTRUCTION_LIMIT, 4, "instruction_limit", "instruction limit exceeded")                       \
  X(TIME_LIMIT, 5, "time_limit", "time limit exceeded")                                            \
  X(OUTPUT_LIMIT, 6, "output_limit", "output limit exceeded")                                      \
  X(HOST_CALL_LIMIT, 7, "host_call_limit", "host call limit exceeded")                             \
  X(INTERRUPTED, 8, "interrupted", "the run was interrupted by the host")                          \
  X(PAUSED, 9, "paused", "the run is paused at an external call")                                  \
  X(INTERNAL_ERROR, 10, "internal_error", "internal error in the runtime")                         \
  X(INVALID_ARGUMENT, 100, "invalid_argument", "invalid argument")                                 \
  X(INVALID_INPUT, 101, "invalid_input", "the inputs are not a valid JSON object of globals")      \
  X(SOURCE_TOO_LARGE, 102, "source_too_large", "the source exceeds the source size limit")         \
  X(SANDBOX_POISONED, 103, "sandbox_poisoned", "the sandbox ended a run on a limit or fault")      \
  X(SANDBOX_PAUSED, 104, "sandbox_paused", "the sandbox is paused at an external call")            \
  X(SANDBOX_BUSY, 105, "sandbox_busy", "the sandbox is already running")                           \
  X(STACK_TOO_SMALL, 106, "stack_too_small", "too little C stack left on this thread")             \
  X(NO_MEMORY, 107, "no_memory", "the host is out of memory")                                      \
  X(UNSUPPORTED, 108, "unsupported", "not available in this build")

typedef enum mbx_status {
#define MBX_STATUS_ENUM_(name, code, key, text) MBX_##name = code,
  MBX_STATUS_MAP(MBX_STATUS_ENUM_)
#undef MBX_STATUS_ENUM_
} mbx_status;

#define MBX_API_ERROR_BASE 100

/* "MBX_TIME_LIMIT"; "MBX_UNKNOWN" for a value outside the enum (never NULL). Static strings,
   thread-safe. */
MBX_API const char *mbx_status_name(mbx_status s);
/* "time limit exceeded"; "unknown status" for a value outside the enum (never NULL). Static
   strings, thread-safe. */
MBX_API const char *mbx_status_str(mbx_status s);
/* "time_limit": the spelling used in the result JSON; NULL outside the enum (the only one of
   the three that can return NULL). A static string, thread-safe. */
MBX_API const char *mbx_status_key(mbx_status s);

/*
** The caller-owned error record. `code` is the mbx_status of the failure, `line` the source
** line (0 when unknown), `chunk` the chunk name ("input", a file name, "" when unknown) and
** `message` a one-line description that names what was wrong and what to do. Strings are
** NUL-terminated and truncated to fit.
*/
typedef struct mbx_error {
  int code;
  int line;
  char chunk[64];
  char message[256];
} mbx_error;

/* Opaque handles. */
typedef struct mbx_runtime mbx_runtime;
typedef struct mbx_policy mbx_policy;
typedef struct mbx_sandbox mbx_sandbox;
typedef struct mbx_result mbx_result;

/* Release a `char *` returned by this API. NULL is a no-op. */
MBX_API void mbx_free(void *p);

/* ---------------------------------------------------------------------------------------- */
/* Runtime: process-wide shared state (locale object, address-hiding key). Thread-safe.       */

/* Returns NULL and fills err (MBX_NO_MEMORY) on failure. */
MBX_API mbx_runtime *mbx_runtime_new(mbx_error *err);
/* All sandboxes of the runtime must have been freed before. NULL is a no-op. */
MBX_API void mbx_runtime_free(mbx_runtime *rt);

/*
** Runtime-wide caps: back-pressure for a host that opens thousands of sessions, so that it
** gets a clear MBX_NO_MEMORY from mbx_sandbox_new (the message names the cap) instead of an
** OOM kill. Lowering a cap below the current figure never touches live sandboxes: it only
** refuses new ones until enough are freed.
*/
typedef enum mbx_runtime_cap {
  /* Live sandboxes. Default 4096; 1 to 2^32-1. Exact with threads racing to create. */
  MBX_CAP_SANDBOXES = 1,
  /* Bytes of address space reserved for sandbox heaps (each sandbox's slot is 8x its memory
     limit, rounded up to a power of two, at least 2 MiB, plus two 64 KiB guards; idle slots the
     runtime keeps for reuse count too and are unmapped first when a new one would pass the
     cap). Address space is not memory (MAP_NORESERVE). Default 8 TiB; 0 = no cap. */
  MBX_CAP_RESERVED_BYTES = 2,
  /* Estimated resident guest memory: the sum of the live sandboxes' heaps as of their
     creation or the end of their last run, reset or rewind. A new sandbox that would take the
     sum past the cap is refused; a run is bounded by the sandbox's own memory limit, which is
     how far the estimate can lag. Default: the machine's physical memory; 0 = no cap. */
  MBX_CAP_HEAP_BYTES = 3,
  /* Bytes the bytecode cache may hold. mbx_run compiles a chunk's source once per runtime
     and loads the cached bytecode when the same source (same bytes, same chunk name) is run
     again, in any sandbox: a 1.2 KB snippet loads several times faster than it parses. Only
     sources given to mbx_run use it, never guest `load` calls (a hit-or-miss timing would
     tell one tenant what another ran). Least recently used entries are dropped past the cap.
     Default 16 MiB; 0 disables the cache (and empties it). A thread that runs a cached source
     also keeps its own copy of its last hit (at most 16 KiB, outside this cap, freed when the
     thread exits), used only while that entry is still cached: no lock per run. */
  MBX_CAP_BYTECODE_CACHE_BYTES = 4,
  /* Where the runtime's sandboxes run: MBX_ISOLATE_NONE (0, the default) in this process,
     MBX_ISOLATE_PROCESS (1) each in its own jailed worker process (the moonbox-worker helper,
     found beside the library, else in libexec/moonbox relative to it, or set with
     mbx_runtime_set_path; docs/SECURITY-MODEL.md,
     "Worker mode"). The public functions behave the same; a worker that crashes, hangs past
     its backstop or breaks the protocol ends its run with MBX_INTERNAL_ERROR and a message
     saying why, and is replaced (at the sandbox's reset). Files, stdin, host functions and
     exec stay in this process: the worker's requests are checked and served here (a program
     runs in this runtime's exec backend; the worker never spawns). A freed sandbox's policy
     primes the worker forked to replace it (its state is built before it is asked for), so
     a fresh sandbox is quickest when it has the policy of the last one freed. Only while no
     sandbox is live (MBX_INVALID_ARGUMENT otherwise). */
  MBX_CAP_ISOLATE = 5,
  /* Whether the host marks its isolated sandboxes as one tenant: 0 (the default) each sandbox
     gets a worker process of its own that no other sandbox ever uses; 1 a freed sandbox's
     worker may serve the runtime's next sandbox of the same memory limit, one at a time,
     after a reset to the pristine state (no global, file or checkpoint survives it) instead
     of a fork: cheaper, but a VM compromised by one sandbox's code could keep what it
     learned for the next one, so only for sandboxes that trust each other (one user, one
     agent). Never a worker whose sandbox was poisoned, paused or ran 1000 runs. Any time;
     takes effect at the next free. Usage: the workers kept for reuse (at most 8). */
  MBX_CAP_ONE_TENANT = 6,
  /* Whether both ends of an isolated sandbox's round trips spin briefly before they block: 0
     (the default) they block at once; 1 the worker polls its socket for up to 20 us after each
     reply and the host thread for up to 20 us for an answer from a worker that is awake
     (never on a single usable CPU, never past a run's deadline, backing off after spins that
     catch nothing or catch late). It saves the wake-up of a sleeping process (10-15 us on a
     VM) when each end has a CPU of its own; on busy cores, where the scheduler puts both ends
     on one CPU, it made the first run of a fresh sandbox 15-40 us slower
     (issue 14's "Worker round trips" in docs/performance.md's git history): for hosts with
     idle cores. An idle worker holds a CPU no longer than the bound after its last reply. Any
     time; takes effect for sandboxes created afterwards. Usage: the value. */
  MBX_CAP_WORKER_SPIN = 7,
  /* Workers one zygote forks before it is replaced by a fresh one (a new exec: its own ASLR
     base, stack canary and pointer guard), so at most this many isolated sandboxes share one
     layout and a leak in one says nothing of later ones; 0: only after a crash. Default
     MBX_DEFAULT_WORKER_REEXEC. The old zygote stays while its workers live. Any time; takes
     effect at the next sandbox's creation. Usage: the value. */
  MBX_CAP_WORKER_REEXEC = 8
} mbx_runtime_cap;

#define MBX_DEFAULT_WORKER_REEXEC 256

#define MBX_ISOLATE_NONE 0
#define MBX_ISOLATE_PROCESS 1

/* Absolute paths of the helpers a runtime starts (never looked up in PATH; the default is the
   directory of libmoonbox, or of the executable it is linked into). */
typedef enum mbx_runtime_path {
  MBX_PATH_BWRAP = 1,
  MBX_PATH_EXEC_HELPER = 2,
  MBX_PATH_WORKER = 3 /* moonbox-worker (MBX_CAP_ISOLATE) */
} mbx_runtime_path;

/* Set one (path NULL: back to the default). MBX_INVALID_ARGUMENT for a relative or overlong
   path, an unknown `which`, or MBX_PATH_WORKER while isolated sandboxes are live. The exec
   backend (MBX_PATH_BWRAP default /usr/bin/bwrap, MBX_PATH_EXEC_HELPER default moonbox-exec)
   is probed again at its next use: set them before sandboxes run programs. A NULL runtime:
   MBX_INVALID_ARGUMENT. */
MBX_API mbx_status mbx_runtime_set_path(mbx_runtime *rt, mbx_runtime_path which, const char *path,
                                        mbx_error *err);

/*
** exec.uids: the host uids programs run as when the runtime runs as root (a non-root runtime
** runs every program as its own uid). Each program run takes one uid of [first, first + count)
** for its whole life, held by a lock file under /var/lib/moonbox/uids that every moonbox
** process seeing that directory shares, and gives it back only after every file of that uid
** in the run's rw mounts has been given to the mount directory's owner; a uid whose run's host
** died, or whose files could not all be given away, is quarantined (never taken again until an
** operator removes its lock file). When every uid is in use the program is refused (EAGAIN),
** not waited for. The default, 1879048192-1879113727, is just past systemd's container range.
** Set a range where moonbox runs in several containers that do not share /var/lib/moonbox
** (each its own, disjoint range): a runtime in a pid or user namespace other than the host's
** with no range set cannot prove the default is its own, so it runs every program as one
** uid (the range's first) and refuses programs while the policy has a rw mount; moonbox
** doctor says which ("uids"). count 0 goes back to the default. Returns MBX_OK, or
** MBX_INVALID_ARGUMENT (NULL runtime; a range past 4294967294, below 1000, or holding 65534;
** nothing changed). Set it before sandboxes run programs.
*/
MBX_API mbx_status mbx_runtime_set_exec_uids(mbx_runtime *rt, uint32_t first, uint32_t count,
                                             mbx_error *err);

/*
** The deadline signal. A run whose policy sets no instruction limit and is not deterministic
** runs with no count hook at all (a plain Lua loop at stock speed): its deadline and
** mbx_sandbox_interrupt are delivered by the runtime's watchdog thread as this signal, sent
** only to the thread running that sandbox, only while it runs guest code (never during a
** host callback or a program run), with SA_RESTART. The runtime installs its handler at
** creation when the default signal (SIGRTMAX - 5) is free: not handled, not ignored and not
** blocked by the creating thread. Otherwise, and under ThreadSanitizer, every run uses the
** count hook (as runs with an instruction limit always do), and usage.instructions counts.
** A thread that blocks the signal when it first runs a sandbox uses the count hook for its
** runs (its mask is looked at once). A host that later installs its own handler for the
** signal, or starts blocking it on a thread that already ran sandboxes, makes the runtime fall
** back to the count hook for the runs after that is noticed, but a pure-Lua loop already
** running then is not stopped: do not; choose another signal here. Sandboxes in worker
** processes (MBX_CAP_ISOLATE) need none of this: their parent signals the worker itself at the
** deadline, and their runs with no instruction limit have no count hook either.
** Sets the signal for the runtime's sandboxes (0: none, always the count hook). Only while
** the runtime has no live sandbox. Returns MBX_OK, or MBX_INVALID_ARGUMENT (NULL runtime,
** live sandboxes, signo not SIGUSR1, SIGUSR2 or a real-time signal, or a signal the process
** already handles, ignores or the calling thread blocks; the previous setting is kept).
*/
MBX_API mbx_status mbx_runtime_set_deadline_signal(mbx_runtime *rt, int signo, mbx_error *err);
/* The signal in use, 0 when runs use the count hook (none set, unavailable, or lost) and for
   a NULL runtime. */
MBX_API int mbx_runtime_deadline_signal(const mbx_runtime *rt);

/* Set a cap. Thread-safe. Returns MBX_OK, or MBX_INVALID_ARGUMENT (NULL runtime, unknown cap,
   value out of range; nothing changed, err says why). */
MBX_API mbx_status mbx_runtime_set_cap(mbx_runtime *rt, mbx_runtime_cap which, uint64_t value,
                                       mbx_error *err);
/* The current value of a cap; 0 for an unknown cap or a NULL runtime. */
MBX_API uint64_t mbx_runtime_get_cap(const mbx_runtime *rt, mbx_runtime_cap which);
/* What a cap is measured against right now: live sandboxes, reserved bytes, the resident
   estimate, the bytecode cache's bytes. 0 for an unknown cap or a NULL runtime. */
MBX_API uint64_t mbx_runtime_usage(const mbx_runtime *rt, mbx_runtime_cap which);

/* What the exec backend found when probed (once per runtime, at the first program or here):
   *json (freed with mbx_free) is {"available": bool, "reason": null | s (why not, with a
   hint), "bwrap", "bwrap_version", "helper", "user_namespaces", "uid_isolation" (running as
   root: each run gets its own unprivileged host uid), "uids": {"first", "last", "configured",
   "per_run" (false: one uid for every program, no rw mount), "locks", "scope" (why),
   "quarantined"} (as root; else {"per_run": false, "scope"}), "seccomp", "limits": [...] (the rlimits),
   "cgroups": {"memory", "pids", "kill": each {"applied": true, "how": "cgroup v1" | "cgroup
   v2" | "cgroup.kill" | "freezer", "under": the parent directory} or {"applied": false,
   "reason", "instead"}, "runs": programs started, "not_removed": per-run cgroups that could
   not be removed, "stale_reaped": cgroups of a dead host (its owner record unlocked) this
   probe removed, "stale_left": such cgroups still holding a process}, "shared_memory": how
   memfds and SysV shared memory are bounded (the run's memory cgroup, or refused where there
   is none), "rw_mounts": how a program's writes to rw mounts are bounded}. MBX_OK,
   MBX_INVALID_ARGUMENT (NULL rt or json; *json is then untouched)
   or MBX_NO_MEMORY. len may be NULL. */
MBX_API mbx_status mbx_runtime_exec_status(mbx_runtime *rt, char **json, size_t *len,
                                           mbx_error *err);

/* What a worker's jail applies on this machine (MBX_CAP_ISOLATE; the runtime need not be
   isolated): the worker's zygote is started (the runtime's own when it is isolated) and forks
   a child through the same jail as every worker. *json (freed with mbx_free) is
   {"available": bool, "reason": null | s, "worker": path, "uid", "user_namespace",
   "capabilities", "worker_start_us", "no_new_privs", "seccomp", "pid_namespace",
   "net_namespace"} (the members after "worker" only when available). "user_namespace" says
   which path a worker's start takes: "none (root: ...)" when each worker drops to nobody,
   "shared (...)" when a non-root host's zygote made one user namespace for all its workers,
   "none (user namespaces are off ...)"; "capabilities" is "none" when the probe child held
   no capability after its jail; "worker_start_us" is the probe child's fork, jail and exit,
   in microseconds, as measured in the zygote just now. The namespaces are
   applied where the kernel allows them (as root, or inside a user namespace) and never
   required. MBX_OK (also when not available: the reason says why), MBX_INVALID_ARGUMENT (NULL
   rt or json; *json is then untouched) or MBX_NO_MEMORY. len may be NULL. */
MBX_API mbx_status mbx_runtime_worker_status(mbx_runtime *rt, char **json, size_t *len,
                                             mbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Policy: what a sandbox may use. Deny by default: a new policy grants the curated standard  */
/* library only, with the default limits below.                                               */

typedef enum mbx_limit {
  /* Bytes of guest heap resident in memory: every 4 KiB page of the sandbox's slot that holds
     a live byte, the sandbox's state included. Default 64 MiB, minimum 256 KiB. The allocator
     keeps a hard ceiling of 1.25 * limit + 1 MiB: a run that exceeds the limit is stopped at
     its next instruction (after one full garbage collection shows the memory is really live),
     so usage.memory_peak can exceed the limit, but never the ceiling. */
  MBX_LIMIT_MEMORY = 1,
  /* Lua VM instructions per run, counted in steps of about 1000. 0 = no instruction limit
     (the time limit still applies). Default 0: time and memory are the default budgets, and a
     run with no instruction limit has no count hook (a plain Lua loop at stock speed; the
     deadline comes by signal, mbx_runtime_set_deadline_signal), while any limit makes Lua
     trap every instruction (about 2x on a pure loop). Deterministic policies must set one. */
  MBX_LIMIT_INSTRUCTIONS = 2,
  /* Wall-clock milliseconds per run, parse time included. 0 = no time limit. Default 5000. */
  MBX_LIMIT_TIME_MS = 3,
  /* Bytes of stdout + stderr per run. Default 1 MiB. Output beyond it is dropped and the run
     ends with MBX_OUTPUT_LIMIT. */
  MBX_LIMIT_OUTPUT = 4,
  /* Bytes of one chunk of source given to mbx_run. Default 64 KiB, at most 16 MiB. (Guest
     `load` calls are capped at 16 KiB each: Lua's parser runs in C, unmetered, and is
     quadratic on long and/or chains.) */
  MBX_LIMIT_SOURCE = 5,
  /* Host function calls per run: every call of a function granted with
     mbx_policy_add_function or bound with mbx_policy_bind_native, and every pause at one
     granted with mbx_policy_add_external.
     Counted over the whole run, across its mbx_resume calls (mbx_run starts the count at 0);
     the call past the limit ends the run with MBX_HOST_CALL_LIMIT instead of reaching the
     host. 0 = no host calls at all. Default 1000. */
  MBX_LIMIT_HOST_CALLS = 6,
  /* Bytes of the JSON text of a run's value (mbx_result_value_json). The value is encoded
     in the guest heap as it is built, and a longer one ends the run with MBX_OUTPUT_LIMIT
     and no value before more is built. 0 (the default) = the same as MBX_LIMIT_OUTPUT; up to
     1 GiB. */
  MBX_LIMIT_RESULT = 7,
  /* The filesystem view (mbx_policy_mount, below). Bytes the memory /tmp holds at once:
     default 8 MiB, at most 1 TiB. A write past it fails with ENOSPC. */
  MBX_LIMIT_FS_TMP = 8,
  /* Bytes the guest may add to the view over a sandbox's life: what its memory files hold
     now (in /tmp and overlays: an overlay copy-up counts the whole file) plus the net growth of host files in rw mounts (writes past a file's end count;
     overwriting is free; truncating or removing a file gives back what it held, down to 0).
     Default 16 MiB, at most 1 TiB. Past it: EDQUOT. */
  MBX_LIMIT_FS_BYTES = 9,
  /* Files and directories the guest may create (memory, overlay entries including the
     whiteouts of removals, and rw mounts). Default 1000, at most 1e6. Past it: EDQUOT. */
  MBX_LIMIT_FS_FILES = 10,
  /* Files open at once. Default 64, 1 to 4096. Past it io.open answers EMFILE. Every open
     file is closed when a run ends (not when it pauses) and when the sandbox is freed. */
  MBX_LIMIT_FS_OPEN_FILES = 11,
  /* The exec backend (mbx_policy_allow_exec, below). Milliseconds one program may run before
     its whole process tree is killed (the result says timed_out); the run's own time limit
     still applies. Default 10000, 1 to 86400000. */
  MBX_LIMIT_EXEC_TIMEOUT_MS = 12,
  /* Memory of the program's whole process tree, bytes: a per-run memory cgroup where the host
     has one (past it the OOM killer ends a process and proc.run says memory_limit = true),
     else RLIMIT_AS of each process. Default 256 MiB, 16 MiB to 64 GiB. */
  MBX_LIMIT_EXEC_MEMORY = 13,
  /* Tasks the program and its children may hold at once: a per-run pids cgroup where the
     host has one (pids_limit = true when a fork was refused), and RLIMIT_NPROC of the run's
     own uid. Default 64, 1 to 4096. */
  MBX_LIMIT_EXEC_PIDS = 14,
  /* Bytes kept of stdout and of stderr each; the rest is read and dropped (truncated = true).
     Default 1 MiB, at most 256 MiB. */
  MBX_LIMIT_EXEC_OUTPUT = 15,
  /* Programs one run may start. Default 100; 0 = none. */
  MBX_LIMIT_EXEC_RUNS = 16
} mbx_limit;

/* A policy with the defaults above. NULL when out of memory. */
MBX_API mbx_policy *mbx_policy_new(void);
/* NULL is a no-op. */
MBX_API void mbx_policy_free(mbx_policy *p);
/*
** A new policy with a copy of p's settings: every limit (MBX_LIMIT_*, the filesystem and exec
** ones included), the fixed clock and seed, the deterministic flag, the environment, the
** mounts (with their host directories as resolved when p mounted them: not resolved again),
** the files (their bytes copied) and the programs allowed to exec. It has none of p's host
** functions (mbx_policy_add_function, _add_external, _bind_native): their callbacks and
** userdata belong to whoever granted them, so a copy handed on grants nothing the new holder
** did not add itself. The two are independent afterwards. p is only read: copying a policy
** other threads read (or make sandboxes from) at the same time is safe, not while one
** changes it. Release the copy with mbx_policy_free. NULL for a NULL p or out of memory.
*/
MBX_API mbx_policy *mbx_policy_copy(const mbx_policy *p);
/* Returns MBX_INVALID_ARGUMENT (and changes nothing) for a NULL policy, an unknown limit or a
   value out of range; the error text is available from mbx_policy_set_limit_checked(). */
MBX_API mbx_status mbx_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value);
/* Same, filling err with what was wrong. */
MBX_API mbx_status mbx_policy_set_limit_checked(mbx_policy *p, mbx_limit which, uint64_t value,
                                                mbx_error *err);
/* The current value of a limit; 0 for an unknown limit or a NULL policy. */
MBX_API uint64_t mbx_policy_get_limit(const mbx_policy *p, mbx_limit which);

/*
** The virtual environment: what the guest's os.getenv(name) returns. Nothing of the host's
** own environment is ever visible; a name the policy does not define gives nil.
**   value != NULL   define name (replacing an earlier value); both strings are copied
**   value == NULL   remove name (not an error when it is not defined)
** A name is 1 to 255 bytes of printable ASCII without '=' or blanks (e.g. "API_URL"); a
** value is a NUL-terminated string of at most 64 KiB; at most 256 names per policy.
** Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL p or name, or err says what else was wrong;
** nothing changed) or MBX_NO_MEMORY. Sandboxes copy the environment when they are created.
*/
MBX_API mbx_status mbx_policy_set_env(mbx_policy *p, const char *name, const char *value,
                                      mbx_error *err);

/*
** A fixed random seed: every sandbox made from the policy starts math.random from it, with
** the sequence stock Lua 5.4 gives after math.randomseed(seed) (the seed read as a signed
** 64-bit integer), and math.randomseed() without arguments then draws further seeds from a
** fixed sequence derived from it, so runs are reproducible. Without a seed each sandbox
** starts from fresh kernel randomness. Returns MBX_OK, or MBX_INVALID_ARGUMENT for NULL p.
*/
MBX_API mbx_status mbx_policy_set_seed(mbx_policy *p, uint64_t seed, mbx_error *err);

/*
** A fixed clock: os.time() returns epoch_seconds (seconds since 1970-01-01T00:00:00Z) and
** os.date() without a time shows it, in every run of every sandbox made from the policy.
** Without it they read the host's real-time clock. The sandbox has no time zone: os.date,
** with or without a leading '!', and os.time with a date table are always UTC.
** os.clock() is not affected: it reports the CPU time of the current run (seconds, a float),
** not the host process's (in deterministic mode, below, its instruction count / 1e8). epoch_seconds must lie in the years 1 to 9999
** (-62135596800 to 253402300799); returns MBX_OK or MBX_INVALID_ARGUMENT (NULL p, or a time
** out of range; err says why).
*/
MBX_API mbx_status mbx_policy_set_time(mbx_policy *p, int64_t epoch_seconds, mbx_error *err);

/*
** Deterministic mode (on != 0; off by default). With a fixed seed and clock as well, two runs
** of the same source in two processes give the same status, value, stdout and stderr (the
** usage figures are not covered). In this mode:
**   - pairs and next walk a table in one canonical order: integer keys ascending, then
**     strings bytewise (a prefix before its extensions), false, true, floats ascending, then
**     tables, functions, userdata and threads by object number. A pairs loop costs
**     O(n log n) to start, charged to the instruction budget, and its snapshot of the keys
**     is guest memory; a traversal with plain next starts at next(t, nil), which sorts again.
**     Keys set to nil during a traversal are skipped; keys added are not visited. __pairs
**     works as in stock Lua.
**   - Object numbers come from a per-sandbox counter in first-seen order (by tostring or
**     by a traversal's sort; objects first seen in one sort are numbered in heap order).
**     tostring shows them in place of the hashed address: "table: 0x000000000001".
**   - os.clock() returns the run's instruction count / 1e8 (a measure of work done, not
**     of time).
**   - Sources given to mbx_run bypass the runtime's bytecode cache.
** The mode is checked at call time, so a sandbox costs nothing more to create; with it off
** pairs and next are stock. Sandboxes copy the setting when created. A deterministic policy
** needs an instruction limit (MBX_LIMIT_INSTRUCTIONS, which has none by default): whether a
** run ends by the clock depends on the machine, so mbx_sandbox_new and mbx_sandbox_restore
** refuse one without. Returns MBX_OK, or MBX_INVALID_ARGUMENT for NULL p.
*/
MBX_API mbx_status mbx_policy_set_deterministic(mbx_policy *p, int on, mbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Files: what the guest's io, os and fs functions see. docs/policy.md is the guide.           */
/*
** Every sandbox sees a virtual tree: "/" (read-only), a memory /tmp (always there, empty at
** creation and after mbx_sandbox_reset, sized by MBX_LIMIT_FS_TMP), the policy's files and its
** mounts. Any other path does not exist, whatever the host has there, and the guest cannot
** tell a host path that exists from one that does not. Virtual paths are absolute and
** normalized ("/data", not "/data/", "data" or "/a/../data"). mbx_sandbox_rewind puts /tmp
** and the overlays back as they were at the checkpoint (and closes every open file), at a
** cost proportional to what changed since; writes to rw mounts are never undone.
*/
#define MBX_MOUNT_RO 1 /* reads only: every write, create, remove or rename is EROFS */
#define MBX_MOUNT_RW 2 /* writes reach the host directory (within the MBX_LIMIT_FS_* quotas) */
/* reads fall through to host_dir (confined as ro); writes, creates, removes and renames land
   in the sandbox's memory (charged to the MBX_LIMIT_FS_* quotas): the host is never
   modified. A directory rename answers EXDEV (as overlayfs does). mbx_sandbox_changes lists
   what the guest changed; mbx_sandbox_reset drops it, mbx_sandbox_rewind restores it. */
#define MBX_MOUNT_OVERLAY 4

/*
** Mount host_dir at virtual_path. host_dir is resolved once, here (symlinks and relative
** parts, against the current directory): the sandbox reaches exactly that directory and what
** lies below it, never a symlink, ".." or mount crossing out of it, never a FIFO, socket or
** device in it (those are refused without being opened). A regular file with more than one
** hard link is read-only in a rw mount (the other link may lie outside). virtual_path must be
** absolute and normalized, not "/", not /tmp or below it, and must not contain or lie inside
** another mount or a policy file. At most 32 mounts. Returns MBX_OK, MBX_INVALID_ARGUMENT
** (NULL p or virtual_path, or err names what else was wrong; nothing changed) or
** MBX_NO_MEMORY. Sandboxes open the directory when they are created; a policy with mounts
** cannot be snapshotted (mbx_sandbox_snapshot answers MBX_UNSUPPORTED).
*/
MBX_API mbx_status mbx_policy_mount(mbx_policy *p, const char *virtual_path, const char *host_dir,
                                    int mode, mbx_error *err);

/*
** Allow the guest to run program (proc.run, and os.execute / io.popen when /bin/sh is
** allowed) in the exec backend: a real process inside a bubblewrap sandbox with its own
** user, pid, network (loopback only), ipc and uts namespaces, a seccomp deny list, no
** capabilities, the MBX_LIMIT_EXEC_* limits, a read-only /usr, a private /tmp and the
** policy's mounts (docs/SECURITY-MODEL.md, section "exec"). program is the absolute,
** normalized path the sandbox sees ("/usr/bin/python3"); a guest may name it by that path or
** by its last component. The allow list restricts only the program started: a shell or an
** interpreter can run anything under /usr. At most 64 programs. Snapshots record each
** program's result; a restore replays it without running anything. MBX_OK,
** MBX_INVALID_ARGUMENT (NULL p or program, or a path the rules refuse) or MBX_NO_MEMORY.
*/
MBX_API mbx_status mbx_policy_allow_exec(mbx_policy *p, const char *program, mbx_error *err);

/*
** A read-only file at virtual_path with the len bytes at data (copied; data may be NULL when
** len is 0). Its parent directories appear as read-only directories. The path follows the
** rules of mbx_policy_mount, and must not be another file's parent or child. At most 1024
** files, 256 MiB in all. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL p or virtual_path, NULL
** data with a length, or a path the rules refuse) or MBX_NO_MEMORY.
*/
MBX_API mbx_status mbx_policy_add_file(mbx_policy *p, const char *virtual_path, const void *data,
                                       size_t len, mbx_error *err);

/*
** Register a Lua module by name for hosts that have no files: require(name) finds it after
** package.preload and before the files of package.path, compiles the len bytes of source
** (copied; at most 1 MiB) as chunk "@name" and passes ":registered:" as the loader's second
** argument. io and fs do not see it. name is 1 to 255 bytes with no control characters
** ("mylib.parser"); the same name again replaces the source. Counted with the policy's files
** (at most 1024 modules, 256 MiB with the files). The modules are part of the policy's
** identity: a snapshot restored under another module text is refused. Returns MBX_OK,
** MBX_INVALID_ARGUMENT (NULL p or name, NULL source with a length, a bad name, too large) or
** MBX_NO_MEMORY.
*/
MBX_API mbx_status mbx_policy_add_module(mbx_policy *p, const char *name, const char *source,
                                         size_t len, mbx_error *err);

/*
** Let require, loadfile and dofile -- only they: io, fs and exec see nothing of it -- read the
** .lua files under host_dir, read-only, as paths from the view's root ("./x.lua", "/x.lua",
** "./lib/y.lua") wherever the view itself has nothing at that path. This is how `moonbox run
** dir/main.lua` finds modules beside the script, as `lua main.lua` does from dir, without
** exposing dir. host_dir is resolved once here (an existing directory); reads are confined
** to it as a mount's are (openat2 RESOLVE_BENEATH: no symlink or ".." leads out). NULL
** removes it. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL p, a path that is not a directory)
** or MBX_NO_MEMORY.
*/
MBX_API mbx_status mbx_policy_set_module_dir(mbx_policy *p, const char *host_dir, mbx_error *err);

/*
** Load the settings in the JSON object text (len bytes) into p: "limits", "env", "seed",
** "time", "deterministic" and "fs" (mounts, files, tmp, quota), as docs/policy.md shows.
** Relative host paths are taken from base_dir (NULL: the current directory). The whole
** object is checked before p changes: an unknown key, a wrong type, a bad size or path, or a
** setter's refusal gives MBX_INVALID_ARGUMENT with the key in err ("fs.mounts[1].mode:
** expected "ro", "rw" or "overlay", got "wr"") and p as it was. Keys not in the
** text keep p's values; mounts and files are added to p's. Host functions cannot be granted
** from JSON. A NULL p, or NULL text with a length: MBX_INVALID_ARGUMENT.
*/
MBX_API mbx_status mbx_policy_load_json(mbx_policy *p, const char *text, size_t len,
                                        const char *base_dir, mbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Host functions: what the guest may call in the host. docs/host-functions.md is the guide.  */

/*
** A host function's reply. Opaque; valid only during the callback it was given to.
*/
typedef struct mbx_host_reply mbx_host_reply;

/*
** A synchronous host function. Called on the thread running the sandbox, during mbx_run or
** mbx_resume, with
**   userdata             what was given to mbx_policy_add_function, untouched
**   args_json, args_len  the guest's arguments as a JSON array ("[1,\"x\",null]"; a nil
**                        argument is null; NUL-terminated for convenience), encoded by the
**                        sandbox's codec: integers exact, tables as objects or arrays, keys
**                        sorted, invalid UTF-8 as {"$bytes": "<base64>"}. Borrowed until the
**                        callback returns.
**   reply                where the answer goes: mbx_host_reply_json (the value the call
**                        returns in the guest) or mbx_host_reply_error (a Lua error the guest
**                        can catch with pcall, whose message is exactly the text given).
** Return MBX_OK. Without a reply the call returns nothing (nil). Returning any other status
** without mbx_host_reply_error raises "NAME failed: <mbx_status_str>" in the guest.
**
** The callback never sees a lua_State and nothing it does can unwind Lua: the trampoline
** raises the guest's error after the callback has returned (so a C++ or libffi frame is never
** crossed by a longjmp). It must not call mbx_run/mbx_resume on the same sandbox (they
** return MBX_SANDBOX_BUSY); other sandboxes are fine. Its time does not count against the
** guest's MBX_LIMIT_TIME_MS (the deadline is moved by the time the host took), but it does
** appear in usage.wall_us; mbx_sandbox_interrupt during a callback ends the run when it
** returns.
*/
typedef mbx_status (*mbx_host_fn)(void *userdata, const char *args_json, size_t args_len,
                                  mbx_host_reply *reply);

/* Caps on what crosses a host call: the arguments' JSON (a call with more raises a Lua error
   in the guest before the host is called), a reply's JSON (mbx_host_reply_json refuses more
   with MBX_INVALID_ARGUMENT and the guest gets an error saying so), and an error message
   (longer ones are cut to the cap). */
#define MBX_HOST_ARGS_MAX (1u << 20)
#define MBX_HOST_REPLY_MAX (8u << 20)
#define MBX_HOST_ERROR_MAX (4u << 10)

/* The call returns the JSON value (one value; top-level null returns nil). The bytes are
   copied; they are decoded in the guest after the callback returns, charged to its budget
   (invalid JSON raises a Lua error naming the function). A later call replaces an earlier
   one. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL reply or json with a length; len past
   MBX_HOST_REPLY_MAX: the guest then gets an error), MBX_NO_MEMORY. */
MBX_API mbx_status mbx_host_reply_json(mbx_host_reply *reply, const char *json, size_t len);
/* The call raises a Lua error whose message is these bytes (cut at MBX_HOST_ERROR_MAX).
   Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL reply, or NULL message with a length) or
   MBX_NO_MEMORY. */
MBX_API mbx_status mbx_host_reply_error(mbx_host_reply *reply, const char *message, size_t len);

/*
** Grant a synchronous host function. name is a dotted path of Lua identifiers (at most 4
** parts, 128 bytes), e.g. "tools.search": the guest calls tools.search(...), and
** require("tools") returns the module table. The first part must not be a built-in global
** or module (string, os, json, print, ...), no part may be a keyword (the last part, past
** the first, may instead be a key of letters, digits, '_' and '-', which the guest writes in
** brackets: "tools.mem.create-entities" is tools.mem["create-entities"]), a name may not be
** given twice, and a name may not be both a function and a module ("tools" and
** "tools.search"). At most 256 functions per policy. fn must not be NULL; userdata is kept
** as given (borrowed: it must outlive every sandbox made from the policy). Sandboxes copy
** the list when created. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL p, name or fn, or err
** says why; nothing changed) or MBX_NO_MEMORY.
*/
MBX_API mbx_status mbx_policy_add_function(mbx_policy *p, const char *name, mbx_host_fn fn,
                                           void *userdata, mbx_error *err);

/*
** Grant an external (pausing) host function, named as above. Calling it suspends the run:
** mbx_run (or mbx_resume) returns MBX_PAUSED and the result's "pending" member is
** {"args": [...], "function": "tools.fetch"} (args encoded as for mbx_host_fn). The host does
** the work when it likes (an event loop, another thread, a human), then continues the run
** from exactly that point with mbx_resume (the call returns the value) or mbx_resume_error
** (the call raises a catchable error). Each pause counts as a host call.
**
** A pause works from plain Lua code at any depth: nested functions, inside pcall/xpcall,
** in coroutines the guest created (coroutine.resume/wrap pass it up and the answer back
** down), and in metamethods the VM calls from Lua code. Where Lua cannot suspend C code --
** functions called from C such as table.sort comparators, string.gsub callbacks,
** __tostring run by tostring/print/string.format, __index reached through ipairs, an xpcall
** message handler, __close run while an error unwinds, load reader functions -- the call
** raises a catchable error naming the place ("tools.fetch cannot pause here: ...").
** Returns as mbx_policy_add_function (MBX_INVALID_ARGUMENT for a NULL p or name).
*/
MBX_API mbx_status mbx_policy_add_external(mbx_policy *p, const char *name, mbx_error *err);

/*
** Bind a native C function: the guest calls it like a host function, with Lua values that
** moonbox converts to C scalars, and the call goes straight to fn through libffi (no JSON).
**   name       as for mbx_policy_add_function, in the same namespace ("m.hypot"; a name
**              cannot be both a host function and a native one)
**   signature  the return type, then the argument types in parentheses: "d(dd)" is
**              double fn(double, double), "v()" is void fn(void). At most 16 arguments.
**                v  void (return only)        f  float           d  double
**                b  bool                      c / C  int8_t / uint8_t
**                s / S  int16_t / uint16_t    i / I  int32_t / uint32_t
**                l / L  int64_t / uint64_t
**                z  const char * argument: a Lua string without NUL bytes, NUL-terminated,
**                   valid only during the call (fn must not keep it)
**                o  output string (return only): fn has the shape
**                   size_t fn(args..., char *buf, size_t cap): it writes up to cap bytes
**                   (cap is MBX_NATIVE_OUT_MAX) into buf, which moonbox owns, and returns
**                   their number; the guest gets them as a Lua string. A returned length
**                   past cap raises an error in the guest and no byte is used.
**              There is no pointer type: no address ever reaches the guest.
**   fn         the function, cast to void (*)(void); its real type must match the signature
**              exactly (a mismatch is undefined behaviour, as with any C cast)
** The signature is parsed and the call prepared (ffi_prep_cif) here, once; sandboxes share
** the prepared call. A bad signature returns MBX_INVALID_ARGUMENT with err naming the byte:
** "signature 'd(dx)': unknown type 'x' at byte 4 (use v b c C s S i I l L f d z o)".
**
** In the guest, arguments are checked before fn is called, and a mismatch is a Lua error
** naming the function and the argument ("m.hypot: argument #2 must be a number (got
** string)"): exactly as many arguments as the signature declares; integer types take Lua
** integers, or floats with an exact integer value, in the type's range ("argument #1 out of
** range for int8 (-128..127)"); f and d take any number; b takes only true or false; z only a
** string (no number coercion). Results come back as integers (a uint64 above math.maxinteger
** as a float), floats, booleans or strings; v returns nothing. Each call counts against
** MBX_LIMIT_HOST_CALLS. fn runs on the thread running the sandbox, outside any Lua frame that
** could unwind it; it must not call back into the sandbox. Like a callback, it is trusted host
** code: it runs in-process with no isolation, so bind only functions that are safe for any
** argument values of their types.
** Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL p or fn, bad name or signature; err says why;
** nothing changed) or MBX_NO_MEMORY.
*/
#define MBX_NATIVE_OUT_MAX (64u << 10)
MBX_API mbx_status mbx_policy_bind_native(mbx_policy *p, const char *name, const char *signature,
                                          void (*fn)(void), mbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Sandbox: one isolated Lua state with its own heap, limits and captured output.             */

/* Copies what it needs from the policy; the policy may be freed afterwards. Returns NULL and
   fills err on failure. The sandbox's heap is a slot of address space (8x the memory limit,
   reserved, not committed) holding a copy of a pristine state, so creation costs a memory
   copy. Past a runtime cap (mbx_runtime_set_cap: live sandboxes, reserved address space,
   resident estimate), and when address space for a slot cannot be reserved, this fails with
   MBX_NO_MEMORY and a message saying which. A NULL rt or p, or a deterministic policy with
   no instruction limit: NULL, err MBX_INVALID_ARGUMENT. */
MBX_API mbx_sandbox *mbx_sandbox_new(mbx_runtime *rt, const mbx_policy *p, mbx_error *err);
/* Releases the whole guest heap at once: the slot goes back to the runtime's pool and the
   pages the sandbox used beyond the pristine state are returned to the OS. Guest code never
   runs here (lua_close is never called; finalizers are refused by construction). Must not be
   called while a run is active. NULL is a no-op. */
MBX_API void mbx_sandbox_free(mbx_sandbox *sb);

/*
** Run one chunk of Lua source text (never bytecode) in the sandbox.
**   code, code_len      the source (NULL/0: the empty chunk)
**   chunk_name          the name the chunk goes by: the "chunk" of errors (mbx_error.chunk,
**                       the result JSON's error) and the "name:line:" of messages and
**                       tracebacks, shown as given (no [string "..."] quoting). NULL or ""
**                       is "input", as mbx_run names every chunk. A NUL-terminated string
**                       of any other bytes, copied; names up to 58 bytes are kept whole,
**                       and of a longer one the last 55 bytes are kept after "..." (the
**                       end of a path is where the file name is: "...dir/script.lua"), the
**                       most Lua keeps (LUA_IDSIZE). The name is part of what the bytecode
**                       cache compares (the same source under two names is compiled
**                       twice) and of a deterministic sandbox's replay log. Avoid ':' and
**                       newlines: the chunk and line of an error still come from the frame,
**                       but its message then keeps the "name:line: " prefix.
**   inputs_json, len    NULL/0, or a JSON object whose keys become globals before the chunk
**                       runs (keys must be Lua identifiers and must not shadow a built-in).
**                       One key that is no identifier is reserved: "..." carries the script
**                       arguments, as `lua script.lua a b` gives them: an array of strings,
**                       the script's name first (["script.lua", "a", "b"]). The chunk gets
**                       the global `arg` in stock Lua's layout (arg[0] the name, arg[1..n]
**                       the arguments, no negative indices) and the arguments as its `...`.
**                       The name is whatever the host passes: give the script's path in the
**                       sandbox's view, never a host path (the CLI passes the file's name).
**   out                 receives the result when the call returns a run status
**
** Returns the run's status (< MBX_API_ERROR_BASE; the same as mbx_result_status(*out)) when
** the run happened, or an API status (>= MBX_API_ERROR_BASE) with *out == NULL and err filled:
** MBX_INVALID_ARGUMENT (NULL sb or out, NULL code or inputs_json with a length),
** MBX_INVALID_INPUT (bad inputs JSON: nothing was bound), MBX_SOURCE_TOO_LARGE,
** MBX_SANDBOX_POISONED, MBX_SANDBOX_BUSY, MBX_STACK_TOO_SMALL, MBX_NO_MEMORY.
**
** A sandbox keeps its globals between runs (a REPL). Instruction, time and output limits
** apply per run; memory is the live heap of the sandbox. A run that ends on a limit, an
** interrupt or an internal error poisons the sandbox: later runs return
** MBX_SANDBOX_POISONED. Reset it (mbx_sandbox_reset), rewind it to a checkpoint taken before
** that run, or free it.
*/
MBX_API mbx_status mbx_run_named(mbx_sandbox *sb, const char *code, size_t code_len,
                                 const char *chunk_name, const char *inputs_json, size_t inputs_len,
                                 mbx_result **out, mbx_error *err);
/* mbx_run_named with chunk name "input". */
MBX_API mbx_status mbx_run(mbx_sandbox *sb, const char *code, size_t code_len,
                           const char *inputs_json, size_t inputs_len, mbx_result **out,
                           mbx_error *err);

/*
** Continue a run paused at an external function (status MBX_PAUSED). The pending call
** returns the value of value_json (one JSON value, decoded in the guest and charged to it;
** NULL/0 returns nothing). mbx_resume_error makes the call raise a Lua error whose message
** is exactly message (cut at MBX_HOST_ERROR_MAX), which the guest may catch with pcall.
** Either returns like mbx_run: the run's status with *out (it may pause again: MBX_PAUSED
** with a new pending call), or an API status with *out == NULL:
**   MBX_INVALID_ARGUMENT  NULL sb/out, or the sandbox is not paused
**   MBX_INVALID_INPUT     value_json is not valid JSON (the sandbox stays paused; try again)
**   MBX_SANDBOX_POISONED, MBX_SANDBOX_BUSY, MBX_STACK_TOO_SMALL, MBX_NO_MEMORY
** Limits while paused: nothing is charged while the host works. The instruction, time and
** output limits apply per call (each mbx_run and each mbx_resume gets a fresh deadline,
** instruction count and output buffer; the result of each shows what happened since the
** previous one), while MBX_LIMIT_HOST_CALLS counts the whole run. While paused, mbx_run
** returns MBX_SANDBOX_PAUSED; mbx_sandbox_reset abandons the paused run; a checkpoint taken
** while paused rewinds to the paused state.
*/
MBX_API mbx_status mbx_resume(mbx_sandbox *sb, const char *value_json, size_t len, mbx_result **out,
                              mbx_error *err);
MBX_API mbx_status mbx_resume_error(mbx_sandbox *sb, const char *message, size_t len,
                                    mbx_result **out, mbx_error *err);
/* 1 if the sandbox is paused at an external call (mbx_resume continues it), 0 otherwise and
   for NULL. */
MBX_API int mbx_sandbox_paused(const mbx_sandbox *sb);

/* From any thread: end the sandbox's current run with MBX_INTERRUPTED within about a thousand
   VM instructions (without a count hook: within about a millisecond, by the deadline signal,
   or when a host callback returns). An interrupt sent while no run is active is discarded. Returns
   MBX_INVALID_ARGUMENT for NULL, MBX_OK otherwise. */
MBX_API mbx_status mbx_sandbox_interrupt(mbx_sandbox *sb);

/* 1 if the sandbox refuses further runs, 0 otherwise and for NULL. */
MBX_API int mbx_sandbox_poisoned(const mbx_sandbox *sb);

/*
** Back to pristine, as if the sandbox had just been made from the same policy: globals,
** library tables, string metatable, registry and coroutines are the runtime's pristine state
** again (a memory copy of it, in about the time of mbx_sandbox_new: no allocation, no new
** address space), math.random is seeded again as a new sandbox's is (the policy seed's first
** sequence, or fresh randomness), the poisoned flag and usage counters are cleared, and
** addresses are hashed with a fresh key. The limits, environment and clock stay those of the
** policy the sandbox was made from. A checkpoint, if any, is kept and can still be rewound to.
** In MBX_ARENA_MALLOC builds (the asan preset) the pristine state is built again instead
** (~10 us). Not while a run is active on another thread: MBX_SANDBOX_BUSY.
** Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL), MBX_SANDBOX_BUSY, or MBX_NO_MEMORY (only in
** builds without templates, when the host is out of memory: the sandbox then refuses runs
** until a reset succeeds).
*/
MBX_API mbx_status mbx_sandbox_reset(mbx_sandbox *sb, mbx_error *err);

/*
** mbx_sandbox_reset_keep_files is mbx_sandbox_reset for everything but the sandbox's files:
** the guest's state is pristine again and the pages its heap dirtied go back to the OS, while
** /tmp, the memory files and what overlay mounts hold stay as the guest left them, so the
** change set (mbx_sandbox_changes, mbx_sandbox_changes_each) can be read, and shown or
** diffed, after the heap of the run that made it is gone (the CLI's --changes and --diff do
** so: a guest that filled its heap does not keep it resident while the host reads
** originals). Open files are closed; what rw mounts grew by is forgotten by the bytes quota,
** as after mbx_sandbox_reset. In a worker (MBX_CAP_ISOLATE) the guest's heap is in the
** worker: this makes a new one, as mbx_sandbox_reset does. Returns what mbx_sandbox_reset
** returns; MBX_NO_MEMORY before anything changed when the host is out of memory.
*/
MBX_API mbx_status mbx_sandbox_reset_keep_files(mbx_sandbox *sb, mbx_error *err);

/*
** CHECKPOINT / REWIND: instant rollback for fuzzing (one input per rewind) and for "try an
** action, then undo".
**
** mbx_sandbox_checkpoint captures the sandbox's whole current state between runs: the guest
** heap (a copy of the used part of the sandbox's heap slot: ~18 KB for an idle sandbox, more
** with whatever the guest keeps in globals), and the host-side state that belongs to it: the
** poisoned flag, the position in the policy's seed sequence, and the memory files (/tmp and
** what overlay mounts hold): a journal starts recording their changes, so the checkpoint
** copies none of them and a rewind costs what changed since (a file written after the
** checkpoint is copied once, at its first change; files left alone are never copied). Writes
** to rw mounts are never undone, and a rewind closes every open file. Output buffers are per run:
** nothing of them is kept. One checkpoint per sandbox: a new one replaces the old (its buffer
** is reused). Cost: one memcpy of that size (plus a malloc the first time or when it grew).
**
** mbx_sandbox_rewind returns the sandbox to the checkpoint in the time of one memcpy of the
** same size: globals, upvalues, coroutines, the math.random sequence, the heap usage and the
** poisoned flag are exactly as they were (rewinding after a run that poisoned the sandbox
** un-poisons it only if the checkpoint was taken before that run). Pages the sandbox dirtied
** past the checkpointed size are returned to the OS. It may be rewound any number of times.
** mbx_sandbox_reset keeps the checkpoint.
**
** Both refuse while a run is active on another thread (MBX_SANDBOX_BUSY). Both return
** MBX_UNSUPPORTED in MBX_ARENA_MALLOC builds (the asan preset), where the guest heap is
** spread over malloc blocks. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL, or a rewind with
** no checkpoint), MBX_SANDBOX_BUSY, MBX_UNSUPPORTED or MBX_NO_MEMORY (a checkpoint: the
** previous one is kept; a rewind: the state is rewound but /tmp could not be).
*/
MBX_API mbx_status mbx_sandbox_checkpoint(mbx_sandbox *sb, mbx_error *err);
MBX_API mbx_status mbx_sandbox_rewind(mbx_sandbox *sb, mbx_error *err);

/*
** HIBERNATION: idle sessions out of memory, back on their next call.
**
** mbx_sandbox_hibernate moves an idle sandbox's guest heap out of memory: the used part of its
** heap slot is stored in this process's heap as a delta against the runtime's pristine state,
** LZ4-compressed (a few KiB for an idle session), and the slot's pages and page tables are
** released while its address range stays reserved. The next call that needs the guest's state
** (mbx_run, mbx_resume, mbx_resume_error, mbx_sandbox_reset, _reset_keep_files, _checkpoint,
** _rewind) first wakes it: the image is decompressed into the same addresses, so the session
** is byte for byte the one that went to sleep (globals, upvalues, coroutines, a pending pause
** at an external call, the math.random sequence, heap usage and limits). Nothing is relocated.
** A wake costs a few microseconds; calls that read only host-side state (mbx_sandbox_changes,
** _snapshot, _set_stdin, _paused, _poisoned) do not wake it.
** What stays in memory while it sleeps: the sandbox's host side (its policy's copy, the file
** view with its memory files and journal, files a paused run holds open, the seed stream, a
** deterministic session's replay log, a checkpoint's copy) and the reservation of its address
** range. A paused sandbox may hibernate (a pause holds no C stack); so may a poisoned one.
** mbx_sandbox_interrupt on a hibernated sandbox is discarded (no run is active). The runtime's
** heap estimate (MBX_CAP_HEAP_BYTES) keeps counting a hibernated sandbox's heap, so a wake
** never fails a cap. Images are process-local: never written to disk, never portable (the
** portable form of a session is mbx_sandbox_snapshot's replay log).
** Not while a call is active on the sandbox on another thread (MBX_SANDBOX_BUSY). Returns
** MBX_OK (also when it already sleeps), MBX_INVALID_ARGUMENT (NULL), MBX_SANDBOX_BUSY,
** MBX_NO_MEMORY (no host memory for the image: it stays awake) or MBX_UNSUPPORTED (isolated
** sandboxes, MBX_CAP_ISOLATE; MBX_ARENA_MALLOC builds). A call that has to wake a sandbox
** fails with MBX_NO_MEMORY, having changed nothing, when the kernel gives no pages back.
**
** mbx_sandbox_hibernated: 1 while the sandbox's heap is out of memory, 0 otherwise and for NULL.
*/
MBX_API mbx_status mbx_sandbox_hibernate(mbx_sandbox *sb, mbx_error *err);
MBX_API int mbx_sandbox_hibernated(const mbx_sandbox *sb);

/*
** mbx_runtime_set_hibernate: sandboxes made from now on that stay idle (no call on them) for
** idle_ms milliseconds or more are hibernated by the runtime, as by mbx_sandbox_hibernate, and
** woken by their next call. 0 (the default) turns the sweep off; sandboxes already asleep stay
** asleep until used. The sweep has no thread of its own: it runs, at most four times per
** idle_ms (and at most every millisecond), when a call on any of the runtime's sandboxes ends
** or a sandbox is made, on that thread, and hibernates at most 32 sandboxes (the next call's
** end goes on with the rest); so a runtime with no calls at all hibernates nothing. A sweep skips
** sandboxes in use; a call that starts while the sweep hibernates its sandbox waits for it
** (tens of microseconds) and wakes it. Thread-safe. Returns MBX_OK, MBX_INVALID_ARGUMENT (NULL
** runtime) or MBX_UNSUPPORTED (an isolating runtime, MBX_CAP_ISOLATE, for idle_ms > 0).
** mbx_runtime_get_hibernate returns the setting (0 for NULL).
*/
MBX_API mbx_status mbx_runtime_set_hibernate(mbx_runtime *rt, uint64_t idle_ms, mbx_error *err);
MBX_API uint64_t mbx_runtime_get_hibernate(const mbx_runtime *rt);

/*
** THE CHANGE SET: what the guest created, modified, renamed or removed in overlay mounts and
** memory paths (/tmp, files it wrote) since the sandbox was created or last reset, so a host
** can show a person the agent's edits and apply them only after approval (the CLI's
** --changes, --export-changes and --diff are built on it). *json (freed with mbx_free) is a
** JSON array sorted by path (bytewise) of
**   {"path", "kind": "created"|"modified"|"removed"|"renamed", "from" (renamed only),
**    "type": "file"|"dir", "size", "content" (with MBX_CHANGES_CONTENT: a string for valid
**    UTF-8, else {"$bytes": base64})}
** A file written back with the host's bytes is no change; the source of a rename shows only
** as the rename's "from". Writes to rw mounts are not in it (they reached the host already).
** Not while a run is active on another thread (MBX_SANDBOX_BUSY). Returns MBX_OK,
** MBX_INVALID_ARGUMENT (NULL sb or json), MBX_SANDBOX_BUSY or MBX_NO_MEMORY.
*/
#define MBX_CHANGES_CONTENT 1u /* include file contents */
MBX_API mbx_status mbx_sandbox_changes(mbx_sandbox *sb, unsigned flags, char **json, size_t *len,
                                       mbx_error *err);

/*
** THE CHANGE SET, ONE CHANGE AT A TIME: the same changes as mbx_sandbox_changes, in the same
** order, as C data, for a host that shows them itself (the CLI's --changes, --diff and
** --export-changes are built on these two functions).
**
** mbx_sandbox_changes_each calls fn(ud, c) once per change. c and everything it points to
** are the library's, borrowed for the duration of that one call only (copy what you keep):
**   kind      MBX_CHANGE_CREATED, _MODIFIED, _REMOVED or _RENAMED
**   is_dir    1 for a directory (it has no contents), else 0
**   path      the virtual path (absolute, normalized, NUL-terminated; path_len bytes)
**   from      MBX_CHANGE_RENAMED: the virtual path it was renamed from (NUL-terminated;
**             from_len bytes); otherwise NULL and 0
**   data      the contents now (len bytes, may hold NULs) of a file that was not removed;
**             NULL for directories and removals, and may be NULL when len is 0
** Paths are the guest's choice of bytes (anything but NUL, in components of at most 255
** bytes, at most 1024 in all): escape them before showing them to a person, and never use
** one as a host path without confining it (the CLI's --export-changes opens every component
** with O_NOFOLLOW below its own directory).
** fn returns 0 to go on, anything else to stop the walk. The sandbox is claimed for the
** whole walk: fn must not call any other function on the same sandbox (it would get
** MBX_SANDBOX_BUSY) except mbx_sandbox_change_original; other sandboxes are fine.
** With no changes fn is never called. The same holds in a worker process (MBX_CAP_ISOLATE):
** the sandbox's files are kept in this process.
** Returns MBX_OK (every change visited), MBX_INTERRUPTED (fn stopped it: err says only that;
** fn's own reason is wherever fn put it), MBX_INVALID_ARGUMENT (NULL sb or fn), MBX_SANDBOX_BUSY (a run or
** another call is active on it) or MBX_NO_MEMORY (the walk's own index could not be made,
** before fn was called).
**
** mbx_sandbox_change_original reads the host's bytes that change c replaced: the file under
** the overlay mount at c->from for a rename, else at c->path (what a diff compares against).
** It may be called only from inside fn, with sb and the c that fn was given (any other c is
** MBX_INVALID_ARGUMENT, so the host never reads a path the change set does not name); the
** read is confined as the guest's reads are (no symlink leads out of the mount), is not
** recorded in a snapshot's log, and reads at most max bytes: a larger original is refused
** whole (MBX_INVALID_ARGUMENT), so a hostile guest's change set costs the host at most max
** bytes per call. Within one walk each host file (device and inode) is read at most once: a
** change whose original is a hard link of one read before in the walk gets a copy of those
** bytes when the walk kept them (originals of files with other links, up to 4 MiB in all),
** else MBX_INVALID_ARGUMENT ("a hard link of /w/a.log, whose original this walk has read
** already"), so 40 changed links of one large file cost one read, not 40.
** On MBX_OK *data (released with mbx_free; may be NULL when *len is 0) holds
** *len bytes. Otherwise *data is NULL, *len 0, and err's message says why in a few words,
** without the function's name ("File too large (the file is larger than 65536 bytes)"): the
** original is gone from the host, is a directory or not a regular file, belongs to a memory
** path (created files and /tmp have none), or is larger than max. Returns MBX_OK,
** MBX_INVALID_ARGUMENT (NULL sb, c, data or len; c not the change being visited; no readable
** original) or MBX_NO_MEMORY.
** Thread safety: a sandbox is used by one thread at a time; mbx_sandbox_change_original only
** on the thread that runs the walk (from inside fn).
*/
#define MBX_CHANGE_CREATED 1
#define MBX_CHANGE_MODIFIED 2
#define MBX_CHANGE_REMOVED 3
#define MBX_CHANGE_RENAMED 4
typedef struct mbx_change {
  int kind;
  int is_dir;
  const char *path;
  size_t path_len;
  const char *from;
  size_t from_len;
  const char *data;
  size_t len;
} mbx_change;
typedef int (*mbx_change_fn)(void *ud, const mbx_change *c);
MBX_API mbx_status mbx_sandbox_changes_each(mbx_sandbox *sb, mbx_change_fn fn, void *ud,
                                            mbx_error *err);
MBX_API mbx_status mbx_sandbox_change_original(mbx_sandbox *sb, const mbx_change *c, uint64_t max,
                                               char **data, size_t *len, mbx_error *err);

/*
** STANDARD INPUT: the bytes the guest's io.stdin (and io.read, io.lines() while io.input is
** io.stdin) reads, copied here. Reads consume them across runs, like a pipe; setting them
** again starts from their first byte, and so does mbx_sandbox_reset; mbx_sandbox_rewind
** goes back to where the checkpoint had read. Without a call, io.stdin is empty (reads give
** nil at once). Not while a run is active on another thread (MBX_SANDBOX_BUSY). Returns
** MBX_OK, MBX_INVALID_ARGUMENT (NULL sb, or NULL data with a length), MBX_SANDBOX_BUSY or
** MBX_NO_MEMORY (the previous bytes are kept).
*/
MBX_API mbx_status mbx_sandbox_set_stdin(mbx_sandbox *sb, const char *data, size_t len,
                                         mbx_error *err);
/*
** STANDARD INPUT FROM A DESCRIPTOR: from now on io.stdin reads fd, and only when the guest
** asks: a script that never reads it never waits for it (`sleep 3 | moonbox run -e 'return 1'`
** returns at once). Each read waits at most until the run's deadline (the wait is guest time:
** the run then ends with time_limit) and ends at mbx_sandbox_interrupt; in worker mode the
** host process reads fd and the worker gets the bytes. fd is borrowed: it must stay open
** until the sandbox is freed or its stdin replaced; its flags are not changed (a blocking fd is
** polled before each read). Everything read is kept in host memory, at most 64 MiB (a read
** past that fails for the guest with "more than 64 MiB of standard input read"), so
** mbx_sandbox_rewind and mbx_sandbox_reset read it again as with mbx_sandbox_set_stdin, and
** go on with fd past it. A deterministic sandbox's replay log does not hold these bytes: a
** restore reads fd again. Returns as mbx_sandbox_set_stdin (MBX_INVALID_ARGUMENT for a
** negative fd).
*/
MBX_API mbx_status mbx_sandbox_set_stdin_fd(mbx_sandbox *sb, int fd, mbx_error *err);

/*
** PORTABLE SNAPSHOTS (docs/host-functions.md, "Snapshots").
**
** A sandbox made from a deterministic policy (mbx_policy_set_deterministic) keeps a replay
** log: the source, chunk name and inputs of every mbx_run, the value or message of every
** mbx_resume/mbx_resume_error, and every answer the guest got from outside the VM (clock
** reads, random seeds, environment lookups, host function and native function results, exec
** results, and what host mounts answered the filesystem view: file bytes read, stat answers,
** directory listings), in order, chained with XXH3. Memory files, /tmp and overlay changes
** are not logged: the replay makes them again. mbx_sandbox_reset starts a new log;
** mbx_sandbox_rewind takes the log back with the state.
**
** mbx_sandbox_snapshot serializes a paused or idle sandbox into a self-describing blob
** (*bytes, *len; release it with mbx_free): magic "MBXSNAP1", format version, Lua and
** moonbox versions, a build id, the policy digest, the seed and clock, and the log. Returns
** MBX_OK, MBX_INVALID_ARGUMENT (NULL arguments, or a policy that is not deterministic),
** MBX_SANDBOX_POISONED, MBX_SANDBOX_BUSY, MBX_UNSUPPORTED (the log is incomplete: it outgrew
** 256 MiB or host memory, or was rewound across a reset; the guest read more than 64 MiB of
** host files and listings, the snapshot cap, and the message says how many bytes; or the
** guest wrote to a rw mount, which is not replayed, and the message names the mount) or
** MBX_NO_MEMORY. The header also records each mount (virtual path, mode, a digest of the
** host path).
**
** mbx_sandbox_restore checks the blob (an untrusted input: every length, the versions, the
** build id, the policy digest against p, the checksum and the hash chain), then creates a
** sandbox from p and re-executes the recorded runs and resumes with the recorded answers
** (host callbacks are not called; each request must match its record) until it stands where
** the original stood: paused at the same external call, or idle. From then on it is live
** and logs again, so it can be snapshotted in turn. Returns NULL with err filled
** (MBX_INVALID_INPUT: truncated, modified, another build or another policy; mounts that
** changed, naming the mount; the replay diverged, naming the record) or the sandbox, which
** mbx_sandbox_free releases. A restore reads nothing from the host's mounted files (their
** answers come from the log); the mounted directories must exist. The pending call of a
** paused restore is the one the original's last result showed.
*/
MBX_API mbx_status mbx_sandbox_snapshot(mbx_sandbox *sb, void **bytes, size_t *len, mbx_error *err);
MBX_API mbx_sandbox *mbx_sandbox_restore(mbx_runtime *rt, const mbx_policy *p, const void *bytes,
                                         size_t len, mbx_error *err);

/* ---------------------------------------------------------------------------------------- */
/* Result: immutable; everything borrowed from it lives until mbx_result_free.               */

/* The run's status, always < MBX_API_ERROR_BASE for a result (the one mbx_run or mbx_resume
   returned with it: MBX_OK, a run error or limit, MBX_PAUSED, ...); MBX_INVALID_ARGUMENT for
   a NULL result, which is never a run's status. */
MBX_API mbx_status mbx_result_status(const mbx_result *r);
/*
** The whole result contract as one JSON object (keys in sorted order):
**   {"error": null | {"chunk","line","message","traceback"},
**    "pending": null | {"args": [...], "function": "tools.fetch"} (status "paused" only),
**    "status": "ok|syntax_error|runtime_error|memory_limit|instruction_limit|time_limit|
**               output_limit|host_call_limit|interrupted|paused|internal_error",
**    "stderr": "...", "stdout": "...",
**    "usage": {"host_calls","instructions","memory_peak","output_bytes","wall_us","exec_runs",
**              "exec_ms"} ("instructions" is null for a run without a count hook),
**    "value": <the chunk's return values: one as itself, several as an array, none as null>}
** Integers are exact 64-bit values: a client that parses JSON numbers into doubles loses
** precision past 2^53. A string that is not valid UTF-8 appears as {"$bytes": "<base64>"},
** and that one-member form means nothing else: a guest table whose only key is "$bytes"
** cannot be encoded (runtime_error), so every such object is a byte string. A value JSON
** cannot hold is described by a one-member form reserved in the same way, so a run never
** fails because of what it returns: {"$function": "main.lua:3" | "builtin"},
** {"$thread": "suspended" | "normal" | "dead"}, {"$userdata": "FILE*"}, {"$number": "nan" |
** "inf" | "-inf"}, {"$cycle": "value.a"} (a table that is one of its enclosing tables, named
** by that table's path); inputs cannot contain them. Only table keys JSON cannot hold
** (booleans, floats, tables) and nesting past 128 levels still end the run (runtime_error).
** "status" comes
** from the runtime's own flags, never from the error text; error "chunk" and "line" name a
** frame of the run (a "chunk:line: " prefix in the message that names no frame stays in
** "message"); "message" is cut at 4096 bytes on a UTF-8 character boundary.
** len may be NULL. The text is built on the first call (the other accessors never need it) and
** kept with the result; NULL (and *len 0) only when host memory runs out, and a later call
** tries again, and for a NULL result. Safe to call from several threads at once.
*/
MBX_API const char *mbx_result_json(const mbx_result *r, size_t *len);
/* Just the "value" member ("null" when the run failed). len may be NULL. A NULL result:
   NULL, *len 0. */
MBX_API const char *mbx_result_value_json(const mbx_result *r, size_t *len);
/* The captured output, raw bytes ("" when there was none). len may be NULL. A NULL result:
   NULL, *len 0. */
MBX_API const char *mbx_result_stdout(const mbx_result *r, size_t *len);
MBX_API const char *mbx_result_stderr(const mbx_result *r, size_t *len);
/* When the run failed: fills err (code, chunk, line, message truncated to fit) and returns 1.
   Returns 0 and clears err (all zero) when the run succeeded and for a NULL result. err may be
   NULL (then only the answer). */
MBX_API int mbx_result_error(const mbx_result *r, mbx_error *err);
/* The full error message and traceback ("" and *len 0 when the run succeeded, when it failed
   without a traceback, and for a NULL result: never NULL). len may be NULL. */
MBX_API const char *mbx_result_error_message(const mbx_result *r, size_t *len);
MBX_API const char *mbx_result_traceback(const mbx_result *r, size_t *len);

typedef struct mbx_usage {
  /* VM instructions executed (granularity: the hook interval). Only counted under a count
     hook: a run without one (no instruction limit, mbx_runtime_set_deadline_signal) has 0
     here, instructions_counted 0, and null in the result JSON. */
  uint64_t instructions;
  uint64_t memory_peak;     /* highest live guest heap, bytes, since the sandbox was created */
  uint64_t wall_us;         /* wall-clock microseconds of the run, parse included */
  uint64_t output_bytes;    /* bytes written to stdout + stderr (before truncation) */
  uint64_t host_calls;      /* host calls and pauses so far in the run (across its resumes) */
  uint64_t exec_runs;       /* programs the run started in the exec backend */
  uint64_t exec_ms;         /* wall-clock milliseconds those programs took */
  int instructions_counted; /* 1: instructions is a count; 0: the run had no count hook */
} mbx_usage;

/*
** Whether the run ended by calling os.exit: returns 1 and stores the code in *code (code may
** be NULL), 0 otherwise (the run returned, failed or hit a limit; *code is untouched).
** os.exit() never ends the host process. os.exit(), os.exit(true) and os.exit(0) end the run
** with status MBX_OK, value null and the output kept; os.exit(false) is code 1, and any
** other code ends it with MBX_RUNTIME_ERROR and the message "os.exit(N)". Either way the
** sandbox is not poisoned, and neither pcall nor a __close handler can stop the exit. A
** limit reached before the exit wins (the status is then the limit's, and this returns 0).
** A NULL result: 0, *code untouched.
** The moonbox CLI exits with the code (docs/cli.md).
*/
MBX_API int mbx_result_exit_code(const mbx_result *r, int64_t *code);

/* Fills *usage and returns MBX_OK; MBX_INVALID_ARGUMENT for a NULL r or usage (*usage is then
   untouched). */
MBX_API mbx_status mbx_result_usage(const mbx_result *r, mbx_usage *usage);
/* NULL is a no-op. */
MBX_API void mbx_result_free(mbx_result *r);

/* ---------------------------------------------------------------------------------------- */
/* Static check: what a script would reach for, before anything runs.                         */

/*
** Compile code (under the policy's source cap; nothing runs) and list the global names it reads
** or writes that the policy does not provide. *json (freed with mbx_free):
**   {"globals": [{"access": "read"|"write", "line": n, "name": s}, ...],
**    "ok": bool, "syntax_error": null | {"line": n, "message": s}}
** ("ok" = no syntax error and no ungranted global; keys in sorted order, as in the result).
** The code is compiled exactly as mbx_run compiles it (text only, chunk name "input"), in a
** throwaway state with the policy's memory, instruction and time limits. Globals are read
** from the compiled bytecode, not from the text: every GETTABUP/SETTABUP on the chunk's _ENV
** (in nested functions too; a `local _ENV` is not the global table), one entry per name, line
** and access, sorted by line then name. Provided = a global of the sandbox's standard library
** (what _G holds in a new sandbox) or the first part of a function the policy grants
** ("tools" for "tools.search"). Inputs are not known here: a read of an input's name is
** reported, and a caller that knows its inputs drops those names. Accesses the bytecode does
** not name (_ENV[k] with a computed k, rawget(_G, k), code given to load) are not reported.
** A name that is not valid UTF-8 appears as {"$bytes": "<base64>"}; "message" is the parser's
** message without the "input:N:" prefix (its line is "line").
** Returns MBX_OK with *json, or, with *json NULL and err filled: MBX_INVALID_ARGUMENT (NULL p
** or json, NULL code with a length), MBX_SOURCE_TOO_LARGE, MBX_MEMORY_LIMIT /
** MBX_INSTRUCTION_LIMIT / MBX_TIME_LIMIT (the compile itself passed that limit),
** MBX_STACK_TOO_SMALL (as mbx_run) or MBX_NO_MEMORY. json_len may be NULL. Thread-safe: the
** policy is only read.
*/
MBX_API mbx_status mbx_check(const mbx_policy *p, const char *code, size_t len, char **json,
                             size_t *json_len, mbx_error *err);

#ifdef __cplusplus
}
#endif
#endif /* MOONBOX_H */
