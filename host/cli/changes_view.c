/* host/cli/changes_view.c -- --changes, --export-changes and --diff: the change set walked
   through the public API (mbx_sandbox_changes_each), shown to a person or written out. */
#include "host/cli/changes_view.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/error.h"
#include "host/cli/diff.h"

static const char *const kind_names[] = {"", "created", "modified", "removed", "renamed"};

/* The library's own failures (busy, out of memory) name the function; the CLI's messages name
   the option instead ("--diff: ..."). */
#define EACH_PREFIX "mbx_sandbox_changes_each: "

/*
** Walks the change set for the view named view. A stop by fn (it returned nonzero after
** filling *why) returns MBX_INTERNAL_ERROR with *why in err; the walk's own failures keep
** their status, told with the view's name.
*/
static mbx_status walk(mbx_sandbox *sb, const char *view, mbx_change_fn fn, void *ud,
                       const mbx_error *why, mbx_error *err) {
  mbx_error e;
  memset(&e, 0, sizeof e);
  mbx_status s = mbx_sandbox_changes_each(sb, fn, ud, &e);
  if (s == MBX_OK) return MBX_OK;
  if (s == MBX_INTERRUPTED) {
    if (err) *err = *why;
    return MBX_INTERNAL_ERROR;
  }
  const char *message = e.message;
  if (strncmp(message, EACH_PREFIX, strlen(EACH_PREFIX)) == 0) message += strlen(EACH_PREFIX);
  mbxU_error_set(err, s, "%s: %s", view, message);
  return s;
}

/* A guest path as printed for a person: bytes below 0x20, 0x7f and backslashes as \xHH, so
   a file named "a\nmoonbox: removed  README" cannot forge a line of the summary, or a header
   or hunk line of the diff (the JSON forms escape by themselves). */
static void put_printable(void (*put)(void *, const char *, size_t), void *to, const char *path) {
  for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
    if (*p < 0x20 || *p == 0x7f || *p == '\\') {
      char hex[5];
      snprintf(hex, sizeof hex, "\\x%02x", *p);
      put(to, hex, 4);
    } else {
      put(to, (const char *)p, 1);
    }
  }
}

static void file_sink(void *file, const char *p, size_t n) {
  fwrite(p, 1, n, file);
}

/* path, printable, as a NUL-terminated string in b. */
static const char *printable(mbxU_buf *b, const char *path) {
  put_printable(mbxU_buf_sink, b, path);
  mbxU_buf_put(b, "", 0);
  return b->data;
}

/* ---- --changes: one line per change ---- */

static int print_summary(void *ud, const mbx_change *c) {
  FILE *out = ud;
  fprintf(out, "moonbox: %-8s ", kind_names[c->kind]);
  put_printable(file_sink, out, c->path);
  if (c->from) {
    fputs(" (from ", out);
    put_printable(file_sink, out, c->from);
    fputc(')', out);
  }
  if (c->is_dir)
    fputs(" (directory)", out);
  else if (c->kind != MBX_CHANGE_REMOVED)
    fprintf(out, " (%zu bytes)", c->len);
  fputc('\n', out);
  return 0;
}

mbx_status mbxH_cli_changes_summary(mbx_sandbox *sb, FILE *out, mbx_error *err) {
  mbx_error none; /* print_summary never stops the walk */
  memset(&none, 0, sizeof none);
  return walk(sb, "--changes", print_summary, out, &none, err);
}

/* ---- --export-changes ---- */

typedef struct exporter {
  int dirfd;
  mbx_error why;
} exporter;

/* Make the directories of path (virtual, absolute) below the export directory; the last
   component too when is_dir. Returns the fd of the parent (or -1). */
static int export_dirs(exporter *x, const char *path, int is_dir, const char **name) {
  int fd = dup(x->dirfd);
  const char *p = path + 1;
  char part[256];
  for (;;) {
    const char *slash = strchr(p, '/');
    if (slash == NULL && !is_dir) {
      *name = p;
      return fd;
    }
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    memcpy(part, p, n);
    part[n] = '\0';
    if (mkdirat(fd, part, 0755) != 0 && errno != EEXIST) break;
    int next = openat(fd, part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    close(fd);
    if (next < 0) return -1;
    fd = next;
    if (slash == NULL) {
      *name = NULL;
      return fd;
    }
    p = slash + 1;
  }
  close(fd);
  return -1;
}

static int export_one(void *ud, const mbx_change *c) {
  exporter *x = ud;
  if (c->kind == MBX_CHANGE_REMOVED) return 0; /* in the manifest */
  const char *name;
  int fd = export_dirs(x, c->path, c->is_dir, &name);
  if (fd < 0) {
    mbxU_error_set(&x->why, MBX_INVALID_ARGUMENT,
                   "--export-changes: cannot make the directory "
                   "for %s: %s",
                   c->path, strerror(errno));
    return -1;
  }
  if (c->is_dir) {
    close(fd);
    return 0;
  }
  int f = openat(fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
  int saved = errno;
  close(fd);
  size_t done = 0;
  while (f >= 0 && done < c->len) {
    ssize_t k = write(f, c->data + done, c->len - done);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    done += (size_t)k;
  }
  if (f < 0 || done < c->len) {
    if (f >= 0) saved = errno;
    mbxU_error_set(&x->why, MBX_INVALID_ARGUMENT, "--export-changes: cannot write %s: %s", c->path,
                   strerror(saved));
    if (f >= 0) close(f);
    return -1;
  }
  close(f);
  return 0;
}

mbx_status mbxH_cli_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err) {
  /* A new directory (or an empty one): nothing already there is overwritten or followed. */
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "--export-changes: cannot make %s: %s", dir,
                   strerror(errno));
    return MBX_INVALID_ARGUMENT;
  }
  int dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dirfd < 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "--export-changes: cannot open %s: %s", dir,
                   strerror(errno));
    return MBX_INVALID_ARGUMENT;
  }
  struct stat st;
  if (fstatat(dirfd, ".moonbox-changes.json", &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT) {
    close(dirfd);
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "--export-changes: %s already holds an export "
                   "(give a new directory)",
                   dir);
    return MBX_INVALID_ARGUMENT;
  }
  exporter x = {.dirfd = dirfd};
  mbx_status s = walk(sb, "--export-changes", export_one, &x, &x.why, err);
  char *json = NULL;
  size_t len = 0;
  if (s == MBX_OK) s = mbx_sandbox_changes(sb, 0, &json, &len, err);
  if (s == MBX_OK) {
    int f = openat(dirfd, ".moonbox-changes.json",
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0 || write(f, json, len) != (ssize_t)len || write(f, "\n", 1) != 1) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "--export-changes: cannot write the manifest: "
                     "%s",
                     strerror(errno));
      s = MBX_INVALID_ARGUMENT;
    }
    if (f >= 0) close(f);
  }
  mbx_free(json);
  close(dirfd);
  return s;
}

/* ---- --diff ---- */

/* Originals past this size are not diffed (named instead): the diff holds both in memory. */
#define DIFF_ORIGINAL_MAX (64u << 20)

typedef struct differ {
  mbx_sandbox *sb;
  FILE *out;
  mbx_error why;
} differ;

static int diff_one(void *ud, const mbx_change *c) {
  differ *d = ud;
  if (c->is_dir) return 0;
  const char *orig_path = c->kind == MBX_CHANGE_RENAMED ? c->from : c->path;
  mbxU_buf label_a = {0}, label_b = {0}, b = {0};
  printable(&label_a, orig_path);
  printable(&label_b, c->path);
  char *orig = NULL;
  size_t orig_len = 0;
  mbx_error e;
  memset(&e, 0, sizeof e);
  int read_failed = 0;
  if (!label_a.failed && !label_b.failed && c->kind != MBX_CHANGE_CREATED &&
      mbx_sandbox_change_original(d->sb, c, DIFF_ORIGINAL_MAX, &orig, &orig_len, &e) != MBX_OK) {
    fprintf(d->out, "Files %s and %s differ (the original cannot be read: %s)\n", label_a.data,
            label_b.data, e.message);
    read_failed = 1;
  }
  int gone = c->kind == MBX_CHANGE_REMOVED;
  if (!read_failed && !label_a.failed && !label_b.failed)
    mbxH_diff_unified(c->kind == MBX_CHANGE_CREATED ? "/dev/null" : label_a.data, orig, orig_len,
                      gone ? "/dev/null" : label_b.data, gone ? NULL : c->data, gone ? 0 : c->len,
                      &b);
  mbx_free(orig);
  int failed = label_a.failed || label_b.failed || b.failed;
  mbxU_buf_free(&label_a);
  mbxU_buf_free(&label_b);
  if (failed) {
    mbxU_buf_free(&b);
    mbxU_error_set(&d->why, MBX_NO_MEMORY, "--diff: out of host memory for %s", c->path);
    return -1;
  }
  if (b.len) fwrite(b.data, 1, b.len, d->out);
  mbxU_buf_free(&b);
  return 0;
}

mbx_status mbxH_cli_changes_diff(mbx_sandbox *sb, FILE *out, mbx_error *err) {
  differ d = {.sb = sb, .out = out};
  return walk(sb, "--diff", diff_one, &d, &d.why, err);
}
