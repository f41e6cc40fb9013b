/*
** host_example.c -- a complete moonbox host: a synchronous host function, a native function
** bound through libffi, and an external (pausing) function whose paused run is snapshotted
** to a file and finished in a second process.
**
**   host_example SNAPSHOT-FILE        the whole cycle (what the ctest examples/host_example runs)
**   host_example restore SNAPSHOT-FILE   the second process: restore, answer, print the value
**
** The cycle:
**   1. Build the policy: tools.add (a C callback answering at once), m.hypot (the C library's
**      hypot, called through libffi with the signature "d(dd)") and tools.fetch (external:
**      calling it pauses the run). Snapshots need a deterministic policy.
**   2. Run the guest snippet. It calls tools.add and m.hypot, then tools.fetch: mbx_run
**      returns MBX_PAUSED with the pending call.
**   3. Snapshot the paused sandbox (mbx_sandbox_snapshot) and write the bytes to the file.
**   4. Start a second process (this program again, "restore FILE"): it builds the same
**      policy, restores the sandbox from the file (mbx_sandbox_restore replays the recorded
**      session: tools.add is not called again, its recorded answer is used), answers the
**      pending call with mbx_resume and prints the final value JSON on stdout.
**   5. Meanwhile this process answers its own paused sandbox the same way.
**   6. Both final values must be the same bytes: exit 0 if they are, 1 otherwise.
**
** Build: add_executable(host_example examples/host_example.c), linked to moonbox_static (or
** `cc host_example.c $(pkg-config --cflags --libs moonbox) -lm`).
*/
#define _GNU_SOURCE
#include <math.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "moonbox.h"

extern char **environ;

/* The guest code: uses all three functions, and pairs (deterministic order) on the answer. */
static const char guest_code[] =
    "local sum = tools.add(40, 2)\n"
    "local h = m.hypot(3, 4)\n"
    "local page = tools.fetch('https://example.com/items/' .. sum)\n"
    "local keys = {}\n"
    "for k in pairs(page.headers) do keys[#keys + 1] = k end\n"
    "return {sum = sum, hypot = h, status = page.status, words = select(2, page.body:gsub('%a+', '')),\n"
    "        headers = table.concat(keys, ',')}\n";

/* What the host's "fetch" found: the answer to the pending tools.fetch call. */
static const char fetch_answer[] =
    "{\"status\":200,\"body\":\"hello moon world\","
    "\"headers\":{\"server\":\"x\",\"content-type\":\"text/plain\",\"etag\":\"1\"}}";

/*
** tools.add(a, b): a synchronous host function. The arguments arrive as a JSON array; a real
** host would use its JSON library. A reply is one JSON value; mbx_host_reply_error raises a
** Lua error the guest can catch.
*/
static mbx_status tools_add(void *userdata, const char *args_json, size_t args_len,
                            mbx_host_reply *reply) {
  static const char usage[] = "tools.add expects two integers";
  long long a, b;
  char out[32];
  int n;
  (void)userdata;
  (void)args_len;
  if (sscanf(args_json, "[%lld,%lld]", &a, &b) != 2)
    return mbx_host_reply_error(reply, usage, sizeof usage - 1);
  n = snprintf(out, sizeof out, "%lld", a + b);
  return mbx_host_reply_json(reply, out, (size_t)n);
}

/*
** The policy both processes build. A restore is refused unless the policy has the same
** digest: same limits, clock, seed, deterministic flag, environment and host functions (names,
** kinds and native signatures in the same order; the callbacks themselves may differ).
*/
static mbx_policy *make_policy(mbx_error *err) {
  mbx_policy *p = mbx_policy_new();
  if (p == NULL) return NULL;
  /* Deterministic mode ends runs by counting instructions, so it needs an instruction limit. */
  if (mbx_policy_set_deterministic(p, 1, err) != MBX_OK ||
      mbx_policy_set_limit_checked(p, MBX_LIMIT_INSTRUCTIONS, 100000000, err) != MBX_OK ||
      mbx_policy_set_limit_checked(p, MBX_LIMIT_TIME_MS, 2000, err) != MBX_OK ||
      mbx_policy_add_function(p, "tools.add", tools_add, NULL, err) != MBX_OK ||
      mbx_policy_bind_native(p, "m.hypot", "d(dd)", (void (*)(void))hypot, err) != MBX_OK ||
      mbx_policy_add_external(p, "tools.fetch", err) != MBX_OK) {
    mbx_policy_free(p);
    return NULL;
  }
  return p;
}

/* Answers the pending tools.fetch call; returns the final value JSON (malloc'd) or NULL. */
static char *finish_run(mbx_sandbox *sb) {
  mbx_error err;
  mbx_result *res;
  mbx_status s = mbx_resume(sb, fetch_answer, strlen(fetch_answer), &res, &err);
  char *value;
  if (s >= MBX_API_ERROR_BASE) {
    fprintf(stderr, "host_example: mbx_resume: %s\n", err.message);
    return NULL;
  }
  if (s != MBX_OK) {
    fprintf(stderr, "host_example: the resumed run ended with %s: %s\n", mbx_status_key(s),
            mbx_result_json(res, NULL));
    mbx_result_free(res);
    return NULL;
  }
  value = strdup(mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return value;
}

static int write_file(const char *path, const void *bytes, size_t len) {
  FILE *f = fopen(path, "wb");
  int ok = f != NULL && fwrite(bytes, 1, len, f) == len;
  if (f != NULL && fclose(f) != 0) ok = 0;
  if (!ok) perror(path);
  return ok ? 0 : -1;
}

static void *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  char *data = NULL;
  long size;
  if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
      fseek(f, 0, SEEK_SET) != 0 || (data = malloc((size_t)size + 1)) == NULL ||
      fread(data, 1, (size_t)size, f) != (size_t)size) {
    perror(path);
    free(data);
    if (f != NULL) fclose(f);
    return NULL;
  }
  fclose(f);
  *len = (size_t)size;
  return data;
}

/* The second process: restore the paused sandbox from the file and finish the run. */
static int restore_main(const char *path) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = rt ? make_policy(&err) : NULL;
  mbx_sandbox *sb = NULL;
  size_t len = 0;
  void *blob = p ? read_file(path, &len) : NULL;
  char *value = NULL;
  if (blob != NULL) {
    sb = mbx_sandbox_restore(rt, p, blob, len, &err);
    if (sb == NULL) fprintf(stderr, "host_example: mbx_sandbox_restore: %s\n", err.message);
  } else if (rt == NULL || p == NULL) {
    fprintf(stderr, "host_example: %s\n", err.message);
  }
  if (sb != NULL) value = finish_run(sb);
  if (value != NULL) printf("%s\n", value);
  free(value);
  free(blob);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return value != NULL ? 0 : 1;
}

/* Runs "SELF restore PATH" and reads its stdout (the final value, one line) into out. */
static int run_second_process(const char *self, const char *path, char *out, size_t size) {
  char *const argv[] = {(char *)self, "restore", (char *)path, NULL};
  posix_spawn_file_actions_t actions;
  int fds[2], status, rc;
  size_t n = 0;
  ssize_t got;
  pid_t pid;
  if (pipe(fds) != 0) return -1;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, fds[0]);
  posix_spawn_file_actions_addclose(&actions, fds[1]);
  rc = posix_spawnp(&pid, self, &actions, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (rc != 0) {
    fprintf(stderr, "host_example: cannot start %s: %s\n", self, strerror(rc));
    close(fds[0]);
    return -1;
  }
  while (n + 1 < size && (got = read(fds[0], out + n, size - 1 - n)) > 0)
    n += (size_t)got;
  out[n] = '\0';
  close(fds[0]);
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "host_example: the restoring process failed\n");
    return -1;
  }
  if (n > 0 && out[n - 1] == '\n') out[n - 1] = '\0';
  return 0;
}

int main(int argc, char **argv) {
  mbx_error err;
  mbx_runtime *rt;
  mbx_policy *p;
  mbx_sandbox *sb;
  mbx_result *res;
  mbx_status s;
  void *blob;
  size_t len;
  char *direct;
  char restored[4096];
  int ok;

  if (argc == 3 && strcmp(argv[1], "restore") == 0) return restore_main(argv[2]);
  if (argc != 2) {
    fprintf(stderr, "usage: host_example SNAPSHOT-FILE | host_example restore SNAPSHOT-FILE\n");
    return 2;
  }

  /* 1-2: policy, sandbox, run until the pause. */
  rt = mbx_runtime_new(&err);
  if (rt == NULL) {
    fprintf(stderr, "host_example: %s\n", err.message);
    return 1;
  }
  p = make_policy(&err);
  sb = p ? mbx_sandbox_new(rt, p, &err) : NULL;
  if (sb == NULL) {
    fprintf(stderr, "host_example: %s\n", err.message);
    mbx_policy_free(p);
    mbx_runtime_free(rt);
    return 1;
  }
  s = mbx_run(sb, guest_code, strlen(guest_code), NULL, 0, &res, &err);
  if (s != MBX_PAUSED) {
    fprintf(stderr, "host_example: expected a pause, got %s: %s\n", mbx_status_key(s),
            s < MBX_API_ERROR_BASE ? mbx_result_json(res, NULL) : err.message);
    if (s < MBX_API_ERROR_BASE) mbx_result_free(res);
    mbx_sandbox_free(sb);
    mbx_policy_free(p);
    mbx_runtime_free(rt);
    return 1;
  }
  /* {"error":null,"pending":{"args":["https://example.com/items/42"],"function":"tools.fetch"},...} */
  printf("paused:   %s\n", mbx_result_json(res, NULL));
  mbx_result_free(res);

  /* 3: the snapshot, to a file. */
  ok = mbx_sandbox_snapshot(sb, &blob, &len, &err) == MBX_OK;
  if (!ok) fprintf(stderr, "host_example: mbx_sandbox_snapshot: %s\n", err.message);
  if (ok) {
    ok = write_file(argv[1], blob, len) == 0;
    mbx_free(blob);
  }

  /* 4: the second process restores and finishes; 5: this one finishes directly. */
  if (ok) ok = run_second_process(argv[0], argv[1], restored, sizeof restored) == 0;
  direct = finish_run(sb);
  if (direct == NULL) ok = 0;

  /* 6: the two final values must agree. */
  if (ok) {
    printf("direct:   %s\nrestored: %s\n", direct, restored);
    if (strcmp(direct, restored) != 0) {
      fprintf(stderr, "host_example: the restored run ended differently\n");
      ok = 0;
    }
  }
  free(direct);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return ok ? 0 : 1;
}
