/* tests/host/test_check.c -- host/check.c: mbx_check, the static check against a policy. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "include/moonbox.h"

/* The check's JSON for code under p (the default policy when NULL); fails on an API error. */
static char *check_with(mbx_policy *p, const char *code) {
  mbx_policy *own = p ? NULL : mbx_policy_new();
  char *json = NULL;
  size_t len = 0;
  mbx_error err;
  mbx_status s = mbx_check(p ? p : own, code, strlen(code), &json, &len, &err);
  if (s != MBX_OK) fprintf(stderr, "mbx_check: %s\n", err.message);
  assert_int_equal(s, MBX_OK);
  assert_non_null(json);
  assert_int_equal(strlen(json), len);
  mbx_policy_free(own);
  return json;
}

static void expect(mbx_policy *p, const char *code, const char *want) {
  char *json = check_with(p, code);
  assert_string_equal(json, want);
  mbx_free(json);
}

static void clean_code_is_ok(void **state) {
  (void)state;
  expect(NULL, "local t = {} for i = 1, 3 do t[i] = string.rep('x', i) end print(#t) return t",
         "{\"globals\":[],\"ok\":true,\"syntax_error\":null}");
  /* The whole standard library a sandbox has is provided, json included. */
  expect(NULL, "return json.encode({math.floor(1.5), os.time(), utf8.char(72), pcall, io})",
         "{\"globals\":[],\"ok\":true,\"syntax_error\":null}");
  expect(NULL, "", "{\"globals\":[],\"ok\":true,\"syntax_error\":null}");
}

static void unknown_reads_and_writes_with_lines(void **state) {
  (void)state;
  expect(NULL, "local a = 1\ncount = a + 1\n\nreturn fetch(url), count",
         "{\"globals\":[{\"access\":\"write\",\"line\":2,\"name\":\"count\"},"
         "{\"access\":\"read\",\"line\":4,\"name\":\"count\"},"
         "{\"access\":\"read\",\"line\":4,\"name\":\"fetch\"},"
         "{\"access\":\"read\",\"line\":4,\"name\":\"url\"}],"
         "\"ok\":false,\"syntax_error\":null}");
  /* Global function declarations are writes; the same access on the same line once. */
  expect(NULL, "function helper() return undefined_one, undefined_one end",
         "{\"globals\":[{\"access\":\"write\",\"line\":1,\"name\":\"helper\"},"
         "{\"access\":\"read\",\"line\":1,\"name\":\"undefined_one\"}],"
         "\"ok\":false,\"syntax_error\":null}");
}

static void nested_functions_and_local_env(void **state) {
  (void)state;
  /* Inner functions reach _ENV through upvalues: still globals. */
  expect(NULL,
         "local function outer()\n"
         "  return function()\n"
         "    return deep_global\n"
         "  end\n"
         "end\n"
         "return outer",
         "{\"globals\":[{\"access\":\"read\",\"line\":3,\"name\":\"deep_global\"}],"
         "\"ok\":false,\"syntax_error\":null}");
  /* A local _ENV is not the global table: nothing through it is a global, also in closures. */
  expect(NULL,
         "local _ENV = {x = 1}\n"
         "local function f() return y end\n"
         "return x, f()",
         "{\"globals\":[],\"ok\":true,\"syntax_error\":null}");
  /* Explicit _ENV.name is a global access like a bare name; _ENV itself is not a name. */
  expect(NULL, "return _ENV.zed, _ENV",
         "{\"globals\":[{\"access\":\"read\",\"line\":1,\"name\":\"zed\"}],"
         "\"ok\":false,\"syntax_error\":null}");
  /* Fields of a provided global are not globals. */
  expect(NULL, "return string.nosuchfunction",
         "{\"globals\":[],\"ok\":true,\"syntax_error\":null}");
}

/* Past 255 constants a global's name cannot be GETTABUP's key: the compiler indexes a
   register holding _ENV instead, and those are globals too. */
static void globals_past_255_constants(void **state) {
  (void)state;
  size_t cap = 32 * 1024, n = 0;
  char *src = malloc(cap);
  n += (size_t)snprintf(src + n, cap - n, "local t = {");
  for (int i = 0; i < 300; i++)
    n += (size_t)snprintf(src + n, cap - n, "%d.5,", i);
  n += (size_t)snprintf(src + n, cap - n,
                        "}\nlate_write = late_read + 1\n"
                        "late_call(1);\n(_ENV).paren = _ENV:method()\n"
                        "print(#t)\n");
  char *json = check_with(NULL, src);
  assert_string_equal(json, "{\"globals\":[{\"access\":\"read\",\"line\":2,\"name\":\"late_read\"},"
                            "{\"access\":\"write\",\"line\":2,\"name\":\"late_write\"},"
                            "{\"access\":\"read\",\"line\":3,\"name\":\"late_call\"},"
                            "{\"access\":\"read\",\"line\":4,\"name\":\"method\"},"
                            "{\"access\":\"write\",\"line\":4,\"name\":\"paren\"}],"
                            "\"ok\":false,\"syntax_error\":null}");
  mbx_free(json);
  free(src);
}

static mbx_status dummy(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  (void)reply;
  return MBX_OK;
}

static void granted_functions_are_provided(void **state) {
  (void)state;
  const char *code = "return tools.search('q'), fetch('u'), other()";
  expect(NULL, code,
         "{\"globals\":[{\"access\":\"read\",\"line\":1,\"name\":\"fetch\"},"
         "{\"access\":\"read\",\"line\":1,\"name\":\"other\"},"
         "{\"access\":\"read\",\"line\":1,\"name\":\"tools\"}],"
         "\"ok\":false,\"syntax_error\":null}");
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_add_function(p, "tools.search", dummy, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "fetch", &err), MBX_OK);
  expect(p, code,
         "{\"globals\":[{\"access\":\"read\",\"line\":1,\"name\":\"other\"}],"
         "\"ok\":false,\"syntax_error\":null}");
  mbx_policy_free(p);
}

static void syntax_errors(void **state) {
  (void)state;
  expect(NULL, "local x = 1\nif x then\n  y = = 2\nend",
         "{\"globals\":[],\"ok\":false,\"syntax_error\":{\"line\":3,"
         "\"message\":\"unexpected symbol near '='\"}}");
  expect(NULL, "return 'unfinished",
         "{\"globals\":[],\"ok\":false,\"syntax_error\":{\"line\":1,"
         "\"message\":\"unfinished string near <eof>\"}}");
  /* Bytecode is never accepted: the check compiles text only, as mbx_run does. */
  char *json = check_with(NULL, "\x1bLua");
  assert_non_null(strstr(json, "attempt to load a binary chunk"));
  mbx_free(json);
}

static void names_that_are_not_utf8(void **state) {
  (void)state;
  expect(NULL, "return _ENV['\\xff\\xfe']",
         "{\"globals\":[{\"access\":\"read\",\"line\":1,\"name\":{\"$bytes\":\"//4=\"}}],"
         "\"ok\":false,\"syntax_error\":null}");
}

static void limits_and_bad_arguments(void **state) {
  (void)state;
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  char *json = (char *)1;
  size_t len = 99;
  assert_int_equal(mbx_check(NULL, "x", 1, &json, &len, &err), MBX_INVALID_ARGUMENT);
  assert_null(json);
  assert_int_equal(len, 0);
  assert_non_null(strstr(err.message, "policy"));
  assert_int_equal(mbx_check(p, "x", 1, NULL, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_check(p, NULL, 3, &json, NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_check(p, NULL, 0, &json, NULL, &err), MBX_OK);
  mbx_free(json);
  /* The source cap. */
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_SOURCE, 16), MBX_OK);
  const char *code = "return 1 + 2 + 3 + 4 + 5";
  assert_int_equal(mbx_check(p, code, strlen(code), &json, NULL, &err), MBX_SOURCE_TOO_LARGE);
  assert_null(json);
  assert_non_null(strstr(err.message, "MBX_LIMIT_SOURCE"));
  /* The parse is metered: a quadratic or-chain under a short deadline stops on it (a
     generous bound: the chain takes seconds to parse unmetered). */
  size_t terms = 60000, cap = 16 + terms * 5, n = 0;
  char *chain = malloc(cap);
  n = (size_t)snprintf(chain, cap, "return a");
  for (size_t i = 1; i < terms; i++)
    n += (size_t)snprintf(chain + n, cap - n, " or a");
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_SOURCE, 1 << 20), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 50), MBX_OK);
  assert_int_equal(mbx_check(p, chain, n, &json, NULL, &err), MBX_TIME_LIMIT);
  assert_null(json);
  assert_non_null(strstr(err.message, "time limit"));
  /* And by the instruction limit (1 per 16 bytes parsed). */
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 1000), MBX_OK);
  assert_int_equal(mbx_check(p, chain, n, &json, NULL, &err), MBX_INSTRUCTION_LIMIT);
  /* And by memory: a table constructor of many constants in a small heap. */
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 0), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, 256 << 10), MBX_OK);
  n = (size_t)snprintf(chain, cap, "return {");
  for (size_t i = 0; n + 32 < cap && i < 40000; i++)
    n += (size_t)snprintf(chain + n, cap - n, "%zu.5,", i);
  n += (size_t)snprintf(chain + n, cap - n, "}");
  assert_int_equal(mbx_check(p, chain, n, &json, NULL, &err), MBX_MEMORY_LIMIT);
  free(chain);
  mbx_policy_free(p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(clean_code_is_ok),
      cmocka_unit_test(unknown_reads_and_writes_with_lines),
      cmocka_unit_test(nested_functions_and_local_env),
      cmocka_unit_test(globals_past_255_constants),
      cmocka_unit_test(granted_functions_are_provided),
      cmocka_unit_test(syntax_errors),
      cmocka_unit_test(names_that_are_not_utf8),
      cmocka_unit_test(limits_and_bad_arguments),
  };
  return cmocka_run_group_tests_name("host/check", tests, NULL, NULL);
}
