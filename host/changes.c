/* host/changes.c -- mbx_sandbox_changes: the change set of the sandbox's filesystem view
   (capabilities/vfs.c walks it) as JSON. */
#include "host/changes.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "host/buf.h"
#include "host/diff.h"
#include "host/sandbox.h"
#include "vm/json_text.h"

static const char *const kind_names[] = {"", "created", "modified", "removed", "renamed"};

typedef struct emit {
  mbxH_buf b;
  unsigned flags;
  size_t count;
} emit;

static int put_change(void *ud, const mbxC_vfs_change *c) {
  emit *out = ud;
  mbxH_buf *b = &out->b;
  mbxH_buf_puts(b, out->count++ ? ",{\"path\":" : "{\"path\":");
  mbxV_json_put_string(mbxH_buf_sink, b, c->path, c->path_len);
  mbxH_buf_puts(b, ",\"kind\":\"");
  mbxH_buf_puts(b, kind_names[c->kind]);
  mbxH_buf_puts(b, "\"");
  if (c->from) {
    mbxH_buf_puts(b, ",\"from\":");
    mbxV_json_put_string(mbxH_buf_sink, b, c->from, strlen(c->from));
  }
  mbxH_buf_puts(b, c->is_dir ? ",\"type\":\"dir\",\"size\":" : ",\"type\":\"file\",\"size\":");
  mbxV_json_put_integer(mbxH_buf_sink, b, (int64_t)c->len);
  if ((out->flags & MBX_CHANGES_CONTENT) && c->data) {
    mbxH_buf_puts(b, ",\"content\":");
    mbxV_json_put_string(mbxH_buf_sink, b, c->data, c->len);
  }
  mbxH_buf_puts(b, "}");
  return b->failed;
}

MBX_API mbx_status mbx_sandbox_changes(mbx_sandbox *sb, unsigned flags, char **json, size_t *len,
                                       mbx_error *err) {
  if (json) *json = NULL;
  if (len) *len = 0;
  if (sb == NULL || json == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_changes: the sandbox and json must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (flags & ~MBX_CHANGES_CONTENT) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_changes: unknown flags 0x%x (only MBX_CHANGES_CONTENT)",
                   flags & ~MBX_CHANGES_CONTENT);
    return MBX_INVALID_ARGUMENT;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_changes", err)) return MBX_SANDBOX_BUSY;
  emit out = {.flags = flags};
  mbxH_buf_puts(&out.b, "[");
  mbxC_vfs *v = sb->backend->files ? sb->backend->files(sb->impl) : NULL;
  mbxC_port_error e;
  int rc = v ? mbxC_vfs_changes(v, put_change, &out, &e) : 0;
  mbxH_sandbox_release(sb);
  mbxH_buf_puts(&out.b, "]");
  size_t n;
  char *text = rc == 0 ? mbxH_buf_take(&out.b, &n) : NULL;
  mbxH_buf_free(&out.b);
  if (text == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_changes: out of host memory");
    return MBX_NO_MEMORY;
  }
  *json = text;
  if (len) *len = n;
  return MBX_OK;
}

static mbx_status walk(mbx_sandbox *sb, const char *fn_name, mbxC_vfs_change_fn fn, void *ud,
                       mbxC_vfs **view, mbx_error *err) {
  if (!mbxH_sandbox_claim(sb, fn_name, err)) return MBX_SANDBOX_BUSY;
  mbxC_vfs *v = sb->backend->files ? sb->backend->files(sb->impl) : NULL;
  *view = v;
  mbxC_port_error e;
  int rc = v ? mbxC_vfs_changes(v, fn, ud, &e) : 0;
  mbxH_sandbox_release(sb);
  if (rc != 0 && e.errnum != ECANCELED) {
    mbxU_error_set(err, MBX_NO_MEMORY, "%s: %s", fn_name, e.message);
    return MBX_NO_MEMORY;
  }
  return rc != 0 ? MBX_INTERNAL_ERROR : MBX_OK; /* the callback filled err */
}

/* ---- --changes: one line per change ---- */

/* A guest path as printed for a person: bytes below 0x20, 0x7f and backslashes as \xHH, so
   a file named "a\nmoonbox: removed  README" cannot forge a line of the summary, or a header
   or hunk line of the diff (the JSON forms escape by themselves). out holds 4 * len + 1. */
static const char *printable(const char *path, char *out, size_t size) {
  size_t k = 0;
  for (const unsigned char *p = (const unsigned char *)path; *p && k + 5 < size; p++) {
    if (*p < 0x20 || *p == 0x7f || *p == '\\')
      k += (size_t)snprintf(out + k, size - k, "\\x%02x", *p);
    else
      out[k++] = (char)*p;
  }
  out[k] = '\0';
  return out;
}

#define PRINTABLE_MAX (4 * MBXC_VFS_PATH_BUF + 1)

static int print_summary(void *ud, const mbxC_vfs_change *c) {
  FILE *out = ud;
  char path[PRINTABLE_MAX], from[PRINTABLE_MAX];
  fprintf(out, "moonbox: %-8s %s", kind_names[c->kind], printable(c->path, path, sizeof path));
  if (c->from) fprintf(out, " (from %s)", printable(c->from, from, sizeof from));
  if (c->is_dir)
    fputs(" (directory)", out);
  else if (c->kind != MBXC_CHANGE_REMOVED)
    fprintf(out, " (%zu bytes)", c->len);
  fputc('\n', out);
  return 0;
}

mbx_status mbxH_changes_summary(mbx_sandbox *sb, FILE *out, mbx_error *err) {
  mbxC_vfs *v;
  return walk(sb, "--changes", print_summary, out, &v, err);
}

/* ---- --export-changes ---- */

typedef struct exporter {
  int dirfd;
  mbx_error *err;
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

static int export_one(void *ud, const mbxC_vfs_change *c) {
  exporter *x = ud;
  if (c->kind == MBXC_CHANGE_REMOVED) return 0; /* in the manifest */
  const char *name;
  int fd = export_dirs(x, c->path, c->is_dir, &name);
  if (fd < 0) {
    mbxU_error_set(x->err, MBX_INVALID_ARGUMENT,
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
    mbxU_error_set(x->err, MBX_INVALID_ARGUMENT, "--export-changes: cannot write %s: %s", c->path,
                   strerror(saved));
    if (f >= 0) close(f);
    return -1;
  }
  close(f);
  return 0;
}

mbx_status mbxH_changes_export(mbx_sandbox *sb, const char *dir, mbx_error *err) {
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
  exporter x = {dirfd, err};
  mbxC_vfs *v;
  mbx_status s = walk(sb, "--export-changes", export_one, &x, &v, err);
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
  free(json);
  close(dirfd);
  return s;
}

/* ---- --diff ---- */

/* Originals past this size are not diffed (named instead): the diff holds both in memory. */
#define DIFF_ORIGINAL_MAX (64u << 20)

typedef struct differ {
  mbxC_vfs *view;
  FILE *out;
  mbx_error *err;
} differ;

static int diff_one(void *ud, const mbxC_vfs_change *c) {
  differ *d = ud;
  if (c->is_dir) return 0;
  const char *orig_path = c->kind == MBXC_CHANGE_RENAMED ? c->from : c->path;
  char label_a[PRINTABLE_MAX], label_b[PRINTABLE_MAX];
  printable(orig_path, label_a, sizeof label_a);
  printable(c->path, label_b, sizeof label_b);
  char *orig = NULL;
  size_t orig_len = 0;
  mbxC_port_error e;
  if (c->kind != MBXC_CHANGE_CREATED &&
      mbxC_vfs_host_original(d->view, orig_path, strlen(orig_path), DIFF_ORIGINAL_MAX, &orig,
                             &orig_len, &e) != 0) {
    fprintf(d->out, "Files %s and %s differ (the original cannot be read: %s)\n", label_a,
            label_b, e.message);
    return 0;
  }
  int gone = c->kind == MBXC_CHANGE_REMOVED;
  mbxH_buf b = {0};
  mbxH_diff_unified(c->kind == MBXC_CHANGE_CREATED ? "/dev/null" : label_a, orig, orig_len,
                    gone ? "/dev/null" : label_b, gone ? NULL : c->data, gone ? 0 : c->len, &b);
  free(orig);
  if (b.failed) {
    mbxH_buf_free(&b);
    mbxU_error_set(d->err, MBX_NO_MEMORY, "--diff: out of host memory for %s", c->path);
    return -1;
  }
  if (b.len) fwrite(b.data, 1, b.len, d->out);
  mbxH_buf_free(&b);
  return 0;
}

mbx_status mbxH_changes_diff(mbx_sandbox *sb, FILE *out, mbx_error *err) {
  differ d = {NULL, out, err};
  /* The view is the sandbox's; it stays put while the walk runs on this thread. */
  if (sb->backend->files) d.view = sb->backend->files(sb->impl);
  return walk(sb, "--diff", diff_one, &d, &d.view, err);
}
