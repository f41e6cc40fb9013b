/* host/backend/worker_pool.c -- the worker backend's runtime-wide part: the zygote that forks
   the workers, the warm pool, and the crash penalty. */

/*
** One sandbox, one worker. The runtime's pool (mbxH_wpool) owns the zygote, a single-threaded
** moonbox-worker started with posix_spawn (this process is never forked: the host may have
** threads), and a few warm workers the zygote forked ahead of demand; spawn requests are
** pipelined (the replies are read at the next take), so taking a warm worker is one recvmsg.
**
** Crashes are rate-limited: after one, the zygote is re-executed (fresh ASLR for the next
** workers, no sibling shares a crashed worker's layout) at most once a second, and a burst of
** crashes slows worker creation down (crash-and-retry probing gets slow). The old zygote is
** retired, not stopped, while live sandboxes' workers are its children (it is their pid
** namespace's init: its exit would end them all), and stopped when the last is freed.
*/
#include "host/backend/worker_pool.h"

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

#include "capabilities/exec_uid.h"
#include "common/error.h"
#include "host/backend/worker_io.h"
#include "host/backend/worker_proto.h"

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
#define ZYGOTE_DEADLINE                                                                            \
  (&(mbxH_io_deadline){mbxH_io_now_ns() + (uint64_t)ZYGOTE_TIMEOUT_MS * 1000000u, NULL, 0, NULL,   \
                       NULL, NULL})

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
     worker's mbxH_wproc.primed becomes when its SPAWNED names prime_id. */
  uint32_t prime_id;
  int prime_pending;
  unsigned char *prime_fp;
  size_t prime_fp_len;
  uint64_t prime_key;
  unsigned forked; /* workers it forked, ever (MBX_CAP_WORKER_REEXEC) */
  /* As root, the uid its workers and init run as, held from the exec uid range while it lives
     (no other zygote or program has it); has_uid 0: nobody. */
  mbxC_uid_lease uid;
  int has_uid;
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
  mbxH_wproc warm[WARM_MAX];
  int nwarm;
  mbxH_wproc kept[KEPT_MAX]; /* one-tenant runtimes: workers of freed sandboxes, for reuse */
  int nkept;
  _Atomic unsigned live;
  uint64_t crash_at[CRASH_BURST]; /* the last crashes' times, a ring */
  unsigned crash_next;
  uint64_t penalty_next; /* when the next penalised worker may be given out (mbxH_wpool_take) */
  int zygote_stale;      /* a worker crashed: re-exec the zygote when the rate limit allows */
  /* MBX_CAP_WORKER_REEXEC: a zygote that forked this many workers is re-executed (0: never) */
  _Atomic unsigned reexec_every;
  mbxC_uid_pool *uids; /* the runtime's exec uid range (mbxH_wpool_set_uids); NULL: nobody */
  mbxH_wp_writer w;
  int in_frame;       /* inside zygote_frame: no nested read of a zygote's frames */
  uint32_t probed;    /* the last MBXH_WP_PROBED */
  uint32_t probed_us; /* ... and how long its child took to fork, jail itself and exit */
  int probe_got;
};

/* ---- the zygote ---- */

static void prime_forget(zygote *z) {
  free(z->prime_fp);
  z->prime_fp = NULL;
  z->prime_pending = 0;
}

static void zygote_in_reset(zygote *z) {
  for (int i = 0; i < z->in_nfds; i++)
    close(z->in_fds[i]);
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
  mbxH_io_close(&z->sock);
  mbxH_io_close(&z->mail);
  z->mail_unread = 0;
  int st;
  while (waitpid(z->pid, &st, 0) < 0 && errno == EINTR) {
  }
  z->pid = 0;
  /* Its workers and init died with it (PR_SET_PDEATHSIG, the pid namespace): nothing of its
     uid runs, and a worker can create no file, so the uid is free again. */
  if (z->has_uid) mbxC_uid_release(&z->uid, 1);
  z->has_uid = 0;
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
static int proc_quiet(mbxH_wproc *p) {
  if (p->pidfd < 0 || p->pid <= 0) return 1;
  struct pollfd pf = {p->pidfd, POLLIN, 0};
  if (poll(&pf, 1, 0) != 0) return 1;
  struct sched_param batch = {0};
  (void)sched_setscheduler(p->pid, SCHED_BATCH, &batch);
  return 0;
}

static void proc_sigkill(mbxH_wproc *p) {
  if (p->pidfd >= 0) syscall(SYS_pidfd_send_signal, p->pidfd, SIGKILL, NULL, 0);
}

static void proc_kill(mbxH_wproc *p) {
  (void)proc_quiet(p);
  proc_sigkill(p);
}

/* Close a worker's fds once it is killed; the zygote reaps it (asynchronously when nobody
   needs the reason). */

static void proc_forget(mbxH_wpool *pool, mbxH_wproc *p, int send_reap, int refill,
                        const mbxH_prime_offer *prime);
static void proc_forget_as(mbxH_wpool *pool, mbxH_wproc *p, int send_reap, int refill,
                           const mbxH_prime_offer *prime, int alive);

static int zygote_start(mbxH_wpool *pool, mbx_error *err) {
  if (access(pool->path, X_OK) != 0) {
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_sandbox_new: the worker %s is not an executable file (%s): install "
                   "moonbox (cmake --install puts moonbox-worker under libexec/moonbox), or "
                   "set its path with mbx_runtime_set_path(MBX_PATH_WORKER)",
                   pool->path, strerror(errno));
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
  /* As root, a uid of the zygote's own for its workers and init (issue 25, 8: they were the
     host's shared nobody, whose every process could signal the init and end the sandboxes),
     taken from the exec uid range when it is provably this process's; else nobody. */
  mbxC_uid_lease lease = {0, -1};
  char uidarg[16] = "", why[256];
  if (pool->uids && geteuid() == 0 && mbxC_uid_pool_scope(pool->uids, why, sizeof why) == 1 &&
      mbxC_uid_take(pool->uids, &lease, why, sizeof why) == 0) {
    /* Its workers can open nothing and the init nothing at all: no file of the uid can be
       left, so a host that exits without freeing the runtime does not quarantine it. */
    mbxC_uid_lease_leaves_no_files(&lease);
    snprintf(uidarg, sizeof uidarg, "%u", lease.uid);
    /* The zygote holds the uid's lock too, as fd 5 (the same open file, so the same flock),
       for as long as it lives: a host that exits without freeing its runtime must not free
       the uid while the zygote and its workers (which die with it) still run as it, or a
       program given the uid would share their RLIMIT_NPROC count. Workers close it (jail). */
    posix_spawn_file_actions_adddup2(&fa, lease.fd, 5);
    posix_spawn_file_actions_addclosefrom_np(&fa, 6);
  } else {
    posix_spawn_file_actions_addclosefrom_np(&fa, 5);
  }
  char *argv[] = {(char *)"moonbox-worker", (char *)"--zygote", uidarg[0] ? (char *)"--uid" : NULL,
                  uidarg, NULL};
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
    if (lease.fd >= 0) mbxC_uid_release(&lease, 1);
    mbxU_error_set(err, MBX_UNSUPPORTED,
                   "mbx_sandbox_new: cannot start the worker %s: %s (install moonbox: cmake "
                   "--install puts moonbox-worker under libexec/moonbox; or set its path with "
                   "mbx_runtime_set_path)",
                   pool->path, strerror(rc));
    return -1;
  }
  pool->z = (zygote){.pid = pid,
                     .sock = sv[0],
                     .mail = mv[0],
                     .id = ++pool->next_zid,
                     .started = mbxH_io_now_ns(),
                     .owed_max = owed_max,
                     .uid = lease,
                     .has_uid = lease.fd >= 0};
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
    struct msghdr msg = {
        .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf, .msg_controllen = sizeof u.buf};
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
    if (mbxH_io_wait(z->sock, POLLIN, ZYGOTE_DEADLINE) != 1) return -1;
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
      if (have >= MBXH_WP_HEADER + (size_t)len) return zygote_frame(pool, z, want_pid, status, got);
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
      for (int i = 0; i < nfds; i++)
        close(fds[i]);
      return -1;
    }
    mbxH_wproc p = {.pid = (pid_t)pid, .sock = fds[0], .pidfd = fds[1], .zid = z->id};
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
    z->forked++;
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
  for (int i = 0; i < nfds; i++)
    close(fds[i]);
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
  if (mbxH_io_write_all(z->sock, pool->w.data, pool->w.len, ZYGOTE_DEADLINE) == MBXH_IO_OK)
    return 0;
  z->broken = 1;
  return -1;
}

/* pool->w (a REAP) into the zygote's mailbox, where sending wakes nobody: 0, or -1 when it
   cannot take it now (full, or closed: then never again). The zygote reads it at its next
   wake-up, which the worker's death brings when the worker is killed after this. */
static int mail_send(mbxH_wpool *pool, zygote *z) {
  if (z->mail < 0 || mbxH_wp_finish(&pool->w) != 0) return -1;
  ssize_t n;
  do
    n = send(z->mail, pool->w.data, pool->w.len, MSG_DONTWAIT | MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n == (ssize_t)pool->w.len) {
    z->mail_unread++;
    return 0;
  }
  if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != ENOBUFS))
    mbxH_io_close(&z->mail);
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
static void drop_stale_prime(mbxH_wpool *pool, const mbxH_prime_offer *prime) {
  size_t len = prime->frame->len > MBXH_CREATE_OWN ? prime->frame->len - MBXH_CREATE_OWN : 0;
  for (int i = 0; i < pool->nwarm; i++) {
    mbxH_wproc *w = &pool->warm[i];
    if (w->primed == NULL ||
        (w->primed_len == len && memcmp(w->primed, prime->frame->data, len) == 0))
      continue;
    mbxH_wproc stale = *w;
    *w = pool->warm[--pool->nwarm];
    proc_kill(&stale);
    proc_forget(pool, &stale, 1, 0, NULL);
    return; /* at most one is primed */
  }
}

static void proc_forget(mbxH_wpool *pool, mbxH_wproc *p, int send_reap, int refill,
                        const mbxH_prime_offer *prime) {
  proc_forget_as(pool, p, send_reap, refill, prime, 0);
}

/* alive: the caller has not killed p: it is killed here, after its REAP is in the zygote's
   mailbox where that can be (so the freeing thread wakes nobody but the worker). */
static void proc_forget_as(mbxH_wpool *pool, mbxH_wproc *p, int send_reap, int refill,
                           const mbxH_prime_offer *prime, int alive) {
  zygote *z = p->pid > 0 ? zygote_of(pool, p->zid) : NULL;
  if (z == NULL || !send_reap) {
    if (alive) proc_kill(p);
    mbxH_io_close(&p->sock);
    mbxH_io_close(&p->pidfd);
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
  mbxH_io_close(&p->sock);
  mbxH_io_close(&p->pidfd);
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
static int proc_end(mbxH_wpool *pool, mbxH_wproc *p) {
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
    const mbxH_wproc *w = &pool->warm[i];
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
    mbxH_wproc p = pool->warm[i];
    pool->warm[i] = pool->warm[--pool->nwarm];
    proc_kill(&p);
    proc_forget(pool, &p, 1, 0, NULL);
  }
}

mbx_status mbxH_wpool_take(mbxH_wpool *pool, uint64_t memory_limit, int one_tenant,
                           const unsigned char *fp, size_t fp_len, mbxH_wproc *p, int *reused,
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
  uint64_t now = mbxH_io_now_ns();
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
  /* Every reexec_every workers, a new zygote (a fresh exec: new ASLR base, stack canary and
     pointer guard), so no more than that many siblings share one layout; a leak of one says
     nothing of the workers of later zygotes (issue 25, 8). Not rate-limited like a crash's:
     it happens at a pace the host sets, never a guest. */
  unsigned every = atomic_load(&pool->reexec_every);
  if (every && pool->z.pid > 0 && pool->z.forked >= every && pool->nretired < RETIRED_MAX)
    pool->zygote_stale = 2;
  if (pool->zygote_stale && pool->z.pid > 0 && pool->nretired < RETIRED_MAX &&
      (pool->zygote_stale == 2 || mbxH_io_now_ns() - pool->z.started >= ZYGOTE_REEXEC_MIN_NS)) {
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
        mbxH_wproc gone = pool->warm[i];
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
  mbxU_error_set(err, MBX_NO_MEMORY,
                 "mbx_sandbox_new: the worker zygote (%s) could not fork "
                 "a worker (out of processes or memory?)",
                 pool->path);
  return MBX_NO_MEMORY;
}

/* A one-tenant runtime's freed sandbox: its healthy worker is kept for the next sandbox of the
   same memory limit (which resets it to a pristine state with its CREATE); when the pool
   keeps enough already, it is ended. */
void mbxH_wpool_keep(mbxH_wpool *pool, mbxH_wproc *p) {
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
int mbxH_wpool_release(mbxH_wpool *pool, mbxH_wproc *p, int want_status, int crashed,
                       const mbxH_prime_offer *prime) {
  pthread_mutex_lock(&pool->mu);
  int st = -1;
  if (want_status) {
    st = proc_end(pool, p);
  } else {
    proc_forget_as(pool, p, 1, 1, crashed || pool->zygote_stale ? NULL : prime, 1);
  }
  retired_sweep(pool);
  if (crashed) {
    pool->crash_at[pool->crash_next++ % CRASH_BURST] = mbxH_io_now_ns();
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

void mbxH_wpool_set_uids(mbxH_wpool *pool, mbxC_uid_pool *uids) {
  if (pool) pool->uids = uids;
}

void mbxH_wpool_set_reexec(mbxH_wpool *pool, unsigned every) {
  if (pool) atomic_store(&pool->reexec_every, every);
}

void mbxH_wpool_free(mbxH_wpool *pool) {
  if (pool == NULL) return;
  pthread_mutex_lock(&pool->mu);
  drop_warm(pool);
  zygote_stop(&pool->z);
  for (int i = 0; i < pool->nretired; i++)
    zygote_stop(&pool->retired[i]);
  pool->nretired = 0;
  pthread_mutex_unlock(&pool->mu);
  pthread_mutex_destroy(&pool->mu);
  mbxH_wp_writer_free(&pool->w);
  free(pool);
}

mbx_status mbxH_wpool_probe(mbxH_wpool *pool, uint32_t *bits, uint32_t *jail_us, mbx_error *err) {
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
