/* host/options/policy.h -- the policy the moonbox command builds from its options (run, resume,
   fuzz). */
#ifndef MBX_HOST_CLI_POLICY_H
#define MBX_HOST_CLI_POLICY_H

#include "host/options/args.h"
#include "moonbox.h"

/* Exit codes the CLI decides itself (docs/cli.md); run outcomes map through
   mbxH_cli_exit_code. */
#define MBXH_CLI_EXIT_USAGE 2
#define MBXH_CLI_EXIT_INTERNAL 70

/*
** The policy of the options: --policy FILE first, then the limits, --seed, --deterministic,
** --time, --env, --pause-on, --mount and --file over it (the library checks every value).
** Prints "moonbox: <option>: <what is wrong>" and returns NULL on error, with *exit_code
** MBXH_CLI_EXIT_USAGE (a bad value) or MBXH_CLI_EXIT_INTERNAL (out of memory).
*/
mbx_policy *mbxH_cli_make_policy(const mbxH_cli_options *opt, int *exit_code);

#endif
