/* capabilities/exec_copy.c -- the copy of the view's overlay mounts and memory /tmp a process
   sees, and its writes applied back to the view (exec_copy.h says how and why). */
#include "capabilities/exec_copy.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

typedef struct walk {
  mbxC_exec_copy *c;
  mbxC_vfs *v;
  const char *root;
  const char *const *ex;
  size_t nex;
  mbxC_port_error *e;
} walk;

static int read_whole(mbxC_vfs *v, const char *path, size_t len, uint64_t size, char **data,
                      size_t *n, mbxC_port_error *e) {
  int h;
  if (mbxC_vfs_open(v, path, len, MBXC_FS_READ, &h, e) != 0) return -1;
  size_t cap = (size_t)size + 1, got = 0;
  char *buf = malloc(cap);
  int r = buf ? 0 : mbxC_exec_fail(e, ENOMEM, "out of host memory");
  while (r == 0) {
    if (got == cap) {
      /* The file grew since its stat (a host file under an overlay): still within the cap. */
      if (got >= MBXC_EXEC_COPY_MAX) {
        r = mbxC_exec_fail(e, EFBIG, "a file grew past %llu bytes while it was copied",
                           (unsigned long long)MBXC_EXEC_COPY_MAX);
        break;
      }
      char *grown = realloc(buf, cap * 2);
      if (grown == NULL) {
        r = mbxC_exec_fail(e, ENOMEM, "out of host memory");
        break;
      }
      buf = grown;
      cap *= 2;
    }
    size_t k = 0;
    r = mbxC_vfs_read(v, h, buf + got, cap - got, &k, e);
    if (r == 0 && k == 0) break;
    got += k;
  }
  mbxC_port_error ignored;
  mbxC_vfs_close(v, h, &ignored);
  if (r != 0) {
    free(buf);
    return -1;
  }
  *data = buf;
  *n = got;
  return 0;
}

static int walk_dir(walk *w, const char *path, size_t len, int depth) {
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
    if (is_excluded(w->ex, NULL, w->nex, w->root, strlen(w->root), child, cl)) continue;
    mbxC_fs_stat st;
    if (mbxC_vfs_stat(w->v, child, cl, &st, w->e) != 0) {
      if (w->e->errnum == ENOENT) continue; /* gone from the host meanwhile */
      r = -1;
      break;
    }
    if (!st.is_dir && !st.is_file) continue; /* the view refuses FIFOs and devices too */
    if (++w->c->entries > MBXC_EXEC_COPY_ENTRIES) {
      r = mbxC_exec_fail(
          w->e, EFBIG,
          "%s holds more than %u files and directories: exec copies overlay mounts and "
          "/tmp into the process's view (use a ro or rw mount for large trees)",
          w->root, MBXC_EXEC_COPY_ENTRIES);
      break;
    }
    if (st.is_dir) {
      if (depth + 1 > MBXC_EXEC_COPY_DEPTH) {
        r = mbxC_exec_fail(w->e, EFBIG, "%s is more than %d directories deep: exec cannot copy it",
                           w->root, MBXC_EXEC_COPY_DEPTH);
        break;
      }
      put(w->c, 'D', child, cl, NULL, 0);
      r = walk_dir(w, child, cl, depth + 1);
      continue;
    }
    if (st.size > MBXC_EXEC_COPY_MAX - w->c->bytes) {
      r = mbxC_exec_fail(
          w->e, EFBIG,
          "the files under %s come to more than %llu bytes: exec copies overlay mounts "
          "and /tmp into the process's view (use a ro or rw mount for large trees)",
          w->root, (unsigned long long)MBXC_EXEC_COPY_MAX);
      break;
    }
    char *data = NULL;
    size_t n = 0;
    r = read_whole(w->v, child, cl, st.size, &data, &n, w->e);
    if (r != 0) break;
    if (n > MBXC_EXEC_COPY_MAX - w->c->bytes) {
      free(data);
      r = mbxC_exec_fail(w->e, EFBIG, "the files under %s come to more than %llu bytes", w->root,
                         (unsigned long long)MBXC_EXEC_COPY_MAX);
      break;
    }
    w->c->bytes += n;
    put(w->c, 'F', child, cl, data ? data : "", n);
    free(data);
  }
  free(copy);
  if (r == 0 && w->c->failed) r = mbxC_exec_fail(w->e, ENOMEM, "out of host memory");
  return r;
}

int mbxC_exec_copy_build(mbxC_exec_copy *c, mbxC_vfs *v, const char *const *roots, size_t nroots,
                         const char *const *excluded, size_t nex, const int *droppable,
                         int *dropped, mbxC_port_error *e) {
  memset(c, 0, sizeof *c);
  for (size_t i = 0; i < nex; i++)
    put(c, 'X', excluded[i], strlen(excluded[i]), NULL, 0);
  for (size_t i = 0; i < nroots; i++) {
    /* Each root's items follow its R item; a droppable root past a cap is taken out again
       whole (the archive, the counts), so the rest still fits. */
    size_t at = c->len, entries = c->entries;
    uint64_t bytes = c->bytes;
    if (dropped) dropped[i] = 0;
    put(c, 'R', roots[i], strlen(roots[i]), NULL, 0);
    walk w = {c, v, roots[i], excluded, nex, e};
    if (walk_dir(&w, roots[i], strlen(roots[i]), 0) == 0) {
      c->nroots++;
      continue;
    }
    if (e->errnum == EFBIG && droppable && droppable[i] && dropped && !c->failed) {
      c->len = at;
      c->entries = entries;
      c->bytes = bytes;
      dropped[i] = 1;
      if (c->note[0] == '\0') snprintf(c->note, sizeof c->note, "%.199s", e->message);
      continue;
    }
    mbxC_exec_copy_free(c);
    return -1;
  }
  if (c->failed) {
    mbxC_exec_copy_free(c);
    return mbxC_exec_fail(e, ENOMEM, "out of host memory");
  }
  return 0;
}

void mbxC_exec_copy_free(mbxC_exec_copy *c) {
  free(c->blob);
  memset(c, 0, sizeof *c);
}

/* ---- applying ---- */

typedef struct entry {
  char tag;
  const char *path;
  size_t path_len;
  const char *data;
  size_t len;
} entry;

typedef struct entries {
  entry *at;
  size_t n, cap;
  const char *roots[MBXC_VFS_MAX_MOUNTS + 1];
  size_t root_len[MBXC_VFS_MAX_MOUNTS + 1];
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
    if (in == NULL && (tag == 'R' || tag == 'X')) {
      if (tag == 'R' && es->nroots < MBXC_VFS_MAX_MOUNTS + 1) {
        es->roots[es->nroots] = d;
        es->root_len[es->nroots++] = (size_t)n;
      }
      if (tag == 'X' && es->nex < MBXC_VFS_MAX_MOUNTS + MBXC_VFS_MAX_FILES) {
        es->ex[es->nex] = d;
        es->ex_len[es->nex++] = (size_t)n;
      }
      continue;
    }
    if (tag != 'D' && tag != 'F' && tag != 'S') {
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
    if (in) {
      /* Untrusted: below one root, not at or below an excluded path. */
      int ok = 0;
      for (size_t i = 0; i < in->nroots && !ok; i++)
        ok = below(d, pl, in->roots[i], in->root_len[i]) &&
             !is_excluded(in->ex, in->ex_len, in->nex, in->roots[i], in->root_len[i], d, pl);
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
    es->at[es->n++] =
        (entry){tag, d, pl, tag == 'F' ? d + pl + 1 : NULL, tag == 'F' ? (size_t)n - pl - 1 : 0};
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
                         size_t *applied, char *why, size_t why_size) {
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
  /* Removals: what went in and is not there now (an entry of another kind, S, leaves what was
     there as it was), children first. */
  mbxC_vfs_mark *mark = mbxC_vfs_mark_take(v);
  if (mark == NULL) {
    snprintf(why, why_size, "out of host memory");
    goto done;
  }
  size_t count = 0;
  int bad = 0;
  for (size_t i = a->n, j = b->n; i-- > 0 && !bad;) {
    while (j > 0 && cmp_entry(&b->at[j - 1], &a->at[i]) > 0)
      j--;
    const entry *now = j > 0 && cmp_entry(&b->at[j - 1], &a->at[i]) == 0 ? &b->at[j - 1] : NULL;
    if (now && (now->tag == 'S' || now->tag == a->at[i].tag)) continue;
    /* A directory that holds an excluded path (a mount point, a policy file) is the view's
       own: it stays whatever the process did. */
    int holds = 0;
    for (size_t k = 0; k < a->nex && !holds && a->at[i].tag == 'D'; k++)
      holds = below(a->ex[k], a->ex_len[k], a->at[i].path, a->at[i].path_len);
    if (holds) continue;
    bad = apply_one(v, &a->at[i], 1, why, why_size) != 0;
    count++;
  }
  /* Creations and modifications, parents first. */
  for (size_t i = 0, j = 0; i < b->n && !bad; i++) {
    const entry *x = &b->at[i];
    if (x->tag == 'S') continue;
    while (j < a->n && cmp_entry(&a->at[j], x) < 0)
      j++;
    const entry *was = j < a->n && cmp_entry(&a->at[j], x) == 0 ? &a->at[j] : NULL;
    if (was && was->tag == x->tag &&
        (x->tag == 'D' || (was->len == x->len && memcmp(was->data, x->data, x->len) == 0)))
      continue;
    bad = apply_one(v, x, 0, why, why_size) != 0;
    count++;
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
