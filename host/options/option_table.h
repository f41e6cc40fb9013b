/* host/options/option_table.h -- every option of the moonbox command line, as data. */
#ifndef MBX_HOST_OPTIONS_OPTION_TABLE_H
#define MBX_HOST_OPTIONS_OPTION_TABLE_H

#include <stddef.h>

/*
** One table holds each option's name, whether it takes a value, the example quoted when the
** value is missing, which commands take it and its --help lines. The parser (args.c) and the
** help (help.c) both read it, so what a command accepts and what its --help lists cannot
** disagree.
*/

typedef enum mbxH_option_id {
  MBXH_OPT_HELP,
  MBXH_OPT_VERSION,
  MBXH_OPT_JSON,
  MBXH_OPT_EVAL,
  MBXH_OPT_MEMORY,
  MBXH_OPT_INSTRUCTIONS,
  MBXH_OPT_TIMEOUT,
  MBXH_OPT_OUTPUT_LIMIT,
  MBXH_OPT_SOURCE_LIMIT,
  MBXH_OPT_INPUT,
  MBXH_OPT_INPUT_FILE,
  MBXH_OPT_SEED,
  MBXH_OPT_TIME,
  MBXH_OPT_ENV,
  MBXH_OPT_DETERMINISTIC,
  MBXH_OPT_PAUSE_ON,
  MBXH_OPT_SNAPSHOT_OUT,
  MBXH_OPT_VALUE,
  MBXH_OPT_ERROR,
  MBXH_OPT_POLICY,
  MBXH_OPT_MOUNT,
  MBXH_OPT_FILE,
  MBXH_OPT_ISOLATE,
  MBXH_OPT_ALLOW_EXEC,
  MBXH_OPT_EXEC_UIDS,
  MBXH_OPT_CHANGES,
  MBXH_OPT_EXPORT_CHANGES,
  MBXH_OPT_DIFF,
  MBXH_OPT_DIFF_LIMIT,
  MBXH_OPT_STDIN,
  MBXH_OPT_MODULE,
  MBXH_OPT_NO_SCRIPT_MODULES,
  MBXH_OPT_UPSTREAM,
  MBXH_OPT_ALLOW_TOOL,
  MBXH_OPT_CODE_MODE,
  MBXH_OPT_HTTP, /* the six valued --http options, in the order of MBXH_CLI_HTTP_LISTEN... */
  MBXH_OPT_HTTP_TOKEN_FILE,
  MBXH_OPT_HTTP_CERT,
  MBXH_OPT_HTTP_KEY,
  MBXH_OPT_HTTP_ALLOW_ORIGIN,
  MBXH_OPT_HTTP_SESSION_PREFIX,
  MBXH_OPT_HTTP_BEHIND_PROXY,
  MBXH_OPT_HIBERNATE_AFTER
} mbxH_option_id;

typedef struct mbxH_option_spec {
  const char *name;
  mbxH_option_id id;
  int takes_value;     /* 0: a flag; 1: a value; MBXH_OPT_OPTIONAL: a flag, or a value after '=' */
  const char *example; /* shown when the value is missing */
  int only;            /* MBXH_OPT_FOR_BOTH, or the one command that takes it */
  const char *value;   /* the value's name in --help ("SIZE"), or NULL */
  const char *help;    /* its --help lines (NULL: not listed, e.g. the -h alias) */
} mbxH_option_spec;

enum { MBXH_OPT_FOR_BOTH = 0, MBXH_OPT_FOR_RUN = 1, MBXH_OPT_FOR_RESUME = 2, MBXH_OPT_FOR_MCP = 3 };
enum { MBXH_OPT_OPTIONAL = 2 };

/* Every option, in the order each command's --help lists them; mbxH_option_count entries. */
extern const mbxH_option_spec mbxH_options[];
extern const size_t mbxH_option_count;

/* The option named by the first name_len bytes of arg ("--memory" of "--memory=1M"), or NULL. */
const mbxH_option_spec *mbxH_option_find(const char *arg, size_t name_len);

/* Whether moonbox mcp takes the option (the policy options); moonbox repl (those and --input). */
int mbxH_option_mcp_takes(const mbxH_option_spec *spec);
int mbxH_option_repl_takes(const mbxH_option_spec *spec);

#endif /* MBX_HOST_OPTIONS_OPTION_TABLE_H */
