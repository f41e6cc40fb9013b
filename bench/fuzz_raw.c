/* fuzz_raw.c -- the peer of moonbox fuzz in bench/fuzz.sh: a hand-written libFuzzer harness
   around raw lua_pcall, a fresh lua_State per input, no sandbox and no guest coverage. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*cb)(const uint8_t *data, size_t size));
void __sanitizer_cov_8bit_counters_init(uint8_t *start, uint8_t *stop);

/* One constant feature (as moonbox-fuzz --no-coverage has): libFuzzer 14 exits at once when
   it sees no coverage at all. Lua itself is not instrumented. */
static uint8_t ran[1];

static char *source;
static size_t source_len;
static const char *chunk;

/* What a user writes without moonbox: a new state with the standard libraries, the target's
   top level, then fuzz(data); an uncaught error aborts (libFuzzer saves the input). */
static int one_input(const uint8_t *data, size_t size) {
  lua_State *L = luaL_newstate();
  if (L == NULL) abort();
  luaL_openlibs(L);
  if (luaL_loadbuffer(L, source, source_len, chunk) != LUA_OK || lua_pcall(L, 0, 0, 0) != LUA_OK)
    abort();
  lua_getglobal(L, "fuzz");
  lua_pushlstring(L, (const char *)data, size);
  if (lua_pcall(L, 1, 0, 0) != LUA_OK) {
    fprintf(stderr, "finding: %s\n", lua_tostring(L, -1));
    abort();
  }
  lua_close(L);
  ran[0] = 1;
  return 0;
}

int main(int argc, char **argv) {
  /* --target=FILE, which libFuzzer skips (it ignores flags starting with "--"). */
  for (int i = 1; i < argc; i++)
    if (strncmp(argv[i], "--target=", 9) == 0) chunk = argv[i] + 9;
  FILE *f = chunk ? fopen(chunk, "rb") : NULL;
  if (f == NULL) {
    fprintf(stderr, "fuzz_raw: give --target=FILE (a Lua file defining fuzz(data))\n");
    return 2;
  }
  static char buf[1 << 20];
  source_len = fread(buf, 1, sizeof buf, f);
  fclose(f);
  source = buf;
  __sanitizer_cov_8bit_counters_init(ran, ran + 1);
  return LLVMFuzzerRunDriver(&argc, &argv, one_input);
}
