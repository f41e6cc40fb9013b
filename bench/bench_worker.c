/* bench/bench_worker.c -- worker mode (MBX_CAP_ISOLATE) against in-process and against a bare
   `unshare -U -n /bin/true`, in one run: the round trip of `return 1+1` on a live sandbox, a
   fresh sandbox + run + free from the warm pool, the cold start of a runtime's first worker,
   and the memory of an idle worker; the physical floor of a round trip (two processes and a
   socketpair, blocking and with the worker's own spin) as the live round trip's peer; then the
   issue-14 targets with a verdict each. Prints medians; never a test.
   Usage: bench_worker [ITERATIONS]   (the worker is the moonbox-worker next to this binary's
   build directory, MBX_BENCH_WORKER; MBX_BENCH_LIVE_WORKERS live sandboxes, default 1,000;
   MBX_BENCH_LOAD=N runs N busy loops beside the whole bench, a loaded machine on demand) */
#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "host/backend/worker_spin.h"
#include "moonbox.h"

extern char **environ;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t cpu_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The floor under a live round trip: a byte sent to another process over a socketpair and a
   byte back, both ends blocking (spin 0: each end's wake-up is paid) or both spinning first
   with the worker's own policy (host/backend/worker_spin.c); pace_us > 0 sleeps that long before
   each (both ends asleep when it starts, as a paced fresh sandbox's run finds them). The
   median, us; p90 to *p90. */
static double raw_round_trip(int spin, int n, int pace_us, double *p90) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(sv[0]);
    mbxH_spin s = {0};
    char c;
    for (;;) {
      if (spin) (void)mbxH_spin_wait(&s, sv[1], 0);
      if (read(sv[1], &c, 1) != 1 || write(sv[1], &c, 1) != 1) _exit(0);
    }
  }
  close(sv[1]);
  double *v = malloc(sizeof *v * (size_t)n);
  mbxH_spin s = {0};
  char c = 'x';
  for (int i = -100; i < n; i++) {
    if (pace_us) usleep((useconds_t)pace_us);
    uint64_t t0 = now_ns();
    if (write(sv[0], &c, 1) != 1) break;
    if (spin) (void)mbxH_spin_wait(&s, sv[0], 0);
    if (read(sv[0], &c, 1) != 1) break;
    if (i >= 0) v[i] = (double)(now_ns() - t0) / 1000.0;
  }
  close(sv[0]);
  waitpid(pid, NULL, 0);
  double m = median(v, n); /* sorts v */
  *p90 = v[n * 9 / 10];
  free(v);
  return m;
}

/* What this machine charges for what a worker's path has and in-process has not: a system
   call (getppid, in a loop: warm) and a page's first touch (the fault a forked worker pays for
   each page it writes first). ns each. */
static void machine_costs(double *syscall_ns, double *fault_ns) {
  enum { CALLS = 100000, PAGES = 2000 };
  uint64_t t0 = now_ns();
  for (int i = 0; i < CALLS; i++)
    (void)getppid();
  *syscall_ns = (double)(now_ns() - t0) / CALLS;
  long page = sysconf(_SC_PAGESIZE);
  char *m =
      mmap(NULL, (size_t)page * PAGES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  *fault_ns = -1;
  if (m == MAP_FAILED) return;
  t0 = now_ns();
  for (int i = 0; i < PAGES; i++)
    ((volatile char *)m)[(size_t)i * (size_t)page] = 1;
  *fault_ns = (double)(now_ns() - t0) / PAGES;
  munmap(m, (size_t)page * PAGES);
}

/* MBX_BENCH_LOAD: busy children, killed at exit. */
static pid_t load_pids[16];
static int n_load;

static void stop_load(void) {
  for (int i = 0; i < n_load; i++) {
    kill(load_pids[i], SIGKILL);
    waitpid(load_pids[i], NULL, 0);
  }
}

static void start_load(int n) {
  for (; n_load < n && n_load < 16; n_load++) {
    pid_t pid = fork();
    if (pid == 0)
      for (volatile unsigned long x = 0;; x++) {
      }
    load_pids[n_load] = pid;
  }
  atexit(stop_load);
}

/* MBX_CAP_WORKER_SPIN of the isolated runtimes made next. */
static int g_spin;
/* MBX_CAP_WORKER_REEXEC of the isolated runtimes made next (-1: the runtime's default). */
static long long g_reexec = -1;
/* The mean of the last fresh_sandbox (a re-exec every N workers shows in the mean, not the
   median). */
static double g_fresh_mean;

static mbx_runtime *runtime(int isolate) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  if (rt && isolate &&
      mbx_runtime_set_cap(rt, MBX_CAP_WORKER_SPIN, (uint64_t)g_spin, &err) != MBX_OK) {
    fprintf(stderr, "bench_worker: %s\n", err.message);
    exit(1);
  }
  if (rt && isolate && g_reexec >= 0 &&
      mbx_runtime_set_cap(rt, MBX_CAP_WORKER_REEXEC, (uint64_t)g_reexec, &err) != MBX_OK) {
    fprintf(stderr, "bench_worker: %s\n", err.message);
    exit(1);
  }
  if (rt && isolate == 2 && mbx_runtime_set_cap(rt, MBX_CAP_ONE_TENANT, 1, &err) != MBX_OK) {
    fprintf(stderr, "bench_worker: %s\n", err.message);
    exit(1);
  }
  if (rt && isolate &&
      (mbx_runtime_set_path(rt, MBX_PATH_WORKER, MBX_BENCH_WORKER, &err) != MBX_OK ||
       mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err) != MBX_OK)) {
    fprintf(stderr, "bench_worker: %s\n", err.message);
    exit(1);
  }
  return rt;
}

static void run_once(mbx_sandbox *sb) {
  mbx_result *res;
  mbx_error err;
  if (mbx_run(sb, "return 1+1", 10, NULL, 0, &res, &err) != MBX_OK) {
    fprintf(stderr, "bench_worker: run failed\n");
    exit(1);
  }
  mbx_result_free(res);
}

/* The median, us; the parent thread's CPU per round trip (mean, us) to *cpu_us. */
static double live_round_trip(int isolate, int n, double *cpu_us) {
  mbx_runtime *rt = runtime(isolate);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  double *v = malloc(sizeof *v * (size_t)n);
  for (int i = 0; i < 100; i++)
    run_once(sb);
  uint64_t c0 = cpu_ns();
  for (int i = 0; i < n; i++) {
    uint64_t t0 = now_ns();
    run_once(sb);
    v[i] = (double)(now_ns() - t0) / 1000.0;
  }
  *cpu_us = (double)(cpu_ns() - c0) / 1000.0 / n;
  double m = median(v, n);
  free(v);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return m;
}

/* new + run + free; pace_us > 0 leaves the zygote that long between sandboxes to refill the
   warm pool (the steady state of a host that does not create sandboxes back to back). The
   medians of the three steps go to steps[3] (new, run, free) when it is not NULL. */
static double fresh_sandbox(int isolate, int n, int pace_us, double steps[3]) {
  mbx_runtime *rt = runtime(isolate);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  double *v = malloc(sizeof *v * (size_t)n * 4);
  double *sv[3] = {v + n, v + 2 * n, v + 3 * n};
  for (int i = 0; i < n + 20; i++) {
    if (pace_us) usleep((useconds_t)pace_us);
    uint64_t t0 = now_ns();
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    if (sb == NULL) {
      fprintf(stderr, "bench_worker: %s\n", err.message);
      exit(1);
    }
    uint64_t t1 = now_ns();
    run_once(sb);
    uint64_t t2 = now_ns();
    mbx_sandbox_free(sb);
    uint64_t t3 = now_ns();
    if (i >= 20) {
      v[i - 20] = (double)(t3 - t0) / 1000.0;
      sv[0][i - 20] = (double)(t1 - t0) / 1000.0;
      sv[1][i - 20] = (double)(t2 - t1) / 1000.0;
      sv[2][i - 20] = (double)(t3 - t2) / 1000.0;
    }
  }
  g_fresh_mean = 0;
  for (int i = 0; i < n; i++)
    g_fresh_mean += v[i] / n;
  double m = median(v, n);
  for (int k = 0; k < 3 && steps; k++)
    steps[k] = median(sv[k], n);
  free(v);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return m;
}

/* The median; *min the fastest start (what a free core gives: load only adds). */
static double cold_start(int n, double *min) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  double *v = malloc(sizeof *v * (size_t)n);
  for (int i = 0; i < n; i++) {
    uint64_t t0 = now_ns();
    mbx_runtime *rt = runtime(1);
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    run_once(sb);
    v[i] = (double)(now_ns() - t0) / 1000.0;
    mbx_sandbox_free(sb);
    mbx_runtime_free(rt);
  }
  double m = median(v, n);
  *min = v[0]; /* median sorted v */
  free(v);
  mbx_policy_free(p);
  return m;
}

static double unshare_true(int n, double *min) {
  *min = -1;
  double *v = malloc(sizeof *v * (size_t)n);
  char *argv[] = {"unshare", "-U", "-n", "/bin/true", NULL};
  for (int i = 0; i < n; i++) {
    uint64_t t0 = now_ns();
    pid_t pid;
    if (posix_spawn(&pid, "/usr/bin/unshare", NULL, NULL, argv, environ) != 0) return -1;
    int st;
    waitpid(pid, &st, 0);
    v[i] = (double)(now_ns() - t0) / 1000.0;
  }
  double m = median(v, n);
  *min = v[0];
  free(v);
  return m;
}

/* Which path a worker's start takes here (root: nobody; non-root: the zygote's shared user
   namespace), from the jail's own report, so a run labels its figures. */
static void print_jail_path(void) {
  mbx_runtime *rt = runtime(1);
  char *json = NULL;
  mbx_error err;
  if (mbx_runtime_worker_status(rt, &json, NULL, &err) != MBX_OK) {
    printf("worker jail: unknown (%s)\n", err.message);
  } else {
    const char *key = "\"user_namespace\":\"";
    const char *ns = strstr(json, key);
    const char *v = ns ? ns + strlen(key) : NULL;
    const char *end = v ? strchr(v, '"') : NULL;
    printf("worker jail (uid %u): user namespace %.*s\n", (unsigned)geteuid(),
           end ? (int)(end - v) : 7, end ? v : "unknown");
  }
  mbx_free(json);
  mbx_runtime_free(rt);
}

static long status_kb(pid_t pid, const char *file, const char *key) {
  char path[64], line[256];
  snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
  FILE *f = fopen(path, "r");
  long kb = -1;
  if (!f) return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) kb = strtol(line + strlen(key), NULL, 10);
  fclose(f);
  return kb;
}

static int count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    if (e->d_name[0] != '.') n++;
  if (d) closedir(d);
  return n;
}

/* The zygote's children: the workers (and the pid namespace's init). */
static int zygote_children(pid_t *zygote, pid_t *out, int max) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
  FILE *f = fopen(path, "r");
  *zygote = 0;
  if (f && fscanf(f, "%d", zygote) != 1) *zygote = 0;
  if (f) fclose(f);
  snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)*zygote, (int)*zygote);
  f = fopen(path, "r");
  int n = 0, pid;
  while (f && n < max && fscanf(f, "%d", &pid) == 1)
    out[n++] = pid;
  if (f) fclose(f);
  return n;
}

/* count isolated sandboxes alive at once, each after one run: the time to make them, the
   RSS and PSS of their idle workers, and the processes and fds after they are freed. */
static void live_workers(int count) {
  mbx_runtime *rt = runtime(1);
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  mbx_sandbox **sbs = calloc((size_t)count, sizeof *sbs);
  mbx_sandbox *first = mbx_sandbox_new(rt, p, &err);
  run_once(first);
  mbx_sandbox_free(first);
  int fds0 = count_fds();
  pid_t zygote, *kids = malloc(sizeof *kids * ((size_t)count + 64));
  int procs0 = zygote_children(&zygote, kids, count + 64);
  uint64_t t0 = now_ns();
  for (int i = 0; i < count; i++) {
    sbs[i] = mbx_sandbox_new(rt, p, &err);
    if (sbs[i] == NULL) {
      fprintf(stderr, "bench_worker: sandbox %d: %s\n", i, err.message);
      exit(1);
    }
    run_once(sbs[i]);
  }
  double made_ms = (double)(now_ns() - t0) / 1e6;
  int n = zygote_children(&zygote, kids, count + 64), measured = 0;
  long rss = 0, pss = 0;
  for (int i = 0; i < n; i++) {
    long r = status_kb(kids[i], "status", "VmRSS:"), s = status_kb(kids[i], "smaps_rollup", "Pss:");
    if (r > 64) { /* the pid namespace's init holds almost nothing: not a worker */
      rss += r;
      pss += s;
      measured++;
    }
  }
  int fds_live = count_fds();
  t0 = now_ns();
  for (int i = 0; i < count; i++)
    mbx_sandbox_free(sbs[i]);
  double freed_ms = (double)(now_ns() - t0) / 1e6;
  /* Freed workers are reaped as the zygote reads the queued requests. */
  int procs1 = n;
  for (int tries = 0; tries < 500; tries++) {
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    mbx_sandbox_free(sb);
    procs1 = zygote_children(&zygote, kids, count + 64);
    if (procs1 <= procs0 + 2) break;
    usleep(10000);
  }
  printf("%d live isolated sandboxes: made (new + return 1+1 each) in %.0f ms (%.0f us each); "
         "idle worker RSS %.0f KiB, PSS %.0f KiB (mean of %d); zygote RSS %ld KiB; parent fds "
         "%d -> %d live; freed in %.0f ms; after: zygote children %d -> %d, fds %d -> %d\n",
         count, made_ms, made_ms * 1000 / count, measured ? (double)rss / measured : 0.0,
         measured ? (double)pss / measured : 0.0, measured, status_kb(zygote, "status", "VmRSS:"),
         fds0, fds_live, freed_ms, procs0, procs1, fds0, count_fds());
  free(kids);
  free(sbs);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

static void verdict(const char *target, int met, const char *figure) {
  printf("  %-58s %s  %s\n", target, met ? "MET    " : "NOT MET", figure);
}

int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  if (n < 10) n = 10;
  const char *load = getenv("MBX_BENCH_LOAD");
  if (load && atoi(load) > 0) {
    start_load(atoi(load));
    printf("(%d busy loops run beside this bench)\n", n_load);
  }
  print_jail_path();
  double in_cpu, w_cpu;
  double in_live = live_round_trip(0, n, &in_cpu), w_live = live_round_trip(1, n, &w_cpu);
  printf("return 1+1 on a live sandbox: in-process %.2f us, worker %.2f us (x%.1f; parent CPU "
         "%.2f us per run)\n",
         in_live, w_live, w_live / in_live, w_cpu);
  /* After the live round trips, so that their figure is taken as in a run without the floor.
     The child only reads, writes and spins: safe to fork beside the runtimes' threads. */
  double raw_b90, raw_s90;
  double raw_block = raw_round_trip(0, n * 5, 0, &raw_b90);
  double raw_spin = raw_round_trip(1, n * 5, 0, &raw_s90);
  printf("round trip floor (1 byte, socketpair, two processes): blocking %.2f us (p90 %.2f), "
         "both ends spinning %u us first (the worker's policy) %.2f us (p90 %.2f); spin %s "
         "here\n",
         raw_block, raw_b90, MBXH_SPIN_NS / 1000, raw_spin, raw_s90,
         mbxH_spin_usable() ? "usable" : "off (one CPU)");
  int nf = n / 4 < 10 ? 10 : n / 4;
  /* The floor under a paced fresh sandbox's run: both ends asleep for 2 ms before it. */
  double raw_p90, raw_paced = raw_round_trip(0, nf, 2000, &raw_p90);
  double sys_ns, fault_ns;
  machine_costs(&sys_ns, &fault_ns);
  printf("the same floor, 2 ms apart (both ends asleep before each): %.2f us (p90 %.2f); this "
         "machine: a system call %.0f ns, a page's first touch %.0f ns\n",
         raw_paced, raw_p90, sys_ns, fault_ns);
  double st_in[3], st_b2b[3], st_paced[3];
  double in_fresh = fresh_sandbox(0, nf, 0, st_in), w_fresh = fresh_sandbox(1, nf, 0, st_b2b);
  double w_paced = fresh_sandbox(1, nf, 2000, st_paced);
  printf("fresh sandbox + return 1+1 + free: in-process %.2f us, worker back to back %.2f us, "
         "worker from a refilled warm pool (2 ms apart) %.2f us\n",
         in_fresh, w_fresh, w_paced);
  printf("  steps (new / run / free, medians): in-process %.2f / %.2f / %.2f us; worker back "
         "to back %.2f / %.2f / %.2f us; worker paced %.2f / %.2f / %.2f us\n",
         st_in[0], st_in[1], st_in[2], st_b2b[0], st_b2b[1], st_b2b[2], st_paced[0], st_paced[1],
         st_paced[2]);
  /* What re-executing the zygote every MBX_CAP_WORKER_REEXEC workers costs (issue 25, 8):
     back to back, never, the default, and every 16, in this run. */
  double reexec_med[3], reexec_mean[3];
  const long long reexec_n[3] = {0, MBX_DEFAULT_WORKER_REEXEC, 16};
  for (int k = 0; k < 3; k++) {
    g_reexec = reexec_n[k];
    reexec_med[k] = fresh_sandbox(1, nf, 0, NULL);
    reexec_mean[k] = g_fresh_mean;
  }
  g_reexec = -1;
  printf("fresh sandbox + return 1+1 + free, worker back to back, zygote re-executed never / "
         "every %d (the default) / every 16 workers: medians %.2f / %.2f / %.2f us, means "
         "%.2f / %.2f / %.2f us\n",
         MBX_DEFAULT_WORKER_REEXEC, reexec_med[0], reexec_med[1], reexec_med[2], reexec_mean[0],
         reexec_mean[1], reexec_mean[2]);
  int nc = 50;
  double cold_min, uns_min;
  double cold = cold_start(nc, &cold_min), uns = unshare_true(nc, &uns_min);
  printf("cold start (new runtime: zygote exec + first worker + return 1+1): %.0f us; "
         "unshare -U -n /bin/true: %.0f us (difference %+.0f us)\n",
         cold, uns, cold - uns);
  printf("  minima of %d: cold start %.0f us, unshare -U -n /bin/true %.0f us (difference "
         "%+.0f us)\n",
         nc, cold_min, uns_min, cold_min - uns_min);
  /* One tenant (MBX_CAP_ONE_TENANT): the freed sandbox's worker serves the next one. */
  double st_one[3];
  double w_one = fresh_sandbox(2, nf, 0, st_one);
  printf("fresh sandbox + return 1+1 + free, one-tenant runtime (a reused worker): %.2f us "
         "(new / run / free %.2f / %.2f / %.2f us)\n",
         w_one, st_one[0], st_one[1], st_one[2]);
  /* The same round trips with both ends spinning first (MBX_CAP_WORKER_SPIN), in this run. */
  g_spin = 1;
  double s_cpu, s_live = live_round_trip(1, n, &s_cpu), st_spin[3], st_sone[3];
  double s_paced = fresh_sandbox(1, nf, 2000, st_spin), s_one = fresh_sandbox(2, nf, 0, st_sone);
  g_spin = 0;
  printf("with MBX_CAP_WORKER_SPIN=1: live %.2f us (parent CPU %.2f us per run; off: %.2f us); "
         "fresh paced %.2f us (new / run / free %.2f / %.2f / %.2f; off: %.2f us); one-tenant "
         "%.2f us (new / run / free %.2f / %.2f / %.2f; off: %.2f us)\n",
         s_live, s_cpu, w_live, s_paced, st_spin[0], st_spin[1], st_spin[2], w_paced, s_one,
         st_sone[0], st_sone[1], st_sone[2], w_one);
  /* 1,000 workers: each holds a socket and a pidfd here. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < nofile.rlim_max) {
    nofile.rlim_cur = nofile.rlim_max;
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  const char *live = getenv("MBX_BENCH_LIVE_WORKERS");
  live_workers(live && atoi(live) > 0 ? atoi(live) : 1000);
  char fig[256];
  printf("issue 14 targets (each with its peer from this run):\n");
  snprintf(fig, sizeof fig, "%.2f us (floor: blocking %.2f, spinning %.2f us)", w_live, raw_block,
           raw_spin);
  verdict("return 1+1 on a live isolated sandbox <= 20 us", w_live <= 20, fig);
  snprintf(fig, sizeof fig,
           "%.2f us paced, %.2f us back to back (in-process %.2f us; paced floor of one "
           "round trip %.2f us)",
           w_paced, w_fresh, in_fresh, raw_paced);
  verdict("fresh sandbox + run + free from a warm pool <= 50 us", w_paced <= 50, fig);
  snprintf(fig, sizeof fig, "%.0f us (unshare -U -n /bin/true %.0f us, %+.0f us)", cold, uns,
           cold - uns);
  verdict("cold start <= unshare -U -n /bin/true + 1 ms", cold <= uns + 1000, fig);
  snprintf(fig, sizeof fig, "%.2f us (fresh from the pool %.2f us)", w_one, w_paced);
  verdict("one-tenant fresh sandbox (a reused worker) <= 50 us", w_one <= 50, fig);
  snprintf(fig, sizeof fig, "%.2f us (spin off %.2f us; floor spinning %.2f us)", s_live, w_live,
           raw_spin);
  verdict("  the same live round trip, MBX_CAP_WORKER_SPIN=1", s_live <= 20, fig);
  snprintf(fig, sizeof fig, "%.2f us paced (spin off %.2f us)", s_paced, w_paced);
  verdict("  the same fresh sandbox, MBX_CAP_WORKER_SPIN=1", s_paced <= 50, fig);
  return 0;
}
