/* bench_mcp.c -- per-call latency of `return 1+1` through one long-lived `moonbox mcp` server
   (a tools/call line written to its stdin, the response line read back), next to the C API's
   mbx_run in the same process and the same run. Usage: bench_mcp [MOONBOX] [CALLS]. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moonbox.h"
#include "bench_clock.h"

#ifndef MBX_BENCH_MOONBOX
#define MBX_BENCH_MOONBOX "moonbox"
#endif

extern char **environ;

static const char CODE[] = "return 1+1";

/* Median and 99th percentile in microseconds (sorts v). */
static void stats(uint64_t *v, size_t n, double *median, double *p99) {
  qsort(v, n, sizeof *v, bench_by_u64);
  *median = (double)v[n / 2] / 1000.0;
  *p99 = (double)v[(n * 99) / 100] / 1000.0;
}

typedef struct capi_job {
  size_t calls;
  uint64_t *ns;
  int with_json;
  int failed;
} capi_job;

/* The peer: one sandbox, mbx_run in a loop (optionally with the result JSON, as MCP needs). */
static void *capi_thread(void *arg) {
  capi_job *job = arg;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = rt && p ? mbx_sandbox_new(rt, p, &err) : NULL;
  if (sb == NULL) {
    job->failed = 1;
    return NULL;
  }
  for (size_t i = 0; i < job->calls + job->calls / 10; i++) {
    mbx_result *res;
    uint64_t t0 = bench_now_ns();
    if (mbx_run(sb, CODE, sizeof CODE - 1, NULL, 0, &res, &err) != MBX_OK) job->failed = 1;
    if (job->with_json) (void)mbx_result_json(res, NULL);
    uint64_t t1 = bench_now_ns();
    mbx_result_free(res);
    if (i >= job->calls / 10) job->ns[i - job->calls / 10] = t1 - t0; /* after a warm-up */
  }
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return NULL;
}

static int capi(size_t calls, int with_json, uint64_t *ns) {
  capi_job job = {calls, ns, with_json, 0};
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  if (pthread_create(&t, &attr, capi_thread, &job) != 0) return -1;
  pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  return job.failed ? -1 : 0;
}

/* The server's stdout, read a line at a time. */
typedef struct reader {
  int fd;
  char buf[1 << 16];
  size_t len;
} reader;

/* Reads one line into line (truncated to size); returns its length or -1 at EOF. */
static long read_line(reader *r, char *line, size_t size) {
  for (;;) {
    char *nl = memchr(r->buf, '\n', r->len);
    if (nl) {
      size_t n = (size_t)(nl - r->buf);
      size_t c = n < size - 1 ? n : size - 1;
      memcpy(line, r->buf, c);
      line[c] = '\0';
      memmove(r->buf, nl + 1, r->len - n - 1);
      r->len -= n + 1;
      return (long)n;
    }
    if (r->len == sizeof r->buf) return -1;
    ssize_t got = read(r->fd, r->buf + r->len, sizeof r->buf - r->len);
    if (got <= 0) return -1;
    r->len += (size_t)got;
  }
}

static int write_all(int fd, const char *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* One server (its calls in workers with isolate "process", the default of moonbox mcp, or in
   the server with "none"); with session 1, every call runs in the same session (checkpointed first); with
   session -1 the calls are pings (the transport and JSON-RPC floor: no thread, no sandbox). */
static int mcp(const char *moonbox, const char *isolate, size_t calls, int session, uint64_t *ns) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  char *argv[] = {(char *)moonbox, "mcp", "--isolate", (char *)isolate, NULL};
  pid_t pid;
  if (posix_spawn(&pid, moonbox, &fa, NULL, argv, environ) != 0) {
    fprintf(stderr, "bench_mcp: cannot start %s\n", moonbox);
    return -1;
  }
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  reader *r = calloc(1, sizeof *r);
  r->fd = out[0];
  char line[8192];
  static const char init[] =
      "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
      "\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":\"1\"}}}"
      "\n{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n";
  int rc = 0;
  if (write_all(in[1], init, sizeof init - 1) != 0 || read_line(r, line, sizeof line) < 0) rc = -1;
  size_t warm = calls / 10;
  for (size_t i = 0; rc == 0 && i < calls + warm; i++) {
    char req[256];
    int n = session < 0
                ? snprintf(req, sizeof req,
                           "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"ping\"}\n", i + 1)
                : snprintf(req, sizeof req,
                           "{\"jsonrpc\":\"2.0\",\"id\":%zu,\"method\":\"tools/call\",\"params\":{"
                           "\"name\":\"run_lua\",\"arguments\":{\"code\":\"%s\"%s}}}\n",
                           i + 1, CODE, session > 0 ? ",\"session\":\"bench\"" : "");
    uint64_t t0 = bench_now_ns();
    if (write_all(in[1], req, (size_t)n) != 0 || read_line(r, line, sizeof line) < 0) {
      rc = -1;
      break;
    }
    uint64_t t1 = bench_now_ns();
    if (strstr(line, session < 0 ? "\"result\":{}" : "\"value\":2") == NULL) {
      fprintf(stderr, "bench_mcp: unexpected reply: %.200s\n", line);
      rc = -1;
    }
    if (i >= warm) ns[i - warm] = t1 - t0;
  }
  close(in[1]);
  int status;
  waitpid(pid, &status, 0);
  close(out[0]);
  free(r);
  return rc;
}

int main(int argc, char **argv) {
  const char *moonbox = argc > 1 && argv[1][0] ? argv[1] : MBX_BENCH_MOONBOX;
  size_t calls = argc > 2 ? (size_t)strtoul(argv[2], NULL, 10) : 20000;
  if (calls < 100) calls = 100;
  uint64_t *ns = malloc(calls * sizeof *ns);
  double med, p99, c_med, c_p99, j_med, j_p99, s_med, s_p99, p_med, p_p99;
  double n_med, n_p99, ns_med, ns_p99;
  signal(SIGPIPE, SIG_IGN);
  if (ns == NULL || capi(calls, 0, ns) != 0) return 1;
  stats(ns, calls, &c_med, &c_p99);
  if (capi(calls, 1, ns) != 0) return 1;
  stats(ns, calls, &j_med, &j_p99);
  if (mcp(moonbox, "process", calls, 0, ns) != 0) return 1;
  stats(ns, calls, &med, &p99);
  if (mcp(moonbox, "process", calls, 1, ns) != 0) return 1;
  stats(ns, calls, &s_med, &s_p99);
  if (mcp(moonbox, "none", calls, 0, ns) != 0) return 1;
  stats(ns, calls, &n_med, &n_p99);
  if (mcp(moonbox, "none", calls, 1, ns) != 0) return 1;
  stats(ns, calls, &ns_med, &ns_p99);
  if (mcp(moonbox, "process", calls, -1, ns) != 0) return 1;
  stats(ns, calls, &p_med, &p_p99);
  printf("return 1+1, %zu calls each (after %zu warm-up calls), one sandbox / one server:\n", calls,
         calls / 10);
  printf("  C API mbx_run                          median %8.2f us   p99 %8.2f us\n", c_med, c_p99);
  printf("  C API mbx_run + mbx_result_json        median %8.2f us   p99 %8.2f us\n", j_med, j_p99);
  printf("  MCP run_lua, worker (fresh sandbox)    median %8.2f us   p99 %8.2f us\n", med, p99);
  printf("  MCP run_lua, worker, one session       median %8.2f us   p99 %8.2f us\n", s_med, s_p99);
  printf("  MCP run_lua, --isolate none (fresh)    median %8.2f us   p99 %8.2f us\n", n_med, n_p99);
  printf("  MCP run_lua, --isolate none, session   median %8.2f us   p99 %8.2f us\n", ns_med,
         ns_p99);
  printf("  MCP ping (transport floor)             median %8.2f us   p99 %8.2f us\n", p_med, p_p99);
  printf("  MCP / C API median ratio: worker %.1fx (session %.1fx), in-process %.1fx (session "
         "%.1fx)\n",
         med / c_med, s_med / c_med, n_med / c_med, ns_med / c_med);
  free(ns);
  return 0;
}
