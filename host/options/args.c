/* host/options/args.c -- parses the moonbox command line (its values: host/options/values.c). */
#include "host/options/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"
#include "moonbox.h"

typedef enum option_id {
  OPT_HELP,
  OPT_VERSION,
  OPT_JSON,
  OPT_EVAL,
  OPT_MEMORY,
  OPT_INSTRUCTIONS,
  OPT_TIMEOUT,
  OPT_OUTPUT_LIMIT,
  OPT_SOURCE_LIMIT,
  OPT_INPUT,
  OPT_INPUT_FILE,
  OPT_SEED,
  OPT_TIME,
  OPT_ENV,
  OPT_DETERMINISTIC,
  OPT_PAUSE_ON,
  OPT_SNAPSHOT_OUT,
  OPT_VALUE,
  OPT_ERROR,
  OPT_POLICY,
  OPT_MOUNT,
  OPT_FILE,
  OPT_ISOLATE,
  OPT_ALLOW_EXEC,
  OPT_EXEC_UIDS,
  OPT_CHANGES,
  OPT_EXPORT_CHANGES,
  OPT_DIFF,
  OPT_DIFF_LIMIT,
  OPT_STDIN,
  OPT_MODULE,
  OPT_NO_SCRIPT_MODULES,
  OPT_UPSTREAM,
  OPT_ALLOW_TOOL,
  OPT_CODE_MODE,
  OPT_HTTP, /* the five valued --http options, in the order of mbxH_cli_options.http */
  OPT_HTTP_TOKEN_FILE,
  OPT_HTTP_CERT,
  OPT_HTTP_KEY,
  OPT_HTTP_ALLOW_ORIGIN,
  OPT_HTTP_BEHIND_PROXY,
  OPT_HIBERNATE_AFTER
} option_id;

typedef struct option_spec {
  const char *name;
  option_id id;
  int takes_value;     /* 0: a flag; 1: a value; OPTIONAL: a flag, or a value after '=' */
  const char *example; /* shown when the value is missing */
  int only;            /* FOR_BOTH, or the one command that takes it */
  const char *value;   /* the value's name in --help ("SIZE"), or NULL */
  const char *help;    /* its --help lines (NULL: not listed, e.g. the -h alias) */
} option_spec;

enum { FOR_BOTH = 0, FOR_RUN = 1, FOR_RESUME = 2, FOR_MCP = 3 };
enum { OPTIONAL = 2 };

/* Every option, its rules and its --help text: each command's help lists the options that
   command takes (mbxH_cli_usage), so the list and the parser cannot disagree. */
static const option_spec run_options[] = {
    {"-e", OPT_EVAL, 1, "-e 'return 1 + 1'", FOR_RUN, "CODE", NULL},
    {"--memory", OPT_MEMORY, 1, "--memory 64M", 0, "SIZE",
     "live heap limit (default 64M; at least 256k)"},
    {"--instructions", OPT_INSTRUCTIONS, 1, "--instructions 1e9", 0, "N",
     "VM instruction limit, e.g. 1e9 (default 0 = none: no count\n"
     "hook, the timeout stops loops; --deterministic needs one)"},
    {"--timeout", OPT_TIMEOUT, 1, "--timeout 2s", 0, "DURATION",
     "wall-clock limit: 500ms, 2s, 1.5s, 1m (0 = unlimited; default 5s)"},
    {"--output-limit", OPT_OUTPUT_LIMIT, 1, "--output-limit 1M", 0, "SIZE",
     "stdout + stderr limit (default 1M)"},
    {"--source-limit", OPT_SOURCE_LIMIT, 1, "--source-limit 64k", 0, "SIZE",
     "script size limit (default 64k, at most 16M)"},
    {"--input", OPT_INPUT, 1, "--input '{\"x\": 1}'", FOR_RUN, "JSON",
     "a JSON object whose keys become globals"},
    {"--input-file", OPT_INPUT_FILE, 1, "--input-file inputs.json", FOR_RUN, "PATH",
     "the same, read from PATH (- = standard input)"},
    {"--seed", OPT_SEED, 1, "--seed 42", 0, "N", "seed math.random with N (reproducible runs)"},
    {"--time", OPT_TIME, 1, "--time 1700000000", 0, "EPOCH",
     "fix os.time/os.date at EPOCH seconds since 1970 (UTC)"},
    {"--env", OPT_ENV, 1, "--env API_URL=https://example.com", 0, "NAME=VALUE",
     "a variable for os.getenv (repeatable; nothing else is visible)"},
    {"--deterministic", OPT_DETERMINISTIC, 0, NULL, 0, NULL,
     "canonical pairs order, counter ids in tostring, os.clock\n"
     "counting instructions (with --seed and --time: same output\n"
     "in every run; needs --instructions)"},
    {"--pause-on", OPT_PAUSE_ON, 1, "--pause-on tools.fetch", 0, "NAME",
     "grant NAME (e.g. tools.fetch) as an external function: the\n"
     "run stops at its first call and exits 4 (repeatable)"},
    {"--snapshot-out", OPT_SNAPSHOT_OUT, 1, "--snapshot-out snap.bin", 0, "FILE",
     "when the run pauses, write a snapshot of it to FILE (turns\n"
     "--deterministic on: needs --instructions)"},
    {"--value", OPT_VALUE, 1, "--value '{\"ok\": true}'", FOR_RESUME, "JSON",
     "the paused call returns this JSON value"},
    {"--error", OPT_ERROR, 1, "--error 'not found'", FOR_RESUME, "MESSAGE",
     "the paused call raises this error (catchable with pcall)"},
    {"--policy", OPT_POLICY, 1, "--policy policy.json", 0, "FILE",
     "load limits, env, seed, time and files from a JSON policy\n"
     "(docs/policy.md); the options here override its values"},
    {"--mount", OPT_MOUNT, 1, "--mount ./data:/data", 0, "HOSTDIR:/PATH[:ro|rw|overlay]",
     "show HOSTDIR at /PATH (ro: read-only, the default; rw: writes\n"
     "reach HOSTDIR; overlay: writes stay in the sandbox's memory)\n"
     "(repeatable)"},
    {"--file", OPT_FILE, 1, "--file /input/orders.csv=orders.csv", 0, "/PATH=HOSTFILE",
     "a read-only copy of HOSTFILE at /PATH (repeatable)"},
    {"--module", OPT_MODULE, 1, "--module mylib.parser=parser.lua", 0, "NAME=FILE",
     "require(NAME) loads FILE's source (a registered module,\n"
     "found before package.path; repeatable)"},
    {"--no-script-modules", OPT_NO_SCRIPT_MODULES, 0, NULL, 0, NULL,
     "do not let require, loadfile and dofile see the .lua files\n"
     "beside FILE (by default they do, read-only, as ./x.lua, the\n"
     "way lua(1) finds them from FILE's folder; io and fs never see\n"
     "that folder; off with --snapshot-out)"},
    {"--stdin", OPT_STDIN, 1, "--stdin data.txt", FOR_RUN, "FILE",
     "what io.stdin and io.read read (- = standard input, the\n"
     "default); read only as the script reads it, a wait counted\n"
     "against --timeout"},
    {"--isolate", OPT_ISOLATE, 1, "--isolate process", 0, "process|none",
     "run the script in a jailed worker process (moonbox-worker:\n"
     "no files, no network, no system calls but compute) or in\n"
     "this process (none, the default; moonbox mcp defaults to\n"
     "process)"},
    {"--allow-exec", OPT_ALLOW_EXEC, 1, "--allow-exec /usr/bin/python3", 0, "PROGRAM",
     "let proc.run start PROGRAM (an absolute path, e.g. /bin/sh) in\n"
     "the exec sandbox (bubblewrap); /bin/sh also enables os.execute\n"
     "and io.popen (repeatable; see moonbox doctor)"},
    {"--exec-uids", OPT_EXEC_UIDS, 1, "--exec-uids 1879048192-1879113727", 0, "FIRST-LAST",
     "as root, the host uids programs run as, one per running\n"
     "program (exec.uids; default 1879048192-1879113727; set a\n"
     "range of its own for each container; see moonbox doctor)"},
    {"--json", OPT_JSON, 0, NULL, 0, NULL,
     "print one JSON object with status, value, output and usage"},
    {"--changes", OPT_CHANGES, OPTIONAL, NULL, FOR_RUN, "[=FILE]",
     "after the run, list what the script changed in overlays and\n"
     "/tmp on stderr, below a line the script cannot print (or in\n"
     "FILE; under \"changes\" with --json)"},
    {"--export-changes", OPT_EXPORT_CHANGES, 1, "--export-changes ./changes", FOR_RUN, "DIR",
     "write the changed files under DIR (a new directory), with\n"
     "the manifest DIR/.moonbox-changes.json (removals, renames)"},
    {"--diff", OPT_DIFF, OPTIONAL, NULL, FOR_RUN, "[=FILE]",
     "print a unified diff of the changes on stdout, which then holds\n"
     "nothing else (the script's output goes to stderr), or in FILE"},
    {"--diff-limit", OPT_DIFF_LIMIT, 1, "--diff-limit 4M", FOR_RUN, "SIZE",
     "bytes of diff --diff prints (default: --output-limit); past\n"
     "it a file is named, not shown"},
    {"--upstream", OPT_UPSTREAM, 1, "--upstream 'mem=npx -y @modelcontextprotocol/server-memory'",
     FOR_MCP, "NAME=COMMAND",
     "start COMMAND (split into words like a shell's, never run\n"
     "by one) as an upstream MCP server whose allowed tools the\n"
     "guest calls as tools.NAME.TOOL (code mode, docs/code-mode.md;\n"
     "repeatable)"},
    {"--allow-tool", OPT_ALLOW_TOOL, 1, "--allow-tool mem.read_graph", FOR_MCP, "NAME.TOOL",
     "allow an upstream's tool (NAME.* for all of them; none is\n"
     "allowed unless named; repeatable)"},
    {"--code-mode", OPT_CODE_MODE, 0, NULL, FOR_MCP, NULL,
     "list only the meta-tools (run_lua, search_tools, ...), not\n"
     "the upstreams' tools themselves"},
    {"--http", OPT_HTTP, 1, "--http 127.0.0.1:8080", FOR_MCP, "HOST:PORT",
     "serve MCP's Streamable HTTP at http://HOST:PORT/mcp instead\n"
     "of stdin/stdout (port 0: any free one, printed on stderr)"},
    {"--http-token-file", OPT_HTTP_TOKEN_FILE, 1, "--http-token-file token.txt", FOR_MCP, "FILE",
     "require 'Authorization: Bearer TOKEN', TOKEN the file's\n"
     "first line (required off loopback)"},
    {"--http-cert", OPT_HTTP_CERT, 1, "--http-cert cert.pem", FOR_MCP, "FILE",
     "serve HTTPS with this PEM certificate (and --http-key)"},
    {"--http-key", OPT_HTTP_KEY, 1, "--http-key key.pem", FOR_MCP, "FILE",
     "the PEM private key of --http-cert"},
    {"--http-allow-origin", OPT_HTTP_ALLOW_ORIGIN, 1, "--http-allow-origin https://app.example",
     FOR_MCP, "ORIGIN",
     "also accept requests whose Origin is ORIGIN (by default\nonly loopback ones)"},
    {"--http-behind-proxy", OPT_HTTP_BEHIND_PROXY, 0, NULL, FOR_MCP, NULL,
     "off loopback without --http-cert: a TLS proxy in front of\nmoonbox terminates HTTPS"},
    {"--hibernate-after", OPT_HIBERNATE_AFTER, 1, "--hibernate-after 5m", FOR_MCP, "DURATION",
     "a session idle this long hibernates: its heap is stored\n"
     "compressed and its memory given back until its next call\n"
     "wakes it, state intact (default 30s with --isolate none;\n"
     "0 = never; sessions in worker processes cannot hibernate)"},
    {"--help", OPT_HELP, 0, NULL, 0, NULL, "show this help (-h)"},
    {"-h", OPT_HELP, 0, NULL, 0, NULL, NULL},
    {"--version", OPT_VERSION, 0, NULL, 0, NULL, "show the version (-v)"},
    {"-v", OPT_VERSION, 0, NULL, 0, NULL, NULL},
};

static int mcp_takes(const option_spec *spec);
static int repl_takes(const option_spec *spec);

/* Whether command takes the option (what the parser accepts, below). */
static int command_takes(mbxH_cli_command command, const option_spec *spec) {
  if (command == MBXH_CLI_MCP) return mcp_takes(spec);
  if (spec->only == FOR_MCP) return 0;
  if (command == MBXH_CLI_REPL) return repl_takes(spec);
  if (spec->only == FOR_BOTH) return 1;
  return spec->only == (command == MBXH_CLI_RESUME ? FOR_RESUME : FOR_RUN);
}

static const char overview_text[] =
    "Usage: moonbox COMMAND [OPTIONS] ...\n"
    "\n"
    "Runs untrusted Lua 5.4 in a sandbox with memory, instruction, time and output limits.\n"
    "\n"
    "Commands:\n"
    "  run [OPTIONS] (FILE [ARGS...] | -e CODE | -)\n"
    "                         run a script; its output is passed through and its return\n"
    "                         value printed as JSON\n"
    "  resume [OPTIONS] SNAPSHOT (--value JSON | --error MESSAGE)\n"
    "                         continue a run paused at a --pause-on function\n"
    "  check [OPTIONS] (FILE | -e CODE | -)\n"
    "                         compile under the policy and list the globals it lacks\n"
    "  fuzz FILE [OPTIONS] [LIBFUZZER FLAGS] [CORPUS...]\n"
    "                         fuzz the script's fuzz(data) function (coverage-guided)\n"
    "  doctor [--json] [--exec-uids FIRST-LAST]\n"
    "                         what the exec backend found on this host, and why not\n"
    "  mcp [OPTIONS]          an MCP server on stdin/stdout (docs/mcp.md)\n"
    "  repl [OPTIONS]         an interactive Lua prompt on one sandbox, as lua -i\n"
    "  --help, --version (-v)\n"
    "\n"
    "moonbox COMMAND --help lists a command's options.\n";

static const char run_head[] =
    "Usage: moonbox run [OPTIONS] (FILE [ARGS...] | -e CODE | -)\n"
    "\n"
    "Runs an untrusted Lua 5.4 script in a sandbox with memory, instruction, time and\n"
    "output limits. The script's output is passed through; its return value is printed\n"
    "as JSON.\n"
    "\n"
    "Script (exactly one):\n"
    "  FILE [ARGS...]         run the Lua source in FILE; what follows FILE goes to the\n"
    "                         script as arg[1..n] and the main chunk's ... (arg[0] is the\n"
    "                         file's name), so options come before FILE, as for lua(1)\n"
    "  -e CODE                run CODE\n"
    "  - [ARGS...]            read the script from standard input\n";

static const char resume_head[] =
    "Usage: moonbox resume [OPTIONS] SNAPSHOT (--value JSON | --error MESSAGE)\n"
    "\n"
    "Continues a paused run from its snapshot, in this or another process.\n"
    "  SNAPSHOT               the file --snapshot-out wrote (- = standard input)\n"
    "The policy options (--memory, --instructions, --timeout, --output-limit,\n"
    "--source-limit, --seed, --time, --env, --pause-on) must be those of the run that\n"
    "wrote the snapshot. --json and --snapshot-out work as for run.\n";

static const char check_head[] =
    "Usage: moonbox check [OPTIONS] (FILE | -e CODE | -)\n"
    "\n"
    "Compiles the script under the policy and runs nothing. Lists the global names the\n"
    "script reads or writes that the policy does not provide (the standard library,\n"
    "--pause-on functions, --input keys are provided), with line numbers, and syntax\n"
    "errors. Exit 0 clean, 1 with findings, 2 on bad usage. --json prints\n"
    "{\"globals\":[...],\"ok\":...,\"syntax_error\":...}.\n";

static const char mcp_head[] =
    "Usage: moonbox mcp [OPTIONS]\n"
    "\n"
    "Serves the Model Context Protocol on stdin/stdout until stdin closes (exit 0): an MCP\n"
    "client starts it and calls its run_lua, check_lua, reset_session and close_session\n"
    "tools (docs/mcp.md). The options make the server's policy, which caps every call's\n"
    "limits; each call runs in a jailed worker unless --isolate none. With --http\n"
    "HOST:PORT it serves Streamable HTTP at /mcp instead, until SIGINT or SIGTERM.\n";

static const char repl_head[] =
    "Usage: moonbox repl [OPTIONS]\n"
    "\n"
    "Reads Lua from standard input, one entry at a time, into one sandbox whose globals\n"
    "persist between entries, as lua -i does: an expression's values are printed (=EXPR\n"
    "too), an unfinished entry asks for more with >>, errors are printed and the session\n"
    "goes on. Each entry gets the limits (instructions, time, output) anew; the memory limit\n"
    "is the session's heap. An entry that ends on a limit or Ctrl-C is undone: the session\n"
    "is rewound to before it. Ctrl-D (end of input) leaves; os.exit(N) exits with N.\n"
    "On a terminal, lines are edited and kept in this session's history"
#ifdef MBX_HAVE_LIBEDIT
    " (libedit)"
#else
    " (this build has\nno libedit: plain line reading, no editing or history)"
#endif
    ";\nfrom a pipe, no prompt is shown.\n";

static const char doctor_text[] =
    "Usage: moonbox doctor [--json] [--exec-uids FIRST-LAST]\n"
    "\n"
    "Says what the exec backend (proc.run, os.execute, io.popen) found on this host:\n"
    "bubblewrap and its version, the helper, user namespaces, seccomp, cgroups (memory,\n"
    "pids, kill) and the uid range, each with why not where it is missing.\n"
    "  --json                 the same as one JSON object\n"
    "  --exec-uids FIRST-LAST check this uid range instead of the default\n"
    "  -h, --help             show this help\n";

static const char notes_text[] =
    "\n"
    "SIZE takes k, M or G suffixes (also KiB, MiB, GiB; powers of 1024). Options come\n"
    "before FILE or - (after -e CODE they may follow); -- ends the options. Both\n"
    "--opt VALUE and --opt=VALUE work.\n"
    "\n"
    "Exit status: 0 ok, 1 script error, 2 usage or input error (also a bad snapshot),\n"
    "3 limit exceeded or interrupted, 4 paused at a --pause-on function, 70 internal\n"
    "error; os.exit(N) exits with N (1 when N is not 0..255).\n";

/* Append text to the help being built (bounded: the buffer holds the longest help). */
static void help_add(char *buf, size_t size, size_t *len, const char *text) {
  size_t n = strlen(text);
  if (*len + n >= size) n = size - 1 - *len;
  memcpy(buf + *len, text, n);
  *len += n;
  buf[*len] = '\0';
}

/* One option's lines: "  --name VALUE" padded to column 25 (or alone on its line when
   longer), then its help, each further line indented to that column. */
static void help_option(char *buf, size_t size, size_t *len, const option_spec *spec) {
  char head[80];
  int n = snprintf(head, sizeof head, "  %s%s%s", spec->name,
                   spec->value && spec->value[0] != '[' ? " " : "", spec->value ? spec->value : "");
  help_add(buf, size, len, head);
  const char *line = spec->help;
  int col = n;
  if (col > 23) {
    help_add(buf, size, len, "\n");
    col = 0;
  }
  while (*line) {
    const char *nl = strchr(line, '\n');
    size_t l = nl ? (size_t)(nl - line) : strlen(line);
    char out[128];
    snprintf(out, sizeof out, "%*s%.*s\n", 25 - col, "", (int)l, line);
    help_add(buf, size, len, out);
    col = 0;
    line += l + (nl != NULL);
  }
}

const char *mbxH_cli_usage(mbxH_cli_command command) {
  static char buf[8192];
  size_t len = 0;
  buf[0] = '\0';
  const char *head = command == MBXH_CLI_RUN      ? run_head
                     : command == MBXH_CLI_RESUME ? resume_head
                     : command == MBXH_CLI_CHECK  ? check_head
                     : command == MBXH_CLI_MCP    ? mcp_head
                     : command == MBXH_CLI_REPL   ? repl_head
                     : command == MBXH_CLI_DOCTOR ? doctor_text
                                                  : overview_text;
  help_add(buf, sizeof buf, &len, head);
  if (head == overview_text || head == doctor_text) return buf;
  help_add(buf, sizeof buf, &len, "\nOptions:\n");
  for (size_t i = 0; i < sizeof run_options / sizeof run_options[0]; i++) {
    const option_spec *spec = &run_options[i];
    if (spec->help != NULL && spec->id != OPT_EVAL && command_takes(command, spec))
      help_option(buf, sizeof buf, &len, spec);
  }
  help_add(buf, sizeof buf, &len, notes_text);
  return buf;
}

/* ---------------------------------------------------------------------------------------- */
/* Command line                                                                              */

/* How a script source is named in a "two scripts given" message. */
static void describe_script(mbxH_cli_script kind, const char *script, char *buf, size_t size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  if (kind == MBXH_CLI_SCRIPT_CODE) {
    (void)snprintf(buf, size, "-e CODE");
  } else if (kind == MBXH_CLI_SCRIPT_STDIN) {
    (void)snprintf(buf, size, "- (stdin)");
  } else {
    mbxU_quote(script, quoted, sizeof quoted);
    (void)snprintf(buf, size, "'%s'", quoted);
  }
}

static int set_script(mbxH_cli_options *opt, mbxH_cli_script kind, const char *script, char *msg,
                      size_t msg_size) {
  char before[MBXU_QUOTE_MAX + 8], now[MBXU_QUOTE_MAX + 8];
  if (opt->script_kind != MBXH_CLI_SCRIPT_NONE) {
    describe_script(opt->script_kind, opt->script, before, sizeof before);
    describe_script(kind, script, now, sizeof now);
    mbxU_msg(msg, msg_size, "two scripts given (%s and %s); give exactly one of FILE, -e CODE or -",
             before, now);
    return -1;
  }
  if (kind == MBXH_CLI_SCRIPT_FILE && script[0] == '\0') {
    mbxU_msg(msg, msg_size, "empty script file name (give FILE, -e CODE or - for stdin)");
    return -1;
  }
  opt->script_kind = kind;
  opt->script = script;
  return 0;
}

static const option_spec *find_option(const char *arg, size_t name_len) {
  size_t i;
  for (i = 0; i < sizeof run_options / sizeof run_options[0]; i++) {
    const char *name = run_options[i].name;
    if (strlen(name) == name_len && strncmp(name, arg, name_len) == 0) return &run_options[i];
  }
  return NULL;
}

/* Stores one option's value; returns -1 with msg filled when the value is refused. */

/* --exec-uids FIRST-LAST: an inclusive range of host uids; the library checks the rest
   (mbx_runtime_set_exec_uids). */
static int parse_uid_range(const char *value, mbxH_cli_options *opt, char *msg, size_t msg_size) {
  char *end = NULL;
  errno = 0;
  unsigned long long first = strtoull(value, &end, 10), last = 0;
  int ok = end != value && *end == '-' && value[0] >= '0' && value[0] <= '9';
  if (ok) {
    const char *second = end + 1;
    last = strtoull(second, &end, 10);
    ok = end != second && *end == '\0' && second[0] >= '0' && second[0] <= '9' && errno == 0 &&
         first <= last && last < 4294967295ull;
  }
  if (!ok) {
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(value, quoted, sizeof quoted);
    mbxU_msg(msg, msg_size,
             "--exec-uids: '%s' is not a range FIRST-LAST of host uids below 4294967295 "
             "(e.g. --exec-uids 1879048192-1879113727)",
             quoted);
    return -1;
  }
  opt->exec_uid_first = (uint32_t)first;
  opt->exec_uid_count = (uint32_t)(last - first + 1);
  return 0;
}

static int apply_option(mbxH_cli_options *opt, const option_spec *spec, const char *value,
                        char *msg, size_t msg_size) {
  mbxH_cli_limit *limit = NULL;
  int rc = 0;
  switch (spec->id) {
  case OPT_HELP:
  case OPT_VERSION:
  case OPT_JSON:
  case OPT_DETERMINISTIC:
  case OPT_NO_SCRIPT_MODULES:
  case OPT_CODE_MODE:
  case OPT_HTTP_BEHIND_PROXY:
    break; /* flags are handled by the caller */
  case OPT_HTTP:
  case OPT_HTTP_TOKEN_FILE:
  case OPT_HTTP_CERT:
  case OPT_HTTP_KEY:
  case OPT_HTTP_ALLOW_ORIGIN:
    opt->http[spec->id - OPT_HTTP] = value; /* checked by host/mcp/http.c */
    break;
  case OPT_HIBERNATE_AFTER:
    if (mbxU_parse_duration(spec->name, value, &opt->hibernate_after_ms, msg, msg_size) != 0)
      return -1;
    opt->hibernate_after_set = 1;
    break;
  case OPT_UPSTREAM:
  case OPT_ALLOW_TOOL: {
    /* Checked where the upstreams are made (host/mcp/upstream_config.c), in order. */
    if (opt->upstream_arg_count == MBXH_CLI_MAX_UPSTREAM_ARGS) {
      mbxU_msg(msg, msg_size, "%s: at most %d --upstream and --allow-tool options", spec->name,
               MBXH_CLI_MAX_UPSTREAM_ARGS);
      return -1;
    }
    opt->upstream_args[opt->upstream_arg_count] = value;
    opt->upstream_arg_is_allow[opt->upstream_arg_count++] = spec->id == OPT_ALLOW_TOOL;
    break;
  }
  case OPT_DIFF:
  case OPT_CHANGES:
    /* --diff=FILE, --changes=FILE (alone, they are flags: the caller's) */
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "%s=: empty file name (e.g. %s=changes.txt)", spec->name, spec->name);
      return -1;
    }
    if (spec->id == OPT_DIFF) {
      opt->diff = 1;
      opt->diff_file = value;
    } else {
      opt->changes = 1;
      opt->changes_file = value;
    }
    break;
  case OPT_DIFF_LIMIT:
    limit = &opt->diff_limit;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_EVAL:
    return set_script(opt, MBXH_CLI_SCRIPT_CODE, value, msg, msg_size);
  case OPT_MEMORY:
    limit = &opt->memory;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_INSTRUCTIONS:
    limit = &opt->instructions;
    rc = mbxU_parse_count(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_TIMEOUT:
    limit = &opt->timeout_ms;
    rc = mbxU_parse_duration(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_OUTPUT_LIMIT:
    limit = &opt->output;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_SOURCE_LIMIT:
    limit = &opt->source;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_SEED:
    limit = &opt->seed;
    rc = mbxU_parse_seed(spec->name, value, &limit->value, msg, msg_size);
    break;
  case OPT_TIME:
    rc = mbxU_parse_epoch(spec->name, value, &opt->time, msg, msg_size);
    if (rc == 0) opt->time_set = 1;
    break;
  case OPT_ENV: {
    /* The name is checked by the library (mbx_policy_set_env); only the shape is here. */
    const char *eq = strchr(value, '=');
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(value, quoted, sizeof quoted);
    if (eq == NULL || eq == value) {
      mbxU_msg(msg, msg_size, "--env: '%s' is not NAME=VALUE (e.g. %s)", quoted, spec->example);
      return -1;
    }
    if (opt->env_count == MBXH_CLI_MAX_ENV) {
      mbxU_msg(msg, msg_size, "--env: at most %d variables can be given", MBXH_CLI_MAX_ENV);
      return -1;
    }
    opt->env[opt->env_count++] = value;
    break;
  }
  case OPT_PAUSE_ON:
    /* The name is checked by the library (mbx_policy_add_external). */
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--pause-on: empty name (e.g. %s)", spec->example);
      return -1;
    }
    if (opt->pause_count == MBXH_CLI_MAX_PAUSE) {
      mbxU_msg(msg, msg_size, "--pause-on: at most %d functions can be given", MBXH_CLI_MAX_PAUSE);
      return -1;
    }
    opt->pause_on[opt->pause_count++] = value;
    break;
  case OPT_STDIN:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--stdin: empty file name (e.g. %s, or - for standard input)",
               spec->example);
      return -1;
    }
    opt->stdin_file = value;
    break;
  case OPT_EXPORT_CHANGES:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--export-changes: empty directory name (e.g. %s)", spec->example);
      return -1;
    }
    opt->export_changes = value;
    break;
  case OPT_SNAPSHOT_OUT:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--snapshot-out: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->snapshot_out = value;
    break;
  case OPT_VALUE:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--value: empty value (give one JSON value, e.g. %s)", spec->example);
      return -1;
    }
    opt->resume_value = value;
    break;
  case OPT_ERROR:
    opt->resume_error = value; /* an empty message is a message */
    break;
  case OPT_POLICY:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--policy: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->policy_file = value;
    break;
  case OPT_MOUNT: {
    /* The shape here; the paths are checked by the library (mbx_policy_mount). */
    char host[8], virt[8];
    int mode;
    if (mbxH_cli_split_mount(value, host, 0, virt, 0, &mode, msg, msg_size) != 0) return -1;
    if (opt->mount_count == MBXH_CLI_MAX_MOUNTS) {
      mbxU_msg(msg, msg_size, "--mount: at most %d mounts can be given", MBXH_CLI_MAX_MOUNTS);
      return -1;
    }
    opt->mounts[opt->mount_count++] = value;
    break;
  }
  case OPT_EXEC_UIDS:
    return parse_uid_range(value, opt, msg, msg_size);
  case OPT_ISOLATE:
    if (strcmp(value, "process") == 0 || strcmp(value, "none") == 0) {
      opt->isolate = value[0] == 'p';
      return 0;
    } else {
      char quoted[MBXU_QUOTE_MAX + 4];
      mbxU_quote(value, quoted, sizeof quoted);
      mbxU_msg(msg, msg_size, "--isolate: '%s' is not process or none (e.g. %s)", quoted,
               spec->example);
      return -1;
    }
  case OPT_ALLOW_EXEC:
    /* The shape here; the library checks the path (mbx_policy_allow_exec). */
    if (value[0] != '/') {
      char quoted[MBXU_QUOTE_MAX + 4];
      mbxU_quote(value, quoted, sizeof quoted);
      mbxU_msg(msg, msg_size, "--allow-exec: '%s' is not an absolute path (e.g. %s)", quoted,
               spec->example);
      return -1;
    }
    if (opt->allow_exec_count == MBXH_CLI_MAX_EXEC) {
      mbxU_msg(msg, msg_size, "--allow-exec: at most %d programs can be allowed",
               MBXH_CLI_MAX_EXEC);
      return -1;
    }
    opt->allow_exec[opt->allow_exec_count++] = value;
    break;
  case OPT_MODULE: {
    const char *eq = strchr(value, '=');
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(value, quoted, sizeof quoted);
    if (eq == NULL || eq == value || eq[1] == '\0') {
      mbxU_msg(msg, msg_size, "--module: '%s' is not NAME=FILE (e.g. %s)", quoted, spec->example);
      return -1;
    }
    if (opt->module_count == MBXH_CLI_MAX_MODULES) {
      mbxU_msg(msg, msg_size, "--module: at most %d modules can be given", MBXH_CLI_MAX_MODULES);
      return -1;
    }
    opt->modules[opt->module_count++] = value;
    break;
  }
  case OPT_FILE: {
    const char *eq = strchr(value, '=');
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(value, quoted, sizeof quoted);
    if (value[0] != '/' || eq == NULL || eq[1] == '\0') {
      mbxU_msg(msg, msg_size, "--file: '%s' is not /VIRTUAL=HOSTFILE (e.g. %s)", quoted,
               spec->example);
      return -1;
    }
    if (opt->file_count == MBXH_CLI_MAX_FILES) {
      mbxU_msg(msg, msg_size, "--file: at most %d files can be given", MBXH_CLI_MAX_FILES);
      return -1;
    }
    opt->files[opt->file_count++] = value;
    break;
  }
  case OPT_INPUT:
  case OPT_INPUT_FILE:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "%s: empty value (e.g. %s)", spec->name, spec->example);
      return -1;
    }
    if (spec->id == OPT_INPUT)
      opt->input_json = value;
    else
      opt->input_file = value;
    break;
  }
  if (rc == 0 && limit != NULL)
    limit->set = 1; /* a repeated limit option: the last one wins, as in most tools */
  return rc;
}

int mbxH_cli_split_mount(const char *value, char *host, size_t host_size, char *virt,
                         size_t virt_size, int *mode, char *msg, size_t msg_size) {
  static const struct {
    const char *suffix;
    int mode;
  } modes[] = {{":ro", 1}, {":rw", 2}, {":overlay", 4}};
  char quoted[MBXU_QUOTE_MAX + 4];
  size_t len = strlen(value);
  mbxU_quote(value, quoted, sizeof quoted);
  *mode = 1;
  for (size_t i = 0; i < sizeof modes / sizeof *modes; i++) {
    size_t n = strlen(modes[i].suffix);
    if (len > n && strcmp(value + len - n, modes[i].suffix) == 0) {
      *mode = modes[i].mode;
      len -= n;
      break;
    }
  }
  /* The virtual path starts at the last ":/" (host directories may contain ':'). */
  const char *split = NULL;
  for (size_t i = 0; i + 1 < len; i++)
    if (value[i] == ':' && value[i + 1] == '/') split = value + i;
  if (split == NULL || split == value) {
    mbxU_msg(msg, msg_size, "--mount: '%s' is not HOSTDIR:/PATH[:ro|rw] (e.g. ./data:/data)",
             quoted);
    return -1;
  }
  size_t host_len = (size_t)(split - value), virt_len = len - host_len - 1;
  /* A ':' after the virtual path's last '/' is a mode we do not know (":wr", ":RW"): refused,
     as Docker and bwrap do, rather than mounted read-only at a path ending in ":wr". */
  const char *colon = NULL;
  for (const char *c = split + 1; c < split + 1 + virt_len; c++)
    if (*c == ':') colon = c;
  if (colon != NULL && memchr(colon, '/', (size_t)(split + 1 + virt_len - colon)) == NULL) {
    char mode_text[MBXU_QUOTE_MAX + 4];
    char raw[64];
    size_t mode_len = (size_t)(split + 1 + virt_len - colon - 1);
    snprintf(raw, sizeof raw, "%.*s", (int)(mode_len < 63 ? mode_len : 63), colon + 1);
    mbxU_quote(raw, mode_text, sizeof mode_text);
    mbxU_msg(msg, msg_size,
             "--mount: unknown mode '%s' in '%s' (the modes are ro, rw and overlay, e.g. "
             "./data:/data:rw)",
             mode_text, quoted);
    return -1;
  }
  if (host_size == 0 && virt_size == 0) return 0; /* the shape only */
  if (host_len + 1 > host_size || virt_len + 1 > virt_size) {
    mbxU_msg(msg, msg_size, "--mount: '%s' is too long", quoted);
    return -1;
  }
  memcpy(host, value, host_len);
  host[host_len] = '\0';
  memcpy(virt, split + 1, virt_len);
  virt[virt_len] = '\0';
  return 0;
}

/* The SNAPSHOT argument of moonbox resume: exactly one. */
static int set_snapshot(mbxH_cli_options *opt, const char *path, char *msg, size_t msg_size) {
  char before[MBXU_QUOTE_MAX + 4], now[MBXU_QUOTE_MAX + 4];
  if (opt->snapshot != NULL) {
    mbxU_quote(opt->snapshot, before, sizeof before);
    mbxU_quote(path, now, sizeof now);
    mbxU_msg(msg, msg_size, "two snapshots given ('%s' and '%s'); give exactly one SNAPSHOT file",
             before, now);
    return -1;
  }
  if (path[0] == '\0') {
    mbxU_msg(msg, msg_size, "empty snapshot file name (give SNAPSHOT, or - for stdin)");
    return -1;
  }
  opt->snapshot = path;
  return 0;
}

/* A positional argument: the script of run, the snapshot of resume. */
static int set_positional(mbxH_cli_options *opt, const char *arg, char *msg, size_t msg_size) {
  if (opt->command == MBXH_CLI_MCP) {
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(arg, quoted, sizeof quoted);
    mbxU_msg(msg, msg_size,
             "moonbox mcp takes no script ('%s'): the client sends the code in tools/call", quoted);
    return -1;
  }
  if (opt->command == MBXH_CLI_REPL) {
    char quoted[MBXU_QUOTE_MAX + 4];
    mbxU_quote(arg, quoted, sizeof quoted);
    mbxU_msg(msg, msg_size,
             "moonbox repl takes no script ('%s'): type the code at its prompt, or pipe it in "
             "(moonbox repl < FILE)",
             quoted);
    return -1;
  }
  if (opt->command == MBXH_CLI_RESUME) return set_snapshot(opt, arg, msg, msg_size);
  if (strcmp(arg, "-") == 0) return set_script(opt, MBXH_CLI_SCRIPT_STDIN, NULL, msg, msg_size);
  return set_script(opt, MBXH_CLI_SCRIPT_FILE, arg, msg, msg_size);
}

/* The checks of a whole resume command line. */
static int check_resume(const mbxH_cli_options *opt, char *msg, size_t msg_size) {
  if (opt->snapshot == NULL) {
    mbxU_msg(msg, msg_size,
             "no snapshot given (use moonbox resume SNAPSHOT --value JSON, with the file "
             "moonbox run --snapshot-out wrote)");
    return -1;
  }
  if (opt->resume_value != NULL && opt->resume_error != NULL) {
    mbxU_msg(msg, msg_size,
             "--value and --error cannot both be given (the paused call either "
             "returns a value or raises an error)");
    return -1;
  }
  if (opt->resume_value == NULL && opt->resume_error == NULL) {
    mbxU_msg(msg, msg_size,
             "no answer given (resume needs --value JSON or --error MESSAGE: "
             "what the paused call returns or raises)");
    return -1;
  }
  return 0;
}

/* moonbox mcp takes the policy options only: what a run may use. The script, its inputs and
   the output format come from each tools/call; pauses and snapshots have no MCP form. */
static int mcp_takes(const option_spec *spec) {
  switch (spec->id) {
  case OPT_EVAL:
  case OPT_INPUT:
  case OPT_INPUT_FILE:
  case OPT_JSON:
  case OPT_PAUSE_ON:
  case OPT_SNAPSHOT_OUT:
  case OPT_VALUE:
  case OPT_ERROR:
  case OPT_NO_SCRIPT_MODULES:
  case OPT_STDIN: /* the server's stdin is the protocol */
  case OPT_CHANGES:
  case OPT_EXPORT_CHANGES:
  case OPT_DIFF:
  case OPT_DIFF_LIMIT: /* a call's changes come back in its result */
    return 0;
  default:
    return 1;
  }
}

/* moonbox repl takes the policy options and the starting globals (--input, --input-file):
   the rest of what mcp refuses too (no script, views, pauses; stdin is the prompt's). */
static int repl_takes(const option_spec *spec) {
  return spec->id == OPT_INPUT || spec->id == OPT_INPUT_FILE || mcp_takes(spec);
}

/* moonbox mcp: --hibernate-after applies to sessions in this process only (a worker's
   sandbox cannot hibernate: mbx_sandbox_hibernate is MBX_UNSUPPORTED there); its default is
   on there, since a session costs only a wake of microseconds for it. */
static int check_mcp(mbxH_cli_options *opt, char *msg, size_t msg_size) {
  if (opt->isolate && opt->hibernate_after_set && opt->hibernate_after_ms != 0) {
    mbxU_msg(msg, msg_size,
             "--hibernate-after: the sessions live in jailed worker processes (--isolate "
             "process, the default), which cannot hibernate; add --isolate none to run the "
             "calls in this process, or leave --hibernate-after out");
    return -1;
  }
  if (!opt->hibernate_after_set)
    opt->hibernate_after_ms = opt->isolate ? 0 : MBXH_CLI_HIBERNATE_DEFAULT_MS;
  return 0;
}

/* argv here starts after "run", "resume", "check", "mcp" or "repl"; opt->command says which. */
static int parse_run(int argc, char *const argv[], mbxH_cli_options *opt, char *msg,
                     size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  int i, options_ended = 0;
  const char *command_name = opt->command == MBXH_CLI_RESUME  ? "resume"
                             : opt->command == MBXH_CLI_CHECK ? "check"
                             : opt->command == MBXH_CLI_MCP   ? "mcp"
                             : opt->command == MBXH_CLI_REPL  ? "repl"
                                                              : "run";
  for (i = 0; i < argc; i++) {
    const char *arg = argv[i], *value = NULL, *eq;
    const option_spec *spec;
    size_t name_len;
    if (!options_ended && strcmp(arg, "--") == 0) {
      options_ended = 1;
      continue;
    }
    if (options_ended || arg[0] != '-' || strcmp(arg, "-") == 0) {
      if (set_positional(opt, arg, msg, msg_size) != 0) return -1;
      /* run FILE ARGS... (and - ARGS...): the rest is the script's, as lua(1) has it. */
      if (opt->command == MBXH_CLI_RUN && opt->script_kind != MBXH_CLI_SCRIPT_CODE) {
        opt->script_args = argv + i + 1;
        opt->script_argc = argc - i - 1;
        break;
      }
      continue;
    }
    /* Only long options take "=VALUE": "-e=x" would otherwise be ambiguous with Lua code. */
    eq = strncmp(arg, "--", 2) == 0 ? strchr(arg, '=') : NULL;
    name_len = eq ? (size_t)(eq - arg) : strlen(arg);
    spec = find_option(arg, name_len);
    if (spec == NULL) {
      char name[MBXU_QUOTE_MAX + 4];
      mbxU_quote(arg, quoted, sizeof quoted);
      if (eq != NULL && name_len < sizeof name) {
        memcpy(name, arg, name_len); /* "--foo=1" is reported as '--foo' */
        name[name_len] = '\0';
        mbxU_quote(name, quoted, sizeof quoted);
      }
      mbxU_msg(msg, msg_size, "unknown option '%s' (see moonbox %s --help)", quoted, command_name);
      return -1;
    }
    if (opt->command == MBXH_CLI_MCP && !mcp_takes(spec)) {
      mbxU_msg(msg, msg_size,
               "%s is not an option of moonbox mcp (it takes the policy options: limits, "
               "--policy, --mount, --file, --env, --seed, --time, --deterministic, and "
               "--isolate)",
               spec->name);
      return -1;
    }
    if (opt->command != MBXH_CLI_MCP && spec->only == FOR_MCP) {
      mbxU_msg(msg, msg_size, "%s is an option of moonbox mcp, not of %s", spec->name,
               command_name);
      return -1;
    }
    if (opt->command == MBXH_CLI_REPL && !repl_takes(spec)) {
      mbxU_msg(msg, msg_size,
               "%s is not an option of moonbox repl (it takes the policy options: limits, "
               "--policy, --mount, --file, --module, --env, --seed, --time, --deterministic, "
               "--allow-exec, --isolate, and --input or --input-file for starting globals)",
               spec->name);
      return -1;
    }
    if (opt->command != MBXH_CLI_MCP && opt->command != MBXH_CLI_REPL && spec->only != FOR_BOTH &&
        spec->only != (opt->command == MBXH_CLI_RESUME ? FOR_RESUME : FOR_RUN)) {
      if (spec->only == FOR_RESUME)
        mbxU_msg(msg, msg_size,
                 "%s is an option of moonbox resume (it answers a paused call), not of %s",
                 spec->name, command_name);
      else
        mbxU_msg(msg, msg_size,
                 "%s is an option of moonbox run, not of resume (resume continues the script "
                 "and inputs recorded in the snapshot)",
                 spec->name);
      return -1;
    }
    if (!spec->takes_value || (spec->takes_value == OPTIONAL && eq == NULL)) {
      if (eq != NULL) {
        mbxU_quote(eq + 1, quoted, sizeof quoted);
        mbxU_msg(msg, msg_size, "%s takes no value (remove '=%s')", spec->name, quoted);
        return -1;
      }
      if (spec->id == OPT_HELP || spec->id == OPT_VERSION) {
        opt->help_for = opt->command;
        opt->command = spec->id == OPT_HELP ? MBXH_CLI_HELP : MBXH_CLI_VERSION;
        return 0;
      }
      /* --json and --deterministic; with --json given twice, the second is a no-op. */
      if (spec->id == OPT_DETERMINISTIC)
        opt->deterministic = 1;
      else if (spec->id == OPT_CHANGES)
        opt->changes = 1;
      else if (spec->id == OPT_DIFF)
        opt->diff = 1;
      else if (spec->id == OPT_NO_SCRIPT_MODULES)
        opt->no_script_modules = 1;
      else if (spec->id == OPT_CODE_MODE)
        opt->code_mode = 1;
      else if (spec->id == OPT_HTTP_BEHIND_PROXY)
        opt->http_behind_proxy = 1;
      else
        opt->json = 1;
      continue;
    }
    if (eq != NULL) {
      value = eq + 1;
    } else if (i + 1 < argc) {
      /* The next argument is the value even when it starts with '-': "-e '-- a comment'",
         and "--memory -5" then reports a negative size rather than a missing one. */
      value = argv[++i];
    } else {
      mbxU_msg(msg, msg_size, "%s needs a value (e.g. %s)", spec->name, spec->example);
      return -1;
    }
    if (apply_option(opt, spec, value, msg, msg_size) != 0) return -1;
  }
  if (opt->command == MBXH_CLI_RESUME) return check_resume(opt, msg, msg_size);
  if (opt->command == MBXH_CLI_MCP) return check_mcp(opt, msg, msg_size);
  if (opt->command == MBXH_CLI_REPL && opt->input_file && strcmp(opt->input_file, "-") == 0) {
    mbxU_msg(msg, msg_size, "--input-file -: stdin is the prompt's (put the inputs in a file)");
    return -1;
  }
  if (opt->command == MBXH_CLI_CHECK && opt->script_kind == MBXH_CLI_SCRIPT_NONE) {
    mbxU_msg(msg, msg_size,
             "no script given (use moonbox check FILE, moonbox check -e CODE, "
             "or - to read stdin)");
    return -1;
  }
  if (opt->command == MBXH_CLI_CHECK && opt->snapshot_out != NULL) {
    mbxU_msg(msg, msg_size, "--snapshot-out: moonbox check runs nothing, so nothing pauses");
    return -1;
  }
  if (opt->script_kind == MBXH_CLI_SCRIPT_NONE && opt->command != MBXH_CLI_REPL) {
    mbxU_msg(msg, msg_size,
             "no script given (use moonbox run FILE, moonbox run -e CODE, or - to read stdin)");
    return -1;
  }
  if (opt->input_json != NULL && opt->input_file != NULL) {
    mbxU_msg(msg, msg_size, "--input and --input-file cannot both be given (use one of them)");
    return -1;
  }
  if (opt->input_file != NULL && strcmp(opt->input_file, "-") == 0 &&
      opt->script_kind == MBXH_CLI_SCRIPT_STDIN) {
    mbxU_msg(msg, msg_size,
             "--input-file -: stdin already holds the script (put the inputs in a file)");
    return -1;
  }
  return 0;
}

int mbxH_cli_parse(int argc, char *const argv[], mbxH_cli_options *opt, char *msg,
                   size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  const char *command;
  memset(opt, 0, sizeof *opt);
  opt->command = MBXH_CLI_RUN;
  if (msg != NULL && msg_size > 0) msg[0] = '\0';
  if (argc < 2) {
    mbxU_msg(msg, msg_size, "no command given (use moonbox run FILE, or see moonbox --help)");
    return -1;
  }
  command = argv[1];
  if (strcmp(command, "--help") == 0 || strcmp(command, "-h") == 0 ||
      strcmp(command, "help") == 0) {
    opt->command = opt->help_for = MBXH_CLI_HELP;
    /* moonbox help COMMAND: that command's help. */
    if (argc >= 3) {
      static const struct {
        const char *name;
        mbxH_cli_command command;
      } named[] = {{"run", MBXH_CLI_RUN}, {"resume", MBXH_CLI_RESUME}, {"check", MBXH_CLI_CHECK},
                   {"mcp", MBXH_CLI_MCP}, {"repl", MBXH_CLI_REPL},     {"doctor", MBXH_CLI_DOCTOR}};
      for (size_t i = 0; i < sizeof named / sizeof *named; i++)
        if (strcmp(argv[2], named[i].name) == 0) opt->help_for = named[i].command;
    }
    return 0;
  }
  if (strcmp(command, "--version") == 0 || strcmp(command, "-v") == 0 ||
      strcmp(command, "version") == 0) {
    opt->command = MBXH_CLI_VERSION;
    return 0;
  }
  if (strcmp(command, "run") == 0) return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  if (strcmp(command, "doctor") == 0) {
    opt->command = MBXH_CLI_DOCTOR;
    for (int i = 2; i < argc; i++) {
      if (strcmp(argv[i], "--json") == 0) {
        opt->json = 1;
        continue;
      }
      if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
        opt->command = MBXH_CLI_HELP;
        opt->help_for = MBXH_CLI_DOCTOR;
        return 0;
      }
      if (strcmp(argv[i], "--exec-uids") == 0 && i + 1 < argc) {
        if (parse_uid_range(argv[++i], opt, msg, msg_size) != 0) return -1;
        continue;
      }
      mbxU_quote(argv[i], quoted, sizeof quoted);
      mbxU_msg(msg, msg_size, "moonbox doctor takes only --json, --exec-uids or --help, not '%s'",
               quoted);
      return -1;
    }
    return 0;
  }
  if (strcmp(command, "mcp") == 0) {
    opt->command = MBXH_CLI_MCP;
    /* The server runs many agents' code for as long as it lives: each call in a jailed worker
       unless --isolate none opts out. */
    opt->isolate = 1;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  if (strcmp(command, "repl") == 0) {
    opt->command = MBXH_CLI_REPL;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  if (strcmp(command, "resume") == 0) {
    opt->command = MBXH_CLI_RESUME;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  if (strcmp(command, "check") == 0) {
    opt->command = MBXH_CLI_CHECK;
    return parse_run(argc - 2, argv + 2, opt, msg, msg_size);
  }
  mbxU_quote(command, quoted, sizeof quoted);
  if (command[0] == '-')
    mbxU_msg(msg, msg_size,
             "unknown option '%s' (options go after the command: moonbox run "
             "[OPTIONS] FILE; see moonbox --help)",
             quoted);
  else
    mbxU_msg(msg, msg_size,
             "unknown command '%s' (the commands are run, resume, check, fuzz, doctor, "
             "mcp and repl; see moonbox --help)",
             quoted);
  return -1;
}

int mbxH_cli_option_arity(const char *name, size_t name_len) {
  const option_spec *spec = find_option(name, name_len);
  return spec == NULL ? -1 : spec->takes_value;
}
