/* capabilities/policy.c -- what a sandbox may use: limits, clock, seed and environment. */
#include "capabilities/policy.h"
#include "common/bytes.h"

#include <errno.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "capabilities/ffi.h"

void mbxC_policy_defaults(mbx_policy *p) {
  p->memory = MBXC_DEFAULT_MEMORY;
  p->instructions = MBXC_DEFAULT_INSTRUCTIONS;
  p->time_ms = MBXC_DEFAULT_TIME_MS;
  p->output = MBXC_DEFAULT_OUTPUT;
  p->source = MBXC_DEFAULT_SOURCE;
  p->host_calls = MBXC_DEFAULT_HOST_CALLS;
  p->result = 0;
  p->time_fixed = 0;
  p->time = 0;
  p->seed_fixed = 0;
  p->seed = 0;
  p->env = NULL;
  p->env_count = p->env_cap = 0;
  p->deterministic = 0;
  memset(&p->host_fns, 0, sizeof p->host_fns);
  memset(&p->fs, 0, sizeof p->fs);
  p->fs.tmp_bytes = MBXC_DEFAULT_FS_TMP;
  p->fs.bytes = MBXC_DEFAULT_FS_BYTES;
  p->fs.files_max = MBXC_DEFAULT_FS_FILES;
  p->fs.open_files = MBXC_DEFAULT_FS_OPEN_FILES;
  p->fs_file_bytes = 0;
  mbxC_exec_spec_defaults(&p->exec);
}

static void clear_fs(mbx_policy *p) {
  for (size_t i = 0; i < p->fs.mount_count; i++) {
    free(p->fs.mounts[i].path);
    free(p->fs.mounts[i].host);
  }
  for (size_t i = 0; i < p->fs.file_count; i++) {
    free(p->fs.files[i].path);
    free(p->fs.files[i].data);
  }
  for (size_t i = 0; i < p->fs.module_count; i++) {
    free(p->fs.modules[i].path);
    free(p->fs.modules[i].data);
  }
  free(p->fs.mounts);
  free(p->fs.files);
  free(p->fs.modules);
  free(p->fs.module_dir);
  p->fs.mounts = NULL;
  p->fs.files = NULL;
  p->fs.modules = NULL;
  p->fs.module_dir = NULL;
  p->fs.mount_count = p->fs.file_count = p->fs.module_count = 0;
  p->fs_file_bytes = 0;
}

void mbxC_policy_clear(mbx_policy *p) {
  for (size_t i = 0; i < p->env_count; i++) {
    free(p->env[i].name);
    free(p->env[i].value);
  }
  free(p->env);
  p->env = NULL;
  p->env_count = p->env_cap = 0;
  mbxC_hostfn_clear(&p->host_fns);
  clear_fs(p);
  mbxC_exec_spec_clear(&p->exec);
}

/* How a limit's value reads: bytes, a count, or milliseconds. */
typedef enum limit_unit { UNIT_BYTES, UNIT_COUNT, UNIT_MS } limit_unit;

/* A limit's unit, name in words, range and storage, described once so validation and lookup
   agree. */
typedef struct limit_spec {
  mbx_limit which;
  limit_unit unit;
  const char *what; /* "the memory limit": the setting in words, for every front door */
  uint64_t min, max;
  size_t offset;
} limit_spec;

#define LIMIT(which, unit, what, min, max, field)                                                  \
  { which, unit, what, min, max, offsetof(mbx_policy, field) }
static const limit_spec limit_specs[] = {
    LIMIT(MBX_LIMIT_MEMORY, UNIT_BYTES, "the memory limit", MBXC_MIN_MEMORY, MBXC_MAX_MEMORY,
          memory),
    LIMIT(MBX_LIMIT_INSTRUCTIONS, UNIT_COUNT, "the instruction limit", 0, UINT64_MAX / 4,
          instructions),
    LIMIT(MBX_LIMIT_TIME_MS, UNIT_MS, "the timeout", 0, MBXC_MAX_TIME_MS, time_ms),
    LIMIT(MBX_LIMIT_OUTPUT, UNIT_BYTES, "the output limit", 0, MBXC_MAX_OUTPUT, output),
    LIMIT(MBX_LIMIT_SOURCE, UNIT_BYTES, "the source limit", 1, MBXC_MAX_SOURCE, source),
    LIMIT(MBX_LIMIT_HOST_CALLS, UNIT_COUNT, "the host-call limit", 0, UINT64_MAX / 4, host_calls),
    LIMIT(MBX_LIMIT_RESULT, UNIT_BYTES, "the result limit", 0, MBXC_MAX_OUTPUT, result),
    LIMIT(MBX_LIMIT_FS_TMP, UNIT_BYTES, "the size of /tmp", 0, MBXC_MAX_FS_BYTES, fs.tmp_bytes),
    LIMIT(MBX_LIMIT_FS_BYTES, UNIT_BYTES, "the write quota", 0, MBXC_MAX_FS_BYTES, fs.bytes),
    LIMIT(MBX_LIMIT_FS_FILES, UNIT_COUNT, "the file quota", 0, MBXC_MAX_FS_FILES, fs.files_max),
    LIMIT(MBX_LIMIT_FS_OPEN_FILES, UNIT_COUNT, "the open-file limit", 1, MBXC_MAX_FS_OPEN_FILES,
          fs.open_files),
    LIMIT(MBX_LIMIT_EXEC_TIMEOUT_MS, UNIT_MS, "a program's timeout", 1, MBXC_MAX_TIME_MS,
          exec.timeout_ms),
    LIMIT(MBX_LIMIT_EXEC_MEMORY, UNIT_BYTES, "a program's memory limit", MBXC_MIN_EXEC_MEMORY,
          MBXC_MAX_EXEC_MEMORY, exec.memory),
    LIMIT(MBX_LIMIT_EXEC_PIDS, UNIT_COUNT, "a program's process limit", 1, MBXC_MAX_EXEC_PIDS,
          exec.pids),
    LIMIT(MBX_LIMIT_EXEC_OUTPUT, UNIT_BYTES, "a program's output limit", 0, MBXC_MAX_EXEC_OUTPUT,
          exec.output),
    LIMIT(MBX_LIMIT_EXEC_RUNS, UNIT_COUNT, "the limit on programs per run", 0, UINT64_MAX / 4,
          exec.max_runs),
};
#undef LIMIT

static const limit_spec *find_limit(mbx_limit which) {
  for (size_t i = 0; i < sizeof limit_specs / sizeof *limit_specs; i++)
    if (limit_specs[i].which == which) return &limit_specs[i];
  return NULL;
}

/* A value as the vocabulary writes it (docs/vocabulary.md): sizes with the largest unit that
   divides them ("256k", "1G", else "1000 bytes"), durations likewise ("2s", "24h", "1500ms"),
   counts and zero as they are. */
static void format_value(char *out, size_t size, limit_unit unit, uint64_t v) {
  static const struct {
    uint64_t factor;
    const char *suffix;
  } sizes[] = {{1ull << 40, "T"}, {1ull << 30, "G"}, {1ull << 20, "M"}, {1ull << 10, "k"}},
    times[] = {{3600000, "h"}, {60000, "m"}, {1000, "s"}};
  const size_t nsizes = sizeof sizes / sizeof *sizes, ntimes = sizeof times / sizeof *times;
  if (v == 0) {
    snprintf(out, size, "0");
    return;
  }
  for (size_t i = 0; unit != UNIT_COUNT && i < (unit == UNIT_BYTES ? nsizes : ntimes); i++) {
    uint64_t f = unit == UNIT_BYTES ? sizes[i].factor : times[i].factor;
    if (v % f == 0) {
      snprintf(out, size, "%llu%s", (unsigned long long)(v / f),
               unit == UNIT_BYTES ? sizes[i].suffix : times[i].suffix);
      return;
    }
  }
  snprintf(out, size, "%llu%s", (unsigned long long)v,
           unit == UNIT_BYTES ? " bytes"
           : unit == UNIT_MS  ? "ms"
                              : "");
}

int mbxC_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value, char *why,
                          size_t why_size) {
  const limit_spec *spec = find_limit(which);
  if (spec == NULL) {
    snprintf(why, why_size, "mbx_policy_set_limit: unknown limit %d", (int)which);
    return -1;
  }
  if (value < spec->min || value > spec->max) {
    char lo[32], hi[32], got[32];
    format_value(lo, sizeof lo, spec->unit, spec->min);
    format_value(hi, sizeof hi, spec->unit, spec->max);
    format_value(got, sizeof got, spec->unit, value);
    snprintf(why, why_size, "%s must be between %s and %s, not %s", spec->what, lo, hi, got);
    return -1;
  }
  *(uint64_t *)((char *)p + spec->offset) = value;
  return 0;
}

uint64_t mbxC_policy_get_limit(const mbx_policy *p, mbx_limit which) {
  const limit_spec *spec = find_limit(which);
  if (spec == NULL) return 0;
  return *(const uint64_t *)((const char *)p + spec->offset);
}

/* ---- the virtual environment, clock and seed ---- */

/* Names are checked so that what a guest sees is what the host meant: no '=' (a name
   "A=B" could never be set in a real environment and would confuse a later exec backend
   that builds envp from this list), no blanks or control bytes (invisible in logs). */
static int env_name_ok(const char *name, size_t len, char *why, size_t why_size) {
  if (len == 0 || len > MBXC_MAX_ENV_NAME) {
    snprintf(why, why_size, "mbx_policy_set_env: the name must be 1 to %d bytes, not %zu",
             MBXC_MAX_ENV_NAME, len);
    return 0;
  }
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)name[i];
    if (c <= 0x20 || c >= 0x7f || c == '=') {
      snprintf(why, why_size,
               "mbx_policy_set_env: byte %zu of the name is not allowed (use printable ASCII "
               "without '=' or blanks, e.g. API_URL)",
               i + 1);
      return 0;
    }
  }
  return 1;
}

int mbxC_policy_set_env(mbx_policy *p, const char *name, const char *value, char *why,
                        size_t why_size) {
  if (name == NULL) {
    snprintf(why, why_size, "mbx_policy_set_env: the name must not be NULL");
    return MBXC_POLICY_INVALID;
  }
  size_t name_len = strlen(name);
  if (!env_name_ok(name, name_len, why, why_size)) return MBXC_POLICY_INVALID;
  size_t at = p->env_count;
  for (size_t i = 0; i < p->env_count; i++)
    if (strcmp(p->env[i].name, name) == 0) at = i;
  if (value == NULL) { /* remove, keeping the order of the rest */
    if (at == p->env_count) return 0;
    free(p->env[at].name);
    free(p->env[at].value);
    memmove(&p->env[at], &p->env[at + 1], (p->env_count - at - 1) * sizeof *p->env);
    p->env_count--;
    return 0;
  }
  size_t value_len = strlen(value);
  if (value_len > MBXC_MAX_ENV_VALUE) {
    snprintf(why, why_size,
             "mbx_policy_set_env: the value of %s is %zu bytes; at most %u are allowed", name,
             value_len, MBXC_MAX_ENV_VALUE);
    return MBXC_POLICY_INVALID;
  }
  char *value_copy = mbxU_dup_bytes(value, value_len);
  if (value_copy == NULL) return MBXC_POLICY_NO_MEMORY;
  if (at < p->env_count) {
    free(p->env[at].value);
    p->env[at].value = value_copy;
    p->env[at].value_len = value_len;
    return 0;
  }
  if (p->env_count == MBXC_MAX_ENV_VARS) {
    free(value_copy);
    snprintf(why, why_size, "mbx_policy_set_env: at most %d variables can be set",
             MBXC_MAX_ENV_VARS);
    return MBXC_POLICY_INVALID;
  }
  if (p->env_count == p->env_cap) {
    size_t cap = p->env_cap ? p->env_cap * 2 : 8;
    mbxC_env_var *grown = realloc(p->env, cap * sizeof *grown);
    if (grown == NULL) {
      free(value_copy);
      return MBXC_POLICY_NO_MEMORY;
    }
    p->env = grown;
    p->env_cap = cap;
  }
  char *name_copy = mbxU_dup_bytes(name, name_len);
  if (name_copy == NULL) {
    free(value_copy);
    return MBXC_POLICY_NO_MEMORY;
  }
  p->env[p->env_count++] = (mbxC_env_var){name_copy, value_copy, value_len};
  return 0;
}

int mbxC_policy_set_time(mbx_policy *p, int64_t epoch_seconds, char *why, size_t why_size) {
  if (epoch_seconds < MBXC_MIN_TIME || epoch_seconds > MBXC_MAX_TIME) {
    snprintf(why, why_size,
             "mbx_policy_set_time: %lld is outside the years 1 to 9999 (%lld to %lld seconds "
             "since 1970-01-01T00:00:00Z)",
             (long long)epoch_seconds, (long long)MBXC_MIN_TIME, (long long)MBXC_MAX_TIME);
    return MBXC_POLICY_INVALID;
  }
  p->time_fixed = 1;
  p->time = epoch_seconds;
  return 0;
}

void mbxC_policy_set_seed(mbx_policy *p, uint64_t seed) {
  p->seed_fixed = 1;
  p->seed = seed;
}

void mbxC_policy_set_deterministic(mbx_policy *p, int on) {
  p->deterministic = on != 0;
}

/* ---- the filesystem view ---- */

/* 1 when a (normalized) is b or one of its parents. */
static int path_covers(const char *a, const char *b) {
  size_t n = strlen(a);
  return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '/');
}

/* The rules every virtual path of a policy follows; the message names the path. */
static int virtual_path_ok(const char *fn, const char *path, size_t len, char *why,
                           size_t why_size) {
  if (path == NULL || len == 0) {
    snprintf(why, why_size,
             "%s: the virtual path is empty (write an absolute path, e.g. "
             "/data)",
             fn);
    return 0;
  }
  if (memchr(path, '\0', len) != NULL) {
    snprintf(why, why_size, "%s: the virtual path contains a NUL byte", fn);
    return 0;
  }
  if (len > MBXC_VFS_PATH_MAX) {
    snprintf(why, why_size, "%s: the virtual path is %zu bytes; at most %d are allowed", fn, len,
             MBXC_VFS_PATH_MAX);
    return 0;
  }
  if (path[0] != '/') {
    snprintf(why, why_size,
             "%s: the virtual path \"%.100s\" is relative (write it from /, "
             "e.g. /%.100s)",
             fn, path, path);
    return 0;
  }
  if (!mbxC_vfs_is_canonical(path, len)) {
    char norm[MBXC_VFS_PATH_BUF];
    size_t n;
    int bad = mbxC_vfs_normalize(path, len, norm, sizeof norm, &n);
    if (bad)
      snprintf(why, why_size,
               "%s: the virtual path \"%.100s\" has a component longer than %d "
               "bytes",
               fn, path, MBXC_VFS_NAME_MAX);
    else
      snprintf(why, why_size,
               "%s: the virtual path \"%.100s\" is not normalized (no '.', "
               "'..', '//' or trailing '/'; did you mean \"%.100s\"?)",
               fn, path, norm);
    return 0;
  }
  if (len == 1) {
    snprintf(why, why_size,
             "%s: \"/\" cannot be mounted or replaced (mount a directory "
             "below it, e.g. /data)",
             fn);
    return 0;
  }
  if (path_covers("/tmp", path)) {
    snprintf(why, why_size, "%s: \"%.100s\" is inside the sandbox's memory /tmp", fn, path);
    return 0;
  }
  return 1;
}

/* A new path (a mount or a file) must neither contain nor lie inside a mount, and for a file
   must not be a file's parent or child (mount: no file below or above it). */
static int overlap_ok(const mbx_policy *p, const char *fn, const char *path, int is_mount,
                      char *why, size_t why_size) {
  for (size_t i = 0; i < p->fs.mount_count; i++) {
    const char *m = p->fs.mounts[i].path;
    if (path_covers(m, path) || path_covers(path, m)) {
      snprintf(why, why_size,
               "%s: \"%.100s\" overlaps the mount at %.100s (mounts may not "
               "nest)",
               fn, path, m);
      return 0;
    }
  }
  for (size_t i = 0; i < p->fs.file_count; i++) {
    const char *f = p->fs.files[i].path;
    int same = strcmp(path, f) == 0; /* a file given again replaces its contents */
    if ((path_covers(f, path) || path_covers(path, f)) && (is_mount || !same)) {
      snprintf(why, why_size, "%s: \"%.100s\" overlaps the policy file %.100s", fn, path, f);
      return 0;
    }
  }
  return 1;
}

int mbxC_policy_mount(mbx_policy *p, const char *virtual_path, size_t path_len,
                      const char *host_dir, int mode, char *why, size_t why_size) {
  const char *fn = "mbx_policy_mount";
  if (mode != MBXC_MOUNT_RO && mode != MBXC_MOUNT_RW && mode != MBXC_MOUNT_OVERLAY) {
    snprintf(why, why_size,
             "%s: mode %d is not MBX_MOUNT_RO, MBX_MOUNT_RW or "
             "MBX_MOUNT_OVERLAY",
             fn, mode);
    return MBXC_POLICY_INVALID;
  }
  if (!virtual_path_ok(fn, virtual_path, path_len, why, why_size)) return MBXC_POLICY_INVALID;
  if (!overlap_ok(p, fn, virtual_path, 1, why, why_size)) return MBXC_POLICY_INVALID;
  if (p->fs.mount_count >= MBXC_VFS_MAX_MOUNTS) {
    snprintf(why, why_size, "%s: at most %d mounts per policy", fn, MBXC_VFS_MAX_MOUNTS);
    return MBXC_POLICY_INVALID;
  }
  if (host_dir == NULL || host_dir[0] == '\0') {
    snprintf(why, why_size, "%s: the host directory of %.100s is empty", fn, virtual_path);
    return MBXC_POLICY_INVALID;
  }
  /* Resolved once: a symlink swapped at host_dir later does not move the mount. */
  char resolved[PATH_MAX];
  struct stat st;
  if (realpath(host_dir, resolved) == NULL || stat(resolved, &st) != 0) {
    snprintf(why, why_size, "%s: the host directory \"%.100s\" of %.100s: %s", fn, host_dir,
             virtual_path, strerror(errno));
    return MBXC_POLICY_INVALID;
  }
  if (!S_ISDIR(st.st_mode)) {
    snprintf(why, why_size, "%s: the host path \"%.100s\" of %.100s is not a directory", fn,
             host_dir, virtual_path);
    return MBXC_POLICY_INVALID;
  }
  mbxC_fs_mount *grown = realloc(p->fs.mounts, (p->fs.mount_count + 1) * sizeof *grown);
  if (grown == NULL) return MBXC_POLICY_NO_MEMORY;
  p->fs.mounts = grown;
  mbxC_fs_mount m = {mbxU_dup_bytes(virtual_path, path_len),
                     mbxU_dup_bytes(resolved, strlen(resolved)), mode};
  if (m.path == NULL || m.host == NULL) {
    free(m.path);
    free(m.host);
    return MBXC_POLICY_NO_MEMORY;
  }
  p->fs.mounts[p->fs.mount_count++] = m;
  return 0;
}

int mbxC_policy_add_file(mbx_policy *p, const char *virtual_path, size_t path_len, const void *data,
                         size_t len, char *why, size_t why_size) {
  const char *fn = "mbx_policy_add_file";
  if (!virtual_path_ok(fn, virtual_path, path_len, why, why_size)) return MBXC_POLICY_INVALID;
  if (!overlap_ok(p, fn, virtual_path, 0, why, why_size)) return MBXC_POLICY_INVALID;
  if (data == NULL && len > 0) {
    snprintf(why, why_size, "%s: the data of %.100s is NULL", fn, virtual_path);
    return MBXC_POLICY_INVALID;
  }
  if (len > MBXC_MAX_FS_FILE_BYTES - p->fs_file_bytes) {
    snprintf(why, why_size, "%s: %.100s would bring the policy's files past %llu MiB", fn,
             virtual_path, (unsigned long long)(MBXC_MAX_FS_FILE_BYTES >> 20));
    return MBXC_POLICY_INVALID;
  }
  size_t at = p->fs.file_count;
  for (size_t i = 0; i < p->fs.file_count; i++)
    if (strcmp(p->fs.files[i].path, virtual_path) == 0) at = i;
  if (at == p->fs.file_count && p->fs.file_count >= MBXC_VFS_MAX_FILES) {
    snprintf(why, why_size, "%s: at most %d files per policy", fn, MBXC_VFS_MAX_FILES);
    return MBXC_POLICY_INVALID;
  }
  char *copy = malloc(len ? len : 1);
  if (copy == NULL) return MBXC_POLICY_NO_MEMORY;
  if (len) memcpy(copy, data, len);
  if (at < p->fs.file_count) { /* the same path again replaces the contents */
    p->fs_file_bytes -= p->fs.files[at].len;
    free(p->fs.files[at].data);
    p->fs.files[at].data = copy;
    p->fs.files[at].len = len;
    p->fs_file_bytes += len;
    return 0;
  }
  mbxC_fs_file *grown = realloc(p->fs.files, (p->fs.file_count + 1) * sizeof *grown);
  char *path = mbxU_dup_bytes(virtual_path, path_len);
  if (grown) p->fs.files = grown;
  if (grown == NULL || path == NULL) {
    free(copy);
    free(path);
    return MBXC_POLICY_NO_MEMORY;
  }
  p->fs.files[p->fs.file_count++] = (mbxC_fs_file){path, copy, len};
  p->fs_file_bytes += len;
  return 0;
}

int mbxC_policy_set_module_dir(mbx_policy *p, const char *host_dir, char *why, size_t why_size) {
  const char *fn = "mbx_policy_set_module_dir";
  char *copy = NULL;
  if (host_dir != NULL) {
    /* Resolved once, as a mount's directory is. */
    char resolved[PATH_MAX];
    struct stat st;
    if (host_dir[0] == '\0' || realpath(host_dir, resolved) == NULL || stat(resolved, &st) != 0) {
      snprintf(why, why_size, "%s: the host directory \"%.100s\": %s", fn, host_dir,
               host_dir[0] ? strerror(errno) : "empty name");
      return MBXC_POLICY_INVALID;
    }
    if (!S_ISDIR(st.st_mode)) {
      snprintf(why, why_size, "%s: the host path \"%.100s\" is not a directory", fn, host_dir);
      return MBXC_POLICY_INVALID;
    }
    if ((copy = mbxU_dup_bytes(resolved, strlen(resolved))) == NULL) return MBXC_POLICY_NO_MEMORY;
  }
  free(p->fs.module_dir);
  p->fs.module_dir = copy;
  return 0;
}

int mbxC_policy_add_module(mbx_policy *p, const char *name, size_t name_len, const void *source,
                           size_t len, char *why, size_t why_size) {
  const char *fn = "mbx_policy_add_module";
  int name_ok = name != NULL && name_len > 0 && name_len <= MBXC_VFS_NAME_MAX;
  for (size_t i = 0; name_ok && i < name_len; i++)
    if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f) name_ok = 0;
  if (!name_ok) {
    snprintf(why, why_size, "%s: a module name is 1 to %d bytes with no control characters", fn,
             MBXC_VFS_NAME_MAX);
    return MBXC_POLICY_INVALID;
  }
  if (source == NULL && len > 0) {
    snprintf(why, why_size, "%s: the source of %.100s is NULL", fn, name);
    return MBXC_POLICY_INVALID;
  }
  if (len > MBXC_MODULE_MAX) {
    snprintf(why, why_size, "%s: %.100s is %zu bytes; a module may be at most %d", fn, name, len,
             MBXC_MODULE_MAX);
    return MBXC_POLICY_INVALID;
  }
  size_t at = p->fs.module_count;
  for (size_t i = 0; i < p->fs.module_count; i++)
    if (strlen(p->fs.modules[i].path) == name_len &&
        memcmp(p->fs.modules[i].path, name, name_len) == 0)
      at = i;
  uint64_t before = at < p->fs.module_count ? p->fs.modules[at].len : 0;
  if (len > MBXC_MAX_FS_FILE_BYTES - (p->fs_file_bytes - before)) {
    snprintf(why, why_size, "%s: %.100s would bring the policy's files past %llu MiB", fn, name,
             (unsigned long long)(MBXC_MAX_FS_FILE_BYTES >> 20));
    return MBXC_POLICY_INVALID;
  }
  if (at == p->fs.module_count && p->fs.module_count >= MBXC_VFS_MAX_FILES) {
    snprintf(why, why_size, "%s: at most %d modules per policy", fn, MBXC_VFS_MAX_FILES);
    return MBXC_POLICY_INVALID;
  }
  char *copy = malloc(len ? len : 1);
  if (copy == NULL) return MBXC_POLICY_NO_MEMORY;
  if (len) memcpy(copy, source, len);
  if (at < p->fs.module_count) {
    p->fs_file_bytes -= p->fs.modules[at].len;
    free(p->fs.modules[at].data);
    p->fs.modules[at].data = copy;
    p->fs.modules[at].len = len;
    p->fs_file_bytes += len;
    return 0;
  }
  mbxC_fs_file *grown = realloc(p->fs.modules, (p->fs.module_count + 1) * sizeof *grown);
  char *copy_name = mbxU_dup_bytes(name, name_len);
  if (grown) p->fs.modules = grown;
  if (grown == NULL || copy_name == NULL) {
    free(copy);
    free(copy_name);
    return MBXC_POLICY_NO_MEMORY;
  }
  p->fs.modules[p->fs.module_count++] = (mbxC_fs_file){copy_name, copy, len};
  p->fs_file_bytes += len;
  return 0;
}

int mbxC_policy_copy_settings(mbx_policy *dst, const mbx_policy *src) {
  mbxC_hostfn_table keep = dst->host_fns;
  mbxC_fs_spec fs = src->fs;
  *dst = *src;
  dst->host_fns = keep;
  dst->env = NULL;
  dst->env_count = dst->env_cap = 0;
  dst->fs.mounts = NULL;
  dst->fs.files = NULL;
  dst->fs.modules = NULL;
  dst->fs.module_dir = NULL;
  dst->fs.mount_count = dst->fs.file_count = dst->fs.module_count = 0;
  dst->fs_file_bytes = 0;
  if (mbxC_exec_spec_copy(&dst->exec, &src->exec) != 0) {
    mbxC_exec_spec_defaults(&dst->exec);
    goto oom;
  }
  char why[200];
  for (size_t i = 0; i < src->env_count; i++)
    if (mbxC_policy_set_env(dst, src->env[i].name, src->env[i].value, why, sizeof why) != 0)
      goto oom;
  if (fs.mount_count) {
    if ((dst->fs.mounts = calloc(fs.mount_count, sizeof *dst->fs.mounts)) == NULL) goto oom;
    for (size_t i = 0; i < fs.mount_count; i++) {
      mbxC_fs_mount *m = &dst->fs.mounts[i];
      m->path = mbxU_dup_bytes(fs.mounts[i].path, strlen(fs.mounts[i].path));
      m->host = mbxU_dup_bytes(fs.mounts[i].host, strlen(fs.mounts[i].host));
      m->mode = fs.mounts[i].mode;
      dst->fs.mount_count = i + 1;
      if (m->path == NULL || m->host == NULL) goto oom;
    }
  }
  for (size_t i = 0; i < fs.file_count; i++)
    if (mbxC_policy_add_file(dst, fs.files[i].path, strlen(fs.files[i].path), fs.files[i].data,
                             fs.files[i].len, why, sizeof why) != 0)
      goto oom;
  for (size_t i = 0; i < fs.module_count; i++)
    if (mbxC_policy_add_module(dst, fs.modules[i].path, strlen(fs.modules[i].path),
                               fs.modules[i].data, fs.modules[i].len, why, sizeof why) != 0)
      goto oom;
  if (fs.module_dir &&
      (dst->fs.module_dir = mbxU_dup_bytes(fs.module_dir, strlen(fs.module_dir))) == NULL)
    goto oom;
  return 0;
oom:
  mbxC_policy_clear(dst);
  dst->host_fns = keep;
  return MBXC_POLICY_NO_MEMORY;
}

void mbxC_policy_take_settings(mbx_policy *dst, mbx_policy *src) {
  mbxC_hostfn_table keep = dst->host_fns, theirs = src->host_fns;
  memset(&dst->host_fns, 0, sizeof dst->host_fns);
  mbxC_policy_clear(dst);
  *dst = *src;
  dst->host_fns = keep;
  mbxC_policy_defaults(src);
  src->host_fns = theirs;
}

/* ---- the digest ---- */

static void digest_u64(XXH3_state_t *st, uint64_t v) {
  unsigned char b[8];
  for (int i = 0; i < 8; i++)
    b[i] = (unsigned char)(v >> (8 * i));
  XXH3_64bits_update(st, b, 8);
}

static void digest_str(XXH3_state_t *st, const char *s, size_t n) {
  digest_u64(st, n);
  XXH3_64bits_update(st, s, n);
}

uint64_t mbxC_policy_digest(const mbx_policy *p) {
  XXH3_state_t st;
  XXH3_INITSTATE(&st);
  XXH3_64bits_reset(&st);
  XXH3_64bits_update(&st, "moonbox policy 1", 16);
  digest_u64(&st, p->memory);
  digest_u64(&st, p->instructions);
  digest_u64(&st, p->time_ms);
  digest_u64(&st, p->output);
  digest_u64(&st, p->source);
  digest_u64(&st, p->host_calls);
  /* Only when set, so every digest made before this limit existed still matches. */
  if (p->result) digest_u64(&st, p->result);
  digest_u64(&st, (uint64_t)(p->time_fixed != 0));
  digest_u64(&st, p->time_fixed ? (uint64_t)p->time : 0);
  digest_u64(&st, (uint64_t)(p->seed_fixed != 0));
  digest_u64(&st, p->seed_fixed ? p->seed : 0);
  digest_u64(&st, (uint64_t)(p->deterministic != 0));
  /* The environment is a map: by name, bytewise (names are unique). */
  digest_u64(&st, p->env_count);
  const char *last = NULL;
  for (size_t k = 0; k < p->env_count; k++) {
    const mbxC_env_var *next = NULL;
    for (size_t i = 0; i < p->env_count; i++) {
      const mbxC_env_var *v = &p->env[i];
      if (last && strcmp(v->name, last) <= 0) continue;
      if (next == NULL || strcmp(v->name, next->name) < 0) next = v;
    }
    if (next == NULL) break;
    digest_str(&st, next->name, strlen(next->name));
    digest_str(&st, next->value, next->value_len);
    last = next->name;
  }
  /* Host functions in order: their order numbers them for the guest. */
  digest_u64(&st, p->host_fns.count);
  for (size_t i = 0; i < p->host_fns.count; i++) {
    const mbxC_hostfn *fn = &p->host_fns.fns[i];
    digest_str(&st, fn->name, strlen(fn->name));
    digest_u64(&st, (uint64_t)fn->kind);
    if (fn->kind == MBXC_FN_NATIVE && fn->native) {
      const mbxC_ffi_sig *sig = mbxC_native_sig(fn->native);
      char text[MBXC_FFI_MAX_ARGS + 1];
      text[0] = sig->ret;
      memcpy(text + 1, sig->args, (size_t)sig->nargs);
      digest_str(&st, text, (size_t)sig->nargs + 1);
    }
  }
  /* The filesystem: a snapshot taken under other mounts, files or quotas is refused. */
  digest_u64(&st, p->fs.tmp_bytes);
  digest_u64(&st, p->fs.bytes);
  digest_u64(&st, p->fs.files_max);
  digest_u64(&st, p->fs.open_files);
  digest_u64(&st, p->fs.mount_count);
  for (size_t i = 0; i < p->fs.mount_count; i++) {
    const mbxC_fs_mount *m = &p->fs.mounts[i];
    digest_str(&st, m->path, strlen(m->path));
    digest_u64(&st, (uint64_t)m->mode);
    digest_str(&st, m->host, strlen(m->host));
  }
  digest_u64(&st, p->fs.file_count);
  for (size_t i = 0; i < p->fs.file_count; i++) {
    const mbxC_fs_file *f = &p->fs.files[i];
    digest_str(&st, f->path, strlen(f->path));
    digest_str(&st, f->data, f->len);
  }
  /* Modules: only when there are any, so every digest made before them still matches. A
     restore under other module text is refused. */
  if (p->fs.module_dir || p->fs.module_count) {
    digest_str(&st, p->fs.module_dir ? p->fs.module_dir : "",
               p->fs.module_dir ? strlen(p->fs.module_dir) : 0);
    digest_u64(&st, p->fs.module_count);
    for (size_t i = 0; i < p->fs.module_count; i++) {
      const mbxC_fs_file *f = &p->fs.modules[i];
      digest_str(&st, f->path, strlen(f->path));
      digest_str(&st, f->data, f->len);
    }
  }
  /* exec: only when a program is allowed, so every digest made before exec existed still
     matches (such a policy cannot be snapshotted today, but the digest says what it grants). */
  if (p->exec.allow_count) {
    digest_u64(&st, p->exec.allow_count);
    for (size_t i = 0; i < p->exec.allow_count; i++)
      digest_str(&st, p->exec.allow[i], strlen(p->exec.allow[i]));
    digest_u64(&st, p->exec.timeout_ms);
    digest_u64(&st, p->exec.memory);
    digest_u64(&st, p->exec.pids);
    digest_u64(&st, p->exec.output);
    digest_u64(&st, p->exec.max_runs);
  }
  return XXH3_64bits_digest(&st);
}
