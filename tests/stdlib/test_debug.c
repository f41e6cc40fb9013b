/* tests/stdlib/test_debug.c -- unit tests of stdlib/debug.c: the debug subset (Lua levels and
   Lua functions only), exercised through the public API with small Lua snippets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static void require_returns_the_debug_table(void **state) {
  (void)state;
  snippet_check_value("return require('debug') == debug, type(debug.getinfo)",
                      "[true,\"function\"]");
}

static void getinfo_describes_lua_levels_and_functions(void **state) {
  (void)state;
  snippet_check_value("local function f(a, b, ...)\n"
                      "  local i = debug.getinfo(1, 'nSltu')\n"
                      "  return i\n"
                      "end\n"
                      "local i = f(1, 2)\n"
                      "return {i.what, i.currentline, i.linedefined, i.lastlinedefined, i.nups,\n"
                      "        i.nparams, i.isvararg, i.name, i.namewhat, i.istailcall,\n"
                      "        i.short_src, i.source}",
                      "[\"Lua\",2,1,4,1,2,true,\"f\",\"local\",false,\"input\",\"=input\"]");
  /* A Lua function (argument or level) comes with its func; the main chunk is "main". */
  snippet_check_value("local function g() return debug.getinfo(1, 'f').func end\n"
                      "local m = debug.getinfo(1, 'Sf')\n"
                      "return g() == g, debug.getinfo(g, 'f').func == g, m.what, m.func ~= nil",
                      "[true,true,\"main\",true]");
  /* Stock's answers for a level past the stack and for options it does not know. */
  snippet_check_value("return debug.getinfo(50) == nil, (debug.getinfo(1, 'L').activelines[1]), "
                      "pcall(debug.getinfo, 1, '>S')",
                      "[true,true,false,\"bad argument #2 to 'debug.getinfo' (invalid option)\"]");
}

/* A metamethod moonbox calls for the VM through a C frame of its own (a walker, a live stub:
   events added after setmetatable) has the name stock gives it, from the code that fired the
   event; before, the frame between left it nameless. */
static void getinfo_names_metamethods_called_through_moonbox(void **state) {
  (void)state;
  snippet_check_value(
      "local mt = {} local o = setmetatable({}, mt)\n"
      "local function named(i) return tostring(i.name) .. '/' .. i.namewhat end\n"
      "mt.__add = function() return named(debug.getinfo(1, 'n')) end\n"
      "mt.__index = function() return named(debug.getinfo(1, 'n')) end\n"
      "mt.__lt = function() return named(debug.getinfo(1, 'n')) == 'lt/metamethod' end\n"
      "local cls = {__sub = mt.__add} local p = setmetatable({}, cls)\n"
      "return {o + 1, o.x, o < o, p - 1}",
      "[\"add/metamethod\",\"index/metamethod\",true,\"sub/metamethod\"]");
}

static void getinfo_gives_no_function_for_c_levels_or_c_functions(void **state) {
  (void)state;
  /* Level 2 of the callback is moonbox's pcall: described as C, without its closure. */
  snippet_check_value("local r\n"
                      "pcall(function() r = debug.getinfo(2, 'Sfn') end)\n"
                      "local p = debug.getinfo(print, 'Sfu')\n"
                      "return r.what, r.func == nil, p.what, p.func == nil, p.short_src",
                      "[\"C\",true,\"C\",true,\"[C]\"]");
}

static void getlocal_and_setlocal_reach_named_locals(void **state) {
  (void)state;
  snippet_check_value("local function f(a, ...)\n"
                      "  local b = a * 2\n"
                      "  local n1, v1 = debug.getlocal(1, 1)\n"
                      "  local n2, v2 = debug.getlocal(1, 2)\n"
                      "  local nv, vv = debug.getlocal(1, -1)\n"
                      "  assert(debug.setlocal(1, 2, 99) == 'b')\n"
                      "  return {n1, v1, n2, v2, nv, vv, b}\n"
                      "end\n"
                      "return f(3, 'x')",
                      "[\"a\",3,\"b\",6,\"(vararg)\",\"x\",99]");
  /* The caller's locals, a parameter name of a function, and nothing past the locals. */
  snippet_check_value("local x = 5\n"
                      "local function f() debug.setlocal(2, 1, 7) return debug.getlocal(2, 1) end\n"
                      "local n, v = f()\n"
                      "return n, v, x, debug.getlocal(f, 1), debug.getlocal(function(p) end, 1), "
                      "debug.getlocal(1, 100)",
                      "[\"x\",7,7,null,\"p\",null]");
}

static void c_levels_show_no_locals_and_refuse_setlocal(void **state) {
  (void)state;
  /* Every moonbox C function that calls back into Lua: inside the callback, any C level
     below shows no locals (no host pointer, no C temporary) and no function, and setlocal
     raises. */
  snippet_check_value(
      "local seen, bad = 0, {}\n"
      "local function probe()\n"
      "  for level = 2, 12 do\n"
      "    local i = debug.getinfo(level, 'Sf')\n"
      "    if not i then break end\n"
      "    if i.what == 'C' then\n"
      "      seen = seen + 1\n"
      "      if i.func ~= nil then bad[#bad + 1] = 'func' end\n"
      "      for n = -3, 8 do\n"
      "        if n ~= 0 and debug.getlocal(level, n) ~= nil then bad[#bad + 1] = 'local' end\n"
      "      end\n"
      "      if pcall(debug.setlocal, level + 1, 1, 0) then bad[#bad + 1] = 'set' end\n"
      "    end\n"
      "  end\n"
      "  return true\n"
      "end\n"
      "pcall(probe)\n"
      "xpcall(probe, print)\n"
      "xpcall(error, probe)\n"
      "table.sort({3, 1, 2}, function(a, b) probe() return a < b end)\n"
      "string.gsub('abc', '%w', function() probe() end)\n"
      "coroutine.wrap(probe)()\n"
      "coroutine.resume(coroutine.create(probe))\n"
      "load(function() probe() return nil end)\n"
      "tostring(setmetatable({}, {__tostring = function() probe() return 'x' end}))\n"
      "string.format('%s', setmetatable({}, {__tostring = function() probe() return 'x' end}))\n"
      "table.concat(setmetatable({}, {__index = function() probe() return 'x' end, "
      "__len = function() return 2 end}))\n"
      "for _ in pairs(setmetatable({}, {__pairs = function() probe() return next, {} end})) do end\n"
      "return seen >= 12, #bad",
      "[true,0]");
}

static void setlocal_refuses_the_vms_own_slots(void **state) {
  (void)state;
  /* "(for state)" holds the loop's counters: OP_FORLOOP reads them without a type check. */
  snippet_check_value("local function f() return pcall(debug.setlocal, 3, 4, {}) end\n"
                      "local ok, err\n"
                      "for i = 1, 2 do ok, err = f() end\n"
                      "return ok, err",
                      "[false,\"debug.setlocal: '(for state)' is the VM's own slot, not "
                      "a variable; this sandbox sets named locals and varargs only\"]");
  /* A temporary (here the table OP_SETLIST fills) is neither shown nor set. */
  snippet_check_value("local got, ok\n"
                      "local function f()\n"
                      "  got = debug.getlocal(2, 4)\n"
                      "  ok = pcall(debug.setlocal, 3, 4, 42)\n"
                      "  return 1\n"
                      "end\n"
                      "local t = {f()}\n"
                      "return got, ok, t[1]",
                      "[null,false,1]");
}

static void upvalues_of_lua_functions_only(void **state) {
  (void)state;
  snippet_check_value("local up = 1\n"
                      "local function f() return up end\n"
                      "local function g() return up end\n"
                      "local n, v = debug.getupvalue(f, 1)\n"
                      "local s = debug.setupvalue(f, 1, 5)\n"
                      "return n, v, s, g(), debug.upvalueid(f, 1) == debug.upvalueid(g, 1), "
                      "select('#', debug.getupvalue(f, 2))",
                      "[\"up\",1,\"up\",5,true,0]");
  snippet_check_value(
      "local a, b = 1, 2\n"
      "local function f() return a end\n"
      "local function g() return b end\n"
      "debug.upvaluejoin(f, 1, g, 1)\n"
      "return f(), pcall(debug.upvaluejoin, f, 3, g, 1)",
      "[2,false,\"bad argument #2 to 'debug.upvaluejoin' (invalid upvalue index)\"]");
  /* C functions: nothing shown, nothing set, joined or identified. */
  snippet_check_value("return select('#', debug.getupvalue(print, 1)), "
                      "select('#', debug.getupvalue(setmetatable, 1)), "
                      "{pcall(debug.setupvalue, setmetatable, 1, {})}, "
                      "{pcall(debug.upvalueid, string.gsub, 1)}, "
                      "{pcall(debug.upvaluejoin, function() return print end, 1, setmetatable, 1)}",
                      "[0,0,[false,\"debug.setupvalue: the upvalues of C functions are not "
                      "reachable in this sandbox\"],[false,\"debug.upvalueid: the upvalues of C "
                      "functions are not reachable in this sandbox\"],[false,\"debug.upvaluejoin: "
                      "the upvalues of C functions are not reachable in this sandbox\"]]");
}

static void getmetatable_answers_as_the_base_one_past_metatable(void **state) {
  (void)state;
  snippet_check_value(
      "local mt = {__index = {}}\n"
      "local values = {'', io.stdout, json.array(), setmetatable({}, mt), 1, print, {}}\n"
      "local r = {}\n"
      "for i, v in ipairs(values) do r[i] = debug.getmetatable(v) == getmetatable(v) end\n"
      "return r, debug.getmetatable(setmetatable({}, mt)) == mt",
      "[[true,true,true,true,true,true,true],true]");
  /* Except past a guest's own __metatable, as stock: the guest's table, never the clone. */
  snippet_check_value("local mt = {__metatable = 'locked', __index = {x = 1}}\n"
                      "local p = setmetatable({}, mt)\n"
                      "local pinned = setmetatable({}, {__index = p})\n"
                      "setmetatable(pinned, mt)\n"
                      "return getmetatable(p), debug.getmetatable(p) == mt, "
                      "debug.getmetatable(pinned) == mt",
                      "[\"locked\",true,true]");
  /* Rebinding the global changes nothing: debug keeps the base function. */
  snippet_check_value("getmetatable = function() return 'fake' end "
                      "return debug.getmetatable(setmetatable({}, {})) ~= 'fake'",
                      "true");
}

static void setmetatable_for_tables_through_the_base_one(void **state) {
  (void)state;
  snippet_check_value("local t = {}\n"
                      "local r = debug.setmetatable(t, {__index = {z = 1}})\n"
                      "return r == t, t.z, {pcall(debug.setmetatable, 1, {})}",
                      "[true,1,[false,\"debug.setmetatable: only tables can get a metatable in "
                      "this sandbox (got a number value)\"]]");
  /* A __metatable the guest set does not protect against debug.setmetatable, as in stock; the
     base function still refuses, whatever light userdata a guest passes it. */
  snippet_check_value("local p = setmetatable({}, {__metatable = 1})\n"
                      "local a = {pcall(setmetatable, p, {}, json.null)}\n"
                      "local r = debug.setmetatable(p, {__index = {z = 2}})\n"
                      "return a, r == p, p.z, getmetatable(p).__index.z",
                      "[[false,\"cannot change a protected metatable\"],true,2,2]");
  /* Past the protection, the base function's rules about chains hold: a protected table
     that an object's __index chain goes through gets the same answer from debug.setmetatable
     as an unprotected one from setmetatable. */
  snippet_check_value("local function try(protect)\n"
                      "  local p = setmetatable({}, {__metatable = protect})\n"
                      "  local q = setmetatable({}, {__index = p})\n"
                      "  local d = {}\n"
                      "  for i = 1, 40 do d = setmetatable({}, {__index = d}) end\n"
                      "  local set = protect and debug.setmetatable or setmetatable\n"
                      "  local r = {pcall(set, p, {__index = d})}\n"
                      "  r[2] = tostring(r[2] == p or r[2])\n"
                      "  r[3] = {pcall(function() return q.missing end)}\n"
                      "  return r\n"
                      "end\n"
                      "local a, b = try(true), try(nil)\n"
                      "return json.encode(a) == json.encode(b), a[1]",
                      "[true,true]");
  /* The base function's own refusals hold (whatever they are at the time): the same answer
     through both. */
  snippet_check_value("local a = {pcall(setmetatable, {}, {__call = {}})}\n"
                      "local b = {pcall(debug.setmetatable, {}, {__call = {}})}\n"
                      "return a[1] == b[1], a[2] == b[2], a[1]",
                      "[true,true,false]");
}

static void hooks_registry_and_uservalues_are_refused(void **state) {
  (void)state;
  static const char *const names[] = {"sethook",      "gethook",      "getregistry",
                                      "getuservalue", "setuservalue", "setcstacklimit",
                                      "debug"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char code[128], want[128];
    snprintf(code, sizeof code, "return debug.%s()", names[i]);
    snprintf(want, sizeof want, "debug.%s is not available in this sandbox", names[i]);
    snippet_check_error(code, MBX_RUNTIME_ERROR, want);
  }
}

static void traceback_is_moonbox_own(void **state) {
  (void)state;
  snippet_check_value("local function f() return debug.traceback('msg') end\n"
                      "local s = f() return s",
                      "\"msg\\nstack traceback:\\n\\tinput:1: in local 'f'\\n\\tinput:2: in main "
                      "chunk\"");
  snippet_check_value("return debug.traceback(nil, 1), debug.traceback({}) ~= nil, "
                      "type(debug.traceback({})), debug.traceback(12, 5)",
                      "[\"stack traceback:\\n\\tinput:1: in main chunk\",true,\"table\","
                      "\"12\\nstack traceback:\"]");
  /* Another thread's stack, from level 0. */
  snippet_check_value("local co = coroutine.create(function() coroutine.yield() end)\n"
                      "coroutine.resume(co)\n"
                      "return debug.traceback(co, 'co')",
                      "\"co\\nstack traceback:\\n\\t[C]: in field 'yield'\\n\\tinput:1: in "
                      "function <input:1>\"");
}

static void locals_of_a_suspended_coroutine(void **state) {
  (void)state;
  /* A coroutine suspended inside pcall: its Lua levels are reachable, its C levels (yield,
     pcall) are not. */
  snippet_check_value("local co = coroutine.create(function(x)\n"
                      "  local y = x + 1\n"
                      "  pcall(function() local z = y coroutine.yield() end)\n"
                      "end)\n"
                      "coroutine.resume(co, 1)\n"
                      "local r = {}\n"
                      "for level = 0, 3 do\n"
                      "  local i = debug.getinfo(co, level, 'S')\n"
                      "  r[#r + 1] = i.what\n"
                      "  r[#r + 1] = debug.getlocal(co, level, 1) or false\n"
                      "end\n"
                      "debug.setlocal(co, 3, 2, 10)\n"
                      "r[#r + 1] = select(2, debug.getlocal(co, 3, 2))\n"
                      "r[#r + 1] = pcall(debug.setlocal, co, 2, 1, 0)\n"
                      "return r",
                      "[\"C\",false,\"Lua\",\"z\",\"C\",false,\"Lua\",\"x\",10,false]");
}

static void setupvalue_on_the_main_chunk_keeps_the_repeated_text_fresh(void **state) {
  (void)state;
  /* The second run of a text keeps its function for the third (vm/run.c). Replacing that
     function's environment in the second run must not reach the third: it loads the text
     afresh, as stock Lua would, and sees the real globals. */
  const char *code = "x = (x or 0) + 1\n"
                     "local n = x\n"
                     "if n == 2 then\n"
                     "  debug.setupvalue(debug.getinfo(1, 'f').func, 1, {debug = debug})\n"
                     "end\n"
                     "return n";
  const char *joined = "x = (x or 0) + 1\n"
                       "local n = x\n"
                       "if n == 2 then\n"
                       "  local fake = {debug = debug}\n"
                       "  local function g() return fake end\n"
                       "  debug.upvaluejoin(debug.getinfo(1, 'f').func, 1, g, 1)\n"
                       "end\n"
                       "return n";
  const char *texts[] = {code, joined};
  for (int t = 0; t < 2; t++) {
    mbx_sandbox *sb = snippet_sandbox();
    snippet_outcome o;
    for (int run = 1; run <= 4; run++) {
      assert_int_equal(snippet_run_in(sb, texts[t], &o), MBX_OK);
      char want[8];
      snprintf(want, sizeof want, "%d", run);
      assert_string_equal(o.value, want);
    }
    mbx_sandbox_free(sb);
  }
}

static void every_run_has_a_fresh_main_chunk(void **state) {
  (void)state;
  /* As in stock Lua (a new load per run), the main function a run sees is never the one an
     earlier run saw, though vm/run.c keeps the function of a repeated text. */
  const char *code = "local f = debug.getinfo(1, 'f').func\n"
                     "local fresh = f ~= prev\n"
                     "prev = f\n"
                     "return fresh";
  mbx_sandbox *sb = snippet_sandbox();
  snippet_outcome o;
  for (int run = 1; run <= 4; run++) {
    assert_int_equal(snippet_run_in(sb, code, &o), MBX_OK);
    assert_string_equal(o.value, "true");
  }
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(require_returns_the_debug_table),
      cmocka_unit_test(getinfo_describes_lua_levels_and_functions),
      cmocka_unit_test(getinfo_names_metamethods_called_through_moonbox),
      cmocka_unit_test(getinfo_gives_no_function_for_c_levels_or_c_functions),
      cmocka_unit_test(getlocal_and_setlocal_reach_named_locals),
      cmocka_unit_test(c_levels_show_no_locals_and_refuse_setlocal),
      cmocka_unit_test(setlocal_refuses_the_vms_own_slots),
      cmocka_unit_test(upvalues_of_lua_functions_only),
      cmocka_unit_test(getmetatable_answers_as_the_base_one_past_metatable),
      cmocka_unit_test(setmetatable_for_tables_through_the_base_one),
      cmocka_unit_test(hooks_registry_and_uservalues_are_refused),
      cmocka_unit_test(traceback_is_moonbox_own),
      cmocka_unit_test(locals_of_a_suspended_coroutine),
      cmocka_unit_test(setupvalue_on_the_main_chunk_keeps_the_repeated_text_fresh),
      cmocka_unit_test(every_run_has_a_fresh_main_chunk),
  };
  return cmocka_run_group_tests_name("stdlib/debug", tests, snippet_setup, snippet_teardown);
}
