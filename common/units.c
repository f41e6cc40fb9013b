/* common/units.c -- the values of settings as docs/vocabulary.md writes them: sizes, durations,
   counts, epochs and seeds, and the messages that quote a user's value back. */
#include "common/units.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/*
** Values are parsed by hand rather than with strtoull/strtod: those skip leading blanks,
** accept "-5" as a huge unsigned number, round "1.1e-9" silently and depend on the locale.
** A limit is a security setting, so a value is either exactly what was written or an error.
*/

#define SIZE_HINT "use a number with an optional k, M, G or T suffix, e.g. 64M"
#define DURATION_HINT                                                                              \
  "use a number with a unit: ms, s, m or h, e.g. 500ms, 1.5s or 2m; 0 means no limit"
#define COUNT_HINT "use a whole number such as 1000000 or 1e9; 0 means no limit"

typedef struct unit {
  const char *name; /* lowercase; matched case-insensitively */
  uint64_t scale;
} unit;

static const unit size_units[] = {
    {"", 1},
    {"b", 1},
    {"k", 1024},
    {"kb", 1024},
    {"kib", 1024},
    {"m", 1024 * 1024},
    {"mb", 1024 * 1024},
    {"mib", 1024 * 1024},
    {"g", 1024 * 1024 * 1024},
    {"gb", 1024 * 1024 * 1024},
    {"gib", 1024 * 1024 * 1024},
    {"t", 1024ull * 1024 * 1024 * 1024},
    {"tb", 1024ull * 1024 * 1024 * 1024},
    {"tib", 1024ull * 1024 * 1024 * 1024},
};

static const unit duration_units[] = {
    {"ms", 1}, {"s", 1000}, {"m", 60 * 1000}, {"min", 60 * 1000}, {"h", 60 * 60 * 1000},
};

/* A decimal number as written, "12.50" = digits "12" and "50". */
typedef struct decimal_text {
  const char *int_digits;
  size_t int_len;
  const char *frac_digits;
  size_t frac_len;
} decimal_text;

typedef enum value_check { VALUE_OK, VALUE_TOO_LARGE, VALUE_NOT_WHOLE } value_check;

/* ---------------------------------------------------------------------------------------- */
/* Messages                                                                                  */

void mbxU_msg(char *msg, size_t msg_size, const char *fmt, ...) {
  va_list ap;
  if (msg == NULL || msg_size == 0) return;
  va_start(ap, fmt);
  (void)vsnprintf(msg, msg_size, fmt, ap);
  va_end(ap);
}

/*
** Copies a user's value for quoting in a message: control bytes become '?' (a value is echoed
** to a terminal, and escape sequences in it could rewrite what the user sees) and a long
** value is cut at a UTF-8 boundary and marked with "...".
*/
void mbxU_quote(const char *text, char *buf, size_t size) {
  size_t len = strlen(text), n = len, i;
  int cut = 0;
  if (n > MBXU_QUOTE_MAX || n > size - 4) {
    n = MBXU_QUOTE_MAX < size - 4 ? MBXU_QUOTE_MAX : size - 4;
    while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
      n--;
    cut = 1;
  }
  for (i = 0; i < n; i++) {
    unsigned char c = (unsigned char)text[i];
    buf[i] = (c < 0x20 || c == 0x7F) ? '?' : (char)c;
  }
  if (cut) {
    memcpy(buf + n, "...", 3);
    n += 3;
  }
  buf[n] = '\0';
}

/* ---------------------------------------------------------------------------------------- */
/* Numbers                                                                                   */

static int is_digit(char c) {
  return c >= '0' && c <= '9';
}

static char lower(char c) {
  return (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
}

static int equals_ignore_case(const char *a, const char *lowercase) {
  for (; *a != '\0' && *lowercase != '\0'; a++, lowercase++) {
    if (lower(*a) != *lowercase) return 0;
  }
  return *a == '\0' && *lowercase == '\0';
}

/* Scans DIGITS[.DIGITS] at p; returns the end, or NULL when p does not start with a digit or
   the point is not followed by one ("1." and ".5" are refused as likely typos). */
static const char *scan_decimal(const char *p, decimal_text *d) {
  d->int_digits = p;
  while (is_digit(*p))
    p++;
  d->int_len = (size_t)(p - d->int_digits);
  d->frac_digits = p;
  d->frac_len = 0;
  if (d->int_len == 0) return NULL;
  if (*p == '.') {
    d->frac_digits = ++p;
    while (is_digit(*p))
      p++;
    d->frac_len = (size_t)(p - d->frac_digits);
    if (d->frac_len == 0) return NULL;
  }
  return p;
}

static int mul_overflows(uint64_t a, uint64_t b, uint64_t *out) {
  if (a != 0 && b > UINT64_MAX / a) return 1;
  *out = a * b;
  return 0;
}

/*
** Exactly d * scale * 10^exp10 as a whole number. The digits are gathered into one integer N
** and the result is N * scale / 10^k. Because N * scale is formed first, a value with a fraction
** within a factor 10^k of 2^64 is reported too large although it would fit; no limit is
** anywhere near that range, so the simpler arithmetic is worth it.
*/
static value_check decimal_value(const decimal_text *d, uint64_t scale, long exp10, uint64_t *out) {
  size_t frac_len = d->frac_len, i;
  uint64_t n = 0, product;
  long shift;
  while (frac_len > 0 && d->frac_digits[frac_len - 1] == '0')
    frac_len--; /* "1.50" is "1.5": trailing zeros never make a value inexact */
  for (i = 0; i < d->int_len + frac_len; i++) {
    char c = i < d->int_len ? d->int_digits[i] : d->frac_digits[i - d->int_len];
    if (mul_overflows(n, 10, &n) || n > UINT64_MAX - (uint64_t)(c - '0')) return VALUE_TOO_LARGE;
    n += (uint64_t)(c - '0');
  }
  if (n == 0) {
    *out = 0;
    return VALUE_OK;
  }
  shift = exp10 - (long)frac_len;
  for (; shift > 0; shift--) {
    if (mul_overflows(n, 10, &n)) return VALUE_TOO_LARGE;
  }
  if (mul_overflows(n, scale, &product)) return VALUE_TOO_LARGE;
  if (shift < 0) {
    uint64_t divisor = 1;
    /* product < 2^64 < 10^20, so a nonzero product is never a multiple of 10^20. */
    if (shift < -19) return VALUE_NOT_WHOLE;
    for (; shift < 0; shift++)
      divisor *= 10;
    if (product % divisor != 0) return VALUE_NOT_WHOLE;
    product /= divisor;
  }
  *out = product;
  return VALUE_OK;
}

static const unit *find_unit(const unit *units, size_t count, const char *name) {
  size_t i;
  for (i = 0; i < count; i++) {
    if (equals_ignore_case(name, units[i].name)) return &units[i];
  }
  return NULL;
}

/* The checks every kind of value shares; returns 1 when the value was refused. */
static int refuse_blank_or_negative(const char *option, const char *text, const char *hint,
                                    char *msg, size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  if (text[0] == '\0') {
    mbxU_msg(msg, msg_size, "%s: empty value (%s)", option, hint);
    return 1;
  }
  if (text[0] == '-' && is_digit(text[1])) {
    mbxU_quote(text, quoted, sizeof quoted);
    mbxU_msg(msg, msg_size, "%s: '%s' is negative (%s)", option, quoted, hint);
    return 1;
  }
  return 0;
}

int mbxU_parse_size(const char *option, const char *text, uint64_t *out, char *msg,
                    size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  const unit *u;
  if (refuse_blank_or_negative(option, text, SIZE_HINT, msg, msg_size)) return -1;
  mbxU_quote(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  u = end ? find_unit(size_units, sizeof size_units / sizeof size_units[0], end) : NULL;
  if (u == NULL) {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a size (%s)", option, quoted, SIZE_HINT);
    return -1;
  }
  switch (decimal_value(&d, u->scale, 0, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    mbxU_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, SIZE_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  mbxU_msg(msg, msg_size, "%s: '%s' is not a whole number of bytes (%s)", option, quoted,
           SIZE_HINT);
  return -1;
}

int mbxU_parse_duration(const char *option, const char *text, uint64_t *out, char *msg,
                        size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  const unit *u;
  uint64_t value;
  if (refuse_blank_or_negative(option, text, DURATION_HINT, msg, msg_size)) return -1;
  mbxU_quote(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  if (end != NULL && *end == '\0') {
    /* "--timeout 5" is ambiguous (5 s? 5 ms?); only 0 means the same in every unit. */
    if (decimal_value(&d, 1, 0, &value) == VALUE_OK && value == 0) {
      *out = 0;
      return 0;
    }
    mbxU_msg(msg, msg_size, "%s: '%s' has no unit (write e.g. %sms or %ss; 0 means no limit)",
             option, quoted, quoted, quoted);
    return -1;
  }
  u = end ? find_unit(duration_units, sizeof duration_units / sizeof duration_units[0], end) : NULL;
  if (u == NULL) {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a duration (%s)", option, quoted, DURATION_HINT);
    return -1;
  }
  switch (decimal_value(&d, u->scale, 0, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    mbxU_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, DURATION_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  mbxU_msg(msg, msg_size, "%s: '%s' is not a whole number of milliseconds (%s)", option, quoted,
           DURATION_HINT);
  return -1;
}

int mbxU_parse_count(const char *option, const char *text, uint64_t *out, char *msg,
                     size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  decimal_text d;
  const char *end;
  long exp10 = 0;
  if (refuse_blank_or_negative(option, text, COUNT_HINT, msg, msg_size)) return -1;
  mbxU_quote(text, quoted, sizeof quoted);
  end = scan_decimal(text, &d);
  if (end != NULL && (*end == 'e' || *end == 'E')) {
    int negative = 0;
    end++;
    if (*end == '+' || *end == '-') negative = *end++ == '-';
    if (!is_digit(*end)) {
      end = NULL;
    } else {
      /* Clamped: past 10^100 the result is too large (or not whole) either way. */
      for (; is_digit(*end); end++) {
        if (exp10 < 100) exp10 = exp10 * 10 + (*end - '0');
      }
      if (negative) exp10 = -exp10;
    }
  }
  if (end == NULL || *end != '\0') {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a count (%s)", option, quoted, COUNT_HINT);
    return -1;
  }
  switch (decimal_value(&d, 1, exp10, out)) {
  case VALUE_OK:
    return 0;
  case VALUE_TOO_LARGE:
    mbxU_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, COUNT_HINT);
    return -1;
  case VALUE_NOT_WHOLE:
    break;
  }
  mbxU_msg(msg, msg_size, "%s: '%s' is not a whole number (%s)", option, quoted, COUNT_HINT);
  return -1;
}

#define EPOCH_HINT "use whole seconds since 1970-01-01 UTC, e.g. 1700000000"

int mbxU_parse_epoch(const char *option, const char *text, int64_t *out, char *msg,
                     size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  const char *p = text;
  int negative = 0;
  uint64_t magnitude = 0;
  mbxU_quote(text, quoted, sizeof quoted);
  if (text[0] == '\0') {
    mbxU_msg(msg, msg_size, "%s: empty value (%s)", option, EPOCH_HINT);
    return -1;
  }
  if (*p == '-') {
    negative = 1;
    p++;
  }
  if (!is_digit(*p)) {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a time (%s)", option, quoted, EPOCH_HINT);
    return -1;
  }
  for (; is_digit(*p); p++) {
    /* 2^63 fits the magnitude of INT64_MIN; anything larger is refused. */
    if (magnitude > ((uint64_t)1 << 63) / 10 ||
        magnitude * 10 + (uint64_t)(*p - '0') > ((uint64_t)1 << 63)) {
      mbxU_msg(msg, msg_size, "%s: '%s' is too large (%s)", option, quoted, EPOCH_HINT);
      return -1;
    }
    magnitude = magnitude * 10 + (uint64_t)(*p - '0');
  }
  if (*p != '\0' || (!negative && magnitude == ((uint64_t)1 << 63))) {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a time (%s)", option, quoted, EPOCH_HINT);
    return -1;
  }
  if (negative)
    *out = magnitude == ((uint64_t)1 << 63) ? INT64_MIN : -(int64_t)magnitude;
  else
    *out = (int64_t)magnitude;
  return 0;
}

#define SEED_HINT "use a whole number, e.g. 42"

int mbxU_parse_seed(const char *option, const char *text, uint64_t *out, char *msg,
                    size_t msg_size) {
  char quoted[MBXU_QUOTE_MAX + 4];
  const char *p = text;
  uint64_t value = 0;
  mbxU_quote(text, quoted, sizeof quoted);
  if (text[0] == '-') {
    /* A negative seed is the same 64 bits as math.randomseed(-N) uses. */
    int64_t negative;
    if (mbxU_parse_epoch(option, text, &negative, msg, msg_size) != 0) {
      mbxU_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
      return -1;
    }
    *out = (uint64_t)negative;
    return 0;
  }
  if (!is_digit(*p)) {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
    return -1;
  }
  for (; is_digit(*p); p++) {
    if (mul_overflows(value, 10, &value) || value > UINT64_MAX - (uint64_t)(*p - '0')) {
      mbxU_msg(msg, msg_size, "%s: '%s' is too large (at most 2^64 - 1)", option, quoted);
      return -1;
    }
    value += (uint64_t)(*p - '0');
  }
  if (*p != '\0') {
    mbxU_msg(msg, msg_size, "%s: '%s' is not a seed (%s)", option, quoted, SEED_HINT);
    return -1;
  }
  *out = value;
  return 0;
}
