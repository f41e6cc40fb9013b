/* stdlib/debug.c -- the debug library real libraries use: Lua levels and Lua functions only. */
#include <string.h>

#include <lauxlib.h>

#include "stdlib/base.h"
#include "stdlib/metatable.h"
#include "stdlib/stdlib.h"
#include "vm/cstack.h"
#include "vm/errors.h"
#include "vm/run.h"

/*
** Stock ldblib hands a guest the keys to the VM: sethook removes the budget's hook,
** getregistry reaches every internal table, getlocal at a C level reads the host pointers
** moonbox's C frames keep as light userdata (vm/run.c's step record, stdlib/hostcall.c's
** reply buffer), getupvalue/setupvalue on a C closure read or replace moonbox's own upvalues
** (setmetatable's names, the pcall handler, the iterators), setlocal on a temporary or an
** internal for-loop slot lets OP_SETLIST or OP_FORLOOP use a value of the wrong type (a
** crash), and getmetatable returns the string metatable or the FILE* one. This library is
** written here instead, over the same lua_Debug calls, and keeps to what guests may see:
**  - a level that is a C function shows no locals and no function (getinfo still describes
**    it, as "C", for tracebacks and level walks), and setlocal refuses it;
**  - upvalues of C functions are not visible (getupvalue returns nothing) and cannot be
**    set, joined or identified;
**  - setlocal sets named variables and varargs only, never "(temporary)" or "(for state)";
**  - getmetatable returns the guest's own table past its __metatable, as stock, and never
**    one of moonbox's (mbxL_debug_getmetatable); setmetatable is the base library's own,
**    captured when the library opens (its upvalue 1), so every policy of it holds;
**  - a main chunk's _ENV changed by setupvalue or upvaluejoin makes vm/run.c forget the
**    chunk it keeps for a repeated text (its function must stay as loaded);
**  - sethook/gethook, getregistry, getuservalue/setuservalue and setcstacklimit raise.
** getinfo's "n" reaches ldebug.c's getobjname, whose recursion upstream bounded only in
** 5.4.7 (7923dbbf): vm/load.c refuses chunks with a field chain long enough to matter.
*/

/* The thread an optional first argument names (*arg = 1), else L (*arg = 0). */
static lua_State *thread_arg(lua_State *L, int *arg) {
  if (lua_type(L, 1) == LUA_TTHREAD) {
    *arg = 1;
    return lua_tothread(L, 1);
  }
  *arg = 0;
  return L;
}

/* Room on both stacks for a value moved from L1 to L. */
static void need_stack(lua_State *L, lua_State *L1, int n) {
  if (L != L1 && !lua_checkstack(L1, n)) luaL_error(L, "stack overflow");
  luaL_checkstack(L, n, NULL);
}

/* Fill ar for level of L1 (raising stock's "level out of range" at argument arg when there
   is none); returns 1 when the level runs a Lua function, 0 for a C function. */
static int lua_level(lua_State *L, lua_State *L1, int arg, lua_Debug *ar) {
  lua_Integer level = luaL_checkinteger(L, arg);
  if (level < 0 || level > 0x7fffffff || !lua_getstack(L1, mbxL_guest_level(L, L1, (int)level), ar))
    luaL_argerror(L, arg, "level out of range");
  lua_getinfo(L1, "S", ar);
  return ar->what[0] != 'C';
}

/* 1 for a local the VM keeps for itself ("(temporary)", "(C temporary)", "(for state)"):
   a name in parentheses other than "(vararg)". */
static int internal_local(const char *name) {
  return name[0] == '(' && strcmp(name, "(vararg)") != 0;
}

/* A light userdata other than NULL (json.null) is a host pointer: no guest ever holds one. */
static int host_pointer(lua_State *L, int idx) {
  return lua_type(L, idx) == LUA_TLIGHTUSERDATA && lua_touserdata(L, idx) != NULL;
}

static void set_string(lua_State *L, const char *field, const char *value) {
  lua_pushstring(L, value);
  lua_setfield(L, -2, field);
}

static void set_integer(lua_State *L, const char *field, lua_Integer value) {
  lua_pushinteger(L, value);
  lua_setfield(L, -2, field);
}

static void set_boolean(lua_State *L, const char *field, int value) {
  lua_pushboolean(L, value);
  lua_setfield(L, -2, field);
}

static int db_getinfo(lua_State *L) {
  lua_Debug ar;
  int arg;
  lua_State *L1 = thread_arg(L, &arg);
  const char *options = luaL_optstring(L, arg + 2, "flnSrtu");
  /* The options stock accepts, each once; 'f' is handled here, never by lua_getinfo. */
  char asked[16];
  size_t n = 0;
  int want_f = 0;
  for (const char *o = options; *o; o++) {
    if (strchr("SlnrutfL", *o) == NULL) return luaL_argerror(L, arg + 2, "invalid option");
    if (*o == 'f')
      want_f = 1;
    else if (n < sizeof asked - 2 && memchr(asked, *o, n) == NULL)
      asked[n++] = *o;
  }
  asked[n] = '\0';
  need_stack(L, L1, 3);
  int is_lua;
  if (lua_isfunction(L, arg + 1)) {
    is_lua = !lua_iscfunction(L, arg + 1);
    memmove(asked + 1, asked, n + 1);
    asked[0] = '>';
    lua_pushvalue(L, arg + 1);
    lua_xmove(L, L1, 1);
    lua_getinfo(L1, asked, &ar); /* pops the function; pushes activelines for 'L' */
  } else {
    lua_Integer level = luaL_checkinteger(L, arg + 1);
    int actual = level < 0 || level > 0x7fffffff ? -1 : mbxL_guest_level(L, L1, (int)level);
    if (actual < 0 || !lua_getstack(L1, actual, &ar)) {
      luaL_pushfail(L);
      return 1;
    }
    lua_getinfo(L1, "S", &ar);
    is_lua = ar.what[0] != 'C';
    /* 'n' names the function from its caller's code: ldebug.c's getobjname, recursive in C
       (7923dbbf). vm/load.c bounds the chains it follows; the stack is checked all the
       same, as before any C recursion a guest starts. */
    if (strchr(asked, 'n')) mbxV_cstack_check(L);
    lua_getinfo(L1, asked, &ar);
    /* A metamethod moonbox calls for the VM through a C frame of its own (a walker, a live
       stub) is named as stock names it: by the code that fired the event, which named that
       frame (the frame itself is skipped in levels, so its name is the one to give). */
    lua_Debug caller;
    if (strchr(asked, 'n') && ar.name == NULL && actual < 0x7fffffff &&
        mbxL_metamethod_frame(L1, actual + 1) && lua_getstack(L1, actual + 1, &caller) &&
        lua_getinfo(L1, "n", &caller)) {
      ar.name = caller.name;
      ar.namewhat = caller.namewhat;
    }
  }
  int lines = strchr(asked, 'L') != NULL;
  if (lines) lua_xmove(L1, L, 1); /* activelines (nil for a C function) */
  lua_createtable(L, 0, 16);
  if (strchr(asked, 'S')) {
    lua_pushlstring(L, ar.source, ar.srclen);
    lua_setfield(L, -2, "source");
    set_string(L, "short_src", ar.short_src);
    set_integer(L, "linedefined", ar.linedefined);
    set_integer(L, "lastlinedefined", ar.lastlinedefined);
    set_string(L, "what", ar.what);
  }
  if (strchr(asked, 'l')) set_integer(L, "currentline", ar.currentline);
  if (strchr(asked, 'u')) {
    /* A C function's upvalues are moonbox's (getupvalue shows none): counted as none. */
    set_integer(L, "nups", is_lua ? ar.nups : 0);
    set_integer(L, "nparams", ar.nparams);
    set_boolean(L, "isvararg", ar.isvararg);
  }
  if (strchr(asked, 'n')) {
    set_string(L, "name", ar.name);
    set_string(L, "namewhat", ar.namewhat);
  }
  if (strchr(asked, 'r')) {
    set_integer(L, "ftransfer", ar.ftransfer);
    set_integer(L, "ntransfer", ar.ntransfer);
  }
  if (strchr(asked, 't')) set_boolean(L, "istailcall", ar.istailcall);
  if (lines) {
    lua_rotate(L, -2, 1);
    lua_setfield(L, -2, "activelines");
  }
  /* The function itself for Lua functions only: a C level is one of moonbox's (or Lua's)
     own closures, which no guest may call or inspect. */
  if (want_f && is_lua) {
    if (lua_isfunction(L, arg + 1)) {
      lua_pushvalue(L, arg + 1);
    } else {
      lua_getinfo(L1, "f", &ar);
      lua_xmove(L1, L, 1);
      /* A main chunk handed out may be the one vm/run.c keeps for the next run of its text:
         with stock Lua every run has a fresh function, so the kept one is let go. */
      if (ar.what[0] == 'm') mbxV_memo_forget_upvalue(L, lua_upvalueid(L, -1, 1));
    }
    lua_setfield(L, -2, "func");
  }
  return 1;
}

static int db_getlocal(lua_State *L) {
  int arg;
  lua_State *L1 = thread_arg(L, &arg);
  int nvar = (int)luaL_checkinteger(L, arg + 2);
  if (lua_isfunction(L, arg + 1)) { /* parameter names of a Lua function (none for C) */
    lua_pushvalue(L, arg + 1);
    lua_pushstring(L, lua_getlocal(L, NULL, nvar));
    return 1;
  }
  lua_Debug ar;
  if (!lua_level(L, L1, arg + 1, &ar)) {
    luaL_pushfail(L); /* a C level shows no locals */
    return 1;
  }
  need_stack(L, L1, 2);
  const char *name = lua_getlocal(L1, &ar, nvar);
  if (name == NULL) {
    luaL_pushfail(L);
    return 1;
  }
  lua_xmove(L1, L, 1);
  /* Registers past the named locals hold whatever the VM left there: shown as absent. */
  if (strcmp(name, "(temporary)") == 0 || strcmp(name, "(C temporary)") == 0 ||
      host_pointer(L, -1)) {
    lua_pop(L, 1);
    luaL_pushfail(L);
    return 1;
  }
  lua_pushstring(L, name);
  lua_rotate(L, -2, 1);
  return 2;
}

static int db_setlocal(lua_State *L) {
  int arg;
  lua_State *L1 = thread_arg(L, &arg);
  int nvar = (int)luaL_checkinteger(L, arg + 2);
  luaL_checkany(L, arg + 3);
  lua_settop(L, arg + 3);
  lua_Debug ar;
  if (!lua_level(L, L1, arg + 1, &ar))
    return luaL_error(L,
                      "debug.setlocal: level %d is a C function; this sandbox gives no "
                      "access to the locals of C levels",
                      (int)lua_tointeger(L, arg + 1));
  need_stack(L, L1, 2);
  /* The name first, by reading: lua_setlocal assigns before it says what it assigned. */
  const char *name = lua_getlocal(L1, &ar, nvar);
  if (name == NULL) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pop(L1, 1);
  if (internal_local(name))
    return luaL_error(L,
                      "debug.setlocal: '%s' is the VM's own slot, not a variable; this "
                      "sandbox sets named locals and varargs only",
                      name);
  lua_xmove(L, L1, 1);
  lua_pushstring(L, lua_setlocal(L1, &ar, nvar));
  return 1;
}

/* The upvalue n of the Lua function at argument f, checked: raises for a C function (whose
   upvalues are moonbox's) and, with must_exist, for an index out of range. */
static int lua_upvalue_arg(lua_State *L, int f, int n_arg, const char *fname, int must_exist) {
  lua_Integer n = luaL_checkinteger(L, n_arg);
  luaL_checktype(L, f, LUA_TFUNCTION);
  if (lua_iscfunction(L, f))
    luaL_error(L, "debug.%s: the upvalues of C functions are not reachable in this sandbox", fname);
  int ok = n >= 1 && n <= 255 && lua_getupvalue(L, f, (int)n) != NULL;
  if (ok) lua_pop(L, 1);
  if (must_exist && !ok) luaL_argerror(L, n_arg, "invalid upvalue index");
  return ok ? (int)n : 0;
}

static int db_getupvalue(lua_State *L) {
  lua_Integer n = luaL_checkinteger(L, 2);
  luaL_checktype(L, 1, LUA_TFUNCTION);
  if (lua_iscfunction(L, 1) || n < 1 || n > 255) return 0; /* C functions show none */
  const char *name = lua_getupvalue(L, 1, (int)n);
  if (name == NULL) return 0;
  lua_pushstring(L, name);
  lua_insert(L, -2);
  return 2;
}

static int db_setupvalue(lua_State *L) {
  luaL_checkany(L, 3);
  int n = lua_upvalue_arg(L, 1, 2, "setupvalue", 0);
  if (n == 0) return 0;
  lua_settop(L, 3);
  mbxV_memo_forget_upvalue(L, lua_upvalueid(L, 1, n));
  lua_pushstring(L, lua_setupvalue(L, 1, n));
  return 1;
}

static int db_upvalueid(lua_State *L) {
  int n = lua_upvalue_arg(L, 1, 2, "upvalueid", 0);
  if (n == 0) {
    luaL_pushfail(L);
    return 1;
  }
  lua_pushlightuserdata(L, lua_upvalueid(L, 1, n));
  return 1;
}

static int db_upvaluejoin(lua_State *L) {
  int n1 = lua_upvalue_arg(L, 1, 2, "upvaluejoin", 1);
  int n2 = lua_upvalue_arg(L, 3, 4, "upvaluejoin", 1);
  /* The upvalue replaced in f1 may be the kept main chunk's _ENV (f1 that chunk). */
  mbxV_memo_forget_upvalue(L, lua_upvalueid(L, 1, n1));
  lua_upvaluejoin(L, 1, n1, 3, n2);
  return 0;
}

/* debug.getmetatable(v): the guest's own metatable, past its __metatable as in stock; never
   one of moonbox's (mbxL_debug_getmetatable). */
static int db_getmetatable(lua_State *L) {
  luaL_checkany(L, 1);
  mbxL_debug_getmetatable(L, 1);
  return 1;
}

/* debug.setmetatable(t, mt): tables only, through the base setmetatable (upvalue 1) so its
   checks hold, except that a __metatable the guest set does not protect (as in stock);
   returns t as stock does. */
static int db_setmetatable(lua_State *L) {
  int t = lua_type(L, 2);
  luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
  if (lua_type(L, 1) != LUA_TTABLE)
    return luaL_error(L,
                      "debug.setmetatable: only tables can get a metatable in this sandbox "
                      "(got a %s value)",
                      luaL_typename(L, 1));
  lua_settop(L, 2);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_pushlightuserdata(L, (void *)&mbxL_setmetatable_unprotect);
  lua_call(L, 3, 1);
  return 1;
}

/* A luaL_Buffer as the traceback writer's sink. */
static void put_buffer(void *ud, const char *s, size_t n) {
  luaL_addlstring((luaL_Buffer *)ud, s, n);
}

static int db_traceback(lua_State *L) {
  int arg;
  lua_State *L1 = thread_arg(L, &arg);
  size_t len = 0;
  const char *msg = lua_tolstring(L, arg + 1, &len);
  if (msg == NULL && !lua_isnoneornil(L, arg + 1)) { /* any other value comes back as is */
    lua_pushvalue(L, arg + 1);
    return 1;
  }
  lua_Integer level = luaL_optinteger(L, arg + 2, L == L1 ? 1 : 0);
  if (level < 0) level = 0;
  if (level > 0x7fffffff) level = 0x7fffffff;
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  if (msg != NULL) {
    luaL_addlstring(&b, msg, len);
    luaL_addchar(&b, '\n');
  }
  mbxV_traceback_write(L1, mbxL_guest_level(L, L1, (int)level), put_buffer, &b);
  luaL_pushresult(&b);
  return 1;
}

static const char *const refusals_text[][2] = {
    {"sethook", "debug.sethook is not available in this sandbox (the budget owns the hook)"},
    {"gethook", "debug.gethook is not available in this sandbox (the budget owns the hook)"},
    {"getregistry", "debug.getregistry is not available in this sandbox (the registry holds "
                    "the sandbox's internals)"},
    {"getuservalue", "debug.getuservalue is not available in this sandbox"},
    {"setuservalue", "debug.setuservalue is not available in this sandbox"},
    {"setcstacklimit", "debug.setcstacklimit is not available in this sandbox (the C stack "
                       "is bounded by moonbox)"},
    {"debug", "debug.debug is not available in this sandbox (it reads the host's stdin)"}};

int mbxL_open_debug(lua_State *L) {
  static const luaL_Reg funcs[] = {
      {"getinfo", db_getinfo},         {"getlocal", db_getlocal},     {"setlocal", db_setlocal},
      {"getupvalue", db_getupvalue},   {"setupvalue", db_setupvalue}, {"upvalueid", db_upvalueid},
      {"upvaluejoin", db_upvaluejoin}, {"traceback", db_traceback},   {NULL, NULL}};
  const int nrefused = (int)(sizeof refusals_text / sizeof *refusals_text);
  lua_createtable(L, 0, (int)(sizeof funcs / sizeof *funcs) + 1 + nrefused);
  luaL_setfuncs(L, funcs, 0);
  lua_pushcfunction(L, db_getmetatable);
  lua_setfield(L, -2, "getmetatable");
  /* The base library's setmetatable as it is now, before any guest code could rebind the
     global. */
  lua_getglobal(L, "setmetatable");
  luaL_checktype(L, -1, LUA_TFUNCTION);
  lua_pushcclosure(L, db_setmetatable, 1);
  lua_setfield(L, -2, "setmetatable");
  mbxL_refusal list[sizeof refusals_text / sizeof *refusals_text + 1];
  for (int i = 0; i < nrefused; i++)
    list[i] = (mbxL_refusal){refusals_text[i][0], refusals_text[i][1]};
  list[nrefused] = (mbxL_refusal){NULL, NULL};
  mbxL_add_refusals(L, -1, list);
  lua_setglobal(L, "debug");
  return 0;
}
