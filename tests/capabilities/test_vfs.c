/* tests/capabilities/test_vfs.c -- unit tests of capabilities/vfs.c: normalization, the mount
   table, memory files, ro and rw host mounts (openat2 and the O_NOFOLLOW walk), special files,
   hard links, the handle table and the quotas. Each test builds a host tree under a fresh
   mkdtemp directory and removes it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/vfs.h"

/* ---- normalization, table-driven ---- */

typedef struct norm_case {
  const char *in;
  const char *out; /* NULL: refused with err */
  int err;
} norm_case;

static void normalize_table(void **state) {
  (void)state;
  static const norm_case cases[] = {
      {"/", "/", 0},
      {"/a", "/a", 0},
      {"/a/", "/a", 0},
      {"//a//b///", "/a/b", 0},
      {"/a/./b/.", "/a/b", 0},
      {"/a/b/..", "/a", 0},
      {"/a/b/../..", "/", 0},
      {"/..", "/", 0},
      {"/../../../etc/passwd", "/etc/passwd", 0},
      {"/data/../../etc", "/etc", 0},
      {"/data/..x/y", "/data/..x/y", 0},
      {"/data/...", "/data/...", 0},
      {"/data/.hidden", "/data/.hidden", 0},
      {"a/b", "/a/b", 0},
      {"./a", "/a", 0},
      {"..", "/", 0},
      {".", "/", 0},
      {"", NULL, ENOENT},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    char out[MBXC_VFS_PATH_BUF];
    size_t n = 99;
    int r = mbxC_vfs_normalize(cases[i].in, strlen(cases[i].in), out, sizeof out, &n);
    if (cases[i].out == NULL) {
      assert_int_equal(r, cases[i].err);
    } else {
      assert_int_equal(r, 0);
      assert_string_equal(out, cases[i].out);
      assert_int_equal(n, strlen(cases[i].out));
    }
  }
  char out[64];
  assert_int_equal(mbxC_vfs_normalize("/a\0b", 4, out, sizeof out, NULL), EINVAL);
  char longname[300];
  memset(longname, 'x', sizeof longname);
  longname[0] = '/';
  assert_int_equal(mbxC_vfs_normalize(longname, sizeof longname, out, sizeof out, NULL),
                   ENAMETOOLONG);
  assert_int_equal(mbxC_vfs_normalize("/abcdefgh", 9, out, 5, NULL), ENAMETOOLONG);
}

static void canonical_and_match(void **state) {
  (void)state;
  assert_true(mbxC_vfs_is_canonical("/data", 5));
  assert_false(mbxC_vfs_is_canonical("/data/", 6));
  assert_false(mbxC_vfs_is_canonical("data", 4));
  assert_false(mbxC_vfs_is_canonical("/a/../b", 7));
  assert_false(mbxC_vfs_is_canonical("/a//b", 5));
  const char *const mounts[] = {"/data", "/data/sub", "/work"};
  size_t off;
  assert_int_equal(mbxC_vfs_match(mounts, 3, "/data/x", 7, &off), 0);
  assert_string_equal("/data/x" + off, "x");
  assert_int_equal(mbxC_vfs_match(mounts, 3, "/data/sub/y", 11, &off), 1);
  assert_string_equal("/data/sub/y" + off, "y");
  assert_int_equal(mbxC_vfs_match(mounts, 3, "/data", 5, &off), 0);
  assert_int_equal(off, 5);
  assert_int_equal(mbxC_vfs_match(mounts, 3, "/database", 9, &off), -1);
  assert_int_equal(mbxC_vfs_match(mounts, 3, "/", 1, &off), -1);
}

/* ---- host trees ---- */

static char root[256];

static void put(const char *rel, const char *text) {
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static char *slurp(const char *rel) {
  static char buf[4096];
  char p[512];
  snprintf(p, sizeof p, "%s/%s", root, rel);
  FILE *f = fopen(p, "r");
  if (f == NULL) return NULL;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

static void at(char *out, size_t size, const char *rel) {
  snprintf(out, size, "%s/%s", root, rel);
}

static int setup_tree(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/mbx_test_vfs_XXXXXX");
  if (mkdtemp(root) == NULL) return -1;
  char p[512], q[512];
  at(p, sizeof p, "ro");
  mkdir(p, 0755);
  at(p, sizeof p, "rw");
  mkdir(p, 0755);
  at(p, sizeof p, "ro/sub");
  mkdir(p, 0755);
  at(p, sizeof p, "outside");
  mkdir(p, 0755);
  put("ro/x.txt", "line one\nline two\n");
  put("ro/sub/y.txt", "why");
  put("outside/secret", "SECRET");
  put("rw/keep.txt", "keep");
  /* Links out of the ro mount: absolute, relative, a chain, a directory link. */
  at(p, sizeof p, "outside/secret");
  at(q, sizeof q, "ro/abs_link");
  if (symlink(p, q) != 0) return -1;
  at(q, sizeof q, "ro/rel_link");
  if (symlink("../outside/secret", q) != 0) return -1;
  at(q, sizeof q, "ro/chain1");
  if (symlink("chain2", q) != 0) return -1;
  at(q, sizeof q, "ro/chain2");
  if (symlink("rel_link", q) != 0) return -1;
  at(q, sizeof q, "ro/dir_link");
  if (symlink("../outside", q) != 0) return -1;
  at(q, sizeof q, "ro/inside_link");
  if (symlink("sub/y.txt", q) != 0) return -1;
  at(q, sizeof q, "ro/proc_root");
  if (symlink("/proc/self/root/etc/passwd", q) != 0) return -1;
  at(q, sizeof q, "ro/fifo");
  if (mkfifo(q, 0644) != 0) return -1;
  /* A hard link: the same inode inside rw and outside it. */
  at(p, sizeof p, "outside/linked");
  put("outside/linked", "original");
  at(q, sizeof q, "rw/linked");
  if (link(p, q) != 0) return -1;
  return 0;
}

static int teardown_tree(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static mbxC_fs_mount mounts[2];
static char ro_host[512], rw_host[512];

static mbxC_vfs *make_view(uint64_t tmp, uint64_t bytes, uint64_t files, uint64_t open_files,
                           int walk) {
  at(ro_host, sizeof ro_host, "ro");
  at(rw_host, sizeof rw_host, "rw");
  mounts[0] = (mbxC_fs_mount){"/data", ro_host, MBXC_MOUNT_RO};
  mounts[1] = (mbxC_fs_mount){"/work", rw_host, MBXC_MOUNT_RW};
  static char note[] = "inline content";
  static mbxC_fs_file files_spec[] = {{"/input/note.txt", note, sizeof note - 1}};
  mbxC_fs_spec spec = {.mounts = mounts,
                       .mount_count = 2,
                       .files = files_spec,
                       .file_count = 1,
                       .tmp_bytes = tmp,
                       .bytes = bytes,
                       .files_max = files,
                       .open_files = open_files};
  mbxC_port_error e;
  mbxC_vfs *v = mbxC_vfs_new(&spec, &e);
  assert_non_null(v);
  mbxC_vfs_force_walk(v, walk);
  return v;
}

static mbxC_vfs *default_view(int walk) {
  return make_view(1 << 20, 1 << 20, 100, 16, walk);
}

/* Open, read all, close: the bytes, or NULL with *err the errno. */
static char *read_all(mbxC_vfs *v, const char *path, int *err) {
  static char buf[4096];
  mbxC_port_error e;
  int h;
  *err = 0;
  if (mbxC_vfs_open(v, path, strlen(path), MBXC_FS_READ, &h, &e) != 0) {
    *err = e.errnum;
    return NULL;
  }
  size_t total = 0, got;
  do {
    assert_int_equal(mbxC_vfs_read(v, h, buf + total, 7, &got, &e), 0);
    total += got;
  } while (got > 0);
  buf[total] = '\0';
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  return buf;
}

static int open_err(mbxC_vfs *v, const char *path, int flags, mbxC_port_error *e) {
  int h;
  if (mbxC_vfs_open(v, path, strlen(path), flags, &h, e) == 0) {
    mbxC_vfs_close(v, h, e);
    return 0;
  }
  return e->errnum;
}

static void outside_the_view_is_one_error(void **state) {
  (void)state;
  mbxC_vfs *v = default_view(0);
  mbxC_port_error e1, e2;
  /* /etc/passwd exists on the host, /etc/nope does not: the guest cannot tell. */
  assert_int_equal(open_err(v, "/etc/passwd", MBXC_FS_READ, &e1), ENOENT);
  assert_int_equal(open_err(v, "/etc/nope-nope", MBXC_FS_READ, &e2), ENOENT);
  assert_string_equal(e1.message, e2.message);
  assert_string_equal(e1.message, "No such file or directory (not in the sandbox view; mounts: "
                                  "/data ro, /work rw, /tmp)");
  assert_int_equal(open_err(v, "/data/../../etc/passwd", MBXC_FS_READ, &e1), ENOENT);
  assert_int_equal(open_err(v, "/database", MBXC_FS_READ, &e1), ENOENT);
  mbxC_fs_stat st;
  assert_int_equal(mbxC_vfs_stat(v, "/etc", 4, &st, &e1), -1);
  assert_int_equal(e1.errnum, ENOENT);
  /* Inside /tmp a missing name is an ordinary ENOENT. */
  assert_int_equal(open_err(v, "/tmp/none", MBXC_FS_READ, &e1), ENOENT);
  assert_string_equal(e1.message, "No such file or directory");
  mbxC_vfs_free(v);
}

static void ro_mount(void **state) {
  (void)state;
  for (int walk = 0; walk < 2; walk++) {
    mbxC_vfs *v = default_view(walk);
    int err;
    assert_string_equal(read_all(v, "/data/x.txt", &err), "line one\nline two\n");
    assert_string_equal(read_all(v, "//data/./sub/../sub/y.txt", &err), "why");
    mbxC_port_error e;
    assert_int_equal(open_err(v, "/data/x.txt", MBXC_FS_WRITE, &e), EROFS);
    assert_int_equal(open_err(v, "/data/new.txt", MBXC_FS_WRITE | MBXC_FS_CREATE, &e), EROFS);
    assert_int_equal(mbxC_vfs_mkdir(v, "/data/d", 7, &e), -1);
    assert_int_equal(e.errnum, EROFS);
    assert_int_equal(mbxC_vfs_remove(v, "/data/x.txt", 11, &e), -1);
    assert_int_equal(e.errnum, EROFS);
    assert_int_equal(mbxC_vfs_rename(v, "/data/x.txt", 11, "/data/z", 7, &e), -1);
    assert_int_equal(e.errnum, EROFS);
    assert_int_equal(open_err(v, "/data/sub", MBXC_FS_READ, &e), EISDIR);
    mbxC_fs_stat st;
    assert_int_equal(mbxC_vfs_stat(v, "/data/x.txt", 11, &st, &e), 0);
    assert_true(st.is_file && !st.is_dir && st.size == 18 && !st.writable);
    const char *names;
    size_t len;
    assert_int_equal(mbxC_vfs_list(v, "/data/sub", 9, &names, &len, &e), 0);
    assert_int_equal(len, 6);
    assert_string_equal(names, "y.txt");
    assert_int_equal(mbxC_vfs_list(v, "/", 1, &names, &len, &e), 0);
    int seen = 0;
    for (size_t i = 0; i < len; i += strlen(names + i) + 1)
      seen |= strcmp(names + i, "data") == 0    ? 1
              : strcmp(names + i, "tmp") == 0   ? 2
              : strcmp(names + i, "input") == 0 ? 4
              : strcmp(names + i, "work") == 0  ? 8
                                                : 16;
    assert_int_equal(seen, 15);
    mbxC_vfs_free(v);
  }
}

static void links_out_of_a_mount(void **state) {
  (void)state;
  for (int walk = 0; walk < 2; walk++) {
    mbxC_vfs *v = default_view(walk);
    mbxC_port_error e;
    const char *escapes[] = {"/data/abs_link", "/data/rel_link", "/data/chain1",
                             "/data/dir_link/secret", "/data/proc_root"};
    for (size_t i = 0; i < sizeof escapes / sizeof *escapes; i++) {
      int err = open_err(v, escapes[i], MBXC_FS_READ, &e);
      assert_true(err == EACCES || err == ELOOP || err == ENOENT);
      assert_null(strstr(e.message, root)); /* never the host path */
      mbxC_fs_stat st;
      assert_int_equal(mbxC_vfs_stat(v, escapes[i], strlen(escapes[i]), &st, &e), -1);
    }
    const char *names;
    size_t len;
    assert_int_equal(mbxC_vfs_list(v, "/data/dir_link", 14, &names, &len, &e), -1);
    /* A link that stays inside is followed by openat2, refused by the walk. */
    int err;
    char *got = read_all(v, "/data/inside_link", &err);
    if (walk) {
      assert_null(got);
      assert_int_equal(err, ELOOP);
    } else {
      assert_string_equal(got, "why");
    }
    mbxC_vfs_free(v);
  }
}

static void special_files_are_never_opened(void **state) {
  (void)state;
  for (int walk = 0; walk < 2; walk++) {
    mbxC_vfs *v = default_view(walk);
    mbxC_port_error e;
    /* A FIFO with no writer would block a plain open: refused before any open. */
    assert_int_equal(open_err(v, "/data/fifo", MBXC_FS_READ, &e), EACCES);
    assert_non_null(strstr(e.message, "not a regular file"));
    mbxC_fs_stat st;
    assert_int_equal(mbxC_vfs_stat(v, "/data/fifo", 10, &st, &e), 0);
    assert_false(st.is_file || st.is_dir);
    mbxC_vfs_free(v);
  }
}

static void rw_mount(void **state) {
  (void)state;
  for (int walk = 0; walk < 2; walk++) {
    mbxC_vfs *v = default_view(walk);
    mbxC_port_error e;
    int h;
    assert_int_equal(mbxC_vfs_open(v, "/work/out.txt", 13,
                                   MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE, &h, &e),
                     0);
    size_t put;
    assert_int_equal(mbxC_vfs_write(v, h, "hello ", 6, &put, &e), 0);
    assert_int_equal(mbxC_vfs_write(v, h, "world", 5, &put, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    assert_string_equal(slurp("rw/out.txt"), "hello world");
    assert_int_equal(mbxC_vfs_bytes_used(v), 11);
    assert_int_equal(mbxC_vfs_files_used(v), 1);
    /* Append, then read back through r+ and seek. */
    assert_int_equal(mbxC_vfs_open(v, "/work/out.txt", 13, MBXC_FS_WRITE | MBXC_FS_APPEND, &h, &e),
                     0);
    assert_int_equal(mbxC_vfs_write(v, h, "!", 1, &put, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    assert_string_equal(slurp("rw/out.txt"), "hello world!");
    assert_int_equal(mbxC_vfs_open(v, "/work/out.txt", 13, MBXC_FS_READ | MBXC_FS_WRITE, &h, &e),
                     0);
    int64_t pos;
    assert_int_equal(mbxC_vfs_seek(v, h, SEEK_SET, 6, &pos, &e), 0);
    assert_int_equal(mbxC_vfs_write(v, h, "W", 1, &put, &e), 0);
    assert_int_equal(mbxC_vfs_seek(v, h, SEEK_END, 0, &pos, &e), 0);
    assert_int_equal(pos, 12);
    assert_int_equal(mbxC_vfs_seek(v, h, SEEK_CUR, -20, &pos, &e), -1);
    assert_int_equal(e.errnum, EINVAL);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    assert_string_equal(slurp("rw/out.txt"), "hello World!");
    assert_int_equal(mbxC_vfs_mkdir(v, "/work/d", 7, &e), 0);
    assert_int_equal(mbxC_vfs_rename(v, "/work/out.txt", 13, "/work/d/moved.txt", 17, &e), 0);
    assert_string_equal(slurp("rw/d/moved.txt"), "hello World!");
    assert_int_equal(mbxC_vfs_rename(v, "/work/d/moved.txt", 17, "/tmp/m", 6, &e), -1);
    assert_int_equal(e.errnum, EXDEV);
    assert_int_equal(mbxC_vfs_remove(v, "/work/d", 7, &e), -1);
    assert_int_equal(e.errnum, ENOTEMPTY);
    assert_int_equal(mbxC_vfs_remove(v, "/work/d/moved.txt", 17, &e), 0);
    assert_int_equal(mbxC_vfs_remove(v, "/work/d", 7, &e), 0);
    assert_null(slurp("rw/d/moved.txt"));
    assert_int_equal(mbxC_vfs_remove(v, "/work", 5, &e), -1);
    assert_int_equal(e.errnum, EBUSY);
    /* The hard-linked file reads, but never writes: the write would land outside too. */
    int err;
    assert_string_equal(read_all(v, "/work/linked", &err), "original");
    assert_int_equal(open_err(v, "/work/linked", MBXC_FS_WRITE, &e), EACCES);
    assert_non_null(strstr(e.message, "hard links"));
    assert_string_equal(slurp("outside/linked"), "original");
    assert_string_equal(slurp("rw/keep.txt"), "keep");
    mbxC_vfs_free(v);
  }
}

static void memory_tmp_and_policy_files(void **state) {
  (void)state;
  mbxC_vfs *v = default_view(0);
  mbxC_port_error e;
  int err, h;
  assert_string_equal(read_all(v, "/input/note.txt", &err), "inline content");
  assert_int_equal(open_err(v, "/input/note.txt", MBXC_FS_WRITE, &e), EROFS);
  assert_int_equal(open_err(v, "/new.txt", MBXC_FS_WRITE | MBXC_FS_CREATE, &e), EROFS);
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/d", 6, &e), 0);
  assert_int_equal(mbxC_vfs_open(v, "/tmp/d/f", 8, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
  size_t put;
  assert_int_equal(mbxC_vfs_write(v, h, "abc", 3, &put, &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_string_equal(read_all(v, "/tmp/d/f", &err), "abc");
  assert_int_equal(mbxC_vfs_rename(v, "/tmp/d", 6, "/tmp/e", 6, &e), 0);
  assert_string_equal(read_all(v, "/tmp/e/f", &err), "abc");
  assert_null(read_all(v, "/tmp/d/f", &err));
  assert_int_equal(err, ENOENT);
  /* Removed while open: the handle keeps reading what it had. */
  assert_int_equal(mbxC_vfs_open(v, "/tmp/e/f", 8, MBXC_FS_READ, &h, &e), 0);
  assert_int_equal(mbxC_vfs_remove(v, "/tmp/e/f", 8, &e), 0);
  char buf[8];
  size_t got;
  assert_int_equal(mbxC_vfs_read(v, h, buf, sizeof buf, &got, &e), 0);
  assert_int_equal(got, 3);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  assert_int_equal(mbxC_vfs_files_used(v), 1); /* the directory */
  mbxC_vfs_free(v);
}

static void quotas(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(10, 1000, 3, 16, 0);
  mbxC_port_error e;
  int h;
  size_t put;
  assert_int_equal(mbxC_vfs_open(v, "/tmp/a", 6, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "0123456789", 10, &put, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "x", 1, &put, &e), -1);
  assert_int_equal(e.errnum, ENOSPC);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/b", 6, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/work/c", 7, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/d", 6, &e), -1);
  assert_int_equal(e.errnum, EDQUOT);
  assert_int_equal(open_err(v, "/work/new", MBXC_FS_WRITE | MBXC_FS_CREATE, &e), EDQUOT);
  mbxC_vfs_free(v);
  /* The bytes quota covers host growth too. */
  v = make_view(1000, 5, 100, 16, 0);
  assert_int_equal(mbxC_vfs_open(v, "/work/big", 9, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "12345", 5, &put, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "6", 1, &put, &e), -1);
  assert_int_equal(e.errnum, EDQUOT);
  int64_t pos;
  assert_int_equal(mbxC_vfs_seek(v, h, SEEK_SET, 0, &pos, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "abcde", 5, &put, &e), 0); /* overwriting is free */
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_string_equal(slurp("rw/big"), "abcde");
  /* Rewriting the file frees what it held: the quota bounds net growth. */
  for (int i = 0; i < 3; i++) {
    assert_int_equal(mbxC_vfs_open(v, "/work/big", 9, MBXC_FS_WRITE | MBXC_FS_TRUNCATE, &h, &e), 0);
    assert_int_equal(mbxC_vfs_write(v, h, "vwxyz", 5, &put, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  }
  assert_int_equal(mbxC_vfs_bytes_used(v), 5);
  assert_int_equal(mbxC_vfs_remove(v, "/work/big", 9, &e), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  mbxC_vfs_free(v);
  /* A file removed while open (io.tmpfile's) keeps its bytes counted, growth included, until
     its last handle closes, then gives them all back: open, remove, write, close in a loop
     never runs out of room, and never past the quota. */
  v = make_view(10, 1000, 100, 16, 0);
  for (int i = 0; i < 3; i++) {
    int flags = MBXC_FS_READ | MBXC_FS_WRITE | MBXC_FS_CREATE;
    assert_int_equal(mbxC_vfs_open(v, "/tmp/t", 6, flags, &h, &e), 0);
    assert_int_equal(mbxC_vfs_write(v, h, "0123", 4, &put, &e), 0);
    assert_int_equal(mbxC_vfs_remove(v, "/tmp/t", 6, &e), 0);
    assert_int_equal(mbxC_vfs_bytes_used(v), 4);
    assert_int_equal(mbxC_vfs_write(v, h, "456789", 6, &put, &e), 0);
    assert_int_equal(mbxC_vfs_write(v, h, "x", 1, &put, &e), -1);
    assert_int_equal(e.errnum, ENOSPC);
    assert_int_equal(mbxC_vfs_bytes_used(v), 10);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  }
  mbxC_vfs_free(v);
}

static void handle_table(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1000, 1000, 100, 4, 0);
  mbxC_port_error e;
  int h[5];
  for (int i = 0; i < 4; i++)
    assert_int_equal(mbxC_vfs_open(v, "/data/x.txt", 11, MBXC_FS_READ, &h[i], &e), 0);
  assert_int_equal(mbxC_vfs_open(v, "/data/x.txt", 11, MBXC_FS_READ, &h[4], &e), -1);
  assert_int_equal(e.errnum, EMFILE);
  assert_int_equal(mbxC_vfs_open_count(v), 4);
  assert_int_equal(mbxC_vfs_close(v, h[0], &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h[0], &e), -1); /* twice */
  assert_int_equal(e.errnum, EBADF);
  int again;
  assert_int_equal(mbxC_vfs_open(v, "/data/x.txt", 11, MBXC_FS_READ, &again, &e), 0);
  assert_int_not_equal(again, h[0]); /* the slot is reused, the number is not */
  char buf[4];
  size_t got;
  assert_int_equal(mbxC_vfs_read(v, h[0], buf, 4, &got, &e), -1);
  assert_int_equal(mbxC_vfs_read(v, 12345678, buf, 4, &got, &e), -1);
  assert_int_equal(mbxC_vfs_read(v, -1, buf, 4, &got, &e), -1);
  size_t put;
  assert_int_equal(mbxC_vfs_write(v, again, "x", 1, &put, &e), -1); /* opened for reading */
  assert_int_equal(e.errnum, EBADF);
  mbxC_vfs_close_all(v);
  assert_int_equal(mbxC_vfs_open_count(v), 0);
  assert_int_equal(mbxC_vfs_read(v, h[1], buf, 4, &got, &e), -1);
  mbxC_vfs_free(v);
}

static void marks_restore_tmp(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1000, 1000, 100, 16, 0);
  mbxC_port_error e;
  int h;
  size_t put;
  assert_int_equal(mbxC_vfs_open(v, "/tmp/a", 6, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "before", 6, &put, &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/d", 6, &e), 0);
  mbxC_vfs_mark *m = mbxC_vfs_mark_take(v);
  assert_non_null(m);
  /* Change everything: rewrite, remove, rename, create; a handle stays open. */
  assert_int_equal(mbxC_vfs_open(v, "/tmp/a", 6, MBXC_FS_WRITE | MBXC_FS_TRUNCATE, &h, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "after!!!", 8, &put, &e), 0);
  assert_int_equal(mbxC_vfs_rename(v, "/tmp/d", 6, "/tmp/e", 6, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/tmp/f", 6, &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/work/host_dir", 14, &e), 0); /* rw: not undone */
  assert_int_equal(mbxC_vfs_files_used(v), 4);
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  assert_int_equal(mbxC_vfs_open_count(v), 0);
  int err;
  assert_string_equal(read_all(v, "/tmp/a", &err), "before");
  mbxC_fs_stat st;
  assert_int_equal(mbxC_vfs_stat(v, "/tmp/d", 6, &st, &e), 0);
  assert_true(st.is_dir);
  assert_int_equal(mbxC_vfs_stat(v, "/tmp/e", 6, &st, &e), -1);
  assert_int_equal(mbxC_vfs_stat(v, "/tmp/f", 6, &st, &e), -1);
  assert_int_equal(mbxC_vfs_bytes_used(v), 6);
  assert_int_equal(mbxC_vfs_files_used(v), 3); /* a, d, and the host directory */
  assert_string_equal(read_all(v, "/input/note.txt", &err), "inline content");
  /* Again, with nothing changed in between: still the same tree. */
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  assert_string_equal(read_all(v, "/tmp/a", &err), "before");
  mbxC_vfs_mark_free(m);
  assert_int_equal(mbxC_vfs_remove(v, "/work/host_dir", 14, &e), 0);
  mbxC_vfs_free(v);
}

/* A host process swaps a symlink out of the mount and a regular file at one name as fast as it
   can while the guest opens and reads that name: whatever wins each race, no byte from outside
   the mount is ever read (openat2 resolves beneath the mount's fd; the walk never follows a
   link; the O_PATH look and the open are checked to be the same inode). */
static atomic_int swapping;

static void *swapper(void *arg) {
  (void)arg;
  char file[512], link_tmp[512], file_tmp[512], target[512];
  at(file, sizeof file, "ro/swap");
  at(link_tmp, sizeof link_tmp, "ro/swap_link");
  at(file_tmp, sizeof file_tmp, "ro/swap_file");
  at(target, sizeof target, "outside/secret");
  while (atomic_load(&swapping)) {
    unlink(link_tmp);
    if (symlink(target, link_tmp) == 0) rename(link_tmp, file);
    FILE *f = fopen(file_tmp, "w");
    if (f) {
      fputs("safe", f);
      fclose(f);
      rename(file_tmp, file);
    }
  }
  return NULL;
}

static void swapped_symlink_race(void **state) {
  (void)state;
  for (int walk = 0; walk < 2; walk++) {
    mbxC_vfs *v = default_view(walk);
    pthread_t t;
    atomic_store(&swapping, 1);
    assert_int_equal(pthread_create(&t, NULL, swapper, NULL), 0);
    for (int i = 0; i < 3000; i++) {
      int err;
      char *got = read_all(v, "/data/swap", &err);
      if (got && strstr(got, "SECRET")) fail_msg("read outside the mount in a race: %s", got);
    }
    atomic_store(&swapping, 0);
    pthread_join(t, NULL);
    /* Which side wins each race is the scheduler's business (a loaded machine may give every
       one to the link): that the same view still reads the file once it is a regular file
       again shows the refusals were the links', not a broken view. */
    char file[512];
    at(file, sizeof file, "ro/swap");
    unlink(file);
    FILE *f = fopen(file, "w");
    assert_non_null(f);
    fputs("safe", f);
    fclose(f);
    int err;
    char *after = read_all(v, "/data/swap", &err);
    assert_non_null(after);
    assert_string_equal(after, "safe");
    mbxC_vfs_free(v);
  }
  char p[512];
  at(p, sizeof p, "ro/swap");
  unlink(p);
}

/* A file the host appends to while the guest reads it: each read sees where it ends then;
   nothing is cached past a read, and the bytes quota is not involved (the host wrote them). */
static void file_growing_while_read(void **state) {
  (void)state;
  mbxC_vfs *v = default_view(0);
  mbxC_port_error e;
  int h;
  char buf[16], p[512];
  size_t got;
  put("rw/grow", "ab");
  assert_int_equal(mbxC_vfs_open(v, "/work/grow", 10, MBXC_FS_READ, &h, &e), 0);
  assert_int_equal(mbxC_vfs_read(v, h, buf, sizeof buf, &got, &e), 0);
  assert_int_equal(got, 2);
  assert_int_equal(mbxC_vfs_read(v, h, buf, sizeof buf, &got, &e), 0);
  assert_int_equal(got, 0); /* the end, for now */
  at(p, sizeof p, "rw/grow");
  FILE *f = fopen(p, "a");
  assert_non_null(f);
  fputs("cdef", f);
  fclose(f);
  assert_int_equal(mbxC_vfs_read(v, h, buf, sizeof buf, &got, &e), 0);
  assert_int_equal(got, 4);
  assert_memory_equal(buf, "cdef", 4);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  unlink(p);
  mbxC_vfs_free(v);
}

static void missing_host_dir_refused(void **state) {
  (void)state;
  mbxC_fs_mount m = {"/gone", "/nonexistent/mbx/dir", MBXC_MOUNT_RO};
  mbxC_fs_spec spec = {.mounts = &m, .mount_count = 1, .open_files = 4};
  mbxC_port_error e;
  assert_null(mbxC_vfs_new(&spec, &e));
  assert_int_equal(e.errnum, ENOENT);
  assert_non_null(strstr(e.message, "/gone"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(normalize_table),
      cmocka_unit_test(canonical_and_match),
      cmocka_unit_test(outside_the_view_is_one_error),
      cmocka_unit_test(ro_mount),
      cmocka_unit_test(links_out_of_a_mount),
      cmocka_unit_test(special_files_are_never_opened),
      cmocka_unit_test(rw_mount),
      cmocka_unit_test(memory_tmp_and_policy_files),
      cmocka_unit_test(quotas),
      cmocka_unit_test(handle_table),
      cmocka_unit_test(marks_restore_tmp),
      cmocka_unit_test(swapped_symlink_race),
      cmocka_unit_test(file_growing_while_read),
      cmocka_unit_test(missing_host_dir_refused),
  };
  return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
