/* stdlib/os.c -- the virtual `os`: clock, dates, environment and exit, served by the port. */
#include <errno.h>
#include <limits.h>
#include <string.h>
#include <time.h>

#include <lauxlib.h>

#include "capabilities/port.h"
#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/vm.h"

/*
** The sandbox has no time zone: os.time, os.date with or without '!', and date tables are
** all UTC. The host's TZ would otherwise leak to the guest (and make the same script print
** different dates on different hosts). Time values are whole seconds, as in stock Lua.
*/

/* Enough for the longest expansion of one conversion specifier (stock uses 250 too). */
#define DATE_ITEM_MAX 250

static const mbxC_port *port_of(lua_State *L) {
  return mbxL_port(L);
}

static int64_t now_seconds(lua_State *L) {
  const mbxC_port *port = port_of(L);
  return port ? port->wall_time(port->ud) : 0;
}

/* ---- date tables (the field names, defaults and messages of stock lua 5.4) ---- */

static void set_field(lua_State *L, const char *key, int value, int delta) {
  lua_pushinteger(L, (lua_Integer)value + delta);
  lua_setfield(L, -2, key);
}

static void set_all_fields(lua_State *L, const struct tm *stm) {
  set_field(L, "year", stm->tm_year, 1900);
  set_field(L, "month", stm->tm_mon, 1);
  set_field(L, "day", stm->tm_mday, 0);
  set_field(L, "hour", stm->tm_hour, 0);
  set_field(L, "min", stm->tm_min, 0);
  set_field(L, "sec", stm->tm_sec, 0);
  set_field(L, "yday", stm->tm_yday, 1);
  set_field(L, "wday", stm->tm_wday, 1);
  lua_pushboolean(L, 0); /* UTC has no daylight saving time */
  lua_setfield(L, -2, "isdst");
}

/* A field of the table at the top: an integer, or d when absent (d < 0: required). */
static int get_field(lua_State *L, const char *key, int d, int delta) {
  int isnum;
  int t = lua_getfield(L, -1, key);
  lua_Integer res = lua_tointegerx(L, -1, &isnum);
  if (!isnum) {
    if (t != LUA_TNIL) return luaL_error(L, "field '%s' is not an integer", key);
    if (d < 0) return luaL_error(L, "field '%s' missing in date table", key);
    res = d;
  } else {
    if (!(res >= 0 ? res - delta <= INT_MAX : INT_MIN + delta <= res))
      return luaL_error(L, "field '%s' is out-of-bound", key);
    res -= delta;
  }
  lua_pop(L, 1);
  return (int)res;
}

static time_t check_time(lua_State *L, int arg) {
  lua_Integer t = luaL_checkinteger(L, arg);
  luaL_argcheck(L, (time_t)t == t, arg, "time out-of-bounds");
  return (time_t)t;
}

/* os.time([t]): now (from the port), or the UTC time of date table t, normalized as mktime
   does (month 13 is January of the next year), with t's fields updated to match. */
static int os_time(lua_State *L) {
  time_t t;
  if (lua_isnoneornil(L, 1)) {
    t = (time_t)now_seconds(L);
  } else {
    struct tm ts;
    memset(&ts, 0, sizeof ts);
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    ts.tm_year = get_field(L, "year", -1, 1900);
    ts.tm_mon = get_field(L, "month", -1, 1);
    ts.tm_mday = get_field(L, "day", -1, 0);
    ts.tm_hour = get_field(L, "hour", 12, 0);
    ts.tm_min = get_field(L, "min", 0, 0);
    ts.tm_sec = get_field(L, "sec", 0, 0);
    /* isdst is read by stock Lua but means nothing in UTC: ignored. */
    errno = 0;
    t = timegm(&ts); /* normalizes ts in place, as mktime does */
    if (t == (time_t)-1 && errno != 0)
      return luaL_error(L, "time result cannot be represented in this installation");
    set_all_fields(L, &ts);
  }
  lua_pushinteger(L, (lua_Integer)t);
  return 1;
}

/* The strftime conversions of C99 (what stock 5.4 accepts on POSIX): one-character ones,
   then the E and O modifiers. Anything else is refused with the stock message, so a
   platform-specific specifier cannot reach glibc. */
static const char *const date_options[] = {"aAbBcCdDeFgGhHIjmMnprRStTuUVwWxXyYzZ%",
                                           "EcECExEXEyEYOdOeOHOIOmOMOSOuOUOVOwOWOy"};

static const char *check_option(lua_State *L, const char *conv, size_t convlen, char *buff) {
  for (size_t oplen = 1; oplen <= 2 && oplen <= convlen; oplen++) {
    for (const char *option = date_options[oplen - 1]; *option; option += oplen) {
      if (memcmp(conv, option, oplen) == 0) {
        memcpy(buff, conv, oplen);
        buff[oplen] = '\0';
        return conv + oplen;
      }
    }
  }
  luaL_argerror(L, 1, lua_pushfstring(L, "invalid conversion specifier '%%%s'", conv));
  return conv;
}

/* os.date([format [, time]]): like stock, but always in UTC ("!" is accepted and changes
   nothing); "*t" and "!*t" give a date table. */
static int os_date(lua_State *L) {
  size_t slen;
  const char *s = luaL_optlstring(L, 1, "%c", &slen);
  time_t t = lua_isnoneornil(L, 2) ? (time_t)now_seconds(L) : check_time(L, 2);
  const char *se = s + slen;
  struct tm tmr;
  mbxV_charge(L, 1);
  if (*s == '!') s++;
  if (gmtime_r(&t, &tmr) == NULL)
    return luaL_error(L, "date result cannot be represented in this installation");
  if (strcmp(s, "*t") == 0) {
    lua_createtable(L, 0, 9);
    set_all_fields(L, &tmr);
    return 1;
  }
  char cc[4];
  luaL_Buffer b;
  size_t steps = 0;
  cc[0] = '%';
  luaL_buffinit(L, &b);
  while (s < se) {
    /* C the hook cannot see, as long as the format: charged as it goes, so a multi-MiB
       format of "%c" cannot run past the deadline. */
    if ((++steps & 1023) == 0) mbxV_charge(L, 1024);
    if (*s != '%') {
      luaL_addchar(&b, *s++);
    } else {
      s++;
      s = check_option(L, s, (size_t)(se - s), cc + 1);
      char *buff = luaL_prepbuffsize(&b, DATE_ITEM_MAX);
      luaL_addsize(&b, strftime(buff, DATE_ITEM_MAX, cc, &tmr));
    }
  }
  luaL_pushresult(&b);
  return 1;
}

static int os_difftime(lua_State *L) {
  time_t t1 = check_time(L, 1);
  time_t t2 = check_time(L, 2); /* required, as in stock 5.4 */
  lua_pushnumber(L, (lua_Number)difftime(t1, t2));
  return 1;
}

/* os.clock(): CPU seconds this run has used (not the host process's CPU time, which would
   show the work of the host and of other sandboxes). In deterministic mode: the run's
   instruction count / 1e8, a function of the work done rather than of the machine. */
static int os_clock(lua_State *L) {
  const mbxC_port *port = port_of(L);
  if (port && port->grants->deterministic) {
    lua_pushnumber(L, (lua_Number)mbxV_from(L)->budget.instructions / 1e8);
    return 1;
  }
  lua_pushnumber(L, port ? (lua_Number)port->cpu_time(port->ud) : 0.0);
  return 1;
}

/* os.getenv(name): the policy's virtual environment only; nil for everything else. */
static int os_getenv(lua_State *L) {
  size_t len, value_len = 0;
  const char *name = luaL_checklstring(L, 1, &len);
  const mbxC_port *port = port_of(L);
  const char *value = port ? port->env_get(port->ud, name, len, &value_len) : NULL;
  if (value == NULL)
    luaL_pushfail(L);
  else
    lua_pushlstring(L, value, value_len);
  return 1;
}

/* os.exit([code [, close]]): ends the run, never the host. The exit is a sticky trip, so a
   pcall around it, a __close handler or an xpcall handler cannot keep the script going.
   Code true or absent means 0 and false means 1, as in stock Lua. */
static int os_exit(lua_State *L) {
  lua_Integer code;
  if (lua_isboolean(L, 1))
    code = lua_toboolean(L, 1) ? 0 : 1;
  else
    code = luaL_optinteger(L, 1, 0);
  /* Any limit already crossed wins over the exit (an exit must not hide it). */
  mbxV_charge(L, 1);
  mbxV_trip_exit(L, (int64_t)code);
  mbxV_check(L);
  return 0;
}

/* os.setlocale: the sandbox always runs in the C locale. Queries and requests for "C",
   "POSIX" or the default ("") answer "C"; any other locale is unavailable, which stock Lua
   reports with nil as well. */
static int os_setlocale(lua_State *L) {
  const char *name = luaL_optstring(L, 1, NULL);
  static const char *const categories[] = {"all",     "collate", "ctype", "monetary",
                                           "numeric", "time",    NULL};
  luaL_checkoption(L, 2, "all", categories);
  if (name == NULL || strcmp(name, "") == 0 || strcmp(name, "C") == 0 || strcmp(name, "POSIX") == 0)
    lua_pushliteral(L, "C");
  else
    luaL_pushfail(L);
  return 1;
}

int mbxL_open_os(lua_State *L) {
  static const luaL_Reg funcs[] = {{"time", os_time},
                                   {"date", os_date},
                                   {"difftime", os_difftime},
                                   {"clock", os_clock},
                                   {"getenv", os_getenv},
                                   {"exit", os_exit},
                                   {"setlocale", os_setlocale},
                                   {"remove", mbxL_os_remove},
                                   {"rename", mbxL_os_rename},
                                   {"tmpname", mbxL_os_tmpname},
                                   {"execute", mbxL_os_execute},
                                   {NULL, NULL}};
  luaL_newlib(L, funcs);
  lua_setglobal(L, "os");
  return 0;
}
