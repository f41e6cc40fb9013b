/* host/worker/zygote.c -- moonbox-worker --zygote: the process that forks every jailed worker,
   their namespaces, and the reaps of the dead ones (host/worker/zygote.h). */
#include "host/worker/zygote.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/worker/jail.h"

/* The fds it was started with (its control socket), and where a worker finds its socket. */
#define ZYGOTE_FD 3
#define WORKER_FD 3

/* ---- the zygote ---- */

static int send_spawned(int zfd, mbxH_wp_writer *w, pid_t pid, int sock, int pidfd,
                        uint32_t prime_id) {
  mbxH_wp_begin(w, MBXH_WP_SPAWNED);
  mbxH_wp_u64(w, (uint64_t)pid);
  mbxH_wp_u32(w, prime_id);
  if (mbxH_wp_finish(w) != 0) return -1;
  struct iovec iov = {w->data, w->len};
  union {
    char buf[CMSG_SPACE(2 * sizeof(int))];
    struct cmsghdr align;
  } u;
  memset(&u, 0, sizeof u);
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
  int fds[2] = {sock, pidfd};
  int nfds = pid > 0 ? 2 : 0;
  if (nfds) {
    msg.msg_control = u.buf;
    msg.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
  }
  ssize_t s;
  do
    s = sendmsg(zfd, &msg, MSG_NOSIGNAL);
  while (s < 0 && errno == EINTR);
  return s == (ssize_t)w->len ? 0 : -1;
}

/* The scheduler slice of a worker, set right after the fork (the zygote keeps the default:
   with a short slice its wake-up at every spawn request preempted the host's thread that sent
   it, for the length of a fork, 150-300 us of each sandbox's creation). A worker
   sleeps until a frame arrives and then computes for microseconds, and with the default slice
   (about 3 ms on 2 CPUs) a worker woken on a busy machine waited for the running task's slice
   to end -- a fresh sandbox's CREATE took 1 ms of wake-up for 30 us of work. A short slice
   (Linux 6.12+, EEVDF: sched_attr.sched_runtime for SCHED_OTHER, no privilege needed) makes
   its deadline early, so it runs soon after it wakes; it gives nothing else up (the nice
   level and policy stay). Older kernels refuse it: nothing changes then. */
#define ZYGOTE_SLICE_NS 100000u
#define ZYGOTE_NICE 5

struct zygote_sched_attr {
  uint32_t size, policy;
  uint64_t flags;
  int32_t nice;
  uint32_t priority;
  uint64_t runtime, deadline, period;
};

static void short_slice(void) {
  struct zygote_sched_attr a = {
      .size = sizeof a, .policy = SCHED_OTHER, .runtime = ZYGOTE_SLICE_NS};
  /* Also out of the zygote's SCHED_BATCH: where the kernel refuses the slice, by policy alone
     (leaving SCHED_BATCH needs no privilege). */
  if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
    struct sched_param sp = {0};
    (void)sched_setscheduler(0, SCHED_OTHER, &sp);
  }
}

/* ---- the workers' namespaces ---- */

/* Set at the zygote's start when the kernel allows them (as root; otherwise inside a user
   namespace of the zygote's own): every worker is forked into one new network namespace with
   nothing in it but a loopback that is down, and one new pid namespace, where no host process
   is visible or can be signalled and the workers' pids say nothing of the host's. Never
   required: without them the workers run in the zygote's (moonbox doctor says which). */
static int g_ns;
/* The pid namespace's init: it only waits (a pid namespace ends when its init does). */
static pid_t g_init;
/* The signal mask the zygote started with (it blocks SIGCHLD): every child's. */
static sigset_t g_child_mask;

/* The parent a forked child sees: the zygote, or none (0) from inside the pid namespace. */
static pid_t child_parent(void) {
  return (g_ns & MBXH_WP_NS_PID) ? 0 : getpid();
}

/* The seccomp program's compilation (mbxH_jail_prepare, 0.4 ms) runs in a thread of the
   zygote's while it makes its namespaces as root (0.7 ms: a network namespace is slow to
   make), joined before anything is forked: every fork is of a single-threaded process. Not
   root, the user namespace needs a single-threaded caller: one after the other. */
static pthread_t g_prepare;
static int g_preparing;

static void *prepare_thread(void *arg) {
  (void)arg;
  (void)mbxH_jail_prepare();
  return NULL;
}

static void prepare_start(void) {
  g_preparing = geteuid() == 0 && pthread_create(&g_prepare, NULL, prepare_thread, NULL) == 0;
}

/* The compiled program is there (or never will be: workers then compile their own). */
static void prepare_finish(void) {
  static int done;
  if (done) return;
  if (g_preparing)
    pthread_join(g_prepare, NULL);
  else
    (void)mbxH_jail_prepare();
  g_preparing = 0;
  done = 1;
}

static void enter_namespaces(void) {
  int flags = CLONE_NEWNET | CLONE_NEWPID;
  if (geteuid() == 0) {
    if (unshare(flags) != 0) return;
  } else {
    /* Not root: one user namespace for the zygote and every worker it forks, made here once
       (host/worker/jail.c), with the network and pid namespaces in the same call where the kernel
       allows, else alone. */
    int made = mbxH_jail_user_namespace(flags);
    if (made == -1) {
      flags = 0;
      made = mbxH_jail_user_namespace(0);
    }
    if (made == -2) _exit(6); /* half made: no worker from this zygote */
    if (made != 0 || flags == 0) return;
  }
  g_ns = MBXH_WP_NS_NET | MBXH_WP_NS_PID;
  /* The namespace's first process is its init. */
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) _exit(6);
  prepare_finish();
  pid_t pid = fork();
  if (pid == 0) {
    if (dup2(sv[1], WORKER_FD) != WORKER_FD || mbxH_jail_process(WORKER_FD, 0) != 0 ||
        mbxH_jail_init_filter() < 0)
      _exit(5);
    for (;;)
      pause();
  }
  close(sv[0]);
  close(sv[1]);
  if (pid < 0) _exit(6);
  g_init = pid;
}

/* Whether the pid namespace is still there to fork into (its init was not killed). */
static int namespace_alive(void) {
  if (g_init <= 0) return 1;
  int st;
  return waitpid(g_init, &st, WNOHANG) == 0;
}

static uint64_t monotonic_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* MBXH_WP_PROBE: a child goes through a worker's jail and exits with the bits it applied. */
static int probe(int zfd, mbxH_wp_writer *w) {
  int sv[2];
  uint32_t bits = (uint32_t)g_ns;
  uint64_t took_ns = 0;
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0) {
    pid_t parent = child_parent();
    uint64_t t0 = monotonic_ns();
    pid_t pid = fork();
    if (pid == 0) {
      char why[256];
      (void)sigprocmask(SIG_SETMASK, &g_child_mask, NULL);
      if (dup2(sv[1], WORKER_FD) != WORKER_FD || mbxH_jail_process(WORKER_FD, parent) != 0)
        _exit(0x40 | mbxH_jail_applied());
      (void)mbxH_jail_seccomp(why, sizeof why);
      _exit(mbxH_jail_applied());
    }
    close(sv[0]);
    close(sv[1]);
    int st;
    if (pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && !(WEXITSTATUS(st) & 0x40))
      bits |= (uint32_t)WEXITSTATUS(st);
    took_ns = monotonic_ns() - t0;
  }
  mbxH_wp_begin(w, MBXH_WP_PROBED);
  mbxH_wp_u32(w, bits);
  /* What a worker's jail costs here (doctor): a fork, the jail, the filter's load, an exit. */
  mbxH_wp_u32(w, took_ns / 1000 > UINT32_MAX ? UINT32_MAX : (uint32_t)(took_ns / 1000));
  return mbxH_worker_send_frame(zfd, w);
}

/* Fork one worker and hand its socket to the parent. prime (prime_len bytes, 0: none) is a
   CREATE the parent sent for it: written into the socket first, so the worker builds that
   sandbox's state as soon as it is jailed (the SPAWNED names prime_id). */
static void spawn_one(int zfd, mbxH_wp_writer *w, uint32_t prime_id, const char *prime,
                      size_t prime_len) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    send_spawned(zfd, w, -errno, -1, -1, prime_id);
    return;
  }
  pid_t parent = child_parent();
  pid_t pid = fork();
  if (pid == 0) {
    /* The worker: only its end of the pair, at WORKER_FD, then the first steps of the jail. */
    if (dup2(sv[1], WORKER_FD) != WORKER_FD) _exit(4);
    (void)sigprocmask(SIG_SETMASK, &g_child_mask, NULL);
    (void)setpriority(PRIO_PROCESS, 0, 0); /* the zygote's ZYGOTE_NICE, undone as root */
    short_slice();
    if (mbxH_jail_process(WORKER_FD, parent) != 0) _exit(5);
    mbxH_wp_writer_free(w);
    mbxH_worker_serve(WORKER_FD);
    _exit(0);
  }
  int err = errno;
  close(sv[1]);
  if (pid < 0) {
    close(sv[0]);
    send_spawned(zfd, w, -err, -1, -1, prime_id);
    return;
  }
  int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
  /* The socket's buffer is empty and the frame small (the parent bounds it): one send. */
  ssize_t sent = prime_len ? send(sv[0], prime, prime_len, MSG_DONTWAIT | MSG_NOSIGNAL) : 0;
  if (pidfd < 0 || sent != (ssize_t)prime_len) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(sv[0]);
    if (pidfd >= 0) close(pidfd);
    send_spawned(zfd, w, pidfd < 0 ? -ENOSYS : -EAGAIN, -1, -1, prime_id);
    return;
  }
  if (send_spawned(zfd, w, pid, sv[0], pidfd, prime_id) != 0) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
  }
  close(sv[0]);
  close(pidfd);
}

/* Every way out of the zygote ends the pid namespace's init first (and with it any worker
   left in the namespace): an init outlives its zygote otherwise, holding both namespaces. */
static int zygote_end(int code) {
  if (g_init > 0) kill(g_init, SIGKILL);
  return code;
}

/* ---- reaps ---- */

/* A REAP's fields. prime (prime_len bytes) points into the frame it came in. */
typedef struct reap_order {
  pid_t pid;
  uint32_t refill, prime_id;
  const char *prime;
  size_t prime_len;
} reap_order;

static int reap_decode(const unsigned char *p, size_t n, reap_order *o) {
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, p, n);
  o->pid = (pid_t)mbxH_wp_get_u64(&r);
  o->refill = mbxH_wp_get_u32(&r);
  o->prime_id = mbxH_wp_get_u32(&r);
  o->prime_len = mbxH_wp_get_bytes(&r, MBXH_WP_PRIME_MAX, &o->prime);
  if (mbxH_wp_end(&r) != 0 || o->pid <= 0 || o->refill > 64 ||
      (o->prime_len > 0) != (o->prime_id != 0) || (o->prime_len > 0 && o->refill == 0))
    return -1;
  return 0;
}

/* The parent closed the control socket (it is freeing the runtime, or re-executing this
   zygote): nothing is answered or forked any more, what is left is only reaped. */
static int g_parent_gone;

static void send_reaped(int zfd, mbxH_wp_writer *w, pid_t pid, int got, int st) {
  if (g_parent_gone) return;
  mbxH_wp_begin(w, MBXH_WP_REAPED);
  mbxH_wp_u64(w, (uint64_t)pid);
  mbxH_wp_u64(w, got ? (uint64_t)(unsigned)st : UINT64_MAX);
  if (mbxH_worker_send_frame(zfd, w) != 0) g_parent_gone = 1;
}

/* A REAP's refill: fork o->refill workers, the first of them written the CREATE the parent
   sent with it (that sandbox's own seed and address key), which is wiped (wipe, wipe_len: the
   frame that held it) before anything else is forked: every later worker inherits this
   process's memory. */
static int refill(int zfd, mbxH_wp_writer *w, const reap_order *o, void *wipe, size_t wipe_len) {
  if (g_parent_gone) {
    if (wipe) explicit_bzero(wipe, wipe_len);
    return 0;
  }
  if (o->refill && !namespace_alive()) return -1;
  for (uint32_t i = 0; i < o->refill; i++) {
    spawn_one(zfd, w, i == 0 ? o->prime_id : 0, i == 0 ? o->prime : NULL,
              i == 0 ? o->prime_len : 0);
    if (i == 0) explicit_bzero(wipe, wipe_len);
  }
  if (o->refill == 0 && wipe) explicit_bzero(wipe, wipe_len);
  return 0;
}

/* Workers whose REAP came through the mailbox before they had died: pids only (their
   refills were forked when the REAP was read). Retried at every wake-up; the parent kills a
   worker only after its REAP is in the mailbox, so its SIGCHLD comes after it. */
typedef struct reap_list {
  pid_t *pid;
  size_t n, cap;
} reap_list;
/* More workers killed and not yet dead than the parent can hold: a broken parent. */
#define REAP_PENDING_MAX 65536

static int reap_later(reap_list *l, pid_t pid) {
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 16;
    if (cap > REAP_PENDING_MAX) return -1;
    pid_t *p = realloc(l->pid, cap * sizeof *p);
    if (p == NULL) return -1;
    l->pid = p;
    l->cap = cap;
  }
  l->pid[l->n++] = pid;
  return 0;
}

/* Answer the REAP of every listed worker that has died (block: wait for each). */
static int reap_listed(int zfd, mbxH_wp_writer *w, reap_list *l, int block) {
  for (size_t i = 0; i < l->n;) {
    int st = 0;
    pid_t got;
    do
      got = waitpid(l->pid[i], &st, block ? 0 : WNOHANG);
    while (got < 0 && errno == EINTR);
    if (got == 0) {
      i++;
      continue;
    }
    send_reaped(zfd, w, l->pid[i], got == l->pid[i], st);
    l->pid[i] = l->pid[--l->n];
  }
  return 0;
}

/* The mailbox (MAIL_FD): REAP frames the parent sends where it does not wait for the answer,
   one per message of a SOCK_SEQPACKET pair. The zygote never waits on it: a send there wakes
   nobody (a wake-up of the zygote on an idle CPU cost the freeing host thread 19 us). It is
   read at every wake-up instead, which the freed worker's SIGCHLD makes sure of: the parent
   kills the worker after its REAP is sent. */
#define MAIL_FD 4
static int g_mail = MAIL_FD; /* -1: closed (no signalfd) */

static int mail_drain(int zfd, mbxH_wp_writer *w, reap_list *pending) {
  static unsigned char msg[MBXH_WP_HEADER + MBXH_WP_PRIME_MAX + 64];
  for (;;) {
    ssize_t n;
    if (g_mail < 0) return 0;
    do
      n = recv(g_mail, msg, sizeof msg, MSG_DONTWAIT | MSG_TRUNC);
    while (n < 0 && errno == EINTR);
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
    if (n == 0) return 0; /* the parent is gone: the control socket says so */
    mbxH_wp_type type;
    uint32_t len;
    reap_order o;
    if ((size_t)n > sizeof msg || n < MBXH_WP_HEADER ||
        mbxH_wp_header(msg, sizeof msg - MBXH_WP_HEADER, &type, &len, NULL, 0) != 0 ||
        type != MBXH_WP_REAP || len != (size_t)n - MBXH_WP_HEADER ||
        reap_decode(msg + MBXH_WP_HEADER, len, &o) != 0)
      return -1;
    if (refill(zfd, w, &o, msg, (size_t)n) != 0 || reap_later(pending, o.pid) != 0) return -1;
  }
}

int mbxH_zygote(void) {
  int zfd = ZYGOTE_FD;
  mbxH_wp_writer w = {0};
  unsigned char *buf = NULL;
  size_t cap = 0, len = 0;
  reap_list pending = {0};
  signal(SIGPIPE, SIG_IGN);
  /* The zygote forks in the background: SCHED_BATCH (no wake-up preemption) and a lower
     priority keep its wake-up at a reap or spawn request from preempting the host thread that
     sent it (a freed sandbox waited 12 us median for that switch at nice 5 alone, and a new
     one for a fork). Its workers go back to SCHED_OTHER (short_slice) and to the default
     priority where they may (as root); a non-root host's workers stay at nice 5, below its
     own threads. */
  struct sched_param batch = {0};
  (void)sched_setscheduler(0, SCHED_BATCH, &batch);
  setpriority(PRIO_PROCESS, 0, ZYGOTE_NICE);
  prepare_start();
  enter_namespaces();
  prepare_finish(); /* where enter_namespaces forked nothing */
  /* A dead worker wakes the zygote through a signalfd (SIGCHLD blocked here, unblocked again
     in every child it forks). Without one, the mailbox is read at every control frame only:
     the parent then sends its reaps on the control socket (it sees the mailbox closed). */
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  int sfd = sigprocmask(SIG_BLOCK, &chld, &g_child_mask) == 0
                ? signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC)
                : -1;
  if (sfd < 0) {
    close(MAIL_FD);
    g_mail = -1;
  }
  /* Work every worker would repeat, done once (failures only make workers slower): the
     seccomp program (above) and a template state. */
  mbxH_worker_prewarm();
  for (;;) {
    struct pollfd pf[2] = {{zfd, POLLIN, 0}, {sfd, POLLIN, 0}};
    if (poll(pf, sfd >= 0 ? 2 : 1, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pf[0].revents & (POLLHUP | POLLERR)) g_parent_gone = 1;
    if (sfd >= 0 && (pf[1].revents & POLLIN)) {
      struct signalfd_siginfo si;
      while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
      }
    }
    /* The mailbox first, at every wake-up: its refills are forked now, and a mailbox
       REAP's prime stays in the kernel's buffer until read here (and is wiped right after
       its worker is forked), so no fork for a control frame inherits it. */
    if (mail_drain(zfd, &w, &pending) != 0 || reap_listed(zfd, &w, &pending, 0) != 0)
      return zygote_end(1);
    if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    int t = mbxH_worker_recv_frame(zfd, &buf, &cap, &len);
    if (t < 0) break; /* the parent went away; workers die with us (PDEATHSIG) */
    mbxH_wp_reader r;
    mbxH_wp_reader_init(&r, buf, len);
    if (t == MBXH_WP_SPAWN) {
      uint32_t count = mbxH_wp_get_u32(&r);
      if (mbxH_wp_end(&r) != 0 || count > 64) return zygote_end(1);
      /* Its init killed (from outside: nothing inside may signal it), the pid namespace took
         every worker with it and cannot be forked into: the parent starts a new zygote. A
         count of 0 only wakes the zygote to read its mailbox. */
      if (count && !namespace_alive()) return zygote_end(1);
      for (uint32_t i = 0; i < count && !g_parent_gone; i++)
        spawn_one(zfd, &w, 0, NULL, 0);
    } else if (t == MBXH_WP_PROBE) {
      if (mbxH_wp_end(&r) != 0 || probe(zfd, &w) != 0) return zygote_end(1);
    } else if (t == MBXH_WP_REAP) {
      /* On the control socket the parent waits for the answer (or could not use the
         mailbox): the worker is killed already, so the wait is short. */
      reap_order o;
      if (reap_decode(buf, len, &o) != 0) return zygote_end(1);
      int st = 0;
      pid_t got;
      do
        got = waitpid(o.pid, &st, 0);
      while (got < 0 && errno == EINTR);
      send_reaped(zfd, &w, o.pid, got == o.pid, st);
      /* The parent's refill of the warm pool rides with the reap of the worker it replaces. */
      if (refill(zfd, &w, &o, buf, len) != 0) return zygote_end(1);
    } else {
      return zygote_end(1);
    }
  }
  /* The parent closed the control socket: what it sent to the mailbox is served first. */
  g_parent_gone = 1;
  if (sfd >= 0 && mail_drain(zfd, &w, &pending) == 0 && reap_listed(zfd, &w, &pending, 0) == 0) {
    /* Killed by the parent, they die at once; a worker it failed to kill is this zygote's
       own unreaped child (its pid cannot be another process's): killed here. */
    for (size_t i = 0; i < pending.n; i++)
      kill(pending.pid[i], SIGKILL);
    (void)reap_listed(zfd, &w, &pending, 1);
  }
  return zygote_end(0);
}
