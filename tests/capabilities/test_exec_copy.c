/* tests/capabilities/test_exec_copy.c -- unit tests of capabilities/exec_copy.c: the copy of
   the view's /tmp a process gets (excluded paths left out), the copy-back applied as created /
   modified / removed entries, and every hostile copy-back refused with nothing applied: a path
   outside the roots, at an excluded path, not canonical, malformed, cut short, twice, or past
   the quota. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static void build(mbxC_vfs *v, mbxC_exec_copy *c) {
  mbxC_port_error e;
  assert_int_equal(mbxC_exec_copy_build(c, v, roots, 1, excluded, 2, NULL, NULL, &e), 0);
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
  assert_non_null(memmem(c.blob, c.len, "/tmp/a.txt\0alpha", 16));
  assert_non_null(memmem(c.blob, c.len, "D6:/tmp/d", 9));
  assert_null(memmem(c.blob, c.len, "policy input", 12)); /* excluded: its own ro bind */
  assert_non_null(memmem(c.blob, c.len, "R4:/tmp", 7));
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
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), 0);
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
    assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), -1);
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
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), -1);
  assert_non_null(strstr(why, "cut short"));
  /* The same path twice. */
  n = item(back, 0, 'F', "/tmp/b.txt", "1");
  n = item(back, n, 'F', "/tmp/b.txt", "2");
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), -1);
  assert_non_null(strstr(why, "twice"));
  /* A length past the end, and data after the end mark. */
  assert_int_equal(mbxC_exec_copy_apply(v, &c, "F999:/tmp/x", 11, &applied, why, sizeof why), -1);
  assert_non_null(strstr(why, "malformed"));
  n = item(back, 0, 'Z', "", NULL);
  n = item(back, n, 'F', "/tmp/late", "x");
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), -1);
  assert_non_null(strstr(why, "past its end"));
  /* Past the /tmp quota (64 bytes): the small file before the big one is not applied either. */
  char big[100];
  memset(big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  n = item(back, 0, 'F', "/tmp/a.txt", "alpha");
  n = item(back, n, 'F', "/tmp/b.txt", "small");
  n = item(back, n, 'F', "/tmp/c.txt", big);
  n = item(back, n, 'Z', "", NULL);
  assert_int_equal(mbxC_exec_copy_apply(v, &c, back, n, &applied, why, sizeof why), -1);
  if (strstr(why, "/tmp/c.txt") == NULL) fail_msg("%s", why);
  assert_string_equal(read_file(v, "/tmp/b.txt"), "(none)");
  assert_string_equal(read_file(v, "/tmp/a.txt"), "alpha");
  mbxC_exec_copy_free(&c);
  mbxC_vfs_free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(the_copy_holds_the_view_without_exclusions),
      cmocka_unit_test(a_copy_back_applies_each_kind),
      cmocka_unit_test(hostile_copy_backs_apply_nothing),
      cmocka_unit_test(cut_short_twice_malformed_and_quota),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
