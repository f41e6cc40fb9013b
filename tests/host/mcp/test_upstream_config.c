/* tests/host/mcp/test_upstream_config.c -- what the operator writes about upstream MCP servers
   (host/mcp/upstream_config.c): --upstream's words split without a shell, --allow-tool, the
   policy file's "upstreams" with its units and its refusals, and an allow-list that is empty
   unless written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/mcp/upstream.h"

/* --upstream value is refused with a message containing why, and the list is unchanged. */
static void assert_flag_refused(const char *value, const char *why, mbxH_upstream_config *list,
                                size_t *count) {
  char msg[512] = "";
  size_t before = *count;
  if (mbxH_upstream_config_flag(value, list, count, msg, sizeof msg) == 0)
    fail_msg("--upstream %s was accepted", value);
  if (strstr(msg, why) == NULL) fail_msg("%s: '%s' lacks '%s'", value, msg, why);
  assert_int_equal(*count, before);
}

static void free_all(mbxH_upstream_config *list, size_t count) {
  for (size_t i = 0; i < count; i++)
    mbxH_upstream_config_free(&list[i]);
}

static void flags_split_like_a_shell_without_one(void **state) {
  (void)state;
  mbxH_upstream_config list[MBXH_UPSTREAM_MAX];
  size_t count = 0;
  char msg[256] = "";
  assert_int_equal(mbxH_upstream_config_flag("mem=npx -y 'a b' \"c \\\"d\\\" $HOME\" e\\ f *", list,
                                             &count, msg, sizeof msg),
                   0);
  assert_int_equal(count, 1);
  assert_string_equal(list[0].name, "mem");
  const char *want[] = {"npx", "-y", "a b", "c \"d\" $HOME", "e f", "*", NULL};
  for (size_t i = 0; want[i]; i++)
    assert_string_equal(list[0].argv[i], want[i]);
  assert_null(list[0].argv[6]);
  /* nothing is allowed until it is written */
  assert_int_equal(mbxH_upstream_allows(&list[0], "read_graph"), 0);
  assert_int_equal(mbxH_upstream_allow_flag("mem.read_graph", list, count, msg, sizeof msg), 0);
  assert_int_equal(mbxH_upstream_allows(&list[0], "read_graph"), 1);
  assert_int_equal(mbxH_upstream_allows(&list[0], "delete_entities"), 0);
  assert_int_equal(mbxH_upstream_allow_flag("mem.*", list, count, msg, sizeof msg), 0);
  assert_int_equal(mbxH_upstream_allows(&list[0], "delete_entities"), 1);
  assert_int_equal(list[0].timeout_ms, MBXH_UPSTREAM_TIMEOUT_MS);
  assert_int_equal(list[0].max_result, MBXH_UPSTREAM_MAX_RESULT);

  static const struct {
    const char *value, *why;
  } bad[] = {
      {"npx server", "expected NAME=COMMAND"},
      {"1mem=npx", "must be a Lua identifier"},
      {"end=npx", "must be a Lua identifier"},
      {"a-b=npx", "must be a Lua identifier"},
      {"mem=npx", "given twice"},
      {"other=", "no command"},
      {"other='unclosed", "is not closed"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
    assert_flag_refused(bad[i].value, bad[i].why, list, &count);
  assert_int_equal(count, 1); /* a refused one leaves nothing behind */
  assert_int_equal(mbxH_upstream_allow_flag("nope.x", list, count, msg, sizeof msg), -1);
  assert_non_null(strstr(msg, "no upstream of that name"));
  assert_int_equal(mbxH_upstream_allow_flag("mem", list, count, msg, sizeof msg), -1);
  free_all(list, count);
}

static void the_policy_files_upstreams(void **state) {
  (void)state;
  mbxH_upstream_config list[MBXH_UPSTREAM_MAX];
  size_t count = 0;
  char msg[256] = "";
  json_t *doc = json_loads(
      "{\"mem\":{\"command\":\"node\",\"args\":[\"server.js\",\"--x\"],\"env\":{\"MEMORY_FILE_"
      "PATH\":\"/tmp/m.json\"},\"cwd\":\"srv\",\"tools\":[\"read_graph\"],\"timeout\":\"2s\","
      "\"max_result\":\"64k\"},\"ev\":{\"command\":\"/usr/bin/ev\"}}",
      0, NULL);
  assert_int_equal(mbxH_upstream_config_json(doc, "/etc/moonbox", list, &count, msg, sizeof msg),
                   0);
  json_decref(doc);
  assert_int_equal(count, 2);
  assert_string_equal(list[0].argv[0], "node");
  assert_string_equal(list[0].argv[2], "--x");
  assert_string_equal(list[0].env[0], "MEMORY_FILE_PATH=/tmp/m.json");
  assert_string_equal(list[0].cwd, "/etc/moonbox/srv");
  assert_int_equal(list[0].timeout_ms, 2000);
  assert_int_equal(list[0].max_result, 65536);
  assert_int_equal(mbxH_upstream_allows(&list[0], "read_graph"), 1);
  assert_int_equal(mbxH_upstream_allows(&list[1], "anything"), 0); /* no tools: none allowed */
  free_all(list, count);

  static const struct {
    const char *json, *why;
  } bad[] = {
      {"[]", "upstreams: expected an object"},
      {"{\"m\":{}}", "upstreams.m.command: expected the program"},
      {"{\"m\":{\"command\":\"x\",\"shell\":true}}", "upstreams.m.shell: unknown key"},
      {"{\"m\":{\"command\":\"x\",\"args\":\"a b\"}}", "upstreams.m.args: expected an array"},
      {"{\"m\":{\"command\":\"x\",\"timeout\":\"5\"}}", "upstreams.m.timeout"},
      {"{\"m\":{\"command\":\"x\",\"max_result\":\"1G\"}}", "upstreams.m.max_result: between"},
      {"{\"m\":{\"command\":\"x\",\"env\":{\"A=B\":\"c\"}}}", "upstreams.m.env"},
      {"{\"m\":{\"command\":\"x\",\"tools\":[1]}}", "upstreams.m.tools[0]"},
      {"{\"my-server\":{\"command\":\"x\"}}", "must be a Lua identifier"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    count = 0;
    msg[0] = '\0';
    doc = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
    assert_non_null(doc);
    if (mbxH_upstream_config_json(doc, NULL, list, &count, msg, sizeof msg) == 0)
      fail_msg("%s was accepted", bad[i].json);
    if (strstr(msg, bad[i].why) == NULL)
      fail_msg("%s: '%s' lacks '%s'", bad[i].json, msg, bad[i].why);
    assert_int_equal(count, 0);
    json_decref(doc);
  }
}

/* A URL upstream: from the flag or the file, with headers; command and url exclusive; plain
   http to loopback only; a header value never quoted back (it may be a token). */
static void url_upstreams(void **state) {
  (void)state;
  mbxH_upstream_config list[MBXH_UPSTREAM_MAX];
  size_t count = 0;
  char msg[300] = "";
  assert_int_equal(
      mbxH_upstream_config_flag("web=https://mcp.example.com/mcp", list, &count, msg, sizeof msg),
      0);
  assert_string_equal(list[0].url, "https://mcp.example.com/mcp");
  assert_null(list[0].argv);
  assert_int_equal(
      mbxH_upstream_config_flag("loc= http://127.0.0.1:3001/mcp", list, &count, msg, sizeof msg),
      0);
  assert_string_equal(list[1].url, "http://127.0.0.1:3001/mcp");
  static const struct {
    const char *value, *why;
  } bad_flags[] = {
      {"far=http://mcp.example.com/mcp", "loopback only"},
      {"more=https://mcp.example.com/mcp --token x", "takes nothing after its URL"},
      {"pw=https://me:secret@mcp.example.com/mcp", "give credentials in the policy file's headers"},
  };
  for (size_t i = 0; i < sizeof bad_flags / sizeof *bad_flags; i++)
    assert_flag_refused(bad_flags[i].value, bad_flags[i].why, list, &count);
  assert_int_equal(count, 2);
  free_all(list, count);

  count = 0;
  json_t *doc = json_loads("{\"gh\": {\"url\": \"https://api.example.com/mcp\", \"headers\": "
                           "{\"Authorization\": \"Bearer s3cret\", \"X-Team\": \"a\"}, "
                           "\"tools\": [\"*\"], \"timeout\": \"5s\", \"max_result\": \"2M\"}}",
                           0, NULL);
  assert_non_null(doc);
  assert_int_equal(mbxH_upstream_config_json(doc, NULL, list, &count, msg, sizeof msg), 0);
  json_decref(doc);
  assert_string_equal(list[0].url, "https://api.example.com/mcp");
  assert_string_equal(list[0].headers[0], "Authorization: Bearer s3cret");
  assert_string_equal(list[0].headers[1], "X-Team: a");
  assert_null(list[0].headers[2]);
  assert_int_equal(list[0].timeout_ms, 5000);
  assert_int_equal(list[0].max_result, 2 << 20);
  assert_int_equal(mbxH_upstream_allows(&list[0], "anything"), 1);
  free_all(list, count);

  static const struct {
    const char *json, *why;
  } bad[] = {
      {"{\"m\":{\"command\":\"x\",\"url\":\"https://a.example/mcp\"}}",
       "upstreams.m.command: give either command"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"args\":[]}}",
       "upstreams.m.args: only for a command upstream"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"cwd\":\"/\"}}",
       "upstreams.m.cwd: only for a command upstream"},
      {"{\"m\":{\"command\":\"x\",\"headers\":{}}}", "upstreams.m.headers: only for a url"},
      {"{\"m\":{\"url\":\"http://10.0.0.1/mcp\"}}",
       "upstreams.m.url: plain http:// is allowed to loopback only"},
      {"{\"m\":{\"url\":\"http://127.0.0.1.example.com/mcp\"}}", "loopback only"},
      {"{\"m\":{\"url\":\"ftp://a.example/mcp\"}}", "upstreams.m.url: a URL of http or https"},
      {"{\"m\":{\"url\":\"no url\"}}", "upstreams.m.url: not a URL"},
      {"{\"m\":{\"url\":7}}", "upstreams.m.url: expected"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"headers\":[]}}",
       "upstreams.m.headers: expected an object"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"headers\":{\"Mcp-Session-Id\":\"x\"}}}",
       "upstreams.m.headers.Mcp-Session-Id: Mcp-Session-Id is set by the transport"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"headers\":{\"Bad Name\":\"x\"}}}",
       "a header name is a token"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"headers\":{\"Authorization\":\"Bearer "
       "s3cret\\r\\nX-Evil: 1\"}}}",
       "upstreams.m.headers.Authorization: the value of Authorization must be one line"},
      {"{\"m\":{\"url\":\"https://a.example/mcp\",\"headers\":{\"A\":1}}}",
       "upstreams.m.headers.A: expected a string"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    count = 0;
    msg[0] = '\0';
    doc = json_loads(bad[i].json, JSON_DECODE_ANY, NULL);
    assert_non_null(doc);
    if (mbxH_upstream_config_json(doc, NULL, list, &count, msg, sizeof msg) == 0)
      fail_msg("%s was accepted", bad[i].json);
    if (strstr(msg, bad[i].why) == NULL)
      fail_msg("%s: '%s' lacks '%s'", bad[i].json, msg, bad[i].why);
    if (strstr(msg, "s3cret") != NULL) fail_msg("'%s' shows a header's value", msg);
    assert_int_equal(count, 0);
    json_decref(doc);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(flags_split_like_a_shell_without_one),
      cmocka_unit_test(the_policy_files_upstreams),
      cmocka_unit_test(url_upstreams),
  };
  return cmocka_run_group_tests_name("host/mcp/upstream_config", tests, NULL, NULL);
}
