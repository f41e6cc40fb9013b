/* tests/capabilities/test_ffi.c -- unit tests of capabilities/ffi.c: the signature parser (every
   type, every error with its byte and text) and prepared calls of real C functions. */
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <math.h>

#include <cmocka.h>

#include "capabilities/ffi.h"
#include "capabilities/hostfn.h"
#include "capabilities/policy.h"
#include "host/policy_api.h"
#include "capabilities/port_local.h"

/* ---- the parser ---- */

static void parse_ok(const char *text, char ret, const char *args) {
  mbxC_ffi_sig sig;
  char why[256] = "";
  if (mbxC_ffi_parse(text, &sig, why, sizeof why) != 0) fail_msg("'%s' refused: %s", text, why);
  assert_int_equal(sig.ret, ret);
  assert_int_equal(sig.nargs, (int)strlen(args));
  assert_memory_equal(sig.args, args, strlen(args));
}

static void parse_bad(const char *text, const char *message) {
  mbxC_ffi_sig sig;
  char why[256] = "";
  assert_int_equal(mbxC_ffi_parse(text, &sig, why, sizeof why), -1);
  if (strcmp(why, message) != 0)
    fail_msg("'%s'\n  said     %s\n  expected %s", text ? text : "(null)", why, message);
}

static void every_type_parses(void **state) {
  (void)state;
  parse_ok("d(dd)", 'd', "dd");
  parse_ok("v()", 'v', "");
  parse_ok("o()", 'o', "");
  parse_ok("o(z)", 'o', "z");
  parse_ok("v(bcCsSiIlLfdz)", 'v', "bcCsSiIlLfdz");
  const char *returns = "bcCsSiIlLfd";
  for (const char *r = returns; *r; r++) {
    char text[8];
    snprintf(text, sizeof text, "%c(%c)", *r, *r);
    char arg[2] = {*r, 0};
    parse_ok(text, *r, arg);
  }
  parse_ok("i(iiiiiiiiiiiiiiii)", 'i', "iiiiiiiiiiiiiiii"); /* 16: the most */
  assert_string_equal(mbxC_ffi_type_name('c'), "int8");
  assert_string_equal(mbxC_ffi_type_name('L'), "uint64");
  assert_string_equal(mbxC_ffi_type_name('z'), "const char *");
}

static void every_error_names_its_byte(void **state) {
  (void)state;
  parse_bad(NULL, "signature is empty: expected a return type, then the argument types in "
                  "parentheses, e.g. 'd(dd)'");
  parse_bad("", "signature is empty: expected a return type, then the argument types in "
                "parentheses, e.g. 'd(dd)'");
  parse_bad("d(dx)",
            "signature 'd(dx)': unknown type 'x' at byte 4 (use v b c C s S i I l L f d z o)");
  parse_bad("p(d)",
            "signature 'p(d)': unknown type 'p' at byte 1 (use v b c C s S i I l L f d z o)");
  parse_bad("d(d\x01)", "signature 'd(d\x01)': unknown type '\\x01' at byte 4 (use v b c C s S "
                        "i I l L f d z o)");
  parse_bad("z(d)", "signature 'z(d)': 'z' at byte 1 is an argument type only; return a string "
                    "with 'o' (size_t fn(..., char *buf, size_t cap))");
  parse_bad("d", "signature 'd': expected '(' at byte 2 after the return type, found the end");
  parse_bad("dd)", "signature 'dd)': expected '(' at byte 2 after the return type, found 'd'");
  parse_bad("d(dd", "signature 'd(dd': expected ')' at byte 5, found the end");
  parse_bad("i(iv)", "signature 'i(iv)': 'v' at byte 4 is a return type only (a function "
                     "without arguments is written 'i()')");
  parse_bad("o(o)", "signature 'o(o)': 'o' at byte 3 is a return type only (moonbox adds the "
                    "output buffer)");
  parse_bad("d(dd) ", "signature 'd(dd) ': unexpected '\\x20' at byte 6 after ')'");
  parse_bad("d(dd)d", "signature 'd(dd)d': unexpected 'd' at byte 6 after ')'");
  parse_bad("i(iiiiiiiiiiiiiiiii)",
            "signature 'i(iiiiiiiiiiiiiiiii)': more than 16 arguments at byte 19");
  /* A long one is quoted cut, so the message fits the error record. */
  char longer[80];
  memset(longer, 'i', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  longer[1] = '(';
  mbxC_ffi_sig sig;
  char why[256];
  assert_int_equal(mbxC_ffi_parse(longer, &sig, why, sizeof why), -1);
  assert_non_null(strstr(why, "iiii...': more than 16 arguments at byte 19"));
}

static void natives_are_prepared_or_refused(void **state) {
  (void)state;
  int status = 99;
  char why[256];
  assert_null(mbxC_native_new("d(dx)", (void (*)(void))hypot, &status, why, sizeof why));
  assert_int_equal(status, MBXC_FFI_INVALID);
  mbxC_native *n = mbxC_native_new("d(dd)", (void (*)(void))hypot, &status, why, sizeof why);
  assert_non_null(n);
  assert_int_equal(status, 0);
  assert_int_equal(mbxC_native_sig(n)->nargs, 2);
  /* Shared by reference: the second unref frees it (ASan checks there is no leak). */
  assert_ptr_equal(mbxC_native_ref(n), n);
  mbxC_native_unref(n);
  mbxC_native_unref(n);
  mbxC_native_unref(NULL);
}

/* ---- calls ---- */

static mbxC_native *prepare(const char *signature, void (*fn)(void)) {
  int status;
  char why[256];
  mbxC_native *n = mbxC_native_new(signature, fn, &status, why, sizeof why);
  if (n == NULL) fail_msg("%s: %s", signature, why);
  return n;
}

/* What mix() saw, every type once. */
static struct {
  bool b;
  int8_t c;
  uint8_t C;
  int16_t s;
  uint16_t S;
  int32_t i;
  uint32_t I;
  int64_t l;
  uint64_t L;
  float f;
  double d;
  char z[32];
} seen;

static double mix(bool b, int8_t c, uint8_t C, int16_t s, uint16_t S, int32_t i, uint32_t I,
                  int64_t l, uint64_t L, float f, double d, const char *z) {
  seen.b = b, seen.c = c, seen.C = C, seen.s = s, seen.S = S, seen.i = i, seen.I = I;
  seen.l = l, seen.L = L, seen.f = f, seen.d = d;
  snprintf(seen.z, sizeof seen.z, "%s", z);
  return d * 2;
}

static int8_t neg8(int8_t x) {
  return (int8_t)-x;
}
static uint8_t max8(void) {
  return UINT8_MAX;
}
static int16_t min16(void) {
  return INT16_MIN;
}
static uint16_t max16(void) {
  return UINT16_MAX;
}
static int32_t min32(void) {
  return INT32_MIN;
}
static uint32_t max32(void) {
  return UINT32_MAX;
}
static int64_t min64(void) {
  return INT64_MIN;
}
static uint64_t max64(void) {
  return UINT64_MAX;
}
static bool is_even(int32_t x) {
  return x % 2 == 0;
}
static float halve(float x) {
  return x / 2;
}
static int last_set;
static void set_last(int32_t x) {
  last_set = x;
}

static int64_t sum16(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f, int64_t g,
                     int64_t h, int64_t i, int64_t j, int64_t k, int64_t l, int64_t m, int64_t n,
                     int64_t o, int64_t p) {
  return a + b + c + d + e + f + g + h + i + j + k + l + m + n + o + p;
}

static size_t greet(const char *who, int32_t times, char *buf, size_t cap) {
  size_t n = 0;
  for (int32_t t = 0; t < times; t++) {
    int w = snprintf(buf + n, cap - n, "hi %s;", who);
    if (w < 0 || (size_t)w >= cap - n) return cap;
    n += (size_t)w;
  }
  return n;
}

static size_t overlong(char *buf, size_t cap) {
  (void)buf;
  return cap + 1;
}

static void calls_every_type(void **state) {
  (void)state;
  mbxC_native *n = prepare("d(bcCsSiIlLfdz)", (void (*)(void))mix);
  mbxC_ffi_value a[12], r;
  a[0].b = 1, a[1].c = -128, a[2].C = 255, a[3].s = -32768, a[4].S = 65535;
  a[5].i = INT32_MIN, a[6].I = UINT32_MAX, a[7].l = INT64_MIN, a[8].L = UINT64_MAX;
  a[9].f = 1.5f, a[10].d = 2.25, a[11].z = "zed";
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_true(r.d == 4.5);
  assert_true(seen.b);
  assert_int_equal(seen.c, -128);
  assert_int_equal(seen.C, 255);
  assert_int_equal(seen.s, -32768);
  assert_int_equal(seen.S, 65535);
  assert_true(seen.i == INT32_MIN && seen.I == UINT32_MAX);
  assert_true(seen.l == INT64_MIN && seen.L == UINT64_MAX);
  assert_true(seen.f == 1.5f && seen.d == 2.25);
  assert_string_equal(seen.z, "zed");
  mbxC_native_unref(n);

  struct {
    const char *sig;
    void (*fn)(void);
  } returns[] = {{"C()", (void (*)(void))max8},  {"s()", (void (*)(void))min16},
                 {"S()", (void (*)(void))max16}, {"i()", (void (*)(void))min32},
                 {"I()", (void (*)(void))max32}, {"l()", (void (*)(void))min64},
                 {"L()", (void (*)(void))max64}};
  mbxC_ffi_value got[7];
  for (int i = 0; i < 7; i++) {
    n = prepare(returns[i].sig, returns[i].fn);
    mbxC_native_call(n, NULL, NULL, 0, &got[i]);
    mbxC_native_unref(n);
  }
  assert_int_equal(got[0].C, UINT8_MAX);
  assert_int_equal(got[1].s, INT16_MIN);
  assert_int_equal(got[2].S, UINT16_MAX);
  assert_true(got[3].i == INT32_MIN);
  assert_true(got[4].I == UINT32_MAX);
  assert_true(got[5].l == INT64_MIN);
  assert_true(got[6].L == UINT64_MAX);

  n = prepare("c(c)", (void (*)(void))neg8);
  a[0].c = 5;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_int_equal(r.c, -5);
  mbxC_native_unref(n);

  n = prepare("b(i)", (void (*)(void))is_even);
  a[0].i = 4;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_int_equal(r.b, 1);
  a[0].i = 7;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_int_equal(r.b, 0);
  mbxC_native_unref(n);

  n = prepare("f(f)", (void (*)(void))halve);
  a[0].f = 3.0f;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_true(r.f == 1.5f);
  mbxC_native_unref(n);

  n = prepare("v(i)", (void (*)(void))set_last);
  a[0].i = 42;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_int_equal(last_set, 42);
  mbxC_native_unref(n);

  n = prepare("l(llllllllllllllll)", (void (*)(void))sum16);
  mbxC_ffi_value sixteen[16];
  for (int i = 0; i < 16; i++)
    sixteen[i].l = (int64_t)1 << (i * 3);
  mbxC_native_call(n, sixteen, NULL, 0, &r);
  int64_t want = 0;
  for (int i = 0; i < 16; i++)
    want += (int64_t)1 << (i * 3);
  assert_true(r.l == want);
  mbxC_native_unref(n);
}

static void calls_libc(void **state) {
  (void)state;
  mbxC_native *n = prepare("d(dd)", (void (*)(void))hypot);
  mbxC_ffi_value a[2], r;
  a[0].d = 3, a[1].d = 4;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_true(r.d == 5.0);
  mbxC_native_unref(n);
#if LONG_MAX == INT64_MAX
  n = prepare("l(l)", (void (*)(void))labs);
  a[0].l = -1234567890123;
  mbxC_native_call(n, a, NULL, 0, &r);
  assert_true(r.l == 1234567890123);
  mbxC_native_unref(n);
#endif
}

static void output_strings(void **state) {
  (void)state;
  mbxC_native *n = prepare("o(zi)", (void (*)(void))greet);
  mbxC_ffi_value a[2], r;
  a[0].z = "bob", a[1].i = 2;
  char buf[64];
  mbxC_native_call(n, a, buf, sizeof buf, &r);
  assert_int_equal(r.o, 14);
  assert_memory_equal(buf, "hi bob;hi bob;", 14);
  mbxC_native_unref(n);
}

/* Through the port, as the stdlib calls: the buffer is the port's, and a length past it is
   refused with a message instead of reaching the guest. */
static void port_calls_natives(void **state) {
  (void)state;
  mbx_policy p;
  memset(&p, 0, sizeof p);
  mbxC_policy_defaults(&p);
  p.host_fns.rules = &mbxH_guest_names; /* what mbx_policy_new sets */
  char why[256];
  assert_int_equal(mbxC_hostfn_add_native(&p.host_fns, "m.greet",
                                          prepare("o(zi)", (void (*)(void))greet), why, sizeof why),
                   0);
  assert_int_equal(mbxC_hostfn_add_native(&p.host_fns, "m.overlong",
                                          prepare("o()", (void (*)(void))overlong), why,
                                          sizeof why),
                   0);
  assert_int_equal(mbxC_hostfn_add_native(&p.host_fns, "m.hypot",
                                          prepare("d(dd)", (void (*)(void))hypot), why, sizeof why),
                   0);
  /* The same namespace as host functions: a clash is refused and the caller keeps its ref. */
  mbxC_native *spare = prepare("d(dd)", (void (*)(void))hypot);
  assert_int_equal(mbxC_hostfn_add_native(&p.host_fns, "m", spare, why, sizeof why),
                   MBXC_HOSTFN_INVALID);
  assert_non_null(strstr(why, "clashes with 'm.greet'"));
  assert_int_equal(mbxC_hostfn_add_native(&p.host_fns, "string.x", spare, why, sizeof why),
                   MBXC_HOSTFN_INVALID);
  mbxC_native_unref(spare);

  mbxC_port_local pl;
  assert_int_equal(mbxC_port_local_init(&pl, &p), 0);
  mbxC_policy_clear(&p); /* the port's copy holds its own references */
  mbxC_ffi_value a[2], r;
  const char *bytes;
  size_t len;
  a[0].z = "al", a[1].i = 3;
  assert_int_equal(pl.port.native_call(pl.port.ud, 0, a, NULL, &r, &bytes, &len), MBXC_CALL_VALUE);
  assert_int_equal(len, 18);
  assert_memory_equal(bytes, "hi al;hi al;hi al;", 18);
  /* The whole buffer is usable: it is MBX_NATIVE_OUT_MAX bytes. */
  a[1].i = 100000;
  assert_int_equal(pl.port.native_call(pl.port.ud, 0, a, NULL, &r, &bytes, &len), MBXC_CALL_VALUE);
  assert_int_equal(len, MBX_NATIVE_OUT_MAX);
  assert_int_equal(pl.port.native_call(pl.port.ud, 1, a, NULL, &r, &bytes, &len), MBXC_CALL_ERROR);
  assert_string_equal(bytes, "m.overlong: the native function returned length 65537, more "
                             "than its 65536-byte buffer");
  assert_int_equal(len, strlen(bytes));
  a[0].d = 6, a[1].d = 8;
  assert_int_equal(pl.port.native_call(pl.port.ud, 2, a, NULL, &r, &bytes, &len), MBXC_CALL_VALUE);
  assert_true(r.d == 10.0);
  mbxC_port_local_free(&pl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_type_parses),
      cmocka_unit_test(every_error_names_its_byte),
      cmocka_unit_test(natives_are_prepared_or_refused),
      cmocka_unit_test(calls_every_type),
      cmocka_unit_test(calls_libc),
      cmocka_unit_test(output_strings),
      cmocka_unit_test(port_calls_natives),
  };
  return cmocka_run_group_tests_name("capabilities/ffi", tests, NULL, NULL);
}
