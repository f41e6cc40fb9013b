/* tests/stdlib/test_json.c -- unit tests of stdlib/json.c: the json global over the run's
   codec (exact integers, null, arrays vs objects, sorted keys, errors with path/position). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static void encode_values(void **state) {
  (void)state;
  snippet_check_value("return json.encode({b = 1, a = {true, false, json.null}, c = 'x'})",
                      "\"{\\\"a\\\":[true,false,null],\\\"b\\\":1,\\\"c\\\":\\\"x\\\"}\"");
  snippet_check_value("return json.encode(math.maxinteger), json.encode(math.mininteger), "
                      "json.encode(0.5), json.encode(nil), json.encode('\\u{e9}\\n')",
                      "[\"9223372036854775807\",\"-9223372036854775808\",\"0.5\",\"null\","
                      "\"\\\"\xc3\xa9\\\\n\\\"\"]");
  /* An empty table is an object unless marked as an array. */
  snippet_check_value("return json.encode({}), json.encode(json.array({})), "
                      "json.encode(json.array()), json.encode({{}, json.array{}})",
                      "[\"{}\",\"[]\",\"[]\",\"[{},[]]\"]");
}

static void encode_errors_name_the_path(void **state) {
  (void)state;
  snippet_check_error("return json.encode({items = {1, print}})", MBX_RUNTIME_ERROR,
                      "json.encode: value.items[2]: cannot encode a function as JSON");
  snippet_check_error("local t = {} t.self = t return json.encode(t)", MBX_RUNTIME_ERROR,
                      "json.encode: value.self");
  snippet_check_error("return json.encode(0/0)", MBX_RUNTIME_ERROR, "json.encode: value");
  snippet_check_error("return json.encode()", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'encode' (value expected)");
  /* Caught by pcall like any error, with the caller's position when called from Lua. */
  snippet_check_value("local ok, e = pcall(function() return json.encode({f = print}) end) "
                      "return ok, e",
                      "[false,\"input:1: json.encode: value.f: cannot encode a function as "
                      "JSON\"]");
}

static void decode_values(void **state) {
  (void)state;
  snippet_check_value("local v = json.decode('{\"n\": 9007199254740993, \"f\": 1.5, "
                      "\"s\": \"x\\\\u00e9\", \"a\": [1, [], {}], \"z\": null}') "
                      "return v.n, math.type(v.n), v.f, v.s, #v.a, v.z == json.null",
                      "[9007199254740993,\"integer\",1.5,\"x\xc3\xa9\",3,true]");
  snippet_check_value("return json.decode('null') == json.null, json.decode(' true '), "
                      "json.decode('\"s\"')",
                      "[true,true,\"s\"]");
  /* Round trip keeps [] an array and {} an object. */
  snippet_check_value("return json.encode(json.decode('{\"a\":[],\"o\":{}}'))",
                      "\"{\\\"a\\\":[],\\\"o\\\":{}}\"");
}

static void decode_errors_give_the_position(void **state) {
  (void)state;
  snippet_check_error("return json.decode('{\"a\": 1,\\n \"b\" 2}')", MBX_RUNTIME_ERROR,
                      "json.decode: ");
  snippet_check_error("return json.decode('{\"a\": 1,\\n \"b\" 2}')", MBX_RUNTIME_ERROR,
                      "at line 2, column 6");
  snippet_check_value("return pcall(json.decode, '[1,')",
                      "[false,\"json.decode: unexpected end of input at line 1, column 4\"]");
  snippet_check_error("return json.decode({})", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'decode' (string expected, got table)");
  snippet_check_error("return json.decode(string.rep and ('[' ):rep(200) or '')", MBX_RUNTIME_ERROR,
                      "json.decode");
}

static void nesting_is_limited(void **state) {
  (void)state;
  snippet_check_error("local s = '' for i = 1, 200 do s = s .. '[' end return json.decode(s)",
                      MBX_RUNTIME_ERROR, "nesting deeper than 128");
  snippet_check_error("local t = {} for i = 1, 200 do t = {t} end return json.encode(t)",
                      MBX_RUNTIME_ERROR, "json.encode: value");
}

static void null_and_array_marker(void **state) {
  (void)state;
  snippet_check_value("return type(json.null), json.null == json.null, "
                      "tostring(json.null) ~= nil",
                      "[\"userdata\",true,true]");
  /* The marker is shared and hidden: getmetatable shows a decoy, setmetatable replaces it. */
  snippet_check_value("local a = json.array{} local m = getmetatable(a) m.__index = "
                      "function() return 'leak' end "
                      "local b = json.array{} return b.x, m.__jsontype",
                      "[null,\"array\"]");
  snippet_check_value("local a = json.array{} setmetatable(a, {__index = {z = 1}}) "
                      "return a.z, json.encode(a)",
                      "[1,\"{}\"]");
  snippet_check_value("local t = json.array{1, 2} return json.array(t) == t, json.encode(t)",
                      "[true,\"[1,2]\"]");
  snippet_check_error("return json.array(setmetatable({}, {}))", MBX_RUNTIME_ERROR,
                      "json.array: the table already has a metatable");
  snippet_check_error("return json.array(5)", MBX_RUNTIME_ERROR, "table expected");
  /* A guest metatable with __jsontype = "array" is honoured too (dkjson's convention). */
  snippet_check_value("return json.encode(setmetatable({}, {__jsontype = 'array'}))", "\"[]\"");
}

static void work_is_charged_to_the_run(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 200000);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb,
                                  "local t = {} for i = 1, 20000 do t[i] = i end "
                                  "while true do pcall(json.encode, t) end",
                                  &o),
                   MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);
  sb = snippet_sandbox_with(MBX_LIMIT_MEMORY, 1 << 20);
  assert_int_equal(snippet_run_in(sb,
                                  "local s = '[' .. ('0,'):rep(1) local parts = {} "
                                  "local one = '0,' for i = 1, 18 do one = one .. one end "
                                  "local text = '[' .. one .. '0]' local keep = {} "
                                  "for i = 1, 100 do keep[i] = json.decode(text) end",
                                  &o),
                   MBX_MEMORY_LIMIT);
  mbx_sandbox_free(sb);
}

/* The bad key an encode error names does not depend on the order lua_next meets the keys:
   the same keys inserted in other orders (other table layouts) give the same error (issue 9,
   E.5). */
static void encode_names_the_least_bad_key(void **state) {
  (void)state;
  snippet_check_value(
      "local msgs = {}\n"
      "for round = 1, 8 do\n"
      "  local t = {}\n"
      "  for i = 1, round * 5 do t['k' .. i] = i end\n"
      "  local bad = {true, 2.5, {}, print, '\\xffb', '\\xffa'}\n"
      "  for i = 0, #bad - 1 do local k = bad[(i + round) % #bad + 1] t[k] = 1 end\n"
      "  msgs[select(2, pcall(json.encode, t))] = true\n"
      "end\n"
      "local n, one = 0 for m in pairs(msgs) do n = n + 1 one = m end\n"
      "return {n, one}",
      "[1,\"json.encode: value[\\\"\\\\255a\\\"]: cannot encode a table key that is not "
      "valid UTF-8 as JSON\"]");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(encode_values),
      cmocka_unit_test(encode_errors_name_the_path),
      cmocka_unit_test(decode_values),
      cmocka_unit_test(decode_errors_give_the_position),
      cmocka_unit_test(nesting_is_limited),
      cmocka_unit_test(null_and_array_marker),
      cmocka_unit_test(work_is_charged_to_the_run),
      cmocka_unit_test(encode_names_the_least_bad_key),
  };
  return cmocka_run_group_tests_name("stdlib/json", tests, snippet_setup, snippet_teardown);
}
