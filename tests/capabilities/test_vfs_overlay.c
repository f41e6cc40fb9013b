/* tests/capabilities/test_vfs_overlay.c -- overlay mounts (reads through to the host,
   changes in memory, whiteouts, EXDEV for directories, quotas, confinement as ro), the
   change-set walker, and the journal behind checkpoints (a restore's cost follows what
   changed, not what the tree holds) and reset. Each test builds a host tree under a fresh
   mkdtemp directory, checks it is byte for byte unchanged, and removes it. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/vfs.h"

static char root[256];

static void at(char *out, size_t size, const char *rel) {
  snprintf(out, size, "%s/%s", root, rel);
}

static void put(const char *rel, const char *text) {
  char p[512];
  at(p, sizeof p, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* The host tree, listed with every file's bytes: what must never change. */
static char *host_picture(void) {
  char cmd[700];
  snprintf(cmd, sizeof cmd,
           "cd '%s' && find . -path ./outside -prune -o -print | LC_ALL=C sort | while read -r f;"
           " do if [ -L \"$f\" ]; then echo \"L $f $(readlink \"$f\")\";"
           " elif [ -f \"$f\" ]; then echo \"F $f $(od -An -c \"$f\" | tr -s ' ')\";"
           " else echo \"O $f\"; fi; done",
           root);
  FILE *p = popen(cmd, "r");
  assert_non_null(p);
  static char buf[1 << 16];
  size_t n = fread(buf, 1, sizeof buf - 1, p);
  buf[n] = '\0';
  pclose(p);
  return strdup(buf);
}

static char *before;

static int setup_tree(void **state) {
  (void)state;
  snprintf(root, sizeof root, "/tmp/mbx_test_ovl_XXXXXX");
  if (mkdtemp(root) == NULL) return -1;
  char p[512], q[512];
  const char *dirs[] = {"ov", "ov/sub", "ov/empty", "ov/deep", "ov/deep/er", "outside"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    at(p, sizeof p, dirs[i]);
    if (mkdir(p, 0755) != 0) return -1;
  }
  put("ov/a.txt", "alpha\n");
  put("ov/sub/b.txt", "bravo\n");
  put("ov/deep/er/c.txt", "charlie\n");
  put("outside/secret", "SECRET");
  at(p, sizeof p, "outside/secret");
  at(q, sizeof q, "ov/abs_link");
  if (symlink(p, q) != 0) return -1;
  at(q, sizeof q, "ov/rel_link");
  if (symlink("../outside/secret", q) != 0) return -1;
  at(q, sizeof q, "ov/dir_link");
  if (symlink("../outside", q) != 0) return -1;
  at(q, sizeof q, "ov/fifo");
  if (mkfifo(q, 0644) != 0) return -1;
  at(q, sizeof q, "ov/linked");
  if (link(p, q) != 0) return -1; /* a hard link to a file outside */
  before = host_picture();
  return 0;
}

static int teardown_tree(void **state) {
  (void)state;
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  free(before);
  return system(cmd) == 0 ? 0 : -1;
}

static void host_unchanged(void) {
  char *now = host_picture();
  assert_string_equal(now, before);
  free(now);
}

static char ov_host[512];
static mbxC_fs_mount mounts[1];

static mbxC_vfs *make_view(uint64_t bytes, uint64_t files, int walk) {
  at(ov_host, sizeof ov_host, "ov");
  mounts[0] = (mbxC_fs_mount){"/scratch", ov_host, MBXC_MOUNT_OVERLAY};
  mbxC_fs_spec spec = {.mounts = mounts,
                       .mount_count = 1,
                       .tmp_bytes = 8 << 20,
                       .bytes = bytes,
                       .files_max = files,
                       .open_files = 16};
  mbxC_port_error e;
  mbxC_vfs *v = mbxC_vfs_new(&spec, &e);
  assert_non_null(v);
  mbxC_vfs_force_walk(v, walk);
  return v;
}

/* Open, read all, close: a malloc'd NUL-terminated copy, or NULL with *err the errno. */
static char *read_all(mbxC_vfs *v, const char *path, int *err) {
  mbxC_port_error e;
  int h;
  *err = 0;
  if (mbxC_vfs_open(v, path, strlen(path), MBXC_FS_READ, &h, &e) != 0) {
    *err = e.errnum;
    return NULL;
  }
  size_t total = 0, got, cap = 1 << 16;
  char *buf = malloc(cap);
  do {
    if (total + 4096 + 1 > cap) buf = realloc(buf, cap *= 2);
    assert_int_equal(mbxC_vfs_read(v, h, buf + total, 4096, &got, &e), 0);
    total += got;
  } while (got > 0);
  buf[total] = '\0';
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  return buf;
}

static int write_file(mbxC_vfs *v, const char *path, int flags, const char *text,
                      mbxC_port_error *e) {
  int h;
  size_t put_n;
  if (mbxC_vfs_open(v, path, strlen(path), flags, &h, e) != 0) return -1;
  int rc = mbxC_vfs_write(v, h, text, strlen(text), &put_n, e);
  mbxC_port_error ce;
  assert_int_equal(mbxC_vfs_close(v, h, &ce), 0);
  return rc;
}

#define W (MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE)

static void expect_text(mbxC_vfs *v, const char *path, const char *text) {
  int err;
  char *got = read_all(v, path, &err);
  assert_non_null(got);
  assert_string_equal(got, text);
  free(got);
}

static void expect_missing(mbxC_vfs *v, const char *path, int errnum) {
  int err;
  char *got = read_all(v, path, &err);
  assert_null(got);
  assert_int_equal(err, errnum);
}

/* The sorted names of a directory, joined with ',' */
static char *names_of(mbxC_vfs *v, const char *dir) {
  const char *names;
  size_t len;
  mbxC_port_error e;
  if (mbxC_vfs_list(v, dir, strlen(dir), &names, &len, &e) != 0) return NULL;
  const char *list[64];
  size_t n = 0;
  for (size_t i = 0; i < len && n < 64; i += strlen(names + i) + 1)
    list[n++] = names + i;
  for (size_t i = 0; i < n; i++) /* insertion sort: a few names */
    for (size_t j = i; j > 0 && strcmp(list[j - 1], list[j]) > 0; j--) {
      const char *t = list[j];
      list[j] = list[j - 1];
      list[j - 1] = t;
    }
  static char out[1024];
  out[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    if (i) strcat(out, ",");
    strcat(out, list[i]);
  }
  return out;
}

static void edits_stay_in_memory(int walk) {
  mbxC_vfs *v = make_view(1 << 20, 100, walk);
  mbxC_port_error e;
  mbxC_fs_stat st;
  expect_text(v, "/scratch/a.txt", "alpha\n");
  /* A write copies the file up; the host keeps its bytes. */
  int h;
  size_t put_n;
  assert_int_equal(mbxC_vfs_open(v, "/scratch/a.txt", 14, MBXC_FS_WRITE | MBXC_FS_APPEND, &h, &e),
                   0);
  assert_int_equal(mbxC_vfs_write(v, h, "beta\n", 5, &put_n, &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  expect_text(v, "/scratch/a.txt", "alpha\nbeta\n");
  assert_int_equal(mbxC_vfs_bytes_used(v), 11); /* the copy is charged whole */
  /* New files and directories, in a host directory and in a new one. */
  assert_int_equal(write_file(v, "/scratch/sub/new.txt", W, "new\n", &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/scratch/made", 13, &e), 0);
  assert_int_equal(write_file(v, "/scratch/made/m.txt", W, "m\n", &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/scratch/sub", 12, &e), -1);
  assert_int_equal(e.errnum, EEXIST);
  assert_int_equal(write_file(v, "/scratch/nodir/x", W, "x", &e), -1);
  assert_int_equal(e.errnum, ENOENT);
  assert_string_equal(names_of(v, "/scratch/sub"), "b.txt,new.txt");
  /* Removals: a whiteout hides the host file; a directory must look empty. */
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub", 12, &e), -1);
  assert_int_equal(e.errnum, ENOTEMPTY);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub/b.txt", 18, &e), 0);
  expect_missing(v, "/scratch/sub/b.txt", ENOENT);
  assert_int_equal(mbxC_vfs_stat(v, "/scratch/sub/b.txt", 18, &st, &e), -1);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub/new.txt", 20, &e), 0);
  assert_string_equal(names_of(v, "/scratch/sub"), "");
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub", 12, &e), 0);
  expect_missing(v, "/scratch/sub/b.txt", ENOENT);
  assert_null(names_of(v, "/scratch/sub"));
  /* Made again over the whiteout: empty, the host's file stays hidden. */
  assert_int_equal(mbxC_vfs_mkdir(v, "/scratch/sub", 12, &e), 0);
  assert_string_equal(names_of(v, "/scratch/sub"), "");
  /* Renames: a file moves (the host's copy is hidden), a directory answers EXDEV. */
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/deep/er/c.txt", 22, "/scratch/c2.txt", 15, &e), 0);
  expect_text(v, "/scratch/c2.txt", "charlie\n");
  expect_missing(v, "/scratch/deep/er/c.txt", ENOENT);
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/deep", 13, "/scratch/deep2", 14, &e), -1);
  assert_int_equal(e.errnum, EXDEV);
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/a.txt", 14, "/tmp/a.txt", 10, &e), -1);
  assert_int_equal(e.errnum, EXDEV);
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/gone", 13, "/scratch/x", 10, &e), -1);
  assert_int_equal(e.errnum, ENOENT);
  /* Confinement is the ro mount's: no link out, no FIFO, even for a write. */
  expect_missing(v, "/scratch/abs_link", walk ? ELOOP : EACCES);
  expect_missing(v, "/scratch/rel_link", walk ? ELOOP : EACCES);
  expect_missing(v, "/scratch/dir_link/secret", walk ? ELOOP : EACCES);
  assert_int_equal(write_file(v, "/scratch/rel_link", W, "x", &e), -1);
  assert_int_equal(write_file(v, "/scratch/dir_link/secret", W, "x", &e), -1);
  assert_int_equal(write_file(v, "/scratch/fifo", MBXC_FS_WRITE, "x", &e), -1);
  assert_int_equal(e.errnum, EACCES);
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/dir_link", 17, "/scratch/dl", 11, &e), -1);
  /* A hard link to a file outside: its copy is edited, never the file. */
  assert_int_equal(write_file(v, "/scratch/linked", W, "edited", &e), 0);
  expect_text(v, "/scratch/linked", "edited");
  assert_int_equal(mbxC_vfs_stat(v, "/scratch/a.txt", 14, &st, &e), 0);
  assert_true(st.writable);
  assert_int_equal(st.size, 11);
  mbxC_vfs_free(v);
  host_unchanged();
}

static void overlay_openat2(void **state) {
  (void)state;
  edits_stay_in_memory(0);
}

static void overlay_walk(void **state) {
  (void)state;
  edits_stay_in_memory(1);
}

static void overlay_quotas(void **state) {
  (void)state;
  /* a.txt is 6 bytes: a copy-up past the bytes quota is refused before anything is read. */
  mbxC_vfs *v = make_view(5, 100, 0);
  mbxC_port_error e;
  int h;
  assert_int_equal(mbxC_vfs_open(v, "/scratch/a.txt", 14, MBXC_FS_WRITE, &h, &e), -1);
  assert_int_equal(e.errnum, EDQUOT);
  expect_text(v, "/scratch/a.txt", "alpha\n");
  mbxC_vfs_free(v);
  /* Whiteouts are entries too: the files quota bounds them. */
  v = make_view(1 << 20, 1, 0);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/a.txt", 14, &e), 0);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub/b.txt", 18, &e), -1);
  assert_int_equal(e.errnum, EDQUOT);
  assert_int_equal(mbxC_vfs_files_used(v), 1);
  mbxC_vfs_free(v);
  host_unchanged();
}

typedef struct seen {
  char text[2048];
} seen;

static int record(void *ud, const mbxC_vfs_change *c) {
  seen *s = ud;
  static const char *const kinds[] = {"?", "created", "modified", "removed", "renamed"};
  char line[300];
  snprintf(line, sizeof line, "%s %s%s%s %s %zu\n", kinds[c->kind], c->path,
           c->from ? " from " : "", c->from ? c->from : "", c->is_dir ? "dir" : "file", c->len);
  strcat(s->text, line);
  return 0;
}

static const char *changes_of(mbxC_vfs *v) {
  static seen s;
  mbxC_port_error e;
  s.text[0] = '\0';
  assert_int_equal(mbxC_vfs_changes(v, record, &s, &e), 0);
  return s.text;
}

static void change_set(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20, 100, 0);
  mbxC_port_error e;
  assert_string_equal(changes_of(v), "");
  assert_int_equal(write_file(v, "/scratch/a.txt", W, "ALPHA\n", &e), 0);
  assert_int_equal(write_file(v, "/scratch/new.txt", W, "n", &e), 0);
  assert_int_equal(mbxC_vfs_mkdir(v, "/scratch/made", 13, &e), 0);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub/b.txt", 18, &e), 0);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/empty", 14, &e), 0);
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/deep/er/c.txt", 22, "/scratch/c.txt", 14, &e), 0);
  assert_int_equal(write_file(v, "/tmp/report.txt", W, "rep", &e), 0);
  /* Written back with the host's bytes: no change. */
  assert_int_equal(write_file(v, "/scratch/linked", W, "SECRET", &e), 0);
  /* Created then removed: nothing. */
  assert_int_equal(write_file(v, "/scratch/brief", W, "b", &e), 0);
  assert_int_equal(mbxC_vfs_remove(v, "/scratch/brief", 14, &e), 0);
  assert_string_equal(changes_of(v), "modified /scratch/a.txt file 6\n"
                                     "renamed /scratch/c.txt from /scratch/deep/er/c.txt file 8\n"
                                     "removed /scratch/empty dir 0\n"
                                     "created /scratch/made dir 0\n"
                                     "created /scratch/new.txt file 1\n"
                                     "removed /scratch/sub/b.txt file 0\n"
                                     "created /tmp/report.txt file 3\n");
  char *orig;
  size_t n;
  assert_int_equal(mbxC_vfs_host_original(v, "/scratch/a.txt", 14, 100, &orig, &n, &e), 0);
  assert_int_equal(n, 6);
  assert_memory_equal(orig, "alpha\n", 6);
  free(orig);
  assert_int_equal(mbxC_vfs_host_original(v, "/scratch/a.txt", 14, 3, &orig, &n, &e), -1);
  assert_int_equal(e.errnum, EFBIG);
  /* Renamed back: a file at its own path with the host's bytes, so no change at all. */
  assert_int_equal(mbxC_vfs_rename(v, "/scratch/c.txt", 14, "/scratch/deep/er/c.txt", 22, &e), 0);
  assert_null(strstr(changes_of(v), "c.txt"));
  mbxC_vfs_reset(v);
  assert_string_equal(changes_of(v), "");
  expect_text(v, "/scratch/a.txt", "alpha\n");
  expect_text(v, "/scratch/sub/b.txt", "bravo\n");
  assert_int_equal(mbxC_vfs_files_used(v), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  mbxC_vfs_free(v);
  host_unchanged();
}

/* A restore costs what changed since the mark: a 4 MiB file left alone is never copied. */
static void journal_cost(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(64 << 20, 100, 0);
  mbxC_port_error e;
  int h;
  size_t put_n;
  char *big = malloc(4 << 20);
  memset(big, 'z', 4 << 20);
  assert_int_equal(mbxC_vfs_open(v, "/tmp/big", 8, W, &h, &e), 0);
  assert_int_equal(mbxC_vfs_write(v, h, big, 4 << 20, &put_n, &e), 0);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  assert_int_equal(write_file(v, "/tmp/small", W, "0123456789", &e), 0);
  assert_int_equal(write_file(v, "/scratch/a.txt", W, "ov1", &e), 0);
  mbxC_vfs_mark *m = mbxC_vfs_mark_take(v);
  assert_non_null(m);
  assert_int_equal(mbxC_vfs_journal_copied(v), 0); /* a mark copies nothing */
  uint64_t used = mbxC_vfs_bytes_used(v), files = mbxC_vfs_files_used(v);
  for (int round = 0; round < 50; round++) {
    uint64_t c0 = mbxC_vfs_journal_copied(v);
    assert_int_equal(write_file(v, "/tmp/small", W, "changed", &e), 0);
    assert_int_equal(write_file(v, "/tmp/fresh", W, "fresh", &e), 0);
    assert_int_equal(mbxC_vfs_remove(v, "/scratch/sub/b.txt", 18, &e), 0);
    assert_int_equal(write_file(v, "/scratch/a.txt", W, "ov2", &e), 0);
    assert_int_equal(mbxC_vfs_rename(v, "/tmp/small", 10, "/tmp/moved", 10, &e), 0);
    assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
    /* small (10 bytes) and a.txt's copy (3 bytes): never the 4 MiB file. */
    assert_int_equal(mbxC_vfs_journal_copied(v) - c0, 13);
    expect_text(v, "/tmp/small", "0123456789");
    expect_text(v, "/scratch/a.txt", "ov1");
    expect_text(v, "/scratch/sub/b.txt", "bravo\n");
    expect_missing(v, "/tmp/fresh", ENOENT);
    expect_missing(v, "/tmp/moved", ENOENT);
    assert_int_equal(mbxC_vfs_bytes_used(v), used);
    assert_int_equal(mbxC_vfs_files_used(v), files);
  }
  /* A create/remove loop after a mark keeps no journal entries behind: memory stays flat. */
  for (int i = 0; i < 10000; i++) {
    assert_int_equal(write_file(v, "/tmp/loop", W, "x", &e), 0);
    assert_int_equal(mbxC_vfs_remove(v, "/tmp/loop", 9, &e), 0);
  }
  /* A reset empties the tree; the mark still brings it back. */
  mbxC_vfs_reset(v);
  expect_missing(v, "/tmp/big", ENOENT);
  expect_text(v, "/scratch/a.txt", "alpha\n");
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  int err;
  char *got = read_all(v, "/tmp/big", &err);
  assert_non_null(got);
  assert_memory_equal(got, big, 4 << 20);
  free(got);
  expect_text(v, "/scratch/a.txt", "ov1");
  /* A newer mark, restored, then the older one: the newer one is no longer valid. */
  assert_int_equal(write_file(v, "/tmp/small", W, "one", &e), 0);
  mbxC_vfs_mark *m2 = mbxC_vfs_mark_take(v);
  assert_int_equal(write_file(v, "/tmp/small", W, "two", &e), 0);
  assert_int_equal(mbxC_vfs_mark_restore(v, m2), 0);
  expect_text(v, "/tmp/small", "one");
  assert_int_equal(write_file(v, "/tmp/small", W, "three", &e), 0);
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  assert_int_equal(mbxC_vfs_mark_restore(v, m2), -1);
  mbxC_vfs_mark_free(m2);
  /* Handles open at the restore are closed; their numbers stay invalid. */
  assert_int_equal(mbxC_vfs_open(v, "/tmp/small", 10, MBXC_FS_WRITE, &h, &e), 0);
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  assert_int_equal(mbxC_vfs_write(v, h, "x", 1, &put_n, &e), -1);
  assert_int_equal(e.errnum, EBADF);
  mbxC_vfs_mark_free(m);
  expect_text(v, "/tmp/small", "0123456789");
  /* A mark may outlive its view. */
  m = mbxC_vfs_mark_take(v);
  mbxC_vfs_free(v);
  mbxC_vfs_mark_free(m);
  free(big);
  host_unchanged();
}

/* The whole picture of what the guest changed: the change set with contents, the quotas'
   use, and the merged listing of a few directories. */
typedef struct picture {
  char text[1 << 15];
  size_t len;
} picture;

static int record_full(void *ud, const mbxC_vfs_change *c) {
  picture *p = ud;
  int n = snprintf(p->text + p->len, sizeof p->text - p->len, "%d %s %s %d %zu:", c->kind, c->path,
                   c->from ? c->from : "-", c->is_dir, c->len);
  if (n < 0 || (size_t)n >= sizeof p->text - p->len) return -1;
  p->len += (size_t)n;
  if (c->data && c->len < sizeof p->text - p->len) {
    memcpy(p->text + p->len, c->data, c->len);
    p->len += c->len;
  }
  p->text[p->len++] = '\n';
  return 0;
}

static void take_picture(mbxC_vfs *v, picture *p) {
  mbxC_port_error e;
  p->len = 0;
  assert_int_equal(mbxC_vfs_changes(v, record_full, p, &e), 0);
  const char *dirs[] = {"/tmp", "/tmp/d", "/scratch", "/scratch/sub", "/scratch/made"};
  for (size_t i = 0; i < sizeof dirs / sizeof *dirs; i++) {
    char *names = names_of(v, dirs[i]);
    p->len += (size_t)snprintf(p->text + p->len, sizeof p->text - p->len, "%s: %s\n", dirs[i],
                               names ? names : "(none)");
  }
  p->len += (size_t)snprintf(p->text + p->len, sizeof p->text - p->len, "used %llu %llu\n",
                             (unsigned long long)mbxC_vfs_bytes_used(v),
                             (unsigned long long)mbxC_vfs_files_used(v));
  p->text[p->len] = '\0';
}

static void random_op(mbxC_vfs *v, unsigned *seed) {
  static const char *const paths[] = {"/tmp/a",
                                      "/tmp/b",
                                      "/tmp/d",
                                      "/tmp/d/x",
                                      "/scratch/a.txt",
                                      "/scratch/sub",
                                      "/scratch/sub/b.txt",
                                      "/scratch/new",
                                      "/scratch/empty",
                                      "/scratch/made",
                                      "/scratch/made/m",
                                      "/scratch/deep/er/c.txt"};
  const size_t n = sizeof paths / sizeof *paths;
  const char *a = paths[(size_t)rand_r(seed) % n], *b = paths[(size_t)rand_r(seed) % n];
  mbxC_port_error e;
  char text[64];
  snprintf(text, sizeof text, "t%d\n", rand_r(seed) % 1000);
  int h;
  size_t put_n;
  switch (rand_r(seed) % 6) {
  case 0:
  case 1: {
    int flags = rand_r(seed) % 2 ? W : (MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_APPEND);
    if (mbxC_vfs_open(v, a, strlen(a), flags, &h, &e) == 0) {
      mbxC_vfs_write(v, h, text, strlen(text), &put_n, &e);
      if (rand_r(seed) % 4) mbxC_vfs_close(v, h, &e); /* else left open: a restore closes it */
    }
    break;
  }
  case 2:
    mbxC_vfs_remove(v, a, strlen(a), &e);
    break;
  case 3:
    mbxC_vfs_rename(v, a, strlen(a), b, strlen(b), &e);
    break;
  case 4:
    mbxC_vfs_mkdir(v, a, strlen(a), &e);
    break;
  default: /* an open handle written after its file was removed */
    if (mbxC_vfs_open(v, a, strlen(a), MBXC_FS_WRITE | MBXC_FS_APPEND, &h, &e) == 0) {
      mbxC_vfs_remove(v, a, strlen(a), &e);
      mbxC_vfs_write(v, h, text, strlen(text), &put_n, &e);
      mbxC_vfs_close(v, h, &e);
    }
  }
}

/* Random edits of /tmp and the overlay between a mark and its restore, many times over, with
   marks taken at random points of the state's history: every restore gives back exactly the
   picture the mark saw. */
static void journal_random_rounds(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20, 200, 0);
  static picture at_mark, now;
  unsigned seed = 20261201;
  mbxC_vfs_mark *m = NULL;
  for (int round = 0; round < 400; round++) {
    if (m == NULL || rand_r(&seed) % 10 == 0) {
      /* Move on: a few changes kept, then a new mark over the new state. */
      mbxC_vfs_mark_free(m);
      for (int i = rand_r(&seed) % 4; i > 0; i--)
        random_op(v, &seed);
      mbxC_vfs_close_all(v);
      take_picture(v, &at_mark);
      m = mbxC_vfs_mark_take(v);
      assert_non_null(m);
    }
    for (int i = rand_r(&seed) % 12; i > 0; i--)
      random_op(v, &seed);
    if (rand_r(&seed) % 8 == 0) mbxC_vfs_reset(v);
    assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
    take_picture(v, &now);
    if (strcmp(now.text, at_mark.text) != 0) {
      fprintf(stderr, "round %d\nat the mark:\n%s\nafter the restore:\n%s\n", round, at_mark.text,
              now.text);
      fail();
    }
  }
  mbxC_vfs_mark_free(m);
  mbxC_vfs_free(v);
  host_unchanged();
}

/* Work whose size the guest picks and no byte charge covers stops at the run's deadline
   (capabilities/vfs.h, mbxC_vfs_set_wait): the copy-up of a 3 MiB host file, a listing of a
   directory holding 70000 files and the zero fill of a write 4 MiB past the end of a file,
   each with a deadline already passed, end with ETIMEDOUT and change nothing; without a
   deadline all three complete. */
static void long_work_stops_at_the_deadline(void **state) {
  (void)state;
  char p[512];
  at(p, sizeof p, "ov/big.bin");
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  static char mib[1 << 20];
  memset(mib, 'b', sizeof mib);
  for (int i = 0; i < 3; i++)
    assert_int_equal(fwrite(mib, 1, sizeof mib, f), sizeof mib);
  fclose(f);
  mbxC_vfs *v = make_view(64 << 20, 200000, 0);
  mbxC_wait past = {.deadline_ns = 1};
  mbxC_port_error e;
  int h;
  const char *big = "/scratch/big.bin";
  int rw = MBXC_FS_READ | MBXC_FS_WRITE | MBXC_FS_APPEND;
  mbxC_vfs_set_wait(v, &past);
  assert_int_equal(mbxC_vfs_open(v, big, strlen(big), rw, &h, &e), -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  assert_non_null(strstr(e.message, "deadline passed during the copy of a host file"));
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  assert_int_equal(mbxC_vfs_files_used(v), 0);
  assert_int_equal(mbxC_vfs_open_count(v), 0);
  /* a rename copies the host file up too: the same stop, the file still where it was */
  const char *moved = "/scratch/moved.bin";
  assert_int_equal(mbxC_vfs_rename(v, big, strlen(big), moved, strlen(moved), &e), -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  assert_int_equal(mbxC_vfs_bytes_used(v), 0);
  mbxC_fs_stat st;
  assert_int_equal(mbxC_vfs_stat(v, moved, strlen(moved), &st, &e), -1);
  mbxC_vfs_set_wait(v, NULL);
  assert_int_equal(mbxC_vfs_stat(v, big, strlen(big), &st, &e), 0);
  assert_int_equal(mbxC_vfs_open(v, big, strlen(big), rw, &h, &e), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), 3 << 20);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  char name[64];
  for (int i = 0; i < 70000; i++) {
    int n = snprintf(name, sizeof name, "/tmp/f%d", i);
    assert_int_equal(mbxC_vfs_open(v, name, (size_t)n, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  }
  const char *names;
  size_t names_len;
  mbxC_vfs_set_wait(v, &past);
  assert_int_equal(mbxC_vfs_list(v, "/tmp", 4, &names, &names_len, &e), -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  assert_non_null(strstr(e.message, "a scan of the sandbox's files"));
  mbxC_vfs_set_wait(v, NULL);
  assert_int_equal(mbxC_vfs_list(v, "/tmp", 4, &names, &names_len, &e), 0);
  size_t count = 0;
  for (size_t i = 0; i < names_len; i++)
    count += names[i] == '\0';
  assert_int_equal(count, 70000);
  /* a write 4 MiB past the end of a memory file: the zero fill stops, nothing written */
  assert_int_equal(mbxC_vfs_open(v, "/tmp/sparse", 11, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
  int64_t pos;
  assert_int_equal(mbxC_vfs_seek(v, h, SEEK_SET, 4 << 20, &pos, &e), 0);
  uint64_t used = mbxC_vfs_bytes_used(v);
  size_t put;
  mbxC_vfs_set_wait(v, &past);
  assert_int_equal(mbxC_vfs_write(v, h, "x", 1, &put, &e), -1);
  assert_int_equal(e.errnum, MBXC_E_TIMEDOUT);
  assert_non_null(strstr(e.message, "zero fill"));
  assert_int_equal(mbxC_vfs_bytes_used(v), used);
  mbxC_vfs_set_wait(v, NULL);
  assert_int_equal(mbxC_vfs_write(v, h, "x", 1, &put, &e), 0);
  assert_int_equal(mbxC_vfs_bytes_used(v), used + (4 << 20) + 1);
  assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
  mbxC_vfs_free(v);
  assert_int_equal(unlink(p), 0);
  host_unchanged();
}

/* Under a live checkpoint, files created and removed again leave no journal entries behind
   (a create/remove loop would otherwise grow host memory no quota counts), whether they go
   in the order they came (a sliding window) or last-in first-out; the rewind still brings
   back exactly what the checkpoint saw. */
static void journal_stays_small_under_churn(void **state) {
  (void)state;
  mbxC_vfs *v = make_view(1 << 20, 1000, 0);
  mbxC_port_error e;
  int h;
  char name[64];
  assert_int_equal(write_file(v, "/tmp/keep", MBXC_FS_WRITE | MBXC_FS_CREATE, "k", &e), 0);
  mbxC_vfs_mark *m = mbxC_vfs_mark_take(v);
  assert_non_null(m);
  for (int i = 0; i < 100000; i++) {
    assert_int_equal(mbxC_vfs_open(v, "/tmp/x", 6, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    assert_int_equal(mbxC_vfs_remove(v, "/tmp/x", 6, &e), 0);
  }
  assert_true(mbxC_vfs_journal_entries(v) <= 1);
  for (int i = 0; i < 100000; i++) {
    int n = snprintf(name, sizeof name, "/tmp/w%d", i);
    assert_int_equal(mbxC_vfs_open(v, name, (size_t)n, MBXC_FS_WRITE | MBXC_FS_CREATE, &h, &e), 0);
    assert_int_equal(mbxC_vfs_close(v, h, &e), 0);
    if (i >= 100) {
      n = snprintf(name, sizeof name, "/tmp/w%d", i - 100);
      assert_int_equal(mbxC_vfs_remove(v, name, (size_t)n, &e), 0);
    }
  }
  if (mbxC_vfs_journal_entries(v) > 400)
    fail_msg("%zu journal entries for 100 live files", mbxC_vfs_journal_entries(v));
  assert_int_equal(mbxC_vfs_mark_restore(v, m), 0);
  assert_string_equal(names_of(v, "/tmp"), "keep");
  mbxC_vfs_mark_free(m);
  mbxC_vfs_free(v);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(overlay_openat2),
      cmocka_unit_test(overlay_walk),
      cmocka_unit_test(overlay_quotas),
      cmocka_unit_test(change_set),
      cmocka_unit_test(journal_cost),
      cmocka_unit_test(journal_random_rounds),
      cmocka_unit_test(long_work_stops_at_the_deadline),
      cmocka_unit_test(journal_stays_small_under_churn),
  };
  return cmocka_run_group_tests(tests, setup_tree, teardown_tree);
}
