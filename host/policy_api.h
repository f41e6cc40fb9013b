/* host/policy_api.h -- what the public policy functions share with the rest of host/. */
#ifndef MBX_HOST_POLICY_API_H
#define MBX_HOST_POLICY_API_H

#include "capabilities/hostfn.h"

/* The names a granted function may take in a sandbox: dotted Lua identifiers, no reserved
   word, and no top-level name a sandbox already has (capabilities/ knows no Lua: this is the
   host telling it). Every policy mbx_policy_new makes carries these rules. */
extern const mbxC_name_rules mbxH_guest_names;

#endif
