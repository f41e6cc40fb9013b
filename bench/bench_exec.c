/* bench/bench_exec.c -- start-up cost of one program through the exec backend, next to its
   peers measured in the same run: plain posix_spawn + waitpid of /usr/bin/true, and bare
   bwrap (the same namespaces and mounts, no helper, no seccomp, no shim); and proc.run from a
   sandbox in a worker (MBX_CAP_ISOLATE: the request forwarded to this process, which runs it).
   Prints medians. Usage: bench_exec [RUNS [EXEC_HELPER]] (default: 100 runs, this build's
   helper). */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "include/moonbox.h"

extern char **environ;

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static double spawn_wait(const char *path, char *const argv[]) {
  char *const envp[] = {NULL};
  double t = now_ms();
  pid_t pid;
  if (posix_spawn(&pid, path, NULL, NULL, argv, envp) != 0) return -1;
  int ws;
  waitpid(pid, &ws, 0);
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? now_ms() - t : -1;
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 100;
  if (n < 5) n = 5;
  double *fe = calloc((size_t)n, sizeof *fe), *bw = calloc((size_t)n, sizeof *bw),
         *mb = calloc((size_t)n, sizeof *mb);
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  if (rt == NULL || p == NULL || mbx_policy_allow_exec(p, "/usr/bin/true", &err) != MBX_OK) {
    fprintf(stderr, "bench_exec: setup failed: %s\n", err.message);
    return 1;
  }
  /* The helper of this build tree unless one is named: a statically linked program finds it
     beside itself, and this one sits in bench/, one folder below it. */
  const char *helper = argc > 2 ? argv[2] : MBX_BENCH_EXEC_HELPER;
  if (mbx_runtime_set_path(rt, MBX_PATH_EXEC_HELPER, helper, &err) != MBX_OK) {
    fprintf(stderr, "bench_exec: %s\n", err.message);
    return 1;
  }
  char *status;
  mbx_runtime_exec_status(rt, &status, NULL, &err);
  if (strstr(status, "\"available\":true") == NULL) {
    fprintf(stderr, "bench_exec: the exec backend is unavailable: %s\n", status);
    return 1;
  }
  mbx_free(status);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  /* The same program from a sandbox in a worker: its exec_run is served by this process. */
  mbx_runtime *irt = mbx_runtime_new(&err);
  if (irt == NULL || mbx_runtime_set_path(irt, MBX_PATH_EXEC_HELPER, helper, &err) != MBX_OK ||
      mbx_runtime_set_path(irt, MBX_PATH_WORKER, MBX_BENCH_WORKER, &err) != MBX_OK ||
      mbx_runtime_set_cap(irt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err) != MBX_OK) {
    fprintf(stderr, "bench_exec: isolated runtime: %s\n", err.message);
    return 1;
  }
  mbx_sandbox *isb = mbx_sandbox_new(irt, p, &err);
  double *wk = calloc((size_t)n, sizeof *wk);
  if (sb == NULL || isb == NULL || wk == NULL) {
    fprintf(stderr, "bench_exec: sandbox: %s\n", err.message);
    return 1;
  }
  const char *code = "return proc.run{'/usr/bin/true'}.code";
  char *const true_argv[] = {"true", NULL};
  char *const bwrap_argv[] = {"bwrap",
                              "--unshare-user",
                              "--unshare-ipc",
                              "--unshare-pid",
                              "--unshare-net",
                              "--unshare-uts",
                              "--unshare-cgroup-try",
                              "--die-with-parent",
                              "--new-session",
                              "--cap-drop",
                              "ALL",
                              "--ro-bind",
                              "/usr",
                              "/usr",
                              "--symlink",
                              "usr/bin",
                              "/bin",
                              "--symlink",
                              "usr/lib",
                              "/lib",
                              "--symlink",
                              "usr/lib64",
                              "/lib64",
                              "--proc",
                              "/proc",
                              "--dev",
                              "/dev",
                              "--tmpfs",
                              "/tmp",
                              "--remount-ro",
                              "/",
                              "--",
                              "/usr/bin/true",
                              NULL};
  /* Interleaved, so the machine's load falls on all three alike. */
  for (int i = 0; i < n; i++) {
    fe[i] = spawn_wait("/usr/bin/true", true_argv);
    bw[i] = spawn_wait("/usr/bin/bwrap", bwrap_argv);
    mbx_result *res = NULL;
    double t = now_ms();
    mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
    mb[i] = now_ms() - t;
    const char *v = res ? mbx_result_value_json(res, NULL) : NULL;
    if (s != MBX_OK || v == NULL || strcmp(v, "0") != 0 || fe[i] < 0 || bw[i] < 0) {
      fprintf(stderr, "bench_exec: run %d failed (%s)\n", i, v ? v : err.message);
      return 1;
    }
    mbx_result_free(res);
    t = now_ms();
    s = mbx_run(isb, code, strlen(code), NULL, 0, &res, &err);
    wk[i] = now_ms() - t;
    v = res ? mbx_result_value_json(res, NULL) : NULL;
    if (s != MBX_OK || v == NULL || strcmp(v, "0") != 0) {
      fprintf(stderr, "bench_exec: isolated run %d failed (%s)\n", i, v ? v : err.message);
      return 1;
    }
    mbx_result_free(res);
  }
  double mfe = median(fe, n), mbw = median(bw, n), mmb = median(mb, n), mwk = median(wk, n);
  printf("exec start-up, /usr/bin/true, median of %d interleaved runs:\n", n);
  printf("  posix_spawn + waitpid          %8.2f ms\n", mfe);
  printf("  bare bwrap (same namespaces)   %8.2f ms  (x%.1f of spawn)\n", mbw, mbw / mfe);
  printf("  moonbox proc.run (full story)  %8.2f ms  (x%.1f of spawn, x%.2f of bare bwrap)\n", mmb,
         mmb / mfe, mmb / mbw);
  printf("  proc.run from a worker sandbox %8.2f ms  (x%.2f of in-process proc.run)\n", mwk,
         mwk / mmb);
  mbx_sandbox_free(isb);
  mbx_runtime_free(irt);
  free(wk);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  free(fe);
  free(bw);
  free(mb);
  return 0;
}
