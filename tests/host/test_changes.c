/* tests/host/test_changes.c -- mbx_sandbox_changes (shared contract 1) through the public
   API: the exact JSON of every kind, contents as strings or {"$bytes"}, reset, rewind of an
   overlay through mbx_sandbox_checkpoint/rewind, and the argument checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

static char host[64];

static void put(const char *rel, const char *text) {
  char p[128];
  snprintf(p, sizeof p, "%s/%s", host, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **state) {
  snprintf(host, sizeof host, "/tmp/mbx_test_changes_XXXXXX");
  if (mkdtemp(host) == NULL) return -1;
  char p[128];
  snprintf(p, sizeof p, "%s/sub", host);
  mkdir(p, 0755);
  put("a.txt", "alpha\n");
  put("sub/b.txt", "bravo\n");
  put("gone.txt", "x");
  return snippet_setup(state);
}

static int teardown(void **state) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", host);
  if (system(cmd) != 0) return -1;
  return snippet_teardown(state);
}

static mbx_sandbox *overlay_sandbox(void) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_mount(p, "/w", host, MBX_MOUNT_OVERLAY, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  mbx_policy_free(p);
  return sb;
}

static void expect_changes(mbx_sandbox *sb, unsigned flags, const char *want) {
  char *json = NULL;
  size_t len = 0;
  mbx_error err;
  assert_int_equal(mbx_sandbox_changes(sb, flags, &json, &len, &err), MBX_OK);
  assert_non_null(json);
  assert_int_equal(len, strlen(json));
  assert_string_equal(json, want);
  mbx_free(json);
}

static void every_kind(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  expect_changes(sb, 0, "[]");
  assert_int_equal(
      snippet_run_in(sb,
                     "local f = assert(io.open('/w/a.txt', 'a')) f:write('more\\n') f:close() "
                     "assert(os.rename('/w/sub/b.txt', '/w/b.txt')) "
                     "assert(os.remove('/w/gone.txt')) assert(fs.mkdir('/w/d')) "
                     "f = assert(io.open('/w/d/bin', 'w')) f:write('\\0\\255') f:close() "
                     "f = assert(io.open('/tmp/t.txt', 'w')) f:write('caf\\u{e9}') f:close()",
                     &o),
      MBX_OK);
  expect_changes(sb, 0,
                 "[{\"path\":\"/tmp/t.txt\",\"kind\":\"created\",\"type\":\"file\",\"size\":5},"
                 "{\"path\":\"/w/a.txt\",\"kind\":\"modified\",\"type\":\"file\",\"size\":11},"
                 "{\"path\":\"/w/b.txt\",\"kind\":\"renamed\",\"from\":\"/w/sub/b.txt\","
                 "\"type\":\"file\",\"size\":6},"
                 "{\"path\":\"/w/d\",\"kind\":\"created\",\"type\":\"dir\",\"size\":0},"
                 "{\"path\":\"/w/d/bin\",\"kind\":\"created\",\"type\":\"file\",\"size\":2},"
                 "{\"path\":\"/w/gone.txt\",\"kind\":\"removed\",\"type\":\"file\",\"size\":0}]");
  expect_changes(sb, MBX_CHANGES_CONTENT,
                 "[{\"path\":\"/tmp/t.txt\",\"kind\":\"created\",\"type\":\"file\",\"size\":5,"
                 "\"content\":\"caf\xc3\xa9\"},"
                 "{\"path\":\"/w/a.txt\",\"kind\":\"modified\",\"type\":\"file\",\"size\":11,"
                 "\"content\":\"alpha\\nmore\\n\"},"
                 "{\"path\":\"/w/b.txt\",\"kind\":\"renamed\",\"from\":\"/w/sub/b.txt\","
                 "\"type\":\"file\",\"size\":6,\"content\":\"bravo\\n\"},"
                 "{\"path\":\"/w/d\",\"kind\":\"created\",\"type\":\"dir\",\"size\":0},"
                 "{\"path\":\"/w/d/bin\",\"kind\":\"created\",\"type\":\"file\",\"size\":2,"
                 "\"content\":{\"$bytes\":\"AP8=\"}},"
                 "{\"path\":\"/w/gone.txt\",\"kind\":\"removed\",\"type\":\"file\",\"size\":0}]");
  /* A reset drops every change; the host was never touched. */
  mbx_error err;
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  expect_changes(sb, 0, "[]");
  assert_int_equal(snippet_run_in(sb, "return io.open('/w/gone.txt'):read('a')", &o), MBX_OK);
  assert_string_equal(o.value, "\"x\"");
  char *json;
  size_t len;
  assert_int_equal(mbx_sandbox_changes(sb, 2, &json, &len, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "unknown flags"));
  assert_int_equal(mbx_sandbox_changes(NULL, 0, &json, &len, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_changes(sb, 0, NULL, &len, &err), MBX_INVALID_ARGUMENT);
  mbx_sandbox_free(sb);
  /* A sandbox that never touched a file: an empty list. */
  sb = snippet_sandbox();
  expect_changes(sb, 0, "[]");
  mbx_sandbox_free(sb);
}

/* Checkpoint, edit the overlay, rewind: the overlay is as it was, every round. */
static void rewind_restores_the_overlay(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  mbx_error err;
  assert_int_equal(
      snippet_run_in(sb, "io.open('/w/a.txt', 'w'):write('at checkpoint'):close()", &o), MBX_OK);
  mbx_status s = mbx_sandbox_checkpoint(sb, &err);
  if (s == MBX_UNSUPPORTED) { /* MBX_ARENA_MALLOC builds have no checkpoints */
    mbx_sandbox_free(sb);
    return;
  }
  assert_int_equal(s, MBX_OK);
  for (int round = 0; round < 3; round++) {
    assert_int_equal(snippet_run_in(sb,
                                    "io.open('/w/a.txt', 'w'):write('later'):close() "
                                    "assert(os.remove('/w/sub/b.txt')) "
                                    "io.open('/w/new', 'w'):close()",
                                    &o),
                     MBX_OK);
    assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
    expect_changes(sb, MBX_CHANGES_CONTENT,
                   "[{\"path\":\"/w/a.txt\",\"kind\":\"modified\",\"type\":\"file\",\"size\":13,"
                   "\"content\":\"at checkpoint\"}]");
    assert_int_equal(snippet_run_in(sb, "return io.open('/w/sub/b.txt'):read('a')", &o), MBX_OK);
    assert_string_equal(o.value, "\"bravo\\n\"");
  }
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_kind),
      cmocka_unit_test(rewind_restores_the_overlay),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
