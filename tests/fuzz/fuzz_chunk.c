/* tests/fuzz/fuzz_chunk.c -- libFuzzer harness of the binary-chunk reader (vm/chunk.c) and the
   static check built on it (host/check.c). The input's first byte picks the mode:
     'S'  the rest is Lua source: stock Lua compiles it (a plain state, at most 4 KiB so the
          unmetered parser stays fast) and the dump, with and without debug information,
          must be read back (our own dumps are never refused), with every GETTABUP/SETTABUP
          naming an upvalue and a constant that exist and every line within the source;
     'C'  the rest is given to mbx_check under a small policy: it answers MBX_OK with JSON
          of the contract's shape, or a limit's status; never anything else;
     else the whole input is a chunk: the reader accepts it or refuses it with a message,
          never crashes, over-reads (ASan) or returns out-of-memory, and when it accepts, every
          field of the tree is walked (so ASan sees any bad pointer or length).
   Any broken check aborts, so libFuzzer keeps the input. Run (tools/dev fuzz_smoke does,
   seeded with luac5.4 dumps of the repository's scripts):
     build/fuzz/tests/fuzz_chunk -max_len=8192 -max_total_time=60 build/fuzz/chunk-corpus */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lauxlib.h>
#include <lua.h>

#include "include/moonbox.h"
#include "vm/chunk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz_chunk: check failed: %s (line %d)\n", #cond, __LINE__);                \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static volatile size_t sink;

/* Touch every byte the tree points at. */
static void touch(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    sink += (unsigned char)s[i];
}

static void walk(const mbxV_chunk_proto *f, int max_line) {
  if (f->source) touch(f->source, f->source_len);
  for (size_t pc = 0; pc < f->ncode; pc++) {
    uint32_t i = f->code[pc];
    sink += mbxV_op(i);
    (void)mbxV_op_name(mbxV_op(i));
    if (f->lines) {
      sink += (size_t)f->lines[pc];
      if (max_line >= 0) CHECK(f->lines[pc] >= 0 && f->lines[pc] <= max_line);
    }
    if (max_line >= 0 && mbxV_op(i) == MBXV_OP_GETTABUP) {
      CHECK(mbxV_arg_b(i) < f->nupvals);
      CHECK(mbxV_arg_c(i) < f->nk);
    }
    if (max_line >= 0 && mbxV_op(i) == MBXV_OP_SETTABUP) {
      CHECK(mbxV_arg_a(i) < f->nupvals);
      CHECK(mbxV_arg_b(i) < f->nk);
    }
    if (max_line >= 0) CHECK(mbxV_op(i) < MBXV_OP_COUNT);
  }
  for (size_t k = 0; k < f->nk; k++)
    if (f->k[k].s) touch(f->k[k].s, f->k[k].len);
  for (size_t u = 0; u < f->nupvals; u++)
    if (f->upvals[u].name) touch(f->upvals[u].name, f->upvals[u].name_len);
  for (size_t l = 0; l < f->nlocals; l++)
    if (f->locals[l].name) touch(f->locals[l].name, f->locals[l].name_len);
  for (size_t c = 0; c < f->nprotos; c++)
    walk(&f->protos[c], max_line);
}

typedef struct bytes {
  char *p;
  size_t len, cap;
} bytes;

static int writer(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  bytes *b = ud;
  if (b->len + n > b->cap) {
    size_t cap = (b->len + n) * 2;
    char *grown = realloc(b->p, cap);
    if (grown == NULL) return 1;
    b->p = grown;
    b->cap = cap;
  }
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

static void source_mode(const char *src, size_t n) {
  if (n > 4096) return;
  /* An upper bound of the lines Lua counts: it ends a line at '\n' or '\r' (a "\r\n" or
     "\n\r" pair once). */
  int lines = 1;
  for (size_t i = 0; i < n; i++)
    lines += src[i] == '\n' || src[i] == '\r';
  lua_State *L = luaL_newstate();
  CHECK(L != NULL);
  if (luaL_loadbufferx(L, src, n, "=f", "t") == LUA_OK) {
    for (int strip = 0; strip <= 1; strip++) {
      bytes b = {0};
      CHECK(lua_dump(L, writer, &b, strip) == 0);
      mbxV_chunk c;
      char why[160];
      int rc = mbxV_chunk_read(b.p, b.len, &c, why, sizeof why);
      if (rc != 0) fprintf(stderr, "fuzz_chunk: our own dump refused: %s\n", why);
      CHECK(rc == 0);
      CHECK(strip || c.main.lines != NULL || c.main.ncode == 0);
      walk(&c.main, lines);
      mbxV_chunk_free(&c);
      free(b.p);
    }
  }
  lua_close(L);
}

static mbx_policy *policy;

static void check_mode(const char *src, size_t n) {
  if (policy == NULL) {
    policy = mbx_policy_new();
    CHECK(policy != NULL);
    CHECK(mbx_policy_set_limit(policy, MBX_LIMIT_MEMORY, 4 << 20) == MBX_OK);
    CHECK(mbx_policy_set_limit(policy, MBX_LIMIT_TIME_MS, 200) == MBX_OK);
    CHECK(mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, 1000000) == MBX_OK);
  }
  char *json = NULL;
  size_t len = 0;
  mbx_error err;
  mbx_status s = mbx_check(policy, src, n, &json, &len, &err);
  if (s == MBX_OK) {
    CHECK(json != NULL && strlen(json) == len);
    CHECK(strncmp(json, "{\"globals\":[", 12) == 0);
    CHECK(strstr(json, "\"ok\":") != NULL);
    CHECK(json[len - 1] == '}');
    int ok = strstr(json, "],\"ok\":true,\"syntax_error\":null}") != NULL;
    CHECK(!ok || strcmp(json, "{\"globals\":[],\"ok\":true,\"syntax_error\":null}") == 0);
  } else {
    CHECK(json == NULL);
    CHECK(s == MBX_TIME_LIMIT || s == MBX_INSTRUCTION_LIMIT || s == MBX_MEMORY_LIMIT ||
          s == MBX_SOURCE_TOO_LARGE);
  }
  mbx_free(json);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 0 && data[0] == 'S') {
    source_mode((const char *)data + 1, size - 1);
    return 0;
  }
  if (size > 0 && data[0] == 'C') {
    check_mode((const char *)data + 1, size - 1);
    return 0;
  }
  mbxV_chunk c;
  char why[160];
  int rc = mbxV_chunk_read(data, size, &c, why, sizeof why);
  CHECK(rc == 0 || rc == -1);
  if (rc == 0) {
    walk(&c.main, -1);
    mbxV_chunk_free(&c);
  } else {
    CHECK(why[0] != '\0');
  }
  return 0;
}
