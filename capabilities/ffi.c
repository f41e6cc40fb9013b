/* capabilities/ffi.c -- signature parsing and prepared libffi calls of bound native functions. */
#include "capabilities/ffi.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ffi.h>

/* The scalar letters: valid as arguments and as the return type. */
static const char scalar_letters[] = "bcCsSiIlLfd";

struct mbxC_native {
  atomic_size_t refs;
  mbxC_ffi_sig sig;
  void (*fn)(void);
  ffi_cif cif; /* points into arg_types: the binding never moves once prepared */
  ffi_type *arg_types[MBXC_FFI_MAX_ARGS + 2]; /* + the 'o' buffer and its capacity */
};

static int is_scalar(char c) {
  return c != '\0' && strchr(scalar_letters, c) != NULL;
}

/* A byte for a message: 'x', or '\x01' for one that would not print. */
static const char *show_byte(char c, char buf[8]) {
  unsigned char u = (unsigned char)c;
  if (u >= 0x21 && u < 0x7f)
    snprintf(buf, 8, "'%c'", c);
  else
    snprintf(buf, 8, "'\\x%02x'", u);
  return buf;
}

/* The signature as messages quote it: cut, because the error record holds 256 bytes. */
#define QUOTE_MAX 40

int mbxC_ffi_parse(const char *text, mbxC_ffi_sig *sig, char *why, size_t why_size) {
  memset(sig, 0, sizeof *sig);
  if (text == NULL || text[0] == '\0') {
    snprintf(why, why_size,
             "signature is empty: expected a return type, then the argument types in "
             "parentheses, e.g. 'd(dd)'");
    return -1;
  }
  int q = (int)strnlen(text, QUOTE_MAX);
  const char *ellipsis = text[q] ? "..." : "";
  char shown[8];
  char r = text[0];
  if (r == 'z') {
    snprintf(why, why_size,
             "signature '%.*s%s': 'z' at byte 1 is an argument type only; return a string "
             "with 'o' (size_t fn(..., char *buf, size_t cap))",
             q, text, ellipsis);
    return -1;
  }
  if (!is_scalar(r) && r != 'v' && r != 'o') {
    snprintf(why, why_size, "signature '%.*s%s': unknown type %s at byte 1 (use %s)", q, text,
             ellipsis, show_byte(r, shown), MBXC_FFI_ALPHABET);
    return -1;
  }
  sig->ret = r;
  if (text[1] != '(') {
    if (text[1] == '\0')
      snprintf(why, why_size,
               "signature '%.*s%s': expected '(' at byte 2 after the return type, found the end", q,
               text, ellipsis);
    else
      snprintf(why, why_size,
               "signature '%.*s%s': expected '(' at byte 2 after the return type, found %s", q,
               text, ellipsis, show_byte(text[1], shown));
    return -1;
  }
  size_t i = 2;
  for (;; i++) {
    char c = text[i];
    if (c == ')') break;
    if (c == '\0') {
      snprintf(why, why_size, "signature '%.*s%s': expected ')' at byte %zu, found the end", q,
               text, ellipsis, i + 1);
      return -1;
    }
    if (c == 'v') {
      snprintf(why, why_size,
               "signature '%.*s%s': 'v' at byte %zu is a return type only (a function without "
               "arguments is written '%c()')",
               q, text, ellipsis, i + 1, r);
      return -1;
    }
    if (c == 'o') {
      snprintf(why, why_size,
               "signature '%.*s%s': 'o' at byte %zu is a return type only (moonbox adds the "
               "output buffer)",
               q, text, ellipsis, i + 1);
      return -1;
    }
    if (!is_scalar(c) && c != 'z') {
      snprintf(why, why_size, "signature '%.*s%s': unknown type %s at byte %zu (use %s)", q, text,
               ellipsis, show_byte(c, shown), i + 1, MBXC_FFI_ALPHABET);
      return -1;
    }
    if (sig->nargs == MBXC_FFI_MAX_ARGS) {
      snprintf(why, why_size, "signature '%.*s%s': more than %d arguments at byte %zu", q, text,
               ellipsis, MBXC_FFI_MAX_ARGS, i + 1);
      return -1;
    }
    sig->args[sig->nargs++] = c;
  }
  if (text[i + 1] != '\0') {
    snprintf(why, why_size, "signature '%.*s%s': unexpected %s at byte %zu after ')'", q, text,
             ellipsis, show_byte(text[i + 1], shown), i + 2);
    return -1;
  }
  return 0;
}

static ffi_type *size_type(void) {
  return sizeof(size_t) == 8 ? &ffi_type_uint64 : &ffi_type_uint32;
}

/* The libffi type of a letter. bool is one byte in the ABIs libffi supports (SysV, AAPCS). */
static ffi_type *ffi_type_of(char letter) {
  if (letter == 'o') return size_type();
  switch (letter) {
#define FFI_TYPE_CASE(t, m, ct, ft, name, bits, sgn, where)                                        \
  case t:                                                                                          \
    return &ffi_type_##ft;
    MBXC_FFI_TYPES(FFI_TYPE_CASE)
#undef FFI_TYPE_CASE
  default:
    return NULL;
  }
}

mbxC_native *mbxC_native_new(const char *signature, void (*fn)(void), int *status, char *why,
                             size_t why_size) {
  mbxC_ffi_sig sig;
  if (mbxC_ffi_parse(signature, &sig, why, why_size) != 0) {
    *status = MBXC_FFI_INVALID;
    return NULL;
  }
  mbxC_native *n = calloc(1, sizeof *n);
  if (n == NULL) {
    *status = MBXC_FFI_NO_MEMORY;
    return NULL;
  }
  atomic_init(&n->refs, 1);
  n->sig = sig;
  n->fn = fn;
  unsigned nargs = (unsigned)sig.nargs;
  for (unsigned i = 0; i < nargs; i++)
    n->arg_types[i] = ffi_type_of(sig.args[i]);
  if (sig.ret == 'o') {
    n->arg_types[nargs++] = &ffi_type_pointer; /* char *buf */
    n->arg_types[nargs++] = size_type();       /* size_t cap */
  }
  ffi_status prepared =
      ffi_prep_cif(&n->cif, FFI_DEFAULT_ABI, nargs, ffi_type_of(sig.ret), n->arg_types);
  if (prepared != FFI_OK) {
    snprintf(why, why_size, "signature '%s': libffi cannot prepare the call (ffi_status %d)",
             signature, (int)prepared);
    free(n);
    *status = MBXC_FFI_INVALID;
    return NULL;
  }
  *status = 0;
  return n;
}

mbxC_native *mbxC_native_ref(mbxC_native *n) {
  atomic_fetch_add(&n->refs, 1);
  return n;
}

void mbxC_native_unref(mbxC_native *n) {
  if (n != NULL && atomic_fetch_sub(&n->refs, 1) == 1) free(n);
}

const mbxC_ffi_sig *mbxC_native_sig(const mbxC_native *n) {
  return &n->sig;
}

void mbxC_native_call(const mbxC_native *n, const mbxC_ffi_value *args, char *out, size_t out_cap,
                      mbxC_ffi_value *ret) {
  void *values[MBXC_FFI_MAX_ARGS + 2];
  int nargs = n->sig.nargs;
  for (int i = 0; i < nargs; i++)
    values[i] = (void *)&args[i]; /* libffi only reads them */
  if (n->sig.ret == 'o') {
    values[nargs] = &out;
    values[nargs + 1] = &out_cap;
  }
  /* libffi widens integral results narrower than a register to ffi_arg: read those through
     it; wider ones (and floating point) are stored as their own type. */
  union {
    ffi_arg word;
    mbxC_ffi_value value;
  } rv;
  memset(&rv, 0, sizeof rv);
  ffi_call((ffi_cif *)&n->cif, n->fn, &rv, values);
  if (n->sig.ret == 'v') return;
  if (n->sig.ret == 'b') {
    ret->b = (uint8_t)rv.word != 0;
    return;
  }
  int is_signed, bits = mbxC_ffi_int_bits(n->sig.ret, &is_signed);
  if (n->sig.ret != 'o' && (bits == 0 || bits == 64)) {
    *ret = rv.value; /* l L f d: stored as their own type */
    return;
  }
  switch (n->sig.ret) {
#define FFI_NARROW_CASE(t, m, ct, ft, name, bits_, sgn, where)                                     \
  case t:                                                                                          \
    ret->m = (ct)rv.word;                                                                          \
    break;
    MBXC_FFI_TYPES(FFI_NARROW_CASE)
#undef FFI_NARROW_CASE
  default:
    break;
  }
}
