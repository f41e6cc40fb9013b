/* host/options/args.h -- command-line parsing of the moonbox tool: plain data in, plain data out. */
#ifndef MBX_HOST_CLI_ARGS_H
#define MBX_HOST_CLI_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "common/units.h"

/*
** Nothing here touches Lua or the library: argv is turned into an mbxH_cli_options record
** (describe), every value is checked (validate), and only then does host/cli/main.c read files and
** run the sandbox (act). Strings in the record are borrowed from argv.
*/

/* Room for one error line; long user values are shortened before they are quoted. */
#define MBXH_CLI_MSG_SIZE 320
/* --env may be given this many times (the library's cap on virtual variables). */
#define MBXH_CLI_MAX_ENV 256
/* --pause-on may be given this many times (the library's cap on host functions). */
#define MBXH_CLI_MAX_PAUSE 256
/* --mount and --file may be given this many times (the library's caps). */
#define MBXH_CLI_MAX_MOUNTS 32
#define MBXH_CLI_MAX_FILES 1024
#define MBXH_CLI_MAX_EXEC 64                /* --allow-exec (mbx_policy_allow_exec's cap) */
#define MBXH_CLI_MAX_MODULES 1024           /* --module (mbx_policy_add_module's cap) */
#define MBXH_CLI_MAX_UPSTREAM_ARGS 512      /* --upstream and --allow-tool (moonbox mcp) */
#define MBXH_CLI_HIBERNATE_DEFAULT_MS 30000 /* moonbox mcp --isolate none: --hibernate-after 30s */
/* --http-session-prefix NAME: at most this many letters, digits and '-' (moonbox mcp). */
#define MBXH_CLI_SESSION_PREFIX_MAX 16
/* The valued --http options of moonbox mcp: their places in mbxH_cli_options.http. */
enum {
  MBXH_CLI_HTTP_LISTEN,         /* --http HOST:PORT */
  MBXH_CLI_HTTP_TOKEN_FILE,     /* --http-token-file FILE */
  MBXH_CLI_HTTP_CERT,           /* --http-cert FILE */
  MBXH_CLI_HTTP_KEY,            /* --http-key FILE */
  MBXH_CLI_HTTP_ALLOW_ORIGIN,   /* --http-allow-origin ORIGIN */
  MBXH_CLI_HTTP_SESSION_PREFIX, /* --http-session-prefix NAME (checked by the parse) */
  MBXH_CLI_HTTP_VALUES
};
/* The exit code of a run that stopped at a --pause-on function (docs/cli.md). */
#define MBXH_CLI_EXIT_PAUSED 4

typedef enum mbxH_cli_command {
  MBXH_CLI_RUN,     /* moonbox run ... */
  MBXH_CLI_RESUME,  /* moonbox resume SNAPSHOT (--value JSON | --error MESSAGE) ... */
  MBXH_CLI_HELP,    /* usage on stdout, exit 0 */
  MBXH_CLI_VERSION, /* version line on stdout, exit 0 */
  MBXH_CLI_CHECK,   /* moonbox check ... (FILE | -e CODE | -): the static check, no run */
  MBXH_CLI_DOCTOR,  /* what the exec backend found (moonbox doctor [--json]) */
  MBXH_CLI_MCP,     /* moonbox mcp [POLICY OPTIONS]: the MCP server on stdin/stdout */
  MBXH_CLI_REPL     /* moonbox repl [OPTIONS]: an interactive session on one sandbox */
} mbxH_cli_command;

typedef enum mbxH_cli_script {
  MBXH_CLI_SCRIPT_NONE, /* not given yet (an error once parsing ends) */
  MBXH_CLI_SCRIPT_FILE, /* script = a path */
  MBXH_CLI_SCRIPT_CODE, /* script = the text given to -e */
  MBXH_CLI_SCRIPT_STDIN /* "-" */
} mbxH_cli_script;

/* One --memory/--timeout/... setting; `set` is 0 when the option was not given. */
typedef struct mbxH_cli_limit {
  int set;
  uint64_t value;
} mbxH_cli_limit;

typedef struct mbxH_cli_options {
  mbxH_cli_command command;
  mbxH_cli_command help_for; /* with command MBXH_CLI_HELP: whose help (MBXH_CLI_HELP: all) */
  mbxH_cli_script script_kind;
  const char *script;                /* path or code; NULL for stdin */
  mbxH_cli_limit memory;             /* bytes */
  mbxH_cli_limit instructions;       /* count, 0 = unlimited */
  mbxH_cli_limit timeout_ms;         /* milliseconds, 0 = unlimited */
  mbxH_cli_limit output;             /* bytes */
  mbxH_cli_limit source;             /* bytes */
  const char *input_json;            /* --input text, or NULL */
  const char *input_file;            /* --input-file path ("-" = stdin), or NULL */
  int json;                          /* --json */
  mbxH_cli_limit seed;               /* --seed: math.random's seed */
  int time_set;                      /* --time given */
  int64_t time;                      /* --time: the fixed clock, seconds since the epoch */
  const char *env[MBXH_CLI_MAX_ENV]; /* --env NAME=VALUE, in order; each has an '=' */
  int env_count;
  int deterministic;                        /* --deterministic */
  const char *pause_on[MBXH_CLI_MAX_PAUSE]; /* --pause-on NAME, in order */
  int pause_count;
  const char *snapshot_out;                /* --snapshot-out FILE, or NULL */
  const char *policy_file;                 /* --policy FILE, or NULL */
  const char *mounts[MBXH_CLI_MAX_MOUNTS]; /* --mount HOSTDIR:/virtual[:ro|rw|overlay] */
  int mount_count;
  const char *files[MBXH_CLI_MAX_FILES]; /* --file /virtual=HOSTFILE */
  int file_count;
  const char *allow_exec[MBXH_CLI_MAX_EXEC]; /* --allow-exec PROGRAM */
  int allow_exec_count;
  const char *modules[MBXH_CLI_MAX_MODULES]; /* --module NAME=FILE; each has an '=' */
  int module_count;
  int no_script_modules; /* --no-script-modules: require does not see the script's folder */
  /* run FILE|- ARGS...: what follows the script goes to it (arg, ...), as lua(1) does */
  char *const *script_args;
  int script_argc;
  int changes;                /* --changes or --changes=FILE */
  const char *changes_file;   /* --changes=FILE, or NULL (stderr) */
  const char *export_changes; /* --export-changes DIR, or NULL */
  int diff;                   /* --diff or --diff=FILE */
  const char *diff_file;      /* --diff=FILE, or NULL (stdout) */
  mbxH_cli_limit diff_limit;  /* --diff-limit: bytes of diff text */
  const char *stdin_file;     /* --stdin FILE ("-" = standard input), or NULL */
  /* moonbox resume only: */
  const char *snapshot;     /* SNAPSHOT: the file to restore ("-" = stdin) */
  const char *resume_value; /* --value JSON, or NULL */
  const char *resume_error; /* --error MESSAGE, or NULL (exactly one of the two is set) */
  int isolate;              /* --isolate process (1) | none (0, the default) */
  /* --exec-uids FIRST-LAST (run, resume, check, doctor, mcp): exec.uids; count 0 = default */
  uint32_t exec_uid_first, exec_uid_count;
  /* moonbox mcp: --upstream NAME=COMMAND and --allow-tool NAME.TOOL in order (is_allow says
     which), and --code-mode. */
  const char *upstream_args[MBXH_CLI_MAX_UPSTREAM_ARGS];
  int upstream_arg_is_allow[MBXH_CLI_MAX_UPSTREAM_ARGS];
  int upstream_arg_count;
  int code_mode;
  /* moonbox mcp --http HOST:PORT, --http-token-file, --http-cert, --http-key,
     --http-allow-origin, --http-session-prefix (NULL: not given; indexed by
     MBXH_CLI_HTTP_SESSION_PREFIX and the like), and --http-behind-proxy. */
  const char *http[MBXH_CLI_HTTP_VALUES];
  int http_behind_proxy;
  /* moonbox mcp --hibernate-after DURATION (ms; 0 = never): after parsing, the value in
     force, MBXH_CLI_HIBERNATE_DEFAULT_MS with --isolate none when not given, else 0. */
  uint64_t hibernate_after_ms;
  int hibernate_after_set;
} mbxH_cli_options;

/*
** Parses a whole command line (argv[0] is the program name). Returns 0 and fills *opt, or -1
** with a one-line message in msg (no "moonbox: " prefix, no newline) for a usage error.
*/
int mbxH_cli_parse(int argc, char *const argv[], mbxH_cli_options *opt, char *msg, size_t msg_size);

/* The value parsers (sizes, durations, counts, epochs, seeds): common/units.h. */

/*
** Splits a --mount value "HOSTDIR:/virtual[:ro|rw|overlay]" (ro when no mode is given; the
** virtual path is the part from the last ":/"). Returns 0 with the host directory in host,
** the virtual path in virt (both NUL-terminated, truncated values are refused) and *mode
** 1 (ro), 2 (rw) or 4 (overlay) -- the MBX_MOUNT_* values; or -1 with msg filled.
*/
int mbxH_cli_split_mount(const char *value, char *host, size_t host_size, char *virt,
                         size_t virt_size, int *mode, char *msg, size_t msg_size);

/*
** The chunk name for a script file: the path as given when it fits in size - 1 bytes,
** otherwise "..." and as much of its end as fits (the file name is the useful part), never
** splitting a UTF-8 sequence.
*/
void mbxH_cli_chunk_name(const char *path, char *buf, size_t size);

/*
** Finds the pending call in the JSON of a paused result (mbx_result_json: compact, keys
** sorted, so "pending":{"args":[...],"function":"NAME"}). Returns 0 and points *fn at NAME
** and *args at the JSON array (brackets included), or -1 when the text holds no pending call.
*/
int mbxH_cli_find_pending(const char *json, size_t len, const char **fn, size_t *fn_len,
                          const char **args, size_t *args_len);

/* The process exit code for an mbx_status (run outcome or API status); see docs/cli.md. */
int mbxH_cli_exit_code(int status);
/* The process exit code for a run that ended with os.exit(code): 0 for 0, the code itself for
   1..255, and 1 for any other code (a code whose low byte is 0, such as 256, must not read as
   success, and a negative code has no portable meaning). */
int mbxH_cli_exit_code_for_exit(int64_t code);

/* Whether option `name` (name_len bytes, e.g. "--memory") of run takes a value: 1, 0 for a
   flag, -1 for no such option (moonbox fuzz passes them on to the fuzz engine). */
int mbxH_cli_option_arity(const char *name, size_t name_len);

/* The --help text of command (MBXH_CLI_HELP: the overview of every command), ending in a
   newline: the command's usage and exactly the options it takes. A static buffer, rebuilt
   at each call. */
const char *mbxH_cli_usage(mbxH_cli_command command);

#endif /* MBX_HOST_CLI_ARGS_H */
