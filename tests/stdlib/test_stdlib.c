/* tests/stdlib/test_stdlib.c -- unit tests of stdlib/stdlib.c: the guest's global environment
   built by mbxL_open_sandbox: exactly the curated names, and stubs that name themselves. */
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

/* Lua that compares the keys of table `t` with the space-separated list `want`, and returns
   "" when they are the same set, else what is missing and what is extra. */
#define SAME_KEYS                                                                                  \
  "local function same_keys(t, want) "                                                             \
  "  local expected, missing, extra = {}, '', '' "                                                 \
  "  local i = 1 "                                                                                 \
  "  while i <= #want do "                                                                         \
  "    local j = i while j <= #want and want:sub(j, j) ~= ' ' do j = j + 1 end "                   \
  "    expected[want:sub(i, j - 1)] = true i = j + 1 "                                             \
  "  end "                                                                                         \
  "  for k in pairs(expected) do if rawget(t, k) == nil then missing = missing .. ' ' .. k end "   \
  "end "                                                                                           \
  "  for k in pairs(t) do if not expected[k] then extra = extra .. ' ' .. tostring(k) end end "    \
  "  if missing == '' and extra == '' then return '' end "                                         \
  "  return 'missing:' .. missing .. ' extra:' .. extra "                                          \
  "end "

static void expect_keys(const char *table_expr, const char *names) {
  char code[4096];
  snprintf(code, sizeof code, "%s return same_keys(%s, '%s')", SAME_KEYS, table_expr, names);
  check_value(code, "\"\"");
}

static void globals_are_exactly_the_curated_set(void **state) {
  (void)state;
  expect_keys("_G", "_G _VERSION assert collectgarbage coroutine error getmetatable io ipairs "
                    "json load math next os pairs pcall print rawequal rawget rawlen rawset "
                    "require select setmetatable string table tonumber tostring type utf8 "
                    "xpcall");
  check_value("return _VERSION, _G._G == _G", "[\"Lua 5.4\",true]");
}

static void dangerous_names_are_absent(void **state) {
  (void)state;
  check_value("local n = 0 for _, k in ipairs{'debug', 'package', 'dofile', "
              "'loadfile', 'warn', 'loadstring', 'unpack', 'module', 'setfenv', 'getfenv', "
              "'newproxy', 'gcinfo'} do if _G[k] ~= nil then n = n + 1 end end return n",
              "0");
  check_value("return string.dump", "null");
  /* os, io and require exist, but lead nowhere outside the sandbox: the host-reaching
     functions are stubs that say why, os.exit ends only the run, require knows no package. */
  check_error("io.open('/etc/passwd')", MBX_RUNTIME_ERROR, "io.open is not available");
  check_error("io.popen('id')", MBX_RUNTIME_ERROR, "io.popen is not available");
  check_error("io.read('l')", MBX_RUNTIME_ERROR, "io.read is not available");
  check_error("io.lines('/etc/hostname')", MBX_RUNTIME_ERROR, "io.lines is not available");
  check_error("os.execute('id')", MBX_RUNTIME_ERROR, "os.execute is not available");
  check_error("os.exit(1)", MBX_RUNTIME_ERROR, "os.exit(1)");
  check_error("require('debug')", MBX_RUNTIME_ERROR, "module 'debug' is not available");
  check_error("require('package')", MBX_RUNTIME_ERROR, "module 'package' is not available");
  check_value("return require('os') == os, os.getenv('HOME'), os.getenv('PATH')",
              "[true,null,null]");
}

static void libraries_hold_exactly_their_functions(void **state) {
  (void)state;
  expect_keys("string", "byte char find format gmatch gsub len lower match pack packsize rep "
                        "reverse sub unpack upper");
  expect_keys("table", "concat insert move pack remove sort unpack");
  expect_keys("utf8", "char charpattern codepoint codes len offset");
  expect_keys("coroutine", "close create isyieldable resume running status wrap yield");
  expect_keys("io", "close input lines open output popen read stderr stdout tmpfile write");
  expect_keys("os", "clock date difftime execute exit getenv remove rename setlocale time "
                    "tmpname");
  expect_keys("json", "array decode encode null");
  expect_keys("io.stdout", "write");
  expect_keys("io.stderr", "write");
  check_value("local n = 0 for k, v in pairs(math) do n = n + 1 end "
              "return n >= 25, math.floor ~= nil, math.random ~= nil",
              "[true,true,true]");
}

/* The functions whose stock versions loop in C without the hook are all present, as our
   metered versions (stdlib/pattern.c, strbuild.c, table.c, utf8.c), and work. */
static void metered_replacements_are_present(void **state) {
  (void)state;
  check_value("return string.find('hello', 'l+'), string.match('k=v', '(%w+)=(%w+)'), "
              "string.gsub('aaa', 'a', 'b'), string.rep('ab', 3, '-'), "
              "string.unpack('i4', string.pack('i4', 7))",
              "[3,\"k\",\"bbb\",\"ab-ab-ab\",7,5]");
  check_value("local t = {3, 1, 2} table.sort(t) table.insert(t, 4) table.remove(t, 1) "
              "return table.concat(t, ','), table.unpack(table.move({1, 2}, 1, 2, 2))",
              "[\"2,3,4\",1,1,2]");
  check_value("local n = 0 for w in string.gmatch('a b c', '%a') do n = n + 1 end "
              "return n, utf8.len('h\\u{e9}'), utf8.offset('h\\u{e9}', 2), utf8.codepoint('A')",
              "[3,2,2,65]");
}

static void inputs_cannot_shadow_builtins(void **state) {
  (void)state;
  mbx_sandbox *sb = new_sandbox();
  mbx_result *res = NULL;
  mbx_error err;
  const char *code = "return x";
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"print\": 1}", 12, &res, &err),
                   MBX_INVALID_INPUT);
  assert_null(res);
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"string\": 1}", 13, &res, &err),
                   MBX_INVALID_INPUT);
  assert_null(res);
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"x\": 1}", 8, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "1");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

static void sandboxes_have_separate_globals(void **state) {
  (void)state;
  mbx_sandbox *a = new_sandbox(), *b = new_sandbox();
  outcome o;
  assert_int_equal(run_in(a, "shared = 1 string.extra = 2 print = nil return 0", &o), MBX_OK);
  assert_int_equal(run_in(b, "return shared, string.extra, type(print)", &o), MBX_OK);
  assert_string_equal(o.value, "[null,null,\"function\"]");
  /* Within one sandbox, globals persist between runs. */
  assert_int_equal(run_in(a, "return shared, string.extra, print", &o), MBX_OK);
  assert_string_equal(o.value, "[1,2,null]");
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(globals_are_exactly_the_curated_set),
      cmocka_unit_test(dangerous_names_are_absent),
      cmocka_unit_test(libraries_hold_exactly_their_functions),
      cmocka_unit_test(metered_replacements_are_present),
      cmocka_unit_test(inputs_cannot_shadow_builtins),
      cmocka_unit_test(sandboxes_have_separate_globals),
  };
  return cmocka_run_group_tests_name("stdlib/stdlib", tests, group_setup, group_teardown);
}
