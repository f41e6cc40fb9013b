/* host/options/args.c -- parses the moonbox command line against the option table
   (option_table.c; the values' parsers are common/units.c). */
#include "host/options/args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"
#include "host/options/option_table.h"
#include "moonbox.h"

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

/* --http-session-prefix NAME: letters, digits and '-' only, so the session id stays a plain
   HTTP token (no byte that could end the header, no pattern character a proxy's map would
   read as syntax), and short, so the id stays a bounded, fixed-length string. */
static int check_session_prefix(const char *value, const mbxH_option_spec *spec, char *msg,
                                size_t msg_size) {
  size_t len = strlen(value);
  int ok = len >= 1 && len <= MBXH_CLI_SESSION_PREFIX_MAX;
  for (size_t i = 0; ok && i < len; i++) {
    char c = value[i];
    ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
  }
  if (ok) return 0;
  char quoted[MBXU_QUOTE_MAX + 4];
  mbxU_quote(value, quoted, sizeof quoted);
  mbxU_msg(msg, msg_size, "%s: '%s' is not a name of 1 to %d letters, digits or '-' (e.g. %s)",
           spec->name, quoted, MBXH_CLI_SESSION_PREFIX_MAX, spec->example);
  return -1;
}

static int apply_option(mbxH_cli_options *opt, const mbxH_option_spec *spec, const char *value,
                        char *msg, size_t msg_size) {
  mbxH_cli_limit *limit = NULL;
  int rc = 0;
  switch (spec->id) {
  case MBXH_OPT_HELP:
  case MBXH_OPT_VERSION:
  case MBXH_OPT_JSON:
  case MBXH_OPT_DETERMINISTIC:
  case MBXH_OPT_NO_SCRIPT_MODULES:
  case MBXH_OPT_CODE_MODE:
  case MBXH_OPT_HTTP_BEHIND_PROXY:
    break; /* flags are handled by the caller */
  case MBXH_OPT_HTTP:
  case MBXH_OPT_HTTP_TOKEN_FILE:
  case MBXH_OPT_HTTP_CERT:
  case MBXH_OPT_HTTP_KEY:
  case MBXH_OPT_HTTP_ALLOW_ORIGIN:
    opt->http[spec->id - MBXH_OPT_HTTP] = value; /* checked by host/mcp/http.c */
    break;
  case MBXH_OPT_HTTP_SESSION_PREFIX:
    if (check_session_prefix(value, spec, msg, msg_size) != 0) return -1;
    opt->http[MBXH_CLI_HTTP_SESSION_PREFIX] = value;
    break;
  case MBXH_OPT_HIBERNATE_AFTER:
    if (mbxU_parse_duration(spec->name, value, &opt->hibernate_after_ms, msg, msg_size) != 0)
      return -1;
    opt->hibernate_after_set = 1;
    break;
  case MBXH_OPT_UPSTREAM:
  case MBXH_OPT_ALLOW_TOOL: {
    /* Checked where the upstreams are made (host/mcp/upstream_config.c), in order. */
    if (opt->upstream_arg_count == MBXH_CLI_MAX_UPSTREAM_ARGS) {
      mbxU_msg(msg, msg_size, "%s: at most %d --upstream and --allow-tool options", spec->name,
               MBXH_CLI_MAX_UPSTREAM_ARGS);
      return -1;
    }
    opt->upstream_args[opt->upstream_arg_count] = value;
    opt->upstream_arg_is_allow[opt->upstream_arg_count++] = spec->id == MBXH_OPT_ALLOW_TOOL;
    break;
  }
  case MBXH_OPT_DIFF:
  case MBXH_OPT_CHANGES:
    /* --diff=FILE, --changes=FILE (alone, they are flags: the caller's) */
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "%s=: empty file name (e.g. %s=changes.txt)", spec->name, spec->name);
      return -1;
    }
    if (spec->id == MBXH_OPT_DIFF) {
      opt->diff = 1;
      opt->diff_file = value;
    } else {
      opt->changes = 1;
      opt->changes_file = value;
    }
    break;
  case MBXH_OPT_DIFF_LIMIT:
    limit = &opt->diff_limit;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_EVAL:
    return set_script(opt, MBXH_CLI_SCRIPT_CODE, value, msg, msg_size);
  case MBXH_OPT_MEMORY:
    limit = &opt->memory;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_INSTRUCTIONS:
    limit = &opt->instructions;
    rc = mbxU_parse_count(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_TIMEOUT:
    limit = &opt->timeout_ms;
    rc = mbxU_parse_duration(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_OUTPUT_LIMIT:
    limit = &opt->output;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_SOURCE_LIMIT:
    limit = &opt->source;
    rc = mbxU_parse_size(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_SEED:
    limit = &opt->seed;
    rc = mbxU_parse_seed(spec->name, value, &limit->value, msg, msg_size);
    break;
  case MBXH_OPT_TIME:
    rc = mbxU_parse_epoch(spec->name, value, &opt->time, msg, msg_size);
    if (rc == 0) opt->time_set = 1;
    break;
  case MBXH_OPT_ENV: {
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
  case MBXH_OPT_PAUSE_ON:
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
  case MBXH_OPT_STDIN:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--stdin: empty file name (e.g. %s, or - for standard input)",
               spec->example);
      return -1;
    }
    opt->stdin_file = value;
    break;
  case MBXH_OPT_EXPORT_CHANGES:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--export-changes: empty directory name (e.g. %s)", spec->example);
      return -1;
    }
    opt->export_changes = value;
    break;
  case MBXH_OPT_SNAPSHOT_OUT:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--snapshot-out: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->snapshot_out = value;
    break;
  case MBXH_OPT_VALUE:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--value: empty value (give one JSON value, e.g. %s)", spec->example);
      return -1;
    }
    opt->resume_value = value;
    break;
  case MBXH_OPT_ERROR:
    opt->resume_error = value; /* an empty message is a message */
    break;
  case MBXH_OPT_POLICY:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "--policy: empty file name (e.g. %s)", spec->example);
      return -1;
    }
    opt->policy_file = value;
    break;
  case MBXH_OPT_MOUNT: {
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
  case MBXH_OPT_EXEC_UIDS:
    return parse_uid_range(value, opt, msg, msg_size);
  case MBXH_OPT_ISOLATE:
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
  case MBXH_OPT_ALLOW_EXEC:
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
  case MBXH_OPT_MODULE: {
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
  case MBXH_OPT_FILE: {
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
  case MBXH_OPT_INPUT:
  case MBXH_OPT_INPUT_FILE:
    if (value[0] == '\0') {
      mbxU_msg(msg, msg_size, "%s: empty value (e.g. %s)", spec->name, spec->example);
      return -1;
    }
    if (spec->id == MBXH_OPT_INPUT)
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
    const mbxH_option_spec *spec;
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
    spec = mbxH_option_find(arg, name_len);
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
    if (opt->command == MBXH_CLI_MCP && !mbxH_option_mcp_takes(spec)) {
      mbxU_msg(msg, msg_size,
               "%s is not an option of moonbox mcp (it takes the policy options: limits, "
               "--policy, --mount, --file, --env, --seed, --time, --deterministic, and "
               "--isolate)",
               spec->name);
      return -1;
    }
    if (opt->command != MBXH_CLI_MCP && spec->only == MBXH_OPT_FOR_MCP) {
      mbxU_msg(msg, msg_size, "%s is an option of moonbox mcp, not of %s", spec->name,
               command_name);
      return -1;
    }
    if (opt->command == MBXH_CLI_REPL && !mbxH_option_repl_takes(spec)) {
      mbxU_msg(msg, msg_size,
               "%s is not an option of moonbox repl (it takes the policy options: limits, "
               "--policy, --mount, --file, --module, --env, --seed, --time, --deterministic, "
               "--allow-exec, --isolate, and --input or --input-file for starting globals)",
               spec->name);
      return -1;
    }
    if (opt->command != MBXH_CLI_MCP && opt->command != MBXH_CLI_REPL &&
        spec->only != MBXH_OPT_FOR_BOTH &&
        spec->only != (opt->command == MBXH_CLI_RESUME ? MBXH_OPT_FOR_RESUME : MBXH_OPT_FOR_RUN)) {
      if (spec->only == MBXH_OPT_FOR_RESUME)
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
    if (!spec->takes_value || (spec->takes_value == MBXH_OPT_OPTIONAL && eq == NULL)) {
      if (eq != NULL) {
        mbxU_quote(eq + 1, quoted, sizeof quoted);
        mbxU_msg(msg, msg_size, "%s takes no value (remove '=%s')", spec->name, quoted);
        return -1;
      }
      if (spec->id == MBXH_OPT_HELP || spec->id == MBXH_OPT_VERSION) {
        opt->help_for = opt->command;
        opt->command = spec->id == MBXH_OPT_HELP ? MBXH_CLI_HELP : MBXH_CLI_VERSION;
        return 0;
      }
      /* --json and --deterministic; with --json given twice, the second is a no-op. */
      if (spec->id == MBXH_OPT_DETERMINISTIC)
        opt->deterministic = 1;
      else if (spec->id == MBXH_OPT_CHANGES)
        opt->changes = 1;
      else if (spec->id == MBXH_OPT_DIFF)
        opt->diff = 1;
      else if (spec->id == MBXH_OPT_NO_SCRIPT_MODULES)
        opt->no_script_modules = 1;
      else if (spec->id == MBXH_OPT_CODE_MODE)
        opt->code_mode = 1;
      else if (spec->id == MBXH_OPT_HTTP_BEHIND_PROXY)
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
  const mbxH_option_spec *spec = mbxH_option_find(name, name_len);
  return spec == NULL ? -1 : spec->takes_value;
}
