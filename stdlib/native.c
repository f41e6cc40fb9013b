/* stdlib/native.c -- the guest side of native functions: Lua values to checked C scalars, the
   call through the port, the C result back to a Lua value. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"

/* Upvalues, as for every host function trampoline (stdlib/hostcall.c): the function's index
   in the port's table, and its name. */
#define UPV_INDEX lua_upvalueindex(1)
#define UPV_NAME lua_upvalueindex(2)

static int type_error(lua_State *L, const char *name, int arg, const char *expected) {
  return luaL_error(L, "%s: argument #%d must be %s (got %s)", name, arg, expected,
                    luaL_typename(L, arg));
}

static int range_error(lua_State *L, const char *name, int arg, char t, int bits, int is_signed) {
  char range[48]; /* lua_pushfstring has no unsigned 64-bit format */
  if (is_signed)
    snprintf(range, sizeof range, "%lld..%lld",
             bits == 64 ? (long long)INT64_MIN : -(1ll << (bits - 1)),
             bits == 64 ? (long long)INT64_MAX : (1ll << (bits - 1)) - 1);
  else
    snprintf(range, sizeof range, "0..%llu",
             bits == 64 ? (unsigned long long)UINT64_MAX : (1ull << bits) - 1);
  return luaL_error(L, "%s: argument #%d out of range for %s (%s)", name, arg,
                    mbxC_ffi_type_name(t), range);
}

/*
** An integer argument, exact or refused: silently truncating 300 to an int8 or 1.5 to 1 would
** hand the host function a value the guest never wrote (a length, an index, a flag word), so
** every value must fit the declared width as it is.
*/
static void to_integer(lua_State *L, const char *name, int arg, char t, mbxC_ffi_value *v) {
  int is_signed;
  int bits = mbxC_ffi_int_bits(t, &is_signed);
  if (lua_type(L, arg) != LUA_TNUMBER) type_error(L, name, arg, "a number");
  int64_t as_signed = 0;
  uint64_t as_unsigned = 0;
  if (lua_isinteger(L, arg)) {
    lua_Integer n = lua_tointeger(L, arg);
    if (is_signed) {
      if (bits < 64 && (n < -(1ll << (bits - 1)) || n > (1ll << (bits - 1)) - 1))
        range_error(L, name, arg, t, bits, is_signed);
      as_signed = n;
    } else {
      if (n < 0 || (bits < 64 && (uint64_t)n > (1ull << bits) - 1))
        range_error(L, name, arg, t, bits, is_signed);
      as_unsigned = (uint64_t)n;
    }
  } else {
    lua_Number x = lua_tonumber(L, arg);
    if (x != floor(x) && !isinf(x)) /* NaN too */
      luaL_error(L, "%s: argument #%d must be an integer for %s (got %s)", name, arg,
                 mbxC_ffi_type_name(t), lua_tostring(L, arg));
    /* The bounds are powers of two, exact as doubles; the upper one is exclusive. */
    double lo = is_signed ? -ldexp(1.0, bits - 1) : 0.0;
    double hi = is_signed ? ldexp(1.0, bits - 1) : ldexp(1.0, bits);
    if (!(x >= lo && x < hi)) range_error(L, name, arg, t, bits, is_signed);
    if (is_signed)
      as_signed = (int64_t)x;
    else
      as_unsigned = (uint64_t)x;
  }
  switch (t) {
  case 'c':
    v->c = (int8_t)as_signed;
    break;
  case 's':
    v->s = (int16_t)as_signed;
    break;
  case 'i':
    v->i = (int32_t)as_signed;
    break;
  case 'l':
    v->l = as_signed;
    break;
  case 'C':
    v->C = (uint8_t)as_unsigned;
    break;
  case 'S':
    v->S = (uint16_t)as_unsigned;
    break;
  case 'I':
    v->I = (uint32_t)as_unsigned;
    break;
  default:
    v->L = as_unsigned;
    break;
  }
}

/* Convert argument arg for type letter t into *v, or raise naming the function and argument.
   Runs before the call: nothing is raised once the native code has been entered. */
static void to_c(lua_State *L, const char *name, int arg, char t, mbxC_ffi_value *v) {
  switch (t) {
  case 'b':
    if (lua_type(L, arg) != LUA_TBOOLEAN) type_error(L, name, arg, "a boolean");
    v->b = (uint8_t)lua_toboolean(L, arg);
    return;
  case 'f':
  case 'd':
    if (lua_type(L, arg) != LUA_TNUMBER) type_error(L, name, arg, "a number");
    if (t == 'f')
      v->f = (float)lua_tonumber(L, arg);
    else
      v->d = (double)lua_tonumber(L, arg);
    return;
  case 'z': {
    /* No coercion from numbers: the string the function sees is the one the guest passed. */
    if (lua_type(L, arg) != LUA_TSTRING) type_error(L, name, arg, "a string");
    size_t len;
    const char *s = lua_tolstring(L, arg, &len);
    /* A C string ends at its first NUL: the function would see less than the guest sent. */
    if (strlen(s) != len)
      luaL_error(L, "%s: argument #%d contains a NUL byte (a const char * argument cannot)", name,
                 arg);
    v->z = s; /* stays on the stack, so valid for the call */
    return;
  }
  default:
    to_integer(L, name, arg, t, v);
    return;
  }
}

static void push_result(lua_State *L, char t, const mbxC_ffi_value *r) {
  switch (t) {
  case 'b':
    lua_pushboolean(L, r->b);
    break;
  case 'c':
    lua_pushinteger(L, r->c);
    break;
  case 'C':
    lua_pushinteger(L, r->C);
    break;
  case 's':
    lua_pushinteger(L, r->s);
    break;
  case 'S':
    lua_pushinteger(L, r->S);
    break;
  case 'i':
    lua_pushinteger(L, r->i);
    break;
  case 'I':
    lua_pushinteger(L, r->I);
    break;
  case 'l':
    lua_pushinteger(L, r->l);
    break;
  case 'L':
    /* Lua integers are signed: past math.maxinteger the value is a float, not a negative. */
    if (r->L <= (uint64_t)LUA_MAXINTEGER)
      lua_pushinteger(L, (lua_Integer)r->L);
    else
      lua_pushnumber(L, (lua_Number)r->L);
    break;
  case 'f':
    lua_pushnumber(L, r->f);
    break;
  default:
    lua_pushnumber(L, r->d);
    break;
  }
}

int mbxL_native_call(lua_State *L) {
  const mbxC_port *port = mbxL_port(L);
  size_t index = (size_t)lua_tointeger(L, UPV_INDEX);
  const char *name = lua_tostring(L, UPV_NAME);
  const mbxC_ffi_sig *sig = &port->grants->fns[index].sig;
  mbxV_count_host_call(L);
  int given = lua_gettop(L);
  if (given > sig->nargs)
    luaL_error(L, "%s: too many arguments (takes %d, got %d)", name, sig->nargs, given);
  mbxC_ffi_value args[MBXC_FFI_MAX_ARGS];
  for (int i = 0; i < sig->nargs; i++)
    to_c(L, name, i + 1, sig->args[i], &args[i]);
  mbxC_ffi_value ret;
  const char *bytes = NULL;
  size_t len = 0;
  /* As for host callbacks: the native code runs with nothing between here and it that an
     error could unwind, and its time is the host's, not the guest's. */
  uint64_t begun = mbxV_budget_host_begin(L);
  mbxC_wait wait = mbxL_host_wait(L);
  mbxC_call_result r = port->native_call(port->ud, index, args, &wait, &ret, &bytes, &len);
  mbxV_budget_host_end(L, begun);
  mbxV_charge(L, len / 64 + 1); /* an interrupt that arrived meanwhile ends the run here */
  if (r == MBXC_CALL_ERROR) {
    lua_pushlstring(L, bytes, len);
    return lua_error(L);
  }
  switch (sig->ret) {
  case 'v':
    return 0;
  case 'o':
    lua_pushlstring(L, bytes, len);
    return 1;
  default:
    push_result(L, sig->ret, &ret);
    return 1;
  }
}
