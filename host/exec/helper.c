/* host/exec/helper.c -- moonbox-exec, the exec backend's single-threaded spawn helper, and the
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
**   5      the copy-back pipe, 6 the copy-in socket (for the shim; exec_copy.h)
**   7..    the held O_PATH dirfds of the policy's mounts, bound by /proc/self/fd/N
** The helper then execs bwrap, so its pid is bwrap's and killing it kills the sandbox.
**
** helper_spawn_main() is the whole helper: a later zygote (worker mode) calls it in a forked,
** still single-threaded child with the same fd layout.
**
** Shim mode (`moonbox-exec --shim PROGRAM ARGV0 ARGS...`) runs inside the sandbox, after
** bwrap's setup and seccomp: it closes every fd above 2 (bwrap 0.8 passes the mount dirfds,
** which point outside the sandbox's mount namespace, to its child) but the status pipe, starts
** the program as its child and reports the program's own wait status on that pipe (a signal
** is then told from an exit code of 128 + n), exiting with the same code. It is the pid
** namespace's pid 1: it reaps the program's orphans, and when the program ends it kills and
** reaps whatever the program left running before the copy back and the report.
*/

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

#define STATUS_FD 4
/* The status pipe again, for the shim's report: the request's fd, free once it is mapped. */
#define SHIM_REPORT_FD 3
/* The copy of the view's overlay and rw mounts and /tmp (capabilities/exec_copy.h): the pipe
   the shim sends the copy back on, and the socket it reads the copy from (unpacking as it
   comes) before the program starts. Both pass through the helper and bwrap untouched. */
#define SHIM_BACK_FD 5
#define SHIM_COPY_FD 6
#define FIRST_MOUNT_FD 7

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

/* Syscalls denied outright with EPERM (or ENOSYS where libc must fall back), by the kernel
   headers' numbers: a literal is one typo from denying the wrong call. */
static const struct {
  unsigned nr;
  int err;
} deny[] = {
    {__NR_ptrace, EPERM},
    {__NR_process_vm_readv, EPERM},
    {__NR_process_vm_writev, EPERM},
    {__NR_bpf, EPERM},
    {__NR_userfaultfd, EPERM},
    {__NR_perf_event_open, EPERM},
    {__NR_io_uring_setup, EPERM},
    {__NR_io_uring_enter, EPERM},
    {__NR_io_uring_register, EPERM},
    {__NR_kexec_load, EPERM},
    {__NR_kexec_file_load, EPERM},
    {__NR_init_module, EPERM},
    {__NR_finit_module, EPERM},
    {__NR_delete_module, EPERM},
    {__NR_create_module, EPERM},
    {__NR_get_kernel_syms, EPERM},
    {__NR_query_module, EPERM},
    {__NR_clock_settime, EPERM},
    {__NR_settimeofday, EPERM},
    {__NR_adjtimex, EPERM},
    {__NR_clock_adjtime, EPERM},
    {__NR_unshare, EPERM},
    {__NR_setns, EPERM},
    {__NR_mount, EPERM},
    {__NR_umount2, EPERM},
    {__NR_pivot_root, EPERM},
    {__NR_chroot, EPERM},
    {__NR_keyctl, EPERM},
    {__NR_add_key, EPERM},
    {__NR_request_key, EPERM},
    {__NR_acct, EPERM},
    {__NR_swapon, EPERM},
    {__NR_swapoff, EPERM},
    {__NR_reboot, EPERM},
    {__NR_sethostname, EPERM},
    {__NR_setdomainname, EPERM},
    {__NR_iopl, EPERM},
    {__NR_ioperm, EPERM},
    {__NR_quotactl, EPERM},
    {__NR_quotactl_fd, EPERM},
    {__NR_nfsservctl, EPERM},
    {__NR_uselib, EPERM},
    {__NR_lookup_dcookie, EPERM},
    {__NR_vhangup, EPERM},
    {__NR_syslog, EPERM},
    {__NR_name_to_handle_at, EPERM},
    {__NR_open_by_handle_at, EPERM},
    {__NR_fanotify_init, EPERM},
    {__NR__sysctl, EPERM},
    {__NR_sysfs, EPERM},
    {__NR_ustat, EPERM},
    {__NR_move_pages, EPERM},
    {__NR_migrate_pages, EPERM},
    /* The NUMA policy calls and the LDT: kernel surface no sandboxed program needs (modify_ldt
       has had its own CVEs: CVE-2015-5157, CVE-2017-17053). */
    {__NR_mbind, EPERM},
    {__NR_set_mempolicy, EPERM},
    {__NR_get_mempolicy, EPERM},
    {__NR_set_mempolicy_home_node, EPERM},
    {__NR_modify_ldt, EPERM},
    {__NR_kcmp, EPERM},
    {__NR_pidfd_getfd, EPERM},
    {__NR_process_madvise, EPERM},
    {__NR_memfd_secret, EPERM},
    /* clone3: its flags sit in memory a filter cannot read; glibc falls back to clone. */
    {__NR_clone3, ENOSYS},
    /* The new mount API. */
    {__NR_open_tree, ENOSYS},
    {__NR_move_mount, ENOSYS},
    {__NR_fsopen, ENOSYS},
    {__NR_fsconfig, ENOSYS},
    {__NR_fsmount, ENOSYS},
    {__NR_fspick, ENOSYS},
    {__NR_mount_setattr, ENOSYS},
};

/* Shared memory that no rlimit counts (RLIMIT_AS counts neither a memfd's pages nor a SysV
   segment's until they are mapped, and both outlive the mapping): refused when the run has no
   memory cgroup to charge them to (the request's 'h' item). ENOSYS, as a kernel without them
   answers, so programs that can fall back (to a file in /tmp, bounded by its tmpfs) do. */
static const unsigned deny_shared_memory[] = {__NR_memfd_create, __NR_shmget};

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

static void build_filter(int refuse_shared_memory) {
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
  for (size_t i = 0; refuse_shared_memory && i < sizeof deny_shared_memory / sizeof(unsigned);
       i++) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, deny_shared_memory[i], 0, 1);
    RET(ERRNO(ENOSYS));
  }
  /* clone with any namespace flag: EPERM. The flags are the low word of args[0]. */
  emit(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 0, 4);
  LD(ARG_LO(0));
  emit(BPF_JMP | BPF_JSET | BPF_K, CLONE_NS_FLAGS, 0, 1);
  RET(ERRNO(EPERM));
  RET(SECCOMP_RET_ALLOW);
  /* ioctl TIOCSTI / TIOCLINUX: pushing input into a terminal. The kernel takes the command
     as an unsigned int, so the low word is what it acts on. */
  emit(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 5);
  LD(ARG_LO(1));
  emit(BPF_JMP | BPF_JEQ | BPF_K, TIOCSTI, 2, 0);
  emit(BPF_JMP | BPF_JEQ | BPF_K, TIOCLINUX, 1, 0);
  RET(SECCOMP_RET_ALLOW);
  RET(ERRNO(EPERM));
  /* socket and socketpair of AF_VSOCK: the one family that reaches the host from a network
     namespace. */
  static const unsigned sock_calls[] = {__NR_socket, __NR_socketpair};
  for (size_t i = 0; i < 2; i++) {
    emit(BPF_JMP | BPF_JEQ | BPF_K, sock_calls[i], 0, 4);
    LD(ARG_LO(0));
    emit(BPF_JMP | BPF_JEQ | BPF_K, AF_VSOCK, 0, 1);
    RET(ERRNO(EAFNOSUPPORT));
    RET(SECCOMP_RET_ALLOW);
  }
  /* personality: only the query and PER_LINUX (no ADDR_NO_RANDOMIZE and friends). */
  emit(BPF_JMP | BPF_JEQ | BPF_K, __NR_personality, 0, 5);
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
/* The host that spawned us is MOONBOX_PARENT (its pid: the helper starts in the host's pid
   namespace). A host killed before bwrap set --die-with-parent
   would otherwise leave the program's tree running, as a uid of the range, forever: so the
   helper dies with its parent from its first instruction, and again after setresuid (which
   clears the setting), checking each time that the parent is still the one that spawned it. */
static void die_with_parent(pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0) helper_fail("prctl(PR_SET_PDEATHSIG)", errno);
  if (parent > 0 && getppid() != parent) _exit(125); /* the host is already gone */
}

static void helper_spawn_main(pid_t parent) {
  die_with_parent(parent);
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
  unsigned long long uid = 0, mounts = 0, refuse_shm = 0;
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
    case 'h': /* 1: no memory cgroup charges shared memory, so the filter refuses it */
      refuse_shm = item_num(&it);
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
  build_filter(refuse_shm != 0);
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
  /* The host's kernel command line and boot id identify the machine across runs (and the
     command line may carry secrets): generated files are bound over them, a boot id of the
     run's own. */
  static const char cmdline[] = "moonbox\n";
  unsigned char rnd[16] = {0};
  if (syscall(SYS_getrandom, rnd, sizeof rnd, 0) != (long)sizeof rnd)
    helper_fail("getrandom", errno);
  rnd[6] = (unsigned char)((rnd[6] & 0x0f) | 0x40); /* a version 4 uuid, as the kernel's */
  rnd[8] = (unsigned char)((rnd[8] & 0x3f) | 0x80);
  char boot_id[40];
  int bn = 0;
  for (int i = 0; i < 16; i++)
    bn += snprintf(boot_id + bn, sizeof boot_id - (size_t)bn, "%s%02x",
                   i == 4 || i == 6 || i == 8 || i == 10 ? "-" : "", rnd[i]);
  boot_id[bn++] = '\n';
  int cmdline_fd = new_memfd("moonbox-cmdline", cmdline, sizeof cmdline - 1);
  int boot_id_fd = new_memfd("moonbox-boot-id", boot_id, (size_t)bn);
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
    die_with_parent(parent);
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
  char **argv = calloc(nfixed + 3 * files + 6 + commands + 1, sizeof *argv);
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
  /* After --args, so after its --proc: the masks go over the new procfs. */
  char cf[16], bf[16];
  snprintf(cf, sizeof cf, "%d", cmdline_fd);
  snprintf(bf, sizeof bf, "%d", boot_id_fd);
  argv[ac++] = "--ro-bind-data";
  argv[ac++] = cf;
  argv[ac++] = "/proc/cmdline";
  argv[ac++] = "--ro-bind-data";
  argv[ac++] = bf;
  argv[ac++] = "/proc/sys/kernel/random/boot_id";
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

/* ---- the shim's copy of the view's overlay and rw mounts and /tmp (capabilities/exec_copy.h) ---- */

#define COPY_ENTRIES 10000u /* MBXC_EXEC_COPY_ENTRIES */
#define COPY_DEPTH 64       /* MBXC_EXEC_COPY_DEPTH */
#define MAX_ROOTS 64
#define MAX_EXCLUDED 1100
#define PATH_BUF 4200
#define BLOCK 65536

/* A file as it was unpacked: its path, size and the hash of its bytes, so the copy-back sends
   only the name of a file the program left as it was (U) instead of its bytes. A hash
   collision could only make the library keep what the program itself wrote over: the program
   is the only one who could craft one, and it gains nothing. */
typedef struct unpacked {
  char *path;
  unsigned long long size, hash;
} unpacked;

typedef struct shim_copy {
  char *roots[MAX_ROOTS];
  size_t root_len[MAX_ROOTS];
  size_t nroots;
  char *ex[MAX_EXCLUDED];
  size_t ex_len[MAX_EXCLUDED];
  size_t nex;
  unpacked *files;
  size_t nfiles;
  size_t entries;
  int broken; /* the copy-back pipe failed: stop writing */
} shim_copy;

/* The hash of a file's bytes, fed in any pieces: 64 KiB blocks, each mixed word by word, then
   chained (a hash of this program's own, for equality only). */
typedef struct hasher {
  unsigned long long h, len;
  unsigned char block[BLOCK];
  size_t fill;
} hasher;

static void hash_block(hasher *hs) {
  unsigned long long b = 0x9e3779b97f4a7c15ull ^ hs->fill;
  size_t i = 0;
  for (; i + 8 <= hs->fill; i += 8) {
    unsigned long long w;
    memcpy(&w, hs->block + i, 8);
    b ^= w * 0xbf58476d1ce4e5b9ull;
    b = ((b << 31) | (b >> 33)) * 0x94d049bb133111ebull;
  }
  for (; i < hs->fill; i++)
    b = (b ^ hs->block[i]) * 0x100000001b3ull;
  hs->h = (hs->h ^ b) * 0xff51afd7ed558ccdull;
  hs->h ^= hs->h >> 29;
  hs->fill = 0;
}

static void hash_feed(hasher *hs, const char *p, size_t n) {
  hs->len += n;
  while (n > 0) {
    size_t k = BLOCK - hs->fill < n ? BLOCK - hs->fill : n;
    memcpy(hs->block + hs->fill, p, k);
    hs->fill += k;
    p += k;
    n -= k;
    if (hs->fill == BLOCK) hash_block(hs);
  }
}

static unsigned long long hash_end(hasher *hs) {
  if (hs->fill) hash_block(hs);
  return hs->h ^ hs->len;
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* The copy-in socket, read through a buffer. */
typedef struct reader {
  int fd;
  char buf[BLOCK];
  size_t pos, len;
} reader;

static int read_some(reader *rd) {
  if (rd->pos < rd->len) return 1;
  for (;;) {
    ssize_t n = read(rd->fd, rd->buf, sizeof rd->buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return 0;
    rd->pos = 0;
    rd->len = (size_t)n;
    return 1;
  }
}

/* n bytes into out (out NULL: to fd, hashed; fd < 0: dropped). 0, or -1 cut short. */
static int read_into(reader *rd, char *out, size_t n, int fd, hasher *hs) {
  while (n > 0) {
    if (!read_some(rd)) return -1;
    size_t k = rd->len - rd->pos < n ? rd->len - rd->pos : n;
    if (out) {
      memcpy(out, rd->buf + rd->pos, k);
      out += k;
    } else {
      if (fd >= 0 && write_all(fd, rd->buf + rd->pos, k) != 0) return -2;
      if (hs) hash_feed(hs, rd->buf + rd->pos, k);
    }
    rd->pos += k;
    n -= k;
  }
  return 0;
}

/* An item's head: 1 with *tag and *len, 0 at the end of the stream, -1 malformed. */
static int read_head(reader *rd, char *tag, unsigned long long *len) {
  if (!read_some(rd)) return 0;
  *tag = rd->buf[rd->pos++];
  unsigned long long n = 0;
  int digits = 0;
  for (;;) {
    if (!read_some(rd)) return -1;
    char ch = rd->buf[rd->pos++];
    if (ch == ':') break;
    if (ch < '0' || ch > '9' || ++digits > 19) return -1;
    n = n * 10 + (unsigned long long)(ch - '0');
  }
  if (digits == 0) return -1;
  *len = n;
  return 1;
}

static char *dup_text(const char *p, size_t n) {
  char *s = malloc(n + 1);
  if (s) {
    memcpy(s, p, n);
    s[n] = '\0';
  }
  return s;
}

static int cmp_unpacked(const void *a, const void *b) {
  return strcmp(((const unpacked *)a)->path, ((const unpacked *)b)->path);
}

/* Unpack the copy as it streams in on SHIM_COPY_FD: 0 done (or nothing to copy), -1 failed
   (said on stderr). */
static int shim_unpack(shim_copy *c) {
  memset(c, 0, sizeof *c);
  static reader rd;
  static hasher hs;
  rd.fd = SHIM_COPY_FD;
  rd.pos = rd.len = 0;
  if (fcntl(rd.fd, F_GETFD) < 0) return 0;
  char tag, path[PATH_BUF];
  unsigned long long n;
  int r, ended = 0, empty = 1;
  while (!ended && (r = read_head(&rd, &tag, &n)) == 1) {
    empty = 0;
    if (tag == 'Z') {
      ended = n == 0;
      break;
    }
    /* A path first: all of the item for R W X D, up to the NUL for F. */
    size_t pl = 0;
    int executable = tag == 'E';
    if (executable) tag = 'F';
    if (tag == 'F') {
      for (;;) {
        if (pl >= sizeof path || pl >= n || read_into(&rd, path + pl, 1, -1, NULL) != 0) break;
        if (path[pl] == '\0') break;
        pl++;
      }
      if (pl >= sizeof path || pl >= n || path[pl] != '\0') break;
    } else {
      if (n >= sizeof path || read_into(&rd, path, (size_t)n, -1, NULL) != 0) break;
      pl = (size_t)n;
      path[pl] = '\0';
    }
    if (pl == 0 || path[0] != '/' || strlen(path) != pl) break;
    if ((tag == 'R' || tag == 'W') && c->nroots < MAX_ROOTS) {
      c->root_len[c->nroots] = pl;
      if ((c->roots[c->nroots++] = dup_text(path, pl)) == NULL) break;
    } else if (tag == 'X' && c->nex < MAX_EXCLUDED) {
      c->ex_len[c->nex] = pl;
      if ((c->ex[c->nex++] = dup_text(path, pl)) == NULL) break;
    } else if (tag == 'D') {
      if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "moonbox-exec: copying %s into the sandbox: %s\n", path, strerror(errno));
        return -1;
      }
    } else if (tag == 'F') {
      unsigned long long size = n - pl - 1;
      int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    executable ? 0755 : 0644);
      memset(&hs, 0, sizeof hs);
      int got = fd < 0 ? -2 : read_into(&rd, NULL, (size_t)size, fd, &hs);
      int err = errno;
      if (fd >= 0) close(fd);
      if (got == -1) break;
      if (got != 0) {
        fprintf(stderr, "moonbox-exec: copying %s into the sandbox: %s\n", path, strerror(err));
        return -1;
      }
      if (c->nfiles % 256 == 0) {
        unpacked *grown = realloc(c->files, (c->nfiles + 256) * sizeof *grown);
        if (grown == NULL) break;
        c->files = grown;
      }
      c->files[c->nfiles] = (unpacked){dup_text(path, pl), size, hash_end(&hs)};
      if (c->files[c->nfiles++].path == NULL) break;
    } else if (tag != 'R' && tag != 'W' && tag != 'X') {
      break;
    }
  }
  close(SHIM_COPY_FD);
  if (empty) return 0;
  if (!ended) {
    fprintf(stderr, "moonbox-exec: the copy of the view is malformed or was cut short\n");
    return -1;
  }
  if (c->nfiles > 1) qsort(c->files, c->nfiles, sizeof *c->files, cmp_unpacked);
  return 0;
}

static void emit_head(shim_copy *c, int fd, char tag, size_t len) {
  char head[32];
  int hn = snprintf(head, sizeof head, "%c%zu:", tag, len);
  if (!c->broken && write_all(fd, head, (size_t)hn) != 0) c->broken = 1;
}

static void emit_bytes(shim_copy *c, int fd, const char *p, size_t n) {
  if (!c->broken && write_all(fd, p, n) != 0) c->broken = 1;
}

static void emit_item(shim_copy *c, int fd, char tag, const char *path, size_t pl) {
  emit_head(c, fd, tag, pl);
  emit_bytes(c, fd, path, pl);
}

/* a is b or lies below it. */
static int within(const char *a, size_t al, const char *b, size_t bl) {
  return al >= bl && memcmp(a, b, bl) == 0 && (al == bl || a[bl] == '/' || bl == 1);
}

/* Another mount's point or a policy file, below the root being walked (an excluded path
   that is the root or holds it excludes nothing: the root is itself a mount). */
static int excluded(const shim_copy *c, const char *root, size_t root_len, const char *path,
                    size_t len) {
  for (size_t i = 0; i < c->nex; i++) {
    if (within(root, root_len, c->ex[i], c->ex_len[i])) continue;
    if (within(path, len, c->ex[i], c->ex_len[i])) return 1;
  }
  return 0;
}

/* A regular file back: its name only when its bytes are those unpacked (U), else F with all
   of them, streamed (exactly the size its fstat said: nothing else runs now). */
static void pack_file(shim_copy *c, int fd, int dfd, const char *name, const char *path,
                      size_t pl) {
  static char buf[BLOCK];
  static hasher hs;
  int f = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st;
  if (f < 0 || fstat(f, &st) != 0 || !S_ISREG(st.st_mode)) {
    if (f >= 0) close(f);
    emit_item(c, fd, 'S', path, pl);
    return;
  }
  unsigned long long size = (unsigned long long)st.st_size;
  unpacked key = {(char *)path, 0, 0};
  const unpacked *was =
      c->nfiles ? bsearch(&key, c->files, c->nfiles, sizeof *c->files, cmp_unpacked) : NULL;
  if (was && was->size == size) {
    memset(&hs, 0, sizeof hs);
    unsigned long long got = 0;
    for (;;) {
      ssize_t k = read(f, buf, sizeof buf);
      if (k < 0 && errno == EINTR) continue;
      if (k <= 0) break;
      hash_feed(&hs, buf, (size_t)k);
      got += (unsigned long long)k;
    }
    if (got == size && hash_end(&hs) == was->hash) {
      close(f);
      emit_item(c, fd, 'U', path, pl);
      return;
    }
    if (lseek(f, 0, SEEK_SET) != 0) {
      close(f);
      emit_item(c, fd, 'S', path, pl);
      return;
    }
  }
  emit_head(c, fd, 'F', pl + 1 + (size_t)size);
  emit_bytes(c, fd, path, pl);
  emit_bytes(c, fd, "", 1);
  unsigned long long sent = 0;
  while (sent < size && !c->broken) {
    size_t want = size - sent < sizeof buf ? (size_t)(size - sent) : sizeof buf;
    ssize_t k = read(f, buf, want);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      memset(buf, 0, want); /* cut short since its fstat: the length stays what was said */
      k = (ssize_t)want;
    }
    emit_bytes(c, fd, buf, (size_t)k);
    sent += (unsigned long long)k;
  }
  close(f);
}

/* Walk directory path (len bytes in a buffer of PATH_BUF) and send what is in it: directories
   and regular files as they are, anything else (a symlink, a FIFO, a socket) by name only.
   Never follows a link, never opens anything but a directory or a regular file, never
   blocks. */
static void pack_dir(shim_copy *c, int fd, const char *root, size_t root_len, char *path,
                     size_t len, int depth) {
  int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return;
  DIR *dir = fdopendir(dfd);
  if (dir == NULL) {
    close(dfd);
    return;
  }
  struct dirent *de;
  while ((de = readdir(dir)) != NULL && !c->broken) {
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    size_t nl = strlen(de->d_name);
    if (len + 1 + nl >= 4096) continue;
    path[len] = '/';
    memcpy(path + len + 1, de->d_name, nl + 1);
    size_t cl = len + 1 + nl;
    if (excluded(c, root, root_len, path, cl)) continue;
    /* One past the cap is sent, so the library sees the cap was passed and refuses. */
    if (++c->entries > COPY_ENTRIES + 1) break;
    struct stat st;
    if (fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode) && depth < COPY_DEPTH) {
      emit_item(c, fd, 'D', path, cl);
      pack_dir(c, fd, root, root_len, path, cl, depth + 1);
    } else if (S_ISREG(st.st_mode)) {
      pack_file(c, fd, dfd, de->d_name, path, cl);
    } else {
      emit_item(c, fd, 'S', path, cl);
    }
  }
  path[len] = '\0';
  closedir(dir);
}

static void shim_pack(shim_copy *c, int fd) {
  /* The library drains the pipe to its end; a write error only ends the copy-back (the
     missing end mark tells the library it was cut short). */
  signal(SIGPIPE, SIG_IGN);
  /* What the program left running is killed first (it would die with the sandbox a moment
     later anyway), so nothing changes under the walk: a file's size and bytes are the ones
     sent. kill(-1) reaches every process of this pid namespace this uid may signal but
     itself and the namespace's init (bwrap). */
  kill(-1, SIGKILL);
  char path[PATH_BUF];
  for (size_t i = 0; i < c->nroots; i++) {
    memcpy(path, c->roots[i], c->root_len[i] + 1);
    pack_dir(c, fd, c->roots[i], c->root_len[i], path, c->root_len[i], 0);
  }
  emit_item(c, fd, 'Z', "", 0);
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
  int back = fcntl(SHIM_BACK_FD, F_GETFD) >= 0 ? SHIM_BACK_FD : -1;
  if (syscall(SYS_close_range, (unsigned)STATUS_FD, (unsigned)STATUS_FD, 0) != 0 ||
      syscall(SYS_close_range, (unsigned)FIRST_MOUNT_FD, ~0u, 0) != 0 ||
      (report >= 0 &&
       (fcntl(report, F_SETFD, FD_CLOEXEC) != 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0)) ||
      (back >= 0 && fcntl(back, F_SETFD, FD_CLOEXEC) != 0)) {
    fprintf(stderr, "moonbox-exec: shim setup: %s\n", strerror(errno));
    return 127;
  }
  /* The view's overlay mounts and /tmp, written into the sandbox's tmpfs before the program
     can see them. */
  shim_copy copy;
  if (shim_unpack(&copy) != 0) return 126;
  /* The shim is the pid namespace's pid 1 (bwrap --as-pid-1), so it always forks: an init
     that became the program would never reap the program's orphans. */
  int init = getpid() == 1;
  pid_t child = report >= 0 || init ? fork() : 0;
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
  /* The program's own wait status. The program's orphans are reparented to pid 1, this
     process: they are reaped as they end, so none is left a zombie holding a place of the
     run's pids limit. */
  int status = 0;
  for (;;) {
    int st = 0;
    pid_t w = waitpid(init ? -1 : child, &st, 0);
    if (w == child) {
      status = st;
      break;
    }
    if (w < 0 && errno != EINTR) {
      fprintf(stderr, "moonbox-exec: waitpid: %s\n", strerror(errno));
      return 126;
    }
  }
  /* The program has ended, and so does the run: what it left running is killed and reaped
     now (the kernel would at this process's exit), so the copy back below reads a tree that
     nothing writes any more. */
  if (init) {
    kill(-1, SIGKILL);
    for (;;) {
      pid_t w = waitpid(-1, NULL, 0);
      if (w < 0 && errno != EINTR) break;
    }
  }
  /* What the program left in the copied roots goes back before the report: the library reads
     both until the pipes close. */
  if (back >= 0 && copy.nroots > 0) shim_pack(&copy, back);
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
  const char *parent = getenv("MOONBOX_PARENT");
  helper_spawn_main(parent ? (pid_t)atol(parent) : 0);
  return 125;
}
