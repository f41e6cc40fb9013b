/* tests/capabilities/test_exec_copy.c -- unit tests of capabilities/exec_copy.c: the copy of
   the view's /tmp a process gets (excluded paths left out), streamed, the copy-back applied as
   created / modified / removed / unchanged entries, an rw mount's only when all of it fits the
   quotas, and every hostile copy-back refused with nothing applied: a path outside the roots,
   at an excluded path, not canonical, malformed, cut short, twice, or past the quota. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/exec_copy.h"
#include "capabilities/vfs.h"

static mbxC_vfs *make_view(uint64_t tmp) {
  static char note[] = "policy input";
  static mbxC_fs_file files[] = {{"/tmp/in/note.txt", note, sizeof note - 1}};
  mbxC_fs_spec spec = {.files = files,
                       .file_count = 1,
                       .tmp_bytes = tmp,
                       .bytes = 1 << 20,
                       .files_max = 100,
                       .open_files = 16};
  mbxC_port_error e;
  mbxC_vfs *v = mbxC_vfs_new(&spec, &e);
  assert_non_null(v);
  return v;
}

static void write_file(mbxC_vfs *v, const char *path, const char *text) {
  mbxC_port_error e;
  int h;
  size_t put;
  assert_int_equal(mbxC_vfs_open(v, path, strlen(path),
                                 MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE, &h, &e),
                   0);
  assert_int_equal(mbxC_vfs_write(v, h, text, strlen(text), &put, &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
}

/* The file's bytes, or "(none)". */
static const char *read_file(mbxC_vfs *v, const char *path) {
  static char buf[256];
  mbxC_port_error e;
  int h;
  size_t got = 0;
  if (mbxC_vfs_open(v, path, strlen(path), MBXC_FS_READ, &h, &e) != 0) return "(none)";
  assert_int_equal(mbxC_vfs_read(v, h, buf, sizeof buf - 1, &got, &e), 0);
  buf[got] = '\0';
  mbxC_vfs_close(v, h, &e);
  return buf;
}

static const char *const roots[] = {"/tmp"};
static const char *const excluded[] = {"/tmp/in/note.txt", "/tmp/m"};

/* What the shim would read: the archive the send pass streams on a socket (the tests' views
   are small enough for the socket's buffer). */
static char sent[1 << 16];
static size_t sent_len;

static void build_roots(mbxC_vfs *v, mbxC_exec_copy *c, const char *const *r, const int *rw,
                        size_t n) {
  mbxC_port_error e;
  assert_int_equal(mbxC_exec_copy_plan(c, v, r, rw, NULL, n, excluded, 2, NULL, NULL, &e), 0);
  int sv[2];
  assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  assert_int_equal(mbxC_exec_copy_send(c, sv[1], NULL, &e), 0);
  close(sv[1]);
  sent_len = 0;
  ssize_t k;
  while ((k = read(sv[0], sent + sent_len, sizeof sent - sent_len)) > 0)
    sent_len += (size_t)k;
  close(sv[0]);
}

static void build(mbxC_vfs *v, mbxC_exec_copy *c) {
  build_roots(v, c, roots, NULL, 1);
}

/* An archive item, appended to buf. */
static size_t item(char *buf, size_t at, char tag, const char *path, const char *data) {
  size_t pl = strlen(path), dl = data ? strlen(data) : 0;
  at += (size_t)sprintf(buf + at, "%c%zu:", tag, pl + (data ? 1 + dl : 0));
  memcpy(buf + at, path, pl);
  at += pl;
  if (data) {
    buf[at++] = '\0';
    memcpy(buf + at, data, dl);
    at += dl;
  }
  return at;
}

static void the_copy_holds_the_view_without_exclusions(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20);
  write_file(v, "/tmp/a.txt", "alpha");
  mbxC_port_error e;
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/d", 6, &e), 0);
  write_file(v, "/tmp/d/b.txt", "beta");
  mbxC_exec_copy c;
  build(v, &c);
  assert_int_equal(c.entries, 4); /* a.txt, d, d/b.txt, in (the directory of the policy file) */
  assert_int_equal(c.bytes, 9);
  /* The archive sent holds the bytes and ends with Z; the index kept here holds sizes. */
  assert_non_null(memmem(sent, sent_len, "F16:/tmp/a.txt\0alpha", 20));
  assert_non_null(memmem(sent, sent_len, "D6:/tmp/d", 9));
  assert_null(memmem(sent, sent_len, "policy input", 12)); /* excluded: its own ro bind */
  assert_non_null(memmem(sent, sent_len, "R4:/tmp", 7));
  assert_memory_equal(sent + sent_len - 3, "Z0:", 3);
  assert_non_null(memmem(c.blob, c.len,
                         "/tmp/a.txt\0"
                         "5",
                         12));
  assert_null(memmem(c.blob, c.len, "alpha", 5));
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
}

static void a_copy_back_applies_each_kind(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20);
  write_file(v, "/tmp/a.txt", "alpha");
  write_file(v, "/tmp/gone.txt", "bye");
  mbxC_exec_copy c;
  build(v, &c);
  char back[1024];
  size_t n = 0;
  n = item(back, n, 'F', "/tmp/a.txt", "ALPHA");       /* modified */
  n = item(back, n, 'D', "/tmp/in", NULL);             /* unchanged */
  n = item(back, n, 'D', "/tmp/new", NULL);            /* created */
  n = item(back, n, 'F', "/tmp/new/x.py", "print(1)"); /* created */
  n = item(back, n, 'S', "/tmp/link", NULL);           /* another kind: left out */
  n = item(back, n, 'Z', "", NULL);
  size_t applied = 0;
  char why[200] = "";
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   0);
  assert_int_equal(applied, 4); /* gone.txt removed, a.txt modified, new and new/x.py made */
  assert_string_equal(read_file(v, "/tmp/a.txt"), "ALPHA");
  assert_string_equal(read_file(v, "/tmp/new/x.py"), "print(1)");
  assert_string_equal(read_file(v, "/tmp/gone.txt"), "(none)");
  assert_string_equal(read_file(v, "/tmp/link"), "(none)");
  assert_string_equal(read_file(v, "/tmp/in/note.txt"), "policy input");
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
}

/* Each hostile copy-back is refused and leaves the view exactly as it was. */
static void hostile_copy_backs_apply_nothing(void **state) {
  (void)state;
  static const struct {
    char tag;
    const char *path, *data, *why;
  } cases[] = {
      {'F', "/etc/passwd", "x", "outside what was copied in"},
      {'F', "/tmp/m/inside-a-mount", "x", "outside what was copied in"},
      {'F', "/tmp/in/note.txt", "x", "outside what was copied in"},
      {'F', "/tmp/../etc/x", "x", "not canonical"},
      {'F', "/tmp//x", "x", "not canonical"},
      {'F', "/tmp", "x", "outside what was copied in"},
      {'Q', "/tmp/x", NULL, "unknown item"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mbxC_vfs *v = make_view(1 << 20);
    write_file(v, "/tmp/a.txt", "alpha");
    mbxC_exec_copy c;
    build(v, &c);
    char back[1024];
    size_t n = item(back, 0, 'F', "/tmp/first.txt", "would be applied first");
    n = item(back, n, cases[i].tag, cases[i].path, cases[i].data);
    n = item(back, n, 'Z', "", NULL);
    size_t applied = 99;
    char why[200] = "";
    assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                     -1);
    if (strstr(why, cases[i].why) == NULL) fail_msg("case %zu: %s", i, why);
    assert_int_equal(applied, 0);
    assert_string_equal(read_file(v, "/tmp/first.txt"), "(none)");
    assert_string_equal(read_file(v, "/tmp/a.txt"), "alpha");
    mbxC_exec_copy_free(&c);
    mbxC_vfs_free(v);
  }
}

static void cut_short_twice_malformed_and_quota(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(64);
  write_file(v, "/tmp/a.txt", "alpha");
  mbxC_exec_copy c;
  build(v, &c);
  char back[1024], why[200];
  size_t applied, n;
  /* No end mark: the shim was killed mid-way. */
  n = item(back, 0, 'F', "/tmp/a.txt", "alpha");
  n = item(back, n, 'F', "/tmp/b.txt", "b");
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "cut short"));
  /* The same path twice. */
  n = item(back, 0, 'F', "/tmp/b.txt", "1");
  n = item(back, n, 'F', "/tmp/b.txt", "2");
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "twice"));
  /* A length past the end, and data after the end mark. */
  assert_int_equal(
      mbxC_exec_copy_apply(v, &c, "F999:/tmp/x", 11, 1 << 20, 100, &applied, why, sizeof why), -1);
  assert_non_null(strstr(why, "malformed"));
  n = item(back, 0, 'Z', "", NULL);
  n = item(back, n, 'F', "/tmp/late", "x");
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "past its end"));
  /* Past the /tmp quota (64 bytes): the small file before the big one is not applied either. */
  char big[100];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  n = item(back, 0, 'F', "/tmp/a.txt", "alpha");
  n = item(back, n, 'F', "/tmp/b.txt", "small");
  n = item(back, n, 'F', "/tmp/c.txt", big);
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   -1);
  if (strstr(why, "/tmp/c.txt") == NULL) fail_msg("%s", why);
  assert_string_equal(read_file(v, "/tmp/b.txt"), "(none)");
  assert_string_equal(read_file(v, "/tmp/a.txt"), "alpha");
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
}

/* A file the shim sends back by name (U) is the one that went in: kept, not rewritten, not
   removed; U for a path that was not a copied file is refused. */
static void unchanged_files_come_back_by_name(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20);
  write_file(v, "/tmp/a.txt", "alpha");
  write_file(v, "/tmp/b.txt", "beta");
  mbxC_exec_copy c;
  build(v, &c);
  char back[1024], why[200] = "";
  size_t applied = 99;
  size_t n = item(back, 0, 'U', "/tmp/a.txt", NULL);
  n = item(back, n, 'D', "/tmp/in", NULL);
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   0);
  assert_int_equal(applied, 1); /* b.txt removed; a.txt kept as it was */
  assert_string_equal(read_file(v, "/tmp/a.txt"), "alpha");
  assert_string_equal(read_file(v, "/tmp/b.txt"), "(none)");
  n = item(back, 0, 'U', "/tmp/new.txt", NULL);
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 100, &applied, why, sizeof why),
                   -1);
  assert_non_null(strstr(why, "not copied in"));
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
}

/* An rw mount's copy-back reaches the host only when all of it fits the quotas, and only after
   the memory roots' part applied: past the files quota nothing reaches the host and /tmp's part
   is undone too. */
static void rw_copy_backs_are_all_or_nothing(void **state) {
  (void)state;
  char dir[] = "/tmp/mbx_test_rw_XXXXXX";
  assert_non_null(mkdtemp(dir));
  char path[256];
  snprintf(path, sizeof path, "%s/keep.txt", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs("keep", f);
  fclose(f);
  mbxC_fs_mount m = {"/out", dir, MBXC_MOUNT_RW};
  mbxC_fs_spec spec = {.mounts = &m,
                       .mount_count = 1,
                       .tmp_bytes = 1 << 20,
                       .bytes = 1 << 20,
                       .files_max = 3,
                       .open_files = 16};
  mbxC_port_error e;
  mbxC_vfs *v = mbxC_vfs_new(&spec, &e);
  assert_non_null(v);
  static const char *const two[] = {"/tmp", "/out"};
  static const int rw[] = {0, 1};
  mbxC_exec_copy c;
  build_roots(v, &c, two, rw, 2);
  assert_non_null(memmem(sent, sent_len, "W4:/out", 7));
  char back[1024], why[200] = "";
  size_t applied = 99;
  /* Four new files in /out against a quota of three (with /tmp's one: five in all). */
  size_t n = item(back, 0, 'F', "/tmp/t.txt", "tmp");
  n = item(back, n, 'U', "/out/keep.txt", NULL);
  for (int i = 0; i < 4; i++) {
    char p[32];
    snprintf(p, sizeof p, "/out/f%d", i);
    n = item(back, n, 'F', p, "x");
  }
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 3, &applied, why, sizeof why), -1);
  if (strstr(why, "quotas allow") == NULL) fail_msg("%s", why);
  assert_string_equal(read_file(v, "/tmp/t.txt"), "(none)");
  snprintf(path, sizeof path, "%s/f0", dir);
  assert_int_equal(access(path, F_OK), -1);
  /* Two fit: applied, on the host. */
  n = item(back, 0, 'U', "/out/keep.txt", NULL);
  n = item(back, n, 'F', "/out/f0", "x");
  n = item(back, n, 'F', "/out/f1", "y");
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, 1 << 20, 3, &applied, why, sizeof why), 0);
  assert_int_equal(applied, 2);
  assert_int_equal(access(path, F_OK), 0);
  assert_string_equal(read_file(v, "/out/keep.txt"), "keep");
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_copy_holds_the_view_without_exclusions),
      cmocka_unit_test(a_copy_back_applies_each_kind),
      cmocka_unit_test(hostile_copy_backs_apply_nothing),
      cmocka_unit_test(cut_short_twice_malformed_and_quota),
      cmocka_unit_test(unchanged_files_come_back_by_name),
      cmocka_unit_test(rw_copy_backs_are_all_or_nothing),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
