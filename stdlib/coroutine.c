/* stdlib/coroutine.c -- coroutines under the budget: every resume installs the run's hook on
   the coroutine and charges it, trips are rethrown, and close nesting is bounded. */
#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/base.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/compat.h"
#include "vm/cstack.h"
#include "vm/vm.h"

static lua_State *check_coroutine(lua_State *L, int idx) {
  lua_State *co = lua_tothread(L, idx);
  luaL_argexpected(L, co, idx, "thread"); /* stock's word for it */
  return co;
}

/* resume_under_budget's answer when co stopped at an external host call (a pause, not a
   yield of its own): the caller passes the pause up by yielding itself (see pass_pause). */
#define RESUME_PAUSED (-2)

/* Resume co with narg arguments from L's top. Returns the number of results moved to L, -1
   with the error object on L's top, or RESUME_PAUSED. A trip inside co is rethrown here, in
   the resumer. */
static int resume_under_budget(lua_State *L, lua_State *co, int narg) {
  if (!lua_checkstack(co, narg)) {
    lua_pushliteral(L, "too many arguments to resume");
    return -1;
  }
  if (lua_status(co) == LUA_OK && lua_gettop(co) == 0) {
    lua_pushliteral(L, "cannot resume dead coroutine");
    return -1;
  }
  /* Hooks are per thread and a fresh coroutine's count restarts, so one that finishes between
     two hook calls would run uncharged (THREATS 0.5): charge a hook interval per resume. */
  mbxV_charge(L, MBXV_HOOK_COUNT_COROUTINE);
  mbxV_cstack_check(L);
  lua_xmove(L, co, narg);
  mbxL_state *state = mbxL_state_of(L);
  /* A pause inside co can reach the host only if this resumer can yield too (and every
     resumer above it): the external trampoline checks this flag before pausing. */
  int chain_broken = state->pause_chain_broken;
  state->pause_chain_broken = chain_broken || !lua_isyieldable(L);
  lua_State *previous = mbxV_budget_enter(L, co);
  int nres = 0;
  int status = lua_resume(co, L, narg, &nres);
  mbxV_budget_leave(L, previous);
  state->pause_chain_broken = chain_broken;
  mbxV_check(L);
  if (status == LUA_YIELD && state->paused) {
    lua_pop(co, nres); /* a pause yields nothing; the host's answer comes back down */
    return RESUME_PAUSED;
  }
  if (status == LUA_OK || status == LUA_YIELD) {
    if (!lua_checkstack(L, nres + 1)) {
      lua_pop(co, nres);
      lua_pushliteral(L, "too many results to resume");
      return -1;
    }
    lua_xmove(co, L, nres);
    return nres;
  }
  lua_xmove(co, L, 1);
  return -1;
}

/* The answer to a pause comes back as the values on top of L's stack (above the wrapper's
   own frame base): hand them down into co, which is suspended in the external trampoline
   (or in a wrapper like this one, further down). */
static int co_resume_continue(lua_State *L, int status, lua_KContext base);
static int co_wrapped_continue(lua_State *L, int status, lua_KContext base);

static int co_resume_finish(lua_State *L, int r) {
  if (r == RESUME_PAUSED) return lua_yieldk(L, 0, lua_gettop(L), co_resume_continue);
  if (r < 0) {
    lua_pushboolean(L, 0);
    lua_insert(L, -2);
    return 2;
  }
  lua_pushboolean(L, 1);
  lua_insert(L, -(r + 1));
  return r + 1;
}

static int co_resume(lua_State *L) {
  lua_State *co = check_coroutine(L, 1);
  return co_resume_finish(L, resume_under_budget(L, co, lua_gettop(L) - 1));
}

static int co_resume_continue(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lua_State *co = lua_tothread(L, 1);
  /* What comes back lands above co at index 1; the finish returns only the top values. */
  return co_resume_finish(L, resume_under_budget(L, co, lua_gettop(L) - (int)base));
}

/* Close co (run its pending __close handlers) with the nesting bounded. Returns the status of
   lua_resetthread, or -1 when nested too deeply (nothing was done). */
static int close_bounded(lua_State *L, lua_State *co) {
  mbxL_state *state = mbxL_state_of(L);
  /* After a trip, __close handlers of a coroutine that died by the hook's error would run
     with that thread's hooks still disabled: never run guest code then. */
  mbxV_check(L);
  /* 5.4.4's lua_resetthread runs the handlers with co's own stale C-call count, so Lua's
     200-level bound restarts here at every close: only the real depth bounds a chain of
     closes whose handlers nest C calls (issue 9, A.1). */
  if (state->close_nesting >= MBXL_MAX_CLOSE_NESTING || mbxV_cstack_low(L)) return -1;
  state->close_nesting++;
  lua_State *previous = mbxV_budget_enter(L, co);
  int status = mbxV_closethread(co, L);
  mbxV_budget_leave(L, previous);
  state->close_nesting--;
  mbxV_check(L);
  return status;
}

static int co_wrapped_finish(lua_State *L, lua_State *co, int r) {
  if (r == RESUME_PAUSED) return lua_yieldk(L, 0, lua_gettop(L), co_wrapped_continue);
  if (r >= 0) return r;
  int status = lua_status(co);
  if (status != LUA_OK && status != LUA_YIELD) {
    /* The coroutine died: close its to-be-closed variables, as the stock wrap does. */
    int closed = close_bounded(L, co);
    if (closed < 0) return luaL_error(L, "C stack overflow");
    lua_xmove(co, L, 1);
  }
  if (status != LUA_ERRMEM && lua_type(L, -1) == LUA_TSTRING) {
    luaL_where(L, 1);
    lua_insert(L, -2);
    lua_concat(L, 2);
  }
  return lua_error(L);
}

static int co_wrapped(lua_State *L) {
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  return co_wrapped_finish(L, co, resume_under_budget(L, co, lua_gettop(L)));
}

static int co_wrapped_continue(lua_State *L, int status, lua_KContext base) {
  (void)status;
  lua_State *co = lua_tothread(L, lua_upvalueindex(1));
  return co_wrapped_finish(L, co, resume_under_budget(L, co, lua_gettop(L) - (int)base));
}

static int co_wrap(lua_State *L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  lua_State *co = lua_newthread(L);
  lua_pushvalue(L, 1);
  lua_xmove(L, co, 1);
  lua_pushcclosure(L, co_wrapped, 1);
  return 1;
}

/* Only a dead or suspended coroutine may be closed (the stock rule). */
static const char *close_refusal(lua_State *L, lua_State *co, int idx) {
  if (co == L) return "cannot close a running coroutine";
  lua_Debug ar;
  if (lua_status(co) == LUA_OK && lua_getstack(co, 0, &ar))
    return "cannot close a normal coroutine";
  /* 5.4.4's lua_resetthread leaves a suspended xpcall's message handler armed while it runs
     the __close handlers: one that raises calls a stale stack slot, out of bounds once a
     collection shrank the stack (bug 3fe7be95, stdlib/base.c). A dead coroutine has none:
     every pcall it ran was finished or unwound by the error that killed it. */
  if (lua_status(co) == LUA_YIELD && mbxL_xpcall_active(L, idx))
    return "cannot close a coroutine suspended inside xpcall in this sandbox (Lua 5.4.4 bug "
           "3fe7be95); let the xpcall return first";
  return NULL;
}

static int co_close(lua_State *L) {
  lua_State *co = check_coroutine(L, 1);
  const char *refusal = close_refusal(L, co, 1);
  if (refusal) return luaL_error(L, "%s", refusal);
  int closed = close_bounded(L, co);
  if (closed < 0) {
    luaL_pushfail(L);
    lua_pushliteral(L, "C stack overflow");
    return 2;
  }
  if (closed == LUA_OK) {
    lua_pushboolean(L, 1);
    return 1;
  }
  lua_pushboolean(L, 0);
  lua_xmove(co, L, 1);
  return 2;
}

/* The chunk runs on a thread of its own (so a host call can pause it), but to the guest it
   is the main thread, as in stock Lua: not yieldable, and reported as main. */
static int is_run_thread(lua_State *L) {
  return L == mbxV_from(L)->budget.run_thread;
}

/* The run thread really is a coroutine (the host resumes it), so a guest yield there would
   reach the host and end the run, even under pcall. Stock raises on its main thread, and so
   does this, catchably; only a host function's pause (stdlib/hostcall.c) suspends the run
   thread. No position, as stock (the error comes from lua_yield's C frame). */
static int co_yield(lua_State *L) {
  if (is_run_thread(L)) {
    lua_pushliteral(L, "attempt to yield from outside a coroutine");
    return lua_error(L);
  }
  return lua_yield(L, lua_gettop(L));
}

static int co_running(lua_State *L) {
  lua_pushthread(L);
  lua_pushboolean(L, is_run_thread(L));
  return 2;
}

static int co_isyieldable(lua_State *L) {
  lua_State *co = lua_isnone(L, 1) ? L : check_coroutine(L, 1);
  lua_pushboolean(L, lua_isyieldable(co) && !is_run_thread(co));
  return 1;
}

int mbxL_open_coroutine(lua_State *L) {
  static const luaL_Reg replaced[] = {{"resume", co_resume}, {"wrap", co_wrap},
                                      {"close", co_close},   {"running", co_running},
                                      {"yield", co_yield},   {"isyieldable", co_isyieldable},
                                      {NULL, NULL}};
  luaL_requiref(L, LUA_COLIBNAME, luaopen_coroutine, 1);
  luaL_setfuncs(L, replaced, 0);
  lua_pop(L, 1);
  return 0;
}
