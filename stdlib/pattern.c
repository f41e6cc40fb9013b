/* stdlib/pattern.c -- string.find/match/gmatch/gsub: a metered Lua 5.4 pattern matcher. */
/* Written from the Lua 5.4 reference manual (section 6.4.1) and checked against stock 5.4.4
   by tests/compat and tests/fuzz/fuzz_pattern.c. Why our own: the stock matcher backtracks in
   C, where the count hook never fires, so ('a?'):rep(30)..('a'):rep(30) runs for seconds past
   any deadline (THREATS D1, 8.6); and Debian's gmatch iterator keeps a spent recursion
   counter after "pattern too complex" and then recurses until SIGSEGV (upstream efddc230).

   Every matching step (one pattern item tried at one subject position, one character scanned
   by a repetition or %b, 64 bytes compared or copied) is counted, and every MATCH_BATCH steps
   the count is charged to the run's budget with mbxV_charge, which raises when the run trips
   (instructions, deadline, interrupt, memory). A raise unwinds with longjmp: nothing here
   owns C resources, the subject and pattern stay anchored on the Lua stack, and gsub's result
   grows in a luaL_Buffer on the guest heap.

   The recursion shape (which items recurse, the 200-level "pattern too complex" limit) and
   the points where malformed patterns are detected (lazily, when the matcher reaches them)
   follow stock 5.4.4 on purpose: the differential fuzzer compares error messages too. */
#include <ctype.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/coverage.h"
#include "vm/cstack.h"

/* Stock limits, kept so the same patterns succeed and fail: LUA_MAXCAPTURES and the
   recursion depth of lstrlib's MAXCCALLS. */
#define MAX_CAPTURES 32
#define MAX_DEPTH 200
/* Steps between two charges: about 10 us of matching, so the deadline is seen in time
   while the clock is read rarely. */
#define MATCH_BATCH 1024
/* Plain find searches windows of this size with memmem: glibc's memmem costs up to ~8 ns per
   byte on repetitive input, so one call over a 64 MiB subject would run half a second
   without looking at the deadline. */
#define PLAIN_WINDOW (256 * 1024)

/* The length field of a capture that is still open, or that records a position. */
#define CAP_OPEN (-1)
#define CAP_POSITION (-2)

typedef struct capture {
  const char *init;
  ptrdiff_t len; /* bytes, or CAP_OPEN / CAP_POSITION */
} capture;

typedef struct matcher {
  lua_State *L;
  const char *src; /* the subject */
  const char *src_end;
  const char *pat_end; /* end of the pattern */
  int depth_left;      /* recursion still allowed in this match */
  int level;           /* captures started */
  mbxV_meter meter;    /* steps counted, charged every MATCH_BATCH (vm/budget.h) */
  uint32_t byte_debt;  /* bytes appended to a gsub result, not yet counted as steps */
  capture cap[MAX_CAPTURES];
} matcher;

static inline int uchar(char c) {
  return (unsigned char)c;
}

/* ---- metering ---------------------------------------------------------------------------- */

static void charge_pending(matcher *m) {
  mbxV_meter_flush(&m->meter);
}

static inline void count_steps(matcher *m, uint64_t n) {
  mbxV_meter_add(&m->meter, n);
}

/* Bytes appended to a gsub result: one step per 64, so a huge result is paid for even when
   each single append is small. */
static inline void count_bytes(matcher *m, size_t n) {
  if (n >= 64) {
    count_steps(m, n / 64);
    n %= 64;
  }
  m->byte_debt += (uint32_t)n;
  if (m->byte_debt >= 64) {
    m->byte_debt -= 64;
    count_steps(m, 1);
  }
}

static void matcher_init(matcher *m, lua_State *L, const char *s, size_t ls, const char *p,
                         size_t lp) {
  m->L = L;
  m->src = s;
  m->src_end = s + ls;
  m->pat_end = p + lp;
  m->meter = mbxV_meter_init(L, MATCH_BATCH, 1);
  m->byte_debt = 0;
}

/* Each match attempt starts with no captures and the full depth: a depth spent by an earlier
   error must not carry over (that is the gmatch crash of 5.4.4). */
static void matcher_reset(matcher *m) {
  m->level = 0;
  m->depth_left = MAX_DEPTH;
}

/* ---- character classes ------------------------------------------------------------------- */

/* The classes of the "C" locale, which every run uses (host/backend/inproc.c, host/check.c; the
   sandbox's os.setlocale accepts only "C"): plain ASCII ranges, the same answers as <ctype.h>
   gives there, without a call per subject byte. */
static inline int ascii_lower(int c) {
  return (unsigned)(c - 'a') < 26u;
}
static inline int ascii_upper(int c) {
  return (unsigned)(c - 'A') < 26u;
}
static inline int ascii_digit(int c) {
  return (unsigned)(c - '0') < 10u;
}
static inline int ascii_graph(int c) {
  return (unsigned)(c - 0x21) < 94u; /* '!' .. '~' */
}

/* Does byte c belong to the class named by the letter after '%'? Other characters stand for
   themselves ("%." is a dot). Upper case letters are complements. letter | 0x20 is the lower
   case of an ASCII letter and lands on no letter for any other byte: stock's switch on
   tolower(letter) in the "C" locale. */
static inline int class_matches(int c, int letter) {
  int in;
  switch (letter | 0x20) {
  case 'a':
    in = ascii_lower(c | 0x20);
    break;
  case 'c':
    in = c < 0x20 || c == 0x7F;
    break;
  case 'd':
    in = ascii_digit(c);
    break;
  case 'g':
    in = ascii_graph(c);
    break;
  case 'l':
    in = ascii_lower(c);
    break;
  case 'p':
    in = ascii_graph(c) && !ascii_lower(c | 0x20) && !ascii_digit(c);
    break;
  case 's':
    in = c == ' ' || (unsigned)(c - '\t') < 5u; /* \t \n \v \f \r */
    break;
  case 'u':
    in = ascii_upper(c);
    break;
  case 'w':
    in = ascii_lower(c | 0x20) || ascii_digit(c);
    break;
  case 'x':
    in = ascii_digit(c) || (unsigned)((c | 0x20) - 'a') < 6u;
    break;
  case 'z':
    in = (c == 0);
    break; /* deprecated since 5.2, still accepted by 5.4 */
  default:
    return letter == c;
  }
  return letter <= 'Z' ? !in : in; /* an upper case letter names the complement */
}

/* Is c in the set that runs from '[' at open to its closing ']' at close? */
static int set_matches(int c, const char *open, const char *close) {
  int member = 1;
  const char *p = open;
  if (p[1] == '^') {
    member = 0;
    p++;
  }
  while (++p < close) {
    if (*p == '%') {
      p++;
      if (class_matches(c, uchar(*p))) return member;
    } else if (p[1] == '-' && p + 2 < close) {
      /* A range needs a character after the '-'; "[a-]" holds 'a' and '-'. */
      if (uchar(p[0]) <= c && c <= uchar(p[2])) return member;
      p += 2;
    } else if (uchar(*p) == c) {
      return member;
    }
  }
  return !member;
}

/* The end of the single-character class starting at p (a literal, '.', "%x" or a set). */
static const char *class_end(matcher *m, const char *p) {
  const char *pe = m->pat_end;
  char c = *p++;
  if (c == '%') {
    if (p >= pe) luaL_error(m->L, "malformed pattern (ends with '%%')");
    return p + 1;
  }
  if (c == '[') {
    if (p < pe && *p == '^') p++;
    /* The first character after "[" or "[^" is always a member, so "[]]" holds ']'; a '%'
       escapes the next character, so "[%]]" holds ']' as well. */
    do {
      if (p >= pe) luaL_error(m->L, "malformed pattern (missing ']')");
      if (*p++ == '%' && p < pe) p++;
    } while (p >= pe || *p != ']');
    return p + 1;
  }
  return p;
}

/* Does the subject byte at s match the class [p, ep)? Never past the subject's end. */
static int single_matches(const matcher *m, const char *s, const char *p, const char *ep) {
  if (s >= m->src_end) return 0;
  int c = uchar(*s);
  switch (*p) {
  case '.':
    return 1;
  case '%':
    return class_matches(c, uchar(p[1]));
  case '[':
    return set_matches(c, p, ep - 1);
  default:
    return uchar(*p) == c;
  }
}

/* ---- the matcher ------------------------------------------------------------------------- */

static const char *match_here(matcher *m, const char *s, const char *p);

/* "%bxy": x, then a balanced run of x and y, then y. */
static const char *match_balance(matcher *m, const char *s, const char *p) {
  if (p + 1 >= m->pat_end) luaL_error(m->L, "malformed pattern (missing arguments to '%%b')");
  if (s >= m->src_end || *s != p[0]) return NULL;
  char open = p[0], close = p[1];
  int depth = 1;
  while (++s < m->src_end) {
    count_steps(m, 1);
    /* The closer is tested first: with x == y the first repeat closes. */
    if (*s == close) {
      if (--depth == 0) return s + 1;
    } else if (*s == open) {
      depth++;
    }
  }
  return NULL;
}

/* Greedy repetition of the class [p, ep) starting at s, then the rest of the pattern after
   the quantifier, giving back one character at a time. */
static const char *match_greedy(matcher *m, const char *s, const char *p, const char *ep) {
  ptrdiff_t n = 0;
  while (single_matches(m, s + n, p, ep)) {
    n++;
    count_steps(m, 1);
  }
  for (; n >= 0; n--) {
    const char *e = match_here(m, s + n, ep + 1);
    if (e) return e;
  }
  return NULL;
}

/* Lazy repetition ('-'): the rest of the pattern first, one more character only if it fails. */
static const char *match_lazy(matcher *m, const char *s, const char *p, const char *ep) {
  for (;;) {
    const char *e = match_here(m, s, ep + 1);
    if (e) return e;
    if (!single_matches(m, s, p, ep)) return NULL;
    s++;
  }
}

static const char *open_capture(matcher *m, const char *s, const char *p, ptrdiff_t kind) {
  if (m->level >= MAX_CAPTURES) luaL_error(m->L, "too many captures");
  m->cap[m->level].init = s;
  m->cap[m->level].len = kind;
  m->level++;
  const char *e = match_here(m, s, p);
  if (e == NULL) m->level--; /* undo: the caller backtracks */
  return e;
}

static const char *close_capture(matcher *m, const char *s, const char *p) {
  int l = m->level - 1;
  while (l >= 0 && m->cap[l].len != CAP_OPEN)
    l--;
  if (l < 0) luaL_error(m->L, "invalid pattern capture");
  m->cap[l].len = s - m->cap[l].init;
  const char *e = match_here(m, s, p);
  if (e == NULL) m->cap[l].len = CAP_OPEN;
  return e;
}

/* "%1".."%9": the text of a closed capture again. A position capture never matches. */
static const char *match_backref(matcher *m, const char *s, int digit) {
  int l = digit - '1';
  if (l < 0 || l >= m->level || m->cap[l].len == CAP_OPEN)
    luaL_error(m->L, "invalid capture index %%%d", l + 1);
  if (m->cap[l].len < 0) return NULL;
  size_t len = (size_t)m->cap[l].len;
  count_steps(m, len / 64);
  if ((size_t)(m->src_end - s) >= len && memcmp(m->cap[l].init, s, len) == 0) return s + len;
  return NULL;
}

/* Match the pattern from p against the subject from s. Returns the end of the match or NULL.
   Recursion happens only where backtracking needs a choice point (captures, quantifiers);
   single items and anchors loop. */
static const char *match_here(matcher *m, const char *s, const char *p) {
  if (m->depth_left-- == 0) luaL_error(m->L, "pattern too complex");
  const char *pe = m->pat_end;
  for (;;) {
    count_steps(m, 1);
    if (p >= pe) break;
    if (*p == '(') {
      if (p + 1 < pe && p[1] == ')')
        s = open_capture(m, s, p + 2, CAP_POSITION);
      else
        s = open_capture(m, s, p + 1, CAP_OPEN);
      break;
    }
    if (*p == ')') {
      s = close_capture(m, s, p + 1);
      break;
    }
    if (*p == '$' && p + 1 == pe) {
      /* '$' anchors only as the last character; elsewhere it is a literal. */
      if (s != m->src_end) s = NULL;
      break;
    }
    if (*p == '%' && p + 1 < pe) {
      if (p[1] == 'b') {
        s = match_balance(m, s, p + 2);
        if (s == NULL) break;
        p += 4;
        continue;
      }
      if (p[1] == 'f') {
        /* Frontier: the previous byte (NUL before the start) is outside the set and the
           current byte (NUL at the end) inside it. */
        p += 2;
        if (p >= pe || *p != '[') luaL_error(m->L, "missing '[' after '%%f' in pattern");
        const char *ep = class_end(m, p);
        int before = s == m->src ? 0 : uchar(s[-1]);
        int here = s < m->src_end ? uchar(*s) : 0;
        if (!set_matches(before, p, ep - 1) && set_matches(here, p, ep - 1)) {
          p = ep;
          continue;
        }
        s = NULL;
        break;
      }
      if (isdigit(uchar(p[1]))) {
        s = match_backref(m, s, uchar(p[1]));
        if (s == NULL) break;
        p += 2;
        continue;
      }
    }
    /* A single-character class, perhaps followed by a quantifier. */
    const char *ep = class_end(m, p);
    int q = ep < pe ? *ep : 0;
    if (!single_matches(m, s, p, ep)) {
      if (q == '*' || q == '?' || q == '-') { /* zero repeats are fine */
        p = ep + 1;
        continue;
      }
      s = NULL;
      break;
    }
    if (q == '?') {
      const char *e = match_here(m, s + 1, ep + 1);
      if (e) {
        s = e;
        break;
      }
      p = ep + 1;
      continue;
    }
    if (q == '+') {
      s = match_greedy(m, s + 1, p, ep);
      break;
    }
    if (q == '*') {
      s = match_greedy(m, s, p, ep);
      break;
    }
    if (q == '-') {
      s = match_lazy(m, s, p, ep);
      break;
    }
    s++;
    p = ep;
  }
  m->depth_left++;
  return s;
}

/* ---- captures to values ------------------------------------------------------------------ */

/* Capture i of the match [s, e): its text in *text and its length, or CAP_POSITION with the
   position already pushed. With no captures, "capture 0" is the whole match. */
static ptrdiff_t capture_value(matcher *m, int i, const char *s, const char *e, const char **text) {
  if (i >= m->level) {
    /* 5.4.4's text, also for gsub replacements (5.4.6 adds " in replacement string"): the
       differential tests compare against Debian's 5.4.4. */
    if (i != 0) luaL_error(m->L, "invalid capture index %%%d", i + 1);
    *text = s;
    return e - s;
  }
  ptrdiff_t len = m->cap[i].len;
  *text = m->cap[i].init;
  if (len == CAP_OPEN) luaL_error(m->L, "unfinished capture");
  if (len == CAP_POSITION) lua_pushinteger(m->L, (m->cap[i].init - m->src) + 1);
  return len;
}

static void push_capture(matcher *m, int i, const char *s, const char *e) {
  const char *text;
  ptrdiff_t len = capture_value(m, i, s, e, &text);
  if (len != CAP_POSITION) lua_pushlstring(m->L, text, (size_t)len);
}

/* Push every capture (or the whole match when there are none and s is given). */
static int push_captures(matcher *m, const char *s, const char *e) {
  int n = (m->level == 0 && s) ? 1 : m->level;
  luaL_checkstack(m->L, n, "too many captures");
  for (int i = 0; i < n; i++)
    push_capture(m, i, s, e);
  return n;
}

/* ---- find and match ---------------------------------------------------------------------- */

/* The 0-based start for a 1-based init that may be negative (from the end) or out of
   range. A result above len means "past the end": no match. */
static size_t start_offset(lua_Integer pos, size_t len) {
  if (pos > 0) return (size_t)pos - 1;
  if (pos == 0 || pos < -(lua_Integer)len) return 0;
  return len - (size_t)(-pos);
}

/* A pattern without magic characters is searched as plain text (stock does the same). */
static int has_specials(const char *p, size_t lp) {
  for (size_t i = 0; i < lp; i++)
    if (strchr("^$*+?.([%-", p[i]) && p[i] != '\0') return 1;
  return 0;
}

/* Plain search with memmem (linear), window by window so the budget is checked between
   windows. Returns the offset of the first occurrence at or after init, or -1. */
static ptrdiff_t plain_find(lua_State *L, const char *s, size_t ls, size_t init, const char *p,
                            size_t lp) {
  if (lp == 0) return (ptrdiff_t)init;
  for (size_t w = init; w < ls && ls - w >= lp; w += PLAIN_WINDOW) {
    size_t span = ls - w;
    if (span > PLAIN_WINDOW + lp - 1) span = PLAIN_WINDOW + lp - 1;
    mbxV_charge(L, span / 64 + 1);
    const char *hit = memmem(s + w, span, p, lp);
    if (hit) return hit - s;
  }
  return -1;
}

/* The fuzz engine's comparison hint for a search that failed (vm/coverage.h): the literal
   head of the pattern, up to its first special character (a character a quantifier follows is
   not part of it), and the subject from where the search started. */
static void hint_failed_search(const char *s, size_t ls, size_t init, const char *p, size_t lp,
                               int plain) {
  size_t n = lp;
  if (!plain) {
    for (n = 0; n < lp && !strchr("^$*+?.([%-", p[n]); n++) {
    }
    if (n < lp && n > 0 && strchr("*?-", p[n])) n--;
  }
  if (n > 0) mbxV_compare_hint(s + init, ls - init, p, n);
}

/* Every entry checks the C stack: the matcher recurses in C, and a gsub callback or an
   __index of the replacement table may call the matcher again (vm/cstack.h). */
static int find_or_match(lua_State *L, int find) {
  size_t ls, lp;
  mbxV_cstack_check(L);
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) {
    luaL_pushfail(L);
    return 1;
  }
  if (find && (lua_toboolean(L, 4) || !has_specials(p, lp))) {
    mbxV_charge(L, lp / 64 + 1);
    ptrdiff_t at = plain_find(L, s, ls, init, p, lp);
    if (at < 0) {
      if (mbxV_compare_hint != NULL) hint_failed_search(s, ls, init, p, lp, 1);
      luaL_pushfail(L);
      return 1;
    }
    lua_pushinteger(L, (lua_Integer)at + 1);
    lua_pushinteger(L, (lua_Integer)(at + (ptrdiff_t)lp));
    return 2;
  }
  int anchored = lp > 0 && *p == '^';
  if (anchored) {
    p++;
    lp--;
  }
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  for (const char *from = s + init;; from++) {
    matcher_reset(&m);
    const char *e = match_here(&m, from, p);
    if (e) {
      charge_pending(&m);
      if (!find) return push_captures(&m, from, e);
      lua_pushinteger(L, (from - s) + 1);
      lua_pushinteger(L, e - s);
      return push_captures(&m, NULL, NULL) + 2;
    }
    if (anchored || from >= m.src_end) break;
  }
  charge_pending(&m);
  if (mbxV_compare_hint != NULL) hint_failed_search(s, ls, init, p, lp, 0);
  luaL_pushfail(L);
  return 1;
}

static int str_find(lua_State *L) {
  return find_or_match(L, 1);
}

static int str_match(lua_State *L) {
  return find_or_match(L, 0);
}

/* ---- gmatch ------------------------------------------------------------------------------ */

/* The iterator's upvalues: subject, pattern, and a gmatch_state. Only two offsets persist
   between calls: each call builds its own matcher, so no state from a failed call (like a
   spent depth) survives into the next. '^' is not an anchor in gmatch (stock treats it as a
   literal there too). */
typedef struct gmatch_state {
  /* The subject and the pattern, anchored by upvalues 1 and 2: a guest cannot replace a C
     closure's upvalues (there is no debug library), and Lua never moves a string. */
  const char *s, *p;
  size_t ls, lp;
  size_t from;    /* next start offset */
  ptrdiff_t last; /* end offset of the last match, -1 before the first */
} gmatch_state;

static int gmatch_next(lua_State *L) {
  mbxV_cstack_check(L);
  gmatch_state *g = lua_touserdata(L, lua_upvalueindex(3));
  const char *s = g->s, *p = g->p;
  size_t ls = g->ls, lp = g->lp;
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  for (const char *at = s + g->from; at <= m.src_end; at++) {
    matcher_reset(&m);
    const char *e = match_here(&m, at, p);
    /* An empty match right where the previous one ended is skipped ("a*" over "ab"). */
    if (e && e - s != g->last) {
      g->from = (size_t)(e - s);
      g->last = e - s;
      charge_pending(&m);
      return push_captures(&m, at, e);
    }
  }
  g->from = ls + 1; /* spent: a later call finds nothing at once, as stock */
  charge_pending(&m);
  return 0;
}

static int str_gmatch(lua_State *L) {
  size_t ls;
  luaL_checklstring(L, 1, &ls);
  luaL_checkstring(L, 2);
  size_t init = start_offset(luaL_optinteger(L, 3, 1), ls);
  if (init > ls) init = ls + 1; /* past the end: the iterator finds nothing */
  lua_settop(L, 2);
  gmatch_state *g = lua_newuserdatauv(L, sizeof *g, 0);
  g->s = lua_tolstring(L, 1, &g->ls);
  g->p = lua_tolstring(L, 2, &g->lp);
  g->from = init;
  g->last = -1;
  lua_pushcclosure(L, gmatch_next, 3);
  return 1;
}

/* ---- gsub -------------------------------------------------------------------------------- */

static void append(matcher *m, luaL_Buffer *b, const char *text, size_t len) {
  luaL_addlstring(b, text, len);
  count_bytes(m, len);
}

/* Append the replacement string (argument 3) for the match [s, e): "%0" is the match,
   "%1".."%9" captures, "%%" a percent sign; any other '%' is an error. */
static void append_expansion(matcher *m, luaL_Buffer *b, const char *s, const char *e) {
  lua_State *L = m->L;
  size_t len;
  const char *r = lua_tolstring(L, 3, &len);
  const char *end = r + len;
  count_steps(m, 1);
  for (;;) {
    const char *pct = memchr(r, '%', (size_t)(end - r));
    if (pct == NULL) break;
    append(m, b, r, (size_t)(pct - r));
    int c = pct + 1 < end ? uchar(pct[1]) : 0;
    if (c == '%') {
      append(m, b, "%", 1);
    } else if (c == '0') {
      append(m, b, s, (size_t)(e - s));
    } else if (isdigit(c)) {
      const char *text;
      ptrdiff_t n = capture_value(m, c - '1', s, e, &text);
      if (n == CAP_POSITION) {
        luaL_addvalue(b); /* the position capture pushed by capture_value */
        count_bytes(m, 8);
      } else {
        append(m, b, text, (size_t)n);
      }
    } else {
      luaL_error(L, "invalid use of '%%' in replacement string");
    }
    r = pct + 2;
  }
  append(m, b, r, (size_t)(end - r));
}

/* Append the replacement for the match [s, e) by the kind of argument 3. Returns whether the
   match was replaced (false or nil from a table or function keeps the original text).
   A function or an __index runs guest code: the count hook meters it. It is a plain
   lua_call, not lua_callk: the matcher state and the luaL_Buffer live in this C frame and
   cannot survive a yield, so a coroutine.yield (or a later host-function pause) inside a
   gsub callback raises "attempt to yield across a C-call boundary", as in stock Lua. */
static int append_replacement(matcher *m, luaL_Buffer *b, const char *s, const char *e, int kind) {
  lua_State *L = m->L;
  if (kind == LUA_TFUNCTION) {
    lua_pushvalue(L, 3);
    int n = push_captures(m, s, e);
    lua_call(L, n, 1);
  } else if (kind == LUA_TTABLE) {
    push_capture(m, 0, s, e);
    lua_gettable(L, 3);
  } else {
    append_expansion(m, b, s, e);
    return 1;
  }
  if (!lua_toboolean(L, -1)) {
    lua_pop(L, 1);
    append(m, b, s, (size_t)(e - s));
    return 0;
  }
  if (!lua_isstring(L, -1))
    return luaL_error(L, "invalid replacement value (a %s)", luaL_typename(L, -1));
  size_t len;
  lua_tolstring(L, -1, &len);
  count_bytes(m, len);
  luaL_addvalue(b);
  return 1;
}

static int str_gsub(lua_State *L) {
  size_t ls, lp;
  mbxV_cstack_check(L);
  const char *s = luaL_checklstring(L, 1, &ls);
  const char *p = luaL_checklstring(L, 2, &lp);
  int kind = lua_type(L, 3);
  lua_Integer max_n = luaL_optinteger(L, 4, (lua_Integer)ls + 1);
  luaL_argexpected(
      L, kind == LUA_TNUMBER || kind == LUA_TSTRING || kind == LUA_TFUNCTION || kind == LUA_TTABLE,
      3, "string/function/table");
  int anchored = lp > 0 && *p == '^';
  if (anchored) {
    p++;
    lp--;
  }
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  matcher m;
  matcher_init(&m, L, s, ls, p, lp);
  const char *at = s, *last = NULL;
  lua_Integer n = 0;
  int changed = 0;
  while (n < max_n) {
    matcher_reset(&m);
    const char *e = match_here(&m, at, p);
    if (e && e != last) { /* no empty match right after the previous match */
      n++;
      changed |= append_replacement(&m, &b, at, e, kind);
      at = last = e;
    } else if (at < m.src_end) {
      luaL_addchar(&b, *at++);
      count_bytes(&m, 1);
    } else {
      break;
    }
    if (anchored) break;
  }
  if (!changed) {
    lua_pushvalue(L, 1); /* nothing replaced: the subject itself, no copy */
  } else {
    append(&m, &b, at, (size_t)(m.src_end - at));
    luaL_pushresult(&b);
  }
  charge_pending(&m);
  lua_pushinteger(L, n);
  return 2;
}

void mbxL_install_patterns(lua_State *L, int lib) {
  static const luaL_Reg functions[] = {{"find", str_find},
                                       {"match", str_match},
                                       {"gmatch", str_gmatch},
                                       {"gsub", str_gsub},
                                       {NULL, NULL}};
  lib = lua_absindex(L, lib);
  lua_pushvalue(L, lib);
  luaL_setfuncs(L, functions, 0);
  lua_pop(L, 1);
}
