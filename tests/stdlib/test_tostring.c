/* tests/stdlib/test_tostring.c -- unit tests of stdlib/tostring.c: mbxL_tolstring, the text of a
   value as guests see it (tostring, print, string.format's %s): __tostring and __name
   honoured, a keyed hash in place of every address. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"

/* ---- Running snippets: a fresh sandbox per snippet unless a test keeps its own. -------- */

static mbx_runtime *runtime;

/* What a run produced, copied out of the mbx_result so tests can assert after freeing it. */
typedef struct outcome {
  mbx_status status;
  char value[8192]; /* the value JSON when the run succeeded, else the full error message */
  char out[8192];   /* captured stdout (raw bytes, NUL-terminated) */
  size_t out_len;
  char err[8192]; /* captured stderr */
  size_t err_len;
} outcome;

static void copy_bytes(char *dst, size_t size, const char *src, size_t len) {
  if (len >= size) len = size - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

/* Run code in sb and fill *o. Returns the run status; fails the test on an API status. */
static mbx_status run_in(mbx_sandbox *sb, const char *code, outcome *o) {
  mbx_result *res = NULL;
  mbx_error err;
  memset(o, 0, sizeof *o);
  o->status = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (o->status >= MBX_API_ERROR_BASE)
    fail_msg("mbx_run refused %s: %s (%s)", code, mbx_status_name(o->status), err.message);
  assert_non_null(res);
  assert_int_equal(mbx_result_status(res), o->status);
  size_t len;
  const char *text =
      o->status == MBX_OK ? mbx_result_value_json(res, &len) : mbx_result_error_message(res, &len);
  copy_bytes(o->value, sizeof o->value, text, len);
  text = mbx_result_stdout(res, &o->out_len);
  copy_bytes(o->out, sizeof o->out, text, o->out_len);
  text = mbx_result_stderr(res, &o->err_len);
  copy_bytes(o->err, sizeof o->err, text, o->err_len);
  mbx_result_free(res);
  return o->status;
}

/* A sandbox with the default policy, or with one limit changed (which == 0: none). */
static mbx_sandbox *new_sandbox_with(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (which != 0) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

static mbx_sandbox *new_sandbox(void) {
  return new_sandbox_with(0, 0);
}

/* Run code in a fresh default sandbox. */
static mbx_status run(const char *code, outcome *o) {
  mbx_sandbox *sb = new_sandbox();
  mbx_status s = run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

/* The snippet succeeds and returns exactly this JSON. */
static void check_value(const char *code, const char *json) {
  static outcome o;
  if (run(code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

/* The snippet ends with this status and its error message contains the fragment. */
static void check_error(const char *code, mbx_status status, const char *fragment) {
  static outcome o;
  run(code, &o);
  if (o.status != status)
    fail_msg("%s\n  ended with %s (%s), expected %s", code, mbx_status_name(o.status), o.value,
             mbx_status_name(status));
  if (strstr(o.value, fragment) == NULL)
    fail_msg("%s\n  error %s\n  does not contain %s", code, o.value, fragment);
}

static int group_setup(void **state) {
  (void)state;
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  return runtime == NULL ? -1 : 0;
}

static int group_teardown(void **state) {
  (void)state;
  mbx_runtime_free(runtime);
  runtime = NULL;
  return 0;
}

/* The JSON string json is exactly "\"<type>: 0x" + 12 lowercase hex digits + "\"". */
static void assert_hidden_address_json(const char *json, const char *type) {
  size_t len = strlen(json), tlen = strlen(type);
  if (len != 1 + tlen + 4 + 12 + 1 || json[0] != '"' || json[len - 1] != '"' ||
      strncmp(json + 1, type, tlen) != 0 || strncmp(json + 1 + tlen, ": 0x", 4) != 0)
    fail_msg("%s is not the string '%s: 0x' + 12 hex digits", json, type);
  for (size_t i = 1 + tlen + 4; i < len - 1; i++)
    if (strchr("0123456789abcdef", json[i]) == NULL)
      fail_msg("%s: '%c' is not a lowercase hex digit", json, json[i]);
}

static void plain_values(void **state) {
  (void)state;
  check_value("return tostring(10), tostring(-1.5), tostring(3.0), tostring(1e15), "
              "tostring(1e16), tostring(2^63), tostring(math.mininteger)",
              "[\"10\",\"-1.5\",\"3.0\",\"1e+15\",\"1e+16\",\"9.2233720368548e+18\","
              "\"-9223372036854775808\"]");
  check_value("return tostring('s'), tostring(''), #tostring('a\\0b'), tostring(nil), "
              "tostring(true), tostring(false)",
              "[\"s\",\"\",3,\"nil\",\"true\",\"false\"]");
  /* A number argument is not converted in place in the caller's variable. */
  check_value("local n = 5 local s = tostring(n) return math.type(n), s", "[\"integer\",\"5\"]");
}

static void tostring_metamethod_is_used(void **state) {
  (void)state;
  check_value("local t = setmetatable({v = 3}, {__tostring = function(self) "
              "return 'T' .. self.v end}) return tostring(t)",
              "\"T3\"");
  /* A number is a string for this purpose, as in stock Lua. */
  check_value("return tostring(setmetatable({}, {__tostring = function() return 42 end}))",
              "\"42\"");
  /* __tostring wins over __name. */
  check_value("return tostring(setmetatable({}, {__name = 'N', "
              "__tostring = function() return 'S' end}))",
              "\"S\"");
}

static void tostring_metamethod_must_return_a_string(void **state) {
  (void)state;
  check_error("return tostring(setmetatable({}, {__tostring = function() return {} end}))",
              MBX_RUNTIME_ERROR, "'__tostring' must return a string");
  check_error("return tostring(setmetatable({}, {__tostring = function() end}))", MBX_RUNTIME_ERROR,
              "'__tostring' must return a string");
  check_error("return tostring(setmetatable({}, {__tostring = function() return true end}))",
              MBX_RUNTIME_ERROR, "'__tostring' must return a string");
  check_value("return pcall(tostring, setmetatable({}, {__tostring = function() "
              "error('inner', 0) end}))",
              "[false,\"inner\"]");
}

static void name_is_used_in_hidden_form(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("return tostring(setmetatable({}, {__name = 'MyType'}))", &o), MBX_OK);
  assert_hidden_address_json(o.value, "MyType");
  /* A non-string __name is ignored. */
  assert_int_equal(run("return tostring(setmetatable({}, {__name = 7}))", &o), MBX_OK);
  assert_hidden_address_json(o.value, "table");
  /* The same hash with and without __name: it stands for the object, not its text. */
  check_value("local t = {} local before = tostring(t) "
              "setmetatable(t, {__name = 'X'}) local after = tostring(t) "
              "return before:sub(8) == after:sub(4), after:sub(1, 5)",
              "[true,\"X: 0x\"]");
}

static void hidden_form_for_each_reference_type(void **state) {
  (void)state;
  outcome o;
  assert_int_equal(run("return tostring({})", &o), MBX_OK);
  assert_hidden_address_json(o.value, "table");
  assert_int_equal(run("return tostring(function() end)", &o), MBX_OK);
  assert_hidden_address_json(o.value, "function");
  assert_int_equal(run("return tostring(print)", &o), MBX_OK);
  assert_hidden_address_json(o.value, "function");
  assert_int_equal(run("return tostring(coroutine.running())", &o), MBX_OK);
  assert_hidden_address_json(o.value, "thread");
  check_value("local t = {} return tostring(t) == tostring(t), tostring(t) ~= tostring({}), "
              "tostring(t) == string.format('%s', t), tostring(t) == tostring(t) .. ''",
              "[true,true,true,true]");
}

/* Many objects, all distinct texts: the hash keeps enough bits. */
static void hidden_addresses_do_not_collide(void **state) {
  (void)state;
  check_value("local seen, objs = {}, {} for i = 1, 5000 do objs[i] = {} "
              "local s = tostring(objs[i]) if seen[s] then return i end seen[s] = true end "
              "return 0",
              "0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(plain_values),
      cmocka_unit_test(tostring_metamethod_is_used),
      cmocka_unit_test(tostring_metamethod_must_return_a_string),
      cmocka_unit_test(name_is_used_in_hidden_form),
      cmocka_unit_test(hidden_form_for_each_reference_type),
      cmocka_unit_test(hidden_addresses_do_not_collide),
  };
  return cmocka_run_group_tests_name("stdlib/tostring", tests, group_setup, group_teardown);
}
