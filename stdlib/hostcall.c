/* stdlib/hostcall.c -- the guest side of host functions: install them, and the trampolines
   that carry a call across the port (synchronous) or out of the run (external: a pause). */
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "include/moonbox.h" /* MBX_HOST_ARGS_MAX */
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"
#include "vm/json.h"
#include "vm/run.h" /* mbxV_set_pending */

/* Upvalues of every trampoline: the function's index in the port's grants, and its name. */
#define UPV_INDEX lua_upvalueindex(1)
#define UPV_NAME lua_upvalueindex(2)

/*
** Encode the arguments 1..n as one JSON array and push it. The codec runs in the guest heap
** and charges the guest's budget; functions, cycles, NaN and nesting past the codec's depth
** raise with a path naming the argument ("tools.search(#2).filter: cannot encode a function
** as JSON"). The total is capped before the host ever sees it.
*/
static const char *encode_args(lua_State *L, const char *name, size_t *len) {
  /* One pass into one buffer (a JSON text per argument, then their concatenation, cost a
     third of a small call); the cap is checked as the text grows. */
  mbxV_json_encode_args(L, 1, lua_gettop(L), name, MBX_HOST_ARGS_MAX);
  return lua_tolstring(L, -1, len);
}

/* Protected: decode the reply (argument 1: its bytes, 2: their length). */
static int decode_reply(lua_State *L) {
  const char *text = lua_touserdata(L, 1);
  size_t len = (size_t)lua_tointeger(L, 2);
  mbxV_json_decode(L, text, len);
  return 1;
}

/* A reply that is a JSON integer of at most 18 digits ("-?(0|[1-9][0-9]*)", nothing around
   it): the value the decoder would give, pushed without its protected call. Returns 0 (and
   pushes nothing) for any other text, which takes the decoder. */
static int push_small_integer(lua_State *L, const char *text, size_t len) {
  size_t i = len > 0 && text[0] == '-';
  size_t digits = len - i;
  if (digits == 0 || digits > 18 || (text[i] == '0' && digits > 1)) return 0;
  lua_Integer v = 0;
  for (; i < len; i++) {
    unsigned d = (unsigned)(unsigned char)text[i] - '0';
    if (d > 9) return 0;
    v = v * 10 + (lua_Integer)d;
  }
  lua_pushinteger(L, text[0] == '-' ? -v : v);
  return 1;
}

static int hostcall_sync(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  size_t index = (size_t)lua_tointeger(L, UPV_INDEX);
  const char *name = lua_tostring(L, UPV_NAME);
  /* The host's callback runs on this stack: it gets at least the guard's reserve. */
  mbxV_cstack_check(L);
  mbxV_count_host_call(L);
  /* The arguments' text stays in this C buffer (or the userdata the encoder pushes past it):
     the host only reads it, so it never becomes a Lua string. */
  char args_buffer[256];
  size_t args_len;
  const char *args = mbxV_json_encode_args_text(L, 1, lua_gettop(L), name, MBX_HOST_ARGS_MAX,
                                                args_buffer, sizeof args_buffer, &args_len);
  const char *reply = NULL;
  size_t reply_len = 0;
  /* The callback runs with nothing of Lua on the C stack between here and the host that
     could be unwound: any error for the guest is raised below, after it returned (design
     decision 8). The host's time is not the guest's: the deadline moves on by it. */
  uint64_t begun = mbxV_budget_host_begin(L);
  mbxC_wait wait = mbxL_host_wait(L);
  mbxC_call_result r = port->host_call(port->ud, index, args, args_len, &wait, &reply, &reply_len);
  mbxV_budget_host_end(L, begun);
  /* An interrupt that arrived while the host worked ends the run here (a light charge checks
     the interrupt and the trip at every call; the deadline was moved by the host's time). */
  mbxV_charge_light(L, reply_len / 64 + 1);
  if (r == MBXC_CALL_ERROR) {
    lua_pushlstring(L, reply, reply_len);
    return lua_error(L);
  }
  if (reply_len == 0) return 0;
  if (push_small_integer(L, reply, reply_len)) return 1;
  lua_pushcfunction(L, decode_reply);
  lua_pushlightuserdata(L, (void *)reply);
  lua_pushinteger(L, (lua_Integer)reply_len);
  if (lua_pcall(L, 2, 1, 0) != LUA_OK) {
    mbxV_check(L); /* a limit hit while decoding wins over the message */
    const char *why = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";
    return luaL_error(L, "%s: the host returned invalid JSON: %s", name, why);
  }
  if (mbxV_json_is_null(L, -1)) lua_pushnil(L); /* a top-level null is nil to the guest */
  return 1;
}

/* The pending call was answered: mbx_resume passed (true, value) or (false, message) down to
   here (vm/run.h), through every coroutine wrapper on the way. */
static int external_continue(lua_State *L, int status, lua_KContext ctx) {
  (void)status;
  (void)ctx;
  mbxL_state_of(L)->paused = 0;
  mbxV_check(L);
  if (!lua_toboolean(L, 1)) return lua_error(L); /* the message is on top */
  lua_remove(L, 1);
  return lua_gettop(L);
}

/* Lua 5.4 cannot suspend a C function without a continuation, and the stock library calls
   guest functions from C without one (sort, gsub, tostring, ipairs' __index, load's
   reader, message handlers). Name the nearest such C function so the author can move the
   call. */
static int cannot_pause(lua_State *L, const char *name) {
  lua_Debug ar;
  for (int level = 1; lua_getstack(L, level, &ar); level++) {
    if (!lua_getinfo(L, "Sn", &ar) || strcmp(ar.what, "C") != 0) continue;
    if (ar.name)
      return luaL_error(L,
                        "%s cannot pause here: called from a C function ('%s'; e.g. a sort "
                        "comparator, a gsub callback, __tostring or __index run by C, a load "
                        "reader, an xpcall handler); call it from plain Lua code",
                        name, ar.name);
    return luaL_error(L,
                      "%s cannot pause here: called from a C function (e.g. a sort comparator, "
                      "a gsub callback, __tostring or __index run by C, a load reader, an "
                      "xpcall handler); call it from plain Lua code",
                      name);
  }
  return luaL_error(L,
                    "%s cannot pause here: inside a coroutine resumed from a C function (e.g. "
                    "a sort comparator or __tostring); call it from plain Lua code",
                    name);
}

static int hostcall_external(lua_State *L) {
  mbxL_state *state = mbxL_state_of(L);
  const char *name = lua_tostring(L, UPV_NAME);
  mbxV_check(L);
  /* Decide before anything is counted or recorded: a refused pause costs the host
     nothing. pause_chain_broken covers the coroutine wrappers between here and the run
     thread (stdlib/coroutine.c). */
  if (!lua_isyieldable(L) || state->pause_chain_broken) return cannot_pause(L, name);
  mbxV_count_host_call(L);
  size_t args_len;
  encode_args(L, name, &args_len);
  /* The pending call as the result shows it (keys sorted; a validated name needs no
     escaping). vm/run.c reads it when the yield reaches the run. */
  lua_pushliteral(L, "{\"args\":");
  lua_insert(L, -2);
  lua_pushfstring(L, ",\"function\":\"%s\"}", name);
  lua_concat(L, 3);
  mbxV_set_pending(L);
  lua_settop(L, 0);
  /* The flag (and, for the run thread, the pending call), not the yield, makes this a
     pause: a trip also suspends a yieldable thread (finish_pcall in stdlib/base.c), and must
     never look like one. */
  state->paused = 1;
  return lua_yieldk(L, 0, 0, external_continue);
}

/* Push t[key] for the table at t, creating it (and registering a top-level module) if
   absent. */
static void get_or_make_table(lua_State *L, int t, const char *key, size_t key_len, int top) {
  lua_pushlstring(L, key, key_len);
  lua_pushvalue(L, -1);
  int type = lua_rawget(L, t);
  if (type == LUA_TTABLE) {
    lua_remove(L, -2);
    return;
  }
  if (type != LUA_TNIL)
    luaL_error(L, "host function module '%s' clashes with a global", lua_tostring(L, -2));
  lua_pop(L, 1);
  lua_newtable(L);
  lua_pushvalue(L, -2);
  lua_pushvalue(L, -2);
  lua_rawset(L, t);
  lua_remove(L, -2);
  if (top) mbxL_require_add(L, key, key_len, lua_gettop(L));
}

size_t mbxL_host_functions_shape(const mbxC_grants *g, char *out, size_t cap) {
  /* What mbxL_open_host_functions makes of the grants depends on their order (the index in
     each trampoline), names (the tables, the closures' name upvalues, the built-in names) and
     kinds (which trampoline), and on nothing else: signatures, callbacks and userdata are read
     through the port at call time. One kind byte and the NUL-terminated name per function
     (a validated name has no NUL), so two different lists never give the same bytes. */
  size_t len = 0;
  for (size_t i = 0; g && i < g->fn_count; i++) {
    size_t n = strlen(g->fns[i].name) + 1;
    if (out && len + 1 + n <= cap) {
      out[len] = (char)('0' + (int)g->fns[i].kind);
      memcpy(out + len + 1, g->fns[i].name, n);
    }
    len += 1 + n;
  }
  return len;
}

int mbxL_open_host_functions(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  if (port == NULL || port->grants == NULL || port->grants->fn_count == 0) return 0;
  lua_pushglobaltable(L);
  int globals = lua_gettop(L);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &mbxV_key_builtins);
  int builtins = lua_gettop(L);
  for (size_t i = 0; i < port->grants->fn_count; i++) {
    const mbxC_grant_fn *fn = &port->grants->fns[i];
    const char *part = fn->name;
    int table = globals;
    for (const char *dot; (dot = strchr(part, '.')) != NULL; part = dot + 1) {
      get_or_make_table(L, table, part, (size_t)(dot - part), table == globals);
      table = lua_gettop(L);
    }
    lua_pushstring(L, part);
    lua_pushinteger(L, (lua_Integer)i);
    lua_pushstring(L, fn->name);
    lua_pushcclosure(L,
                     fn->kind == MBXC_FN_EXTERNAL ? hostcall_external
                     : fn->kind == MBXC_FN_NATIVE ? mbxL_native_call
                                                  : hostcall_sync,
                     2);
    lua_rawset(L, table);
    /* Inputs must not shadow the top-level name (mbx_run refuses them like built-ins). */
    const char *dot = strchr(fn->name, '.');
    lua_pushlstring(L, fn->name, dot ? (size_t)(dot - fn->name) : strlen(fn->name));
    lua_pushboolean(L, 1);
    lua_rawset(L, builtins);
    lua_settop(L, builtins);
  }
  lua_settop(L, 0);
  return 0;
}
