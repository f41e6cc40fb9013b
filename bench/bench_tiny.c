/* bench_tiny.c -- the per-call latency of one chunk ("return 1+1" by default) through the C API:
   the peer that front ends (the Python binding, the MCP server) measure themselves against in
   the same run. Usage: bench_tiny [ITERS [CODE [MODE [INPUTS_FILE]]]]
     MODE live (the default): one long-lived sandbox; fresh: a new sandbox per call (made,
     run, freed); the policy grants a host function f(...) that returns 1 (a C callback), for
     a chunk that measures host calls. INPUTS_FILE: a JSON object of globals for every run.
   Prints one line: "c_api <median us> <p99 us> <iters>". */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "moonbox.h"
#include "bench_clock.h"

typedef struct job {
  size_t iters;
  const char *code;
  int fresh;
  const char *inputs;
  size_t inputs_len;
  double *samples;
  int failed;
} job;

static mbx_status host_one(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  (void)args;
  (void)len;
  return mbx_host_reply_json(reply, "1", 1);
}

/* One untimed tenth first (warm-up: the bytecode cache, the slot's pages), then iters timed
   calls of mbx_run + mbx_result_json + mbx_result_free, which is what a front end does. */
static void *bench(void *arg) {
  job *j = arg;
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  if (p == NULL || mbx_policy_add_function(p, "f", host_one, NULL, &err) != MBX_OK) {
    j->failed = 1;
    return NULL;
  }
  mbx_sandbox *sb = rt && p ? mbx_sandbox_new(rt, p, &err) : NULL;
  if (sb == NULL) {
    fprintf(stderr, "bench_tiny: %s\n", err.message);
    j->failed = 1;
    return NULL;
  }
  size_t len = strlen(j->code), warmup = j->iters / 10 + 1;
  for (size_t i = 0; i < warmup + j->iters; i++) {
    mbx_result *res = NULL;
    double t0 = bench_now_us();
    mbx_sandbox *run_on = j->fresh ? mbx_sandbox_new(rt, p, &err) : sb;
    mbx_status s = mbx_run(run_on, j->code, len, j->inputs, j->inputs_len, &res, &err);
    size_t n;
    (void)mbx_result_json(res, &n);
    mbx_result_free(res);
    if (j->fresh) mbx_sandbox_free(run_on);
    double t1 = bench_now_us();
    if (s != MBX_OK) {
      fprintf(stderr, "bench_tiny: the run failed: %s\n", mbx_status_str(s));
      j->failed = 1;
      break;
    }
    if (i >= warmup) j->samples[i - warmup] = t1 - t0;
  }
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return NULL;
}

int main(int argc, char **argv) {
  job j = {.iters = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000,
           .code = argc > 2 ? argv[2] : "return 1+1"};
  if (j.iters == 0) j.iters = 1;
  j.fresh = argc > 3 && strcmp(argv[3], "fresh") == 0;
  char *inputs = NULL;
  if (argc > 4) {
    FILE *f = fopen(argv[4], "rb");
    static char buf[1 << 20];
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    if (n == 0) {
      fprintf(stderr, "bench_tiny: cannot read %s\n", argv[4]);
      return 2;
    }
    inputs = buf;
    j.inputs = inputs;
    j.inputs_len = n;
  }
  j.samples = calloc(j.iters, sizeof *j.samples);
  pthread_attr_t attr;
  pthread_t t;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  if (j.samples == NULL || pthread_create(&t, &attr, bench, &j) != 0) return 70;
  pthread_join(t, NULL);
  if (j.failed) return 1;
  qsort(j.samples, j.iters, sizeof *j.samples, bench_by_double);
  printf("c_api %.3f %.3f %zu\n", j.samples[j.iters / 2], j.samples[j.iters * 99 / 100], j.iters);
  free(j.samples);
  return 0;
}
