/* stdlib/string.c -- the string library guests see: no dump, no unmetered C loops, a
   protected string metatable over a private copy, and string.format without addresses. */
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lualib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/cstack.h"

/* The stock format runs called from C (below), so its own errors carry no position and no
   name from the call site. Raise them again from this frame, as stock would have: an
   argument error through luaL_argerror (the name as called, 'format', and the argument
   number shifted for a method call), anything else with the caller's position. */
static int reraise_format_error(lua_State *L, const char *msg) {
  static const char prefix[] = "bad argument #";
  if (strncmp(msg, prefix, sizeof prefix - 1) == 0) {
    char *end;
    long arg = strtol(msg + sizeof prefix - 1, &end, 10);
    const char *open = strstr(end, "' (");
    size_t len = strlen(msg);
    if (arg > 0 && arg < 256 && strncmp(end, " to '", 5) == 0 && open && msg[len - 1] == ')') {
      const char *extra = open + 3;
      lua_pushlstring(L, extra, (size_t)(msg + len - 1 - extra));
      return luaL_argerror(L, (int)arg, lua_tostring(L, -1));
    }
  }
  luaL_where(L, 1);
  lua_pushstring(L, msg);
  lua_concat(L, 2);
  return lua_error(L);
}

/* Stock's checks of a "%p" specification fmt[pct..end] (lstrlib.c's getformat and
   checkformat): at most 21 bytes, only "-" flags, a width of at most two digits not starting
   with 0, no precision. */
static void check_pointer_spec(lua_State *L, const char *fmt, size_t pct, size_t end) {
  if (end - pct >= 22) luaL_error(L, "invalid format (too long)");
  size_t q = pct + 1;
  while (fmt[q] == '-')
    q++;
  if (fmt[q] != '0')
    for (int digits = 0; digits < 2 && fmt[q] >= '0' && fmt[q] <= '9'; digits++)
      q++;
  if (q != end) {
    lua_pushlstring(L, fmt + pct, end - pct + 1);
    luaL_error(L, "invalid conversion specification: '%s'", lua_tostring(L, -1));
  }
}

/* string.format with "%s" of tables, functions and the like rendered by mbxL_tolstring (the
   stock path prints heap addresses), and "%p" turned into "%s" of what tostring shows in
   place of the address (stock prints the address itself: THREATS E10). */
static int str_format(lua_State *L) {
  size_t len;
  const char *fmt = luaL_checklstring(L, 1, &len);
  mbxV_cstack_check(L);
  int top = lua_gettop(L), arg = 1;
  char *copy = NULL; /* the format with each "%p" made "%s", once there is one */
  for (size_t i = 0; i < len; i++) {
    if (fmt[i] != '%') continue;
    size_t pct = i;
    if (++i < len && fmt[i] == '%') continue;
    arg++;
    while (i < len && strchr("-+ #0123456789.", fmt[i]))
      i++;
    if (i >= len) break;
    /* Past the last argument stock raises "no value" at this conversion: nothing to hide. */
    if (fmt[i] == 'p' && arg <= top) {
      check_pointer_spec(L, fmt, pct, i);
      char buf[32];
      const char *text = mbxL_pointer_text(L, arg, buf, sizeof buf);
      if (copy == NULL) {
        copy = lua_newuserdatauv(L, len, 0);
        memcpy(copy, fmt, len);
      }
      copy[i] = 's';
      lua_pushstring(L, text != NULL ? text : "(null)");
      lua_replace(L, arg);
    }
    if (fmt[i] == 's' && arg <= top && lua_type(L, arg) != LUA_TSTRING &&
        lua_type(L, arg) != LUA_TNUMBER) {
      mbxL_tolstring(L, arg, NULL);
      lua_replace(L, arg);
    }
  }
  if (copy != NULL) {
    lua_pushlstring(L, copy, len);
    lua_replace(L, 1);
    lua_settop(L, top);
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  int status = lua_pcall(L, top, 1, 0);
  mbxV_check(L); /* a limit hit inside stays the limit */
  if (status == LUA_OK) return 1;
  if (status != LUA_ERRRUN || lua_type(L, -1) != LUA_TSTRING) return lua_error(L);
  return reraise_format_error(L, lua_tostring(L, -1));
}

int mbxL_open_string(lua_State *L) {
  luaL_requiref(L, LUA_STRLIBNAME, luaopen_string, 1);
  int lib = lua_gettop(L);
  /* string.dump leaks constants and produces bytecode; it goes from the very table the
     string metatable's __index points to, so ("").dump is gone too (THREATS E4). */
  lua_pushnil(L);
  lua_setfield(L, lib, "dump");
  mbxL_install_patterns(L, lib);
  mbxL_install_builders(L, lib);
  lua_getfield(L, lib, "format");
  lua_pushcclosure(L, str_format, 1);
  lua_setfield(L, lib, "format");
  /* Method calls ("x"):upper() go through a private copy of the library, so patching the
     guest's `string` table cannot change them, and getmetatable("") returns a decoy
     {__index = string}: the real metatable can be neither read nor replaced (THREATS E6,
     P0 item 3). */
  lua_pushliteral(L, "");
  if (lua_getmetatable(L, -1)) {
    int mt = lua_gettop(L);
    lua_newtable(L);
    lua_pushnil(L);
    while (lua_next(L, lib)) {
      lua_pushvalue(L, -2);
      lua_insert(L, -2);
      lua_rawset(L, -4);
    }
    lua_setfield(L, mt, "__index");
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, lib);
    lua_setfield(L, -2, "__index");
    lua_setfield(L, mt, "__metatable");
  }
  lua_settop(L, lib - 1);
  return 0;
}
