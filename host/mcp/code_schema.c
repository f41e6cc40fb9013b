/* host/mcp/code_schema.c -- code mode's pure JSON work (code_tools.h): a guest's argument
   table checked and coerced by the tool's inputSchema, the Lua call signature of a tool, and a
   CallToolResult made into the guest's value or error. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host/mcp/code_tools.h"

/* Schemas nest and $ref may loop: a check or a signature goes this deep at most. */
#define MAX_DEPTH 32
/* Schema nodes one check may visit: anyOf inside anyOf tries every alternative at every level,
   so an upstream's schema could make one call's check exponential without it. */
#define MAX_STEPS 100000
/* A signature shows this many levels, and this many bytes. */
#define SIG_DEPTH 5
#define SIG_MAX 1500
/* An isError message handed to the guest is cut here (the host's error cap is 4 KiB). */
#define ERROR_TEXT_MAX 3000

int mbxH_code_is_identifier(const char *s, size_t n) {
  static const char *const keywords[] = {"and",   "break", "do",       "else", "elseif", "end",
                                         "false", "for",   "function", "goto", "if",     "in",
                                         "local", "nil",   "not",      "or",   "repeat", "return",
                                         "then",  "true",  "until",    "while"};
  if (n == 0 || (s[0] >= '0' && s[0] <= '9')) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    if (!(c == '_' || (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'))) return 0;
  }
  for (size_t i = 0; i < sizeof keywords / sizeof *keywords; i++)
    if (strlen(keywords[i]) == n && memcmp(keywords[i], s, n) == 0) return 0;
  return 1;
}

/* "#/$defs/x" in root (JSON Pointer, ~0 and ~1 unescaped), or NULL. */
static const json_t *resolve_ref(const json_t *root, const char *ref) {
  if (root == NULL || ref[0] != '#') return NULL;
  const json_t *at = root;
  const char *p = ref + 1;
  while (*p == '/' && at != NULL) {
    p++;
    char part[256];
    size_t n = 0;
    while (*p && *p != '/' && n + 1 < sizeof part) {
      if (p[0] == '~' && (p[1] == '0' || p[1] == '1')) {
        part[n++] = p[1] == '0' ? '~' : '/';
        p += 2;
      } else {
        part[n++] = *p++;
      }
    }
    part[n] = '\0';
    if (json_is_array(at)) {
      char *end;
      long i = strtol(part, &end, 10);
      at = *end == '\0' && i >= 0 ? json_array_get(at, (size_t)i) : NULL;
    } else {
      at = json_object_get(at, part);
    }
  }
  return *p == '\0' ? at : NULL;
}

/* The schema itself once its $refs are followed. */
static const json_t *deref(const json_t *root, const json_t *schema) {
  for (int i = 0; i < MAX_DEPTH && json_is_object(schema); i++) {
    const json_t *ref = json_object_get(schema, "$ref");
    if (!json_is_string(ref)) return schema;
    const json_t *to = resolve_ref(root, json_string_value(ref));
    if (to == NULL) return NULL; /* unresolvable: anything goes */
    schema = to;
  }
  return schema;
}

/* ---------------------------------------------------------------------------------------- */
/* Checking and coercing                                                                     */

typedef struct checker {
  const json_t *root;
  char *msg;
  size_t msg_size;
  long steps;
} checker;

/* The nodes of v (itself included), counted no further than limit. */
static long nodes_of(const json_t *v, long limit) {
  long n = 1;
  size_t i;
  const char *k;
  const json_t *x;
  if (json_is_array(v)) {
    json_array_foreach(v, i, x) {
      if (n > limit) break;
      n += nodes_of(x, limit - n);
    }
  } else if (json_is_object(v)) {
    json_object_foreach((json_t *)v, k, x) {
      if (n > limit) break;
      n += nodes_of(x, limit - n);
    }
  }
  return n;
}

/* A copy of v whose nodes count as steps: a schema whose alternatives make the check copy a
   large value many times runs out of steps instead of host time (steps bound the work, not
   only the schema's branches). NULL (the message set) past MAX_STEPS. */
static json_t *copy(checker *c, const json_t *v) {
  c->steps += nodes_of(v, MAX_STEPS + 1);
  if (c->steps > MAX_STEPS) {
    snprintf(c->msg, c->msg_size,
             "arguments: the tool's inputSchema is too complex to check against them (more than "
             "%d steps)",
             MAX_STEPS);
    return NULL;
  }
  return json_deep_copy(v);
}

static const char *kind_of(const json_t *v) {
  switch (json_typeof(v)) {
  case JSON_OBJECT:
    return "a table";
  case JSON_ARRAY:
    return "an array";
  case JSON_STRING:
    return "a string";
  case JSON_INTEGER:
    return "an integer";
  case JSON_REAL:
    return "a float";
  case JSON_TRUE:
  case JSON_FALSE:
    return "a boolean";
  default:
    return "nil";
  }
}

static json_t *check(checker *c, const json_t *schema, const json_t *v, const char *path,
                     int depth);

/* v as JSON type t, coerced, or NULL (no message: the caller says what was expected). */
static json_t *as_type(checker *c, const char *t, const json_t *schema, const json_t *v,
                       const char *path, int depth, int *failed_inside) {
  if (strcmp(t, "object") == 0) {
    if (json_is_array(v) && json_array_size(v) == 0) v = NULL; /* json.array{} where {} fits */
    if (v != NULL && !json_is_object(v)) return NULL;
    json_t *out = json_object();
    if (out == NULL) return NULL;
    const json_t *props = json_object_get(schema, "properties");
    const json_t *extra = json_object_get(schema, "additionalProperties");
    const char *k;
    const json_t *x;
    json_object_foreach((json_t *)v, k, x) {
      char sub[512];
      if (mbxH_code_is_identifier(k, strlen(k)))
        snprintf(sub, sizeof sub, "%s%s%s", path, path[0] ? "." : "", k);
      else
        snprintf(sub, sizeof sub, "%s[\"%.60s\"]", path, k);
      const json_t *ps = json_is_object(props) ? json_object_get(props, k) : NULL;
      if (ps == NULL && json_is_false(extra)) {
        snprintf(c->msg, c->msg_size, "%s: not a field of this tool's arguments", sub);
        *failed_inside = 1;
        json_decref(out);
        return NULL;
      }
      if (ps == NULL && json_is_object(extra)) ps = extra;
      json_t *y = ps ? check(c, ps, x, sub, depth + 1) : copy(c, x);
      if (y == NULL) {
        *failed_inside = 1;
        json_decref(out);
        return NULL;
      }
      json_object_set_new(out, k, y);
    }
    const json_t *req = json_object_get(schema, "required");
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r) {
      if (json_is_string(r) && json_object_get(out, json_string_value(r)) == NULL) {
        snprintf(c->msg, c->msg_size, "%s%s%.80s: required, missing", path, path[0] ? "." : "",
                 json_string_value(r));
        *failed_inside = 1;
        json_decref(out);
        return NULL;
      }
    }
    return out;
  }
  if (strcmp(t, "array") == 0) {
    if (json_is_object(v) && json_object_size(v) == 0) v = NULL; /* the empty Lua table */
    if (v != NULL && !json_is_array(v)) return NULL;
    json_t *out = json_array();
    const json_t *items = json_object_get(schema, "items");
    size_t i;
    const json_t *x;
    json_array_foreach(v, i, x) {
      char sub[512];
      snprintf(sub, sizeof sub, "%s[%zu]", path, i + 1); /* Lua's index */
      json_t *y = json_is_object(items) ? check(c, items, x, sub, depth + 1) : copy(c, x);
      if (y == NULL) {
        *failed_inside = 1;
        json_decref(out);
        return NULL;
      }
      json_array_append_new(out, y);
    }
    return out;
  }
  if (strcmp(t, "integer") == 0) {
    if (json_is_integer(v)) return copy(c, v);
    if (json_is_real(v)) {
      double d = json_real_value(v);
      if (d == floor(d) && d >= -9223372036854775808.0 && d < 9223372036854775808.0)
        return json_integer((json_int_t)d);
    }
    return NULL;
  }
  if (strcmp(t, "number") == 0) return json_is_number(v) ? copy(c, v) : NULL;
  if (strcmp(t, "string") == 0) return json_is_string(v) ? copy(c, v) : NULL;
  if (strcmp(t, "boolean") == 0) return json_is_boolean(v) ? copy(c, v) : NULL;
  if (strcmp(t, "null") == 0) return json_is_null(v) ? json_null() : NULL;
  return copy(c, v); /* a type we do not know: the upstream checks it */
}

static json_t *check(checker *c, const json_t *schema, const json_t *v, const char *path,
                     int depth) {
  if (depth > MAX_DEPTH) return copy(c, v);
  if (++c->steps > MAX_STEPS) {
    snprintf(c->msg, c->msg_size,
             "%s: the tool's inputSchema is too complex to check (more than %d steps)",
             path[0] ? path : "arguments", MAX_STEPS);
    return NULL;
  }
  schema = deref(c->root, schema);
  if (!json_is_object(schema)) return copy(c, v); /* true, {} or unresolvable */
  const char *alts_key[] = {"anyOf", "oneOf"};
  for (int a = 0; a < 2; a++) {
    const json_t *alts = json_object_get(schema, alts_key[a]);
    if (!json_is_array(alts) || json_array_size(alts) == 0) continue;
    size_t i;
    const json_t *s;
    char first[512] = "";
    json_array_foreach(alts, i, s) {
      json_t *y = check(c, s, v, path, depth + 1);
      if (y != NULL) return y;
      if (first[0] == '\0') snprintf(first, sizeof first, "%s", c->msg);
    }
    if (c->steps <= MAX_STEPS) snprintf(c->msg, c->msg_size, "%s", first);
    return NULL;
  }
  const json_t *all = json_object_get(schema, "allOf");
  json_t *cur = copy(c, v);
  size_t i;
  const json_t *s;
  json_array_foreach(all, i, s) {
    json_t *y = cur ? check(c, s, cur, path, depth + 1) : NULL;
    json_decref(cur);
    cur = y;
    if (cur == NULL) return NULL;
  }
  if (cur == NULL) return NULL;
  const json_t *type = json_object_get(schema, "type");
  const char *types[8];
  size_t ntypes = 0;
  if (json_is_string(type)) {
    types[ntypes++] = json_string_value(type);
  } else if (json_is_array(type)) {
    const json_t *t;
    json_array_foreach(type, i, t) if (json_is_string(t) && ntypes < 8) types[ntypes++] =
        json_string_value(t);
  } else if (json_is_object(json_object_get(schema, "properties")) && json_is_object(cur)) {
    types[ntypes++] = "object";
  }
  json_t *out = NULL;
  if (ntypes == 0) {
    out = cur;
    cur = NULL;
  }
  for (size_t k = 0; k < ntypes && out == NULL; k++) {
    int inside = 0;
    out = as_type(c, types[k], schema, cur, path, depth, &inside);
    if (out == NULL && inside) {
      json_decref(cur);
      return NULL; /* the message names the place inside */
    }
  }
  if (out == NULL) {
    char want[160] = "";
    for (size_t k = 0; k < ntypes; k++) {
      size_t n = strlen(want);
      snprintf(want + n, sizeof want - n, "%s%s", k ? " or " : "", types[k]);
    }
    const char *name = strcmp(want, "object") == 0 ? "a table (object)" : want;
    snprintf(c->msg, c->msg_size, "%s: expected %s, got %s", path[0] ? path : "arguments", name,
             kind_of(cur));
    json_decref(cur);
    return NULL;
  }
  json_decref(cur);
  const json_t *choices = json_object_get(schema, "enum");
  if (json_is_array(choices)) {
    int found = 0;
    const json_t *e;
    json_array_foreach(choices, i, e) found = found || json_equal(e, out);
    if (!found) {
      char *list = json_dumps(choices, JSON_COMPACT);
      snprintf(c->msg, c->msg_size, "%s: must be one of %.200s", path[0] ? path : "arguments",
               list ? list : "the schema's enum");
      free(list);
      json_decref(out);
      return NULL;
    }
  }
  return out;
}

json_t *mbxH_code_coerce(const json_t *root, const json_t *schema, const json_t *value, char *msg,
                         size_t msg_size) {
  checker c = {root ? root : schema, msg, msg_size, 0};
  msg[0] = '\0';
  json_t *empty = NULL;
  if (value == NULL) value = empty = json_object();
  json_t *out = check(&c, schema, value, "", 0);
  json_decref(empty);
  if (out == NULL && msg[0] == '\0') snprintf(msg, msg_size, "arguments: out of memory");
  return out;
}

/* ---------------------------------------------------------------------------------------- */
/* Signatures                                                                                */

typedef struct sbuf {
  char text[SIG_MAX + 8];
  size_t len;
  int full;
} sbuf;

static void put(sbuf *b, const char *s) {
  size_t n = strlen(s);
  if (b->full || b->len + n > SIG_MAX) {
    if (!b->full) memcpy(b->text + b->len, "...", 4), b->len += 3;
    b->full = 1;
    return;
  }
  memcpy(b->text + b->len, s, n + 1);
  b->len += n;
}

static void sig_value(sbuf *b, const json_t *root, const json_t *schema, int depth);

static void sig_fields(sbuf *b, const json_t *root, const json_t *props, int depth) {
  const char *k;
  const json_t *s;
  int first = 1;
  json_object_foreach((json_t *)props, k, s) {
    if (!first) put(b, ", ");
    first = 0;
    if (mbxH_code_is_identifier(k, strlen(k))) {
      put(b, k);
    } else {
      json_t *q = json_string(k);
      char *esc = q ? json_dumps(q, JSON_ENCODE_ANY) : NULL;
      put(b, "[");
      put(b, esc ? esc : "\"?\"");
      put(b, "]");
      free(esc);
      json_decref(q);
    }
    put(b, " = ");
    sig_value(b, root, s, depth + 1);
  }
}

static void sig_value(sbuf *b, const json_t *root, const json_t *schema, int depth) {
  schema = deref(root, schema);
  if (!json_is_object(schema) || depth > SIG_DEPTH) {
    put(b, "...");
    return;
  }
  const json_t *alts = json_object_get(schema, "anyOf");
  if (!json_is_array(alts)) alts = json_object_get(schema, "oneOf");
  if (json_is_array(alts) && json_array_size(alts) > 0) {
    size_t i;
    const json_t *s;
    json_array_foreach(alts, i, s) { /* the first that is not null */
      const json_t *d = deref(root, s);
      const json_t *t = json_is_object(d) ? json_object_get(d, "type") : NULL;
      if (!(json_is_string(t) && strcmp(json_string_value(t), "null") == 0)) {
        sig_value(b, root, s, depth);
        return;
      }
    }
  }
  const json_t *choices = json_object_get(schema, "enum");
  if (json_is_array(choices) && json_array_size(choices) > 0) {
    char *first = json_dumps(json_array_get(choices, 0), JSON_ENCODE_ANY);
    put(b, first ? first : "...");
    free(first);
    return;
  }
  const json_t *type = json_object_get(schema, "type");
  const char *t = json_is_string(type) ? json_string_value(type) : NULL;
  if (json_is_array(type)) {
    size_t i;
    const json_t *x;
    json_array_foreach(type, i, x) if (t == NULL && json_is_string(x) &&
                                       strcmp(json_string_value(x), "null") != 0) t =
        json_string_value(x);
  }
  const json_t *props = json_object_get(schema, "properties");
  if (t == NULL && json_is_object(props)) t = "object";
  if (t == NULL) {
    put(b, "...");
  } else if (strcmp(t, "object") == 0) {
    put(b, "{");
    if (json_is_object(props)) sig_fields(b, root, props, depth);
    put(b, "}");
  } else if (strcmp(t, "array") == 0) {
    put(b, "{");
    sig_value(b, root, json_object_get(schema, "items"), depth + 1);
    put(b, "}");
  } else if (strcmp(t, "string") == 0) {
    put(b, "\"...\"");
  } else if (strcmp(t, "integer") == 0) {
    put(b, "0");
  } else if (strcmp(t, "number") == 0) {
    put(b, "0.0");
  } else if (strcmp(t, "boolean") == 0) {
    put(b, "true");
  } else {
    put(b, "nil");
  }
}

char *mbxH_code_signature(const char *upstream, const char *tool, const json_t *schema) {
  sbuf *b = calloc(1, sizeof *b);
  if (b == NULL) return NULL;
  put(b, "tools.");
  put(b, upstream);
  if (mbxH_code_is_identifier(tool, strlen(tool))) {
    put(b, ".");
    put(b, tool);
  } else {
    put(b, "[\"");
    put(b, tool); /* a bound tool's name is letters, digits, '_' and '-': nothing to escape */
    put(b, "\"]");
  }
  const json_t *props = json_object_get(deref(schema, schema), "properties");
  if (json_is_object(props) && json_object_size(props) > 0) {
    put(b, "{");
    sig_fields(b, schema, props, 0);
    put(b, "}");
  } else {
    put(b, "()");
  }
  char *out = strdup(b->text);
  free(b);
  return out;
}

/* ---------------------------------------------------------------------------------------- */
/* Results                                                                                   */

/* A text block's value: its JSON when it parses, else the text as a string. */
static json_t *text_value(const json_t *text) {
  json_t *v = json_loadb(json_string_value(text), json_string_length(text), JSON_DECODE_ANY, NULL);
  return v ? v : json_deep_copy(text);
}

int mbxH_code_result(const json_t *result, char **value, char **error) {
  *value = NULL, *error = NULL;
  const json_t *content = json_object_get(result, "content");
  if (json_is_true(json_object_get(result, "isError"))) {
    char *msg = malloc(ERROR_TEXT_MAX + 1);
    if (msg == NULL) return -1;
    size_t len = 0, i;
    const json_t *blk;
    json_array_foreach(content, i, blk) {
      const json_t *text = json_object_get(blk, "text");
      if (!json_is_string(text)) continue;
      size_t n = json_string_length(text);
      if (len && len < ERROR_TEXT_MAX) msg[len++] = '\n';
      if (n > ERROR_TEXT_MAX - len) n = ERROR_TEXT_MAX - len;
      memcpy(msg + len, json_string_value(text), n);
      len += n;
    }
    if (len == 0) len = (size_t)snprintf(msg, ERROR_TEXT_MAX, "the tool failed (no message)");
    msg[len] = '\0';
    *error = msg;
    return 1;
  }
  const json_t *structured = json_object_get(result, "structuredContent");
  json_t *v = NULL;
  if (structured != NULL) {
    v = json_incref((json_t *)structured);
  } else if (json_is_array(content) && json_array_size(content) == 1 &&
             json_is_string(json_object_get(json_array_get(content, 0), "text"))) {
    v = text_value(json_object_get(json_array_get(content, 0), "text"));
  } else if (json_is_array(content) && json_array_size(content) > 0) {
    v = json_array();
    size_t i;
    const json_t *blk;
    json_array_foreach(content, i, blk) {
      const json_t *text = json_object_get(blk, "text");
      json_array_append_new(v, json_is_string(text) ? text_value(text) : json_deep_copy(blk));
    }
  } else {
    v = json_null();
  }
  *value = v ? json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY) : NULL;
  json_decref(v);
  return *value ? 0 : -1;
}
