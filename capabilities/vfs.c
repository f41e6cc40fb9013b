/* capabilities/vfs.c -- the sandbox's filesystem view: normalization, the mount table, memory
   files, confined host mounts, handles and quotas (capabilities/vfs.h says what and why). */
#include "capabilities/vfs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/bytes.h"

/* ---- paths ---- */

int mbxC_vfs_normalize(const char *path, size_t len, char *out, size_t out_size,
                       size_t *out_len) {
  if (out_size < 2) return ENAMETOOLONG;
  if (memchr(path, '\0', len) != NULL) return EINVAL;
  if (len == 0) return ENOENT; /* what fopen("") answers */
  /* Longer than any path the view can hold, as written (the kernel's PATH_MAX rule): the
     result is then at most len + 1 bytes, so every intermediate step fits a buffer of
     MBXC_VFS_PATH_BUF. */
  if (len > MBXC_VFS_PATH_MAX) return ENAMETOOLONG;
  size_t o = 0, i = 0;
  out[o++] = '/';
  while (i < len) {
    while (i < len && path[i] == '/')
      i++;
    size_t start = i;
    while (i < len && path[i] != '/')
      i++;
    size_t n = i - start;
    if (n == 0) break;
    if (n == 1 && path[start] == '.') continue;
    if (n == 2 && path[start] == '.' && path[start + 1] == '.') {
      /* Up one level; at "/" it stays at "/" (never above the root, as the kernel does). */
      while (o > 1 && out[o - 1] != '/')
        o--;
      if (o > 1) o--;
      continue;
    }
    if (n > MBXC_VFS_NAME_MAX) return ENAMETOOLONG;
    size_t need = (o > 1 ? 1 : 0) + n;
    if (o + need + 1 > out_size) return ENAMETOOLONG;
    if (o > 1) out[o++] = '/';
    memcpy(out + o, path + start, n);
    o += n;
  }
  if (o > MBXC_VFS_PATH_MAX) return ENAMETOOLONG;
  out[o] = '\0';
  if (out_len) *out_len = o;
  return 0;
}

int mbxC_vfs_is_canonical(const char *path, size_t len) {
  char buf[MBXC_VFS_PATH_BUF];
  size_t n;
  if (len == 0 || path[0] != '/') return 0;
  if (mbxC_vfs_normalize(path, len, buf, sizeof buf, &n) != 0) return 0;
  return n == len && memcmp(buf, path, len) == 0;
}

/* 1 when prefix (normalized) is path or one of its parents. */
static int covers(const char *prefix, size_t plen, const char *path, size_t len) {
  if (plen == 1) return 1; /* "/" */
  if (plen > len || memcmp(prefix, path, plen) != 0) return 0;
  return plen == len || path[plen] == '/';
}

int mbxC_vfs_match(const char *const *prefixes, size_t n, const char *path, size_t len,
                   size_t *rel_off) {
  int best = -1;
  size_t best_len = 0;
  for (size_t i = 0; i < n; i++) {
    size_t plen = strlen(prefixes[i]);
    if (covers(prefixes[i], plen, path, len) && (best < 0 || plen > best_len)) {
      best = (int)i;
      best_len = plen;
    }
  }
  if (best >= 0 && rel_off) {
    size_t off = best_len == 1 ? 1 : best_len;
    if (off < len && path[off] == '/') off++;
    *rel_off = off > len ? len : off;
  }
  return best;
}

/* ---- the view ---- */

typedef struct vmount {
  char *path; /* virtual */
  size_t len;
  int mode;
  int dirfd; /* O_PATH | O_DIRECTORY of the host directory, opened once */
  dev_t dev; /* its device, for the walk's no-crossing check */
} vmount;

/* A memory file or directory. The tree is flat: a node's parent is the node whose path is
   its path up to the last '/' (views hold at most a few thousand nodes). */
typedef struct mnode {
  char *path;
  size_t path_len;
  int is_dir;
  int writable;    /* under the memory /tmp; the policy's files and "/" are read-only */
  int guest_made;  /* created by the guest: counted in the files quota */
  int in_table;    /* 0 once removed while a handle still had it open */
  int opens;       /* handles open on it */
  char *data;
  size_t len, cap;
  int64_t mtime;
} mnode;

enum { H_FREE = 0, H_HOST = 1, H_MEM = 2 };
#define SLOT_BITS 12 /* MBXC_MAX_FS_OPEN_FILES slots */
#define GEN_MASK 0x7ffffu

typedef struct handle {
  int kind;
  uint32_t gen;
  int flags; /* MBXC_FS_* */
  uint64_t pos;
  int fd;             /* H_HOST */
  uint64_t host_size; /* H_HOST: the size known to the view, for the bytes quota */
  mnode *node;        /* H_MEM */
} handle;

struct mbxC_vfs {
  vmount *mounts;
  size_t mount_count;
  const char **prefixes; /* mounts[i].path, for mbxC_vfs_match */
  mnode **nodes;
  size_t node_count, node_cap;
  handle *handles;
  size_t handle_cap; /* the open_files quota */
  size_t open_count;
  uint64_t tmp_max, tmp_used;
  uint64_t bytes_max, bytes_used;
  uint64_t files_max, files_used;
  int walk_only;
  uint64_t mutations; /* changes to the memory tree, so a rewind with none costs nothing */
  int64_t (*clock)(void *ud);
  void *clock_ud;
  char view[160]; /* "mounts: /data ro, /tmp" for the not-in-view reason */
  char *names;    /* fs_list's answer */
  size_t names_cap;
};

size_t mbxC_vfs_mount_count(const mbxC_vfs *v) {
  return v->mount_count;
}

int mbxC_vfs_mount_fd(const mbxC_vfs *v, size_t i, const char **path, int *mode) {
  *path = v->mounts[i].path;
  *mode = v->mounts[i].mode;
  return v->mounts[i].dirfd;
}

static int fail(mbxC_port_error *e, int errnum, const char *reason, ...) {
  e->errnum = errnum;
  const char *text = strerrordesc_np(errnum);
  int n = snprintf(e->message, sizeof e->message, "%s", text ? text : "Unknown error");
  if (reason && n >= 0 && (size_t)n < sizeof e->message) {
    char why[200];
    va_list ap;
    va_start(ap, reason);
    vsnprintf(why, sizeof why, reason, ap);
    va_end(ap);
    snprintf(e->message + n, sizeof e->message - (size_t)n, " (%s)", why);
  }
  return -1;
}

static int64_t real_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

static int64_t now_of(const mbxC_vfs *v) {
  return v->clock ? v->clock(v->clock_ud) : real_seconds();
}
#define now_seconds() now_of(v)

static mnode *find_node(const mbxC_vfs *v, const char *path, size_t len) {
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *n = v->nodes[i];
    if (n->path_len == len && memcmp(n->path, path, len) == 0) return n;
  }
  return NULL;
}

static size_t parent_len(const char *path, size_t len) {
  while (len > 0 && path[len - 1] != '/')
    len--;
  return len > 1 ? len - 1 : 1;
}

static mnode *add_node(mbxC_vfs *v, const char *path, size_t len, int is_dir, int writable) {
  if (v->node_count == v->node_cap) {
    size_t cap = v->node_cap ? v->node_cap * 2 : 16;
    mnode **grown = realloc(v->nodes, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    v->nodes = grown;
    v->node_cap = cap;
  }
  mnode *n = calloc(1, sizeof *n);
  if (n == NULL || (n->path = mbxU_dup_bytes(path, len)) == NULL) {
    free(n);
    return NULL;
  }
  n->path_len = len;
  n->is_dir = is_dir;
  n->writable = writable;
  n->in_table = 1;
  n->mtime = now_seconds();
  v->nodes[v->node_count++] = n;
  v->mutations++;
  return n;
}

static void free_node(mnode *n) {
  free(n->path);
  free(n->data);
  free(n);
}

static void unlink_node(mbxC_vfs *v, mnode *n) {
  v->mutations++;
  for (size_t i = 0; i < v->node_count; i++) {
    if (v->nodes[i] == n) {
      v->nodes[i] = v->nodes[--v->node_count];
      break;
    }
  }
  n->in_table = 0;
  if (n->opens == 0) free_node(n);
}

/* A read-only directory node for path and each of its ancestors not there yet. */
static int add_dirs(mbxC_vfs *v, const char *path, size_t len) {
  for (size_t i = 1; i <= len; i++) {
    if (i == len || path[i] == '/') {
      if (find_node(v, path, i) == NULL && add_node(v, path, i, 1, 0) == NULL) return -1;
    }
  }
  return 0;
}

void mbxC_vfs_free(mbxC_vfs *v) {
  if (v == NULL) return;
  mbxC_vfs_close_all(v);
  for (size_t i = 0; i < v->mount_count; i++) {
    if (v->mounts[i].dirfd >= 0) close(v->mounts[i].dirfd);
    free(v->mounts[i].path);
  }
  for (size_t i = 0; i < v->node_count; i++)
    free_node(v->nodes[i]);
  free(v->mounts);
  free(v->prefixes);
  free(v->nodes);
  free(v->handles);
  free(v->names);
  free(v);
}

static void describe_view(mbxC_vfs *v) {
  size_t at = (size_t)snprintf(v->view, sizeof v->view, "mounts: ");
  for (size_t i = 0; i < v->mount_count && at < sizeof v->view; i++)
    at += (size_t)snprintf(v->view + at, sizeof v->view - at, "%s %s, ", v->mounts[i].path,
                           v->mounts[i].mode == MBXC_MOUNT_RW ? "rw" : "ro");
  if (at < sizeof v->view) snprintf(v->view + at, sizeof v->view - at, "/tmp");
}

mbxC_vfs *mbxC_vfs_new(const mbxC_fs_spec *spec, mbxC_port_error *e) {
  mbxC_vfs *v = calloc(1, sizeof *v);
  if (v == NULL) {
    fail(e, ENOMEM, NULL);
    return NULL;
  }
  v->tmp_max = spec->tmp_bytes;
  v->bytes_max = spec->bytes;
  v->files_max = spec->files_max;
  v->handle_cap = spec->open_files > MBXC_MAX_FS_OPEN_FILES ? MBXC_MAX_FS_OPEN_FILES
                                                            : (size_t)spec->open_files;
  if (v->handle_cap && (v->handles = calloc(v->handle_cap, sizeof *v->handles)) == NULL)
    goto oom;
  if (spec->mount_count) {
    v->mounts = calloc(spec->mount_count, sizeof *v->mounts);
    v->prefixes = calloc(spec->mount_count, sizeof *v->prefixes);
    if (v->mounts == NULL || v->prefixes == NULL) goto oom;
  }
  for (size_t i = 0; i < spec->mount_count; i++) {
    const mbxC_fs_mount *m = &spec->mounts[i];
    vmount *vm = &v->mounts[i];
    vm->dirfd = -1;
    vm->len = strlen(m->path);
    vm->mode = m->mode;
    if ((vm->path = mbxU_dup_bytes(m->path, vm->len)) == NULL) goto oom;
    v->prefixes[i] = vm->path;
    v->mount_count = i + 1;
    vm->dirfd = open(m->host, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (vm->dirfd < 0 || fstat(vm->dirfd, &st) != 0) {
      fail(e, errno, "the host directory of mount %s cannot be opened", m->path);
      mbxC_vfs_free(v);
      return NULL;
    }
    vm->dev = st.st_dev;
    /* The mount point and its ancestors are directories of the memory tree, so listing "/"
       shows them; the mount itself answers for the path. */
    if (add_dirs(v, vm->path, vm->len) != 0) goto oom;
  }
  if (add_dirs(v, "/", 1) != 0) goto oom;
  mnode *tmp = add_node(v, "/tmp", 4, 1, 1);
  if (tmp == NULL) goto oom;
  for (size_t i = 0; i < spec->file_count; i++) {
    const mbxC_fs_file *f = &spec->files[i];
    size_t len = strlen(f->path);
    if (add_dirs(v, f->path, parent_len(f->path, len)) != 0) goto oom;
    mnode *n = add_node(v, f->path, len, 0, 0);
    if (n == NULL) goto oom;
    if (f->len && (n->data = mbxU_dup_bytes(f->data, f->len)) == NULL) goto oom;
    n->len = n->cap = f->len;
  }
  describe_view(v);
  return v;
oom:
  mbxC_vfs_free(v);
  fail(e, ENOMEM, NULL);
  return NULL;
}

void mbxC_vfs_set_clock(mbxC_vfs *v, int64_t (*now)(void *ud), void *ud) {
  v->clock = now;
  v->clock_ud = ud;
  for (size_t i = 0; i < v->node_count; i++)
    v->nodes[i]->mtime = now_of(v);
}

void mbxC_vfs_force_walk(mbxC_vfs *v, int on) {
  v->walk_only = on != 0;
}

size_t mbxC_vfs_open_count(const mbxC_vfs *v) {
  return v->open_count;
}
uint64_t mbxC_vfs_bytes_used(const mbxC_vfs *v) {
  return v->bytes_used;
}
uint64_t mbxC_vfs_files_used(const mbxC_vfs *v) {
  return v->files_used;
}

/* ---- resolving a guest path ---- */

typedef struct where {
  char path[MBXC_VFS_PATH_BUF]; /* normalized */
  size_t len;
  int mount;       /* index into v->mounts, or -1: the memory tree */
  const char *rel; /* below the mount: "." for its root, else "a/b" */
} where;

static int locate(mbxC_vfs *v, const char *path, size_t len, where *w, mbxC_port_error *e) {
  int bad = mbxC_vfs_normalize(path, len, w->path, sizeof w->path, &w->len);
  if (bad == EINVAL) return fail(e, EINVAL, "the path contains a NUL byte");
  if (bad) return fail(e, bad, NULL);
  size_t off = 0;
  w->mount = mbxC_vfs_match(v->prefixes, v->mount_count, w->path, w->len, &off);
  w->rel = w->mount >= 0 ? (off < w->len ? w->path + off : ".") : NULL;
  return 0;
}

/* ENOENT for a memory-tree path: in the view when its nearest existing ancestor is writable
   (a missing name in /tmp), otherwise outside every mount. The answer depends on the view
   only, never on the host. */
static int missing(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  size_t len = w->len;
  while (len > 1) {
    len = parent_len(w->path, len);
    mnode *n = find_node(v, w->path, len);
    if (n) {
      if (n->writable) return fail(e, ENOENT, NULL);
      break;
    }
  }
  return fail(e, ENOENT, "not in the sandbox view; %s", v->view);
}

/* ---- host mounts: confined opens ---- */

/* A host error for the guest: crossing out of the mount reads as a refusal, and no host
   path is ever named. */
static int host_fail(mbxC_port_error *e, int errnum, int walk) {
  if (errnum == EXDEV) return fail(e, EACCES, "the path leads outside its mount");
  if (errnum == ELOOP && walk)
    return fail(e, ELOOP, "symbolic links are not followed in this mount");
  return fail(e, errnum, NULL);
}

/* The component-by-component fallback: every directory on the way is opened O_PATH |
   O_NOFOLLOW from the one before, so no symlink is followed at all, and a directory on
   another device (a mount inside the mount) is refused. Returns an fd or -errno. */
static int walk_open(const vmount *m, const char *rel, int flags, mode_t mode) {
  int fd = openat(m->dirfd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return -errno;
  if (strcmp(rel, ".") == 0) {
    int r = openat(fd, ".", flags | O_CLOEXEC, mode);
    int err = errno;
    close(fd);
    return r >= 0 ? r : -err;
  }
  const char *p = rel;
  char name[MBXC_VFS_NAME_MAX + 1];
  for (;;) {
    const char *slash = strchr(p, '/');
    size_t n = slash ? (size_t)(slash - p) : strlen(p);
    memcpy(name, p, n);
    name[n] = '\0';
    int next = slash ? openat(fd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
                     : openat(fd, name, flags | O_NOFOLLOW | O_CLOEXEC, mode);
    int err = errno;
    close(fd);
    if (next < 0) return -(err == ENOTDIR && slash ? ELOOP : err);
    struct stat st;
    if (fstat(next, &st) != 0 || st.st_dev != m->dev) {
      close(next);
      return -EXDEV;
    }
    fd = next;
    if (!slash) return fd;
    p = slash + 1;
  }
}

/* Open rel below mount m with flags: openat2 confined beneath the mount's fd (no "..", no
   absolute or escaping symlink, no magic link, no mount crossing), or the walk where the
   kernel or a seccomp filter refuses openat2. Returns an fd or -errno. */
static int beneath(mbxC_vfs *v, const vmount *m, const char *rel, int flags, mode_t mode) {
  if (!v->walk_only) {
    struct open_how how = {.flags = (uint64_t)(flags | O_CLOEXEC),
                           .mode = (flags & O_CREAT) ? mode : 0,
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
    long fd = syscall(SYS_openat2, m->dirfd, rel, &how, sizeof how);
    if (fd >= 0) return (int)fd;
    if (errno == ENOSYS) v->walk_only = 1; /* this kernel will not have it later either */
    else if (errno != EPERM) return -errno;
  }
  return walk_open(m, rel, flags, mode);
}

/* The parent directory of rel (O_PATH), and the final component. rel is not ".". */
static int parent_of(mbxC_vfs *v, const vmount *m, const char *rel, const char **name) {
  const char *slash = strrchr(rel, '/');
  if (slash == NULL) {
    *name = rel;
    return beneath(v, m, ".", O_PATH | O_DIRECTORY, 0);
  }
  char dir[MBXC_VFS_PATH_MAX + 1];
  memcpy(dir, rel, (size_t)(slash - rel));
  dir[slash - rel] = '\0';
  *name = slash + 1;
  return beneath(v, m, dir, O_PATH | O_DIRECTORY, 0);
}

static int walk_mode(const mbxC_vfs *v) {
  return v->walk_only;
}

static int alloc_handle(mbxC_vfs *v, mbxC_port_error *e) {
  for (size_t i = 0; i < v->handle_cap; i++)
    if (v->handles[i].kind == H_FREE) return (int)i;
  return fail(e, EMFILE, "at most %zu files may be open at once in this sandbox", v->handle_cap);
}

static int handle_number(const handle *h, int slot) {
  return (int)(((h->gen & GEN_MASK) << SLOT_BITS) | (uint32_t)slot);
}

static handle *get_handle(mbxC_vfs *v, int number, mbxC_port_error *e) {
  uint32_t slot = (uint32_t)number & ((1u << SLOT_BITS) - 1);
  uint32_t gen = ((uint32_t)number >> SLOT_BITS) & GEN_MASK;
  if (number < 0 || slot >= v->handle_cap || v->handles[slot].kind == H_FREE ||
      (v->handles[slot].gen & GEN_MASK) != gen) {
    fail(e, EBADF, NULL);
    return NULL;
  }
  return &v->handles[slot];
}

static int want_write(int flags) {
  return (flags & (MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE | MBXC_FS_APPEND)) != 0;
}

static int access_mode(int flags) {
  if ((flags & MBXC_FS_READ) && want_write(flags)) return O_RDWR;
  return want_write(flags) ? O_WRONLY : O_RDONLY;
}

static int quota_file(mbxC_vfs *v, mbxC_port_error *e) {
  if (v->files_used >= v->files_max)
    return fail(e, EDQUOT, "the sandbox may create at most %llu files and directories",
                (unsigned long long)v->files_max);
  return 0;
}

static int quota_bytes(mbxC_vfs *v, uint64_t more, mbxC_port_error *e) {
  if (more > v->bytes_max - v->bytes_used)
    return fail(e, EDQUOT, "the sandbox's write quota of %llu bytes is used up",
                (unsigned long long)v->bytes_max);
  return 0;
}

/* What truncating or removing a host file frees counts against what the guest added (never
   below zero): the quotas bound the mount's net growth, so a guest that rewrites one report
   many times is not charged for every copy. */
static void give_back(mbxC_vfs *v, uint64_t bytes, uint64_t files) {
  v->bytes_used -= bytes < v->bytes_used ? bytes : v->bytes_used;
  v->files_used -= files < v->files_used ? files : v->files_used;
}

static int host_open(mbxC_vfs *v, const where *w, int flags, int *number, mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  int writing = want_write(flags);
  if (writing && m->mode != MBXC_MOUNT_RW)
    return fail(e, EROFS, "%s is mounted read-only", m->path);
  int slot = alloc_handle(v, e);
  if (slot < 0) return -1;
  /* First look without opening: O_PATH never triggers a device's open or blocks on a FIFO. */
  int pfd = beneath(v, m, w->rel, O_PATH, 0);
  int fd = -1, created = 0;
  struct stat st;
  if (pfd < 0) {
    if (-pfd != ENOENT || !(flags & MBXC_FS_CREATE)) return host_fail(e, -pfd, walk_mode(v));
    if (strcmp(w->rel, ".") == 0) return fail(e, EISDIR, NULL);
    if (quota_file(v, e) != 0) return -1;
    const char *name;
    int dfd = parent_of(v, m, w->rel, &name);
    if (dfd < 0) return host_fail(e, -dfd, walk_mode(v));
    /* O_EXCL: whatever appeared at the name since the look above is not opened. */
    fd = openat(dfd, name,
                access_mode(flags) | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY |
                    O_CLOEXEC,
                0644);
    int err = errno;
    close(dfd);
    if (fd < 0) return host_fail(e, err, walk_mode(v));
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      close(fd);
      return fail(e, EACCES, NULL);
    }
    v->files_used++;
    created = 1;
  } else {
    if (fstat(pfd, &st) != 0) {
      int err = errno;
      close(pfd);
      return host_fail(e, err, 0);
    }
    if (S_ISLNK(st.st_mode)) {
      close(pfd);
      return fail(e, ELOOP, "symbolic links are not followed in this mount");
    }
    if (S_ISDIR(st.st_mode)) {
      close(pfd);
      return fail(e, EISDIR, NULL);
    }
    if (!S_ISREG(st.st_mode)) {
      close(pfd);
      return fail(e, EACCES, "not a regular file: the sandbox opens only files and directories");
    }
    if ((flags & MBXC_FS_EXCLUSIVE) && (flags & MBXC_FS_CREATE)) {
      close(pfd);
      return fail(e, EEXIST, NULL);
    }
    /* A file with another hard link may be reached from outside the mount too: writing it
       would write there. */
    if (writing && st.st_nlink > 1) {
      close(pfd);
      return fail(e, EACCES, "the file has other hard links: read-only in the sandbox");
    }
    fd = beneath(v, m, w->rel, access_mode(flags) | O_NONBLOCK | O_NOCTTY, 0);
    struct stat again;
    int err = fd < 0 ? -fd : 0;
    close(pfd);
    if (fd < 0) return host_fail(e, err, walk_mode(v));
    /* Swapped between the look and the open (a rename race on the host): refused. */
    if (fstat(fd, &again) != 0 || again.st_dev != st.st_dev || again.st_ino != st.st_ino ||
        !S_ISREG(again.st_mode)) {
      close(fd);
      return fail(e, EAGAIN, "the file changed while it was being opened");
    }
    st = again;
    if ((flags & MBXC_FS_TRUNCATE) && ftruncate(fd, 0) != 0) {
      err = errno;
      close(fd);
      return host_fail(e, err, 0);
    }
    if (flags & MBXC_FS_TRUNCATE) {
      give_back(v, (uint64_t)st.st_size, 0);
      st.st_size = 0;
    }
  }
  (void)created;
  handle *h = &v->handles[slot];
  h->kind = H_HOST;
  h->gen++;
  h->flags = flags;
  h->pos = 0;
  h->fd = fd;
  h->host_size = (uint64_t)st.st_size;
  h->node = NULL;
  v->open_count++;
  *number = handle_number(h, slot);
  return 0;
}

/* ---- the memory tree ---- */

static int mem_open(mbxC_vfs *v, const where *w, int flags, int *number, mbxC_port_error *e) {
  mnode *n = find_node(v, w->path, w->len);
  int writing = want_write(flags);
  if (n == NULL) {
    if (!(flags & MBXC_FS_CREATE)) return missing(v, w, e);
    mnode *dir = find_node(v, w->path, parent_len(w->path, w->len));
    if (dir == NULL || !dir->is_dir) return missing(v, w, e);
    if (!dir->writable) return fail(e, EROFS, "only /tmp and rw mounts are writable");
    if (quota_file(v, e) != 0) return -1;
  } else {
    if (n->is_dir) return fail(e, EISDIR, NULL);
    if (writing && !n->writable) return fail(e, EROFS, "the policy's files are read-only");
    if ((flags & MBXC_FS_EXCLUSIVE) && (flags & MBXC_FS_CREATE)) return fail(e, EEXIST, NULL);
  }
  int slot = alloc_handle(v, e);
  if (slot < 0) return -1;
  if (n == NULL) {
    if ((n = add_node(v, w->path, w->len, 0, 1)) == NULL) return fail(e, ENOMEM, NULL);
    n->guest_made = 1;
    v->files_used++;
  }
  if ((flags & MBXC_FS_TRUNCATE) && n->len) {
    v->mutations++;
    v->tmp_used -= n->len;
    v->bytes_used -= n->len;
    n->len = 0;
    n->mtime = now_seconds();
  }
  handle *h = &v->handles[slot];
  h->kind = H_MEM;
  h->gen++;
  h->flags = flags;
  h->pos = 0;
  h->fd = -1;
  h->node = n;
  n->opens++;
  v->open_count++;
  *number = handle_number(h, slot);
  return 0;
}

int mbxC_vfs_open(mbxC_vfs *v, const char *path, size_t len, int flags, int *handle_out,
                  mbxC_port_error *e) {
  where w;
  if (locate(v, path, len, &w, e) != 0) return -1;
  return w.mount >= 0 ? host_open(v, &w, flags, handle_out, e)
                      : mem_open(v, &w, flags, handle_out, e);
}

int mbxC_vfs_read(mbxC_vfs *v, int number, char *buf, size_t len, size_t *got,
                  mbxC_port_error *e) {
  handle *h = get_handle(v, number, e);
  *got = 0;
  if (h == NULL) return -1;
  if (!(h->flags & MBXC_FS_READ)) return fail(e, EBADF, NULL);
  if (h->kind == H_MEM) {
    mnode *n = h->node;
    if (h->pos < n->len) {
      size_t k = n->len - (size_t)h->pos < len ? n->len - (size_t)h->pos : len;
      memcpy(buf, n->data + h->pos, k);
      h->pos += k;
      *got = k;
    }
    return 0;
  }
  for (;;) {
    ssize_t k = pread(h->fd, buf, len, (off_t)h->pos);
    if (k >= 0) {
      h->pos += (uint64_t)k;
      *got = (size_t)k;
      return 0;
    }
    if (errno != EINTR) return host_fail(e, errno, 0);
  }
}

static int mem_write(mbxC_vfs *v, handle *h, const char *buf, size_t len, mbxC_port_error *e) {
  mnode *n = h->node;
  if (h->flags & MBXC_FS_APPEND) h->pos = n->len;
  uint64_t end = h->pos + len;
  if (end > n->len) {
    uint64_t more = end - n->len;
    if (more > v->tmp_max - v->tmp_used)
      return fail(e, ENOSPC, "the memory /tmp holds at most %llu bytes",
                  (unsigned long long)v->tmp_max);
    if (quota_bytes(v, more, e) != 0) return -1;
    if (end > n->cap) {
      size_t cap = n->cap ? n->cap : 256;
      while (cap < end)
        cap = cap * 2 < end ? (size_t)end : cap * 2;
      char *grown = realloc(n->data, cap);
      if (grown == NULL) return fail(e, ENOMEM, NULL);
      n->data = grown;
      n->cap = cap;
    }
    if (h->pos > n->len) memset(n->data + n->len, 0, (size_t)(h->pos - n->len));
    v->tmp_used += more;
    v->bytes_used += more;
    n->len = (size_t)end;
  }
  memcpy(n->data + h->pos, buf, len);
  h->pos = end;
  n->mtime = now_seconds();
  v->mutations++;
  return 0;
}

int mbxC_vfs_write(mbxC_vfs *v, int number, const char *buf, size_t len, size_t *put,
                   mbxC_port_error *e) {
  handle *h = get_handle(v, number, e);
  *put = 0;
  if (h == NULL) return -1;
  if (!want_write(h->flags)) return fail(e, EBADF, NULL);
  if (h->kind == H_MEM) {
    if (mem_write(v, h, buf, len, e) != 0) return -1;
    *put = len;
    return 0;
  }
  if (h->flags & MBXC_FS_APPEND) {
    struct stat st;
    if (fstat(h->fd, &st) != 0) return host_fail(e, errno, 0);
    h->pos = (uint64_t)st.st_size;
    if (h->host_size < h->pos) h->host_size = h->pos;
  }
  uint64_t end = h->pos + len;
  if (end > h->host_size && quota_bytes(v, end - h->host_size, e) != 0) return -1;
  size_t done = 0;
  while (done < len) {
    ssize_t k = pwrite(h->fd, buf + done, len - done, (off_t)(h->pos + done));
    if (k < 0) {
      if (errno == EINTR) continue;
      if (done) break;
      return host_fail(e, errno, 0);
    }
    done += (size_t)k;
  }
  h->pos += done;
  if (h->pos > h->host_size) {
    v->bytes_used += h->pos - h->host_size;
    h->host_size = h->pos;
  }
  *put = done;
  return 0;
}

int mbxC_vfs_seek(mbxC_vfs *v, int number, int whence, int64_t offset, int64_t *pos,
                  mbxC_port_error *e) {
  handle *h = get_handle(v, number, e);
  if (h == NULL) return -1;
  int64_t base;
  if (whence == SEEK_SET) {
    base = 0;
  } else if (whence == SEEK_CUR) {
    base = (int64_t)h->pos;
  } else if (whence == SEEK_END) {
    if (h->kind == H_MEM) {
      base = (int64_t)h->node->len;
    } else {
      struct stat st;
      if (fstat(h->fd, &st) != 0) return host_fail(e, errno, 0);
      base = (int64_t)st.st_size;
    }
  } else {
    return fail(e, EINVAL, NULL);
  }
  if ((offset < 0 && base + offset < 0) || (offset > 0 && base > INT64_MAX - offset))
    return fail(e, EINVAL, NULL);
  h->pos = (uint64_t)(base + offset);
  *pos = (int64_t)h->pos;
  return 0;
}

static void release_handle(mbxC_vfs *v, handle *h) {
  if (h->kind == H_HOST) {
    close(h->fd);
  } else if (h->kind == H_MEM) {
    mnode *n = h->node;
    if (--n->opens == 0 && !n->in_table) free_node(n);
  }
  h->kind = H_FREE;
  h->fd = -1;
  h->node = NULL;
  v->open_count--;
}

int mbxC_vfs_close(mbxC_vfs *v, int number, mbxC_port_error *e) {
  handle *h = get_handle(v, number, e);
  if (h == NULL) return -1;
  release_handle(v, h);
  return 0;
}

void mbxC_vfs_close_all(mbxC_vfs *v) {
  for (size_t i = 0; i < v->handle_cap; i++)
    if (v->handles[i].kind != H_FREE) release_handle(v, &v->handles[i]);
}

/* ---- path operations ---- */

int mbxC_vfs_stat(mbxC_vfs *v, const char *path, size_t len, mbxC_fs_stat *out,
                  mbxC_port_error *e) {
  where w;
  memset(out, 0, sizeof *out);
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) {
    mnode *n = find_node(v, w.path, w.len);
    if (n == NULL) return missing(v, &w, e);
    out->is_dir = n->is_dir;
    out->is_file = !n->is_dir;
    out->size = n->len;
    out->mtime = n->mtime;
    out->writable = n->writable;
    return 0;
  }
  const vmount *m = &v->mounts[w.mount];
  int fd = beneath(v, m, w.rel, O_PATH, 0);
  if (fd < 0) return host_fail(e, -fd, walk_mode(v));
  struct stat st;
  int ok = fstat(fd, &st);
  int err = errno;
  close(fd);
  if (ok != 0) return host_fail(e, err, 0);
  /* Only the walk stops on a link (O_PATH | O_NOFOLLOW opens the link itself). */
  if (S_ISLNK(st.st_mode)) return fail(e, ELOOP, "symbolic links are not followed in this mount");
  out->is_dir = S_ISDIR(st.st_mode);
  out->is_file = S_ISREG(st.st_mode);
  out->size = out->is_file ? (uint64_t)st.st_size : 0;
  out->mtime = (int64_t)st.st_mtime;
  out->writable = m->mode == MBXC_MOUNT_RW && (out->is_dir || st.st_nlink <= 1);
  return 0;
}

static int add_name(mbxC_vfs *v, size_t *at, const char *name, size_t n, mbxC_port_error *e) {
  if (*at + n + 1 > v->names_cap) {
    size_t cap = v->names_cap ? v->names_cap * 2 : 1024;
    while (cap < *at + n + 1)
      cap *= 2;
    if (cap > (1u << 20))
      return fail(e, ENOMEM, "the directory lists more than 1 MiB of names");
    char *grown = realloc(v->names, cap);
    if (grown == NULL) return fail(e, ENOMEM, NULL);
    v->names = grown;
    v->names_cap = cap;
  }
  memcpy(v->names + *at, name, n);
  v->names[*at + n] = '\0';
  *at += n + 1;
  return 0;
}

int mbxC_vfs_list(mbxC_vfs *v, const char *path, size_t len, const char **names,
                  size_t *names_len, mbxC_port_error *e) {
  where w;
  size_t at = 0;
  *names = NULL;
  *names_len = 0;
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) {
    mnode *dir = find_node(v, w.path, w.len);
    if (dir == NULL) return missing(v, &w, e);
    if (!dir->is_dir) return fail(e, ENOTDIR, NULL);
    for (size_t i = 0; i < v->node_count; i++) {
      mnode *n = v->nodes[i];
      if (n == dir || n->path_len <= w.len) continue;
      size_t p = parent_len(n->path, n->path_len);
      if (p != w.len || memcmp(n->path, w.path, w.len) != 0) continue;
      const char *base = n->path + (w.len == 1 ? 1 : w.len + 1);
      if (add_name(v, &at, base, strlen(base), e) != 0) return -1;
    }
  } else {
    int fd = beneath(v, &v->mounts[w.mount], w.rel, O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) return host_fail(e, -fd, walk_mode(v));
    DIR *d = fdopendir(fd);
    if (d == NULL) {
      int err = errno;
      close(fd);
      return host_fail(e, err, 0);
    }
    struct dirent *de;
    int rc = 0;
    while ((de = readdir(d)) != NULL) {
      if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
      if ((rc = add_name(v, &at, de->d_name, strlen(de->d_name), e)) != 0) break;
    }
    closedir(d);
    if (rc != 0) return -1;
  }
  *names = v->names ? v->names : "";
  *names_len = at;
  return 0;
}

int mbxC_vfs_mkdir(mbxC_vfs *v, const char *path, size_t len, mbxC_port_error *e) {
  where w;
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) {
    if (find_node(v, w.path, w.len)) return fail(e, EEXIST, NULL);
    mnode *dir = find_node(v, w.path, parent_len(w.path, w.len));
    if (dir == NULL || !dir->is_dir) return missing(v, &w, e);
    if (!dir->writable) return fail(e, EROFS, "only /tmp and rw mounts are writable");
    if (quota_file(v, e) != 0) return -1;
    mnode *n = add_node(v, w.path, w.len, 1, 1);
    if (n == NULL) return fail(e, ENOMEM, NULL);
    n->guest_made = 1;
    v->files_used++;
    return 0;
  }
  const vmount *m = &v->mounts[w.mount];
  if (strcmp(w.rel, ".") == 0) return fail(e, EEXIST, NULL);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  if (quota_file(v, e) != 0) return -1;
  const char *name;
  int dfd = parent_of(v, m, w.rel, &name);
  if (dfd < 0) return host_fail(e, -dfd, walk_mode(v));
  int ok = mkdirat(dfd, name, 0755);
  int err = errno;
  close(dfd);
  if (ok != 0) return host_fail(e, err, 0);
  v->files_used++;
  return 0;
}

int mbxC_vfs_remove(mbxC_vfs *v, const char *path, size_t len, mbxC_port_error *e) {
  where w;
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) {
    mnode *n = find_node(v, w.path, w.len);
    if (n == NULL) return missing(v, &w, e);
    if (!n->writable) return fail(e, EROFS, "only /tmp and rw mounts are writable");
    if (w.len == 4 && memcmp(w.path, "/tmp", 4) == 0) return fail(e, EBUSY, NULL);
    if (n->is_dir) {
      for (size_t i = 0; i < v->node_count; i++)
        if (v->nodes[i] != n && parent_len(v->nodes[i]->path, v->nodes[i]->path_len) == w.len &&
            memcmp(v->nodes[i]->path, w.path, w.len) == 0 && v->nodes[i]->path_len > w.len)
          return fail(e, ENOTEMPTY, NULL);
    }
    v->tmp_used -= n->len;
    v->bytes_used -= n->len;
    if (n->guest_made) v->files_used--;
    unlink_node(v, n);
    return 0;
  }
  const vmount *m = &v->mounts[w.mount];
  if (strcmp(w.rel, ".") == 0) return fail(e, EBUSY, "%s is a mount point", m->path);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  const char *name;
  int dfd = parent_of(v, m, w.rel, &name);
  if (dfd < 0) return host_fail(e, -dfd, walk_mode(v));
  struct stat st;
  int ok = fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW);
  if (ok == 0) ok = unlinkat(dfd, name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
  int err = errno;
  close(dfd);
  if (ok != 0) return host_fail(e, err, 0);
  /* A file with another link frees nothing. */
  if (S_ISDIR(st.st_mode) || st.st_nlink <= 1)
    give_back(v, S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0, 1);
  return 0;
}

static int mem_rename(mbxC_vfs *v, const where *a, const where *b, mbxC_port_error *e) {
  mnode *n = find_node(v, a->path, a->len);
  if (n == NULL) return missing(v, a, e);
  mnode *dir = find_node(v, b->path, parent_len(b->path, b->len));
  if (dir == NULL || !dir->is_dir) return missing(v, b, e);
  if (!n->writable || !dir->writable) return fail(e, EROFS, "only /tmp and rw mounts are writable");
  if (a->len == 4 && memcmp(a->path, "/tmp", 4) == 0) return fail(e, EBUSY, NULL);
  if (a->len == b->len && memcmp(a->path, b->path, a->len) == 0) return 0;
  if (covers(a->path, a->len, b->path, b->len)) return fail(e, EINVAL, NULL);
  mnode *old = find_node(v, b->path, b->len);
  if (old) {
    if (old->is_dir || n->is_dir) return fail(e, old->is_dir ? EISDIR : ENOTDIR, NULL);
    v->tmp_used -= old->len;
    v->bytes_used -= old->len;
    if (old->guest_made) v->files_used--;
    unlink_node(v, old);
  }
  v->mutations++;
  /* The node and, for a directory, everything below it take the new prefix. */
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *c = v->nodes[i];
    if (!covers(a->path, a->len, c->path, c->path_len)) continue;
    size_t rest = c->path_len - a->len;
    if (b->len + rest > MBXC_VFS_PATH_MAX) return fail(e, ENAMETOOLONG, NULL);
  }
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *c = v->nodes[i];
    if (!covers(a->path, a->len, c->path, c->path_len)) continue;
    size_t rest = c->path_len - a->len;
    char *p = malloc(b->len + rest + 1);
    if (p == NULL) return fail(e, ENOMEM, NULL);
    memcpy(p, b->path, b->len);
    memcpy(p + b->len, c->path + a->len, rest);
    p[b->len + rest] = '\0';
    free(c->path);
    c->path = p;
    c->path_len = b->len + rest;
  }
  return 0;
}

int mbxC_vfs_rename(mbxC_vfs *v, const char *from, size_t from_len, const char *to,
                    size_t to_len, mbxC_port_error *e) {
  where a, b;
  if (locate(v, from, from_len, &a, e) != 0 || locate(v, to, to_len, &b, e) != 0) return -1;
  if (a.mount < 0 && b.mount < 0) return mem_rename(v, &a, &b, e);
  if (a.mount != b.mount) {
    /* Existence first, so a missing source reads as missing, as in stock rename. */
    mbxC_fs_stat st;
    if (mbxC_vfs_stat(v, from, from_len, &st, e) != 0) return -1;
    return fail(e, EXDEV, "a rename cannot cross mounts");
  }
  const vmount *m = &v->mounts[a.mount];
  if (strcmp(a.rel, ".") == 0 || strcmp(b.rel, ".") == 0)
    return fail(e, EBUSY, "%s is a mount point", m->path);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  const char *na, *nb;
  int da = parent_of(v, m, a.rel, &na);
  if (da < 0) return host_fail(e, -da, walk_mode(v));
  int db = parent_of(v, m, b.rel, &nb);
  if (db < 0) {
    close(da);
    return host_fail(e, -db, walk_mode(v));
  }
  int ok = renameat(da, na, db, nb);
  int err = errno;
  close(da);
  close(db);
  return ok == 0 ? 0 : host_fail(e, err, 0);
}

/* ---- checkpoints of the memory tree ---- */

typedef struct saved_node {
  char *path;
  size_t path_len;
  int is_dir, guest_made;
  char *data;
  size_t len;
  int64_t mtime;
} saved_node;

struct mbxC_vfs_mark {
  const mbxC_vfs *view; /* the view it was taken of (a reset makes another) */
  uint64_t mutations;
  saved_node *nodes; /* the writable nodes below /tmp; the rest never changes */
  size_t count;
  uint64_t tmp_used;
  uint64_t mem_files; /* guest-made memory nodes */
};

static uint64_t mem_files_of(const mbxC_vfs *v) {
  uint64_t n = 0;
  for (size_t i = 0; i < v->node_count; i++)
    n += v->nodes[i]->guest_made != 0;
  return n;
}

void mbxC_vfs_mark_free(mbxC_vfs_mark *m) {
  if (m == NULL) return;
  for (size_t i = 0; i < m->count; i++) {
    free(m->nodes[i].path);
    free(m->nodes[i].data);
  }
  free(m->nodes);
  free(m);
}

mbxC_vfs_mark *mbxC_vfs_mark_take(const mbxC_vfs *v) {
  mbxC_vfs_mark *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  m->view = v;
  m->mutations = v->mutations;
  m->tmp_used = v->tmp_used;
  m->mem_files = mem_files_of(v);
  if (v->node_count && (m->nodes = calloc(v->node_count, sizeof *m->nodes)) == NULL) goto oom;
  for (size_t i = 0; i < v->node_count; i++) {
    const mnode *n = v->nodes[i];
    if (!n->writable || (n->path_len == 4 && memcmp(n->path, "/tmp", 4) == 0)) continue;
    saved_node *c = &m->nodes[m->count++];
    *c = (saved_node){.path_len = n->path_len, .is_dir = n->is_dir,
                      .guest_made = n->guest_made, .len = n->len, .mtime = n->mtime};
    if ((c->path = mbxU_dup_bytes(n->path, n->path_len)) == NULL ||
        (n->len && (c->data = mbxU_dup_bytes(n->data, n->len)) == NULL))
      goto oom;
  }
  return m;
oom:
  mbxC_vfs_mark_free(m);
  return NULL;
}

int mbxC_vfs_mark_restore(mbxC_vfs *v, const mbxC_vfs_mark *m) {
  mbxC_vfs_close_all(v);
  if (m->view == v && m->mutations == v->mutations) return 0;
  uint64_t mem_files = mem_files_of(v);
  uint64_t host_files = v->files_used > mem_files ? v->files_used - mem_files : 0;
  /* Copies first, so running out of memory changes nothing. */
  mnode **fresh = m->count ? calloc(m->count, sizeof *fresh) : NULL;
  if (m->count && fresh == NULL) return -1;
  for (size_t i = 0; i < m->count; i++) {
    const saved_node *c = &m->nodes[i];
    fresh[i] = calloc(1, sizeof **fresh);
    if (fresh[i] == NULL || (fresh[i]->path = mbxU_dup_bytes(c->path, c->path_len)) == NULL ||
        (c->len && (fresh[i]->data = mbxU_dup_bytes(c->data, c->len)) == NULL)) {
      for (size_t j = 0; j <= i; j++)
        if (fresh[j]) free_node(fresh[j]);
      free(fresh);
      return -1;
    }
    *fresh[i] = (mnode){.path = fresh[i]->path, .path_len = c->path_len, .is_dir = c->is_dir,
                        .writable = 1, .guest_made = c->guest_made, .in_table = 1,
                        .data = fresh[i]->data, .len = c->len, .cap = c->len,
                        .mtime = c->mtime};
  }
  size_t keep = 0;
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *n = v->nodes[i];
    if (n->writable && !(n->path_len == 4 && memcmp(n->path, "/tmp", 4) == 0))
      free_node(n); /* no handle is open: close_all above */
    else
      v->nodes[keep++] = n;
  }
  v->node_count = keep;
  if (keep + m->count > v->node_cap) {
    mnode **grown = realloc(v->nodes, (keep + m->count) * sizeof *grown);
    if (grown == NULL) { /* the tree is now /tmp empty: still consistent */
      for (size_t i = 0; i < m->count; i++)
        free_node(fresh[i]);
      free(fresh);
      v->bytes_used -= v->tmp_used < v->bytes_used ? v->tmp_used : v->bytes_used;
      v->tmp_used = 0;
      v->files_used = host_files;
      v->mutations++;
      return -1;
    }
    v->nodes = grown;
    v->node_cap = keep + m->count;
  }
  for (size_t i = 0; i < m->count; i++)
    v->nodes[v->node_count++] = fresh[i];
  free(fresh);
  /* The quotas follow the memory tree back; what rw mounts grew by stays counted. */
  uint64_t host_bytes = v->bytes_used > v->tmp_used ? v->bytes_used - v->tmp_used : 0;
  v->bytes_used = host_bytes + m->tmp_used;
  v->tmp_used = m->tmp_used;
  v->files_used = host_files + m->mem_files;
  v->mutations++;
  return 0;
}
