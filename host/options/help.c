/* host/options/help.c -- the --help text of each moonbox command, built from the option table. */
#include <stdio.h>
#include <string.h>

#include "host/options/args.h"
#include "host/options/option_table.h"

/* Whether command takes the option (as the parser decides: args.c). */
static int command_takes(mbxH_cli_command command, const mbxH_option_spec *spec) {
  if (command == MBXH_CLI_MCP) return mbxH_option_mcp_takes(spec);
  if (spec->only == MBXH_OPT_FOR_MCP) return 0;
  if (command == MBXH_CLI_REPL) return mbxH_option_repl_takes(spec);
  if (spec->only == MBXH_OPT_FOR_BOTH) return 1;
  return spec->only == (command == MBXH_CLI_RESUME ? MBXH_OPT_FOR_RESUME : MBXH_OPT_FOR_RUN);
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
static void help_option(char *buf, size_t size, size_t *len, const mbxH_option_spec *spec) {
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
  for (size_t i = 0; i < mbxH_option_count; i++) {
    const mbxH_option_spec *spec = &mbxH_options[i];
    if (spec->help != NULL && spec->id != MBXH_OPT_EVAL && command_takes(command, spec))
      help_option(buf, sizeof buf, &len, spec);
  }
  help_add(buf, sizeof buf, &len, notes_text);
  return buf;
}
