/* vm/errors.c -- turning a failed chunk into a message, a position and a traceback, safely. */
#include "vm/errors.h"
#include "common/bytes.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>

/* A growable host-side string for the traceback. */
typedef struct text {
  char *p;
  size_t len, cap;
  int failed;
} text;

static void text_put(text *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 256;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *p = realloc(t->p, cap);
    if (p == NULL) {
      t->failed = 1;
      return;
    }
    t->p = p;
    t->cap = cap;
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

size_t mbxV_utf8_cut(const char *s, size_t len, size_t max) {
  if (len <= max) return len;
  /* Back off over continuation bytes (10xxxxxx) to the start of the character the cut
     falls in, so valid UTF-8 stays valid (and is not sent as {"$bytes": ...}). A sequence
     is at most four bytes; past three continuations the text was not UTF-8 anyway. */
  size_t cut = max;
  while (cut > 0 && max - cut < 3 && ((unsigned char)s[cut] & 0xC0) == 0x80)
    cut--;
  return ((unsigned char)s[cut] & 0xC0) == 0x80 ? max : cut;
}

int mbxV_error_split(const char *msg, size_t len, char *chunk, size_t chunk_size, int *line,
                     size_t *text_offset) {
  /* Chunk names may contain ':' ([string "a:1: b"]), so a bracketed name is skipped whole. */
  size_t i = 0;
  if (len > 9 && memcmp(msg, "[string \"", 9) == 0) {
    const char *end = memchr(msg, ']', len);
    while (end && end > msg && end[-1] != '"')
      end = memchr(end + 1, ']', len - (end + 1 - msg));
    if (end == NULL) return 0;
    i = (size_t)(end - msg) + 1;
  } else {
    while (i < len && msg[i] != ':' && msg[i] != '\n')
      i++;
  }
  if (i == 0 || i >= len || msg[i] != ':') return 0;
  size_t j = i + 1;
  long n = 0;
  while (j < len && msg[j] >= '0' && msg[j] <= '9' && n < 100000000)
    n = n * 10 + (msg[j++] - '0');
  if (j == i + 1 || j + 1 >= len + 1 || j >= len || msg[j] != ':') return 0;
  size_t clen = i < chunk_size - 1 ? i : chunk_size - 1;
  memcpy(chunk, msg, clen);
  chunk[clen] = '\0';
  *line = (int)n;
  j++;
  if (j < len && msg[j] == ' ') j++;
  *text_offset = j;
  return 1;
}

int mbxV_error_from_message(const char *msg, size_t len, int split, mbxV_error_info *out) {
  memset(out, 0, sizeof *out);
  len = mbxV_utf8_cut(msg, len, MBXV_ERROR_MAX);
  size_t off = 0;
  if (!split || !mbxV_error_split(msg, len, out->chunk, sizeof out->chunk, &out->line, &off))
    off = 0;
  out->message = mbxU_dup_bytes(msg + off, len - off);
  out->message_len = len - off;
  out->traceback = mbxU_dup_bytes("", 0);
  return out->message && out->traceback ? 0 : -1;
}

/* Number of frames on co's stack, found by probing: lua_getstack walks the call list from
   the top, so a linear count over a deep (200k-frame) recursion would be quadratic. */
static int stack_depth(lua_State *co) {
  lua_Debug ar;
  int lo = 0, hi = 1;
  while (lua_getstack(co, hi, &ar)) {
    lo = hi;
    if (hi > (1 << 28)) break;
    hi *= 2;
  }
  while (lo + 1 < hi) {
    int mid = lo + (hi - lo) / 2;
    if (lua_getstack(co, mid, &ar))
      lo = mid;
    else
      hi = mid;
  }
  return lua_getstack(co, 0, &ar) ? lo + 1 : 0;
}

/* Where a traceback's text goes: the host-side text of an error, or a guest's luaL_Buffer
   (debug.traceback). */
typedef struct sink {
  void (*put)(void *ud, const char *s, size_t n);
  void *ud;
} sink;

static void sink_puts(const sink *out, const char *s) {
  out->put(out->ud, s, strlen(s));
}

static void put_text(void *ud, const char *s, size_t n) {
  text_put(ud, s, n);
}

static void describe_frame(const sink *out, lua_Debug *ar) {
  char buf[LUA_IDSIZE + 96];
  sink_puts(out, "\n\t");
  if (ar->currentline > 0)
    snprintf(buf, sizeof buf, "%s:%d: in ", ar->short_src, ar->currentline);
  else
    snprintf(buf, sizeof buf, "%s: in ", ar->short_src);
  sink_puts(out, buf);
  if (ar->namewhat && *ar->namewhat) {
    const char *name = ar->name ? ar->name : "?";
    int shown = (int)mbxV_utf8_cut(name, strlen(name), 60);
    snprintf(buf, sizeof buf, "%s '%.*s'", ar->namewhat, shown, name);
  } else if (ar->what && *ar->what == 'm') {
    snprintf(buf, sizeof buf, "main chunk");
  } else if (ar->what && *ar->what == 'C') {
    snprintf(buf, sizeof buf, "function <?>");
  } else {
    snprintf(buf, sizeof buf, "function <%s:%d>", ar->short_src, ar->linedefined);
  }
  sink_puts(out, buf);
  if (ar->istailcall) sink_puts(out, "\n\t(...tail calls...)");
}

/* Our own traceback instead of luaL_traceback: that one looks up function names by iterating
   package.loaded and the global table, which guest code can make arbitrarily large. */
typedef struct frame_positions {
  int count;
  struct {
    char chunk[LUA_IDSIZE];
    int line;
  } at[MBXV_TRACE_TOP + MBXV_TRACE_BOTTOM];
} frame_positions;

/* The frames of co from level first on; seen (may be NULL) collects the positions shown. */
static void build_traceback(lua_State *co, int first, const sink *out, frame_positions *seen) {
  int depth = stack_depth(co);
  lua_Debug ar;
  sink_puts(out, "stack traceback:");
  int shown = depth > first ? depth - first : 0;
  for (int level = first; level < depth; level++) {
    if (level == first + MBXV_TRACE_TOP && shown > MBXV_TRACE_TOP + MBXV_TRACE_BOTTOM) {
      char buf[64];
      int skip = shown - MBXV_TRACE_TOP - MBXV_TRACE_BOTTOM;
      snprintf(buf, sizeof buf, "\n\t...\t(skipping %d levels)", skip);
      sink_puts(out, buf);
      level += skip - 1;
      continue;
    }
    if (!lua_getstack(co, level, &ar) || !lua_getinfo(co, "Slnt", &ar)) break;
    describe_frame(out, &ar);
    if (seen && ar.currentline > 0 && seen->count < (int)(sizeof seen->at / sizeof *seen->at)) {
      snprintf(seen->at[seen->count].chunk, sizeof seen->at[0].chunk, "%s", ar.short_src);
      seen->at[seen->count++].line = ar.currentline;
    }
  }
}

void mbxV_traceback_write(lua_State *co, int first, void (*put)(void *ud, const char *s, size_t n),
                          void *ud) {
  sink out = {put, ud};
  build_traceback(co, first, &out, NULL);
}

int mbxV_error_describe(lua_State *L, lua_State *co, const char *override, mbxV_error_info *out) {
  (void)L;
  memset(out, 0, sizeof *out);
  const char *msg = NULL;
  size_t len = 0;
  char typebuf[64];
  if (override) {
    msg = override;
    len = strlen(override);
  } else if (lua_gettop(co) > 0 &&
             (lua_type(co, -1) == LUA_TSTRING || lua_type(co, -1) == LUA_TNUMBER)) {
    msg = lua_tolstring(co, -1, &len); /* a number is converted in place: no metamethod */
  } else {
    int type = lua_gettop(co) > 0 ? lua_type(co, -1) : LUA_TNIL;
    snprintf(typebuf, sizeof typebuf, "(error object is a %s value)", lua_typename(co, type));
    msg = typebuf;
    len = strlen(typebuf);
  }
  len = mbxV_utf8_cut(msg, len, MBXV_ERROR_MAX);
  text t = {0};
  frame_positions *seen = calloc(1, sizeof *seen);
  if (seen == NULL) return -1;
  sink to_text = {put_text, &t};
  build_traceback(co, 0, &to_text, seen);
  /* The position comes from the frames, never from the text: error("/etc/shadow:31337: x",
     0) must not set chunk and line (issue 9, E.2). A "chunk:line: " prefix is moved out of
     the message only when it names a frame on the stack (what luaL_where wrote for an
     error at level 1, 2, ...), and then that frame is the position; otherwise the message
     is kept whole and the position is the frame that raised (the first with a line). */
  char chunk[sizeof out->chunk];
  int line = 0;
  size_t off = 0;
  if (mbxV_error_split(msg, len, chunk, sizeof chunk, &line, &off)) {
    int named = -1;
    for (int i = 0; i < seen->count && named < 0; i++)
      if (seen->at[i].line == line && strcmp(seen->at[i].chunk, chunk) == 0) named = i;
    if (named < 0)
      off = 0;
    else
      seen->at[0] = seen->at[named];
  }
  if (seen->count > 0) {
    snprintf(out->chunk, sizeof out->chunk, "%s", seen->at[0].chunk);
    out->line = seen->at[0].line;
  }
  free(seen);
  out->message = mbxU_dup_bytes(msg + off, len - off);
  out->message_len = len - off;
  out->traceback = t.failed ? NULL : t.p;
  out->traceback_len = t.len;
  if (t.failed) free(t.p);
  if (out->message == NULL || out->traceback == NULL) {
    mbxV_error_info_free(out);
    return -1;
  }
  return 0;
}

void mbxV_error_info_free(mbxV_error_info *info) {
  free(info->message);
  free(info->traceback);
  info->message = info->traceback = NULL;
}

void mbxV_refuse(mbxV_refusal *r, mbxV_status code, const char *fmt, ...) {
  if (r == NULL) return;
  r->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}
