/* host/worker/jail.c -- what a worker process gives up before it reads any guest code. */
#include "host/worker/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/futex.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <seccomp.h>

#include "host/backend/worker_proto.h"
#include "vm/cstack.h"

#if defined(__SANITIZE_ADDRESS__)
#define JAIL_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define JAIL_ASAN 1
#endif
#endif

/* The uid and gid a root parent's workers run as. */
#define JAIL_NOBODY 65534
/* Address space beyond the slot: the worker's binary, malloc arenas, the checkpoint copy
   (up to the heap), the frames' buffers. */
#define JAIL_AS_OVERHEAD ((size_t)512 << 20)
/* CPU seconds over the worker's whole life; the parent's wall-clock backstop ends a single
   run long before, and a worker is recycled after a bounded number of runs. */
#define JAIL_CPU_SECONDS 3600

static int applied;
/* The uid a root parent's workers and init drop to: the zygote's own when the parent gave it
   one (mbxH_jail_set_uid), else nobody. */
static uid_t jail_uid = JAIL_NOBODY;

void mbxH_jail_set_uid(uint32_t uid) {
  jail_uid = (uid_t)uid;
}

int mbxH_jail_applied(void) {
  return applied;
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = write(fd, text, strlen(text));
  close(fd);
  return n == (ssize_t)strlen(text) ? 0 : -1;
}

/* Capabilities through the raw system calls (libcap would be one more library in every
   worker for two calls). */
static int cap_call(int nr, struct __user_cap_data_struct data[2]) {
  struct __user_cap_header_struct hdr = {_LINUX_CAPABILITY_VERSION_3, 0};
  return (int)syscall(nr, &hdr, data);
}

/* Every capability set empty: effective, permitted, inheritable, ambient, and (with
   bounding, while CAP_SETPCAP still allows it: the zygote's once) the bounding set, what an
   execve could give back (the jail forbids execve anyway). */
static int drop_capabilities(int bounding) {
  (void)prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  for (int cap = 0; bounding && cap < 64; cap++)
    if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0) break; /* EINVAL past the last one */
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  return cap_call(SYS_capset, data);
}

/* 1 when this process holds any capability (effective, permitted or inheritable), 0 when
   none, -1 when it cannot tell. */
static int has_capabilities(void) {
  struct __user_cap_data_struct data[2];
  memset(data, 0, sizeof data);
  if (cap_call(SYS_capget, data) != 0) return -1;
  for (int i = 0; i < 2; i++)
    if (data[i].effective || data[i].permitted || data[i].inheritable) return 1;
  return 0;
}

/* Set in the zygote by mbxH_jail_user_namespace; its forked workers inherit it. */
static int in_shared_user_ns;

int mbxH_jail_user_namespace(int flags) {
  /* A non-root writer may map exactly its effective ids. */
  uid_t uid = geteuid();
  gid_t gid = getegid();
  if (uid == 0 || unshare(CLONE_NEWUSER | flags) != 0) return -1;
  /* The same ids inside as outside: the zygote and its workers stay the host's non-root
     uid (a non-root process may map only its own), so nothing here is root to anyone. */
  char map[64];
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)uid, (unsigned)uid);
  if (write_file("/proc/self/uid_map", map) != 0) return -2;
  if (write_file("/proc/self/setgroups", "deny") != 0) return -2;
  snprintf(map, sizeof map, "%u %u 1\n", (unsigned)gid, (unsigned)gid);
  if (write_file("/proc/self/gid_map", map) != 0 || geteuid() != uid) return -2;
  /* unshare gave this process every capability over the new namespace, and with it over the
     network and pid namespaces it owns (CAP_KILL and CAP_SYS_PTRACE there would reach every
     worker, dumpable or not). The zygote needs none of them to fork: it drops them all
     here, so the workers it forks start with none. */
  if (drop_capabilities(1) != 0) return -2;
  in_shared_user_ns = 1;
  return 0;
}

static int drop_root(void) {
  if (geteuid() == 0) {
    if (setgroups(0, NULL) != 0 || setresgid(jail_uid, jail_uid, jail_uid) != 0 ||
        setresuid(jail_uid, jail_uid, jail_uid) != 0)
      return -1;
    /* Make sure it cannot be undone. */
    if (setuid(0) == 0 || geteuid() != jail_uid) return -1;
    applied |= MBXH_JAIL_UID_NOBODY | (jail_uid != JAIL_NOBODY ? MBXH_JAIL_UID_OWN : 0);
  } else if (in_shared_user_ns) {
    /* Not root: the zygote's user namespace, made once at its start and shared by every
       worker (a namespace per worker cost a fork about 120 us more, and gave nothing more:
       workers of one uid are kept apart by the filter and by not being dumpable, see
       docs/SECURITY-MODEL.md). The zygote dropped its capabilities: checked (one capget),
       and dropped here should any be left. */
    if (has_capabilities() != 0 && drop_capabilities(0) != 0) return -1;
    applied |= MBXH_JAIL_USER_NS;
  }
  /* Where user namespaces are off, the uid stays as it is: seccomp is then the whole jail. */
  if (has_capabilities() == 0) applied |= MBXH_JAIL_NO_CAPS;
  return 0;
}

int mbxH_jail_process(int keep_fd, pid_t parent) {
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return -1;
  /* Every fd but the socket: the zygote's control socket, stdio, whatever it held. */
  if (keep_fd > 0 && syscall(SYS_close_range, 0u, (unsigned)keep_fd - 1, 0u) != 0) return -1;
  if (syscall(SYS_close_range, (unsigned)keep_fd + 1, ~0u, 0u) != 0) return -1;
  int fl = fcntl(keep_fd, F_GETFD);
  if (fl < 0 || fcntl(keep_fd, F_SETFD, fl | FD_CLOEXEC) != 0) return -1;
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return -1;
  applied |= MBXH_JAIL_NO_NEW_PRIVS;
  if (drop_root() != 0) return -1;
  /* A change of uid clears the parent-death signal (and resets the dumpable flag: set just
     after): set it again, and check again that the zygote did not die in between (else the
     worker, or the pid namespace's init, would outlive it). */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) return -1;
  if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) return -1;
  struct rlimit core = {0, 0};
  if (setrlimit(RLIMIT_CORE, &core) != 0) return -1;
  struct rlimit cpu = {JAIL_CPU_SECONDS, JAIL_CPU_SECONDS};
  if (setrlimit(RLIMIT_CPU, &cpu) != 0) return -1;
  /* From here no fd can be opened. */
  struct rlimit nofile = {(rlim_t)keep_fd + 1, (rlim_t)keep_fd + 1};
  if (setrlimit(RLIMIT_NOFILE, &nofile) != 0) return -1;
  return 0;
}

int mbxH_jail_limits(size_t slot_bytes, size_t memory_limit, char *why, size_t why_size) {
#ifndef JAIL_ASAN
  /* Called under the filter (the warm worker is jailed before its sandbox is known): the
     filter lets prlimit64 through for this process's RLIMIT_AS only, and as nobody (or a
     user namespace's non-root uid) the hard limit can only go down, so the guest can never
     raise it past what is set here, before any guest byte is read. */
  size_t as = slot_bytes + 2 * memory_limit + JAIL_AS_OVERHEAD;
  struct rlimit lim = {(rlim_t)as, (rlim_t)as};
  if (syscall(SYS_prlimit64, 0, RLIMIT_AS, &lim, NULL) != 0) {
    snprintf(why, why_size, "setrlimit(RLIMIT_AS, %zu MiB): %s", as >> 20, strerror(errno));
    return -1;
  }
#else
  (void)slot_bytes;
  (void)memory_limit;
  (void)why;
  (void)why_size;
#endif
  return 0;
}

static int cmp_int(const void *a, const void *b) {
  return *(const int *)a - *(const int *)b;
}

/* glibc does some work the first time only, with system calls the filter does not allow:
   qsort sizes its buffer from sysinfo (for arrays past 1 KiB), localtime reads
   /etc/localtime, pthread_getattr_np (the C stack guard, vm/cstack.c) reads /proc/self/maps
   and getrlimit for the main thread (the guard caches the answer per thread). */
static void warm_glibc(void) {
  (void)mbxV_cstack_free();
  static int v[2048];
  for (int i = 0; i < 2048; i++)
    v[i] = 2048 - i;
  qsort(v, 2048, sizeof v[0], cmp_int);
  time_t t = time(NULL);
  struct tm tm;
  localtime_r(&t, &tm);
  gmtime_r(&t, &tm);
  char buf[64];
  strftime(buf, sizeof buf, "%c", &tm);
}

/* The pid the zygote compiles into the program in place of the worker's own (above pid_max,
   2^22, so no real pid is confused with it). */
#define JAIL_PID_PLACEHOLDER 0x7ead5eedu

/* The allow-list for pid (the only process kill and tgkill may signal). NULL when out of
   memory or libseccomp refuses. */
static scmp_filter_ctx build_filter(uint32_t pid) {
#ifdef MBX_WORKER_SECCOMP_LOG
  uint32_t deny = SCMP_ACT_LOG; /* development only: find what the corpora need */
#else
  uint32_t deny = SCMP_ACT_KILL_PROCESS;
#endif
  scmp_filter_ctx ctx = seccomp_init(deny);
  if (ctx == NULL) return NULL;
  static const int allowed[] = {
      /* the socket to the parent (fd 3: nothing else is open): frames are read and written
         with read and write; recvmsg only for the spin's peek, below */
      SCMP_SYS(read), SCMP_SYS(write),
      /* waiting for its next frame (poll: glibc's poll on x86-64; ppoll elsewhere) */
      SCMP_SYS(poll), SCMP_SYS(ppoll),
      /* memory */
      SCMP_SYS(mmap), SCMP_SYS(munmap), SCMP_SYS(mprotect), SCMP_SYS(madvise), SCMP_SYS(mremap),
      SCMP_SYS(brk),
      /* threads' primitives, signals (interrupt, the deadline path), clocks */
      SCMP_SYS(rt_sigaction), SCMP_SYS(rt_sigprocmask), SCMP_SYS(rt_sigreturn),
      SCMP_SYS(sigaltstack), SCMP_SYS(restart_syscall), SCMP_SYS(gettimeofday), SCMP_SYS(nanosleep),
      SCMP_SYS(sched_yield), SCMP_SYS(getrandom), SCMP_SYS(getpid), SCMP_SYS(gettid),
      SCMP_SYS(pause), SCMP_SYS(exit), SCMP_SYS(exit_group)};
  int rc = 0;
  for (size_t i = 0; i < sizeof allowed / sizeof allowed[0] && rc == 0; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, allowed[i], 0);
  /* The clocks by number only (CLOCK_REALTIME 0 .. CLOCK_TAI 11, which includes this
     process's and this thread's CPU clocks, 2 and 3, that os.clock reads): a negative id
     names another process's CPU clock, which the kernel lets anyone read and sleep on, to the
     nanosecond -- a timing channel on a sibling worker's runs (review 3). The whole 64-bit
     argument is compared, so a negative int with any upper half is refused too. */
  static const int clocks[] = {SCMP_SYS(clock_gettime), SCMP_SYS(clock_getres),
                               SCMP_SYS(clock_nanosleep)};
  for (size_t i = 0; i < sizeof clocks / sizeof clocks[0] && rc == 0; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, clocks[i], 1, SCMP_A0(SCMP_CMP_LE, 11));
  /* The spin's look at the socket (host/backend/worker_spin.c) is the worker's only recvmsg,
     with exactly MSG_PEEK | MSG_DONTWAIT; no sendmsg, sendto, recvfrom or *mmsg at all. So
     AF_UNIX MSG_OOB, the path of CVE-2025-38236 (which Chrome's renderer policy now blocks), is
     out of reach, with every other flag. The whole 64-bit argument is compared, so no bit the
     kernel ignores can carry another flag past the rule. */
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(recvmsg), 1,
                          SCMP_A2(SCMP_CMP_EQ, (scmp_datum_t)(MSG_PEEK | MSG_DONTWAIT)));
  /* futex with the plain operations glibc's mutexes, condition variables and once use, never
     the priority-inheritance ones (LOCK_PI, LOCK_PI2, TRYLOCK_PI, UNLOCK_PI, the *_REQUEUE_PI;
     Chromium's baseline policy refuses them: their kernel code has been the site of privilege
     escalations, CVE-2014-3153 among them). The kernel takes the command from the operation
     without FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME and ignores the upper 32 bits, so the
     rule masks exactly those off before it compares. */
  static const int futex_ops[] = {FUTEX_WAIT,        FUTEX_WAKE,    FUTEX_REQUEUE,
                                  FUTEX_CMP_REQUEUE, FUTEX_WAKE_OP, FUTEX_WAIT_BITSET,
                                  FUTEX_WAKE_BITSET};
  const scmp_datum_t futex_cmd_mask =
      0xffffffffu & ~(scmp_datum_t)(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME);
  for (size_t i = 0; i < sizeof futex_ops / sizeof futex_ops[0] && rc == 0; i++)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(futex), 1,
                          SCMP_A1(SCMP_CMP_MASKED_EQ, futex_cmd_mask, (scmp_datum_t)futex_ops[i]));
  /* abort() signals its own process, and only that. */
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(tgkill), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)pid));
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(kill), 1,
                          SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)pid));
  /* The sandbox's address-space limit is set after the filter is loaded (mbxH_jail_limits):
     prlimit64 of this process (pid 0) and of RLIMIT_AS only. */
  if (rc == 0)
    rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_EQ, 0),
                          SCMP_A1(SCMP_CMP_EQ, (scmp_datum_t)RLIMIT_AS));
  if (rc != 0) {
    seccomp_release(ctx);
    return NULL;
  }
  return ctx;
}

/* The zygote's compiled program (mbxH_jail_prepare), with the placeholder pid. */
static struct sock_filter *prepared;
static unsigned short prepared_len;

int mbxH_jail_prepare(void) {
  warm_glibc();
  scmp_filter_ctx ctx = build_filter(JAIL_PID_PLACEHOLDER);
  if (ctx == NULL) return -1;
  int fd = memfd_create("moonbox-seccomp", MFD_CLOEXEC);
  int rc = fd >= 0 ? seccomp_export_bpf(ctx, fd) : -1;
  seccomp_release(ctx);
  off_t size = rc == 0 ? lseek(fd, 0, SEEK_END) : -1;
  if (size <= 0 || size % (off_t)sizeof(struct sock_filter) != 0 ||
      size / (off_t)sizeof(struct sock_filter) > BPF_MAXINSNS) {
    if (fd >= 0) close(fd);
    return -1;
  }
  struct sock_filter *prog = malloc((size_t)size);
  int placeholders = 0;
  if (prog && pread(fd, prog, (size_t)size, 0) == size) {
    for (off_t i = 0; i < size / (off_t)sizeof *prog; i++)
      if (prog[i].k == JAIL_PID_PLACEHOLDER && prog[i].code == (BPF_JMP | BPF_JEQ | BPF_K))
        placeholders++;
  }
  close(fd);
  /* The kill and tgkill rules compare the pid (libseccomp compares the low word against it,
     and shares one comparison between the two rules: it found one, so the old check for two
     made every worker compile its own filter, 0.4 ms of CPU each). None means the program is
     not what this code expects, and workers compile their own. A comparison left unpatched
     could only deny (the placeholder is no pid): test_worker's abort case would see SIGSYS. */
  if (placeholders < 1) {
    free(prog);
    return -1;
  }
  prepared = prog;
  prepared_len = (unsigned short)(size / (off_t)sizeof *prog);
  return 0;
}

int mbxH_jail_seccomp(char *why, size_t why_size) {
  uint32_t self = (uint32_t)getpid();
  /* The zygote warmed glibc before forking (a fork inherits what it cached). */
  if (prepared == NULL) warm_glibc();
  if (prepared) {
    /* The zygote's program with this worker's pid where the placeholder was. */
    for (unsigned i = 0; i < prepared_len; i++)
      if (prepared[i].k == JAIL_PID_PLACEHOLDER &&
          (prepared[i].code == (BPF_JMP | BPF_JEQ | BPF_K)))
        prepared[i].k = self;
    struct sock_fprog fprog = {prepared_len, prepared};
    if (prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) != 0) {
      snprintf(why, why_size, "loading the seccomp filter failed: %s", strerror(errno));
      return -1;
    }
    applied |= MBXH_JAIL_SECCOMP | MBXH_JAIL_PREBUILT;
    return 0;
  }
  scmp_filter_ctx ctx = build_filter(self);
  int rc = ctx ? seccomp_load(ctx) : -ENOMEM;
  if (ctx) seccomp_release(ctx);
  if (rc != 0) {
    snprintf(why, why_size, "loading the seccomp filter failed: %s", strerror(-rc));
    return -1;
  }
  applied |= MBXH_JAIL_SECCOMP;
  return 0;
}

/* The init's filter in raw BPF (no libseccomp: nothing to compile, nothing allocated after the
   fork). The init only sleeps in pause() (or ppoll / rt_sigsuspend where the architecture has
   no pause) and dies; it never runs guest code, so this is depth, not a boundary: whatever
   made it run something else could do nothing but those. A foreign architecture (or x32) is
   refused too. */
#if defined(__x86_64__)
#define JAIL_AUDIT_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define JAIL_AUDIT_ARCH AUDIT_ARCH_AARCH64
#endif

int mbxH_jail_init_filter(void) {
#ifdef JAIL_AUDIT_ARCH
#define ALLOW_NR(nr)                                                                               \
  BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (nr), 0, 1), BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)
  struct sock_filter prog[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, JAIL_AUDIT_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
#ifdef __NR_pause
      ALLOW_NR(__NR_pause),
#endif
      ALLOW_NR(__NR_ppoll),
      ALLOW_NR(__NR_rt_sigsuspend),
      ALLOW_NR(__NR_restart_syscall),
      ALLOW_NR(__NR_rt_sigreturn),
      ALLOW_NR(__NR_exit),
      ALLOW_NR(__NR_exit_group),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
  };
#undef ALLOW_NR
  struct sock_fprog fprog = {(unsigned short)(sizeof prog / sizeof prog[0]), prog};
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &fprog) == 0 ? 0 : -1;
#else
  return 1; /* no filter for an architecture this list does not know: the init still only waits */
#endif
}
