/* tests/host/cli/test_changes_view.c -- host/cli/changes_view.c over a real overlay: the
   summary's lines (guest paths escaped), the diff against the host originals (an unreadable
   original named, not diffed), the export and its refusal of a second one, and a walk on a
   busy sandbox told with the option's name. The CLI's end-to-end test
   (tests/cli/test_cli_fs_changes.sh) checks the same output through `moonbox run`. */
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

#include "host/cli/changes_view.h"
#include "moonbox.h"
#include "tests/support/snippet.h"

static char host[64], out_dir[64];

static void put(const char *rel, const char *text) {
  char p[160];
  snprintf(p, sizeof p, "%s/%s", host, rel);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static int setup(void **state) {
  snprintf(host, sizeof host, "/tmp/mbx_test_view_XXXXXX");
  snprintf(out_dir, sizeof out_dir, "/tmp/mbx_test_view_out_XXXXXX");
  if (mkdtemp(host) == NULL || mkdtemp(out_dir) == NULL) return -1;
  put("a.txt", "one\ntwo\nthree\n");
  put("gone.txt", "bye\n");
  return snippet_setup(state);
}

static int teardown(void **state) {
  char cmd[192];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", host, out_dir);
  if (system(cmd) != 0) return -1;
  return snippet_teardown(state);
}

/* A sandbox over host at /w (overlay) after the edits: a.txt modified, gone.txt removed, a
   created file whose name holds a newline. */
static mbx_sandbox *edited(void) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_mount(p, "/w", host, MBX_MOUNT_OVERLAY, &err), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  assert_non_null(sb);
  mbx_policy_free(p);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb,
                                  "io.open('/w/a.txt', 'w'):write('one\\nTWO\\nthree\\n'):close() "
                                  "assert(os.remove('/w/gone.txt')) "
                                  "io.open('/w/n\\nl', 'w'):write('x\\n'):close()",
                                  &o),
                   MBX_OK);
  return sb;
}

/* The bounds of a diff no test here reaches. */
static const mbxH_cli_diff_limits roomy = {
    .max_out = 1 << 20, .max_original = 1 << 20, .max_read = 4 << 20, .max_memory = 1 << 20};
static mbxH_cli_diff_report last_report;

static mbx_status diff_roomy(mbx_sandbox *sb, FILE *f, mbx_error *err) {
  return mbxH_cli_changes_diff(sb, f, &roomy, &last_report, err);
}

static mbx_status summary_plain(mbx_sandbox *sb, FILE *f, mbx_error *err) {
  return mbxH_cli_changes_summary(sb, f, 0, err);
}

static mbx_status summary_framed(mbx_sandbox *sb, FILE *f, mbx_error *err) {
  return mbxH_cli_changes_summary(sb, f, 1, err);
}

/* What a view printed, as a string (malloc'd). */
typedef mbx_status (*printer)(mbx_sandbox *, FILE *, mbx_error *);
static char *printed(printer view, mbx_sandbox *sb, mbx_status want) {
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  assert_non_null(f);
  mbx_error err;
  assert_int_equal(view(sb, f, &err), want);
  fclose(f);
  return text;
}

static void summary_lines(void **state) {
  (void)state;
  mbx_sandbox *sb = edited();
  char *text = printed(summary_plain, sb, MBX_OK);
  assert_string_equal(text, "moonbox: modified /w/a.txt (14 bytes)\n"
                            "moonbox: removed  /w/gone.txt\n"
                            "moonbox: created  /w/n\\x0al (2 bytes)\n");
  free(text);
  /* Framed: first a line with a nonce no two calls share (the script could not know it). */
  char *one = printed(summary_framed, sb, MBX_OK), *two = printed(summary_framed, sb, MBX_OK);
  const char *head = "moonbox: ---- changes ";
  assert_memory_equal(one, head, strlen(head));
  assert_memory_equal(one + strlen(head) + 16, " (the script's output ends above", 32);
  assert_memory_not_equal(one + strlen(head), two + strlen(head), 16);
  assert_string_equal(strchr(one, '\n') + 1, "moonbox: modified /w/a.txt (14 bytes)\n"
                                             "moonbox: removed  /w/gone.txt\n"
                                             "moonbox: created  /w/n\\x0al (2 bytes)\n");
  free(one);
  free(two);
  mbx_sandbox_free(sb);
}

static void diff_against_the_originals(void **state) {
  (void)state;
  mbx_sandbox *sb = edited();
  char *text = printed(diff_roomy, sb, MBX_OK);
  assert_string_equal(text, "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n"
                            " three\n"
                            "--- /w/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"
                            "--- /dev/null\n+++ /w/n\\x0al\n@@ -0,0 +1 @@\n+x\n");
  free(text);
  /* An original replaced on the host by a link out of the mount: named, never followed. */
  char p[160];
  snprintf(p, sizeof p, "%s/a.txt", host);
  assert_int_equal(unlink(p), 0);
  assert_int_equal(symlink("/etc/passwd", p), 0);
  text = printed(diff_roomy, sb, MBX_OK);
  assert_non_null(
      strstr(text, "Files /w/a.txt and /w/a.txt differ (the original cannot be read: "));
  assert_null(strstr(text, "root"));
  free(text);
  assert_int_equal(unlink(p), 0);
  put("a.txt", "one\ntwo\nthree\n");
  mbx_sandbox_free(sb);
}

/* Each bound of the diff names the file instead of showing it, says which bound, and is
   counted in the report; a diff is never cut in the middle. */
static void diff_bounds(void **state) {
  (void)state;
  char big[400];
  memset(big, 'x', sizeof big - 2);
  big[sizeof big - 2] = '\n';
  big[sizeof big - 1] = '\0';
  put("big.txt", big);
  mbx_sandbox *sb = edited();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb, "assert(os.remove('/w/big.txt'))", &o), MBX_OK);
  char *text;
  mbx_error err;
  size_t len;
  FILE *f;
  /* The output cap: a.txt's diff fits, big.txt's does not (and its original is not even
     read: a removal's diff holds all of it), so it is named; gone.txt's would fit neither
     as a diff nor named, and nor would the last: counted, not named. */
  const char *a_diff = "--- /w/a.txt\n+++ /w/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n";
  const char *big_named = "Files /w/big.txt and /dev/null differ (not shown: its diff is longer "
                          "than what is left of --diff-limit)\n";
  mbxH_cli_diff_limits lim = roomy;
  lim.max_out = strlen(a_diff) + strlen(big_named) + 20;
  f = open_memstream(&text, &len);
  assert_int_equal(mbxH_cli_changes_diff(sb, f, &lim, &last_report, &err), MBX_OK);
  fclose(f);
  assert_int_equal(strncmp(text, a_diff, strlen(a_diff)), 0);
  assert_string_equal(text + strlen(a_diff), big_named);
  assert_int_equal(last_report.printed, len);
  /* a.txt and gone.txt (4 bytes: its diff might have fit); never big.txt's 399 */
  assert_int_equal(last_report.read, 14 + 4);
  assert_int_equal(last_report.not_shown, 3);
  assert_int_equal(last_report.not_named, 2);
  free(text);
  /* One original's size cap, before a byte is read. */
  lim = roomy;
  lim.max_original = 13;
  f = open_memstream(&text, &len);
  assert_int_equal(mbxH_cli_changes_diff(sb, f, &lim, &last_report, &err), MBX_OK);
  fclose(f);
  assert_non_null(strstr(text, "Files /w/a.txt and /w/a.txt differ (not shown: its size is past"));
  assert_non_null(strstr(text, "--- /w/gone.txt\n")); /* 4 bytes: under the cap */
  assert_int_equal(last_report.read, 4); /* gone.txt; big.txt's 400 bytes are past it */
  free(text);
  /* The deadline: past it nothing more is read or compared. */
  lim = roomy;
  lim.deadline_ns = 1;
  f = open_memstream(&text, &len);
  assert_int_equal(mbxH_cli_changes_diff(sb, f, &lim, &last_report, &err), MBX_OK);
  fclose(f);
  assert_int_equal(last_report.read, 0);
  assert_int_equal(last_report.timed_out, 4);
  assert_non_null(strstr(text, "Files /w/gone.txt and /dev/null differ (not compared: --diff ran "
                               "out of time (--timeout))\n"));
  free(text);
  mbx_sandbox_free(sb);
  char p[160];
  snprintf(p, sizeof p, "%s/big.txt", host);
  assert_int_equal(unlink(p), 0);
}

static void export_once(void **state) {
  (void)state;
  mbx_sandbox *sb = edited();
  char dir[128], p[192];
  snprintf(dir, sizeof dir, "%s/export", out_dir);
  mbx_error err;
  assert_int_equal(mbxH_cli_changes_export(sb, dir, &err), MBX_OK);
  snprintf(p, sizeof p, "%s/w/a.txt", dir);
  FILE *f = fopen(p, "r");
  assert_non_null(f);
  char buf[64] = "";
  assert_int_equal(fread(buf, 1, sizeof buf - 1, f), 14);
  fclose(f);
  assert_string_equal(buf, "one\nTWO\nthree\n");
  struct stat st;
  snprintf(p, sizeof p, "%s/w/gone.txt", dir);
  assert_int_not_equal(stat(p, &st), 0); /* a removal is in the manifest only */
  snprintf(p, sizeof p, "%s/.moonbox-changes.json", dir);
  assert_int_equal(stat(p, &st), 0);
  assert_int_equal(mbxH_cli_changes_export(sb, dir, &err), MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "already holds an export"));
  mbx_sandbox_free(sb);
}

/* A view run on a sandbox that is busy (here: from inside another walk of it) names the
   option, as every message of the CLI does. */
static int summary_inside(void *ud, const mbx_change *c) {
  (void)c;
  mbx_error *err = ud;
  FILE *devnull = fopen("/dev/null", "w");
  assert_int_equal(mbxH_cli_changes_summary(NULL, devnull, 0, err), MBX_INVALID_ARGUMENT);
  fclose(devnull);
  return 1;
}

static int diff_inside(void *ud, const mbx_change *c) {
  (void)c;
  void **args = ud;
  FILE *devnull = fopen("/dev/null", "w");
  mbxH_cli_diff_report rep;
  assert_int_equal(mbxH_cli_changes_diff(args[0], devnull, &roomy, &rep, args[1]),
                   MBX_SANDBOX_BUSY);
  fclose(devnull);
  return 1;
}

static void busy_is_told_with_the_option(void **state) {
  (void)state;
  mbx_sandbox *sb = edited();
  mbx_error inner, err;
  void *args[2] = {sb, &inner};
  assert_int_equal(mbx_sandbox_changes_each(sb, diff_inside, args, &err), MBX_INTERRUPTED);
  assert_string_equal(inner.message, "--diff: the sandbox is running on another thread");
  assert_int_equal(mbx_sandbox_changes_each(sb, summary_inside, &inner, &err), MBX_INTERRUPTED);
  assert_non_null(strstr(inner.message, "--changes: "));
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(summary_lines),
      cmocka_unit_test(diff_against_the_originals),
      cmocka_unit_test(diff_bounds),
      cmocka_unit_test(export_once),
      cmocka_unit_test(busy_is_told_with_the_option),
  };
  return cmocka_run_group_tests_name("host/cli/changes_view", tests, setup, teardown);
}
