/* host/cli/repl.h -- `moonbox repl`: an interactive session on one sandbox, as lua -i. */
#ifndef MBX_HOST_CLI_REPL_H
#define MBX_HOST_CLI_REPL_H

#include "host/options/args.h"

/*
** Runs the session until end of input (Ctrl-D) or os.exit, reading entries from standard
** input (edited with libedit on a terminal, where the build has it; plain lines from a pipe,
** with no prompt): each entry is compiled, the sandbox checkpointed, the entry run under the
** options' limits, its output and values printed, and the sandbox rewound when the entry
** ended on a limit, an interrupt (Ctrl-C) or a pause. Returns the process exit code: 0, the
** code os.exit gave, or 2 / 70 when the session could not start.
*/
int mbxH_cli_repl(const mbxH_cli_options *opt);

#endif /* MBX_HOST_CLI_REPL_H */
