/* host/mcp/upstream_config.c -- what the operator writes about upstream MCP servers: the
   policy file's "upstreams" object, --upstream NAME=COMMAND (or NAME=URL) and --allow-tool
   NAME.TOOL (upstream.h, docs/code-mode.md). Describe and validate only: nothing is started
   here. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/units.h"
#include "host/mcp/upstream.h"
#include "host/mcp/upstream_http.h"

static void free_list(char **list) {
  for (size_t i = 0; list && list[i]; i++)
    free(list[i]);
  free(list);
}

void mbxH_upstream_config_free(mbxH_upstream_config *c) {
  if (c == NULL) return;
  free_list(c->argv);
  free_list(c->env);
  free_list(c->tools);
  free_list(c->headers);
  free(c->cwd);
  free(c->url);
  memset(c, 0, sizeof *c);
}

int mbxH_upstream_allows(const mbxH_upstream_config *c, const char *tool) {
  for (size_t i = 0; c->tools && c->tools[i]; i++)
    if (strcmp(c->tools[i], "*") == 0 || strcmp(c->tools[i], tool) == 0) return 1;
  return 0;
}

/* Appends a copy of s (n bytes) to a NULL-terminated list. -1 when out of memory. */
static int list_add(char ***list, const char *s, size_t n) {
  size_t count = 0;
  while (*list && (*list)[count])
    count++;
  char **grown = realloc(*list, (count + 2) * sizeof *grown);
  if (grown == NULL) return -1;
  *list = grown;
  grown[count] = strndup(s, n);
  grown[count + 1] = NULL;
  return grown[count] ? 0 : -1;
}

/* Append "NAME<sep>VALUE" (an env entry, a header line) to the NULL-terminated list. */
static int list_add_pair(char ***list, const char *name, const char *sep, const json_t *value) {
  size_t len = strlen(name) + strlen(sep) + json_string_length(value);
  char *entry = malloc(len + 1);
  if (entry == NULL) return -1;
  snprintf(entry, len + 1, "%s%s%s", name, sep, json_string_value(value));
  int rc = list_add(list, entry, len);
  free(entry);
  return rc;
}

/* An upstream's name is a Lua identifier (tools.NAME), at most MBXH_UPSTREAM_NAME_MAX bytes. */
static int name_ok(const char *s, size_t n) {
  if (n == 0 || n > MBXH_UPSTREAM_NAME_MAX || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))) return 0;
  }
  static const char *const reserved[] = {"and",   "break", "do",       "else", "elseif", "end",
                                         "false", "for",   "function", "goto", "if",     "in",
                                         "local", "nil",   "not",      "or",   "repeat", "return",
                                         "then",  "true",  "until",    "while"};
  for (size_t i = 0; i < sizeof reserved / sizeof *reserved; i++)
    if (strlen(reserved[i]) == n && memcmp(reserved[i], s, n) == 0) return 0;
  return 1;
}

/* A new entry named name (n bytes) in list: -1 with msg for a bad name, a duplicate, or too
   many. option is how the door spells the setting, for the message. */
static mbxH_upstream_config *new_entry(const char *option, const char *name, size_t n,
                                       mbxH_upstream_config *list, size_t *count, char *msg,
                                       size_t msg_size) {
  char q[64];
  char *copy = strndup(name, n);
  mbxU_quote(copy ? copy : "", q, sizeof q);
  free(copy);
  if (!name_ok(name, n)) {
    mbxU_msg(msg, msg_size,
             "%s: upstream name '%s' must be a Lua identifier of at most %d bytes (the guest "
             "calls tools.NAME.TOOL)",
             option, q, MBXH_UPSTREAM_NAME_MAX);
    return NULL;
  }
  for (size_t i = 0; i < *count; i++)
    if (strlen(list[i].name) == n && memcmp(list[i].name, name, n) == 0) {
      mbxU_msg(msg, msg_size, "%s: upstream '%s' is given twice", option, q);
      return NULL;
    }
  if (*count >= MBXH_UPSTREAM_MAX) {
    mbxU_msg(msg, msg_size, "%s: at most %d upstreams", option, MBXH_UPSTREAM_MAX);
    return NULL;
  }
  mbxH_upstream_config *c = &list[(*count)++];
  memset(c, 0, sizeof *c);
  memcpy(c->name, name, n);
  c->name[n] = '\0';
  c->timeout_ms = MBXH_UPSTREAM_TIMEOUT_MS;
  c->max_result = MBXH_UPSTREAM_MAX_RESULT;
  return c;
}

/* The last entry is dropped (a failed parse leaves list as it was). */
static int drop_last(mbxH_upstream_config *list, size_t *count) {
  mbxH_upstream_config_free(&list[--*count]);
  return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* --upstream NAME=COMMAND ARGS...                                                           */

/* Shell-like words without a shell: blanks separate; '...' keeps everything; "..." keeps
   everything but \" \\ \$ \`; a \ outside quotes keeps the next byte. No expansion of any
   kind ($VAR, ~, globs): what is written is what the program gets. */
static int split_words(const char *s, char ***out, char *msg, size_t msg_size) {
  size_t n = strlen(s);
  char *word = malloc(n + 1);
  if (word == NULL) return -1;
  size_t len = 0;
  int in_word = 0;
  for (size_t i = 0; i <= n; i++) {
    char c = s[i];
    if (c == '\0' || c == ' ' || c == '\t' || c == '\n') {
      if (in_word && list_add(out, word, len) != 0) {
        free(word);
        return -1;
      }
      in_word = 0, len = 0;
      continue;
    }
    in_word = 1;
    if (c == '\'') {
      const char *end = strchr(s + i + 1, '\'');
      if (end == NULL) {
        mbxU_msg(msg, msg_size, "--upstream: a ' is not closed");
        free(word);
        return -1;
      }
      memcpy(word + len, s + i + 1, (size_t)(end - s - i - 1));
      len += (size_t)(end - s - i - 1);
      i = (size_t)(end - s);
    } else if (c == '"') {
      for (i++; i < n && s[i] != '"'; i++) {
        if (s[i] == '\\' && i + 1 < n && strchr("\"\\$`", s[i + 1])) i++;
        word[len++] = s[i];
      }
      if (i >= n) {
        mbxU_msg(msg, msg_size, "--upstream: a \" is not closed");
        free(word);
        return -1;
      }
    } else if (c == '\\' && i + 1 < n) {
      word[len++] = s[++i];
    } else {
      word[len++] = c;
    }
  }
  free(word);
  return 0;
}

int mbxH_upstream_config_flag(const char *value, mbxH_upstream_config *list, size_t *count,
                              char *msg, size_t msg_size) {
  const char *eq = strchr(value, '=');
  if (eq == NULL) {
    mbxU_msg(msg, msg_size,
             "--upstream: expected NAME=COMMAND, e.g. --upstream 'mem=npx -y "
             "@modelcontextprotocol/server-memory'");
    return -1;
  }
  mbxH_upstream_config *c =
      new_entry("--upstream", value, (size_t)(eq - value), list, count, msg, msg_size);
  if (c == NULL) return -1;
  const char *rest = eq + 1 + strspn(eq + 1, " \t");
  if (strncmp(rest, "http://", 7) == 0 || strncmp(rest, "https://", 8) == 0) {
    /* a Streamable HTTP upstream: the URL alone (headers come from the policy file) */
    size_t len = strcspn(rest, " \t\n");
    char why[200];
    if (rest[len + strspn(rest + len, " \t\n")] != '\0') {
      mbxU_msg(msg, msg_size,
               "--upstream %s: a URL upstream takes nothing after its URL (give headers in the "
               "policy file's upstreams.%s.headers)",
               c->name, c->name);
      return drop_last(list, count);
    }
    c->url = strndup(rest, len);
    if (c->url == NULL) return drop_last(list, count);
    if (mbxH_upstream_url_check(c->url, why, sizeof why) != 0) {
      mbxU_msg(msg, msg_size, "--upstream %s: %s", c->name, why);
      return drop_last(list, count);
    }
    return 0;
  }
  if (split_words(eq + 1, &c->argv, msg, msg_size) != 0) {
    if (msg[0] == '\0') mbxU_msg(msg, msg_size, "--upstream: out of memory");
    return drop_last(list, count);
  }
  if (c->argv == NULL) {
    mbxU_msg(msg, msg_size, "--upstream %s: no command after '='", c->name);
    return drop_last(list, count);
  }
  return 0;
}

int mbxH_upstream_allow_flag(const char *value, mbxH_upstream_config *list, size_t count, char *msg,
                             size_t msg_size) {
  const char *dot = strchr(value, '.');
  char q[64];
  mbxU_quote(value, q, sizeof q);
  if (dot == NULL || dot[1] == '\0') {
    mbxU_msg(msg, msg_size,
             "--allow-tool: expected NAME.TOOL (or NAME.* for every tool of NAME), not '%s'", q);
    return -1;
  }
  for (size_t i = 0; i < count; i++)
    if (strlen(list[i].name) == (size_t)(dot - value) &&
        memcmp(list[i].name, value, (size_t)(dot - value)) == 0)
      return list_add(&list[i].tools, dot + 1, strlen(dot + 1)) == 0 ? 0 : -1;
  mbxU_msg(msg, msg_size, "--allow-tool %s: no upstream of that name (give it with --upstream)", q);
  return -1;
}

/* ---------------------------------------------------------------------------------------- */
/* The policy file's "upstreams"                                                             */

/* A size or duration as docs/vocabulary.md writes them: an integer, or a string with a unit. */
static int json_amount(const json_t *v, const char *key, int duration, uint64_t *out, char *msg,
                       size_t msg_size) {
  if (json_is_integer(v) && json_integer_value(v) > 0) {
    *out = (uint64_t)json_integer_value(v);
    return 0;
  }
  if (json_is_string(v))
    return duration ? mbxU_parse_duration(key, json_string_value(v), out, msg, msg_size)
                    : mbxU_parse_size(key, json_string_value(v), out, msg, msg_size);
  mbxU_msg(msg, msg_size, "%s: expected %s", key,
           duration ? "a duration such as \"30s\" (or milliseconds)"
                    : "a size such as \"1M\" (or bytes)");
  return -1;
}

/* A JSON array of strings into a NULL-terminated list. */
static int json_strings(const json_t *v, const char *key, char ***out, char *msg, size_t msg_size) {
  size_t i;
  const json_t *s;
  if (!json_is_array(v)) {
    mbxU_msg(msg, msg_size, "%s: expected an array of strings", key);
    return -1;
  }
  json_array_foreach(v, i, s) {
    if (!json_is_string(s) || strlen(json_string_value(s)) != json_string_length(s)) {
      mbxU_msg(msg, msg_size, "%s[%zu]: expected a string without NUL bytes", key, i);
      return -1;
    }
    if (list_add(out, json_string_value(s), json_string_length(s)) != 0) return -1;
  }
  return 0;
}

static int load_url(mbxH_upstream_config *c, const json_t *obj, char *msg, size_t msg_size);
static int load_common(mbxH_upstream_config *c, const json_t *obj, const char *base_dir, char *msg,
                       size_t msg_size);

static int load_one(mbxH_upstream_config *c, const json_t *obj, const char *base_dir, char *msg,
                    size_t msg_size) {
  static const char *const keys[] = {"command", "args",  "env",     "cwd",        "url",
                                     "headers", "tools", "timeout", "max_result", NULL};
  const char *k;
  const json_t *v;
  if (!json_is_object(obj)) {
    mbxU_msg(msg, msg_size,
             "upstreams.%s: expected an object {command, args, env, cwd | url, headers; tools, "
             "timeout, max_result}",
             c->name);
    return -1;
  }
  json_object_foreach((json_t *)obj, k, v) {
    int known = 0;
    for (size_t i = 0; keys[i]; i++)
      known = known || strcmp(keys[i], k) == 0;
    if (!known) {
      char q[64];
      mbxU_quote(k, q, sizeof q);
      mbxU_msg(msg, msg_size,
               "upstreams.%s.%s: unknown key (expected one of: command, args, env, cwd, url, "
               "headers, tools, timeout, max_result)",
               c->name, q);
      return -1;
    }
  }
  const json_t *command = json_object_get(obj, "command");
  if (json_object_get(obj, "url")) {
    if (command) {
      mbxU_msg(msg, msg_size,
               "upstreams.%s.command: give either command (a program over stdio) or url (a "
               "Streamable HTTP server), not both",
               c->name);
      return -1;
    }
    return load_url(c, obj, msg, msg_size);
  }
  if ((v = json_object_get(obj, "headers"))) {
    mbxU_msg(msg, msg_size,
             "upstreams.%s.headers: only for a url upstream (this one has a command)", c->name);
    return -1;
  }
  if (!json_is_string(command) || json_string_length(command) == 0 ||
      strlen(json_string_value(command)) != json_string_length(command)) {
    mbxU_msg(msg, msg_size,
             "upstreams.%s.command: expected the program to start (a string; no "
             "shell runs it), or a url",
             c->name);
    return -1;
  }
  if (list_add(&c->argv, json_string_value(command), json_string_length(command)) != 0) return -1;
  return load_common(c, obj, base_dir, msg, msg_size);
}

/* The keys of every upstream: the allow-list, the timeout, the reply's bytes. */
static int load_limits(mbxH_upstream_config *c, const json_t *obj, char *msg, size_t msg_size) {
  char key[128];
  const json_t *v;
  snprintf(key, sizeof key, "upstreams.%s.tools", c->name);
  if ((v = json_object_get(obj, "tools")) && json_strings(v, key, &c->tools, msg, msg_size) != 0)
    return -1;
  snprintf(key, sizeof key, "upstreams.%s.timeout", c->name);
  if ((v = json_object_get(obj, "timeout")) &&
      json_amount(v, key, 1, &c->timeout_ms, msg, msg_size) != 0)
    return -1;
  snprintf(key, sizeof key, "upstreams.%s.max_result", c->name);
  if ((v = json_object_get(obj, "max_result")) &&
      json_amount(v, key, 0, &c->max_result, msg, msg_size) != 0)
    return -1;
  if (c->timeout_ms == 0) {
    mbxU_msg(msg, msg_size, "upstreams.%s.timeout: must be more than 0", c->name);
    return -1;
  }
  if (c->max_result == 0 || c->max_result > MBXH_UPSTREAM_MAX_RESULT_CAP) {
    mbxU_msg(msg, msg_size, "upstreams.%s.max_result: between 1 byte and %llu MiB", c->name,
             (unsigned long long)(MBXH_UPSTREAM_MAX_RESULT_CAP >> 20));
    return -1;
  }
  return 0;
}

/* A Streamable HTTP upstream: url, headers, and the keys of every upstream. */
static int load_url(mbxH_upstream_config *c, const json_t *obj, char *msg, size_t msg_size) {
  static const char *const process_only[] = {"args", "env", "cwd", NULL};
  for (size_t i = 0; process_only[i]; i++)
    if (json_object_get(obj, process_only[i])) {
      mbxU_msg(msg, msg_size, "upstreams.%s.%s: only for a command upstream (this one has a url)",
               c->name, process_only[i]);
      return -1;
    }
  const json_t *url = json_object_get(obj, "url");
  char why[200];
  if (!json_is_string(url) || strlen(json_string_value(url)) != json_string_length(url)) {
    mbxU_msg(msg, msg_size, "upstreams.%s.url: expected the server's MCP endpoint, a string",
             c->name);
    return -1;
  }
  if (mbxH_upstream_url_check(json_string_value(url), why, sizeof why) != 0) {
    mbxU_msg(msg, msg_size, "upstreams.%s.url: %s", c->name, why);
    return -1;
  }
  if ((c->url = strdup(json_string_value(url))) == NULL) return -1;
  const json_t *headers = json_object_get(obj, "headers");
  if (headers && !json_is_object(headers)) {
    mbxU_msg(msg, msg_size, "upstreams.%s.headers: expected an object {NAME: VALUE}", c->name);
    return -1;
  }
  if (json_object_size(headers) > MBXH_HTTP_MAX_HEADERS) {
    mbxU_msg(msg, msg_size, "upstreams.%s.headers: at most %d", c->name, MBXH_HTTP_MAX_HEADERS);
    return -1;
  }
  const char *name;
  const json_t *val;
  json_object_foreach((json_t *)headers, name, val) {
    char q[64];
    mbxU_quote(name, q, sizeof q);
    if (!json_is_string(val) || strlen(json_string_value(val)) != json_string_length(val)) {
      mbxU_msg(msg, msg_size, "upstreams.%s.headers.%s: expected a string", c->name, q);
      return -1;
    }
    if (mbxH_upstream_header_check(name, json_string_value(val), why, sizeof why) != 0) {
      mbxU_msg(msg, msg_size, "upstreams.%s.headers.%s: %s", c->name, q, why);
      return -1;
    }
    if (list_add_pair(&c->headers, name, ": ", val) != 0) return -1;
  }
  return load_limits(c, obj, msg, msg_size);
}

/* A command upstream's args, env and cwd, then the keys of every upstream. */
static int load_common(mbxH_upstream_config *c, const json_t *obj, const char *base_dir, char *msg,
                       size_t msg_size) {
  char key[128];
  const json_t *v;
  snprintf(key, sizeof key, "upstreams.%s.args", c->name);
  if ((v = json_object_get(obj, "args")) && json_strings(v, key, &c->argv, msg, msg_size) != 0)
    return -1;
  if ((v = json_object_get(obj, "env"))) {
    if (!json_is_object(v)) {
      mbxU_msg(msg, msg_size, "upstreams.%s.env: expected an object {NAME: VALUE}", c->name);
      return -1;
    }
    const char *name;
    const json_t *val;
    json_object_foreach((json_t *)v, name, val) {
      if (!json_is_string(val) || name[0] == '\0' || strchr(name, '=') ||
          strlen(json_string_value(val)) != json_string_length(val)) {
        mbxU_msg(msg, msg_size, "upstreams.%s.env: each NAME (no '=') maps to a string", c->name);
        return -1;
      }
      if (list_add_pair(&c->env, name, "=", val) != 0) return -1;
    }
  }
  if ((v = json_object_get(obj, "cwd"))) {
    if (!json_is_string(v) || json_string_length(v) == 0) {
      mbxU_msg(msg, msg_size, "upstreams.%s.cwd: expected a host folder", c->name);
      return -1;
    }
    const char *dir = json_string_value(v);
    size_t len = strlen(dir) + (base_dir ? strlen(base_dir) : 0) + 2;
    c->cwd = malloc(len);
    if (c->cwd == NULL) return -1;
    if (dir[0] == '/' || base_dir == NULL)
      snprintf(c->cwd, len, "%s", dir);
    else
      snprintf(c->cwd, len, "%s/%s", base_dir, dir);
  }
  return load_limits(c, obj, msg, msg_size);
}

int mbxH_upstream_config_json(const json_t *json, const char *base_dir, mbxH_upstream_config *list,
                              size_t *count, char *msg, size_t msg_size) {
  const char *name;
  const json_t *v;
  if (!json_is_object(json)) {
    mbxU_msg(msg, msg_size, "upstreams: expected an object {NAME: {command, args, ...}}");
    return -1;
  }
  json_object_foreach((json_t *)json, name, v) {
    mbxH_upstream_config *c =
        new_entry("upstreams", name, strlen(name), list, count, msg, msg_size);
    if (c == NULL) return -1;
    msg[0] = '\0';
    if (load_one(c, v, base_dir, msg, msg_size) != 0) {
      if (msg[0] == '\0') mbxU_msg(msg, msg_size, "upstreams.%s: out of memory", c->name);
      return drop_last(list, count);
    }
  }
  return 0;
}
