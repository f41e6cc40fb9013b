/* host/policy_json.c -- mbx_policy_load_json: a policy's settings from one JSON object
   (jansson, private to the library), checked whole into a copy before the policy changes. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "capabilities/policy.h"
#include "common/error.h"
#include "common/units.h"
#include "include/moonbox.h"

/* A refusal: the message names the key path ("fs.mounts[1].mode") and what was expected. */
typedef struct loader {
  char msg[256];
  mbx_status status;
  const char *base_dir;
} loader;

static int refuse(loader *ld, mbx_status s, const char *key, const char *fmt, ...) {
  char what[220];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  snprintf(ld->msg, sizeof ld->msg, "%s: %s", key, what);
  ld->status = s;
  return -1;
}

/* How a value reads in a message: "wr" (quoted, shortened), 5, true, null, an object. */
static void describe(const json_t *v, char *buf, size_t size) {
  switch (json_typeof(v)) {
  case JSON_STRING: {
    const char *s = json_string_value(v);
    size_t n = json_string_length(v);
    snprintf(buf, size, "\"%.40s%s\"", s, n > 40 ? "..." : "");
    for (char *p = buf; *p; p++)
      if ((unsigned char)*p < 0x20) *p = '?';
    break;
  }
  case JSON_INTEGER:
    snprintf(buf, size, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    break;
  case JSON_REAL:
    snprintf(buf, size, "%g", json_real_value(v));
    break;
  case JSON_TRUE:
    snprintf(buf, size, "true");
    break;
  case JSON_FALSE:
    snprintf(buf, size, "false");
    break;
  case JSON_NULL:
    snprintf(buf, size, "null");
    break;
  case JSON_OBJECT:
    snprintf(buf, size, "an object");
    break;
  case JSON_ARRAY:
    snprintf(buf, size, "an array");
    break;
  }
}

static int expected(loader *ld, const char *key, const char *what, const json_t *got) {
  char g[64];
  describe(got, g, sizeof g);
  return refuse(ld, MBX_INVALID_ARGUMENT, key, "expected %s, got %s", what, g);
}

/* Keys outside `allowed` (NULL-terminated) are refused, naming the ones that are valid. */
static int known_keys(loader *ld, const char *prefix, const json_t *obj,
                      const char *const *allowed) {
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)obj, k, v) {
    int ok = 0;
    for (size_t i = 0; allowed[i]; i++)
      ok |= strcmp(k, allowed[i]) == 0;
    if (ok) continue;
    char list[160] = "", key[200];
    for (size_t i = 0; allowed[i]; i++)
      snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", allowed[i]);
    snprintf(key, sizeof key, "%s%s%.60s", prefix, *prefix ? "." : "", k);
    return refuse(ld, MBX_INVALID_ARGUMENT, key, "unknown key (expected one of: %s)", list);
  }
  return 0;
}

/* A value of a limit key, as docs/vocabulary.md writes it: an integer (bytes, a count, or
   milliseconds), or a string parsed by common/units.c ("64M", "1e9", "2s"). */
typedef enum value_kind { KIND_SIZE, KIND_COUNT, KIND_DURATION } value_kind;

static int limit_value(loader *ld, const char *key, const json_t *v, value_kind kind,
                       uint64_t *out) {
  static const char *const what[] = {
      [KIND_SIZE] = "a size (bytes, or a string like \"64M\")",
      [KIND_COUNT] = "a whole number >= 0 (or a string like \"1e9\")",
      [KIND_DURATION] = "a duration (milliseconds, or a string like \"2s\" or \"500ms\")"};
  if (json_is_integer(v)) {
    if (json_integer_value(v) < 0) return expected(ld, key, what[kind], v);
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
    return expected(ld, key, what[kind], v);
  char msg[sizeof ld->msg];
  int rc = kind == KIND_SIZE ? mbxU_parse_size(key, json_string_value(v), out, msg, sizeof msg)
           : kind == KIND_COUNT
               ? mbxU_parse_count(key, json_string_value(v), out, msg, sizeof msg)
               : mbxU_parse_duration(key, json_string_value(v), out, msg, sizeof msg);
  if (rc == 0) return 0;
  /* The parser's message starts with the key already. */
  memcpy(ld->msg, msg, sizeof msg);
  ld->status = MBX_INVALID_ARGUMENT;
  return -1;
}

/* A setter's refusal, under the key it came from ("mbx_policy_mount: " dropped). */
static int setter(loader *ld, const char *key, int r, const char *why) {
  if (r == 0) return 0;
  if (r == MBXC_POLICY_NO_MEMORY) return refuse(ld, MBX_NO_MEMORY, key, "out of memory");
  const char *colon = strncmp(why, "mbx_", 4) == 0 ? strstr(why, ": ") : NULL;
  return refuse(ld, r == MBXC_POLICY_UNSUPPORTED ? MBX_UNSUPPORTED : MBX_INVALID_ARGUMENT, key,
                "%s", colon ? colon + 2 : why);
}

static int limit(loader *ld, mbx_policy *p, const char *key, mbx_limit which, uint64_t value) {
  char why[200];
  if (mbxC_policy_set_limit(p, which, value, why, sizeof why) == 0) return 0;
  return refuse(ld, MBX_INVALID_ARGUMENT, key, "%s", why);
}

/* One limit key of an object: its member name, the full key for messages, the limit it sets,
   the kind of value it takes, and the older spelling it also accepts (NULL: none). */
typedef struct limit_spec {
  const char *name, *key;
  mbx_limit which;
  value_kind kind;
  const char *alias, *alias_key;
} limit_spec;

/* Set every limit of specs that obj has, each validated by its setter. */
static int load_limit_specs(loader *ld, mbx_policy *p, const json_t *obj, const limit_spec *specs,
                            size_t count) {
  for (size_t i = 0; i < count; i++) {
    json_t *v = json_object_get(obj, specs[i].name);
    const char *key = specs[i].key;
    json_t *old = specs[i].alias ? json_object_get(obj, specs[i].alias) : NULL;
    uint64_t n;
    if (v != NULL && old != NULL)
      return refuse(ld, MBX_INVALID_ARGUMENT, key, "given twice (as %s and as %s); keep %s",
                    specs[i].name, specs[i].alias, specs[i].name);
    if (v == NULL && old != NULL) {
      v = old;
      key = specs[i].alias_key;
    }
    if (v == NULL) continue;
    if (limit_value(ld, key, v, specs[i].kind, &n) != 0 ||
        limit(ld, p, key, specs[i].which, n) != 0)
      return -1;
  }
  return 0;
}

static int load_limits(loader *ld, mbx_policy *p, const json_t *obj) {
  static const char *const keys[] = {"memory", "instructions", "timeout",    "time_ms",
                                     "output", "source",       "host_calls", NULL};
  if (!json_is_object(obj)) return expected(ld, "limits", "an object", obj);
  if (known_keys(ld, "limits", obj, keys) != 0) return -1;
  static const limit_spec specs[] = {
      {"memory", "limits.memory", MBX_LIMIT_MEMORY, KIND_SIZE, NULL, NULL},
      {"instructions", "limits.instructions", MBX_LIMIT_INSTRUCTIONS, KIND_COUNT, NULL, NULL},
      {"timeout", "limits.timeout", MBX_LIMIT_TIME_MS, KIND_DURATION, "time_ms", "limits.time_ms"},
      {"output", "limits.output", MBX_LIMIT_OUTPUT, KIND_SIZE, NULL, NULL},
      {"source", "limits.source", MBX_LIMIT_SOURCE, KIND_SIZE, NULL, NULL},
      {"host_calls", "limits.host_calls", MBX_LIMIT_HOST_CALLS, KIND_COUNT, NULL, NULL}};
  return load_limit_specs(ld, p, obj, specs, sizeof specs / sizeof *specs);
}

static int load_env(loader *ld, mbx_policy *p, const json_t *obj) {
  if (!json_is_object(obj)) return expected(ld, "env", "an object of strings", obj);
  const char *k;
  json_t *v;
  json_object_foreach((json_t *)obj, k, v) {
    char key[300], why[200];
    snprintf(key, sizeof key, "env.%.200s", k);
    if (!json_is_string(v)) return expected(ld, key, "a string", v);
    if (strlen(json_string_value(v)) != json_string_length(v))
      return refuse(ld, MBX_INVALID_ARGUMENT, key, "the value contains a NUL byte");
    if (setter(ld, key, mbxC_policy_set_env(p, k, json_string_value(v), why, sizeof why), why))
      return -1;
  }
  return 0;
}

/* A host path from the policy: relative ones are taken from the policy file's directory. */
static void host_path(const loader *ld, const char *given, char *out, size_t size) {
  if (given[0] == '/' || ld->base_dir == NULL || ld->base_dir[0] == '\0')
    snprintf(out, size, "%s", given);
  else
    snprintf(out, size, "%s/%s", ld->base_dir, given);
}

static int string_key(loader *ld, const char *key, const json_t *v, const char **out) {
  if (!json_is_string(v)) return expected(ld, key, "a string", v);
  if (strlen(json_string_value(v)) != json_string_length(v))
    return refuse(ld, MBX_INVALID_ARGUMENT, key, "the string contains a NUL byte");
  *out = json_string_value(v);
  return 0;
}

static int load_mounts(loader *ld, mbx_policy *p, const json_t *arr) {
  static const char *const keys[] = {"path", "host", "mode", NULL};
  if (!json_is_array(arr)) return expected(ld, "fs.mounts", "an array", arr);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *m = json_array_get(arr, i);
    char base[64], key[96], why[400], host[4096];
    snprintf(base, sizeof base, "fs.mounts[%zu]", i);
    if (!json_is_object(m)) return expected(ld, base, "an object {path, host, mode}", m);
    if (known_keys(ld, base, m, keys) != 0) return -1;
    const char *path = NULL, *dir = NULL, *mode_text = "ro";
    json_t *pv = json_object_get(m, "path"), *hv = json_object_get(m, "host"),
           *mv = json_object_get(m, "mode");
    snprintf(key, sizeof key, "%s.path", base);
    if (pv == NULL) return refuse(ld, MBX_INVALID_ARGUMENT, key, "missing (e.g. \"/data\")");
    if (string_key(ld, key, pv, &path) != 0) return -1;
    snprintf(key, sizeof key, "%s.host", base);
    if (hv == NULL) return refuse(ld, MBX_INVALID_ARGUMENT, key, "missing (e.g. \"./data\")");
    if (string_key(ld, key, hv, &dir) != 0) return -1;
    snprintf(key, sizeof key, "%s.mode", base);
    int mode;
    if (mv && !json_is_string(mv)) return expected(ld, key, "\"ro\", \"rw\" or \"overlay\"", mv);
    if (mv) mode_text = json_string_value(mv);
    if (strcmp(mode_text, "ro") == 0 && (!mv || json_string_length(mv) == 2))
      mode = MBXC_MOUNT_RO;
    else if (strcmp(mode_text, "rw") == 0 && json_string_length(mv) == 2)
      mode = MBXC_MOUNT_RW;
    else if (strcmp(mode_text, "overlay") == 0 && json_string_length(mv) == 7)
      mode = MBXC_MOUNT_OVERLAY;
    else
      return expected(ld, key, "\"ro\", \"rw\" or \"overlay\"", mv);
    host_path(ld, dir, host, sizeof host);
    int r = mbxC_policy_mount(p, path, json_string_length(pv), host, mode, why, sizeof why);
    snprintf(key, sizeof key, "%s.%s", base,
             r == MBXC_POLICY_UNSUPPORTED ? "mode"
             : strstr(why, "host")        ? "host"
                                          : "path");
    if (setter(ld, key, r, why) != 0) return -1;
  }
  return 0;
}

/* The bytes of a host file for fs.files[i].host_file: a regular file, within the cap. */
static int read_host_file(loader *ld, const char *key, const char *path, char **data, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  struct stat st;
  if (fd < 0) return refuse(ld, MBX_INVALID_ARGUMENT, key, "\"%.100s\": %s", path, strerror(errno));
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return refuse(ld, MBX_INVALID_ARGUMENT, key, "\"%.100s\" is not a regular file", path);
  }
  if ((uint64_t)st.st_size > MBXC_MAX_FS_FILE_BYTES) {
    close(fd);
    return refuse(ld, MBX_INVALID_ARGUMENT, key, "\"%.100s\" is larger than %llu MiB", path,
                  (unsigned long long)(MBXC_MAX_FS_FILE_BYTES >> 20));
  }
  *len = (size_t)st.st_size;
  *data = malloc(*len ? *len : 1);
  size_t got = 0;
  while (*data && got < *len) {
    ssize_t k = read(fd, *data + got, *len - got);
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(fd);
  if (*data == NULL) return refuse(ld, MBX_NO_MEMORY, key, "out of memory");
  *len = got; /* a file that shrank while it was read gives what it had */
  return 0;
}

static int load_files(loader *ld, mbx_policy *p, const json_t *arr) {
  static const char *const keys[] = {"path", "host_file", "text", NULL};
  if (!json_is_array(arr)) return expected(ld, "fs.files", "an array", arr);
  for (size_t i = 0; i < json_array_size(arr); i++) {
    json_t *f = json_array_get(arr, i);
    char base[64], key[96], why[400], host[4096];
    snprintf(base, sizeof base, "fs.files[%zu]", i);
    if (!json_is_object(f)) return expected(ld, base, "an object {path, host_file or text}", f);
    if (known_keys(ld, base, f, keys) != 0) return -1;
    json_t *pv = json_object_get(f, "path"), *hv = json_object_get(f, "host_file"),
           *tv = json_object_get(f, "text");
    const char *path = NULL, *file = NULL;
    snprintf(key, sizeof key, "%s.path", base);
    if (pv == NULL) return refuse(ld, MBX_INVALID_ARGUMENT, key, "missing (e.g. \"/input/a.csv\")");
    if (string_key(ld, key, pv, &path) != 0) return -1;
    if ((hv == NULL) == (tv == NULL))
      return refuse(ld, MBX_INVALID_ARGUMENT, base, "give exactly one of host_file and text");
    char *data = NULL;
    size_t len = 0;
    if (tv) {
      snprintf(key, sizeof key, "%s.text", base);
      if (!json_is_string(tv)) return expected(ld, key, "a string", tv);
      len = json_string_length(tv);
    } else {
      snprintf(key, sizeof key, "%s.host_file", base);
      if (string_key(ld, key, hv, &file) != 0) return -1;
      host_path(ld, file, host, sizeof host);
      if (read_host_file(ld, key, host, &data, &len) != 0) return -1;
    }
    int r = mbxC_policy_add_file(p, path, json_string_length(pv), tv ? json_string_value(tv) : data,
                                 len, why, sizeof why);
    free(data);
    snprintf(key, sizeof key, "%s.path", base);
    if (setter(ld, key, r, why) != 0) return -1;
  }
  return 0;
}

/* "modules": {"mylib.parser": "return {...}"}: registered modules (mbx_policy_add_module). */
static int load_modules(loader *ld, mbx_policy *p, const json_t *obj) {
  if (!json_is_object(obj)) return expected(ld, "modules", "an object {name: source}", obj);
  const char *name;
  json_t *src;
  json_object_foreach((json_t *)obj, name, src) {
    char key[300], why[400];
    snprintf(key, sizeof key, "modules.%.250s", name);
    if (!json_is_string(src)) return expected(ld, key, "the module's Lua source, a string", src);
    int r = mbxC_policy_add_module(p, name, strlen(name), json_string_value(src),
                                   json_string_length(src), why, sizeof why);
    if (setter(ld, key, r, why) != 0) return -1;
  }
  return 0;
}

static int load_fs(loader *ld, mbx_policy *p, const json_t *obj) {
  static const char *const keys[] = {"mounts", "files", "tmp", "quota", NULL};
  static const char *const quota_keys[] = {"bytes", "files", "open_files", NULL};
  if (!json_is_object(obj)) return expected(ld, "fs", "an object", obj);
  if (known_keys(ld, "fs", obj, keys) != 0) return -1;
  json_t *v;
  uint64_t n;
  if ((v = json_object_get(obj, "mounts")) && load_mounts(ld, p, v) != 0) return -1;
  if ((v = json_object_get(obj, "files")) && load_files(ld, p, v) != 0) return -1;
  if ((v = json_object_get(obj, "tmp")) && (limit_value(ld, "fs.tmp", v, KIND_SIZE, &n) != 0 ||
                                            limit(ld, p, "fs.tmp", MBX_LIMIT_FS_TMP, n) != 0))
    return -1;
  json_t *q = json_object_get(obj, "quota");
  if (q == NULL) return 0;
  if (!json_is_object(q)) return expected(ld, "fs.quota", "an object", q);
  if (known_keys(ld, "fs.quota", q, quota_keys) != 0) return -1;
  if ((v = json_object_get(q, "bytes")) &&
      (limit_value(ld, "fs.quota.bytes", v, KIND_SIZE, &n) != 0 ||
       limit(ld, p, "fs.quota.bytes", MBX_LIMIT_FS_BYTES, n) != 0))
    return -1;
  if ((v = json_object_get(q, "files")) &&
      (limit_value(ld, "fs.quota.files", v, KIND_COUNT, &n) != 0 ||
       limit(ld, p, "fs.quota.files", MBX_LIMIT_FS_FILES, n) != 0))
    return -1;
  if ((v = json_object_get(q, "open_files")) &&
      (limit_value(ld, "fs.quota.open_files", v, KIND_COUNT, &n) != 0 ||
       limit(ld, p, "fs.quota.open_files", MBX_LIMIT_FS_OPEN_FILES, n) != 0))
    return -1;
  return 0;
}

/* "exec": {"allow": [...], "timeout_ms", "memory", "pids", "output", "max_runs"}. */
static int load_exec(loader *ld, mbx_policy *p, const json_t *obj) {
  static const char *const keys[] = {"allow", "timeout", "timeout_ms", "memory",
                                     "pids",  "output",  "max_runs",   NULL};
  if (!json_is_object(obj)) return expected(ld, "exec", "an object", obj);
  if (known_keys(ld, "exec", obj, keys) != 0) return -1;
  json_t *allow = json_object_get(obj, "allow");
  if (allow) {
    if (!json_is_array(allow)) return expected(ld, "exec.allow", "an array of paths", allow);
    for (size_t i = 0; i < json_array_size(allow); i++) {
      char key[48], why[400];
      snprintf(key, sizeof key, "exec.allow[%zu]", i);
      const char *prog = NULL;
      if (string_key(ld, key, json_array_get(allow, i), &prog) != 0) return -1;
      int r = mbxC_exec_allow(&p->exec, prog, why, sizeof why);
      if (r == -2) return setter(ld, key, MBXC_POLICY_NO_MEMORY, why);
      if (r != 0) return refuse(ld, MBX_INVALID_ARGUMENT, key, "%s", why);
    }
  }
  static const limit_spec specs[] = {
      {"timeout", "exec.timeout", MBX_LIMIT_EXEC_TIMEOUT_MS, KIND_DURATION, "timeout_ms",
       "exec.timeout_ms"},
      {"memory", "exec.memory", MBX_LIMIT_EXEC_MEMORY, KIND_SIZE, NULL, NULL},
      {"pids", "exec.pids", MBX_LIMIT_EXEC_PIDS, KIND_COUNT, NULL, NULL},
      {"output", "exec.output", MBX_LIMIT_EXEC_OUTPUT, KIND_SIZE, NULL, NULL},
      {"max_runs", "exec.max_runs", MBX_LIMIT_EXEC_RUNS, KIND_COUNT, NULL, NULL}};
  return load_limit_specs(ld, p, obj, specs, sizeof specs / sizeof *specs);
}

static int load(loader *ld, mbx_policy *p, const json_t *root) {
  static const char *const keys[] = {"limits", "env",  "seed",    "time", "deterministic",
                                     "fs",     "exec", "modules", NULL};
  if (!json_is_object(root)) return expected(ld, "(top level)", "an object", root);
  if (known_keys(ld, "", root, keys) != 0) return -1;
  json_t *v;
  char why[200];
  if ((v = json_object_get(root, "limits")) && load_limits(ld, p, v) != 0) return -1;
  if ((v = json_object_get(root, "env")) && load_env(ld, p, v) != 0) return -1;
  if ((v = json_object_get(root, "seed"))) {
    if (json_is_null(v))
      p->seed_fixed = 0;
    else if (json_is_integer(v))
      mbxC_policy_set_seed(p, (uint64_t)json_integer_value(v));
    else
      return expected(ld, "seed", "an integer or null", v);
  }
  if ((v = json_object_get(root, "time"))) {
    if (json_is_null(v))
      p->time_fixed = 0;
    else if (!json_is_integer(v))
      return expected(ld, "time", "seconds since 1970-01-01T00:00:00Z or null", v);
    else if (setter(ld, "time", mbxC_policy_set_time(p, json_integer_value(v), why, sizeof why),
                    why) != 0)
      return -1;
  }
  if ((v = json_object_get(root, "deterministic"))) {
    if (!json_is_boolean(v)) return expected(ld, "deterministic", "true or false", v);
    mbxC_policy_set_deterministic(p, json_is_true(v));
  }
  if ((v = json_object_get(root, "fs")) && load_fs(ld, p, v) != 0) return -1;
  if ((v = json_object_get(root, "exec")) && load_exec(ld, p, v) != 0) return -1;
  if ((v = json_object_get(root, "modules")) && load_modules(ld, p, v) != 0) return -1;
  /* Named here, in the file's own words, rather than at the sandbox's creation. */
  if (mbxC_policy_needs_instructions(p))
    return refuse(ld, MBX_INVALID_ARGUMENT, "deterministic",
                  "a deterministic policy needs an instruction limit: set limits.instructions "
                  "(a count such as \"1e9\"; a deterministic run ends by its instruction count, "
                  "never by the clock)");
  return 0;
}

MBX_API mbx_status mbx_policy_load_json(mbx_policy *p, const char *text, size_t len,
                                        const char *base_dir, mbx_error *err) {
  if (p == NULL || (text == NULL && len > 0)) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT,
                   "mbx_policy_load_json: the policy and the text must not be NULL");
    return MBX_INVALID_ARGUMENT;
  }
  json_error_t jerr;
  json_t *root = json_loadb(text ? text : "", len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &jerr);
  if (root == NULL) {
    mbxU_error_set(err, MBX_INVALID_ARGUMENT, "policy JSON, line %d column %d: %s", jerr.line,
                   jerr.column, jerr.text);
    return MBX_INVALID_ARGUMENT;
  }
  /* Checked whole into a copy: a refusal halfway leaves p exactly as it was. */
  mbx_policy scratch;
  mbxC_policy_defaults(&scratch);
  if (mbxC_policy_copy_settings(&scratch, p) != 0) {
    json_decref(root);
    mbxU_error_set(err, MBX_NO_MEMORY, "mbx_policy_load_json: out of memory");
    return MBX_NO_MEMORY;
  }
  loader ld = {.status = MBX_OK, .base_dir = base_dir};
  int r = load(&ld, &scratch, root);
  json_decref(root);
  if (r != 0) {
    mbxC_policy_clear(&scratch);
    mbxU_error_set(err, ld.status, "%s", ld.msg);
    return ld.status;
  }
  mbxC_policy_take_settings(p, &scratch);
  mbxC_policy_clear(&scratch);
  return MBX_OK;
}
