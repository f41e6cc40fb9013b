/* tests/capabilities/test_port_remote.c -- unit tests of capabilities/port_remote.c: every
   operation of MBXC_PORT_OPS goes through a remote port, its frames (port_wire.c) and the
   serving side (port_serve.c) over an in-memory transport to a stub port, and every argument
   and every field of the answer arrives; what the remote port answers itself stays local. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/port_remote.h"
#include "capabilities/port_serve.h"

/* ---- the stub port the serving side answers from ---- */

static const mbxC_grant_fn fns[] = {{"host.echo", MBXC_FN_SYNC, {0}},
                                    {"host.nat", MBXC_FN_NATIVE, {'l', 2, {'z', 'd'}}}};
static const mbxC_grants grants = {0, 2, fns};

/* What the stub's last operation was given. */
typedef struct seen {
  int op;
  uint64_t deadline_ns;
  char a[64], b[64];
  size_t a_len, b_len;
  int64_t n1, n2, n3;
  double d;
  mbxC_exec_request exec;
  char exec_strs[4][32];
} seen;
static seen g_seen;

static void saw(int op, const mbxC_wait *wait) {
  memset(&g_seen, 0, sizeof g_seen);
  g_seen.op = op;
  g_seen.deadline_ns = wait ? wait->deadline_ns : 0;
}

static void saw_bytes(char *into, size_t *len, const char *p, size_t n) {
  assert_true(n < 64);
  if (n) memcpy(into, p, n); /* p may be NULL for no bytes (an empty exec stdin) */
  into[n] = '\0';
  *len = n;
}

static void port_fail(mbxC_port_error *e, int errnum, const char *message) {
  e->errnum = errnum;
  snprintf(e->message, sizeof e->message, "%s", message);
}

static int64_t stub_wall_time(void *ud) {
  (void)ud;
  saw(MBXC_OP_WALL_TIME, NULL);
  return 1700000123;
}

static void stub_random_seed(void *ud, uint64_t seed[2]) {
  (void)ud;
  saw(MBXC_OP_RANDOM_SEED, NULL);
  seed[0] = 11;
  seed[1] = UINT64_MAX - 22;
}

static const char *stub_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  (void)ud;
  saw(MBXC_OP_ENV_GET, NULL);
  saw_bytes(g_seen.a, &g_seen.a_len, name, name_len);
  if (name_len != 4 || memcmp(name, "HOME", 4) != 0) return NULL;
  *value_len = 11;
  return "/home/g\0est";
}

static mbxC_call_result stub_host_call(void *ud, size_t index, const char *args, size_t args_len,
                                       const mbxC_wait *wait, const char **reply,
                                       size_t *reply_len) {
  (void)ud;
  saw(MBXC_OP_HOST_CALL, wait);
  g_seen.n1 = (int64_t)index;
  saw_bytes(g_seen.a, &g_seen.a_len, args, args_len);
  if (strcmp(g_seen.a, "[\"fail\"]") == 0) { /* args points into the frame: no NUL */
    *reply = "boom";
    *reply_len = 4;
    return MBXC_CALL_ERROR;
  }
  *reply = "{\"ok\":1}";
  *reply_len = 8;
  return MBXC_CALL_VALUE;
}

static mbxC_call_result stub_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                         const mbxC_wait *wait, mbxC_ffi_value *ret,
                                         const char **bytes, size_t *len) {
  (void)ud;
  saw(MBXC_OP_NATIVE_CALL, wait);
  g_seen.n1 = (int64_t)index;
  saw_bytes(g_seen.a, &g_seen.a_len, args[0].z, strlen(args[0].z));
  g_seen.d = args[1].d;
  ret->l = -7;
  *bytes = "";
  *len = 0;
  return MBXC_CALL_VALUE;
}

static int stub_fs_open(void *ud, const char *path, size_t path_len, int flags,
                        const mbxC_wait *wait, int *handle, mbxC_port_error *e) {
  (void)ud;
  saw(MBXC_OP_FS_OPEN, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, path, path_len);
  g_seen.n1 = flags;
  if (strcmp(g_seen.a, "/missing") == 0) {
    port_fail(e, 2, "No such file or directory (not in the sandbox view)");
    return -1;
  }
  *handle = 42;
  return 0;
}

static int stub_fs_read(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait,
                        size_t *got, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_READ, wait);
  g_seen.n1 = handle;
  g_seen.n2 = (int64_t)len;
  size_t n = len < 5 ? len : 5;
  memcpy(buf, "he\0lo", n);
  *got = n;
  return 0;
}

static int stub_fs_write(void *ud, int handle, const char *buf, size_t len, const mbxC_wait *wait,
                         size_t *put, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_WRITE, wait);
  g_seen.n1 = handle;
  saw_bytes(g_seen.a, &g_seen.a_len, buf, len);
  *put = len - 1;
  return 0;
}

static int stub_fs_seek(void *ud, int handle, int whence, int64_t offset, int64_t *pos,
                        mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_SEEK, NULL);
  g_seen.n1 = handle;
  g_seen.n2 = whence;
  g_seen.n3 = offset;
  *pos = offset + 1000;
  return 0;
}

static int stub_fs_close(void *ud, int handle, mbxC_port_error *e) {
  (void)ud;
  saw(MBXC_OP_FS_CLOSE, NULL);
  g_seen.n1 = handle;
  if (handle == 13) {
    port_fail(e, 9, "Bad file descriptor");
    return -1;
  }
  return 0;
}

static int stub_fs_list(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                        const char **names, size_t *names_len, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_LIST, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, path, path_len);
  *names = "a\0bc\0";
  *names_len = 5;
  return 0;
}

static int stub_fs_stat(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                        mbxC_fs_stat *st, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_STAT, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, path, path_len);
  *st = (mbxC_fs_stat){.is_dir = 0, .is_file = 1, .size = 1ull << 40, .mtime = -5, .writable = 1};
  return 0;
}

static int stub_fs_mkdir(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                         mbxC_port_error *e) {
  (void)ud;
  saw(MBXC_OP_FS_MKDIR, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, path, path_len);
  port_fail(e, 17, "File exists");
  return -1;
}

static int stub_fs_remove(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                          mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_REMOVE, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, path, path_len);
  return 0;
}

static int stub_fs_rename(void *ud, const char *from, size_t from_len, const char *to,
                          size_t to_len, const mbxC_wait *wait, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_FS_RENAME, wait);
  saw_bytes(g_seen.a, &g_seen.a_len, from, from_len);
  saw_bytes(g_seen.b, &g_seen.b_len, to, to_len);
  return 0;
}

static int stub_exec_run(void *ud, const mbxC_exec_request *req, const mbxC_wait *wait,
                         mbxC_exec_result *res, mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_EXEC_RUN, wait);
  g_seen.exec = *req;
  /* The request's strings go with the call's frame: keep copies. */
  assert_true(req->argc == 2 && req->envc == 1);
  snprintf(g_seen.exec_strs[0], 32, "%s", req->argv[0]);
  snprintf(g_seen.exec_strs[1], 32, "%s", req->argv[1]);
  snprintf(g_seen.exec_strs[2], 32, "%s", req->env[0]);
  snprintf(g_seen.exec_strs[3], 32, "%s", req->cwd);
  saw_bytes(g_seen.a, &g_seen.a_len, req->stdin_bytes, req->stdin_len);
  *res = (mbxC_exec_result){.exit_code = 3,
                            .signal = 0,
                            .out = "o\0ut",
                            .out_len = 4,
                            .err = "err",
                            .err_len = 3,
                            .timed_out = 1,
                            .truncated = 1,
                            .wall_ms = 12,
                            .limits = MBXC_EXEC_LIMIT_CGROUP_PIDS,
                            .memory_limit = 1,
                            .pids_limit = 1,
                            .changes = 9,
                            .changes_refused = 1,
                            .changes_error = "too big"};
  return 0;
}

static int stub_stdin_read(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                           mbxC_port_error *e) {
  (void)ud;
  (void)e;
  saw(MBXC_OP_STDIN_READ, wait);
  g_seen.n2 = (int64_t)len;
  memcpy(buf, "in", 2);
  *got = 2;
  return 0;
}

static const mbxC_port stub = {.version = MBXC_PORT_VERSION,
                               .grants = &grants,
                               .wall_time = stub_wall_time,
                               .random_seed = stub_random_seed,
                               .env_get = stub_env_get,
                               .host_call = stub_host_call,
                               .native_call = stub_native_call,
                               .fs_open = stub_fs_open,
                               .fs_read = stub_fs_read,
                               .fs_write = stub_fs_write,
                               .fs_seek = stub_fs_seek,
                               .fs_close = stub_fs_close,
                               .fs_list = stub_fs_list,
                               .fs_stat = stub_fs_stat,
                               .fs_mkdir = stub_fs_mkdir,
                               .fs_remove = stub_fs_remove,
                               .fs_rename = stub_fs_rename,
                               .exec_run = stub_exec_run,
                               .stdin_read = stub_stdin_read};

/* ---- the in-memory transport: the serving side in the same process ---- */

typedef struct loop {
  mbxC_wire_writer reply;
  unsigned trips;
  int truncate; /* cut this many bytes off the next reply (a broken serving side) */
  jmp_buf broke;
} loop;

static void loop_begin(void *ctx, mbxC_wire_writer *w) {
  (void)ctx;
  mbxC_wire_begin(w, 4, 22);
}

static int known(unsigned type) {
  return type == 22 || type == 7;
}

static void loop_round_trip(void *ctx, mbxC_wire_writer *w, const unsigned char **reply,
                            size_t *reply_len) {
  loop *l = ctx;
  l->trips++;
  assert_int_equal(mbxC_wire_finish(w), 0);
  unsigned type;
  uint32_t len;
  char why[200];
  assert_int_equal(mbxC_wire_header(w->data, 4, known, 1u << 20, &type, &len, why, sizeof why), 0);
  assert_int_equal(type, 22);
  assert_int_equal(len, w->len - MBXC_WIRE_HEADER);
  mbxC_wire_call c;
  assert_int_equal(
      mbxC_wire_get_call(w->data + MBXC_WIRE_HEADER, len, &grants, &c, why, sizeof why), 0);
  assert_true(mbxC_serve_has(&stub, c.op));
  mbxC_wait wait = {c.deadline_ns, NULL, NULL};
  mbxC_wire_begin(&l->reply, 4, 7);
  mbxC_serve_call(&stub, &c, &wait, &l->reply);
  mbxC_wire_call_free(&c);
  assert_int_equal(mbxC_wire_finish(&l->reply), 0);
  *reply = l->reply.data + MBXC_WIRE_HEADER;
  *reply_len = l->reply.len - MBXC_WIRE_HEADER - (size_t)l->truncate;
  l->truncate = 0;
}

static void loop_broken(void *ctx) __attribute__((noreturn));
static void loop_broken(void *ctx) {
  loop *l = ctx;
  longjmp(l->broke, 1);
}

static loop g_loop;
static const mbxC_wire_transport transport = {&g_loop, loop_begin, loop_round_trip, loop_broken};

static int setup(void **state) {
  static mbxC_remote r;
  memset(&g_loop, 0, sizeof g_loop);
  memset(&r, 0, sizeof r);
  mbxC_remote_init(&r, &transport, &grants, mbxC_serve_mask(&stub));
  *state = &r;
  return 0;
}

static int teardown(void **state) {
  mbxC_remote_free(*state);
  mbxC_wire_writer_free(&g_loop.reply);
  return 0;
}

/* ---- every operation, both ways ---- */

static void test_clock_seed_env(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  assert_int_equal(p->version, MBXC_PORT_VERSION);
  assert_ptr_equal(p->grants, &grants);
  assert_int_equal(p->wall_time(p->ud), 1700000123);
  assert_int_equal(g_seen.op, MBXC_OP_WALL_TIME);
  uint64_t seed[2];
  p->random_seed(p->ud, seed);
  assert_int_equal(g_seen.op, MBXC_OP_RANDOM_SEED);
  assert_int_equal(seed[0], 11);
  assert_int_equal(seed[1], UINT64_MAX - 22);
  size_t len = 0;
  const char *v = p->env_get(p->ud, "HOME", 4, &len);
  assert_int_equal(g_seen.op, MBXC_OP_ENV_GET);
  assert_string_equal(g_seen.a, "HOME");
  assert_int_equal(len, 11);
  assert_memory_equal(v, "/home/g\0est", 12); /* NUL-terminated too */
  assert_null(p->env_get(p->ud, "PATH", 4, &len));
  assert_int_equal(g_loop.trips, 4);
}

static void test_calls(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  mbxC_wait wait = {777, NULL, NULL};
  const char *reply;
  size_t len;
  assert_int_equal(p->host_call(p->ud, 0, "[1,\"x\"]", 7, &wait, &reply, &len), MBXC_CALL_VALUE);
  assert_int_equal(g_seen.op, MBXC_OP_HOST_CALL);
  assert_int_equal(g_seen.n1, 0);
  assert_string_equal(g_seen.a, "[1,\"x\"]");
  assert_int_equal(g_seen.deadline_ns, 777);
  assert_int_equal(len, 8);
  assert_string_equal(reply, "{\"ok\":1}");
  assert_int_equal(p->host_call(p->ud, 0, "[\"fail\"]", 8, &wait, &reply, &len), MBXC_CALL_ERROR);
  assert_string_equal(reply, "boom");
  mbxC_ffi_value args[2] = {{.z = "arg"}, {.d = 2.5}}, ret;
  memset(&ret, 0, sizeof ret);
  assert_int_equal(p->native_call(p->ud, 1, args, &wait, &ret, &reply, &len), MBXC_CALL_VALUE);
  assert_int_equal(g_seen.op, MBXC_OP_NATIVE_CALL);
  assert_int_equal(g_seen.n1, 1);
  assert_string_equal(g_seen.a, "arg");
  assert_true(g_seen.d == 2.5);
  assert_int_equal(g_seen.deadline_ns, 777);
  assert_int_equal(ret.l, -7);
  assert_int_equal(len, 0);
}

static void test_files(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  mbxC_wait wait = {555, NULL, NULL};
  mbxC_port_error e = {0, ""};
  int h = -1;
  assert_int_equal(p->fs_open(p->ud, "/data/f", 7, MBXC_FS_READ | MBXC_FS_CREATE, &wait, &h, &e),
                   0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_OPEN);
  assert_string_equal(g_seen.a, "/data/f");
  assert_int_equal(g_seen.n1, MBXC_FS_READ | MBXC_FS_CREATE);
  assert_int_equal(g_seen.deadline_ns, 555);
  assert_int_equal(h, 42);
  assert_int_equal(p->fs_open(p->ud, "/missing", 8, MBXC_FS_READ, &wait, &h, &e), -1);
  assert_int_equal(e.errnum, 2);
  assert_string_equal(e.message, "No such file or directory (not in the sandbox view)");
  char buf[8];
  size_t got = 0;
  assert_int_equal(p->fs_read(p->ud, 42, buf, 3, &wait, &got, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_READ);
  assert_int_equal(g_seen.n1, 42);
  assert_int_equal(g_seen.n2, 3);
  assert_int_equal(g_seen.deadline_ns, 555);
  assert_int_equal(got, 3);
  assert_memory_equal(buf, "he\0", 3);
  size_t put = 0;
  assert_int_equal(p->fs_write(p->ud, 42, "wr\0te", 5, &wait, &put, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_WRITE);
  assert_int_equal(g_seen.n1, 42);
  assert_int_equal(g_seen.a_len, 5);
  assert_memory_equal(g_seen.a, "wr\0te", 5);
  assert_int_equal(put, 4);
  int64_t pos = 0;
  assert_int_equal(p->fs_seek(p->ud, 42, 2, -3, &pos, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_SEEK);
  assert_int_equal(g_seen.n1, 42);
  assert_int_equal(g_seen.n2, 2);
  assert_int_equal(g_seen.n3, -3);
  assert_int_equal(pos, 997);
  assert_int_equal(p->fs_close(p->ud, 42, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_CLOSE);
  assert_int_equal(g_seen.n1, 42);
  assert_int_equal(p->fs_close(p->ud, 13, &e), -1);
  assert_int_equal(e.errnum, 9);
  assert_string_equal(e.message, "Bad file descriptor");
  const char *names;
  size_t names_len;
  assert_int_equal(p->fs_list(p->ud, "/d", 2, &wait, &names, &names_len, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_LIST);
  assert_string_equal(g_seen.a, "/d");
  assert_int_equal(names_len, 5);
  assert_memory_equal(names, "a\0bc\0", 5);
  mbxC_fs_stat st;
  memset(&st, 0xff, sizeof st);
  assert_int_equal(p->fs_stat(p->ud, "/s", 2, &wait, &st, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_STAT);
  assert_string_equal(g_seen.a, "/s");
  assert_int_equal(st.is_dir, 0);
  assert_int_equal(st.is_file, 1);
  assert_int_equal(st.size, 1ull << 40);
  assert_int_equal(st.mtime, -5);
  assert_int_equal(st.writable, 1);
  assert_int_equal(p->fs_mkdir(p->ud, "/m", 2, &wait, &e), -1);
  assert_int_equal(g_seen.op, MBXC_OP_FS_MKDIR);
  assert_string_equal(g_seen.a, "/m");
  assert_int_equal(e.errnum, 17);
  assert_string_equal(e.message, "File exists");
  assert_int_equal(p->fs_remove(p->ud, "/r", 2, &wait, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_REMOVE);
  assert_string_equal(g_seen.a, "/r");
  assert_int_equal(g_seen.deadline_ns, 555);
  assert_int_equal(p->fs_rename(p->ud, "/from", 5, "/to", 3, &wait, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_FS_RENAME);
  assert_string_equal(g_seen.a, "/from");
  assert_string_equal(g_seen.b, "/to");
  assert_int_equal(g_seen.deadline_ns, 555);
}

static void test_exec_and_stdin(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  mbxC_wait wait = {999, NULL, NULL};
  mbxC_port_error e = {0, ""};
  const char *argv[] = {"/bin/sh", "-c"};
  const char *env[] = {"A=1"};
  mbxC_exec_request req = {.argv = argv,
                           .argc = 2,
                           .stdin_bytes = "i\0n",
                           .stdin_len = 3,
                           .cwd = "/tmp/w",
                           .env = env,
                           .envc = 1,
                           .timeout_ms = 250};
  mbxC_exec_result res;
  assert_int_equal(p->exec_run(p->ud, &req, &wait, &res, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_EXEC_RUN);
  assert_int_equal(g_seen.deadline_ns, 999);
  assert_string_equal(g_seen.exec_strs[0], "/bin/sh");
  assert_string_equal(g_seen.exec_strs[1], "-c");
  assert_string_equal(g_seen.exec_strs[2], "A=1");
  assert_string_equal(g_seen.exec_strs[3], "/tmp/w");
  assert_int_equal(g_seen.a_len, 3);
  assert_memory_equal(g_seen.a, "i\0n", 3);
  assert_int_equal(g_seen.exec.timeout_ms, 250);
  assert_int_equal(res.exit_code, 3);
  assert_int_equal(res.out_len, 4);
  assert_memory_equal(res.out, "o\0ut", 4);
  assert_int_equal(res.err_len, 3);
  assert_int_equal(res.timed_out, 1);
  assert_int_equal(res.truncated, 1);
  assert_int_equal(res.wall_ms, 12);
  assert_int_equal(res.limits, MBXC_EXEC_LIMIT_CGROUP_PIDS);
  assert_int_equal(res.memory_limit, 1);
  assert_int_equal(res.pids_limit, 1);
  assert_int_equal(res.changes, 9);
  assert_int_equal(res.changes_refused, 1);
  assert_string_equal(res.changes_error, "too big");
  char buf[4];
  size_t got = 0;
  mbxC_wait stdin_wait = {424242, NULL, NULL};
  assert_int_equal(p->stdin_read(p->ud, buf, sizeof buf, &stdin_wait, &got, &e), 0);
  assert_int_equal(g_seen.op, MBXC_OP_STDIN_READ);
  assert_int_equal(g_seen.deadline_ns, 424242); /* guest time: the deadline crosses the wire */
  assert_int_equal(g_seen.n2, 4);
  assert_int_equal(got, 2);
  assert_memory_equal(buf, "in", 2);
  /* A read larger than one frame may carry asks for MBXC_WIRE_MAX_IO. */
  char *big = malloc((size_t)MBXC_WIRE_MAX_IO + 10);
  assert_non_null(big);
  assert_int_equal(p->stdin_read(p->ud, big, (size_t)MBXC_WIRE_MAX_IO + 10, NULL, &got, &e), 0);
  assert_int_equal(g_seen.n2, MBXC_WIRE_MAX_IO);
  free(big);
}

/* ---- what the remote port answers itself ---- */

static void test_local_answers(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  /* The seed the serving side sent ahead answers the next draw without a round trip; the draw
     after it is a call again. */
  uint64_t ahead[2] = {5, 6}, seed[2];
  mbxC_remote_set_seed(r, ahead);
  unsigned trips = g_loop.trips;
  p->random_seed(p->ud, seed);
  assert_int_equal(g_loop.trips, trips);
  assert_int_equal(seed[0], 5);
  assert_int_equal(seed[1], 6);
  p->random_seed(p->ud, seed);
  assert_int_equal(g_loop.trips, trips + 1);
  assert_int_equal(seed[0], 11);
  /* The stdin epoch is the one the last run brought; os.clock counts from the run's start. */
  mbxC_remote_run_begin(r, 77);
  assert_non_null(p->stdin_epoch);
  assert_int_equal(p->stdin_epoch(p->ud), 77);
  assert_true(p->cpu_time(p->ud) >= 0.0);
  assert_int_equal(g_loop.trips, trips + 1);
}

/* Only what the serving side serves is forwarded: the rest is NULL ("not granted"). */
static void test_served_subset(void **state) {
  (void)state;
  mbxC_remote r;
  memset(&r, 0, sizeof r);
  uint32_t served = (1u << MBXC_OP_WALL_TIME) | (1u << MBXC_OP_RANDOM_SEED) |
                    (1u << MBXC_OP_ENV_GET) | (1u << MBXC_OP_FS_STAT);
  mbxC_remote_init(&r, &transport, &grants, served);
  assert_non_null(r.port.wall_time);
  assert_non_null(r.port.random_seed);
  assert_non_null(r.port.env_get);
  assert_non_null(r.port.cpu_time);
  assert_non_null(r.port.fs_stat);
  assert_null(r.port.host_call);
  assert_null(r.port.native_call);
  assert_null(r.port.fs_open);
  assert_null(r.port.fs_rename);
  assert_null(r.port.exec_run);
  assert_null(r.port.stdin_read);
  assert_null(r.port.stdin_epoch);
  mbxC_remote_free(&r);
}

/* A reply the caller cannot read (cut short) is the transport's `broken`, never a guess. */
static void test_broken_reply(void **state) {
  mbxC_remote *r = *state;
  const mbxC_port *p = &r->port;
  size_t len;
  g_loop.truncate = 1;
  if (setjmp(g_loop.broke) == 0) {
    p->env_get(p->ud, "HOME", 4, &len);
    fail_msg("a truncated reply was taken");
  }
  mbxC_port_error e = {0, ""};
  g_loop.truncate = 2;
  if (setjmp(g_loop.broke) == 0) {
    p->fs_close(p->ud, 13, &e);
    fail_msg("a truncated error was taken");
  }
  mbxC_exec_result res;
  const char *argv[] = {"/bin/sh", "-c"};
  const char *env[] = {"A=1"};
  mbxC_exec_request req = {.argv = argv, .argc = 2, .cwd = "/", .env = env, .envc = 1};
  g_loop.truncate = 1;
  if (setjmp(g_loop.broke) == 0) {
    p->exec_run(p->ud, &req, NULL, &res, &e);
    fail_msg("a truncated exec result was taken");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_clock_seed_env, setup, teardown),
      cmocka_unit_test_setup_teardown(test_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_files, setup, teardown),
      cmocka_unit_test_setup_teardown(test_exec_and_stdin, setup, teardown),
      cmocka_unit_test_setup_teardown(test_local_answers, setup, teardown),
      cmocka_unit_test(test_served_subset),
      cmocka_unit_test_setup_teardown(test_broken_reply, setup, teardown),
  };
  return cmocka_run_group_tests_name("port_remote", tests, NULL, NULL);
}
