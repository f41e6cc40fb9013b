/* host/worker/main.c -- moonbox-worker: the zygote that forks jailed workers, and a worker's
   loop (one sandbox: its vm runs here; every capability is the parent's, over the socket). */

/*
** The parent starts `moonbox-worker --zygote` with posix_spawn, an empty environment and two
** fds: 3, its control socket, and 4, its mailbox (REAPs nobody waits for; see mail_drain). The
** zygote is single-threaded and runs no guest code: on
** MBXH_WP_SPAWN it makes a socketpair and forks; the child closes every fd but its end and
** hardens itself (worker_jail.c: no new privileges, not dumpable, an unprivileged uid, no core
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
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <lauxlib.h>
#include <lua.h>

#include "capabilities/port_remote.h"
#include "host/worker/jail.h"
#include "include/moonbox.h"
#include "host/backend/worker_proto.h"
#include "host/backend/worker_spin.h"
#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/run.h"
#include "vm/vm.h"

#define ZYGOTE_FD 3
#define WORKER_FD 3

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

/* The worker's spin before it blocks for the parent's next frame, after a reply or a port call
   (host/backend/worker_spin.h: bounded, and it backs off while the parent is slow to send). */
static mbxH_spin g_spin;
/* MBX_CAP_WORKER_SPIN of the sandbox, sent with its CREATE. */
static int g_spin_on;

/* recv_frame where the parent's next frame is expected soon. */
static int recv_frame_soon(int fd, unsigned char **buf, size_t *cap, size_t *len) {
  if (g_spin_on && (g_in == NULL || g_in->off == g_in->len))
    (void)mbxH_spin_wait(&g_spin, fd, 0);
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

static const mbxC_wire_transport g_transport = {&g_port, call_begin, call_round_trip,
                                                call_broken};

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
  volatile int *p = (volatile int *)(uintptr_t)0x10;
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
  if (strcmp(what, "open") == 0) r = syscall(SYS_openat, -100, "/etc/passwd", 0);
  else if (strcmp(what, "socket") == 0) r = syscall(SYS_socket, 2, 1, 0);
  else if (strcmp(what, "execve") == 0) {
    char *argv[] = {"/bin/true", NULL};
    r = syscall(SYS_execve, "/bin/true", argv, (char **)NULL);
  } else {
    /* Reaching another worker of the same uid (its pid, as this worker sees it, from
       __test_pid in that worker): each must be killed by the filter; a return means the
       call went through (a signal sent, or an error the kernel gave). */
    pid_t other = (pid_t)luaL_checkinteger(L, 2);
    if (strcmp(what, "kill") == 0) r = syscall(SYS_kill, other, SIGKILL);
    else if (strcmp(what, "tgkill") == 0) r = syscall(SYS_tgkill, other, other, SIGKILL);
    else if (strcmp(what, "ptrace") == 0) r = syscall(SYS_ptrace, 16 /* ATTACH */, other, 0, 0);
    else if (strcmp(what, "process_vm_readv") == 0) {
      char byte;
      struct iovec local = {&byte, 1}, remote = {(void *)(uintptr_t)0x400000, 1};
      r = syscall(SYS_process_vm_readv, other, &local, 1ul, &remote, 1ul, 0ul);
    } else if (strcmp(what, "pidfd_open") == 0) r = syscall(SYS_pidfd_open, other, 0u);
    else if (strcmp(what, "cpuclock") == 0 || strcmp(what, "cpuclock_sleep") == 0) {
      /* The kernel's process CPU clock of `other`: (~pid << 3) | CPUCLOCK_SCHED. */
      clockid_t id = (clockid_t)((~(unsigned)other << 3) | 2u);
      struct timespec ts = {0, 0};
      r = strcmp(what, "cpuclock") == 0
              ? syscall(SYS_clock_gettime, id, &ts)
              : syscall(SYS_clock_nanosleep, id, 0 /* relative */, &ts, (struct timespec *)0);
    } else return luaL_error(L, "__test_syscall: unknown call %s", what);
  }
  lua_pushinteger(L, r);
  return 1;
}

/* This process's pid as it sees it (in the workers' pid namespace when there is one). */
static int hook_pid(lua_State *L) {
  lua_pushinteger(L, (lua_Integer)getpid());
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
  for (;;) pause(); /* the parent must end this worker */
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
    memcpy(frame + MBXH_WP_HEADER, "\xff\xff\xff" "extra", 8);
    write_all(g_port.fd, frame, sizeof frame);
    for (;;) pause();
  } else {
    n = strcmp(what, "oversized") == 0 ? UINT32_MAX - 1 : 3; /* else a short, bogus DONE */
    memcpy(hdr, &v, 2);
    memcpy(hdr + 2, &t, 2);
    memcpy(hdr + 4, &n, 4);
  }
  write_all(g_port.fd, hdr, sizeof hdr);
  if (n == 3) write_all(g_port.fd, "\xff\xff\xff", 3);
  for (;;) pause(); /* the parent must end this worker */
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
  for (;;) g_port.remote.port.wall_time(g_port.remote.port.ud);
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
  lua_register(L, "__test_frame", hook_frame);
}
#endif

static int attach(wsandbox *ws) {
  mbxL_attach(ws->vm->L, &g_port.remote.port);
  mbxV_vm_set_host_call_limit(ws->vm, ws->host_call_limit);
  if (!run_protected(ws->vm->L, mbxL_reseed) ||
      !run_protected(ws->vm->L, mbxL_open_host_functions))
    return 0;
#ifdef MBX_WORKER_TEST_HOOKS
  install_hooks(ws->vm->L);
#endif
  return 1;
}

static void on_interrupt(int sig) {
  (void)sig;
  mbxV_vm *vm = g_vm;
  if (vm) mbxV_vm_interrupt(vm);
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

static void prewarm_slot(void) {
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
    for (int a = 0; a < nargs; a++) f->sig.args[a] = (char)mbxH_wp_get_u8(&r);
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
    send_status(g_port.fd, w, 2, 0, "a reused worker's address-space limit is for another "
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
    send_status(g_port.fd, w, 1, 0, made == MBXV_NEW_NO_SPACE
                                        ? "cannot reserve the sandbox's heap in the worker"
                                        : "the standard library does not fit in the memory "
                                          "limit (raise MBX_LIMIT_MEMORY)");
    return -1;
  }
  g_vm = ws->vm;
  if (!attach(ws)) {
    send_status(g_port.fd, w, 1, 0, "could not seed math.random or install the host "
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
  mbxV_status s = mbxV_run_cached(ws->vm, NULL, code, code_len, chunk,
                                  has_inputs ? inputs : NULL, inputs_len, &o, &why);
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

static void serve(int fd) {
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
  sigaction(SIGUSR1, &sa, NULL);
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
        send_status(fd, &w, 1, heap_of(&ws), "could not seed math.random or install the host "
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
        g_port.remote.port.host_call(g_port.remote.port.ud, 0, "[\"during CHECKPOINT\"]", 21, NULL, &reply,
                              &rlen);
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
  do s = sendmsg(zfd, &msg, MSG_NOSIGNAL);
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
  struct zygote_sched_attr a = {.size = sizeof a, .policy = SCHED_OTHER,
                                .runtime = ZYGOTE_SLICE_NS};
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
  if (g_preparing) pthread_join(g_prepare, NULL);
  else (void)mbxH_jail_prepare();
  g_preparing = 0;
  done = 1;
}

static void enter_namespaces(void) {
  int flags = CLONE_NEWNET | CLONE_NEWPID;
  if (geteuid() == 0) {
    if (unshare(flags) != 0) return;
  } else {
    /* Not root: one user namespace for the zygote and every worker it forks, made here once
       (worker_jail.c), with the network and pid namespaces in the same call where the kernel
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
    if (dup2(sv[1], WORKER_FD) != WORKER_FD || mbxH_jail_process(WORKER_FD, 0) != 0) _exit(5);
    for (;;) pause();
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
  return send_frame(zfd, w);
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
    serve(WORKER_FD);
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
  if (send_frame(zfd, w) != 0) g_parent_gone = 1;
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
    do got = waitpid(l->pid[i], &st, block ? 0 : WNOHANG);
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
    do n = recv(g_mail, msg, sizeof msg, MSG_DONTWAIT | MSG_TRUNC);
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

static int zygote(void) {
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
  prewarm_slot();
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
    int t = recv_frame(zfd, &buf, &cap, &len);
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
      for (uint32_t i = 0; i < count && !g_parent_gone; i++) spawn_one(zfd, &w, 0, NULL, 0);
    } else if (t == MBXH_WP_PROBE) {
      if (mbxH_wp_end(&r) != 0 || probe(zfd, &w) != 0) return zygote_end(1);
    } else if (t == MBXH_WP_REAP) {
      /* On the control socket the parent waits for the answer (or could not use the
         mailbox): the worker is killed already, so the wait is short. */
      reap_order o;
      if (reap_decode(buf, len, &o) != 0) return zygote_end(1);
      int st = 0;
      pid_t got;
      do got = waitpid(o.pid, &st, 0);
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
  if (sfd >= 0 && mail_drain(zfd, &w, &pending) == 0 &&
      reap_listed(zfd, &w, &pending, 0) == 0) {
    /* Killed by the parent, they die at once; a worker it failed to kill is this zygote's
       own unreaped child (its pid cannot be another process's): killed here. */
    for (size_t i = 0; i < pending.n; i++) kill(pending.pid[i], SIGKILL);
    (void)reap_listed(zfd, &w, &pending, 1);
  }
  return zygote_end(0);
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
  if (argc == 2 && strcmp(argv[1], "--zygote") == 0) return zygote();
  fprintf(stderr,
          "moonbox-worker: started by the moonbox library (a runtime with MBX_CAP_ISOLATE), "
          "not by hand\n");
  return 2;
}
