/* host/mcp/upstream_process.c -- the process of a stdio upstream: spawned without a shell,
   its stdin written with a time limit, its stderr relayed (upstream_process.h). */
#include "host/mcp/upstream_process.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* ... so that a relayed line (prefix, line, newline) is one atomic pipe write. */
_Static_assert(MBXH_STDERR_LINE_MAX + 64 + 1 <= PIPE_BUF, "a relayed stderr line fits in PIPE_BUF");

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* An upstream that stops reading its stdin cannot hold a call thread, and every other writer
   waiting for upstream.c's write_lock, past its own call timeout. */
int mbxH_process_write_all(int fd, const char *p, size_t n, uint64_t limit_ms) {
  uint64_t until = now_ms() + limit_ms;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      uint64_t now = now_ms();
      if (now >= until) return -1;
      struct pollfd pf = {fd, POLLOUT, 0};
      uint64_t left = until - now;
      if (poll(&pf, 1, left > 1000 ? 1000 : (int)left) < 0 && errno != EINTR) return -1;
      continue;
    }
    if (w <= 0) return -1;
    p += w, n -= (size_t)w;
  }
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* The process                                                                               */

static char **build_env(char *const extra_env[]) {
  size_t base = 0, extra = 0;
  while (environ && environ[base])
    base++;
  while (extra_env && extra_env[extra])
    extra++;
  char **env = calloc(base + extra + 1, sizeof *env);
  if (env == NULL) return NULL;
  size_t n = 0;
  for (size_t i = 0; i < base; i++) {
    /* an entry the operator sets replaces the server's */
    const char *eq = strchr(environ[i], '=');
    size_t key = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
    int replaced = 0;
    for (size_t j = 0; j < extra && !replaced; j++)
      replaced = strncmp(extra_env[j], environ[i], key) == 0 && extra_env[j][key] == '=';
    if (!replaced) env[n++] = environ[i];
  }
  for (size_t j = 0; j < extra; j++)
    env[n++] = extra_env[j];
  return env;
}

int mbxH_process_spawn(const char *name, char *const argv[], char *const extra_env[],
                       const char *cwd, pid_t *pid_out, int *to, int *from, int *errs, char *msg,
                       size_t msg_size) {
  int in[2] = {-1, -1}, out[2] = {-1, -1}, err[2] = {-1, -1};
  if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) {
    snprintf(msg, msg_size, "upstream '%s': cannot make pipes: %s", name, strerror(errno));
    for (int i = 0; i < 2; i++) {
      if (in[i] >= 0) close(in[i]);
      if (out[i] >= 0) close(out[i]);
      if (err[i] >= 0) close(err[i]);
    }
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&fa);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_adddup2(&fa, in[0], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&fa, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&fa, err[1], STDERR_FILENO);
  if (cwd) posix_spawn_file_actions_addchdir_np(&fa, cwd);
  /* Its own process group (npx and shells start children: the group is what is killed),
     SIGPIPE back to its default (the server ignores it, and an ignored signal survives exec),
     no signal blocked. */
  sigset_t def, none;
  sigemptyset(&def);
  sigaddset(&def, SIGPIPE);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &def);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);
  char **env = build_env(extra_env);
  pid_t pid = 0;
  int rc = env ? posix_spawnp(&pid, argv[0], &fa, &attr, argv, env) : ENOMEM;
  free(env);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  close(in[0]), close(out[1]), close(err[1]);
  if (rc != 0) {
    close(in[1]), close(out[0]), close(err[0]);
    snprintf(msg, msg_size, "upstream '%s': cannot start '%s': %s", name, argv[0], strerror(rc));
    return -1;
  }
  *pid_out = pid;
  *to = in[1], *from = out[0], *errs = err[0];
  return 0;
}

/* ---------------------------------------------------------------------------------------- */
/* Its stderr                                                                                */

/* One line on our stderr, only if it can be written now: a client that pipes our stderr and
   never reads it must not stall this thread, and through it the upstream (a line is at most
   PIPE_BUF bytes, so a pipe that polls writable takes it whole). Lines dropped are counted and
   said once writing works again. */
static void relay_line(const char *line, size_t len, unsigned long *dropped) {
  struct pollfd p = {.fd = STDERR_FILENO, .events = POLLOUT};
  if (poll(&p, 1, 0) != 1 || !(p.revents & POLLOUT)) {
    ++*dropped;
    return;
  }
  if (*dropped) {
    char note[96];
    int n = snprintf(note, sizeof note,
                     "moonbox mcp: %lu upstream stderr lines dropped (stderr "
                     "was not being read)\n",
                     *dropped);
    (void)mbxH_process_write_all(STDERR_FILENO, note, (size_t)n, 1000);
    *dropped = 0;
  }
  (void)mbxH_process_write_all(STDERR_FILENO, line, len, 1000);
}

void *mbxH_process_stderr_thread(void *arg) {
  mbxH_stderr_relay a = *(mbxH_stderr_relay *)arg;
  free(arg);
  char buf[MBXH_STDERR_LINE_MAX + 64], chunk[4096];
  int prefix = snprintf(buf, sizeof buf, "moonbox mcp: upstream %s: ", a.name);
  size_t len = (size_t)prefix;
  unsigned long dropped = 0;
  for (;;) {
    ssize_t n = read(a.fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; i++) {
      if (chunk[i] != '\n' && len < (size_t)prefix + MBXH_STDERR_LINE_MAX) buf[len++] = chunk[i];
      if (chunk[i] == '\n') {
        buf[len++] = '\n';
        relay_line(buf, len, &dropped);
        len = (size_t)prefix;
      }
    }
  }
  if (len > (size_t)prefix) {
    buf[len++] = '\n';
    relay_line(buf, len, &dropped);
  }
  close(a.fd);
  return NULL;
}
