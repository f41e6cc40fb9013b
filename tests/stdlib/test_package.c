/* tests/stdlib/test_package.c -- unit tests of stdlib/package.c: package, require, loadfile
   and dofile over the sandbox's view, with stock Lua's semantics and messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* A Lua helper every snippet below starts with: write(path, text) makes a file in /tmp. */
#define WRITE                                                                                      \
  "local function write(p, s) local d = p:match('^(.*)/[^/]*$') "                                  \
  "if d and d ~= '/tmp' then fs.mkdir(d) end "                                                     \
  "local f = assert(io.open(p, 'w')) f:write(s) f:close() end "                                    \
  "package.path = '/tmp/?.lua;/tmp/?/init.lua;' .. package.path "

static void stock_libraries_are_preloaded(void **state) {
  (void)state;
  snippet_check_value("local r = {} for _, m in ipairs{'coroutine', 'io', 'math', 'os', "
                      "'string', 'table', 'utf8', '_G'} do r[#r + 1] = require(m) == _G[m] "
                      "and package.loaded[m] == _G[m] end return r",
                      "[true,true,true,true,true,true,true,true]");
  snippet_check_value("return package.loaded.package == package, require('package') == package",
                      "[true,true]");
  /* The other built-ins are found after the files: json and its aliases, fs. */
  snippet_check_value("return require('cjson') == json, require('dkjson') == json, "
                      "require('fs') == fs, select(2, require('json')), "
                      "require('cjson').encode({1})",
                      "[true,true,true,\":builtin:\",\"[1]\"]");
  snippet_check_value("return require('json') == require('json'), package.loaded.json == json",
                      "[true,true]");
  /* Reassigning the globals changes nothing require returns. */
  snippet_check_value("local s = string string = {fake = true} _G.json = nil "
                      "return require('string') == s, require('json').encode ~= nil",
                      "[true,true]");
}

static void package_has_the_stock_fields(void **state) {
  (void)state;
  snippet_check_value("return package.path, package.config, package.cpath, #package.searchers, "
                      "type(package.preload), type(package.searchpath)",
                      "[\"./?.lua;./?/init.lua\",\"/\\n;\\n?\\n!\\n-\\n\",\"\",3,\"table\","
                      "\"function\"]");
  snippet_check_error("package.loadlib('/lib/x86_64-linux-gnu/libc.so.6', 'system')",
                      MBX_RUNTIME_ERROR,
                      "package.loadlib is not available: C modules cannot be loaded");
}

static void modules_load_from_files(void **state) {
  (void)state;
  snippet_check_value(WRITE "write('/tmp/m.lua', 'local name, file = ... "
                            "return {name = name, file = file, n = 42}') "
                            "local m, file = require('m') "
                            "return m.n, m.name, m.file, file, require('m') == m, "
                            "package.loaded.m == m",
                      "[42,\"m\",\"/tmp/m.lua\",\"/tmp/m.lua\",true,true]");
  /* Dotted names are folders; a folder's init.lua. */
  snippet_check_value(WRITE "write('/tmp/a/b.lua', 'return \"ab\"') "
                            "write('/tmp/c/init.lua', 'return \"c\"') "
                            "local c, file = require('c') "
                            "return require('a.b'), c, file, select('#', require('c'))",
                      "[\"ab\",\"c\",\"/tmp/c/init.lua\",1]");
  /* A module returning nothing is true; one that sets package.loaded itself keeps that. */
  snippet_check_value(WRITE "write('/tmp/n.lua', 'x = 1') "
                            "write('/tmp/s.lua', 'package.loaded[...] = \"self\"') "
                            "return require('n'), (require('s'))",
                      "[true,\"self\"]");
  /* A user's json.lua on package.path wins over the built-in json. */
  snippet_check_value(WRITE "write('/tmp/json.lua', 'return {mine = true}') "
                            "return require('json').mine, json.encode({}) ",
                      "[true,\"{}\"]");
}

static void missing_modules_list_every_place_tried(void **state) {
  (void)state;
  snippet_check_error("require('nope.x')", MBX_RUNTIME_ERROR,
                      "module 'nope.x' not found:\n"
                      "\tno field package.preload['nope.x']\n"
                      "\tno file './nope/x.lua'\n"
                      "\tno file './nope/x/init.lua'\n"
                      "\tno built-in module 'nope.x'");
  snippet_check_error("package.path = 'a;;b' require('z')", MBX_RUNTIME_ERROR,
                      "\tno file 'a'\n\tno file ''\n\tno file 'b'\n");
  snippet_check_error("package.path = nil require('z')", MBX_RUNTIME_ERROR,
                      "'package.path' must be a string");
  snippet_check_error("require()", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'require' (string expected, got no value)");
  /* A syntax error names the module and the file. */
  snippet_check_error(WRITE "write('/tmp/bad.lua', 'return +') require('bad')", MBX_RUNTIME_ERROR,
                      "error loading module 'bad' from file '/tmp/bad.lua':\n\t/tmp/bad.lua:1:");
}

static void preload_and_searchers_are_the_guests(void **state) {
  (void)state;
  snippet_check_value("package.preload.p = function(name, data) return name .. data end "
                      "return require('p')",
                      "[\"p:preload:\",\":preload:\"]");
  snippet_check_value("table.insert(package.searchers, 1, function(n) "
                      "return function() return 'from ' .. n end end) return (require('q'))",
                      "\"from q\"");
  snippet_check_error("package.searchers = nil require('r')", MBX_RUNTIME_ERROR,
                      "'package.searchers' must be a table");
  /* A searcher's message is listed; a searcher returning nothing is skipped. */
  snippet_check_error("package.searchers = {function() return 'mine' end, function() end} "
                      "require('r')",
                      MBX_RUNTIME_ERROR, "module 'r' not found:\n\tmine");
}

static void searchpath_finds_the_first_file(void **state) {
  (void)state;
  snippet_check_value(WRITE "write('/tmp/x/y.lua', '') "
                            "return package.searchpath('x.y', '/nope/?.lua;/tmp/?.lua'), "
                            "package.searchpath('x_y', '/tmp/?.lua', '_', '/')",
                      "[\"/tmp/x/y.lua\",\"/tmp/x/y.lua\"]");
  snippet_check_value("return package.searchpath('q', '/a/?.lua;/b/?')",
                      "[null,\"no file '/a/q.lua'\\n\\tno file '/b/q'\"]");
}

static void loadfile_and_dofile(void **state) {
  (void)state;
  snippet_check_value(WRITE "write('/tmp/f.lua', '#!/usr/bin/lua\\nreturn x, ...') "
                            "local f = loadfile('/tmp/f.lua', 't', {x = 7}) "
                            "return {f('a')}, dofile('/tmp/f.lua')",
                      "[[7,\"a\"],null]");
  /* Line numbers count the skipped '#' line; the chunk is "@path". */
  snippet_check_value(WRITE "write('/tmp/e.lua', '#x\\nerror(\"boom\")') "
                            "return pcall(dofile, '/tmp/e.lua')",
                      "[false,\"/tmp/e.lua:2: boom\"]");
  snippet_check_value("return loadfile('/tmp/none.lua')",
                      "[null,\"cannot open /tmp/none.lua: No such file or directory\"]");
  snippet_check_error("dofile('/tmp/none.lua')", MBX_RUNTIME_ERROR,
                      "cannot open /tmp/none.lua: No such file or directory");
  snippet_check_value(WRITE "write('/tmp/t.lua', 'return 1') return loadfile('/tmp/t.lua', 'b')",
                      "[null,\"attempt to load a text chunk (mode is 'b')\"]");
  snippet_check_value("return loadfile()",
                      "[null,\"loadfile: reading a chunk from standard input is not supported "
                      "in this sandbox: give a file name\"]");
  /* A binary chunk is refused as text-only load refuses it. */
  snippet_check_value(WRITE "write('/tmp/b.lua', '\\27Lua') return loadfile('/tmp/b.lua')",
                      "[null,\"attempt to load a binary chunk (mode is 't')\"]");
  /* dofile's chunk may yield. */
  snippet_check_value(WRITE "write('/tmp/y.lua', 'return coroutine.yield(1) + 1') "
                            "local co = coroutine.wrap(function() return dofile('/tmp/y.lua') end) "
                            "return co(), co(41)",
                      "[1,42]");
}

static void module_files_have_a_size_limit(void **state) {
  (void)state;
  /* 1 MiB loads; one byte more is refused before it is read. */
  snippet_check_value(WRITE "write('/tmp/big.lua', 'return 1 --' .. ('x'):rep((1 << 20) - 11)) "
                            "return (require('big'))",
                      "1");
  snippet_check_value(WRITE "write('/tmp/big.lua', 'return 1 --' .. ('x'):rep((1 << 20) - 10)) "
                            "local f, e = loadfile('/tmp/big.lua') return f, e",
                      "[null,\"cannot open /tmp/big.lua: the file is 1048577 bytes; a module "
                      "file may be at most 1048576 bytes in this sandbox\"]");
}

static void require_loops_end_in_an_error(void **state) {
  (void)state;
  /* a requires b requires a: stock Lua recurses until the C stack limit; so does moonbox. */
  snippet_check_error(WRITE "write('/tmp/la.lua', 'return require \"lb\"') "
                            "write('/tmp/lb.lua', 'return require \"la\"') require('la')",
                      MBX_RUNTIME_ERROR, "stack overflow");
}

static void each_sandbox_has_its_own_modules(void **state) {
  (void)state;
  mbx_sandbox *a = snippet_sandbox(), *b = snippet_sandbox();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(a, "require('json').extra = 1 package.loaded.z = 5 return 0", &o),
                   MBX_OK);
  assert_int_equal(snippet_run_in(b, "return require('json').extra, package.loaded.z", &o), MBX_OK);
  assert_string_equal(o.value, "[null,null]");
  assert_int_equal(snippet_run_in(a, "return require('json').extra, require('z')", &o), MBX_OK);
  assert_string_equal(o.value, "[1,5]");
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stock_libraries_are_preloaded),
      cmocka_unit_test(package_has_the_stock_fields),
      cmocka_unit_test(modules_load_from_files),
      cmocka_unit_test(missing_modules_list_every_place_tried),
      cmocka_unit_test(preload_and_searchers_are_the_guests),
      cmocka_unit_test(searchpath_finds_the_first_file),
      cmocka_unit_test(loadfile_and_dofile),
      cmocka_unit_test(module_files_have_a_size_limit),
      cmocka_unit_test(require_loops_end_in_an_error),
      cmocka_unit_test(each_sandbox_has_its_own_modules),
  };
  return cmocka_run_group_tests_name("stdlib/package", tests, snippet_setup, snippet_teardown);
}
