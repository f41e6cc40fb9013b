/* host/cli/repl_entry.c -- one entry of `moonbox repl`: typed lines gathered into a chunk the
   way lua.c's loadline does (return first, then more lines while the chunk is incomplete),
   decided with mbx_check so that nothing runs before the entry is whole. */
#include "host/cli/repl_entry.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* lua.c's EOFMARK: the parser's message ends with it when the chunk ended too early. */
#define EOF_MARK "<eof>"

/* The first line of the wrapper: the printer, select read now, and the entry's function. The
   entry follows on the same line so that its line numbers are the typed ones; the printer is
   called with select as its first argument, so the entry itself cannot hide the select that
   counts its values. Once an earlier entry removed select, values are printed when the first
   is not nil (counting them needs select). */
static const char wrap_head[] =
    "return (function(s, ...) if s then if s('#', ...) > 0 then print(...) end "
    "elseif (...) ~= nil then print(...) end end)(select, (function(...) ";
/* On a line of its own: a comment on the entry's last line must not swallow it. */
static const char wrap_tail[] = "\nend)(...))";

int mbxH_repl_incomplete(const char *message) {
  size_t len = strlen(message), mark = sizeof EOF_MARK - 1;
  return len >= mark && strcmp(message + len - mark, EOF_MARK) == 0;
}

size_t mbxH_repl_wrap_extra(void) {
  return sizeof wrap_head - 1 + sizeof wrap_tail - 1;
}

char *mbxH_repl_wrap(const char *src, size_t len, size_t *out_len) {
  size_t head = sizeof wrap_head - 1, tail = sizeof wrap_tail - 1;
  if (len > (size_t)-1 - head - tail - 1) return NULL;
  char *code = malloc(head + len + tail + 1);
  if (code == NULL) return NULL;
  memcpy(code, wrap_head, head);
  if (len > 0) memcpy(code + head, src, len);
  memcpy(code + head + len, wrap_tail, tail + 1);
  *out_len = head + len + tail;
  return code;
}

/* 1 when line (len bytes) is "\tstdin:DIGITS: " followed by suffix, exactly. */
static int frame_is(const char *line, size_t len, const char *suffix) {
  static const char head[] = "\t" MBXH_REPL_CHUNK ":";
  size_t head_len = sizeof head - 1, suffix_len = strlen(suffix), i = head_len;
  if (len < head_len || memcmp(line, head, head_len) != 0) return 0;
  while (i < len && line[i] >= '0' && line[i] <= '9')
    i++;
  if (i == head_len || len - i < 2 || line[i] != ':' || line[i + 1] != ' ') return 0;
  return len - i - 2 == suffix_len && memcmp(line + i + 2, suffix, suffix_len) == 0;
}

/* The start of the last line of text[0..len) (0 when it has one line). */
static size_t last_line(const char *text, size_t len) {
  size_t at = len;
  while (at > 0 && text[at - 1] != '\n')
    at--;
  return at;
}

char *mbxH_repl_traceback(const char *tb, size_t len, size_t *out_len) {
  static const char entry_fn[] = "in function <" MBXH_REPL_CHUNK ":1>";
  static const char main_chunk[] = "in main chunk";
  static const char tail_calls[] = "\t(...tail calls...)";
  char *out = malloc(len + 1);
  if (out == NULL) return NULL;
  memcpy(out, tb, len);
  out[len] = '\0';
  *out_len = len;
  size_t wrapper = last_line(tb, len), entry = wrapper > 0 ? last_line(tb, wrapper - 1) : 0;
  if (wrapper == 0 || !frame_is(tb + wrapper, len - wrapper, main_chunk)) return out;
  if (wrapper - 1 - entry == sizeof tail_calls - 1 &&
      memcmp(tb + entry, tail_calls, sizeof tail_calls - 1) == 0) {
    /* The entry returned a call ("f()" runs as "return f()"): its frame is gone, as under
       lua -i; only the wrapper's goes. */
    *out_len = wrapper - 1;
    out[*out_len] = '\0';
    return out;
  }
  if (!frame_is(tb + entry, wrapper - 1 - entry, entry_fn)) return out;
  /* The entry's frame keeps its line; only its name changes, to the shorter one. */
  size_t name_at = wrapper - 1 - (sizeof entry_fn - 1);
  memcpy(out + name_at, main_chunk, sizeof main_chunk - 1);
  *out_len = name_at + sizeof main_chunk - 1;
  out[*out_len] = '\0';
  return out;
}

void mbxH_repl_entry_clear(mbxH_repl_entry *e) {
  e->len = 0;
  e->lines = 0;
  if (e->text) e->text[0] = '\0';
}

void mbxH_repl_entry_free(mbxH_repl_entry *e) {
  free(e->text);
  memset(e, 0, sizeof *e);
}

/* Appends bytes to the entry's text; -1 when out of memory. */
static int entry_append(mbxH_repl_entry *e, const char *bytes, size_t len) {
  if (len > (size_t)-1 / 2 - e->len) return -1;
  if (e->len + len + 1 > e->cap) {
    size_t cap = e->cap ? e->cap : 256;
    while (cap < e->len + len + 1)
      cap *= 2;
    char *grown = realloc(e->text, cap);
    if (grown == NULL) return -1;
    e->text = grown;
    e->cap = cap;
  }
  if (len > 0) memcpy(e->text + e->len, bytes, len);
  e->len += len;
  e->text[e->len] = '\0';
  return 0;
}

/* The outcome of compiling text: 0 compiles, 1 a syntax error (its message and line in msg,
   *incomplete set when it ended too early), -1 the check itself failed (msg says why). */
static int compile(const mbx_policy *p, const char *text, size_t len, int *incomplete, char *msg,
                   size_t msg_size) {
  char *json = NULL;
  size_t json_len = 0;
  mbx_error err;
  memset(&err, 0, sizeof err);
  *incomplete = 0;
  mbx_status st = mbx_check(p, text, len, &json, &json_len, &err);
  if (st != MBX_OK) {
    if (st == MBX_SOURCE_TOO_LARGE)
      (void)snprintf(msg, msg_size,
                     "the entry is larger than the source limit of %llu bytes (raise it with "
                     "--source-limit, up to 16M)",
                     (unsigned long long)mbx_policy_get_limit(p, MBX_LIMIT_SOURCE));
    else
      (void)snprintf(msg, msg_size, "%s", err.message[0] ? err.message : mbx_status_str(st));
    return -1;
  }
  json_t *report = json_loadb(json, json_len, 0, NULL);
  mbx_free(json);
  json_t *syntax = json_object_get(report, "syntax_error");
  int rc = 0;
  if (report == NULL || syntax == NULL) {
    (void)snprintf(msg, msg_size, "out of memory while compiling the entry");
    rc = -1;
  } else if (!json_is_null(syntax)) {
    const char *text_msg = json_string_value(json_object_get(syntax, "message"));
    if (text_msg == NULL) text_msg = "syntax error";
    *incomplete = mbxH_repl_incomplete(text_msg);
    (void)snprintf(msg, msg_size, "%s:%lld: %s", MBXH_REPL_CHUNK,
                   (long long)json_integer_value(json_object_get(syntax, "line")), text_msg);
    rc = 1;
  }
  json_decref(report);
  return rc;
}

/* The wrapped chunk of text into *code; MBXH_REPL_RUN, or FAILED when out of memory. */
static mbxH_repl_verdict ready(mbxH_repl_entry *e, const char *text, size_t len, char **code,
                               size_t *code_len, char *msg, size_t msg_size) {
  *code = mbxH_repl_wrap(text, len, code_len);
  mbxH_repl_entry_clear(e);
  if (*code != NULL) return MBXH_REPL_RUN;
  (void)snprintf(msg, msg_size, "out of memory");
  return MBXH_REPL_FAILED;
}

mbxH_repl_verdict mbxH_repl_add_line(mbxH_repl_entry *e, const mbx_policy *p, const char *line,
                                     size_t len, char **code, size_t *code_len, char *msg,
                                     size_t msg_size) {
  int incomplete = 0, rc;
  *code = NULL;
  *code_len = 0;
  msg[0] = '\0';
  if (e->lines == 0) {
    /* "=EXPR" is "return EXPR", a form lua.c still takes from Lua 5.1. */
    if (len > 0 && line[0] == '=') {
      if (entry_append(e, "return ", 7) != 0) goto no_memory;
      line++;
      len--;
    }
    if (entry_append(e, line, len) != 0) goto no_memory;
    e->lines = 1;
    /* "return LINE" first: an expression's values are printed. */
    mbxH_repl_entry retline = {NULL, 0, 0, 0};
    if (entry_append(&retline, "return ", 7) != 0 || entry_append(&retline, e->text, e->len) != 0) {
      mbxH_repl_entry_free(&retline);
      goto no_memory;
    }
    rc = compile(p, retline.text, retline.len, &incomplete, msg, msg_size);
    if (rc == 0) {
      mbxH_repl_verdict v = ready(e, retline.text, retline.len, code, code_len, msg, msg_size);
      mbxH_repl_entry_free(&retline);
      return v;
    }
    mbxH_repl_entry_free(&retline);
    msg[0] = '\0';
  } else {
    if (entry_append(e, "\n", 1) != 0 || entry_append(e, line, len) != 0) goto no_memory;
    e->lines++;
  }
  rc = compile(p, e->text, e->len, &incomplete, msg, msg_size);
  if (rc == 0) {
    msg[0] = '\0';
    return ready(e, e->text, e->len, code, code_len, msg, msg_size);
  }
  if (rc == 1 && incomplete) {
    msg[0] = '\0';
    return MBXH_REPL_MORE;
  }
  mbxH_repl_entry_clear(e);
  return rc == 1 ? MBXH_REPL_SYNTAX : MBXH_REPL_FAILED;

no_memory:
  mbxH_repl_entry_clear(e);
  (void)snprintf(msg, msg_size, "out of memory");
  return MBXH_REPL_FAILED;
}
