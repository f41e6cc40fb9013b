/* vm/names.c -- Lua's lexical rules for names: identifiers and reserved words. */
#include "vm/names.h"

#include <string.h>

static const char *const reserved_words[] = {
    "and",      "break",  "do",   "else", "elseif", "end",  "false", "for",
    "function", "goto",   "if",   "in",   "local",  "nil",  "not",   "or",
    "repeat",   "return", "then", "true", "until",  "while"};

int mbxV_is_reserved_word(const char *s, size_t n) {
  for (size_t i = 0; i < sizeof reserved_words / sizeof *reserved_words; i++)
    if (strlen(reserved_words[i]) == n && memcmp(reserved_words[i], s, n) == 0) return 1;
  return 0;
}

int mbxV_is_identifier(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    int alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return 0;
  }
  return !mbxV_is_reserved_word(s, n);
}
