/* vm/names.h -- Lua's lexical rules for names: identifiers and reserved words. */
#ifndef MBX_VM_NAMES_H
#define MBX_VM_NAMES_H

#include <stddef.h>

/* 1 when s[0..n) is a name Lua's lexer reads as an identifier (letters, digits and '_', not
   starting with a digit; ASCII only, as in the C locale every run uses) and not a reserved
   word. Length limits are the caller's. */
int mbxV_is_identifier(const char *s, size_t n);
/* 1 when s[0..n) is one of Lua 5.4's reserved words. */
int mbxV_is_reserved_word(const char *s, size_t n);

#endif
