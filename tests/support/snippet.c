/* tests/support/snippet.c -- running Lua snippets through the public API in unit tests. */
#include "tests/support/snippet.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

mbx_runtime *snippet_runtime;
const snippet_limits snippet_defaults = {SNIPPET_KEEP, SNIPPET_KEEP, SNIPPET_KEEP};

int snippet_setup(void **state) {
  (void)state;
  mbx_error err;
  snippet_runtime = mbx_runtime_new(&err);
  return snippet_runtime == NULL ? -1 : 0;
}

int snippet_teardown(void **state) {
  (void)state;
  mbx_runtime_free(snippet_runtime);
  snippet_runtime = NULL;
  return 0;
}

static void copy_bytes(char *dst, size_t size, const char *src, size_t len) {
  if (len >= size) len = size - 1;
  memcpy(dst, src, len);
  dst[len] = '\0';
}

mbx_status snippet_run_in(mbx_sandbox *sb, const char *code, snippet_outcome *o) {
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
  assert_int_equal(mbx_result_usage(res, &o->usage), MBX_OK);
  mbx_result_free(res);
  return o->status;
}

mbx_sandbox *snippet_sandbox_with(mbx_limit which, uint64_t value) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (which != 0) assert_int_equal(mbx_policy_set_limit(p, which, value), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

mbx_sandbox *snippet_sandbox_limits(snippet_limits lim) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  if (lim.memory != SNIPPET_KEEP)
    assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, lim.memory), MBX_OK);
  if (lim.instructions != SNIPPET_KEEP)
    assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, lim.instructions), MBX_OK);
  if (lim.time_ms != SNIPPET_KEEP)
    assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, lim.time_ms), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

mbx_status snippet_run_with(snippet_limits lim, const char *code, snippet_outcome *o) {
  mbx_sandbox *sb = snippet_sandbox_limits(lim);
  mbx_status s = snippet_run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

const snippet_outcome *snippet_check_ends(snippet_limits lim, const char *code, mbx_status status,
                                          const char *fragment) {
  static snippet_outcome o;
  snippet_run_with(lim, code, &o);
  if (o.status != status)
    fail_msg("%s\n  ended with %s (%s), expected %s", code, mbx_status_name(o.status), o.value,
             mbx_status_name(status));
  if (fragment && strstr(o.value, fragment) == NULL)
    fail_msg("%s\n  error %s\n  does not contain %s", code, o.value, fragment);
  return &o;
}

mbx_sandbox *snippet_sandbox(void) {
  return snippet_sandbox_with(0, 0);
}

mbx_status snippet_run(const char *code, snippet_outcome *o) {
  mbx_sandbox *sb = snippet_sandbox();
  mbx_status s = snippet_run_in(sb, code, o);
  mbx_sandbox_free(sb);
  return s;
}

void snippet_check_value(const char *code, const char *json) {
  static snippet_outcome o;
  if (snippet_run(code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
}

void snippet_check_error(const char *code, mbx_status status, const char *fragment) {
  static snippet_outcome o;
  snippet_run(code, &o);
  if (o.status != status)
    fail_msg("%s\n  ended with %s (%s), expected %s", code, mbx_status_name(o.status), o.value,
             mbx_status_name(status));
  if (strstr(o.value, fragment) == NULL)
    fail_msg("%s\n  error %s\n  does not contain %s", code, o.value, fragment);
}
