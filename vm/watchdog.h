/* vm/watchdog.h -- the deadline without a count hook: one watchdog thread per runtime signals
   the VM thread of an overdue run, whose handler trips the run and arms its hooks. */
#ifndef MBX_VM_WATCHDOG_H
#define MBX_VM_WATCHDOG_H

/*
** Why: a count hook makes Lua call luaG_traceexec at every instruction (1.9-2.8x a plain
** loop), whatever its interval. A run with no instruction limit needs the hook only once its
** deadline passed or the host interrupted it, so in that mode no hook is set and the deadline
** comes asynchronously, on the VM's own thread:
**  - a run arms its sandbox's watch with a few atomic stores (deadline, thread id, a
**    generation unique to the run); no system call, no lock;
**  - the runtime's watchdog thread polls the watches of running sandboxes about every
**    millisecond and sends an overdue one (deadline passed, or interrupt asked) the runtime's
**    signal with the generation as its value (rt_tgsigqueueinfo), again every millisecond
**    until the VM acknowledges by raising the trip (a hook armed by the handler can be lost in
**    luaG_traceexec), never while the VM thread is in host code or a port operation;
**  - the handler finds the run's watch through a thread-local pointer (host memory, outside
**    the arena), ignores a signal whose generation is not the running one (a stale signal, a
**    signal for a run that ended, a signal to a reused thread id), re-checks the deadline or
**    interrupt itself, sets the sticky trip and arms the hook at count 1 on every thread of
**    the resume chain (vm/budget.c, mbxV_budget_on_signal).
** Before every signal, and every 10 ms while runs go on, the watchdog checks with sigaction
** that the handler is still ours; if
** the host replaced it, or the signal never reaches the handler (the thread blocks it), the
** watchdog is marked lost and every later run uses the count hook. Under ThreadSanitizer
** (which defers handlers to its next intercepted call, so a pure loop would never stop) and
** after fork() (the thread is not in the child) the count hook is used too.
*/

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <lua.h>

struct mbxV_vm;
typedef struct mbxV_watchdog mbxV_watchdog;

/* Threads of the resume chain a handler arms directly; deeper ones are armed when the chain
   unwinds to them (mbxV_budget_leave re-arms every thread it returns to once tripped). */
#define MBXV_WATCH_CHAIN 16
/* The watchdog's poll and re-signal period, and how many idle polls before it sleeps (a run
   that starts while it sleeps wakes it: that one start pays a system call). */
#define MBXV_WATCHDOG_POLL_NS 1000000u
#define MBXV_WATCHDOG_IDLE_POLLS 200
/* How often the watchdog checks with sigaction that the handler is still ours while runs go on
   (and before every signal). */
#define MBXV_WATCHDOG_CHECK_NS 10000000u
/* A watch without a run this long leaves the watchdog's list (its next run lists it again). */
#define MBXV_WATCHDOG_EVICT_NS 100000000u
/* Signals the handler never saw (it is blocked on that thread) before the watchdog gives up. */
#define MBXV_WATCHDOG_MAX_UNSEEN 50

/* One sandbox's entry in its runtime's watchdog. Lives in host memory (never in the arena:
   templates, checkpoints and rewinds copy the arena), zeroed by mbxV_watch_init. */
typedef struct mbxV_watch {
  mbxV_watchdog *dog;
  struct mbxV_vm *vm;
  /* In dog's list while it runs, and for MBXV_WATCHDOG_EVICT_NS after: a runtime's idle
     sandboxes cost the watchdog nothing. prev, next and linked under the dog's lock; listed
     is what the VM thread reads at a run's start (a Dekker pair with the generation). */
  struct mbxV_watch *prev, *next;
  int linked;
  _Atomic int listed;
  /* Set by the VM thread when it first lists this watch: a watch never listed (a sandbox
     whose runs all had the count hook) is freed without taking the dog's lock. */
  int ever_listed;
  uint64_t id;   /* the high 32 bits of this watch's generations: unique in the process */
  uint32_t runs; /* the low 32 bits */
  _Atomic uint64_t generation;  /* of the active run on `tid`; 0 = none */
  _Atomic uint64_t deadline_ns; /* CLOCK_MONOTONIC_COARSE, moved on by host time; 0 = none */
  _Atomic int tid;
  _Atomic int in_host;    /* host code or a port operation: never signalled */
  _Atomic uint64_t acked; /* the generation whose trip the VM raised */
  _Atomic uint64_t seen;  /* the generation whose signal reached the handler */
  _Atomic int fallback;   /* the watchdog lost its signal during this run */
  /* The resume chain, written by the VM thread and read by its own handler (same thread:
     volatile orders them). depth counts past MBXV_WATCH_CHAIN; only the first are kept. */
  lua_State *volatile chain[MBXV_WATCH_CHAIN];
  volatile int depth;
  struct mbxV_watch *outer; /* the watch of a run this one is nested in, on this thread */
  /* The watchdog thread's own. */
  uint64_t idle_ns; /* when it was first seen without a run; 0 = running */
  uint64_t sent_gen, sent_ns;
  unsigned sent;
} mbxV_watch;

/* 1 when this build can use the signal path (0 under ThreadSanitizer). */
int mbxV_watchdog_supported(void);
/* The signal used when the host chose none. */
int mbxV_watchdog_default_signal(void);

/* A watchdog delivering deadlines with signal signo. NULL, with why filled, when signo is not
   SIGUSR1, SIGUSR2 or a real-time signal, has a handler that is not ours, is ignored or
   blocked in the calling thread, the build cannot use signals (TSan), or out of memory.
   Installs the handler (process-wide, SA_RESTART; never removed again: a signal still queued
   for a thread must not meet the default action, which ends the process). The thread is
   started at the first run. */
mbxV_watchdog *mbxV_watchdog_new(int signo, char *why, size_t why_size);
/* A watchdog for a process whose deadlines another process signals (a worker: its parent
   signals it at the run's deadline, and after an interrupt, until the run is answered): no
   thread and no handler. The host installs its own handler, which calls
   mbxV_watch_signal_here; runs then have no count hook, as with mbxV_watchdog_new. NULL
   where signals cannot serve (ThreadSanitizer) or out of memory. */
mbxV_watchdog *mbxV_watchdog_new_external(void);
/* Async-signal-safe, for that handler: the run on this thread (if any, and not in host code)
   looks at its deadline and interrupt flag, and if either is due trips and arms its hooks. */
void mbxV_watch_signal_here(void);
/* Stops the thread; every watch must be finished first. */
void mbxV_watchdog_free(mbxV_watchdog *d);
int mbxV_watchdog_signal(const mbxV_watchdog *d);
/* 0 once the watchdog lost its signal (handler replaced or signal blocked): runs use the
   count hook from then on. */
int mbxV_watchdog_usable(const mbxV_watchdog *d);

/* A sandbox's watch, for vm (which is not armed here: mbxV_budget_start does it). */
void mbxV_watch_init(mbxV_watch *w, mbxV_watchdog *d, struct mbxV_vm *vm);
/* Take it out of the watchdog (before the vm is freed). */
void mbxV_watch_fini(mbxV_watch *w);

/* vm/budget.c's side: arm at the start of a run (returns 1: run without a count hook; 0: use
   the count hook), disarm at its end. A couple of atomic stores: no system call, no lock,
   except a run that finds its watch out of the list (its first, or one after 100 ms without
   runs) or the watchdog asleep (after 200 ms without runs). */
int mbxV_watch_begin(mbxV_watch *w, uint64_t deadline_ns);
void mbxV_watch_end(mbxV_watch *w);
static inline void mbxV_watch_host(mbxV_watch *w, int in_host) {
  atomic_store_explicit(&w->in_host, in_host, memory_order_release);
}
static inline void mbxV_watch_deadline(mbxV_watch *w, uint64_t deadline_ns) {
  atomic_store_explicit(&w->deadline_ns, deadline_ns, memory_order_relaxed);
}
/* The VM raised the run's trip: stop signalling. */
static inline void mbxV_watch_ack(mbxV_watch *w) {
  atomic_store_explicit(&w->acked, atomic_load_explicit(&w->generation, memory_order_relaxed),
                        memory_order_relaxed);
}
void mbxV_watch_push(mbxV_watch *w, lua_State *co);
void mbxV_watch_pop(mbxV_watch *w);

#endif
