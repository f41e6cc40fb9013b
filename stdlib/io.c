/* stdlib/io.c -- the io guests see: io.write and io.stdout/io.stderr:write into the captured
   streams; the file functions say why they are unavailable. Nothing reaches a host file. */
#include <lauxlib.h>

#include "stdlib/stdlib.h"
#include "vm/budget.h"
#include "vm/output.h"

/* Write the arguments from `first` on: strings and numbers only, like the stock io.write. */
static void write_args(lua_State *L, int stream, int first) {
  int n = lua_gettop(L);
  for (int i = first; i <= n; i++) {
    size_t len;
    const char *s = luaL_checklstring(L, i, &len); /* numbers convert in place, as stock */
    mbxV_output_write(L, stream, s, len);
  }
}

/* io.write(...): returns io.stdout, so calls chain. */
static int io_write(lua_State *L) {
  write_args(L, MBXV_STDOUT, 1);
  lua_pushvalue(L, lua_upvalueindex(1));
  return 1;
}

/* file:write(...) on io.stdout / io.stderr: returns the file. */
static int file_write(lua_State *L) {
  write_args(L, (int)lua_tointeger(L, lua_upvalueindex(1)), 2);
  lua_settop(L, 1);
  return 1;
}

static void new_stream(lua_State *L, int stream) {
  lua_createtable(L, 0, 1);
  lua_pushinteger(L, stream);
  lua_pushcclosure(L, file_write, 1);
  lua_setfield(L, -2, "write");
}

int mbxL_open_io(lua_State *L) {
  /* Stubs, not nils: a model's io.open(...) gets a reason it can report or work around. */
  static const mbxL_refusal removed[] = {
      {"open", "io.open is not available: this policy grants no files"},
      {"lines", "io.lines is not available: this policy grants no files"},
      {"read", "io.read is not available: the sandbox has no standard input"},
      {"popen", "io.popen is not available: this policy grants no exec"},
      {"tmpfile", "io.tmpfile is not available: this policy grants no files"},
      {"input", "io.input is not available: the sandbox has no standard input"},
      {"output", "io.output is not available: output goes to io.stdout only"},
      {"close", "io.close is not available: this policy grants no files"},
      {NULL, NULL}};
  lua_createtable(L, 0, 11);
  mbxL_add_refusals(L, -1, removed);
  new_stream(L, MBXV_STDOUT);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "stdout");
  lua_pushcclosure(L, io_write, 1);
  lua_setfield(L, -2, "write");
  new_stream(L, MBXV_STDERR);
  lua_setfield(L, -2, "stderr");
  lua_setglobal(L, "io");
  return 0;
}
