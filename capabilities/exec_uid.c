/* capabilities/exec_uid.c -- per-run host uids for exec as root: the range, the locks. */
#include "capabilities/exec_uid.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

/* The inode numbers the kernel gives the initial namespaces (PROC_USER_INIT_INO and
   PROC_PID_INIT_INO in include/linux/proc_ns.h, fixed since Linux 3.8). */
#define INIT_USER_NS_INO 0xEFFFFFFDu
#define INIT_PID_NS_INO 0xEFFFFFFCu

void mbxC_uid_pool_init(mbxC_uid_pool *p) {
  memset(p, 0, sizeof *p);
  p->first = MBXC_UID_DEFAULT_FIRST;
  p->count = MBXC_UID_DEFAULT_COUNT;
  snprintf(p->dir, sizeof p->dir, "%s", MBXC_UID_LOCK_DIR);
}

int mbxC_uid_pool_set(mbxC_uid_pool *p, uint32_t first, uint32_t count, char *why,
                      size_t why_size) {
  if (count == 0) {
    p->first = MBXC_UID_DEFAULT_FIRST;
    p->count = MBXC_UID_DEFAULT_COUNT;
    p->configured = 0;
    return 0;
  }
  uint64_t last = (uint64_t)first + count - 1;
  if (last >= UINT32_MAX) {
    snprintf(why, why_size, "the uid range %u-%llu passes 4294967294", first,
             (unsigned long long)last);
    return -1;
  }
  if (first < 1000) {
    snprintf(why, why_size,
             "the uid range %u-%llu reaches below 1000, where system users are: choose a range "
             "no account uses",
             first, (unsigned long long)last);
    return -1;
  }
  if (first <= 65534 && last >= 65534) {
    snprintf(why, why_size,
             "the uid range %u-%llu holds 65534 (nobody), which many processes share", first,
             (unsigned long long)last);
    return -1;
  }
  p->first = first;
  p->count = count;
  p->configured = 1;
  atomic_store(&p->next, 0);
  return 0;
}

static int ns_inode(const char *path, unsigned long *ino) {
  struct stat st;
  if (stat(path, &st) != 0) return -1;
  *ino = (unsigned long)st.st_ino;
  return 0;
}

int mbxC_uid_pool_scope(const mbxC_uid_pool *p, char *why, size_t why_size) {
  if (p->configured) {
    snprintf(why, why_size, "the operator's range (exec.uids)");
    return 1;
  }
  unsigned long pid_ns = 0, user_ns = 0;
  if (ns_inode("/proc/self/ns/pid", &pid_ns) != 0 ||
      ns_inode("/proc/self/ns/user", &user_ns) != 0) {
    snprintf(why, why_size, "/proc/self/ns cannot be read, so the namespaces are unknown");
    return 0;
  }
  if (pid_ns != INIT_PID_NS_INO || user_ns != INIT_USER_NS_INO) {
    snprintf(why, why_size,
             "this process is in a %s namespace other than the host's (a container?), where "
             "another moonbox may take the same uids without seeing %s",
             pid_ns != INIT_PID_NS_INO ? "pid" : "user", p->dir);
    return 0;
  }
  snprintf(why, why_size, "the host's pid and user namespaces, locks under %s", p->dir);
  return 1;
}

int mbxC_lock_dir_open(const char *dir, char *why, size_t why_size) {
  if (dir[0] != '/') {
    snprintf(why, why_size, "the uid lock directory %s is not absolute", dir);
    return -1;
  }
  int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  char copy[256];
  snprintf(copy, sizeof copy, "%s", dir);
  char *save = NULL;
  for (char *part = strtok_r(copy, "/", &save); part && fd >= 0;
       part = strtok_r(NULL, "/", &save)) {
    /* Made 0755 for the parents, 0700 for the last; an existing one is checked below. */
    (void)mkdirat(fd, part, save && *save ? 0755 : 0700);
    int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    fd = next;
  }
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0) {
    snprintf(why, why_size, "the uid lock directory %s cannot be opened: %s", dir, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  if (st.st_uid != geteuid() || (st.st_mode & 022) != 0) {
    snprintf(why, why_size,
             "the uid lock directory %s must be owned by uid %u and writable by no one else "
             "(it is uid %u, mode %o)",
             dir, (unsigned)geteuid(), (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777));
    close(fd);
    return -1;
  }
  return fd;
}

/* Lock the file of uid in dfd: 1 taken (fd in *out, marked busy), 0 held by another run or
   quarantined, -1 an error. */
static int try_uid(mbxC_uid_pool *p, int dfd, uint32_t uid, int *out) {
  char name[16];
  snprintf(name, sizeof name, "%u", uid);
  int fd = openat(dfd, name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -1;
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    close(fd);
    return 0;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) {
    close(fd);
    return -1;
  }
  if (st.st_size != 0) {
    /* "busy" of a run whose host died, or "dirty": files of this uid may still exist. */
    atomic_fetch_add(&p->quarantined, 1);
    close(fd);
    return 0;
  }
  static const char busy[] = "busy\n";
  if (pwrite(fd, busy, sizeof busy - 1, 0) != (ssize_t)(sizeof busy - 1)) {
    close(fd);
    return -1;
  }
  *out = fd;
  return 1;
}

int mbxC_uid_take(mbxC_uid_pool *p, mbxC_uid_lease *l, char *why, size_t why_size) {
  l->uid = 0;
  l->fd = -1;
  int dfd = mbxC_lock_dir_open(p->dir, why, why_size);
  if (dfd < 0) return -2;
  /* Where this process starts looking: a random place of the range at its first take, so a
     new process does not take the uid the last one just gave back. The kernel counts
     RLIMIT_NPROC per uid, and the last run's processes (killed with its pid namespace) can
     still be going away: a run given that uid at once would find its forks refused early. */
  uint32_t start = atomic_load(&p->next);
  if (!atomic_exchange(&p->started, 1)) {
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
      r = (uint32_t)getpid() * 2654435761u;
    start = r % p->count;
  }
  int errors = 0;
  for (uint64_t i = 0; i < p->count; i++) {
    uint32_t off = (uint32_t)((start + i) % p->count);
    int fd = -1;
    int r = try_uid(p, dfd, p->first + off, &fd);
    if (r == 1) {
      atomic_store(&p->next, off + 1 == p->count ? 0 : off + 1);
      l->uid = p->first + off;
      l->fd = fd;
      close(dfd);
      return 0;
    }
    if (r < 0) errors++;
  }
  close(dfd);
  snprintf(why, why_size,
           "every uid of the exec uid range %u-%u is in use by a running program or "
           "quarantined (%d could not be locked); try again when a program has finished, or "
           "set a larger range (exec.uids)",
           p->first, p->first + (p->count - 1), errors);
  errno = EAGAIN;
  return -1;
}

void mbxC_uid_lease_leaves_no_files(mbxC_uid_lease *l) {
  if (l->fd >= 0) (void)ftruncate(l->fd, 0);
}

void mbxC_uid_release(mbxC_uid_lease *l, int clean) {
  if (l->fd < 0) return;
  if (clean) {
    /* Emptied while still locked: only then may another run take it. */
    if (ftruncate(l->fd, 0) != 0) clean = 0;
  }
  if (!clean) {
    static const char dirty[] = "dirty\n";
    if (pwrite(l->fd, dirty, sizeof dirty - 1, 0) == (ssize_t)(sizeof dirty - 1))
      (void)ftruncate(l->fd, sizeof dirty - 1);
  }
  close(l->fd); /* the flock goes with the last fd of its open file */
  l->fd = -1;
}

long mbxC_uid_quarantined(const mbxC_uid_pool *p) {
  char why[8];
  int dfd = mbxC_lock_dir_open(p->dir, why, sizeof why);
  if (dfd < 0) return -1;
  int rfd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  close(dfd);
  DIR *d = rfd >= 0 ? fdopendir(rfd) : NULL;
  if (d == NULL) {
    if (rfd >= 0) close(rfd);
    return -1;
  }
  long n = 0;
  struct dirent *de;
  while ((de = readdir(d)) != NULL) {
    char *end;
    unsigned long uid = strtoul(de->d_name, &end, 10);
    if (*end || end == de->d_name || uid < p->first || uid - p->first >= p->count) continue;
    int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st;
    /* A file a live run holds says busy too: only unlocked ones with a mark count. */
    if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_size != 0) n++;
    close(fd);
  }
  closedir(d);
  return n;
}
