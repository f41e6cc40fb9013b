/* host/backend/worker.c -- the worker backend: each sandbox's vm runs in a jailed moonbox-worker
   process; the parent keeps every capability and trusts nothing the worker sends. */

/*
** One sandbox, one worker, taken from the runtime's pool (host/backend/worker_pool.c: the
** zygote, the warm workers, the crash penalty).
**
** The parent's half of a sandbox is the in-process backend's without the vm, built by the
** same code (host/backend/shared.c): the port (capabilities/port_local.c, wrapped by the
** record layer for deterministic policies) is served here, so files, host functions and
** natives keep their checks and the worker never holds a host fd. A call to the worker (run,
** resume, reset, ...) sends one frame and then serves the worker's port calls until its
** answer arrives. Everything read is checked (host/backend/worker_proto.c); anything wrong --
** EOF, a malformed or oversized frame, a frame of the wrong type, no answer by the backstop --
** ends the worker with SIGKILL (through its pidfd: no pid reuse race), has the zygote reap it
** for the reason, and turns the run into internal_error with that reason. The sandbox is then
** poisoned (host/sandbox.c), and its reset takes a fresh worker.
**
** The backstop of a run is 2x its time limit plus a grace (a default without a time limit): a C
** call that never returns cannot be pre-empted in the worker either, so this is what ends it.
** Time the parent spends serving a port call is host time and moves the backstop on.
*/
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "capabilities/port_local.h"
#include "capabilities/port_record.h"
#include "capabilities/port_serve.h"
#include "common/error.h"
#include "host/backend/backend.h"
#include "host/backend/worker_io.h"
#include "host/backend/worker_pool.h"
#include "host/backend/worker_proto.h"
#include "host/backend/worker_spin.h"
#include "host/backend/shared.h"
#include "host/result.h"
#include "vm/arena.h"

/* ---- a sandbox in a worker ---- */

typedef struct wsb {
  const mbxH_services *svc; /* the runtime's (host/backend/backend.h) */
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
  mbxH_wproc proc;
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
  mbxH_port_mark checkpoint_port; /* where the port stood (seed draws, io.stdin, the log) */
  mbxH_wp_writer w, reply;
  unsigned char *rbuf;
  size_t rcap, rlen;
  char reason[256]; /* why the last worker was lost */
  /* The parent's own view of the run's deadline (0: no time limit): set when a run or resume
     is sent, moved on by the host time of the calls served. A guest-time operation (exec)
     waits no later than this plus the grace, whatever deadline the worker's call names. */
  uint64_t run_deadline;
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
  mbxH_wproc p = ws->proc;
  ws->proc.sock = -1;
  ws->proc.pidfd = -1;
  ws->proc.pid = 0;
  pthread_mutex_unlock(&ws->sig_mu);
  if (p.pid <= 0) return;
  int st = mbxH_wpool_release(ws->pool, &p, 1, 1, NULL);
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
** The deadline of a run without a count hook in the worker (no instruction limit): from the
** run's deadline on (the parent's view of it, moved on by host time as the worker's is), or
** once interrupted, the worker gets MBXH_WP_DEADLINE_SIGNAL every MBXH_WP_NUDGE_NS until it
** answers; its handler looks at its own deadline and trips the run (vm/watchdog.h). A worker
** with a count hook ignores it. Returns when to be called next (0: no deadline yet to watch).
*/
static uint64_t deadline_tick(void *ctx, uint64_t now) {
  wsb *ws = ctx;
  if (!atomic_load(&ws->interrupted) && (ws->run_deadline == 0 || now < ws->run_deadline))
    return ws->run_deadline;
  pthread_mutex_lock(&ws->sig_mu);
  if (ws->proc.pidfd >= 0)
    syscall(SYS_pidfd_send_signal, ws->proc.pidfd, MBXH_WP_DEADLINE_SIGNAL, NULL, 0);
  pthread_mutex_unlock(&ws->sig_mu);
  return now + MBXH_WP_NUDGE_NS;
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
     frame less than a spin's bound ago, so it is spinning for this one
     (host/backend/worker_spin.h). A worker that slept (a warm one's CREATE, a host that
     paused) must first be woken, and spinning through its wake-up only takes the CPU it needs
     on busy cores. */
  uint64_t now = mbxH_io_now_ns();
  mbxH_io_deadline dl = {
      now + budget_ms * 1000000u,
      in_run ? &ws->interrupted : NULL,
      0,
      ws->spin_on && ws->answered_at && now - ws->answered_at < MBXH_SPIN_NS ? &ws->spin : NULL,
      in_run ? deadline_tick : NULL,
      ws};
  if (send && mbxH_wp_finish(&ws->w) != 0) {
    /* Too large to send at all: a host-side refusal, the worker is fine. */
    snprintf(ws->reason, sizeof ws->reason, "the request is too large for the worker protocol");
    return -2;
  }
  mbxH_io_result io =
      send ? mbxH_io_write_all(ws->proc.sock, ws->w.data, ws->w.len, &dl) : MBXH_IO_OK;
  /* Sent a request, the answer is not there yet: wait before reading. */
  int wait_first = send;
  for (;;) {
    if (io != MBXH_IO_OK) break;
    /* A worker that sends port calls back to back never waits in poll: look here too. */
    if (mbxH_io_expired(&dl)) {
      io = MBXH_IO_TIMEOUT;
      break;
    }
    /* The header and, in the same read, what follows of the frame (most frames are small):
       the worker sends one frame and waits for the answer, so anything past the frame's end
       is a protocol error. */
    unsigned char first[MBXH_WP_HEADER + 512];
    size_t got;
    io = mbxH_io_read_some(ws->proc.sock, first, MBXH_WP_HEADER, sizeof first, &dl, wait_first,
                           &got);
    wait_first = 1;
    if (io != MBXH_IO_OK) break;
    mbxH_wp_type type;
    uint32_t len;
    if (mbxH_wp_header(first, ws->frame_max, &type, &len, why, sizeof why) != 0) {
      char msg[256];
      snprintf(msg, sizeof msg, "worker protocol error: %s", why);
      lose_worker(ws, msg);
      return -1;
    }
    if (mbxH_io_grow(&ws->rbuf, &ws->rcap, (size_t)len + 1) != 0) {
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
    io = mbxH_io_read_all(ws->proc.sock, ws->rbuf + have, len - have, &dl);
    if (io != MBXH_IO_OK) break;
    ws->rlen = len;
    /* A frame's last byte string (a host call's arguments) ends in a NUL, as the host's
       callback is promised. */
    ws->rbuf[len] = 0;
    if (type == expect) {
      ws->answered_at = mbxH_io_now_ns();
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
    uint64_t t0 = mbxH_io_now_ns();
    serve_call(ws, &c);
    mbxC_wire_call_free(&c);
    if (mbxH_wp_finish(&ws->reply) != 0) {
      lose_worker(ws, "worker protocol error: a port answer too large for the protocol");
      return -1;
    }
    uint64_t served = mbxH_io_now_ns() - t0;
    /* The backstop waits for host time (callbacks) and for a program the parent runs (bounded
       here: its exec timeout, the run's deadline, the interrupt; the worker only waits), until
       an interrupt cut the deadline. */
    if ((callback || c.op == MBXC_OP_EXEC_RUN) && !dl.cut) dl.at += served;
    if (ws->run_deadline && callback) ws->run_deadline += served;
    io = mbxH_io_write_all(ws->proc.sock, ws->reply.data, ws->reply.len, &dl);
    if (ws->spin_on) dl.spin = &ws->spin; /* the worker waits for this answer, spinning */
  }
  if (io == MBXH_IO_TIMEOUT && dl.cut)
    lose_worker(ws, "worker killed: it did not stop within the grace period after "
                    "mbx_sandbox_interrupt");
  else if (io == MBXH_IO_TIMEOUT)
    lose_worker(ws, "worker killed: wall-clock backstop");
  else
    lose_worker(ws, NULL);
  return -1;
}

static int exchange(wsb *ws, mbxH_wp_type expect, uint64_t budget_ms) {
  return converse(ws, expect, budget_ms, 1);
}

static uint64_t run_deadline_from_now(const wsb *ws) {
  return ws->cfg.time_limit_ms ? mbxH_io_now_ns() + ws->cfg.time_limit_ms * 1000000u : 0;
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
    for (int a = 0; a < f->sig.nargs; a++)
      mbxH_wp_u8(w, (uint8_t)f->sig.args[a]);
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
  mbxH_wproc p;
  uint64_t seed[2] = {0, 0};
  int drawn = 0;
  /* This sandbox's CREATE without its own tail: a warm worker primed with the same frame has
     built the state this sandbox would get (host/backend/worker.c, mbxH_wpool_release). */
  put_create(ws, &ws->w, 0, 0, seed);
  const unsigned char *fp = primable(ws) && !ws->w.failed ? ws->w.data : NULL;
  size_t fp_len = ws->w.len - MBXH_CREATE_OWN;
  /* A warm worker may have died while idle (killed from outside, say): another one then. */
  for (int attempt = 0;; attempt++) {
    int reused;
    mbx_status taken =
        mbxH_wpool_take(ws->pool, ws->cfg.memory_limit, atomic_load(ws->svc->one_tenant), fp,
                        fp_len, &p, &reused, err);
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
       stays buffered if the worker died since (killed while warm): mbxH_wpool_take looked at the
       warm workers' pidfds just now and took none that had exited (review 11, W3). */
    if (converse(ws, MBXH_WP_STATUS, MBXH_WORKER_CONTROL_MS, !primed) == 0) break;
    if (attempt == 2) {
      mbxU_error_set(err, MBX_INTERNAL_ERROR,
                     "%s: the sandbox's worker failed while "
                     "starting: %s",
                     fn, ws->reason);
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
    mbxH_wproc p = ws->proc;
    ws->proc.sock = ws->proc.pidfd = -1;
    ws->proc.pid = 0;
    p.runs = ws->runs;
    /* One tenant: a worker that served this sandbox well may serve the next one. Never one
       whose sandbox was poisoned (a limit, a crash, a protocol error), paused mid-call, or
       at its run budget. */
    if (atomic_load(ws->svc->one_tenant) && p.sock >= 0 && !ws->tainted && !ws->paused &&
        ws->runs < MBXH_WORKER_TENANT_RUNS_MAX) {
      mbxH_wpool_keep(ws->pool, &p);
    } else if (primable(ws)) {
      /* The next sandbox is likely of the same policy: a warm worker builds its state now,
         with its own address key and first seed. */
      uint64_t seed[2], key = mbxH_shared_address_key(ws->svc);
      draw_seed(ws, seed);
      put_create(ws, &ws->w, 1, key, seed);
      mbxH_prime_offer offer = {&ws->w, key};
      mbxH_wpool_release(ws->pool, &p, 0, 0, ws->w.failed ? NULL : &offer);
    } else {
      mbxH_wpool_release(ws->pool, &p, 0, 0, NULL);
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

static mbx_status worker_create(const mbxH_services *svc, const mbx_policy *p,
                                const mbxC_snap_header *snap, mbxC_replay_log *replay, void **impl,
                                mbx_error *err) {
  /* MBX_CAP_SANDBOXES is the runtime's slot pool's cap (mbx_runtime_get_cap reads it there). */
  unsigned cap;
  size_t reserve_cap;
  mbxV_pool_get_caps(svc->slots, &cap, &reserve_cap);
  if (mbxH_wpool_live(*svc->workers) >= cap) {
    if (replay) mbxC_replay_free(replay);
    return mbxH_shared_cap_refusal(svc, err);
  }
  wsb *ws = calloc(1, sizeof *ws);
  if (ws == NULL) return mbxH_shared_no_memory(replay, err);
  mbx_status made_port =
      mbxH_shared_port(svc, p, snap, replay, &ws->port, &ws->record, &ws->recording, err);
  if (made_port != MBX_OK) {
    free(ws);
    return made_port;
  }
  ws->svc = svc;
  ws->pool = *svc->workers;
  pthread_mutex_init(&ws->sig_mu, NULL);
  ws->proc = (mbxH_wproc){.sock = -1, .pidfd = -1};
  mbxH_shared_config(svc, p, &ws->cfg);
  ws->host_call_limit = p->host_calls;
  ws->spin_on = atomic_load(svc->worker_spin);
  /* What a report may hold: a value or pending call's JSON (escapes make text longer than
     the heap it came from), the run's output. */
  size_t result = ws->cfg.result_limit ? ws->cfg.result_limit : ws->cfg.output_limit;
  ws->bounds.value_max = sat_mul(ws->cfg.memory_limit, 8) + result;
  if (ws->bounds.value_max > MBXH_WP_MAX_FRAME) ws->bounds.value_max = MBXH_WP_MAX_FRAME;
  ws->bounds.output_max = ws->cfg.output_limit;
  size_t frame = 2 * ws->bounds.value_max + ws->bounds.output_max + ((size_t)1 << 20);
  ws->frame_max = frame > MBXH_WP_MAX_FRAME ? MBXH_WP_MAX_FRAME : (uint32_t)frame;
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
  if (ws->proc.pidfd >= 0)
    syscall(SYS_pidfd_send_signal, ws->proc.pidfd, MBXH_WP_INTERRUPT_SIGNAL, NULL, 0);
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
  ws->cfg.address_key = mbxH_shared_address_key(ws->svc);
  if (mbxC_port_local_fs_reset(&ws->port) != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_reset: the filesystem view could not be "
                   "made again: %s",
                   ws->port.fs_error.message);
    return MBX_NO_MEMORY;
  }
  mbxC_port_local_seek(&ws->port, 0);
  /* io.stdin reads the host's bytes from their start again (they live here). */
  ws->port.stdin_source.pos = 0;
  if (ws->recording) mbxC_port_record_restart(&ws->record);
  ws->paused = 0;
  /* Once guest code has run in a worker, the pristine state is made in a new one: a VM the
     guest took over (a Lua memory bug) would acknowledge a RESET and keep its state, seeing
     the next principal's code, inputs and host replies. Only a worker that has run nothing
     yet (or is gone, or tainted) is reset in place or replaced as before. */
  if (!worker_alive(ws) || ws->tainted || ws->runs > 0) {
    if (worker_alive(ws)) {
      pthread_mutex_lock(&ws->sig_mu);
      mbxH_wproc p = ws->proc;
      ws->proc = (mbxH_wproc){.sock = -1, .pidfd = -1};
      pthread_mutex_unlock(&ws->sig_mu);
      mbxH_wpool_release(ws->pool, &p, 0, 0, NULL);
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
    mbxU_error_set(err, MBX_INTERNAL_ERROR,
                   "mbx_sandbox_reset: %s; the next reset takes a "
                   "new worker",
                   ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  if (code != 0) {
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_reset: %s; the sandbox refuses runs until "
                   "a reset succeeds",
                   msg);
    ws->tainted = 1;
    return MBX_NO_MEMORY;
  }
  return MBX_OK;
}

static mbx_status worker_checkpoint(void *impl, mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR,
                   "mbx_sandbox_checkpoint: the sandbox's worker is "
                   "gone (%s); reset the sandbox",
                   ws->reason);
    return MBX_INTERNAL_ERROR;
  }
  mbxC_vfs_mark *files;
  mbx_status s = mbxH_shared_checkpoint_files(&ws->port, &files, err);
  if (s != MBX_OK) return s;
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
    if (code == 3) return mbxH_shared_no_arena("mbx_sandbox_checkpoint", err);
    mbxU_error_set(err, MBX_NO_MEMORY,
                   "mbx_sandbox_checkpoint: out of memory in the worker "
                   "for the copy; the previous checkpoint (if any) is kept");
    return MBX_NO_MEMORY;
  }
  /* io.stdin's bytes and position live here, as do the memory files: the port's side. */
  mbxH_shared_checkpoint_keep(&ws->port, &ws->record, files, &ws->checkpoint_port);
  ws->has_checkpoint = 1;
  ws->checkpoint_worker = ws->worker_gen;
  ws->checkpoint_paused = ws->paused;
  return MBX_OK;
}

static mbx_status worker_rewind(void *impl, mbx_error *err) {
  wsb *ws = impl;
#ifdef MBX_ARENA_MALLOC
  (void)ws;
  return mbxH_shared_no_arena("mbx_sandbox_rewind", err);
#else
  if (!ws->has_checkpoint) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_rewind: the sandbox has no "
                   "checkpoint (call mbx_sandbox_checkpoint first)");
    return MBX_INVALID_ARGUMENT;
  }
  if (!worker_alive(ws) || ws->checkpoint_worker != ws->worker_gen) {
    mbxU_error_set(err, MBX_INTERNAL_ERROR,
                   "mbx_sandbox_rewind: the worker that held the "
                   "checkpoint is gone (%s); reset the sandbox",
                   ws->reason);
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
  return mbxH_shared_rewind(&ws->port, &ws->record, ws->recording, &ws->checkpoint_port, err);
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
  if (o.value_json == NULL ||
      mbxV_error_from_message(ws->reason, strlen(ws->reason), 0, &o.error) != 0) {
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

static mbx_status worker_run(void *impl, const mbxH_run_args *a, mbx_result **out, mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_SANDBOX_POISONED,
                   "%s: the sandbox's worker is gone (%s); reset "
                   "the sandbox",
                   a->fn, ws->reason);
    return MBX_SANDBOX_POISONED;
  }
  char name[MBXH_CHUNK_NAME_SIZE];
  mbxH_shared_chunk_name(a->chunk_name, name);
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
  mbxH_wp_u64(&ws->w, ws->port.stdin_source.epoch);
  ws->run_deadline = run_deadline_from_now(ws);
  int x = exchange(ws, MBXH_WP_DONE, run_budget_ms(ws));
  if (x == -2) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "%s: the code and inputs are too large to send "
                   "to the worker (%u MiB at most)",
                   a->fn, (unsigned)(MBXH_WP_MAX_FRAME >> 20));
    return MBX_INVALID_ARGUMENT;
  }
  if (x != 0) return lost_result(ws, out);
  return finish(ws, a->fn, logged, out, err);
}

static mbx_status worker_resume(void *impl, const char *fn, const char *value, size_t len,
                                int as_error, mbx_result **out, mbx_error *err) {
  wsb *ws = impl;
  if (!worker_alive(ws)) {
    mbxU_error_set(err, MBX_SANDBOX_POISONED,
                   "%s: the sandbox's worker is gone (%s); reset "
                   "the sandbox",
                   fn, ws->reason);
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
  mbxH_wp_u64(&ws->w, ws->port.stdin_source.epoch);
  ws->run_deadline = run_deadline_from_now(ws);
  int x = exchange(ws, MBXH_WP_DONE, run_budget_ms(ws));
  if (x == -2) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "%s: the value is too large to send to the "
                   "worker",
                   fn);
    return MBX_INVALID_ARGUMENT;
  }
  if (x != 0) return lost_result(ws, out);
  return finish(ws, fn, ws->recording, out, err);
}

/* The bytes io.stdin reads: held here, served to the worker a block at a time. */
static mbx_status worker_set_stdin(void *impl, const char *data, size_t len, int fd,
                                   mbx_error *err) {
  return mbxH_shared_set_stdin(&((wsb *)impl)->port, data, len, fd, err);
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
