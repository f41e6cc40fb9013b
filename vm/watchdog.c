/* vm/watchdog.c -- the deadline without a count hook: the watchdog thread and the handler. */
#include "vm/watchdog.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "vm/budget.h"
#include "vm/vm.h"

#if defined(__SANITIZE_THREAD__)
#define MBXV_WATCHDOG_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MBXV_WATCHDOG_TSAN 1
#endif
#endif

struct mbxV_watchdog {
  /* The signals come from another process (mbxV_watchdog_new_external): no thread, no list,
     no handler of ours; the host's handler calls mbxV_watch_signal_here. */
  int external;
  int signo;
  pid_t pid;
  unsigned epoch; /* fork_epoch when made: a child process has no watchdog thread */
  _Atomic int lost;
  _Atomic int sleeping;
  _Atomic int started;
  int stop;
  pthread_t thread;
  uint64_t checked_ns;  /* the watchdog thread's last look at the handler */
  pthread_mutex_t lock; /* the list, stop, and the watchdog's sleep */
  pthread_cond_t wake;
  mbxV_watch *head;
};

/* The watch of the run on this thread, for the handler. initial-exec: the handler must not
   be the first to touch a dynamic TLS block (that may allocate). */
static _Thread_local mbxV_watch *tls_watch __attribute__((tls_model("initial-exec")));
static _Thread_local int tls_tid __attribute__((tls_model("initial-exec")));
static _Atomic unsigned fork_epoch;
/* Whether this thread lets the deadline signal through: looked at with pthread_sigmask at its
   first run with a watchdog, and again when the signal number differs or the watchdog found
   a thread whose signals never arrived (mask_epoch moved on): a host may block signals in
   its worker threads (for sigwait or signalfd), and a run there must use the count hook. */
static _Thread_local int tls_mask_signo __attribute__((tls_model("initial-exec")));
static _Thread_local unsigned tls_mask_epoch __attribute__((tls_model("initial-exec")));
static _Thread_local int tls_mask_blocked __attribute__((tls_model("initial-exec")));
static _Atomic unsigned mask_epoch = 1;
static _Atomic uint64_t next_watch_id = 1;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

int mbxV_watchdog_supported(void) {
#ifdef MBXV_WATCHDOG_TSAN
  return 0;
#else
  return 1;
#endif
}

int mbxV_watchdog_default_signal(void) {
  /* A real-time signal few others use: glibc keeps the first two for itself, and programs
     that take one usually take SIGRTMIN + small numbers. */
  return SIGRTMAX - 5;
}

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  int saved = errno;
  mbxV_watch *w = tls_watch;
  if (w != NULL && si != NULL && si->si_code == SI_QUEUE) {
    uint64_t g = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
    if (g != 0 && g == atomic_load_explicit(&w->generation, memory_order_relaxed)) {
      atomic_store_explicit(&w->seen, g, memory_order_relaxed);
      if (!atomic_load_explicit(&w->in_host, memory_order_relaxed)) mbxV_budget_on_signal(w->vm);
    }
  }
  errno = saved;
}

static int handler_ours(int signo) {
  struct sigaction sa;
  if (sigaction(signo, NULL, &sa) != 0) return 0;
  return (sa.sa_flags & SA_SIGINFO) && sa.sa_sigaction == on_signal;
}

static void after_fork_child(void) {
  atomic_fetch_add(&fork_epoch, 1);
  tls_tid = 0;
  tls_watch = NULL;
}

static void register_atfork(void) {
  pthread_atfork(NULL, NULL, after_fork_child);
}

/* Install our handler for signo unless someone else holds it. Returns 0 or a reason. */
static const char *install(int signo) {
  const char *why = NULL;
  pthread_mutex_lock(&install_lock);
  struct sigaction old;
  if (sigaction(signo, NULL, &old) != 0) {
    why = "sigaction refused the signal";
  } else if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction == on_signal) {
    /* Ours already (another runtime). */
  } else if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL) != 0) why = "sigaction refused the signal";
  } else {
    why = "the process already has a handler for it (or ignores it)";
  }
  pthread_mutex_unlock(&install_lock);
  return why;
}

mbxV_watchdog *mbxV_watchdog_new(int signo, char *why, size_t why_size) {
  const char *bad = NULL;
  if (!mbxV_watchdog_supported()) {
    bad = "this build runs under ThreadSanitizer, which defers signal handlers";
  } else if (signo != SIGUSR1 && signo != SIGUSR2 && (signo < SIGRTMIN || signo > SIGRTMAX)) {
    bad = "it is not SIGUSR1, SIGUSR2 or a real-time signal";
  } else {
    sigset_t mask;
    if (pthread_sigmask(SIG_BLOCK, NULL, &mask) == 0 && sigismember(&mask, signo) == 1)
      bad = "the calling thread blocks it";
    else
      bad = install(signo);
  }
  mbxV_watchdog *d = bad ? NULL : calloc(1, sizeof *d);
  if (bad == NULL && d == NULL) bad = "out of memory";
  if (bad) {
    if (why && why_size) snprintf(why, why_size, "signal %d: %s", signo, bad);
    return NULL;
  }
  pthread_once(&atfork_once, register_atfork);
  d->signo = signo;
  d->pid = getpid();
  d->epoch = atomic_load(&fork_epoch);
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->wake, NULL);
  return d;
}

mbxV_watchdog *mbxV_watchdog_new_external(void) {
  if (!mbxV_watchdog_supported()) return NULL;
  mbxV_watchdog *d = calloc(1, sizeof *d);
  if (d == NULL) return NULL;
  pthread_once(&atfork_once, register_atfork);
  d->external = 1;
  d->pid = getpid();
  d->epoch = atomic_load(&fork_epoch);
  pthread_mutex_init(&d->lock, NULL);
  pthread_cond_init(&d->wake, NULL);
  return d;
}

/* Async-signal-safe: the handler's work for the run on this thread, whoever sent the signal.
   No generation to check: a signal that is stale, early or from anyone else only makes
   mbxV_budget_on_signal look at the run's own deadline and interrupt flag, which it does
   before it trips anything. */
void mbxV_watch_signal_here(void) {
  int saved = errno;
  mbxV_watch *w = tls_watch;
  if (w != NULL && atomic_load_explicit(&w->generation, memory_order_relaxed) != 0 &&
      !atomic_load_explicit(&w->in_host, memory_order_relaxed))
    mbxV_budget_on_signal(w->vm);
  errno = saved;
}

int mbxV_watchdog_signal(const mbxV_watchdog *d) {
  return d ? d->signo : 0;
}

int mbxV_watchdog_usable(const mbxV_watchdog *d) {
  return d != NULL && !atomic_load_explicit(&d->lost, memory_order_relaxed) &&
         d->epoch == atomic_load_explicit(&fork_epoch, memory_order_relaxed);
}

static void send_signal(mbxV_watchdog *d, int tid, uint64_t g) {
  siginfo_t si;
  memset(&si, 0, sizeof si);
  si.si_signo = d->signo;
  si.si_code = SI_QUEUE;
  si.si_pid = d->pid;
  si.si_uid = getuid();
  si.si_value.sival_ptr = (void *)(uintptr_t)g;
  /* To the thread, by kernel id: a thread that exited meanwhile gives ESRCH, a reused id
     gets a signal whose generation its handler does not know. */
  (void)syscall(SYS_rt_tgsigqueueinfo, d->pid, tid, d->signo, &si);
}

static void unlink_watch(mbxV_watchdog *d, mbxV_watch *w) {
  if (w->prev)
    w->prev->next = w->next;
  else
    d->head = w->next;
  if (w->next) w->next->prev = w->prev;
  w->prev = w->next = NULL;
  w->linked = 0;
}

/* Lock held. Out of the list unless a run began meanwhile: listed goes to 0 before the
   generation is looked at, and a run stores its generation before it looks at listed (both
   sequentially consistent), so either this sees the run or the run sees 0 and lists itself
   again (it waits for the lock, then links the watch if this unlinked it). */
static void evict(mbxV_watchdog *d, mbxV_watch *w) {
  int one = 1;
  if (!atomic_compare_exchange_strong(&w->listed, &one, 0)) return;
  if (atomic_load(&w->generation) != 0) {
    atomic_store(&w->listed, 1);
    return;
  }
  unlink_watch(d, w);
  w->idle_ns = 0;
}

/* One look at every listed watch (lock held): signal the overdue ones, drop the long idle.
   Returns whether any run is active. */
static int scan(mbxV_watchdog *d) {
  int active = 0;
  uint64_t now = mbxV_now_coarse_ns();
  /* The handler, looked at while runs go on (not only before a signal): a run that ends by a
     metered call's own clock check never needs a signal, and the host's replacement must
     still be noticed before the next run relies on it. */
  if (d->head != NULL && now - d->checked_ns >= MBXV_WATCHDOG_CHECK_NS) {
    d->checked_ns = now;
    if (!handler_ours(d->signo)) {
      atomic_store(&d->lost, 1);
      for (mbxV_watch *w = d->head; w != NULL; w = w->next)
        atomic_store(&w->fallback, 1);
    }
  }
  for (mbxV_watch *w = d->head, *next; w != NULL; w = next) {
    next = w->next;
    uint64_t g = atomic_load(&w->generation);
    if (g == 0) {
      if (w->idle_ns == 0)
        w->idle_ns = now ? now : 1;
      else if (now - w->idle_ns >= MBXV_WATCHDOG_EVICT_NS)
        evict(d, w);
      continue;
    }
    w->idle_ns = 0;
    active = 1;
    if (atomic_load_explicit(&w->in_host, memory_order_acquire) ||
        atomic_load_explicit(&w->acked, memory_order_relaxed) == g)
      continue;
    uint64_t deadline = atomic_load_explicit(&w->deadline_ns, memory_order_relaxed);
    int due = (deadline != 0 && now >= deadline) ||
              atomic_load_explicit(&w->vm->budget.interrupt, memory_order_relaxed);
    if (!due) continue;
    if (w->sent_gen != g) {
      w->sent_gen = g;
      w->sent = 0;
    } else if (now - w->sent_ns < MBXV_WATCHDOG_POLL_NS) {
      continue;
    } else if (w->sent >= MBXV_WATCHDOG_MAX_UNSEEN &&
               atomic_load_explicit(&w->seen, memory_order_relaxed) != g) {
      /* The handler never ran: the thread blocks the signal (it started to after its mask
         was looked at). This run falls back at its next metered call; every thread looks
         at its mask again before its next run. Other threads keep the signal path. */
      atomic_store(&w->fallback, 1);
      atomic_fetch_add(&mask_epoch, 1);
      continue;
    }
    if (!handler_ours(d->signo)) {
      /* The host took the signal: never send it into their handler. */
      atomic_store(&d->lost, 1);
      atomic_store(&w->fallback, 1);
      continue;
    }
    send_signal(d, atomic_load_explicit(&w->tid, memory_order_relaxed), g);
    w->sent_ns = now;
    w->sent++;
  }
  return active;
}

static void *watchdog_main(void *arg) {
  mbxV_watchdog *d = arg;
  unsigned idle = 0;
  pthread_mutex_lock(&d->lock);
  while (!d->stop) {
    if (scan(d)) {
      idle = 0;
    } else if (++idle >= MBXV_WATCHDOG_IDLE_POLLS) {
      /* Announce the sleep, then look once more: a run that armed before seeing the flag is
         found by this scan, one that armed after it wakes us (both sides sequentially
         consistent), and it takes the lock to do so, so it cannot signal before we wait. */
      atomic_store(&d->sleeping, 1);
      if (!scan(d) && !d->stop) pthread_cond_wait(&d->wake, &d->lock);
      atomic_store(&d->sleeping, 0);
      idle = 0;
      continue;
    }
    pthread_mutex_unlock(&d->lock);
    struct timespec ts = {0, MBXV_WATCHDOG_POLL_NS};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&d->lock);
  }
  pthread_mutex_unlock(&d->lock);
  return NULL;
}

/* Lock held. The thread blocks every signal: the deadline signal must only ever reach VM
   threads, and the host's signals are not ours to take. */
static int start_thread(mbxV_watchdog *d) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&d->thread, NULL, watchdog_main, d);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) return 0;
  atomic_store(&d->started, 1);
  return 1;
}

void mbxV_watchdog_free(mbxV_watchdog *d) {
  if (d == NULL) return;
  if (d->epoch != atomic_load(&fork_epoch)) return; /* a child: the thread is not here */
  pthread_mutex_lock(&d->lock);
  d->stop = 1;
  pthread_cond_signal(&d->wake);
  pthread_mutex_unlock(&d->lock);
  if (atomic_load(&d->started)) pthread_join(d->thread, NULL);
  pthread_cond_destroy(&d->wake);
  pthread_mutex_destroy(&d->lock);
  free(d);
}

/* Watch ids a thread takes from next_watch_id at once: one shared write per this many
   sandboxes, not one per sandbox (issue 10, 2-thread throughput). Unique still: every batch is
   a range no other thread gets. */
#define WATCH_ID_BATCH 64
static _Thread_local uint64_t id_next, id_end;

void mbxV_watch_init(mbxV_watch *w, mbxV_watchdog *d, struct mbxV_vm *vm) {
  memset(w, 0, sizeof *w);
  w->dog = d;
  w->vm = vm;
  if (id_next == id_end) {
    id_next = atomic_fetch_add_explicit(&next_watch_id, WATCH_ID_BATCH, memory_order_relaxed);
    id_end = id_next + WATCH_ID_BATCH;
  }
  w->id = id_next++;
}

void mbxV_watch_fini(mbxV_watch *w) {
  mbxV_watchdog *d = w->dog;
  if (d == NULL) return;
  /* Never listed: the watchdog thread never saw it (only list() links a watch, and it sets
     ever_listed first, on the thread that owns the sandbox). */
  /* In a forked child the lock may have been held by the parent's watchdog thread. */
  if (w->ever_listed && d->epoch == atomic_load(&fork_epoch)) {
    pthread_mutex_lock(&d->lock);
    if (w->linked) unlink_watch(d, w);
    pthread_mutex_unlock(&d->lock);
  }
  atomic_store(&w->listed, 0);
}

/* A run of a watch out of the list (its first, or after an eviction): into the list, the
   thread started if it is not yet. */
static int list(mbxV_watch *w) {
  mbxV_watchdog *d = w->dog;
  int ok = 1;
  w->ever_listed = 1;
  pthread_mutex_lock(&d->lock);
  if (!atomic_load(&d->started)) ok = start_thread(d);
  if (ok) {
    if (!w->linked) {
      w->prev = NULL;
      w->next = d->head;
      if (d->head) d->head->prev = w;
      d->head = w;
      w->linked = 1;
    }
    w->idle_ns = 0;
    atomic_store(&w->listed, 1);
  }
  pthread_mutex_unlock(&d->lock);
  if (!ok) atomic_store(&d->lost, 1);
  return ok;
}

int mbxV_watch_begin(mbxV_watch *w, uint64_t deadline_ns) {
  mbxV_watchdog *d = w->dog;
  if (!mbxV_watchdog_usable(d)) return 0;
  if (d->external) {
    /* Another process signals: nothing to list, no thread id or mask to learn (the host that
       made this watchdog delivers its signal to this thread). */
    w->depth = 0;
    w->outer = tls_watch;
    atomic_store_explicit(&w->deadline_ns, deadline_ns, memory_order_relaxed);
    atomic_store_explicit(&w->in_host, 0, memory_order_relaxed);
    if (++w->runs == 0) w->runs = 1;
    atomic_store(&w->generation, w->id << 32 | w->runs);
    tls_watch = w;
    return 1;
  }
  if (tls_tid == 0) tls_tid = (int)syscall(SYS_gettid); /* once per thread */
  unsigned epoch = atomic_load_explicit(&mask_epoch, memory_order_relaxed);
  if (tls_mask_signo != d->signo || tls_mask_epoch != epoch) {
    sigset_t mask;
    tls_mask_blocked =
        pthread_sigmask(SIG_BLOCK, NULL, &mask) != 0 || sigismember(&mask, d->signo) != 0;
    tls_mask_signo = d->signo;
    tls_mask_epoch = epoch;
  }
  if (tls_mask_blocked) return 0; /* the count hook: this thread blocks the signal */
  atomic_store_explicit(&w->fallback, 0, memory_order_relaxed);
  w->depth = 0;
  w->outer = tls_watch;
  atomic_store_explicit(&w->tid, tls_tid, memory_order_relaxed);
  atomic_store_explicit(&w->deadline_ns, deadline_ns, memory_order_relaxed);
  atomic_store_explicit(&w->in_host, 0, memory_order_relaxed);
  if (++w->runs == 0) w->runs = 1;
  uint64_t g = w->id << 32 | w->runs;
  /* Sequentially consistent with the watchdog's sleep announcement (watchdog_main) and its
     eviction (evict): the generation first, then listed and sleeping are looked at. */
  atomic_store(&w->generation, g);
  if (!atomic_load(&w->listed) && !list(w)) {
    atomic_store(&w->generation, 0);
    return 0;
  }
  tls_watch = w;
  if (atomic_load(&d->sleeping)) {
    pthread_mutex_lock(&d->lock);
    pthread_cond_signal(&d->wake);
    pthread_mutex_unlock(&d->lock);
  }
  return 1;
}

void mbxV_watch_end(mbxV_watch *w) {
  atomic_store_explicit(&w->generation, 0, memory_order_release);
  atomic_signal_fence(memory_order_seq_cst);
  tls_watch = w->outer;
  w->outer = NULL;
}

void mbxV_watch_push(mbxV_watch *w, lua_State *co) {
  int depth = w->depth;
  if (depth >= 0 && depth < MBXV_WATCH_CHAIN) w->chain[depth] = co;
  atomic_signal_fence(memory_order_seq_cst); /* the entry before the depth that shows it */
  w->depth = depth + 1;
}

void mbxV_watch_pop(mbxV_watch *w) {
  if (w->depth > 0) w->depth = w->depth - 1;
}
