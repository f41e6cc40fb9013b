/* capabilities/policy.c -- what a sandbox may use: limits today, grants later. No Lua here. */
#include "capabilities/policy.h"

#include <stdio.h>
#include <stddef.h>


void mbxC_policy_defaults(mbx_policy *p) {
  p->memory = MBXC_DEFAULT_MEMORY;
  p->instructions = MBXC_DEFAULT_INSTRUCTIONS;
  p->time_ms = MBXC_DEFAULT_TIME_MS;
  p->output = MBXC_DEFAULT_OUTPUT;
  p->source = MBXC_DEFAULT_SOURCE;
  p->host_calls = MBXC_DEFAULT_HOST_CALLS;
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
