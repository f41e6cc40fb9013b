/* tests/host/cli/test_diff.c -- host/cli/diff.c against the real `diff -u --label` (byte for byte
   on fixed cases: changes at the top, the end, adjacent and separate hunks, missing final
   newlines, empty sides, binary), against patch(1) on random files (the diff must turn a
   into b exactly), and the bound: a hostile pair past the edit budget still yields a
   correct diff, in bounded time. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/cli/diff.h"

static char dir[64];

static void write_file(const char *name, const char *data, size_t len) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  assert_non_null(f);
  assert_int_equal(fwrite(data, 1, len, f), len);
  fclose(f);
}

static char *run(const char *cmd, size_t *len) {
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  size_t cap = 1 << 16, n = 0;
  char *buf = malloc(cap);
  size_t k;
  while ((k = fread(buf + n, 1, cap - n, p)) > 0) {
    n += k;
    if (n == cap) buf = realloc(buf, cap *= 2);
  }
  pclose(p);
  *len = n;
  return buf;
}

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof dir, "/tmp/mbx_test_diff_XXXXXX");
  if (access("/usr/bin/diff", X_OK) != 0 && system("command -v diff >/dev/null") != 0) return -1;
  return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd);
}

/* Ours and diff -u's for one pair, byte for byte. */
static void same_as_diff(const char *a, size_t alen, const char *b, size_t blen) {
  write_file("a", a, alen);
  write_file("b", b, blen);
  char cmd[256];
  snprintf(cmd, sizeof cmd, "diff -u --label /x --label /x '%s/a' '%s/b'", dir, dir);
  size_t want_len;
  char *want = run(cmd, &want_len);
  mbxU_buf got = {0};
  assert_int_equal(mbxH_diff_unified("/x", a, alen, "/x", b, blen, &got), 0);
  assert_false(got.failed);
  if (got.len != want_len || (want_len && memcmp(got.data, want, want_len) != 0)) {
    fprintf(stderr, "want:\n%.*s\ngot:\n%.*s\n", (int)want_len, want, (int)got.len,
            got.data ? got.data : "");
    fail();
  }
  free(want);
  mbxU_buf_free(&got);
}

#define S(x) x, sizeof x - 1

static void fixed_cases(void **state) {
  (void)state;
  const char *ten = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), ten, strlen(ten)); /* equal: nothing */
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), S("0\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), S("2\n3\n4\n5\n6\n7\n8\n9\n10\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n"), S("1\n2\n3\n4\n5\n6\n7\n8\n9\n"));
  /* Two changes 6 lines apart share a hunk; 7 apart, two hunks. */
  same_as_diff(S("a\n1\n2\n3\n4\n5\n6\nb\n"), S("A\n1\n2\n3\n4\n5\n6\nB\n"));
  same_as_diff(S("a\n1\n2\n3\n4\n5\n6\n7\nb\n"), S("A\n1\n2\n3\n4\n5\n6\n7\nB\n"));
  same_as_diff(S("a\n1\n2\n3\n4\n5\n6\n7\n8\n9\nb\nc\nd\n"),
               S("a\n1\n2\n3\nX\n5\n6\n7\n8\n9\nY\nc\nd\n"));
  /* Missing final newlines, on either side or both. */
  same_as_diff(S("a\nb"), S("a\nb\n"));
  same_as_diff(S("a\nb\n"), S("a\nb"));
  same_as_diff(S("a\nb"), S("a\nc"));
  same_as_diff(S("x"), S("y"));
  /* Empty sides. */
  same_as_diff("", 0, S("new\nfile\n"));
  same_as_diff(S("old\nfile\n"), "", 0);
  same_as_diff(S("only\n"), S("\n"));
  /* A replaced block, a moved line. */
  same_as_diff(S("h\n1\n2\n3\n4\nt\n"), S("h\nA\nB\nt\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n"), S("2\n3\n4\n5\n1\n"));
  /* Binary: named, no lines. */
  same_as_diff(S("a\0b\n"), S("a\0c\n"));
  /* Long shared starts and ends (set aside before the line tables are made): the context
     and the line numbers must be diff's all the same, at any distance from either end. */
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"),
               S("1\n2\n3\n4\n5\n6x\n7\n8\n9\n10\n11\n12\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"),
               S("1\n2x\n3\n4\n5\n6\n7\n8\n9\n10\n11y\n12\n"));
  same_as_diff(S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12"),
               S("1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n"));
  same_as_diff(S("aa\nab\nac\nad\nae\naf\nag\n"), S("aa\nab\nac\nad\nae\naf\nagg\n"));
  same_as_diff(S("x\nsame\nsame\nsame\nsame\nsame\n"), S("y\nsame\nsame\nsame\nsame\nsame\n"));
  same_as_diff(S("p\nq\nr\ns\nt\nu\nv\nw\n"), S("p\nq\nr\ns\nINSERTED\nt\nu\nv\nw\n"));
  same_as_diff(S("p\nq\nr\ns\nt\nu\nv\nw\n"), S("p\nq\nr\ns\nu\nv\nw\n"));
}

/* A sink that keeps what it is given, and the longest piece. */
typedef struct kept {
  mbxU_buf b;
  size_t pieces, longest;
} kept;

static void keep(void *to, const char *p, size_t n) {
  kept *k = to;
  mbxU_buf_put(&k->b, p, n);
  k->pieces++;
  if (n > k->longest) k->longest = n;
}

/* The stream: written in pieces as made (no piece longer than a line), measured before a
   byte is written (a diff past max_out writes nothing and says its size), and a small change
   in a large file needs line tables for the lines around it only. */
static void streamed_within_bounds(void **state) {
  (void)state;
  size_t n = 200000;
  char *a = malloc(n * 16), *b = malloc(n * 16 + 16);
  size_t al = 0, bl = 0;
  for (size_t i = 0; i < n; i++) {
    al += (size_t)sprintf(a + al, "line %zu\n", i);
    bl += (size_t)sprintf(b + bl, i == n / 2 ? "LINE %zu\n" : "line %zu\n", i);
  }
  /* 64 KiB of tables: the whole files would need 10 MB. */
  mbxH_diff_limits lim = {.max_out = 1 << 20, .max_memory = 64 << 10};
  kept k = {0};
  uint64_t size = 0;
  assert_int_equal(mbxH_diff_stream("a", a, al, "b", b, bl, &lim, keep, &k, &size),
                   MBXH_DIFF_SHOWN);
  assert_int_equal(size, k.b.len);
  assert_true(k.pieces > 10);
  assert_true(k.longest <= 16);
  const char *want = "--- a\n+++ b\n@@ -99998,7 +99998,7 @@\n line 99997\n line 99998\n"
                     " line 99999\n-line 100000\n+LINE 100000\n line 100001\n line 100002\n"
                     " line 100003\n";
  assert_int_equal(k.b.len, strlen(want));
  assert_memory_equal(k.b.data, want, k.b.len);
  mbxU_buf_free(&k.b);
  /* One byte short: nothing written, the size told. */
  lim.max_out = size - 1;
  kept none = {0};
  uint64_t told = 0;
  assert_int_equal(mbxH_diff_stream("a", a, al, "b", b, bl, &lim, keep, &none, &told),
                   MBXH_DIFF_TOO_LARGE);
  assert_int_equal(told, size);
  assert_int_equal(none.pieces, 0);
  /* Changes at both ends: the tables would span the files, past the budget: named. */
  b[0] = 'L';
  b[bl - 2] = 'X';
  assert_int_equal(mbxH_diff_stream("a", a, al, "b", b, bl, &lim, keep, &none, &told),
                   MBXH_DIFF_TOO_MANY_LINES);
  assert_int_equal(none.pieces, 0);
  free(a);
  free(b);
}

/* Random small files: the diff, applied by patch(1), gives b exactly. */
static void random_pairs_patch_back(void **state) {
  (void)state;
  srand(12345);
  char a[4096], b[4096];
  for (int round = 0; round < 60; round++) {
    size_t al = 0, bl = 0;
    int lines = rand() % 40;
    for (int i = 0; i < lines; i++) {
      al += (size_t)snprintf(a + al, sizeof a - al, "%c\n", 'a' + rand() % 4);
      int r = rand() % 6;
      if (r == 0) continue;                                                    /* deleted */
      if (r == 1) bl += (size_t)snprintf(b + bl, sizeof b - bl, "new%d\n", i); /* inserted */
      bl += (size_t)snprintf(b + bl, sizeof b - bl, "%.*s", 2, a + al - 2);
    }
    if (round % 5 == 0 && bl) bl--; /* no final newline */
    write_file("a", a, al);
    write_file("b", b, bl);
    mbxU_buf got = {0};
    mbxH_diff_unified("a", a, al, "b", b, bl, &got);
    assert_false(got.failed);
    write_file("p", got.data ? got.data : "", got.len);
    char cmd[512];
    snprintf(cmd, sizeof cmd,
             "cd '%s' && cp a c && { [ ! -s p ] || patch -s c p >/dev/null; } && cmp -s c b && "
             "echo same",
             dir);
    size_t n;
    char *out = run(cmd, &n);
    assert_int_equal(n, 5);
    free(out);
    mbxU_buf_free(&got);
  }
}

/* Two 20000-line files with no line in common at every other place: far past the edit
   budget. The fallback is one hunk and still a correct diff. */
static void hostile_pair_is_bounded(void **state) {
  (void)state;
  size_t n = 20000;
  char *a = malloc(n * 8), *b = malloc(n * 8);
  size_t al = 0, bl = 0;
  for (size_t i = 0; i < n; i++) {
    al += (size_t)sprintf(a + al, "%zu\n", i);
    bl += (size_t)sprintf(b + bl, "%zu\n", i % 2 ? i : i + 1000000);
  }
  mbxU_buf got = {0};
  assert_int_equal(mbxH_diff_unified("a", a, al, "b", b, bl, &got), 1);
  assert_false(got.failed);
  write_file("a", a, al);
  write_file("b", b, bl);
  write_file("p", got.data, got.len);
  char cmd[512];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && cp a c && patch -s c p >/dev/null && cmp -s c b && echo same", dir);
  size_t len;
  char *out = run(cmd, &len);
  assert_int_equal(len, 5);
  free(out);
  mbxU_buf_free(&got);
  free(a);
  free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fixed_cases),
      cmocka_unit_test(random_pairs_patch_back),
      cmocka_unit_test(hostile_pair_is_bounded),
      cmocka_unit_test(streamed_within_bounds),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
