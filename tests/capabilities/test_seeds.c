/* tests/capabilities/test_seeds.c -- unit tests of capabilities/seeds.c: SipHash-2-4 against
   its published vector, seeds distinct and unrelated within and across runtimes, a forked
   child re-keyed, and sibling sandboxes seeded apart through the public API. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/seeds.h"
#include "moonbox.h"

/* The reference vector of the SipHash paper for a 16-byte message: key 00..0f, message 00..0f
   (as `openssl mac -macopt hexkey:000102030405060708090a0b0c0d0e0f SIPHASH` computes too). */
static void siphash_matches_the_reference(void **state) {
  (void)state;
  const uint64_t key[2] = {0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
  assert_true(mbxC_siphash_2_4(key, 0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull) ==
              0x3f2acc7f57c29bdbull);
}

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return (x > y) - (x < y);
}

#define DRAWS 4096

/* Every word of every draw differs from every other (a counter under a PRF), and neither the
   difference nor the xor of consecutive draws is constant (they are not a counter). */
static void draws_are_distinct_and_unrelated(void **state) {
  (void)state;
  mbxC_seeds s;
  mbxC_seeds_init(&s);
  uint64_t *w = malloc(2 * DRAWS * sizeof *w);
  assert_non_null(w);
  for (int i = 0; i < DRAWS; i++)
    mbxC_seeds_draw(&s, w + 2 * i);
  int same_diff = 0, same_xor = 0;
  for (int i = 2; i < DRAWS; i++) {
    same_diff += w[2 * i] - w[2 * i - 2] == w[2 * i - 2] - w[2 * i - 4];
    same_xor += (w[2 * i] ^ w[2 * i - 2]) == (w[2 * i - 2] ^ w[2 * i - 4]);
  }
  assert_int_equal(same_diff, 0);
  assert_int_equal(same_xor, 0);
  qsort(w, 2 * DRAWS, sizeof *w, cmp_u64);
  for (int i = 1; i < 2 * DRAWS; i++)
    assert_true(w[i] != w[i - 1]);
  free(w);
}

/* Two runtimes' secrets differ: the same draw number gives other words. */
static void runtimes_have_their_own_secret(void **state) {
  (void)state;
  mbxC_seeds a, b;
  mbxC_seeds_init(&a);
  mbxC_seeds_init(&b);
  uint64_t x[2], y[2];
  mbxC_seeds_draw(&a, x);
  mbxC_seeds_draw(&b, y);
  assert_true(x[0] != y[0] && x[1] != y[1]);
}

/* After fork() the child would repeat its parent's next draws: it re-keys instead. */
static void a_forked_child_draws_other_seeds(void **state) {
  (void)state;
  mbxC_seeds s;
  mbxC_seeds_init(&s);
  uint64_t before[2];
  mbxC_seeds_draw(&s, before);
  int fds[2];
  assert_int_equal(pipe(fds), 0);
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    uint64_t child[2];
    mbxC_seeds_draw(&s, child);
    _exit(write(fds[1], child, sizeof child) == (ssize_t)sizeof child ? 0 : 1);
  }
  uint64_t parent[2], child[2];
  mbxC_seeds_draw(&s, parent);
  assert_int_equal(read(fds[0], child, sizeof child), (ssize_t)sizeof child);
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  close(fds[0]);
  close(fds[1]);
  /* Same draw number (1) on both sides: only a new secret makes them differ. */
  assert_true(parent[0] != child[0] && parent[1] != child[1]);
  assert_true(before[0] != parent[0]);
}

/* Threads take the counter a batch at a time: draws from many threads are still all distinct,
   and a thread's batch never outlives the mbxC_seeds it came from (a new one made at the same
   address starts again from draw 0 under its own secret). */
#define THREADS 8
#define THREAD_DRAWS 1000
typedef struct draw_job {
  mbxC_seeds *s;
  uint64_t w[2 * THREAD_DRAWS];
} draw_job;

static void *draw_many(void *arg) {
  draw_job *j = arg;
  for (int i = 0; i < THREAD_DRAWS; i++)
    mbxC_seeds_draw(j->s, j->w + 2 * i);
  return NULL;
}

static void threads_draw_apart_in_batches(void **state) {
  (void)state;
  mbxC_seeds s;
  mbxC_seeds_init(&s);
  draw_job *jobs = calloc(THREADS, sizeof *jobs);
  assert_non_null(jobs);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i].s = &s;
    assert_int_equal(pthread_create(&t[i], NULL, draw_many, &jobs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(t[i], NULL);
  size_t n = (size_t)THREADS * 2 * THREAD_DRAWS;
  uint64_t *all = malloc(n * sizeof *all);
  assert_non_null(all);
  for (int i = 0; i < THREADS; i++)
    memcpy(all + (size_t)i * 2 * THREAD_DRAWS, jobs[i].w, sizeof jobs[i].w);
  qsort(all, n, sizeof *all, cmp_u64);
  for (size_t i = 1; i < n; i++)
    assert_true(all[i] != all[i - 1]);
  free(all);
  free(jobs);
  /* Made again in place: this thread's batch of the old one is not used. */
  uint64_t w[2];
  mbxC_seeds_draw(&s, w);
  mbxC_seeds_init(&s);
  mbxC_seeds_draw(&s, w);
  assert_true(w[0] == mbxC_siphash_2_4(s.key, 0, 0) && w[1] == mbxC_siphash_2_4(s.key, 0, 1));
  mbxC_seeds_draw(&s, w);
  assert_true(w[0] == mbxC_siphash_2_4(s.key, 1, 0));
}

/* Through the public API: sibling sandboxes of one runtime (and of one slot, reused) each
   get their own generator state, so their first 64-bit draws all differ. */
#define SIBLINGS 64
static void sibling_sandboxes_are_seeded_apart(void **state) {
  (void)state;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  char values[SIBLINGS][64];
  for (int i = 0; i < SIBLINGS; i++) {
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
    mbx_result *res = NULL;
    const char *code = "return math.random(0)";
    assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
    snprintf(values[i], sizeof values[i], "%s", mbx_result_value_json(res, NULL));
    mbx_result_free(res);
    mbx_sandbox_free(sb); /* the next sandbox reuses this slot and its template */
  }
  for (int i = 0; i < SIBLINGS; i++)
    for (int j = i + 1; j < SIBLINGS; j++)
      assert_string_not_equal(values[i], values[j]);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(siphash_matches_the_reference),
      cmocka_unit_test(draws_are_distinct_and_unrelated),
      cmocka_unit_test(runtimes_have_their_own_secret),
      cmocka_unit_test(a_forked_child_draws_other_seeds),
      cmocka_unit_test(threads_draw_apart_in_batches),
      cmocka_unit_test(sibling_sandboxes_are_seeded_apart),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
