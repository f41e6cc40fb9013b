/* host/options/option_table.c -- every option of the moonbox command line: its name, value,
   example, the commands that take it and its --help lines. */
#include "host/options/option_table.h"

#include <stddef.h>
#include <string.h>

/* Every option, its rules and its --help text: each command's help lists the options that
   command takes (mbxH_cli_usage), so the list and the parser cannot disagree. */
const mbxH_option_spec mbxH_options[] = {
    {"-e", MBXH_OPT_EVAL, 1, "-e 'return 1 + 1'", MBXH_OPT_FOR_RUN, "CODE", NULL},
    {"--memory", MBXH_OPT_MEMORY, 1, "--memory 64M", 0, "SIZE",
     "live heap limit (default 64M; at least 256k)"},
    {"--instructions", MBXH_OPT_INSTRUCTIONS, 1, "--instructions 1e9", 0, "N",
     "VM instruction limit, e.g. 1e9 (default 0 = none: no count\n"
     "hook, the timeout stops loops; --deterministic needs one)"},
    {"--timeout", MBXH_OPT_TIMEOUT, 1, "--timeout 2s", 0, "DURATION",
     "wall-clock limit: 500ms, 2s, 1.5s, 1m (0 = unlimited; default 5s)"},
    {"--output-limit", MBXH_OPT_OUTPUT_LIMIT, 1, "--output-limit 1M", 0, "SIZE",
     "stdout + stderr limit (default 1M)"},
    {"--source-limit", MBXH_OPT_SOURCE_LIMIT, 1, "--source-limit 64k", 0, "SIZE",
     "script size limit (default 64k, at most 16M)"},
    {"--input", MBXH_OPT_INPUT, 1, "--input '{\"x\": 1}'", MBXH_OPT_FOR_RUN, "JSON",
     "a JSON object whose keys become globals"},
    {"--input-file", MBXH_OPT_INPUT_FILE, 1, "--input-file inputs.json", MBXH_OPT_FOR_RUN, "PATH",
     "the same, read from PATH (- = standard input)"},
    {"--seed", MBXH_OPT_SEED, 1, "--seed 42", 0, "N",
     "seed math.random with N (reproducible runs)"},
    {"--time", MBXH_OPT_TIME, 1, "--time 1700000000", 0, "EPOCH",
     "fix os.time/os.date at EPOCH seconds since 1970 (UTC)"},
    {"--env", MBXH_OPT_ENV, 1, "--env API_URL=https://example.com", 0, "NAME=VALUE",
     "a variable for os.getenv (repeatable; nothing else is visible)"},
    {"--deterministic", MBXH_OPT_DETERMINISTIC, 0, NULL, 0, NULL,
     "canonical pairs order, counter ids in tostring, os.clock\n"
     "counting instructions (with --seed and --time: same output\n"
     "in every run; needs --instructions)"},
    {"--pause-on", MBXH_OPT_PAUSE_ON, 1, "--pause-on tools.fetch", 0, "NAME",
     "grant NAME (e.g. tools.fetch) as an external function: the\n"
     "run stops at its first call and exits 4 (repeatable)"},
    {"--snapshot-out", MBXH_OPT_SNAPSHOT_OUT, 1, "--snapshot-out snap.bin", 0, "FILE",
     "when the run pauses, write a snapshot of it to FILE (turns\n"
     "--deterministic on: needs --instructions)"},
    {"--value", MBXH_OPT_VALUE, 1, "--value '{\"ok\": true}'", MBXH_OPT_FOR_RESUME, "JSON",
     "the paused call returns this JSON value"},
    {"--error", MBXH_OPT_ERROR, 1, "--error 'not found'", MBXH_OPT_FOR_RESUME, "MESSAGE",
     "the paused call raises this error (catchable with pcall)"},
    {"--policy", MBXH_OPT_POLICY, 1, "--policy policy.json", 0, "FILE",
     "load limits, env, seed, time and files from a JSON policy\n"
     "(docs/policy.md); the options here override its values"},
    {"--mount", MBXH_OPT_MOUNT, 1, "--mount ./data:/data", 0, "HOSTDIR:/PATH[:ro|rw|overlay]",
     "show HOSTDIR at /PATH (ro: read-only, the default; rw: writes\n"
     "reach HOSTDIR; overlay: writes stay in the sandbox's memory)\n"
     "(repeatable)"},
    {"--file", MBXH_OPT_FILE, 1, "--file /input/orders.csv=orders.csv", 0, "/PATH=HOSTFILE",
     "a read-only copy of HOSTFILE at /PATH (repeatable)"},
    {"--module", MBXH_OPT_MODULE, 1, "--module mylib.parser=parser.lua", 0, "NAME=FILE",
     "require(NAME) loads FILE's source (a registered module,\n"
     "found before package.path; repeatable)"},
    {"--no-script-modules", MBXH_OPT_NO_SCRIPT_MODULES, 0, NULL, 0, NULL,
     "do not let require, loadfile and dofile see the .lua files\n"
     "beside FILE (by default they do, read-only, as ./x.lua, the\n"
     "way lua(1) finds them from FILE's folder; io and fs never see\n"
     "that folder; off with --snapshot-out)"},
    {"--stdin", MBXH_OPT_STDIN, 1, "--stdin data.txt", MBXH_OPT_FOR_RUN, "FILE",
     "what io.stdin and io.read read (- = standard input, the\n"
     "default); read only as the script reads it, a wait counted\n"
     "against --timeout"},
    {"--isolate", MBXH_OPT_ISOLATE, 1, "--isolate process", 0, "process|none",
     "run the script in a jailed worker process (moonbox-worker:\n"
     "no files, no network, no system calls but compute) or in\n"
     "this process (none, the default; moonbox mcp defaults to\n"
     "process)"},
    {"--allow-exec", MBXH_OPT_ALLOW_EXEC, 1, "--allow-exec /usr/bin/python3", 0, "PROGRAM",
     "let proc.run start PROGRAM (an absolute path, e.g. /bin/sh) in\n"
     "the exec sandbox (bubblewrap); /bin/sh also enables os.execute\n"
     "and io.popen (repeatable; see moonbox doctor)"},
    {"--exec-uids", MBXH_OPT_EXEC_UIDS, 1, "--exec-uids 1879048192-1879113727", 0, "FIRST-LAST",
     "as root, the host uids programs run as, one per running\n"
     "program (exec.uids; default 1879048192-1879113727; set a\n"
     "range of its own for each container; see moonbox doctor)"},
    {"--json", MBXH_OPT_JSON, 0, NULL, 0, NULL,
     "print one JSON object with status, value, output and usage"},
    {"--changes", MBXH_OPT_CHANGES, MBXH_OPT_OPTIONAL, NULL, MBXH_OPT_FOR_RUN, "[=FILE]",
     "after the run, list what the script changed in overlays and\n"
     "/tmp on stderr, below a line the script cannot print (or in\n"
     "FILE; under \"changes\" with --json)"},
    {"--export-changes", MBXH_OPT_EXPORT_CHANGES, 1, "--export-changes ./changes", MBXH_OPT_FOR_RUN,
     "DIR",
     "write the changed files under DIR (a new directory), with\n"
     "the manifest DIR/.moonbox-changes.json (removals, renames)"},
    {"--diff", MBXH_OPT_DIFF, MBXH_OPT_OPTIONAL, NULL, MBXH_OPT_FOR_RUN, "[=FILE]",
     "print a unified diff of the changes on stdout, which then holds\n"
     "nothing else (the script's output goes to stderr), or in FILE"},
    {"--diff-limit", MBXH_OPT_DIFF_LIMIT, 1, "--diff-limit 4M", MBXH_OPT_FOR_RUN, "SIZE",
     "bytes of diff --diff prints (default: --output-limit); past\n"
     "it a file is named, not shown"},
    {"--upstream", MBXH_OPT_UPSTREAM, 1,
     "--upstream 'mem=npx -y @modelcontextprotocol/server-memory'", MBXH_OPT_FOR_MCP,
     "NAME=COMMAND|URL",
     "start COMMAND (split into words like a shell's, never run\n"
     "by one), or reach https://URL (http:// on loopback only), as\n"
     "an upstream MCP server whose allowed tools the guest calls\n"
     "as tools.NAME.TOOL (code mode, docs/code-mode.md; repeatable)"},
    {"--allow-tool", MBXH_OPT_ALLOW_TOOL, 1, "--allow-tool mem.read_graph", MBXH_OPT_FOR_MCP,
     "NAME.TOOL",
     "allow an upstream's tool (NAME.* for all of them; none is\n"
     "allowed unless named; repeatable)"},
    {"--code-mode", MBXH_OPT_CODE_MODE, 0, NULL, MBXH_OPT_FOR_MCP, NULL,
     "list only the meta-tools (run_lua, search_tools, ...), not\n"
     "the upstreams' tools themselves"},
    {"--http", MBXH_OPT_HTTP, 1, "--http 127.0.0.1:8080", MBXH_OPT_FOR_MCP, "HOST:PORT",
     "serve MCP's Streamable HTTP at http://HOST:PORT/mcp instead\n"
     "of stdin/stdout (port 0: any free one, printed on stderr)"},
    {"--http-token-file", MBXH_OPT_HTTP_TOKEN_FILE, 1, "--http-token-file token.txt",
     MBXH_OPT_FOR_MCP, "FILE",
     "require 'Authorization: Bearer TOKEN', TOKEN the file's\n"
     "first line (required off loopback)"},
    {"--http-cert", MBXH_OPT_HTTP_CERT, 1, "--http-cert cert.pem", MBXH_OPT_FOR_MCP, "FILE",
     "serve HTTPS with this PEM certificate (and --http-key)"},
    {"--http-key", MBXH_OPT_HTTP_KEY, 1, "--http-key key.pem", MBXH_OPT_FOR_MCP, "FILE",
     "the PEM private key of --http-cert"},
    {"--http-allow-origin", MBXH_OPT_HTTP_ALLOW_ORIGIN, 1,
     "--http-allow-origin https://app.example", MBXH_OPT_FOR_MCP, "ORIGIN",
     "also accept requests whose Origin is ORIGIN (by default\nonly loopback ones)"},
    {"--http-session-prefix", MBXH_OPT_HTTP_SESSION_PREFIX, 1, "--http-session-prefix a",
     MBXH_OPT_FOR_MCP, "NAME",
     "start every session id this server mints with NAME- (1 to\n"
     "16 letters, digits or '-'), so that a proxy in front of\n"
     "several servers routes each session to the one that holds\n"
     "it (docs/cli.md, Scale-out)"},
    {"--http-behind-proxy", MBXH_OPT_HTTP_BEHIND_PROXY, 0, NULL, MBXH_OPT_FOR_MCP, NULL,
     "off loopback without --http-cert: a TLS proxy in front of\nmoonbox terminates HTTPS"},
    {"--hibernate-after", MBXH_OPT_HIBERNATE_AFTER, 1, "--hibernate-after 5m", MBXH_OPT_FOR_MCP,
     "DURATION",
     "a session idle this long hibernates: its heap is stored\n"
     "compressed and its memory given back until its next call\n"
     "wakes it, state intact (default 30s with --isolate none;\n"
     "0 = never; sessions in worker processes cannot hibernate)"},
    {"--help", MBXH_OPT_HELP, 0, NULL, 0, NULL, "show this help (-h)"},
    {"-h", MBXH_OPT_HELP, 0, NULL, 0, NULL, NULL},
    {"--version", MBXH_OPT_VERSION, 0, NULL, 0, NULL, "show the version (-v)"},
    {"-v", MBXH_OPT_VERSION, 0, NULL, 0, NULL, NULL},
};

const size_t mbxH_option_count = sizeof mbxH_options / sizeof mbxH_options[0];

const mbxH_option_spec *mbxH_option_find(const char *arg, size_t name_len) {
  size_t i;
  for (i = 0; i < mbxH_option_count; i++) {
    const char *name = mbxH_options[i].name;
    if (strlen(name) == name_len && strncmp(name, arg, name_len) == 0) return &mbxH_options[i];
  }
  return NULL;
}

/* moonbox mcp takes the policy options only: what a run may use. The script, its inputs and
   the output format come from each tools/call; pauses and snapshots have no MCP form. */
int mbxH_option_mcp_takes(const mbxH_option_spec *spec) {
  switch (spec->id) {
  case MBXH_OPT_EVAL:
  case MBXH_OPT_INPUT:
  case MBXH_OPT_INPUT_FILE:
  case MBXH_OPT_JSON:
  case MBXH_OPT_PAUSE_ON:
  case MBXH_OPT_SNAPSHOT_OUT:
  case MBXH_OPT_VALUE:
  case MBXH_OPT_ERROR:
  case MBXH_OPT_NO_SCRIPT_MODULES:
  case MBXH_OPT_STDIN: /* the server's stdin is the protocol */
  case MBXH_OPT_CHANGES:
  case MBXH_OPT_EXPORT_CHANGES:
  case MBXH_OPT_DIFF:
  case MBXH_OPT_DIFF_LIMIT: /* a call's changes come back in its result */
    return 0;
  default:
    return 1;
  }
}

/* moonbox repl takes the policy options and the starting globals (--input, --input-file):
   the rest of what mcp refuses too (no script, views, pauses; stdin is the prompt's). */
int mbxH_option_repl_takes(const mbxH_option_spec *spec) {
  return spec->id == MBXH_OPT_INPUT || spec->id == MBXH_OPT_INPUT_FILE ||
         mbxH_option_mcp_takes(spec);
}
