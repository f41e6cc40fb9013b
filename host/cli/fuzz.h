/* host/cli/fuzz.h -- `moonbox fuzz`: checks its options and execs the moonbox-fuzz engine. */
#ifndef MBX_HOST_CLI_FUZZ_H
#define MBX_HOST_CLI_FUZZ_H

#include <stddef.h>

#include "host/options/fuzz_flags.h"

/* The engine's file name, looked up next to the moonbox binary (never through PATH). */
#define MBXH_FUZZ_ENGINE "moonbox-fuzz"

/*
** Translates `moonbox fuzz FILE ARGS...` (argv[1] is "fuzz") into the engine's argv: FILE
** becomes --moonbox-target=FILE, each run option (with its value) one --moonbox-option=, the
** fuzz options their flags, and every other argument (libFuzzer's -flags, corpus directories,
** inputs) is kept in order. out gets argc - 1 entries at most (plus NULL); strings are
** allocated (free with mbxH_cli_fuzz_free_argv). Returns the count, 0 for --help (usage
** printed), or -1 with msg filled.
*/
int mbxH_cli_fuzz_argv(int argc, char *const argv[], char **out, char *msg, size_t msg_size);
void mbxH_cli_fuzz_free_argv(char **out);

/* The engine's absolute path in out: MBXH_FUZZ_ENGINE in the directory of this executable
   (/proc/self/exe: argv[0] may be relative, or a name found through PATH). 0, or -1 when
   /proc/self/exe cannot be read or the path does not fit in size. */
int mbxH_cli_fuzz_engine_path(char *out, size_t size);

/* The whole command: translate, find the engine, exec it. Returns an exit code on failure. */
int mbxH_cli_fuzz(int argc, char **argv);

/* The usage of moonbox fuzz, ending in a newline. */
const char *mbxH_cli_fuzz_usage(void);

#endif
