/* tests/host/mcp/test_code_tools.c -- code mode's host functions (host/mcp/code_tools.c) under
   the C API's record layer: upstream calls are recorded as host calls are, so a snapshot of a
   deterministic sandbox restores without calling any upstream again. The upstream is
   tests/mcp/fake_upstream.mjs (plain Node.js, no packages); the test skips where no `node`
   runs. The rest of code mode is tested end to end (tests/host/mcp/tested-in.txt). */
#include <libgen.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/mcp/code_tools.h"

/* A code mode with one upstream, "fake", every tool allowed, started; NULL (the test skips)
   where node cannot run. */
static mbxH_code_mode *start_fake(void) {
  if (system("node --version >/dev/null 2>&1") != 0) return NULL;
  char here[4096], upstream[4200 + 64], msg[600];
  snprintf(here, sizeof here, "%s", __FILE__);
  snprintf(upstream, sizeof upstream, "fake=node '%s/../../mcp/fake_upstream.mjs' normal",
           dirname(here));
  const char *args[] = {upstream, "fake.*"};
  const int is_allow[] = {0, 1};
  mbxH_code_mode *cm = NULL;
  assert_int_equal(mbxH_code_configure(NULL, args, is_allow, 2, 1, &cm, msg, sizeof msg), 0);
  assert_non_null(cm);
  if (mbxH_code_start(cm, msg, sizeof msg) != 0) fail_msg("the fake upstream: %s", msg);
  return cm;
}

/* A deterministic policy (it can be snapshotted) with the upstream's tools granted. */
static mbx_policy *policy_with(mbxH_code_mode *cm) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  char msg[600];
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 10 * 1000 * 1000), MBX_OK);
  assert_int_equal(mbx_policy_set_deterministic(p, 1, &err), MBX_OK);
  assert_int_equal(mbxH_code_grant(cm, p, msg, sizeof msg), 0);
  return p;
}

/* The run's value as JSON text (malloc'd); the run must end MBX_OK. */
static char *run(mbx_sandbox *sb, const char *code) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status st = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (st != MBX_OK) {
    mbx_error run_err;
    if (res != NULL) mbx_result_error(res, &run_err);
    fail_msg("%s: %s", code, res != NULL ? run_err.message : err.message);
  }
  char *value = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return value;
}

static void a_restore_calls_no_upstream_again(void **state) {
  (void)state;
  mbxH_code_mode *cm = start_fake();
  if (cm == NULL) skip();
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  mbx_policy *p = policy_with(cm);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  /* Two calls: the upstream's pid, then its own count of calls (2). */
  char *first = run(sb, "pid = tools.fake.pid() calls = tools.fake.count() return {pid, calls}");
  assert_true(strlen(first) > 4 && strcmp(first + strlen(first) - 3, ",2]") == 0);
  void *bytes = NULL;
  size_t len = 0;
  assert_int_equal(mbx_sandbox_snapshot(sb, &bytes, &len, &err), MBX_OK);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbxH_code_free(cm); /* that upstream is gone */

  /* A new upstream process, whose count starts at 0: the restore replays the recorded replies,
     so the state holds the old pid and count, and the new upstream has had no call. */
  cm = start_fake();
  p = policy_with(cm);
  mbx_sandbox *back = mbx_sandbox_restore(rt, p, bytes, len, &err);
  if (back == NULL) fail_msg("restore: %s", err.message);
  char *kept = run(back, "return {pid, calls}");
  assert_string_equal(kept, first);
  char *fresh = run(back, "return {tools.fake.count(), tools.fake.pid() ~= pid}");
  assert_string_equal(fresh, "[1,true]");
  free(first), free(kept), free(fresh);
  mbx_free(bytes);
  mbx_sandbox_free(back);
  mbx_policy_free(p);
  mbxH_code_free(cm);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_restore_calls_no_upstream_again),
  };
  return cmocka_run_group_tests_name("host/mcp/code_tools", tests, NULL, NULL);
}
