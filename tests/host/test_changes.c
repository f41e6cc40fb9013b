/* tests/host/test_changes.c -- mbx_sandbox_changes (shared contract 1) through the public
   API: the exact JSON of every kind, contents as strings or {"$bytes"}, reset, rewind of an
   overlay through mbx_sandbox_checkpoint/rewind, and the argument checks; the same change
   set one change at a time (mbx_sandbox_changes_each) and the host originals it names
   (mbx_sandbox_change_original): what each reads, its byte cap, and who may call it. */
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

/* The edits of every_kind: a modification, a rename, a removal, a directory with a binary
   file, a memory file. */
static const char every_edit[] =
    "local f = assert(io.open('/w/a.txt', 'a')) f:write('more\\n') f:close() "
    "assert(os.rename('/w/sub/b.txt', '/w/b.txt')) "
    "assert(os.remove('/w/gone.txt')) assert(fs.mkdir('/w/d')) "
    "f = assert(io.open('/w/d/bin', 'w')) f:write('\\0\\255') f:close() "
    "f = assert(io.open('/tmp/t.txt', 'w')) f:write('caf\\u{e9}') f:close()";

/* What a callback saw, one line per change: "kind path [from] dir len contents|original". */
typedef struct seen {
  mbx_sandbox *sb;
  char text[2048];
  size_t len;
  int calls;
  int stop_after; /* stop the walk after this many calls (0: never) */
  const mbx_change *last;
} seen;

static void note(seen *w, const char *fmt, const char *a, size_t alen) {
  int n = snprintf(w->text + w->len, sizeof w->text - w->len, fmt, (int)alen, a);
  assert_true(n >= 0 && (size_t)n < sizeof w->text - w->len);
  w->len += (size_t)n;
}

/* Raw bytes (contents may hold NULs). */
static void note_bytes(seen *w, const char *p, size_t n) {
  assert_true(n < sizeof w->text - w->len);
  memcpy(w->text + w->len, p, n);
  w->len += n;
}

static int record(void *ud, const mbx_change *c) {
  seen *w = ud;
  w->calls++;
  w->last = c;
  char head[32];
  snprintf(head, sizeof head, "%d%s ", c->kind, c->is_dir ? "d" : "");
  note(w, "%.*s", head, strlen(head));
  assert_int_equal(strlen(c->path), c->path_len);
  note(w, "%.*s", c->path, c->path_len);
  if (c->from) {
    assert_int_equal(c->kind, MBX_CHANGE_RENAMED);
    assert_int_equal(strlen(c->from), c->from_len);
    note(w, " <%.*s", c->from, c->from_len);
  } else {
    assert_int_equal(c->from_len, 0);
  }
  if (c->data) {
    note(w, "%.*s", " =", 2);
    note_bytes(w, c->data, c->len);
  }
  /* The host's bytes the change replaced, where it has any. */
  char *orig = NULL;
  size_t orig_len = 7;
  mbx_error err;
  mbx_status s = mbx_sandbox_change_original(w->sb, c, 1 << 20, &orig, &orig_len, &err);
  if (s == MBX_OK) {
    note(w, "%.*s", " ~", 2);
    if (orig_len) note_bytes(w, orig, orig_len);
  } else {
    assert_int_equal(s, MBX_INVALID_ARGUMENT);
    assert_true(orig == NULL && orig_len == 0);
  }
  mbx_free(orig);
  note(w, "%.*s", "\n", 1);
  return w->stop_after && w->calls >= w->stop_after;
}

static void each_visits_what_the_json_lists(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  mbx_error err;
  seen w = {.sb = sb};
  assert_int_equal(mbx_sandbox_changes_each(sb, record, &w, &err), MBX_OK);
  assert_int_equal(w.calls, 0);
  assert_int_equal(snippet_run_in(sb, every_edit, &o), MBX_OK);
  assert_int_equal(mbx_sandbox_changes_each(sb, record, &w, &err), MBX_OK);
  assert_int_equal(w.calls, 6);
  /* The JSON's order; the original of a rename is its source's; created and memory files
     have none. */
  static const char want[] = "1 /tmp/t.txt =caf\xc3\xa9\n"
                             "2 /w/a.txt =alpha\nmore\n ~alpha\n\n"
                             "4 /w/b.txt </w/sub/b.txt =bravo\n ~bravo\n\n"
                             "1d /w/d\n"
                             "1 /w/d/bin =\0\377\n"
                             "3 /w/gone.txt ~x\n";
  assert_int_equal(w.len, sizeof want - 1);
  assert_memory_equal(w.text, want, sizeof want - 1);
  mbx_sandbox_free(sb);
}

static void each_stops_when_fn_says_so(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  mbx_error err;
  assert_int_equal(snippet_run_in(sb, every_edit, &o), MBX_OK);
  seen w = {.sb = sb, .stop_after = 2};
  assert_int_equal(mbx_sandbox_changes_each(sb, record, &w, &err), MBX_INTERRUPTED);
  assert_int_equal(err.code, MBX_INTERRUPTED);
  assert_int_equal(w.calls, 2);
  /* The claim is released: the sandbox is usable again. */
  expect_changes(sb, 0,
                 "[{\"path\":\"/tmp/t.txt\",\"kind\":\"created\",\"type\":\"file\",\"size\":5},"
                 "{\"path\":\"/w/a.txt\",\"kind\":\"modified\",\"type\":\"file\",\"size\":11},"
                 "{\"path\":\"/w/b.txt\",\"kind\":\"renamed\",\"from\":\"/w/sub/b.txt\","
                 "\"type\":\"file\",\"size\":6},"
                 "{\"path\":\"/w/d\",\"kind\":\"created\",\"type\":\"dir\",\"size\":0},"
                 "{\"path\":\"/w/d/bin\",\"kind\":\"created\",\"type\":\"file\",\"size\":2},"
                 "{\"path\":\"/w/gone.txt\",\"kind\":\"removed\",\"type\":\"file\",\"size\":0}]");
  mbx_sandbox_free(sb);
}

/* Inside the walk the sandbox is claimed: another call on it is MBX_SANDBOX_BUSY; the
   original is read only for the change being visited, within the cap. */
typedef struct inside {
  mbx_sandbox *sb;
  int calls;
} inside;

static int misuse(void *ud, const mbx_change *c) {
  inside *in = ud;
  mbx_error err;
  char *json = NULL, *orig = NULL;
  size_t len = 0;
  in->calls++;
  assert_int_equal(mbx_sandbox_changes(in->sb, 0, &json, &len, &err), MBX_SANDBOX_BUSY);
  assert_null(json);
  assert_int_equal(mbx_sandbox_changes_each(in->sb, misuse, ud, &err), MBX_SANDBOX_BUSY);
  /* A copy of the change is not the change being visited. */
  mbx_change copy = *c;
  assert_int_equal(mbx_sandbox_change_original(in->sb, &copy, 100, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "not the change being visited"));
  assert_null(orig);
  assert_int_equal(mbx_sandbox_change_original(in->sb, c, 100, NULL, &len, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_change_original(in->sb, c, 100, &orig, NULL, &err),
                   MBX_INVALID_ARGUMENT);
  assert_null(orig);
  assert_int_equal(mbx_sandbox_change_original(NULL, c, 100, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  /* The original of /w/a.txt is 6 bytes: a cap of 5 refuses it whole, 6 reads it. */
  assert_int_equal(mbx_sandbox_change_original(in->sb, c, 5, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  assert_null(orig);
  assert_int_equal(len, 0);
  assert_non_null(strstr(err.message, "the file is larger than 5 bytes"));
  assert_int_equal(mbx_sandbox_change_original(in->sb, c, 6, &orig, &len, &err), MBX_OK);
  assert_int_equal(len, 6);
  assert_memory_equal(orig, "alpha\n", 6);
  mbx_free(orig);
  return 0;
}

static void original_only_inside_the_walk(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  mbx_error err;
  assert_int_equal(snippet_run_in(sb, "io.open('/w/a.txt', 'w'):write('changed'):close()", &o),
                   MBX_OK);
  inside in = {sb, 0};
  assert_int_equal(mbx_sandbox_changes_each(sb, misuse, &in, &err), MBX_OK);
  assert_int_equal(in.calls, 1);
  /* After the walk, the change it gave is no longer readable. */
  seen w = {.sb = sb};
  assert_int_equal(mbx_sandbox_changes_each(sb, record, &w, &err), MBX_OK);
  char *orig = NULL;
  size_t len = 0;
  assert_int_equal(mbx_sandbox_change_original(sb, w.last, 100, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  assert_null(orig);
  assert_int_equal(mbx_sandbox_changes_each(NULL, record, &w, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_changes_each(sb, NULL, &w, &err), MBX_INVALID_ARGUMENT);
  mbx_change none = {0};
  assert_int_equal(mbx_sandbox_change_original(sb, &none, 100, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_change_original(sb, NULL, 100, &orig, &len, &err),
                   MBX_INVALID_ARGUMENT);
  mbx_sandbox_free(sb);
}

/* Hard links: each host file's original is read once per walk, whatever number of its links
   the guest changed (40 links of a 40 MB file cost the host 40 reads before); a small one is
   kept for its other links, a large one's other links are refused, naming the first. */
typedef struct links_walk {
  mbx_sandbox *sb;
  char got[8][320];
  size_t count;
} links_walk;

static int read_links(void *ud, const mbx_change *c) {
  links_walk *w = ud;
  char *orig = NULL;
  size_t len = 0;
  mbx_error err;
  memset(&err, 0, sizeof err);
  mbx_status s = mbx_sandbox_change_original(w->sb, c, 16 << 20, &orig, &len, &err);
  if (s == MBX_OK)
    snprintf(w->got[w->count++], sizeof w->got[0], "%s: %zu bytes, starts %.3s", c->path, len,
             len ? orig : "");
  else
    snprintf(w->got[w->count++], sizeof w->got[0], "%s: %s", c->path, err.message);
  mbx_free(orig);
  return 0;
}

static void hard_links_read_once(void **state) {
  (void)state;
  char dir[64], p[128], q[128];
  snprintf(dir, sizeof dir, "/tmp/mbx_test_links_XXXXXX");
  assert_non_null(mkdtemp(dir));
  snprintf(p, sizeof p, "%s/big1", dir);
  FILE *f = fopen(p, "w");
  assert_non_null(f);
  for (int i = 0; i < (5 << 20) / 8; i++)
    fputs("big....\n", f);
  fclose(f);
  snprintf(q, sizeof q, "%s/big2", dir);
  assert_int_equal(link(p, q), 0);
  snprintf(q, sizeof q, "%s/big3", dir);
  assert_int_equal(link(p, q), 0);
  snprintf(p, sizeof p, "%s/small1", dir);
  f = fopen(p, "w");
  assert_non_null(f);
  fputs("small\n", f);
  fclose(f);
  snprintf(q, sizeof q, "%s/small2", dir);
  assert_int_equal(link(p, q), 0);
  mbx_policy *pol = mbx_policy_new();
  mbx_error err;
  assert_int_equal(mbx_policy_mount(pol, "/w", dir, MBX_MOUNT_OVERLAY, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(pol, MBX_LIMIT_FS_BYTES, 64 << 20), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, pol, &err);
  assert_non_null(sb);
  mbx_policy_free(pol);
  snippet_outcome o;
  assert_int_equal(snippet_run_in(sb,
                                  "for _, n in ipairs{'big1', 'big2', 'big3', 'small1', "
                                  "'small2'} do local f = assert(io.open('/w/' .. n, 'a')) "
                                  "f:write('+') f:close() end",
                                  &o),
                   MBX_OK);
  for (int round = 0; round < 2; round++) { /* a new walk reads again */
    links_walk w = {.sb = sb};
    assert_int_equal(mbx_sandbox_changes_each(sb, read_links, &w, &err), MBX_OK);
    assert_int_equal(w.count, 5);
    assert_string_equal(w.got[0], "/w/big1: 5242880 bytes, starts big");
    assert_string_equal(w.got[1],
                        "/w/big2: a hard link of /w/big1, whose original this walk has read "
                        "already");
    assert_string_equal(w.got[2],
                        "/w/big3: a hard link of /w/big1, whose original this walk has read "
                        "already");
    assert_string_equal(w.got[3], "/w/small1: 6 bytes, starts sma");
    assert_string_equal(w.got[4], "/w/small2: 6 bytes, starts sma");
  }
  mbx_sandbox_free(sb);
  snprintf(p, sizeof p, "rm -rf '%s'", dir);
  assert_int_equal(system(p), 0);
}

/* mbx_sandbox_reset_keep_files: the guest's state is pristine (its globals and heap gone),
   the change set is as the run left it; mbx_sandbox_reset, by contrast, drops both. */
static void reset_keep_files_keeps_the_change_set(void **state) {
  (void)state;
  mbx_sandbox *sb = overlay_sandbox();
  snippet_outcome o;
  mbx_error err;
  assert_int_equal(snippet_run_in(sb,
                                  "big = string.rep('x', 8 << 20) "
                                  "io.open('/w/a.txt', 'w'):write('changed'):close() "
                                  "assert(os.remove('/w/gone.txt')) "
                                  "io.open('/tmp/t', 'w'):write('tmp'):close()",
                                  &o),
                   MBX_OK);
  char *before = NULL, *after = NULL;
  assert_int_equal(mbx_sandbox_changes(sb, MBX_CHANGES_CONTENT, &before, NULL, &err), MBX_OK);
  assert_non_null(strstr(before, "\"changed\""));
  assert_int_equal(mbx_sandbox_reset_keep_files(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_changes(sb, MBX_CHANGES_CONTENT, &after, NULL, &err), MBX_OK);
  assert_string_equal(before, after);
  mbx_free(after);
  assert_int_equal(snippet_run_in(sb, "return big == nil and collectgarbage('count') < 1024", &o),
                   MBX_OK);
  assert_string_equal(o.value, "true");
  /* The files are the guest's to use again, and still count in its quota. */
  assert_int_equal(snippet_run_in(sb, "return io.open('/tmp/t'):read('a')", &o), MBX_OK);
  assert_string_equal(o.value, "\"tmp\"");
  assert_int_equal(mbx_sandbox_reset_keep_files(NULL, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_changes(sb, 0, &after, NULL, &err), MBX_OK);
  assert_string_equal(after, "[]");
  mbx_free(after);
  mbx_free(before);
  mbx_sandbox_free(sb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_kind),
      cmocka_unit_test(rewind_restores_the_overlay),
      cmocka_unit_test(each_visits_what_the_json_lists),
      cmocka_unit_test(each_stops_when_fn_says_so),
      cmocka_unit_test(original_only_inside_the_walk),
      cmocka_unit_test(hard_links_read_once),
      cmocka_unit_test(reset_keep_files_keeps_the_change_set),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
