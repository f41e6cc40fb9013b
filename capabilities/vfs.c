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

#include <xxhash.h>

#include "common/bytes.h"

/* ---- paths ---- */

int mbxC_vfs_normalize(const char *path, size_t len, char *out, size_t out_size, size_t *out_len) {
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
   its path up to the last '/'; an index by path finds one in constant time, whatever the
   number of nodes the guest made (up to the files quota, a million). Overlay mounts keep
   their changed entries in the same table: a file or directory the guest wrote or made below
   the mount (ov = 1 + the mount's index), or a whiteout hiding the host entry at its path. */
typedef struct mnode {
  char *path;
  size_t path_len;
  int is_dir;
  int writable;    /* under the memory /tmp or in an overlay; the policy's files and "/" are not */
  int guest_made;  /* created by the guest: counted in the files quota */
  int ov;          /* 0: the memory tree; else 1 + the index of its overlay mount */
  int whiteout;    /* overlay: the host entry at path is removed from the guest's view */
  char *from;      /* overlay: the path the file was renamed from (NULL: none), for changes */
  int in_table;    /* 0 once removed while a handle or the journal still had it */
  int opens;       /* handles open on it */
  int open_bytes;  /* removed while open: its bytes stay counted until its last handle closes */
  int jrefs;       /* journal entries that hold it (a removal a rewind puts back) */
  uint64_t epoch;  /* the journal epoch its state was last saved or created in */
  int64_t add_pos; /* the journal index of its creation, -1 when it is not journaled */
  char *data;
  size_t len, cap;
  int64_t mtime;
  size_t slot;   /* its place in v->nodes while in_table */
  uint64_t hash; /* of its path, for the index */
} mnode;

struct mbxC_vfs_mark {
  mbxC_vfs *view; /* NULL once the view is freed */
  mbxC_vfs_mark *next;
  int64_t pos; /* the journal's absolute length when the mark was taken */
  int valid;   /* 0 once an older mark was restored: what it saw is gone */
  uint64_t tmp_used, mem_bytes, mem_files;
};

/* The journal that makes a rewind cost what changed since the checkpoint: while a mark is
   live, the first change to a node in an epoch saves its state (J_SAVE: path, bytes, flags),
   a creation is noted (J_ADD) and a removed node is kept (J_DEL). A restore undoes the
   entries after its mark, newest first; no entry after the mark, no work. */
enum { J_NOP = 0, J_SAVE = 1, J_ADD = 2, J_DEL = 3 };
typedef struct jentry {
  int op;
  mnode *node;
  /* J_SAVE: the node as it was (owned here until a restore hands it back) */
  char *path;
  size_t path_len;
  char *data;
  size_t len;
  char *from;
  int is_dir, whiteout;
  int64_t mtime;
} jentry;

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
  /* The index of the table's nodes by path: open addressing, linear probing, a power of two
     at least twice node_count. The hash is keyed per view: the guest names the paths, so it
     cannot line them up on one chain. */
  mnode **index;
  size_t index_cap;
  uint64_t hash_seed;
  handle *handles;
  size_t handle_cap; /* the open_files quota */
  size_t open_count;
  uint64_t tmp_max, tmp_used; /* bytes of the memory /tmp's files */
  uint64_t bytes_max, files_max;
  uint64_t mem_bytes, mem_files;   /* held by memory nodes the guest made (tmp and overlays) */
  uint64_t host_bytes, host_files; /* what rw mounts grew by (never undone) */
  int walk_only;
  jentry *journal;
  size_t jlen, jcap;
  int64_t jbase; /* the absolute index of journal[0] (older entries were dropped) */
  size_t jnops;  /* J_NOP entries after the newest mark (journal_compact) */
  uint64_t epoch;
  mbxC_vfs_mark *marks; /* the live marks, newest first */
  uint64_t copied;      /* bytes the journal copied (saves and restores), for tests */
  int64_t (*clock)(void *ud);
  void *clock_ud;
  char view[160]; /* "mounts: /data ro, /tmp" for the not-in-view reason */
  char *names;    /* fs_list's answer */
  size_t names_cap;
  mbxC_vfs_tap tap; /* record/replay of the host's answers (snapshots); tapped: set */
  int tapped;
  const mbxC_wait *wait; /* the guest-time operation in progress (mbxC_vfs_set_wait) */
  /* Module reads only (MBXC_FS_MODULE): the module folder is mounts[mount_count] when
     has_module_root (past the table every other walk uses: io, fs, exec and the changes never
     see it), and the registered modules are nodes outside the table, found by name. */
  int has_module_root;
  mnode **modules;
  size_t module_count;
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

static uint64_t path_hash(const mbxC_vfs *v, const char *path, size_t len) {
  return XXH3_64bits_withSeed(path, len, v->hash_seed);
}

static void index_put(mbxC_vfs *v, mnode *n) {
  size_t mask = v->index_cap - 1, i = (size_t)n->hash & mask;
  while (v->index[i])
    i = (i + 1) & mask;
  v->index[i] = n;
}

/* Room in the index for count nodes (rebuilt larger when needed). -1 when out of memory. */
static int index_reserve(mbxC_vfs *v, size_t count) {
  if (count <= v->index_cap / 2) return 0;
  size_t cap = v->index_cap ? v->index_cap : 64;
  while (cap / 2 < count)
    cap *= 2;
  mnode **grown = calloc(cap, sizeof *grown);
  if (grown == NULL) return -1;
  free(v->index);
  v->index = grown;
  v->index_cap = cap;
  for (size_t i = 0; i < v->node_count; i++)
    index_put(v, v->nodes[i]);
  return 0;
}

/* Out of the index (backward-shift deletion: no tombstones, so chains never grow stale). */
static void index_del(mbxC_vfs *v, mnode *n) {
  size_t mask = v->index_cap - 1, i = (size_t)n->hash & mask;
  while (v->index[i] != n) {
    if (v->index[i] == NULL) return; /* not indexed */
    i = (i + 1) & mask;
  }
  v->index[i] = NULL;
  for (size_t j = (i + 1) & mask; v->index[j]; j = (j + 1) & mask) {
    size_t home = (size_t)v->index[j]->hash & mask;
    /* The entry at j stays when its home lies cyclically in (i, j]. */
    int stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
    if (!stays) {
      v->index[i] = v->index[j];
      v->index[j] = NULL;
      i = j;
    }
  }
}

static mnode *find_node(const mbxC_vfs *v, const char *path, size_t len) {
  if (v->index_cap == 0) return NULL;
  uint64_t h = path_hash(v, path, len);
  size_t mask = v->index_cap - 1;
  for (size_t i = (size_t)h & mask; v->index[i]; i = (i + 1) & mask) {
    mnode *n = v->index[i];
    if (n->hash == h && n->path_len == len && memcmp(n->path, path, len) == 0) return n;
  }
  return NULL;
}

/* Set n's path to path (owned now; a rename, a rewind) and re-index it when it is in the
   table. */
static void set_path(mbxC_vfs *v, mnode *n, char *path, size_t len) {
  if (n->in_table) index_del(v, n);
  free(n->path);
  n->path = path;
  n->path_len = len;
  n->hash = path_hash(v, path, len);
  if (n->in_table) index_put(v, n);
}

static size_t parent_len(const char *path, size_t len) {
  while (len > 0 && path[len - 1] != '/')
    len--;
  return len > 1 ? len - 1 : 1;
}

static void free_node(mnode *n) {
  free(n->path);
  free(n->data);
  free(n->from);
  free(n);
}

/* A node nothing refers to any more goes away. */
static void maybe_free(mnode *n) {
  if (!n->in_table && n->opens == 0 && n->jrefs == 0) free_node(n);
}

static int64_t newest_mark_pos(const mbxC_vfs *v);
static void journal_drop(mbxC_vfs *v, size_t k);

/* A creation undone by a removal since the newest mark leaves a no-op entry. Left there, a
   guest creating and removing files in a loop under a live checkpoint would grow the journal
   by one entry per file (host memory no quota counts): no-ops at the end go at once, and the
   entries after the newest mark are compacted when half of them are no-ops (amortized
   constant per removal). Only entries after the newest mark move; a creation entry's node
   learns its new place. */
static void journal_compact(mbxC_vfs *v) {
  int64_t from64 = newest_mark_pos(v) - v->jbase;
  size_t from = from64 < 0 ? 0 : (size_t)from64;
  while (v->jlen > from && v->journal[v->jlen - 1].op == J_NOP) {
    v->jlen--;
    if (v->jnops) v->jnops--;
  }
  if (v->jlen <= from || v->jnops < 64 || v->jnops * 2 < v->jlen - from) return;
  size_t w = from;
  for (size_t i = from; i < v->jlen; i++) {
    jentry *j = &v->journal[i];
    if (j->op == J_NOP) continue;
    if (j->op == J_ADD) j->node->add_pos = v->jbase + (int64_t)w;
    v->journal[w++] = *j;
  }
  v->jlen = w;
  v->jnops = 0;
}

size_t mbxC_vfs_journal_entries(const mbxC_vfs *v) {
  return v->jlen;
}

static int journal_push(mbxC_vfs *v, const jentry *j) {
  if (v->jlen == v->jcap) {
    size_t cap = v->jcap ? v->jcap * 2 : 64;
    jentry *grown = realloc(v->journal, cap * sizeof *grown);
    if (grown == NULL) return -1;
    v->journal = grown;
    v->jcap = cap;
  }
  v->journal[v->jlen++] = *j;
  return 0;
}

/* Before node n changes in place (its bytes, path or kind): with a live mark, its state is
   saved once per epoch. -1 when out of host memory (nothing changed). */
static int touch(mbxC_vfs *v, mnode *n) {
  if (v->marks == NULL || n->epoch == v->epoch) return 0;
  jentry j = {.op = J_SAVE,
              .node = n,
              .path_len = n->path_len,
              .len = n->len,
              .is_dir = n->is_dir,
              .whiteout = n->whiteout,
              .mtime = n->mtime};
  if ((j.path = mbxU_dup_bytes(n->path, n->path_len)) == NULL ||
      (n->len && (j.data = mbxU_dup_bytes(n->data, n->len)) == NULL) ||
      (n->from && (j.from = mbxU_dup_bytes(n->from, strlen(n->from))) == NULL) ||
      journal_push(v, &j) != 0) {
    free(j.path);
    free(j.data);
    free(j.from);
    return -1;
  }
  v->copied += n->len;
  n->jrefs++;
  n->epoch = v->epoch;
  return 0;
}

static mnode *add_node(mbxC_vfs *v, const char *path, size_t len, int is_dir, int writable) {
  if (v->node_count == v->node_cap) {
    size_t cap = v->node_cap ? v->node_cap * 2 : 16;
    mnode **grown = realloc(v->nodes, cap * sizeof *grown);
    if (grown == NULL) return NULL;
    v->nodes = grown;
    v->node_cap = cap;
  }
  if (index_reserve(v, v->node_count + 1) != 0) return NULL;
  mnode *n = calloc(1, sizeof *n);
  if (n == NULL || (n->path = mbxU_dup_bytes(path, len)) == NULL) {
    free(n);
    return NULL;
  }
  n->path_len = len;
  n->hash = path_hash(v, path, len);
  n->is_dir = is_dir;
  n->writable = writable;
  n->in_table = 1;
  n->add_pos = -1;
  n->mtime = now_seconds();
  if (v->marks) {
    jentry j = {.op = J_ADD, .node = n};
    if (journal_push(v, &j) != 0) {
      free_node(n);
      return NULL;
    }
    n->add_pos = v->jbase + (int64_t)v->jlen - 1;
    n->jrefs++;
    n->epoch = v->epoch; /* made after the mark: undone by removal, nothing to save */
  }
  n->slot = v->node_count;
  v->nodes[v->node_count++] = n;
  index_put(v, n);
  return n;
}

/* Take n out of v->nodes and the index (the last node takes its place). */
static void table_remove(mbxC_vfs *v, mnode *n) {
  index_del(v, n);
  mnode *last = v->nodes[--v->node_count];
  v->nodes[n->slot] = last;
  last->slot = n->slot;
  n->in_table = 0;
}

/* Take n out of the table. A node made since the newest mark just goes (its creation entry
   becomes a no-op); an older one stays in the journal so a rewind can put it back. */
static void unlink_node(mbxC_vfs *v, mnode *n) {
  table_remove(v, n);
  if (v->marks) {
    if (n->add_pos >= newest_mark_pos(v) && n->add_pos >= v->jbase) {
      jentry *j = &v->journal[n->add_pos - v->jbase];
      j->op = J_NOP;
      j->node = NULL;
      n->jrefs--;
      n->add_pos = -1;
      v->jnops++;
      journal_compact(v);
    } else {
      jentry j = {.op = J_DEL, .node = n};
      /* Out of host memory for the entry: the removal cannot be undone, but the node stays
         referenced (as if journaled) rather than being lost while an entry may point at it. */
      if (journal_push(v, &j) == 0) n->jrefs++;
    }
  }
  maybe_free(n);
}

/* The bytes of node n become len long: the quotas follow (the /tmp quota for the memory
   tree's nodes). The caller checked the room. */
static void account_len(mbxC_vfs *v, mnode *n, size_t len) {
  if (len >= n->len) {
    uint64_t more = len - n->len;
    v->mem_bytes += more;
    if (!n->ov) v->tmp_used += more;
  } else {
    uint64_t less = n->len - len;
    v->mem_bytes -= less < v->mem_bytes ? less : v->mem_bytes;
    if (!n->ov) v->tmp_used -= less < v->tmp_used ? less : v->tmp_used;
  }
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
  /* The journal's nodes first (those out of the table go with it), then the table's. */
  journal_drop(v, v->jlen);
  for (size_t i = 0; i < v->node_count; i++)
    free_node(v->nodes[i]);
  free(v->journal);
  for (mbxC_vfs_mark *m = v->marks; m; m = m->next)
    m->view = NULL;
  if (v->has_module_root) {
    if (v->mounts[v->mount_count].dirfd >= 0) close(v->mounts[v->mount_count].dirfd);
    free(v->mounts[v->mount_count].path);
  }
  for (size_t i = 0; i < v->module_count; i++)
    free_node(v->modules[i]);
  free(v->modules);
  free(v->mounts);
  free(v->prefixes);
  free(v->nodes);
  free(v->index);
  free(v->handles);
  free(v->names);
  free(v);
}

static void describe_view(mbxC_vfs *v) {
  size_t at = (size_t)snprintf(v->view, sizeof v->view, "mounts: ");
  for (size_t i = 0; i < v->mount_count && at < sizeof v->view; i++)
    at += (size_t)snprintf(v->view + at, sizeof v->view - at, "%s %s, ", v->mounts[i].path,
                           v->mounts[i].mode == MBXC_MOUNT_RW        ? "rw"
                           : v->mounts[i].mode == MBXC_MOUNT_OVERLAY ? "overlay"
                                                                     : "ro");
  if (at < sizeof v->view) snprintf(v->view + at, sizeof v->view - at, "/tmp");
}

mbxC_vfs *mbxC_vfs_new(const mbxC_fs_spec *spec, mbxC_port_error *e) {
  mbxC_vfs *v = calloc(1, sizeof *v);
  if (v == NULL) {
    fail(e, ENOMEM, NULL);
    return NULL;
  }
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t mix[3] = {(uint64_t)(uintptr_t)v, (uint64_t)ts.tv_nsec, (uint64_t)ts.tv_sec};
  v->hash_seed = XXH3_64bits(mix, sizeof mix);
  v->tmp_max = spec->tmp_bytes;
  v->bytes_max = spec->bytes;
  v->files_max = spec->files_max;
  v->handle_cap =
      spec->open_files > MBXC_MAX_FS_OPEN_FILES ? MBXC_MAX_FS_OPEN_FILES : (size_t)spec->open_files;
  if (v->handle_cap && (v->handles = calloc(v->handle_cap, sizeof *v->handles)) == NULL) goto oom;
  if (spec->mount_count || spec->module_dir) {
    v->mounts = calloc(spec->mount_count + 1, sizeof *v->mounts);
    v->prefixes = calloc(spec->mount_count + 1, sizeof *v->prefixes);
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
  if (spec->module_dir) {
    vmount *root = &v->mounts[v->mount_count];
    root->dirfd = open(spec->module_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (root->dirfd < 0 || fstat(root->dirfd, &st) != 0) {
      if (root->dirfd >= 0) close(root->dirfd);
      fail(e, errno, "the module folder cannot be opened");
      mbxC_vfs_free(v);
      return NULL;
    }
    root->dev = st.st_dev;
    root->mode = MBXC_MOUNT_RO;
    root->len = 1;
    v->has_module_root = 1;
    if ((root->path = mbxU_dup_bytes("/", 1)) == NULL) goto oom;
  }
  if (spec->module_count && (v->modules = calloc(spec->module_count, sizeof *v->modules)) == NULL)
    goto oom;
  for (size_t i = 0; i < spec->module_count; i++) {
    const mbxC_fs_file *f = &spec->modules[i];
    mnode *n = calloc(1, sizeof *n);
    if (n == NULL) goto oom;
    v->modules[v->module_count++] = n;
    n->path_len = strlen(f->path);
    n->in_table = 1; /* never freed by a handle's close: mbxC_vfs_free frees it */
    n->add_pos = -1;
    if ((n->path = mbxU_dup_bytes(f->path, n->path_len)) == NULL) goto oom;
    if (f->len && (n->data = mbxU_dup_bytes(f->data, f->len)) == NULL) goto oom;
    n->len = n->cap = f->len;
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
  return v->mem_bytes + v->host_bytes;
}
uint64_t mbxC_vfs_files_used(const mbxC_vfs *v) {
  return v->mem_files + v->host_files;
}
uint64_t mbxC_vfs_journal_copied(const mbxC_vfs *v) {
  return v->copied;
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
    if (errno == ENOSYS)
      v->walk_only = 1; /* this kernel will not have it later either */
    else if (errno != EPERM)
      return -errno;
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

/* ---- guest time: long work checks the operation's deadline (vfs.h) ---- */

void mbxC_vfs_set_wait(mbxC_vfs *v, const mbxC_wait *w) {
  v->wait = w;
}

/* The run's deadline passed or the host interrupted it: e says so and -1; else 0. */
static int out_of_time(const mbxC_vfs *v, const char *what, mbxC_port_error *e) {
  const mbxC_wait *w = v->wait;
  if (w == NULL) return 0;
  if (w->interrupted && w->interrupted(w->ctx))
    return fail(e, MBXC_E_TIMEDOUT, "the run was interrupted during %s", what);
  if (w->deadline_ns == 0) return 0;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
  if (now < w->deadline_ns) return 0;
  return fail(e, MBXC_E_TIMEDOUT, "the run's deadline passed during %s", what);
}

/* A scan of the node table at node i: checks the deadline every MBXC_VFS_WORK_STEP / 16. */
static int scan_step(const mbxC_vfs *v, size_t i, mbxC_port_error *e) {
  if ((i & (MBXC_VFS_WORK_STEP / 16 - 1)) != MBXC_VFS_WORK_STEP / 16 - 1) return 0;
  return out_of_time(v, "a scan of the sandbox's files", e);
}

/* ---- the tap: the host's answers through the record layer (vfs.h) ---- */

void mbxC_vfs_set_tap(mbxC_vfs *v, const mbxC_vfs_tap *tap) {
  v->tapped = tap != NULL;
  if (tap) v->tap = *tap;
}

/* Replaying a snapshot: the host is not asked, the tap answers. */
static int replaying(const mbxC_vfs *v) {
  return v->tapped && v->tap.replaying(v->tap.ud);
}

/* Live: tell the tap the request and the answer in h; replaying: have it fill h. -1 (e: EIO)
   when the log has no such answer. */
static int tap(mbxC_vfs *v, int kind, const vmount *m, const char *rel, uint64_t a, uint64_t b,
               mbxC_vfs_host *h, mbxC_port_error *e) {
  if (!v->tapped) return 0;
  if (v->tap.answer(v->tap.ud, kind, m ? (size_t)(m - v->mounts) : 0, rel, a, b, h) == 0) return 0;
  return fail(e, EIO, "the snapshot replay diverged from its log");
}

/* A write to rw mount m is about to reach the host. */
static int tap_write(mbxC_vfs *v, const vmount *m, mbxC_port_error *e) {
  if (!v->tapped || v->tap.wrote(v->tap.ud, m->path) == 0) return 0;
  return fail(e, EIO, "the snapshot replay diverged from its log: it wrote to %s", m->path);
}

/* What the host holds at rel (not following a final link): h->err is the errno when the
   confined look failed. -1 only for a replay's divergence. */
static int host_look(mbxC_vfs *v, const vmount *m, const char *rel, mbxC_vfs_host *h,
                     mbxC_port_error *e) {
  memset(h, 0, sizeof *h);
  if (replaying(v)) return tap(v, MBXC_VFS_TAP_LOOK, m, rel, 0, 0, h, e);
  int fd = beneath(v, m, rel, O_PATH, 0);
  if (fd < 0) {
    h->err = -fd;
    h->walk = walk_mode(v);
  } else {
    struct stat st;
    if (fstat(fd, &st) != 0) {
      h->err = errno;
    } else {
      h->type = S_ISREG(st.st_mode)   ? MBXC_LOOK_FILE
                : S_ISDIR(st.st_mode) ? MBXC_LOOK_DIR
                : S_ISLNK(st.st_mode) ? MBXC_LOOK_LINK
                                      : MBXC_LOOK_OTHER;
      h->size = S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
      h->mtime = (int64_t)st.st_mtime;
      h->nlink = (uint64_t)st.st_nlink;
    }
    close(fd);
  }
  return tap(v, MBXC_VFS_TAP_LOOK, m, rel, 0, 0, h, e);
}

/* The names in host directory rel of m, each followed by a NUL, in h->bytes (*own: what to
   free). Reading stops past 1 MiB of names (add_name refuses more). h->err is the errno when
   the directory could not be read; -1 only for a replay's divergence. */
static int host_names(mbxC_vfs *v, const vmount *m, const char *rel, mbxC_vfs_host *h, char **own,
                      mbxC_port_error *e) {
  memset(h, 0, sizeof *h);
  *own = NULL;
  if (replaying(v)) return tap(v, MBXC_VFS_TAP_LIST, m, rel, 0, 0, h, e);
  int fd = beneath(v, m, rel, O_RDONLY | O_DIRECTORY, 0);
  DIR *d = NULL;
  if (fd < 0) {
    h->err = -fd;
    h->walk = walk_mode(v);
  } else if ((d = fdopendir(fd)) == NULL) {
    h->err = errno;
    close(fd);
  }
  char *buf = NULL;
  size_t len = 0, cap = 0;
  struct dirent *de;
  while (d && len <= ((size_t)1 << 20) && (de = readdir(d)) != NULL) {
    size_t n = strlen(de->d_name);
    if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
    if (len + n + 1 > cap) {
      size_t grown_cap = cap ? cap * 2 : 1024;
      while (grown_cap < len + n + 1)
        grown_cap *= 2;
      char *grown = realloc(buf, grown_cap);
      if (grown == NULL) {
        h->err = ENOMEM;
        len = 0;
        break;
      }
      buf = grown;
      cap = grown_cap;
    }
    memcpy(buf + len, de->d_name, n + 1);
    len += n + 1;
  }
  if (d) closedir(d);
  *own = buf;
  h->bytes = buf;
  h->len = h->err ? 0 : len;
  return tap(v, MBXC_VFS_TAP_LIST, m, rel, 0, 0, h, e);
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
  if (v->mem_files + v->host_files >= v->files_max)
    return fail(e, EDQUOT, "the sandbox may create at most %llu files and directories",
                (unsigned long long)v->files_max);
  return 0;
}

static int quota_bytes(mbxC_vfs *v, uint64_t more, mbxC_port_error *e) {
  if (more > v->bytes_max - (v->mem_bytes + v->host_bytes))
    return fail(e, EDQUOT, "the sandbox's write quota of %llu bytes is used up",
                (unsigned long long)v->bytes_max);
  return 0;
}

/* What truncating or removing a host file frees counts against what the guest added (never
   below zero): the quotas bound the mount's net growth, so a guest that rewrites one report
   many times is not charged for every copy. */
static void give_back(mbxC_vfs *v, uint64_t bytes, uint64_t files) {
  v->host_bytes -= bytes < v->host_bytes ? bytes : v->host_bytes;
  v->host_files -= files < v->host_files ? files : v->host_files;
}

/* The confined open of host file w (host_open's work on the host): *fd and its *size. */
static int host_open_fd(mbxC_vfs *v, const where *w, int flags, int *fd_out, uint64_t *size,
                        mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  int writing = want_write(flags);
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
    v->host_files++;
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
  *fd_out = fd;
  *size = (uint64_t)st.st_size;
  return 0;
}

static int host_open(mbxC_vfs *v, const where *w, int flags, int *number, mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  int writing = want_write(flags);
  if (writing && m->mode != MBXC_MOUNT_RW)
    return fail(e, EROFS, "%s is mounted read-only", m->path);
  int slot = alloc_handle(v, e);
  if (slot < 0) return -1;
  if (writing && tap_write(v, m, e) != 0) return -1;
  int fd = -1;
  uint64_t size = 0;
  if (!writing && v->tapped) {
    /* Logged live; replaying, the log answers and the handle has no descriptor. */
    mbxC_vfs_host a;
    memset(&a, 0, sizeof a);
    if (!replaying(v)) {
      a.failed = host_open_fd(v, w, flags, &fd, &size, &a.e) != 0;
      a.size = size;
    }
    if (tap(v, MBXC_VFS_TAP_OPEN, m, w->rel, (uint64_t)flags, 0, &a, e) != 0) return -1;
    if (a.failed) {
      *e = a.e;
      return -1;
    }
    size = a.size;
  } else if (host_open_fd(v, w, flags, &fd, &size, e) != 0) {
    return -1;
  }
  handle *h = &v->handles[slot];
  h->kind = H_HOST;
  h->gen++;
  h->flags = flags;
  h->pos = 0;
  h->fd = fd;
  h->host_size = size;
  h->node = NULL;
  v->open_count++;
  *number = handle_number(h, slot);
  return 0;
}

static const char reopen_text[] =
    "the file was opened before the sandbox was restored from its snapshot: open it again";

/* Up to len bytes at pos of host handle h: from the host, through the tap when there is
   one (replaying: from the log). */
static int host_pread(mbxC_vfs *v, handle *h, char *buf, size_t len, uint64_t pos, size_t *got,
                      mbxC_port_error *e) {
  mbxC_vfs_host a;
  memset(&a, 0, sizeof a);
  *got = 0;
  if (!replaying(v)) {
    if (h->fd < 0) return fail(e, EIO, "%s", reopen_text);
    ssize_t k;
    do
      k = pread(h->fd, buf, len, (off_t)pos);
    while (k < 0 && errno == EINTR);
    if (k < 0) {
      a.failed = 1;
      host_fail(&a.e, errno, 0);
    } else {
      a.bytes = buf;
      a.len = (size_t)k;
    }
  }
  if (tap(v, MBXC_VFS_TAP_READ, NULL, NULL, pos, len, &a, e) != 0) return -1;
  if (a.failed) {
    *e = a.e;
    return -1;
  }
  if (a.bytes != buf) memcpy(buf, a.bytes, a.len); /* the tap checked a.len <= len */
  *got = a.len;
  return 0;
}

/* The size of the file host handle h has open now. */
static int host_size(mbxC_vfs *v, handle *h, uint64_t *size, mbxC_port_error *e) {
  mbxC_vfs_host a;
  memset(&a, 0, sizeof a);
  if (!replaying(v)) {
    struct stat st;
    if (h->fd < 0) return fail(e, EIO, "%s", reopen_text);
    if (fstat(h->fd, &st) != 0) {
      a.failed = 1;
      host_fail(&a.e, errno, 0);
    } else {
      a.size = (uint64_t)st.st_size;
    }
  }
  if (tap(v, MBXC_VFS_TAP_SIZE, NULL, NULL, 0, 0, &a, e) != 0) return -1;
  if (a.failed) {
    *e = a.e;
    return -1;
  }
  *size = a.size;
  return 0;
}

/* ---- the memory tree ---- */

/* A handle on memory file n (truncated first when flags say so). */
static int node_open(mbxC_vfs *v, mnode *n, int flags, int *number, mbxC_port_error *e) {
  int slot = alloc_handle(v, e);
  if (slot < 0) return -1;
  if ((flags & MBXC_FS_TRUNCATE) && n->len) {
    if (touch(v, n) != 0) return fail(e, ENOMEM, NULL);
    account_len(v, n, 0);
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

/* A new guest-made node (counted in the files quota, which the caller checked). */
static mnode *guest_node(mbxC_vfs *v, const char *path, size_t len, int is_dir, int ov,
                         mbxC_port_error *e) {
  mnode *n = add_node(v, path, len, is_dir, 1);
  if (n == NULL) {
    fail(e, ENOMEM, NULL);
    return NULL;
  }
  n->guest_made = 1;
  n->ov = ov;
  v->mem_files++;
  return n;
}

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
  if (v->open_count >= v->handle_cap) return alloc_handle(v, e);
  if (n == NULL && (n = guest_node(v, w->path, w->len, 0, 0, e)) == NULL) return -1;
  return node_open(v, n, flags, number, e);
}

static int host_stat(mbxC_vfs *v, const vmount *m, const char *rel, mbxC_fs_stat *out,
                     mbxC_port_error *e) {
  mbxC_vfs_host h;
  if (host_look(v, m, rel, &h, e) != 0) return -1;
  if (h.err) return host_fail(e, h.err, h.walk);
  /* Only the walk stops on a link (O_PATH | O_NOFOLLOW opens the link itself). */
  if (h.type == MBXC_LOOK_LINK)
    return fail(e, ELOOP, "symbolic links are not followed in this mount");
  out->is_dir = h.type == MBXC_LOOK_DIR;
  out->is_file = h.type == MBXC_LOOK_FILE;
  out->size = out->is_file ? h.size : 0;
  out->mtime = h.mtime;
  out->writable = m->mode == MBXC_MOUNT_RW && (out->is_dir || h.nlink <= 1);
  return 0;
}

static void release_handle(mbxC_vfs *v, handle *h);
static int add_name(mbxC_vfs *v, size_t *at, const char *name, size_t n, mbxC_port_error *e);

/* ---- overlay mounts ----
   Reads fall through to the host directory, confined exactly as a ro mount's; every change
   lands in the node table: a file the guest wrote (copied up from the host first, unless it
   was truncated), a directory it made, or a whiteout where it removed or renamed away a host
   entry. The host directory is never opened for writing. */

enum { K_NONE = 0, K_FILE = 1, K_DIR = 2, K_OTHER = 3 };

/* w with its path cut to len bytes (a parent at or below the mount point). */
static void sub_where(const where *w, const vmount *m, size_t len, where *out) {
  memcpy(out->path, w->path, len);
  out->path[len] = '\0';
  out->len = len;
  out->mount = w->mount;
  out->rel = len > m->len ? out->path + m->len + 1 : ".";
}

/* What the host holds at rel: K_NONE, K_FILE, K_DIR, K_OTHER, or -1 (e filled: a link the
   walk stopped at, a path leading outside the mount). */
static int host_kind(mbxC_vfs *v, const vmount *m, const char *rel, mbxC_port_error *e) {
  mbxC_vfs_host h;
  if (host_look(v, m, rel, &h, e) != 0) return -1;
  if (h.err == ENOENT || h.err == ENOTDIR) return K_NONE;
  if (h.err) return host_fail(e, h.err, h.walk);
  if (h.type == MBXC_LOOK_LINK)
    return fail(e, ELOOP, "symbolic links are not followed in this mount");
  return h.type == MBXC_LOOK_FILE ? K_FILE : h.type == MBXC_LOOK_DIR ? K_DIR : K_OTHER;
}

/* What the guest sees at w in its overlay mount, and the node that answers for it (NULL: the
   host does; a whiteout node comes back with K_NONE so callers can reuse its place). */
static int ov_find(mbxC_vfs *v, const where *w, mnode **node, mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  *node = NULL;
  if (strcmp(w->rel, ".") == 0) return K_DIR;
  /* A removed or replaced ancestor hides everything below it. */
  for (size_t len = parent_len(w->path, w->len); len > m->len; len = parent_len(w->path, len)) {
    mnode *a = find_node(v, w->path, len);
    if (a && (a->whiteout || !a->is_dir)) return K_NONE;
  }
  mnode *n = find_node(v, w->path, w->len);
  if (n) {
    *node = n;
    return n->whiteout ? K_NONE : n->is_dir ? K_DIR : K_FILE;
  }
  return host_kind(v, m, w->rel, e);
}

/* 1 when the host has something at w (whatever the guest sees), 0 when not, -1 on error. */
static int host_has(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  int k = host_kind(v, &v->mounts[w->mount], w->rel, e);
  return k < 0 ? -1 : k != K_NONE;
}

/* 0 when the parent of w is a directory the guest sees, else -1 (ENOENT or ENOTDIR). */
static int ov_parent_ok(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  size_t plen = parent_len(w->path, w->len);
  if (plen <= m->len) return 0;
  where p;
  mnode *n;
  sub_where(w, m, plen, &p);
  int k = ov_find(v, &p, &n, e);
  if (k < 0) return -1;
  if (k == K_DIR) return 0;
  return fail(e, k == K_NONE ? ENOENT : ENOTDIR, NULL);
}

/* The host file at w, whole, for a copy-up: opened as a ro mount opens it (no link followed,
   only a regular file, the same inode as looked at), its size charged to the bytes quota
   before anything is read. */
static int host_read_upto(mbxC_vfs *v, const where *w, int charge, uint64_t limit, char **data,
                          size_t *len, mbxC_port_error *e) {
  int number;
  *data = NULL;
  *len = 0;
  if (host_open(v, w, MBXC_FS_READ, &number, e) != 0) return -1;
  handle *h = get_handle(v, number, e);
  uint64_t fsize = 0;
  int rc = -1;
  if (host_size(v, h, &fsize, e) != 0) {
    /* e says why */
  } else if (fsize > limit || fsize > SIZE_MAX - 1) {
    fail(e, EFBIG, "the file is larger than %llu bytes", (unsigned long long)limit);
  } else if (!charge || quota_bytes(v, fsize, e) == 0) {
    size_t size = (size_t)fsize, got = 0;
    char *buf = malloc(size ? size : 1);
    if (buf == NULL) {
      fail(e, ENOMEM, NULL);
    } else {
      rc = 0;
      /* In pieces of at most 1 MiB: each is one record of a snapshot's log. A file that
         shrank meanwhile gives what it holds. */
      while (got < size) {
        size_t k, want = size - got < MBXC_VFS_WORK_STEP ? size - got : MBXC_VFS_WORK_STEP;
        if ((got && out_of_time(v, "the copy of a host file", e) != 0) ||
            host_pread(v, h, buf + got, want, got, &k, e) != 0) {
          free(buf);
          rc = -1;
          break;
        }
        if (k == 0) break;
        got += k;
      }
      if (rc == 0) {
        *data = buf;
        *len = got;
      }
    }
  }
  release_handle(v, h);
  return rc;
}

static int host_read_whole(mbxC_vfs *v, const where *w, char **data, size_t *len,
                           mbxC_port_error *e) {
  return host_read_upto(v, w, 1, UINT64_MAX, data, len, e);
}

/* A whiteout at w: the host entry there is gone from the guest's view. */
static int add_whiteout(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  mnode *n = guest_node(v, w->path, w->len, 0, w->mount + 1, e);
  if (n == NULL) return -1;
  n->whiteout = 1;
  return 0;
}

/* Drop node n of the guest's (its bytes and its place in the files quota come back). A node
   still open keeps its bytes counted, and what the handles write to it, until the last one
   closes (release_handle), as POSIX keeps an unlinked open file's blocks: giving them back
   now lost the count of the growth after the removal, and a loop of open, remove, write,
   close filled the quota with bytes nothing held. */
static void drop_node(mbxC_vfs *v, mnode *n) {
  if (n->opens > 0)
    n->open_bytes = 1;
  else
    account_len(v, n, 0);
  if (n->guest_made) v->mem_files--;
  unlink_node(v, n);
}

static int ov_open(mbxC_vfs *v, const where *w, int flags, int *number, mbxC_port_error *e) {
  if (strcmp(w->rel, ".") == 0) return fail(e, EISDIR, NULL);
  mnode *n;
  int k = ov_find(v, w, &n, e);
  if (k < 0) return -1;
  if (k == K_DIR) return fail(e, EISDIR, NULL);
  if (k == K_OTHER)
    return fail(e, EACCES, "not a regular file: the sandbox opens only files and directories");
  int excl = (flags & MBXC_FS_EXCLUSIVE) && (flags & MBXC_FS_CREATE);
  if (k == K_FILE && excl) return fail(e, EEXIST, NULL);
  if (k == K_FILE && n) return node_open(v, n, flags, number, e);
  if (k == K_FILE && !want_write(flags)) return host_open(v, w, flags, number, e);
  if (k == K_NONE && !(flags & MBXC_FS_CREATE)) return fail(e, ENOENT, NULL);
  if (k == K_NONE && ov_parent_ok(v, w, e) != 0) return -1;
  /* A new node: the copy of the host file (none when truncated or new), or a whiteout's
     place taken over. */
  if (v->open_count >= v->handle_cap) return alloc_handle(v, e);
  if (n == NULL && quota_file(v, e) != 0) return -1;
  char *data = NULL;
  size_t len = 0;
  if (k == K_FILE && !(flags & MBXC_FS_TRUNCATE) && host_read_whole(v, w, &data, &len, e) != 0)
    return -1;
  if (n) drop_node(v, n); /* the whiteout */
  mnode *f = guest_node(v, w->path, w->len, 0, w->mount + 1, e);
  if (f == NULL) {
    free(data);
    return -1;
  }
  f->data = data;
  f->cap = len;
  account_len(v, f, len);
  f->len = len;
  return node_open(v, f, flags, number, e);
}

/* The names the guest sees in overlay directory w: its nodes' plus the host's not hidden. */
static int ov_list(mbxC_vfs *v, const where *w, size_t *at, mbxC_port_error *e) {
  mnode *d;
  int k = ov_find(v, w, &d, e);
  if (k < 0) return -1;
  if (k == K_NONE) return fail(e, ENOENT, NULL);
  if (k != K_DIR) return fail(e, ENOTDIR, NULL);
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *n = v->nodes[i];
    if (scan_step(v, i, e) != 0) return -1;
    if (n->ov != w->mount + 1 || n->whiteout || n->path_len <= w->len) continue;
    if (parent_len(n->path, n->path_len) != w->len || memcmp(n->path, w->path, w->len) != 0)
      continue;
    const char *base = n->path + w->len + 1;
    if (add_name(v, at, base, strlen(base), e) != 0) return -1;
  }
  int hk = host_kind(v, &v->mounts[w->mount], w->rel, e);
  if (hk < 0) return -1;
  if (hk != K_DIR || (d && !d->is_dir)) return 0;
  mbxC_vfs_host h;
  char *own;
  if (host_names(v, &v->mounts[w->mount], w->rel, &h, &own, e) != 0) return -1;
  int rc = h.err ? host_fail(e, h.err, h.walk) : 0;
  char child[MBXC_VFS_PATH_BUF];
  for (size_t i = 0; rc == 0 && i < h.len;) {
    const char *name = h.bytes + i;
    size_t n = strlen(name);
    i += n + 1;
    if (w->len + 1 + n > MBXC_VFS_PATH_MAX) continue; /* a name the guest could not open */
    memcpy(child, w->path, w->len);
    child[w->len] = '/';
    memcpy(child + w->len + 1, name, n);
    if (find_node(v, child, w->len + 1 + n)) continue; /* listed above, or hidden */
    rc = add_name(v, at, name, n, e);
  }
  free(own);
  return rc;
}

/* 0 when directory w shows nothing (every host entry below it is hidden), else -1. */
static int ov_dir_empty(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  size_t at = 0;
  if (ov_list(v, w, &at, e) != 0) return -1;
  return at == 0 ? 0 : fail(e, ENOTEMPTY, NULL);
}

static int ov_stat(mbxC_vfs *v, const where *w, mbxC_fs_stat *out, mbxC_port_error *e) {
  mnode *n;
  int k = ov_find(v, w, &n, e);
  if (k < 0) return -1;
  if (k == K_NONE) return fail(e, ENOENT, NULL);
  if (n) {
    out->is_dir = n->is_dir;
    out->is_file = !n->is_dir;
    out->size = n->len;
    out->mtime = n->mtime;
    out->writable = 1;
    return 0;
  }
  if (host_stat(v, &v->mounts[w->mount], w->rel, out, e) != 0) return -1;
  out->writable = out->is_dir || out->is_file;
  return 0;
}

static int ov_mkdir(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  if (strcmp(w->rel, ".") == 0) return fail(e, EEXIST, NULL);
  mnode *n;
  int k = ov_find(v, w, &n, e);
  if (k < 0) return -1;
  if (k != K_NONE) return fail(e, EEXIST, NULL);
  if (ov_parent_ok(v, w, e) != 0) return -1;
  if (n == NULL && quota_file(v, e) != 0) return -1;
  /* Over a whiteout, the whiteouts below it stay: what the host holds there stays hidden. */
  if (n) drop_node(v, n);
  return guest_node(v, w->path, w->len, 1, w->mount + 1, e) ? 0 : -1;
}

static int ov_remove(mbxC_vfs *v, const where *w, mbxC_port_error *e) {
  const vmount *m = &v->mounts[w->mount];
  if (strcmp(w->rel, ".") == 0) return fail(e, EBUSY, "%s is a mount point", m->path);
  mnode *n;
  int k = ov_find(v, w, &n, e);
  if (k < 0) return -1;
  if (k == K_NONE) return fail(e, ENOENT, NULL);
  if (k == K_DIR && ov_dir_empty(v, w, e) != 0) return -1;
  int on_host = host_has(v, w, e);
  if (on_host < 0) return -1;
  if (on_host && n == NULL && quota_file(v, e) != 0) return -1;
  if (n) {
    if (!on_host && n->is_dir) {
      /* A directory the host does not have: the whiteouts below it hide nothing now. */
      for (size_t i = 0; i < v->node_count;) {
        mnode *c = v->nodes[i];
        if (c != n && c->ov == n->ov && covers(n->path, n->path_len, c->path, c->path_len))
          drop_node(v, c); /* swaps the last node into i */
        else
          i++;
      }
    }
    drop_node(v, n);
  }
  return on_host ? add_whiteout(v, w, e) : 0;
}

static int ov_rename(mbxC_vfs *v, const where *a, const where *b, mbxC_port_error *e) {
  const vmount *m = &v->mounts[a->mount];
  if (strcmp(a->rel, ".") == 0 || strcmp(b->rel, ".") == 0)
    return fail(e, EBUSY, "%s is a mount point", m->path);
  mnode *na, *nb;
  int ka = ov_find(v, a, &na, e);
  if (ka < 0) return -1;
  if (ka == K_NONE) return fail(e, ENOENT, NULL);
  if (ka == K_DIR)
    return fail(e, EXDEV,
                "a directory in an overlay mount cannot be renamed, as in overlayfs: "
                "copy its files instead");
  if (ka == K_OTHER)
    return fail(e, EACCES, "not a regular file: the sandbox opens only files and directories");
  if (a->len == b->len && memcmp(a->path, b->path, a->len) == 0) return 0;
  if (ov_parent_ok(v, b, e) != 0) return -1;
  int kb = ov_find(v, b, &nb, e);
  if (kb < 0) return -1;
  if (kb == K_DIR) return fail(e, EISDIR, NULL);
  int a_host = host_has(v, a, e);
  if (a_host < 0) return -1;
  /* Room first, so a refusal changes nothing: a node for the copy (none when the source is
     already one), a whiteout where the host's source was; the target's node goes. */
  uint64_t need = (na ? 0u : 1u) + (a_host ? 1u : 0u), gone = nb ? 1u : 0u;
  if (v->mem_files + v->host_files + need > v->files_max + gone)
    return fail(e, EDQUOT, "the sandbox may create at most %llu files and directories",
                (unsigned long long)v->files_max);
  char *data = NULL;
  size_t len = 0;
  if (!na && host_read_whole(v, a, &data, &len, e) != 0) return -1;
  const char *origin = na ? (na->from ? na->from : a_host ? a->path : NULL) : a->path;
  char *from = origin ? mbxU_dup_bytes(origin, strlen(origin)) : NULL;
  char *path = mbxU_dup_bytes(b->path, b->len);
  if ((origin && from == NULL) || path == NULL || (na && touch(v, na) != 0)) {
    free(data);
    free(from);
    free(path);
    return fail(e, ENOMEM, NULL);
  }
  if (nb) drop_node(v, nb);
  mnode *moved = na;
  if (moved) {
    set_path(v, moved, path, b->len);
    free(moved->from);
  } else {
    free(path);
    if ((moved = guest_node(v, b->path, b->len, 0, b->mount + 1, e)) == NULL) {
      free(data);
      free(from);
      return -1;
    }
    moved->data = data;
    moved->cap = len;
    account_len(v, moved, len);
    moved->len = len;
  }
  /* Renamed back where it came from: just a file at its own path again. */
  if (from && strcmp(from, moved->path) == 0) {
    free(from);
    from = NULL;
  }
  moved->from = from;
  return a_host ? add_whiteout(v, a, e) : 0;
}

/* A registered module by name (MBXC_FS_MODULE_NAME): a read-only memory handle on it. The
   names are the host's, a few at most MBXC_VFS_MAX_FILES: a scan. */
static int module_name_open(mbxC_vfs *v, const char *name, size_t len, int *handle_out,
                            mbxC_port_error *e) {
  for (size_t i = 0; i < v->module_count; i++) {
    mnode *n = v->modules[i];
    if (n->path_len == len && memcmp(n->path, name, len) == 0)
      return node_open(v, n, MBXC_FS_READ, handle_out, e);
  }
  return fail(e, ENOENT, "no module of that name is registered");
}

/* 1 when normalized path names a .lua file (what the module folder serves). */
static int is_lua_file(const where *w) {
  return w->len > 5 && memcmp(w->path + w->len - 4, ".lua", 4) == 0;
}

/*
** A module read: read-only, and it sees the module folder where the view has nothing (a path
** of the memory tree that is not there), for .lua files only; its errors are the view's
** unless the folder has the file. Opened through host_open, so a snapshot's log records it
** as it records a mount's reads.
*/
static int module_open(mbxC_vfs *v, const char *path, size_t len, int flags, int *handle_out,
                       mbxC_port_error *e) {
  if (want_write(flags)) return fail(e, EROFS, "module reads are read-only");
  if (flags & MBXC_FS_MODULE_NAME) return module_name_open(v, path, len, handle_out, e);
  flags = MBXC_FS_READ;
  where w;
  if (locate(v, path, len, &w, e) != 0) return -1;
  int rc;
  if (w.mount < 0)
    rc = mem_open(v, &w, flags, handle_out, e);
  else if (v->mounts[w.mount].mode == MBXC_MOUNT_OVERLAY)
    return ov_open(v, &w, flags, handle_out, e);
  else
    return host_open(v, &w, flags, handle_out, e);
  if (rc == 0 || e->errnum != ENOENT || !v->has_module_root || !is_lua_file(&w)) return rc;
  mbxC_port_error view_error = *e;
  w.mount = (int)v->mount_count;
  w.rel = w.path + 1;
  if (host_open(v, &w, flags, handle_out, e) == 0) return 0;
  if (e->errnum == ENOENT) *e = view_error;
  return -1;
}

int mbxC_vfs_open(mbxC_vfs *v, const char *path, size_t len, int flags, int *handle_out,
                  mbxC_port_error *e) {
  if (flags & MBXC_FS_MODULE) return module_open(v, path, len, flags, handle_out, e);
  where w;
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) return mem_open(v, &w, flags, handle_out, e);
  if (v->mounts[w.mount].mode == MBXC_MOUNT_OVERLAY) return ov_open(v, &w, flags, handle_out, e);
  return host_open(v, &w, flags, handle_out, e);
}

int mbxC_vfs_read(mbxC_vfs *v, int number, char *buf, size_t len, size_t *got, mbxC_port_error *e) {
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
  if (host_pread(v, h, buf, len, h->pos, got, e) != 0) return -1;
  h->pos += *got;
  return 0;
}

/* Zeros from the end of n to pos (a write past the end), in steps that check the deadline.
   Stopped, the buffer goes back to old_cap bytes: nothing changed, no memory kept. */
static int fill_gap(mbxC_vfs *v, mnode *n, size_t pos, size_t old_cap, mbxC_port_error *e) {
  for (size_t at = n->len; at < pos;) {
    if (at > n->len && out_of_time(v, "the zero fill of a write past the end of a file", e) != 0) {
      char *back = n->cap > old_cap ? realloc(n->data, old_cap ? old_cap : 1) : NULL;
      if (back) {
        n->data = back;
        n->cap = old_cap;
      }
      return -1;
    }
    size_t k = pos - at < MBXC_VFS_WORK_STEP ? pos - at : MBXC_VFS_WORK_STEP;
    memset(n->data + at, 0, k);
    at += k;
  }
  return 0;
}

static int mem_write(mbxC_vfs *v, handle *h, const char *buf, size_t len, mbxC_port_error *e) {
  mnode *n = h->node;
  if (h->flags & MBXC_FS_APPEND) h->pos = n->len;
  uint64_t end = h->pos + len;
  if (end > n->len) {
    uint64_t more = end - n->len;
    if (!n->ov && more > v->tmp_max - v->tmp_used)
      return fail(e, ENOSPC, "the memory /tmp holds at most %llu bytes",
                  (unsigned long long)v->tmp_max);
    if (quota_bytes(v, more, e) != 0) return -1;
  }
  if (touch(v, n) != 0) return fail(e, ENOMEM, NULL);
  if (end > n->len) {
    size_t old_cap = n->cap;
    if (end > n->cap) {
      size_t cap = n->cap ? n->cap : 256;
      while (cap < end)
        cap = cap * 2 < end ? (size_t)end : cap * 2;
      char *grown = realloc(n->data, cap);
      if (grown == NULL) return fail(e, ENOMEM, NULL);
      n->data = grown;
      n->cap = cap;
    }
    if (h->pos > n->len && fill_gap(v, n, (size_t)h->pos, old_cap, e) != 0) return -1;
    account_len(v, n, (size_t)end);
    n->len = (size_t)end;
  }
  memcpy(n->data + h->pos, buf, len);
  h->pos = end;
  n->mtime = now_seconds();
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
    v->host_bytes += h->pos - h->host_size;
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
      uint64_t size;
      if (host_size(v, h, &size, e) != 0) return -1;
      base = size > INT64_MAX ? INT64_MAX : (int64_t)size;
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
    if (h->fd >= 0) close(h->fd); /* replayed handles have none */
  } else if (h->kind == H_MEM) {
    mnode *n = h->node;
    n->opens--;
    if (n->opens == 0 && n->open_bytes) {
      account_len(v, n, 0);
      n->open_bytes = 0;
    }
    maybe_free(n);
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
  if (v->mounts[w.mount].mode == MBXC_MOUNT_OVERLAY) return ov_stat(v, &w, out, e);
  return host_stat(v, &v->mounts[w.mount], w.rel, out, e);
}

static int add_name(mbxC_vfs *v, size_t *at, const char *name, size_t n, mbxC_port_error *e) {
  if (*at + n + 1 > v->names_cap) {
    size_t cap = v->names_cap ? v->names_cap * 2 : 1024;
    while (cap < *at + n + 1)
      cap *= 2;
    if (cap > (1u << 20)) return fail(e, ENOMEM, "the directory lists more than 1 MiB of names");
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

int mbxC_vfs_list(mbxC_vfs *v, const char *path, size_t len, const char **names, size_t *names_len,
                  mbxC_port_error *e) {
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
      if (scan_step(v, i, e) != 0) return -1;
      if (n == dir || n->ov || n->path_len <= w.len) continue;
      size_t p = parent_len(n->path, n->path_len);
      if (p != w.len || memcmp(n->path, w.path, w.len) != 0) continue;
      const char *base = n->path + (w.len == 1 ? 1 : w.len + 1);
      if (add_name(v, &at, base, strlen(base), e) != 0) return -1;
    }
  } else if (v->mounts[w.mount].mode == MBXC_MOUNT_OVERLAY) {
    if (ov_list(v, &w, &at, e) != 0) return -1;
  } else {
    mbxC_vfs_host h;
    char *own;
    if (host_names(v, &v->mounts[w.mount], w.rel, &h, &own, e) != 0) return -1;
    int rc = h.err ? host_fail(e, h.err, h.walk) : 0;
    for (size_t i = 0; rc == 0 && i < h.len;) {
      size_t n = strlen(h.bytes + i);
      rc = add_name(v, &at, h.bytes + i, n, e);
      i += n + 1;
    }
    free(own);
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
    return guest_node(v, w.path, w.len, 1, 0, e) ? 0 : -1;
  }
  const vmount *m = &v->mounts[w.mount];
  if (m->mode == MBXC_MOUNT_OVERLAY) return ov_mkdir(v, &w, e);
  if (strcmp(w.rel, ".") == 0) return fail(e, EEXIST, NULL);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  if (quota_file(v, e) != 0 || tap_write(v, m, e) != 0) return -1;
  const char *name;
  int dfd = parent_of(v, m, w.rel, &name);
  if (dfd < 0) return host_fail(e, -dfd, walk_mode(v));
  int ok = mkdirat(dfd, name, 0755);
  int err = errno;
  close(dfd);
  if (ok != 0) return host_fail(e, err, 0);
  v->host_files++;
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
        if (scan_step(v, i, e) != 0)
          return -1;
        else if (v->nodes[i] != n && !v->nodes[i]->ov &&
                 parent_len(v->nodes[i]->path, v->nodes[i]->path_len) == w.len &&
                 memcmp(v->nodes[i]->path, w.path, w.len) == 0 && v->nodes[i]->path_len > w.len)
          return fail(e, ENOTEMPTY, NULL);
    }
    drop_node(v, n);
    return 0;
  }
  const vmount *m = &v->mounts[w.mount];
  if (m->mode == MBXC_MOUNT_OVERLAY) return ov_remove(v, &w, e);
  if (strcmp(w.rel, ".") == 0) return fail(e, EBUSY, "%s is a mount point", m->path);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  if (tap_write(v, m, e) != 0) return -1;
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
  if (old && (old->is_dir || n->is_dir)) return fail(e, old->is_dir ? EISDIR : ENOTDIR, NULL);
  /* The node and, for a directory, everything below it take the new prefix: checked and
     saved for the journal first, so a refusal changes nothing. */
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *c = v->nodes[i];
    if (scan_step(v, i, e) != 0) return -1;
    if (c->ov || !covers(a->path, a->len, c->path, c->path_len)) continue;
    size_t rest = c->path_len - a->len;
    if (b->len + rest > MBXC_VFS_PATH_MAX) return fail(e, ENAMETOOLONG, NULL);
    if (touch(v, c) != 0) return fail(e, ENOMEM, NULL);
  }
  if (old) drop_node(v, old);
  for (size_t i = 0; i < v->node_count; i++) {
    mnode *c = v->nodes[i];
    if (c->ov || !covers(a->path, a->len, c->path, c->path_len)) continue;
    size_t rest = c->path_len - a->len;
    char *p = malloc(b->len + rest + 1);
    if (p == NULL) return fail(e, ENOMEM, NULL);
    memcpy(p, b->path, b->len);
    memcpy(p + b->len, c->path + a->len, rest);
    p[b->len + rest] = '\0';
    set_path(v, c, p, b->len + rest);
  }
  return 0;
}

int mbxC_vfs_rename(mbxC_vfs *v, const char *from, size_t from_len, const char *to, size_t to_len,
                    mbxC_port_error *e) {
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
  if (m->mode == MBXC_MOUNT_OVERLAY) return ov_rename(v, &a, &b, e);
  if (strcmp(a.rel, ".") == 0 || strcmp(b.rel, ".") == 0)
    return fail(e, EBUSY, "%s is a mount point", m->path);
  if (m->mode != MBXC_MOUNT_RW) return fail(e, EROFS, "%s is mounted read-only", m->path);
  if (tap_write(v, m, e) != 0) return -1;
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

/* ---- checkpoints: marks over the journal ---- */

static int64_t newest_mark_pos(const mbxC_vfs *v) {
  return v->marks ? v->marks->pos : INT64_MAX;
}

/* Forget the first k journal entries: nothing will be restored past them any more. */
static void journal_drop(mbxC_vfs *v, size_t k) {
  for (size_t i = 0; i < k; i++) {
    jentry *j = &v->journal[i];
    if (j->op == J_NOP) continue;
    mnode *n = j->node;
    if (j->op == J_SAVE) {
      free(j->path);
      free(j->data);
      free(j->from);
    }
    if (j->op == J_ADD) n->add_pos = -1;
    n->jrefs--;
    maybe_free(n);
  }
  if (k == 0) return;
  if (v->jlen > k) memmove(v->journal, v->journal + k, (v->jlen - k) * sizeof *v->journal);
  v->jlen -= k;
  v->jbase += (int64_t)k;
}

mbxC_vfs_mark *mbxC_vfs_mark_take(mbxC_vfs *v) {
  mbxC_vfs_mark *m = calloc(1, sizeof *m);
  if (m == NULL) return NULL;
  *m = (mbxC_vfs_mark){.view = v,
                       .next = v->marks,
                       .pos = v->jbase + (int64_t)v->jlen,
                       .valid = 1,
                       .tmp_used = v->tmp_used,
                       .mem_bytes = v->mem_bytes,
                       .mem_files = v->mem_files};
  v->marks = m;
  v->epoch++; /* every node's next change is saved again */
  v->jnops = 0;
  return m;
}

void mbxC_vfs_mark_free(mbxC_vfs_mark *m) {
  if (m == NULL) return;
  mbxC_vfs *v = m->view;
  if (v) {
    for (mbxC_vfs_mark **p = &v->marks; *p; p = &(*p)->next) {
      if (*p == m) {
        *p = m->next;
        break;
      }
    }
    /* What only this mark needed goes: all of it when it was the last one. */
    int64_t oldest = v->jbase + (int64_t)v->jlen;
    for (mbxC_vfs_mark *o = v->marks; o; o = o->next)
      if (o->pos < oldest) oldest = o->pos;
    if (oldest > v->jbase) journal_drop(v, (size_t)(oldest - v->jbase));
  }
  free(m);
}

int mbxC_vfs_mark_restore(mbxC_vfs *v, mbxC_vfs_mark *m) {
  if (m->view != v || !m->valid || m->pos < v->jbase) return -1;
  mbxC_vfs_close_all(v);
  size_t keep = (size_t)(m->pos - v->jbase);
  /* Room for every node a removal took out, first: past this point nothing can fail. */
  size_t back = 0;
  for (size_t i = keep; i < v->jlen; i++)
    back += v->journal[i].op == J_DEL;
  if (v->node_count + back > v->node_cap) {
    mnode **grown = realloc(v->nodes, (v->node_count + back) * sizeof *grown);
    if (grown == NULL) return -1;
    v->nodes = grown;
    v->node_cap = v->node_count + back;
  }
  if (index_reserve(v, v->node_count + back) != 0) return -1;
  for (size_t i = v->jlen; i-- > keep;) {
    jentry *j = &v->journal[i];
    mnode *n = j->node;
    if (j->op == J_NOP) continue;
    if (j->op == J_SAVE) {
      free(n->data);
      free(n->from);
      set_path(v, n, j->path, j->path_len);
      n->data = j->data;
      n->len = n->cap = j->len;
      n->from = j->from;
      n->is_dir = j->is_dir;
      n->whiteout = j->whiteout;
      n->mtime = j->mtime;
    } else if (j->op == J_ADD) {
      if (n->in_table) table_remove(v, n); /* out already when its removal was not journaled */
      n->add_pos = -1;
    } else {
      n->slot = v->node_count;
      v->nodes[v->node_count++] = n;
      n->in_table = 1;
      index_put(v, n);
    }
    n->open_bytes = 0; /* the mark's counters hold what it had then */
    n->jrefs--;
    maybe_free(n);
  }
  v->jlen = keep;
  v->jnops = 0;
  v->epoch++;
  for (mbxC_vfs_mark *o = v->marks; o; o = o->next)
    if (o->pos > m->pos) o->valid = 0;
  /* The quotas follow the memory tree back; what rw mounts grew by stays counted. */
  v->tmp_used = m->tmp_used;
  v->mem_bytes = m->mem_bytes;
  v->mem_files = m->mem_files;
  return 0;
}

void mbxC_vfs_reset(mbxC_vfs *v) {
  mbxC_vfs_close_all(v);
  for (size_t i = 0; i < v->node_count;) {
    if (v->nodes[i]->guest_made)
      drop_node(v, v->nodes[i]); /* swaps the last node into i */
    else
      i++;
  }
  v->tmp_used = v->mem_bytes = v->mem_files = 0;
  v->host_bytes = v->host_files = 0;
}

/* ---- the change set ---- */

static int by_path(const void *a, const void *b) {
  const mnode *x = *(const mnode *const *)a, *y = *(const mnode *const *)b;
  size_t n = x->path_len < y->path_len ? x->path_len : y->path_len;
  int c = memcmp(x->path, y->path, n);
  return c ? c : (x->path_len > y->path_len) - (x->path_len < y->path_len);
}

static int by_string(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The kind of overlay node n's change, or 0 when the guest's view equals the host's. */
static int ov_change(mbxC_vfs *v, const mnode *n, int *host_dir) {
  where w;
  mbxC_port_error e;
  mbxC_vfs_host h;
  if (locate(v, n->path, n->path_len, &w, &e) != 0 || w.mount < 0) return 0;
  int hk = host_kind(v, &v->mounts[w.mount], w.rel, &e);
  if (hk < 0) hk = K_OTHER;
  if (hk == K_FILE && host_look(v, &v->mounts[w.mount], w.rel, &h, &e) != 0) hk = K_OTHER;
  *host_dir = hk == K_DIR;
  if (n->whiteout) return hk == K_NONE ? 0 : MBXC_CHANGE_REMOVED;
  if (n->is_dir) return hk == K_DIR ? 0 : MBXC_CHANGE_CREATED;
  if (hk == K_FILE) {
    /* The same bytes as the host's (written back unchanged): no change. */
    if (h.size != n->len) return MBXC_CHANGE_MODIFIED;
    char *data;
    size_t len;
    if (host_read_upto(v, &w, 0, n->len, &data, &len, &e) != 0) return MBXC_CHANGE_MODIFIED;
    int same = len == n->len && (len == 0 || memcmp(data, n->data, len) == 0);
    free(data);
    return same ? 0 : MBXC_CHANGE_MODIFIED;
  }
  if (hk == K_OTHER) return MBXC_CHANGE_MODIFIED;
  return n->from ? MBXC_CHANGE_RENAMED : MBXC_CHANGE_CREATED;
}

static int changes_walk(mbxC_vfs *v, mbxC_vfs_change_fn fn, void *ud, mbxC_port_error *e) {
  size_t count = 0;
  for (size_t i = 0; i < v->node_count; i++)
    count += v->nodes[i]->guest_made != 0;
  if (count == 0) return 0;
  mnode **list = malloc(count * sizeof *list);
  int *kinds = calloc(count, sizeof *kinds);
  int *dirs = calloc(count, sizeof *dirs);
  const char **froms = malloc(count * sizeof *froms);
  int rc = 0;
  if (list == NULL || kinds == NULL || dirs == NULL || froms == NULL) {
    rc = fail(e, ENOMEM, NULL);
    goto done;
  }
  size_t k = 0, nfrom = 0;
  for (size_t i = 0; i < v->node_count; i++)
    if (v->nodes[i]->guest_made) list[k++] = v->nodes[i];
  qsort(list, count, sizeof *list, by_path);
  for (size_t i = 0; i < count; i++) {
    mnode *n = list[i];
    kinds[i] = n->ov ? ov_change(v, n, &dirs[i]) : MBXC_CHANGE_CREATED;
    if (kinds[i] == MBXC_CHANGE_RENAMED) froms[nfrom++] = n->from;
  }
  qsort(froms, nfrom, sizeof *froms, by_string);
  for (size_t i = 0; i < count && rc == 0; i++) {
    mnode *n = list[i];
    if (kinds[i] == 0) continue;
    /* The source of a rename shows as the rename's "from", not as a removal too. */
    if (kinds[i] == MBXC_CHANGE_REMOVED && nfrom &&
        bsearch(&n->path, froms, nfrom, sizeof *froms, by_string))
      continue;
    mbxC_vfs_change c = {.path = n->path,
                         .path_len = n->path_len,
                         .kind = kinds[i],
                         .from = kinds[i] == MBXC_CHANGE_RENAMED ? n->from : NULL,
                         .is_dir = kinds[i] == MBXC_CHANGE_REMOVED ? dirs[i] : n->is_dir,
                         .data = n->whiteout || n->is_dir ? NULL : n->data,
                         .len = n->whiteout || n->is_dir ? 0 : n->len};
    if (fn(ud, &c) != 0) rc = fail(e, ECANCELED, NULL);
  }
done:
  free(list);
  free(kinds);
  free(dirs);
  free(froms);
  return rc;
}

int mbxC_vfs_changes(mbxC_vfs *v, mbxC_vfs_change_fn fn, void *ud, mbxC_port_error *e) {
  /* The host's own looks (after the run), not the guest's: not logged. */
  int tapped = v->tapped;
  v->tapped = 0;
  int rc = changes_walk(v, fn, ud, e);
  v->tapped = tapped;
  return rc;
}

int mbxC_vfs_host_original(mbxC_vfs *v, const char *path, size_t len, uint64_t max, char **data,
                           size_t *n, mbxC_port_error *e) {
  where w;
  *data = NULL;
  *n = 0;
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) return fail(e, ENOENT, "a memory path has no host original");
  /* The host's own look (a diff after the run), not the guest's: not logged. */
  int tapped = v->tapped;
  v->tapped = 0;
  int rc = host_read_upto(v, &w, 0, max, data, n, e);
  v->tapped = tapped;
  return rc;
}

int mbxC_vfs_host_id(mbxC_vfs *v, const char *path, size_t len, mbxC_vfs_file_id *id,
                     mbxC_port_error *e) {
  where w;
  memset(id, 0, sizeof *id);
  if (locate(v, path, len, &w, e) != 0) return -1;
  if (w.mount < 0) return fail(e, ENOENT, "a memory path has no host original");
  /* The same confined open as a read (a regular file, the inode it looked at), then only
     its fstat: nothing is read. */
  int tapped = v->tapped;
  v->tapped = 0;
  int number, rc = -1;
  if (host_open(v, &w, MBXC_FS_READ, &number, e) == 0) {
    handle *h = get_handle(v, number, e);
    struct stat st;
    if (fstat(h->fd, &st) != 0) {
      host_fail(e, errno, 0);
    } else {
      id->dev = (uint64_t)st.st_dev;
      id->ino = (uint64_t)st.st_ino;
      id->size = (uint64_t)st.st_size;
      id->nlink = (uint64_t)st.st_nlink;
      rc = 0;
    }
    release_handle(v, h);
  }
  v->tapped = tapped;
  return rc;
}
