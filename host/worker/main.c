/* host/worker/main.c -- moonbox-worker: a worker's loop (one sandbox: its vm runs here; every
   capability is the parent's, over the socket), and main(), which starts the zygote that forks
   the workers (host/worker/zygote.c). */

/*
** The parent starts `moonbox-worker --zygote` with posix_spawn, an empty environment and two
** fds: 3, its control socket, and 4, its mailbox (REAPs nobody waits for; see mail_drain in
** zygote.c). The zygote is single-threaded and runs no guest code: on
** MBXH_WP_SPAWN it makes a socketpair and forks; the child closes every fd but its end and
** hardens itself (host/worker/jail.c: no new privileges, not dumpable, an unprivileged uid, no core
** dumps, no fds to open); the zygote sends the other end and a pidfd of the child to the parent
** and closes its copies. The warm worker then completes its jail while it waits in the pool:
** a state from the zygote's template, one constant run to fault its pages in, the CPU limit and
** the seccomp allow-list (the zygote's prebuilt BPF program). The parent talks to the worker
** directly: MBXH_WP_CREATE carries the sandbox's limits, grants and first seed; the worker sets
** its address-space limit (the filter lets prlimit64 of RLIMIT_AS through, which can only
** lower the hard limit), makes its state and answers, so no guest byte is read before the
** jail is complete. It serves runs until the parent closes the socket or it is killed.
*/
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "capabilities/port_remote.h"
#include "host/worker/jail.h"
#include "host/worker/zygote.h"
#include "include/moonbox.h"
#include "host/backend/worker_proto.h"
#include "host/backend/worker_spin.h"
#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/run.h"
#include "vm/vm.h"
#include "vm/watchdog.h"

/* ---- frames on a blocking socket ---- */

static int write_all(int fd, const void *p, size_t n) {
  const unsigned char *b = p;
  while (n) {
    ssize_t w = write(fd, b, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    b += w;
    n -= (size_t)w;
  }
  return 0;
}

static int read_all(int fd, void *p, size_t n) {
  unsigned char *b = p;
  while (n) {
    ssize_t r = read(fd, b, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    b += r;
    n -= (size_t)r;
  }
  return 0;
}

static int send_frame(int fd, mbxH_wp_writer *w) {
  return mbxH_wp_finish(w) == 0 ? write_all(fd, w->data, w->len) : -1;
}

/* What a worker read of its socket past the frame it wanted (a primed worker may find the
   parent's RUN behind the zygote's CREATE): a read takes a small frame whole, header and
   payload, in one system call. Only the worker's: the zygote reads its frames exactly, so
   no byte of a control frame (another sandbox's prime) is left in memory a fork copies. */
typedef struct inbuf {
  unsigned char b[4096];
  size_t off, len;
} inbuf;
static inbuf g_worker_in;
/* &g_worker_in in a worker (serve), NULL in the zygote. */
static inbuf *g_in;

/* Wait in poll, not in read: a reader blocked in read on a unix stream socket is woken each
   time the peer consumes what it sent (the kernel's write-space wake-up ignores what the
   waiter waits for), and on a VM each such wake-up of an idle CPU cost the peer that read our
   frame 12-18 us; poll's wait sees only input. */
static int wait_input(int fd) {
  struct pollfd pf = {fd, POLLIN, 0};
  while (poll(&pf, 1, -1) < 0)
    if (errno != EINTR) return -1;
  return 0;
}

/* At least want bytes (at most sizeof in->b) buffered in in. 0, or -1 when the socket
   closed. */
static int fill(int fd, inbuf *in, size_t want) {
  if (in->len - in->off >= want) return 0;
  memmove(in->b, in->b + in->off, in->len - in->off);
  in->len -= in->off;
  in->off = 0;
  while (in->len < want) {
    if (wait_input(fd) != 0) return -1;
    ssize_t r = read(fd, in->b + in->len, sizeof in->b - in->len);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    in->len += (size_t)r;
  }
  return 0;
}

/* The next frame into *buf (grown as needed); its type, or -1 when the socket closed or the
   frame is malformed (the parent is trusted: either way the worker has nothing left to do).
   in: the worker's buffer (NULL: the zygote, reading exactly). */
static int recv_frame_in(int fd, inbuf *in, unsigned char **buf, size_t *cap, size_t *len) {
  unsigned char hdr[MBXH_WP_HEADER];
  if (in) {
    if (fill(fd, in, sizeof hdr) != 0) return -1;
    memcpy(hdr, in->b + in->off, sizeof hdr);
    in->off += sizeof hdr;
  } else if (wait_input(fd) != 0 || read_all(fd, hdr, sizeof hdr) != 0) {
    return -1;
  }
  mbxH_wp_type type;
  uint32_t n;
  if (mbxH_wp_header(hdr, MBXH_WP_MAX_FRAME, &type, &n, NULL, 0) != 0) return -1;
  if (n + (size_t)1 > *cap) {
    unsigned char *b = realloc(*buf, n + (size_t)1);
    if (b == NULL) return -1;
    *buf = b;
    *cap = n + (size_t)1;
  }
  size_t have = 0;
  if (in) {
    have = in->len - in->off < n ? in->len - in->off : n;
    memcpy(*buf, in->b + in->off, have);
    in->off += have;
  }
  if (read_all(fd, *buf + have, n - have) != 0) return -1;
  *len = n;
  return (int)type;
}

static int recv_frame(int fd, unsigned char **buf, size_t *cap, size_t *len) {
  return recv_frame_in(fd, g_in, buf, cap, len);
}

int mbxH_worker_send_frame(int fd, mbxH_wp_writer *w) {
  return send_frame(fd, w);
}

int mbxH_worker_recv_frame(int fd, unsigned char **buf, size_t *cap, size_t *len) {
  return recv_frame_in(fd, NULL, buf, cap, len);
}

/* The worker's spin before it blocks for the parent's next frame, after a reply or a port call
   (host/backend/worker_spin.h: bounded, and it backs off while the parent is slow to send). */
static mbxH_spin g_spin;
/* MBX_CAP_WORKER_SPIN of the sandbox, sent with its CREATE. */
static int g_spin_on;

/* recv_frame where the parent's next frame is expected soon. */
static int recv_frame_soon(int fd, unsigned char **buf, size_t *cap, size_t *len) {
  if (g_spin_on && (g_in == NULL || g_in->off == g_in->len)) (void)mbxH_spin_wait(&g_spin, fd, 0);
  return recv_frame(fd, buf, cap, len);
}

/* ---- the worker's port: every operation is a round trip to the parent ---- */

/* The sandbox's grants as CREATE sent them, and its port: capabilities/port_remote.c, its
   transport this socket. Whatever breaks the conversation (a send fails, the reply is not a
   PORT_REPLY or cannot be read) ends the worker quietly: its parent is gone or broken, and it
   owns every capability the guest has. */
typedef struct wport {
  mbxC_remote remote;
  mbxC_grants grants;
  mbxC_grant_fn *fns;
  char *names; /* the fns' names, NUL-separated copies */
  int fd;
  unsigned char *rbuf; /* the last reply: what the port's answers point into */
  size_t rcap, rlen;
} wport;

static wport g_port;
static mbxV_vm *volatile g_vm;

static void die_quietly(void) __attribute__((noreturn));
static void die_quietly(void) {
  _exit(3);
}

static void call_begin(void *ctx, mbxC_wire_writer *w) {
  (void)ctx;
  mbxH_wp_begin(w, MBXH_WP_PORT_CALL);
}

/* Send the call, read the reply; the parent's next frame is expected soon. */
static void call_round_trip(void *ctx, mbxC_wire_writer *w, const unsigned char **reply,
                            size_t *reply_len) {
  wport *wp = ctx;
  if (send_frame(wp->fd, w) != 0) die_quietly();
  int t = recv_frame_soon(wp->fd, &wp->rbuf, &wp->rcap, &wp->rlen);
  if (t != MBXH_WP_PORT_REPLY) die_quietly();
  *reply = wp->rbuf;
  *reply_len = wp->rlen;
}

static void call_broken(void *ctx) __attribute__((noreturn));
static void call_broken(void *ctx) {
  (void)ctx;
  die_quietly();
}

static const mbxC_wire_transport g_transport = {&g_port, call_begin, call_round_trip, call_broken};

/* ---- the sandbox ---- */

typedef struct wsandbox {
  mbxV_pool *pool;
  mbxV_vm *vm;
  mbxV_config cfg;
  uint64_t host_call_limit;
  mbxV_checkpoint checkpoint;
} wsandbox;

static int run_protected(lua_State *L, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  return lua_pcall(L, 0, 0, 0) == LUA_OK;
}

/* Sandboxes this process has served (more than one only for a one-tenant runtime). */
static unsigned served_sandboxes;
/* Whether this sandbox's CREATE was sent ahead of demand (host/backend/worker.c: a warm worker primed
   with the policy of a freed sandbox); only the test hooks report it. */
static int created_ahead;

#ifdef MBX_WORKER_TEST_HOOKS
/* Test builds only (tests/CMakeLists.txt builds moonbox-worker-test with this definition;
   the shipped moonbox-worker never has it): C functions that misbehave the way a
   compromised VM would, for tests/host/backend/test_worker.c. */
static int hook_wild_pointer(lua_State *L) {
  (void)L;
  static volatile uintptr_t wild = 0x10; /* read at run time: no compiler sees the address */
  volatile int *p = (volatile int *)wild;
  return *p;
}

static int hook_abort(lua_State *L) {
  (void)L;
  abort(); /* tgkill of its own pid: allowed, so this is SIGABRT, not SIGSYS */
}

static int hook_spin(lua_State *L) {
  (void)L;
  for (volatile unsigned long i = 0;; i++) {
  }
  return 0;
}

static int hook_syscall(lua_State *L) {
  const char *what = luaL_checkstring(L, 1);
  long r = -1;
  if (strcmp(what, "open") == 0)
    r = syscall(SYS_openat, -100, "/etc/passwd", 0);
  else if (strcmp(what, "socket") == 0)
    r = syscall(SYS_socket, 2, 1, 0);
  else if (strcmp(what, "execve") == 0) {
    char *argv[] = {"/bin/true", NULL};
    r = syscall(SYS_execve, "/bin/true", argv, (char **)NULL);
  } else if (strncmp(what, "sock_", 5) == 0 || strncmp(what, "futex_", 6) == 0) {
    /* The socket and futex calls the filter admits only with some arguments (issue 25, 6):
       the refused forms must kill, the forms the worker uses must return (an error is fine:
       nothing is waiting and no byte is there). */
    char byte = 0;
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    static uint32_t word;
    if (strcmp(what, "sock_sendmsg_oob") == 0)
      r = syscall(SYS_sendmsg, g_port.fd, &msg, MSG_OOB | MSG_DONTWAIT);
    else if (strcmp(what, "sock_sendmsg") == 0)
      r = syscall(SYS_sendmsg, g_port.fd, &msg, MSG_DONTWAIT);
    else if (strcmp(what, "sock_recvmsg_oob") == 0)
      r = syscall(SYS_recvmsg, g_port.fd, &msg, MSG_OOB | MSG_DONTWAIT);
    else if (strcmp(what, "sock_recvmsg_peek") == 0)
      r = syscall(SYS_recvmsg, g_port.fd, &msg, MSG_PEEK | MSG_DONTWAIT);
    else if (strcmp(what, "sock_sendto_oob") == 0)
      r = syscall(SYS_sendto, g_port.fd, &byte, 1ul, MSG_OOB | MSG_DONTWAIT, NULL, 0);
    else if (strcmp(what, "futex_lock_pi") == 0)
      r = syscall(SYS_futex, &word, FUTEX_LOCK_PI, 0, NULL, NULL, 0);
    else if (strcmp(what, "futex_lock_pi_private") == 0)
      r = syscall(SYS_futex, &word, FUTEX_LOCK_PI | FUTEX_PRIVATE_FLAG, 0, NULL, NULL, 0);
    else if (strcmp(what, "futex_wait_requeue_pi") == 0)
      r = syscall(SYS_futex, &word, FUTEX_WAIT_REQUEUE_PI | FUTEX_PRIVATE_FLAG, 1, NULL, &word, 0);
    else if (strcmp(what, "futex_wake") == 0)
      r = syscall(SYS_futex, &word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, 1, NULL, NULL, 0);
    else if (strcmp(what, "futex_wait_bitset_realtime") == 0)
      /* The word is 0, the expected value 1: EAGAIN at once. */
      r = syscall(SYS_futex, &word, FUTEX_WAIT_BITSET | FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME,
                  1, NULL, NULL, FUTEX_BITSET_MATCH_ANY);
    else
      return luaL_error(L, "__test_syscall: unknown call %s", what);
  } else {
    /* Reaching another worker of the same uid (its pid, as this worker sees it, from
       __test_pid in that worker): each must be killed by the filter; a return means the
       call went through (a signal sent, or an error the kernel gave). */
    pid_t other = (pid_t)luaL_checkinteger(L, 2);
    if (strcmp(what, "kill") == 0)
      r = syscall(SYS_kill, other, SIGKILL);
    else if (strcmp(what, "tgkill") == 0)
      r = syscall(SYS_tgkill, other, other, SIGKILL);
    else if (strcmp(what, "ptrace") == 0)
      r = syscall(SYS_ptrace, 16 /* ATTACH */, other, 0, 0);
    else if (strcmp(what, "process_vm_readv") == 0) {
      char byte;
      struct iovec local = {&byte, 1}, remote = {(void *)(uintptr_t)0x400000, 1};
      r = syscall(SYS_process_vm_readv, other, &local, 1ul, &remote, 1ul, 0ul);
    } else if (strcmp(what, "pidfd_open") == 0)
      r = syscall(SYS_pidfd_open, other, 0u);
    else if (strcmp(what, "cpuclock") == 0 || strcmp(what, "cpuclock_sleep") == 0) {
      /* The kernel's process CPU clock of `other`: (~pid << 3) | CPUCLOCK_SCHED. */
      clockid_t id = (clockid_t)((~(unsigned)other << 3) | 2u);
      struct timespec ts = {0, 0};
      r = strcmp(what, "cpuclock") == 0
              ? syscall(SYS_clock_gettime, id, &ts)
              : syscall(SYS_clock_nanosleep, id, 0 /* relative */, &ts, (struct timespec *)0);
    } else
      return luaL_error(L, "__test_syscall: unknown call %s", what);
  }
  lua_pushinteger(L, r);
  return 1;
}

/* This process's pid as it sees it (in the workers' pid namespace when there is one). */
static int hook_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
  return 1;
}

/* Where libc is mapped in this process (a function's address): the same in every worker its
   zygote forked, another after the zygote is re-executed (ASLR at exec). */
static int hook_layout(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)(uintptr_t)&strlen);
  return 1;
}

/* A forged exec_run, as a compromised VM would send it past the stdlib: "exec_bad" with no
   program (the decoder refuses it), "exec_ungranted" well formed (a sandbox granted no exec
   must not be served one). */
static int hook_exec(lua_State *L) {
  const char *what = luaL_checkstring(L, 1);
  const char *argv[] = {"/bin/sh"};
  mbxC_exec_request req = {.argv = argv, .argc = strcmp(what, "exec_bad") == 0 ? 0 : 1};
  mbxH_wp_writer w = {0};
  mbxH_wp_begin(&w, MBXH_WP_PORT_CALL);
  mbxH_wp_u8(&w, MBXC_OP_EXEC_RUN);
  mbxH_wp_u64(&w, 0);
  mbxC_wire_put_exec_request(&w, &req);
  send_frame(g_port.fd, &w);
  for (;;)
    pause(); /* the parent must end this worker */
  return 0;
}

static int hook_frame(lua_State *L) {
  const char *what = luaL_checkstring(L, 1);
  if (strncmp(what, "exec_", 5) == 0) return hook_exec(L);
  unsigned char hdr[MBXH_WP_HEADER];
  uint16_t v = MBXH_WP_VERSION, t = MBXH_WP_DONE;
  uint32_t n = 0;
  if (strcmp(what, "garbage") == 0) {
    memcpy(hdr, "\x13\x37garbage", MBXH_WP_HEADER);
  } else if (strcmp(what, "trailing") == 0) {
    /* A short DONE and bytes past its end, in one write: what the parent reads at once. */
    unsigned char frame[MBXH_WP_HEADER + 8];
    n = 3;
    memcpy(frame, &v, 2);
    memcpy(frame + 2, &t, 2);
    memcpy(frame + 4, &n, 4);
    memcpy(frame + MBXH_WP_HEADER,
           "\xff\xff\xff"
           "extra",
           8);
    write_all(g_port.fd, frame, sizeof frame);
    for (;;)
      pause();
  } else {
    n = strcmp(what, "oversized") == 0 ? UINT32_MAX - 1 : 3; /* else a short, bogus DONE */
    memcpy(hdr, &v, 2);
    memcpy(hdr + 2, &t, 2);
    memcpy(hdr + 4, &n, 4);
  }
  write_all(g_port.fd, hdr, sizeof hdr);
  if (n == 3) write_all(g_port.fd, "\xff\xff\xff", 3);
  for (;;)
    pause(); /* the parent must end this worker */
  return 0;
}

/* n host calls of function 1 straight through the port, past the vm's host-call count (as a
   VM a guest took over would): the parent must stop them at the sandbox's limit. */
static int hook_host_flood(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 1);
  for (lua_Integer i = 0; i < n; i++) {
    const char *reply;
    size_t len;
    g_port.remote.port.host_call(g_port.remote.port.ud, 0, "[]", 2, NULL, &reply, &len);
  }
  return 0;
}

/* Port calls back to back, forever, in C (no hook): each is served quickly, so only a
   backstop that counts their time (or an interrupt) ends it. */
static int hook_port_flood(lua_State *L) {
  (void)L;
  for (;;)
    g_port.remote.port.wall_time(g_port.remote.port.ud);
  return 0;
}

/* From now on this worker acknowledges RESET without resetting, and makes a host call before
   answering CHECKPOINT: what a compromised VM could do outside a run. */
static int g_test_fake_reset, g_test_call_at_checkpoint;
static int hook_fake_reset(lua_State *L) {
  (void)L;
  g_test_fake_reset = 1;
  return 0;
}
static int hook_call_at_checkpoint(lua_State *L) {
  (void)L;
  g_test_call_at_checkpoint = 1;
  return 0;
}

/* How many sandboxes this worker process has served: the one-tenant tests' witness. */
static int hook_primed(lua_State *L) {
  lua_pushboolean(L, created_ahead);
  return 1;
}

static int hook_served(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)served_sandboxes);
  return 1;
}

static void install_hooks(lua_State *L) {
  lua_register(L, "__test_served", hook_served);
  lua_register(L, "__test_primed", hook_primed);
  lua_register(L, "__test_host_flood", hook_host_flood);
  lua_register(L, "__test_port_flood", hook_port_flood);
  lua_register(L, "__test_fake_reset", hook_fake_reset);
  lua_register(L, "__test_call_at_checkpoint", hook_call_at_checkpoint);
  lua_register(L, "__test_wild_pointer", hook_wild_pointer);
  lua_register(L, "__test_spin", hook_spin);
  lua_register(L, "__test_abort", hook_abort);
  lua_register(L, "__test_syscall", hook_syscall);
  lua_register(L, "__test_pid", hook_pid);
  lua_register(L, "__test_layout", hook_layout);
  lua_register(L, "__test_frame", hook_frame);
}
#endif

static int attach(wsandbox *ws) {
  mbxL_attach(ws->vm->L, &g_port.remote.port);
  mbxV_vm_set_host_call_limit(ws->vm, ws->host_call_limit);
  if (!run_protected(ws->vm->L, mbxL_reseed) || !run_protected(ws->vm->L, mbxL_open_host_functions))
    return 0;
#ifdef MBX_WORKER_TEST_HOOKS
  install_hooks(ws->vm->L);
#endif
  return 1;
}

/* The deadline without a count hook (vm/watchdog.h): the parent signals the run's deadline.
   No watchdog thread here (the jail allows none), and no system call in the handler. */
static mbxV_watchdog *g_dog;
static mbxV_watch g_watch;

static void on_interrupt(int sig) {
  (void)sig;
  mbxV_vm *vm = g_vm;
  if (vm) mbxV_vm_interrupt(vm);
  mbxV_watch_signal_here(); /* a run without a count hook trips and arms its hooks now */
}

static void on_deadline(int sig) {
  (void)sig;
  mbxV_watch_signal_here();
}

static int send_status(int fd, mbxH_wp_writer *w, uint32_t code, uint64_t heap, const char *msg) {
  mbxH_wp_begin(w, MBXH_WP_STATUS);
  mbxH_wp_u32(w, code);
  mbxH_wp_u64(w, heap);
  mbxH_wp_bytes(w, msg, strlen(msg));
  return send_frame(fd, w);
}

static uint64_t heap_of(const wsandbox *ws) {
  return ws->vm ? mbxV_vm_heap_used(ws->vm) : 0;
}

/* The zygote's slot pool: one slot of the default memory limit's class with its template
   built, inherited by every worker (mbxV_vm_new then copies the template instead of building
   the standard library, 20x faster). NULL when it could not be made. */
static mbxV_pool *g_pool;
static size_t g_pool_slot;
static mbxV_config g_default_cfg;

void mbxH_worker_prewarm(void) {
  mbx_policy *p = mbx_policy_new();
  if (p == NULL) return;
  mbxV_config cfg = {.memory_limit = (size_t)mbx_policy_get_limit(p, MBX_LIMIT_MEMORY),
                     .output_limit = (size_t)mbx_policy_get_limit(p, MBX_LIMIT_OUTPUT),
                     .source_limit = (size_t)mbx_policy_get_limit(p, MBX_LIMIT_SOURCE)};
  mbx_policy_free(p);
  mbxV_vm *vm;
  g_pool = mbxV_pool_new(1);
  if (g_pool == NULL) return;
  if (mbxV_vm_new(g_pool, &cfg, mbxL_open_sandbox, &vm) != MBXV_NEW_OK) {
    mbxV_pool_free(g_pool);
    g_pool = NULL;
    return;
  }
  mbxV_vm_free(vm);
  g_pool_slot = mbxV_slot_size_for(cfg.memory_limit);
  g_default_cfg = cfg;
}

/* A warm worker, while it waits for its sandbox: a state in the zygote's slot and one run of a
   constant chunk of ours (no guest byte, no port), so the pages a run touches are faulted in
   before the sandbox's first run (a fork shares them copy-on-write). NULL without a slot. */
static mbxV_vm *prefault(void) {
  mbxV_vm *vm;
  if (g_pool == NULL || mbxV_vm_new(g_pool, &g_default_cfg, mbxL_open_sandbox, &vm) != MBXV_NEW_OK)
    return NULL;
  mbxV_outcome o;
  mbxV_refusal why;
  if (mbxV_run_cached(vm, NULL, "return {1 + 1, 'x'}", 19, "=warm", NULL, 0, &o, &why) <
      MBXV_REFUSED_BASE)
    mbxV_outcome_free(&o);
  return vm;
}

/* Why the warm worker's jail could not be completed ("" when it was). */
static char jail_why[256];
/* The memory limit the address-space limit was set for (0: not yet). */
static size_t g_as_for;

/* MBXH_WP_CREATE: the limits, the grants, the address-space limit, then the state. */
static int create(wsandbox *ws, const unsigned char *p, size_t n, mbxH_wp_writer *w) {
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, p, n);
  mbxV_config *cfg = &ws->cfg;
  cfg->memory_limit = (size_t)mbxH_wp_get_u64(&r);
  cfg->instruction_limit = mbxH_wp_get_u64(&r);
  cfg->time_limit_ms = mbxH_wp_get_u64(&r);
  cfg->output_limit = (size_t)mbxH_wp_get_u64(&r);
  cfg->source_limit = (size_t)mbxH_wp_get_u64(&r);
  cfg->result_limit = (size_t)mbxH_wp_get_u64(&r);
  cfg->shape_key = NULL; /* the worker installs its host functions after every restore */
  cfg->shape_key_len = 0;
  ws->host_call_limit = mbxH_wp_get_u64(&r);
  g_port.grants.deterministic = mbxH_wp_get_u8(&r);
  uint32_t served = mbxH_wp_get_u32(&r);
  uint32_t count = mbxH_wp_get_u32(&r);
  if (r.bad || count > r.left) return -1;
  /* A one-tenant worker's next sandbox: nothing of the last one's grants stays. */
  free(g_port.fns);
  free(g_port.names);
  g_port.fns = calloc(count ? count : 1, sizeof *g_port.fns);
  g_port.names = malloc(r.left + 1);
  if (g_port.fns == NULL || g_port.names == NULL) return -1;
  char *at = g_port.names;
  for (uint32_t i = 0; i < count; i++) {
    const char *name;
    size_t len = mbxH_wp_get_bytes(&r, 4096, &name);
    mbxC_grant_fn *f = &g_port.fns[i];
    f->kind = (mbxC_fn_kind)mbxH_wp_get_u8(&r);
    f->sig.ret = (char)mbxH_wp_get_u8(&r);
    uint8_t nargs = mbxH_wp_get_u8(&r);
    if (r.bad || nargs > MBXC_FFI_MAX_ARGS) return -1;
    f->sig.nargs = nargs;
    for (int a = 0; a < nargs; a++)
      f->sig.args[a] = (char)mbxH_wp_get_u8(&r);
    if (r.bad) return -1;
    memcpy(at, name, len);
    at[len] = '\0';
    f->name = at;
    at += len + 1;
  }
  g_spin_on = mbxH_wp_get_u8(&r) != 0;
  /* Last, the sandbox's own: what differs between two sandboxes of one policy. */
  created_ahead = mbxH_wp_get_u8(&r) != 0;
  cfg->address_key = mbxH_wp_get_u64(&r);
  uint64_t seed[2];
  seed[0] = mbxH_wp_get_u64(&r);
  seed[1] = mbxH_wp_get_u64(&r);
  if (mbxH_wp_end(&r) != 0) return -1;
  g_port.grants.fn_count = count;
  g_port.grants.fns = g_port.fns;
  /* Only what the parent's port serves: a NULL is "not granted" to the stdlib. */
  mbxC_remote_init(&g_port.remote, &g_transport, &g_port.grants, served);
  mbxC_remote_set_seed(&g_port.remote, seed);

  /* The zygote's slot when it is of this sandbox's class; else it goes (its reservation would
     count against the address-space limit below). */
  if (g_pool && g_pool_slot != mbxV_slot_size_for(cfg->memory_limit)) {
    if (ws->vm) mbxV_vm_free(ws->vm);
    ws->vm = NULL;
    mbxV_pool_free(g_pool);
    g_pool = NULL;
  }
  if (ws->pool == NULL) ws->pool = g_pool ? g_pool : mbxV_pool_new(1);
  if (ws->pool == NULL) return -1;
  /* The warm worker jailed itself before it was handed out (serve); a jail that could not be
     completed is this sandbox's error, and no guest byte is ever read by this process. */
  if (jail_why[0]) {
    send_status(g_port.fd, w, 2, 0, jail_why);
    return -1;
  }
  /* The jail's last step, under the filter, before anything of the guest arrives. */
  char why[256] = "";
  if (g_as_for == 0) {
    if (mbxH_jail_limits(mbxV_slot_size_for(cfg->memory_limit), cfg->memory_limit, why,
                         sizeof why) != 0) {
      send_status(g_port.fd, w, 2, 0, why);
      return -1;
    }
    g_as_for = cfg->memory_limit ? cfg->memory_limit : 1;
  } else if (g_as_for != cfg->memory_limit) {
    /* The parent reuses a worker only for the memory limit it was made for. */
    send_status(g_port.fd, w, 2, 0,
                "a reused worker's address-space limit is for another "
                "memory limit");
    return -1;
  }
  /* The warm state is rebuilt from the template with this sandbox's configuration (nothing of
     the warm run survives a reset); a state of another class is made anew. */
  /* A state of the last sandbox (a one-tenant worker's) is reset too, and its checkpoint
     goes: the next sandbox starts from the template like any other. */
  mbxV_checkpoint_free(&ws->checkpoint);
  memset(&ws->checkpoint, 0, sizeof ws->checkpoint);
  served_sandboxes++;
  mbxV_new_result made;
  if (ws->vm) {
    made = mbxV_vm_reset(ws->vm, cfg, mbxL_open_sandbox);
  } else {
    ws->vm = NULL;
    made = mbxV_vm_new(ws->pool, cfg, mbxL_open_sandbox, &ws->vm);
  }
  if (made != MBXV_NEW_OK) {
    ws->vm = NULL;
    send_status(g_port.fd, w, 1, 0,
                made == MBXV_NEW_NO_SPACE ? "cannot reserve the sandbox's heap in the worker"
                                          : "the standard library does not fit in the memory "
                                            "limit (raise MBX_LIMIT_MEMORY)");
    return -1;
  }
  g_vm = ws->vm;
  /* No instruction limit: no count hook, the deadline by the parent's signal. Deterministic
     runs always count (the instruction count is part of them). */
  mbxV_watch_init(&g_watch, g_dog, ws->vm);
  ws->vm->budget.watch = g_dog && !g_port.grants.deterministic ? &g_watch : NULL;
  if (!attach(ws)) {
    send_status(g_port.fd, w, 1, 0,
                "could not seed math.random or install the host "
                "functions");
    return -1;
  }
  return send_status(g_port.fd, w, 0, heap_of(ws), "");
}

static void send_done(wsandbox *ws, mbxH_wp_writer *w, mbxV_status s, const mbxV_refusal *why,
                      mbxV_outcome *o) {
  const char *streams[2] = {ws->vm->output.data[0], ws->vm->output.data[1]};
  size_t lens[2] = {ws->vm->output.len[0], ws->vm->output.len[1]};
  mbxH_wp_put_done(w, s, why->message, o, streams, lens, ws->vm->output.total,
                   mbxV_vm_paused(ws->vm), heap_of(ws));
  if (s < MBXV_REFUSED_BASE) mbxV_outcome_free(o);
  if (send_frame(g_port.fd, w) != 0) die_quietly();
}

static void run(wsandbox *ws, const unsigned char *p, size_t n, mbxH_wp_writer *w) {
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, p, n);
  const char *name, *code, *inputs;
  size_t name_len = mbxH_wp_get_bytes(&r, LUA_IDSIZE, &name);
  size_t code_len = mbxH_wp_get_bytes(&r, MBXH_WP_MAX_FRAME, &code);
  uint8_t has_inputs = mbxH_wp_get_u8(&r);
  size_t inputs_len = mbxH_wp_get_bytes(&r, MBXH_WP_MAX_FRAME, &inputs);
  uint64_t stdin_epoch = mbxH_wp_get_u64(&r);
  if (mbxH_wp_end(&r) != 0) die_quietly();
  char chunk[LUA_IDSIZE + 1];
  memcpy(chunk, name, name_len);
  chunk[name_len] = '\0';
  mbxC_remote_run_begin(&g_port.remote, stdin_epoch);
  mbxL_run_begin(ws->vm->L);
  mbxV_outcome o;
  mbxV_refusal why = {MBXV_OK, ""};
  mbxV_status s = mbxV_run_cached(ws->vm, NULL, code, code_len, chunk, has_inputs ? inputs : NULL,
                                  inputs_len, &o, &why);
  send_done(ws, w, s, &why, &o);
}

static void resume(wsandbox *ws, const unsigned char *p, size_t n, mbxH_wp_writer *w) {
  mbxH_wp_reader r;
  mbxH_wp_reader_init(&r, p, n);
  uint8_t as_error = mbxH_wp_get_u8(&r);
  uint8_t has_value = mbxH_wp_get_u8(&r);
  const char *value;
  size_t len = mbxH_wp_get_bytes(&r, MBXH_WP_MAX_FRAME, &value);
  uint64_t stdin_epoch = mbxH_wp_get_u64(&r);
  if (mbxH_wp_end(&r) != 0) die_quietly();
  mbxC_remote_run_begin(&g_port.remote, stdin_epoch);
  mbxL_run_begin(ws->vm->L);
  mbxV_outcome o;
  mbxV_refusal why = {MBXV_OK, ""};
  mbxV_status s = mbxV_resume(ws->vm, has_value ? value : NULL, len, as_error, &o, &why);
  send_done(ws, w, s, &why, &o);
}

void mbxH_worker_serve(int fd) {
  wsandbox ws = {0};
  mbxH_wp_writer w = {0};
  unsigned char *buf = NULL;
  size_t cap = 0, len = 0;
  g_port.fd = fd;
  g_in = &g_worker_in;
  struct sigaction sa = {0};
  sa.sa_handler = on_interrupt;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(MBXH_WP_INTERRUPT_SIGNAL, &sa, NULL);
  /* Installed always, before any run: the parent may send it to any run, and its default
     action would end the worker. */
  sa.sa_handler = on_deadline;
  sigaction(MBXH_WP_DEADLINE_SIGNAL, &sa, NULL);
  g_dog = mbxV_watchdog_new_external();
  /* Asked before the filter (sched_getaffinity is not in it), remembered for every spin. */
  (void)mbxH_spin_usable();
  ws.vm = prefault();
  /* The jail is complete before the worker is handed out: the filter costs hundreds of
     microseconds to load, paid here while the worker waits in the pool rather than on a
     sandbox's creation. A failure is reported in CREATE's answer. */
  if (mbxH_jail_seccomp(jail_why, sizeof jail_why) != 0 && jail_why[0] == '\0')
    snprintf(jail_why, sizeof jail_why, "loading the seccomp filter failed");
  if (recv_frame(fd, &buf, &cap, &len) != MBXH_WP_CREATE) die_quietly();
  if (create(&ws, buf, len, &w) != 0) die_quietly();
  for (;;) {
    /* Every frame but the first answers one: the parent's next request often follows. */
    int t = recv_frame_soon(fd, &buf, &cap, &len);
    if (t < 0) _exit(0); /* the parent closed the socket: the sandbox is freed */
    switch (t) {
    case MBXH_WP_RUN:
      run(&ws, buf, len, &w);
      break;
    case MBXH_WP_RESUME:
      resume(&ws, buf, len, &w);
      break;
    case MBXH_WP_CREATE: /* the next sandbox of a one-tenant runtime */
      if (create(&ws, buf, len, &w) != 0) die_quietly();
      break;
    case MBXH_WP_RESET: {
      mbxH_wp_reader r;
      mbxH_wp_reader_init(&r, buf, len);
      ws.cfg.address_key = mbxH_wp_get_u64(&r);
      uint64_t seed[2];
      seed[0] = mbxH_wp_get_u64(&r);
      seed[1] = mbxH_wp_get_u64(&r);
      if (mbxH_wp_end(&r) != 0) die_quietly();
      mbxC_remote_set_seed(&g_port.remote, seed);
#ifdef MBX_WORKER_TEST_HOOKS
      if (g_test_fake_reset) {
        send_status(fd, &w, 0, heap_of(&ws), "");
        break;
      }
#endif
      if (mbxV_vm_reset(ws.vm, &ws.cfg, mbxL_open_sandbox) != MBXV_NEW_OK)
        send_status(fd, &w, 1, heap_of(&ws), "out of memory while building the pristine state");
      else if (!attach(&ws))
        send_status(fd, &w, 1, heap_of(&ws),
                    "could not seed math.random or install the host "
                    "functions");
      else
        send_status(fd, &w, 0, heap_of(&ws), "");
      break;
    }
    case MBXH_WP_CHECKPOINT: {
#ifdef MBX_WORKER_TEST_HOOKS
      if (g_test_call_at_checkpoint) {
        const char *reply;
        size_t rlen;
        g_port.remote.port.host_call(g_port.remote.port.ud, 0, "[\"during CHECKPOINT\"]", 21, NULL,
                                     &reply, &rlen);
      }
#endif
      mbxV_checkpoint_result made = mbxV_vm_checkpoint(ws.vm, &ws.checkpoint);
      int code = made == MBXV_CHECKPOINT_OK ? 0 : made == MBXV_CHECKPOINT_NO_MEMORY ? 1 : 3;
      send_status(fd, &w, code, heap_of(&ws), "");
      break;
    }
    case MBXH_WP_REWIND:
      if (ws.checkpoint.len == 0) {
        send_status(fd, &w, 4, heap_of(&ws), "");
        break;
      }
      mbxV_vm_rewind(ws.vm, &ws.checkpoint);
      send_status(fd, &w, 0, heap_of(&ws), "");
      break;
    default:
      die_quietly();
    }
  }
}

#if defined(__SANITIZE_ADDRESS__)
/* Under ASan: no leak check and no symbolizer (both would need system calls the jail kills,
   and look like a crash), and a wild pointer is the plain SIGSEGV the parent reports. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) {
  return "detect_leaks=0:symbolize=0:handle_segv=0:handle_sigbus=0";
}
#endif

int main(int argc, char **argv) {
  if (argc == 2 && strcmp(argv[1], "--zygote") == 0) return mbxH_zygote();
  /* --zygote --uid N: as root, the workers and the init drop to N, the zygote's own uid. */
  if (argc == 4 && strcmp(argv[1], "--zygote") == 0 && strcmp(argv[2], "--uid") == 0) {
    char *end;
    unsigned long uid = strtoul(argv[3], &end, 10);
    if (*end || end == argv[3] || uid < 1000 || uid >= 4294967295ul || uid == 65534) return 2;
    mbxH_jail_set_uid((uint32_t)uid);
    return mbxH_zygote();
  }
  fprintf(stderr,
          "moonbox-worker: started by the moonbox library (a runtime with MBX_CAP_ISOLATE), "
          "not by hand\n");
  return 2;
}
