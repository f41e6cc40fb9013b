/* tests/host/test_snapshot.c -- portable snapshots through the public API
   (mbx_sandbox_snapshot / mbx_sandbox_restore, host/snapshot.c; the record/replay layer,
   capabilities/port_record.c).

   Every scenario is a REPL session: runs in order, each pause answered with the next of its
   answers. It is driven uninterrupted in one sandbox; then, for every point between two steps
   (after each run or resume), a second sandbox is driven to that point, snapshotted, the blob
   restored into a third sandbox, and the rest of the session driven there: every later
   result (minus usage) must be the one the uninterrupted session gave. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "capabilities/replay.h"
#include "moonbox.h"
#include "tests/support/snippet.h"

/* ---- the policy: deterministic, fixed seed and clock, host functions of every kind ---- */

static mbx_status host_add(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  /* Sum of the integers in the JSON array (the guest passes small integers only). */
  long long sum = 0;
  for (size_t i = 0; i < len;) {
    char *end;
    if ((args[i] >= '0' && args[i] <= '9') || args[i] == '-') {
      sum += strtoll(args + i, &end, 10);
      i = (size_t)(end - args);
    } else {
      i++;
    }
  }
  char out[64];
  int n = snprintf(out, sizeof out, "%lld", sum);
  return mbx_host_reply_json(reply, out, (size_t)n);
}

/* tools.upper("x"): the string upper-cased; anything else is a host error. */
static mbx_status host_upper(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)ud;
  if (len < 4 || args[0] != '[' || args[1] != '"') {
    static const char msg[] = "tools.upper wants a string";
    return mbx_host_reply_error(reply, msg, sizeof msg - 1);
  }
  char out[256];
  size_t n = len < sizeof out ? len : sizeof out - 1;
  for (size_t i = 0; i < n; i++)
    out[i] = (char)(args[i] >= 'a' && args[i] <= 'z' ? args[i] - 32 : args[i]);
  /* strip the brackets: ["abc"] -> "ABC" */
  return mbx_host_reply_json(reply, out + 1, n - 2);
}

static int host_calls_made; /* callbacks are never called during a replay */

static mbx_status host_counted(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  host_calls_made++;
  return host_add(ud, args, len, reply);
}

static mbx_policy *make_policy(int deterministic, uint64_t seed) {
  mbx_policy *p = mbx_policy_new();
  mbx_error err;
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_deterministic(p, deterministic, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 1000000000), MBX_OK);
  if (seed) assert_int_equal(mbx_policy_set_seed(p, seed, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_time(p, 1700000000, &err), MBX_OK);
  assert_int_equal(mbx_policy_set_env(p, "FOO", "bar", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "tools.fetch", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_external(p, "ask", &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.add", host_add, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.upper", host_upper, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_add_function(p, "tools.counted", host_counted, NULL, &err), MBX_OK);
  assert_int_equal(mbx_policy_bind_native(p, "m.hypot", "d(dd)", (void (*)(void))hypot, &err),
                   MBX_OK);
  return p;
}

/* ---- scenarios ---- */

#define MAX_RUNS 4
#define MAX_ANSWERS 12
#define MAX_STEPS 24

typedef struct scenario {
  const char *name;
  const char *runs[MAX_RUNS];   /* NULL-terminated */
  const char *inputs[MAX_RUNS]; /* NULL: none */
  /* one per pause, in order: "v<json>" resumes with a value, "e<message>" with an error */
  const char *answers[MAX_ANSWERS];
} scenario;

static const scenario scenarios[] = {
    {"pairs over string keys with a pause per key",
     {"local t = {alpha=1, beta=2, gamma=3, delta=4, epsilon=5}\n"
      "local out = {}\n"
      "for k, v in pairs(t) do out[#out+1] = k .. '=' .. tostring(tools.fetch(k) + v) end\n"
      "return table.concat(out, ',')"},
     {NULL},
     {"v10", "v20", "v30", "v40", "v50"}},
    {"pairs over a big string-keyed table, pause in the middle",
     {"local t = {}\n"
      "for i = 1, 200 do t['k' .. (i * 7919 % 1000)] = i end\n"
      "local acc, n = {}, 0\n"
      "for k, v in pairs(t) do n = n + 1; if n % 50 == 0 then acc[#acc+1] = k .. tools.fetch(n) "
      "end end\n"
      "return acc"},
     {NULL},
     {"v\"a\"", "v\"b\"", "v\"c\"", "v\"d\""}},
    {"math.random before and after a pause",
     {"local a = math.random(1, 1000)\n"
      "local b = tools.fetch(a)\n"
      "return {a, b, math.random(1, 1000), math.random()}"},
     {NULL},
     {"v7"}},
    {"math.randomseed() with no argument",
     {"math.randomseed()\nlocal a = math.random(1 << 40)\nlocal b = ask()\n"
      "math.randomseed()\nreturn {a, b, math.random(1 << 40)}"},
     {NULL},
     {"vtrue"}},
    {"math.randomseed(n) then a pause",
     {"math.randomseed(7)\nlocal xs = {}\nfor i = 1, 3 do xs[i] = math.random(100) .. ':' .. "
      "tostring(tools.fetch(i)) end\nreturn xs"},
     {NULL},
     {"v1", "v2", "v3"}},
    {"os.time, os.date and os.clock around pauses",
     {"local c1 = os.clock()\nlocal x = tools.fetch(os.time())\n"
      "local c2 = os.clock()\n"
      "return {os.date('!%Y-%m-%d %H:%M:%S'), os.date('*t').year, c1, c2, x, os.time{year=2024, "
      "month=1, day=2}}"},
     {NULL},
     {"v\"ok\""}},
    {"host sync calls around a pause",
     {"local a = tools.add(1, 2, 3)\nlocal b = tools.fetch(a)\nlocal c = tools.counted(b, 10)\n"
      "return {a, b, c, tools.upper('abc')}"},
     {NULL},
     {"v5"}},
    {"a host error caught by pcall, then a pause",
     {"local ok, e = pcall(tools.upper, 5)\nlocal v = tools.fetch(e)\nreturn {ok, e, v}"},
     {NULL},
     {"v{\"k\":[1,2,3]}"}},
    {"a pause inside pcall answered with an error",
     {"local ok, v = pcall(function() return tools.fetch('x') end)\n"
      "local ok2, v2 = pcall(function() return tools.fetch('y') end)\nreturn {ok, v, ok2, v2}"},
     {NULL},
     {"enot found", "v42"}},
    {"a pause inside a coroutine",
     {"local gen = coroutine.wrap(function()\n"
      "  for i = 1, 3 do coroutine.yield(tools.fetch(i) * 2) end\nend)\n"
      "return {gen(), gen(), gen()}"},
     {NULL},
     {"v1", "v2", "v3"}},
    {"nested coroutines with pauses",
     {"local inner = coroutine.create(function(a)\n"
      "  local b = tools.fetch(a)\n  local c = coroutine.yield(b + 1)\n  return ask(c) end)\n"
      "local outer = coroutine.wrap(function()\n"
      "  local ok, x = coroutine.resume(inner, 10)\n  local ok2, y = coroutine.resume(inner, x * "
      "3)\n"
      "  return {ok, x, ok2, y}\nend)\nreturn outer()"},
     {NULL},
     {"v100", "v\"done\""}},
    {"a REPL session: globals carried across runs",
     {"counter = 0\nnames = {}\nreturn 'ready'",
      "for i = 1, 3 do counter = counter + tools.fetch(i); names[#names+1] = 'n' .. counter end\n"
      "return counter",
      "local s = {}\nfor k, v in pairs(names) do s[#s+1] = k .. v end\nreturn table.concat(s, ' "
      "')"},
     {NULL, NULL, NULL},
     {"v3", "v4", "v5"}},
    {"inputs bound in every run",
     {"return base * 2", "local r = tools.fetch(base + extra)\nreturn {r, extra}",
      "return base + extra"},
     {"{\"base\": 21}", "{\"extra\": 5}", "{\"extra\": 6}"},
     {"v\"fetched\""}},
    {"a resume error left uncaught",
     {"local x = tools.fetch(1)\nreturn x", "return 'after the error'"},
     {NULL, NULL},
     {"eboom"}},
    {"tostring ids of tables across pauses",
     {"local t = {}\nlocal s = tostring(t)\nlocal a = tools.fetch(s)\n"
      "local u = {}\nreturn {s, tostring(u), tostring(print), a}"},
     {NULL},
     {"v\"x\""}},
    {"next() and table.sort over collected keys",
     {"local t = {zeta=1, eta=2, theta=3, iota=4}\nlocal k, v = next(t)\n"
      "local first = k\nlocal got = tools.fetch(first)\nlocal keys = {}\n"
      "for key in pairs(t) do keys[#keys+1] = key end\ntable.sort(keys)\n"
      "return {first, got, table.concat(keys, ',')}"},
     {NULL},
     {"v0"}},
    {"os.getenv and a pause",
     {"local v = os.getenv('FOO')\nlocal w = os.getenv('NOPE')\nlocal r = tools.fetch(v)\n"
      "return {v, w, r, os.getenv('FOO')}"},
     {NULL},
     {"v\"env\""}},
    {"a native call and a pause",
     {"local h = m.hypot(3, 4)\nlocal r = tools.fetch(h)\nreturn {h, r, m.hypot(r, 12)}"},
     {NULL},
     {"v5"}},
    {"printed output across pauses",
     {"print('before')\nlocal a = tools.fetch(1)\nprint('after', a)\nio.write('x')\n"
      "local b = tools.fetch(2)\nprint('end', b)\nreturn a + b"},
     {NULL},
     {"v1", "v2"}},
    {"a failing run, then a pausing run",
     {"error('first run fails')", "local a = tools.fetch('again')\nreturn a", "return 1 +"},
     {NULL, NULL, NULL},
     {"v\"fine\""}},
    {"a pause inside xpcall's body",
     {"local ok, v = xpcall(function() return tools.fetch('in xpcall') .. '!' end, "
      "function(m) return 'handled: ' .. tostring(m) end)\n"
      "local ok2, v2 = xpcall(function() return tools.fetch('err') end, "
      "function(m) return 'handled: ' .. tostring(m) end)\nreturn {ok, v, ok2, v2}"},
     {NULL},
     {"v\"yes\"", "ebad"}},
    {"nested JSON answers",
     {"local r = tools.fetch()\nlocal keys = {}\nfor k in pairs(r) do keys[#keys+1] = k end\n"
      "return {r, keys, #r.a}"},
     {NULL},
     {"v{\"a\":[1,2,{\"b\":null}],\"z\":\"last\",\"m\":1.5}"}},
    {"a generic for over a Lua iterator that pauses",
     {"local function iter(n)\n  local i = 0\n  return function()\n"
      "    i = i + 1\n    if i <= n then return i, tools.fetch(i) end\n  end\nend\n"
      "local s = 0\nfor i, v in iter(3) do s = s + i * v end\nreturn s"},
     {NULL},
     {"v10", "v20", "v30"}},
    {"closures and string.format across a pause",
     {"local function mk(x) return function(y) return string.format('%5.2f|%d', x / 3, y) end end\n"
      "local f = mk(10)\nlocal y = tools.fetch()\nreturn f(y) .. string.rep('-', y)"},
     {NULL},
     {"v4"}},
    {"no pause at all: idle snapshots between runs",
     {"x = {}\nfor i = 1, 10 do x['k' .. i] = i * i end\nreturn 1",
      "local s = 0\nfor k, v in pairs(x) do s = s + #k * v end\nreturn {s, os.clock()}",
      "return tools.add(1, 2) + math.random(10)"},
     {NULL, NULL, NULL},
     {NULL}},
    {"the same pausing call many times in a loop",
     {"local acc = {}\nfor i = 1, 10 do acc[i] = ask(i) end\nreturn table.concat(acc, '')"},
     {NULL},
     {"v\"a\"", "v\"b\"", "v\"c\"", "v\"d\"", "v\"e\"", "v\"f\"", "v\"g\"", "v\"h\"", "v\"i\"",
      "v\"j\""}},
    {"memory files across pauses and runs: re-executed on replay",
     {"local f = assert(io.open('/tmp/log', 'w'))\n"
      "for i = 1, 3 do f:write(ask(i), '\\n') end\n"
      "f:close()\n"
      "assert(fs.mkdir('/tmp/d'))\n"
      "return {io.open('/tmp/log'):read('a'), fs.stat('/tmp/log').mtime, os.tmpname()}",
      "local t = {} for l in io.lines('/tmp/log') do t[#t + 1] = l end\n"
      "os.remove('/tmp/log')\n"
      "return {t, fs.exists('/tmp/log'), fs.exists('/tmp/d'), tools.fetch(#t)}"},
     {NULL, NULL},
     {"v\"a\"", "v\"b\"", "v\"c\"", "v1"}},
};

#define N_SCENARIOS (sizeof scenarios / sizeof *scenarios)

/* Where a session stands: the next run, the next answer, and whether it is paused. */
typedef struct driver {
  const scenario *sc;
  size_t run, answer;
  int paused;
} driver;

static size_t count_runs(const scenario *sc) {
  size_t n = 0;
  while (n < MAX_RUNS && sc->runs[n])
    n++;
  return n;
}

static int driver_done(const driver *d) {
  return !d->paused && d->run >= count_runs(d->sc);
}

/* The result JSON without its usage object (wall time and peaks differ between runs). */
static char *strip_usage(const char *json) {
  char *copy = strdup(json);
  assert_non_null(copy);
  char *u = strstr(copy, "\"usage\":{");
  if (u) {
    char *end = strchr(u, '}');
    assert_non_null(end);
    end++;
    if (*end == ',') end++;
    memmove(u, end, strlen(end) + 1);
  }
  return copy;
}

/* One step: start the next run or answer the pause. Returns the stripped result JSON. */
static char *driver_step(driver *d, mbx_sandbox *sb) {
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s;
  if (d->paused) {
    const char *a = d->answer < MAX_ANSWERS ? d->sc->answers[d->answer] : NULL;
    if (a == NULL) fail_msg("%s: a pause with no answer left", d->sc->name);
    d->answer++;
    if (a[0] == 'v')
      s = mbx_resume(sb, a + 1, strlen(a + 1), &res, &err);
    else
      s = mbx_resume_error(sb, a + 1, strlen(a + 1), &res, &err);
  } else {
    const char *code = d->sc->runs[d->run];
    const char *inputs = d->sc->inputs[d->run];
    d->run++;
    s = mbx_run(sb, code, strlen(code), inputs, inputs ? strlen(inputs) : 0, &res, &err);
  }
  if (s >= MBX_API_ERROR_BASE)
    fail_msg("%s: step refused: %s (%s)", d->sc->name, mbx_status_name(s), err.message);
  d->paused = s == MBX_PAUSED;
  char *json = strip_usage(mbx_result_json(res, NULL));
  mbx_result_free(res);
  return json;
}

static mbx_runtime *rt;

/* The uninterrupted session: every step's result. */
static size_t drive_all(const scenario *sc, mbx_policy *p, char **results) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  driver d = {.sc = sc};
  size_t n = 0;
  while (!driver_done(&d)) {
    assert_true(n < MAX_STEPS);
    results[n++] = driver_step(&d, sb);
  }
  mbx_sandbox_free(sb);
  return n;
}

static void free_results(char **results, size_t n) {
  for (size_t i = 0; i < n; i++)
    free(results[i]);
}

/* Drive to step k, snapshot, restore, finish in the restored sandbox (and in the original),
   comparing with the uninterrupted results. */
static void check_split(const scenario *sc, mbx_policy *p, char **expected, size_t steps,
                        size_t k) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  driver d = {.sc = sc};
  for (size_t i = 0; i < k; i++)
    free(driver_step(&d, sb));
  void *blob = NULL;
  size_t len = 0;
  if (mbx_sandbox_snapshot(sb, &blob, &len, &err) != MBX_OK)
    fail_msg("%s: snapshot after step %zu: %s", sc->name, k, err.message);
  int before = host_calls_made;
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("%s: restore after step %zu: %s", sc->name, k, err.message);
  assert_int_equal(host_calls_made, before); /* answers came from the log */
  assert_int_equal(mbx_sandbox_paused(r), d.paused);
  /* A restored sandbox snapshots to the same bytes. */
  void *again = NULL;
  size_t again_len = 0;
  assert_int_equal(mbx_sandbox_snapshot(r, &again, &again_len, &err), MBX_OK);
  assert_int_equal(again_len, len);
  assert_memory_equal(again, blob, len);
  mbx_free(again);
  driver dr = d;
  for (size_t i = k; i < steps; i++) {
    char *got = driver_step(&dr, r);
    if (strcmp(got, expected[i]) != 0)
      fail_msg("%s: restored after step %zu, step %zu gave\n  %s\nwhere the uninterrupted "
               "session gave\n  %s",
               sc->name, k, i, got, expected[i]);
    free(got);
    char *orig = driver_step(&d, sb);
    assert_string_equal(orig, expected[i]);
    free(orig);
  }
  assert_true(driver_done(&dr));
  mbx_free(blob);
  mbx_sandbox_free(r);
  mbx_sandbox_free(sb);
}

static void scenarios_survive_snapshot_and_restore(void **state) {
  (void)state;
  mbx_policy *p = make_policy(1, 42);
  for (size_t i = 0; i < N_SCENARIOS; i++) {
    char *expected[MAX_STEPS];
    size_t steps = drive_all(&scenarios[i], p, expected);
    for (size_t k = 0; k <= steps; k++)
      check_split(&scenarios[i], p, expected, steps, k);
    free_results(expected, steps);
  }
  mbx_policy_free(p);
}

/* Without a policy seed the seeds are kernel randomness, recorded: the restored sandbox
   continues exactly as the original does. */
static void unseeded_restore_continues_like_the_original(void **state) {
  (void)state;
  mbx_policy *p = make_policy(1, 0);
  mbx_error err;
  static const scenario seeded_by_the_kernel = {
      "kernel seeds",
      {"math.randomseed()\nlocal a = math.random(1 << 40)\nlocal b = ask()\n"
       "return {a, b, math.random(1 << 40)}"},
      {NULL},
      {"vtrue"}};
  const scenario *sc = &seeded_by_the_kernel;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  driver d = {.sc = sc};
  free(driver_step(&d, sb));
  assert_true(d.paused);
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("restore: %s", err.message);
  driver dr = d;
  char *a = driver_step(&d, sb), *b = driver_step(&dr, r);
  assert_string_equal(a, b);
  free(a);
  free(b);
  mbx_free(blob);
  mbx_sandbox_free(r);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
}

/* Another process: a child restores the blob it reads from a pipe and finishes the session;
   its results come back through another pipe. */
static void restore_in_another_process(void **state) {
  (void)state;
  mbx_policy *p = make_policy(1, 42);
  for (size_t si = 0; si < N_SCENARIOS; si += 4) {
    const scenario *sc = &scenarios[si];
    char *expected[MAX_STEPS];
    size_t steps = drive_all(sc, p, expected);
    size_t k = steps / 2;
    mbx_error err;
    mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
    driver d = {.sc = sc};
    for (size_t i = 0; i < k; i++)
      free(driver_step(&d, sb));
    void *blob;
    size_t len;
    assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
    mbx_sandbox_free(sb);
    int to_child[2], from_child[2];
    assert_int_equal(pipe(to_child), 0);
    assert_int_equal(pipe(from_child), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      close(to_child[1]);
      close(from_child[0]);
      size_t cap = 1 << 16, got = 0;
      char *in = malloc(cap);
      ssize_t n;
      while (in && (n = read(to_child[0], in + got, cap - got)) > 0) {
        got += (size_t)n;
        if (got == cap) in = realloc(in, cap *= 2);
      }
      mbx_runtime *crt = mbx_runtime_new(&err);
      mbx_policy *cp = make_policy(1, 42);
      mbx_sandbox *r = crt && in ? mbx_sandbox_restore(crt, cp, in, got, &err) : NULL;
      if (r == NULL) {
        dprintf(from_child[1], "RESTORE FAILED: %s\n", err.message);
        _exit(1);
      }
      /* the driver's position travels with the test, as a host would keep it */
      for (size_t i = k; i < steps; i++) {
        char *res = driver_step(&d, r);
        dprintf(from_child[1], "%s\n", res);
        free(res);
      }
      mbx_sandbox_free(r);
      _exit(0);
    }
    close(to_child[0]);
    close(from_child[1]);
    assert_int_equal(write(to_child[1], blob, len), (ssize_t)len);
    close(to_child[1]);
    char out[1 << 16];
    size_t got = 0;
    ssize_t n;
    while ((n = read(from_child[0], out + got, sizeof out - 1 - got)) > 0)
      got += (size_t)n;
    out[got] = '\0';
    close(from_child[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fail_msg("%s: the child failed: %s", sc->name, out);
    char *line = out;
    for (size_t i = k; i < steps; i++) {
      char *nl = strchr(line, '\n');
      assert_non_null(nl);
      *nl = '\0';
      if (strcmp(line, expected[i]) != 0)
        fail_msg("%s: the child's step %zu gave\n  %s\nnot\n  %s", sc->name, i, line, expected[i]);
      line = nl + 1;
    }
    mbx_free(blob);
    free_results(expected, steps);
  }
  mbx_policy_free(p);
}

/* ---- refusals ---- */

static void *small_blob(mbx_policy *p, size_t *len) {
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  mbx_result *res;
  const char *code = "local a = os.time()\nreturn tools.fetch(a) + 1";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_PAUSED);
  mbx_result_free(res);
  void *blob;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, len, &err), MBX_OK);
  mbx_sandbox_free(sb);
  return blob;
}

static void snapshot_refuses_a_nondeterministic_or_poisoned_sandbox(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(0, 42);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  void *blob = (void *)1;
  size_t len = 1;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_INVALID_ARGUMENT);
  assert_null(blob);
  assert_int_equal(len, 0);
  assert_non_null(strstr(err.message, "mbx_policy_set_deterministic"));
  mbx_sandbox_free(sb);
  /* restore also wants a deterministic policy */
  mbx_policy *dp = make_policy(1, 42);
  blob = small_blob(dp, &len);
  assert_null(mbx_sandbox_restore(rt, p, blob, len, &err));
  assert_non_null(strstr(err.message, "mbx_policy_set_deterministic"));
  mbx_free(blob);
  mbx_policy_free(p);

  assert_int_equal(mbx_policy_set_limit(dp, MBX_LIMIT_INSTRUCTIONS, 10000), MBX_OK);
  sb = mbx_sandbox_new(rt, dp, &err);
  mbx_result *res;
  assert_int_equal(mbx_run(sb, "while true do end", 17, NULL, 0, &res, &err),
                   MBX_INSTRUCTION_LIMIT);
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_SANDBOX_POISONED);
  assert_non_null(strstr(err.message, "poisoned"));
  /* a reset starts a new log: snapshots work again */
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r = mbx_sandbox_restore(rt, dp, blob, len, &err);
  assert_non_null(r);
  mbx_sandbox_free(r);
  mbx_free(blob);
  mbx_sandbox_free(sb);
  mbx_policy_free(dp);
}

static void restore_refuses_another_policy(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(1, 42);
  size_t len;
  void *blob = small_blob(p, &len);
  mbx_policy *q = make_policy(1, 43); /* another seed */
  assert_null(mbx_sandbox_restore(rt, q, blob, len, &err));
  assert_int_equal(err.code, MBX_INVALID_INPUT);
  assert_non_null(strstr(err.message, "another policy"));
  mbx_policy_free(q);
  q = make_policy(1, 42);
  assert_int_equal(mbx_policy_set_limit(q, MBX_LIMIT_HOST_CALLS, 5), MBX_OK);
  assert_null(mbx_sandbox_restore(rt, q, blob, len, &err));
  assert_non_null(strstr(err.message, "another policy"));
  mbx_policy_free(q);
  q = make_policy(1, 42);
  assert_int_equal(mbx_policy_add_external(q, "extra", &err), MBX_OK);
  assert_null(mbx_sandbox_restore(rt, q, blob, len, &err));
  assert_non_null(strstr(err.message, "another policy"));
  mbx_policy_free(q);
  /* the same policy, built again (other callbacks' userdata do not count): accepted */
  q = make_policy(1, 42);
  mbx_sandbox *r = mbx_sandbox_restore(rt, q, blob, len, &err);
  if (r == NULL) fail_msg("%s", err.message);
  mbx_result *res;
  assert_int_equal(mbx_resume(r, "41", 2, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "42");
  mbx_result_free(res);
  mbx_sandbox_free(r);
  mbx_policy_free(q);
  mbx_free(blob);
  mbx_policy_free(p);
}

static void restore_refuses_every_flipped_byte(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(1, 42);
  size_t len;
  unsigned char *blob = small_blob(p, &len);
  assert_true(len < 4096);
  unsigned char *copy = malloc(len);
  for (size_t i = 0; i < len; i++) {
    for (int bit = 0; bit < 8; bit += 7) {
      memcpy(copy, blob, len);
      copy[i] ^= (unsigned char)(1u << bit);
      mbx_sandbox *r = mbx_sandbox_restore(rt, p, copy, len, &err);
      if (r != NULL) {
        /* only acceptable if the byte is unused: the result must be the same */
        mbx_result *res;
        assert_int_equal(mbx_resume(r, "41", 2, &res, &err), MBX_OK);
        assert_string_equal(mbx_result_value_json(res, NULL), "42");
        mbx_result_free(res);
        mbx_sandbox_free(r);
      } else {
        assert_int_equal(err.code, MBX_INVALID_INPUT);
        assert_true(strlen(err.message) > 20);
      }
    }
    memcpy(copy, blob, len);
    copy[i] = (unsigned char)~copy[i];
    assert_null(mbx_sandbox_restore(rt, p, copy, len, &err));
  }
  /* every truncation */
  for (size_t n = 0; n < len; n++) {
    assert_null(mbx_sandbox_restore(rt, p, blob, n, &err));
    assert_int_equal(err.code, MBX_INVALID_INPUT);
  }
  /* one byte more */
  unsigned char *longer = malloc(len + 1);
  memcpy(longer, blob, len);
  longer[len] = 0;
  assert_null(mbx_sandbox_restore(rt, p, longer, len + 1, &err));
  free(longer);
  free(copy);
  mbx_free(blob);
  mbx_policy_free(p);
}

/* A blob re-sealed after a change (valid checksum and chain: they are not a signature) is
   refused by the replay, naming the record where it diverged. */
static void *reseal(const void *blob, size_t len, size_t change_record, const char *new_source,
                    size_t *out_len) {
  mbxC_snap_header h;
  mbxC_replay_log log, fresh;
  char why[300];
  assert_int_equal(mbxC_snap_decode(blob, len, 0, 0, &h, &log, why, sizeof why),
                   -1); /* wrong expected versions: refused, says which */
  assert_non_null(strstr(why, "Lua release"));
  const unsigned char *b = blob;
  uint32_t lua =
      (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
  assert_int_equal(
      mbxC_snap_decode(blob, len, lua, (uint32_t)mbx_version_number(), &h, &log, why, sizeof why),
      0);
  mbxC_replay_init(&fresh, mbxC_snap_chain0(&h));
  for (size_t i = 0; i < log.count; i++) {
    mbxC_record r;
    assert_true(mbxC_replay_get(&log, i, &r));
    mbxC_replay_begin(&fresh, r.type);
    if (i == change_record && r.type == MBXC_REC_RUN) {
      mbxC_reader rd = mbxC_reader_of(&r);
      size_t n;
      const char *name = mbxC_read_str(&rd, &n);
      mbxC_replay_put_str(&fresh, name, n);
      mbxC_read_str(&rd, &n);
      mbxC_replay_put_str(&fresh, new_source, strlen(new_source));
      mbxC_replay_put_u8(&fresh, mbxC_read_u8(&rd));
      const char *in = mbxC_read_str(&rd, &n);
      mbxC_replay_put_str(&fresh, in, n);
    } else if (i == change_record && r.type == MBXC_REC_WALL_TIME) {
      mbxC_replay_put_u64(&fresh, (uint64_t)INT64_MAX);
    } else {
      /* the payload verbatim: begin wrote the header, the bytes follow */
      for (size_t j = 0; j < r.len; j++)
        mbxC_replay_put_u8(&fresh, r.payload[j]);
    }
    mbxC_replay_end(&fresh);
  }
  void *out;
  assert_int_equal(mbxC_snap_encode(&h, &fresh, &out, out_len), 0);
  mbxC_snap_header_free(&h);
  mbxC_replay_free(&log);
  mbxC_replay_free(&fresh);
  return out;
}

static void restore_refuses_a_resealed_divergent_blob(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(1, 42);
  size_t len, n;
  void *blob = small_blob(p, &len);
  /* records: 0 seed, 1 run, 2 wall_time, 3 outcome */
  void *same = reseal(blob, len, 99, NULL, &n);
  assert_int_equal(n, len);
  assert_memory_equal(same, blob, len);
  mbx_free(same);
  void *other = reseal(blob, len, 1, "return tools.fetch(os.time() + 1) + 1", &n);
  assert_null(mbx_sandbox_restore(rt, p, other, n, &err));
  assert_non_null(strstr(err.message, "diverged"));
  assert_non_null(strstr(err.message, "record 3"));
  mbx_free(other);
  other = reseal(blob, len, 1, "return 1", &n);
  assert_null(mbx_sandbox_restore(rt, p, other, n, &err));
  assert_non_null(strstr(err.message, "record "));
  mbx_free(other);
  other = reseal(blob, len, 2, NULL, &n); /* a clock os.date could not show */
  assert_null(mbx_sandbox_restore(rt, p, other, n, &err));
  assert_non_null(strstr(err.message, "years 1 to 9999"));
  mbx_free(other);
  mbx_free(blob);
  mbx_policy_free(p);
}

static void snapshot_of_an_idle_fresh_sandbox_and_a_resnapshot(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(1, 0);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  assert_non_null(r);
  assert_int_equal(mbx_sandbox_paused(r), 0);
  /* the same seed as the original: the same random numbers */
  mbx_result *a, *b;
  const char *code = "return math.random(1 << 50)";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &a, &err), MBX_OK);
  assert_int_equal(mbx_run(r, code, strlen(code), NULL, 0, &b, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(a, NULL), mbx_result_value_json(b, NULL));
  mbx_result_free(a);
  mbx_result_free(b);
  /* snapshot of the restored one, after a live run, restores again */
  mbx_free(blob);
  assert_int_equal(mbx_sandbox_snapshot(r, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r2 = mbx_sandbox_restore(rt, p, blob, len, &err);
  assert_non_null(r2);
  assert_int_equal(mbx_run(r2, "return math.random(1 << 50)", 27, NULL, 0, &a, &err), MBX_OK);
  assert_int_equal(mbx_run(sb, "return math.random(1 << 50)", 27, NULL, 0, &b, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(a, NULL), mbx_result_value_json(b, NULL));
  mbx_result_free(a);
  mbx_result_free(b);
  mbx_free(blob);
  mbx_sandbox_free(r2);
  mbx_sandbox_free(r);
  mbx_sandbox_free(sb);
  /* NULL arguments */
  assert_int_equal(mbx_sandbox_snapshot(NULL, &blob, &len, &err), MBX_INVALID_ARGUMENT);
  assert_null(mbx_sandbox_restore(rt, p, NULL, 0, &err));
  assert_null(mbx_sandbox_restore(NULL, p, "x", 1, &err));
  mbx_policy_free(p);
}

static const char *value_of(mbx_sandbox *sb, const char *code) {
  static char out[256];
  mbx_result *res;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s >= MBX_API_ERROR_BASE) fail_msg("%s: %s", code, err.message);
  snprintf(out, sizeof out, "%s", mbx_result_value_json(res, NULL));
  mbx_result_free(res);
  return out;
}

/* A rewind takes the log back with the state; across a reset it cannot. */
static void rewind_takes_the_log_back(void **state) {
  (void)state;
  mbx_error err;
  mbx_policy *p = make_policy(1, 42);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_string_equal(value_of(sb, "x = math.random(1000); return 1"), "1");
  if (mbx_sandbox_checkpoint(sb, &err) == MBX_UNSUPPORTED) {
    mbx_sandbox_free(sb);
    mbx_policy_free(p);
    skip(); /* MBX_ARENA_MALLOC builds */
  }
  mbx_result *res;
  const char *code = "x = tools.fetch(); return x";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, &err), MBX_PAUSED);
  mbx_result_free(res);
  assert_int_equal(mbx_resume(sb, "5", 1, &res, &err), MBX_OK);
  mbx_result_free(res);
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("%s", err.message);
  char want[256];
  snprintf(want, sizeof want, "%s", value_of(sb, "return {x, math.random(1000)}"));
  assert_string_equal(value_of(r, "return {x, math.random(1000)}"), want);
  mbx_sandbox_free(r);
  mbx_free(blob);
  /* reset, then rewind to the checkpoint of the earlier session: no snapshot */
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_rewind(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_UNSUPPORTED);
  assert_non_null(strstr(err.message, "incomplete"));
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_free(blob);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
}

/* ---- sandboxes with mounts: host reads come from the log ---- */

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  fputs(text, f);
  fclose(f);
}

static void make_host_dir(char *dir, size_t size) {
  snprintf(dir, size, "/tmp/mbx_test_snapshot_XXXXXX");
  assert_non_null(mkdtemp(dir));
}

static void remove_host_dir(const char *dir) {
  char cmd[600];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
}

/* The value of a run that must succeed. */
static char *ok_value(mbx_sandbox *sb, const char *code) {
  mbx_result *res;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s >= MBX_API_ERROR_BASE) fail_msg("%s: %s", code, err.message);
  if (s != MBX_OK) fail_msg("%s: %s", code, mbx_result_error_message(res, NULL));
  size_t n;
  const char *v = mbx_result_value_json(res, &n);
  char *out = malloc(n + 1);
  assert_non_null(out);
  memcpy(out, v, n);
  out[n] = '\0';
  mbx_result_free(res);
  return out;
}

static mbx_policy *mount_policy(const char *ro_dir, int ro_mode, const char *ov_dir) {
  mbx_policy *p = make_policy(1, 42);
  mbx_error err;
  if (ro_dir) assert_int_equal(mbx_policy_mount(p, "/data", ro_dir, ro_mode, &err), MBX_OK);
  if (ov_dir) assert_int_equal(mbx_policy_mount(p, "/ov", ov_dir, MBX_MOUNT_OVERLAY, &err), MBX_OK);
  return p;
}

static const char mount_run1[] =
    "local f = assert(io.open('/data/a.txt')); local a = f:read('a'); f:close()\n"
    "local names = {} for _, e in ipairs(fs.list('/data')) do names[#names+1] = e.name end\n"
    "table.sort(names)\n"
    "local st = fs.stat('/data/sub/b.txt')\n"
    "local g = assert(io.open('/ov/notes.txt', 'a')); g:write(' edited'); g:close()\n"
    "local ov = {} for _, e in ipairs(fs.list('/ov')) do ov[#ov+1] = e.name end table.sort(ov)\n"
    "local h = assert(io.open('/tmp/r.txt', 'w')); h:write(a:upper()); h:close()\n"
    "local lines = {} for l in io.lines('/data/sub/b.txt') do lines[#lines+1] = l end\n"
    "local e = select(2, io.open('/data/nope'))\n"
    "return {a, table.concat(names, ','), st.size, #lines, e, table.concat(ov, ',')}";
static const char mount_run2[] =
    "local f = assert(io.open('/data/a.txt')); local n = f:seek('end'); f:close()\n"
    "assert(os.rename('/ov/keep.txt', '/ov/kept.txt'))\n"
    "return {n, io.open('/ov/notes.txt'):read('a'), io.open('/ov/kept.txt'):read('a')}";
static const char mount_after[] =
    "return {io.open('/ov/notes.txt'):read('a'), io.open('/tmp/r.txt'):read('a'),\n"
    "        io.open('/ov/kept.txt'):read('a'), fs.exists('/ov/keep.txt')}";

/* The session reads host files (ro and overlay), copies one up and renames another in the
   overlay; then the host's files are changed and removed. The restore still succeeds (it
   reads nothing from the host: any host read would see other bytes and diverge), and the
   restored sandbox's memory files and overlay edits are the original's. */
static void restore_with_mounts_reads_the_log_not_the_host(void **state) {
  (void)state;
  char ro[64], ov[64];
  make_host_dir(ro, sizeof ro);
  make_host_dir(ov, sizeof ov);
  char sub[128];
  snprintf(sub, sizeof sub, "%s/sub", ro);
  assert_int_equal(mkdir(sub, 0755), 0);
  put_file(ro, "a.txt", "alpha\n");
  put_file(ro, "sub/b.txt", "one\ntwo\nthree\n");
  put_file(ov, "notes.txt", "notes");
  put_file(ov, "keep.txt", "kept bytes");
  mbx_policy *p = mount_policy(ro, MBX_MOUNT_RO, ov);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  char *v1 = ok_value(sb, mount_run1);
  assert_string_equal(v1, "[\"alpha\\n\",\"a.txt,sub\",14,3,\"/data/nope: No such file or "
                          "directory\",\"keep.txt,notes.txt\"]");
  char *v2 = ok_value(sb, mount_run2);
  assert_string_equal(v2, "[6,\"notes edited\",\"kept bytes\"]");
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  /* The host changes under the snapshot: other bytes, files gone. */
  put_file(ro, "a.txt", "CHANGED, and longer\n");
  snprintf(sub, sizeof sub, "%s/sub/b.txt", ro);
  assert_int_equal(unlink(sub), 0);
  put_file(ov, "notes.txt", "other notes");
  snprintf(sub, sizeof sub, "%s/keep.txt", ov);
  assert_int_equal(unlink(sub), 0);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("%s", err.message);
  char *want = ok_value(sb, mount_after);
  assert_string_equal(want, "[\"notes edited\",\"ALPHA\\n\",\"kept bytes\",false]");
  char *got = ok_value(r, mount_after);
  assert_string_equal(got, want);
  /* Past the replay the restored sandbox is live: it sees the host as it is now. */
  char *now = ok_value(r, "return io.open('/data/a.txt'):read('a')");
  assert_string_equal(now, "\"CHANGED, and longer\\n\"");
  free(v1);
  free(v2);
  free(want);
  free(got);
  free(now);
  mbx_sandbox_free(r);
  mbx_sandbox_free(sb);
  mbx_free(blob);
  mbx_policy_free(p);
  remove_host_dir(ro);
  remove_host_dir(ov);
}

/* The same through a worker (MBX_CAP_ISOLATE): the port, its view and the log are the
   parent's, so the host answers are recorded and replayed there too. */
static void restore_with_mounts_through_a_worker(void **state) {
  mbx_runtime *in_process = rt;
  mbx_error err;
  rt = mbx_runtime_new(&err);
  assert_non_null(rt);
  assert_int_equal(mbx_runtime_set_path(rt, MBX_PATH_WORKER, MBX_TEST_WORKER, &err), MBX_OK);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_ISOLATE, MBX_ISOLATE_PROCESS, &err), MBX_OK);
  restore_with_mounts_reads_the_log_not_the_host(state);
  mbx_runtime_free(rt);
  rt = in_process;
}

/* A policy whose mounts changed since the snapshot is refused, naming the mount. */
static void restore_refuses_changed_mounts(void **state) {
  (void)state;
  char a[64], b[64];
  make_host_dir(a, sizeof a);
  make_host_dir(b, sizeof b);
  put_file(a, "x.txt", "x");
  mbx_policy *p = mount_policy(a, MBX_MOUNT_RO, NULL);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  free(ok_value(sb, "return io.open('/data/x.txt'):read('a')"));
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox_free(sb);
  struct {
    const char *dir;
    int mode;
    const char *extra;
    const char *says;
  } cases[] = {
      {a, MBX_MOUNT_OVERLAY, NULL,
       "the mount /data was ro in the snapshot; this policy mounts "
       "it overlay"},
      {b, MBX_MOUNT_RO, NULL, "the mount /data reaches another host directory"},
      {NULL, 0, NULL, "the snapshot's mount /data (ro) is not in this policy"},
      {a, MBX_MOUNT_RO, b, "this policy mounts /ov, which the snapshot did not have"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    mbx_policy *q = mount_policy(cases[i].dir, cases[i].mode, cases[i].extra);
    assert_null(mbx_sandbox_restore(rt, q, blob, len, &err));
    assert_int_equal(err.code, MBX_INVALID_INPUT);
    if (strstr(err.message, cases[i].says) == NULL)
      fail_msg("case %zu: '%s' does not say '%s'", i, err.message, cases[i].says);
    assert_non_null(strstr(err.message, "mounts changed"));
    mbx_policy_free(q);
  }
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("%s", err.message);
  mbx_sandbox_free(r);
  mbx_free(blob);
  mbx_policy_free(p);
  remove_host_dir(a);
  remove_host_dir(b);
}

/* rw mounts: reads snapshot like ro ones; once the guest wrote one, the snapshot is refused
   naming the mount (a write reached the host and is not replayed); a reset starts over. */
static void snapshot_refuses_a_written_rw_mount(void **state) {
  (void)state;
  char dir[64];
  make_host_dir(dir, sizeof dir);
  put_file(dir, "in.txt", "input");
  mbx_policy *p = mount_policy(dir, MBX_MOUNT_RW, NULL);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  free(ok_value(sb, "return io.open('/data/in.txt'):read('a')"));
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, blob, len, &err);
  if (r == NULL) fail_msg("%s", err.message);
  mbx_sandbox_free(r);
  mbx_free(blob);
  const char *writes[] = {"local f = io.open('/data/out.txt', 'w') f:write('x') f:close()",
                          "assert(fs.mkdir('/data/d'))", "assert(os.remove('/data/in.txt'))"};
  for (size_t i = 0; i < 3; i++) {
    assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
    assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
    mbx_free(blob);
    free(ok_value(sb, writes[i]));
    assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_UNSUPPORTED);
    if (strstr(err.message, "wrote to the rw mount /data") == NULL) fail_msg("%s", err.message);
  }
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  remove_host_dir(dir);
}

/* Past MBXC_SNAP_MAX_HOST_BYTES of host reads the snapshot is refused, saying how many
   bytes and which cap; a reset starts a new log. */
static void snapshot_refuses_past_the_host_read_cap(void **state) {
  (void)state;
  char dir[64];
  make_host_dir(dir, sizeof dir);
  char path[128];
  snprintf(path, sizeof path, "%s/big.bin", dir);
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  static char mib[1 << 20];
  memset(mib, 'z', sizeof mib);
  assert_int_equal(fwrite(mib, 1, sizeof mib, f), sizeof mib);
  fclose(f);
  mbx_policy *p = mount_policy(dir, MBX_MOUNT_RO, NULL);
  mbx_error err;
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, 64u << 20), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 4000000000u), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 120000), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  free(ok_value(sb, "local n = 0 for i = 1, 65 do local f = io.open('/data/big.bin') "
                    "n = n + #f:read('a') f:close() end return n"));
  void *blob;
  size_t len;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_UNSUPPORTED);
  char says[160];
  snprintf(says, sizeof says, "read %llu bytes of host files", 65ull << 20);
  if (strstr(err.message, says) == NULL || strstr(err.message, "cap of 67108864 bytes") == NULL)
    fail_msg("%s", err.message);
  assert_int_equal(mbx_sandbox_reset(sb, &err), MBX_OK);
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_free(blob);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  remove_host_dir(dir);
}

/* A re-sealed blob whose host answers are ones no host gives (names with a '/', a read
   longer than asked) is refused by the replay, naming the record. */
static void *reseal_fs(const void *blob, size_t len, mbxC_rec_type type, const char *bytes,
                       size_t bytes_len, size_t *out_len) {
  mbxC_snap_header h;
  mbxC_replay_log log, fresh;
  char why[300];
  const unsigned char *b = blob;
  uint32_t lua =
      (uint32_t)b[12] | (uint32_t)b[13] << 8 | (uint32_t)b[14] << 16 | (uint32_t)b[15] << 24;
  assert_int_equal(
      mbxC_snap_decode(blob, len, lua, (uint32_t)mbx_version_number(), &h, &log, why, sizeof why),
      0);
  mbxC_replay_init(&fresh, mbxC_snap_chain0(&h));
  int changed = 0;
  for (size_t i = 0; i < log.count; i++) {
    mbxC_record r;
    assert_true(mbxC_replay_get(&log, i, &r));
    mbxC_replay_begin(&fresh, r.type);
    if (!changed && r.type == type) {
      /* every field but the last (the bytes) verbatim, then the new bytes */
      mbxC_reader rd = mbxC_reader_of(&r);
      size_t n;
      mbxC_read_u32(&rd); /* mount */
      mbxC_read_str(&rd, &n);
      mbxC_read_u64(&rd);
      mbxC_read_u64(&rd);
      mbxC_read_u32(&rd); /* err, walk, type */
      mbxC_read_u8(&rd);
      mbxC_read_u8(&rd);
      for (int k = 0; k < 3; k++) /* size, mtime, nlink */
        mbxC_read_u64(&rd);
      mbxC_read_u8(&rd); /* failed, errnum, message */
      mbxC_read_u32(&rd);
      mbxC_read_str(&rd, &n);
      size_t keep = r.len - rd.left;
      for (size_t j = 0; j < keep; j++)
        mbxC_replay_put_u8(&fresh, r.payload[j]);
      mbxC_replay_put_str(&fresh, bytes, bytes_len);
      changed = 1;
    } else {
      for (size_t j = 0; j < r.len; j++)
        mbxC_replay_put_u8(&fresh, r.payload[j]);
    }
    mbxC_replay_end(&fresh);
  }
  assert_true(changed);
  void *out;
  assert_int_equal(mbxC_snap_encode(&h, &fresh, &out, out_len), 0);
  mbxC_snap_header_free(&h);
  mbxC_replay_free(&log);
  mbxC_replay_free(&fresh);
  return out;
}

static void restore_refuses_hostile_fs_answers(void **state) {
  (void)state;
  char dir[64];
  make_host_dir(dir, sizeof dir);
  put_file(dir, "a.txt", "abc");
  mbx_policy *p = mount_policy(dir, MBX_MOUNT_RO, NULL);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, &err);
  assert_non_null(sb);
  free(ok_value(sb, "local n = #fs.list('/data') return n .. io.open('/data/a.txt'):read(2)"));
  void *blob;
  size_t len, n;
  assert_int_equal(mbx_sandbox_snapshot(sb, &blob, &len, &err), MBX_OK);
  mbx_sandbox_free(sb);
  /* the same bytes re-sealed: accepted */
  void *same = reseal_fs(blob, len, MBXC_REC_FS_LIST, "a.txt", 6, &n);
  mbx_sandbox *r = mbx_sandbox_restore(rt, p, same, n, &err);
  if (r == NULL) fail_msg("%s", err.message);
  mbx_sandbox_free(r);
  mbx_free(same);
  struct {
    mbxC_rec_type type;
    const char *bytes;
    size_t len;
  } bad[] = {{MBXC_REC_FS_LIST, "../etc", 7},
             {MBXC_REC_FS_LIST, "a\0..\0", 5},
             {MBXC_REC_FS_LIST, "no-nul", 6},
             {MBXC_REC_FS_READ, NULL, 0}};
  /* a read answer longer than the read asked for (the stdlib asks 4096 bytes at a time) */
  static char longer[8192];
  memset(longer, 'q', sizeof longer);
  bad[3].bytes = longer;
  bad[3].len = sizeof longer;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    void *hostile = reseal_fs(blob, len, bad[i].type, bad[i].bytes, bad[i].len, &n);
    assert_null(mbx_sandbox_restore(rt, p, hostile, n, &err));
    if (strstr(err.message, "not an answer a host mount gives") == NULL)
      fail_msg("case %zu: %s", i, err.message);
    mbx_free(hostile);
  }
  mbx_free(blob);
  mbx_policy_free(p);
  remove_host_dir(dir);
}

int main(void) {
  mbx_error err;
  rt = mbx_runtime_new(&err);
  if (rt == NULL) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scenarios_survive_snapshot_and_restore),
      cmocka_unit_test(unseeded_restore_continues_like_the_original),
      cmocka_unit_test(restore_in_another_process),
      cmocka_unit_test(snapshot_refuses_a_nondeterministic_or_poisoned_sandbox),
      cmocka_unit_test(restore_refuses_another_policy),
      cmocka_unit_test(restore_refuses_every_flipped_byte),
      cmocka_unit_test(restore_refuses_a_resealed_divergent_blob),
      cmocka_unit_test(snapshot_of_an_idle_fresh_sandbox_and_a_resnapshot),
      cmocka_unit_test(rewind_takes_the_log_back),
      cmocka_unit_test(restore_with_mounts_reads_the_log_not_the_host),
      cmocka_unit_test(restore_with_mounts_through_a_worker),
      cmocka_unit_test(restore_refuses_changed_mounts),
      cmocka_unit_test(snapshot_refuses_a_written_rw_mount),
      cmocka_unit_test(snapshot_refuses_past_the_host_read_cap),
      cmocka_unit_test(restore_refuses_hostile_fs_answers),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  mbx_runtime_free(rt);
  return failed;
}
