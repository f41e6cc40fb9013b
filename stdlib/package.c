/* stdlib/package.c -- package, require, loadfile and dofile over the sandbox's file view. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/bytecode_cache.h"
#include "vm/cstack.h"
#include "vm/load.h"

/*
** Stock Lua's package library (loadlib.c), with Lua searchers only and every file read
** through the port, never the host: require (searchers: package.preload, the host's registered
** modules, package.path's files, moonbox's built-ins), package.path/loaded/preload/searchers/
** searchpath/config, loadfile and dofile see the sandbox's view (mounts, policy files,
** /tmp) plus what the view serves to module reads only (capabilities/vfs.h: the CLI's
** script folder, the host's registered modules). There is no cpath, no C searcher and no
** loadlib: a shared object is host code.
**
** Differences a guest can see, each in docs/compat.md:
**   - package.loaded is the guest's own table, not the registry's _LOADED (luaL_argerror
**     searches that one to name functions: a guest-sized, unmetered loop; stdlib/stdlib.c);
**     like stock, require keeps the table it was opened with, whatever package.loaded holds
**     later.
**   - The modules that are not stock libraries (json and its aliases, fs, fuzz, the host's
**     function modules) are not pre-loaded: a last searcher serves them, after the file
**     searcher, so a user's json.lua found on package.path wins and require "json" still
**     works without one.
**   - A module file is at most MBXL_MODULE_MAX bytes; loadfile() without a name (stdin) and
**     mode "b" are refused.
*/

static const char key_builtins = 0; /* registry: module name -> built-in module table */

/* Built-in modules that stock Lua does not pre-load, and the global each one is. Aliases let
   code written for lua-cjson or dkjson run unchanged (the API they share: encode, decode,
   null). */
static const char *const builtins[][2] = {
    {"json", "json"}, {"cjson", "json"}, {"dkjson", "json"}, {"fs", "fs"}};
/* The stock libraries package.loaded starts with (linit.c's list; debug is moonbox's own,
   stdlib/debug.c). */
static const char *const preloaded[] = {"_G", "coroutine", "debug", "io",  "math",
                                        "os", "string",    "table", "utf8"};

#define DEFAULT_PATH "./?.lua;./?/init.lua"
/* Instructions charged per candidate file tried and per file opened: a port call, about
   the work of 64 VM instructions. */
#define OPEN_COST 64
/* Bytes read per port call. */
#define READ_BLOCK ((size_t)64 << 10)

/* ---- reading a module file through the port ---- */

static mbxC_wait guest_wait(lua_State *L) {
  mbxC_wait w = mbxL_host_wait(L);
  w.deadline_ns = mbxV_from(L)->budget.deadline_ns;
  return w;
}

static void set_error(mbxC_port_error *e, int errnum, const char *message) {
  e->errnum = errnum;
  snprintf(e->message, sizeof e->message, "%s", message);
}

/* A port operation that reached the run's deadline ends the run (guest time). */
static void check_timeout(lua_State *L, const mbxC_port_error *e) {
  if (e->errnum == MBXC_E_TIMEDOUT) {
    mbxV_trip_set(L, MBXV_TRIP_TIME);
    mbxV_check(L);
  }
}

/* Open path for a module read: 0 with *handle, or -1 with *e. */
static int open_module(lua_State *L, const char *path, size_t len, int by_name, int *handle,
                       mbxC_port_error *e) {
  const mbxC_port *port = mbxL_port(L);
  mbxV_charge(L, OPEN_COST);
  if (port == NULL || port->fs_open == NULL) {
    set_error(e, ENOENT, "No such file or directory (this sandbox has no filesystem)");
    return -1;
  }
  mbxC_wait w = guest_wait(L);
  int flags = MBXC_FS_READ | MBXC_FS_MODULE | (by_name ? MBXC_FS_MODULE_NAME : 0);
  if (port->fs_open(port->ud, path, len, flags, &w, handle, e) != 0) {
    check_timeout(L, e);
    return -1;
  }
  return 0;
}

static void close_module(lua_State *L, int handle) {
  const mbxC_port *port = mbxL_port(L);
  mbxC_port_error ignored;
  port->fs_close(port->ud, handle, &ignored);
}

/*
** Push the whole text of the file at path, or return -1 with *e (nothing pushed). Its size
** is asked first, so a file over MBXL_MODULE_MAX is refused before a byte of it is read; a
** file that grows while read is cut off at the cap as well. A raise between the open and
** the close (a trip, out of memory) leaves the handle to the run's end, which closes every
** handle.
*/
static int read_module(lua_State *L, const char *path, size_t len, int by_name,
                       mbxC_port_error *e) {
  int h;
  if (open_module(L, path, len, by_name, &h, e) != 0) return -1;
  const mbxC_port *port = mbxL_port(L);
  int64_t size = 0;
  if (port->fs_seek(port->ud, h, SEEK_END, 0, &size, e) != 0 ||
      port->fs_seek(port->ud, h, SEEK_SET, 0, &(int64_t){0}, e) != 0) {
    close_module(L, h);
    return -1;
  }
  if (size > MBXL_MODULE_MAX) {
    close_module(L, h);
    e->errnum = EFBIG;
    snprintf(e->message, sizeof e->message,
             "the file is %lld bytes; a module file may be at most %d bytes in this sandbox",
             (long long)size, MBXL_MODULE_MAX);
    return -1;
  }
  if (size > (int64_t)READ_BLOCK && !mbxL_heap_fits(L, 2 * (size_t)size)) {
    mbxV_trip_set(L, MBXV_TRIP_MEMORY);
    mbxV_check(L);
  }
  mbxC_wait w = guest_wait(L);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  size_t total = 0;
  for (;;) {
    char *p = luaL_prepbuffsize(&b, READ_BLOCK);
    size_t got = 0;
    if (port->fs_read(port->ud, h, p, READ_BLOCK, &w, &got, e) != 0) {
      close_module(L, h);
      luaL_pushresult(&b);
      lua_pop(L, 1);
      check_timeout(L, e);
      return -1;
    }
    if (got == 0) break;
    total += got;
    luaL_addsize(&b, got);
    mbxV_charge(L, got / 16 + 1);
    if (total > MBXL_MODULE_MAX) {
      close_module(L, h);
      luaL_pushresult(&b);
      lua_pop(L, 1);
      e->errnum = EFBIG;
      snprintf(e->message, sizeof e->message,
               "the file grew past %d bytes, the most a module file may be in this sandbox",
               MBXL_MODULE_MAX);
      return -1;
    }
  }
  close_module(L, h);
  luaL_pushresult(&b);
  return 0;
}

/*
** Compile the text on top of the stack as chunk "@path" (replacing it with the function or
** a message) and return lua_load's status. As luaL_loadfilex: a UTF-8 byte-order mark and a
** first line starting with '#' are skipped, the line's newline kept so line numbers hold.
** Text only: a binary chunk gets stock's "attempt to load a binary chunk (mode is 't')".
*/
static int compile_top_cached(lua_State *L, const char *path, int host_given) {
  size_t len;
  const char *text = lua_tolstring(L, -1, &len);
  size_t start = 0;
  if (len >= 3 && memcmp(text, "\xEF\xBB\xBF", 3) == 0) start = 3;
  if (start < len && text[start] == '#') {
    const char *nl = memchr(text + start, '\n', len - start);
    start = nl ? (size_t)(nl - text) : len;
  }
  lua_pushfstring(L, "@%s", path);
  const char *chunk_name = lua_tostring(L, -1);
  mbxV_charge(L, (len - start) / 16 + 1);
  mbxV_cstack_check(L); /* the parser recurses up to 200 levels in C */
  /* A host-given source (a registered module) may come from the runtime's bytecode cache,
     keyed and verified by its full text and name; guest files never do (one tenant could
     evict others' entries or time what another compiled). */
  mbxV_bcache *cache = host_given ? mbxV_from(L)->module_cache : NULL;
  int status = cache ? mbxV_bcache_load(cache, L, text + start, len - start, chunk_name, NULL)
                     : mbxV_load_text(L, text + start, len - start, chunk_name);
  mbxV_check(L);
  lua_replace(L, -3); /* the function or message where the text was */
  lua_pop(L, 1);      /* the chunk name */
  return status;
}

static int compile_top(lua_State *L, const char *path) {
  return compile_top_cached(L, path, 0);
}

/* luaL_loadfilex over the port: push the function, or a message and return an error
   status. */
static int load_file(lua_State *L, const char *path, size_t len) {
  mbxC_port_error e;
  if (read_module(L, path, len, 0, &e) != 0) {
    lua_pushfstring(L, "cannot open %s: %s", path, e.message);
    return LUA_ERRFILE;
  }
  return compile_top(L, path);
}

/* ---- loadfile and dofile ---- */

static const char no_stdin[] = "reading a chunk from standard input is not supported in this "
                               "sandbox: give a file name";

static int base_loadfile(lua_State *L) {
  size_t len;
  const char *path = luaL_optlstring(L, 1, NULL, &len);
  const char *mode = luaL_optstring(L, 2, NULL);
  int env = !lua_isnone(L, 3) ? 3 : 0;
  if (path == NULL) {
    luaL_pushfail(L);
    lua_pushfstring(L, "loadfile: %s", no_stdin);
    return 2;
  }
  if (mode && strchr(mode, 't') == NULL) {
    luaL_pushfail(L);
    lua_pushfstring(L, "attempt to load a text chunk (mode is '%s')", mode);
    return 2;
  }
  if (load_file(L, path, len) != LUA_OK) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  if (env) {
    lua_pushvalue(L, env);
    if (!lua_setupvalue(L, -2, 1)) lua_pop(L, 1);
  }
  return 1;
}

static int dofile_done(lua_State *L, int status, lua_KContext base) {
  (void)status;
  return lua_gettop(L) - (int)base;
}

static int base_dofile(lua_State *L) {
  size_t len;
  const char *path = luaL_optlstring(L, 1, NULL, &len);
  lua_settop(L, 1);
  if (path == NULL) return luaL_error(L, "dofile: %s", no_stdin);
  if (load_file(L, path, len) != LUA_OK) return lua_error(L);
  mbxV_cstack_check(L); /* the chunk runs in a nested call from here */
  lua_callk(L, 0, LUA_MULTRET, 1, dofile_done);
  return dofile_done(L, LUA_OK, 1);
}

/* ---- package.searchpath ---- */

/*
** Push path with every '?' replaced by name (in which each sep is replaced by rep first),
** metered by the bytes written: both strings are the guest's, so the product can be large;
** memory bounds it, the meter bounds the time.
*/
static const char *push_candidates(lua_State *L, const char *name, const char *path,
                                   const char *sep, const char *rep) {
  if (*sep != '\0' && strchr(name, *sep) != NULL)
    name = luaL_gsub(L, name, sep, rep);
  else
    lua_pushstring(L, name);
  size_t name_len = strlen(name);
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  mbxV_meter m = mbxV_meter_init(L, 4096, 16);
  for (const char *p = path; *p; p++) {
    if (*p == '?') {
      luaL_addlstring(&b, name, name_len);
      mbxV_meter_add(&m, name_len + 1);
    } else {
      luaL_addchar(&b, *p);
      mbxV_meter_add(&m, 1);
    }
  }
  mbxV_meter_flush(&m);
  luaL_pushresult(&b);
  lua_remove(L, -2); /* the name */
  return lua_tostring(L, -1);
}

/*
** The first candidate of path (';'-separated, '?' the name) that opens for a module read:
** its handle in *handle and its name pushed; or -1 with stock's "no file 'a'\n\tno file 'b'"
** list pushed. Every candidate is tried, empty ones too, as stock's searchpath does. A
** candidate that is there but out of reach gets the reason after its "no file" (stock says
** only that): a symlink leading out of its mount is one, and Debian's /usr/share/lua/5.4 is
** made of them, so a user who mounted that folder saw "no file" for a file they could list.
*/
static int find_file(lua_State *L, const char *name, const char *path, const char *sep,
                     const char *rep, int *handle) {
  const char *list = push_candidates(L, name, path, sep, rep);
  int list_idx = lua_gettop(L);
  luaL_Buffer b; /* the message; open_module's use of the stack is balanced */
  luaL_buffinit(L, &b);
  mbxV_meter m = mbxV_meter_init(L, 4096, 16);
  for (const char *p = list;;) {
    const char *end = strchr(p, ';');
    size_t n = end ? (size_t)(end - p) : strlen(p);
    mbxC_port_error e;
    if (open_module(L, p, n, 0, handle, &e) == 0) {
      lua_settop(L, list_idx); /* drops the buffer; list stays anchored */
      lua_pushlstring(L, p, n);
      lua_remove(L, list_idx);
      return 0;
    }
    luaL_addstring(&b, p == list ? "no file '" : "\n\tno file '");
    luaL_addlstring(&b, p, n);
    luaL_addchar(&b, '\'');
    if (e.errnum != ENOENT) {
      luaL_addstring(&b, " (");
      luaL_addstring(&b, e.message);
      luaL_addchar(&b, ')');
    }
    mbxV_meter_add(&m, n + 12);
    if (end == NULL) break;
    p = end + 1;
  }
  mbxV_meter_flush(&m);
  luaL_pushresult(&b);
  lua_remove(L, list_idx);
  return -1;
}

static int package_searchpath(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  const char *path = luaL_checkstring(L, 2);
  const char *sep = luaL_optstring(L, 3, ".");
  const char *rep = luaL_optstring(L, 4, LUA_DIRSEP);
  int h;
  if (find_file(L, name, path, sep, rep, &h) != 0) {
    luaL_pushfail(L);
    lua_insert(L, -2);
    return 2;
  }
  close_module(L, h);
  return 1;
}

/* ---- the searchers ---- */

/* Upvalue 1: the preload table require was opened with. */
static int searcher_preload(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  lua_pushlstring(L, name, len);
  if (lua_gettable(L, lua_upvalueindex(1)) == LUA_TNIL) {
    lua_pushfstring(L, "no field package.preload['%s']", name);
    return 1;
  }
  lua_pushliteral(L, ":preload:");
  return 2;
}

/* The host's registered modules (mbx_policy_add_module), before the files. */
static int searcher_registered(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  mbxC_port_error e;
  if (read_module(L, name, len, 1, &e) != 0) {
    if (e.errnum != ENOENT) return luaL_error(L, "error loading module '%s': %s", name, e.message);
    lua_pushfstring(L, "no registered module '%s'", name);
    return 1;
  }
  if (compile_top_cached(L, name, 1) != LUA_OK)
    return luaL_error(L, "error loading registered module '%s':\n\t%s", name, lua_tostring(L, -1));
  lua_pushliteral(L, ":registered:");
  return 2;
}

/* Upvalue 1: the package table (package.path is read at each search, as stock does). */
static int searcher_lua(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_getfield(L, lua_upvalueindex(1), "path");
  const char *path = lua_tostring(L, -1);
  if (path == NULL) return luaL_error(L, "'package.path' must be a string");
  int h;
  if (find_file(L, name, path, ".", LUA_DIRSEP, &h) != 0) return 1;
  close_module(L, h);
  const char *file = lua_tostring(L, -1);
  size_t file_len = lua_rawlen(L, -1);
  if (load_file(L, file, file_len) != LUA_OK)
    return luaL_error(L, "error loading module '%s' from file '%s':\n\t%s", name, file,
                      lua_tostring(L, -1));
  lua_insert(L, -2); /* the loader, then the file name as the loader's data */
  return 2;
}

static int builtin_loader(lua_State *L) {
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_builtins);
  lua_pushvalue(L, 1);
  lua_rawget(L, -2);
  return 1;
}

/* The built-in modules stock Lua does not pre-load, after the files: a user's json.lua on
   package.path wins over the built-in json. Upvalue 1: builtin_loader, as a closure. */
static int searcher_builtin(lua_State *L) {
  size_t len;
  const char *name = luaL_checklstring(L, 1, &len);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_builtins);
  lua_pushlstring(L, name, len);
  if (lua_rawget(L, -2) != LUA_TTABLE) {
    lua_pushfstring(L, "no built-in module '%s'", name);
    return 1;
  }
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushliteral(L, ":builtin:");
  return 2;
}

/* ---- require ---- */

/* Push the first loader package.searchers finds for the name at 1 and its data, or raise
   stock's "module 'x' not found:" with every searcher's message. Upvalue 1: package. */
static void find_loader(lua_State *L, const char *name) {
  if (lua_getfield(L, lua_upvalueindex(1), "searchers") != LUA_TTABLE)
    luaL_error(L, "'package.searchers' must be a table");
  int searchers = lua_gettop(L);
  luaL_Buffer msg;
  luaL_buffinit(L, &msg);
  for (lua_Integer i = 1;; i++) {
    /* A C searcher (any C function the guest puts there) runs without a hook: the loop is
       charged per searcher. */
    mbxV_charge(L, OPEN_COST);
    luaL_addstring(&msg, "\n\t");
    if (lua_rawgeti(L, searchers, i) == LUA_TNIL) {
      lua_pop(L, 1);
      luaL_buffsub(&msg, 2);
      luaL_pushresult(&msg);
      luaL_error(L, "module '%s' not found:%s", name, lua_tostring(L, -1));
    }
    lua_pushvalue(L, 1);
    mbxV_cstack_check(L);
    lua_call(L, 1, 2);
    if (lua_isfunction(L, -2)) return;
    if (lua_isstring(L, -2)) {
      lua_pop(L, 1);
      luaL_addvalue(&msg);
    } else {
      lua_pop(L, 2);
      luaL_buffsub(&msg, 2);
    }
  }
}

/* require(name): stock's ll_require. Upvalue 1: package; upvalue 2: the loaded table. */
static int require_module(lua_State *L) {
  const char *name = luaL_checkstring(L, 1);
  lua_settop(L, 1);
  lua_pushvalue(L, lua_upvalueindex(2)); /* 2: loaded */
  lua_pushvalue(L, 1);
  if (lua_gettable(L, 2) != LUA_TNIL && lua_toboolean(L, -1)) return 1;
  lua_pop(L, 1);
  find_loader(L, name);
  lua_rotate(L, -2, 1);
  lua_pushvalue(L, 1);
  lua_pushvalue(L, -3);
  /* Each require runs the module's chunk in a nested C call: a chain of modules requiring
     each other is a chain of C frames (Lua's 200-call count bounds it too). */
  mbxV_cstack_check(L);
  lua_call(L, 2, 1);
  if (!lua_isnil(L, -1)) {
    lua_pushvalue(L, 1);
    lua_insert(L, -2);
    lua_settable(L, 2);
  } else {
    lua_pop(L, 1);
  }
  lua_pushvalue(L, 1);
  if (lua_gettable(L, 2) == LUA_TNIL) {
    lua_pop(L, 1);
    lua_pushvalue(L, 1);
    lua_pushboolean(L, 1);
    lua_settable(L, 2);
    lua_pushboolean(L, 1);
  }
  lua_rotate(L, -2, 1);
  return 2;
}

static int package_loadlib(lua_State *L) {
  return luaL_error(L, "package.loadlib is not available: C modules cannot be loaded in this "
                       "sandbox (only Lua source modules, through package.path)");
}

void mbxL_require_add(lua_State *L, const char *name, size_t name_len, int idx) {
  idx = lua_absindex(L, idx);
  lua_rawgetp(L, LUA_REGISTRYINDEX, &key_builtins);
  lua_pushlstring(L, name, name_len);
  lua_pushvalue(L, idx);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

int mbxL_open_package(lua_State *L) {
  const int nbuiltins = (int)(sizeof builtins / sizeof *builtins);
  const int npreloaded = (int)(sizeof preloaded / sizeof *preloaded);
  lua_createtable(L, 0, nbuiltins + 4); /* room for fuzz and a few host modules */
  for (int i = 0; i < nbuiltins; i++) {
    if (lua_getglobal(L, builtins[i][1]) == LUA_TTABLE)
      lua_setfield(L, -2, builtins[i][0]);
    else
      lua_pop(L, 1);
  }
  lua_rawsetp(L, LUA_REGISTRYINDEX, &key_builtins);

  lua_createtable(L, 0, 8);
  int package = lua_gettop(L);
  lua_pushliteral(L, DEFAULT_PATH);
  lua_setfield(L, package, "path");
  /* There is no C path: an empty one, so code that appends to it still runs. */
  lua_pushliteral(L, "");
  lua_setfield(L, package, "cpath");
  lua_pushliteral(L, "/\n;\n?\n!\n-\n"); /* stock's, on a POSIX system */
  lua_setfield(L, package, "config");
  lua_pushcfunction(L, package_searchpath);
  lua_setfield(L, package, "searchpath");
  lua_pushcfunction(L, package_loadlib);
  lua_setfield(L, package, "loadlib");

  lua_createtable(L, 0, npreloaded + 1);
  int loaded = lua_gettop(L);
  for (int i = 0; i < npreloaded; i++) {
    if (lua_getglobal(L, preloaded[i]) == LUA_TTABLE)
      lua_setfield(L, loaded, preloaded[i]);
    else
      lua_pop(L, 1);
  }
  lua_pushvalue(L, package);
  lua_setfield(L, loaded, "package");
  lua_pushvalue(L, loaded);
  lua_setfield(L, package, "loaded");

  lua_createtable(L, 0, 0);
  int preload = lua_gettop(L);
  lua_pushvalue(L, preload);
  lua_setfield(L, package, "preload");

  lua_createtable(L, 4, 0);
  lua_pushvalue(L, preload);
  lua_pushcclosure(L, searcher_preload, 1);
  lua_rawseti(L, -2, 1);
  lua_pushboolean(L, 0); /* a closure, not a light C function (stdlib/stdlib.c) */
  lua_pushcclosure(L, searcher_registered, 1);
  lua_rawseti(L, -2, 2);
  lua_pushvalue(L, package);
  lua_pushcclosure(L, searcher_lua, 1);
  lua_rawseti(L, -2, 3);
  lua_pushboolean(L, 0); /* a closure, not a light C function (stdlib/stdlib.c) */
  lua_pushcclosure(L, builtin_loader, 1);
  lua_pushcclosure(L, searcher_builtin, 1);
  lua_rawseti(L, -2, 4);
  lua_setfield(L, package, "searchers");

  lua_pushvalue(L, package);
  lua_pushvalue(L, loaded);
  lua_pushcclosure(L, require_module, 2);
  lua_setglobal(L, "require");
  lua_pushvalue(L, package);
  lua_setglobal(L, "package");
  lua_pushcfunction(L, base_loadfile);
  lua_setglobal(L, "loadfile");
  lua_pushcfunction(L, base_dofile);
  lua_setglobal(L, "dofile");
  lua_settop(L, package - 1);
  return 0;
}
