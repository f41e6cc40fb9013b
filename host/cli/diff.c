/* host/cli/diff.c -- unified diffs (host/cli/diff.h says what and how far). */
#include "host/cli/diff.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

typedef struct line {
  const char *p;
  size_t n; /* with its '\n' when it has one */
  uint64_t h;
} line;

static line *split(const char *s, size_t len, size_t *count) {
  size_t n = 0;
  for (size_t i = 0; i < len; i++)
    n += s[i] == '\n';
  if (len && s[len - 1] != '\n') n++;
  line *l = malloc((n ? n : 1) * sizeof *l);
  if (l == NULL) return NULL;
  size_t k = 0, start = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '\n' || i + 1 == len) {
      l[k].p = s + start;
      l[k].n = i + 1 - start;
      l[k].h = XXH3_64bits(l[k].p, l[k].n);
      k++;
      start = i + 1;
    }
  }
  *count = n;
  return l;
}

static int same(const line *x, const line *y) {
  return x->h == y->h && x->n == y->n && memcmp(x->p, y->p, x->n) == 0;
}

enum { OP_EQ = 0, OP_DEL = 1, OP_INS = 2 };

/* The edit script of a[0..n) -> b[0..m) into ops (n + m entries at most), or -1 when the
   bounds were hit or memory ran out (the caller then prints the whole middle as changed). */
static long myers(const line *a, long n, const line *b, long m, unsigned char *ops) {
  if (n + m == 0) return 0;
  long max = n + m > MBXH_DIFF_MAX_EDITS ? MBXH_DIFF_MAX_EDITS : n + m;
  long width = 2 * max + 1;
  int32_t *v = calloc((size_t)width, sizeof *v);
  /* trace[d] is V after step d: (d+1)^2 entries in all (d is at most max). */
  int32_t **trace = calloc((size_t)max + 1, sizeof *trace);
  uint64_t steps = 0;
  long found = -1;
  if (v == NULL || trace == NULL) goto out;
  for (long d = 0; d <= max && found < 0; d++) {
    for (long k = -d; k <= d; k += 2) {
      long x;
      if (k == -d || (k != d && v[k - 1 + max] < v[k + 1 + max]))
        x = v[k + 1 + max];
      else
        x = v[k - 1 + max] + 1;
      long y = x - k;
      while (x < n && y < m && same(&a[x], &b[y])) {
        x++;
        y++;
        steps++;
      }
      steps++;
      v[k + max] = (int32_t)x;
      if (x >= n && y >= m) {
        found = d;
        break;
      }
    }
    trace[d] = malloc((size_t)(2 * d + 1) * sizeof **trace);
    if (trace[d] == NULL || steps > MBXH_DIFF_MAX_STEPS) {
      found = -1;
      break;
    }
    memcpy(trace[d], v + max - d, (size_t)(2 * d + 1) * sizeof *v);
  }
  if (found < 0) goto out;
  /* Walk back from (n, m), writing the ops from the end. */
  long x = n, y = m, at = n + m;
  long len = 0;
  for (long d = found; d > 0; d--) {
    const int32_t *pv = trace[d - 1]; /* index k -> pv[k + d - 1] */
    long k = x - y;
    long prev_k;
    if (k == -d || (k != d && pv[k - 1 + d - 1] < pv[k + 1 + d - 1]))
      prev_k = k + 1;
    else
      prev_k = k - 1;
    long prev_x = pv[prev_k + d - 1], prev_y = prev_x - prev_k;
    while (x > prev_x && y > prev_y) {
      ops[--at] = OP_EQ;
      x--;
      y--;
    }
    ops[--at] = prev_k == k + 1 ? OP_INS : OP_DEL;
    x = prev_x;
    y = prev_y;
  }
  while (x > 0 && y > 0) {
    ops[--at] = OP_EQ;
    x--;
    y--;
  }
  len = n + m - at;
  memmove(ops, ops + at, (size_t)len);
  found = len;
out:
  if (trace)
    for (long d = 0; d <= max; d++)
      free(trace[d]);
  free(trace);
  free(v);
  return found;
}

/* Where emitted text goes: the caller's sink, or only counted (the first pass). */
typedef struct emitter {
  mbxH_diff_sink put; /* NULL: count only */
  void *to;
  uint64_t bytes;
} emitter;

static void put(emitter *o, const char *p, size_t n) {
  o->bytes += n;
  if (o->put && n) o->put(o->to, p, n);
}

static void puts_(emitter *o, const char *s) {
  put(o, s, strlen(s));
}

static void put_range(emitter *out, long start, long count) {
  char t[64];
  if (count == 1)
    snprintf(t, sizeof t, "%ld", start + 1);
  else
    snprintf(t, sizeof t, "%ld,%ld", count == 0 ? start : start + 1, count);
  puts_(out, t);
}

static void put_line(emitter *out, char mark, const line *l) {
  put(out, &mark, 1);
  put(out, l->p, l->n);
  if (l->n == 0 || l->p[l->n - 1] != '\n') puts_(out, "\n\\ No newline at end of file\n");
}

static size_t count_lines(const char *s, size_t len) {
  size_t n = 0;
  for (const char *p = s, *end = s + len; p && p < end; n++) {
    p = memchr(p, '\n', (size_t)(end - p));
    if (p) p++;
  }
  return n;
}

/* Set aside what a and b share at both ends, in whole lines, but for the CONTEXT lines next
   to the first and the last difference; *skipped: the lines set aside at the start. */
#define CONTEXT 3
static void trim_common(const char **a, size_t *alen, const char **b, size_t *blen,
                        size_t *skipped) {
  const char *x = *a, *y = *b;
  size_t n = *alen < *blen ? *alen : *blen, pre = 0;
  while (pre < n && x[pre] == y[pre])
    pre++;
  /* Back to the start of the line the first difference is in, then CONTEXT lines more. */
  for (int lines = 0; pre > 0; pre--)
    if (x[pre - 1] == '\n' && lines++ == CONTEXT) break;
  size_t suf = 0, room = n - pre;
  while (suf < room && x[*alen - 1 - suf] == y[*blen - 1 - suf])
    suf++;
  /* Forward to a line start inside the shared end (one that starts a line in both: after a
     shared newline), then CONTEXT lines more. */
  size_t keep = 0;
  for (int lines = 0; keep < suf; keep++)
    if (x[*alen - suf + keep] == '\n' && lines++ == CONTEXT) {
      keep++;
      break;
    }
  suf = keep < suf ? suf - keep : 0;
  size_t lines = 0;
  for (size_t i = 0; i < pre; i++)
    lines += x[i] == '\n';
  *skipped = lines;
  if (pre) { /* an empty side may be NULL: no arithmetic on it */
    *a = x + pre;
    *b = y + pre;
  }
  *alen -= pre + suf;
  *blen -= pre + suf;
}

/* The headers and hunks of the edit script ops[0..len) of la -> lb. */
static void emit(emitter *out, const char *label_a, const char *label_b, const line *la,
                 const line *lb, const unsigned char *ops, size_t len, size_t skipped) {
  puts_(out, "--- ");
  puts_(out, label_a);
  puts_(out, "\n+++ ");
  puts_(out, label_b);
  puts_(out, "\n");
  /* Hunks: changes with at most 2 * 3 equal lines between them share one. */
  const size_t ctx = 3;
  size_t i = 0, ia = 0, ib = 0; /* op index and the line positions it stands at */
  while (i < len) {
    if (ops[i] == OP_EQ) {
      i++;
      ia++;
      ib++;
      continue;
    }
    /* A hunk starts ctx equal lines before this change (fewer at the top). */
    size_t back = 0;
    while (back < ctx && back < i && ops[i - 1 - back] == OP_EQ)
      back++;
    size_t start = i - back, sa = ia - back, sb = ib - back;
    size_t end = i, eqrun = 0;
    size_t ca = back, cb = back;
    while (end < len) {
      if (ops[end] == OP_EQ) {
        eqrun = 0;
        while (end + eqrun < len && ops[end + eqrun] == OP_EQ)
          eqrun++;
        if (end + eqrun == len || eqrun > 2 * ctx) {
          size_t tail = eqrun < ctx ? eqrun : ctx;
          ca += tail;
          cb += tail;
          end += tail;
          break;
        }
        ca += eqrun;
        cb += eqrun;
        end += eqrun;
      } else {
        if (ops[end] == OP_DEL)
          ca++;
        else
          cb++;
        end++;
      }
    }
    puts_(out, "@@ -");
    put_range(out, (long)(sa + skipped), (long)ca);
    puts_(out, " +");
    put_range(out, (long)(sb + skipped), (long)cb);
    puts_(out, " @@\n");
    size_t pa = sa, pb = sb;
    for (size_t j = start; j < end;) {
      if (ops[j] == OP_EQ) {
        put_line(out, ' ', &la[pa++]);
        pb++;
        j++;
        continue;
      }
      /* A run of changes: its removals, then its additions, as diff prints them. */
      size_t r = j;
      while (r < end && ops[r] != OP_EQ)
        r++;
      for (size_t q = j; q < r; q++)
        if (ops[q] == OP_DEL) put_line(out, '-', &la[pa++]);
      for (size_t q = j; q < r; q++)
        if (ops[q] == OP_INS) put_line(out, '+', &lb[pb++]);
      j = r;
    }
    ia = pa;
    ib = pb;
    i = end;
  }
}

int mbxH_diff_stream(const char *label_a, const char *a, size_t alen, const char *label_b,
                     const char *b, size_t blen, const mbxH_diff_limits *lim, mbxH_diff_sink sink,
                     void *to, uint64_t *size) {
  emitter out = {.put = sink, .to = to};
  *size = 0;
  if (alen == blen && (alen == 0 || memcmp(a, b, alen) == 0)) return MBXH_DIFF_SHOWN;
  if ((alen && memchr(a, '\0', alen)) || (blen && memchr(b, '\0', blen))) {
    emitter count = {0};
    for (emitter *o = &count; o; o = o == &count ? &out : NULL) {
      if (o == &out && count.bytes > lim->max_out) {
        *size = count.bytes;
        return MBXH_DIFF_TOO_LARGE;
      }
      puts_(o, "Binary files ");
      puts_(o, label_a);
      puts_(o, " and ");
      puts_(o, label_b);
      puts_(o, " differ\n");
    }
    *size = out.bytes;
    return MBXH_DIFF_SHOWN;
  }
  /* The bytes both share at the start and at the end are set aside before any line table is
     made (keeping the 3 lines of context a hunk shows): a line appended to a large file
     costs tables for a few lines, not for the file. */
  size_t skipped = 0;
  trim_common(&a, &alen, &b, &blen, &skipped);
  /* The line tables cost 24 bytes a line and the edit script one, on the host heap outside
     any guest limit: past the caller's budget (or MBXH_DIFF_MAX_LINES on either side) the
     files are only named, by the caller. */
  size_t na = count_lines(a, alen), nb = count_lines(b, blen);
  if (na > MBXH_DIFF_MAX_LINES || nb > MBXH_DIFF_MAX_LINES ||
      (uint64_t)(na + nb) * (sizeof(line) + 1) > lim->max_memory)
    return MBXH_DIFF_TOO_MANY_LINES;
  line *la = split(a, alen, &na), *lb = split(b, blen, &nb);
  unsigned char *ops = malloc(na + nb + 1);
  int rc = MBXH_DIFF_SHOWN;
  if (la == NULL || lb == NULL || ops == NULL) {
    rc = MBXH_DIFF_NO_MEMORY;
    goto done;
  }
  /* The common prefix and suffix cost one pass and shrink what the search sees. */
  size_t pre = 0, suf = 0;
  while (pre < na && pre < nb && same(&la[pre], &lb[pre]))
    pre++;
  while (suf < na - pre && suf < nb - pre && same(&la[na - 1 - suf], &lb[nb - 1 - suf]))
    suf++;
  size_t len = 0;
  memset(ops, OP_EQ, pre);
  len = pre;
  long mid = myers(la + pre, (long)(na - pre - suf), lb + pre, (long)(nb - pre - suf), ops + pre);
  if (mid < 0) {
    rc = MBXH_DIFF_FALLBACK;
    memset(ops + pre, OP_DEL, na - pre - suf);
    memset(ops + pre + (na - pre - suf), OP_INS, nb - pre - suf);
    mid = (long)(na + nb - 2 * (pre + suf));
  }
  len += (size_t)mid;
  memset(ops + len, OP_EQ, suf);
  len += suf;
  /* Counted first, written only when it fits: a diff is never cut in the middle (patch(1)
     would apply the part it got). */
  emitter count = {0};
  emit(&count, label_a, label_b, la, lb, ops, len, skipped);
  if (count.bytes > lim->max_out) {
    *size = count.bytes;
    rc = MBXH_DIFF_TOO_LARGE;
    goto done;
  }
  emit(&out, label_a, label_b, la, lb, ops, len, skipped);
  *size = out.bytes;
done:
  free(la);
  free(lb);
  free(ops);
  return rc;
}

static void buf_sink(void *b, const char *p, size_t n) {
  mbxU_buf_put(b, p, n);
}

int mbxH_diff_unified(const char *label_a, const char *a, size_t alen, const char *label_b,
                      const char *b, size_t blen, mbxU_buf *out) {
  mbxH_diff_limits unbounded = {.max_out = UINT64_MAX, .max_memory = UINT64_MAX};
  uint64_t size;
  int rc = mbxH_diff_stream(label_a, a, alen, label_b, b, blen, &unbounded, buf_sink, out, &size);
  if (rc == MBXH_DIFF_TOO_MANY_LINES) {
    mbxU_buf_puts(out, "Files ");
    mbxU_buf_puts(out, label_a);
    mbxU_buf_puts(out, " and ");
    mbxU_buf_puts(out, label_b);
    mbxU_buf_puts(out, " differ (more lines than --diff compares)\n");
    return 1;
  }
  if (rc == MBXH_DIFF_NO_MEMORY) out->failed = 1;
  return rc == MBXH_DIFF_FALLBACK;
}
