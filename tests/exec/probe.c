/* tests/exec/probe.c -- runs inside the exec sandbox (tests/exec/test_exec.sh): tries what the
   sandbox must refuse and prints one line per attempt. */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef AF_VSOCK
#define AF_VSOCK 40
#endif

static int failures;

/* r is the syscall's result: it must be -1 with errno want. */
static void expect(const char *name, long r, int want) {
  int got = r == -1 ? errno : 0;
  printf("%s: %s\n", name, r == -1 ? strerror(got) : "ALLOWED");
  if (r != -1 || got != want) {
    printf("  FAIL %s: wanted %s\n", name, strerror(want));
    failures++;
  }
}

static int deny(void) {
  expect("unshare(CLONE_NEWUSER)", unshare(CLONE_NEWUSER), EPERM);
  expect("unshare(CLONE_NEWNS)", unshare(CLONE_NEWNS), EPERM);
  expect("mount", mount("none", "/tmp", "tmpfs", 0, NULL), EPERM);
  expect("chroot", chroot("/tmp"), EPERM);
  expect("keyctl", syscall(250, 0, -3, 0), EPERM);
  struct perf_event_attr pa;
  memset(&pa, 0, sizeof pa);
  pa.size = sizeof pa;
  pa.type = PERF_TYPE_SOFTWARE;
  expect("perf_event_open", syscall(298, &pa, 0, -1, -1, 0), EPERM);
  char params[120] = {0};
  expect("io_uring_setup", syscall(425, 1, params), EPERM);
  expect("fsopen", syscall(430, "tmpfs", 0), ENOSYS);
  expect("open_tree", syscall(428, AT_FDCWD, "/tmp", 0), ENOSYS);
  expect("open_tree_attr (467, newer than the list)", syscall(467, AT_FDCWD, "/tmp", 0, 0, 0),
         ENOSYS);
  expect("syscall 600 (unknown)", syscall(600, 0), ENOSYS);
  expect("bpf", syscall(321, 0, NULL, 0), EPERM);
  expect("userfaultfd", syscall(323, 0), EPERM);
  expect("ptrace(TRACEME)", ptrace(PTRACE_TRACEME, 0, NULL, NULL), EPERM);
  expect("setns", syscall(308, 0, 0), EPERM);
  expect("clone(CLONE_NEWNET)", syscall(56, CLONE_NEWNET | SIGCHLD, 0, 0, 0, 0), EPERM);
  expect("clone3", syscall(435, NULL, 0), ENOSYS);
  expect("socket(AF_VSOCK)", socket(AF_VSOCK, SOCK_STREAM, 0), EAFNOSUPPORT);
  char c = 'x';
  expect("ioctl(TIOCSTI)", ioctl(0, TIOCSTI, &c), EPERM);
  expect("process_vm_readv", syscall(310, 1, NULL, 0, NULL, 0, 0), EPERM);
  expect("kexec_load", syscall(246, 0, 0, NULL, 0), EPERM);
  expect("init_module", syscall(175, NULL, 0, ""), EPERM);
  struct timespec ts = {0, 0};
  expect("clock_settime", clock_settime(CLOCK_REALTIME, &ts), EPERM);
  expect("personality(ADDR_NO_RANDOMIZE)", personality(ADDR_NO_RANDOMIZE), EPERM);
  /* The LDT and the NUMA memory policy calls (issue 25, 8). */
  char ldt[16] = {0};
  expect("modify_ldt", syscall(__NR_modify_ldt, 0, ldt, sizeof ldt), EPERM);
  unsigned long nodes = 1;
  expect("mbind", syscall(__NR_mbind, ldt, 4096, 0, &nodes, 64, 0), EPERM);
  expect("set_mempolicy", syscall(__NR_set_mempolicy, 0, NULL, 0), EPERM);
  int mode = 0;
  expect("get_mempolicy", syscall(__NR_get_mempolicy, &mode, NULL, 0, NULL, 0), EPERM);
  expect("set_mempolicy_home_node", syscall(450, (unsigned long)ldt, 4096, 0, 0), EPERM);
  /* What must keep working. */
  pid_t pid = fork();
  if (pid == 0) _exit(7);
  int ws = 0;
  if (pid < 0 || waitpid(pid, &ws, 0) != pid || !WIFEXITED(ws) || WEXITSTATUS(ws) != 7) {
    printf("  FAIL fork does not work\n");
    failures++;
  } else {
    printf("fork: works\n");
  }
  if (personality(0xffffffff) == -1) {
    printf("  FAIL personality query refused\n");
    failures++;
  }
  printf("failures: %d\n", failures);
  return failures ? 1 : 0;
}

/* An x32 system call: the filter kills the process (SIGSYS). */
static int x32(void) {
  syscall(0x40000000 | 39); /* getpid */
  printf("x32 getpid was ALLOWED\n");
  return 0;
}

static int connect_port(const char *port) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(port))};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int r = connect(s, (struct sockaddr *)&a, sizeof a);
  printf("connect 127.0.0.1:%s: %s\n", port, r == 0 ? "CONNECTED" : strerror(errno));
  return r == 0 ? 1 : 0;
}

/* Allocates and touches 64 MiB blocks until malloc fails or 4 GiB are held. */
static int hog(void) {
  size_t held = 0;
  for (int i = 0; i < 64; i++) {
    char *p = malloc(64u << 20);
    if (p == NULL) {
      printf("allocation failed after %zu MiB\n", held >> 20);
      return 3;
    }
    memset(p, 1, 64u << 20);
    held += 64u << 20;
  }
  printf("held %zu MiB: no limit\n", held >> 20);
  return 0;
}

/* Shared memory: one line each for memfd_create and shmget, "ok" or the errno's text. */
static int shm(void) {
  long m = syscall(__NR_memfd_create, "probe", 0);
  printf("memfd_create: %s\n", m >= 0 ? "ok" : strerror(errno));
  int s = shmget(IPC_PRIVATE, 1 << 20, IPC_CREAT | 0600);
  printf("shmget: %s\n", s >= 0 ? "ok" : strerror(errno));
  if (s >= 0) shmctl(s, IPC_RMID, NULL);
  return 0;
}

/* Fills memfds 4 MiB each (below RLIMIT_FSIZE; pages no process maps, so no RSS and no
   RLIMIT_AS) until a write fails or 2 GiB are held. */
static int memfd_hog(void) {
  static char block[1 << 20];
  memset(block, 7, sizeof block);
  size_t held = 0;
  while (held < (2048u << 20)) {
    long fd = syscall(__NR_memfd_create, "hog", 0);
    if (fd < 0) {
      printf("memfd_create failed after %zu MiB: %s\n", held >> 20, strerror(errno));
      return 3;
    }
    for (int i = 0; i < 4; i++) {
      if (write((int)fd, block, sizeof block) != (ssize_t)sizeof block) {
        printf("memfd write failed after %zu MiB: %s\n", held >> 20, strerror(errno));
        return 3;
      }
      held += sizeof block;
    }
  }
  printf("held %zu MiB of memfds: no limit\n", held >> 20);
  return 0;
}

/* A real segfault: a write through a null pointer the compiler cannot see (a volatile one). */
static int segv(void) {
  int *volatile p = NULL;
  *p = 1;
  return 0;
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IONBF, 0);
  if (argc >= 2 && strcmp(argv[1], "deny") == 0) return deny();
  if (argc >= 2 && strcmp(argv[1], "x32") == 0) return x32();
  if (argc >= 3 && strcmp(argv[1], "connect") == 0) return connect_port(argv[2]);
  if (argc >= 2 && strcmp(argv[1], "hog") == 0) return hog();
  if (argc >= 2 && strcmp(argv[1], "segv") == 0) return segv();
  if (argc >= 2 && strcmp(argv[1], "shm") == 0) return shm();
  if (argc >= 2 && strcmp(argv[1], "memfd-hog") == 0) return memfd_hog();
  fprintf(stderr, "usage: probe deny | x32 | connect PORT | hog | segv | shm | memfd-hog\n");
  return 2;
}
