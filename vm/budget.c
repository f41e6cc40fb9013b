/* vm/budget.c -- the one meter: a count hook plus charges from C, with sticky trips. */
#include "vm/budget.h"

#include <stdio.h>
#include <time.h>

#include "vm/coverage.h"
#include "vm/heap.h"
#include "vm/vm.h"
#include "vm/watchdog.h"

uint64_t mbxV_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t mbxV_now_coarse_ns(void) {
  /* A vDSO read of the tick counter: a few ns, resolution one tick (1-4 ms). Cheap enough
     for every hook call; the deadline may be overrun by one tick. */
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void hook(lua_State *L, lua_Debug *ar);

/* Every lua_sethook of vm/ goes through here: the one place that composes what a thread's hook
   mask must hold, so no caller can drop another's part by setting its own: the budget's count
   hook every `count` instructions (0: none), plus line events while the fuzz engine collects
   guest coverage (vm/coverage.h). A thread re-armed at count 1 after a trip or under memory
   pressure, and a coroutine armed at its resume, keep the line events, so coverage cannot
   vanish inside coroutines or after pressure. With coverage on the count hook is the deadline
   path (the fuzz engine never asks for count 0: libFuzzer owns the timer signals). */
void mbxV_hook_set(lua_State *L, int count) {
  int mask = count > 0 ? LUA_MASKCOUNT : 0;
  if (mbxV_coverage_active != NULL) mask |= LUA_MASKLINE;
  lua_sethook(L, mask ? hook : NULL, mask, count > 0 ? count : 0);
  if (count == 1) return;
  /* The deadline signal's handler may have run inside lua_sethook, its arm overwritten by
     ours: it set the trip first, so a trip seen now is armed again. */
  atomic_signal_fence(memory_order_seq_cst);
  mbxV_vm *vm = mbxV_from(L);
  if (vm != NULL && vm->budget.no_hook &&
      atomic_load_explicit(&vm->budget.trip, memory_order_relaxed) != MBXV_TRIP_NONE)
    lua_sethook(L, hook, LUA_MASKCOUNT | (mask & LUA_MASKLINE), 1);
}

/* Async-signal-safe: atomics, the vDSO clock and lua_sethook (which Lua allows in a handler,
   as lua.c's Ctrl-C does) only. Same thread as the VM: the fields it reads are the VM's. */
void mbxV_budget_on_signal(mbxV_vm *vm) {
  mbxV_budget *b = &vm->budget;
  if (!b->running || !b->no_hook) return;
  mbxV_trip why;
  if (atomic_load_explicit(&b->interrupt, memory_order_acquire))
    why = MBXV_TRIP_INTERRUPT;
  else if (b->deadline_ns && mbxV_now_coarse_ns() >= b->deadline_ns)
    why = MBXV_TRIP_TIME;
  else
    return; /* the deadline moved on (host time) since the watchdog looked */
  int none = MBXV_TRIP_NONE;
  atomic_compare_exchange_strong(&b->trip, &none, (int)why);
  /* The trip first, then the hooks: a lua_sethook of the VM this handler interrupted sees
     the trip when it returns (mbxV_hook_set) and arms again. */
  mbxV_watch *w = b->watch;
  int depth = w->depth;
  if (depth > MBXV_WATCH_CHAIN) depth = MBXV_WATCH_CHAIN;
  for (int i = 0; i < depth; i++)
    if (w->chain[i]) mbxV_hook_set(w->chain[i], 1);
  lua_State *current = b->current;
  if (current) mbxV_hook_set(current, 1);
}

static int interval_by_size(mbxV_vm *vm, lua_State *L);

/* The hook interval right for thread L now: by the live data (interval_by_size), but never
   past the instruction limit. The interval varies with heap sizes, which follow Lua's
   per-process string-hash seed by a few bytes; stopping exactly at the limit keeps the point
   where a run ends on it the same in every process (deterministic mode compares it). */
static int interval_for(mbxV_vm *vm, lua_State *L) {
  int want = interval_by_size(vm, L);
  const mbxV_budget *b = &vm->budget;
  if (b->instruction_limit && want > 1) {
    uint64_t left =
        b->instructions < b->instruction_limit ? b->instruction_limit - b->instructions + 1 : 1;
    if (left < (uint64_t)want) want = (int)left;
  }
  return want;
}

/* The interval for the live data alone. */
static int interval_by_size(mbxV_vm *vm, lua_State *L) {
  mbxV_budget *b = &vm->budget;
  if (atomic_load_explicit(&b->trip, memory_order_relaxed) != MBXV_TRIP_NONE ||
      vm->heap.pressure_pending)
    return 1;
  /* No count hook: the deadline comes by signal, and a long single instruction delays it by
     that instruction only, so large data needs no shorter interval either. */
  if (b->no_hook) return 0;
  int normal = L == b->run_thread ? MBXV_HOOK_COUNT : MBXV_HOOK_COUNT_COROUTINE;
  if (vm->heap.large_live == 0 && vm->heap.largest_string < MBXV_HOOK_STRING_MIN) return normal;
  /* Large blocks make single instructions cost time in proportion to them, in C where no
     hook fires: `<` between two strings of NULs runs one strcoll per byte (about 8 ns each);
     a lookup compares a long key or walks a bucket of colliding keys; a rehash counts and
     copies a whole array part (3.3 ms for 32 MiB on the arena). So an interval's worth of
     instructions may cost at most `allowed` bytes at 8 ns: MBXV_HOOK_LARGE_BYTES (67 ms),
     or, under a longer deadline, a quarter of the deadline's worth. Strings are charged at
     that rate by the largest one the heap ever held (a compare walks two strings side by
     side, up to the shorter: 7.5-7.8 ns per byte measured); every other large byte at
     1/MBXV_HOOK_TABLE_FACTOR of it (table work is memory-speed, under 0.5 ns per byte).
     Past the allowance the hook looks after every instruction, and the deadline is overrun
     by at most one instruction (docs/SECURITY-MODEL.md lists the worst cases). Measured
     cost of a small interval on a plain loop: x1.25 at 8, x1.8 at 4, x4.5 at 1
     (issue 10's measurements, in docs/performance.md's git history). */
  size_t allowed = MBXV_HOOK_LARGE_BYTES;
  if (b->time_limit_ms > 0) {
    uint64_t by_deadline = b->time_limit_ms < UINT64_MAX / MBXV_HOOK_BYTES_PER_MS
                               ? b->time_limit_ms * MBXV_HOOK_BYTES_PER_MS
                               : UINT64_MAX;
    if (by_deadline > allowed) allowed = by_deadline > SIZE_MAX ? SIZE_MAX : (size_t)by_deadline;
  }
  size_t share = (size_t)normal;
  if (vm->heap.large_live > 0) {
    size_t tables =
        allowed > SIZE_MAX / MBXV_HOOK_TABLE_FACTOR ? SIZE_MAX : allowed * MBXV_HOOK_TABLE_FACTOR;
    share = tables / vm->heap.large_live;
    if (share > (size_t)MBXV_HOOK_COUNT_LARGE) share = MBXV_HOOK_COUNT_LARGE;
  }
  /* Strings below MBXV_LARGE_BLOCK count too: a 200 KB string of NULs compared 1000 times
     between two hooks is 1.6 s of strcoll (fuzz_hostile found it), so the interval shrinks
     smoothly with the largest string, from the normal one down to 1. A string of a large
     block or more can only be live while some large block is: with none live, the longest
     that may still be live is just under MBXV_LARGE_BLOCK (interval 32). */
  size_t longest = vm->heap.largest_string;
  if (vm->heap.large_live == 0 && longest >= MBXV_LARGE_BLOCK) longest = MBXV_LARGE_BLOCK - 1;
  if (longest >= MBXV_HOOK_STRING_MIN) {
    size_t by_string = allowed / longest;
    if (by_string < share) share = by_string;
  }
  return share < 1 ? 1 : share < (size_t)normal ? (int)share : normal;
}

static void arm(mbxV_vm *vm, lua_State *L) {
  mbxV_hook_set(L, interval_for(vm, L));
}

void mbxV_trip_message(lua_State *L, mbxV_trip why, char *buf, size_t size) {
  mbxV_vm *vm = mbxV_from(L);
  switch (why) {
  case MBXV_TRIP_MEMORY:
    if (vm->heap.refused && vm->heap.used <= vm->heap.limit)
      snprintf(buf, size, "memory limit exceeded: the heap is too fragmented for a %s",
               "new block (live data is under the limit; allocate fewer distinct sizes)");
    else
      snprintf(buf, size, "memory limit exceeded (%zu bytes)", vm->heap.limit);
    break;
  case MBXV_TRIP_INSTRUCTIONS:
    snprintf(buf, size, "instruction limit exceeded (%llu instructions)",
             (unsigned long long)vm->budget.instruction_limit);
    break;
  case MBXV_TRIP_TIME:
    snprintf(buf, size, "time limit exceeded (%llu ms)",
             (unsigned long long)vm->budget.time_limit_ms);
    break;
  case MBXV_TRIP_OUTPUT:
    snprintf(buf, size, "output limit exceeded (%zu bytes)", vm->output.limit);
    break;
  case MBXV_TRIP_INTERRUPT:
    snprintf(buf, size, "interrupted by the host");
    break;
  case MBXV_TRIP_INTERNAL:
    snprintf(buf, size, "internal error in the runtime");
    break;
  case MBXV_TRIP_EXIT:
    snprintf(buf, size, "os.exit(%lld)", (long long)vm->budget.exit_code);
    break;
  case MBXV_TRIP_HOST_CALLS:
    snprintf(buf, size, "host call limit exceeded (%llu calls)",
             (unsigned long long)vm->budget.host_call_limit);
    break;
  default:
    snprintf(buf, size, "no limit tripped");
    break;
  }
}

/* Raise the sticky trip as a Lua error. The message is for humans reading a traceback; the
   run's status is taken from the flag, never from this text. */
static void raise_trip(lua_State *L, mbxV_trip why) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  if (b->no_hook) mbxV_watch_ack(b->watch); /* the watchdog stops signalling */
  char msg[MBXV_TRIP_MESSAGE_MAX];
  mbxV_trip_message(L, why, msg, sizeof msg);
  lua_pushstring(L, msg);
  lua_error(L);
}

void mbxV_trip_set(lua_State *L, mbxV_trip why) {
  mbxV_vm *vm = mbxV_from(L);
  int none = MBXV_TRIP_NONE;
  atomic_compare_exchange_strong(&vm->budget.trip, &none, (int)why);
  /* From now on the hook fires at every instruction of the running thread and raises, so
     pcall, xpcall handlers and __close cannot swallow the trip (THREATS D6). */
  if (vm->budget.current) mbxV_hook_set(vm->budget.current, 1);
}

void mbxV_trip_exit(lua_State *L, int64_t code) {
  mbxV_vm *vm = mbxV_from(L);
  if (atomic_load(&vm->budget.trip) != MBXV_TRIP_NONE) return;
  vm->budget.exit_code = code;
  mbxV_trip_set(L, MBXV_TRIP_EXIT);
}

/* Look at every limit; trip the first one found. The memory check runs a full collection
   first: garbage that an ordinary emergency GC would have freed must not end a script. */
static mbxV_trip evaluate(lua_State *L, mbxV_vm *vm, int may_collect) {
  mbxV_budget *b = &vm->budget;
  mbxV_trip t = atomic_load_explicit(&b->trip, memory_order_relaxed);
  if (t != MBXV_TRIP_NONE) return t;
  /* Acquire: what the interrupting thread did before its store happens before the run ends
     (and before the host, say, frees the sandbox on this thread). */
  if (atomic_load_explicit(&b->interrupt, memory_order_acquire))
    t = MBXV_TRIP_INTERRUPT;
  else if (b->instruction_limit && b->instructions > b->instruction_limit)
    t = MBXV_TRIP_INSTRUCTIONS;
  else if (b->deadline_ns && mbxV_now_coarse_ns() >= b->deadline_ns)
    t = MBXV_TRIP_TIME;
  else if (may_collect && vm->heap.pressure_pending) {
    vm->heap.pressure_pending = 0;
    if (mbxV_heap_over_limit(&vm->heap)) {
      /* A full collection is O(heap): charge it like the instructions it stands for. */
      b->instructions += vm->heap.used / 64;
      lua_gc(L, LUA_GCCOLLECT);
      if (mbxV_heap_over_limit(&vm->heap)) t = MBXV_TRIP_MEMORY;
    }
  }
  if (t != MBXV_TRIP_NONE) mbxV_trip_set(L, t);
  return t;
}

static void hook(lua_State *L, lua_Debug *ar) {
  if (ar->event == LUA_HOOKLINE) {
    /* Coverage only: a line event charges nothing and checks nothing (the count event of
       the same instruction, which Lua delivers first, did). */
    mbxV_coverage_line(L, ar);
    return;
  }
  mbxV_vm *vm = mbxV_from(L);
  vm->budget.instructions += (uint64_t)lua_gethookcount(L);
  mbxV_trip t = evaluate(L, vm, 1);
  if (t != MBXV_TRIP_NONE) {
    mbxV_hook_set(L, 1);
    raise_trip(L, t);
  }
  int want = interval_for(vm, L);
  if (want != lua_gethookcount(L)) mbxV_hook_set(L, want);
}

/* The watchdog lost its signal during this run (vm/watchdog.h): the count hook from here on,
   on the current thread now and on every thread the run returns to. */
static void fall_back(mbxV_vm *vm) {
  mbxV_budget *b = &vm->budget;
  b->no_hook = 0;
  b->switched = 1;
  if (b->current) arm(vm, b->current);
}

void mbxV_charge(lua_State *L, uint64_t n) {
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL || !vm->budget.running) return;
  if (vm->budget.no_hook && atomic_load_explicit(&vm->budget.watch->fallback, memory_order_relaxed))
    fall_back(vm);
  vm->budget.instructions += n;
  mbxV_trip t = evaluate(L, vm, 1);
  if (t != MBXV_TRIP_NONE) raise_trip(L, t);
}

void mbxV_charge_light(lua_State *L, uint64_t n) {
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL || !vm->budget.running) return;
  mbxV_budget *b = &vm->budget;
  uint64_t after = b->instructions + n;
  /* Relaxed loads: anything set takes the full check (mbxV_charge, which also handles the
     deadline-signal mode's fall-back), which loads them again with acquire. */
  if (after - b->light_checked_at < MBXV_LIGHT_CHECK_EVERY &&
      atomic_load_explicit(&b->trip, memory_order_relaxed) == MBXV_TRIP_NONE &&
      !atomic_load_explicit(&b->interrupt, memory_order_relaxed) &&
      !(b->instruction_limit && after > b->instruction_limit) && !vm->heap.pressure_pending &&
      !(b->no_hook && atomic_load_explicit(&b->watch->fallback, memory_order_relaxed))) {
    b->instructions = after;
    return;
  }
  b->light_checked_at = after;
  mbxV_charge(L, n);
}

mbxV_trip mbxV_poll(lua_State *L, uint64_t n) {
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL || !vm->budget.running) return MBXV_TRIP_NONE;
  vm->budget.instructions += n;
  return evaluate(L, vm, 0);
}

void mbxV_check(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  if (vm == NULL) return;
  mbxV_trip t = atomic_load_explicit(&vm->budget.trip, memory_order_relaxed);
  if (t != MBXV_TRIP_NONE) raise_trip(L, t);
}

mbxV_trip mbxV_tripped(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  return vm ? (mbxV_trip)atomic_load(&vm->budget.trip) : MBXV_TRIP_NONE;
}

lua_State *mbxV_budget_enter(lua_State *L, lua_State *co) {
  mbxV_vm *vm = mbxV_from(L);
  lua_State *previous = vm->budget.current;
  /* The chain before current: a handler in between arms co either way. */
  if (vm->budget.no_hook) mbxV_watch_push(vm->budget.watch, co);
  vm->budget.current = co;
  atomic_signal_fence(memory_order_seq_cst);
  arm(vm, co);
  return previous;
}

void mbxV_budget_leave(lua_State *L, lua_State *previous) {
  mbxV_vm *vm = mbxV_from(L);
  vm->budget.current = previous;
  atomic_signal_fence(memory_order_seq_cst);
  if (vm->budget.no_hook) mbxV_watch_pop(vm->budget.watch);
  /* The thread we return to may have been re-armed meanwhile (a trip while it waited). */
  if (previous && atomic_load(&vm->budget.trip) != MBXV_TRIP_NONE)
    mbxV_hook_set(previous, 1);
  else if (previous && vm->budget.switched)
    arm(vm, previous); /* it ran without a count hook before the fallback */
}

void mbxV_budget_start(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  mbxV_budget *b = &vm->budget;
  b->instructions = 0;
  b->exit_code = 0;
  atomic_store(&b->trip, MBXV_TRIP_NONE);
  atomic_store(&b->interrupt, 0);
  b->deadline_ns = b->time_limit_ms ? mbxV_now_coarse_ns() + b->time_limit_ms * 1000000u : 0;
  b->run_thread = NULL;
  b->current = NULL;
  b->switched = 0;
  /* No count hook when nothing needs one: no instruction limit (deterministic policies get
     no watch from the host) and no coverage (the fuzz engine's line events). The watchdog
     takes the deadline and the host's interrupts. */
  b->no_hook = b->watch != NULL && b->instruction_limit == 0 && mbxV_coverage_active == NULL &&
               mbxV_watch_begin(b->watch, b->deadline_ns);
  b->uncounted = b->no_hook;
  b->running = 1;
}

void mbxV_budget_stop(lua_State *L) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  if (b->uncounted) mbxV_watch_end(b->watch); /* armed at the start, even if it fell back */
  b->no_hook = 0;
  b->running = 0;
  /* The floor belongs to the stack of the call that set it: outside a run nothing is
     checked (the next run or resume, on whatever thread, sets its own). */
  b->cstack_floor = 0;
  b->current = NULL;
  b->run_thread = NULL;
}

void mbxV_count_host_call(lua_State *L) {
  mbxV_vm *vm = mbxV_from(L);
  mbxV_check(L);
  if (vm->budget.host_calls >= vm->budget.host_call_limit) {
    mbxV_trip_set(L, MBXV_TRIP_HOST_CALLS);
    raise_trip(L, MBXV_TRIP_HOST_CALLS);
  }
  vm->budget.host_calls++;
}

uint64_t mbxV_budget_host_begin(lua_State *L) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  if (b->no_hook) mbxV_watch_host(b->watch, 1);
  return mbxV_now_coarse_ns();
}

void mbxV_budget_host_end(lua_State *L, uint64_t begun) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  uint64_t now = mbxV_now_coarse_ns();
  if (b->deadline_ns && now > begun) b->deadline_ns += now - begun;
  if (b->no_hook) {
    /* The moved deadline before the mark comes off (release): the watchdog reads both. */
    mbxV_watch_deadline(b->watch, b->deadline_ns);
    mbxV_watch_host(b->watch, 0);
  }
}

void mbxV_budget_port_enter(lua_State *L) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  if (b->no_hook) mbxV_watch_host(b->watch, 1);
}

void mbxV_budget_port_leave(lua_State *L) {
  mbxV_budget *b = &mbxV_from(L)->budget;
  if (b->no_hook) mbxV_watch_host(b->watch, 0);
}

void mbxV_budget_on_pressure(void *ud) {
  mbxV_vm *vm = ud;
  if (!vm->budget.running) return;
  if (vm->heap.refused) {
    /* Past the ceiling: sticky, so pcall cannot swallow the "not enough memory" error. */
    int none = MBXV_TRIP_NONE;
    atomic_compare_exchange_strong(&vm->budget.trip, &none, MBXV_TRIP_MEMORY);
  }
  if (vm->budget.current) mbxV_hook_set(vm->budget.current, 1);
}

void mbxV_output_write(lua_State *L, int stream, const char *p, size_t n) {
  mbxV_check(L);
  switch (mbxV_output_append(&mbxV_from(L)->output, stream, p, n)) {
  case MBXV_APPEND_OK:
    return;
  case MBXV_APPEND_NO_MEMORY:
    mbxV_trip_set(L, MBXV_TRIP_INTERNAL);
    break;
  case MBXV_APPEND_OVER_LIMIT:
    mbxV_trip_set(L, MBXV_TRIP_OUTPUT);
    break;
  }
  mbxV_check(L);
}
