/* tests/vm/test_errors.c -- unit tests of vm/errors.c: positions, messages, tracebacks. */
#include <pthread.h>
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

#include "include/moonbox.h"
#include "vm/errors.h"

/* ---- mbxV_error_split ---- */

typedef struct split_case {
  const char *msg;
  int has_position;
  const char *chunk;
  int line;
  const char *text;
} split_case;

static void split_cases(void **state) {
  (void)state;
  static const split_case cases[] = {
      {"input:3: msg", 1, "input", 3, "msg"},
      {"[string \"a:1: b\"]:2: msg", 1, "[string \"a:1: b\"]", 2, "msg"},
      {"[string \"a]b\"]:7: x", 1, "[string \"a]b\"]", 7, "x"},
      {"no position here", 0, NULL, 0, NULL},
      {"x:y: z", 0, NULL, 0, NULL},
      {"input:3:msg", 1, "input", 3, "msg"}, /* no space after the position */
      {"input:12345: a: b: c", 1, "input", 12345, "a: b: c"},
      {"input:3", 0, NULL, 0, NULL},
      {"input:", 0, NULL, 0, NULL},
      {":3: text", 0, NULL, 0, NULL},     /* empty chunk */
      {"input:: text", 0, NULL, 0, NULL}, /* empty line number */
      {"input:-3: text", 0, NULL, 0, NULL},
      {"line one\nfile:3: text", 0, NULL, 0, NULL}, /* the position must start the message */
      {"[string \"unterminated:1: x", 0, NULL, 0, NULL},
      {"[string \"a\"]x:1: m", 0, NULL, 0, NULL},
      {"input:99999999999999: huge", 0, NULL, 0, NULL},
      {"", 0, NULL, 0, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    const split_case *c = &cases[i];
    char chunk[64] = "untouched";
    int line = -7;
    size_t off = 12345;
    int got = mbxV_error_split(c->msg, strlen(c->msg), chunk, sizeof chunk, &line, &off);
    if (got != c->has_position) fail_msg("case %zu '%s': split returned %d", i, c->msg, got);
    if (!c->has_position) continue;
    assert_string_equal(chunk, c->chunk);
    assert_int_equal(line, c->line);
    assert_string_equal(c->msg + off, c->text);
  }
}

/* Only len bytes are looked at: a message cut before its second ':' has no position. */
static void split_respects_the_length(void **state) {
  (void)state;
  char chunk[64];
  int line = 0;
  size_t off = 0;
  assert_int_equal(mbxV_error_split("input:3: msg", 7, chunk, sizeof chunk, &line, &off), 0);
  assert_int_equal(mbxV_error_split("input:3: msg", 8, chunk, sizeof chunk, &line, &off), 1);
  assert_int_equal(line, 3);
  assert_int_equal(off, 8);
  /* A bracketed name whose ']' lies beyond len. */
  const char *m = "[string \"abc\"]:4: x";
  assert_int_equal(mbxV_error_split(m, 10, chunk, sizeof chunk, &line, &off), 0);
}

static void split_truncates_a_long_chunk_name(void **state) {
  (void)state;
  char msg[300];
  memset(msg, 'c', 200);
  snprintf(msg + 200, sizeof msg - 200, ":5: boom");
  char chunk[16];
  memset(chunk, '#', sizeof chunk);
  int line = 0;
  size_t off = 0;
  assert_int_equal(mbxV_error_split(msg, strlen(msg), chunk, sizeof chunk, &line, &off), 1);
  assert_int_equal(strlen(chunk), 15);
  assert_int_equal(line, 5);
  assert_string_equal(msg + off, "boom");
}

/* ---- mbxV_error_from_message / mbxV_refuse ---- */

static void from_message_splits_the_position(void **state) {
  (void)state;
  mbxV_error_info info;
  const char *m = "input:3: attempt to call a nil value";
  assert_int_equal(mbxV_error_from_message(m, strlen(m), 1, &info), 0);
  assert_string_equal(info.chunk, "input");
  assert_int_equal(info.line, 3);
  assert_string_equal(info.message, "attempt to call a nil value");
  assert_int_equal(info.message_len, strlen("attempt to call a nil value"));
  assert_string_equal(info.traceback, "");
  assert_int_equal(info.traceback_len, 0);
  mbxV_error_info_free(&info);
  assert_null(info.message);
  assert_null(info.traceback);
  mbxV_error_info_free(&info); /* twice is fine */
}

static void from_message_without_position_keeps_it_whole(void **state) {
  (void)state;
  mbxV_error_info info;
  const char *m = "value: cannot encode a function as JSON";
  assert_int_equal(mbxV_error_from_message(m, strlen(m), 1, &info), 0);
  assert_string_equal(info.chunk, "");
  assert_int_equal(info.line, 0);
  assert_string_equal(info.message, m);
  mbxV_error_info_free(&info);
  /* Bytes after a NUL are kept: messages are (pointer, length). */
  assert_int_equal(mbxV_error_from_message("a\0b", 3, 1, &info), 0);
  assert_int_equal(info.message_len, 3);
  assert_memory_equal(info.message, "a\0b", 4);
  mbxV_error_info_free(&info);
}

static void from_message_without_split_keeps_a_position_lookalike(void **state) {
  (void)state;
  /* Messages built from guest data (JSON paths) must not yield a position. */
  mbxV_error_info info;
  const char *m = "value[\"a:1: b\"]: cannot encode a function as JSON";
  assert_int_equal(mbxV_error_from_message(m, strlen(m), 0, &info), 0);
  assert_string_equal(info.chunk, "");
  assert_int_equal(info.line, 0);
  assert_string_equal(info.message, m);
  mbxV_error_info_free(&info);
}

static void from_message_truncates_to_the_maximum(void **state) {
  (void)state;
  size_t n = MBXV_ERROR_MAX * 3;
  char *m = malloc(n);
  memset(m, 'e', n);
  mbxV_error_info info;
  assert_int_equal(mbxV_error_from_message(m, n, 1, &info), 0);
  assert_int_equal(info.message_len, MBXV_ERROR_MAX);
  assert_int_equal(strlen(info.message), MBXV_ERROR_MAX);
  mbxV_error_info_free(&info);
  free(m);
}

static void refusal_fills_and_truncates(void **state) {
  (void)state;
  mbxV_refuse(NULL, MBXV_INVALID_INPUT, "no record: %d", 1); /* must not crash */
  mbxV_refusal r;
  memset(&r, 0x55, sizeof r);
  mbxV_refuse(&r, MBXV_SOURCE_TOO_LARGE, "limit is %d bytes", 16);
  assert_int_equal(r.code, MBXV_SOURCE_TOO_LARGE);
  assert_string_equal(r.message, "limit is 16 bytes");
  char long_text[1000];
  memset(long_text, 'L', sizeof long_text - 1);
  long_text[sizeof long_text - 1] = '\0';
  mbxV_refuse(&r, MBXV_NO_MEMORY, "%s", long_text);
  assert_int_equal(strlen(r.message), sizeof r.message - 1);
}

/* ---- mbxV_error_describe on a thread, directly ---- */

typedef struct describe_call {
  lua_State *co;
  const char *override;
  mbxV_error_info info;
  int rc;
} describe_call;

static int call_describe(lua_State *L) {
  describe_call *d = lua_touserdata(L, 1);
  d->rc = mbxV_error_describe(L, d->co, d->override, &d->info);
  return 0;
}

static void describe(lua_State *L, describe_call *d) {
  lua_pushcfunction(L, call_describe);
  lua_pushlightuserdata(L, d);
  assert_int_equal(lua_pcall(L, 1, 0, 0), LUA_OK);
  assert_int_equal(d->rc, 0);
  assert_non_null(d->info.message);
  assert_non_null(d->info.traceback);
}

/* Resume a fresh thread running code; returns it (anchored on L's stack) after it failed. */
static lua_State *failed_thread(lua_State *L, const char *code) {
  lua_State *co = lua_newthread(L);
  assert_int_equal(luaL_loadbufferx(co, code, strlen(code), "=input", "t"), LUA_OK);
  int nres = 0;
  int rc = lua_resume(co, L, 0, &nres);
  assert_true(rc != LUA_OK && rc != LUA_YIELD);
  return co;
}

static void describe_reads_error_objects_raw(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  static const struct {
    const char *code;
    const char *message;
  } cases[] = {
      {"error({})", "(error object is a table value)"},
      {"error(nil)", "(error object is a nil value)"},
      {"error()", "(error object is a nil value)"},
      {"error(true)", "(error object is a boolean value)"},
      {"error(print)", "(error object is a function value)"},
      {"error(coroutine.create(print))", "(error object is a thread value)"},
      {"error(42)", "42"},
      {"error(1.5)", "1.5"},
      {"error('plain', 0)", "plain"},
      {"error(setmetatable({}, {__tostring = function() ran = true return 'hi' end}))",
       "(error object is a table value)"},
      {"error(setmetatable({}, {__name = 'Evil'}))", "(error object is a table value)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    lua_settop(L, 0);
    describe_call d = {.co = failed_thread(L, cases[i].code)};
    describe(L, &d);
    if (strcmp(d.info.message, cases[i].message) != 0)
      fail_msg("%s: got '%s'", cases[i].code, d.info.message);
    assert_int_equal(d.info.message_len, strlen(cases[i].message));
    /* No position in the message: the first frame with a line gives it. */
    assert_string_equal(d.info.chunk, "input");
    assert_int_equal(d.info.line, 1);
    mbxV_error_info_free(&d.info);
  }
  /* __tostring never ran. */
  assert_int_equal(lua_getglobal(L, "ran"), LUA_TNIL);
  lua_close(L);
}

static void describe_uses_the_message_position_first(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  describe_call d = {.co = failed_thread(L, "local function f()\n  error('inner', 2)\nend\n"
                                            "\n"
                                            "f()\n")};
  describe(L, &d);
  assert_string_equal(d.info.message, "inner");
  assert_string_equal(d.info.chunk, "input");
  assert_int_equal(d.info.line, 5); /* level 2: the caller's line, not the frame's line 2 */
  assert_non_null(strstr(d.info.traceback, "input:2: in "));
  mbxV_error_info_free(&d.info);
  lua_close(L);
}

static void describe_override_replaces_the_message(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  describe_call d = {.co = failed_thread(L, "local x = 1\nerror('original')"),
                     .override = "time limit exceeded (5 ms)"};
  describe(L, &d);
  assert_string_equal(d.info.message, "time limit exceeded (5 ms)");
  assert_string_equal(d.info.chunk, "input"); /* from the traceback */
  assert_int_equal(d.info.line, 2);
  assert_non_null(strstr(d.info.traceback, "input:2: in main chunk"));
  mbxV_error_info_free(&d.info);
  lua_close(L);
}

static void describe_truncates_huge_messages(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  describe_call d = {.co = failed_thread(L, "error(string.rep('m', 100000), 0)")};
  describe(L, &d);
  assert_int_equal(d.info.message_len, MBXV_ERROR_MAX);
  assert_int_equal(strlen(d.info.message), MBXV_ERROR_MAX);
  mbxV_error_info_free(&d.info);
  lua_close(L);
}

/* A level-0 error cannot choose its position: chunk and line come from a frame on the stack,
   and a prefix naming no frame stays in the message (issue 9, E.2). */
static void describe_position_comes_from_the_frames(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  describe_call d = {.co = failed_thread(L, "local x = 1\nerror('/etc/shadow:31337: boom', 0)\n")};
  describe(L, &d);
  assert_string_equal(d.info.chunk, "input");
  assert_int_equal(d.info.line, 2);
  assert_string_equal(d.info.message, "/etc/shadow:31337: boom");
  mbxV_error_info_free(&d.info);
  /* The right chunk with a line no frame is at is forged too. */
  lua_settop(L, 0);
  describe_call e = {.co = failed_thread(L, "error('input:99: boom', 0)")};
  describe(L, &e);
  assert_int_equal(e.info.line, 1);
  assert_string_equal(e.info.message, "input:99: boom");
  mbxV_error_info_free(&e.info);
  /* A prefix that names the raising frame is what luaL_where writes: moved out. */
  lua_settop(L, 0);
  describe_call f = {.co = failed_thread(L, "\n\nerror('boom')")};
  describe(L, &f);
  assert_int_equal(f.info.line, 3);
  assert_string_equal(f.info.message, "boom");
  mbxV_error_info_free(&f.info);
  lua_close(L);
}

/* The 4096-byte cut never splits a UTF-8 character (issue 9, E.3). */
static void describe_cuts_on_a_character_boundary(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  /* 4095 ASCII bytes, then two-byte characters: the cut at 4096 falls inside one. */
  describe_call d = {
      .co = failed_thread(L, "error(string.rep('a', 4095) .. string.rep('\\u{e9}', 100), 0)")};
  describe(L, &d);
  assert_int_equal(d.info.message_len, 4095);
  mbxV_error_info_free(&d.info);
  lua_settop(L, 0);
  /* Four-byte characters from an offset of 1, 2 and 3 bytes before the cut. */
  for (int lead = 1; lead <= 3; lead++) {
    char code[96];
    snprintf(code, sizeof code, "error(string.rep('a', %d) .. string.rep('\\u{1F600}', 2000), 0)",
             MBXV_ERROR_MAX - lead);
    describe_call e = {.co = failed_thread(L, code)};
    describe(L, &e);
    assert_int_equal(e.info.message_len, MBXV_ERROR_MAX - lead);
    mbxV_error_info_free(&e.info);
    lua_settop(L, 0);
  }
  lua_close(L);
}

static void utf8_cut_cases(void **state) {
  (void)state;
  assert_int_equal(mbxV_utf8_cut("abc", 3, 4), 3);
  assert_int_equal(mbxV_utf8_cut("abcd", 4, 2), 2);
  assert_int_equal(mbxV_utf8_cut("a\xc3\xa9", 3, 2), 1);            /* inside a 2-byte char */
  assert_int_equal(mbxV_utf8_cut("\xe2\x82\xac!", 4, 3), 3);        /* right after a char */
  assert_int_equal(mbxV_utf8_cut("\xf0\x9f\x98\x80", 4, 3), 0);     /* inside a 4-byte char */
  assert_int_equal(mbxV_utf8_cut("\x80\x80\x80\x80\x80", 5, 4), 4); /* not UTF-8: plain cut */
  /* from_message cuts the same way. */
  char m[MBXV_ERROR_MAX + 8];
  memset(m, 'a', sizeof m);
  memcpy(m + MBXV_ERROR_MAX - 1, "\xc3\xa9", 2);
  mbxV_error_info info;
  assert_int_equal(mbxV_error_from_message(m, sizeof m, 0, &info), 0);
  assert_int_equal(info.message_len, MBXV_ERROR_MAX - 1);
  mbxV_error_info_free(&info);
}

/* A thread that never ran: no frames, no position. */
static void describe_an_empty_thread(void **state) {
  (void)state;
  lua_State *L = luaL_newstate();
  lua_State *co = lua_newthread(L);
  lua_pushliteral(co, "bare");
  describe_call d = {.co = co};
  describe(L, &d);
  assert_string_equal(d.info.message, "bare");
  assert_string_equal(d.info.chunk, "");
  assert_int_equal(d.info.line, 0);
  assert_string_equal(d.info.traceback, "stack traceback:");
  mbxV_error_info_free(&d.info);
  lua_settop(co, 0); /* nothing on the stack at all */
  describe_call e = {.co = co};
  describe(L, &e);
  assert_string_equal(e.info.message, "(error object is a nil value)");
  mbxV_error_info_free(&e.info);
  lua_close(L);
}

/* ---- tracebacks through a real run (public API) ---- */

typedef struct api_run {
  const char *code;
  mbx_status status;
  char *message;
  char *traceback;
  char *stdout_text;
  mbx_error err;
} api_run;

static void *run_on_thread(void *arg) {
  api_run *r = arg;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  mbx_result *res = NULL;
  r->status = mbx_run(sb, r->code, strlen(r->code), NULL, 0, &res, NULL);
  mbx_result_error(res, &r->err);
  r->message = strdup(mbx_result_error_message(res, NULL));
  r->traceback = strdup(mbx_result_traceback(res, NULL));
  r->stdout_text = strdup(res ? mbx_result_stdout(res, NULL) : "");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return NULL;
}

/* Sandboxes run on a thread with an 8 MiB stack, as the API asks. */
static void api_run_code(api_run *r) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  pthread_t t;
  assert_int_equal(pthread_create(&t, &attr, run_on_thread, r), 0);
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  assert_non_null(r->message);
  assert_non_null(r->traceback);
}

static void api_run_free(api_run *r) {
  free(r->message);
  free(r->traceback);
  free(r->stdout_text);
}

static int count(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
    n++;
  return n;
}

static void traceback_names_functions_and_the_main_chunk(void **state) {
  (void)state;
  api_run r = {.code = "local function inner()\n"
                       "  local t = nil\n"
                       "  return t.field\n"
                       "end\n"
                       "function outer() return (inner()) end\n"
                       "local obj = {}\n"
                       "function obj:method() outer() end\n"
                       "obj:method()\n"};
  api_run_code(&r);
  assert_int_equal(r.status, MBX_RUNTIME_ERROR);
  assert_non_null(strstr(r.message, "attempt to index a nil value"));
  assert_string_equal(r.err.chunk, "input");
  assert_int_equal(r.err.line, 3);
  assert_memory_equal(r.traceback, "stack traceback:", 16);
  assert_non_null(strstr(r.traceback, "\n\tinput:3: in upvalue 'inner'"));
  assert_non_null(strstr(r.traceback, "\n\tinput:5: in global 'outer'"));
  assert_non_null(strstr(r.traceback, "\n\tinput:7: in method 'method'"));
  assert_non_null(strstr(r.traceback, "\n\tinput:8: in main chunk"));
  /* innermost first */
  assert_true(strstr(r.traceback, "inner") < strstr(r.traceback, "main chunk"));
  assert_int_equal(count(r.traceback, "\n\t"), 4);
  api_run_free(&r);
}

static void traceback_of_deep_recursion_is_truncated(void **state) {
  (void)state;
  api_run r = {.code = "local function f(n)\n"
                       "  if n == 0 then error('deep') end\n"
                       "  return 1 + f(n - 1)\n"
                       "end\n"
                       "f(100)\n"};
  api_run_code(&r);
  assert_int_equal(r.status, MBX_RUNTIME_ERROR);
  assert_string_equal(r.message, "deep");
  assert_int_equal(r.err.line, 2);
  /* error + 101 calls of f + main chunk = 103 frames: 10 on top, 11 at the bottom. */
  assert_non_null(strstr(r.traceback, "\n\t...\t(skipping 82 levels)"));
  assert_int_equal(count(r.traceback, "\n\t"), 10 + 1 + 11);
  assert_non_null(strstr(r.traceback, "in global 'error'"));
  assert_non_null(strstr(r.traceback, "\n\tinput:5: in main chunk"));
  api_run_free(&r);
}

/* Unbounded recursion (hundreds of thousands of frames) still gives a short traceback, and
   does not hang. With the default 64 MiB the CallInfo list reaches the memory limit before
   Lua's 1M-slot stack overflows; either ending is right. */
static void traceback_of_a_stack_overflow_is_short(void **state) {
  (void)state;
  api_run r = {.code = "local function f() return 1 + f() end\nf()\n"};
  api_run_code(&r);
  assert_true(r.status == MBX_RUNTIME_ERROR || r.status == MBX_MEMORY_LIMIT);
  if (r.status == MBX_RUNTIME_ERROR)
    assert_non_null(strstr(r.message, "stack overflow"));
  else
    assert_string_equal(r.message, "memory limit exceeded (67108864 bytes)");
  assert_non_null(strstr(r.traceback, "(skipping "));
  assert_true(strlen(r.traceback) < 4096);
  assert_non_null(strstr(r.traceback, "\n\tinput:2: in main chunk"));
  api_run_free(&r);
}

static void error_objects_through_a_run(void **state) {
  (void)state;
  static const struct {
    const char *code;
    const char *message;
  } cases[] = {
      {"error({})", "(error object is a table value)"},
      {"error(nil)", "(error object is a nil value)"},
      {"error(42)", "42"},
      {"error(setmetatable({}, {__tostring = function() print('ran') return 'x' end}))",
       "(error object is a table value)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    api_run r = {.code = cases[i].code};
    api_run_code(&r);
    assert_int_equal(r.status, MBX_RUNTIME_ERROR);
    assert_string_equal(r.message, cases[i].message);
    assert_string_equal(r.stdout_text, ""); /* __tostring never ran */
    assert_int_equal(r.err.line, 1);
    api_run_free(&r);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(split_cases),
      cmocka_unit_test(split_respects_the_length),
      cmocka_unit_test(split_truncates_a_long_chunk_name),
      cmocka_unit_test(from_message_splits_the_position),
      cmocka_unit_test(from_message_without_position_keeps_it_whole),
      cmocka_unit_test(from_message_without_split_keeps_a_position_lookalike),
      cmocka_unit_test(from_message_truncates_to_the_maximum),
      cmocka_unit_test(refusal_fills_and_truncates),
      cmocka_unit_test(describe_reads_error_objects_raw),
      cmocka_unit_test(describe_uses_the_message_position_first),
      cmocka_unit_test(describe_override_replaces_the_message),
      cmocka_unit_test(describe_truncates_huge_messages),
      cmocka_unit_test(describe_an_empty_thread),
      cmocka_unit_test(describe_position_comes_from_the_frames),
      cmocka_unit_test(describe_cuts_on_a_character_boundary),
      cmocka_unit_test(utf8_cut_cases),
      cmocka_unit_test(traceback_names_functions_and_the_main_chunk),
      cmocka_unit_test(traceback_of_deep_recursion_is_truncated),
      cmocka_unit_test(traceback_of_a_stack_overflow_is_short),
      cmocka_unit_test(error_objects_through_a_run),
  };
  return cmocka_run_group_tests_name("vm/errors", tests, NULL, NULL);
}
