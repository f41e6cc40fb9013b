/* capabilities/exec_copy.c -- the copy of the view's overlay and rw mounts and memory /tmp a
   process sees, and its writes applied back to the view (exec_copy.h says how and why). */
#include "capabilities/exec_copy.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* ---- building ---- */

int mbxC_exec_reserve(char **buf, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t grown_cap = *cap ? *cap : 4096;
  while (grown_cap < need)
    grown_cap *= 2;
  char *grown = realloc(*buf, grown_cap);
  if (grown == NULL) return -1;
  *buf = grown;
  *cap = grown_cap;
  return 0;
}

/* An item of the index (what was sent, without file bytes): a file's item holds its size in
   decimal after the NUL, for the quota check of the copy-back. */
static void put(mbxC_exec_copy *c, char tag, const char *a, size_t al, const char *b, size_t bl) {
  char head[32];
  size_t dl = al + (b ? 1 + bl : 0);
  int hn = snprintf(head, sizeof head, "%c%zu:", tag, dl);
  size_t need = c->len + (size_t)hn + dl;
  if (c->failed) return;
  if (mbxC_exec_reserve(&c->blob, &c->cap, need) != 0) {
    c->failed = 1;
    return;
  }
  memcpy(c->blob + c->len, head, (size_t)hn);
  c->len += (size_t)hn;
  memcpy(c->blob + c->len, a, al);
  c->len += al;
  if (b) {
    c->blob[c->len++] = '\0';
    if (bl) memcpy(c->blob + c->len, b, bl);
    c->len += bl;
  }
}

int mbxC_exec_fail(mbxC_port_error *e, int errnum, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  e->errnum = errnum;
  vsnprintf(e->message, sizeof e->message, fmt, ap);
  va_end(ap);
  return -1;
}

/* a is b or lies below it. */
static int within(const char *a, size_t al, const char *b, size_t bl) {
  return al >= bl && memcmp(a, b, bl) == 0 && (al == bl || a[bl] == '/' || bl == 1);
}

/* path (below root) is an excluded path or lies below one; an excluded path that is the root
   or holds it (the root is itself a mount) excludes nothing of the root's. */
static int is_excluded(const char *const *ex, const size_t *ex_len, size_t nex, const char *root,
                       size_t root_len, const char *path, size_t len) {
  for (size_t i = 0; i < nex; i++) {
    size_t el = ex_len ? ex_len[i] : strlen(ex[i]);
    if (within(root, root_len, ex[i], el)) continue;
    if (within(path, len, ex[i], el)) return 1;
  }
  return 0;
}

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* All of p on the socket to the shim, within the run's deadline: the shim reads as it
   unpacks, so the copy never sits whole in this process. */
static int send_all(mbxC_exec_copy *c, const char *p, size_t n, mbxC_port_error *e) {
  const mbxC_wait *wait = c->wait;
  while (n > 0) {
    ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w > 0) {
      p += w;
      n -= (size_t)w;
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN)
      return mbxC_exec_fail(e, EPIPE, "the sandbox ended before the copy of the view was in");
    if (wait && wait->deadline_ns && mono_ns() >= wait->deadline_ns)
      return mbxC_exec_fail(e, MBXC_E_TIMEDOUT,
                            "the run's time limit was reached while the view was copied in");
    if (wait && wait->interrupted && wait->interrupted(wait->ctx))
      return mbxC_exec_fail(e, EINTR, "interrupted while the view was copied in");
    struct pollfd pf = {c->fd, POLLOUT, 0};
    poll(&pf, 1, 50);
  }
  return 0;
}

/* An archive item's head on the socket: "<tag><length>:". */
static int send_head(mbxC_exec_copy *c, char tag, size_t len, mbxC_port_error *e) {
  char head[32];
  int hn = snprintf(head, sizeof head, "%c%zu:", tag, len);
  return send_all(c, head, (size_t)hn, e);
}

typedef struct walk {
  mbxC_exec_copy *c;
  mbxC_vfs *v;
  const char *root;
  int host_fd; /* the root's host directory (an overlay or rw mount), or -1 */
  int sending; /* 0: the plan pass (stat only), 1: the send pass */
  mbxC_port_error *e;
} walk;

/* The host file under the root is executable (so a program or script in an rw or overlay mount
   still runs as ./tool): looked at beneath the mount's held dirfd, never following a link, as
   the view opens it. A file the guest made (memory only) is not. */
static int host_executable(const walk *w, const char *path, size_t len) {
  size_t rl = strlen(w->root);
  if (w->host_fd < 0 || len <= rl + 1) return 0;
  struct open_how how = {.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC,
                         .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS};
  long fd = syscall(SYS_openat2, w->host_fd, path + rl + 1, &how, sizeof how);
  if (fd < 0) return 0;
  struct stat st;
  int x = fstat((int)fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0111);
  close((int)fd);
  return x;
}

/* A file's bytes onto the socket, in chunks read through the view: exactly size bytes (a host
   file under an overlay that changed since its stat is cut or padded with zeros: the process
   sees a consistent length). E instead of F: the shim makes it executable. */
static int send_file(walk *w, const char *path, size_t len, uint64_t size) {
  mbxC_exec_copy *c = w->c;
  char buf[65536];
  int h;
  /* Opened first: a file gone since its stat is left out; any other failure (the handle
     quota, an I/O error) fails the copy rather than hand the process other bytes. */
  if (mbxC_vfs_open(w->v, path, len, MBXC_FS_READ, &h, w->e) != 0)
    return w->e->errnum == ENOENT ? 0 : -1;
  char size_text[24];
  int sl = snprintf(size_text, sizeof size_text, "%llu", (unsigned long long)size);
  put(c, 'F', path, len, size_text, (size_t)sl);
  char tag = host_executable(w, path, len) ? 'E' : 'F';
  int r = send_head(c, tag, len + 1 + (size_t)size, w->e);
  if (r == 0) r = send_all(c, path, len, w->e);
  if (r == 0) r = send_all(c, "", 1, w->e);
  uint64_t sent = 0;
  int eof = 0;
  while (r == 0 && sent < size) {
    size_t want = size - sent < sizeof buf ? (size_t)(size - sent) : sizeof buf, k = 0;
    if (!eof && mbxC_vfs_read(w->v, h, buf, want, &k, w->e) != 0) {
      r = -1;
      break;
    }
    if (k == 0) {
      eof = 1; /* shrank since its stat: the length sent stays what was said */
      memset(buf, 0, want);
      k = want;
    }
    r = send_all(c, buf, k, w->e);
    sent += k;
  }
  mbxC_port_error ignored;
  mbxC_vfs_close(w->v, h, &ignored);
  return r;
}

static int walk_dir(walk *w, const char *path, size_t len, int depth) {
  mbxC_exec_copy *c = w->c;
  const char *names;
  size_t names_len;
  if (mbxC_vfs_list(w->v, path, len, &names, &names_len, w->e) != 0) return -1;
  /* The names are valid until the next view call: a copy. */
  char *copy = malloc(names_len ? names_len : 1);
  if (copy == NULL) return mbxC_exec_fail(w->e, ENOMEM, "out of host memory");
  if (names_len) memcpy(copy, names, names_len);
  int r = 0;
  char child[MBXC_VFS_PATH_BUF];
  for (size_t off = 0; r == 0 && off < names_len;) {
    const char *name = copy + off;
    size_t nl = strlen(name);
    off += nl + 1;
    if (len + 1 + nl > MBXC_VFS_PATH_MAX) continue; /* the view could not open it either */
    memcpy(child, path, len);
    child[len] = '/';
    memcpy(child + len + 1, name, nl + 1);
    size_t cl = len + 1 + nl;
    if (is_excluded(c->excluded, NULL, c->nex, w->root, strlen(w->root), child, cl)) continue;
    mbxC_fs_stat st;
    if (mbxC_vfs_stat(w->v, child, cl, &st, w->e) != 0) {
      if (w->e->errnum == ENOENT) continue; /* gone from the host meanwhile */
      r = -1;
      break;
    }
    if (!st.is_dir && !st.is_file) continue; /* the view refuses FIFOs and devices too */
    if (++c->entries > MBXC_EXEC_COPY_ENTRIES) {
      r = mbxC_exec_fail(
          w->e, EFBIG,
          "%s holds more than %u files and directories: exec copies overlay and rw mounts "
          "and /tmp into the process's view (use a ro mount for large trees)",
          w->root, MBXC_EXEC_COPY_ENTRIES);
      break;
    }
    if (st.is_dir) {
      if (depth + 1 > MBXC_EXEC_COPY_DEPTH) {
        r = mbxC_exec_fail(w->e, EFBIG, "%s is more than %d directories deep: exec cannot copy it",
                           w->root, MBXC_EXEC_COPY_DEPTH);
        break;
      }
      if (w->sending) {
        put(c, 'D', child, cl, NULL, 0);
        r = send_head(c, 'D', cl, w->e);
        if (r == 0) r = send_all(c, child, cl, w->e);
      }
      if (r == 0) r = walk_dir(w, child, cl, depth + 1);
      continue;
    }
    if (st.size > MBXC_EXEC_COPY_MAX - c->bytes) {
      r = mbxC_exec_fail(
          w->e, EFBIG,
          "the files under %s come to more than %llu bytes: exec copies overlay and rw mounts "
          "and /tmp into the process's view (use a ro mount for large trees)",
          w->root, (unsigned long long)MBXC_EXEC_COPY_MAX);
      break;
    }
    c->bytes += st.size;
    if (w->sending) r = send_file(w, child, cl, st.size);
  }
  free(copy);
  if (r == 0 && c->failed) r = mbxC_exec_fail(w->e, ENOMEM, "out of host memory");
  return r;
}

int mbxC_exec_copy_plan(mbxC_exec_copy *c, mbxC_vfs *v, const char *const *roots, const int *rw,
                        const int *host_fds, size_t nroots, const char *const *excluded, size_t nex,
                        const int *droppable, int *dropped, mbxC_port_error *e) {
  memset(c, 0, sizeof *c);
  c->fd = -1;
  if (nroots > MBXC_EXEC_COPY_ROOTS) return mbxC_exec_fail(e, EINVAL, "too many roots to copy");
  c->v = v;
  c->excluded = excluded;
  c->nex = nex;
  for (size_t i = 0; i < nroots; i++) {
    /* A droppable root past a cap is left out whole (its counts taken back), so the rest
       still fits. */
    size_t entries = c->entries;
    uint64_t bytes = c->bytes;
    if (dropped) dropped[i] = 0;
    walk w = {c, v, roots[i], -1, 0, e};
    if (walk_dir(&w, roots[i], strlen(roots[i]), 0) == 0) {
      if (rw && rw[i]) c->rw_bytes += c->bytes - bytes;
      c->roots[c->nroots] = roots[i];
      c->host_fd[c->nroots] = host_fds ? host_fds[i] : -1;
      c->rw[c->nroots++] = rw ? rw[i] : 0;
      continue;
    }
    if (e->errnum == EFBIG && droppable && droppable[i] && dropped) {
      c->entries = entries;
      c->bytes = bytes;
      dropped[i] = 1;
      if (c->note[0] == '\0') snprintf(c->note, sizeof c->note, "%.199s", e->message);
      continue;
    }
    mbxC_exec_copy_free(c);
    return -1;
  }
  return 0;
}

int mbxC_exec_copy_send(mbxC_exec_copy *c, int fd, const mbxC_wait *wait, mbxC_port_error *e) {
  c->fd = fd;
  c->wait = wait;
  c->len = 0;
  c->entries = 0;
  c->bytes = 0;
  /* The exclusions, then each root (R, or W for an rw mount: the library's own tag, the shim
     treats both alike) and what is under it; Z ends the copy, so the shim can tell a complete
     copy from one cut short. */
  int r = 0;
  for (size_t i = 0; r == 0 && i < c->nex; i++) {
    size_t l = strlen(c->excluded[i]);
    put(c, 'X', c->excluded[i], l, NULL, 0);
    r = send_head(c, 'X', l, e);
    if (r == 0) r = send_all(c, c->excluded[i], l, e);
  }
  for (size_t i = 0; r == 0 && i < c->nroots; i++) {
    size_t l = strlen(c->roots[i]);
    char tag = c->rw[i] ? 'W' : 'R';
    put(c, tag, c->roots[i], l, NULL, 0);
    r = send_head(c, tag, l, e);
    if (r == 0) r = send_all(c, c->roots[i], l, e);
    walk w = {c, c->v, c->roots[i], c->host_fd[i], 1, e};
    if (r == 0) r = walk_dir(&w, c->roots[i], l, 0);
  }
  if (r == 0) r = send_head(c, 'Z', 0, e);
  if (r == 0 && c->failed) r = mbxC_exec_fail(e, ENOMEM, "out of host memory");
  c->fd = -1;
  c->wait = NULL;
  return r;
}

void mbxC_exec_copy_free(mbxC_exec_copy *c) {
  free(c->blob);
  memset(c, 0, sizeof *c);
  c->fd = -1;
}

/* ---- applying ---- */

typedef struct entry {
  char tag;
  const char *path;
  size_t path_len;
  const char *data;
  size_t len;
  uint64_t size; /* the index's: a file's size when it was copied in */
  int rw;        /* below an rw mount's root: applied to the host, after the memory roots */
} entry;

typedef struct entries {
  entry *at;
  size_t n, cap;
  const char *roots[MBXC_VFS_MAX_MOUNTS + 1];
  size_t root_len[MBXC_VFS_MAX_MOUNTS + 1];
  int root_rw[MBXC_VFS_MAX_MOUNTS + 1];
  size_t nroots;
  const char *ex[MBXC_VFS_MAX_MOUNTS + MBXC_VFS_MAX_FILES];
  size_t ex_len[MBXC_VFS_MAX_MOUNTS + MBXC_VFS_MAX_FILES];
  size_t nex;
  int ended;
} entries;

static int cmp_entry(const void *a, const void *b) {
  const entry *x = a, *y = b;
  size_t n = x->path_len < y->path_len ? x->path_len : y->path_len;
  int c = memcmp(x->path, y->path, n);
  return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

static int below(const char *p, size_t pl, const char *dir, size_t dl) {
  return pl > dl && memcmp(p, dir, dl) == 0 && p[dl] == '/';
}

/* Parse an archive. trusted: ours (R and X items are taken from it); else the shim's, every
   entry checked against the roots and exclusions of ours (in). 0, or -1 with why. */
static int parse(const char *p, size_t len, entries *es, const entries *in, char *why,
                 size_t why_size) {
  const char *end = p + len;
  while (p < end) {
    char tag = *p;
    char *colon;
    errno = 0;
    unsigned long long n = strtoull(p + 1, &colon, 10);
    if (errno || colon >= end || *colon != ':' || n > (unsigned long long)(end - colon - 1)) {
      snprintf(why, why_size, "the copy-back is malformed");
      return -1;
    }
    const char *d = colon + 1;
    p = d + n;
    if (es->ended) {
      snprintf(why, why_size, "the copy-back has data past its end");
      return -1;
    }
    if (tag == 'Z') {
      es->ended = 1;
      continue;
    }
    if (in == NULL && (tag == 'R' || tag == 'W' || tag == 'X')) {
      if (tag != 'X' && es->nroots < MBXC_VFS_MAX_MOUNTS + 1) {
        es->roots[es->nroots] = d;
        es->root_rw[es->nroots] = tag == 'W';
        es->root_len[es->nroots++] = (size_t)n;
      }
      if (tag == 'X' && es->nex < MBXC_VFS_MAX_MOUNTS + MBXC_VFS_MAX_FILES) {
        es->ex[es->nex] = d;
        es->ex_len[es->nex++] = (size_t)n;
      }
      continue;
    }
    if (tag != 'D' && tag != 'F' && tag != 'S' && (tag != 'U' || in == NULL)) {
      snprintf(why, why_size, "the copy-back has an unknown item");
      return -1;
    }
    const char *nul = tag == 'F' ? memchr(d, '\0', (size_t)n) : NULL;
    size_t pl = tag == 'F' ? (nul ? (size_t)(nul - d) : (size_t)n + 1) : (size_t)n;
    if (pl > n || pl == 0 || pl > MBXC_VFS_PATH_MAX || !mbxC_vfs_is_canonical(d, pl) ||
        memchr(d, '\0', pl)) {
      snprintf(why, why_size, "the copy-back names a path that is not canonical");
      return -1;
    }
    /* Below one root, not at or below an excluded path (checked for the untrusted copy-back;
       for the index, which root says whether it is an rw mount's). */
    const entries *roots = in ? in : es;
    int ok = 0, rw = 0;
    for (size_t i = 0; i < roots->nroots && !ok; i++) {
      ok = below(d, pl, roots->roots[i], roots->root_len[i]) &&
           !is_excluded(roots->ex, roots->ex_len, roots->nex, roots->roots[i], roots->root_len[i],
                        d, pl);
      rw = ok && roots->root_rw[i];
    }
    if (in) {
      if (!ok) {
        snprintf(why, why_size, "the copy-back names %.*s, outside what was copied in",
                 (int)(pl < 100 ? pl : 100), d);
        return -1;
      }
    }
    if (es->n == es->cap) {
      size_t cap = es->cap ? es->cap * 2 : 64;
      entry *grown = realloc(es->at, cap * sizeof *grown);
      if (grown == NULL) {
        snprintf(why, why_size, "out of host memory");
        return -1;
      }
      es->at = grown;
      es->cap = cap;
    }
    if (es->n >= MBXC_EXEC_COPY_ENTRIES) {
      snprintf(why, why_size,
               "the process left more than %u files and directories in the "
               "copied roots",
               MBXC_EXEC_COPY_ENTRIES);
      return -1;
    }
    entry x = {tag, d, pl, tag == 'F' ? d + pl + 1 : NULL, tag == 'F' ? (size_t)n - pl - 1 : 0,
               0,   rw};
    /* The index's "path\0size": the digits are not NUL-terminated (the next item follows). */
    for (size_t k = 0;
         in == NULL && tag == 'F' && k < x.len && x.data[k] >= '0' && x.data[k] <= '9'; k++)
      x.size = x.size * 10 + (uint64_t)(x.data[k] - '0');
    es->at[es->n++] = x;
  }
  return 0;
}

/* One step of the application, on the view. */
static int apply_one(mbxC_vfs *v, const entry *x, int remove, char *why, size_t why_size) {
  mbxC_port_error e = {0, ""};
  int r;
  if (remove) {
    r = mbxC_vfs_remove(v, x->path, x->path_len, &e);
  } else if (x->tag == 'D') {
    r = mbxC_vfs_mkdir(v, x->path, x->path_len, &e);
  } else {
    int h;
    r = mbxC_vfs_open(v, x->path, x->path_len, MBXC_FS_WRITE | MBXC_FS_CREATE | MBXC_FS_TRUNCATE,
                      &h, &e);
    for (size_t off = 0; r == 0 && off < x->len;) {
      size_t put = 0;
      r = mbxC_vfs_write(v, h, x->data + off, x->len - off, &put, &e);
      if (r == 0 && put == 0)
        r = -1, e.errnum = EIO, snprintf(e.message, sizeof e.message, "short write");
      off += put;
    }
    if (r == 0) {
      r = mbxC_vfs_close(v, h, &e);
    } else {
      mbxC_port_error ignored;
      mbxC_vfs_close(v, h, &ignored);
    }
  }
  if (r != 0)
    snprintf(why, why_size, "%s %.*s: %s", remove ? "removing" : "writing",
             (int)(x->path_len < 120 ? x->path_len : 120), x->path, e.message);
  return r;
}

int mbxC_exec_copy_apply(mbxC_vfs *v, const mbxC_exec_copy *in, const char *back, size_t back_len,
                         uint64_t bytes_max, uint64_t files_max, size_t *applied, char *why,
                         size_t why_size) {
  *applied = 0;
  entries *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
  int r = -1;
  if (a == NULL || b == NULL) {
    snprintf(why, why_size, "out of host memory");
    goto done;
  }
  if (parse(in->blob, in->len, a, NULL, why, why_size) != 0) goto done;
  if (parse(back, back_len, b, a, why, why_size) != 0) goto done;
  if (!b->ended) {
    snprintf(why, why_size,
             "the copy-back was cut short (the process tree was killed or its "
             "shim ended early)");
    goto done;
  }
  if (a->n > 1) qsort(a->at, a->n, sizeof *a->at, cmp_entry);
  if (b->n > 1) qsort(b->at, b->n, sizeof *b->at, cmp_entry);
  for (size_t i = 1; i < b->n; i++)
    if (cmp_entry(&b->at[i - 1], &b->at[i]) == 0) {
      snprintf(why, why_size, "the copy-back names a path twice");
      goto done;
    }
  /* A file named unchanged (U) must be one that went in as a file. */
  for (size_t i = 0, j = 0; i < b->n; i++) {
    const entry *x = &b->at[i];
    while (j < a->n && cmp_entry(&a->at[j], x) < 0)
      j++;
    if (x->tag != 'U' || (j < a->n && cmp_entry(&a->at[j], x) == 0 && a->at[j].tag == 'F'))
      continue;
    snprintf(why, why_size, "the copy-back names %.*s unchanged, which was not copied in",
             (int)(x->path_len < 100 ? x->path_len : 100), x->path);
    goto done;
  }
  mbxC_vfs_mark *mark = mbxC_vfs_mark_take(v);
  if (mark == NULL) {
    snprintf(why, why_size, "out of host memory");
    goto done;
  }
  size_t count = 0;
  int bad = 0;
  /* Two passes: the memory roots (/tmp, overlays), which the mark restores, then the rw
     mounts, whose writes reach the host and cannot be undone: they start only once the rest
     is applied and the quotas are shown to hold for all of them. */
  for (int pass = 0; pass < 2 && !bad; pass++) {
    if (pass == 1) {
      uint64_t files = 0, bytes = 0;
      for (size_t i = 0, j = 0; i < b->n; i++) {
        const entry *x = &b->at[i];
        if (!x->rw || x->tag == 'S' || x->tag == 'U') continue;
        while (j < a->n && cmp_entry(&a->at[j], x) < 0)
          j++;
        const entry *was = j < a->n && cmp_entry(&a->at[j], x) == 0 ? &a->at[j] : NULL;
        if (was == NULL || was->tag != x->tag) files++;
        if (x->tag == 'F' && x->len > (was && was->tag == 'F' ? was->size : 0))
          bytes += x->len - (was && was->tag == 'F' ? was->size : 0);
      }
      uint64_t bytes_used = mbxC_vfs_bytes_used(v), files_used = mbxC_vfs_files_used(v);
      uint64_t bytes_left = bytes_max > bytes_used ? bytes_max - bytes_used : 0;
      uint64_t files_left = files_max > files_used ? files_max - files_used : 0;
      if (files > files_left || bytes > bytes_left) {
        snprintf(why, why_size,
                 "the process left %llu new files and %llu more bytes in rw mounts: the "
                 "sandbox's quotas allow %llu and %llu more (nothing was applied)",
                 (unsigned long long)files, (unsigned long long)bytes,
                 (unsigned long long)files_left, (unsigned long long)bytes_left);
        bad = 1;
        break;
      }
    }
    /* Removals: what went in and is not there now (an entry of another kind, S, leaves what
       was there as it was; U is the file as it went in), children first. */
    for (size_t i = a->n, j = b->n; i-- > 0 && !bad;) {
      while (j > 0 && cmp_entry(&b->at[j - 1], &a->at[i]) > 0)
        j--;
      if (a->at[i].rw != pass) continue;
      const entry *now = j > 0 && cmp_entry(&b->at[j - 1], &a->at[i]) == 0 ? &b->at[j - 1] : NULL;
      if (now &&
          (now->tag == 'S' || now->tag == a->at[i].tag || (now->tag == 'U' && a->at[i].tag == 'F')))
        continue;
      /* A directory that holds an excluded path (a mount point, a policy file) is the view's
         own: it stays whatever the process did. */
      int holds = 0;
      for (size_t k = 0; k < a->nex && !holds && a->at[i].tag == 'D'; k++)
        holds = below(a->ex[k], a->ex_len[k], a->at[i].path, a->at[i].path_len);
      if (holds) continue;
      bad = apply_one(v, &a->at[i], 1, why, why_size) != 0;
      count++;
    }
    /* Creations and modifications, parents first: a file the shim sends whole (F) differs
       from what went in (the shim sends U for one that does not). */
    for (size_t i = 0, j = 0; i < b->n && !bad; i++) {
      const entry *x = &b->at[i];
      while (j < a->n && cmp_entry(&a->at[j], x) < 0)
        j++;
      if (x->tag == 'S' || x->rw != pass) continue;
      const entry *was = j < a->n && cmp_entry(&a->at[j], x) == 0 ? &a->at[j] : NULL;
      if (x->tag == 'U') continue;
      if (was && was->tag == 'D' && x->tag == 'D') continue;
      bad = apply_one(v, x, 0, why, why_size) != 0;
      count++;
    }
  }
  if (bad) {
    /* Nothing half-applied: the view goes back to before the first step. */
    if (mbxC_vfs_mark_restore(v, mark) != 0)
      snprintf(why + strlen(why), why_size - strlen(why), " (and the view could not be restored)");
  } else {
    *applied = count;
    r = 0;
  }
  mbxC_vfs_mark_free(mark);
done:
  if (a) free(a->at);
  if (b) free(b->at);
  free(a);
  free(b);
  return r;
}
