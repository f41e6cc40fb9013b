/* host/changes.c -- the change set of the sandbox's filesystem view (capabilities/vfs.c walks
   it): mbx_sandbox_changes as JSON, mbx_sandbox_changes_each one change at a time with
   mbx_sandbox_change_original for the host's bytes a change replaced. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/error.h"
#include "host/sandbox.h"
#include "vm/json_text.h"

static const char *const kind_names[] = {"", "created", "modified", "removed", "renamed"};

typedef struct emit {
  mbxU_buf b;
  unsigned flags;
  size_t count;
} emit;

static int put_change(void *ud, const mbxC_vfs_change *c) {
  emit *out = ud;
  mbxU_buf *b = &out->b;
  mbxU_buf_puts(b, out->count++ ? ",{\"path\":" : "{\"path\":");
  mbxV_json_put_string(mbxU_buf_sink, b, c->path, c->path_len);
  mbxU_buf_puts(b, ",\"kind\":\"");
  mbxU_buf_puts(b, kind_names[c->kind]);
  mbxU_buf_puts(b, "\"");
  if (c->from) {
    mbxU_buf_puts(b, ",\"from\":");
    mbxV_json_put_string(mbxU_buf_sink, b, c->from, strlen(c->from));
  }
  mbxU_buf_puts(b, c->is_dir ? ",\"type\":\"dir\",\"size\":" : ",\"type\":\"file\",\"size\":");
  mbxV_json_put_integer(mbxU_buf_sink, b, (int64_t)c->len);
  if ((out->flags & MBX_CHANGES_CONTENT) && c->data) {
    mbxU_buf_puts(b, ",\"content\":");
    mbxV_json_put_string(mbxU_buf_sink, b, c->data, c->len);
  }
  mbxU_buf_puts(b, "}");
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
  mbxU_buf_puts(&out.b, "[");
  mbxC_vfs *v = sb->backend->files ? sb->backend->files(sb->impl) : NULL;
  mbxC_port_error e;
  int rc = v ? mbxC_vfs_changes(v, put_change, &out, &e) : 0;
  mbxH_sandbox_release(sb);
  mbxU_buf_puts(&out.b, "]");
  size_t n;
  char *text = rc == 0 ? mbxU_buf_take(&out.b, &n) : NULL;
  mbxU_buf_free(&out.b);
  if (text == NULL) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_changes: out of host memory");
    return MBX_NO_MEMORY;
  }
  *json = text;
  if (len) *len = n;
  return MBX_OK;
}

/* The public kinds are the view's. */
_Static_assert(MBX_CHANGE_CREATED == MBXC_CHANGE_CREATED &&
                   MBX_CHANGE_MODIFIED == MBXC_CHANGE_MODIFIED &&
                   MBX_CHANGE_REMOVED == MBXC_CHANGE_REMOVED &&
                   MBX_CHANGE_RENAMED == MBXC_CHANGE_RENAMED,
               "mbx_change kinds");

/* A walk in progress on this thread: the change its callback is visiting is the only one
   mbx_sandbox_change_original reads for (a callback may walk another sandbox: outer). */
typedef struct walk {
  mbx_sandbox *sb;
  mbxC_vfs *view;
  mbx_change_fn fn;
  void *ud;
  const mbx_change *current;           /* what fn was given, while it runs */
  const mbxC_vfs_change *current_view; /* the same change, as the view told it */
  struct walk *outer;
  /* The host files whose originals this walk has read (each at most once: a guest that
     changed 40 hard links of one large file must not make the host read it 40 times), the
     first path that read each, and the bytes of the small ones, for their other links. */
  struct seen *seen;
  size_t seen_count, seen_cap;
  uint64_t cached_bytes;
} walk;

typedef struct seen {
  mbxC_vfs_file_id id;
  char *path;
  char *bytes; /* NULL: not kept (past WALK_CACHE_MAX) */
  size_t len;
} seen;

/* Bytes of originals a walk keeps for the other hard links of their files. */
#define WALK_CACHE_MAX ((uint64_t)4 << 20)

static void walk_forget(walk *w) {
  for (size_t i = 0; i < w->seen_count; i++) {
    free(w->seen[i].path);
    free(w->seen[i].bytes);
  }
  free(w->seen);
  w->seen = NULL;
  w->seen_count = w->seen_cap = 0;
  w->cached_bytes = 0;
}

static _Thread_local walk *walks;

static int visit(void *ud, const mbxC_vfs_change *vc) {
  walk *w = ud;
  mbx_change c = {.kind = vc->kind,
                  .is_dir = vc->is_dir != 0,
                  .path = vc->path,
                  .path_len = vc->path_len,
                  .from = vc->from,
                  .from_len = vc->from ? strlen(vc->from) : 0,
                  .data = vc->data,
                  .len = vc->len};
  w->current = &c;
  w->current_view = vc;
  int rc = w->fn(w->ud, &c);
  w->current = NULL;
  w->current_view = NULL;
  return rc;
}

MBX_API mbx_status mbx_sandbox_changes_each(mbx_sandbox *sb, mbx_change_fn fn, void *ud,
                                            mbx_error *err) {
  if (sb == NULL || fn == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_changes_each: the sandbox and fn must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (!mbxH_sandbox_claim(sb, "mbx_sandbox_changes_each", err)) return MBX_SANDBOX_BUSY;
  walk w = {.sb = sb, .fn = fn, .ud = ud, .outer = walks};
  w.view = sb->backend->files ? sb->backend->files(sb->impl) : NULL;
  walks = &w;
  mbxC_port_error e;
  int rc = w.view ? mbxC_vfs_changes(w.view, visit, &w, &e) : 0;
  walks = w.outer;
  walk_forget(&w);
  mbxH_sandbox_release(sb);
  if (rc == 0) return MBX_OK;
  if (e.errnum != ECANCELED) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_changes_each: %s", e.message);
    return MBX_NO_MEMORY;
  }
  mbxU_error_set(err, MBX_INTERRUPTED, "mbx_sandbox_changes_each: the callback stopped the walk");
  return MBX_INTERRUPTED;
}

MBX_API mbx_status mbx_sandbox_change_original(mbx_sandbox *sb, const mbx_change *c, uint64_t max,
                                               char **data, size_t *len, mbx_error *err) {
  if (data) *data = NULL;
  if (len) *len = 0;
  if (sb == NULL || c == NULL || data == NULL || len == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_change_original: the sandbox, c, data and len must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  /* Only the change being visited, on the thread walking it: the walk holds the sandbox's
     claim, and the path read is the view's own, never one the caller wrote into c. */
  walk *w = walks;
  while (w != NULL && !(w->sb == sb && w->current == c))
    w = w->outer;
  if (w == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_sandbox_change_original: c is not the change being visited (call it "
                   "from the mbx_sandbox_changes_each callback, with the change it was given)");
    return MBX_INVALID_ARGUMENT;
  }
  const mbxC_vfs_change *vc = w->current_view;
  const char *path = vc->kind == MBXC_CHANGE_RENAMED ? vc->from : vc->path;
  size_t path_len = strlen(path);
  mbxC_port_error e;
  mbxC_vfs_file_id id;
  mbx_status s = MBX_INVALID_ARGUMENT;
  if (mbxC_vfs_host_id(w->view, path, path_len, &id, &e) != 0) goto refused;
  for (size_t i = 0; i < w->seen_count; i++) {
    seen *p = &w->seen[i];
    if (p->id.dev != id.dev || p->id.ino != id.ino) continue;
    if (p->bytes == NULL || p->len != id.size) {
      mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                     "a hard link of %s, whose original this walk has read already", p->path);
      return MBX_INVALID_ARGUMENT;
    }
    if ((*data = malloc(p->len ? p->len : 1)) == NULL) goto no_memory;
    memcpy(*data, p->bytes, p->len);
    *len = p->len;
    return MBX_OK;
  }
  /* Refused whole before a byte is read (the read below checks it again, against the file
     it opens). */
  if (id.size > max) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "File too large (the file is larger than %llu bytes)",
                   (unsigned long long)max);
    return MBX_INVALID_ARGUMENT;
  }
  if (w->seen_count == w->seen_cap) {
    size_t cap = w->seen_cap ? 2 * w->seen_cap : 16;
    seen *grown = realloc(w->seen, cap * sizeof *grown);
    if (grown == NULL) goto no_memory;
    w->seen = grown;
    w->seen_cap = cap;
  }
  seen *p = &w->seen[w->seen_count];
  *p = (seen){.id = id, .path = malloc(path_len + 1)};
  if (p->path == NULL) goto no_memory;
  memcpy(p->path, path, path_len + 1);
  w->seen_count++;
  if (mbxC_vfs_host_original(w->view, path, path_len, max, data, len, &e) != 0) {
    s = e.errnum == ENOMEM ? MBX_NO_MEMORY : MBX_INVALID_ARGUMENT;
    goto refused;
  }
  /* Only a file with other links can be asked for again. */
  if (id.nlink > 1 && id.size == *len && *len <= WALK_CACHE_MAX - w->cached_bytes &&
      (p->bytes = malloc(*len ? *len : 1)) != NULL) {
    memcpy(p->bytes, *data, *len);
    p->len = *len;
    w->cached_bytes += *len;
  }
  return MBX_OK;
refused:
  mbxU_error_set(err, s, "%s", e.message);
  return s;
no_memory:
  mbxU_error_set(err, MBX_NO_MEMORY, "mbx_sandbox_change_original: out of host memory");
  return MBX_NO_MEMORY;
}
