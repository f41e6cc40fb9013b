/* stdlib/stdlib.c -- the opener: builds the guest's global environment from the curated
   libraries (as Lua's linit.c; the helpers they share are stdlib/auxlib.c). */
#include "stdlib/stdlib.h"

#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include <lauxlib.h>

#include "vm/budget.h"
#include "vm/vm.h"

/* The build's scratch lives on the C stack, not in the Lua heap: a Lua table or userdata made
   here would be garbage once the state is built, a free hole inside the template that every
   sandbox copies and is charged for (docs/performance.md, "What an idle sandbox holds"). The libraries hold
   about 130 C functions; past this many the build refuses with an error naming the cap
   (tests/stdlib/test_stdlib.c builds every sandbox's libraries: it would fail first). 8 KiB of
   C stack at most, once per template. */
#define MBXL_BUILD_FUNCTIONS_MAX 256

static int by_name(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static int by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
  return x < y ? -1 : x > y;
}

/* Functions already copied (lua_topointer of each, every one a closure by now), ascending. */
typedef struct copied_set {
  const void *fn[MBXL_BUILD_FUNCTIONS_MAX];
  size_t n;
} copied_set;

/* Push a table of the functions of the table at lib, by name, in byte order of the names;
   a function already in seen is left out, and every copied one is added to it. The names
   stay anchored as keys of lib while the array of them is in use. The scratch is C memory,
   never Lua's: nothing of it is left as garbage in the template (see close_tables). */
static void copy_functions(lua_State *L, int lib, copied_set *seen) {
  const char *names[MBXL_BUILD_FUNCTIONS_MAX];
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, lib)) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_isfunction(L, -1)) {
      if (n == MBXL_BUILD_FUNCTIONS_MAX)
        luaL_error(L,
                   "a library holds more than %d functions: raise "
                   "MBXL_BUILD_FUNCTIONS_MAX in stdlib/stdlib.c",
                   MBXL_BUILD_FUNCTIONS_MAX);
      names[n++] = lua_tostring(L, -2);
    }
    lua_pop(L, 1);
  }
  qsort(names, n, sizeof *names, by_name);
  /* Exactly sized: the fields of this copy are its functions not copied before. */
  size_t fresh = 0;
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawget(L, lib);
    const void *fn = lua_topointer(L, -1);
    if (!bsearch(&fn, seen->fn, seen->n, sizeof *seen->fn, by_address)) fresh++;
    lua_pop(L, 1);
  }
  lua_createtable(L, 0, (int)fresh);
  for (size_t i = 0; i < n; i++) {
    lua_pushstring(L, names[i]);
    lua_rawget(L, lib);
    const void *fn = lua_topointer(L, -1);
    if (bsearch(&fn, seen->fn, seen->n, sizeof *seen->fn, by_address)) {
      lua_pop(L, 1);
      continue;
    }
    if (seen->n == MBXL_BUILD_FUNCTIONS_MAX)
      luaL_error(L,
                 "the libraries hold more than %d functions: raise "
                 "MBXL_BUILD_FUNCTIONS_MAX in stdlib/stdlib.c",
                 MBXL_BUILD_FUNCTIONS_MAX);
    /* Insert in order (a few hundred functions, once per template build). */
    size_t at = seen->n;
    while (at > 0 && (uintptr_t)seen->fn[at - 1] > (uintptr_t)fn) {
      seen->fn[at] = seen->fn[at - 1];
      at--;
    }
    seen->fn[at] = fn;
    seen->n++;
    lua_setfield(L, -2, names[i]);
  }
}

/* ---- no code addresses in guest-visible functions (issue 9, D) ----
   Lua hashes a light C function by its code address, and next/pairs walk a table in hash
   order: probing a few table sizes recovers the low bits of the addresses of liblua5.4 and of
   this binary (an ASLR bypass). A C closure with an upvalue is a heap object in the sandbox's
   slot instead, placed at a random address far from the libraries (vm/arena.c). So every C
   function a guest can reach is made a closure: the library tables in one sweep once they are
   all open, and the few stock functions that push a light C function when called (ipairs,
   utf8.codes) through wrappers that push closures made here. stdlib/deterministic.c makes its
   next/pairs closures itself. tests/stdlib/test_stdlib.c walks what a guest reaches. */

/* The closure standing for the light C function on top of the stack (replaced by it). The
   function only: the upvalue's value does not matter, only that it exists. */
static void close_top(lua_State *L) {
  if (!mbxL_is_light_cfunction(L, -1)) return;
  lua_CFunction f = lua_tocfunction(L, -1);
  lua_pop(L, 1);
  lua_pushboolean(L, 0);
  lua_pushcclosure(L, f, 1);
}

/* One light C function found as a field of a library table: the table's stack slot and the
   field's name (anchored as the table's key), in the order the sweep found them. */
typedef struct light_field {
  lua_CFunction f;
  const char *name;
  size_t len;
  int table;
  int order;
} light_field;

static int by_function(const void *a, const void *b) {
  const light_field *x = a, *y = b;
  /* Function pointers are ordered through their integer values: only equality matters, the
     order itself never reaches the state (ties keep the sweep's order). */
  uintptr_t fx = (uintptr_t)x->f, fy = (uintptr_t)y->f;
  if (fx != fy) return fx < fy ? -1 : 1;
  return x->order < y->order ? -1 : x->order > y->order;
}

/* Groups (their first field's index) by the sweep order of that field, the group's first. */
static int by_first_order(const void *a, const void *b, void *ctx) {
  const light_field *f = ctx;
  int x = f[*(const int *)a].order, y = f[*(const int *)b].order;
  return x < y ? -1 : x > y;
}

/* Record every light C function among the string-keyed fields of the table at slot t. */
static void find_light_fields(lua_State *L, int t, light_field *out, int *n) {
  lua_pushnil(L);
  while (lua_next(L, t)) {
    if (lua_type(L, -2) == LUA_TSTRING && mbxL_is_light_cfunction(L, -1)) {
      if (*n == MBXL_BUILD_FUNCTIONS_MAX)
        luaL_error(L,
                   "the libraries hold more than %d C functions: raise "
                   "MBXL_BUILD_FUNCTIONS_MAX in stdlib/stdlib.c",
                   MBXL_BUILD_FUNCTIONS_MAX);
      light_field *lf = &out[*n];
      lf->f = lua_tocfunction(L, -1);
      lf->name = lua_tolstring(L, -2, &lf->len);
      lf->table = t;
      lf->order = (*n)++;
    }
    lua_pop(L, 1);
  }
}

/* Every light C function in the tables at slots [first, last] becomes one closure per
   function, so every copy of a function stays one value (io.write and io.stdout.write are
   different functions; a function shared by two tables gets one closure in both). Setting an
   existing field allocates nothing: the name pushed again is the key's interned string. */
static void close_tables(lua_State *L, int first, int last) {
  light_field fields[MBXL_BUILD_FUNCTIONS_MAX];
  int n = 0;
  for (int t = first; t <= last; t++)
    find_light_fields(L, t, fields, &n);
  qsort(fields, (size_t)n, sizeof *fields, by_function);
  /* The closures are made in the order the sweep first met their functions (lua_next order,
     which follows the state's string hash seed), as one at a time would be: an order by code
     address would give every sandbox of a process the same closure layout, and so more of
     the same pointer-hash order across sandboxes (function_key_order_varies_between_sandboxes). */
  int group[MBXL_BUILD_FUNCTIONS_MAX], groups = 0;
  for (int i = 0; i < n; i++)
    if (i == 0 || fields[i].f != fields[i - 1].f) group[groups++] = i;
  qsort_r(group, (size_t)groups, sizeof *group, by_first_order, fields);
  for (int g = 0; g < groups; g++) {
    int i = group[g];
    lua_pushboolean(L, 0);
    lua_pushcclosure(L, fields[i].f, 1);
    for (int j = i; j < n && fields[j].f == fields[i].f; j++) {
      lua_pushlstring(L, fields[j].name, fields[j].len);
      lua_pushvalue(L, -2);
      lua_rawset(L, fields[j].table); /* an existing field */
    }
    lua_pop(L, 1);
  }
}

/* ipairs(t): stock's, with its iterator as a closure (upvalue 1). */
static int closed_ipairs(lua_State *L) {
  luaL_checkany(L, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* utf8.codes(s [, lax]): stdlib/utf8.c's, with its two iterators as closures (upvalues 1 and 2:
   strict and lax). */
static int closed_codes(lua_State *L) {
  int lax = lua_toboolean(L, 2);
  luaL_checkstring(L, 1);
  lua_pushvalue(L, lua_upvalueindex(lax ? 2 : 1));
  lua_pushvalue(L, 1);
  lua_pushinteger(L, 0);
  return 3;
}

/* Call the stock factory below the nargs arguments on top and leave the closure for the
   iterator it returns in their place. */
static void push_stock_iterator(lua_State *L, int nargs) {
  lua_call(L, nargs, 1);
  close_top(L);
}

static void hide_code_addresses(lua_State *L) {
  lua_pushglobaltable(L);
  int g = lua_gettop(L);
  if (lua_getfield(L, g, "ipairs") == LUA_TFUNCTION) {
    lua_pushvalue(L, g); /* any table gives the same iterator; a new one would be garbage */
    push_stock_iterator(L, 1);
    lua_pushcclosure(L, closed_ipairs, 1);
    lua_setfield(L, g, "ipairs");
  }
  lua_settop(L, g);
  if (lua_getfield(L, g, "utf8") == LUA_TTABLE && lua_getfield(L, -1, "codes") == LUA_TFUNCTION) {
    int codes = lua_gettop(L);
    /* Any string gives the same iterators: "codes" is already interned (the key), where a
       new one would be garbage. */
    lua_pushvalue(L, codes);
    lua_pushliteral(L, "codes");
    push_stock_iterator(L, 1);
    lua_pushvalue(L, codes);
    lua_pushliteral(L, "codes");
    lua_pushboolean(L, 1);
    push_stock_iterator(L, 2);
    lua_pushcclosure(L, closed_codes, 2);
    lua_setfield(L, codes - 1, "codes");
  }
  lua_settop(L, g);
  /* The tables swept, on the stack: the file methods (stdlib/io.c) are reached as
     io.stdout.write, through the metatable's __index (the metatable itself is hidden from
     getmetatable; its metamethods too); then _G and every library table in it. */
  int tables = 0;
  lua_pushnil(L);
  while (lua_next(L, g)) {
    if (lua_type(L, -1) == LUA_TTABLE) tables++;
    lua_pop(L, 1);
  }
  luaL_checkstack(L, tables + 8, "the library tables");
  int first = lua_gettop(L) + 1;
  if (luaL_getmetatable(L, "FILE*") == LUA_TTABLE) {
    if (lua_getfield(L, -1, "__index") != LUA_TTABLE) lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
  }
  lua_pushvalue(L, g);
  lua_pushnil(L);
  while (lua_next(L, g)) {
    if (lua_type(L, -1) == LUA_TTABLE) {
      lua_pushvalue(L, -2); /* the key on top again for lua_next; the table stays below */
      lua_remove(L, -3);
    } else {
      lua_pop(L, 1);
    }
  }
  close_tables(L, first, lua_gettop(L));
  lua_settop(L, g - 1);
}

int mbxL_open_sandbox(lua_State *L) {
  /* package comes after the globals: it records the library tables the others made (fuzz,
     a module only, adds itself to it). */
  static const lua_CFunction openers[] = {
      mbxL_open_base, mbxL_open_deterministic, mbxL_open_string,  mbxL_open_table, mbxL_open_math,
      mbxL_open_utf8, mbxL_open_coroutine,     mbxL_open_io,      mbxL_open_os,    mbxL_open_proc,
      mbxL_open_json, mbxL_open_debug,         mbxL_open_package, mbxL_open_fuzz};
  static const char *const libs[] = {"_G",   "coroutine", "debug", "fs",     "io",    "json",
                                     "math", "os",        "proc",  "string", "table", "utf8"};
  const int nlibs = (int)(sizeof libs / sizeof *libs);
  /* The loaded-module table luaL_requiref fills, made here at its final size: it ends up as
     the private copies below, and one table that never grows leaves no garbage behind. */
  lua_createtable(L, 0, nlibs);
  lua_setfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  for (size_t i = 0; i < sizeof openers / sizeof *openers; i++) {
    openers[i](L);
    lua_settop(L, 0);
  }
  hide_code_addresses(L);
  mbxV_record_builtins(L);
  /* luaL_argerror names a C function called from C (pcall(string.gsub)) by searching the
     registry's loaded-module table, including every field of _G: a guest-sized, unmetered C
     loop on each such error. The table becomes private, fixed-size copies of the libraries
     instead, functions only, so names still come out as 'string.gsub' and, from the copy of
     _G's built-ins, 'setmetatable' (stock drops the "_G." prefix). The search walks the
     table with lua_next, whose order depends on the string hash seed (per process): each
     function is copied under one name only, the first in byte order of library then field
     name, so the name found is the same in every process (issue 9, E.5). */
  copied_set seen = {.n = 0};
  lua_getfield(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
  int loaded = lua_gettop(L);
  /* Only the copies stay: whatever else an opener registered there goes (assigning nil to
     an existing field is allowed during the traversal). */
  lua_pushnil(L);
  while (lua_next(L, loaded)) {
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushnil(L);
    lua_rawset(L, loaded);
  }
  for (int i = 0; i < nlibs; i++) {
    if (lua_getglobal(L, libs[i]) != LUA_TTABLE) {
      lua_pop(L, 1);
      continue;
    }
    copy_functions(L, lua_gettop(L), &seen);
    lua_setfield(L, loaded, libs[i]);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return 0;
}
