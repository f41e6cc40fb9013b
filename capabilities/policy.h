/* capabilities/policy.h -- what a sandbox may use: limits, clock, seed and environment.
   No Lua here. */
#ifndef MBX_CAPABILITIES_POLICY_H
#define MBX_CAPABILITIES_POLICY_H

#include <stddef.h>
#include <stdint.h>

#include "capabilities/exec.h"
#include "capabilities/hostfn.h"
#include "capabilities/vfs.h"
#include "include/moonbox.h"

/* One virtual environment variable (os.getenv). */
typedef struct mbxC_env_var {
  char *name;  /* malloc'd, NUL-terminated */
  char *value; /* malloc'd, NUL-terminated */
  size_t value_len;
} mbxC_env_var;

struct mbx_policy {
  uint64_t memory;
  uint64_t instructions;
  uint64_t time_ms;
  uint64_t output;
  uint64_t source;
  uint64_t host_calls;
  uint64_t result; /* bytes of the value's JSON; 0 = the output limit */
  int time_fixed;  /* os.time/os.date read `time` instead of the real clock */
  int64_t time;
  int seed_fixed; /* math.random starts from `seed` instead of kernel randomness */
  uint64_t seed;
  mbxC_env_var *env; /* the virtual environment, in the order first set */
  size_t env_count, env_cap;
  /* Deterministic mode (mbx_policy_set_deterministic): canonical pairs/next order, counter
     ids in tostring, os.clock from the instruction count, no bytecode cache. */
  int deterministic;
  mbxC_hostfn_table host_fns; /* granted host functions (capabilities/hostfn.h) */
  /* The filesystem view (capabilities/vfs.h): mounts with their host directories resolved
     once, the policy's files, and the quotas (MBX_LIMIT_FS_*). Owned here. */
  mbxC_fs_spec fs;
  size_t fs_file_bytes; /* total bytes of fs.files, against MBXC_MAX_FS_FILE_BYTES */
  /* The exec backend: the allowed programs and the MBX_LIMIT_EXEC_* limits
     (capabilities/exec.h). No allowed program: no exec at all. Owned here. */
  mbxC_exec_spec exec;
};

/* All of a policy's files together (they are copied into every sandbox's view). */
#define MBXC_MAX_FS_FILE_BYTES (256ull << 20)

#define MBXC_DEFAULT_MEMORY (64ull << 20)
/* No instruction limit by default: time and memory are the default budgets, and a run with no
   instruction limit runs without a count hook (vm/watchdog.h), at stock Lua's speed.
   Deterministic policies must set one (mbxC_policy_needs_instructions). */
#define MBXC_DEFAULT_INSTRUCTIONS 0ull
#define MBXC_DEFAULT_TIME_MS 5000ull
#define MBXC_DEFAULT_OUTPUT (1ull << 20)
#define MBXC_DEFAULT_SOURCE (64ull << 10)
#define MBXC_DEFAULT_HOST_CALLS 1000ull

/* Ranges: below the minimum a sandbox cannot even hold the standard library; the maxima keep
   the derived numbers (the heap ceiling, deadlines in ns) far from overflow. */
#define MBXC_MIN_MEMORY (256ull << 10)
#define MBXC_MAX_MEMORY (1ull << 40)
#define MBXC_MAX_TIME_MS (86400ull * 1000)
#define MBXC_MAX_OUTPUT (1ull << 30)
#define MBXC_MAX_SOURCE (16ull << 20)

/* The virtual environment is copied into every sandbox: these caps keep that copy small. */
#define MBXC_MAX_ENV_VARS 256
#define MBXC_MAX_ENV_NAME 255
#define MBXC_MAX_ENV_VALUE (64u << 10)
/* A fixed clock must stay inside what gmtime and os.date can show: years 1 to 9999. */
#define MBXC_MIN_TIME (-62135596800ll) /* 0001-01-01T00:00:00Z */
#define MBXC_MAX_TIME 253402300799ll   /* 9999-12-31T23:59:59Z */

/* Defaults on a fresh (uninitialized) policy: owns nothing yet. */
void mbxC_policy_defaults(mbx_policy *p);
/* Release what the policy owns (the environment); p is then empty but valid. */
void mbxC_policy_clear(mbx_policy *p);
/* Validate and store one limit. Returns 0, or -1 with a sentence in why that every front door
   can show after its own name for the setting: the setting in words and the allowed range in
   the vocabulary's units, no C identifier ("the memory limit must be between 256k and 1T, not
   1000 bytes"; nothing is changed). */
int mbxC_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value, char *why,
                          size_t why_size);
/* The stored value; 0 for an unknown limit. */
uint64_t mbxC_policy_get_limit(const mbx_policy *p, mbx_limit which);

/* Results of the setters below besides 0 (done). */
#define MBXC_POLICY_INVALID (-1) /* why says what was wrong; nothing changed */
#define MBXC_POLICY_NO_MEMORY (-2)

/* Define (value != NULL) or remove (value == NULL) a virtual environment variable. A name is
   1..MBXC_MAX_ENV_NAME bytes of printable ASCII other than '=' (what POSIX shells accept
   as a variable name, plus the punctuation real environments contain); a value is at most
   MBXC_MAX_ENV_VALUE bytes. */
int mbxC_policy_set_env(mbx_policy *p, const char *name, const char *value, char *why,
                        size_t why_size);
/* Fix the clock at epoch_seconds (MBXC_MIN_TIME..MBXC_MAX_TIME). */
int mbxC_policy_set_time(mbx_policy *p, int64_t epoch_seconds, char *why, size_t why_size);
/* Fix the random seed. Cannot fail. */
void mbxC_policy_set_seed(mbx_policy *p, uint64_t seed);
/* Turn deterministic mode on (on != 0) or off. Cannot fail. */
void mbxC_policy_set_deterministic(mbx_policy *p, int on);
/* 1 when p is deterministic with no instruction limit, which no sandbox may be made from:
   whether a run ends by the clock depends on the machine, and a deterministic run's
   os.clock() and its recorded stopping point are its instruction count. */
static inline int mbxC_policy_needs_instructions(const mbx_policy *p) {
  return p->deterministic && p->instructions == 0;
}

/* Mount host_dir (resolved here, once, with realpath: it must exist and be a directory) at
   virtual_path (absolute and normalized, not "/", not /tmp or below it), mode MBXC_MOUNT_RO,
   MBXC_MOUNT_RW or MBXC_MOUNT_OVERLAY, not overlapping another mount or a policy file. */
#define MBXC_POLICY_UNSUPPORTED (-3)
int mbxC_policy_mount(mbx_policy *p, const char *virtual_path, size_t path_len,
                      const char *host_dir, int mode, char *why, size_t why_size);
/* A read-only memory file of len bytes (copied) at virtual_path (absolute, normalized, not
   under a mount or /tmp, not a file's parent or child). */
int mbxC_policy_add_file(mbx_policy *p, const char *virtual_path, size_t path_len, const void *data,
                         size_t len, char *why, size_t why_size);

/* Let module reads (require, loadfile, dofile; never io, fs or exec) find the .lua files of
   host_dir (resolved here, once: an existing directory) at the view's root, where the view
   has nothing at that path. One per policy; NULL removes it. */
int mbxC_policy_set_module_dir(mbx_policy *p, const char *host_dir, char *why, size_t why_size);
/* Register module `name` (1..255 bytes, no control bytes) with len bytes of Lua source
   (copied, at most MBXC_MODULE_MAX; counted with the policy's files): require finds it
   before package.path's files. The same name again replaces it. */
int mbxC_policy_add_module(mbx_policy *p, const char *name, size_t name_len, const void *source,
                           size_t len, char *why, size_t why_size);
/* Copy the settings of src (limits, clock, seed, deterministic flag, environment and
   filesystem; not the host functions) into dst, a fresh mbxC_policy_defaults policy.
   0, or MBXC_POLICY_NO_MEMORY (dst is then cleared). */
int mbxC_policy_copy_settings(mbx_policy *dst, const mbx_policy *src);
/* Move src's settings into dst, releasing dst's old ones; dst keeps its host functions and
   src is left with defaults. */
void mbxC_policy_take_settings(mbx_policy *dst, mbx_policy *src);

/* XXH3-64 of a canonical serialization of what the policy grants and limits: the limits, the
   clock, the seed, the deterministic flag, the environment (sorted by name) and the host
   functions in order (name, kind and, for native ones, the parsed signature), the mounts
   (virtual path, mode, resolved host path), the policy's files (path and contents), the
   module folder and registered modules (name and source) and the filesystem quotas, never the callbacks or their userdata. Snapshots record it; a restore under another policy is
   refused. */
uint64_t mbxC_policy_digest(const mbx_policy *p);

#endif
