/* vm/load.c -- text-only loading with the parser under the budget. */
#include "vm/load.h"

#include <stdio.h>
#include <string.h>

#include "vm/budget.h"

typedef struct pieces {
  const char *next;
  size_t left, done;
  int started;
} pieces;

/* The size of the next piece once `done` bytes went to the parser. The parser's quadratic
   cases (an `or`/`and` or `elseif` chain walks its whole jump list at each link) make a
   piece's work grow with the text already parsed: pieces shrink past MBXV_LOAD_PIECE_FULL
   bytes so that piece size times bytes done stays about the same, and the work between two
   polls stays that of a 4 KiB piece at 16 KiB, never below 64 bytes. */
static size_t piece_size(size_t done) {
  if (done <= MBXV_LOAD_PIECE_FULL) return MBXV_LOAD_PIECE;
  size_t n = (size_t)MBXV_LOAD_PIECE * MBXV_LOAD_PIECE_FULL / done;
  return n < 64 ? 64 : n;
}

static const char *read_piece(lua_State *L, void *ud, size_t *size) {
  pieces *p = ud;
  size_t want = piece_size(p->done);
  /* Polled before every piece but the first: by then the parser has done the work the
     previous piece asked for. Ending the input early is how a reader stops lua_load. */
  if (p->started && mbxV_poll(L, want / 16 + 1) != MBXV_TRIP_NONE) p->left = 0;
  p->started = 1;
  size_t n = p->left < want ? p->left : want;
  *size = n;
  const char *piece = p->next;
  p->next += n;
  p->left -= n;
  p->done += n;
  return n ? piece : NULL;
}

/*
** Field chains (7923dbbf). To name a value in an error message ("attempt to index a nil value
** (field 'y')"), in debug.getinfo's "n" and in tracebacks, ldebug.c's getobjname walks back
** through the instructions that made the register: for `a.x.x.x...` each link is one more
** level of C recursion (getobjname -> gxf -> getobjname), and each level rescans the
** function's code from its start (findsetreg). Upstream bounded it in 5.4.7; Debian's 5.4.4
** is not. Measured with stock lua5.4: 10,000 links in a 20 KB chunk overflow a 768 KiB C
** stack, 30,000 links (60 KB, under the top-level source limit) take 1.9 s in one error
** message and overflow 1 MiB; 100,000 links take 15 s and overflow 8 MiB.
**
** The depth getobjname can reach is the length of such a chain in one expression: the
** links are `.name` and `[key]` suffixes with no call between them (a call's result ends
** the walk), plus, through `[key]`, the chain of the key expression. Locals end the walk
** too, and register moves go down (at most 255). So the text is scanned (strings and
** comments skipped) for the deepest chain, and a chunk over MBXV_CHAIN_LINKS_MAX is refused
** before the parser sees it. The scan over-estimates (a parenthesized expression or a call
** result counts as a link), never under-estimates.
*/

/* A level of bracket nesting: what `]`, `)` or `}` resumes. */
typedef struct chain_level {
  int saved; /* the chain depth before the bracket opened */
  int inner; /* the deepest chain inside it */
  char kind; /* 'i' index suffix, 'c' call arguments, 'g' group, 't' constructor */
} chain_level;

#define CHAIN_NESTING_MAX 256 /* the parser refuses deeper nesting itself (200 C levels) */

static int is_name_start(unsigned char c) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_name_char(unsigned char c) {
  return is_name_start(c) || (c >= '0' && c <= '9');
}

static int is_keyword(const char *p, size_t n) {
  static const char *const words[] = {"and",   "break", "do",       "else", "elseif", "end",
                                      "false", "for",   "function", "goto", "if",     "in",
                                      "local", "nil",   "not",      "or",   "repeat", "return",
                                      "then",  "true",  "until",    "while"};
  for (size_t i = 0; i < sizeof words / sizeof *words; i++)
    if (strlen(words[i]) == n && memcmp(words[i], p, n) == 0) return 1;
  return 0;
}

/* At s[i] == '[': the level of a long bracket ("[[" 0, "[=[" 1, ...), or -1 when it is not
   one. */
static long long_bracket(const char *s, size_t n, size_t i) {
  size_t j = i + 1;
  while (j < n && s[j] == '=')
    j++;
  return j < n && s[j] == '[' ? (long)(j - i - 1) : -1;
}

/* Past the long bracket of level eq opened at s[i]: the index after its closing bracket. */
static size_t skip_long(const char *s, size_t n, size_t i, long eq) {
  for (size_t j = i + (size_t)eq + 2; j < n; j++) {
    if (s[j] != ']') continue;
    size_t k = j + 1;
    while (k < n && s[k] == '=')
      k++;
    if (k < n && s[k] == ']' && (long)(k - j - 1) == eq) return k + 1;
  }
  return n;
}

static int is_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

int mbxV_chain_depth(const char *s, size_t n) {
  chain_level stack[CHAIN_NESTING_MAX];
  int top = 0, cur = 0, deepest = 0;
  int after_dot = 0, after_colon = 0;
  size_t i = 0;
  while (i < n) {
    unsigned char c = (unsigned char)s[i];
    if (is_space(c)) {
      i++;
      continue;
    }
    if (c == '-' && i + 1 < n && s[i + 1] == '-') { /* a comment */
      long eq = i + 2 < n && s[i + 2] == '[' ? long_bracket(s, n, i + 2) : -1;
      if (eq >= 0) {
        i = skip_long(s, n, i + 2, eq);
      } else {
        while (i < n && s[i] != '\n')
          i++;
      }
      continue;
    }
    if (is_name_start(c)) {
      size_t start = i;
      while (i < n && is_name_char((unsigned char)s[i]))
        i++;
      if (is_keyword(s + start, i - start))
        cur = 0;
      else if (after_dot)
        cur++;
      else if (after_colon)
        cur = 0; /* a method: its call ends the walk */
      else
        cur = 1;
    } else if ((c >= '0' && c <= '9') ||
               (c == '.' && i + 1 < n && s[i + 1] >= '0' && s[i + 1] <= '9')) {
      for (i++; i < n; i++) {
        unsigned char d = (unsigned char)s[i];
        int sign = (d == '+' || d == '-') && strchr("eEpP", s[i - 1]) != NULL;
        if (!is_name_char(d) && d != '.' && !sign) break;
      }
      cur = 0;
    } else if (c == '"' || c == '\'') {
      for (i++; i < n && (unsigned char)s[i] != c && s[i] != '\n'; i++)
        if (s[i] == '\\') i++;
      i++;
      cur = cur > 0 ? 1 : 0; /* f"x" is a call */
    } else if (c == '[' && long_bracket(s, n, i) >= 0) {
      i = skip_long(s, n, i, long_bracket(s, n, i));
      cur = cur > 0 ? 1 : 0; /* f[[x]] is a call */
    } else if (c == '[' || c == '(' || c == '{') {
      if (top == CHAIN_NESTING_MAX) return -1; /* the parser refuses this nesting */
      char kind = c == '{' ? 't' : cur > 0 ? (c == '[' ? 'i' : 'c') : 'g';
      stack[top++] = (chain_level){cur, 0, kind};
      cur = 0;
      i++;
    } else if (c == ']' || c == ')' || c == '}') {
      i++;
      if (top == 0) {
        cur = 0;
      } else {
        chain_level lv = stack[--top];
        int inner = lv.inner > cur ? lv.inner : cur;
        if (lv.kind == 'i')
          cur = 1 + (lv.saved > inner ? lv.saved : inner);
        else if (lv.kind == 'g')
          cur = inner > 0 ? inner : 1;
        else
          cur = 1;
      }
    } else if (c == '.' && !(i + 1 < n && s[i + 1] == '.')) {
      i++;
      if (cur > 0) {
        after_dot = 1;
        continue;
      }
    } else if (c == ':' && !(i + 1 < n && s[i + 1] == ':')) {
      i++;
      after_colon = 1;
      continue;
    } else {
      i += (c == '.' || c == ':') ? 2 : 1; /* "..", "...", "::" and one-character tokens */
      cur = 0;
    }
    after_dot = after_colon = 0;
    if (cur > deepest) deepest = cur;
    if (top > 0 && cur > stack[top - 1].inner) stack[top - 1].inner = cur;
  }
  return deepest;
}

int mbxV_load_text(lua_State *L, const char *text, size_t len, const char *chunk_name) {
  /* The scan is linear: charged like a look at the text (1 per 64 bytes). */
  if (mbxV_poll(L, len / 64) != MBXV_TRIP_NONE) {
    lua_pushliteral(L, "the parse was stopped by a limit");
    return LUA_ERRRUN;
  }
  int depth = mbxV_chain_depth(text, len);
  if (depth > MBXV_CHAIN_LINKS_MAX) {
    char msg[200];
    snprintf(msg, sizeof msg,
             "%s: an expression chains %d field or index accesses; this sandbox allows %d "
             "(Lua 5.4.4 names a value by recursing once per link)",
             chunk_name[0] == '=' || chunk_name[0] == '@' ? chunk_name + 1 : "[string]", depth,
             MBXV_CHAIN_LINKS_MAX);
    lua_pushstring(L, msg);
    return LUA_ERRSYNTAX;
  }
  pieces p = {text, len, 0, 0};
  int status = lua_load(L, read_piece, &p, chunk_name, "t");
  if (mbxV_tripped(L) != MBXV_TRIP_NONE) {
    lua_pop(L, 1);
    lua_pushliteral(L, "the parse was stopped by a limit");
    return LUA_ERRRUN;
  }
  return status;
}
