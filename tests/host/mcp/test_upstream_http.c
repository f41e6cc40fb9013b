/* tests/host/mcp/test_upstream_http.c -- the pieces of the Streamable HTTP upstream transport
   that need no server (host/mcp/upstream_http.c): the SSE parser, fed whole and byte by byte,
   with its bounds and the id and retry: a resume uses; the URL check (plain http to loopback only, no credentials in it); the
   operator's headers. The transport itself runs against real servers in
   tests/mcp/test_http_upstream.mjs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "host/mcp/upstream_http.h"

typedef struct events {
  char text[1024]; /* the events, each followed by '|' */
  int count;
} events;

static void collect(void *ctx, const char *data, size_t len) {
  events *e = ctx;
  size_t used = strlen(e->text);
  assert_true(used + len + 2 < sizeof e->text);
  memcpy(e->text + used, data, len);
  e->text[used + len] = '|';
  e->text[used + len + 1] = '\0';
  e->count++;
}

/* A stream with every line end, comments, fields moonbox skips, an event of another type, a
   priming event without data, and data over several lines. */
static const char stream[] = "id: 1\ndata:\n\n"                   /* priming: no data */
                             ": keep-alive\r\n\r\n"               /* a comment */
                             "data: {\"a\":1}\r\n\r\n"            /* CRLF */
                             "data:{\"b\":2}\r\r"                 /* CR alone, no space */
                             "event: message\ndata: x\ndata: y\n" /* two lines: "x\ny" */
                             "retry: 100\nid: 7\n\n"              /* ...ended here */
                             "event: ping\ndata: skipped\n\n"     /* another type */
                             "data\n\n"                           /* a field without ':' */
                             "data: last\n\n"
                             "data: unfinished"; /* no blank line yet */

static const char want[] = "{\"a\":1}|{\"b\":2}|x\ny|last|";

static void sse_events_whole_and_byte_by_byte(void **state) {
  (void)state;
  for (int split = 0; split < 2; split++) {
    mbxH_sse s = {.max = 1024};
    events e = {"", 0};
    if (split) {
      for (size_t i = 0; i < sizeof stream - 1; i++)
        assert_int_equal(mbxH_sse_feed(&s, stream + i, 1, collect, &e), 0);
    } else {
      assert_int_equal(mbxH_sse_feed(&s, stream, sizeof stream - 1, collect, &e), 0);
    }
    assert_string_equal(e.text, want);
    assert_int_equal(e.count, 4);
    /* what a resume sends back: the last id and retry: */
    assert_string_equal(s.last_id, "7");
    assert_int_equal(s.retry_ms, 100);
    /* an id that could not be a header value is not kept; nor is a retry: not all digits */
    assert_int_equal(mbxH_sse_feed(&s, "id: a b\nid: x\x01\nretry: 5s\n\n", 26, collect, &e), 0);
    assert_string_equal(s.last_id, "7");
    assert_int_equal(s.retry_ms, 100);
    /* the unfinished event comes with its blank line */
    assert_int_equal(mbxH_sse_feed(&s, "\n\n", 2, collect, &e), 0);
    assert_int_equal(e.count, 5);
    mbxH_sse_free(&s);
  }
}

static void sse_bounds(void **state) {
  (void)state;
  char big[300];
  memset(big, 'z', sizeof big);
  events e = {"", 0};
  /* one line past max, even without its end */
  mbxH_sse s = {.max = 256};
  assert_int_equal(mbxH_sse_feed(&s, "data: ", 6, collect, &e), 0);
  assert_int_equal(mbxH_sse_feed(&s, big, sizeof big, collect, &e), -1);
  mbxH_sse_free(&s);
  /* an event's data past max over many short lines */
  s = (mbxH_sse){.max = 256};
  int failed = 0;
  for (int i = 0; i < 100 && !failed; i++)
    failed = mbxH_sse_feed(&s, "data: 0123456789\n", 17, collect, &e) != 0;
  assert_true(failed);
  assert_int_equal(e.count, 0);
  mbxH_sse_free(&s);
}

static void urls(void **state) {
  (void)state;
  char why[300];
  static const char *const good[] = {
      "https://mcp.example.com/mcp", "https://mcp.example.com:8443/v1/mcp?x=1",
      "http://127.0.0.1:3001/mcp",   "http://127.9.9.9/mcp",
      "http://localhost:8080/mcp",   "http://[::1]:8080/mcp",
  };
  for (size_t i = 0; i < sizeof good / sizeof *good; i++)
    if (mbxH_upstream_url_check(good[i], why, sizeof why) != 0)
      fail_msg("%s refused: %s", good[i], why);
  static const struct {
    const char *url, *why;
  } bad[] = {
      {"http://mcp.example.com/mcp", "loopback only"},
      {"http://10.0.0.1/mcp", "loopback only"},
      {"http://[::2]/mcp", "loopback only"},
      {"http://localhost.example.com/mcp", "loopback only"},
      {"http://127.0.0.1.example.com/mcp", "loopback only"},
      {"https://user:pw@mcp.example.com/mcp", "user or password"},
      {"https://user@mcp.example.com/mcp", "user or password"},
      {"file:///etc/passwd", "http or https"},
      {"gopher://a.example/", "http or https"},
      {"not a url", "not a URL"},
      {"", "not a URL"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    why[0] = '\0';
    if (mbxH_upstream_url_check(bad[i].url, why, sizeof why) == 0)
      fail_msg("%s accepted", bad[i].url);
    if (strstr(why, bad[i].why) == NULL)
      fail_msg("%s: '%s' lacks '%s'", bad[i].url, why, bad[i].why);
  }
}

static void headers(void **state) {
  (void)state;
  char why[200];
  assert_int_equal(mbxH_upstream_header_check("Authorization", "Bearer abc", why, sizeof why), 0);
  assert_int_equal(mbxH_upstream_header_check("X-Api-Key", "k", why, sizeof why), 0);
  static const char *const own[] = {
      "Accept", "content-type", "MCP-SESSION-ID", "Mcp-Protocol-Version", "Host", "Last-Event-ID"};
  for (size_t i = 0; i < sizeof own / sizeof *own; i++) {
    assert_int_equal(mbxH_upstream_header_check(own[i], "x", why, sizeof why), -1);
    assert_non_null(strstr(why, "set by the transport"));
  }
  assert_int_equal(mbxH_upstream_header_check("Bad Name", "x", why, sizeof why), -1);
  assert_int_equal(mbxH_upstream_header_check("", "x", why, sizeof why), -1);
  assert_int_equal(mbxH_upstream_header_check("X:Y", "x", why, sizeof why), -1);
  assert_int_equal(mbxH_upstream_header_check("X", "secret\r\nX-Evil: 1", why, sizeof why), -1);
  assert_null(strstr(why, "secret"));
  assert_int_equal(mbxH_upstream_header_check("X", "secret\nX-Evil: 1", why, sizeof why), -1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sse_events_whole_and_byte_by_byte),
      cmocka_unit_test(sse_bounds),
      cmocka_unit_test(urls),
      cmocka_unit_test(headers),
  };
  return cmocka_run_group_tests_name("host/mcp/upstream_http", tests, NULL, NULL);
}
