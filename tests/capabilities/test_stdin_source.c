/* tests/capabilities/test_stdin_source.c -- unit tests of capabilities/stdin_source.c: given
   bytes; a descriptor read only when asked and kept for a rewind; a wait that ends at the
   deadline or at the interrupt (generous bounds: the test asserts why it ended, not how
   fast); the 64 MiB kept at most; the public API through a sandbox and a snapshot. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/stdin_source.h"
#include "moonbox.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void given_bytes_are_read_once_and_again_after_a_rewind(void **state) {
  (void)state;
  mbxC_stdin s;
  mbxC_stdin_init(&s);
  char buf[8];
  size_t got = 99;
  mbxC_port_error e = {0, ""};
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e), 0);
  assert_int_equal(got, 0); /* nothing given: an empty stdin */
  uint64_t epoch = s.epoch;
  assert_int_equal(mbxC_stdin_set_bytes(&s, "hello world", 11), 0);
  assert_true(s.epoch != epoch);
  assert_int_equal(mbxC_stdin_read(&s, buf, 5, NULL, &got, &e), 0);
  assert_int_equal(got, 5);
  assert_memory_equal(buf, "hello", 5);
  s.pos = 0; /* what a rewind does */
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e), 0);
  assert_int_equal(got, 8);
  assert_memory_equal(buf, "hello wo", 8);
  mbxC_stdin_free(&s);
}

/* Nothing is read from the descriptor until the guest asks; what was read stays. */
static void a_descriptor_is_read_when_asked_and_kept(void **state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe(p), 0);
  assert_int_equal(write(p[1], "abc", 3), 3);
  mbxC_stdin s;
  mbxC_stdin_init(&s);
  mbxC_stdin_set_fd(&s, p[0]);
  assert_int_equal(s.len, 0); /* set_fd read nothing */
  char buf[16];
  size_t got = 0;
  mbxC_port_error e = {0, ""};
  assert_int_equal(mbxC_stdin_read(&s, buf, 2, NULL, &got, &e), 0);
  assert_int_equal(got, 2);
  assert_memory_equal(buf, "ab", 2);
  assert_int_equal(write(p[1], "def", 3), 3);
  close(p[1]);
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e), 0);
  assert_int_equal(got, 4); /* only what was asked for was read before: "c", then "def" */
  assert_memory_equal(buf, "cdef", 4);
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e), 0);
  assert_int_equal(got, 0); /* the writer closed: the end */
  s.pos = 1;
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e), 0);
  assert_int_equal(got, 5);
  assert_memory_equal(buf, "bcdef", 5);
  mbxC_stdin_free(&s);
  close(p[0]);
}

static int flag_set(const void *ctx) {
  return *(const int *)ctx;
}

/* A writer that never writes: the wait ends at the deadline (MBXC_E_TIMEDOUT), or at the
   interrupt (EINTR), never by itself. */
static void a_wait_ends_at_the_deadline_or_the_interrupt(void **state) {
  (void)state;
  int p[2];
  assert_int_equal(pipe(p), 0);
  mbxC_stdin s;
  mbxC_stdin_init(&s);
  mbxC_stdin_set_fd(&s, p[0]);
  char buf[4];
  size_t got = 0;
  mbxC_port_error e = {0, ""};
  uint64_t t0 = now_ns();
  mbxC_wait w = {t0 + 100000000u, NULL, NULL};
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, &w, &got, &e), -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  assert_true(now_ns() >= t0 + 100000000u);         /* not before the deadline */
  assert_true(now_ns() < t0 + 30ull * 1000000000u); /* and not hanging */
  int interrupted = 1;
  mbxC_wait iw = {0, flag_set, &interrupted}; /* no deadline: only the interrupt */
  assert_int_equal(mbxC_stdin_read(&s, buf, sizeof buf, &iw, &got, &e), -1);
  assert_int_equal(e.errnum, EINTR);
  assert_int_equal(got, 0);
  mbxC_stdin_free(&s);
  close(p[0]);
  close(p[1]);
}

/* Past 64 MiB kept, a read fails with EFBIG rather than holding more host memory. */
static void at_most_64_mib_is_kept(void **state) {
  (void)state;
  char path[] = "/tmp/mbx_stdin_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  unlink(path);
  assert_int_equal(ftruncate(fd, (off_t)MBXC_STDIN_KEPT_MAX + 10), 0); /* sparse: zeros */
  mbxC_stdin s;
  mbxC_stdin_init(&s);
  mbxC_stdin_set_fd(&s, fd);
  static char buf[1 << 16];
  size_t got = 0, total = 0;
  mbxC_port_error e = {0, ""};
  int rc;
  while ((rc = mbxC_stdin_read(&s, buf, sizeof buf, NULL, &got, &e)) == 0 && got > 0)
    total += got;
  assert_int_equal(rc, -1);
  assert_int_equal(e.errnum, EFBIG);
  assert_int_equal(total, MBXC_STDIN_KEPT_MAX);
  mbxC_stdin_free(&s);
  close(fd);
}

/* Through the public API: the guest reads the descriptor; a rewind reads the kept bytes
   again; a deterministic sandbox's snapshot holds what was read, so its restore reads no
   descriptor (none is set on the restored sandbox). */
static void a_sandbox_reads_a_descriptor_and_its_snapshot_keeps_it(void **state) {
  (void)state;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  assert_non_null(rt);
  assert_int_equal(mbx_policy_set_limit_checked(p, MBX_LIMIT_INSTRUCTIONS, 1000000, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_deterministic(p, 1, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  int pipefd[2];
  assert_int_equal(pipe(pipefd), 0);
  assert_int_equal(write(pipefd[1], "one\ntwo\n", 8), 8);
  close(pipefd[1]);
  assert_int_equal(mbx_sandbox_set_stdin_fd(sb, -1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_set_stdin_fd(sb, pipefd[0], &err), MBX_OK);
  const char *code = "first = io.read() return first";
  mbx_result *res = NULL;
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "\"one\"");
  mbx_result_free(res);
  void *blob = NULL;
  size_t len = 0;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  close(pipefd[0]); /* the restore must not need it */
  mbx_sandbox *back = mbx_sandbox_restore(rt, p, blob, len, &err);
  assert_non_null(back);
  code = "return first";
  assert_int_equal(mbx_run(back, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "\"one\"");
  mbx_result_free(res);
  mbx_free(blob);
  mbx_sandbox_free(back);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(given_bytes_are_read_once_and_again_after_a_rewind),
      cmocka_unit_test(a_descriptor_is_read_when_asked_and_kept),
      cmocka_unit_test(a_wait_ends_at_the_deadline_or_the_interrupt),
      cmocka_unit_test(at_most_64_mib_is_kept),
      cmocka_unit_test(a_sandbox_reads_a_descriptor_and_its_snapshot_keeps_it),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
