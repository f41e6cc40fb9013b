/* capabilities/hostfn.c -- host functions a policy grants: validation, copies, and calls. */
#include "capabilities/hostfn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capabilities/ffi.h"

static int in_list(const char *s, size_t n, const char *const *list, size_t count) {
  for (size_t i = 0; i < count; i++)
    if (strlen(list[i]) == n && memcmp(list[i], s, n) == 0) return 1;
  return 0;
}

/* The length of one dotted part (up to the next '.' or the end). */
static size_t part_length(const char *s) {
  size_t n = 0;
  while (s[n] && s[n] != '.')
    n++;
  return n;
}

/* 1 if a is b or a proper dotted prefix of it ("tools" of "tools.search"). */
static int is_path_prefix(const char *a, const char *b) {
  size_t n = strlen(a);
  return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '.');
}

/* Describe, validate, then act: every rule is checked before anything is stored. */
static int validate(const mbxC_hostfn_table *t, const char *name, char *why, size_t why_size) {
  if (name == NULL || *name == '\0') {
    snprintf(why, why_size, "host function name is empty");
    return MBXC_HOSTFN_INVALID;
  }
  size_t len = strlen(name);
  if (len > MBXC_MAX_HOSTFN_NAME) {
    snprintf(why, why_size, "host function name is %zu bytes; at most %d", len,
             MBXC_MAX_HOSTFN_NAME);
    return MBXC_HOSTFN_INVALID;
  }
  const mbxC_name_rules *rules = t->rules;
  if (rules == NULL) { /* deny by default: no rules, no names */
    snprintf(why, why_size, "host function name '%s': this table has no naming rules", name);
    return MBXC_HOSTFN_INVALID;
  }
  int depth = 0;
  for (const char *p = name;; depth++) {
    size_t n = part_length(p);
    if (n > 0 && rules->is_reserved(p, n)) {
      snprintf(why, why_size, "host function name '%s': '%.*s' is a Lua keyword", name, (int)n, p);
      return MBXC_HOSTFN_INVALID;
    }
    int last_key = p != name && p[n] == '\0' && rules->is_key && rules->is_key(p, n);
    if (!last_key && !rules->is_name(p, n)) {
      snprintf(why, why_size,
               "host function name '%s': each dotted part must be a Lua identifier (letters, "
               "digits, '_', not starting with a digit)%s, at byte %zu",
               name, rules->is_key ? " (the last one may also hold '-')" : "", (size_t)(p - name));
      return MBXC_HOSTFN_INVALID;
    }
    if (p == name && in_list(p, n, rules->globals, rules->global_count)) {
      snprintf(why, why_size,
               "host function name '%s' would shadow the built-in '%.*s'; use another name "
               "(e.g. 'tools.%.*s')",
               name, (int)n, p, (int)n, p);
      return MBXC_HOSTFN_INVALID;
    }
    if (p[n] == '\0') break;
    p += n + 1;
  }
  if (depth + 1 > MBXC_MAX_HOSTFN_DEPTH) {
    snprintf(why, why_size, "host function name '%s' has %d dotted parts; at most %d", name,
             depth + 1, MBXC_MAX_HOSTFN_DEPTH);
    return MBXC_HOSTFN_INVALID;
  }
  for (size_t i = 0; i < t->count; i++) {
    const char *other = t->fns[i].name;
    if (strcmp(other, name) == 0) {
      snprintf(why, why_size, "host function '%s' is already defined in this policy", name);
      return MBXC_HOSTFN_INVALID;
    }
    /* "tools" and "tools.search" cannot both exist: tools would be a function and a table. */
    if (is_path_prefix(other, name) || is_path_prefix(name, other)) {
      snprintf(why, why_size,
               "host function '%s' clashes with '%s' (a name cannot be both a function and "
               "a module table)",
               name, other);
      return MBXC_HOSTFN_INVALID;
    }
  }
  if (t->count >= MBXC_MAX_HOSTFNS) {
    snprintf(why, why_size, "a policy grants at most %d host functions", MBXC_MAX_HOSTFNS);
    return MBXC_HOSTFN_INVALID;
  }
  return 0;
}

/* A packed table (a copy) made into one whose names are each their own allocation, so that
   it can grow; nothing changes on failure. */
static int unpack(mbxC_hostfn_table *t) {
  size_t cap = t->count < 4 ? 8 : t->count * 2;
  mbxC_hostfn *fns = calloc(cap, sizeof *fns);
  if (fns == NULL) return MBXC_HOSTFN_NO_MEMORY;
  for (size_t i = 0; i < t->count; i++) {
    fns[i] = t->fns[i];
    fns[i].name = strdup(t->fns[i].name);
    if (fns[i].name == NULL) {
      for (size_t j = 0; j < i; j++)
        free(fns[j].name);
      free(fns);
      return MBXC_HOSTFN_NO_MEMORY;
    }
  }
  free(t->fns); /* the block held the old names too */
  t->fns = fns;
  t->cap = cap;
  t->packed = 0;
  return 0;
}

static int add_entry(mbxC_hostfn_table *t, const char *name, mbxC_hostfn entry, char *why,
                     size_t why_size) {
  int bad = validate(t, name, why, why_size);
  if (bad) return bad;
  if (t->packed && unpack(t) != 0) return MBXC_HOSTFN_NO_MEMORY;
  if (t->count == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 8;
    mbxC_hostfn *grown = realloc(t->fns, cap * sizeof *grown);
    if (grown == NULL) return MBXC_HOSTFN_NO_MEMORY;
    t->fns = grown;
    t->cap = cap;
  }
  char *copy = strdup(name);
  if (copy == NULL) return MBXC_HOSTFN_NO_MEMORY;
  entry.name = copy;
  t->fns[t->count++] = entry;
  return 0;
}

int mbxC_hostfn_add(mbxC_hostfn_table *t, const char *name, mbxC_fn_kind kind, mbx_host_fn fn,
                    void *userdata, char *why, size_t why_size) {
  return add_entry(t, name, (mbxC_hostfn){.kind = kind, .fn = fn, .userdata = userdata}, why,
                   why_size);
}

int mbxC_hostfn_add_native(mbxC_hostfn_table *t, const char *name, struct mbxC_native *native,
                           char *why, size_t why_size) {
  return add_entry(t, name, (mbxC_hostfn){.kind = MBXC_FN_NATIVE, .native = native}, why, why_size);
}

int mbxC_hostfn_copy(mbxC_hostfn_table *dst, const mbxC_hostfn_table *src) {
  memset(dst, 0, sizeof *dst);
  dst->rules = src->rules;
  if (src->count == 0) return 0;
  /* One block: the entries, then every name (at most MBXC_MAX_HOSTFNS names of at most
     MBXC_MAX_HOSTFN_NAME bytes: no overflow). A new sandbox made one allocation per name. */
  size_t names = 0;
  for (size_t i = 0; i < src->count; i++)
    names += strlen(src->fns[i].name) + 1;
  char *block = malloc(src->count * sizeof *dst->fns + names);
  if (block == NULL) return -1;
  dst->fns = (mbxC_hostfn *)(void *)block;
  char *name = block + src->count * sizeof *dst->fns;
  for (size_t i = 0; i < src->count; i++) {
    size_t n = strlen(src->fns[i].name) + 1;
    memcpy(name, src->fns[i].name, n);
    dst->fns[i] = src->fns[i];
    dst->fns[i].name = name;
    /* The prepared call is immutable: the copy shares it instead of preparing it again. */
    if (src->fns[i].native) dst->fns[i].native = mbxC_native_ref(src->fns[i].native);
    name += n;
  }
  dst->count = dst->cap = src->count;
  dst->packed = 1;
  return 0;
}

void mbxC_hostfn_clear(mbxC_hostfn_table *t) {
  for (size_t i = 0; i < t->count; i++) {
    if (!t->packed) free(t->fns[i].name);
    mbxC_native_unref(t->fns[i].native);
  }
  free(t->fns);
  const mbxC_name_rules *rules = t->rules; /* the rules outlive the entries */
  memset(t, 0, sizeof *t);
  t->rules = rules;
}

/* Store bytes as the reply (kind given); past the cap the reply becomes a refusal. */
static mbx_status reply_set(mbx_host_reply *r, int kind, const char *bytes, size_t len,
                            size_t cap) {
  if (r == NULL || (bytes == NULL && len > 0)) return MBX_INVALID_ARGUMENT;
  if (len > cap) {
    r->kind = MBXC_REPLY_NONE;
    r->refused_len = len;
    return MBX_INVALID_ARGUMENT;
  }
  if (len + 1 > r->cap) {
    char *grown = realloc(r->buf, len + 1);
    if (grown == NULL) return MBX_NO_MEMORY;
    r->buf = grown;
    r->cap = len + 1;
  }
  if (len) memcpy(r->buf, bytes, len);
  r->buf[len] = '\0';
  r->len = len;
  r->kind = kind;
  r->refused_len = 0;
  return MBX_OK;
}

MBX_API mbx_status mbx_host_reply_json(mbx_host_reply *reply, const char *json, size_t len) {
  return reply_set(reply, MBXC_REPLY_JSON, json, len, MBX_HOST_REPLY_MAX);
}

MBX_API mbx_status mbx_host_reply_error(mbx_host_reply *reply, const char *message, size_t len) {
  /* A message longer than the cap is cut, not refused: the guest still learns it failed. */
  if (len > MBX_HOST_ERROR_MAX) len = MBX_HOST_ERROR_MAX;
  return reply_set(reply, MBXC_REPLY_ERROR, message, len, MBX_HOST_ERROR_MAX);
}

mbxC_call_result mbxC_hostfn_call(const mbxC_hostfn *fn, mbx_host_reply *r, const char *args,
                                  size_t args_len, const char **reply, size_t *reply_len) {
  r->kind = MBXC_REPLY_NONE;
  r->len = 0;
  r->refused_len = 0;
  mbx_status s = fn->fn(fn->userdata, args, args_len, r);
  char msg[MBXC_MAX_HOSTFN_NAME + 160];
  const char *text = NULL;
  if (r->refused_len > 0) {
    snprintf(msg, sizeof msg, "%s: the host's reply is %zu bytes, more than the %u-byte cap",
             fn->name, r->refused_len, (unsigned)MBX_HOST_REPLY_MAX);
    text = msg;
  } else if (r->kind == MBXC_REPLY_ERROR) {
    *reply = r->buf;
    *reply_len = r->len;
    return MBXC_CALL_ERROR;
  } else if (s != MBX_OK) {
    snprintf(msg, sizeof msg, "%s failed: %s", fn->name, mbx_status_str(s));
    text = msg;
  } else if (r->kind == MBXC_REPLY_JSON) {
    *reply = r->buf;
    *reply_len = r->len;
    return MBXC_CALL_VALUE;
  } else {
    *reply = "";
    *reply_len = 0;
    return MBXC_CALL_VALUE;
  }
  /* The message goes through the reply buffer so it outlives this frame. */
  if (reply_set(r, MBXC_REPLY_ERROR, text, strlen(text), sizeof msg) != MBX_OK) {
    *reply = "host function failed (out of host memory)";
    *reply_len = strlen(*reply);
  } else {
    *reply = r->buf;
    *reply_len = r->len;
  }
  return MBXC_CALL_ERROR;
}

void mbxC_host_reply_free(mbx_host_reply *r) {
  free(r->buf);
  memset(r, 0, sizeof *r);
}
