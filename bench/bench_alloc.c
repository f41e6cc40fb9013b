/* bench_alloc.c -- moonbox's host-side allocations under glibc malloc and under mimalloc, one
   and two threads, in one run (issue 10, the mimalloc lever).

   Every host-side allocation of the library (results, their JSON, output and reply buffers,
   the bytecode cache, the port and its buffers, sandbox handles) goes through malloc, so the
   fair comparison is the real workload with malloc itself swapped: the tool re-executes
   itself as a child, once plainly (glibc) and once with LD_PRELOAD=libmimalloc.so (which
   interposes malloc/free/realloc for the whole process, libmoonbox included), alternating the
   two so both see the same machine load. The guest heap is the slot arena in both (it never
   calls malloc), so only the host side differs.

   On a machine shared with other work the wall clock mostly measures the scheduler, so each
   child reports the process's CPU time (user + system, getrusage) per operation: the cost of
   the work itself, summed over both threads in the 2-thread rows (wall time is printed too).

   Usage: bench_alloc [ROUNDS]. Each child prints one line "ns_per_op <cpu> <wall>". */
#include <errno.h>
#include <pthread.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "moonbox.h"

extern char **environ;

#define FRESH_ITERS 20000
#define LIVE_ITERS 100000

/* A run whose result has a little of everything the host allocates: stdout, a table value,
   the contract JSON read by the caller. */
static const char CODE[] = "print('row', 1, 2) return {ok = true, n = 3, list = {1, 2, 3}}";

typedef struct job {
  mbx_runtime *rt;
  mbx_policy *p;
  int fresh; /* new + run + free per iteration, or runs on one live sandbox */
  size_t iters;
  int failed;
} job;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int run_once(mbx_sandbox *sb) {
  mbx_result *res = NULL;
  mbx_error err;
  int ok = mbx_run(sb, CODE, strlen(CODE), NULL, 0, &res, &err) == MBX_OK &&
           mbx_result_json(res, NULL) != NULL;
  mbx_result_free(res);
  return ok;
}

static void *loop(void *arg) {
  job *j = arg;
  mbx_error err;
  mbx_sandbox *live = j->fresh ? NULL : mbx_sandbox_new(j->rt, j->p, &err);
  if (!j->fresh && !live) j->failed = 1;
  for (size_t i = 0; i < j->iters && !j->failed; i++) {
    if (j->fresh) {
      mbx_sandbox *sb = mbx_sandbox_new(j->rt, j->p, &err);
      if (!sb || !run_once(sb)) j->failed = 1;
      mbx_sandbox_free(sb);
    } else if (!run_once(live)) {
      j->failed = 1;
    }
  }
  mbx_sandbox_free(live);
  return NULL;
}

/* The child: `threads` threads on one runtime; prints wall ns per operation per thread. */
static int child(int threads, int fresh) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  if (!rt || !p) return 1;
  job jobs[2];
  pthread_t t[2];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)8 << 20);
  size_t iters = fresh ? FRESH_ITERS : LIVE_ITERS;
  /* Warm-up: the template, the bytecode cache, the allocator's own caches. */
  job warm = {rt, p, fresh, iters / 10, 0};
  loop(&warm);
  uint64_t t0 = now_ns();
  for (int i = 0; i < threads; i++) {
    jobs[i] = (job){rt, p, fresh, iters, 0};
    if (pthread_create(&t[i], &attr, loop, &jobs[i]) != 0) return 1;
  }
  int failed = warm.failed;
  for (int i = 0; i < threads; i++) {
    pthread_join(t[i], NULL);
    failed |= jobs[i].failed;
  }
  uint64_t ns = now_ns() - t0;
  if (failed) return 1;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double cpu = (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
  /* The warm-up's share of the CPU time, at the timed loop's rate, is taken out. */
  double ops = (double)iters * threads + (double)warm.iters;
  printf("ns_per_op %.1f %.1f\n", cpu / ops, (double)ns / (double)iters);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return 0;
}

/* Run this tool as a child (with LD_PRELOAD when preload is set); its ns per op, or -1. */
static double spawn_child(const char *self, const char *preload, int threads, int fresh,
                          double *wall) {
  char targ[8], farg[8];
  snprintf(targ, sizeof targ, "%d", threads);
  snprintf(farg, sizeof farg, "%d", fresh);
  char *argv[] = {(char *)self, "--child", targ, farg, NULL};
  size_t n = 0;
  while (environ[n])
    n++;
  char **envp = calloc(n + 2, sizeof *envp);
  char pre[4200];
  size_t k = 0;
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0) envp[k++] = environ[i];
  if (preload) {
    snprintf(pre, sizeof pre, "LD_PRELOAD=%s", preload);
    envp[k++] = pre;
  }
  int fds[2];
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  pid_t pid;
  int rc = posix_spawn(&pid, self, &fa, NULL, argv, envp);
  posix_spawn_file_actions_destroy(&fa);
  free(envp);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    return -1;
  }
  char buf[128] = {0};
  FILE *f = fdopen(fds[0], "r");
  double v = -1;
  if (f && fgets(buf, sizeof buf, f) && sscanf(buf, "ns_per_op %lf %lf", &v, wall) != 2) v = -1;
  if (f) fclose(f);
  int status;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? v : -1;
}

static int by_value(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  if (argc == 4 && strcmp(argv[1], "--child") == 0) return child(atoi(argv[2]), atoi(argv[3]));
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1 || rounds > 50) {
    fprintf(stderr, "usage: bench_alloc [ROUNDS 1-50]\n");
    return 2;
  }
  char self[4096];
  ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return 1;
  self[len] = '\0';
  const char *mi = MBX_BENCH_MIMALLOC;
  printf("bench_alloc: host-side allocations, glibc malloc vs %s (LD_PRELOAD), medians of %d "
         "alternating rounds; load average at start: ",
         mi, rounds);
  FILE *la = fopen("/proc/loadavg", "r");
  char lbuf[64] = "?";
  if (la && fgets(lbuf, sizeof lbuf, la)) lbuf[strcspn(lbuf, "\n")] = '\0';
  if (la) fclose(la);
  printf("%s\n\n", lbuf);
  printf("| %-52s | %11s | %11s | %8s | %17s |\n", "workload (CPU ns per operation)", "glibc",
         "mimalloc", "mi/glibc", "wall glibc/mi ns");
  printf("|------------------------------------------------------|------------:|------------:|"
         "---------:|------------------:|\n");
  static const struct {
    const char *label;
    int threads, fresh;
  } rows[] = {
      {"new + run + result JSON + free, 1 thread", 1, 1},
      {"new + run + result JSON + free, 2 threads", 2, 1},
      {"run + result JSON on a live sandbox, 1 thread", 1, 0},
      {"run + result JSON on a live sandbox, 2 threads", 2, 0},
  };
  for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
    double g[50], m[50], gw[50], mw[50];
    for (int i = 0; i < rounds; i++) {
      g[i] = spawn_child(self, NULL, rows[r].threads, rows[r].fresh, &gw[i]);
      m[i] = spawn_child(self, mi, rows[r].threads, rows[r].fresh, &mw[i]);
      if (g[i] < 0 || m[i] < 0) {
        fprintf(stderr, "bench_alloc: a child failed (%s)\n", rows[r].label);
        return 1;
      }
    }
    qsort(g, (size_t)rounds, sizeof *g, by_value);
    qsort(m, (size_t)rounds, sizeof *m, by_value);
    qsort(gw, (size_t)rounds, sizeof *gw, by_value);
    qsort(mw, (size_t)rounds, sizeof *mw, by_value);
    double gm = g[rounds / 2], mm = m[rounds / 2];
    printf("| %-52s | %11.0f | %11.0f | %7.2fx | %8.0f/%-8.0f |\n", rows[r].label, gm, mm, mm / gm,
           gw[rounds / 2], mw[rounds / 2]);
    fflush(stdout);
  }
  return 0;
}
