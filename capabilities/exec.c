/* capabilities/exec.c -- the exec backend's library side: the allow list, spawning the helper,
   the wall clock, bounded capture and the probe (exec.h); the bwrap argument list is
   exec_args.c's. */
#include "capabilities/exec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capabilities/exec_copy.h" /* mbxC_exec_reserve, mbxC_exec_fail */
#include "capabilities/vfs.h"
#include "common/bytes.h"

/* ---- the policy's part ---- */

void mbxC_exec_spec_defaults(mbxC_exec_spec *s) {
  memset(s, 0, sizeof *s);
  s->timeout_ms = MBXC_DEFAULT_EXEC_TIMEOUT_MS;
  s->memory = MBXC_DEFAULT_EXEC_MEMORY;
  s->pids = MBXC_DEFAULT_EXEC_PIDS;
  s->output = MBXC_DEFAULT_EXEC_OUTPUT;
  s->max_runs = MBXC_DEFAULT_EXEC_RUNS;
}

void mbxC_exec_spec_clear(mbxC_exec_spec *s) {
  for (size_t i = 0; i < s->allow_count; i++)
    free(s->allow[i]);
  free(s->allow);
  s->allow = NULL;
  s->allow_count = 0;
}

int mbxC_exec_spec_copy(mbxC_exec_spec *dst, const mbxC_exec_spec *src) {
  *dst = *src;
  dst->allow = NULL;
  dst->allow_count = 0;
  if (src->allow_count == 0) return 0;
  if ((dst->allow = calloc(src->allow_count, sizeof *dst->allow)) == NULL) return -1;
  for (size_t i = 0; i < src->allow_count; i++) {
    dst->allow[i] = mbxU_dup_bytes(src->allow[i], strlen(src->allow[i]));
    dst->allow_count = i + 1;
    if (dst->allow[i] == NULL) {
      mbxC_exec_spec_clear(dst);
      return -1;
    }
  }
  return 0;
}

int mbxC_exec_allow(mbxC_exec_spec *s, const char *program, char *why, size_t why_size) {
  size_t n = program ? strlen(program) : 0;
  if (n == 0 || n > MBXC_VFS_NAME_MAX || !mbxC_vfs_is_canonical(program, n) ||
      strcmp(program, "/") == 0) {
    snprintf(why, why_size,
             "the program must be an absolute, normalized path of at most %d bytes as the "
             "sandbox sees it (e.g. /usr/bin/python3), not '%.80s'",
             MBXC_VFS_NAME_MAX, program ? program : "(null)");
    return -1;
  }
  for (size_t i = 0; i < s->allow_count; i++)
    if (strcmp(s->allow[i], program) == 0) return 0;
  if (s->allow_count >= MBXC_EXEC_MAX_ALLOW) {
    snprintf(why, why_size, "at most %d programs can be allowed", MBXC_EXEC_MAX_ALLOW);
    return -1;
  }
  char *copy = mbxU_dup_bytes(program, n);
  char **grown = copy ? realloc(s->allow, (s->allow_count + 1) * sizeof *grown) : NULL;
  if (grown == NULL) {
    free(copy);
    return -2;
  }
  s->allow = grown;
  s->allow[s->allow_count++] = copy;
  return 0;
}

const char *mbxC_exec_resolve(const mbxC_exec_spec *s, const char *argv0) {
  if (argv0 == NULL || *argv0 == '\0') return NULL;
  int bare = strchr(argv0, '/') == NULL;
  for (size_t i = 0; i < s->allow_count; i++) {
    const char *a = s->allow[i];
    if (strcmp(a, argv0) == 0) return a;
    if (bare) {
      const char *base = strrchr(a, '/') + 1;
      if (strcmp(base, argv0) == 0) return a;
    }
  }
  return NULL;
}

/* ---- the request the helper reads (host/exec/helper.c parses it) ----
   Items "<tag><decimal length>:<bytes>": b bwrap path, u host uid (0: keep), n nproc, m
   address space bytes (0: not limited, the memory cgroup is), g a cgroup.procs file to join, f file
   size bytes, o open files, c CPU seconds, k mount fd count, a one bwrap option argument (into
   --args), x one word of the command ("--" first), F a memory file ("path\0bytes"). */

typedef struct reqbuf {
  char *p;
  size_t len, cap;
  int failed;
} reqbuf;

static void req_item(reqbuf *r, char tag, const char *data, size_t len) {
  char head[32];
  int n = snprintf(head, sizeof head, "%c%zu:", tag, len);
  if (mbxC_exec_reserve(&r->p, &r->cap, r->len + (size_t)n + len) != 0) {
    r->failed = 1;
    return;
  }
  memcpy(r->p + r->len, head, (size_t)n);
  memcpy(r->p + r->len + n, data, len);
  r->len += (size_t)n + len;
}

static void req_num(reqbuf *r, char tag, uint64_t v) {
  char num[32];
  int n = snprintf(num, sizeof num, "%llu", (unsigned long long)v);
  req_item(r, tag, num, (size_t)n);
}

/* ---- running ---- */

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int grow_to(char **buf, size_t *cap, size_t want) {
  if (*cap >= want) return 0;
  char *p = realloc(*buf, want ? want : 1);
  if (p == NULL) return -1;
  *buf = p;
  *cap = want;
  return 0;
}

void mbxC_exec_buffers_free(mbxC_exec_buffers *bufs) {
  free(bufs->out);
  free(bufs->err);
  free(bufs->back);
  memset(bufs, 0, sizeof *bufs);
}

/* One captured stream: bytes past cap are read and dropped, so the program never blocks on
   a full pipe. */
typedef struct stream {
  int fd;
  char *buf;
  size_t len, cap;
  int truncated;
} stream;

static void drain(stream *s) {
  char scratch[16384];
  for (;;) {
    ssize_t n = read(s->fd, scratch, sizeof scratch);
    if (n > 0) {
      size_t keep = s->len < s->cap ? s->cap - s->len : 0;
      if ((size_t)n > keep) s->truncated = 1;
      if (keep > (size_t)n) keep = (size_t)n;
      memcpy(s->buf + s->len, scratch, keep);
      s->len += keep;
      continue;
    }
    if (n == 0) {
      close(s->fd);
      s->fd = -1;
    }
    return; /* EAGAIN: later; an error: the stream is given up at the end */
  }
}

/* The shim's copy-back, kept up to cap bytes in a buffer that grows as it comes. */
static void drain_back(int *fd, mbxC_exec_buffers *bufs, size_t cap) {
  char scratch[65536];
  for (;;) {
    ssize_t n = read(*fd, scratch, sizeof scratch);
    if (n > 0) {
      if (bufs->back_over || bufs->back_len + (size_t)n > cap) {
        bufs->back_over = 1;
        continue;
      }
      if (bufs->back_len + (size_t)n > bufs->back_cap) {
        size_t want = bufs->back_cap ? bufs->back_cap : 65536;
        while (want < bufs->back_len + (size_t)n)
          want *= 2;
        if (want > cap) want = cap;
        if (grow_to(&bufs->back, &bufs->back_cap, want) != 0) {
          bufs->back_over = 1;
          continue;
        }
      }
      memcpy(bufs->back + bufs->back_len, scratch, (size_t)n);
      bufs->back_len += (size_t)n;
      continue;
    }
    if (n == 0) {
      close(*fd);
      *fd = -1;
    }
    return;
  }
}

/* The status lines bwrap writes (--json-status-fd) and the helper's own error line. */
typedef struct status_text {
  char buf[2048];
  size_t len;
} status_text;

static void read_status(int *fd, status_text *st) {
  for (;;) {
    char scratch[512];
    ssize_t n = read(*fd, scratch, sizeof scratch);
    if (n > 0) {
      size_t keep = sizeof st->buf - 1 - st->len;
      if (keep > (size_t)n) keep = (size_t)n;
      memcpy(st->buf + st->len, scratch, keep);
      st->len += keep;
      st->buf[st->len] = '\0';
      continue;
    }
    if (n == 0) {
      close(*fd);
      *fd = -1;
    }
    return;
  }
}

/* The number after "key": in the status text, or -1. */
static long status_number(const status_text *st, const char *key) {
  const char *p = strstr(st->buf, key);
  if (p == NULL) return -1;
  p += strlen(key);
  while (*p == '"' || *p == ':' || *p == ' ')
    p++;
  if (*p < '0' || *p > '9') return -1;
  return strtol(p, NULL, 10);
}

static int set_nonblock(int fd) {
  int fl = fcntl(fd, F_GETFL);
  return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

static void close_fd(int *fd) {
  if (*fd >= 0) close(*fd);
  *fd = -1;
}

/* ---- one run, mechanism by mechanism ----
   As nsjail's contain.cc: run_as is a short orchestrator over one function per mechanism (the
   cgroups and limits, the request, the copy-in, the helper's fds and spawn, the wall clock and
   the captured streams, the outcome), each of which records what it made in the run's state so
   run_release can undo all of it whatever step failed. */

typedef struct exec_run {
  mbxC_exec_backend *b;
  const mbxC_exec_plan *plan;
  const mbxC_exec_spec *spec;
  uint32_t uid;        /* the host uid the helper switches to (0: keep) */
  uint64_t timeout_ms; /* the program's own */
  mbxC_cgroup_run cgr;
  int cg_made;
  unsigned limits; /* MBXC_EXEC_LIMIT_* of this run */
  uint64_t nproc;  /* RLIMIT_NPROC of the run's uid */
  /* The helper's fds before the spawn (0-2, the request, the status, the copy-back, the
     copy-in), and ours. */
  int child[7];
  int in, out, err, status, back, copy;
  pid_t pid;
  int pidfd;
  int wstatus; /* the helper's (bwrap's) wait status */
  uint64_t start;
  /* What the supervision saw. */
  stream so, se;
  status_text st;
  int timed_out, deadline_hit, interrupted;
  long peak; /* the most processes seen in the run's cgroups at once (-1: not counted) */
} exec_run;

/* Kill what is left of a run through its cgroups and remove them; a cgroup that stays is
   counted (moonbox doctor shows the count). */
static void cgroup_done(mbxC_exec_backend *b, mbxC_cgroup_run *cgr) {
  if (mbxC_cgroup_run_remove(cgr) != 0) atomic_fetch_add(&b->cgroup_leaks, 1);
}

/* The parent of a process, from /proc/<pid>/stat (the field after the command's last ')'),
   or -1. */
static pid_t parent_of(long pid) {
  char path[64], buf[512];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char *p = strrchr(buf, ')');
  long ppid = -1;
  if (!p || sscanf(p + 1, " %*c %ld", &ppid) != 1) return -1;
  return (pid_t)ppid;
}

/* Kill a run's process tree, and reap bwrap (the helper became it). The sandbox's pid 1, the
   shim, goes first: the pid namespace dies with it, and bwrap's monitor reaps it and exits.
   Killing bwrap first (or the whole cgroup at once) would leave the shim, through
   --die-with-parent, a zombie of the run's uid under the host's init, counted by that uid's
   RLIMIT_NPROC after the uid is given back. The shim's pid is bwrap's report; it names the
   shim only while its parent is this run's bwrap (our child, not yet reaped, so its pid is not
   reused), checked through a pidfd so that the check and the kill are about one process.
   bwrap itself is killed when it has not exited within a second. */
static void kill_tree(exec_run *r, int *wstatus) {
  if (r->pid <= 0) return;
  if (r->status >= 0) read_status(&r->status, &r->st);
  long shim = status_number(&r->st, "\"child-pid\"");
  int killed = 0;
  int fd = shim > 1 ? (int)syscall(SYS_pidfd_open, (pid_t)shim, 0) : -1;
  if (fd >= 0) {
    if (parent_of(shim) == r->pid)
      killed = syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0) == 0;
    close(fd);
  }
  int st = 0;
  for (int i = 0; killed && i < 100; i++) {
    if (waitpid(r->pid, &st, WNOHANG) == r->pid) goto reaped;
    struct timespec ts = {0, 10000000};
    nanosleep(&ts, NULL);
  }
  kill(r->pid, SIGKILL);
  waitpid(r->pid, &st, 0);
reaped:
  if (wstatus) *wstatus = st;
  r->pid = -1;
}

static void run_release(exec_run *r) {
  for (int i = 0; i < 7; i++)
    close_fd(&r->child[i]);
  close_fd(&r->in);
  close_fd(&r->out);
  close_fd(&r->err);
  close_fd(&r->status);
  close_fd(&r->back);
  close_fd(&r->copy);
  close_fd(&r->pidfd);
  kill_tree(r, NULL);
  if (r->cg_made) cgroup_done(r->b, &r->cgr);
  r->cg_made = 0;
}

/* The run's cgroups (those this host has): memory and pids limits for the whole tree, and the
   kill. Where the memory cgroup holds, RLIMIT_AS is not set: the cgroup charges the pages a
   process really uses (tmpfs and memfds included), and its OOM kill is what the result
   reports; RLIMIT_AS would turn the same hog into a malloc failure the program reports as it
   likes. Without it, RLIMIT_AS bounds each process, and memfd_create and shmget are refused:
   no rlimit counts their pages (one process held 512 MiB of each under a 64M RLIMIT_AS).
   RLIMIT_NPROC stays as a per-uid bound a little above pids.max (which also counts bwrap's
   two processes and the shim), so the cgroup is the limit that bites and is reported. */
static void run_limits(exec_run *r) {
  char cgname[64];
  if (r->b->cg_owner.token[0])
    snprintf(cgname, sizeof cgname, "moonbox-%s-%llu", r->b->cg_owner.token,
             (unsigned long long)atomic_fetch_add(&r->b->cgroup_runs, 1));
  else
    snprintf(cgname, sizeof cgname, "moonbox-%ld-%llu", (long)getpid(),
             (unsigned long long)atomic_fetch_add(&r->b->cgroup_runs, 1));
  mbxC_cgroup_run_create(&r->b->cg, cgname, r->spec->memory, r->spec->pids, &r->cgr);
  r->cg_made = 1;
  r->limits = MBXC_EXEC_LIMIT_RLIMIT_NPROC;
  if (r->cgr.dir[MBXC_CG_MEMORY][0])
    r->limits |= MBXC_EXEC_LIMIT_CGROUP_MEMORY;
  else
    r->limits |= MBXC_EXEC_LIMIT_RLIMIT_AS | MBXC_EXEC_LIMIT_NO_SHARED_MEMORY;
  if (r->cgr.dir[MBXC_CG_PIDS][0]) r->limits |= MBXC_EXEC_LIMIT_CGROUP_PIDS;
  if (r->cgr.dir[MBXC_CG_KILL][0])
    r->limits |=
        r->cgr.v2[MBXC_CG_KILL] ? MBXC_EXEC_LIMIT_CGROUP_KILL : MBXC_EXEC_LIMIT_FREEZER_KILL;
  r->nproc = r->spec->pids + ((r->limits & MBXC_EXEC_LIMIT_CGROUP_PIDS) ? 4 : 0);
}

/* A memfd holding len bytes of data, at offset 0 (-1: errno). */
static int memfd_with(const char *name, const char *data, size_t len) {
  int fd = memfd_create(name, MFD_CLOEXEC);
  for (size_t off = 0; fd >= 0 && off < len;) {
    ssize_t n = write(fd, data + off, len - off);
    if (n <= 0) {
      close_fd(&fd);
      break;
    }
    off += (size_t)n;
  }
  if (fd >= 0 && lseek(fd, 0, SEEK_SET) != 0) close_fd(&fd);
  return fd;
}

/* The helper's request (the items its parser knows) in a memfd at r->child[3]. */
static int run_request(exec_run *r, mbxC_port_error *e) {
  const mbxC_exec_plan *plan = r->plan;
  mbxC_strlist args = {0};
  size_t command_at = 0;
  if (mbxC_exec_build_args(plan, &r->b->image, &args, &command_at) != 0) {
    mbxC_strlist_free(&args);
    return mbxC_exec_fail(e, ENOMEM, "out of host memory");
  }
  reqbuf q = {0};
  req_item(&q, 'b', r->b->bwrap, strlen(r->b->bwrap));
  req_num(&q, 'u', r->uid);
  req_num(&q, 'n', r->nproc);
  req_num(&q, 'm', (r->limits & MBXC_EXEC_LIMIT_CGROUP_MEMORY) ? 0 : r->spec->memory);
  req_num(&q, 'h', (r->limits & MBXC_EXEC_LIMIT_NO_SHARED_MEMORY) ? 1 : 0);
  char procs[MBXC_CG_PATH_MAX + 16];
  for (int i = 0; mbxC_cgroup_run_procs(&r->cgr, i, procs, sizeof procs); i++)
    req_item(&q, 'g', procs, strlen(procs));
  /* RLIMIT_FSIZE: no file the process can write is larger than its tmpfs (every writable
     place is a size-capped tmpfs), and a copied-in file as large as its mount's must fit (the
     shim writes it: below this it died of SIGXFSZ and nothing came back). */
  uint64_t fsize = plan->tmp_bytes > r->spec->output ? plan->tmp_bytes : r->spec->output;
  if (plan->copy && plan->overlay_bytes > fsize) fsize = plan->overlay_bytes;
  if (plan->copy && plan->tmp_bytes + plan->tmp_slack > fsize)
    fsize = plan->tmp_bytes + plan->tmp_slack;
  req_num(&q, 'f', fsize);
  req_num(&q, 'o', 256 + plan->file_count);
  req_num(&q, 'c', (r->timeout_ms + 999) / 1000 + 1);
  req_num(&q, 'k', plan->mount_count);
  for (size_t i = 0; i < args.count; i++)
    req_item(&q, i < command_at ? 'a' : 'x', args.items[i], strlen(args.items[i]));
  for (size_t i = 0; i < plan->file_count && !q.failed; i++) {
    /* "path\0bytes": the path is a canonical virtual path (no NUL), the bytes anything. */
    const mbxC_fs_file *f = &plan->files[i];
    size_t pl = strlen(f->path);
    char *it = malloc(pl + 1 + f->len);
    if (it == NULL) {
      q.failed = 1;
      break;
    }
    memcpy(it, f->path, pl + 1);
    if (f->len) memcpy(it + pl + 1, f->data, f->len);
    req_item(&q, 'F', it, pl + 1 + f->len);
    free(it);
  }
  mbxC_strlist_free(&args);
  if (!q.failed) r->child[3] = memfd_with("moonbox-exec-request", q.p, q.len);
  free(q.p);
  if (q.failed) return mbxC_exec_fail(e, ENOMEM, "out of host memory");
  if (r->child[3] < 0)
    return mbxC_exec_fail(e, ENOMEM, "cannot prepare the exec request (%s)", strerror(errno));
  return 0;
}

/* The socket the copy of the view streams through (exec_copy.h), its shim's end at
   r->child[6]; with nothing to copy our end is closed at once (the shim reads an empty copy). */
static int run_copy_socket(exec_run *r, mbxC_port_error *e) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
    return mbxC_exec_fail(e, ENOMEM, "cannot prepare the copy of the view (%s)", strerror(errno));
  r->child[6] = sv[0];
  r->copy = sv[1];
  if (r->plan->copy == NULL) close_fd(&r->copy);
  return 0;
}

/* The copy of the view, sent while the shim unpacks it (before the program starts). The
   shim's end closing early is not this step's failure: the outcome says what happened. */
static int run_copy_in(exec_run *r, const mbxC_wait *wait, mbxC_port_error *e) {
  if (r->copy < 0) return 0;
  set_nonblock(r->copy);
  int rc = mbxC_exec_copy_send(r->plan->copy, r->copy, wait, e);
  close_fd(&r->copy);
  if (rc != 0 && e->errnum == EPIPE) rc = 0;
  if (rc != 0) mbxC_cgroup_run_kill(&r->cgr);
  return rc;
}

/* The pipes, and the helper spawned with exactly its fds (exec.h draws them). */
static int run_spawn(exec_run *r, mbxC_port_error *e) {
  const mbxC_exec_plan *plan = r->plan;
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1}, status[2] = {-1, -1};
  int back[2] = {-1, -1};
  /* stdin is a socket pair, so writing to a program that exited answers EPIPE through
     MSG_NOSIGNAL instead of raising SIGPIPE in the host (a library must not touch the host's
     signal dispositions). */
  int ok = socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) == 0 &&
           pipe2(out, O_CLOEXEC) == 0 && pipe2(err, O_CLOEXEC) == 0 &&
           pipe2(status, O_CLOEXEC) == 0 && pipe2(back, O_CLOEXEC) == 0;
  int err_no = errno;
  r->child[0] = in[0], r->in = in[1];
  r->child[1] = out[1], r->out = out[0];
  r->child[2] = err[1], r->err = err[0];
  r->child[4] = status[1], r->status = status[0];
  r->child[5] = back[1], r->back = back[0];
  if (!ok) return mbxC_exec_fail(e, ENOMEM, "cannot prepare the exec run (%s)", strerror(err_no));
  /* Every source fd is first copied above the target range (0 .. first mount fd + mounts),
     so no dup2 below overwrites a source another dup2 still needs (a view's dirfd is often
     fd 3 or 4 in a small host). */
  int top = MBXC_EXEC_FIRST_MOUNT_FD + (int)plan->mount_count;
  int src[7 + 64];
  int nsrc = 0;
  for (int i = 0; ok && i < 7; i++) {
    src[nsrc] = fcntl(r->child[i], F_DUPFD_CLOEXEC, top);
    ok = src[nsrc++] >= 0;
  }
  for (size_t i = 0; ok && i < plan->mount_count; i++) {
    src[nsrc] = fcntl(plan->mounts[i].dirfd, F_DUPFD_CLOEXEC, top);
    ok = src[nsrc++] >= 0;
  }
  err_no = errno;
  posix_spawn_file_actions_t fa;
  int fa_ok = ok && posix_spawn_file_actions_init(&fa) == 0;
  int spawn_err = 0;
  if (fa_ok) {
    /* dup2 clears FD_CLOEXEC on the target: exactly these fds reach the helper. */
    for (int i = 0; i < nsrc; i++)
      posix_spawn_file_actions_adddup2(&fa, src[i], i);
    posix_spawn_file_actions_addclosefrom_np(&fa, top);
    char *const argv[] = {(char *)"moonbox-exec", NULL};
    char parent[32]; /* the helper dies with us from its start (host/exec/helper.c) */
    snprintf(parent, sizeof parent, "MOONBOX_PARENT=%ld", (long)getpid());
    char *const envp[] = {parent, NULL};
    spawn_err = posix_spawn(&r->pid, r->b->helper, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    if (spawn_err != 0) r->pid = -1;
  }
  for (int i = 0; i < nsrc; i++)
    if (src[i] >= 0) close(src[i]);
  /* The helper's ends are its own now. */
  for (int i = 0; i < 7; i++)
    close_fd(&r->child[i]);
  if (r->pid < 0) {
    if (spawn_err)
      return mbxC_exec_fail(e, ENOSYS,
                            "the exec backend is unavailable: cannot start the helper %s (%s)",
                            r->b->helper, strerror(spawn_err));
    return mbxC_exec_fail(e, ENOMEM, "cannot prepare the exec request (%s)", strerror(err_no));
  }
  r->pidfd = (int)syscall(SYS_pidfd_open, r->pid, 0);
  r->start = now_ns();
  return 0;
}

/* The wall clock, stdin, stdout/stderr to their caps and past them, the status lines and the
   copy-back, until the tree is gone: the program's timeout, the run's deadline or an
   interrupt kill the sandbox's pid 1, whose death takes the pid namespace (kill_tree), then
   what is left in the cgroups. Without a pids cgroup the
   processes in the run's cgroups are counted as it goes, so RLIMIT_NPROC reached is
   reported. */
static void run_supervise(exec_run *r, const char *stdin_bytes, size_t stdin_len,
                          const mbxC_wait *wait, mbxC_exec_buffers *bufs) {
  r->so = (stream){r->out, bufs->out, 0, r->spec->output, 0};
  r->se = (stream){r->err, bufs->err, 0, r->spec->output, 0};
  r->out = r->err = -1; /* the streams own them now */
  bufs->back_len = 0;
  bufs->back_over = 0;
  size_t in_off = 0;
  set_nonblock(r->so.fd);
  set_nonblock(r->se.fd);
  set_nonblock(r->status);
  set_nonblock(r->in);
  set_nonblock(r->back);
  if (stdin_len == 0) close_fd(&r->in);
  int count = !(r->limits & MBXC_EXEC_LIMIT_CGROUP_PIDS);
  r->peak = -1;
  uint64_t own_deadline = r->start + r->timeout_ms * 1000000ull;
  int exited = 0;
  uint64_t exit_ns = 0;
  for (;;) {
    if (!exited && waitpid(r->pid, &r->wstatus, WNOHANG) == r->pid) {
      exited = 1;
      exit_ns = now_ns();
      r->pid = -1;
    }
    uint64_t now = now_ns();
    /* Once the tree is gone the pipes close; a descendant that escaped the pid namespace
       cannot exist, but a bounded grace keeps a wedged pipe from holding the run. */
    if (exited && ((r->so.fd < 0 && r->se.fd < 0 && r->status < 0 && r->back < 0) ||
                   now > exit_ns + 500000000ull))
      break;
    if (!exited) {
      if (count) {
        long n = mbxC_cgroup_run_count(&r->cgr);
        if (n > r->peak) r->peak = n;
      }
      int stop = 0;
      if (wait && wait->deadline_ns && now >= wait->deadline_ns)
        r->deadline_hit = stop = 1;
      else if (now >= own_deadline)
        r->timed_out = stop = 1;
      else if (wait && wait->interrupted && wait->interrupted(wait->ctx))
        r->interrupted = stop = 1;
      if (stop) {
        kill_tree(r, &r->wstatus);
        mbxC_cgroup_run_kill(&r->cgr);
        exited = 1;
        exit_ns = now_ns();
        continue;
      }
    }
    struct pollfd pf[6];
    int n = 0, ip = -1;
    if (r->back >= 0) pf[n++] = (struct pollfd){r->back, POLLIN, 0};
    if (r->so.fd >= 0) pf[n++] = (struct pollfd){r->so.fd, POLLIN, 0};
    if (r->se.fd >= 0) pf[n++] = (struct pollfd){r->se.fd, POLLIN, 0};
    if (r->status >= 0) pf[n++] = (struct pollfd){r->status, POLLIN, 0};
    if (r->in >= 0) {
      ip = n;
      pf[n++] = (struct pollfd){r->in, POLLOUT, 0};
    }
    if (r->pidfd >= 0 && !exited) pf[n++] = (struct pollfd){r->pidfd, POLLIN, 0};
    uint64_t until = exited ? exit_ns + 500000000ull : own_deadline;
    if (!exited && wait && wait->deadline_ns && wait->deadline_ns < until)
      until = wait->deadline_ns;
    uint64_t left_ms = until > now ? (until - now) / 1000000u + 1 : 0;
    /* Short slices: the interrupt flag is polled, and without a pidfd the exit is seen. */
    if (left_ms > 50) left_ms = 50;
    poll(pf, (nfds_t)n, (int)left_ms);
    if (r->so.fd >= 0) drain(&r->so);
    if (r->se.fd >= 0) drain(&r->se);
    if (r->status >= 0) read_status(&r->status, &r->st);
    if (r->back >= 0) drain_back(&r->back, bufs, r->plan->copy_back_cap);
    if (ip >= 0 && r->in >= 0 && (pf[ip].revents & (POLLOUT | POLLERR | POLLHUP))) {
      ssize_t w =
          send(r->in, stdin_bytes + in_off, stdin_len - in_off, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (w > 0) in_off += (size_t)w;
      if ((w < 0 && errno != EAGAIN) || in_off == stdin_len) close_fd(&r->in);
    }
  }
  close_fd(&r->in);
  close_fd(&r->so.fd);
  close_fd(&r->se.fd);
  if (r->status >= 0) read_status(&r->status, &r->st);
  close_fd(&r->status);
  if (r->back >= 0) drain_back(&r->back, bufs, r->plan->copy_back_cap);
  close_fd(&r->back);
}

/* How bwrap ended, for a setup failure it said nothing about. */
static void describe_wait(int wstatus, char *out, size_t size) {
  if (WIFSIGNALED(wstatus))
    snprintf(out, size, "bwrap was killed by signal %d", WTERMSIG(wstatus));
  else if (WIFEXITED(wstatus))
    snprintf(out, size, "bwrap exited with status %d and no message", WEXITSTATUS(wstatus));
  else
    snprintf(out, size, "bwrap ended with no message");
}

/* The result, or the error, of a supervised run. The limits are read first: a run the
   memory cgroup's OOM killer or a pids limit ended is that limit, even when what died was
   bwrap during its setup (a memfd hog under the memory cgroup makes the OOM killer pick
   bwrap, whose status line then never comes). */
static int run_outcome(exec_run *r, mbxC_exec_buffers *bufs, mbxC_exec_result *res,
                       mbxC_port_error *e) {
  int oom = 0, pids_max = 0;
  mbxC_cgroup_run_outcome(&r->cgr, &oom, &pids_max);
  if (!(r->limits & MBXC_EXEC_LIMIT_CGROUP_PIDS) && r->peak >= 0 && (uint64_t)r->peak >= r->nproc)
    pids_max = 1; /* the run's own uid had RLIMIT_NPROC processes: its forks were refused */
  uint64_t wall = now_ns() - r->start;
  if (r->deadline_hit)
    return mbxC_exec_fail(e, MBXC_E_TIMEDOUT,
                          "the run's time limit was reached while the program ran "
                          "(its process tree was killed)");
  if (r->interrupted)
    return mbxC_exec_fail(e, EINTR, "interrupted (the program's process tree was killed)");
  const status_text *st = &r->st;
  /* The helper's own failure (before bwrap): "moonbox-exec: ..." on the status pipe. */
  const char *herr = strstr(st->buf, "moonbox-exec: ");
  long child = status_number(st, "\"child-pid\"");
  long code = status_number(st, "\"exit-code\"");
  long shim_sig = status_number(st, "\"moonbox-shim-signal\"");
  long shim_code = status_number(st, "\"moonbox-shim-exit\"");
  int started = child >= 0 && code >= 0;
  if (!r->timed_out && !started && !oom && !pids_max) {
    if (herr) {
      size_t hl = strcspn(herr, "\n");
      return mbxC_exec_fail(e, EIO, "the exec backend could not start the program: %.*s", (int)hl,
                            herr);
    }
    /* bwrap gave up during setup: its message is on stderr (or, with none, how it ended). */
    char how[96];
    describe_wait(r->wstatus, how, sizeof how);
    size_t l = r->se.len < 200 ? r->se.len : 200;
    return mbxC_exec_fail(e, EIO, "the exec backend could not set up the sandbox: %.*s",
                          l ? (int)l : (int)strlen(how), l ? bufs->err : how);
  }
  res->out = bufs->out;
  res->out_len = r->so.len;
  res->err = bufs->err;
  res->err_len = r->se.len;
  res->truncated = r->so.truncated || r->se.truncated;
  res->wall_ms = wall / 1000000u;
  res->timed_out = r->timed_out;
  res->limits = r->limits;
  res->memory_limit = oom;
  res->pids_limit = pids_max;
  /* The shim's report is the program's own wait status; bwrap's exit code folds a signal
     into 128 + n and is read only when the shim could not report (the program killed it). */
  if (r->timed_out || (oom && shim_sig < 0 && shim_code < 0 && !started)) {
    res->exit_code = -1;
    res->signal = SIGKILL;
  } else if (shim_sig > 0) {
    res->exit_code = -1;
    res->signal = (int)shim_sig;
  } else if (shim_code >= 0) {
    res->exit_code = (int)shim_code;
  } else if (code > 128 && code < 128 + 65) {
    res->exit_code = -1;
    res->signal = (int)(code - 128);
  } else if (code >= 0) {
    res->exit_code = (int)code;
  } else {
    res->exit_code = -1; /* the tree ended by a limit before bwrap reported */
    res->signal = SIGKILL;
  }
  return 0;
}

/* One run as host uid (0: the helper does not change uids). */
static int run_as(mbxC_exec_backend *b, uint32_t uid, const mbxC_exec_plan *plan,
                  const mbxC_exec_spec *spec, const char *stdin_bytes, size_t stdin_len,
                  uint64_t timeout_ms, const mbxC_wait *wait, mbxC_exec_buffers *bufs,
                  mbxC_exec_result *res, mbxC_port_error *e) {
  memset(res, 0, sizeof *res);
  if (plan->mount_count > 64) return mbxC_exec_fail(e, EINVAL, "too many mounts for exec");
  if (grow_to(&bufs->out, &bufs->out_cap, spec->output) != 0 ||
      grow_to(&bufs->err, &bufs->err_cap, spec->output) != 0)
    return mbxC_exec_fail(e, ENOMEM, "out of host memory for the output of exec");
  exec_run r = {.b = b,
                .plan = plan,
                .spec = spec,
                .uid = uid,
                .timeout_ms = timeout_ms,
                .in = -1,
                .out = -1,
                .err = -1,
                .status = -1,
                .back = -1,
                .copy = -1,
                .pid = -1,
                .pidfd = -1};
  for (int i = 0; i < 7; i++)
    r.child[i] = -1;
  run_limits(&r);
  int rc = run_request(&r, e);
  if (rc == 0) rc = run_copy_socket(&r, e);
  if (rc == 0) rc = run_spawn(&r, e);
  if (rc == 0) rc = run_copy_in(&r, wait, e);
  if (rc == 0) {
    run_supervise(&r, stdin_bytes, stdin_len, wait, bufs);
    rc = run_outcome(&r, bufs, res, e);
  }
  run_release(&r);
  return rc;
}

/* One run, the probe's outcome not consulted (the probe's smoke run comes through here): as
   a uid of its own when the backend isolates uids. */
static int run_unprobed(mbxC_exec_backend *b, const mbxC_exec_plan *plan,
                        const mbxC_exec_spec *spec, const char *stdin_bytes, size_t stdin_len,
                        uint64_t timeout_ms, const mbxC_wait *wait, mbxC_exec_buffers *bufs,
                        mbxC_exec_result *res, mbxC_port_error *e) {
  if (!b->uid_isolation)
    return run_as(b, 0, plan, spec, stdin_bytes, stdin_len, timeout_ms, wait, bufs, res, e);
  if (!b->uid_own)
    /* A range this process cannot prove its own (exec_uid.h): one uid for every run. Programs
       never write the host's directories (rw mounts are copies the view applies afterwards:
       exec_copy.c), so what one run leaves is never another run's as its owner. */
    return run_as(b, b->uids.first, plan, spec, stdin_bytes, stdin_len, timeout_ms, wait, bufs, res,
                  e);
  mbxC_uid_lease lease;
  char why[400];
  int t = mbxC_uid_take(&b->uids, &lease, why, sizeof why);
  if (t != 0) {
    memset(res, 0, sizeof *res);
    return mbxC_exec_fail(e, t == -1 ? EAGAIN : EIO, "%s", why);
  }
  int r = run_as(b, lease.uid, plan, spec, stdin_bytes, stdin_len, timeout_ms, wait, bufs, res, e);
  /* run_as returns once the helper (bwrap, the namespace's pid 1) is reaped, and with it
     every process of the run's pid namespace is gone: the uid is free again. */
  mbxC_uid_release(&lease, 1);
  return r;
}

int mbxC_exec_run(mbxC_exec_backend *b, const mbxC_exec_plan *plan, const mbxC_exec_spec *spec,
                  const char *stdin_bytes, size_t stdin_len, uint64_t timeout_ms,
                  const mbxC_wait *wait, mbxC_exec_buffers *bufs, mbxC_exec_result *res,
                  mbxC_port_error *e) {
  memset(res, 0, sizeof *res);
  if (!mbxC_exec_probe(b))
    return mbxC_exec_fail(e, ENOSYS, "the exec backend is unavailable: %s", b->reason);
  return run_unprobed(b, plan, spec, stdin_bytes, stdin_len, timeout_ms, wait, bufs, res, e);
}

/* ---- the backend ---- */

void mbxC_exec_backend_init(mbxC_exec_backend *b) {
  memset(b, 0, sizeof *b);
  pthread_mutex_init(&b->lock, NULL);
  snprintf(b->bwrap, sizeof b->bwrap, "/usr/bin/bwrap");
  mbxC_uid_pool_init(&b->uids);
  b->cg_owner.fd = -1;
}

int mbxC_exec_backend_set_uids(mbxC_exec_backend *b, uint32_t first, uint32_t count, char *why,
                               size_t why_size) {
  pthread_mutex_lock(&b->lock);
  int r = mbxC_uid_pool_set(&b->uids, first, count, why, why_size);
  if (r == 0) atomic_store(&b->probed, 0); /* the scope is found again at the next use */
  pthread_mutex_unlock(&b->lock);
  return r;
}

void mbxC_exec_backend_free(mbxC_exec_backend *b) {
  mbxC_cgroup_owner_close(&b->cg_owner);
  pthread_mutex_destroy(&b->lock);
}

int mbxC_exec_backend_set(mbxC_exec_backend *b, int helper, const char *path, char *why,
                          size_t why_size) {
  if (path == NULL || path[0] != '/' || strlen(path) >= sizeof b->bwrap) {
    snprintf(why, why_size, "the %s path must be absolute (it is never looked up in PATH)",
             helper ? "exec helper" : "bwrap");
    return -1;
  }
  pthread_mutex_lock(&b->lock);
  snprintf(helper ? b->helper : b->bwrap, sizeof b->bwrap, "%s", path);
  if (helper) b->helper_error[0] = '\0';
  atomic_store(&b->probed, 0);
  pthread_mutex_unlock(&b->lock);
  return 0;
}

/* `bwrap --version` with an empty environment: "bubblewrap 0.8.0". */
static int bwrap_version(const char *bwrap, char *ver, size_t size, char *why, size_t why_size) {
  int p[2];
  if (pipe2(p, O_CLOEXEC) != 0) {
    snprintf(why, why_size, "pipe: %s", strerror(errno));
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, p[1], 1);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);
  char *const argv[] = {(char *)"bwrap", (char *)"--version", NULL};
  char *const envp[] = {NULL};
  pid_t pid;
  int r = posix_spawn(&pid, bwrap, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  close(p[1]);
  if (r != 0) {
    close(p[0]);
    snprintf(why, why_size,
             "cannot run %.200s (%s); install bubblewrap (apt-get install bubblewrap)"
             " or set its path (mbx_runtime_set_path MBX_PATH_BWRAP)",
             bwrap, strerror(r));
    return -1;
  }
  char text[128] = {0};
  size_t len = 0;
  uint64_t until = now_ns() + 5000000000ull;
  while (len < sizeof text - 1 && now_ns() < until) {
    struct pollfd pf = {p[0], POLLIN, 0};
    if (poll(&pf, 1, 100) <= 0) continue;
    ssize_t n = read(p[0], text + len, sizeof text - 1 - len);
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(p[0]);
  int ws = 0;
  if (waitpid(pid, &ws, WNOHANG) == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &ws, 0);
  }
  unsigned maj = 0, min = 0, pat = 0;
  if (sscanf(text, "bubblewrap %u.%u.%u", &maj, &min, &pat) < 2) {
    snprintf(why, why_size,
             "%.300s --version did not answer \"bubblewrap X.Y.Z\" (it said \"%.40s\")", bwrap,
             text);
    return -1;
  }
  snprintf(ver, size, "%u.%u.%u", maj, min, pat);
  if (maj == 0 && min < 8) {
    snprintf(why, why_size,
             "bubblewrap %s is older than 0.8 (needed: --args, --json-status-fd,"
             " --disable-userns, --size)",
             ver);
    return -1;
  }
  return 0;
}

static int probe_locked(mbxC_exec_backend *b) {
  b->available = 0;
  b->reason[0] = '\0';
  b->version[0] = '\0';
  b->uid_isolation = geteuid() == 0;
  b->uid_own = mbxC_uid_pool_scope(&b->uids, b->uid_scope, sizeof b->uid_scope);
  mbxC_exec_image_probe(&b->image);
  mbxC_cgroup_probe(&b->cg);
  /* This backend's owner record (once), then what dead hosts left (exec_cgroup.h). */
  if (b->cg_owner.fd < 0 && b->cg_owner.token[0] == '\0')
    (void)mbxC_cgroup_owner_open(&b->cg_owner, MBXC_CG_OWNER_DIR);
  int stale = 0;
  b->cgroup_reaped += (uint64_t)mbxC_cgroup_reap(&b->cg, MBXC_CG_OWNER_DIR, &stale);
  b->cgroup_stale = (uint64_t)stale;
  if (bwrap_version(b->bwrap, b->version, sizeof b->version, b->reason, sizeof b->reason) != 0)
    return 0;
  if (b->helper[0] == '\0' || access(b->helper, X_OK) != 0) {
    snprintf(b->reason, sizeof b->reason,
             "the exec helper moonbox-exec was not found (%.200s); install it next to libmoonbox "
             "or set its path (mbx_runtime_set_path MBX_PATH_EXEC_HELPER)",
             b->helper_error[0] ? b->helper_error : b->helper);
    return 0;
  }
  FILE *f = fopen("/proc/sys/user/max_user_namespaces", "r");
  long maxns = -1;
  if (f) {
    if (fscanf(f, "%ld", &maxns) != 1) maxns = -1;
    fclose(f);
  }
  b->userns = maxns != 0;
  if (!b->userns) {
    snprintf(b->reason, sizeof b->reason,
             "user namespaces are disabled (/proc/sys/user/max_user_namespaces is 0); enable "
             "them (sysctl user.max_user_namespaces=15000)");
    return 0;
  }
  /* The smoke run: /usr/bin/true through the whole path, helper, bwrap and shim. */
  b->available = 1;
  mbxC_exec_spec spec;
  mbxC_exec_spec_defaults(&spec);
  spec.output = 4096;
  static const char *const true_argv[] = {"true"};
  mbxC_exec_plan plan = {
      .program = "/usr/bin/true", .argv = true_argv, .argc = 1, .tmp_bytes = 1 << 20};
  mbxC_exec_buffers bufs = {0};
  mbxC_exec_result res;
  mbxC_port_error e;
  int r = run_unprobed(b, &plan, &spec, NULL, 0, 10000, NULL, &bufs, &res, &e);
  if (r != 0 || res.exit_code != 0) {
    b->available = 0;
    if (r != 0)
      snprintf(b->reason, sizeof b->reason,
               "the smoke run of /usr/bin/true failed: %s (user "
               "namespaces blocked, or /proc masked in a nested container?)",
               e.message);
    else
      snprintf(b->reason, sizeof b->reason, "the smoke run of /usr/bin/true exited with %d: %.*s",
               res.exit_code, (int)(res.err_len < 200 ? res.err_len : 200),
               res.err_len ? res.err : "");
  }
  mbxC_exec_buffers_free(&bufs);
  return b->available;
}

int mbxC_exec_probe(mbxC_exec_backend *b) {
  /* Once probed, the outcome changes only when a path is set again (under the lock). */
  if (atomic_load_explicit(&b->probed, memory_order_acquire)) return b->available;
  pthread_mutex_lock(&b->lock);
  if (!b->probed) {
    probe_locked(b);
    atomic_store_explicit(&b->probed, 1, memory_order_release);
  }
  int a = b->available;
  pthread_mutex_unlock(&b->lock);
  return a;
}

static void json_str(char *out, size_t size, size_t *len, const char *s) {
  size_t n = *len;
  if (n + 2 >= size) return;
  out[n++] = '"';
  for (; *s && n + 8 < size; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      out[n++] = '\\';
      out[n++] = (char)c;
    } else if (c < 0x20) {
      n += (size_t)snprintf(out + n, size - n, "\\u%04x", c);
    } else {
      out[n++] = (char)c;
    }
  }
  out[n++] = '"';
  out[n] = '\0';
  *len = n;
}

char *mbxC_exec_status_json(mbxC_exec_backend *b) {
  mbxC_exec_probe(b);
  size_t size = 16384, n = 0;
  char *out = malloc(size);
  if (out == NULL) return NULL;
  pthread_mutex_lock(&b->lock);
  n += (size_t)snprintf(out + n, size - n,
                        "{\"available\":%s,\"reason\":", b->available ? "true" : "false");
  if (b->available)
    n += (size_t)snprintf(out + n, size - n, "null");
  else
    json_str(out, size, &n, b->reason);
  n += (size_t)snprintf(out + n, size - n, ",\"bwrap\":");
  json_str(out, size, &n, b->bwrap);
  n += (size_t)snprintf(out + n, size - n, ",\"bwrap_version\":");
  if (b->version[0])
    json_str(out, size, &n, b->version);
  else
    n += (size_t)snprintf(out + n, size - n, "null");
  n += (size_t)snprintf(out + n, size - n, ",\"helper\":");
  json_str(out, size, &n, b->helper[0] ? b->helper : "");
  n += (size_t)snprintf(out + n, size - n,
                        ",\"user_namespaces\":%s,\"uid_isolation\":%s,\"seccomp\":%s,"
                        "\"limits\":[%s\"RLIMIT_NPROC\",\"RLIMIT_FSIZE\",\"RLIMIT_NOFILE\","
                        "\"RLIMIT_CPU\",\"RLIMIT_CORE\"],\"cgroups\":{",
                        b->userns ? "true" : "false", b->uid_isolation ? "true" : "false",
                        b->available ? "true" : "false",
                        b->cg.parent[MBXC_CG_MEMORY][0] ? "" : "\"RLIMIT_AS\",");
  /* Each job: where its per-run cgroups go, or why it has none (and the rlimit used). */
  static const char *const job[MBXC_CG_JOBS] = {"memory", "pids", "kill"};
  for (int j = 0; j < MBXC_CG_JOBS; j++) {
    const char *how = j == MBXC_CG_KILL ? (b->cg.v2[j] ? "cgroup.kill" : "freezer")
                                        : (b->cg.v2[j] ? "cgroup v2" : "cgroup v1");
    n += (size_t)snprintf(out + n, size - n, "%s\"%s\":{\"applied\":%s,", j ? "," : "", job[j],
                          b->cg.parent[j][0] ? "true" : "false");
    if (b->cg.parent[j][0]) {
      n += (size_t)snprintf(out + n, size - n, "\"how\":\"%s\",\"under\":", how);
      json_str(out, size, &n, b->cg.parent[j]);
    } else {
      n += (size_t)snprintf(out + n, size - n, "\"reason\":");
      json_str(out, size, &n, b->cg.why[j]);
      n += (size_t)snprintf(out + n, size - n, ",\"instead\":\"%s\"",
                            j == MBXC_CG_MEMORY ? "RLIMIT_AS"
                            : j == MBXC_CG_PIDS ? "RLIMIT_NPROC"
                                                : "killing bwrap ends its pid namespace");
    }
    n += (size_t)snprintf(out + n, size - n, "}");
  }
  /* Shared memory no rlimit counts: charged to the run's memory cgroup, or refused. */
  n += (size_t)snprintf(
      out + n, size - n,
      ",\"runs\":%llu,\"not_removed\":%llu,\"stale_reaped\":%llu,\"stale_left\":%llu},\"shared_memory\":\"%s\"",
      (unsigned long long)atomic_load(&b->cgroup_runs),
      (unsigned long long)atomic_load(&b->cgroup_leaks), (unsigned long long)b->cgroup_reaped,
      (unsigned long long)b->cgroup_stale,
      b->cg.parent[MBXC_CG_MEMORY][0]
          ? "memfds, SysV shm and tmpfs pages are charged to the run's memory cgroup"
          : "unbounded by RLIMIT_AS here (no memory cgroup), so memfd_create and shmget are "
            "refused (ENOSYS); /tmp, /dev/shm and the copied mounts are size-capped tmpfs");
  /* How a program's writes to rw mounts are bounded: the same on every host (a size-capped
     tmpfs needs nothing of the host), so no rw mount is refused for want of a bound. */
  n += (size_t)snprintf(out + n, size - n,
                        ",\"rw_mounts\":\"a copy in a size-capped tmpfs (the fs quotas); the "
                        "program's writes reach the host through the view when it ends, all or "
                        "nothing; past 64 MiB or 10000 entries bound read-only\"");
  /* Where the runs' uids come from (exec_uid.h): the range, whether it is provably this
     process's own (else one uid and no rw mount), why, and the uids quarantined. */
  if (b->uid_isolation)
    n += (size_t)snprintf(out + n, size - n,
                          ",\"uids\":{\"first\":%u,\"last\":%u,\"configured\":%s,\"per_run\":%s,"
                          "\"locks\":",
                          b->uids.first, b->uids.first + (b->uids.count - 1),
                          b->uids.configured ? "true" : "false", b->uid_own ? "true" : "false");
  else
    n += (size_t)snprintf(out + n, size - n,
                          ",\"uids\":{\"per_run\":false,\"scope\":\"not root: every program "
                          "runs as this process's own uid\"}");
  if (b->uid_isolation) {
    char scope[512];
    if (b->uid_own)
      snprintf(scope, sizeof scope, "%s", b->uid_scope);
    else
      snprintf(scope, sizeof scope,
               "one uid (%u) for every program, and programs refused with a rw mount: %s; set "
               "exec.uids to a range this moonbox alone uses",
               b->uids.first, b->uid_scope);
    json_str(out, size, &n, b->uids.dir);
    n += (size_t)snprintf(out + n, size - n, ",\"scope\":");
    json_str(out, size, &n, scope);
    n += (size_t)snprintf(out + n, size - n, ",\"quarantined\":%ld}",
                          mbxC_uid_quarantined(&b->uids));
  }
  n += (size_t)snprintf(out + n, size - n, "}");
  pthread_mutex_unlock(&b->lock);
  return out;
}
