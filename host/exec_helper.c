/* host/exec_helper.c -- moonbox-exec, the exec backend's single-threaded spawn helper, and the
   in-sandbox shim that closes inherited fds before the program starts. */

/*
** Why a separate executable: the library runs in multithreaded hosts, and what must happen
** between fork and execve(bwrap) (setgroups, setresuid to the run's uid, rlimits, building
** memfds) is not async-signal-safe in a multithreaded parent, while posix_spawn cannot do it
** at all. The library posix_spawns this helper with an empty environment and exactly these
** fds (capabilities/exec.c):
**   0 1 2  the program's stdin (a socket) and the stdout / stderr pipes
**   3      the request (a memfd): items "<tag><length>:<bytes>" (exec.c lists the tags)
**   4      the status pipe: bwrap's --json-status-fd, and this helper's own error line
**   5..    the held O_PATH dirfds of the policy's mounts, bound by /proc/self/fd/N
** The helper then execs bwrap, so its pid is bwrap's and killing it kills the sandbox.
**
** helper_spawn_main() is the whole helper: a later zygote (worker mode) calls it in a forked,
** still single-threaded child with the same fd layout.
**
** Shim mode (`moonbox-exec --shim PROGRAM ARGV0 ARGS...`) runs inside the sandbox, after
** bwrap's setup and seccomp: it closes every fd above 2 (bwrap 0.8 passes the mount dirfds,
** which point outside the sandbox's mount namespace, to its child) but the status pipe, starts
** the program as its child and reports the program's own wait status on that pipe (a signal
** is then told from an exit code of 128 + n), exiting with the same code.
*/

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STATUS_FD 4
/* The status pipe again, for the shim's report: the request's fd, free once it is mapped. */
#define SHIM_REPORT_FD 3
#define FIRST_MOUNT_FD 5

static void helper_fail(const char *what, int err) {
  char line[512];
  int n = snprintf(line, sizeof line, "moonbox-exec: %s%s%s\n", what, err ? ": " : "",
                   err ? strerror(err) : "");
  if (n > 0 && write(STATUS_FD, line, (size_t)n) < 0) {
    /* nobody to tell */
  }
  _exit(125);
}

/* ---- the seccomp filter, by raw x86-64 numbers ----
   libseccomp 2.5.4's name table predates this kernel, and it cannot say "every number above
   N": the filter is written here directly. Order: a foreign architecture or an x32 number
   kills the process; a number above the highest one this list knows answers ENOSYS (so a
   new kernel's syscalls are off until reviewed, and libc falls back); then the deny list. */

#define HIGHEST_KNOWN 462 /* mseal (Linux 6.10) */
#define X32_BIT 0x40000000u
#define ARG_LO(i) (offsetof(struct seccomp_data, args) + 8 * (i))

/* Syscalls denied outright with EPERM (or ENOSYS where libc must fall back). */
static const struct {
  unsigned nr;
  int err;
} deny[] = {
    {101, EPERM},                               /* ptrace */
    {310, EPERM},  {311, EPERM},                /* process_vm_readv, process_vm_writev */
    {321, EPERM},                               /* bpf */
    {323, EPERM},                               /* userfaultfd */
    {298, EPERM},                               /* perf_event_open */
    {425, EPERM},  {426, EPERM},  {427, EPERM}, /* io_uring_setup, _enter, _register */
    {246, EPERM},  {320, EPERM},                /* kexec_load, kexec_file_load */
    {175, EPERM},  {313, EPERM},  {176, EPERM}, /* init_module, finit_module, delete_module */
    {174, EPERM},  {177, EPERM},  {178, EPERM}, /* create_module, get_kernel_syms, query_module */
    {227, EPERM},  {164, EPERM},  {159, EPERM},
    {305, EPERM},                /* clock_settime, settimeofday,
                                    adjtimex, clock_adjtime */
    {272, EPERM},  {308, EPERM}, /* unshare, setns */
    {165, EPERM},  {166, EPERM},  {155, EPERM},
    {161, EPERM},                               /* mount, umount2, pivot_root,
                                                   chroot */
    {250, EPERM},  {248, EPERM},  {249, EPERM}, /* keyctl, add_key, request_key */
    {163, EPERM},  {167, EPERM},  {168, EPERM},
    {169, EPERM}, /* acct, swapon, swapoff, reboot */
    {170, EPERM},  {171, EPERM},  {172, EPERM},
    {173, EPERM},                               /* sethostname, setdomainname,
                                                   iopl, ioperm */
    {179, EPERM},  {443, EPERM},  {180, EPERM}, /* quotactl, quotactl_fd, nfsservctl */
    {134, EPERM},  {212, EPERM},  {153, EPERM},
    {103, EPERM},                               /* uselib, lookup_dcookie,
                                                   vhangup, syslog */
    {303, EPERM},  {304, EPERM},                /* name_to_handle_at, open_by_handle_at */
    {300, EPERM},                               /* fanotify_init */
    {156, EPERM},  {139, EPERM},  {136, EPERM}, /* _sysctl, sysfs, ustat */
    {279, EPERM},  {256, EPERM},                /* move_pages, migrate_pages */
    {312, EPERM},  {438, EPERM},  {440, EPERM}, /* kcmp, pidfd_getfd, process_madvise */
    {447, EPERM},                               /* memfd_secret */
    {435, ENOSYS}, /* clone3: its flags sit in memory a filter cannot read; glibc falls back */
    {428, ENOSYS}, {429, ENOSYS}, {430, ENOSYS},
    {431, ENOSYS},                               /* the new mount API:
open_tree, move_mount, fsopen, fsconfig */
    {432, ENOSYS}, {433, ENOSYS}, {442, ENOSYS}, /* fsmount, fspick, mount_setattr */
};

#define CLONE_NS_FLAGS                                                                             \
  0x7e020080u /* CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME */

static size_t bpf_len;
static struct sock_filter bpf[256];

static void emit(uint16_t code, uint32_t k, uint8_t jt, uint8_t jf) {
  if (bpf_len < sizeof bpf / sizeof *bpf) bpf[bpf_len++] = (struct sock_filter){code, jt, jf, k};
}
#define RET(v) emit(BPF_RET | BPF_K, (v), 0, 0)
#define ERRNO(e) (SECCOMP_RET_ERRNO | ((uint32_t)(e)&SECCOMP_RET_DATA))
#define LD(off) emit(BPF_LD | BPF_W | BPF_ABS, (uint32_t)(off), 0, 0)

static void build_filter(void) {
  bpf_len = 0;
  LD(offsetof(struct seccomp_data, arch));
  emit(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0);
  RET(SECCOMP_RET_KILL_PROCESS);
  LD(offsetof(struct seccomp_data, nr));
  emit(BPF_JMP | BPF_JGE | BPF_K, X32_BIT, 0, 1);
  RET(SECCOMP_RET_KILL_PROCESS);
  emit(BPF_JMP | BPF_JGT | BPF_K, HIGHEST_KNOWN, 0, 1);
  RET(ERRNO(ENOSYS));
  for (size_t i = 0; i < sizeof deny / sizeof *deny; i++) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, deny[i].nr, 0, 1);
    RET(ERRNO(deny[i].err));
  }
  /* clone (56) with any namespace flag: EPERM. The flags are the low word of args[0]. */
  emit(BPF_JMP | BPF_JEQ | BPF_K, 56, 0, 4);
  LD(ARG_LO(0));
  emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1);
  RET(ERRNO(EPERM));
  RET(SECCOMP_RET_ALLOW);
  /* ioctl (16) TIOCSTI / TIOCLINUX: pushing input into a terminal. The kernel takes the
     command as an unsigned int, so the low word is what it acts on. */
  emit(BPF_JMP | BPF_JEQ | BPF_K, 16, 0, 5);
  LD(ARG_LO(1));
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0x5412, 2, 0);
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0x541c, 1, 0);
  RET(SECCOMP_RET_ALLOW);
  RET(ERRNO(EPERM));
  /* socket (41) and socketpair (53) of AF_VSOCK (40): the one family that reaches the host
     from a network namespace. */
  for (unsigned nr = 41; nr <= 53; nr += 12) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 4);
    LD(ARG_LO(0));
    emit(BPF_JMP | BPF_JEQ | BPF_K, 40, 0, 1);
    RET(ERRNO(EAFNOSUPPORT));
    RET(SECCOMP_RET_ALLOW);
  }
  /* personality: only the query and PER_LINUX (no ADDR_NO_RANDOMIZE and friends). */
  emit(BPF_JMP | BPF_JEQ | BPF_K, 135, 0, 5);
  LD(ARG_LO(0));
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 0);
  emit(BPF_JMP | BPF_JEQ | BPF_K, 0xffffffffu, 1, 0);
  RET(ERRNO(EPERM));
  RET(SECCOMP_RET_ALLOW);
  RET(SECCOMP_RET_ALLOW);
}

/* ---- the request ---- */

typedef struct item {
  char tag;
  const char *data;
  size_t len;
} item;

static int next_item(const char **p, const char *end, item *it) {
  if (*p >= end) return 0;
  it->tag = **p;
  char *colon;
  unsigned long long n = strtoull(*p + 1, &colon, 10);
  if (colon >= end || *colon != ':' || n > (unsigned long long)(end - colon - 1))
    helper_fail("malformed request", 0);
  it->data = colon + 1;
  it->len = (size_t)n;
  *p = colon + 1 + n;
  return 1;
}

static unsigned long long item_num(const item *it) {
  char buf[32];
  if (it->len == 0 || it->len >= sizeof buf) helper_fail("malformed number in the request", 0);
  memcpy(buf, it->data, it->len);
  buf[it->len] = '\0';
  return strtoull(buf, NULL, 10);
}

static int new_memfd(const char *name, const void *data, size_t len) {
  int fd = (int)syscall(SYS_memfd_create, name, 0u); /* no CLOEXEC: bwrap reads it */
  if (fd < 0) helper_fail("memfd_create", errno);
  const char *p = data;
  while (len > 0) {
    ssize_t n = write(fd, p, len);
    if (n <= 0) helper_fail("writing a memfd", errno);
    p += n;
    len -= (size_t)n;
  }
  if (lseek(fd, 0, SEEK_SET) != 0) helper_fail("lseek", errno);
  return fd;
}

static void limit(int res, unsigned long long v, const char *name) {
  struct rlimit rl = {(rlim_t)v, (rlim_t)v};
  if (setrlimit(res, &rl) != 0) helper_fail(name, errno);
}

/* Join one of the run's cgroups (a cgroup.procs path the library made), while still root and
   before bwrap starts, so every process of the run is in it from its first instruction. */
static void join_cgroup(const item *it) {
  static const char tail[] = "/cgroup.procs";
  char path[1024];
  if (it->len == 0 || it->len >= sizeof path || it->data[0] != '/' ||
      memchr(it->data, '\0', it->len) || it->len < sizeof tail ||
      memcmp(it->data + it->len - (sizeof tail - 1), tail, sizeof tail - 1) != 0)
    helper_fail("malformed cgroup item", 0);
  memcpy(path, it->data, it->len);
  path[it->len] = '\0';
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) helper_fail("cannot open the run's cgroup", errno);
  char pid[24];
  int n = snprintf(pid, sizeof pid, "%ld", (long)getpid());
  if (write(fd, pid, (size_t)n) != n) helper_fail("cannot join the run's cgroup", errno);
  close(fd);
}

/* The helper: never returns. */
static void helper_spawn_main(void) {
  struct stat st;
  if (fstat(3, &st) != 0) helper_fail("no request on fd 3", errno);
  if (st.st_size <= 0 || st.st_size > (off_t)(1u << 30)) helper_fail("request size", 0);
  size_t size = (size_t)st.st_size;
  const char *req = mmap(NULL, size, PROT_READ, MAP_PRIVATE, 3, 0);
  if (req == MAP_FAILED) helper_fail("mmap of the request", errno);
  /* fd 3 becomes a second copy of the status pipe, without close-on-exec, for the shim. */
  if (dup2(STATUS_FD, SHIM_REPORT_FD) != SHIM_REPORT_FD) helper_fail("dup2", errno);
  const char *p = req, *end = req + size;
  item it;
  char bwrap[4096] = "";
  unsigned long long uid = 0, mounts = 0;
  size_t commands = 0, files = 0;
  /* Pass 1: settings (arguments are copied into the --args memfd afterwards). */
  size_t args_bytes = 0;
  while (next_item(&p, end, &it)) {
    switch (it.tag) {
    case 'b':
      if (it.len == 0 || it.len >= sizeof bwrap) helper_fail("bwrap path", 0);
      memcpy(bwrap, it.data, it.len);
      bwrap[it.len] = '\0';
      break;
    case 'u':
      uid = item_num(&it);
      break;
    case 'n':
      limit(RLIMIT_NPROC, item_num(&it), "RLIMIT_NPROC");
      break;
    case 'm': /* 0: the run's memory cgroup bounds it instead */
      if (item_num(&it) != 0) limit(RLIMIT_AS, item_num(&it), "RLIMIT_AS");
      break;
    case 'g':
      join_cgroup(&it);
      break;
    case 'f':
      limit(RLIMIT_FSIZE, item_num(&it), "RLIMIT_FSIZE");
      break;
    case 'o':
      limit(RLIMIT_NOFILE, item_num(&it), "RLIMIT_NOFILE");
      break;
    case 'c':
      limit(RLIMIT_CPU, item_num(&it), "RLIMIT_CPU");
      break;
    case 'k':
      mounts = item_num(&it);
      break;
    case 'a':
      args_bytes += it.len + 1;
      break;
    case 'F':
      files++;
      break;
    case 'x':
      commands++;
      break;
    default:
      helper_fail("unknown request item", 0);
    }
  }
  limit(RLIMIT_CORE, 0, "RLIMIT_CORE");
  if (bwrap[0] != '/') helper_fail("the bwrap path is not absolute", 0);
  /* Every fd but the ones named above is closed before anything else is opened. */
  if (syscall(SYS_close_range, FIRST_MOUNT_FD + (unsigned)mounts, ~0u, 0) != 0)
    helper_fail("close_range", errno);
  char *args = malloc(args_bytes ? args_bytes : 1);
  if (args == NULL) helper_fail("out of memory", ENOMEM);
  size_t off = 0;
  for (p = req; next_item(&p, end, &it);) {
    if (it.tag != 'a') continue;
    if (memchr(it.data, '\0', it.len)) helper_fail("an argument holds a NUL byte", 0);
    memcpy(args + off, it.data, it.len);
    args[off + it.len] = '\0';
    off += it.len + 1;
  }
  /* Fresh memfds: bwrap reads --args and --seccomp from the current offset to EOF, so a
     shared open file description would be read once only. */
  int args_fd = new_memfd("moonbox-args", args, off);
  free(args);
  build_filter();
  int seccomp_fd = new_memfd("moonbox-seccomp", bpf, bpf_len * sizeof *bpf);
  char passwd[256], group[128];
  unsigned long long me = uid ? uid : (unsigned long long)geteuid();
  int pn = snprintf(passwd, sizeof passwd,
                    "root:x:0:0:root:/root:/usr/sbin/nologin\nsandbox:x:%llu:%llu:moonbox "
                    "sandbox:/tmp:/bin/sh\nnobody:x:65534:65534:nobody:/:/usr/sbin/nologin\n",
                    me, me);
  int gn = snprintf(group, sizeof group, "root:x:0:\nsandbox:x:%llu:\nnogroup:x:65534:\n", me);
  static const char hosts[] = "127.0.0.1 localhost moonbox\n::1 localhost ip6-localhost\n";
  int passwd_fd = new_memfd("moonbox-passwd", passwd, (size_t)pn);
  int group_fd = new_memfd("moonbox-group", group, (size_t)gn);
  int hosts_fd = new_memfd("moonbox-hosts", hosts, sizeof hosts - 1);
  /* The shim is this very program, copied into the sandbox by bwrap from an fd opened here,
     while still root: the run's uid may not be able to reach the directory it is installed
     in (a build tree under a 0700 home), and a path would be resolved again by name. */
  int shim_fd = open("/proc/self/exe", O_RDONLY); /* no CLOEXEC: bwrap reads it */
  if (shim_fd < 0) helper_fail("cannot open the helper itself (/proc/self/exe)", errno);
  /* Supplementary groups survive into the sandbox otherwise (bwrap 0.8 never calls
     setgroups): drop them while still root, then become the run's own uid. */
  if (geteuid() == 0) {
    if (setgroups(0, NULL) != 0) helper_fail("setgroups", errno);
    if (uid != 0 && (setresgid((gid_t)uid, (gid_t)uid, (gid_t)uid) != 0 ||
                     setresuid((uid_t)uid, (uid_t)uid, (uid_t)uid) != 0))
      helper_fail("setresuid to the run's uid", errno);
  }
  char a[16], s[16], pf[16], gf[16], hf[16], sf[16];
  snprintf(sf, sizeof sf, "%d", shim_fd);
  snprintf(a, sizeof a, "%d", args_fd);
  snprintf(s, sizeof s, "%d", seccomp_fd);
  snprintf(pf, sizeof pf, "%d", passwd_fd);
  snprintf(gf, sizeof gf, "%d", group_fd);
  snprintf(hf, sizeof hf, "%d", hosts_fd);
  char *fixed[] = {"bwrap",
                   "--json-status-fd",
                   "4",
                   "--seccomp",
                   s,
                   "--ro-bind-data",
                   pf,
                   "/etc/passwd",
                   "--ro-bind-data",
                   gf,
                   "/etc/group",
                   "--ro-bind-data",
                   hf,
                   "/etc/hosts",
                   "--perms",
                   "0555",
                   "--ro-bind-data",
                   sf,
                   "/.moonbox/moonbox-exec",
                   "--args",
                   a};
  size_t nfixed = sizeof fixed / sizeof *fixed;
  char **argv = calloc(nfixed + 3 * files + commands + 1, sizeof *argv);
  if (argv == NULL) helper_fail("out of memory", ENOMEM);
  /* The policy's memory files, read-only at their virtual paths (before --args, whose list
     ends with --remount-ro /). */
  memcpy(argv, fixed, sizeof fixed - sizeof *fixed * 2);
  size_t ac = nfixed - 2;
  for (p = req; next_item(&p, end, &it);) {
    if (it.tag != 'F') continue;
    const char *nul = memchr(it.data, '\0', it.len);
    if (nul == NULL || it.data[0] != '/') helper_fail("malformed file item", 0);
    int fd = new_memfd("moonbox-file", nul + 1, it.len - (size_t)(nul + 1 - it.data));
    char *num = malloc(16);
    if (num == NULL) helper_fail("out of memory", ENOMEM);
    snprintf(num, 16, "%d", fd);
    argv[ac++] = "--ro-bind-data";
    argv[ac++] = num;
    argv[ac++] = (char *)it.data; /* NUL-terminated at nul, inside the mapping */
  }
  argv[ac++] = "--args";
  argv[ac++] = a;
  for (p = req; next_item(&p, end, &it);) {
    if (it.tag != 'x') continue;
    if (memchr(it.data, '\0', it.len)) helper_fail("an argument holds a NUL byte", 0);
    char *w = malloc(it.len + 1);
    if (w == NULL) helper_fail("out of memory", ENOMEM);
    memcpy(w, it.data, it.len);
    w[it.len] = '\0';
    argv[ac++] = w;
  }
  argv[ac] = NULL;
  char *envp[] = {NULL};
  execve(bwrap, argv, envp);
  helper_fail("cannot execute bwrap", errno);
}

/* The shim's report line on the status pipe: how the program ended, from its own wait status,
   so a death by signal is told apart from an exit code above 128 (bwrap's pid 1 folds both
   into 128 + n). exec.c parses these keys. */
static void shim_report(int fd, int status) {
  char line[96];
  int n = WIFSIGNALED(status)
              ? snprintf(line, sizeof line, "{\"moonbox-shim-signal\": %d}\n", WTERMSIG(status))
              : snprintf(line, sizeof line, "{\"moonbox-shim-exit\": %d}\n", WEXITSTATUS(status));
  if (write(fd, line, (size_t)n) < 0) {
    /* the library reads bwrap's exit code instead */
  }
}

static int shim_main(int argc, char **argv) {
  /* argv: moonbox-exec --shim PROGRAM ARGV0 ARGS... */
  if (argc < 4) {
    fprintf(stderr, "moonbox-exec: --shim needs a program and its argv[0]\n");
    return 127;
  }
  /* Everything above 2 is closed but the status pipe (the helper's copy at SHIM_REPORT_FD:
     bwrap does not pass its --json-status-fd on), which only this process keeps:
     close-on-exec, and the shim made non-dumpable, so the program (the same uid) cannot reach
     it through /proc/<shim>/fd. */
  int report = fcntl(SHIM_REPORT_FD, F_GETFD) >= 0 ? SHIM_REPORT_FD : -1;
  if (syscall(SYS_close_range, (unsigned)SHIM_REPORT_FD + 1, ~0u, 0) != 0 ||
      (report >= 0 && (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 ||
                       prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0))) {
    fprintf(stderr, "moonbox-exec: shim setup: %s\n", strerror(errno));
    return 127;
  }
  pid_t child = report >= 0 ? fork() : 0;
  if (child < 0) {
    fprintf(stderr, "moonbox-exec: cannot start %s: fork: %s\n", argv[2], strerror(errno));
    return 126;
  }
  if (child == 0) {
    execve(argv[2], argv + 3, environ);
    int err = errno;
    fprintf(stderr, "moonbox-exec: cannot run %s: %s\n", argv[2], strerror(err));
    _exit(err == ENOENT ? 127 : 126);
  }
  /* The program's own wait status. Nothing else is this process's child: the program's
     children are reparented to bwrap's pid 1, not to the shim. */
  int status = 0;
  while (waitpid(child, &status, 0) < 0)
    if (errno != EINTR) {
      fprintf(stderr, "moonbox-exec: waitpid: %s\n", strerror(errno));
      return 126;
    }
  shim_report(report, status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--shim") == 0) return shim_main(argc, argv);
  if (argc != 1) {
    fprintf(stderr, "moonbox-exec: the exec backend's helper; it is started by libmoonbox, "
                    "not by hand\n");
    return 2;
  }
  helper_spawn_main();
  return 125;
}
