/* capabilities/vfs.h -- the sandbox's filesystem view: virtual paths, a mount table of memory
   files and confined host directories, a handle table and quotas. No Lua here. */
#ifndef MBX_CAPABILITIES_VFS_H
#define MBX_CAPABILITIES_VFS_H

/*
** What the guest sees is a tree of virtual absolute paths. A path is normalized lexically
** first (".", "..", duplicate slashes; ".." at "/" stays at "/"), then matched against the
** mount table, longest prefix first:
**   - a host mount (ro or rw) reaches one host directory through one directory fd opened
**     when the view is made; every open under it is an openat2(RESOLVE_BENEATH |
**     RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV) from that fd, or a component-by-component
**     O_NOFOLLOW walk where openat2 is refused (ENOSYS, or EPERM from a seccomp profile);
**   - the memory tree: "/", the ancestors of every mount point, the policy's files (read-only
**     inputs) and their directories, and the memory /tmp (writable, sized by the tmp quota);
**   - everything else does not exist, with one error whatever the host holds at that path.
** Only regular files and directories are ever opened: a host object is first opened O_PATH
** and fstat'ed, so FIFOs, sockets and devices are refused without being opened, then
** reopened with O_NONBLOCK | O_NOCTTY and checked to be the same inode.
** An overlay mount reads through to its host directory exactly as a ro mount does; every
** change the guest makes below it (a file written, a directory made, an entry removed or
** renamed) lands in the view's node table as a memory file, directory or whiteout, charged to
** the quota; the host directory is never opened for writing. Renaming a directory in an
** overlay answers EXDEV, as overlayfs does. mbxC_vfs_changes walks those entries.
*/

#include <stddef.h>
#include <stdint.h>

#include "capabilities/port.h"

/* Longest virtual path (bytes, without the NUL), and longest component. */
#define MBXC_VFS_PATH_MAX 1024
#define MBXC_VFS_NAME_MAX 255
/* A buffer every normalization fits in (mbxC_vfs_normalize's out_size). */
#define MBXC_VFS_PATH_BUF (MBXC_VFS_PATH_MAX + 2)
/* Mounts and policy files one view may hold. */
#define MBXC_VFS_MAX_MOUNTS 32
#define MBXC_VFS_MAX_FILES 1024

/* Mount modes (the values of the public MBX_MOUNT_* flags). */
enum { MBXC_MOUNT_RO = 1, MBXC_MOUNT_RW = 2, MBXC_MOUNT_OVERLAY = 4 };

/* Quota defaults and ranges. */
#define MBXC_DEFAULT_FS_TMP (8ull << 20)
#define MBXC_DEFAULT_FS_BYTES (16ull << 20)
#define MBXC_DEFAULT_FS_FILES 1000ull
#define MBXC_DEFAULT_FS_OPEN_FILES 64ull
#define MBXC_MAX_FS_BYTES (1ull << 40)
#define MBXC_MAX_FS_FILES 1000000ull
#define MBXC_MAX_FS_OPEN_FILES 4096ull

/* What a view is made from (the policy's copy: capabilities/policy.h owns the strings). */
typedef struct mbxC_fs_mount {
  char *path; /* virtual, normalized, not "/" */
  char *host; /* absolute, resolved once (realpath) when the policy took it */
  int mode;   /* MBXC_MOUNT_RO, MBXC_MOUNT_RW or MBXC_MOUNT_OVERLAY */
} mbxC_fs_mount;
typedef struct mbxC_fs_file {
  char *path; /* virtual, normalized */
  char *data;
  size_t len;
} mbxC_fs_file;
typedef struct mbxC_fs_spec {
  mbxC_fs_mount *mounts;
  size_t mount_count;
  mbxC_fs_file *files;
  size_t file_count;
  uint64_t tmp_bytes;  /* size of the memory /tmp */
  uint64_t bytes;      /* bytes the guest may add: memory files plus host files' growth */
  uint64_t files_max;  /* files and directories the guest may create */
  uint64_t open_files; /* handles open at once */
  /* What module reads (MBXC_FS_MODULE: require, loadfile, dofile) see besides the view: a host
     directory whose .lua files they find at the view's root where the view has nothing
     (the CLI's script folder; resolved once, NULL for none), and the host's registered
     modules by name (MBXC_FS_MODULE_NAME; path = the name). io, fs and exec see neither. */
  char *module_dir;
  mbxC_fs_file *modules;
  size_t module_count;
} mbxC_fs_spec;

/* Normalize path (len bytes, not NUL-terminated) into out (out_size bytes, NUL-terminated):
   an absolute path without ".", "..", empty components or a trailing slash. A relative path
   is taken from "/" (the sandbox's working directory). Returns 0, or EINVAL (a NUL byte),
   ENOENT (empty) or ENAMETOOLONG (path longer than MBXC_VFS_PATH_MAX as written, a component
   longer than MBXC_VFS_NAME_MAX, or out_size too small: MBXC_VFS_PATH_BUF always fits). */
int mbxC_vfs_normalize(const char *path, size_t len, char *out, size_t out_size, size_t *out_len);
/* 1 when path is absolute and already normalized (what a policy accepts), else 0. */
int mbxC_vfs_is_canonical(const char *path, size_t len);
/* The mount of normalized path among the normalized prefixes[0..n): the index of the longest
   one that is path or a parent of it ("/a" covers "/a" and "/a/b", not "/ab"), -1 when none.
   *rel_off gets the offset of what lies below the mount (path + *rel_off is "" or "b/c"). */
int mbxC_vfs_match(const char *const *prefixes, size_t n, const char *path, size_t len,
                   size_t *rel_off);

typedef struct mbxC_vfs mbxC_vfs;

/* A view from spec (copied: the spec may go away). Opens one directory fd per host mount.
   NULL with *e filled when a host directory cannot be opened or host memory runs out. */
mbxC_vfs *mbxC_vfs_new(const mbxC_fs_spec *spec, mbxC_port_error *e);
/* Close every handle and fd, free every memory file. NULL is fine. */
void mbxC_vfs_free(mbxC_vfs *v);
/* Close every open handle (a run ended): their numbers are never valid again. */
void mbxC_vfs_close_all(mbxC_vfs *v);
/* The clock memory files' mtime comes from (the port's: a policy's fixed time shows);
   without one, the real clock. */
void mbxC_vfs_set_clock(mbxC_vfs *v, int64_t (*now)(void *ud), void *ud);
/* Tests: use the O_NOFOLLOW walk instead of openat2 (on != 0). */
void mbxC_vfs_force_walk(mbxC_vfs *v, int on);
/* Handles open now, and quota use so far. */
size_t mbxC_vfs_open_count(const mbxC_vfs *v);
uint64_t mbxC_vfs_bytes_used(const mbxC_vfs *v);
uint64_t mbxC_vfs_files_used(const mbxC_vfs *v);

/* The exec backend's view of host mount i (0..mbxC_vfs_mount_count): its virtual path, mode
   and the O_PATH directory fd opened when the view was made (owned by the view), so a process
   sees the directory the view resolved once, not whatever is at the host path now. */
size_t mbxC_vfs_mount_count(const mbxC_vfs *v);
int mbxC_vfs_mount_fd(const mbxC_vfs *v, size_t i, const char **path, int *mode);

/* Checkpoints of the memory tree and the overlays (mbx_sandbox_checkpoint / rewind). While
   a mark is live, a journal records the first change to each memory node per checkpoint
   epoch (its path, bytes and kind, copied once), every creation and every removal (the node
   kept); restoring undoes the entries after the mark, newest first. So taking a mark copies
   nothing, and a restore costs what changed since the mark, never what stayed the same (the
   granularity is one file: the first write to a file after a mark copies that file).
   Restoring closes every handle; what rw mounts were written stays (and stays counted).
   Restoring a mark makes the newer marks invalid (their restore answers -1). take: NULL when
   out of host memory; restore: -1 when out of host memory (nothing changed) or the mark is
   not valid for v. Marks may outlive the view (then they only free). */
typedef struct mbxC_vfs_mark mbxC_vfs_mark;
mbxC_vfs_mark *mbxC_vfs_mark_take(mbxC_vfs *v);
int mbxC_vfs_mark_restore(mbxC_vfs *v, mbxC_vfs_mark *m);
void mbxC_vfs_mark_free(mbxC_vfs_mark *m);
/* Bytes the journal has copied so far (tests assert a rewind's cost with it). */
uint64_t mbxC_vfs_journal_copied(const mbxC_vfs *v);
/* Entries the journal holds now (tests: a create/remove loop under a mark keeps it small). */
size_t mbxC_vfs_journal_entries(const mbxC_vfs *v);
/* Back to the view as made: every handle closed, every file and directory the guest made in
   /tmp and the overlays dropped (journaled, so a live mark can still be restored), quotas
   zero. */
void mbxC_vfs_reset(mbxC_vfs *v);

/* The change set: what the guest created, modified, removed or renamed in the overlays and
   the memory /tmp, as the host would see it if applied. Each entry once, sorted by path
   (bytewise); an overlay file written back with the host's bytes is no change, and the
   source of a rename appears as the rename's from, not as a removal. data/len: a file's
   bytes now (NULL for directories and removals), valid during the callback only. */
enum {
  MBXC_CHANGE_CREATED = 1,
  MBXC_CHANGE_MODIFIED = 2,
  MBXC_CHANGE_REMOVED = 3,
  MBXC_CHANGE_RENAMED = 4
};
typedef struct mbxC_vfs_change {
  const char *path;
  size_t path_len;
  int kind;
  const char *from; /* MBXC_CHANGE_RENAMED: the path it was renamed from; else NULL */
  int is_dir;
  const char *data;
  size_t len;
} mbxC_vfs_change;
typedef int (*mbxC_vfs_change_fn)(void *ud, const mbxC_vfs_change *c);
/* 0, or -1 (e: out of host memory, or ECANCELED when fn returned nonzero). */
int mbxC_vfs_changes(mbxC_vfs *v, mbxC_vfs_change_fn fn, void *ud, mbxC_port_error *e);
/* The host's bytes at overlay path (for a diff against the original): confined as every
   read is, at most max bytes (EFBIG past it); *data malloc'd (free it). */
int mbxC_vfs_host_original(mbxC_vfs *v, const char *path, size_t len, uint64_t max, char **data,
                           size_t *n, mbxC_port_error *e);
/* Which host file mbxC_vfs_host_original would read at overlay path, without reading it: its
   device, inode, size and link count, through the same confined open (so a diff reads each inode once,
   however many hard links of it the guest changed). */
typedef struct mbxC_vfs_file_id {
  uint64_t dev, ino, size, nlink;
} mbxC_vfs_file_id;
int mbxC_vfs_host_id(mbxC_vfs *v, const char *path, size_t len, mbxC_vfs_file_id *id,
                     mbxC_port_error *e);

/* Record/replay of the host's answers (snapshots of sandboxes with mounts; the record layer,
   capabilities/port_record.c, implements the tap). With a tap set, every answer the view gets
   from a host mount on the guest's behalf passes through it, in the order the guest asked:
   a look at a path (what host_kind and stat see), a read-only open, a read, the size of an
   open file, a directory's names. Live, the tap is told each request and answer (it logs
   them); replaying, the host is not asked at all: the tap fills the answer from its log
   (-1: the log has no such answer; the operation fails with EIO and the tap has noted the
   divergence), and a host file "opened" then has no descriptor. Writes to rw mounts are
   not recorded: live, the tap is told which mount was written (so the snapshot can be
   refused); replaying, they are refused. Memory files and the overlays' changes are
   re-executed, not recorded: they follow from the guest's operations and these answers. */
enum {
  MBXC_VFS_TAP_LOOK = 1,
  MBXC_VFS_TAP_OPEN,
  MBXC_VFS_TAP_READ,
  MBXC_VFS_TAP_SIZE,
  MBXC_VFS_TAP_LIST
};
enum { MBXC_LOOK_FILE = 1, MBXC_LOOK_DIR = 2, MBXC_LOOK_LINK = 3, MBXC_LOOK_OTHER = 4 };
typedef struct mbxC_vfs_host {
  /* look, list: the errno of the confined open or fstat (0: none), 1 when the O_NOFOLLOW
     walk gave it (its ELOOP reads "links are not followed") */
  int err, walk;
  int type;      /* look: MBXC_LOOK_* */
  uint64_t size; /* look: the file's size; open, size: the open file's size */
  int64_t mtime;
  uint64_t nlink;
  int failed; /* open, read, size: the host refused; e is the guest's error */
  mbxC_port_error e;
  const char *bytes; /* read: the bytes; list: the names, each followed by a NUL */
  size_t len;
} mbxC_vfs_host;
typedef struct mbxC_vfs_tap {
  void *ud;
  int (*replaying)(void *ud);
  /* mount: the index of the mount; rel: below it ("." its root; NULL for read and size);
     a, b: open: the flags; read: the position and the length asked */
  int (*answer)(void *ud, int kind, size_t mount, const char *rel, uint64_t a, uint64_t b,
                mbxC_vfs_host *h);
  /* A write to rw mount path is about to reach the host: 0 to go on, -1 to refuse. */
  int (*wrote)(void *ud, const char *mount_path);
} mbxC_vfs_tap;
/* Set (or with NULL clear) the tap; *tap is copied. */
void mbxC_vfs_set_tap(mbxC_vfs *v, const mbxC_vfs_tap *tap);

/* Guest time (capabilities/port.h): the wait of the operation in progress (NULL: none), set
   by the port around each fs operation that carries one (open, read, write, list). The work
   whose size the guest decides but no byte charge covers -- an overlay copy-up of a host file
   (its size), the zero fill of a write past the end (the gap), a scan of the node table (the
   nodes the guest made) -- checks its deadline and interrupt every MBXC_VFS_WORK_STEP units
   and stops with MBXC_E_TIMEDOUT (nothing changed), so one call cannot outrun the run's
   deadline by more than one step. */
#define MBXC_VFS_WORK_STEP ((size_t)1 << 20) /* bytes copied or filled; nodes: / 16 */
void mbxC_vfs_set_wait(mbxC_vfs *v, const mbxC_wait *w);

/* The operations of capabilities/port.h (fs_*), on guest paths (normalized here). Each
   returns 0, or -1 with e->errnum an errno value and e->message its text plus the reason in
   parentheses when there is one ("No such file or directory (not in the sandbox view;
   mounts: /data ro, /tmp)"); the message never names the host path. */
int mbxC_vfs_open(mbxC_vfs *v, const char *path, size_t len, int flags, int *handle,
                  mbxC_port_error *e);
int mbxC_vfs_read(mbxC_vfs *v, int handle, char *buf, size_t len, size_t *got, mbxC_port_error *e);
int mbxC_vfs_write(mbxC_vfs *v, int handle, const char *buf, size_t len, size_t *put,
                   mbxC_port_error *e);
int mbxC_vfs_seek(mbxC_vfs *v, int handle, int whence, int64_t offset, int64_t *pos,
                  mbxC_port_error *e);
int mbxC_vfs_close(mbxC_vfs *v, int handle, mbxC_port_error *e);
int mbxC_vfs_stat(mbxC_vfs *v, const char *path, size_t len, mbxC_fs_stat *st, mbxC_port_error *e);
/* Names NUL-separated (each followed by a NUL) in *names, valid until the next call. */
int mbxC_vfs_list(mbxC_vfs *v, const char *path, size_t len, const char **names, size_t *names_len,
                  mbxC_port_error *e);
int mbxC_vfs_mkdir(mbxC_vfs *v, const char *path, size_t len, mbxC_port_error *e);
int mbxC_vfs_remove(mbxC_vfs *v, const char *path, size_t len, mbxC_port_error *e);
int mbxC_vfs_rename(mbxC_vfs *v, const char *from, size_t from_len, const char *to, size_t to_len,
                    mbxC_port_error *e);

#endif
