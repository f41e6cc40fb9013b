/* stdlib/proc.c -- proc.run and os.execute: real programs through the port's exec backend. */
#include <errno.h>
#include <string.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/output.h"
#include "vm/vm.h"

/* Arguments and environment entries one request may carry (the port caps bytes too). */
#define PROC_MAX_ARGS 4096
#define PROC_MAX_ENV 256
/* Instructions charged per program: starting one costs milliseconds of host work. */
#define PROC_RUN_COST 10000u

static const char no_exec[] = "proc.run is not available: this policy grants no exec";

/* A string field or list entry: no NUL bytes (argv and env are C strings). */
static const char *arg_string(lua_State *L, int idx, const char *what, size_t *total) {
  size_t len;
  if (lua_type(L, idx) != LUA_TSTRING && lua_type(L, idx) != LUA_TNUMBER)
    luaL_error(L, "proc.run: %s must be a string, not %s", what, luaL_typename(L, idx));
  const char *s = lua_tolstring(L, idx, &len);
  if (strlen(s) != len) luaL_error(L, "proc.run: %s contains a NUL byte", what);
  *total += len + 1;
  if (*total > (1u << 20)) luaL_error(L, "proc.run: argv and env exceed 1 MiB");
  return s;
}

static mbxC_wait guest_wait(lua_State *L) {
  mbxC_wait w = mbxL_host_wait(L);
  w.deadline_ns = mbxV_from(L)->budget.deadline_ns;
  return w;
}

/* Run req; on success push nothing and fill *res. On a port error: MBXC_E_TIMEDOUT ends the
   run with time_limit; others return -1 with *e. */
static int run_request(lua_State *L, const mbxC_exec_request *req, mbxC_exec_result *res,
                       mbxC_port_error *e) {
  const mbxC_port *port = mbxL_port(L);
  mbxV_charge(L, PROC_RUN_COST);
  mbxC_wait w = guest_wait(L);
  uint64_t t0 = mbxV_now_ns();
  /* A blocking port operation: no deadline signal while it runs (its own wait has the
     deadline and the interrupt flag). */
  mbxV_budget_port_enter(L);
  int r = port->exec_run(port->ud, req, &w, res, e);
  mbxV_budget_port_leave(L);
  mbxV_budget *b = &mbxV_from(L)->budget;
  b->exec_ms += (mbxV_now_ns() - t0) / 1000000u;
  if (r == 0 || e->errnum != ENOENT) b->exec_runs += r == 0 || e->errnum == MBXC_E_TIMEDOUT;
  if (r != 0 && e->errnum == MBXC_E_TIMEDOUT) {
    mbxV_trip_set(L, MBXV_TRIP_TIME);
    mbxV_check(L);
  }
  return r;
}

/* proc.run{"prog", args..., stdin=, timeout_ms=, env={...}, cwd=} ->
   {code=, signal=, stdout=, stderr=, timed_out=, truncated=, wall_ms=, memory_limit=,
   pids_limit=, limits=, changes=, changes_error=}, or nil, message, errno when nothing could
   run. */
static int proc_run(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  if (port == NULL || port->exec_run == NULL) return luaL_error(L, no_exec);
  luaL_checktype(L, 1, LUA_TTABLE);
  lua_Integer n = (lua_Integer)lua_rawlen(L, 1);
  if (n < 1)
    return luaL_error(L, "proc.run: give the program first: proc.run{\"sh\", \"-c\", \"...\"}");
  if (n > PROC_MAX_ARGS) return luaL_error(L, "proc.run: at most %d arguments", PROC_MAX_ARGS);
  mbxV_charge(L, (uint64_t)n);
  size_t total = 0;
  /* The strings stay referenced by the table (or the anchor below) during the call: no Lua
     code runs in between. */
  lua_newtable(L);
  int anchor = lua_gettop(L);
  const char **argv = lua_newuserdatauv(L, (size_t)n * sizeof *argv, 0);
  for (lua_Integer i = 1; i <= n; i++) {
    lua_rawgeti(L, 1, i);
    char what[32];
    snprintf(what, sizeof what, "argument %lld", (long long)i);
    argv[i - 1] = arg_string(L, -1, what, &total);
    lua_rawseti(L, anchor, (lua_Integer)i);
  }
  mbxC_exec_request req = {.argv = argv, .argc = (size_t)n};
  if (lua_getfield(L, 1, "stdin") != LUA_TNIL) {
    if (lua_type(L, -1) != LUA_TSTRING) return luaL_error(L, "proc.run: stdin must be a string");
    req.stdin_bytes = lua_tolstring(L, -1, &req.stdin_len);
    lua_rawseti(L, anchor, n + 1);
  } else {
    lua_pop(L, 1);
  }
  if (lua_getfield(L, 1, "timeout_ms") != LUA_TNIL) {
    int ok;
    lua_Integer t = lua_tointegerx(L, -1, &ok);
    if (!ok || t <= 0) return luaL_error(L, "proc.run: timeout_ms must be a positive integer");
    req.timeout_ms = (uint64_t)t;
  }
  lua_pop(L, 1);
  if (lua_getfield(L, 1, "cwd") != LUA_TNIL) {
    req.cwd = arg_string(L, -1, "cwd", &total);
    lua_rawseti(L, anchor, n + 2);
  } else {
    lua_pop(L, 1);
  }
  const char **env = NULL;
  if (lua_getfield(L, 1, "env") != LUA_TNIL) {
    if (!lua_istable(L, -1)) return luaL_error(L, "proc.run: env must be a table of strings");
    int et = lua_gettop(L);
    env = lua_newuserdatauv(L, PROC_MAX_ENV * sizeof *env, 0);
    lua_rawseti(L, anchor, n + 3);
    size_t envc = 0;
    lua_pushnil(L);
    while (lua_next(L, et)) {
      mbxV_charge(L, 1);
      if (lua_type(L, -2) != LUA_TSTRING) return luaL_error(L, "proc.run: env keys must be names");
      if (envc == PROC_MAX_ENV)
        return luaL_error(L, "proc.run: at most %d env entries", PROC_MAX_ENV);
      size_t kl;
      const char *k = lua_tolstring(L, -2, &kl);
      if (kl == 0 || strlen(k) != kl || strchr(k, '=') != NULL)
        return luaL_error(L, "proc.run: env name '%s' is not a variable name", k);
      const char *v = arg_string(L, -1, "an env value", &total);
      total += kl;
      lua_pushfstring(L, "%s=%s", k, v);
      env[envc] = lua_tostring(L, -1);
      lua_rawseti(L, anchor, n + 4 + (lua_Integer)envc);
      envc++;
      lua_pop(L, 1);
    }
    req.env = env;
    req.envc = envc;
  }
  lua_pop(L, 1);
  mbxC_exec_result res;
  mbxC_port_error e;
  if (run_request(L, &req, &res, &e) != 0) {
    luaL_pushfail(L);
    lua_pushfstring(L, "%s: %s", argv[0], e.message);
    lua_pushinteger(L, e.errnum);
    return 3;
  }
  lua_createtable(L, 0, 12);
  lua_pushinteger(L, res.exit_code);
  lua_setfield(L, -2, "code");
  lua_pushinteger(L, res.signal);
  lua_setfield(L, -2, "signal");
  lua_pushlstring(L, res.out, res.out_len);
  lua_setfield(L, -2, "stdout");
  lua_pushlstring(L, res.err, res.err_len);
  lua_setfield(L, -2, "stderr");
  lua_pushboolean(L, res.timed_out);
  lua_setfield(L, -2, "timed_out");
  lua_pushboolean(L, res.truncated);
  lua_setfield(L, -2, "truncated");
  lua_pushinteger(L, (lua_Integer)res.wall_ms);
  lua_setfield(L, -2, "wall_ms");
  lua_pushboolean(L, res.memory_limit);
  lua_setfield(L, -2, "memory_limit");
  lua_pushboolean(L, res.pids_limit);
  lua_setfield(L, -2, "pids_limit");
  /* The limits the run had, as words ("cgroup-memory cgroup-pids cgroup-kill rlimit-nproc"). */
  luaL_Buffer lb;
  luaL_buffinit(L, &lb);
#define PUSH_LIMIT(name, bit, word)                                                                \
  if (res.limits & (bit)) {                                                                        \
    if (luaL_bufflen(&lb)) luaL_addchar(&lb, ' ');                                                 \
    luaL_addstring(&lb, word);                                                                     \
  }
  MBXC_EXEC_LIMITS(PUSH_LIMIT)
#undef PUSH_LIMIT
  luaL_pushresult(&lb);
  lua_setfield(L, -2, "limits");
  /* What the process's writes to /tmp and overlay mounts did to the view: the entries applied,
     or why none were. */
  lua_pushinteger(L, (lua_Integer)res.changes);
  lua_setfield(L, -2, "changes");
  if (res.changes_error[0]) {
    lua_pushstring(L, res.changes_error);
    lua_setfield(L, -2, "changes_error");
  }
  return 1;
}

int mbxL_exec_shell(lua_State *L, const char *cmd, const char *in, size_t in_len,
                    mbxC_exec_result *res, mbxC_port_error *e) {
  const char *argv[] = {"/bin/sh", "-c", cmd};
  mbxC_exec_request req = {.argv = argv, .argc = 3, .stdin_bytes = in, .stdin_len = in_len};
  return run_request(L, &req, res, e);
}

int mbxL_push_exec_status(lua_State *L, int code, int signal) {
  if (signal) {
    luaL_pushfail(L);
    lua_pushliteral(L, "signal");
    lua_pushinteger(L, signal);
  } else {
    if (code == 0)
      lua_pushboolean(L, 1);
    else
      luaL_pushfail(L);
    lua_pushliteral(L, "exit");
    lua_pushinteger(L, code);
  }
  return 3;
}

/* os.execute(cmd): /bin/sh -c cmd in the exec backend, with stock Lua's results (true or
   fail, "exit" or "signal", the number); the command's stdout and stderr go to the run's
   output. os.execute() says whether exec is granted at all. */
int mbxL_os_execute(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  if (lua_isnoneornil(L, 1)) {
    lua_pushboolean(L, port && port->exec_run);
    return 1;
  }
  const char *cmd = luaL_checkstring(L, 1);
  if (port == NULL || port->exec_run == NULL)
    return luaL_error(L, "os.execute is not available: this policy grants no exec");
  mbxC_exec_result res;
  mbxC_port_error e;
  if (mbxL_exec_shell(L, cmd, NULL, 0, &res, &e) != 0)
    return luaL_error(L, "os.execute: %s", e.message);
  /* The program's output is the run's output, as a real shell's would be the terminal's. */
  mbxV_output_write(L, MBXV_STDOUT, res.out, res.out_len);
  mbxV_output_write(L, MBXV_STDERR, res.err, res.err_len);
  return mbxL_push_exec_status(L, res.exit_code, res.signal);
}

int mbxL_open_proc(lua_State *L) {
  static const luaL_Reg funcs[] = {{"run", proc_run}, {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setglobal(L, "proc");
  return 0;
}
