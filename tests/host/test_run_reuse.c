/* tests/host/test_run_reuse.c -- what a run on a live sandbox reuses from the last one (the
   run thread, the last text's function: vm/run.c) can never be told from a fresh one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static void expect_in(mbx_sandbox *sb, const char *code, mbx_status status, const char *want) {
  snippet_outcome o;
  mbx_status s = snippet_run_in(sb, code, &o);
  if (s != status)
    fail_msg("%s: status %s, want %s: %s", code, mbx_status_name(s), mbx_status_name(status),
             o.value);
  if (strstr(o.value, want) == NULL) fail_msg("%s: got %s, want %s", code, o.value, want);
}

/* The same text run again gives the same function back; other texts in between, or another
   chunk name, get their own. */
static void texts_alternate(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  for (int i = 0; i < 3; i++) {
    expect_in(sb, "n = (n or 0) + 1 return n", MBX_OK, "");
    expect_in(sb, "n = (n or 0) + 1 return n", MBX_OK, "");
    expect_in(sb, "return 'other'", MBX_OK, "\"other\"");
    expect_in(sb, "return 'other'", MBX_OK, "\"other\"");
  }
  expect_in(sb, "return n", MBX_OK, "6");
  const char *code = "error('where')";
  const char *names[] = {"input", "other.lua", "input"};
  for (int i = 0; i < 3; i++) {
    mbx_result *res = NULL;
    mbx_error err;
    assert_int_equal(mbx_run_named(sb, code, strlen(code), names[i], NULL, 0, &res, &err),
                     MBX_RUNTIME_ERROR);
    assert_int_equal(mbx_result_error(res, &err), 1);
    assert_string_equal(err.chunk, names[i]);
    assert_string_equal(err.message, "where");
    mbx_result_free(res);
  }
  mbx_sandbox_free(sb);
}

/* A chunk that assigns _ENV at every run: each run must start from the globals again, as
   with a fresh load. A kept function would start from the table its last run assigned (its
   _ENV upvalue is closed over it), where G is not defined. */
static void a_text_naming_env_gets_a_fresh_function(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  const char *code = "local prev = G G = function() return y end _ENV = {y = 7} "
                     "return prev ~= nil";
  expect_in(sb, code, MBX_OK, "false");
  /* A text is kept at its second run in a row and would be reused from the third. */
  for (int i = 0; i < 3; i++)
    expect_in(sb, code, MBX_OK, "true");
  expect_in(sb, "return G()", MBX_OK, "7");
  mbx_sandbox_free(sb);
}

/* The guest sees one main thread across clean runs (as in a stock REPL), a new one after a run
   that failed; and a reused thread carries nothing of the last run on its stack. */
static void the_main_thread_across_runs(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  expect_in(sb, "T = coroutine.running() return select('#', ...)", MBX_OK, "0");
  expect_in(sb, "return coroutine.running() == T, select('#', ...)", MBX_OK, "[true,0]");
  expect_in(sb, "local a, b = coroutine.running() return b, coroutine.isyieldable()", MBX_OK,
            "[true,false]");
  expect_in(sb, "error({})", MBX_RUNTIME_ERROR, "");
  expect_in(sb, "return coroutine.running() == T", MBX_OK, "false");
  mbx_sandbox_free(sb);
}

/* A small value's text lives in its result (vm/run.c's value_inline): every result keeps its
   own value however many runs follow, after the sandbox is gone too, and a run never shows an
   earlier run's bytes (a failed run's value is null, a long value is its own copy). */
static void every_result_keeps_its_own_value(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  static const char *const codes[] = {"return 1+1",  "return 'abc'",  "return ('x'):rep(300)",
                                      "return true", "error('boom')", "return 1.5",
                                      "return"};
  static const char *const values[] = {"2", "\"abc\"", NULL, "true", "null", "1.5", "null"};
  enum { N = sizeof codes / sizeof *codes };
  mbx_result *kept[2 * N];
  for (int round = 0; round < 2; round++) {
    for (int i = 0; i < N; i++) {
      mbx_error err;
      mbx_run(sb, codes[i], strlen(codes[i]), NULL, 0, &kept[round * N + i], &err);
      assert_non_null(kept[round * N + i]);
    }
  }
  mbx_sandbox_free(sb);
  for (int k = 0; k < 2 * N; k++) {
    size_t len = 0;
    const char *v = mbx_result_value_json(kept[k], &len);
    assert_int_equal(strlen(v), len);
    if (values[k % N]) {
      assert_string_equal(v, values[k % N]);
    } else {
      assert_int_equal(len, 302);
      assert_int_equal(v[0], '"');
      assert_int_equal(strspn(v + 1, "x"), 300);
    }
    /* The contract text carries the same value. */
    const char *json = mbx_result_json(kept[k], NULL);
    char want[400];
    snprintf(want, sizeof want, "\"value\":%s}", v);
    assert_non_null(strstr(json, want));
  }
  for (int k = 0; k < 2 * N; k++)
    mbx_result_free(kept[k]);
}

/* The kept function and the idle run thread go back with a rewind and are dropped by a reset
   (vm/run.c mirrors their registry anchors in the vm): each run still sees the globals of
   the state it runs in. */
static void the_kept_function_across_rewind_and_reset(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  mbx_error err;
  const char *inc = "n = (n or 0) + 1 return n";
  for (int i = 1; i <= 3; i++) {
    char want[8];
    snprintf(want, sizeof want, "%d", i);
    expect_in(sb, inc, MBX_OK, want);
  }
  expect_in(sb, "T = coroutine.running() return true", MBX_OK, "true");
  /* MBX_ARENA_MALLOC builds have no checkpoints: the reset half still runs there. */
  mbx_status ck = mbx_sandbox_checkpoint(sb, &err);
  if (ck != MBX_UNSUPPORTED) assert_int_equal(ck, MBX_OK);
  /* Another text kept in its place, and a failed run (the run thread dropped). */
  for (int i = 0; i < 3; i++)
    expect_in(sb, "n = 100 return 'other'", MBX_OK, "\"other\"");
  expect_in(sb, "error('x')", MBX_RUNTIME_ERROR, "x");
  expect_in(sb, "return coroutine.running() == T", MBX_OK, "false");
  if (ck == MBX_OK) {
    assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
    /* The checkpoint's state: n is 3, the run thread is the one T names. */
    expect_in(sb, "return coroutine.running() == T", MBX_OK, "true");
    expect_in(sb, inc, MBX_OK, "4");
    expect_in(sb, inc, MBX_OK, "5");
  }
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  expect_in(sb, inc, MBX_OK, "1");
  expect_in(sb, inc, MBX_OK, "2");
  expect_in(sb, inc, MBX_OK, "3");
  expect_in(sb, "return T == nil", MBX_OK, "true");
  mbx_sandbox_free(sb);
}

/* The value of code's first run in a new sandbox of a policy with the given seed (0: none). */
/* code's value in a fresh sandbox of p (which is freed). */
static void first_run_of(mbx_policy *p, const char *code, char *value, size_t cap) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, code, &o), MBX_OK);
  size_t n = strnlen(o.value, cap - 1);
  memcpy(value, o.value, n);
  value[n] = '\0';
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
}

static void first_run_with_seed(uint64_t seed, const char *code, char *value, size_t cap) {
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (seed) assert_int_equal(mbx_policy_set_seed(p, seed, &err), MBX_OK);
  first_run_of(p, code, value, cap);
}

/* A fresh sandbox's first run of a text its slot saw twice replays the recorded preparation
   (vm/first_run.h): the sandbox still has its own seed, its own fresh globals and the heap a
   loaded run has. The text runs first with seed 1 (compiled: a first sandbox's heap holds the
   parse's garbage), then again (a cache hit, recorded), then with seed 2 (replayed), and so
   on: each seed's value is the one its first loaded sandbox gave. */
static void a_replayed_first_run_keeps_the_sandbox_own(void **state) {
  (void)state;
  const char *code = "g = (g or 0) + 1 return g, math.random(1, 1000000000), "
                     "collectgarbage('count'), #tostring({})";
  char one[256], two[256], again[256];
  first_run_with_seed(1, code, one, sizeof one);
  first_run_with_seed(1, code, one, sizeof one);
  first_run_with_seed(2, code, two, sizeof two);
  assert_string_not_equal(two, one);
  for (int i = 0; i < 4; i++) {
    first_run_with_seed(1, code, again, sizeof again);
    assert_string_equal(again, one);
    first_run_with_seed(2, code, again, sizeof again);
    assert_string_equal(again, two);
  }
  /* Without a seed each sandbox draws its own: two replays in a row differ. */
  first_run_with_seed(0, code, one, sizeof one);
  first_run_with_seed(0, code, two, sizeof two);
  assert_string_not_equal(one, two);
}

/* A host function that answers with the name its policy gave it (userdata). */
static mbx_status answer_own_name(void *userdata, const char *args, size_t len,
                                  mbx_host_reply *reply) {
  (void)args;
  (void)len;
  const char *name = userdata;
  return mbx_host_reply_json(reply, name, strlen(name));
}

/* code's first run in a new sandbox of a policy with host functions tools.who and tools.f0..f3
   (who answering `who`) and the given seed. */
static void first_run_with_tools(const char *who, uint64_t seed, const char *code, char *value,
                                 size_t cap) {
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_seed(p, seed, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.who", answer_own_name, (void *)who, &err),
                   MBX_OK);
  for (int i = 0; i < 4; i++) {
    char name[16];
    snprintf(name, sizeof name, "tools.f%d", i);
    assert_int_equal(mbx_policy_add_function(p, name, answer_own_name, (void *)who, &err), MBX_OK);
  }
  first_run_of(p, code, value, cap);
}

/* The same with host functions: sandboxes of one shape (the functions' names and kinds) come
   from its shaped template and replay its first run too (vm/first_run.h), and a replayed run
   still calls its own policy's functions (two policies of one shape, different callbacks)
   with its own seed. Each value is the one the first loaded sandbox of its policy gave. */
static void a_replayed_first_run_with_host_functions_calls_its_own(void **state) {
  (void)state;
  const char *code = "g = (g or 0) + 1 return g, tools.who(), math.random(1, 1000000000), "
                     "collectgarbage('count')";
  char one[256], two[256], again[256];
  first_run_with_tools("\"one\"", 1, code, one, sizeof one);
  first_run_with_tools("\"one\"", 1, code, one, sizeof one);
  first_run_with_tools("\"two\"", 2, code, two, sizeof two);
  assert_non_null(strstr(one, "\"one\""));
  assert_non_null(strstr(two, "\"two\""));
  for (int i = 0; i < 4; i++) {
    first_run_with_tools("\"one\"", 1, code, again, sizeof again);
    assert_string_equal(again, one);
    first_run_with_tools("\"two\"", 2, code, again, sizeof again);
    assert_string_equal(again, two);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(texts_alternate),
      cmocka_unit_test(a_text_naming_env_gets_a_fresh_function),
      cmocka_unit_test(the_main_thread_across_runs),
      cmocka_unit_test(every_result_keeps_its_own_value),
      cmocka_unit_test(the_kept_function_across_rewind_and_reset),
      cmocka_unit_test(a_replayed_first_run_keeps_the_sandbox_own),
      cmocka_unit_test(a_replayed_first_run_with_host_functions_calls_its_own),
  };
  return cmocka_run_group_tests(tests, snippet_setup, snippet_teardown);
}
