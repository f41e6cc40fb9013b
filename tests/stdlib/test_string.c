/* tests/stdlib/test_string.c -- unit tests of stdlib/string.c: no dump, the decoy string
   metatable, string.format without addresses, and the stock functions that stay (rep, pack
   and unpack: tests/stdlib/test_strbuild.c). */
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

/* ---- dump and the string metatable ------------------------------------------------------ */

static void dump_is_gone(void **state) {
  (void)state;
  snippet_check_value("return string.dump == nil, ('').dump == nil, rawget(string, 'dump') == nil",
                      "[true,true,true]");
  snippet_check_error("return ('').dump(print)", MBX_RUNTIME_ERROR, "attempt to call a nil value");
}

static void string_metatable_is_a_decoy(void **state) {
  (void)state;
  snippet_check_value("local mt = getmetatable('') return type(mt), rawequal(mt.__index, string), "
                      "getmetatable('abc') == mt",
                      "[\"table\",true,true]");
  /* Changing the decoy changes nothing for strings. */
  snippet_check_value(
      "local mt = getmetatable('') "
      "mt.__index = {upper = function() return 'pwned' end} "
      "mt.__call = function() return 'called' end "
      "mt.__add = nil mt.__len = function() return 0 end "
      "return ('abc'):upper(), '1' + '2', #'abc', (pcall(function() return ('x')() end))",
      "[\"ABC\",3,3,false]");
  snippet_check_value("getmetatable('').__index = nil return ('abc'):len()", "3");
  /* The real metatable can be neither replaced nor reached through rawget. */
  snippet_check_error("setmetatable('', {})", MBX_RUNTIME_ERROR, "table expected");
  snippet_check_value("return rawget(getmetatable(''), '__metatable')", "null");
}

/* ---- string.format --------------------------------------------------------------------- */

static void format_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return string.format('%d|%5.2f|%s|%s|%s|%s|%-3s|%x|%%|%c', "
                      "42, 3.14159, 1, 1.5, true, nil, 'ab', 255, 65)",
                      "\"42| 3.14|1|1.5|true|nil|ab |ff|%|A\"");
  snippet_check_value("return string.format('%q', 'a\\nb\"\\0')",
                      "\"\\\"a\\\\\\nb\\\\\\\"\\\\0\\\"\"");
  snippet_check_value("return string.format('%q|%q|%q', 1, math.mininteger, 1/0)",
                      "\"1|0x8000000000000000|1e9999\"");
  snippet_check_value("return ('%d-%d'):format(1, 2)", "\"1-2\"");
  snippet_check_value("return string.format('no directives')", "\"no directives\"");
  snippet_check_error("return string.format('%d', 'x')", MBX_RUNTIME_ERROR, "bad argument #2");
  snippet_check_error("return string.format('%d')", MBX_RUNTIME_ERROR, "bad argument #2");
}

/* Library bug (stdlib/string.c, str_format): the wrapper lua_calls the stock format, so its
   argument errors name '?' instead of 'format' ("bad argument #2 to '?' (number expected, got
   string)"); stock Lua says "bad argument #2 to 'format'" ('string.format' under pcall). */
static void format_argument_errors_name_format(void **state) {
  (void)state;
  snippet_check_error("return string.format('%d', 'x')", MBX_RUNTIME_ERROR,
                      "format' (number expected, got string)");
}

static void format_s_hides_addresses(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("local t = {} return string.format('%s', t), tostring(t), "
                               "string.format('%s|%s', 1, t)",
                               &o),
                   MBX_OK);
  /* ["table: 0x<12 hex>","<same>","1|<same>"] */
  assert_int_equal(strlen(o.value), 2 + 3 * (2 + 21) + 2 + 2);
  assert_memory_equal(o.value, "[\"table: 0x", 11);
  assert_memory_equal(o.value + 1, o.value + 25, 23);
  assert_memory_equal(o.value + 49, "\"1|", 3);
  assert_memory_equal(o.value + 52, o.value + 2, 21);
  snippet_check_value("return string.format('%s', setmetatable({}, {__tostring = function() "
                      "return 'custom' end}))",
                      "\"custom\"");
  snippet_check_value("local s = string.format('%10s', setmetatable({}, {__name = 'My'})) "
                      "return #s, s:sub(1, 6)",
                      "[18,\"My: 0x\"]");
  snippet_check_value("local s = string.format('%s', print) return s:sub(1, 12), #s",
                      "[\"function: 0x\",24]");
}

/* "%p" prints what tostring shows after the type name (the keyed hash, never the address:
   THREATS E10), with stock's "(null)" for values that have none, stock's widths and stock's
   errors for a bad specification (Lua 5.4.4's strings.lua, literals.lua and pm.lua use it;
   it raised "'%p' is not available" here). */
static void format_p_hides_addresses(void **state) {
  (void)state;
  snippet_check_value("local t, u = {}, {} "
                      "return string.format('%p', t) == tostring(t):sub(8), "
                      "string.format('%p', t) == string.format('%p', t), "
                      "string.format('%p', t) ~= string.format('%p', u), "
                      "string.format('%p', print) == tostring(print):sub(11), "
                      "string.format('%p', print) ~= string.format('%p', assert)",
                      "[true,true,true,true,true]");
  snippet_check_value("return string.format('%p|%p|%p|%10p|%-8p|', 4, true, nil, false, 1.5)",
                      "\"(null)|(null)|(null)|    (null)|(null)  |\"");
  snippet_check_value("return #string.format('%90p', {}), #string.format('%-60p', {}), "
                      "string.format('%d %p', 1, {}):sub(1, 4)",
                      "[90,60,\"1 0x\"]");
  /* Short strings are one object (interned), long ones are not. */
  snippet_check_value("local a, b = string.rep('a', 10), string.rep('aa', 5) "
                      "local c, d = string.rep('a', 300), string.rep('a', 300) "
                      "return string.format('%p', a) == string.format('%p', b), "
                      "string.format('%p', c) ~= string.format('%p', d)",
                      "[true,true]");
  snippet_check_error("return string.format('%3.1p', {})", MBX_RUNTIME_ERROR,
                      "invalid conversion specification: '%3.1p'");
  snippet_check_error("return string.format('%05p', {})", MBX_RUNTIME_ERROR,
                      "invalid conversion specification: '%05p'");
  snippet_check_error("return string.format('%100p', {})", MBX_RUNTIME_ERROR,
                      "invalid conversion specification: '%100p'");
  snippet_check_error("return string.format('%+p', {})", MBX_RUNTIME_ERROR,
                      "invalid conversion specification: '%+p'");
  /* "%%p" is a literal. */
  snippet_check_value("return string.format('%%p')", "\"%p\"");
}

/* ---- the stock functions that stay ----------------------------------------------------- */

static void method_calls_work(void **state) {
  (void)state;
  snippet_check_value("local s = 'abc' return s:upper(), ('ABC'):lower(), s:len(), s:byte(2), "
                      "s:sub(2), s:reverse()",
                      "[\"ABC\",\"abc\",3,98,\"bc\",\"cba\"]");
}

static void stock_functions_work(void **state) {
  (void)state;
  snippet_check_value("return string.byte('ABC', 1, -1)", "[65,66,67]");
  snippet_check_value("return string.char(104, 105), string.char()", "[\"hi\",\"\"]");
  snippet_check_value("return string.sub('hello', 2, 4), string.sub('hello', -3), "
                      "string.sub('hello', 10)",
                      "[\"ell\",\"llo\",\"\"]");
  snippet_check_value("return string.len('a\\0b'), #'', string.len('')", "[3,0,0]");
  snippet_check_value("return string.lower('MiXeD 1'), string.upper('MiXeD 1'), string.reverse('')",
                      "[\"mixed 1\",\"MIXED 1\",\"\"]");
  snippet_check_value("return string.packsize('i4i8')", "12");
  snippet_check_error("return string.char(256)", MBX_RUNTIME_ERROR, "value out of range");
}

/* string.format's errors come from the caller's frame, as stock's do: the position, the name
   as called, the argument number shifted for a method call (issue 9, F.3). */
static void format_errors_are_stock(void **state) {
  (void)state;
  snippet_check_value("return select(2, pcall(function() return string.format('%d', 'x') end))",
                      "\"input:1: bad argument #2 to 'format' (number expected, got string)\"");
  snippet_check_value("return select(2, pcall(function() return ('%d'):format('x') end))",
                      "\"input:1: bad argument #1 to 'format' (number expected, got string)\"");
  snippet_check_value("return select(2, pcall(string.format, '%d', 'x'))",
                      "\"bad argument #2 to 'string.format' (number expected, got string)\"");
  snippet_check_value("return select(2, pcall(function() return string.format('%y', 1) end))",
                      "\"input:1: invalid conversion '%y' to 'format'\"");
  snippet_check_value("return string.format('%5.1f|%s', 2.25, 'ok')", "\"  2.2|ok\"");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dump_is_gone),
      cmocka_unit_test(string_metatable_is_a_decoy),
      cmocka_unit_test(format_works_like_stock),
      cmocka_unit_test(format_argument_errors_name_format),
      cmocka_unit_test(format_s_hides_addresses),
      cmocka_unit_test(format_p_hides_addresses),
      cmocka_unit_test(method_calls_work),
      cmocka_unit_test(stock_functions_work),
      cmocka_unit_test(format_errors_are_stock),
  };
  return cmocka_run_group_tests_name("stdlib/string", tests, snippet_setup, snippet_teardown);
}
