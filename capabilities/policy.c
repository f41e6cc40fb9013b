/* capabilities/policy.c -- what a sandbox may use: limits, clock, seed and environment. */
#include "capabilities/policy.h"
#include "common/bytes.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
}

/* A limit's name, range and storage, described once so validation and lookup agree. */
typedef struct limit_spec {
  mbx_limit which;
  const char *name;
  uint64_t min, max;
  size_t offset;
} limit_spec;

static const limit_spec limit_specs[] = {
    {MBX_LIMIT_MEMORY, "MBX_LIMIT_MEMORY (bytes)", MBXC_MIN_MEMORY, MBXC_MAX_MEMORY,
     offsetof(mbx_policy, memory)},
    {MBX_LIMIT_INSTRUCTIONS, "MBX_LIMIT_INSTRUCTIONS", 0, UINT64_MAX / 4,
     offsetof(mbx_policy, instructions)},
    {MBX_LIMIT_TIME_MS, "MBX_LIMIT_TIME_MS", 0, MBXC_MAX_TIME_MS, offsetof(mbx_policy, time_ms)},
    {MBX_LIMIT_OUTPUT, "MBX_LIMIT_OUTPUT (bytes)", 0, MBXC_MAX_OUTPUT,
     offsetof(mbx_policy, output)},
    {MBX_LIMIT_SOURCE, "MBX_LIMIT_SOURCE (bytes)", 1, MBXC_MAX_SOURCE,
     offsetof(mbx_policy, source)},
    {MBX_LIMIT_HOST_CALLS, "MBX_LIMIT_HOST_CALLS", 0, UINT64_MAX / 4,
     offsetof(mbx_policy, host_calls)},
    {MBX_LIMIT_RESULT, "MBX_LIMIT_RESULT (bytes)", 0, MBXC_MAX_OUTPUT,
     offsetof(mbx_policy, result)},
};

static const limit_spec *find_limit(mbx_limit which) {
  for (size_t i = 0; i < sizeof limit_specs / sizeof *limit_specs; i++)
    if (limit_specs[i].which == which) return &limit_specs[i];
  return NULL;
}

int mbxC_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value, char *why,
                          size_t why_size) {
  const limit_spec *spec = find_limit(which);
  if (spec == NULL) {
    snprintf(why, why_size, "mbx_policy_set_limit: unknown limit %d", (int)which);
    return -1;
  }
  if (value < spec->min || value > spec->max) {
    snprintf(why, why_size, "%s must be between %llu and %llu, not %llu", spec->name,
             (unsigned long long)spec->min, (unsigned long long)spec->max,
             (unsigned long long)value);
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
  return XXH3_64bits_digest(&st);
}
