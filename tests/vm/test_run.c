/* tests/vm/test_run.c -- unit tests of vm/run.c: inputs, load, resume, outcome. */
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

#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/run.h"
#include "vm/vm.h"

static mbxV_vm *open_vm_with(size_t memory, uint64_t instructions, size_t source_limit) {
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = memory,
                     .instruction_limit = instructions,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 20,
                     .source_limit = source_limit,
                     .address_key = 7};
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  return vm;
}

static int setup(void **state) {
  *state = open_vm_with(64u << 20, 100000000, 64u << 10);
  return 0;
}

static int teardown(void **state) {
  mbxV_vm *vm = *state;
  mbxV_vm_close(vm);
  free(vm);
  return 0;
}

/* Run code; on a run status the outcome is left in *out (free it), else err is filled. */
static mbxV_status run_in(mbxV_vm *vm, const char *code, const char *inputs, mbxV_outcome *out,
                          mbxV_refusal *err) {
  memset(err, 0, sizeof *err);
  mbxV_status s =
      mbxV_run(vm, code, strlen(code), "=input", inputs, inputs ? strlen(inputs) : 0, out, err);
  /* Whatever happened, the run thread holds nothing: a run that returned leaves it idle
     (status OK, an empty stack) for the next run to reuse; any other ending drops it. */
  int anchored = lua_rawgetp(vm->L, LUA_REGISTRYINDEX, &mbxV_key_run_thread);
  if (s == MBXV_OK) assert_int_equal(anchored, LUA_TTHREAD);
  if (anchored != LUA_TNIL && s != MBXV_PAUSED) {
    assert_int_equal(anchored, LUA_TTHREAD);
    assert_int_equal(lua_status(lua_tothread(vm->L, -1)), LUA_OK);
    assert_int_equal(lua_gettop(lua_tothread(vm->L, -1)), 0);
  }
  lua_pop(vm->L, 1);
  assert_int_equal(vm->budget.running, 0);
  assert_null(vm->panic_jmp);
  if (s < MBX_API_ERROR_BASE) {
    assert_int_equal(out->status, s);
    assert_non_null(out->value_json);
  }
  return s;
}

/* Run code that must succeed and compare its value JSON. */
static void expect_json(mbxV_vm *vm, const char *code, const char *json) {
  mbxV_outcome out;
  mbxV_refusal err;
  mbxV_status s = run_in(vm, code, NULL, &out, &err);
  if (s != MBXV_OK)
    fail_msg("%s: status %d (%s)", code, s, out.failed ? out.error.message : err.message);
  assert_int_equal(out.failed, 0);
  assert_int_equal(out.value_len, strlen(json));
  assert_string_equal(out.value_json, json);
  mbxV_outcome_free(&out);
}

static void return_values_become_json(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "return 1", "1");
  expect_json(vm, "return", "null");
  expect_json(vm, "", "null");
  expect_json(vm, "return nil", "null");
  expect_json(vm, "return 1, nil, 3", "[1,null,3]");
  expect_json(vm, "return nil, nil", "[null,null]");
  expect_json(vm, "return 1, nil", "[1,null]");
  expect_json(vm, "return 'a', {x = 1}, true", "[\"a\",{\"x\":1},true]");
  expect_json(vm, "return math.maxinteger, math.mininteger",
              "[9223372036854775807,-9223372036854775808]");
  expect_json(vm, "return {1, 2, {3}}", "[1,2,[3]]");
  expect_json(vm, "return 1, 2, 3, 4, 5, 6, 7, 8, 9, 10", "[1,2,3,4,5,6,7,8,9,10]");
}

/* The one-value fast path (no protected step) writes exactly what the general encoder does,
   and leaves to it whatever it cannot write. */
static void small_values_match_the_encoder(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "return 0.1", "0.1");
  expect_json(vm, "return 1.0", "1.0");
  expect_json(vm, "return -0.0", "-0.0");
  expect_json(vm, "return 2^63", "9.223372036854776e+18");
  expect_json(vm, "return -7", "-7");
  expect_json(vm, "return false", "false");
  expect_json(vm, "return 'a\"b\\n'", "\"a\\\"b\\n\"");
  expect_json(vm, "return '\\xff'", "{\"$bytes\":\"/w==\"}");
  expect_json(vm, "return ('x'):rep(32)", "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"");
  expect_json(vm, "return ('x'):rep(33)", "\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"");
  expect_json(vm, "return 0/0", "{\"$number\":\"nan\"}");
}

/* A run that returned leaves its thread for the next run (the guest sees the same main
   thread, as in a stock REPL); a run that failed does not, and the next one gets a new one. */
static void the_run_thread_is_reused_after_a_clean_run(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "T = coroutine.running() return select('#', ...)", "0");
  expect_json(vm, "return coroutine.running() == T, select('#', ...), coroutine.isyieldable()",
              "[true,0,false]");
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "error('boom')", NULL, &out, &err), MBX_RUNTIME_ERROR);
  mbxV_outcome_free(&out);
  expect_json(vm, "return coroutine.running() == T", "false");
}

static void many_return_values(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm,
                          "local function f(n, ...) if n == 0 then return ... end "
                          "return f(n - 1, n, ...) end return f(5000)",
                          NULL, &out, &err),
                   MBX_OK);
  assert_memory_equal(out.value_json, "[1,2,3,", 7);
  assert_non_null(strstr(out.value_json, ",4999,5000]"));
  mbxV_outcome_free(&out);
}

static void syntax_error_has_chunk_and_line(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "local a = 1\nb = = 2\n", NULL, &out, &err), MBX_SYNTAX_ERROR);
  assert_int_equal(out.failed, 1);
  assert_string_equal(out.error.chunk, "input");
  assert_int_equal(out.error.line, 2);
  assert_non_null(strstr(out.error.message, "unexpected symbol near '='"));
  assert_null(strstr(out.error.message, "input:2:")); /* the position was split off */
  assert_string_equal(out.error.traceback, "");
  assert_string_equal(out.value_json, "null");
  mbxV_outcome_free(&out);
}

/* Text only: a binary chunk is a syntax error, never loaded (THREATS E4). */
static void binary_chunks_are_refused(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "\x1bLua\x54\x00garbage", NULL, &out, &err), MBX_SYNTAX_ERROR);
  assert_non_null(strstr(out.error.message, "binary"));
  mbxV_outcome_free(&out);
}

static void runtime_error_has_chunk_line_and_traceback(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "local t = nil\nreturn t.x\n", NULL, &out, &err), MBX_RUNTIME_ERROR);
  assert_int_equal(out.failed, 1);
  assert_string_equal(out.error.chunk, "input");
  assert_int_equal(out.error.line, 2);
  assert_string_equal(out.error.message, "attempt to index a nil value (local 't')");
  assert_memory_equal(out.error.traceback, "stack traceback:", 16);
  assert_non_null(strstr(out.error.traceback, "input:2: in main chunk"));
  assert_string_equal(out.value_json, "null");
  mbxV_outcome_free(&out);
}

static void chunk_name_is_the_callers(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  const char *code = "\nerror('x')";
  assert_int_equal(mbxV_run(vm, code, strlen(code), "=script.lua", NULL, 0, &out, &err),
                   MBX_RUNTIME_ERROR);
  assert_string_equal(out.error.chunk, "script.lua");
  assert_int_equal(out.error.line, 2);
  assert_string_equal(out.error.message, "x");
  mbxV_outcome_free(&out);
}

/* A yield out of the main chunk is not a pause: only host functions pause a run. */
static void yield_out_of_the_main_chunk_is_a_runtime_error(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "x = 1\ncoroutine.yield(1, 2)\nreturn 3", NULL, &out, &err),
                   MBX_RUNTIME_ERROR);
  assert_string_equal(out.error.message, "attempt to yield from outside a coroutine");
  assert_int_equal(out.error.line, 2);
  assert_string_equal(out.value_json, "null");
  mbxV_outcome_free(&out);
  expect_json(vm, "return x", "1"); /* the sandbox goes on */
}

/* A failed chunk's to-be-closed variables are closed with the error, as stock lua does; a
   handler that raises replaces the error (issue 9, F.7). */
static void failed_chunk_closes_its_variables(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm,
                          "local t <close> = setmetatable({}, {__close = function(_, e)\n"
                          "  closed_with = e end})\n"
                          "error('boom')",
                          NULL, &out, &err),
                   MBXV_RUNTIME_ERROR);
  assert_string_equal(out.error.message, "boom");
  assert_int_equal(out.error.line, 3);
  mbxV_outcome_free(&out);
  expect_json(vm, "return closed_with", "\"input:3: boom\"");
  assert_int_equal(run_in(vm,
                          "local t <close> = setmetatable({}, {__close = function()\n"
                          "  error('from close', 0) end})\n"
                          "error('boom')",
                          NULL, &out, &err),
                   MBXV_RUNTIME_ERROR);
  assert_string_equal(out.error.message, "from close");
  mbxV_outcome_free(&out);
}

/* The bad input key named is the least one, not the first of the table's walk (issue 9,
   E.5): every order of the same keys names the same one. */
static void the_least_bad_input_is_named(void **state) {
  mbxV_vm *vm = *state;
  static const char *const orders[] = {
      "{\"zz\": 1, \"9a\": 1, \"8b\": 2, \"print\": 3, \"a b\": 4}",
      "{\"a b\": 4, \"print\": 3, \"8b\": 2, \"9a\": 1, \"zz\": 1}",
      "{\"print\": 3, \"9a\": 1, \"zz\": 1, \"a b\": 4, \"8b\": 2}"};
  for (size_t i = 0; i < sizeof orders / sizeof orders[0]; i++) {
    mbxV_outcome out;
    mbxV_refusal err;
    assert_int_equal(run_in(vm, "return 1", orders[i], &out, &err), MBXV_INVALID_INPUT);
    assert_non_null(strstr(err.message, "key '8b' is not a Lua identifier"));
  }
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "return 1", "{\"zz\": 1, \"type\": 2, \"print\": 3}", &out, &err),
                   MBXV_INVALID_INPUT);
  assert_non_null(strstr(err.message, "key 'print' would shadow"));
}

static void inputs_become_globals(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "return x * 2, name, #list, obj.k, flag, nothing == nil",
                          "{\"x\": 21, \"name\": \"bob\", \"list\": [1, 2, 3], "
                          "\"obj\": {\"k\": \"v\"}, \"flag\": false, \"_under9\": 1}",
                          &out, &err),
                   MBX_OK);
  assert_string_equal(out.value_json, "[42,\"bob\",3,\"v\",false,true]");
  mbxV_outcome_free(&out);
  assert_int_equal(run_in(vm, "return 1", "{}", &out, &err), MBX_OK);
  mbxV_outcome_free(&out);
  expect_json(vm, "return _under9", "1"); /* inputs stay, like any global */
}

/* The inputs key "..." is the script's command line, as `lua script.lua a b` gives it. */
static void script_arguments_are_arg_and_varargs(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm,
                          "return select('#', ...), ..., arg[0], arg[1], arg[2], #arg, "
                          "arg[-1], x",
                          "{\"...\": [\"main.lua\", \"a\", \"b c\"], \"x\": 1}", &out, &err),
                   MBX_OK);
  assert_string_equal(out.value_json, "[2,\"a\",\"main.lua\",\"a\",\"b c\",2,null,1]");
  mbxV_outcome_free(&out);
  /* A script without arguments: arg[0] only, no varargs; "..." itself is no global. */
  assert_int_equal(run_in(vm, "return select('#', ...), arg[0], #arg, _G['...']",
                          "{\"...\": [\"s.lua\"]}", &out, &err),
                   MBX_OK);
  assert_string_equal(out.value_json, "[0,\"s.lua\",0,null]");
  mbxV_outcome_free(&out);
  static const char *const bad[] = {"{\"...\": []}", "{\"...\": \"main.lua\"}",
                                    "{\"...\": [\"m\", 1]}", "{\"...\": {\"a\": 1}}"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    mbxV_status s = run_in(vm, "ran2 = true return 1", bad[i], &out, &err);
    if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
    assert_int_equal(s, MBX_INVALID_INPUT);
    assert_non_null(strstr(err.message, "script arguments"));
  }
  expect_json(vm, "return ran2 == nil", "true");
}

typedef struct bad_input {
  const char *json;
  const char *message_part;
} bad_input;

static void bad_inputs_are_refused_and_bind_nothing(void **state) {
  mbxV_vm *vm = *state;
  static const bad_input cases[] = {
      {"[1, 2]", "not an array"},
      {"42", "JSON object"},
      {"\"text\"", "JSON object"},
      {"null", "JSON object"},
      {"true", "JSON object"},
      {"{\"bad\": ", "not valid JSON"},
      {"", "not valid JSON"},
      {"{\"ok1\": 1, \"1x\": 2}", "'1x' is not a Lua identifier"},
      {"{\"ok1\": 1, \"a-b\": 2}", "'a-b' is not a Lua identifier"},
      {"{\"ok1\": 1, \"\": 2}", "is not a Lua identifier"},
      {"{\"ok1\": 1, \"a b\": 2}", "is not a Lua identifier"},
      {"{\"ok1\": 1, \"end\": 2}", "'end' is not a Lua identifier"},
      {"{\"ok1\": 1, \"nil\": 2}", "'nil' is not a Lua identifier"},
      {"{\"ok1\": 1, \"print\": 2}", "'print' would shadow the built-in"},
      {"{\"ok1\": 1, \"string\": 2}", "'string' would shadow the built-in"},
      {"{\"ok1\": 1, \"_G\": 2}", "'_G' would shadow the built-in"},
      {"{\"ok1\": 1, \"pcall\": 2}", "'pcall' would shadow the built-in"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    mbxV_outcome out;
    mbxV_refusal err;
    mbxV_status s = run_in(vm, "ran = true return 1", cases[i].json, &out, &err);
    if (s != MBXV_INVALID_INPUT) {
      if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
      fail_msg("inputs %s: status %d, expected MBX_INVALID_INPUT", cases[i].json, s);
    }
    assert_int_equal(err.code, MBX_INVALID_INPUT);
    if (strstr(err.message, cases[i].message_part) == NULL)
      fail_msg("inputs %s: message '%s' lacks '%s'", cases[i].json, err.message,
               cases[i].message_part);
    assert_null(out.value_json); /* nothing is handed back */
  }
  /* Nothing was bound and the chunk never ran; the built-ins are intact. */
  expect_json(vm, "return ok1 == nil, ran == nil, type(print), type(string.rep)",
              "[true,true,\"function\",\"function\"]");
}

/* An empty JSON array decodes to an empty (array-marked) table: it has no keys to refuse, but
   it is not a JSON object either, and the API promises MBX_INVALID_INPUT for non-objects. */
static void empty_json_array_is_not_an_object(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  mbxV_status s = run_in(vm, "return 1", "[]", &out, &err);
  if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
  assert_int_equal(s, MBX_INVALID_INPUT);
  assert_int_equal(err.code, MBX_INVALID_INPUT);
  assert_non_null(strstr(err.message, "JSON object"));
}

/* A key that is an earlier guest global (not a built-in) may be rebound. */
static void inputs_may_replace_guest_globals(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "mine = 1 return mine", "1");
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "return mine", "{\"mine\": 2}", &out, &err), MBX_OK);
  assert_string_equal(out.value_json, "2");
  mbxV_outcome_free(&out);
}

static void source_size_limit(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm_with(64u << 20, 0, 16);
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "return 123456789", NULL, &out, &err), MBX_OK); /* 16 bytes */
  mbxV_outcome_free(&out);
  assert_int_equal(run_in(vm, "return 1234567890", NULL, &out, &err), MBX_SOURCE_TOO_LARGE);
  assert_int_equal(err.code, MBX_SOURCE_TOO_LARGE);
  assert_non_null(strstr(err.message, "17 bytes"));
  assert_non_null(strstr(err.message, "16 bytes"));
  assert_null(out.value_json);
  mbxV_vm_close(vm);
  free(vm);
}

static void globals_persist_between_runs(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "counter = 41 local hidden = 1", "null");
  expect_json(vm, "counter = counter + 1 return counter, hidden", "[42,null]");
  expect_json(vm, "function twice(n) return 2 * n end", "null");
  expect_json(vm, "return twice(counter)", "84");
  /* A failed run keeps what it did before failing. */
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "before = 'set' error('stop') after = 'set'", NULL, &out, &err),
                   MBX_RUNTIME_ERROR);
  mbxV_outcome_free(&out);
  expect_json(vm, "return before, after", "[\"set\",null]");
}

static void expect_encode_error(mbxV_vm *vm, const char *code, const char *message) {
  mbxV_outcome out;
  mbxV_refusal err;
  mbxV_status s = run_in(vm, code, NULL, &out, &err);
  if (s != MBXV_RUNTIME_ERROR) {
    if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
    fail_msg("%s: status %d", code, s);
  }
  /* Copied out first, so a failed assertion does not leak the outcome. */
  char got[512], chunk[64], value[16];
  snprintf(got, sizeof got, "%s", out.error.message);
  snprintf(chunk, sizeof chunk, "%s", out.error.chunk);
  snprintf(value, sizeof value, "%s", out.value_json);
  int line = out.error.line;
  mbxV_outcome_free(&out);
  if (strcmp(got, message) != 0) fail_msg("%s: message '%s', expected '%s'", code, got, message);
  /* Not a source position: the path is not a chunk name. */
  assert_string_equal(chunk, "");
  assert_int_equal(line, 0);
  assert_string_equal(value, "null");
}

/* A run never fails because of what it returns (docs/result.md): values JSON cannot hold are
   described by a reserved one-member object, without addresses. */
static void values_json_cannot_hold_are_described(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "return print", "{\"$function\":\"builtin\"}");
  expect_json(vm, "return 1,\n function() end", "[1,{\"$function\":\"input:2\"}]");
  expect_json(vm, "return 1/0, -1/0, -(0/0)",
              "[{\"$number\":\"inf\"},{\"$number\":\"-inf\"},{\"$number\":\"nan\"}]");
  expect_json(vm, "return {co = coroutine.create(print), f = io.stdout}",
              "{\"co\":{\"$thread\":\"suspended\"},\"f\":{\"$userdata\":\"FILE*\"}}");
  expect_json(vm, "local co = coroutine.create(function() end) coroutine.resume(co) return co",
              "{\"$thread\":\"dead\"}");
  expect_json(vm,
              "local co = coroutine.create(function() coroutine.yield() end) "
              "coroutine.resume(co) return co",
              "{\"$thread\":\"suspended\"}");
  /* A module file run as a program: a table of functions that refers to itself. */
  expect_json(vm, "local M = {} M.__index = M function M.new() end return M",
              "{\"__index\":{\"$cycle\":\"value\"},\"new\":{\"$function\":\"input:1\"}}");
  expect_json(vm, "local t = {} t[1] = {{t}} return 5, t", "[5,[[[{\"$cycle\":\"value[2]\"}]]]]");
  expect_json(vm, "local t = {a = {}} t.a.b = {up = t.a} return t",
              "{\"a\":{\"b\":{\"up\":{\"$cycle\":\"value.a\"}}}}");
  /* Shared but not cyclic is written at each place, as before. */
  expect_json(vm, "local s = {1} return {a = s, b = s}", "{\"a\":[1],\"b\":[1]}");
}

static void value_encode_errors_name_the_path(void **state) {
  mbxV_vm *vm = *state;
  expect_encode_error(vm, "return {[true] = 1}",
                      "value: cannot encode a table with a boolean key as JSON");
  expect_encode_error(vm, "return 1, {[{}] = 1}",
                      "value[2]: cannot encode a table with a table key as JSON");
  expect_encode_error(vm, "return {a = {b = {[1.5] = 1}}}",
                      "value.a.b: cannot encode a table with a non-integer number key as JSON");
  /* The forms are reserved: a guest table cannot pass for a described value. */
  expect_encode_error(vm, "return {x = {['$function'] = 'builtin'}}",
                      "value.x: cannot encode a table whose only key is \"$function\" as a "
                      "result (that form is reserved for values JSON cannot hold; add another "
                      "key or rename it)");
  expect_encode_error(vm, "return {['$cycle'] = 'value'}",
                      "value: cannot encode a table whose only key is \"$cycle\" as a result "
                      "(that form is reserved for values JSON cannot hold; add another key or "
                      "rename it)");
  expect_json(vm, "return {['$function'] = 'builtin', x = 1}",
              "{\"$function\":\"builtin\",\"x\":1}");
}

/* Inputs cannot contain the forms: a result handed back as an input is refused before the
   run, not read as a plain table. */
static void inputs_refuse_the_result_forms(void **state) {
  mbxV_vm *vm = *state;
  const char *forms[] = {"$function", "$thread", "$userdata", "$number", "$cycle"};
  for (size_t i = 0; i < sizeof forms / sizeof forms[0]; i++) {
    char inputs[96];
    snprintf(inputs, sizeof inputs, "{\"x\": [{\"%s\": \"builtin\"}]}", forms[i]);
    mbxV_outcome out;
    mbxV_refusal err;
    mbxV_status s = run_in(vm, "return x", inputs, &out, &err);
    if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
    assert_int_equal(s, MBXV_INVALID_INPUT);
    assert_non_null(strstr(err.message, forms[i]));
    assert_non_null(strstr(err.message, "an input cannot contain it"));
  }
  expect_json(vm, "return 1", "1");
}

/* A key that looks like a position ("a:1: b") must not be taken for chunk "value[\"a", line 1. */
static void encode_error_paths_are_not_positions(void **state) {
  mbxV_vm *vm = *state;
  expect_encode_error(vm, "return {['a:1: b'] = {[true] = 1}}",
                      "value[\"a:1: b\"]: cannot encode a table with a boolean key as JSON");
}

static void output_is_reset_for_each_run(void **state) {
  mbxV_vm *vm = *state;
  expect_json(vm, "print('first') io.stderr:write('e1')", "null");
  assert_int_equal(vm->output.len[MBXV_STDOUT], 6);
  expect_json(vm, "print('b')", "null");
  assert_int_equal(vm->output.len[MBXV_STDOUT], 2);
  assert_memory_equal(vm->output.data[MBXV_STDOUT], "b\n", 2);
  assert_int_equal(vm->output.len[MBXV_STDERR], 0);
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(run_in(vm, "io.write('abc')", NULL, &out, &err), MBX_OK);
  assert_int_equal(out.output_bytes, 3);
  mbxV_outcome_free(&out);
}

static void usage_is_reported(void **state) {
  mbxV_vm *vm = *state;
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(
      run_in(vm, "local t = {} for i = 1, 20000 do t[i] = i end return #t", NULL, &out, &err),
      MBX_OK);
  assert_string_equal(out.value_json, "20000");
  assert_true(out.instructions >= 20000);
  assert_true(out.memory_peak >= 20000 * 8);
  assert_int_equal(out.memory_peak, vm->heap.peak);
  assert_int_equal(out.output_bytes, 0);
  mbxV_outcome_free(&out);
}

/* A trip decides the status and the message, whatever error the guest raised afterwards. */
static void a_trip_wins_over_the_guest_error(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm_with(64u << 20, 50000, 1u << 16);
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(
      run_in(vm, "pcall(function() while true do end end)\nerror('mine')", NULL, &out, &err),
      MBX_INSTRUCTION_LIMIT);
  assert_string_equal(out.error.message, "instruction limit exceeded (50000 instructions)");
  assert_string_equal(out.value_json, "null");
  mbxV_outcome_free(&out);
  mbxV_vm_close(vm);
  free(vm);
}

static void memory_limit_ends_the_run(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm_with(1u << 20, 0, 1u << 16);
  mbxV_outcome out;
  mbxV_refusal err;
  assert_int_equal(
      run_in(vm, "local t = {} for i = 1, 1e8 do t[i] = i end return #t", NULL, &out, &err),
      MBX_MEMORY_LIMIT);
  assert_string_equal(out.error.message, "memory limit exceeded (1048576 bytes)");
  assert_true(out.memory_peak > (1u << 20));
  assert_true(out.memory_peak <= mbxV_heap_ceiling_for(1u << 20));
  mbxV_outcome_free(&out);
  mbxV_vm_close(vm);
  free(vm);
}

/* The value's JSON text is bounded by the result limit (issue 9, C.3): past it the run ends
   with output_limit and no value, whatever the output limit; several values share it. */
static void the_value_is_bounded_by_the_result_limit(void **state) {
  (void)state;
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = 64u << 20,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .result_limit = 1000,
                     .address_key = 7};
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  mbxV_outcome out;
  mbxV_refusal err;
  /* 998 bytes of text ("x" * 996 in quotes): fits. */
  assert_int_equal(run_in(vm, "return string.rep('x', 996)", NULL, &out, &err), MBXV_OK);
  assert_int_equal(out.value_len, 998);
  mbxV_outcome_free(&out);
  assert_int_equal(run_in(vm, "return string.rep('x', 999)", NULL, &out, &err), MBXV_OUTPUT_LIMIT);
  assert_string_equal(out.value_json, "null");
  mbxV_outcome_free(&out);
  mbxV_vm_close(vm);
  free(vm);
  /* 0 = the output limit; values returned together share the room. */
  vm = open_vm_with(64u << 20, 0, 1u << 16); /* output limit 1 MiB */
  assert_int_equal(
      run_in(vm, "local s = string.rep('y', 400 * 1024) return s, s", NULL, &out, &err), MBXV_OK);
  mbxV_outcome_free(&out);
  assert_int_equal(
      run_in(vm, "local s = string.rep('y', 400 * 1024) return s, s, s", NULL, &out, &err),
      MBXV_OUTPUT_LIMIT);
  mbxV_outcome_free(&out);
  mbxV_vm_close(vm);
  free(vm);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
  const struct CMUnitTest tests[] = {
      T(return_values_become_json),
      T(failed_chunk_closes_its_variables),
      T(the_least_bad_input_is_named),
      T(small_values_match_the_encoder),
      T(the_run_thread_is_reused_after_a_clean_run),
      T(many_return_values),
      T(syntax_error_has_chunk_and_line),
      T(binary_chunks_are_refused),
      T(runtime_error_has_chunk_line_and_traceback),
      T(chunk_name_is_the_callers),
      T(yield_out_of_the_main_chunk_is_a_runtime_error),
      T(inputs_become_globals),
      T(script_arguments_are_arg_and_varargs),
      T(bad_inputs_are_refused_and_bind_nothing),
      T(empty_json_array_is_not_an_object),
      T(inputs_may_replace_guest_globals),
      cmocka_unit_test(source_size_limit),
      T(globals_persist_between_runs),
      T(values_json_cannot_hold_are_described),
      T(inputs_refuse_the_result_forms),
      T(value_encode_errors_name_the_path),
      T(encode_error_paths_are_not_positions),
      T(output_is_reset_for_each_run),
      T(usage_is_reported),
      cmocka_unit_test(a_trip_wins_over_the_guest_error),
      cmocka_unit_test(memory_limit_ends_the_run),
      cmocka_unit_test(the_value_is_bounded_by_the_result_limit),
  };
#undef T
  return cmocka_run_group_tests_name("vm/run", tests, NULL, NULL);
}
