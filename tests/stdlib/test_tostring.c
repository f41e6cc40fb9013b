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
#include "tests/support/snippet.h"

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
  snippet_check_value("return tostring(10), tostring(-1.5), tostring(3.0), tostring(1e15), "
                      "tostring(1e16), tostring(2^63), tostring(math.mininteger)",
                      "[\"10\",\"-1.5\",\"3.0\",\"1e+15\",\"1e+16\",\"9.2233720368548e+18\","
                      "\"-9223372036854775808\"]");
  snippet_check_value("return tostring('s'), tostring(''), #tostring('a\\0b'), tostring(nil), "
                      "tostring(true), tostring(false)",
                      "[\"s\",\"\",3,\"nil\",\"true\",\"false\"]");
  /* A number argument is not converted in place in the caller's variable. */
  snippet_check_value("local n = 5 local s = tostring(n) return math.type(n), s",
                      "[\"integer\",\"5\"]");
}

static void tostring_metamethod_is_used(void **state) {
  (void)state;
  snippet_check_value("local t = setmetatable({v = 3}, {__tostring = function(self) "
                      "return 'T' .. self.v end}) return tostring(t)",
                      "\"T3\"");
  /* A number is a string for this purpose, as in stock Lua. */
  snippet_check_value("return tostring(setmetatable({}, {__tostring = function() return 42 end}))",
                      "\"42\"");
  /* __tostring wins over __name. */
  snippet_check_value("return tostring(setmetatable({}, {__name = 'N', "
                      "__tostring = function() return 'S' end}))",
                      "\"S\"");
}

static void tostring_metamethod_must_return_a_string(void **state) {
  (void)state;
  snippet_check_error("return tostring(setmetatable({}, {__tostring = function() return {} end}))",
                      MBX_RUNTIME_ERROR, "'__tostring' must return a string");
  snippet_check_error("return tostring(setmetatable({}, {__tostring = function() end}))",
                      MBX_RUNTIME_ERROR, "'__tostring' must return a string");
  snippet_check_error(
      "return tostring(setmetatable({}, {__tostring = function() return true end}))",
      MBX_RUNTIME_ERROR, "'__tostring' must return a string");
  snippet_check_value("return pcall(tostring, setmetatable({}, {__tostring = function() "
                      "error('inner', 0) end}))",
                      "[false,\"inner\"]");
}

static void name_is_used_in_hidden_form(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("return tostring(setmetatable({}, {__name = 'MyType'}))", &o),
                   MBX_OK);
  assert_hidden_address_json(o.value, "MyType");
  /* A non-string __name is ignored. */
  assert_int_equal(snippet_run("return tostring(setmetatable({}, {__name = 7}))", &o), MBX_OK);
  assert_hidden_address_json(o.value, "table");
  /* The same hash with and without __name: it stands for the object, not its text. */
  snippet_check_value("local t = {} local before = tostring(t) "
                      "setmetatable(t, {__name = 'X'}) local after = tostring(t) "
                      "return before:sub(8) == after:sub(4), after:sub(1, 5)",
                      "[true,\"X: 0x\"]");
}

static void hidden_form_for_each_reference_type(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("return tostring({})", &o), MBX_OK);
  assert_hidden_address_json(o.value, "table");
  assert_int_equal(snippet_run("return tostring(function() end)", &o), MBX_OK);
  assert_hidden_address_json(o.value, "function");
  assert_int_equal(snippet_run("return tostring(print)", &o), MBX_OK);
  assert_hidden_address_json(o.value, "function");
  assert_int_equal(snippet_run("return tostring(coroutine.running())", &o), MBX_OK);
  assert_hidden_address_json(o.value, "thread");
  snippet_check_value(
      "local t = {} return tostring(t) == tostring(t), tostring(t) ~= tostring({}), "
      "tostring(t) == string.format('%s', t), tostring(t) == tostring(t) .. ''",
      "[true,true,true,true]");
}

/* Many objects, all distinct texts: the hash keeps enough bits. */
static void hidden_addresses_do_not_collide(void **state) {
  (void)state;
  snippet_check_value("local seen, objs = {}, {} for i = 1, 5000 do objs[i] = {} "
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
  return cmocka_run_group_tests_name("stdlib/tostring", tests, snippet_setup, snippet_teardown);
}
