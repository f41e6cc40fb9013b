/* tests/stdlib/test_native.c -- unit tests of stdlib/native.c through the public API: native
   functions bound with mbx_policy_bind_native, their argument checks, results and limits. */
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

#include "moonbox.h"
#include "tests/support/snippet.h"

static int calls;

static int8_t id_c(int8_t x) {
  calls++;
  return x;
}
static uint8_t id_C(uint8_t x) {
  return x;
}
static int16_t id_s(int16_t x) {
  return x;
}
static uint16_t id_S(uint16_t x) {
  return x;
}
static int32_t id_i(int32_t x) {
  return x;
}
static uint32_t id_I(uint32_t x) {
  return x;
}
static int64_t id_l(int64_t x) {
  return x;
}
static uint64_t id_L(uint64_t x) {
  return x;
}
static bool negate(bool x) {
  return !x;
}
static float halve(float x) {
  return x / 2;
}
static uint32_t byte_count(const char *s) {
  return (uint32_t)strlen(s);
}
static void nothing(void) {
  calls++;
}

static size_t greet(const char *who, int32_t times, char *buf, size_t cap) {
  size_t n = 0;
  for (int32_t t = 0; t < times && n < cap; t++) {
    int w = snprintf(buf + n, cap - n, "hi %s;", who);
    if (w < 0 || (size_t)w >= cap - n) return cap;
    n += (size_t)w;
  }
  return n;
}

static size_t overlong(char *buf, size_t cap) {
  memset(buf, 'x', cap);
  return cap + 1;
}

static size_t with_nul(char *buf, size_t cap) {
  (void)cap;
  memcpy(buf, "a\0b", 3);
  return 3;
}

#define FN(f) ((void (*)(void))(f))

static void bind(mbx_policy *p, const char *name, const char *sig, void (*fn)(void)) {
  mbx_error err;
  if (mbx_policy_bind_native(p, name, sig, fn, &err) != MBX_OK)
    fail_msg("bind %s '%s': %s", name, sig, err.message);
}

static mbx_sandbox *native_sandbox(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  bind(p, "m.hypot", "d(dd)", FN(hypot));
  bind(p, "m.labs", "l(l)", FN(labs));
  bind(p, "m.int.c", "c(c)", FN(id_c));
  bind(p, "m.int.C", "C(C)", FN(id_C));
  bind(p, "m.int.s", "s(s)", FN(id_s));
  bind(p, "m.int.S", "S(S)", FN(id_S));
  bind(p, "m.int.i", "i(i)", FN(id_i));
  bind(p, "m.int.I", "I(I)", FN(id_I));
  bind(p, "m.int.l", "l(l)", FN(id_l));
  bind(p, "m.int.L", "L(L)", FN(id_L));
  bind(p, "m.negate", "b(b)", FN(negate));
  bind(p, "m.halve", "f(f)", FN(halve));
  bind(p, "m.bytes", "I(z)", FN(byte_count));
  bind(p, "m.greet", "o(zi)", FN(greet));
  bind(p, "m.overlong", "o()", FN(overlong));
  bind(p, "m.with_nul", "o()", FN(with_nul));
  bind(p, "nothing", "v()", FN(nothing));
  if (which) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p); /* the sandbox keeps its own references to the prepared calls */
  return sb;
}

static void check_in(mbx_sandbox *sb, const char *code, const char *json) {
  static snippet_outcome o;
  if (snippet_run_in(sb, code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

/* Calling from line 1 of a Lua function fails with exactly this message (an argument error
   carries the caller's position, as luaL_error gives it; where = "" for none). */
static void check_raises_at(mbx_sandbox *sb, const char *where, const char *call,
                            const char *message) {
  char code[512];
  snprintf(code, sizeof code, "local ok, e = pcall(function() return %s end) return ok, e", call);
  char want[512];
  snprintf(want, sizeof want, "[false,\"%s%s\"]", where, message);
  check_in(sb, code, want);
}

static void check_raises(mbx_sandbox *sb, const char *call, const char *message) {
  check_raises_at(sb, "input:1: ", call, message);
}

static void calls_return_lua_values(void **state) {
  (void)state;
  mbx_sandbox *sb = native_sandbox(0, 0);
  check_in(sb, "return m.hypot(3, 4) == 5.0, math.type(m.hypot(3, 4))", "[true,\"float\"]");
  check_in(sb, "return m.labs(-7), m.labs(math.mininteger + 1)", "[7,9223372036854775807]");
  check_in(sb, "return m.int.c(-128), m.int.C(255), m.int.s(-32768), m.int.S(65535)",
           "[-128,255,-32768,65535]");
  check_in(sb, "return m.int.i(-2147483648), m.int.I(4294967295), m.int.l(math.mininteger)",
           "[-2147483648,4294967295,-9223372036854775808]");
  /* Floats with an exact integer value are accepted; uint64 past maxinteger comes back as a
     float. */
  check_in(sb,
           "return m.int.c(3.0), m.int.L(math.maxinteger), m.int.L(2^63) == 2^63, "
           "math.type(m.int.L(2^63))",
           "[3,9223372036854775807,true,\"float\"]");
  check_in(sb, "return m.negate(false), m.negate(true), m.halve(3), m.bytes('h\\xffllo')",
           "[true,false,1.5,5]");
  check_in(sb, "return m.greet('bob', 2), #m.greet('x', 100000)", "[\"hi bob;hi bob;\",65536]");
  check_in(sb, "return m.with_nul() == 'a\\0b'", "true");
  check_in(sb, "return select('#', nothing())", "0");
  mbx_sandbox_free(sb);
}

static void arguments_are_checked(void **state) {
  (void)state;
  mbx_sandbox *sb = native_sandbox(0, 0);
  calls = 0;
  check_raises(sb, "m.hypot(3, '4')", "m.hypot: argument #2 must be a number (got string)");
  check_raises(sb, "m.hypot(3)", "m.hypot: argument #2 must be a number (got no value)");
  check_raises(sb, "m.hypot(3, 4, 5)", "m.hypot: too many arguments (takes 2, got 3)");
  check_raises(sb, "m.hypot(nil, 4)", "m.hypot: argument #1 must be a number (got nil)");
  check_raises(sb, "m.int.c(128)", "m.int.c: argument #1 out of range for int8 (-128..127)");
  check_raises(sb, "m.int.c(-129)", "m.int.c: argument #1 out of range for int8 (-128..127)");
  check_raises(sb, "m.int.c(1.5)", "m.int.c: argument #1 must be an integer for int8 (got 1.5)");
  check_in(sb,
           "local ok, e = pcall(m.int.c, 0/0) return ok, e:find('m.int.c: argument #1 must "
           "be an integer for int8 (got ', 1, true) == 1",
           "[false,true]"); /* NaN prints as nan or -nan */
  check_raises(sb, "m.int.c(1/0)", "m.int.c: argument #1 out of range for int8 (-128..127)");
  check_raises(sb, "m.int.c('1')", "m.int.c: argument #1 must be a number (got string)");
  check_raises(sb, "m.int.C(-1)", "m.int.C: argument #1 out of range for uint8 (0..255)");
  check_raises(sb, "m.int.C(256)", "m.int.C: argument #1 out of range for uint8 (0..255)");
  check_raises(sb, "m.int.s(32768)",
               "m.int.s: argument #1 out of range for int16 "
               "(-32768..32767)");
  check_raises(sb, "m.int.S(65536)", "m.int.S: argument #1 out of range for uint16 (0..65535)");
  check_raises(sb, "m.int.i(2^31)",
               "m.int.i: argument #1 out of range for int32 "
               "(-2147483648..2147483647)");
  check_raises(sb, "m.int.I(4294967296)",
               "m.int.I: argument #1 out of range for uint32 "
               "(0..4294967295)");
  check_raises(sb, "m.int.l(2^63)",
               "m.int.l: argument #1 out of range for int64 "
               "(-9223372036854775808..9223372036854775807)");
  check_raises(sb, "m.int.L(-1)",
               "m.int.L: argument #1 out of range for uint64 "
               "(0..18446744073709551615)");
  check_raises(sb, "m.int.L(2^64)",
               "m.int.L: argument #1 out of range for uint64 "
               "(0..18446744073709551615)");
  check_raises(sb, "m.negate(1)", "m.negate: argument #1 must be a boolean (got number)");
  check_raises(sb, "m.negate(nil)", "m.negate: argument #1 must be a boolean (got nil)");
  check_raises(sb, "m.halve({})", "m.halve: argument #1 must be a number (got table)");
  check_raises(sb, "m.bytes(12)", "m.bytes: argument #1 must be a string (got number)");
  check_raises(sb, "m.bytes('a\\0b')",
               "m.bytes: argument #1 contains a NUL byte (a const char * argument cannot)");
  check_raises(sb, "m.greet('x', 1.25)",
               "m.greet: argument #2 must be an integer for int32 (got 1.25)");
  check_raises(sb, "nothing(1)", "nothing: too many arguments (takes 0, got 1)");
  assert_int_equal(calls, 0); /* nothing was called with a refused argument */
  /* An 'o' function that claims more than its buffer: an error, and none of its bytes. */
  check_raises_at(sb, "", "m.overlong()",
                  "m.overlong: the native function returned length 65537, "
                  "more than its 65536-byte buffer");
  /* Not poisoned: these are ordinary runtime errors. */
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "m.int.c(1000)", &o), MBX_RUNTIME_ERROR);
  assert_non_null(strstr(o.value, "out of range for int8"));
  assert_int_equal(mbx_sandbox_poisoned(sb), 0);
  mbx_sandbox_free(sb);
}

static void names_and_modules(void **state) {
  (void)state;
  mbx_sandbox *sb = native_sandbox(0, 0);
  check_in(sb,
           "return require('m') == m, require('m').int == m.int, type(m.int.c), "
           "type(nothing)",
           "[true,true,\"function\",\"function\"]");
  /* Reset installs them again on the pristine state. */
  mbx_error err;
  check_in(sb, "m = nil return 1", "1");
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  check_in(sb, "return m.hypot(6, 8)", "10.0");
  mbx_sandbox_free(sb);
}

static mbx_status echo(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  return mbx_host_reply_json(reply, args, len);
}

static void binding_is_validated(void **state) {
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot", "d(dx)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_string_equal(err.message, "mbx_policy_bind_native: signature 'd(dx)': unknown type 'x' "
                                   "at byte 4 (use v b c C s S i I l L f d z o)");
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot", NULL, FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot", "d(dd)", NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_bind_native(NULL, "m.hypot", "d(dd)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  /* Names follow the host functions' rules, in the same namespace. */
  assert_int_equal(mbx_policy_bind_native(p, "math.hypot", "d(dd)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "shadow the built-in 'math'"));
  assert_int_equal(mbx_policy_bind_native(p, "m.end", "d(dd)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_function(p, "m.hypot", echo, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot", "d(dd)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "already defined"));
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot.x", "d(dd)", FN(hypot), &err),
                   MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "clashes"));
  assert_int_equal(mbx_policy_bind_native(p, "m.h2", "d(dd)", FN(hypot), &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "m.h2", &err), MBX_INVALID_ARGUMENT);
  /* Host and native functions side by side in one module. */
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  check_in(sb, "return m.hypot(1, 2), m.h2(3, 4)", "[[1,2],5.0]");
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
}

static void calls_are_counted_and_limited(void **state) {
  (void)state;
  mbx_sandbox *sb = native_sandbox(MBX_LIMIT_HOST_CALLS, 3);
  mbx_result *res = NULL;
  mbx_error err;
  const char *code = "for i = 1, 3 do m.hypot(i, i) end return 1";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_OK);
  mbx_usage u;
  mbx_result_usage(res, &u);
  assert_int_equal(u.host_calls, 3);
  mbx_result_free(res);
  code = "for i = 1, 10 do pcall(m.hypot, i, i) end return 1";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_HOST_CALL_LIMIT);
  assert_non_null(strstr(mbx_result_error_message(res, NULL), "host call limit exceeded (3"));
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_poisoned(sb), 1);
  mbx_sandbox_free(sb);
  /* Limit 0: the function is never reached. */
  sb = native_sandbox(MBX_LIMIT_HOST_CALLS, 0);
  calls = 0;
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "nothing()", &o), MBX_HOST_CALL_LIMIT);
  assert_int_equal(calls, 0);
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(calls_return_lua_values),
      cmocka_unit_test(arguments_are_checked),
      cmocka_unit_test(names_and_modules),
      cmocka_unit_test(binding_is_validated),
      cmocka_unit_test(calls_are_counted_and_limited),
  };
  return cmocka_run_group_tests_name("stdlib/native", tests, snippet_setup, snippet_teardown);
}
