/* capabilities/port_local.c -- the port served in-process: clock, CPU time, random seeds, the
   virtual environment, host callbacks and native calls, from a copy of the policy. */
#include "capabilities/port_local.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <time.h>

#include "capabilities/exec_copy.h"
#include "capabilities/ffi.h"
#include "capabilities/seeds.h"
#include "common/bytes.h"

static int64_t local_wall_time(void *ud) {
  mbxC_port_local *pl = ud;
  if (pl->time_fixed) return pl->time;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec;
}

static uint64_t thread_cpu_ns(void) {
  struct timespec ts;
  /* The calling thread's CPU time, not the process's (what stock os.clock reports): other
     sandboxes and host threads in the same process must not show up in a guest's figure,
     nor reveal how busy the host is. */
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint64_t coarse_ns(void) {
  struct timespec ts; /* a vDSO read: a few ns */
  clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static double local_cpu_time(void *ud) {
  mbxC_port_local *pl = ud;
  uint64_t now = thread_cpu_ns();
  if (!pl->cpu_start_known) {
    /* The run's thread has been running the guest since the start: the stretch before this
       first call counts at the coarse wall clock (tick resolution, so no finer clock reaches
       the guest), every later stretch at the thread's exact CPU time. */
    uint64_t before = coarse_ns() - pl->run_start_coarse_ns;
    pl->cpu_start_ns = now > before ? now - before : 0;
    pl->cpu_start_known = 1;
  }
  return now > pl->cpu_start_ns ? (double)(now - pl->cpu_start_ns) / 1e9 : 0.0;
}

/* splitmix64: a fixed, well-mixed sequence from one word, for the seeds that follow a
   policy seed (math.randomseed() with no argument stays reproducible). */
static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static void local_random_seed(void *ud, uint64_t seed[2]) {
  mbxC_port_local *pl = ud;
  uint64_t n = pl->draws++;
  if (pl->seed_fixed) {
    if (n == 0) {
      seed[0] = pl->seed;
      seed[1] = 0;
    } else {
      seed[0] = splitmix64(pl->seed ^ splitmix64(2 * n));
      seed[1] = splitmix64(pl->seed ^ splitmix64(2 * n + 1));
    }
    return;
  }
  if (pl->seeds) {
    mbxC_seeds_draw(pl->seeds, seed); /* no system call per sandbox */
    return;
  }
  if (getrandom(seed, 2 * sizeof *seed, 0) == (ssize_t)(2 * sizeof *seed)) return;
  /* No kernel randomness (a seccomp filter, an old kernel): the clocks still differ between
     sandboxes, and the draw counter between calls. No address is used: it would tell the
     guest where the host's heap is. */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  seed[0] = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ n);
  clock_gettime(CLOCK_MONOTONIC, &ts);
  seed[1] = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ ~n);
}

static const char *local_env_get(void *ud, const char *name, size_t name_len, size_t *value_len) {
  mbxC_port_local *pl = ud;
  for (size_t i = 0; i < pl->env_count; i++) {
    const mbxC_env_var *v = &pl->env[i];
    if (strlen(v->name) == name_len && memcmp(v->name, name, name_len) == 0) {
      if (value_len) *value_len = v->value_len;
      return v->value;
    }
  }
  return NULL;
}

static mbxC_call_result local_host_call(void *ud, size_t index, const char *args, size_t args_len,
                                        const mbxC_wait *wait, const char **reply,
                                        size_t *reply_len) {
  mbxC_port_local *pl = ud;
  (void)wait; /* host time: the callback decides how long it takes (capabilities/port.h) */
  return mbxC_hostfn_call(&pl->host_fns.fns[index], &pl->reply, args, args_len, reply, reply_len);
}

static mbxC_call_result native_error(mbxC_port_local *pl, const char **bytes, size_t *len) {
  *bytes = pl->native_error;
  *len = strlen(pl->native_error);
  return MBXC_CALL_ERROR;
}

static mbxC_call_result local_native_call(void *ud, size_t index, const mbxC_ffi_value *args,
                                          const mbxC_wait *wait, mbxC_ffi_value *ret,
                                          const char **bytes, size_t *len) {
  mbxC_port_local *pl = ud;
  (void)wait; /* host time, as for host callbacks */
  const mbxC_hostfn *fn = &pl->host_fns.fns[index];
  if (mbxC_native_sig(fn->native)->ret != 'o') {
    mbxC_native_call(fn->native, args, NULL, 0, ret);
    return MBXC_CALL_VALUE;
  }
  if (pl->native_out == NULL && (pl->native_out = malloc(MBX_NATIVE_OUT_MAX)) == NULL) {
    snprintf(pl->native_error, sizeof pl->native_error, "%s: out of host memory", fn->name);
    return native_error(pl, bytes, len);
  }
  mbxC_native_call(fn->native, args, pl->native_out, MBX_NATIVE_OUT_MAX, ret);
  /* A length past the buffer means the function wrote past it or lies about it: either way
     its bytes cannot be trusted, and none of them reach the guest. */
  if (ret->o > MBX_NATIVE_OUT_MAX) {
    snprintf(pl->native_error, sizeof pl->native_error,
             "%s: the native function returned length %zu, more than its %u-byte buffer", fn->name,
             ret->o, (unsigned)MBX_NATIVE_OUT_MAX);
    return native_error(pl, bytes, len);
  }
  *bytes = pl->native_out;
  *len = ret->o;
  return MBXC_CALL_VALUE;
}

/* ---- the filesystem view (capabilities/vfs.c does the work) ---- */

/* The view's clock for memory files' mtime: the port's (a policy's fixed time). In
   deterministic mode without a fixed time it is 0: the record layer does not see this read,
   so the real clock would make a replay diverge. */
static int64_t vfs_clock(void *ud) {
  mbxC_port_local *pl = ud;
  if (!pl->time_fixed && pl->grants.deterministic) return 0;
  return local_wall_time(ud);
}

static int make_view(mbxC_port_local *pl) {
  mbxC_vfs *v = mbxC_vfs_new(pl->fs_policy ? &pl->fs_policy->fs : &pl->fs_spec, &pl->fs_error);
  if (v == NULL) return -1;
  mbxC_vfs_set_clock(v, vfs_clock, pl);
  if (pl->fs_tapped) mbxC_vfs_set_tap(v, &pl->fs_tap);
  mbxC_vfs_free(pl->vfs);
  pl->vfs = v;
  return 0;
}

/* The view, made at the first file operation when the policy has no mounts or files (most
   sandboxes never touch a file: they pay nothing for the view). NULL with *e filled. */
static mbxC_vfs *view(void *ud, mbxC_port_error *e) {
  mbxC_port_local *pl = ud;
  if (pl->vfs == NULL && make_view(pl) != 0) {
    *e = pl->fs_error;
    return NULL;
  }
  return pl->vfs;
}

static int local_fs_open(void *ud, const char *path, size_t path_len, int flags,
                         const mbxC_wait *wait, int *handle, mbxC_port_error *e) {
  /* Opens of regular files do not block (FIFOs and devices are never opened); an overlay
     copy-up checks the deadline (capabilities/vfs.h). */
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_open(v, path, path_len, flags, handle, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_read(void *ud, int handle, char *buf, size_t len, const mbxC_wait *wait,
                         size_t *got, mbxC_port_error *e) {
  /* A read of a regular file moves at most len bytes and returns. */
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_read(v, handle, buf, len, got, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_write(void *ud, int handle, const char *buf, size_t len, const mbxC_wait *wait,
                          size_t *put, mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_write(v, handle, buf, len, put, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_seek(void *ud, int handle, int whence, int64_t offset, int64_t *pos,
                         mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  return v ? mbxC_vfs_seek(v, handle, whence, offset, pos, e) : -1;
}
static int local_fs_close(void *ud, int handle, mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  return v ? mbxC_vfs_close(v, handle, e) : -1;
}
static int local_fs_list(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                         const char **names, size_t *names_len, mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_list(v, path, path_len, names, names_len, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_stat(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                         mbxC_fs_stat *st, mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_stat(v, path, path_len, st, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_mkdir(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                          mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_mkdir(v, path, path_len, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_remove(void *ud, const char *path, size_t path_len, const mbxC_wait *wait,
                           mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_remove(v, path, path_len, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}
static int local_fs_rename(void *ud, const char *from, size_t from_len, const char *to,
                           size_t to_len, const mbxC_wait *wait, mbxC_port_error *e) {
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  mbxC_vfs_set_wait(v, wait);
  int rc = mbxC_vfs_rename(v, from, from_len, to, to_len, e);
  mbxC_vfs_set_wait(v, NULL);
  return rc;
}

/* ---- exec (capabilities/exec.c does the work) ---- */

static int exec_refuse(mbxC_port_error *e, int errnum, const char *fmt, const char *arg,
                       const char *arg2) {
  e->errnum = errnum;
  snprintf(e->message, sizeof e->message, fmt, arg, arg2);
  return -1;
}

/* NAME=VALUE whose NAME glibc's loader or libc reads at start-up (ld.so's LD_* and the
   variables it drops for set-uid programs, as its "unsecure" list does). */
static int loader_variable(const char *entry) {
  static const char *const names[] = {
      "GCONV_PATH",   "GETCONF_DIR", "GLIBC_TUNABLES", "HOSTALIASES",      "LOCALDOMAIN", "LOCPATH",
      "MALLOC_TRACE", "NIS_PATH",    "NLSPATH",        "RESOLV_HOST_CONF", "RES_OPTIONS", "TZDIR"};
  size_t n = strcspn(entry, "=");
  if (n >= 3 && memcmp(entry, "LD_", 3) == 0) return 1;
  if (n >= 7 && memcmp(entry, "MALLOC_", 7) == 0) return 1;
  for (size_t i = 0; i < sizeof names / sizeof *names; i++)
    if (strlen(names[i]) == n && memcmp(entry, names[i], n) == 0) return 1;
  return 0;
}

/* "/bin/sh, /usr/bin/python3" (cut to fit). */
static void allowed_list(const mbxC_exec_spec *s, char *out, size_t size) {
  size_t n = 0;
  out[0] = '\0';
  for (size_t i = 0; i < s->allow_count && n + 8 < size; i++) {
    int w = snprintf(out + n, size - n, "%s%s", i ? ", " : "", s->allow[i]);
    if (w < 0 || (size_t)w >= size - n) {
      snprintf(out + (size > 5 ? size - 5 : 0), 5, "...");
      break;
    }
    n += (size_t)w;
  }
}

/* Whether the allowed program exists in the sandbox's image: /usr (and the merged-/usr links)
   from the host, a mount through its held dirfd. Anything else the process cannot see. */
static int program_exists(mbxC_port_local *pl, const char *prog, const mbxC_exec_mount *m,
                          size_t nm) {
  struct stat st;
  for (size_t i = 0; i < nm; i++) {
    size_t len = strlen(m[i].path);
    if (strncmp(prog, m[i].path, len) == 0 && prog[len] == '/')
      return fstatat(m[i].dirfd, prog + len + 1, &st, 0) == 0 && S_ISREG(st.st_mode);
  }
  static const char *const image[] = {"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/", NULL};
  (void)pl;
  for (size_t i = 0; image[i]; i++)
    if (strncmp(prog, image[i], strlen(image[i])) == 0)
      return stat(prog, &st) == 0 && S_ISREG(st.st_mode) && access(prog, X_OK) == 0;
  return 0;
}

static int local_exec_run(void *ud, const mbxC_exec_request *req, const mbxC_wait *wait,
                          mbxC_exec_result *res, mbxC_port_error *e) {
  mbxC_port_local *pl = ud;
  char list[200];
  if (req->argc == 0 || req->argv[0] == NULL)
    return exec_refuse(e, EINVAL, "%s%s", "no program given (proc.run{\"prog\", args...})", "");
  const char *prog = mbxC_exec_resolve(&pl->exec, req->argv[0]);
  if (prog == NULL) {
    allowed_list(&pl->exec, list, sizeof list);
    return exec_refuse(e, EACCES,
                       "Permission denied (not on the policy's exec allow list; allowed: %s%s)",
                       list, "");
  }
  if (pl->exec_runs >= pl->exec.max_runs) {
    snprintf(list, sizeof list, "%llu", (unsigned long long)pl->exec.max_runs);
    return exec_refuse(e, EAGAIN, "the run already started %s programs (exec.max_runs)%s", list,
                       "");
  }
  mbxC_vfs *v = view(ud, e);
  if (v == NULL) return -1;
  size_t nm = mbxC_vfs_mount_count(v);
  mbxC_exec_mount mounts[MBXC_VFS_MAX_MOUNTS];
  for (size_t i = 0; i < nm && i < MBXC_VFS_MAX_MOUNTS; i++)
    mounts[i].dirfd = mbxC_vfs_mount_fd(v, i, &mounts[i].path, &mounts[i].mode);
  if (!program_exists(pl, prog, mounts, nm))
    return exec_refuse(e, ENOENT,
                       "No such file or directory (%s is allowed but is not a program in the "
                       "sandbox: the process sees /usr, its /bin and /lib links, /tmp and the "
                       "policy's mounts)%s",
                       prog, "");
  char cwd[MBXC_VFS_PATH_BUF];
  if (req->cwd && mbxC_vfs_normalize(req->cwd, strlen(req->cwd), cwd, sizeof cwd, NULL) != 0)
    return exec_refuse(e, EINVAL, "the working directory '%.100s' is not a valid path%s", req->cwd,
                       "");
  /* The guest's environment entries may not name what the dynamic loader and libc act on
     before the program's own code runs: LD_PRELOAD of a library the guest wrote into a
     mount would run any code under /usr from an allowed /usr/bin/true. The policy's own
     environment is the host's word and may. */
  for (size_t i = 0; i < req->envc; i++) {
    if (!loader_variable(req->env[i])) continue;
    char name[64];
    snprintf(name, sizeof name, "%.*s", (int)strcspn(req->env[i], "="), req->env[i]);
    return exec_refuse(e, EPERM,
                       "the environment variable %s is refused: the dynamic loader or libc "
                       "would act on it before the program runs (LD_*, GLIBC_TUNABLES, "
                       "GCONV_PATH and the like; a policy's env may set them)%s",
                       name, "");
  }
  /* The environment: the policy's virtual one, then the request's (a later entry of the same
     name wins in bwrap's --setenv order). */
  size_t envc = pl->env_count + req->envc;
  const char **env = envc ? calloc(envc, sizeof *env) : NULL;
  char **owned = pl->env_count ? calloc(pl->env_count, sizeof *owned) : NULL;
  if ((envc && env == NULL) || (pl->env_count && owned == NULL)) {
    free(env);
    free(owned);
    return exec_refuse(e, ENOMEM, "%s%s", "out of host memory", "");
  }
  int oom = 0;
  for (size_t i = 0; i < pl->env_count; i++) {
    const mbxC_env_var *ev = &pl->env[i];
    size_t nl = strlen(ev->name);
    owned[i] = malloc(nl + ev->value_len + 2);
    if (owned[i] == NULL) {
      oom = 1;
      continue;
    }
    memcpy(owned[i], ev->name, nl);
    owned[i][nl] = '=';
    memcpy(owned[i] + nl + 1, ev->value, ev->value_len);
    owned[i][nl + 1 + ev->value_len] = '\0';
    env[i] = owned[i];
  }
  for (size_t i = 0; i < req->envc; i++)
    env[pl->env_count + i] = req->env[i];
  uint64_t timeout = req->timeout_ms && req->timeout_ms < pl->exec.timeout_ms ? req->timeout_ms
                                                                              : pl->exec.timeout_ms;
  /* The process sees the view's memory /tmp, its overlay mounts and its rw mounts as a copy
     (capabilities/exec_copy.h): an rw mount bound as it is would take the process's writes to
     the host past the view's quotas. Every other mount point and policy file is left to its
     own bind. */
  const mbxC_fs_spec *fs = pl->fs_policy ? &pl->fs_policy->fs : &pl->fs_spec;
  const char *roots[MBXC_VFS_MAX_MOUNTS + 1];
  int droppable[MBXC_VFS_MAX_MOUNTS + 1], dropped[MBXC_VFS_MAX_MOUNTS + 1];
  int rw[MBXC_VFS_MAX_MOUNTS + 1], host_fds[MBXC_VFS_MAX_MOUNTS + 1];
  size_t root_mount[MBXC_VFS_MAX_MOUNTS + 1];
  size_t nroots = 0;
  mbxC_fs_stat tst;
  mbxC_port_error ignored;
  if (mbxC_vfs_stat(v, "/tmp", 4, &tst, &ignored) == 0 && tst.is_dir) {
    droppable[nroots] = 0;
    rw[nroots] = 0;
    host_fds[nroots] = -1;
    roots[nroots++] = "/tmp";
  }
  for (size_t i = 0; i < nm; i++)
    if (mounts[i].mode == MBXC_MOUNT_OVERLAY || mounts[i].mode == MBXC_MOUNT_RW) {
      /* A mount too big to copy is bound read-only instead (the result says so): its writes
         could not be bounded. */
      droppable[nroots] = 1;
      rw[nroots] = mounts[i].mode == MBXC_MOUNT_RW;
      host_fds[nroots] = mounts[i].dirfd;
      root_mount[nroots] = i;
      roots[nroots++] = mounts[i].path;
    }
  const char **excluded = calloc(nm + fs->file_count + 1, sizeof *excluded);
  size_t nex = 0;
  for (size_t i = 0; excluded && i < nm; i++)
    excluded[nex++] = mounts[i].path;
  for (size_t i = 0; excluded && i < fs->file_count; i++)
    excluded[nex++] = fs->files[i].path;
  mbxC_exec_copy copy = {0};
  if (!oom && excluded == NULL) oom = 1;
  if (!oom && nroots &&
      mbxC_exec_copy_plan(&copy, v, roots, rw, host_fds, nroots, excluded, nex, droppable, dropped,
                          e) != 0) {
    for (size_t i = 0; i < pl->env_count; i++)
      free(owned ? owned[i] : NULL);
    free(owned);
    free(env);
    free(excluded);
    return -1;
  }
  for (size_t i = 0; i < nroots; i++)
    if (droppable[i] && dropped[i]) mounts[root_mount[i]].mode = MBXC_MOUNT_RO;
  /* Each tmpfs holds what was copied in plus what the quotas let the guest add (and a page
     for each entry: tmpfs counts pages), so a process meets ENOSPC where the view would say
     EDQUOT. */
  uint64_t slack = 4096ull * (copy.entries + 64);
  uint64_t overlay_bytes = copy.bytes + fs->bytes + slack;
  /* The copy-back comes whole into this process before it is applied, so it is capped by
     what could be applied: the bytes the quotas let the guest add, what the rw mounts held
     (a file rewritten there is its whole size again), and a path's worth for each entry that
     went in or the files quota lets come (unchanged files come back by name only). Past it
     the rest is drained and dropped, and nothing is applied. */
  uint64_t names =
      (uint64_t)copy.entries + 2 +
      (fs->files_max < MBXC_EXEC_COPY_ENTRIES ? fs->files_max : MBXC_EXEC_COPY_ENTRIES);
  size_t back_cap =
      (size_t)(copy.rw_bytes + fs->tmp_bytes + fs->bytes + names * (MBXC_VFS_PATH_MAX + 32));
  mbxC_exec_plan plan = {.program = prog,
                         .argv = req->argv,
                         .argc = req->argc,
                         .cwd = req->cwd ? cwd : NULL,
                         .env = env,
                         .envc = envc,
                         .mounts = mounts,
                         .mount_count = nm,
                         .tmp_bytes = fs->tmp_bytes,
                         .tmp_slack = slack,
                         .files = pl->fs_policy ? pl->fs_policy->fs.files : NULL,
                         .file_count = pl->fs_policy ? pl->fs_policy->fs.file_count : 0,
                         .copy = copy.nroots ? &copy : NULL,
                         .overlay_bytes = overlay_bytes,
                         .copy_back_cap = copy.nroots ? back_cap : 0};
  int r =
      oom ? exec_refuse(e, ENOMEM, "%s%s", "out of host memory", "")
          : (pl->exec_runs++, mbxC_exec_run(pl->exec_backend, &plan, &pl->exec, req->stdin_bytes,
                                            req->stdin_len, timeout, wait, &pl->exec_bufs, res, e));
  if (r == 0 && copy.nroots) {
    /* The process's writes come back, all or nothing. */
    size_t applied = 0;
    if (res->timed_out)
      snprintf(res->changes_error, sizeof res->changes_error,
               "the program's timeout killed it: its writes to /tmp and overlay mounts are not "
               "carried back");
    else if (pl->exec_bufs.back_over)
      snprintf(res->changes_error, sizeof res->changes_error,
               "the program left more in /tmp, overlay and rw mounts than the quotas allow "
               "(%zu bytes of copy-back)",
               back_cap);
    else if (mbxC_exec_copy_apply(v, &copy, pl->exec_bufs.back, pl->exec_bufs.back_len, fs->bytes,
                                  fs->files_max, &applied, res->changes_error,
                                  sizeof res->changes_error) == 0)
      res->changes = applied;
    res->changes_refused = res->changes_error[0] != '\0';
  }
  if (r == 0 && copy.note[0] && res->changes_error[0] == '\0')
    snprintf(res->changes_error, sizeof res->changes_error,
             "the process saw a mount read-only: %.150s", copy.note);
  /* A large copy-back's buffer is not kept for the sandbox's life. */
  if (pl->exec_bufs.back_cap > (1u << 20)) {
    free(pl->exec_bufs.back);
    pl->exec_bufs.back = NULL;
    pl->exec_bufs.back_cap = 0;
  }
  mbxC_exec_copy_free(&copy);
  free(excluded);
  for (size_t i = 0; i < pl->env_count; i++)
    free(owned ? owned[i] : NULL);
  free(owned);
  free(env);
  return r;
}

void mbxC_port_local_set_exec(mbxC_port_local *pl, mbxC_exec_backend *backend) {
  pl->exec_backend = backend;
  pl->port.exec_run = backend && pl->exec.allow_count ? local_exec_run : NULL;
}

int mbxC_port_local_has_exec(const mbxC_port_local *pl) {
  return pl->exec.allow_count > 0;
}

static int local_stdin_read(void *ud, char *buf, size_t len, const mbxC_wait *wait, size_t *got,
                            mbxC_port_error *e) {
  return mbxC_stdin_read(&((mbxC_port_local *)ud)->stdin_source, buf, len, wait, got, e);
}

static uint64_t local_stdin_epoch(void *ud) {
  return ((mbxC_port_local *)ud)->stdin_source.epoch;
}

int mbxC_port_local_set_stdin(mbxC_port_local *pl, const char *data, size_t len) {
  return mbxC_stdin_set_bytes(&pl->stdin_source, data, len);
}

void mbxC_port_local_set_stdin_fd(mbxC_port_local *pl, int fd) {
  mbxC_stdin_set_fd(&pl->stdin_source, fd);
}

int mbxC_port_local_fs_reset(mbxC_port_local *pl) {
  /* The same view, emptied through the journal: a checkpoint taken before the reset can
     still be rewound to, and the mounts' directory fds stay those opened at creation. */
  if (pl->vfs) mbxC_vfs_reset(pl->vfs);
  return 0;
}

int mbxC_port_local_fs_mark(mbxC_port_local *pl, mbxC_vfs_mark **mark) {
  *mark = NULL;
  return pl->vfs && (*mark = mbxC_vfs_mark_take(pl->vfs)) == NULL ? -1 : 0;
}

void mbxC_port_local_fs_keep(mbxC_port_local *pl, mbxC_vfs_mark *mark) {
  mbxC_vfs_mark_free(pl->fs_mark);
  pl->fs_mark = mark;
  pl->fs_marked = 1;
}

int mbxC_port_local_fs_rewind(mbxC_port_local *pl) {
  if (!pl->fs_marked) return 0;
  if (pl->fs_mark) {
    mbxC_port_error e;
    mbxC_vfs *v = view(pl, &e);
    return v ? mbxC_vfs_mark_restore(v, pl->fs_mark) : -1;
  }
  /* No view at the checkpoint: none was needed yet, so /tmp was empty; whatever is there
     now was made since. */
  if (pl->vfs) mbxC_vfs_reset(pl->vfs);
  return 0;
}

void mbxC_port_local_run_end(mbxC_port_local *pl) {
  if (pl->vfs) mbxC_vfs_close_all(pl->vfs);
}

void mbxC_port_local_set_fs_tap(mbxC_port_local *pl, const mbxC_vfs_tap *tap) {
  pl->fs_tapped = tap != NULL;
  if (tap) pl->fs_tap = *tap;
  if (pl->vfs) mbxC_vfs_set_tap(pl->vfs, tap);
}

int mbxC_port_local_has_mounts(const mbxC_port_local *pl) {
  return pl->fs_policy && pl->fs_policy->fs.mount_count > 0;
}

/* The grants descriptor the stdlib reads: names, kinds and native signatures, as plain data
   (the callbacks and the prepared calls stay here). */
static int grant_functions(mbxC_port_local *pl) {
  if (pl->host_fns.count == 0) return 0;
  pl->grant_fns = calloc(pl->host_fns.count, sizeof *pl->grant_fns);
  if (pl->grant_fns == NULL) return -1;
  for (size_t i = 0; i < pl->host_fns.count; i++) {
    const mbxC_hostfn *fn = &pl->host_fns.fns[i];
    pl->grant_fns[i].name = fn->name;
    pl->grant_fns[i].kind = fn->kind;
    if (fn->kind == MBXC_FN_NATIVE) pl->grant_fns[i].sig = *mbxC_native_sig(fn->native);
  }
  pl->grants.fns = pl->grant_fns;
  pl->grants.fn_count = pl->host_fns.count;
  return 0;
}

int mbxC_port_local_init(mbxC_port_local *pl, const mbx_policy *p) {
  memset(pl, 0, sizeof *pl);
  mbxC_stdin_init(&pl->stdin_source);
  /* Only the operations this port serves: exec_run is set by mbxC_port_local_set_exec when
     the policy allows a program (NULL: not granted). */
  pl->port = (mbxC_port){.version = MBXC_PORT_VERSION,
                         .ud = pl,
                         .grants = &pl->grants,
                         .wall_time = local_wall_time,
                         .cpu_time = local_cpu_time,
                         .random_seed = local_random_seed,
                         .env_get = local_env_get,
                         .host_call = local_host_call,
                         .native_call = local_native_call,
                         .fs_open = local_fs_open,
                         .fs_read = local_fs_read,
                         .fs_write = local_fs_write,
                         .fs_seek = local_fs_seek,
                         .fs_close = local_fs_close,
                         .fs_list = local_fs_list,
                         .fs_stat = local_fs_stat,
                         .fs_mkdir = local_fs_mkdir,
                         .fs_remove = local_fs_remove,
                         .fs_rename = local_fs_rename,
                         .stdin_read = local_stdin_read,
                         .stdin_epoch = local_stdin_epoch};
  pl->time_fixed = p->time_fixed;
  pl->time = p->time;
  pl->seed_fixed = p->seed_fixed;
  pl->seed = p->seed;
  pl->grants.deterministic = p->deterministic;
  mbxC_port_local_run_begin(pl);
  if (mbxC_hostfn_copy(&pl->host_fns, &p->host_fns) != 0) return -1;
  if (mbxC_exec_spec_copy(&pl->exec, &p->exec) != 0) {
    mbxC_port_local_free(pl);
    return -1;
  }
  if (grant_functions(pl) != 0) {
    mbxC_port_local_free(pl);
    return -1;
  }
  /* The quotas alone make the view of a policy without mounts or files, at the first file
     operation. With mounts or files the view is made from a copy of the filesystem settings
     (kept for reset) now, so a mounted directory that went away is reported at creation. */
  pl->fs_spec = p->fs;
  pl->fs_spec.mounts = NULL;
  pl->fs_spec.files = NULL;
  pl->fs_spec.mount_count = pl->fs_spec.file_count = 0;
  pl->fs_spec.modules = NULL; /* the policy's: it may be freed while the sandbox lives */
  pl->fs_spec.module_count = 0;
  pl->fs_spec.module_dir = NULL;
  if (p->fs.mount_count == 0 && p->fs.file_count == 0 && p->fs.module_count == 0 &&
      p->fs.module_dir == NULL)
    goto env;
  pl->fs_policy = malloc(sizeof *pl->fs_policy);
  if (pl->fs_policy == NULL) {
    mbxC_port_local_free(pl);
    return -1;
  }
  mbxC_policy_defaults(pl->fs_policy);
  if (mbxC_policy_copy_settings(pl->fs_policy, p) != 0) {
    free(pl->fs_policy);
    pl->fs_policy = NULL;
    mbxC_port_local_free(pl);
    return -1;
  }
  if (make_view(pl) != 0) {
    int oom = pl->fs_error.errnum == ENOMEM;
    mbxC_port_error keep = pl->fs_error;
    mbxC_port_local_free(pl);
    pl->fs_error = keep;
    return oom ? -1 : MBXC_PORT_LOCAL_FS_FAILED;
  }
env:
  if (p->env_count == 0) return 0;
  /* A copy, so the host may change or free the policy while sandboxes made from it live. */
  pl->env = calloc(p->env_count, sizeof *pl->env);
  if (pl->env == NULL) {
    mbxC_port_local_free(pl);
    return -1;
  }
  for (size_t i = 0; i < p->env_count; i++) {
    mbxC_env_var *v = &pl->env[i];
    v->name = mbxU_dup_bytes(p->env[i].name, strlen(p->env[i].name));
    v->value = mbxU_dup_bytes(p->env[i].value, p->env[i].value_len);
    v->value_len = p->env[i].value_len;
    pl->env_count = i + 1;
    if (v->name == NULL || v->value == NULL) {
      mbxC_port_local_free(pl);
      return -1;
    }
  }
  return 0;
}

void mbxC_port_local_free(mbxC_port_local *pl) {
  mbxC_vfs_free(pl->vfs);
  pl->vfs = NULL;
  mbxC_vfs_mark_free(pl->fs_mark);
  pl->fs_mark = NULL;
  pl->fs_marked = 0;
  if (pl->fs_policy) {
    mbxC_policy_clear(pl->fs_policy);
    free(pl->fs_policy);
    pl->fs_policy = NULL;
  }
  for (size_t i = 0; i < pl->env_count; i++) {
    free(pl->env[i].name);
    free(pl->env[i].value);
  }
  free(pl->env);
  pl->env = NULL;
  pl->env_count = 0;
  mbxC_hostfn_clear(&pl->host_fns);
  mbxC_exec_spec_clear(&pl->exec);
  mbxC_exec_buffers_free(&pl->exec_bufs);
  pl->port.exec_run = NULL;
  mbxC_host_reply_free(&pl->reply);
  free(pl->native_out);
  pl->native_out = NULL;
  mbxC_stdin_free(&pl->stdin_source);
  free(pl->grant_fns);
  pl->grant_fns = NULL;
  pl->grants.fns = NULL;
  pl->grants.fn_count = 0;
}

void mbxC_port_local_run_begin(mbxC_port_local *pl) {
  pl->run_start_coarse_ns = coarse_ns();
  pl->cpu_start_known = 0;
  pl->exec_runs = 0;
}

uint64_t mbxC_port_local_position(const mbxC_port_local *pl) {
  return pl->draws;
}

void mbxC_port_local_seek(mbxC_port_local *pl, uint64_t position) {
  pl->draws = position;
}
