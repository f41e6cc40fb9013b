/* tests/stdlib/test_require.c -- unit tests of stdlib/require.c: built-in modules only, the
   same table every time, from a registry table the guest cannot reach or change. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

#define AVAILABLE "(available: coroutine, debug, fs, fuzz, io, json, math, os, string, table, utf8)"

static void builtin_modules_are_the_globals(void **state) {
  (void)state;
  snippet_check_value("local r = {} for _, m in ipairs{'coroutine', 'io', 'json', 'math', 'os', "
                      "'string', 'table', 'utf8'} do r[#r + 1] = require(m) == _G[m] end "
                      "return r",
                      "[true,true,true,true,true,true,true,true]");
  /* Code written for lua-cjson or dkjson finds the same json module. */
  snippet_check_value("return require('cjson') == json, require('dkjson') == json, "
                      "require('cjson').encode({1})",
                      "[true,true,\"[1]\"]");
  snippet_check_value("local json = require('json') return json.decode('[1,2]')[2]", "2");
  /* The same table on every call. */
  snippet_check_value("return require('json') == require('json')", "true");
}

static void unknown_modules_are_refused(void **state) {
  (void)state;
  static const char *const names[] = {"package", "ffi",         "socket",   "lfs", "io.popen",
                                      "./evil",  "/etc/passwd", "string.x", ""};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    char code[128], want[256];
    snprintf(code, sizeof code, "return require('%s')", names[i]);
    snprintf(want, sizeof want, "module '%s' is not available in this sandbox " AVAILABLE,
             names[i]);
    snippet_check_error(code, MBX_RUNTIME_ERROR, want);
  }
  snippet_check_error("return require()", MBX_RUNTIME_ERROR,
                      "bad argument #1 to 'require' (string expected, got no value)");
  /* A huge name does not make a huge message. */
  snippet_check_value("local n = 'x' for i = 1, 16 do n = n .. n end "
                      "local ok, e = pcall(require, n) return ok, #e < 200",
                      "[false,true]");
}

static void globals_cannot_redirect_require(void **state) {
  (void)state;
  /* Reassigning the globals changes nothing require returns. */
  snippet_check_value("local s = string string = {fake = true} _G.json = nil "
                      "return require('string') == s, require('json').encode ~= nil",
                      "[true,true]");
  /* There is no package table to patch, in _G or reachable from require. */
  snippet_check_value("return package, rawget(_G, 'package')", "[null,null]");
  snippet_check_value("package = {loaded = {debug = {}}, preload = {evil = function() "
                      "return 'ESCAPED' end}} return pcall(require, 'evil')",
                      "[false,\"module 'evil' is not available in this sandbox " AVAILABLE "\"]");
  /* Each sandbox has its own module tables. */
  mbx_sandbox *a = snippet_sandbox(), *b = snippet_sandbox();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(a, "require('json').extra = 1 return 0", &o), MBX_OK);
  assert_int_equal(snippet_run_in(b, "return require('json').extra", &o), MBX_OK);
  assert_string_equal(o.value, "null");
  /* Within a sandbox, changes to a module persist like any global state. */
  assert_int_equal(snippet_run_in(a, "return require('json').extra", &o), MBX_OK);
  assert_string_equal(o.value, "1");
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(builtin_modules_are_the_globals),
      cmocka_unit_test(unknown_modules_are_refused),
      cmocka_unit_test(globals_cannot_redirect_require),
  };
  return cmocka_run_group_tests_name("stdlib/require", tests, snippet_setup, snippet_teardown);
}
