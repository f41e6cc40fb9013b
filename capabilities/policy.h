/* capabilities/policy.h -- what a sandbox may use: limits today, grants later. No Lua here. */
#ifndef MBX_CAPABILITIES_POLICY_H
#define MBX_CAPABILITIES_POLICY_H

#include <stdint.h>

#include "include/moonbox.h"

struct mbx_policy {
  uint64_t memory;
  uint64_t instructions;
  uint64_t time_ms;
  uint64_t output;
  uint64_t source;
  uint64_t host_calls;
};

#define MBXC_DEFAULT_MEMORY (64ull << 20)
#define MBXC_DEFAULT_INSTRUCTIONS 1000000000ull
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

#include <stddef.h>

void mbxC_policy_defaults(mbx_policy *p);
/* Validate and store one limit. Returns 0, or -1 with a sentence naming the allowed range in
   why (nothing is changed). */
int mbxC_policy_set_limit(mbx_policy *p, mbx_limit which, uint64_t value, char *why,
                          size_t why_size);
/* The stored value; 0 for an unknown limit. */
uint64_t mbxC_policy_get_limit(const mbx_policy *p, mbx_limit which);

#endif
