/* host/policy_api.c -- the public C API of policies: limits, clock, seed, environment and the
   functions a policy grants. Argument checks over capabilities/policy.c. */
#include <stdlib.h>
#include <string.h>

#include "capabilities/ffi.h"
#include "capabilities/hostfn.h"
#include "capabilities/policy.h"
#include "host/policy_api.h"
#include "include/moonbox.h"
#include "common/error.h"
#include "vm/names.h"

/* Globals every sandbox has (and the module names require serves): a host function must not
   replace one, or guest code written against the standard library would call the host
   instead (tests/stdlib/test_hostcall.c checks this list against a live sandbox; "proc" and the
   names of absent libraries are kept for the features that will add them). */
static const char *const guest_globals[] = {
    "_G",        "_VERSION", "assert",       "collectgarbage",
    "coroutine", "error",    "getmetatable", "io",
    "ipairs",    "json",     "load",         "math",
    "next",      "os",       "pairs",        "pcall",
    "print",     "rawequal", "rawget",       "rawlen",
    "rawset",    "require",  "select",       "setmetatable",
    "string",    "table",    "tonumber",     "tostring",
    "type",      "utf8",     "xpcall",       "cjson",
    "dkjson",    "debug",    "package",      "dofile",
    "loadfile",  "warn",     "proc",         "fs"};

/* The last part of a name may be a key such as "create-entities" (an MCP tool's name, reached
   as tools.mem["create-entities"]): letters, digits, '_' and '-'. No '.', the separator. */
static int is_bracket_key(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || c == '-' || (c >= '0' && c <= '9') ||
          ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')))
      return 0;
  }
  return 1;
}

const mbxC_name_rules mbxH_guest_names = {.is_name = mbxV_is_identifier,
                                          .is_reserved = mbxV_is_reserved_word,
                                          .is_key = is_bracket_key,
                                          .globals = guest_globals,
                                          .global_count =
                                              sizeof guest_globals / sizeof *guest_globals};

MBX_API mbx_policy *mbx_policy_new(void) {
  mbx_policy *p = malloc(sizeof *p);
  if (p == NULL) return NULL;
  mbxC_policy_defaults(p);
  p->host_fns.rules = &mbxH_guest_names;
  return p;
}

MBX_API void mbx_policy_free(mbx_policy *p) {
  if (p == NULL) return;
  mbxC_policy_clear(p);
  free(p);
}

MBX_API mbx_policy *mbx_policy_copy(const mbx_policy *p) {
  if (p == NULL) return NULL;
  mbx_policy *copy = mbx_policy_new();
  /* The settings, not the host functions: the fresh policy's empty table is kept. */
  if (copy != NULL && mbxC_policy_copy_settings(copy, p) != 0) {
    mbx_policy_free(copy);
    return NULL;
  }
  return copy;
}

MBX_API mbx_status mbx_policy_set_env(mbx_policy *p, const char *name, const char *value,
                                      mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_env: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  switch (mbxC_policy_set_env(p, name, value, why, sizeof why)) {
  case 0:
    return MBX_OK;
  case MBXC_POLICY_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_policy_set_env: out of memory");
    return MBX_NO_MEMORY;
  default:
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_set_time(mbx_policy *p, int64_t epoch_seconds, mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_time: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_time(p, epoch_seconds, why, sizeof why) != 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_seed(mbx_policy *p, uint64_t seed, mbx_error *err) {
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_seed: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbxC_policy_set_seed(p, seed);
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_deterministic(mbx_policy *p, int on, mbx_error *err) {
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_deterministic: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  mbxC_policy_set_deterministic(p, on);
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit_checked(mbx_policy *p, mbx_limit which, uint64_t value,
                                                mbx_error *err) {
  char why[200];
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_set_limit: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  if (mbxC_policy_set_limit(p, which, value, why, sizeof why) != 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value) {
  return mbx_policy_set_limit_checked(p, which, value, NULL);
}

MBX_API uint64_t mbx_policy_get_limit(const mbx_policy *p, mbx_limit which) {
  return p ? mbxC_policy_get_limit(p, which) : 0;
}

static mbx_status add_hostfn(mbx_policy *p, const char *fn_name, const char *name,
                             mbxC_fn_kind kind, mbx_host_fn fn, void *userdata, mbx_error *err) {
  char why[300];
  if (p == NULL || (kind == MBXC_FN_SYNC && fn == NULL)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s: the policy and the callback must not be NULL",
                   fn_name);
    return MBX_INVALID_ARGUMENT;
  }
  switch (mbxC_hostfn_add(&p->host_fns, name, kind, fn, userdata, why, sizeof why)) {
  case 0:
    return MBX_OK;
  case MBXC_HOSTFN_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY, "%s: out of memory", fn_name);
    return MBX_NO_MEMORY;
  default:
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s: %s", fn_name, why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_add_function(mbx_policy *p, const char *name, mbx_host_fn fn,
                                           void *userdata, mbx_error *err) {
  return add_hostfn(p, "mbx_policy_add_function", name, MBXC_FN_SYNC, fn, userdata, err);
}

MBX_API mbx_status mbx_policy_add_external(mbx_policy *p, const char *name, mbx_error *err) {
  return add_hostfn(p, "mbx_policy_add_external", name, MBXC_FN_EXTERNAL, NULL, NULL, err);
}

MBX_API mbx_status mbx_policy_bind_native(mbx_policy *p, const char *name, const char *signature,
                                          void (*fn)(void), mbx_error *err) {
  char why[300];
  if (p == NULL || fn == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_bind_native: the policy and the function must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  /* Describe, validate, then act: the signature is parsed and prepared before the name is
     stored, and a refused name releases the prepared call. */
  int made;
  mbxC_native *native = mbxC_native_new(signature, fn, &made, why, sizeof why);
  if (native == NULL) {
    if (made == MBXC_FFI_NO_MEMORY) {
      mbxU_error_set(err, MBX_NO_MEMORY, "mbx_policy_bind_native: out of memory");
      return MBX_NO_MEMORY;
    }
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_bind_native: %s", why);
    return MBX_INVALID_ARGUMENT;
  }
  int added = mbxC_hostfn_add_native(&p->host_fns, name, native, why, sizeof why);
  if (added == 0) return MBX_OK;
  mbxC_native_unref(native);
  if (added == MBXC_HOSTFN_NO_MEMORY) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_policy_bind_native: out of memory");
    return MBX_NO_MEMORY;
  }
  mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_bind_native: %s", why);
  return MBX_INVALID_ARGUMENT;
}

/* ---- the filesystem view ---- */

static mbx_status fs_status(int r, const char *fn, const char *why, mbx_error *err) {
  switch (r) {
  case 0:
    return MBX_OK;
  case MBXC_POLICY_NO_MEMORY:
    mbxU_error_set(err, MBX_NO_MEMORY, "%s: out of memory", fn);
    return MBX_NO_MEMORY;
  case MBXC_POLICY_UNSUPPORTED:
    mbxU_error_set(err, MBX_UNSUPPORTED, "%s", why);
    return MBX_UNSUPPORTED;
  default:
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "%s", why);
    return MBX_INVALID_ARGUMENT;
  }
}

MBX_API mbx_status mbx_policy_mount(mbx_policy *p, const char *virtual_path, const char *host_dir,
                                    int mode, mbx_error *err) {
  char why[400];
  if (p == NULL || virtual_path == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_mount: the policy and the virtual path must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  int r = mbxC_policy_mount(p, virtual_path, strlen(virtual_path), host_dir, mode, why, sizeof why);
  return fs_status(r, "mbx_policy_mount", why, err);
}

MBX_API mbx_status mbx_policy_allow_exec(mbx_policy *p, const char *program, mbx_error *err) {
  char why[400];
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_allow_exec: the policy is NULL");
    return MBX_INVALID_ARGUMENT;
  }
  int r = mbxC_exec_allow(&p->exec, program, why, sizeof why);
  if (r == -2) {
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_policy_allow_exec: out of memory");
    return MBX_NO_MEMORY;
  }
  if (r != 0) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "mbx_policy_allow_exec: %s", why);
    return MBX_INVALID_ARGUMENT;
  }
  return MBX_OK;
}

MBX_API mbx_status mbx_policy_add_file(mbx_policy *p, const char *virtual_path, const void *data,
                                       size_t len, mbx_error *err) {
  char why[400];
  if (p == NULL || virtual_path == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_add_file: the policy and the virtual path must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  int r = mbxC_policy_add_file(p, virtual_path, strlen(virtual_path), data, len, why, sizeof why);
  return fs_status(r, "mbx_policy_add_file", why, err);
}

MBX_API mbx_status mbx_policy_add_module(mbx_policy *p, const char *name, const char *source,
                                         size_t len, mbx_error *err) {
  char why[400];
  if (p == NULL || name == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_add_module: the policy and the name must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  int r = mbxC_policy_add_module(p, name, strlen(name), source, len, why, sizeof why);
  return fs_status(r, "mbx_policy_add_module", why, err);
}

MBX_API mbx_status mbx_policy_set_module_dir(mbx_policy *p, const char *host_dir, mbx_error *err) {
  char why[400];
  if (p == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_set_module_dir: the policy must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  int r = mbxC_policy_set_module_dir(p, host_dir, why, sizeof why);
  return fs_status(r, "mbx_policy_set_module_dir", why, err);
}
