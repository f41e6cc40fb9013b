/* tests/stdlib/test_base.c -- unit tests of stdlib/base.c: print, tostring, load,
   collectgarbage, pcall/xpcall and the removed base functions,
   exercised through the public API with small Lua snippets. */
#include <ctype.h>
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

/* s[0..len) is exactly "<type>: 0x" and 12 lowercase hex digits: the hidden-address form. */
static void assert_hidden_address(const char *s, size_t len, const char *type) {
  size_t tlen = strlen(type);
  if (len != tlen + 4 + 12 || strncmp(s, type, tlen) != 0 || strncmp(s + tlen, ": 0x", 4) != 0)
    fail_msg("'%.*s' is not of the form '%s: 0x' + 12 hex digits", (int)len, s, type);
  for (size_t i = tlen + 4; i < len; i++)
    if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
      fail_msg("'%.*s': '%c' is not a lowercase hex digit", (int)len, s, s[i]);
}

/* A JSON string value without its quotes (the forms tested here need no escapes). */
static void assert_hidden_address_json(const char *json, const char *type) {
  size_t len = strlen(json);
  if (len < 2 || json[0] != '"' || json[len - 1] != '"') fail_msg("%s is not a string", json);
  assert_hidden_address(json + 1, len - 2, type);
}

/* ---- print ----------------------------------------------------------------------------- */

static void print_separates_with_tabs_and_ends_with_newline(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("print('a', 'b', 'c')", &o), MBX_OK);
  assert_string_equal(o.out, "a\tb\tc\n");
  assert_int_equal(o.out_len, 6);
  assert_int_equal(o.err_len, 0);
  assert_int_equal(snippet_run("print()", &o), MBX_OK);
  assert_string_equal(o.out, "\n");
  assert_int_equal(snippet_run("print('x') print('y')", &o), MBX_OK);
  assert_string_equal(o.out, "x\ny\n");
}

static void print_formats_numbers_like_stock_lua(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(
      snippet_run("print(1, 1.0, -0.0, 2^53, 1e100, 0.1, math.maxinteger, 3 // 2, 3 / 2)", &o),
      MBX_OK);
  assert_string_equal(o.out, "1\t1.0\t-0.0\t9.007199254741e+15\t1e+100\t0.1\t"
                             "9223372036854775807\t1\t1.5\n");
  assert_int_equal(snippet_run("print(1/0, -1/0, math.mininteger)", &o), MBX_OK);
  assert_string_equal(o.out, "inf\t-inf\t-9223372036854775808\n");
}

static void print_formats_nil_and_booleans(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("print(nil, true, false)", &o), MBX_OK);
  assert_string_equal(o.out, "nil\ttrue\tfalse\n");
  /* Trailing nils are arguments too. */
  assert_int_equal(snippet_run("print(1, nil, nil)", &o), MBX_OK);
  assert_string_equal(o.out, "1\tnil\tnil\n");
}

static void print_keeps_nul_bytes(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("print('a\\0b')", &o), MBX_OK);
  assert_int_equal(o.out_len, 4);
  assert_memory_equal(o.out, "a\0b\n", 4);
}

static void print_hides_addresses(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("print({})", &o), MBX_OK);
  assert_true(o.out_len > 0 && o.out[o.out_len - 1] == '\n');
  assert_hidden_address(o.out, o.out_len - 1, "table");
  assert_int_equal(snippet_run("print(print)", &o), MBX_OK);
  assert_hidden_address(o.out, o.out_len - 1, "function");
}

static void print_uses_tostring_metamethod(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(
      snippet_run("print(setmetatable({}, {__tostring = function() return 'obj' end}), 1)", &o),
      MBX_OK);
  assert_string_equal(o.out, "obj\t1\n");
  snippet_check_error("print(setmetatable({}, {__tostring = function() return {} end}))",
                      MBX_RUNTIME_ERROR, "'__tostring' must return a string");
}

/* ---- tostring -------------------------------------------------------------------------- */

static void tostring_of_plain_values(void **state) {
  (void)state;
  snippet_check_value("return tostring(1), tostring(1.0), tostring(nil), tostring(true), "
                      "tostring(false), tostring('s'), tostring(-0.0)",
                      "[\"1\",\"1.0\",\"nil\",\"true\",\"false\",\"s\",\"-0.0\"]");
  snippet_check_error("return tostring()", MBX_RUNTIME_ERROR, "bad argument #1 to 'tostring'");
}

static void tostring_is_stable_per_object_and_distinct_between_objects(void **state) {
  (void)state;
  snippet_check_value("local t, u = {}, {} collectgarbage() "
                      "return tostring(t) == tostring(t), tostring(t) ~= tostring(u), "
                      "tostring(print) == tostring(print), tostring(print) ~= tostring(pairs)",
                      "[true,true,true,true]");
  /* Stable across the runs of one sandbox too. */
  mbx_sandbox *sb = snippet_sandbox();
  snippet_outcome first, second;
  assert_int_equal(snippet_run_in(sb, "keep = {} return tostring(keep)", &first), MBX_OK);
  assert_int_equal(snippet_run_in(sb, "collectgarbage() return tostring(keep)", &second), MBX_OK);
  assert_string_equal(first.value, second.value);
  mbx_sandbox_free(sb);
}

/* The real address is never shown. Guests cannot know it, but two live sandboxes allocate
   their tables at different addresses, so the same snippet must print different text (a
   constant or type-only stand-in would not), in the hidden form. */
static void tostring_differs_between_sandboxes(void **state) {
  (void)state;
  mbx_sandbox *a = snippet_sandbox(), *b = snippet_sandbox();
  snippet_outcome oa, ob;
  const char *code = "local t = {1, 2, x = 3} return tostring(t)";
  assert_int_equal(snippet_run_in(a, code, &oa), MBX_OK);
  assert_int_equal(snippet_run_in(b, code, &ob), MBX_OK);
  assert_hidden_address_json(oa.value, "table");
  assert_hidden_address_json(ob.value, "table");
  assert_string_not_equal(oa.value, ob.value);
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

/* ---- load ------------------------------------------------------------------------------ */

static void load_compiles_text(void **state) {
  (void)state;
  snippet_check_value("return load('return 1 + 1')()", "2");
  snippet_check_value("return load('local a, b = ... return a * b')(6, 7)", "42");
}

static void load_refuses_binary_chunks(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("local f, m = load('\\27Lua\\84\\0\\25\\147\\r\\n\\26\\n') "
                               "assert(f == nil) return m",
                               &o),
                   MBX_OK);
  assert_non_null(strstr(o.value, "binary"));
  /* Even a real dump cannot be produced, but the mode argument is refused in any case. */
  assert_int_equal(
      snippet_run("local f, m = load('return 1', 'c', 'b') assert(f == nil) return m", &o), MBX_OK);
  assert_non_null(strstr(o.value, "binary"));
  /* Mode "bt" still compiles text. */
  snippet_check_value("return load('return 5', 'c', 'bt')()", "5");
  snippet_check_value("return load('return 6', 'c', 't')()", "6");
  /* Through a reader function too. */
  assert_int_equal(
      snippet_run("local done = false "
                  "local f, m = load(function() if done then return nil end done = true "
                  "return '\\27Lua' end) assert(f == nil) return m",
                  &o),
      MBX_OK);
  assert_non_null(strstr(o.value, "binary"));
}

static void load_caps_source_size(void **state) {
  (void)state;
  snippet_outcome o;
  /* 1 MiB (the module size) exactly compiles; one more byte is refused with nil + a
     message. */
  snippet_check_value("local pad = ' ' for i = 1, 20 do pad = pad .. pad end "
                      "local src = pad:sub(1, 1048576 - 8) .. 'return 1' assert(#src == 1048576) "
                      "return load(src)()",
                      "1");
  assert_int_equal(snippet_run("local pad = ' ' for i = 1, 20 do pad = pad .. pad end "
                               "local f, m = load(pad .. 'return 1') assert(f == nil) return m",
                               &o),
                   MBX_OK);
  assert_non_null(strstr(o.value, "1048576"));
  /* Reader pieces count toward the same cap. */
  assert_int_equal(
      snippet_run("local piece = ' ' for i = 1, 16 do piece = piece .. piece end "
                  "local n = 0 "
                  "local f, m = load(function() n = n + 1 if n > 17 then return nil end "
                  "return piece end) assert(f == nil) return m",
                  &o),
      MBX_OK);
  assert_non_null(strstr(o.value, "1048576"));
}

static void load_concatenates_reader_pieces(void **state) {
  (void)state;
  snippet_check_value("local parts = {'ret', 'urn ', '1', ' + 4', '1'} local i = 0 "
                      "local f = load(function() i = i + 1 return parts[i] end) return f()",
                      "42");
  /* An empty string ends the chunk, like nil. */
  snippet_check_value("local parts = {'return 1', '', 'error()'} local i = 0 "
                      "return load(function() i = i + 1 return parts[i] end)()",
                      "1");
}

/* Library bug (stdlib/base.c, base_load): the reader is called with lua_call outside any
   protection, so an error in the reader (or a reader returning a non-string) propagates out
   of load; stock load returns nil plus the message in both cases. */
static void load_reader_errors_return_nil_and_message(void **state) {
  (void)state;
  snippet_check_value("return load(function() error('x', 0) end)", "[null,\"x\"]");
  snippet_check_value("return load(function() return {} end)",
                      "[null,\"reader function must return a string\"]");
}

static void load_honours_env_argument(void **state) {
  (void)state;
  snippet_check_value("local env = {x = 5} return load('return x', 'c', 't', env)()", "5");
  snippet_check_value("local env = {} load('y = 1', 'c', 't', env)() return env.y, y", "[1,null]");
  snippet_check_value("local env = {v = 9} local parts = {'return v'} local i = 0 "
                      "return load(function() i = i + 1 return parts[i] end, 'c', 't', env)()",
                      "9");
}

static void load_defaults_env_to_sandbox_globals(void **state) {
  (void)state;
  snippet_check_value("x = 7 return load('return x')()", "7");
  snippet_check_value("load('z = 3')() return z", "3");
  snippet_check_value("return load('return print')() == print", "true");
}

static void load_returns_nil_and_message_on_syntax_error(void **state) {
  (void)state;
  snippet_outcome o;
  assert_int_equal(snippet_run("local f, m = load('return +') return f, m", &o), MBX_OK);
  assert_true(strncmp(o.value, "[null,\"", 7) == 0);
  assert_non_null(strstr(o.value, "[string \\\"return +\\\"]:1:"));
  assert_non_null(strstr(o.value, "unexpected symbol"));
  /* The chunk name argument is used. */
  assert_int_equal(snippet_run("return select(2, pcall(load('error(\"e\")', '=mychunk')))", &o),
                   MBX_OK);
  assert_string_equal(o.value, "\"mychunk:1: e\"");
}

/* Levels count as in stock Lua through moonbox's own C frames (a walker, a live stub, xpcall's
   guard): error(msg, 2) in an __index added later names the line that indexed. */
static void error_levels_skip_moonbox_frames(void **state) {
  (void)state;
  snippet_check_value("local mt = {} local t = setmetatable({}, mt)\n"
                      "mt.__index = function(_, k) error('no field ' .. k, 2) end\n"
                      "local m2 = {} local u = setmetatable({}, m2)\n"
                      "m2.__add = function() error('bad add', 2) end\n"
                      "local function f() error('deep', 3) end local function g() f() end\n"
                      "return {select(2, pcall(function() return t.x end)),\n"
                      "  select(2, pcall(function() return u + 1 end)),\n"
                      "  select(2, pcall(function() g() end)),\n"
                      "  select(2, pcall(error, 'far', 1000)), select(2, pcall(error, 'top'))}",
                      "[\"input:6: no field x\",\"input:7: bad add\",\"input:8: deep\","
                      "\"far\",\"top\"]");
  /* debug.getinfo from a live stub and from an xpcall handler: stock's levels. */
  snippet_check_value(
      "local m = {} local u = setmetatable({}, m) local where\n"
      "m.__lt = function() where = debug.getinfo(2, 'l').currentline return true end\n"
      "local _ = u < u\n"
      "local _, w = xpcall(function() error('e') end, function() "
      "return debug.getinfo(2, 'S').what .. debug.getinfo(3, 'S').what end)\n"
      "return {where, w}",
      "[3,\"CLua\"]");
}

/* ---- collectgarbage -------------------------------------------------------------------- */

static void collectgarbage_allowed_options(void **state) {
  (void)state;
  snippet_check_value("local kb = collectgarbage('count') return math.type(kb), kb > 0",
                      "[\"float\",true]");
  snippet_check_value("return collectgarbage(), collectgarbage('collect')", "[0,0]");
  snippet_check_value("return type(collectgarbage('step')), type(collectgarbage('step', 10))",
                      "[\"boolean\",\"boolean\"]");
  snippet_check_value("return collectgarbage('isrunning')", "true");
  /* collect actually frees garbage. */
  snippet_check_value("collectgarbage() local before = collectgarbage('count') "
                      "do local t = {} for i = 1, 10000 do t[i] = {} end end "
                      "local during = collectgarbage('count') collectgarbage() "
                      "return during > before + 100, collectgarbage('count') < during - 100",
                      "[true,true]");
}

static void collectgarbage_stop_and_restart_are_honoured(void **state) {
  (void)state;
  snippet_check_value("local a = collectgarbage('isrunning') local s = collectgarbage('stop') "
                      "local b = collectgarbage('isrunning') local r = collectgarbage('restart') "
                      "return a, s, b, r, collectgarbage('isrunning')",
                      "[true,0,false,0,true]");
  /* Stopped, garbage stays until a collection the guest asks for (or the memory limit's). */
  snippet_check_value(
      "collectgarbage() collectgarbage('stop') local before = collectgarbage('count') "
      "for i = 1, 20000 do local t = {} end "
      "local grown = collectgarbage('count') - before collectgarbage() "
      "return grown > 500, collectgarbage('count') - before < 100, "
      "collectgarbage('isrunning')",
      "[true,true,false]");
  /* Stopped across runs of one sandbox, as in one lua_State. */
  mbx_sandbox *sb = snippet_sandbox();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "collectgarbage('stop')", &o), MBX_OK);
  assert_int_equal(snippet_run_in(sb, "return collectgarbage('isrunning')", &o), MBX_OK);
  assert_string_equal(o.value, "false");
  mbx_sandbox_free(sb);
}

static void collectgarbage_modes_return_the_previous_mode(void **state) {
  (void)state;
  /* As the stand-alone lua5.4, which starts in generational mode; "generational" itself is
     a no-op (a1f77a23), only remembered. */
  snippet_check_value("return collectgarbage('generational'), collectgarbage('incremental'), "
                      "collectgarbage('incremental', 200, 100, 13), "
                      "collectgarbage('generational', 20, 100), collectgarbage('incremental')",
                      "[\"generational\",\"generational\",\"incremental\",\"incremental\","
                      "\"generational\"]");
  /* The mode lasts across runs of one sandbox. */
  mbx_sandbox *sb = snippet_sandbox();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "collectgarbage('incremental')", &o), MBX_OK);
  assert_int_equal(snippet_run_in(sb, "return collectgarbage('generational')", &o), MBX_OK);
  assert_string_equal(o.value, "\"incremental\"");
  assert_int_equal(snippet_run_in(sb, "return collectgarbage('incremental')", &o), MBX_OK);
  assert_string_equal(o.value, "\"generational\"");
  /* A checkpoint keeps the mode, and a rewind brings it back (MBX_ARENA_MALLOC builds, the
     ASan preset, have no checkpoints). */
  mbx_status cs = mbx_sandbox_checkpoint(sb, NULL);
  if (cs != MBX_UNSUPPORTED) {
    assert_int_equal(cs, MBX_OK);
    assert_int_equal(snippet_run_in(sb, "return collectgarbage('generational')", &o), MBX_OK);
    assert_string_equal(o.value, "\"incremental\"");
    assert_int_equal(mbx_sandbox_rewind(sb, NULL), MBX_OK);
    assert_int_equal(snippet_run_in(sb, "return collectgarbage('generational')", &o), MBX_OK);
    assert_string_equal(o.value, "\"incremental\"");
  }
  mbx_sandbox_free(sb);
}

static void collectgarbage_parameters_are_clamped(void **state) {
  (void)state;
  /* Stock returns the previous value; values past the clamps are stored clamped (a huge step
     multiplier would make one allocation a whole O(heap) cycle). */
  snippet_check_value(
      "local a = collectgarbage('setpause', 150) local b = collectgarbage('setpause', 1) "
      "local c = collectgarbage('setpause', 1e6) local d = collectgarbage('setpause', 200) "
      "local e = collectgarbage('setstepmul', 1e9) local f = collectgarbage('setstepmul', 100) "
      "return a, b, c, d, e, f",
      "[200,148,48,1000,100,400]");
}

/* Not an option at all: stock's argument error, not the sandbox's refusal (issue 9, F.5). */
static void collectgarbage_unknown_option_is_an_argument_error(void **state) {
  (void)state;
  snippet_check_error("collectgarbage('bogus')", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'collectgarbage' (invalid option 'bogus')");
  snippet_check_value("return select(2, pcall(collectgarbage, 'x'))",
                      "\"bad argument #1 to 'collectgarbage' (invalid option 'x')\"");
}

/* ---- pcall / xpcall -------------------------------------------------------------------- */

static void pcall_returns_values(void **state) {
  (void)state;
  snippet_check_value("return pcall(function(a, b) return a + b, 'x', nil end, 1, 2)",
                      "[true,3,\"x\",null]");
  snippet_check_value("return pcall(function() end)", "true");
  snippet_check_value("return select('#', pcall(function() return 1, 2, 3 end))", "4");
}

static void pcall_returns_error_values(void **state) {
  (void)state;
  snippet_check_value("return pcall(error, 'm')", "[false,\"m\"]");
  snippet_check_value("return pcall(function() error('m') end)", "[false,\"input:1: m\"]");
  snippet_check_value("local ok, e = pcall(error, {code = 7}) return ok, e.code", "[false,7]");
  snippet_check_value("local obj = {} local ok, e = pcall(error, obj) return rawequal(e, obj)",
                      "true");
  snippet_check_value("return pcall(error)", "[false,null]");
  snippet_outcome o;
  assert_int_equal(snippet_run("return pcall(nil)", &o), MBX_OK);
  assert_non_null(strstr(o.value, "attempt to call a nil value"));
  snippet_check_error("pcall()", MBX_RUNTIME_ERROR, "bad argument #1 to 'pcall'");
}

static void xpcall_passes_error_to_handler(void **state) {
  (void)state;
  snippet_check_value("return xpcall(function(a) return a * 2 end, print, 21)", "[true,42]");
  snippet_check_value("return xpcall(error, function(e) return 'handled ' .. e end, 'boom')",
                      "[false,\"handled boom\"]");
  snippet_check_value("return xpcall(function() error({1, 2}) end, function(e) return #e end)",
                      "[false,2]");
  snippet_check_value("local seen local ok, h = xpcall(function() local x = nil; return x.y end, "
                      "function(e) seen = e return 'h' end) return ok, h, seen:sub(1, 6)",
                      "[false,\"h\",\"input:\"]");
  snippet_check_error("xpcall(print)", MBX_RUNTIME_ERROR, "bad argument #2 to 'xpcall'");
}

static void yield_across_pcall_inside_coroutine(void **state) {
  (void)state;
  snippet_check_value(
      "local co = coroutine.create(function() "
      "  local ok, v = pcall(function() local x = coroutine.yield(1) return x * 2 end) "
      "  return ok, v end) "
      "local _, a = coroutine.resume(co) local _, ok, v = coroutine.resume(co, 21) "
      "return a, ok, v, coroutine.status(co)",
      "[1,true,42,\"dead\"]");
  snippet_check_value("local co = coroutine.wrap(function() "
                      "  return xpcall(function() coroutine.yield('y') error('late', 0) end, "
                      "                function(e) return 'caught ' .. e end) end) "
                      "local first = co() local ok, m = co() return first, ok, m",
                      "[\"y\",false,\"caught late\"]");
}

static void tripped_limit_inside_pcall_ends_the_run(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 100000);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb,
                                  "local ok = pcall(function() while true do end end) "
                                  "print('survived') return ok",
                                  &o),
                   MBX_INSTRUCTION_LIMIT);
  assert_string_equal(o.out, "");
  assert_true(mbx_sandbox_poisoned(sb));
  mbx_sandbox_free(sb);

  sb = snippet_sandbox_with(MBX_LIMIT_INSTRUCTIONS, 100000);
  assert_int_equal(
      snippet_run_in(sb,
                     "for i = 1, 100 do "
                     "  xpcall(function() while true do end end, function() return 1 end) "
                     "end return 'survived'",
                     &o),
      MBX_INSTRUCTION_LIMIT);
  mbx_sandbox_free(sb);

  sb = snippet_sandbox_with(MBX_LIMIT_MEMORY, 1 << 20);
  assert_int_equal(snippet_run_in(sb,
                                  "local ok = pcall(function() local t = {} "
                                  "for i = 1, 1e8 do t[i] = i end end) return 'survived'",
                                  &o),
                   MBX_MEMORY_LIMIT);
  mbx_sandbox_free(sb);
}

/* ---- warn ------------------------------------------------------------------------------ */

static void warn_writes_to_the_captured_stderr(void **state) {
  (void)state;
  snippet_outcome o;
  /* Off until "@on", as in the stand-alone lua; other control messages are ignored. */
  assert_int_equal(snippet_run("warn('hidden') warn('@on') warn('a', 'b', 1) warn('@x') "
                               "warn('@off') warn('hidden too')",
                               &o),
                   MBX_OK);
  assert_string_equal(o.err, "Lua warning: ab1\n");
  assert_int_equal(o.out_len, 0);
  snippet_check_error("warn()", MBX_RUNTIME_ERROR, "bad argument #1 to 'warn'");
  snippet_check_error("warn('@on') warn('x', {})", MBX_RUNTIME_ERROR, "bad argument #2 to 'warn'");
  /* The switch lasts across runs of one sandbox. */
  mbx_sandbox *sb = snippet_sandbox();
  assert_int_equal(snippet_run_in(sb, "warn('@on')", &o), MBX_OK);
  assert_int_equal(snippet_run_in(sb, "warn('again')", &o), MBX_OK);
  assert_string_equal(o.err, "Lua warning: again\n");
  mbx_sandbox_free(sb);
}

/* ---- removed functions ----------------------------------------------------------------- */

static void removed_base_functions_are_nil(void **state) {
  (void)state;
  /* dofile and loadfile are stdlib/package.c's (tests/stdlib/test_package.c). */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(print_separates_with_tabs_and_ends_with_newline),
      cmocka_unit_test(print_formats_numbers_like_stock_lua),
      cmocka_unit_test(print_formats_nil_and_booleans),
      cmocka_unit_test(print_keeps_nul_bytes),
      cmocka_unit_test(print_hides_addresses),
      cmocka_unit_test(print_uses_tostring_metamethod),
      cmocka_unit_test(tostring_of_plain_values),
      cmocka_unit_test(tostring_is_stable_per_object_and_distinct_between_objects),
      cmocka_unit_test(tostring_differs_between_sandboxes),
      cmocka_unit_test(load_compiles_text),
      cmocka_unit_test(load_refuses_binary_chunks),
      cmocka_unit_test(load_caps_source_size),
      cmocka_unit_test(load_concatenates_reader_pieces),
      cmocka_unit_test(load_reader_errors_return_nil_and_message),
      cmocka_unit_test(load_honours_env_argument),
      cmocka_unit_test(load_defaults_env_to_sandbox_globals),
      cmocka_unit_test(load_returns_nil_and_message_on_syntax_error),
      cmocka_unit_test(error_levels_skip_moonbox_frames),
      cmocka_unit_test(collectgarbage_allowed_options),
      cmocka_unit_test(collectgarbage_stop_and_restart_are_honoured),
      cmocka_unit_test(collectgarbage_modes_return_the_previous_mode),
      cmocka_unit_test(collectgarbage_parameters_are_clamped),
      cmocka_unit_test(warn_writes_to_the_captured_stderr),
      cmocka_unit_test(collectgarbage_unknown_option_is_an_argument_error),
      cmocka_unit_test(pcall_returns_values),
      cmocka_unit_test(pcall_returns_error_values),
      cmocka_unit_test(xpcall_passes_error_to_handler),
      cmocka_unit_test(yield_across_pcall_inside_coroutine),
      cmocka_unit_test(tripped_limit_inside_pcall_ends_the_run),
      cmocka_unit_test(removed_base_functions_are_nil),
  };
  return cmocka_run_group_tests_name("stdlib/base", tests, snippet_setup, snippet_teardown);
}
