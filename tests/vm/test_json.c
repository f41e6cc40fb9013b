/* tests/vm/test_json.c -- unit tests of vm/json.c: the Lua <-> JSON codec. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "vm/json.h"

/* A plain state with no sandbox attached (NULL extra space), so mbxV_charge is a no-op; the
   globals null and array_mt give the Lua snippets json.null and the array marker. */
static int setup(void **state) {
  lua_State *L = luaL_newstate();
  assert_non_null(L);
  *(void **)lua_getextraspace(L) = NULL;
  luaL_openlibs(L);
  mbxV_json_push_null(L);
  lua_setglobal(L, "null");
  assert_int_equal(luaL_dostring(L, "array_mt = {__jsontype = 'array'}"), LUA_OK);
  *state = L;
  return 0;
}

static int teardown(void **state) {
  lua_close(*state);
  return 0;
}

/* The codec must run in a protected call: these are the C functions Lua calls. */
static int call_encode(lua_State *L) {
  /* The root name stays on the stack (index 2) while it is used: popped, the string could
     be collected under the encoder (ASan saw it once the tests made more garbage). */
  const char *root = lua_tostring(L, 2);
  lua_settop(L, 2);
  lua_pushvalue(L, 1);
  mbxV_json_encode(L, -1, root);      /* a relative index on purpose */
  assert_int_equal(lua_gettop(L), 4); /* exactly one result pushed */
  return 1;
}

static int call_decode(lua_State *L) {
  size_t len;
  const char *text = lua_tolstring(L, 1, &len);
  mbxV_json_decode(L, text, len);
  assert_int_equal(lua_gettop(L), 2);
  return 1;
}

/* Evaluate the Lua expression and encode its value under root "value". Returns the pcall
   status; the JSON text or the error message is left on the stack (and returned). */
static const char *encode_expr_as(lua_State *L, const char *expr, const char *root, int *status) {
  lua_settop(L, 0);
  char chunk[4096];
  snprintf(chunk, sizeof chunk, "return %s", expr);
  if (luaL_loadstring(L, chunk) != LUA_OK || lua_pcall(L, 0, 1, 0) != LUA_OK)
    fail_msg("bad test snippet %s: %s", expr, lua_tostring(L, -1));
  lua_pushcfunction(L, call_encode);
  lua_insert(L, 1);
  if (root != NULL) {
    lua_pushstring(L, root);
  } else {
    lua_pushnil(L);
  }
  *status = lua_pcall(L, 2, 1, 0);
  return lua_tostring(L, -1);
}

static void expect_encode(lua_State *L, const char *expr, const char *json) {
  int status;
  const char *out = encode_expr_as(L, expr, "value", &status);
  if (status != LUA_OK) fail_msg("encoding %s failed: %s", expr, out);
  assert_string_equal(out, json);
}

static void expect_encode_error(lua_State *L, const char *expr, const char *message) {
  int status;
  const char *out = encode_expr_as(L, expr, "value", &status);
  if (status == LUA_OK) fail_msg("encoding %s should fail, gave %s", expr, out);
  assert_string_equal(out, message);
}

/* Decode text[0..len) into the global v. Returns the status; on error the message is left
   on the stack. */
static int decode_text(lua_State *L, const char *text, size_t len) {
  lua_settop(L, 0);
  lua_pushcfunction(L, call_decode);
  lua_pushlstring(L, text, len);
  int status = lua_pcall(L, 1, 1, 0);
  if (status == LUA_OK) {
    lua_pushvalue(L, -1);
    lua_setglobal(L, "v");
  }
  return status;
}

/* Decode json and check the Lua predicate (an expression over the global v). */
static void expect_decode_len(lua_State *L, const char *json, size_t len, const char *predicate) {
  if (decode_text(L, json, len) != LUA_OK)
    fail_msg("decoding %s failed: %s", json, lua_tostring(L, -1));
  char chunk[4096];
  snprintf(chunk, sizeof chunk, "return %s", predicate);
  if (luaL_dostring(L, chunk) != LUA_OK)
    fail_msg("predicate %s: %s", predicate, lua_tostring(L, -1));
  if (!lua_toboolean(L, -1)) fail_msg("decoding %s: %s does not hold", json, predicate);
}

static void expect_decode(lua_State *L, const char *json, const char *predicate) {
  expect_decode_len(L, json, strlen(json), predicate);
}

static void expect_decode_error_len(lua_State *L, const char *json, size_t len,
                                    const char *message) {
  if (decode_text(L, json, len) == LUA_OK) fail_msg("decoding %s should fail", json);
  assert_string_equal(lua_tostring(L, -1), message);
}

static void expect_decode_error(lua_State *L, const char *json, const char *message) {
  expect_decode_error_len(L, json, strlen(json), message);
}

/* Decode then encode: canonical text must come back unchanged. */
static void expect_round_trip(lua_State *L, const char *json, const char *canonical) {
  if (decode_text(L, json, strlen(json)) != LUA_OK)
    fail_msg("decoding %s failed: %s", json, lua_tostring(L, -1));
  expect_encode(L, "v", canonical);
}

/* ---- null -------------------------------------------------------------------------------- */

static void test_null(void **state) {
  lua_State *L = *state;
  static int other;
  lua_settop(L, 0);
  mbxV_json_push_null(L);
  lua_pushnil(L);
  lua_pushlightuserdata(L, &other);
  lua_pushboolean(L, 0);
  assert_true(mbxV_json_is_null(L, 1));
  assert_false(mbxV_json_is_null(L, 2));
  assert_false(mbxV_json_is_null(L, 3));
  assert_false(mbxV_json_is_null(L, 4));
  expect_encode(L, "null", "null");
  expect_encode(L, "nil", "null");
  expect_encode(L, "{1, null, 3}", "[1,null,3]");
  expect_decode(L, "null", "v == null");
  expect_decode(L, "[null]", "v[1] == null and #v == 1");
}

/* ---- encoding ---------------------------------------------------------------------------- */

static void test_encode_scalars(void **state) {
  lua_State *L = *state;
  expect_encode(L, "true", "true");
  expect_encode(L, "false", "false");
  expect_encode(L, "42", "42");
  expect_encode(L, "-7", "-7");
  expect_encode(L, "9007199254740993", "9007199254740993");
  expect_encode(L, "math.maxinteger", "9223372036854775807");
  expect_encode(L, "math.mininteger", "-9223372036854775808");
  expect_encode(L, "1.0", "1.0");
  expect_encode(L, "0.1", "0.1");
  expect_encode(L, "1e300", "1e+300");
  expect_encode(L, "-0.0", "-0.0");
  expect_encode(L, "2^53", "9007199254740992.0");
  expect_encode(L, "'hi'", "\"hi\"");
  expect_encode(L, "'tab\\tquote\"'", "\"tab\\tquote\\\"\"");
  expect_encode(L, "'\\xff'", "{\"$bytes\":\"/w==\"}");
  expect_encode(L, "'caf\\u{e9}'", "\"caf\xC3\xA9\"");
}

static void test_encode_arrays(void **state) {
  lua_State *L = *state;
  expect_encode(L, "{1, 2, 3}", "[1,2,3]");
  expect_encode(L, "{'a', {true, false}, {}}", "[\"a\",[true,false],{}]");
  expect_encode(L, "{[1] = 'x', [2] = 'y'}", "[\"x\",\"y\"]");
  expect_encode(L, "{}", "{}");
  expect_encode(L, "setmetatable({}, array_mt)", "[]");
  expect_encode(L, "setmetatable({1, 2}, array_mt)", "[1,2]");
  expect_encode(L, "{setmetatable({}, array_mt)}", "[[]]");
  /* The marker is raw: one inherited through __index does not count. */
  expect_encode(L, "setmetatable({}, {__index = {__jsontype = 'array'}})", "{}");
  expect_encode(L, "setmetatable({}, {__jsontype = 'object'})", "{}");
}

static void test_encode_objects_sorted(void **state) {
  lua_State *L = *state;
  expect_encode(L, "{b = 1, a = 2, aa = 3, A = 4, [''] = 5}",
                "{\"\":5,\"A\":4,\"a\":2,\"aa\":3,\"b\":1}");
  /* Bytewise, so UTF-8 sorts after ASCII and a prefix sorts first. */
  expect_encode(L, "{['\\u{e9}'] = 1, z = 2, zz = 3, ['z\\0'] = 4}",
                "{\"z\":2,\"z\\u0000\":4,\"zz\":3,\"\xC3\xA9\":1}");
  expect_encode(L, "{x = {b = {d = 1, c = 2}, a = 0}}",
                "{\"x\":{\"a\":0,\"b\":{\"c\":2,\"d\":1}}}");
}

static void test_encode_integer_keys(void **state) {
  lua_State *L = *state;
  /* Not 1..n: an object, integer keys written as strings and sorted as strings. */
  expect_encode(L, "{[1] = 'a', [3] = 'c'}", "{\"1\":\"a\",\"3\":\"c\"}");
  expect_encode(L, "{[10] = 1, [9] = 2, [100] = 3}", "{\"10\":1,\"100\":3,\"9\":2}");
  expect_encode(L, "{1, nil, 3}", "{\"1\":1,\"3\":3}");
  expect_encode(L, "{[0] = 'z'}", "{\"0\":\"z\"}");
  expect_encode(L, "{[-1] = 1, [1] = 2}", "{\"-1\":1,\"1\":2}");
  expect_encode(L, "{[2] = 2}", "{\"2\":2}");
  expect_encode(L, "{1, 2, x = 3}", "{\"1\":1,\"2\":2,\"x\":3}");
  expect_encode(L, "{[math.mininteger] = 1}", "{\"-9223372036854775808\":1}");
  /* 2.0 is normalised to the integer key 2 by Lua itself. */
  expect_encode(L, "{[1.0] = 'a', [2.0] = 'b'}", "[\"a\",\"b\"]");
}

static void test_encode_never_calls_metamethods(void **state) {
  lua_State *L = *state;
  const char *trap =
      "setmetatable(%s, {__index = function() error('index') end, "
      "__pairs = function() error('pairs') end, __len = function() error('len') end, "
      "__tostring = function() error('tostring') end, __name = 'trap'})";
  char expr[512];
  snprintf(expr, sizeof expr, trap, "{}");
  expect_encode(L, expr, "{}");
  snprintf(expr, sizeof expr, trap, "{1, 2}");
  expect_encode(L, expr, "[1,2]");
  snprintf(expr, sizeof expr, trap, "{k = 'v'}");
  expect_encode(L, expr, "{\"k\":\"v\"}");
  /* Values reachable only through __index are not part of the table. */
  expect_encode(L, "setmetatable({}, {__index = {1, 2, 3}})", "{}");
}

static void test_encode_errors_name_the_path(void **state) {
  lua_State *L = *state;
  expect_encode_error(L, "print", "value: cannot encode a function as JSON");
  expect_encode_error(L, "{1, 2, {name = print}}",
                      "value[3].name: cannot encode a function as JSON");
  expect_encode_error(L, "{a = {b = {c = {print}}}}",
                      "value.a.b.c[1]: cannot encode a function as JSON");
  expect_encode_error(L, "{['odd key'] = print}",
                      "value[\"odd key\"]: cannot encode a function as JSON");
  expect_encode_error(L, "{['end'] = print}", "value[\"end\"]: cannot encode a function as JSON");
  expect_encode_error(L, "{['1x'] = print}", "value[\"1x\"]: cannot encode a function as JSON");
  expect_encode_error(L, "{['q\"\\\\\\n'] = print}",
                      "value[\"q\\\"\\\\\\010\"]: cannot encode a function as JSON");
  expect_encode_error(L, "{[5] = print, x = 1}", "value[5]: cannot encode a function as JSON");
  expect_encode_error(L, "{x = {[string.rep('k', 50)] = print}}",
                      "value.x[\"kkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkkk...\"]: "
                      "cannot encode a function as JSON");
  expect_encode_error(L, "{x = 0/0}", "value.x: cannot encode NaN or infinity as JSON");
  expect_encode_error(L, "{x = {math.huge}}", "value.x[1]: cannot encode NaN or infinity as JSON");
  expect_encode_error(L, "-math.huge", "value: cannot encode NaN or infinity as JSON");
  expect_encode_error(L, "{co = coroutine.create(print)}",
                      "value.co: cannot encode a thread as JSON");
  expect_encode_error(L, "{io.stdout}", "value[1]: cannot encode a userdata as JSON");
  expect_encode_error(L, "{t = {[1.5] = 1}}",
                      "value.t: cannot encode a table with a non-integer number key as JSON");
  expect_encode_error(L, "{[true] = 1}", "value: cannot encode a table with a boolean key as JSON");
  expect_encode_error(L, "{[{}] = 1}", "value: cannot encode a table with a table key as JSON");
  expect_encode_error(L, "{[print] = 1}",
                      "value: cannot encode a table with a function key as JSON");
  expect_encode_error(
      L, "{k = {['\\xff'] = 1}}",
      "value.k[\"\\255\"]: cannot encode a table key that is not valid UTF-8 as JSON");
  expect_encode_error(L, "{[1] = 'a', ['1'] = 'b'}",
                      "value: cannot encode a table with both 1 and \"1\" as keys");
  expect_encode_error(
      L, "{m = setmetatable({x = 1}, array_mt)}",
      "value.m: cannot encode a table marked as a JSON array whose keys are not 1..n");
  expect_encode_error(
      L, "setmetatable({1, nil, 3}, array_mt)",
      "value: cannot encode a table marked as a JSON array whose keys are not 1..n");
}

static void test_encode_root_name(void **state) {
  lua_State *L = *state;
  int status;
  const char *out = encode_expr_as(L, "{x = print}", "inputs", &status);
  assert_int_not_equal(status, LUA_OK);
  assert_string_equal(out, "inputs.x: cannot encode a function as JSON");
  out = encode_expr_as(L, "{x = print}", NULL, &status);
  assert_int_not_equal(status, LUA_OK);
  assert_string_equal(out, "value.x: cannot encode a function as JSON");
}

static int call_encode_light(lua_State *L) {
  static int something;
  lua_pushlightuserdata(L, &something);
  mbxV_json_encode(L, -1, "value");
  return 1;
}

static void test_encode_light_userdata(void **state) {
  lua_State *L = *state;
  lua_settop(L, 0);
  lua_pushcfunction(L, call_encode_light);
  assert_int_not_equal(lua_pcall(L, 0, 1, 0), LUA_OK);
  assert_string_equal(lua_tostring(L, -1), "value: cannot encode a userdata as JSON");
}

static void test_encode_cycles(void **state) {
  lua_State *L = *state;
  const char *cycle = "value.self: cannot encode a cycle (a table that contains itself) as JSON";
  expect_encode_error(L, "(function() local t = {} t.self = t return t end)()", cycle);
  expect_encode_error(
      L, "(function() local t = {} t[1] = {{t}} return t end)()",
      "value[1][1][1]: cannot encode a cycle (a table that contains itself) as JSON");
  /* Shared but not cyclic is fine: the table is written at each place. */
  expect_encode(L, "(function() local s = {1} return {a = s, b = s, c = {s}} end)()",
                "{\"a\":[1],\"b\":[1],\"c\":[[1]]}");
}

static void test_encode_depth_limit(void **state) {
  lua_State *L = *state;
  assert_int_equal(luaL_dostring(L, "function nest(n) local t = {} for i = 2, n do t = {t} end "
                                    "return t end"),
                   LUA_OK);
  char expect[600];
  /* 128 nested tables: the innermost empty one is {}. */
  memset(expect, '[', 127);
  strcpy(expect + 127, "{}");
  memset(expect + 129, ']', 127);
  expect[256] = '\0';
  expect_encode(L, "nest(128)", expect);
  /* 129: the innermost table is 128 steps down. */
  strcpy(expect, "value");
  for (int i = 0; i < 128; i++)
    strcat(expect, "[1]");
  strcat(expect, ": nesting deeper than 128");
  expect_encode_error(L, "nest(129)", expect);
  expect_encode_error(L, "nest(100000)", expect);
}

static void test_encode_big_array(void **state) {
  lua_State *L = *state;
  int status;
  const char *out = encode_expr_as(L,
                                   "(function() local t = {} for i = 1, 100000 do t[i] = i end "
                                   "return t end)()",
                                   "value", &status);
  assert_int_equal(status, LUA_OK);
  size_t len = lua_rawlen(L, -1);
  /* digits of 1..100000 (488895) + 99999 commas + 2 brackets */
  assert_int_equal(len, 488895 + 99999 + 2);
  assert_memory_equal(out, "[1,2,3,", 7);
  assert_string_equal(out + len - 14, ",99999,100000]");
  /* ... and back. */
  char *copy = malloc(len);
  memcpy(copy, out, len);
  expect_decode_len(L, copy, len,
                    "#v == 100000 and v[1] == 1 and v[100000] == 100000 "
                    "and math.type(v[77777]) == 'integer'");
  free(copy);
}

static void test_encode_many_keys_sorted(void **state) {
  lua_State *L = *state;
  /* 10007 keys (not a power of two) inserted in a scrambled order; Lua's table.sort gives the
     expected order to compare the codec's merge sort against. */
  assert_int_equal(luaL_dostring(L,
                                 "local t, keys = {}, {}\n"
                                 "for i = 0, 10006 do\n"
                                 "  local k = string.format('k%d', (i * 7919) % 10007)\n"
                                 "  t[k] = i; keys[#keys + 1] = k\n"
                                 "end\n"
                                 "for i = 1, 300 do t[i * 3] = -i end\n"
                                 "local skeys = {}\n"
                                 "for k in pairs(t) do skeys[#skeys + 1] = tostring(k) end\n"
                                 "table.sort(skeys)\n"
                                 "local parts = {}\n"
                                 "for _, k in ipairs(skeys) do\n"
                                 "  local v = t[k] or t[tonumber(k)]\n"
                                 "  parts[#parts + 1] = string.format('%q:%d', k, v)\n"
                                 "end\n"
                                 "big, big_expected = t, '{' .. table.concat(parts, ',') .. '}'"),
                   LUA_OK);
  lua_getglobal(L, "big_expected");
  char *expected = strdup(lua_tostring(L, -1));
  expect_encode(L, "big", expected);
  free(expected);
}

/* ---- decoding ---------------------------------------------------------------------------- */

static void test_decode_scalars(void **state) {
  lua_State *L = *state;
  expect_decode(L, "true", "v == true");
  expect_decode(L, "false", "v == false");
  expect_decode(L, " \t\r\n 42 \n", "math.type(v) == 'integer' and v == 42");
  expect_decode(L, "-0", "math.type(v) == 'integer' and v == 0");
  expect_decode(L, "-0.0", "math.type(v) == 'float' and 1/v < 0");
  expect_decode(L, "1.0", "math.type(v) == 'float' and v == 1");
  expect_decode(L, "1e2", "math.type(v) == 'float' and v == 100");
  expect_decode(L, "1E+2", "math.type(v) == 'float' and v == 100");
  expect_decode(L, "25e-1", "v == 2.5");
  expect_decode(L, "0.1", "v == 0.1");
  expect_decode(L, "1e-400", "v == 0.0");
  expect_decode(L, "\"hi\"", "v == 'hi'");
  expect_decode(L, "\"\"", "v == ''");
}

static void test_decode_big_integers(void **state) {
  lua_State *L = *state;
  expect_decode(L, "9007199254740993", "math.type(v) == 'integer' and v == 9007199254740993");
  expect_decode(L, "9223372036854775807", "v == math.maxinteger and math.type(v) == 'integer'");
  expect_decode(L, "-9223372036854775808", "v == math.mininteger and math.type(v) == 'integer'");
  expect_decode(L, "9223372036854775808", "math.type(v) == 'float' and v == 2^63");
  expect_decode(L, "-9223372036854775809", "math.type(v) == 'float' and v == -2^63");
  expect_decode(L, "123456789012345678901234567890", "math.type(v) == 'float' and v > 1.2e29");
  /* Longer than the parser's local copy of a number. */
  expect_decode(L, "0.00000000000000000000000000000000000000000000000000000000000000000000001",
                "v == 1e-71");
  expect_round_trip(L, "[9223372036854775807,-9223372036854775808,9007199254740993]",
                    "[9223372036854775807,-9223372036854775808,9007199254740993]");
}

static void test_decode_bad_numbers(void **state) {
  lua_State *L = *state;
  expect_decode_error(L, "01", "invalid number (leading zero) at line 1, column 2");
  expect_decode_error(L, "-01", "invalid number (leading zero) at line 1, column 3");
  expect_decode_error(L, "+1", "unexpected character '+' at line 1, column 1");
  expect_decode_error(L, "-", "invalid number (expected a digit) at line 1, column 2");
  expect_decode_error(L, "-a", "invalid number (expected a digit) at line 1, column 2");
  expect_decode_error(L, "1.", "invalid number (expected a digit after '.') at line 1, column 3");
  expect_decode_error(L, ".5", "unexpected character '.' at line 1, column 1");
  expect_decode_error(L, "1e",
                      "invalid number (expected a digit in the exponent) at line 1, column 3");
  expect_decode_error(L, "1e+",
                      "invalid number (expected a digit in the exponent) at line 1, column 4");
  expect_decode_error(L, "0x10", "unexpected data after the JSON value at line 1, column 2");
  expect_decode_error(L, "NaN", "unexpected character 'N' at line 1, column 1");
  expect_decode_error(L, "Infinity", "unexpected character 'I' at line 1, column 1");
  expect_decode_error(L, "-Infinity", "invalid number (expected a digit) at line 1, column 2");
  expect_decode_error(L, "[1e400]", "number out of range at line 1, column 2");
  expect_decode_error(L, "-1e400", "number out of range at line 1, column 1");
}

static void test_decode_strings(void **state) {
  lua_State *L = *state;
  expect_decode(L, "\"\\\"\\\\\\/\\b\\f\\n\\r\\t\"", "v == '\"\\\\/\\b\\f\\n\\r\\t'");
  expect_decode(L, "\"\\u0041\\u00e9\\u20AC\"", "v == 'A\\u{e9}\\u{20ac}'");
  expect_decode(L, "\"a\\u0000b\"", "v == 'a\\0b' and #v == 3");
  expect_decode(L, "\"\\ud83d\\ude00\"", "v == '\\u{1f600}'");
  expect_decode(L, "\"\\uDBFF\\uDFFF\"", "v == '\\u{10ffff}'");
  expect_decode(L, "\"caf\xC3\xA9 \xF0\x9F\x98\x80\"", "v == 'caf\\u{e9} \\u{1f600}'");
  expect_decode(L, "\"x\\ny\\u2028z\"", "v == 'x\\ny\\u{2028}z'");
}

static void test_decode_bad_strings(void **state) {
  lua_State *L = *state;
  expect_decode_error(L, "\"\\ud83d\"", "lone UTF-16 surrogate in \\u escape at line 1, column 2");
  expect_decode_error(L, "\"\\ud83dx\"", "lone UTF-16 surrogate in \\u escape at line 1, column 2");
  expect_decode_error(L, "\"ab\\ude00\"",
                      "lone UTF-16 surrogate in \\u escape at line 1, column 4");
  expect_decode_error(L, "\"\\ud83d\\u0041\"",
                      "lone UTF-16 surrogate in \\u escape at line 1, column 2");
  expect_decode_error(L, "\"\\ud83d\\ud83d\"",
                      "lone UTF-16 surrogate in \\u escape at line 1, column 2");
  expect_decode_error(L, "\"\\u12\"",
                      "invalid \\u escape (expected 4 hex digits) at line 1, column 3");
  expect_decode_error(L, "\"\\u12g4\"",
                      "invalid \\u escape (expected 4 hex digits) at line 1, column 3");
  expect_decode_error(L, "\"\\x41\"", "invalid escape in string at line 1, column 2");
  expect_decode_error(L, "\"\\'\"", "invalid escape in string at line 1, column 2");
  expect_decode_error(L, "\"abc", "unterminated string at line 1, column 5");
  expect_decode_error(L, "\"ab\\", "invalid escape in string at line 1, column 4");
  expect_decode_error(L, "\"a\tb\"",
                      "control character in string (must be escaped) at line 1, column 3");
  expect_decode_error(L, "\"a\nb\"",
                      "control character in string (must be escaped) at line 1, column 3");
  expect_decode_error_len(L, "\"a\0b\"", 5,
                          "control character in string (must be escaped) at line 1, column 3");
  expect_decode_error(L, "\"ab\xff\"", "invalid UTF-8 in string at line 1, column 4");
  expect_decode_error(L, "\"\xC0\x80\"", "invalid UTF-8 in string at line 1, column 2");
  expect_decode_error(L, "\"\xED\xA0\x80\"", "invalid UTF-8 in string at line 1, column 2");
  expect_decode_error(L, "\"\xE2\x82\"", "invalid UTF-8 in string at line 1, column 2");
  expect_decode_error(L, "{\"k\xff\":1}", "invalid UTF-8 in string at line 1, column 4");
}

static void test_decode_containers(void **state) {
  lua_State *L = *state;
  expect_decode(L, "[1, \"two\", [3], {\"four\": 4}]",
                "#v == 4 and v[1] == 1 and v[2] == 'two' and v[3][1] == 3 and v[4].four == 4");
  expect_decode(L, "{}", "next(v) == nil and getmetatable(v) == nil");
  expect_decode(L, "[]", "next(v) == nil and getmetatable(v).__jsontype == 'array'");
  /* One marker per state, not one per array. */
  expect_decode(L, "[[], []]", "rawequal(getmetatable(v[1]), getmetatable(v[2]))");
  expect_decode(L, "[1]", "getmetatable(v) == nil");
  expect_decode(L, "{\"a\": 1, \"a\": 2}", "v.a == 2");
  expect_decode(L, "{\"1\": true}", "v['1'] == true and v[1] == nil");
  expect_decode(L, " { \"a\" : [ 1 , 2 ] , \"b\" : null } ", "#v.a == 2 and v.b == null");
}

static void test_decode_syntax_errors(void **state) {
  lua_State *L = *state;
  expect_decode_error(L, "", "unexpected end of input at line 1, column 1");
  expect_decode_error(L, "   ", "unexpected end of input at line 1, column 4");
  expect_decode_error(L, "[1,2", "expected ',' or ']' after an array element at line 1, column 5");
  expect_decode_error(L, "[1 2]", "expected ',' or ']' after an array element at line 1, column 4");
  expect_decode_error(L, "[1,]", "unexpected character ']' at line 1, column 4");
  expect_decode_error(L, "[,1]", "unexpected character ',' at line 1, column 2");
  expect_decode_error(L, "{\"a\":1,}", "expected a string key in an object at line 1, column 8");
  expect_decode_error(L, "{a:1}", "expected a string key in an object at line 1, column 2");
  expect_decode_error(L, "{\"a\" 1}", "expected ':' after an object key at line 1, column 6");
  expect_decode_error(L, "{\"name\": \"x\", \"b\" \"c\"}",
                      "expected ':' after an object key at line 1, column 19");
  expect_decode_error(L, "{\"a\":1 \"b\":2}",
                      "expected ',' or '}' after an object member at line 1, column 8");
  expect_decode_error(L, "{\n  \"a\": 1,\n  \"b\": tru\n}",
                      "invalid literal (expected true, false or null) at line 3, column 8");
  expect_decode_error(L, "nul",
                      "invalid literal (expected true, false or null) at line 1, column 1");
  expect_decode_error(L, "True", "unexpected character 'T' at line 1, column 1");
  expect_decode_error(L, "[1] [2]", "unexpected data after the JSON value at line 1, column 5");
  expect_decode_error(L, "1 // comment",
                      "unexpected data after the JSON value at line 1, column 3");
  expect_decode_error(L, "'single'", "unexpected character ''' at line 1, column 1");
  expect_decode_error(L, "\xEF\xBB\xBF{}",
                      "UTF-8 byte order mark is not allowed at line 1, column 1");
  expect_decode_error(L, "\x01", "unexpected byte 0x01 at line 1, column 1");
  expect_decode_error(L, "[\xC3\xA9]", "unexpected byte 0xC3 at line 1, column 2");
  expect_decode_error(L, "\f1", "unexpected byte 0x0C at line 1, column 1");
  /* NUL bytes: the text is (pointer, length), not a C string. */
  expect_decode_error_len(L, "[1,\0 2]", 7, "unexpected NUL byte at line 1, column 4");
  expect_decode_error_len(L, "{}\0", 3,
                          "unexpected NUL byte after the JSON value at line 1, column 3");
  expect_decode_error_len(L, "\0", 1, "unexpected NUL byte at line 1, column 1");
  expect_decode_len(L, "[1]\0ignored", 3, "v[1] == 1");
}

static void test_decode_bytes(void **state) {
  lua_State *L = *state;
  expect_decode(L, "{\"$bytes\":\"aGk=\"}", "v == 'hi'");
  expect_decode(L, "{\"$bytes\":\"/w==\"}", "v == '\\xff'");
  expect_decode(L, "{ \"$bytes\" : \"\" }", "v == ''");
  expect_decode(L, "[{\"$bytes\":\"AP8A\"}]", "v[1] == '\\0\\xff\\0'");
  /* Not exactly one member: an ordinary object. */
  expect_decode(L, "{\"$bytes\":\"aGk=\",\"x\":1}", "type(v) == 'table' and v['$bytes'] == 'aGk='");
  expect_decode(L, "{\"x\":1,\"$bytes\":\"aGk=\"}", "type(v) == 'table' and v.x == 1");
  /* The one-member form is reserved (issue 9, E.4): a byte string, or an error. */
  expect_decode_error(L, "{\"$bytes\":5}",
                      "{\"$bytes\": ...} is reserved for byte strings: its value must be a "
                      "base64 string at line 1, column 11");
  expect_decode_error(L, "[{\"$bytes\":{}}]",
                      "{\"$bytes\": ...} is reserved for byte strings: its value must be a "
                      "base64 string at line 1, column 12");
  expect_decode(L, "{\"$bytes\":\"aGk=\",\"$bytes\":\"aGk=\"}", "type(v) == 'table'");
  expect_decode(L, "{\"$Bytes\":\"aGk=\"}", "type(v) == 'table'");
  expect_decode_error(L, "[{\"$bytes\": \"aGk\"}]",
                      "invalid base64 in {\"$bytes\": ...} at line 1, column 13");
  expect_decode_error(L, "{\"$bytes\":\"a*k=\"}",
                      "invalid base64 in {\"$bytes\": ...} at line 1, column 11");
  /* Both ways. */
  expect_round_trip(L, "{\"$bytes\":\"/w==\"}", "{\"$bytes\":\"/w==\"}");
  expect_round_trip(L, "{\"$bytes\":\"aGk=\"}", "\"hi\"");
  /* A guest table cannot forge a byte string: with "$bytes" as its only key it is refused,
     whatever the value (valid base64, invalid base64, not a string); with more keys it is
     an ordinary object, which the decoder reads back as one. */
#define RESERVED                                                                                   \
  "cannot encode a table whose only key is \"$bytes\" as JSON (that form is reserved for byte "    \
  "strings; add another key or rename it)"
  expect_encode_error(L, "{['$bytes'] = 'aGk='}", "value: " RESERVED);
  expect_encode_error(L, "{['$bytes'] = 'a*k='}", "value: " RESERVED);
  expect_encode_error(L, "{['$bytes'] = 5}", "value: " RESERVED);
  expect_encode_error(L, "{x = {['$bytes'] = '/w=='}}", "value.x: " RESERVED);
#undef RESERVED
  expect_encode(L, "{['$bytes'] = 'aGk=', x = 1}", "{\"$bytes\":\"aGk=\",\"x\":1}");
  expect_round_trip(L, "{\"$bytes\":\"aGk=\",\"x\":1}", "{\"$bytes\":\"aGk=\",\"x\":1}");
  expect_encode(L, "{['$bytes2'] = 'aGk='}", "{\"$bytes2\":\"aGk=\"}");
  expect_encode(L, "{b = '\\xc0\\xaf', s = 'ok'}", "{\"b\":{\"$bytes\":\"wK8=\"},\"s\":\"ok\"}");
  expect_decode(L, "{\"b\":{\"$bytes\":\"wK8=\"},\"s\":\"ok\"}",
                "v.b == '\\xc0\\xaf' and v.s == 'ok'");
}

static void test_decode_depth_limit(void **state) {
  lua_State *L = *state;
  char text[300];
  memset(text, '[', 128);
  memset(text + 128, ']', 128);
  text[256] = '\0';
  expect_decode(L, text, "#v == 1");
  memset(text, '[', 129);
  memset(text + 129, ']', 129);
  text[258] = '\0';
  expect_decode_error(L, text, "nesting deeper than 128 at line 1, column 129");
  /* Objects count as well. */
  char objects[1200] = "";
  for (int i = 0; i < 129; i++)
    strcat(objects, "{\"a\":");
  strcat(objects, "1");
  for (int i = 0; i < 129; i++)
    strcat(objects, "}");
  expect_decode_error(L, objects, "nesting deeper than 128 at line 1, column 641");
  /* A long run of openers fails at the limit, without reading on. */
  char *deep = malloc(100001);
  memset(deep, '[', 100000);
  deep[100000] = '\0';
  expect_decode_error(L, deep, "nesting deeper than 128 at line 1, column 129");
  free(deep);
}

static void test_round_trips(void **state) {
  lua_State *L = *state;
  static const char *const canonical[] = {
      "null",
      "true",
      "0",
      "-1",
      "1.0",
      "-0.0",
      "0.1",
      "1e+300",
      "2.5e-08",
      "\"\"",
      "\"\\u0000\\u001f\\\"\\\\\\n\"",
      "\"\\u2028\\u2029\"",
      "\"\xF0\x9F\x98\x80\"",
      "[]",
      "[[]]",
      "{}",
      "[{}]",
      "{\"a\":[1,2.5,\"x\",null,true,false],\"b\":{}}",
      "{\"\":0,\" \":1,\"1\":2,\"A\":3,\"a\":4}",
      "{\"1\":\"a\",\"3\":\"c\"}",
      "[null,null,3]",
  };
  for (size_t i = 0; i < sizeof canonical / sizeof canonical[0]; i++)
    expect_round_trip(L, canonical[i], canonical[i]);
  /* Non-canonical text comes back canonical. */
  expect_round_trip(L, " { \"b\" : 1 , \"a\" : 2 } ", "{\"a\":2,\"b\":1}");
  expect_round_trip(L, "\"\\u0041\\/\\u00E9\"", "\"A/\xC3\xA9\"");
  expect_round_trip(L, "1E2", "100.0");
  expect_round_trip(L, "0.10000000000000001", "0.1");
  expect_round_trip(L, "-0", "0");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_null),
      cmocka_unit_test(test_encode_scalars),
      cmocka_unit_test(test_encode_arrays),
      cmocka_unit_test(test_encode_objects_sorted),
      cmocka_unit_test(test_encode_integer_keys),
      cmocka_unit_test(test_encode_never_calls_metamethods),
      cmocka_unit_test(test_encode_errors_name_the_path),
      cmocka_unit_test(test_encode_root_name),
      cmocka_unit_test(test_encode_light_userdata),
      cmocka_unit_test(test_encode_cycles),
      cmocka_unit_test(test_encode_depth_limit),
      cmocka_unit_test(test_encode_big_array),
      cmocka_unit_test(test_encode_many_keys_sorted),
      cmocka_unit_test(test_decode_scalars),
      cmocka_unit_test(test_decode_big_integers),
      cmocka_unit_test(test_decode_bad_numbers),
      cmocka_unit_test(test_decode_strings),
      cmocka_unit_test(test_decode_bad_strings),
      cmocka_unit_test(test_decode_containers),
      cmocka_unit_test(test_decode_syntax_errors),
      cmocka_unit_test(test_decode_bytes),
      cmocka_unit_test(test_decode_depth_limit),
      cmocka_unit_test(test_round_trips),
  };
  return cmocka_run_group_tests_name("vm/json", tests, setup, teardown);
}
