/* bench_peers.c -- moonbox's figures, through the C API, for the rows a peer sandbox is
   measured on in the same run (bench/peers.sh runs this, then Pydantic Monty's napi binding
   through bench/peers/monty.mjs, and prints them side by side). One line per row:
   "row NAME VALUE UNIT", the same names as monty.mjs. Never a test.
   Usage: bench_peers PEERS_DIR [ITERS]  (PEERS_DIR holds snippet.lua's records.json) */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moonbox.h"
#include "bench_clock.h"

#define HOST_CALLS 1000
#define IDLE_SESSIONS 1000

static const char *row_name = "setup";

static void die(const char *what, const char *why) {
  fprintf(stderr, "bench_peers: %s: %s: %s\n", row_name, what, why ? why : "");
  exit(1);
}

typedef void (*step_fn)(void *ctx);

/* The median of iters timed calls of fn, after an untimed tenth (warm-up), as monty.mjs does. */
static double median_us(step_fn fn, void *ctx, size_t iters) {
  for (size_t i = 0; i < iters / 10 + 1; i++)
    fn(ctx);
  double *samples = malloc(iters * sizeof *samples);
  if (!samples) die("malloc", "out of memory");
  for (size_t i = 0; i < iters; i++) {
    double t0 = bench_now_us();
    fn(ctx);
    samples[i] = bench_now_us() - t0;
  }
  qsort(samples, iters, sizeof *samples, bench_by_double);
  double median = samples[iters / 2];
  free(samples);
  return median;
}

static void row(const char *name, double value, const char *unit) {
  printf("row %s %.*f %s\n", name, strcmp(unit, "B") == 0 ? 0 : 3, value, unit);
  fflush(stdout);
}

typedef struct run_ctx {
  mbx_runtime *rt;
  mbx_policy *policy;
  mbx_sandbox *sb; /* NULL: each step makes and frees its own */
  const char *code, *inputs, *want;
} run_ctx;

/* One run of ctx->code, its value checked; the fresh rows make and free the sandbox too. */
static void run_step(void *arg) {
  run_ctx *c = arg;
  mbx_error err;
  mbx_result *res = NULL;
  mbx_sandbox *sb = c->sb ? c->sb : mbx_sandbox_new(c->rt, c->policy, &err);
  if (!sb) die("mbx_sandbox_new", err.message);
  mbx_status st = mbx_run(sb, c->code, strlen(c->code), c->inputs,
                          c->inputs ? strlen(c->inputs) : 0, &res, &err);
  if (st >= MBX_API_ERROR_BASE) die("mbx_run", err.message);
  if (mbx_result_status(res) != MBX_OK) die("the run", mbx_result_error_message(res, NULL));
  if (c->want && strcmp(mbx_result_value_json(res, NULL), c->want) != 0)
    die("unexpected value", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  if (!c->sb) mbx_sandbox_free(sb);
}

static mbx_status host_add(void *userdata, const char *args, size_t len, mbx_host_reply *reply) {
  (void)userdata;
  char *end;
  if (len < 5 || args[0] != '[') return mbx_host_reply_error(reply, "bad args", 8);
  long long a = strtoll(args + 1, &end, 10);
  if (*end != ',') return mbx_host_reply_error(reply, "bad args", 8);
  long long b = strtoll(end + 1, &end, 10);
  char out[32];
  int n = snprintf(out, sizeof out, "%lld", a + b);
  return mbx_host_reply_json(reply, out, (size_t)n);
}

static mbx_policy *host_policy(int deterministic) {
  mbx_error err;
  mbx_policy *p = mbx_policy_new();
  if (!p) die("mbx_policy_new", "out of memory");
  if (mbx_policy_add_function(p, "add", host_add, NULL, &err) != MBX_OK ||
      mbx_policy_set_limit_checked(p, MBX_LIMIT_HOST_CALLS, 2 * HOST_CALLS, &err) != MBX_OK ||
      (deterministic &&
       (mbx_policy_set_limit_checked(p, MBX_LIMIT_INSTRUCTIONS, 1000000000, &err) != MBX_OK ||
        mbx_policy_set_deterministic(p, 1, &err) != MBX_OK)))
    die("policy", err.message);
  return p;
}

static char *read_text(const char *dir, const char *name) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  if (!f) die(path, "cannot open");
  char *buf = malloc(1 << 20);
  size_t len = buf ? fread(buf, 1, (1 << 20) - 1, f) : 0;
  fclose(f);
  if (!buf || len == 0) die(path, "cannot read");
  buf[len] = '\0';
  return buf;
}

static long rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * 4096;
}

typedef struct restore_ctx {
  mbx_runtime *rt;
  mbx_policy *policy;
  void *blob;
  size_t len;
} restore_ctx;

static void restore_step(void *arg) {
  restore_ctx *c = arg;
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_restore(c->rt, c->policy, c->blob, c->len, &err);
  if (!sb) die("mbx_sandbox_restore", err.message);
  mbx_sandbox_free(sb);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: bench_peers PEERS_DIR [ITERS]\n");
    return 2;
  }
  size_t iters = argc > 2 ? strtoul(argv[2], NULL, 10) : 20000;
  if (iters < 100) iters = 100;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *plain = mbx_policy_new();
  if (!rt || !plain) die("mbx_runtime_new", err.message);
  run_ctx c = {rt, plain, NULL, "return 1+1", NULL, "2"};

  row_name = "fresh_1p1";
  row(row_name, median_us(run_step, &c, iters), "us");
  row_name = "live_1p1";
  if (!(c.sb = mbx_sandbox_new(rt, plain, &err))) die("mbx_sandbox_new", err.message);
  row(row_name, median_us(run_step, &c, iters), "us");
  mbx_sandbox_free(c.sb);

  /* A sync host call: one run of HOST_CALLS calls of add(i, 3), per call. */
  row_name = "host_call";
  char want[32];
  snprintf(want, sizeof want, "%d", HOST_CALLS * (HOST_CALLS - 1) / 2 + 3 * HOST_CALLS);
  mbx_policy *hosted = host_policy(0);
  run_ctx h = {rt,   hosted, NULL, "local s = 0 for i = 0, 999 do s = s + add(i, 3) end return s",
               NULL, want};
  if (!(h.sb = mbx_sandbox_new(rt, hosted, &err))) die("mbx_sandbox_new", err.message);
  row(row_name, median_us(run_step, &h, iters / 100) * 1e3 / HOST_CALLS, "ns");
  mbx_sandbox_free(h.sb);
  mbx_policy_free(hosted);

  /* The 40-record snippet in a fresh sandbox each run (its bytecode cached by the runtime). */
  row_name = "snippet";
  run_ctx s = {
      rt,  plain, NULL, read_text(argv[1], "../snippet.lua"), read_text(argv[1], "records.json"),
      NULL};
  mbx_result *res = NULL;
  mbx_sandbox *once = mbx_sandbox_new(rt, plain, &err);
  if (!once ||
      mbx_run(once, s.code, strlen(s.code), s.inputs, strlen(s.inputs), &res, &err) != MBX_OK ||
      mbx_result_status(res) != MBX_OK)
    die("the snippet", res ? mbx_result_error_message(res, NULL) : err.message);
  const char *value = mbx_result_value_json(res, NULL), *digest = strstr(value, "\"digest\":");
  printf("digest %lld\n", digest ? atoll(digest + 9) : -1);
  mbx_result_free(res);
  mbx_sandbox_free(once);
  row(row_name, median_us(run_step, &s, iters / 10), "us");

  /* Idle sessions: IDLE_SESSIONS live sandboxes that each ran one statement. */
  row_name = "idle_session";
  mbx_sandbox **idle = calloc(IDLE_SESSIONS, sizeof *idle);
  if (!idle) die("calloc", "out of memory");
  long before = rss_bytes();
  run_ctx x = {rt, plain, NULL, "x = 1", NULL, NULL};
  for (int i = 0; i < IDLE_SESSIONS; i++) {
    if (!(idle[i] = x.sb = mbx_sandbox_new(rt, plain, &err))) die("mbx_sandbox_new", err.message);
    run_step(&x);
  }
  row(row_name, (double)(rss_bytes() - before) / IDLE_SESSIONS, "B");
  for (int i = 0; i < IDLE_SESSIONS; i++)
    mbx_sandbox_free(idle[i]);
  free(idle);

  /* A snapshot of a deterministic sandbox after a run of 100 host calls; its restore. */
  row_name = "snapshot";
  mbx_policy *det = host_policy(1);
  run_ctx d = {rt, det, NULL, "for i = 1, 100 do add(i, 3) end", NULL, NULL};
  if (!(d.sb = mbx_sandbox_new(rt, det, &err))) die("mbx_sandbox_new", err.message);
  run_step(&d);
  restore_ctx r = {rt, det, NULL, 0};
  if (mbx_sandbox_snapshot(d.sb, &r.blob, &r.len, &err) != MBX_OK)
    die("mbx_sandbox_snapshot", err.message);
  row("snapshot_bytes", (double)r.len, "B");
  row("snapshot_restore", median_us(restore_step, &r, iters / 10), "us");
  mbx_sandbox_free(d.sb);
  mbx_free(r.blob);
  mbx_policy_free(det);

  free((char *)s.code);
  free((char *)s.inputs);
  mbx_policy_free(plain);
  mbx_runtime_free(rt);
  return 0;
}
