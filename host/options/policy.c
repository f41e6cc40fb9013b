/* host/options/policy.c -- the policy of the moonbox command's options, for run, resume and fuzz. */
#include "host/options/policy.h"

#include <errno.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int compare_names(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/*
** Grants the --pause-on functions as external functions. They are granted in sorted order:
** the snapshot's policy digest covers the order of host functions, and the order of the
** options should not matter to resume.
*/
static int apply_pause_on(mbx_policy *p, const mbxH_cli_options *opt) {
  const char *names[MBXH_CLI_MAX_PAUSE];
  mbx_error err;
  int i;
  memset(&err, 0, sizeof err);
  memcpy(names, opt->pause_on, (size_t)opt->pause_count * sizeof names[0]);
  qsort(names, (size_t)opt->pause_count, sizeof names[0], compare_names);
  for (i = 0; i < opt->pause_count; i++) {
    if (mbx_policy_add_external(p, names[i], &err) != MBX_OK) {
      fprintf(stderr, "moonbox: --pause-on: %s\n", err.message);
      return -1;
    }
  }
  return 0;
}

/* Applies --seed, --deterministic, --time, --env and --pause-on; the library checks the
   values. Snapshots need deterministic mode: --snapshot-out and resume turn it on. */
static int apply_settings(mbx_policy *p, const mbxH_cli_options *opt) {
  mbx_error err;
  int i;
  memset(&err, 0, sizeof err);
  if (opt->seed.set) (void)mbx_policy_set_seed(p, opt->seed.value, &err);
  if (opt->deterministic || opt->snapshot_out != NULL || opt->command == MBXH_CLI_RESUME)
    (void)mbx_policy_set_deterministic(p, 1, &err);
  if (apply_pause_on(p, opt) != 0) return -1;
  if (opt->time_set && mbx_policy_set_time(p, opt->time, &err) != MBX_OK) {
    fprintf(stderr, "moonbox: --time: %s\n", err.message);
    return -1;
  }
  for (i = 0; i < opt->env_count; i++) {
    const char *eq = strchr(opt->env[i], '=');
    size_t name_len = (size_t)(eq - opt->env[i]);
    char *name = malloc(name_len + 1);
    mbx_status s;
    if (name == NULL) {
      fprintf(stderr, "moonbox: out of memory\n");
      return -1;
    }
    memcpy(name, opt->env[i], name_len);
    name[name_len] = '\0';
    s = mbx_policy_set_env(p, name, eq + 1, &err);
    free(name);
    if (s != MBX_OK) {
      fprintf(stderr, "moonbox: --env: %s\n", err.message);
      return -1;
    }
  }
  return 0;
}

/* Reads a whole host file (a policy or a --file): NULL with a message on stderr when it
   cannot be read, is not a regular file or is larger than max bytes. */
static char *read_host_file(const char *option, const char *path, size_t max, size_t *len) {
  FILE *f = fopen(path, "rb");
  struct stat st;
  if (f == NULL || fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode) ||
      (uint64_t)st.st_size > max) {
    fprintf(stderr, "moonbox: %s: %s: %s\n", option, path,
            f == NULL                                           ? strerror(errno)
            : (uint64_t)st.st_size > max && S_ISREG(st.st_mode) ? "the file is too large"
                                                                : "not a regular file");
    if (f) fclose(f);
    return NULL;
  }
  char *data = malloc((size_t)st.st_size + 1);
  *len = data ? fread(data, 1, (size_t)st.st_size, f) : 0;
  fclose(f);
  if (data == NULL) fprintf(stderr, "moonbox: out of memory\n");
  return data;
}

/* moonbox mcp: the file's "upstreams" are the server's (host/mcp/upstream_config.c reads
   them), not a sandbox's: the library gets the file without them. */
static int strip_upstreams(char **text, size_t *len) {
  json_error_t jerr;
  json_t *doc = json_loadb(*text, *len, 0, &jerr);
  if (!json_is_object(doc) || json_object_get(doc, "upstreams") == NULL) {
    json_decref(doc); /* the library reports what is wrong with it */
    return 0;
  }
  json_object_del(doc, "upstreams");
  char *out = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (out == NULL) {
    fprintf(stderr, "moonbox: out of memory\n");
    return -1;
  }
  free(*text);
  *text = out;
  *len = strlen(out);
  return 0;
}

/* --policy FILE: relative host paths in it are taken from the file's directory. */
static int apply_policy_file(mbx_policy *p, const mbxH_cli_options *opt) {
  if (opt->policy_file == NULL) return 0;
  size_t len;
  char *text = read_host_file("--policy", opt->policy_file, 16u << 20, &len);
  if (text == NULL) return -1;
  if (opt->command == MBXH_CLI_MCP && strip_upstreams(&text, &len) != 0) return -1;
  char *dir = strdup(opt->policy_file);
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status s = dir ? mbx_policy_load_json(p, text, len, dirname(dir), &err) : MBX_NO_MEMORY;
  free(text);
  free(dir);
  if (s != MBX_OK) {
    fprintf(stderr, "moonbox: --policy %s: %s\n", opt->policy_file,
            s == MBX_NO_MEMORY && err.message[0] == '\0' ? "out of memory" : err.message);
    return -1;
  }
  return 0;
}

/* --mount and --file; the library checks the paths. */
static int apply_files(mbx_policy *p, const mbxH_cli_options *opt) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  for (int i = 0; i < opt->mount_count; i++) {
    char host[4096], virt[1100], msg[MBXH_CLI_MSG_SIZE];
    int mode;
    if (mbxH_cli_split_mount(opt->mounts[i], host, sizeof host, virt, sizeof virt, &mode, msg,
                             sizeof msg) != 0) {
      fprintf(stderr, "moonbox: %s\n", msg);
      return -1;
    }
    if (mbx_policy_mount(p, virt, host, mode, &err) != MBX_OK) {
      fprintf(stderr, "moonbox: --mount %s: %s\n", opt->mounts[i], err.message);
      return -1;
    }
  }
  for (int i = 0; i < opt->allow_exec_count; i++)
    if (mbx_policy_allow_exec(p, opt->allow_exec[i], &err) != MBX_OK) {
      fprintf(stderr, "moonbox: --allow-exec %s: %s\n", opt->allow_exec[i], err.message);
      return -1;
    }
  for (int i = 0; i < opt->file_count; i++) {
    const char *eq = strchr(opt->files[i], '=');
    char virt[1100];
    size_t vlen = (size_t)(eq - opt->files[i]), len;
    if (vlen >= sizeof virt) vlen = sizeof virt - 1;
    memcpy(virt, opt->files[i], vlen);
    virt[vlen] = '\0';
    char *data = read_host_file("--file", eq + 1, 256u << 20, &len);
    if (data == NULL) return -1;
    mbx_status s = mbx_policy_add_file(p, virt, data, len, &err);
    free(data);
    if (s != MBX_OK) {
      fprintf(stderr, "moonbox: --file %s: %s\n", opt->files[i], err.message);
      return -1;
    }
  }
  return 0;
}

/* --module NAME=FILE, and the script's folder for require (unless --no-script-modules). */
static int apply_modules(mbx_policy *p, const mbxH_cli_options *opt) {
  mbx_error err;
  memset(&err, 0, sizeof err);
  for (int i = 0; i < opt->module_count; i++) {
    const char *eq = strchr(opt->modules[i], '=');
    size_t name_len = (size_t)(eq - opt->modules[i]), len;
    char *name = strndup(opt->modules[i], name_len);
    char *data = name ? read_host_file("--module", eq + 1, 1u << 20, &len) : NULL;
    mbx_status s = data ? mbx_policy_add_module(p, name, data, len, &err) : MBX_INVALID_ARGUMENT;
    free(data);
    free(name);
    if (s != MBX_OK) {
      if (err.message[0])
        fprintf(stderr, "moonbox: --module %s: %s\n", opt->modules[i], err.message);
      return -1;
    }
  }
  /* Not under --snapshot-out: `moonbox resume` has no script, so its policy (and the
     snapshot's identity, which covers the folder) could not be the run's. */
  if (opt->script_kind != MBXH_CLI_SCRIPT_FILE || opt->no_script_modules || opt->snapshot_out)
    return 0;
  char *dir = strdup(opt->script);
  mbx_status s = dir ? mbx_policy_set_module_dir(p, dirname(dir), &err) : MBX_NO_MEMORY;
  free(dir);
  if (s != MBX_OK) {
    fprintf(stderr, "moonbox: the folder of %s: %s\n", opt->script, err.message);
    return -1;
  }
  return 0;
}

/* Applies the limits given on the command line; the library checks the ranges. */
static int apply_limits(mbx_policy *p, const mbxH_cli_options *opt) {
  const struct {
    const char *option;
    const mbxH_cli_limit *limit;
    mbx_limit which;
  } limits[] = {
      {"--memory", &opt->memory, MBX_LIMIT_MEMORY},
      {"--instructions", &opt->instructions, MBX_LIMIT_INSTRUCTIONS},
      {"--timeout", &opt->timeout_ms, MBX_LIMIT_TIME_MS},
      {"--output-limit", &opt->output, MBX_LIMIT_OUTPUT},
      {"--source-limit", &opt->source, MBX_LIMIT_SOURCE},
  };
  size_t i;
  for (i = 0; i < sizeof limits / sizeof limits[0]; i++) {
    mbx_error err;
    if (!limits[i].limit->set) continue;
    memset(&err, 0, sizeof err);
    if (mbx_policy_set_limit_checked(p, limits[i].which, limits[i].limit->value, &err) != MBX_OK) {
      fprintf(stderr, "moonbox: %s: %s\n", limits[i].option, err.message);
      return -1;
    }
  }
  return 0;
}

/* Deterministic mode has no default instruction limit to fall back on: whether a run ends by
   the clock depends on the machine, so a deterministic run must end by counting. Named by the
   option that asked for the mode. */
static int check_deterministic(const mbx_policy *p, const mbxH_cli_options *opt) {
  int det = opt->deterministic || opt->snapshot_out != NULL || opt->command == MBXH_CLI_RESUME;
  if (!det || mbx_policy_get_limit(p, MBX_LIMIT_INSTRUCTIONS) != 0) return 0;
  const char *why = opt->deterministic ? "--deterministic"
                    : opt->snapshot_out != NULL
                        ? "--snapshot-out (snapshots are of deterministic runs)"
                        : "resume (snapshots are of deterministic runs)";
  fprintf(stderr,
          "moonbox: %s needs --instructions N (e.g. --instructions 1e9): a deterministic run "
          "ends by its instruction count, never by the clock\n",
          why);
  return -1;
}

mbx_policy *mbxH_cli_make_policy(const mbxH_cli_options *opt, int *exit_code) {
  mbx_policy *policy = mbx_policy_new();
  if (policy == NULL) {
    fprintf(stderr, "moonbox: out of memory\n");
    *exit_code = MBXH_CLI_EXIT_INTERNAL;
    return NULL;
  }
  /* The file first: the options given on the command line override its values. The limits
     go in before it too, so a deterministic file is checked with --instructions already in
     place (the library refuses a deterministic policy without an instruction limit). */
  if (apply_limits(policy, opt) != 0 || apply_policy_file(policy, opt) != 0 ||
      apply_limits(policy, opt) != 0 || apply_settings(policy, opt) != 0 ||
      check_deterministic(policy, opt) != 0 || apply_files(policy, opt) != 0 ||
      apply_modules(policy, opt) != 0) {
    mbx_policy_free(policy);
    *exit_code = MBXH_CLI_EXIT_USAGE;
    return NULL;
  }
  return policy;
}
