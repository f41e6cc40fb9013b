/* vm/budget.h -- the one meter: instruction/time/interrupt/memory/output trips, sticky. */
#ifndef MBX_VM_BUDGET_H
#define MBX_VM_BUDGET_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

#include "vm/heap.h" /* MBXV_NOTABLE_STRING */

struct mbxV_vm;
struct mbxV_watch;

/* Why a run was stopped. Once set during a run it never goes back to NONE (sticky). */
typedef enum mbxV_trip {
  MBXV_TRIP_NONE = 0,
  MBXV_TRIP_MEMORY,
  MBXV_TRIP_INSTRUCTIONS,
  MBXV_TRIP_TIME,
  MBXV_TRIP_OUTPUT,
  MBXV_TRIP_INTERRUPT,
  MBXV_TRIP_INTERNAL,
  /* os.exit: not a fault. Sticky like the others so pcall cannot swallow the exit; the run
     ends with status ok (code 0) or runtime_error, and the sandbox is not poisoned. */
  MBXV_TRIP_EXIT,
  /* MBX_LIMIT_HOST_CALLS: the call past the limit never reaches the host. */
  MBXV_TRIP_HOST_CALLS
} mbxV_trip;

/* Hook interval of the main run thread and of guest coroutines. A coroutine is charged its
   interval at every resume, so one that finishes between two hook calls is still charged. */
#define MBXV_HOOK_COUNT 1000
#define MBXV_HOOK_COUNT_COROUTINE 128
/* Interval while large blocks are live: single instructions (comparing or hashing multi-MiB
   strings) get expensive, so the deadline must be checked more often. */
#define MBXV_HOOK_COUNT_LARGE 32
/* Large bytes one hook interval may scan at 8 ns a byte, at most: the interval is this divided
   by the largest string the heap held (and by the live large bytes / MBXV_HOOK_TABLE_FACTOR),
   from MBXV_HOOK_COUNT_LARGE down to 1 (issue 9, B.3). Under a deadline
   longer than about 0.27 s the allowance is a quarter of the deadline instead, at 8 ns per
   byte (the cost of `<` on NUL-laden strings): MBXV_HOOK_BYTES_PER_MS per ms of limit. */
#define MBXV_HOOK_LARGE_BYTES ((size_t)8 << 20)
/* Strings at least this long shorten the interval (MBXV_HOOK_LARGE_BYTES / their length, when
   that is below the normal interval): below it an interval's compares cost under 67 ms. */
#define MBXV_HOOK_STRING_MIN ((size_t)MBXV_NOTABLE_STRING)
#define MBXV_HOOK_BYTES_PER_MS ((uint64_t)31250)
/* Large bytes that are not the largest string cost this many times less per byte. */
#define MBXV_HOOK_TABLE_FACTOR 16

typedef struct mbxV_budget {
  uint64_t instruction_limit; /* 0 = none */
  uint64_t instructions;      /* charged so far in this run */
  uint64_t deadline_ns;       /* CLOCK_MONOTONIC_COARSE; 0 = none */
  uint64_t time_limit_ms;
  _Atomic int interrupt; /* set by any thread */
  _Atomic int trip;      /* mbxV_trip; written by the VM thread only, read by anyone */
  int running;           /* a run is active */
  lua_State *current;    /* the thread the VM is executing (tracked by resume wrappers) */
  lua_State *run_thread; /* the thread the run's chunk executes on */
  int64_t exit_code;     /* the code given to os.exit, once MBXV_TRIP_EXIT is set */
  /* Host calls and pauses: counted over a whole run, across its resumes (mbxV_run zeroes
     the count, mbxV_budget_start does not). The limit is set by the host at creation. */
  uint64_t host_calls;
  uint64_t host_call_limit;
  /* Programs the run started in the exec backend and their wall-clock milliseconds (the
     stdlib's proc.run counts them; zeroed with host_calls). */
  uint64_t exec_runs;
  uint64_t exec_ms;
  /* The lowest C frame address from which guest code may re-enter Lua, set at every run and
     resume entry (vm/cstack.h). */
  uintptr_t cstack_floor;
  /* The deadline-signal mode (vm/watchdog.h): the sandbox's watch (host memory, set by the
     host after mbxV_vm_new; NULL = always the count hook, e.g. deterministic policies), and
     for the active run whether it runs without a count hook (no_hook), whether it started so
     (uncounted: usage.instructions is then not a count) and whether it fell back to the
     count hook mid-run (switched: every thread returned to is armed again). */
  struct mbxV_watch *watch;
  int no_hook;
  int uncounted;
  int switched;
  /* `instructions` when mbxV_charge_light last took the full check (which reads the clock).
     Not reset per run: `instructions - light_checked_at` then wraps to a huge value and the
     next light charge takes the full check, which resynchronises it. */
  uint64_t light_checked_at;
} mbxV_budget;

/* Monotonic clocks in nanoseconds: precise (for usage) and coarse (cheap: for the hook). */
uint64_t mbxV_now_ns(void);
uint64_t mbxV_now_coarse_ns(void);

/* Charge n instructions to the running budget of L's sandbox and check every trip condition
   (instructions, deadline, interrupt, memory, an earlier trip). Raises a Lua error when
   tripped; call it only from a C function Lua called (a frame Lua owns). */
void mbxV_charge(lua_State *L, uint64_t n);
/* Charge n instructions like mbxV_charge, but read the clock only once at least
   MBXV_LIGHT_CHECK_EVERY instructions (of any kind: VM, metered C work) have been charged
   since the last full check: every call still counts n exactly and checks the trip flag, the
   interrupt, the instruction limit and memory pressure (each of those takes the full check,
   so an instruction limit trips where mbxV_charge would). The deadline is seen within
   MBXV_LIGHT_CHECK_EVERY instructions of metered work, however the calls nest: the count is
   the sandbox's, not the caller's. For the small remainder a metered C call pays at its end
   (mbxV_meter_flush), so a loop of small calls does not read the clock per call. */
#define MBXV_LIGHT_CHECK_EVERY 1024u
void mbxV_charge_light(lua_State *L, uint64_t n);
/* Like mbxV_charge, but never raises and never collects garbage: for C code Lua is in the
   middle of (the parser's reader). Returns the trip, if any. */
mbxV_trip mbxV_poll(lua_State *L, uint64_t n);
/* Raise if the run has tripped; otherwise return. Cheap. */
void mbxV_check(lua_State *L);
/*
** The one meter of batched C loops. A C function whose work memory does not bound (a scan, a
** sort, a match, a copy, the codec) adds its work as it goes; every `batch` units the meter
** charges the budget, which checks the clocks and limits and raises on a trip. A unit is
** `per_unit` steps of the loop (1 for most; bytes scanned count 16 or 64 to an instruction):
** at each charge pending / per_unit instructions are paid and the remainder dropped, as each
** loop did before it used this. mbxV_meter_flush pays what is left (and checks the trip even
** when nothing is), so a loop of small calls is charged too; it is a light charge (the clock
** is read once per MBXV_LIGHT_CHECK_EVERY instructions, not per call).
*/
typedef struct mbxV_meter {
  lua_State *L;
  uint64_t pending;  /* steps done, not yet charged */
  uint64_t batch;    /* charge once pending reaches this */
  uint64_t per_unit; /* steps per charged instruction */
} mbxV_meter;

static inline mbxV_meter mbxV_meter_init(lua_State *L, uint64_t batch, uint64_t per_unit) {
  mbxV_meter m = {.L = L, .pending = 0, .batch = batch, .per_unit = per_unit ? per_unit : 1};
  return m;
}

static inline void mbxV_meter_add(mbxV_meter *m, uint64_t steps) {
  m->pending += steps;
  if (m->pending >= m->batch) {
    uint64_t n = m->pending / m->per_unit;
    m->pending = 0;
    mbxV_charge(m->L, n);
  }
}

static inline void mbxV_meter_flush(mbxV_meter *m) {
  uint64_t n = m->pending / m->per_unit;
  m->pending = 0;
  mbxV_charge_light(m->L, n);
}

/* Append guest output (print, io.write) to stream MBXV_STDOUT or MBXV_STDERR: the bytes that
   fit in the output limit are kept, past it the run trips with MBXV_TRIP_OUTPUT and this
   raises; call it only from a C function Lua called. */
void mbxV_output_write(lua_State *L, int stream, const char *p, size_t n);
/* The current trip of L's sandbox (MBXV_TRIP_NONE while the run is healthy). */
mbxV_trip mbxV_tripped(lua_State *L);
/* Record a trip (first one wins) and re-arm the current thread's hook at count 1, so the
   running code stops at its next instruction. Does not raise. */
void mbxV_trip_set(lua_State *L, mbxV_trip why);
/* End the run as os.exit(code) does: record code and set the sticky exit trip (unless a
   limit tripped first). Does not raise; follow with mbxV_check. */
void mbxV_trip_exit(lua_State *L, int64_t code);
/* Install the run's hook on thread co with the interval right for it (count 1 once tripped)
   and make co the current thread. Returns the previous current thread, to be restored with
   mbxV_budget_leave() when co yields or returns. */
lua_State *mbxV_budget_enter(lua_State *L, lua_State *co);
void mbxV_budget_leave(lua_State *L, lua_State *previous);

/* The deadline signal's handler (vm/watchdog.c) for the run of vm, on the VM's own thread:
   when the deadline passed or the host interrupted, set the sticky trip, then arm the hook at
   count 1 on the current thread and every thread of the resume chain. Async-signal-safe. */
void mbxV_budget_on_signal(struct mbxV_vm *vm);

/* Set thread L's hook: every lua_sethook in vm/ goes through this one function, which composes
   the mask (the budget's count hook every `count` instructions, 0 for none, with whatever other
   hook the vm carries), so one user's lua_sethook never silently drops another's. Without a
   count hook (the deadline-signal mode) it re-checks the trip after lua_sethook returned: a
   handler that armed the thread inside it would otherwise be overwritten. */
void mbxV_hook_set(lua_State *L, int count);

/* Start and end a run: counters to zero, trip and interrupt cleared, deadline set (so parse
   time counts). The run's thread is recorded later in budget.run_thread. */
void mbxV_budget_start(lua_State *L);
void mbxV_budget_stop(lua_State *L);
/* Count one host call or pause against MBX_LIMIT_HOST_CALLS; past the limit, set the sticky
   trip and raise. Call it from a frame Lua owns, before the host is reached. */
void mbxV_count_host_call(lua_State *L);
/* Host time is not guest time: bracket a host callback with these, and the deadline moves
   on by the time the host took. */
uint64_t mbxV_budget_host_begin(lua_State *L);
void mbxV_budget_host_end(lua_State *L, uint64_t begun);
/* A port operation that may block (a program run by exec): the deadline signal is not sent
   while it runs (poll and nanosleep are not restarted by SA_RESTART); its time is guest time
   (the operation has the deadline itself), so the deadline does not move. */
void mbxV_budget_port_enter(lua_State *L);
void mbxV_budget_port_leave(lua_State *L);

/* The heap's pressure callback (ud is the mbxV_vm): over the limit, or large blocks appeared.
   Re-arms the current thread's hook at count 1 so the hook looks at once. */
void mbxV_budget_on_pressure(void *ud);
/* The message of a trip, e.g. "time limit exceeded (200 ms)", into buf (this size fits all). */
#define MBXV_TRIP_MESSAGE_MAX 160
void mbxV_trip_message(lua_State *L, mbxV_trip why, char *buf, size_t size);

#endif
