/* host/backend/worker.c -- the worker backend: each sandbox's vm runs in a jailed moonbox-worker
   process; the parent keeps every capability and trusts nothing the worker sends. */

/*
** One sandbox, one worker. The runtime's pool (mbxH_wpool) owns the zygote, a single-threaded
** moonbox-worker started with posix_spawn (this process is never forked: the host may have
** threads), and a few warm workers the zygote forked ahead of demand; spawn requests are
** pipelined (the replies are read at the next take), so taking a warm worker is one recvmsg.
**
** The parent's half of a sandbox is the in-process backend's without the vm: the port
** (capabilities/port_local.c, wrapped by the record layer for deterministic policies) is
** served here, so files, host functions and natives keep their checks and the worker never
** holds a host fd. A call to the worker (run, resume, reset, ...) sends one frame and then
** serves the worker's port calls until its answer arrives. Everything read is checked
** (host/backend/worker_proto.c); anything wrong -- EOF, a malformed or oversized frame, a frame of the
** wrong type, no answer by the backstop -- ends the worker with SIGKILL (through its pidfd: no
** pid reuse race), has the zygote reap it for the reason, and turns the run into
** internal_error with that reason. The sandbox is then poisoned (host/sandbox.c), and its reset
** takes a fresh worker.
**
** The backstop of a run is 2x its time limit plus a grace (a default without a time limit): a C
** call that never returns cannot be pre-empted in the worker either, so this is what ends it.
** Time the parent spends serving a port call is host time and moves the backstop on.
**
** Crashes are rate-limited: after one, the zygote is re-executed (fresh ASLR for the next
** workers, no sibling shares a crashed worker's layout) at most once a second, and a burst of
** crashes slows worker creation down (crash-and-retry probing gets slow). The old zygote is
** retired, not stopped, while live sandboxes' workers are its children (it is their pid
** namespace's init: its exit would end them all), and stopped when the last is freed.
*/
#include "host/backend/worker.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <lua.h>

#include "capabilities/port_local.h"
#include "capabilities/port_record.h"
#include "capabilities/port_serve.h"
#include "common/error.h"
#include "host/backend/backend.h"
#include "host/result.h"
#include "host/runtime.h"
#include "host/backend/worker_proto.h"
#include "host/backend/worker_spin.h"
#include "vm/arena.h"

#define WARM_MAX 8
/* Workers a one-tenant runtime keeps from freed sandboxes (more are ended). */
#define KEPT_MAX 8
/* Crashes within this window slow worker creation down. */
#define CRASH_WINDOW_NS 1000000000ull
#define CRASH_BURST 4
#define CRASH_PENALTY_NS 100000000ull
#define ZYGOTE_REEXEC_MIN_NS 1000000000ull
/* The zygote answers a spawn or reap in far less; past this it is broken. */
#define ZYGOTE_TIMEOUT_MS 10000
/* The zygote answers within ZYGOTE_TIMEOUT_MS of now; nothing interrupts it. */
#define ZYGOTE_DEADLINE                                                                        \
  (&(io_deadline){now_ns() + (uint64_t)ZYGOTE_TIMEOUT_MS * 1000000u, NULL, 0, NULL})

typedef struct wproc {
  pid_t pid;
  int sock;  /* -1: none */
  int pidfd;
  /* A worker kept for the next sandbox of a one-tenant runtime (MBX_CAP_ONE_TENANT): the
     memory limit its address-space limit was set for (only a sandbox of the same limit may
     take it) and the runs it has served. */
  uint64_t memory_limit;
  unsigned runs;
  uint32_t zid; /* the zygote that forked it (zygote.id) */
  /* A warm worker primed for a policy: sent a sandbox's CREATE ahead of demand, it builds the
     state while it waits. primed holds that CREATE's frame but for its last MBXH_CREATE_OWN
     bytes (what differs between two sandboxes of one policy: the address key and the first
     seed), primed_key its address key; NULL when it was sent nothing. */
  unsigned char *primed;
  size_t primed_len;
  uint64_t primed_key;
} wproc;
/* The tail of a CREATE frame that is the sandbox's own: whether it was sent ahead (a prime),
   its address key and its first seed. */
#define MBXH_CREATE_OWN (1 + 3 * sizeof(uint64_t))

/* A zygote process. The pool's current one forks new workers. After a crash it is re-executed
   (fresh ASLR): the old one is retired, not stopped, while workers it forked are still alive,
   since it is the init of their pid namespace and its exit would end every one of them (a
   guest crashing its own worker would end its neighbours' sandboxes). A retired zygote is
   stopped once the last of them is freed. */
#define ZYGOTE_IN_CAP 2048
/* REAPED answers left unread in the zygote's socket before a free reads them (else a take
   does, with the workers it forked): reading each as it comes cost every free a read. */
#define REAP_BACKLOG 32
/* Answers a zygote may owe at most (owed_max: fewer where its socket's send buffer is
   small), each charged this much of that buffer (a small frame's skb; SPAWNED's fds are not
   charged there). Past them its writes to the parent could block, and a zygote blocked
   writing reads no frame while the parent, blocked writing one, reads no answer: 1,000 frees
   in a row hung for ZYGOTE_TIMEOUT_MS. */
#define OWED_MAX 128
#define OWED_CHARGE 1024

typedef struct zygote {
  pid_t pid; /* 0: not running */
  int sock;
  /* Its mailbox (a SOCK_SEQPACKET pair; -1: none): REAPs nobody waits for, sent without
     waking it (mail_send); mail_unread counts those sent since the last control frame. */
  int mail;
  unsigned mail_unread;
  /* It did not take or answer a control frame within ZYGOTE_TIMEOUT_MS (stopped, frozen,
     starved, or broken): never waited for again, killed when it is stopped (review 12, R5:
     else every later free of a burst waited 10 s under the pool's lock). */
  int broken;
  /* What it sent that is read and not yet acted on (zygote_fill). Its frames are small and
     come in runs (a reap's answer, the workers it forked), so one recvmsg takes all there is:
     a unix stream read stops after the message that carries fds, so fds (in_fds) come in the
     read where their SPAWNED frame starts, and belong to the first such frame parsed. */
  unsigned char in[ZYGOTE_IN_CAP];
  size_t in_off, in_len;
  int in_fds[2];
  int in_nfds;
  uint32_t id;
  int requested;     /* SPAWNED replies still to read */
  int reaps_pending; /* REAPED replies nobody waits for */
  int owed_max;      /* requested + reaps_pending stays below this (zygote_settle) */
  unsigned workers;  /* its workers the parent holds (warm, handed out or kept) */
  uint64_t started;
  /* The CREATE it was asked to write into the next worker it forks (proc_forget): what the
     worker's wproc.primed becomes when its SPAWNED names prime_id. */
  uint32_t prime_id;
  int prime_pending;
  unsigned char *prime_fp;
  size_t prime_fp_len;
  uint64_t prime_key;
} zygote;
/* Retired zygotes at most; while that many wait for their workers, a crash does not
   re-execute the current one (it is re-executed once one of them is gone). */
#define RETIRED_MAX 4

struct mbxH_wpool {
  pthread_mutex_t mu;
  char path[PATH_MAX];
  zygote z; /* the current one */
  zygote retired[RETIRED_MAX];
  int nretired;
  uint32_t next_zid;
  wproc warm[WARM_MAX];
  int nwarm;
  wproc kept[KEPT_MAX]; /* one-tenant runtimes: workers of freed sandboxes, for reuse */
  int nkept;
  _Atomic unsigned live;
  uint64_t crash_at[CRASH_BURST]; /* the last crashes' times, a ring */
  unsigned crash_next;
  uint64_t penalty_next; /* when the next penalised worker may be given out (pool_take) */
  int zygote_stale; /* a worker crashed: re-exec the zygote when the rate limit allows */
  mbxH_wp_writer w;
  int in_frame; /* inside zygote_frame: no nested read of a zygote's frames */
  uint32_t probed; /* the last MBXH_WP_PROBED */
  uint32_t probed_us; /* ... and how long its child took to fork, jail itself and exit */
  int probe_got;
};

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- sockets with deadlines ---- */

/* A deadline (ns, CLOCK_MONOTONIC) that an interrupt shortens: once *interrupted is set, the
   worker has MBXH_WORKER_GRACE_MS more, whatever the run's own budget (NULL: no interrupt). */
typedef struct io_deadline {
  uint64_t at;
  _Atomic int *interrupted;
  int cut; /* the interrupt was seen and at shortened */
  /* A reply is expected soon (a call to a worker): spin a bounded while before blocking
     (host/backend/worker_spin.h; NULL: block at once, as for the zygote). */
  mbxH_spin *spin;
} io_deadline;

/* Now past d->at: 1, else 0 (applying an interrupt seen since the last look). */
static int io_expired(io_deadline *d) {
  uint64_t now = now_ns();
  if (d->interrupted && !d->cut && atomic_load(d->interrupted)) {
    uint64_t grace = now + (uint64_t)MBXH_WORKER_GRACE_MS * 1000000u;
    if (grace < d->at) d->at = grace;
    d->cut = 1;
  }
  return now >= d->at;
}

/* Wait for fd to be ready for events until d's deadline. 1 ready, 0 timed out, -1 error or
   hang-up with nothing to read. While an interrupt may still come, it sleeps at most 50 ms at
   a time, so a worker that ignores its interrupt signal cannot hold the caller past the
   grace period. */
static int wait_fd(int fd, short events, io_deadline *d) {
  for (;;) {
    if (io_expired(d)) return 0;
    /* The clock read again: past d->at since io_expired's look, d->at - now would wrap to a
       poll of INT_MAX ms (review 13, S1). */
    uint64_t now = now_ns();
    if (now >= d->at) return 0;
    uint64_t ms = (d->at - now + 999999) / 1000000;
    if (d->interrupted && !d->cut && ms > 50) ms = 50;
    struct pollfd p = {fd, events, 0};
    int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) continue;
    if (p.revents & events) return 1;
    return -1;
  }
}

typedef enum io_result { IO_OK = 0, IO_TIMEOUT, IO_CLOSED } io_result;

static io_result write_all(int fd, const void *p, size_t n, io_deadline *d) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = send(fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      b += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int r = wait_fd(fd, POLLOUT, d);
      if (r == 0) return IO_TIMEOUT;
      if (r < 0) return IO_CLOSED;
      continue;
    }
    return IO_CLOSED;
  }
  return IO_OK;
}

/* At least min bytes into p and at most max (*got: how many). wait_first: wait before the
   first read (the answer needs the peer's work: a read now would only fail). */
static io_result read_some(int fd, void *p, size_t min, size_t max, io_deadline *d,
                           int wait_first, size_t *got) {
  unsigned char *b = p;
  *got = 0;
  if (wait_first && !d->spin) {
    int w = wait_fd(fd, POLLIN, d);
    if (w == 0) return IO_TIMEOUT;
    if (w < 0) return IO_CLOSED;
  }
  while (*got < min) {
    ssize_t r = recv(fd, b + *got, max - *got, MSG_DONTWAIT);
    if (r > 0) {
      *got += (size_t)r;
      continue;
    }
    if (r == 0) return IO_CLOSED;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      /* Never past the deadline: the spin ends at d->at too, and an interrupt seen since the
         last look is applied first. */
      if (d->spin && !io_expired(d) && mbxH_spin_wait(d->spin, fd, d->at)) continue;
      int w = wait_fd(fd, POLLIN, d);
      if (w == 0) return IO_TIMEOUT;
      if (w < 0) return IO_CLOSED;
      continue;
    }
    return IO_CLOSED;
  }
  return IO_OK;
}

static io_result read_all(int fd, void *p, size_t n, io_deadline *d) {
  size_t got;
  return read_some(fd, p, n, n, d, 0, &got);
}

static int grow(unsigned char **buf, size_t *cap, size_t n) {
  if (n <= *cap) return 0;
  unsigned char *b = realloc(*buf, n);
  if (b == NULL) return -1;
  *buf = b;
  *cap = n;
  return 0;
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* ---- the zygote ---- */

static void prime_forget(zygote *z) {
  free(z->prime_fp);
  z->prime_fp = NULL;
  z->prime_pending = 0;
}

static void zygote_in_reset(zygote *z) {
  for (int i = 0; i < z->in_nfds; i++) close(z->in_fds[i]);
  z->in_nfds = 0;
  z->in_off = z->in_len = 0;
}

static void zygote_stop(zygote *z) {
  prime_forget(z);
  zygote_in_reset(z);
  if (z->pid <= 0) return;
  /* Closing the socket ends it once it has served what is queued (reaps of killed workers,
     in its control socket and its mailbox); one that stopped answering is killed (its pid
     namespace's init dies with it, and every worker left in it). */
  if (z->broken) kill(z->pid, SIGKILL);
  z->broken = 0;
  close_fd(&z->sock);
  close_fd(&z->mail);
  z->mail_unread = 0;
  int st;
  while (waitpid(z->pid, &st, 0) < 0 && errno == EINTR) {
  }
  z->pid = 0;
  z->requested = 0;
  z->reaps_pending = 0;
  z->workers = 0;
}

/* The zygote that forked a worker of this pool: the current one or a retired one; NULL when
   it is gone (its workers went with it). */
static zygote *zygote_of(mbxH_wpool *pool, uint32_t id) {
  if (pool->z.pid > 0 && pool->z.id == id) return &pool->z;
  for (int i = 0; i < pool->nretired; i++)
    if (pool->retired[i].id == id) return &pool->retired[i];
  return NULL;
}

/* Stop the retired zygotes none of whose workers is left. */
static void retired_sweep(mbxH_wpool *pool) {
  for (int i = 0; i < pool->nretired;) {
    if (pool->retired[i].workers > 0) {
      i++;
      continue;
    }
    zygote_stop(&pool->retired[i]);
    pool->retired[i] = pool->retired[--pool->nretired];
  }
}

/* Whether a warm worker is primed already (or one the zygote forks is to be). */
static int warm_primed(const mbxH_wpool *pool) {
  for (int i = 0; i < pool->nwarm; i++)
    if (pool->warm[i].primed) return 1;
  return pool->z.prime_pending;
}

/* SIGKILL through the pidfd. The worker is moved to SCHED_BATCH first (allowed: the parent
   owns it, as root or as its user namespace's owner): woken to die on the CPU it last ran
   on, often the host thread's, a SCHED_OTHER worker preempted that thread for its whole
   exit, 150 us of a free on an idle VM; a batch one exits once the CPU is free. That call
   names a pid, so it is made only while the pidfd says the process is not reaped yet (the
   zygote reaps only on the parent's REAP, sent after this call; the pid could be reused only
   if the zygote died and something else reaped the worker): never on a pid that may be
   another process's (review 11, W2). proc_quiet makes that first step: 1 when the worker
   has exited already (its pidfd is readable), else 0. */
static int proc_quiet(wproc *p) {
  if (p->pidfd < 0 || p->pid <= 0) return 1;
  struct pollfd pf = {p->pidfd, POLLIN, 0};
  if (poll(&pf, 1, 0) != 0) return 1;
  struct sched_param batch = {0};
  (void)sched_setscheduler(p->pid, SCHED_BATCH, &batch);
  return 0;
}

static void proc_sigkill(wproc *p) {
  if (p->pidfd >= 0) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
}

static void proc_kill(wproc *p) {
  (void)proc_quiet(p);
  proc_sigkill(p);
}

/* Close a worker's fds once it is killed; the zygote reaps it (asynchronously when nobody
   needs the reason). */
/* A CREATE offered for the worker forked to replace a freed one: the frame (its last
   MBXH_CREATE_OWN bytes that worker's own) and the address key in it. */
typedef struct prime_offer {
  const mbxH_wp_writer *frame;
  uint64_t key;
} prime_offer;

static void proc_forget(mbxH_wpool *pool, wproc *p, int send_reap, int refill,
                        const prime_offer *prime);
static void proc_forget_as(mbxH_wpool *pool, wproc *p, int send_reap, int refill,
                           const prime_offer *prime, int alive);

static int zygote_start(mbxH_wpool *pool, mbx_error *err) {
  if (access(pool->path, X_OK) != 0) {
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_sandbox_new: the worker %s is not an executable file (%s): install "
                   "moonbox-worker next to the library, or set its path with "
                   "mbx_runtime_set_path(MBX_PATH_WORKER)", pool->path, strerror(errno));
    return -1;
  }
  int sv[2], mv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: socketpair for the worker zygote: %s",
                   strerror(errno));
    return -1;
  }
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, mv) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: socketpair for the worker zygote: %s",
                   strerror(errno));
    close(sv[0]);
    close(sv[1]);
    return -1;
  }
  /* The zygote's end's send buffer bounds the answers it may owe (zygote_settle). */
  int sndbuf = 0;
  socklen_t optlen = sizeof sndbuf;
  if (getsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &sndbuf, &optlen) != 0) sndbuf = 0;
  int owed_max = sndbuf / OWED_CHARGE / 2;
  if (owed_max > OWED_MAX) owed_max = OWED_MAX;
  if (owed_max < 2) owed_max = 2;
  /* The zygote's ends above the fds its file actions write (0, 1, 3, 4), so none clobbers
     another before it is moved: a host with fd 0, 1 or 2 closed gets socketpair fds there. */
  int zsock = fcntl(sv[1], F_DUPFD_CLOEXEC, 5), zmail = fcntl(mv[1], F_DUPFD_CLOEXEC, 5);
  close(sv[1]);
  close(mv[1]);
  if (zsock < 0 || zmail < 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: fds for the worker zygote: %s",
                   strerror(errno));
    if (zsock >= 0) close(zsock);
    if (zmail >= 0) close(zmail);
    close(sv[0]);
    close(mv[0]);
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  /* Only the control socket, as fd 3, and the mailbox, as fd 4; stdio from /dev/null except
     stderr (the zygote runs no guest code; its workers close everything but their own
     socket). */
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  /* A host without a stderr (fd 2 closed, or one of this library's close-on-exec fds) gives
     the zygote /dev/null there: else the zygote's next fd would take 2. */
  int fd2 = fcntl(2, F_GETFD);
  if (fd2 < 0 || (fd2 & FD_CLOEXEC))
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, zsock, 3);
  posix_spawn_file_actions_adddup2(&fa, zmail, 4);
  posix_spawn_file_actions_addclosefrom_np(&fa, 5);
  char *argv[] = {(char *)"moonbox-worker", (char *)"--zygote", NULL};
  char *envp[] = {NULL};
  /* No signal blocked and every disposition the default: the zygote and its workers must not
     inherit the calling host thread's mask (SIGUSR1 blocked there would block every worker's
     interrupt) or a host's SIG_IGN for SIGCHLD (the zygote's children would be reaped
     without a status, a crash reported as lost; review 12, R1). */
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid;
  int rc = posix_spawn(&pid, pool->path, &fa, &attr, argv, envp);
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&fa);
  close(zsock);
  close(zmail);
  if (rc != 0) {
    close(sv[0]);
    close(mv[0]);
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_sandbox_new: cannot start the worker %s: %s (install moonbox-worker "
                   "next to the library, or set its path with mbx_runtime_set_path)",
                   pool->path, strerror(rc));
    return -1;
  }
  pool->z = (zygote){.pid = pid, .sock = sv[0], .mail = mv[0], .id = ++pool->next_zid,
                     .started = now_ns(), .owed_max = owed_max};
  pool->zygote_stale = 0;
  return 0;
}

/* Read what the zygote has sent into z->in (block: wait for it, within ZYGOTE_TIMEOUT_MS).
   0 when something was read, 1 when nothing was there (no block), -1 when the zygote is
   broken or gone. While a SPAWNED frame's fds are held, only the rest of that frame is read
   (the read after it could bring the next one's fds). */
static int zygote_fill(zygote *z, int block) {
  if (z->in_off > 0) {
    memmove(z->in, z->in + z->in_off, z->in_len - z->in_off);
    z->in_len -= z->in_off;
    z->in_off = 0;
  }
  size_t room = sizeof z->in - z->in_len;
  if (z->in_nfds > 0) {
    /* The frame holding them is the last one in the buffer, not complete yet. */
    size_t need = MBXH_WP_HEADER;
    if (z->in_len >= MBXH_WP_HEADER) {
      uint32_t len;
      memcpy(&len, z->in + 4, sizeof len);
      need = MBXH_WP_HEADER + (size_t)len;
    }
    if (need <= z->in_len || need > sizeof z->in) return -1;
    room = need - z->in_len;
  }
  if (room == 0) return -1;
  for (;;) {
    union {
      char buf[CMSG_SPACE(2 * sizeof(int))];
      struct cmsghdr align;
    } u;
    struct iovec iov = {z->in + z->in_len, room};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                         .msg_controllen = sizeof u.buf};
    ssize_t n = recvmsg(z->sock, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    int bad = (msg.msg_flags & MSG_CTRUNC) != 0;
    for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&msg) : NULL; c; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < k; i++) {
        int fd;
        memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        if (z->in_nfds < 2) {
          z->in_fds[z->in_nfds++] = fd;
        } else {
          close(fd);
          bad = 1;
        }
      }
    }
    if (n >= 0 && bad) return -1;
    if (n > 0) {
      z->in_len += (size_t)n;
      return 0;
    }
    if (n == 0) return -1;
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (!block) return 1;
    if (wait_fd(z->sock, POLLIN, ZYGOTE_DEADLINE) != 1) return -1;
  }
}

/* Act on one zygote frame (z->in holds it whole): a SPAWNED worker joins the warm list, a
   REAPED one fills *status when it is want_pid's. 0, or -1 when the zygote is broken. */
static int zygote_frame(mbxH_wpool *pool, zygote *z, pid_t want_pid, int *status, int *got);

/* The next frame there is (block: wait for one). 0 when one was acted on, 1 when none is
   complete (no block), -1 when the zygote is broken. */
static int zygote_next(mbxH_wpool *pool, zygote *z, int block, pid_t want_pid, int *status,
                       int *got) {
  for (;;) {
    size_t have = z->in_len - z->in_off;
    if (have >= MBXH_WP_HEADER) {
      mbxH_wp_type type;
      uint32_t len;
      if (mbxH_wp_header(z->in + z->in_off, 64, &type, &len, NULL, 0) != 0) return -1;
      if (have >= MBXH_WP_HEADER + (size_t)len)
        return zygote_frame(pool, z, want_pid, status, got);
    }
    int r = zygote_fill(z, block);
    if (r != 0) return r;
  }
}

/* One frame, waiting for it. 0, or -1 when the zygote is broken. */
static int zygote_read(mbxH_wpool *pool, zygote *z, pid_t want_pid, int *status, int *got) {
  if (z->broken) return -1;
  if (zygote_next(pool, z, 1, want_pid, status, got) == 0) return 0;
  z->broken = 1;
  return -1;
}

/* Every frame the zygote has sent so far, without waiting (one read per worker forked, and
   none once every answer due is in). 0, or -1. */
static int zygote_drain(mbxH_wpool *pool, zygote *z) {
  int r = 0;
  while ((z->requested > 0 || z->reaps_pending > 0 || z->in_off < z->in_len) &&
         (r = zygote_next(pool, z, 0, 0, NULL, NULL)) == 0) {
  }
  return r < 0 ? -1 : 0;
}

static int zygote_nudge(mbxH_wpool *pool, zygote *z);

/* Before a request that the zygote will answer: while it owes owed_max answers, they are
   read, waiting for them (its mailbox's REAPs nudged into being read), so what it writes to
   the parent always fits in its socket and it never stops reading the parent's frames.
   Not inside zygote_frame, whose caller reads on. 0, or -1 when it is broken. */
static int zygote_settle(mbxH_wpool *pool, zygote *z) {
  if (pool->in_frame || z->reaps_pending + z->requested < z->owed_max) return 0;
  if (zygote_drain(pool, z) != 0 || zygote_nudge(pool, z) != 0) return -1;
  while (z->reaps_pending + z->requested >= z->owed_max)
    if (zygote_read(pool, z, 0, NULL, NULL) != 0) return -1;
  return 0;
}

static int zygote_frame(mbxH_wpool *pool, zygote *z, pid_t want_pid, int *status, int *got) {
  mbxH_wp_type type;
  uint32_t len;
  (void)mbxH_wp_header(z->in + z->in_off, 64, &type, &len, NULL, 0);
  const unsigned char *payload = z->in + z->in_off + MBXH_WP_HEADER;
  z->in_off += MBXH_WP_HEADER + (size_t)len;
  int fds[2] = {-1, -1}, nfds = 0;
  if (type == MBXH_WP_SPAWNED && len >= 8) {
    int64_t pid;
    memcpy(&pid, payload, sizeof pid);
    if (pid > 0) {
      if (z->in_nfds != 2) return -1;
      fds[0] = z->in_fds[0];
      fds[1] = z->in_fds[1];
      nfds = 2;
      z->in_nfds = 0;
    }
  }
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, payload, len);
  if (type == MBXH_WP_SPAWNED) {
    int64_t pid = (int64_t)mbxH_wp_get_u64(&r);
    uint32_t prime_id = mbxH_wp_get_u32(&r);
    z->requested--;
    if (mbxH_wp_end(&r) != 0 || (pid > 0) != (nfds == 2) ||
        (prime_id != 0 && (!z->prime_pending || prime_id != z->prime_id))) {
      for (int i = 0; i < nfds; i++) close(fds[i]);
      return -1;
    }
    wproc p = {.pid = (pid_t)pid, .sock = fds[0], .pidfd = fds[1], .zid = z->id};
    if (prime_id != 0) {
      /* This worker was written the CREATE: it is building that sandbox's state. */
      p.primed = z->prime_fp;
      p.primed_len = z->prime_fp_len;
      p.primed_key = z->prime_key;
      z->prime_fp = NULL;
      z->prime_pending = 0;
    }
    if (pid <= 0) { /* the fork failed (e.g. out of processes) */
      free(p.primed);
      return 0;
    }
    z->workers++;
    if (z == &pool->z && pool->nwarm < WARM_MAX) {
      pool->warm[pool->nwarm++] = p;
    } else {
      /* Ended without reading more of this zygote's frames here: a frame read by this
         nested call would be lost to the caller waiting for it (a crashed worker's
         REAPED; review 12). */
      pool->in_frame++;
      proc_kill(&p);
      proc_forget(pool, &p, 1, 0, NULL);
      pool->in_frame--;
    }
    return 0;
  }
  for (int i = 0; i < nfds; i++) close(fds[i]);
  if (type == MBXH_WP_PROBED && z == &pool->z) {
    pool->probed = mbxH_wp_get_u32(&r);
    pool->probed_us = mbxH_wp_get_u32(&r);
    if (mbxH_wp_end(&r) != 0) return -1;
    pool->probe_got = 1;
    return 0;
  }
  if (type != MBXH_WP_REAPED) return -1;
  pid_t pid = (pid_t)mbxH_wp_get_u64(&r);
  uint64_t st = mbxH_wp_get_u64(&r);
  if (mbxH_wp_end(&r) != 0) return -1;
  if (want_pid > 0 && pid == want_pid) {
    *status = st == UINT64_MAX ? -1 : (int)st;
    *got = 1;
  } else {
    z->reaps_pending--;
  }
  return 0;
}

static int zygote_send(mbxH_wpool *pool, zygote *z) {
  if (z->broken || mbxH_wp_finish(&pool->w) != 0) return -1;
  /* The zygote reads its mailbox whenever it wakes, before its control frames. */
  z->mail_unread = 0;
  if (write_all(z->sock, pool->w.data, pool->w.len, ZYGOTE_DEADLINE) == IO_OK) return 0;
  z->broken = 1;
  return -1;
}

/* pool->w (a REAP) into the zygote's mailbox, where sending wakes nobody: 0, or -1 when it
   cannot take it now (full, or closed: then never again). The zygote reads it at its next
   wake-up, which the worker's death brings when the worker is killed after this. */
static int mail_send(mbxH_wpool *pool, zygote *z) {
  if (z->mail < 0 || mbxH_wp_finish(&pool->w) != 0) return -1;
  ssize_t n;
  do n = send(z->mail, pool->w.data, pool->w.len, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)pool->w.len) {
    z->mail_unread++;
    return 0;
  }
  if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS))
    close_fd(&z->mail);
  return -1;
}

/* Before waiting for the zygote's answer: when REAPs went to its mailbox since its last
   control frame, a wake-up (a SPAWN of none) makes it read them. One of them may be a worker
   that had died before its REAP was sent (killed from outside), whose death woke nobody
   since: its refill would never come. */
static int zygote_nudge(mbxH_wpool *pool, zygote *z) {
  if (z->mail_unread == 0) return 0;
  mbxH_wp_begin(&pool->w, MBXH_WP_SPAWN);
  mbxH_wp_u32(&pool->w, 0);
  return zygote_send(pool, z);
}

/* refill: ask the zygote, in the same frame, to fork what the warm pool lacks once it has
   reaped (one wake-up of the zygote per sandbox, after the sandbox is gone, rather than one
   while the next sandbox is being made). */
/* MBXH_WP_REAP in pool->w: wait for pid, then fork refill workers, the first of them written
   the CREATE prime (prime_len bytes; prime_id 0 and no bytes: none). */
static void put_reap(mbxH_wpool *pool, pid_t pid, uint32_t refill, uint32_t prime_id,
                     const unsigned char *prime, size_t prime_len) {
  mbxH_wp_begin(&pool->w, MBXH_WP_REAP);
  mbxH_wp_u64(&pool->w, (uint64_t)pid);
  mbxH_wp_u32(&pool->w, refill);
  mbxH_wp_u32(&pool->w, prime_id);
  mbxH_wp_bytes(&pool->w, prime, prime_len);
}

/* A warm worker primed for another policy than the one a freed sandbox offers: the host has
   moved on, so it is ended and the offer primes the next one (else one sandbox of another
   policy would keep priming off, and hold a warm place, for as long as it stays warm). */
static void drop_stale_prime(mbxH_wpool *pool, const prime_offer *prime) {
  size_t len = prime->frame->len > MBXH_CREATE_OWN ? prime->frame->len - MBXH_CREATE_OWN : 0;
  for (int i = 0; i < pool->nwarm; i++) {
    wproc *w = &pool->warm[i];
    if (w->primed == NULL || (w->primed_len == len && memcmp(w->primed, prime->frame->data, len) == 0))
      continue;
    wproc stale = *w;
    *w = pool->warm[--pool->nwarm];
    proc_kill(&stale);
    proc_forget(pool, &stale, 1, 0, NULL);
    return; /* at most one is primed */
  }
}

static void proc_forget(mbxH_wpool *pool, wproc *p, int send_reap, int refill,
                        const prime_offer *prime) {
  proc_forget_as(pool, p, send_reap, refill, prime, 0);
}

/* alive: the caller has not killed p: it is killed here, after its REAP is in the zygote's
   mailbox where that can be (so the freeing thread wakes nobody but the worker). */
static void proc_forget_as(mbxH_wpool *pool, wproc *p, int send_reap, int refill,
                           const prime_offer *prime, int alive) {
  zygote *z = p->pid > 0 ? zygote_of(pool, p->zid) : NULL;
  if (z == NULL || !send_reap) {
    if (alive) proc_kill(p);
    close_fd(&p->sock);
    close_fd(&p->pidfd);
    free(p->primed);
    p->primed = NULL;
    if (z && z->workers > 0) z->workers--;
    p->pid = 0;
    return;
  }
  free(p->primed);
  p->primed = NULL;
  if (z->workers > 0) z->workers--;
  /* Read what the zygote already answered first, now and then: a host that frees many
     sandboxes without making new ones must not fill the zygote's socket with unread REAPED
     frames (a retired zygote's SPAWNED ones are read at once: their workers are ended), and
     a prime offered while the last one's worker is unread would be dropped for it. */
  if (!pool->in_frame && (z->reaps_pending >= REAP_BACKLOG || (z != &pool->z && z->requested > 0) ||
                          (refill && prime && z->prime_pending)))
    (void)zygote_drain(pool, z);
  /* On failure the zygote is broken: it is replaced, and a REAP its mailbox still takes below
     is moot (it is killed with its pid namespace). */
  (void)zygote_settle(pool, z);
  if (refill && prime && z == &pool->z) drop_stale_prime(pool, prime);
  /* Only the current zygote refills the warm pool. */
  int want = refill && z == &pool->z ? MBXH_WORKER_WARM - pool->nwarm - z->requested : 0;
  if (want < 0) want = 0;
  /* The first of the workers forked gets the freed sandbox's policy's CREATE from the
     zygote (written into its socket before it is handed over): it builds the state while
     it waits, and the next sandbox of that policy takes it without waiting for that. At
     most one primed worker at a time: a host whose policies vary keeps plain ones. When
     the pool needs no plain one, the primed one is forked on top of them. */
  int priming = refill && z == &pool->z && prime && !z->prime_pending && !warm_primed(pool) &&
                pool->nwarm + z->requested < WARM_MAX && prime->frame->len > MBXH_CREATE_OWN &&
                prime->frame->len <= MBXH_WP_PRIME_MAX;
  unsigned char *fp = priming ? malloc(prime->frame->len - MBXH_CREATE_OWN) : NULL;
  priming = fp != NULL;
  if (priming && want == 0) want = 1;
  /* 0 names no prime on the wire: skipped when the counter wraps (review 11, W1). */
  if (priming && ++z->prime_id == 0) z->prime_id = 1;
  uint32_t prime_id = priming ? z->prime_id : 0;
  put_reap(pool, p->pid, (uint32_t)want, prime_id, priming ? prime->frame->data : NULL,
           priming ? prime->frame->len : 0);
  /* A live worker's REAP goes to the mailbox before the kill: its death wakes the zygote
     with the REAP there. One that has died already (killed from outside) woke the zygote
     when it did, so its REAP goes to the control socket, as does one the mailbox cannot
     take, after the kill: the zygote waits for the death it is told of. */
  int exited = alive ? proc_quiet(p) : 0;
  int sent = alive && !exited && mail_send(pool, z) == 0;
  if (alive) proc_sigkill(p);
  close_fd(&p->sock);
  close_fd(&p->pidfd);
  if (!sent) sent = zygote_send(pool, z) == 0;
  if (sent) {
    z->reaps_pending++;
    z->requested += want;
    if (priming) {
      memcpy(fp, prime->frame->data, prime->frame->len - MBXH_CREATE_OWN);
      z->prime_fp = fp;
      z->prime_fp_len = prime->frame->len - MBXH_CREATE_OWN;
      z->prime_key = prime->key;
      z->prime_pending = 1;
      fp = NULL;
    }
  }
  free(fp);
  p->pid = 0;
}

/* Kill a worker and learn how it ended: its wait status, or -1 when unknown. */
static int proc_end(mbxH_wpool *pool, wproc *p) {
  proc_kill(p);
  pid_t pid = p->pid;
  zygote *z = pid > 0 ? zygote_of(pool, p->zid) : NULL;
  proc_forget(pool, p, 0, 0, NULL);
  int status = -1, got = 0;
  if (z == NULL) return -1;
  put_reap(pool, pid, 0, 0, NULL, 0);
  if (zygote_send(pool, z) != 0) return -1;
  while (!got)
    if (zygote_read(pool, z, pid, &status, &got) != 0) {
      zygote_stop(z);
      return -1;
    }
  return status;
}

static void drop_warm(mbxH_wpool *pool) {
  for (int i = 0; i < pool->nwarm; i++) {
    proc_kill(&pool->warm[i]);
    proc_forget(pool, &pool->warm[i], 1, 0, NULL);
  }
  pool->nwarm = 0;
  for (int i = 0; i < pool->nkept; i++) {
    proc_kill(&pool->kept[i]);
    proc_forget(pool, &pool->kept[i], 1, 0, NULL);
  }
  pool->nkept = 0;
}

static int request_spawns(mbxH_wpool *pool, int k) {
  if (k <= 0) return 0;
  if (zygote_settle(pool, &pool->z) != 0) return -1;
  mbxH_wp_begin(&pool->w, MBXH_WP_SPAWN);
  mbxH_wp_u32(&pool->w, (uint32_t)k);
  if (zygote_send(pool, &pool->z) != 0) return -1;
  pool->z.requested += k;
  return 0;
}

static void sleep_ns(uint64_t ns) {
  struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* A worker for a new sandbox (*p; *reused when it served a sandbox before): one kept for a
   sandbox of this memory limit when the runtime is one tenant, else a warm one, the zygote
   started or re-executed as needed. */
/* The warm worker to hand out: one primed with this sandbox's CREATE (fp, fp_len: its frame
   but for the sandbox's own tail; NULL when the sandbox cannot take a primed worker), else
   one primed with nothing; -1 when every warm worker is primed for another policy. */
static int warm_pick(const mbxH_wpool *pool, const unsigned char *fp, size_t fp_len) {
  int plain = -1;
  for (int i = pool->nwarm - 1; i >= 0; i--) {
    const wproc *w = &pool->warm[i];
    if (w->primed == NULL) {
      if (plain < 0) plain = i;
    } else if (fp && w->primed_len == fp_len && memcmp(w->primed, fp, fp_len) == 0) {
      return i;
    }
  }
  return plain;
}

/* Warm workers primed for another policy when a sandbox needs one that is not: ended (the
   pool refills with plain ones). */
static void drop_mismatched(mbxH_wpool *pool) {
  for (int i = 0; i < pool->nwarm;) {
    if (pool->warm[i].primed == NULL) {
      i++;
      continue;
    }
    wproc p = pool->warm[i];
    pool->warm[i] = pool->warm[--pool->nwarm];
    proc_kill(&p);
    proc_forget(pool, &p, 1, 0, NULL);
  }
}

static mbx_status pool_take(mbxH_wpool *pool, uint64_t memory_limit, int one_tenant,
                            const unsigned char *fp, size_t fp_len, wproc *p, int *reused,
                            mbx_error *err) {
  pthread_mutex_lock(&pool->mu);
  *reused = 0;
  for (int i = pool->nkept - 1; one_tenant && i >= 0; i--) {
    if (pool->kept[i].memory_limit != memory_limit) continue;
    *p = pool->kept[i];
    pool->kept[i] = pool->kept[--pool->nkept];
    *reused = 1;
    atomic_fetch_add(&pool->live, 1);
    pthread_mutex_unlock(&pool->mu);
    return MBX_OK;
  }
  uint64_t now = now_ns();
  /* Many crashes in a short time: slow down before giving out another worker, one per
     CRASH_PENALTY_NS across the host's threads. The sleep is made without the pool: held,
     every other thread's free, and run that loses its worker, waited behind each creating
     thread's sleep in turn (over 1 s with 8 threads; review 13b, B1). */
  uint64_t oldest = pool->crash_at[pool->crash_next % CRASH_BURST];
  if (oldest && now - oldest < CRASH_WINDOW_NS) {
    uint64_t at = pool->penalty_next > now ? pool->penalty_next : now;
    pool->penalty_next = at + CRASH_PENALTY_NS;
    pthread_mutex_unlock(&pool->mu);
    sleep_ns(at + CRASH_PENALTY_NS - now);
    pthread_mutex_lock(&pool->mu);
  }
  retired_sweep(pool);
  /* A zygote that stopped answering forks nothing more: its live sandboxes keep their
     workers (it is retired while they live, and killed once they are freed), and a new one
     serves the pool. */
  if (pool->z.pid > 0 && pool->z.broken) {
    drop_warm(pool);
    if (pool->z.workers == 0 || pool->nretired >= RETIRED_MAX) {
      zygote_stop(&pool->z);
    } else {
      pool->retired[pool->nretired++] = pool->z;
      pool->z = (zygote){.pid = 0, .sock = -1, .mail = -1};
    }
  }
  if (pool->zygote_stale && pool->z.pid > 0 && pool->nretired < RETIRED_MAX &&
      now_ns() - pool->z.started >= ZYGOTE_REEXEC_MIN_NS) {
    drop_warm(pool);
    if (pool->z.workers == 0) {
      zygote_stop(&pool->z);
    } else {
      /* Live sandboxes' workers are its children in its pid namespace: it stays until they
         are freed (retired_sweep), and forks nothing more. */
      pool->retired[pool->nretired++] = pool->z;
      pool->z = (zygote){.pid = 0, .sock = -1, .mail = -1};
    }
  }
  for (int attempt = 0; attempt < 2; attempt++) {
    if (pool->z.pid <= 0 && zygote_start(pool, err) != 0) {
      pthread_mutex_unlock(&pool->mu);
      return MBX_UNSUPPORTED;
    }
    /* Workers the zygote forked for an earlier refill may wait in its socket, unread: read
       what is there first, so a pool whose workers are ready is not taken for dry (and a
       fork does not compete with this sandbox's creation for the CPU). */
    int broken = zygote_drain(pool, &pool->z) != 0;
    /* Warm workers that died while they waited (the OOM killer, an operator) go first: each
       would cost one of attach_worker's attempts, and the pool may hold three (two plain, one
       primed; review 11, W5), and a primed one's answer stays buffered after its death
       (review 11, W3). An exited process's pidfd is readable: one poll looks at them all. */
    struct pollfd dead[WARM_MAX];
    for (int i = 0; i < pool->nwarm; i++)
      dead[i] = (struct pollfd){pool->warm[i].pidfd, POLLIN, 0};
    if (!broken && pool->nwarm > 0 && poll(dead, (nfds_t)pool->nwarm, 0) > 0) {
      for (int i = pool->nwarm - 1; i >= 0; i--) {
        if (!(dead[i].revents & POLLIN)) continue;
        wproc gone = pool->warm[i];
        pool->warm[i] = pool->warm[--pool->nwarm];
        proc_forget(pool, &gone, 1, 0, NULL);
      }
    }
    int pick = -1, asked = 0, dry = warm_pick(pool, fp, fp_len) < 0;
    /* Until a worker this sandbox can take is warm: workers primed for another policy go,
       and a plain one is forked when none is coming (once: a fork that fails is the zygote's
       end). */
    while (!broken && (pick = warm_pick(pool, fp, fp_len)) < 0) {
      drop_mismatched(pool);
      if (pool->z.requested == 0) {
        if (asked++) {
          broken = 1;
          break;
        }
        broken = request_spawns(pool, 1) != 0;
      }
      if (!broken) broken = zygote_nudge(pool, &pool->z) != 0;
      if (!broken) broken = zygote_read(pool, &pool->z, 0, NULL, NULL) != 0;
    }
    if (!broken && pick >= 0) {
      *p = pool->warm[pick];
      pool->warm[pick] = pool->warm[--pool->nwarm];
      /* The pool ran dry (a host making sandboxes faster than it frees them): refill now, so
         the zygote forks the next ones while this one is made. Otherwise the refill rides
         with the reap of a freed sandbox's worker (proc_forget): a fork now would compete
         with this sandbox's creation for the CPU. */
      int want = MBXH_WORKER_WARM - pool->nwarm - pool->z.requested;
      if (dry && want > 0 && request_spawns(pool, want) != 0) {
        drop_warm(pool);
        zygote_stop(&pool->z);
      }
      atomic_fetch_add(&pool->live, 1);
      pthread_mutex_unlock(&pool->mu);
      return MBX_OK;
    }
    /* The zygote is gone or broken (or cannot fork): once more with a fresh one. */
    drop_warm(pool);
    if (pool->z.pid > 0) kill(pool->z.pid, SIGKILL);
    zygote_stop(&pool->z);
  }
  pthread_mutex_unlock(&pool->mu);
  mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: the worker zygote (%s) could not fork "
                 "a worker (out of processes or memory?)", pool->path);
  return MBX_NO_MEMORY;
}

/* A one-tenant runtime's freed sandbox: its healthy worker is kept for the next sandbox of the
   same memory limit (which resets it to a pristine state with its CREATE); when the pool
   keeps enough already, it is ended. */
static void pool_keep(mbxH_wpool *pool, wproc *p) {
  pthread_mutex_lock(&pool->mu);
  if (pool->nkept < KEPT_MAX && pool->z.pid > 0 && p->zid == pool->z.id) {
    pool->kept[pool->nkept++] = *p;
  } else {
    proc_forget_as(pool, p, 1, 1, NULL, 1);
    retired_sweep(pool);
  }
  atomic_fetch_sub(&pool->live, 1);
  pthread_mutex_unlock(&pool->mu);
}

unsigned mbxH_wpool_kept(mbxH_wpool *pool) {
  if (pool == NULL) return 0;
  pthread_mutex_lock(&pool->mu);
  unsigned n = (unsigned)pool->nkept;
  pthread_mutex_unlock(&pool->mu);
  return n;
}

/* The worker of a sandbox is done with: killed, and reaped by the zygote. With want_status,
   wait for its status (how it ended); else reap it later. prime (NULL: none) is a CREATE of
   the freed sandbox's policy for the worker that replaces it (proc_forget). */
static int pool_release(mbxH_wpool *pool, wproc *p, int want_status, int crashed,
                        const prime_offer *prime) {
  pthread_mutex_lock(&pool->mu);
  int st = -1;
  if (want_status) {
    st = proc_end(pool, p);
  } else {
    proc_forget_as(pool, p, 1, 1, crashed || pool->zygote_stale ? NULL : prime, 1);
  }
  retired_sweep(pool);
  if (crashed) {
    pool->crash_at[pool->crash_next++ % CRASH_BURST] = now_ns();
    pool->zygote_stale = 1;
  }
  atomic_fetch_sub(&pool->live, 1);
  pthread_mutex_unlock(&pool->mu);
  return st;
}

mbxH_wpool *mbxH_wpool_new(const char *worker_path) {
  mbxH_wpool *pool = calloc(1, sizeof *pool);
  if (pool == NULL) return NULL;
  if (strlen(worker_path) >= sizeof pool->path) {
    free(pool);
    return NULL;
  }
  strcpy(pool->path, worker_path);
  pthread_mutex_init(&pool->mu, NULL);
  pool->z.sock = -1;
  pool->z.mail = -1;
  return pool;
}

void mbxH_wpool_free(mbxH_wpool *pool) {
  if (pool == NULL) return;
  pthread_mutex_lock(&pool->mu);
  drop_warm(pool);
  zygote_stop(&pool->z);
  for (int i = 0; i < pool->nretired; i++) zygote_stop(&pool->retired[i]);
  pool->nretired = 0;
  pthread_mutex_unlock(&pool->mu);
  pthread_mutex_destroy(&pool->mu);
  mbxH_wp_writer_free(&pool->w);
  free(pool);
}

mbx_status mbxH_wpool_probe(mbxH_wpool *pool, uint32_t *bits, uint32_t *jail_us,
                            mbx_error *err) {
  pthread_mutex_lock(&pool->mu);
  mbx_status s = MBX_OK;
  if (pool->z.pid <= 0 && zygote_start(pool, err) != 0) {
    s = MBX_UNSUPPORTED;
  } else {
    pool->probe_got = 0;
    mbxH_wp_begin(&pool->w, MBXH_WP_PROBE);
    int broken = zygote_send(pool, &pool->z) != 0;
    while (!broken && !pool->probe_got)
      broken = zygote_read(pool, &pool->z, 0, NULL, NULL) != 0;
    if (broken) {
      drop_warm(pool);
      if (pool->z.pid > 0) kill(pool->z.pid, SIGKILL);
      zygote_stop(&pool->z);
      mbxU_error_set(err, MBX_INTERNAL_ERROR, "the worker zygote (%s) did not answer its probe",
                     pool->path);
      s = MBX_INTERNAL_ERROR;
    }
    *bits = pool->probed;
    *jail_us = pool->probed_us;
  }
  pthread_mutex_unlock(&pool->mu);
  return s;
}

unsigned mbxH_wpool_live(mbxH_wpool *pool) {
  return pool ? atomic_load(&pool->live) : 0;
}

/* ---- a sandbox in a worker ---- */

typedef struct wsb {
  mbx_runtime *rt;
  mbxH_wpool *pool;
  mbxC_port_local port;
  mbxC_port_record record;
  int recording;
  mbxV_config cfg;
  uint64_t host_call_limit;
  uint64_t host_calls; /* callbacks served in this run (across its resumes), as the vm counts */
  mbxH_wp_bounds bounds;
  uint32_t frame_max;
  /* The worker: proc.sock < 0 once it is gone. sig_mu guards proc for interrupt, which may
     come from any thread. */
  pthread_mutex_t sig_mu;
  wproc proc;
  unsigned runs;
  int tainted; /* a run poisoned the sandbox: its reset takes a new worker */
  _Atomic int interrupted;
  int paused;
  uint64_t heap;
  /* The checkpoint lives in the worker; the port's side of it here. */
  int has_checkpoint;
  int checkpoint_paused;
  unsigned checkpoint_worker; /* which worker holds it (generation) */
  unsigned worker_gen;
  uint64_t checkpoint_draws;
  mbxC_record_mark checkpoint_log; /* where the log stood at the checkpoint */
  mbxH_wp_writer w, reply;
  unsigned char *rbuf;
  size_t rcap, rlen;
  char reason[256]; /* why the last worker was lost */
  /* The parent's own view of the run's deadline (0: no time limit): set when a run or resume
     is sent, moved on by the host time of the calls served. A guest-time operation (exec)
     waits no later than this plus the grace, whatever deadline the worker's call names. */
  uint64_t run_deadline;
  /* io.stdin's read position at the checkpoint (the bytes and position live here). */
  size_t checkpoint_stdin;
  int spin_on;          /* MBX_CAP_WORKER_SPIN when the sandbox was made */
  mbxH_spin spin;       /* the spin before waiting on this sandbox's worker */
  uint64_t answered_at; /* when its worker last answered a frame (0: not yet) */
} wsb;

static const mbxC_port *served_port(wsb *ws) {
  return ws->recording ? &ws->record.port : &ws->port.port;
}

static int parent_interrupted(const void *ctx) {
  const wsb *ws = ctx;
  return atomic_load(&((wsb *)ws)->interrupted);
}

/* The reason a worker ended, from its wait status. */
static void describe_end(wsb *ws, int status, const char *fallback) {
  if (status >= 0 && WIFSIGNALED(status) && WTERMSIG(status) == SIGSYS)
    snprintf(ws->reason, sizeof ws->reason,
             "worker killed by its seccomp filter (signal %d): it made a forbidden system call",
             SIGSYS);
  else if (status >= 0 && WIFSIGNALED(status) && fallback == NULL)
    snprintf(ws->reason, sizeof ws->reason, "worker crashed (signal %d)", WTERMSIG(status));
  else if (status >= 0 && WIFEXITED(status) && fallback == NULL)
    snprintf(ws->reason, sizeof ws->reason, "worker exited unexpectedly (code %d)",
             WEXITSTATUS(status));
  else
    snprintf(ws->reason, sizeof ws->reason, "%s", fallback ? fallback : "worker lost");
}

/* End the sandbox's worker after something went wrong. fallback NULL: the reason is how it
   died (it closed the socket); else the reason given (a protocol error, the backstop). */
static void lose_worker(wsb *ws, const char *fallback) {
  pthread_mutex_lock(&ws->sig_mu);
  wproc p = ws->proc;
  ws->proc.sock = -1;
  ws->proc.pidfd = -1;
  ws->proc.pid = 0;
  pthread_mutex_unlock(&ws->sig_mu);
  if (p.pid <= 0) return;
  int st = pool_release(ws->pool, &p, 1, 1, NULL);
  describe_end(ws, st, fallback);
}

static int worker_alive(const wsb *ws) {
  return ws->proc.sock >= 0;
}

/* The deadline a guest-time operation gets: the worker's (what the guest's budget says, as
   in-process), but never later than the parent's own bound; 0 (none) only when both say so. */
static uint64_t guest_deadline(const wsb *ws, uint64_t worker) {
  if (ws->run_deadline == 0) return worker;
  uint64_t bound = ws->run_deadline + (uint64_t)MBXH_WORKER_GRACE_MS * 1000000u;
  return worker && worker < bound ? worker : bound;
}

/* The reply to a port call, written into ws->reply: answered by capabilities/port_serve.c from
   the sandbox's port. Host time (a host or native callback: mbxC_serve_is_callback) carries
   only the interrupt, as in-process; guest time the run's deadline, never past the parent's
   own bound. */
static void serve_call(wsb *ws, const mbxC_wire_call *c) {
  mbxC_wait wait = {mbxC_serve_is_callback(c->op) ? 0 : guest_deadline(ws, c->deadline_ns),
                    parent_interrupted, ws};
  mbxH_wp_begin(&ws->reply, MBXH_WP_PORT_REPLY);
  mbxC_serve_call(served_port(ws), c, &wait, &ws->reply);
}

/*
** Send ws->w and serve port calls until a frame of type `expect` arrives (its payload in
** ws->rbuf/rlen, NUL-terminated). budget_ms bounds the worker's own time (the backstop); the
** time the host's callbacks take is added back (file operations are guest time, as
** in-process). The parent holds a worker to what in-process mode enforces itself, since a
** compromised VM would not: port calls only during a run (expect MBXH_WP_DONE), at most the
** sandbox's host-call limit of callbacks per run, and an interrupt ends the run within
** MBXH_WORKER_GRACE_MS even if the worker ignores its signal. 0, or -1 with the worker lost
** and ws->reason saying why.
*/
static int converse(wsb *ws, mbxH_wp_type expect, uint64_t budget_ms, int send) {
  char why[200];
  if (!worker_alive(ws)) {
    snprintf(ws->reason, sizeof ws->reason, "the worker is gone");
    return -1;
  }
  int in_run = expect == MBXH_WP_DONE;
  /* The parent spins for the answer only while the worker is awake: it answered its last
     frame less than a spin's bound ago, so it is spinning for this one (host/backend/worker_spin.h).
     A worker that slept (a warm one's CREATE, a host that paused) must first be woken, and
     spinning through its wake-up only takes the CPU it needs on busy cores. */
  uint64_t now = now_ns();
  io_deadline dl = {now + budget_ms * 1000000u, in_run ? &ws->interrupted : NULL, 0,
                    ws->spin_on && ws->answered_at && now - ws->answered_at < MBXH_SPIN_NS
                        ? &ws->spin
                        : NULL};
  if (send && mbxH_wp_finish(&ws->w) != 0) {
    /* Too large to send at all: a host-side refusal, the worker is fine. */
    snprintf(ws->reason, sizeof ws->reason, "the request is too large for the worker protocol");
    return -2;
  }
  io_result io = send ? write_all(ws->proc.sock, ws->w.data, ws->w.len, &dl) : IO_OK;
  /* Sent a request, the answer is not there yet: wait before reading. */
  int wait_first = send;
  for (;;) {
    if (io != IO_OK) break;
    /* A worker that sends port calls back to back never waits in poll: look here too. */
    if (io_expired(&dl)) {
      io = IO_TIMEOUT;
      break;
    }
    /* The header and, in the same read, what follows of the frame (most frames are small):
       the worker sends one frame and waits for the answer, so anything past the frame's end
       is a protocol error. */
    unsigned char first[MBXH_WP_HEADER + 512];
    size_t got;
    io = read_some(ws->proc.sock, first, MBXH_WP_HEADER, sizeof first, &dl, wait_first, &got);
    wait_first = 1;
    if (io != IO_OK) break;
    mbxH_wp_type type;
    uint32_t len;
    if (mbxH_wp_header(first, ws->frame_max, &type, &len, why, sizeof why) != 0) {
      char msg[256];
      snprintf(msg, sizeof msg, "worker protocol error: %s", why);
      lose_worker(ws, msg);
      return -1;
    }
    if (grow(&ws->rbuf, &ws->rcap, (size_t)len + 1) != 0) {
      lose_worker(ws, "worker protocol error: out of host memory for its frame");
      return -1;
    }
    size_t have = got - MBXH_WP_HEADER;
    if (have > len) {
      lose_worker(ws, "worker protocol error: bytes past the end of its frame, sent before "
                      "the frame was answered");
      return -1;
    }
    memcpy(ws->rbuf, first + MBXH_WP_HEADER, have);
    io = read_all(ws->proc.sock, ws->rbuf + have, len - have, &dl);
    if (io != IO_OK) break;
    ws->rlen = len;
    /* A frame's last byte string (a host call's arguments) ends in a NUL, as the host's
       callback is promised. */
    ws->rbuf[len] = 0;
    if (type == expect) {
      ws->answered_at = now_ns();
      return 0;
    }
    if (type != MBXH_WP_PORT_CALL) {
      char msg[256];
      snprintf(msg, sizeof msg, "worker protocol error: a frame of type %u where %u was due",
               (unsigned)type, (unsigned)expect);
      lose_worker(ws, msg);
      return -1;
    }
    /* Port calls only of what the sandbox's port serves, outside a run only of what
       reaches none of the host's callbacks, files or programs, and at most the sandbox's
       host-call limit of callbacks per run (capabilities/port_serve.h). */
    mbxC_wire_call c;
    int bad = mbxC_wire_get_call(ws->rbuf, len, &ws->port.grants, &c, why, sizeof why) != 0;
    if (!bad && !mbxC_serve_has(served_port(ws), c.op)) {
      snprintf(why, sizeof why, "operation %u is not granted", c.op);
      bad = 1;
    } else if (!bad && !in_run && !mbxC_serve_outside_run(c.op)) {
      snprintf(why, sizeof why, "operation %u outside a run", c.op);
      bad = 1;
    } else if (!bad && mbxC_serve_is_callback(c.op) && ws->host_calls >= ws->host_call_limit) {
      snprintf(why, sizeof why, "more host calls than the sandbox's limit (%llu)",
               (unsigned long long)ws->host_call_limit);
      bad = 1;
    }
    if (bad) {
      char msg[256];
      snprintf(msg, sizeof msg, "worker protocol error: %s", why);
      mbxC_wire_call_free(&c);
      lose_worker(ws, msg);
      return -1;
    }
    int callback = mbxC_serve_is_callback(c.op);
    if (callback) ws->host_calls++;
    uint64_t t0 = now_ns();
    serve_call(ws, &c);
    mbxC_wire_call_free(&c);
    if (mbxH_wp_finish(&ws->reply) != 0) {
      lose_worker(ws, "worker protocol error: a port answer too large for the protocol");
      return -1;
    }
    uint64_t served = now_ns() - t0;
    /* The backstop waits for host time (callbacks) and for a program the parent runs (bounded
       here: its exec timeout, the run's deadline, the interrupt; the worker only waits), until
       an interrupt cut the deadline. */
    if ((callback || c.op == MBXC_OP_EXEC_RUN) && !dl.cut) dl.at += served;
    if (ws->run_deadline && callback) ws->run_deadline += served;
    io = write_all(ws->proc.sock, ws->reply.data, ws->reply.len, &dl);
    if (ws->spin_on) dl.spin = &ws->spin; /* the worker waits for this answer, spinning */
  }
  if (io == IO_TIMEOUT && dl.cut)
    lose_worker(ws, "worker killed: it did not stop within the grace period after "
                    "mbx_sandbox_interrupt");
  else if (io == IO_TIMEOUT) lose_worker(ws, "worker killed: wall-clock backstop");
  else lose_worker(ws, NULL);
  return -1;
}

static int exchange(wsb *ws, mbxH_wp_type expect, uint64_t budget_ms) {
  return converse(ws, expect, budget_ms, 1);
}

static uint64_t run_deadline_from_now(const wsb *ws) {
  return ws->cfg.time_limit_ms ? now_ns() + ws->cfg.time_limit_ms * 1000000u : 0;
}

static uint64_t run_budget_ms(const wsb *ws) {
  return ws->cfg.time_limit_ms ? 2 * ws->cfg.time_limit_ms + MBXH_WORKER_GRACE_MS
                               : MBXH_WORKER_BACKSTOP_DEFAULT_MS;
}

/* The runtime's heap estimate takes the worker's word only up to the sandbox's limit. */
static uint64_t clamp_heap(const wsb *ws, uint64_t heap) {
  return heap > ws->cfg.memory_limit ? ws->cfg.memory_limit : heap;
}

/* A pending call must name one of the sandbox's external functions, as in-process: a host
   dispatches on that name. */
static int pending_ok(const wsb *ws, const char *json, size_t len) {
  json_error_t e;
  json_t *j = json_loadb(json, len, JSON_ALLOW_NUL, &e);
  int ok = 0;
  if (j && json_is_object(j) && json_is_array(json_object_get(j, "args")) &&
      json_object_size(j) == 2) {
    const char *name = json_string_value(json_object_get(j, "function"));
    for (size_t i = 0; name && i < ws->port.grants.fn_count; i++)
      if (ws->port.grants.fns[i].kind == MBXC_FN_EXTERNAL &&
          strcmp(ws->port.grants.fns[i].name, name) == 0)
        ok = 1;
  }
  json_decref(j);
  return ok;
}

/* A STATUS answer: 0 with *code and the heap updated, or -1 (lost or malformed). */
static int read_status(wsb *ws, uint32_t *code, char *msg, size_t msg_size) {
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, ws->rbuf, ws->rlen);
  *code = mbxH_wp_get_u32(&r);
  uint64_t heap = mbxH_wp_get_u64(&r);
  const char *p;
  size_t n = mbxH_wp_get_bytes(&r, msg_size - 1, &p);
  if (mbxH_wp_end(&r) != 0 || *code > 4) {
    lose_worker(ws, "worker protocol error: a malformed status report");
    return -1;
  }
  memcpy(msg, p, n);
  msg[n] = '\0';
  ws->heap = clamp_heap(ws, heap);
  return 0;
}

/* The seed of the worker's next reseed, drawn here so it rides with CREATE or RESET (the
   worker would otherwise ask for it in a round trip of its own): the same draw from the same
   port at the same point, so recording and replay see what they always saw. */

static void put_seed(wsb *ws, const uint64_t seed[2]) {
  mbxH_wp_u64(&ws->w, seed[0]);
  mbxH_wp_u64(&ws->w, seed[1]);
}

static void draw_seed(wsb *ws, uint64_t seed[2]) {
  const mbxC_port *port = served_port(ws);
  port->random_seed(port->ud, seed);
}

/* ws's CREATE in w, with whether it is sent ahead, this address key and first seed as its last
   MBXH_CREATE_OWN bytes (all before them follows from the policy and the runtime's settings). */
static void put_create(wsb *ws, mbxH_wp_writer *w, int ahead, uint64_t address_key,
                       const uint64_t seed[2]) {
  const mbxC_port *port = served_port(ws);
  uint32_t served = mbxC_serve_mask(port);
  mbxH_wp_begin(w, MBXH_WP_CREATE);
  mbxH_wp_u64(w, ws->cfg.memory_limit);
  mbxH_wp_u64(w, ws->cfg.instruction_limit);
  mbxH_wp_u64(w, ws->cfg.time_limit_ms);
  mbxH_wp_u64(w, ws->cfg.output_limit);
  mbxH_wp_u64(w, ws->cfg.source_limit);
  mbxH_wp_u64(w, ws->cfg.result_limit);
  mbxH_wp_u64(w, ws->host_call_limit);
  mbxH_wp_u8(w, (uint8_t)(ws->port.grants.deterministic != 0));
  mbxH_wp_u32(w, served);
  mbxH_wp_u32(w, (uint32_t)ws->port.grants.fn_count);
  for (size_t i = 0; i < ws->port.grants.fn_count; i++) {
    const mbxC_grant_fn *f = &ws->port.grants.fns[i];
    mbxH_wp_bytes(w, f->name, strlen(f->name));
    mbxH_wp_u8(w, (uint8_t)f->kind);
    mbxH_wp_u8(w, (uint8_t)f->sig.ret);
    mbxH_wp_u8(w, (uint8_t)f->sig.nargs);
    for (int a = 0; a < f->sig.nargs; a++) mbxH_wp_u8(w, (uint8_t)f->sig.args[a]);
  }
  mbxH_wp_u8(w, (uint8_t)ws->spin_on);
  mbxH_wp_u8(w, (uint8_t)(ahead != 0));
  mbxH_wp_u64(w, address_key);
  mbxH_wp_u64(w, seed[0]);
  mbxH_wp_u64(w, seed[1]);
  mbxH_wp_finish(w);
}

/* Whether a worker primed with another sandbox's CREATE of the same frame can serve ws: its
   first seed is not its own port's first draw then, which only a policy that fixes the seed
   (or records the draws for a snapshot) can tell. */
static int primable(const wsb *ws) {
  return !ws->recording && !ws->port.grants.deterministic && !ws->port.seed_fixed;
}

/* Give the sandbox a fresh worker with a pristine state: 0, or an API status with err set. */
static mbx_status attach_worker(wsb *ws, const char *fn, mbx_error *err) {
  wproc p;
  uint64_t seed[2] = {0, 0};
  int drawn = 0;
  /* This sandbox's CREATE without its own tail: a warm worker primed with the same frame has
     built the state this sandbox would get (host/backend/worker.c, pool_release). */
  put_create(ws, &ws->w, 0, 0, seed);
  const unsigned char *fp = primable(ws) && !ws->w.failed ? ws->w.data : NULL;
  size_t fp_len = ws->w.len - MBXH_CREATE_OWN;
  /* A warm worker may have died while idle (killed from outside, say): another one then. */
  for (int attempt = 0;; attempt++) {
    int reused;
    mbx_status taken = pool_take(ws->pool, ws->cfg.memory_limit,
                                 atomic_load(&ws->rt->one_tenant), fp, fp_len, &p, &reused, err);
    if (taken != MBX_OK) return taken;
    int primed = p.primed != NULL;
    if (primed) ws->cfg.address_key = p.primed_key;
    free(p.primed);
    p.primed = NULL;
    p.memory_limit = ws->cfg.memory_limit;
    pthread_mutex_lock(&ws->sig_mu);
    ws->proc = p;
    pthread_mutex_unlock(&ws->sig_mu);
    ws->worker_gen++;
    ws->runs = reused ? p.runs : 0; /* a reused worker is still recycled after N runs */
    ws->tainted = 0;
    ws->paused = 0;
    ws->answered_at = 0; /* a warm worker sleeps until CREATE */
    if (!primed && !drawn) {
      draw_seed(ws, seed); /* once: a retry on another worker sends the same */
      drawn = 1;
    }
    if (!primed) put_create(ws, &ws->w, 0, ws->cfg.address_key, seed);
    /* A primed worker was sent its CREATE when it was primed: its answer may be waiting. It
       stays buffered if the worker died since (killed while warm): pool_take looked at the
       warm workers' pidfds just now and took none that had exited (review 11, W3). */
    if (converse(ws, MBXH_WP_STATUS, MBXH_WORKER_CONTROL_MS, !primed) == 0) break;
    if (attempt == 2) {
      mbxU_error_set(err, MBX_INTERNAL_ERROR, "%s: the sandbox's worker failed while "
                     "starting: %s", fn, ws->reason);
      return MBX_INTERNAL_ERROR;
    }
  }
  uint32_t code;
  char msg[256];
  if (read_status(ws, &code, msg, sizeof msg) != 0) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "%s: %s", fn, ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  if (code != 0) {
    lose_worker(ws, msg);
    mbxU_error_set(err, MBX_NO_MEMORY, "%s: the worker could not make the sandbox: %s", fn, msg);
    return MBX_NO_MEMORY;
  }
  return MBX_OK;
}

static void release(wsb *ws) {
  if (ws->proc.pid > 0) {
    wproc p = ws->proc;
    ws->proc.sock = ws->proc.pidfd = -1;
    ws->proc.pid = 0;
    p.runs = ws->runs;
    /* One tenant: a worker that served this sandbox well may serve the next one. Never one
       whose sandbox was poisoned (a limit, a crash, a protocol error), paused mid-call, or
       at its run budget. */
    if (atomic_load(&ws->rt->one_tenant) && p.sock >= 0 && !ws->tainted && !ws->paused &&
        ws->runs < MBXH_WORKER_TENANT_RUNS_MAX) {
      pool_keep(ws->pool, &p);
    } else if (primable(ws)) {
      /* The next sandbox is likely of the same policy: a warm worker builds its state now,
         with its own address key and first seed. */
      uint64_t seed[2], key = ws->rt->address_key ^ atomic_fetch_add(&ws->rt->sandboxes_created, 1);
      draw_seed(ws, seed);
      put_create(ws, &ws->w, 1, key, seed);
      prime_offer offer = {&ws->w, key};
      pool_release(ws->pool, &p, 0, 0, ws->w.failed ? NULL : &offer);
    } else {
      pool_release(ws->pool, &p, 0, 0, NULL);
    }
  }
  pthread_mutex_destroy(&ws->sig_mu);
  mbxC_port_record_free(&ws->record);
  mbxC_port_local_free(&ws->port);
  mbxH_wp_writer_free(&ws->w);
  mbxH_wp_writer_free(&ws->reply);
  free(ws->rbuf);
  free(ws);
}

static size_t sat_mul(size_t a, size_t b) {
  return b && a > SIZE_MAX / b ? SIZE_MAX : a * b;
}

static mbx_status worker_create(mbx_runtime *rt, const mbx_policy *p,
                                const mbxC_snap_header *snap, mbxC_replay_log *replay,
                                void **impl, mbx_error *err) {
  uint64_t cap = mbx_runtime_get_cap(rt, MBX_CAP_SANDBOXES);
  if (mbxH_wpool_live(rt->workers) >= cap) {
    if (replay) mbxC_replay_free(replay);
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_new: %llu sandboxes are live in this runtime, its cap "
                   "MBX_CAP_SANDBOXES; free some, or raise the cap with mbx_runtime_set_cap",
                   (unsigned long long)cap);
    return MBX_NO_MEMORY;
  }
  wsb *ws = calloc(1, sizeof *ws);
  int made_port = ws ? mbxC_port_local_init(&ws->port, p) : -1;
  if (made_port != 0) {
    if (replay) mbxC_replay_free(replay);
    if (made_port == MBXC_PORT_LOCAL_FS_FAILED) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_new: %s", ws->port.fs_error.message);
      free(ws);
      return MBX_INVALID_ARGUMENT;
    }
    free(ws);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_new: out of memory");
    return MBX_NO_MEMORY;
  }
  ws->rt = rt;
  ws->pool = rt->workers;
  /* Seeds from the runtime's secret, as in-process: no system call per sandbox. */
  ws->port.seeds = &rt->seeds;
  /* Programs run from here, in the runtime's exec backend, with port_local's checks: the
     worker only forwards the request. */
  mbxC_port_local_set_exec(&ws->port, &rt->exec);
  pthread_mutex_init(&ws->sig_mu, NULL);
  ws->proc = (wproc){.sock = -1, .pidfd = -1};
  ws->cfg = (mbxV_config){.memory_limit = (size_t)p->memory,
                          .instruction_limit = p->instructions,
                          .time_limit_ms = p->time_ms,
                          .output_limit = (size_t)p->output,
                          .source_limit = (size_t)p->source,
                          .result_limit = (size_t)p->result,
                          .address_key =
                              rt->address_key ^ atomic_fetch_add(&rt->sandboxes_created, 1)};
  ws->host_call_limit = p->host_calls;
  ws->spin_on = atomic_load(&rt->worker_spin);
  /* What a report may hold: a value or pending call's JSON (escapes make text longer than
     the heap it came from), the run's output. */
  size_t result = ws->cfg.result_limit ? ws->cfg.result_limit : ws->cfg.output_limit;
  ws->bounds.value_max = sat_mul(ws->cfg.memory_limit, 8) + result;
  if (ws->bounds.value_max > MBXH_WP_MAX_FRAME) ws->bounds.value_max = MBXH_WP_MAX_FRAME;
  ws->bounds.output_max = ws->cfg.output_limit;
  size_t frame = 2 * ws->bounds.value_max + ws->bounds.output_max + ((size_t)1 << 20);
  ws->frame_max = frame > MBXH_WP_MAX_FRAME ? MBXH_WP_MAX_FRAME : (uint32_t)frame;
  if (snap) {
    mbxC_port_record_init(&ws->record, &ws->port.port, mbxC_snap_chain0(snap));
    ws->recording = 1;
    if (replay) mbxC_port_record_replay_begin(&ws->record, replay);
    mbxC_vfs_tap tap = mbxC_port_record_fs_tap(&ws->record);
    mbxC_port_local_set_fs_tap(&ws->port, &tap);
  }
  if (replay) mbxC_replay_free(replay);
  mbx_status s = attach_worker(ws, "mbx_sandbox_new", err);
  if (s != MBX_OK) {
    release(ws);
    return s;
  }
  *impl = ws;
  return MBX_OK;
}

static void worker_destroy(void *impl) {
  release(impl);
}

static void worker_interrupt(void *impl) {
  wsb *ws = impl;
  atomic_store(&ws->interrupted, 1);
  pthread_mutex_lock(&ws->sig_mu);
  if (ws->proc.pidfd >= 0) syscall(SYS_pidfd_send_signal, ws->proc.pidfd, SIGUSR1, NULL, 0);
  pthread_mutex_unlock(&ws->sig_mu);
}

static int worker_paused(const void *impl) {
  return ((const wsb *)impl)->paused;
}

static uint64_t worker_heap_bytes(const void *impl) {
  return ((const wsb *)impl)->heap;
}

static mbxC_port_record *worker_recorder(void *impl) {
  wsb *ws = impl;
  return ws->recording ? &ws->record : NULL;
}

static mbx_status worker_reset(void *impl, mbx_error *err) {
  wsb *ws = impl;
  mbx_runtime *rt = ws->rt;
  ws->cfg.address_key = rt->address_key ^ atomic_fetch_add(&rt->sandboxes_created, 1);
  if (mbxC_port_local_fs_reset(&ws->port) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_reset: the filesystem view could not be "
                                       "made again: %s", ws->port.fs_error.message);
    return MBX_NO_MEMORY;
  }
  mbxC_port_local_seek(&ws->port, 0);
  /* io.stdin reads the host's bytes from their start again (they live here). */
  ws->port.stdin_pos = 0;
  if (ws->recording) mbxC_port_record_restart(&ws->record);
  ws->paused = 0;
  /* Once guest code has run in a worker, the pristine state is made in a new one: a VM the
     guest took over (a Lua memory bug) would acknowledge a RESET and keep its state, seeing
     the next principal's code, inputs and host replies. Only a worker that has run nothing
     yet (or is gone, or tainted) is reset in place or replaced as before. */
  if (!worker_alive(ws) || ws->tainted || ws->runs > 0) {
    if (worker_alive(ws)) {
      pthread_mutex_lock(&ws->sig_mu);
      wproc p = ws->proc;
      ws->proc = (wproc){.sock = -1, .pidfd = -1};
      pthread_mutex_unlock(&ws->sig_mu);
      pool_release(ws->pool, &p, 0, 0, NULL);
    }
    ws->has_checkpoint = 0;
    mbx_status s = attach_worker(ws, "mbx_sandbox_reset", err);
    if (s != MBX_OK) ws->heap = 0;
    return s;
  }
  uint64_t seed[2];
  draw_seed(ws, seed);
  mbxH_wp_begin(&ws->w, MBXH_WP_RESET);
  mbxH_wp_u64(&ws->w, ws->cfg.address_key);
  put_seed(ws, seed);
  uint32_t code;
  char msg[256];
  if (exchange(ws, MBXH_WP_STATUS, MBXH_WORKER_CONTROL_MS) != 0 ||
      read_status(ws, &code, msg, sizeof msg) != 0) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_reset: %s; the next reset takes a "
                   "new worker", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  if (code != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_reset: %s; the sandbox refuses runs until "
                   "a reset succeeds", msg);
    ws->tainted = 1;
    return MBX_NO_MEMORY;
  }
  return MBX_OK;
}

static mbx_status worker_checkpoint(void *impl, mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_checkpoint: the sandbox's worker is "
                   "gone (%s); reset the sandbox", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  mbxC_vfs_mark *files;
  if (mbxC_port_local_fs_mark(&ws->port, &files) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_checkpoint: out of host memory for the "
                                       "copy of /tmp; the previous checkpoint (if any) is kept");
    return MBX_NO_MEMORY;
  }
  mbxH_wp_begin(&ws->w, MBXH_WP_CHECKPOINT);
  uint32_t code;
  char msg[256];
  if (exchange(ws, MBXH_WP_STATUS, MBXH_WORKER_CONTROL_MS) != 0 ||
      read_status(ws, &code, msg, sizeof msg) != 0) {
    mbxC_vfs_mark_free(files);
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_checkpoint: %s", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  if (code != 0) {
    mbxC_vfs_mark_free(files);
    if (code == 3) {
      mbxU_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_checkpoint: not available in this build "
                     "(MBX_ARENA_MALLOC: the guest heap is not one arena)");
      return MBX_UNSUPPORTED;
    }
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_checkpoint: out of memory in the worker "
                   "for the copy; the previous checkpoint (if any) is kept");
    return MBX_NO_MEMORY;
  }
  mbxC_port_local_fs_keep(&ws->port, files);
  ws->has_checkpoint = 1;
  ws->checkpoint_worker = ws->worker_gen;
  ws->checkpoint_draws = mbxC_port_local_position(&ws->port);
  ws->checkpoint_stdin = ws->port.stdin_pos;
  ws->checkpoint_log = mbxC_port_record_mark(&ws->record);
  ws->checkpoint_paused = ws->paused;
  return MBX_OK;
}

static mbx_status worker_rewind(void *impl, mbx_error *err) {
  wsb *ws = impl;
#ifdef MBX_ARENA_MALLOC
  (void)ws;
  mbxU_error_set(err, MBX_UNSUPPORTED, "mbx_sandbox_rewind: not available in this build "
                                       "(MBX_ARENA_MALLOC: the guest heap is not one arena)");
  return MBX_UNSUPPORTED;
#else
  if (!ws->has_checkpoint) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_sandbox_rewind: the sandbox has no "
                                              "checkpoint (call mbx_sandbox_checkpoint first)");
    return MBX_INVALID_ARGUMENT;
  }
  if (!worker_alive(ws) || ws->checkpoint_worker != ws->worker_gen) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_rewind: the worker that held the "
                   "checkpoint is gone (%s); reset the sandbox", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  mbxH_wp_begin(&ws->w, MBXH_WP_REWIND);
  uint32_t code;
  char msg[256];
  if (exchange(ws, MBXH_WP_STATUS, MBXH_WORKER_CONTROL_MS) != 0 ||
      read_status(ws, &code, msg, sizeof msg) != 0) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_rewind: %s", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  if (code != 0) {
    lose_worker(ws, "worker protocol error: it lost the checkpoint it acknowledged");
    mbxU_error_set(err, MBX_INTERNAL_ERROR, "mbx_sandbox_rewind: %s", ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  ws->paused = ws->checkpoint_paused;
  ws->tainted = 0;
  mbxC_port_local_seek(&ws->port, ws->checkpoint_draws);
  ws->port.stdin_pos = ws->checkpoint_stdin <= ws->port.stdin_len ? ws->checkpoint_stdin : 0;
  if (mbxC_port_local_fs_rewind(&ws->port) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_rewind: the state is rewound, but the "
                                       "memory files could not be (out of host memory): /tmp "
                                       "may be empty");
    return MBX_NO_MEMORY;
  }
  /* Across a reset the checkpoint's records are gone: the log breaks (port_record.h). */
  if (ws->recording) mbxC_port_record_rewind(&ws->record, ws->checkpoint_log);
  return MBX_OK;
#endif
}

/* internal_error with the reason the worker was lost: a result like any run's. */
static mbx_status lost_result(wsb *ws, mbx_result **out) {
  mbxV_outcome o;
  memset(&o, 0, sizeof o);
  o.status = MBXV_INTERNAL_ERROR;
  o.value_json = malloc(5);
  if (o.value_json) memcpy(o.value_json, "null", 5);
  o.value_len = 4;
  o.failed = 1;
  if (o.value_json == NULL || mbxV_error_from_message(ws->reason, strlen(ws->reason), 0,
                                                      &o.error) != 0) {
    mbxV_outcome_free(&o);
    *out = NULL;
    return MBX_INTERNAL_ERROR;
  }
  mbxV_output none;
  memset(&none, 0, sizeof none);
  *out = mbxH_result_new(&o, &none);
  ws->paused = 0;
  ws->tainted = 1;
  return MBX_INTERNAL_ERROR;
}

static int poisons(mbxV_status s) {
  return s != MBXV_OK && s != MBXV_SYNTAX_ERROR && s != MBXV_RUNTIME_ERROR && s != MBXV_PAUSED;
}

/* A DONE report into the result. */
static mbx_status finish(wsb *ws, const char *fn, int logged, mbx_result **out, mbx_error *err) {
  mbxH_wp_done d;
  char why[200];
  if (mbxH_wp_get_done(ws->rbuf, ws->rlen, &ws->bounds, &d, why, sizeof why) != 0) {
    char msg[256];
    snprintf(msg, sizeof msg, "worker protocol error: %s", why);
    lose_worker(ws, msg);
    return lost_result(ws, out);
  }
  if (d.outcome.pending_json && !pending_ok(ws, d.outcome.pending_json, d.outcome.pending_len)) {
    mbxH_wp_done_free(&d);
    lose_worker(ws, "worker protocol error: a pause at a call that is not one of the "
                    "sandbox's external functions");
    return lost_result(ws, out);
  }
  ws->heap = clamp_heap(ws, d.heap);
  ws->paused = d.paused;
  if (!ws->paused) mbxC_port_local_run_end(&ws->port);
  if (d.status >= MBXV_REFUSED_BASE) {
    mbx_status s = mbxH_status_from_vm(d.status);
    if (logged) mbxH_log_outcome(&ws->record, s, &d.outcome);
    mbxU_error_set(err, s, "%s", d.refusal[0] ? d.refusal : fn);
    return s;
  }
  if (poisons(d.status)) ws->tainted = 1;
  mbx_status s = mbxH_status_from_vm(d.status);
  if (logged) mbxH_log_outcome(&ws->record, s, &d.outcome);
  mbxV_output o;
  memset(&o, 0, sizeof o);
  o.data[0] = d.stream[0];
  o.data[1] = d.stream[1];
  o.len[0] = d.stream_len[0];
  o.len[1] = d.stream_len[1];
  o.total = d.output_total;
  *out = mbxH_result_new(&d.outcome, &o); /* takes the outcome */
  memset(&d.outcome, 0, sizeof d.outcome);
  mbxH_wp_done_free(&d);
  return s;
}

static mbx_status worker_run(void *impl, const mbxH_run_args *a, mbx_result **out,
                             mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_SANDBOX_POISONED, "%s: the sandbox's worker is gone (%s); reset "
                   "the sandbox", a->fn, ws->reason);
    return MBX_SANDBOX_POISONED;
  }
  char name[LUA_IDSIZE];
  const char *given = a->chunk_name && *a->chunk_name ? a->chunk_name : "input";
  size_t given_len = strlen(given), room = sizeof name - 2;
  if (given_len > room) snprintf(name, sizeof name, "=...%s", given + given_len - (room - 3));
  else snprintf(name, sizeof name, "=%s", given);
  atomic_store(&ws->interrupted, 0);
  ws->host_calls = 0;
  mbxC_port_local_run_begin(&ws->port);
  int logged = ws->recording && a->code_len <= ws->cfg.source_limit;
  if (logged)
    mbxC_port_record_run(&ws->record, a->chunk_name, a->code, a->code_len, a->inputs,
                         a->inputs_len);
  /* Counted when sent: a worker's report (even "refused") is not trusted to say whether
     guest code ran. */
  ws->runs++;
  mbxH_wp_begin(&ws->w, MBXH_WP_RUN);
  mbxH_wp_bytes(&ws->w, name, strlen(name));
  mbxH_wp_bytes(&ws->w, a->code ? a->code : "", a->code_len);
  mbxH_wp_u8(&ws->w, a->inputs != NULL);
  mbxH_wp_bytes(&ws->w, a->inputs ? a->inputs : "", a->inputs ? a->inputs_len : 0);
  mbxH_wp_u64(&ws->w, ws->port.stdin_epoch);
  ws->run_deadline = run_deadline_from_now(ws);
  int x = exchange(ws, MBXH_WP_DONE, run_budget_ms(ws));
  if (x == -2) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s: the code and inputs are too large to send "
                   "to the worker (%u MiB at most)", a->fn, (unsigned)(MBXH_WP_MAX_FRAME >> 20));
    return MBX_INVALID_ARGUMENT;
  }
  if (x != 0) return lost_result(ws, out);
  return finish(ws, a->fn, logged, out, err);
}

static mbx_status worker_resume(void *impl, const char *fn, const char *value, size_t len,
                                int as_error, mbx_result **out, mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_SANDBOX_POISONED, "%s: the sandbox's worker is gone (%s); reset "
                   "the sandbox", fn, ws->reason);
    return MBX_SANDBOX_POISONED;
  }
  atomic_store(&ws->interrupted, 0);
  mbxC_port_local_run_begin(&ws->port);
  if (ws->recording) mbxC_port_record_resume(&ws->record, as_error, value, len);
  ws->runs++;
  mbxH_wp_begin(&ws->w, MBXH_WP_RESUME);
  mbxH_wp_u8(&ws->w, (uint8_t)(as_error != 0));
  mbxH_wp_u8(&ws->w, value != NULL);
  mbxH_wp_bytes(&ws->w, value ? value : "", value ? len : 0);
  mbxH_wp_u64(&ws->w, ws->port.stdin_epoch);
  ws->run_deadline = run_deadline_from_now(ws);
  int x = exchange(ws, MBXH_WP_DONE, run_budget_ms(ws));
  if (x == -2) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s: the value is too large to send to the "
                   "worker", fn);
    return MBX_INVALID_ARGUMENT;
  }
  if (x != 0) return lost_result(ws, out);
  return finish(ws, fn, ws->recording, out, err);
}

/* The bytes io.stdin reads: held here, served to the worker a block at a time. */
static mbx_status worker_set_stdin(void *impl, const char *data, size_t len, mbx_error *err) {
  if (mbxC_port_local_set_stdin(&((wsb *)impl)->port, data, len) == 0) return MBX_OK;
  mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_set_stdin: out of host memory for %zu bytes",
                 len);
  return MBX_NO_MEMORY;
}

/* The filesystem view is the parent's (the worker only reaches it through the port). */
static mbxC_vfs *worker_files(void *impl) {
  return ((wsb *)impl)->port.vfs;
}

const mbxH_backend mbxH_worker_backend = {.version = MBXH_BACKEND_VERSION,
                                          .name = "worker",
                                          .create = worker_create,
                                          .destroy = worker_destroy,
                                          .run = worker_run,
                                          .resume = worker_resume,
                                          .reset = worker_reset,
                                          .checkpoint = worker_checkpoint,
                                          .rewind = worker_rewind,
                                          .interrupt = worker_interrupt,
                                          .paused = worker_paused,
                                          .heap_bytes = worker_heap_bytes,
                                          .recorder = worker_recorder,
                                          .files = worker_files,
                                          .set_stdin = worker_set_stdin};
