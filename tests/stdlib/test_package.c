/* tests/stdlib/test_package.c -- unit tests of stdlib/package.c: package, require, loadfile
   and dofile over the sandbox's view, with stock Lua's semantics and messages. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

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
                      "[\"./?.lua;./?/init.lua\",\"/\\n;\\n?\\n!\\n-\\n\",\"\",4,\"table\","
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
                      "\tno registered module 'nope.x'\n"
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

/* Run code in a fresh sandbox of policy p and check its value JSON. */
static void check_in_policy(mbx_policy *p, const char *code, const char *json) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  snippet_outcome o;
  mbx_status s = snippet_run_in(sb, code, &o);
  if (s != MBX_OK || strcmp(o.value, json) != 0)
    fail_msg("%s\n  status %d: %s\n  expected %s", code, s, o.value, json);
  mbx_sandbox_free(sb);
}

static void registered_modules_come_before_files(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  const char *parser = "local name, data = ... return {parse = function(s) return #s end, "
                       "name = name, data = data}";
  assert_int_equal(mbx_policy_add_module(p, "mylib.parser", parser, strlen(parser), &err), MBX_OK);
  const char *json = "return {mine = true}";
  assert_int_equal(mbx_policy_add_module(p, "json", json, strlen(json), &err), MBX_OK);
  assert_int_equal(mbx_policy_add_module(p, "bad", "return +", 8, &err), MBX_OK);
  check_in_policy(p,
                  "local m, data = require('mylib.parser') "
                  "return m.parse('abc'), m.name, m.data, data, require('json').mine, "
                  "io.open('mylib.parser') == nil, io.open('/mylib.parser') == nil",
                  "[3,\"mylib.parser\",\":registered:\",\":registered:\",true,true,true]");
  check_in_policy(p, "return pcall(require, 'bad')",
                  "[false,\"error loading registered module 'bad':\\n\\tbad:1: unexpected symbol "
                  "near '+'\"]");
  /* A registered module is host-given: compiled once per runtime, then loaded from the
     bytecode cache; a /tmp file, guest text, never enters it. The main chunks are cached like
     any (so each is run once under a policy where require fails before it is measured). */
  const char *fresh = "return {parse = function(s) return #s end}  -- fresh";
  assert_int_equal(mbx_policy_add_module(p, "fresh.mod", fresh, strlen(fresh), &err), MBX_OK);
  const char *use = "local ok, m = pcall(require, 'fresh.mod') return ok and m.parse('abc')";
  mbx_policy *none = mbx_policy_new();
  check_in_policy(none, use, "false");
  uint64_t before = mbx_runtime_usage(snippet_runtime, MBX_CAP_BYTECODE_CACHE_BYTES);
  check_in_policy(p, use, "3");
  uint64_t after_first = mbx_runtime_usage(snippet_runtime, MBX_CAP_BYTECODE_CACHE_BYTES);
  assert_true(after_first > before);
  check_in_policy(p, use, "3");
  assert_int_equal(mbx_runtime_usage(snippet_runtime, MBX_CAP_BYTECODE_CACHE_BYTES), after_first);
  const char *tmp_file = "local f = io.open('/tmp/g.lua', 'w') f:write('return ' .. n) f:close() "
                         "return dofile('/tmp/g.lua')";
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  mbx_result *res;
  assert_int_equal(mbx_run(sb, tmp_file, strlen(tmp_file), "{\"n\": 1}", 8, &res, &err), MBX_OK);
  mbx_result_free(res);
  uint64_t with_chunk = mbx_runtime_usage(snippet_runtime, MBX_CAP_BYTECODE_CACHE_BYTES);
  assert_int_equal(mbx_run(sb, tmp_file, strlen(tmp_file), "{\"n\": 22}", 9, &res, &err), MBX_OK);
  mbx_result_free(res);
  assert_int_equal(mbx_runtime_usage(snippet_runtime, MBX_CAP_BYTECODE_CACHE_BYTES), with_chunk);
  mbx_sandbox_free(sb);
  mbx_policy_free(none);
  /* Names the policy refuses. */
  assert_int_equal(mbx_policy_add_module(p, "", "x", 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_module(p, "a\nb", "x", 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_module(p, "big", "x", (1 << 20) + 1, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_policy_add_module(NULL, "x", "x", 1, &err), MBX_INVALID_ARGUMENT);
  mbx_policy_free(p);
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

/* The CLI's script folder: module reads see its .lua files at the view's root, io and fs
   nothing of it, and nothing leads out of it. */
static void the_module_folder_is_seen_by_module_reads_only(void **state) {
  (void)state;
  char dir[] = "/tmp/mbx-modules-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[600];
  snprintf(sub, sizeof sub, "%s/sub", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  put_file(dir, "m.lua", "return 'm'");
  put_file(dir, "sub/x.lua", "return 'x'");
  put_file(dir, "data.txt", "return 'data'");
  char link[600];
  snprintf(link, sizeof link, "%s/evil.lua", dir);
  assert_int_equal(symlink("/etc/passwd", link), 0);
  snprintf(link, sizeof link, "%s/up.lua", dir);
  assert_int_equal(symlink("../../etc/passwd", link), 0);
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_module_dir(p, dir, &err), MBX_OK);
  check_in_policy(p,
                  "return require('m'), require('sub.x'), loadfile('m.lua')(), "
                  "dofile('/sub/x.lua'), dofile('../m.lua'), select(2, package.loaded.m)",
                  "[\"m\",\"x\",\"m\",\"x\",\"m\"]");
  check_in_policy(p,
                  "return io.open('/m.lua') == nil, io.open('m.lua') == nil, "
                  "fs.exists('/m.lua'), fs.exists('/sub'), #fs.list('/')",
                  "[true,true,false,false,1]");
  /* Only .lua files; symlinks do not lead out; nothing is writable. */
  check_in_policy(p,
                  "return loadfile('data.txt') == nil, loadfile('evil.lua') == nil, "
                  "loadfile('up.lua') == nil, select(2, loadfile('evil.lua')):find('outside') "
                  "~= nil or select(2, loadfile('evil.lua'))",
                  "[true,true,true,true]");
  /* The view wins where it has the path. */
  check_in_policy(p,
                  "local f = io.open('/tmp/m.lua', 'w') f:write('return \"tmp\"') f:close() "
                  "package.path = '/tmp/?.lua;' .. package.path return (require('m'))",
                  "\"tmp\"");
  assert_int_equal(mbx_policy_set_module_dir(p, "/nonexistent/dir", &err), MBX_INVALID_ARGUMENT);
  mbx_policy_free(p);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* A candidate that is there but out of reach says why, after stock's "no file": Debian's
   /usr/share/lua/5.4 holds symlinks into ../5.1, which a mount of that folder never follows,
   so `--mount /usr/share/lua/5.4:/lib` found "no file '/lib/argparse.lua'" for a file the
   user can see. An absent candidate keeps stock's words alone. */
static void unreachable_module_files_say_why(void **state) {
  (void)state;
  char dir[] = "/tmp/mbx-linked-XXXXXX";
  assert_non_null(mkdtemp(dir));
  char sub[600], link[600];
  snprintf(sub, sizeof sub, "%s/5.4", dir);
  assert_int_equal(mkdir(sub, 0700), 0);
  put_file(dir, "lib.lua", "return 'lib'");
  snprintf(link, sizeof link, "%s/5.4/lib.lua", dir);
  assert_int_equal(symlink("../lib.lua", link), 0);
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_mount(p, "/lib", sub, MBX_MOUNT_RO, &err), MBX_OK);
  check_in_policy(p,
                  "package.path = '/lib/?.lua;/none/?.lua' "
                  "return select(2, pcall(require, 'lib')), "
                  "package.searchpath('lib', '/lib/?.lua;/none/?.lua')",
                  "[\"module 'lib' not found:\\n\\tno field package.preload['lib']\\n\\t"
                  "no registered module 'lib'\\n\\tno file '/lib/lib.lua' (Permission denied "
                  "(the path leads outside its mount))\\n\\tno file '/none/lib.lua'\\n\\t"
                  "no built-in module 'lib'\",null,\"no file '/lib/lib.lua' (Permission denied "
                  "(the path leads outside its mount))\\n\\tno file '/none/lib.lua'\"]");
  mbx_policy_free(p);
  char cmd[700];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
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
      cmocka_unit_test(registered_modules_come_before_files),
      cmocka_unit_test(the_module_folder_is_seen_by_module_reads_only),
      cmocka_unit_test(unreachable_module_files_say_why),
  };
  return cmocka_run_group_tests_name("stdlib/package", tests, snippet_setup, snippet_teardown);
}
