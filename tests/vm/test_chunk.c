/* tests/vm/test_chunk.c -- vm/chunk.c: reading lua_dump output, and refusing anything else. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <lauxlib.h>
#include <lua.h>

#include "vm/chunk.h"

typedef struct bytes {
  char *p;
  size_t len;
} bytes;

static int writer(lua_State *L, const void *p, size_t n, void *ud) {
  (void)L;
  bytes *b = ud;
  b->p = realloc(b->p, b->len + n);
  memcpy(b->p + b->len, p, n);
  b->len += n;
  return 0;
}

/* Stock Lua's compile of src, dumped with (strip 0) or without debug information. */
static bytes dump_of(const char *src, int strip) {
  lua_State *L = luaL_newstate();
  assert_int_equal(luaL_loadbuffer(L, src, strlen(src), "=t"), LUA_OK);
  bytes b = {NULL, 0};
  assert_int_equal(lua_dump(L, writer, &b, strip), 0);
  lua_close(L);
  return b;
}

static int read_ok(bytes b, mbxV_chunk *c) {
  char why[160];
  int rc = mbxV_chunk_read(b.p, b.len, c, why, sizeof why);
  if (rc != 0) fprintf(stderr, "refused: %s\n", why);
  return rc;
}

/* The index of the first instruction of f with opcode op at or after pc, or -1. */
static long find_op(const mbxV_chunk_proto *f, unsigned op, size_t from) {
  for (size_t pc = from; pc < f->ncode; pc++)
    if (mbxV_op(f->code[pc]) == op) return (long)pc;
  return -1;
}

static int kstr_is(const mbxV_chunk_const *k, const char *s) {
  return (k->type == MBXV_K_SHORTSTR || k->type == MBXV_K_LONGSTR) && k->len == strlen(s) &&
         memcmp(k->s, s, k->len) == 0;
}

static void globals_instructions_and_lines(void **state) {
  (void)state;
  bytes b = dump_of("local a = 1\nx = a\n\n\nprint(y)\n", 0);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  const mbxV_chunk_proto *f = &c.main;
  assert_int_equal(c.main_upvalues, 1);
  assert_int_equal(f->nupvals, 1);
  assert_int_equal(f->upvals[0].instack, 1);
  assert_int_equal(f->upvals[0].name_len, 4);
  assert_memory_equal(f->upvals[0].name, "_ENV", 4);
  assert_int_equal(f->source_len, 2);
  assert_memory_equal(f->source, "=t", 2);
  assert_int_equal(f->is_vararg, 1);
  assert_int_equal(mbxV_op(f->code[0]), MBXV_OP_VARARGPREP);
  long set = find_op(f, MBXV_OP_SETTABUP, 0);
  assert_true(set > 0);
  assert_int_equal(f->lines[set], 2);
  assert_int_equal(mbxV_arg_a(f->code[set]), 0); /* upvalue _ENV */
  assert_true(kstr_is(&f->k[mbxV_arg_b(f->code[set])], "x"));
  long get = find_op(f, MBXV_OP_GETTABUP, 0);
  assert_true(get > set);
  assert_int_equal(f->lines[get], 5);
  assert_true(kstr_is(&f->k[mbxV_arg_c(f->code[get])], "print"));
  get = find_op(f, MBXV_OP_GETTABUP, (size_t)get + 1);
  assert_true(kstr_is(&f->k[mbxV_arg_c(f->code[get])], "y"));
  assert_int_equal(mbxV_op(f->code[f->ncode - 1]), MBXV_OP_RETURN);
  assert_int_equal(f->nlocals, 1);
  assert_memory_equal(f->locals[0].name, "a", 1);
  assert_string_equal(mbxV_op_name(MBXV_OP_GETTABUP), "GETTABUP");
  assert_string_equal(mbxV_op_name(200), "?");
  mbxV_chunk_free(&c);
  free(b.p);
}

static void every_constant_type(void **state) {
  (void)state;
  bytes b = dump_of("local t = {}\nt.a = true t.b = false t.c = nil\n"
                    "return 1234567890123, 2.5, 'short', "
                    "'a long string constant of more than forty bytes, so long'",
                    0);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  int seen_nil = 0, seen_true = 0, seen_false = 0, seen_int = 0, seen_float = 0, seen_short = 0,
      seen_long = 0;
  for (size_t i = 0; i < c.main.nk; i++) {
    const mbxV_chunk_const *k = &c.main.k[i];
    seen_nil |= k->type == MBXV_K_NIL;
    seen_true |= k->type == MBXV_K_TRUE;
    seen_false |= k->type == MBXV_K_FALSE;
    seen_int |= k->type == MBXV_K_INT && k->i == 1234567890123;
    seen_float |= k->type == MBXV_K_FLOAT && k->n == 2.5;
    seen_short |= k->type == MBXV_K_SHORTSTR && kstr_is(k, "short");
    seen_long |= k->type == MBXV_K_LONGSTR && k->len == 56;
  }
  assert_true(seen_nil && seen_true && seen_false && seen_int && seen_float && seen_short &&
              seen_long);
  mbxV_chunk_free(&c);
  free(b.p);
}

static void nested_functions_and_upvalues(void **state) {
  (void)state;
  bytes b = dump_of("local n = 0\n"
                    "local function outer()\n"
                    "  local function inner() n = n + 1; return g end\n"
                    "  return inner\n"
                    "end\n"
                    "return outer",
                    0);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  assert_int_equal(c.main.nprotos, 1);
  const mbxV_chunk_proto *outer = &c.main.protos[0];
  assert_int_equal(outer->linedefined, 2);
  assert_int_equal(outer->lastlinedefined, 5);
  assert_null(outer->source); /* the same as the parent's */
  assert_int_equal(outer->nprotos, 1);
  const mbxV_chunk_proto *inner = &outer->protos[0];
  assert_int_equal(inner->linedefined, 3);
  /* inner's upvalues: n and _ENV, each passed down from outer's upvalues. */
  assert_int_equal(inner->nupvals, 2);
  int found_env = 0;
  for (size_t u = 0; u < inner->nupvals; u++) {
    const mbxV_chunk_upval *uv = &inner->upvals[u];
    assert_int_equal(uv->instack, 0);
    assert_true(uv->idx < outer->nupvals);
    if (uv->name_len == 4 && memcmp(uv->name, "_ENV", 4) == 0) {
      found_env = 1;
      const mbxV_chunk_upval *from = &outer->upvals[uv->idx];
      assert_int_equal(from->name_len, 4);
      assert_memory_equal(from->name, "_ENV", 4);
    }
  }
  assert_true(found_env);
  long get = find_op(inner, MBXV_OP_GETTABUP, 0);
  assert_true(get >= 0);
  assert_int_equal(inner->lines[get], 3);
  /* code_at: where each function's instructions start in the input (vm/load.c patches
     there), for the main function and the nested ones alike. */
  const mbxV_chunk_proto *each[] = {&c.main, outer, inner};
  for (size_t i = 0; i < 3; i++) {
    assert_true(each[i]->code_at + each[i]->ncode * 4 <= b.len);
    assert_memory_equal(b.p + each[i]->code_at, each[i]->code, each[i]->ncode * 4);
  }
  assert_true(c.main.code_at < outer->code_at && outer->code_at < inner->code_at);
  mbxV_chunk_free(&c);
  free(b.p);
}

/* Lines jumping by more than a signed byte, and long runs of instructions, are given by
   absolute entries; both must come out right. */
static void absolute_line_entries(void **state) {
  (void)state;
  size_t cap = 64 * 1024;
  char *src = malloc(cap);
  size_t n = (size_t)snprintf(src, cap, "x = 1");
  for (int i = 0; i < 300; i++)
    src[n++] = '\n';
  n += (size_t)snprintf(src + n, cap - n, "y = 2\n");
  /* 400 statements on one line: more than 128 instructions in a row with no line change. */
  for (int i = 0; i < 400; i++)
    n += (size_t)snprintf(src + n, cap - n, "z = %d ", i);
  n += (size_t)snprintf(src + n, cap - n, "\nw = 3\n");
  src[n] = '\0';
  bytes b = dump_of(src, 0);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  const mbxV_chunk_proto *f = &c.main;
  int lines_seen[4] = {0};
  for (size_t pc = 0; pc < f->ncode; pc++) {
    if (mbxV_op(f->code[pc]) != MBXV_OP_SETTABUP) continue;
    const mbxV_chunk_const *k = &f->k[mbxV_arg_b(f->code[pc])];
    if (kstr_is(k, "x")) lines_seen[0] = f->lines[pc];
    if (kstr_is(k, "y")) lines_seen[1] = f->lines[pc];
    if (kstr_is(k, "z")) assert_int_equal(f->lines[pc], 302);
  }
  /* w's name is constant 400-odd, past what SETTABUP can name: the last instructions. */
  lines_seen[3] = f->lines[f->ncode - 1];
  assert_int_equal(lines_seen[0], 1);
  assert_int_equal(lines_seen[1], 301);
  assert_int_equal(lines_seen[3], 303);
  mbxV_chunk_free(&c);
  free(b.p);
  free(src);
}

static void stripped_chunks_have_no_lines_or_names(void **state) {
  (void)state;
  bytes b = dump_of("x = 1 local function f() return x end return f", 1);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  assert_null(c.main.lines);
  assert_null(c.main.source);
  assert_null(c.main.upvals[0].name);
  assert_int_equal(c.main.nprotos, 1);
  mbxV_chunk_free(&c);
  free(b.p);
}

/* Every proper prefix is truncated, and every byte changed to a few hostile values must be
   read or refused, never crash or over-read (the ASan preset checks the latter). */
static void truncations_and_mutations_are_refused_safely(void **state) {
  (void)state;
  bytes b = dump_of("local t = {1, 2.5, 'x'}\nfunction f(a) return a .. t[1], g end\n"
                    "return f(#t)",
                    0);
  mbxV_chunk c;
  char why[160];
  for (size_t n = 0; n < b.len; n++) {
    char *copy = malloc(n ? n : 1);
    memcpy(copy, b.p, n);
    assert_int_equal(mbxV_chunk_read(copy, n, &c, why, sizeof why), -1);
    assert_true(strlen(why) > 0);
    free(copy);
  }
  static const unsigned char values[] = {0x00, 0x01, 0x7f, 0x80, 0xff, 0x14};
  char *copy = malloc(b.len);
  for (size_t at = 0; at < b.len; at++) {
    for (size_t v = 0; v < sizeof values; v++) {
      memcpy(copy, b.p, b.len);
      copy[at] = (char)values[v];
      int rc = mbxV_chunk_read(copy, b.len, &c, why, sizeof why);
      assert_true(rc == 0 || rc == -1);
      if (rc == 0) mbxV_chunk_free(&c);
    }
  }
  free(copy);
  /* One byte too many. */
  char *longer = malloc(b.len + 1);
  memcpy(longer, b.p, b.len);
  longer[b.len] = 0;
  assert_int_equal(mbxV_chunk_read(longer, b.len + 1, &c, why, sizeof why), -1);
  assert_non_null(strstr(why, "after the chunk"));
  free(longer);
  /* Another version's header. */
  b.p[4] = 0x53;
  assert_int_equal(mbxV_chunk_read(b.p, b.len, &c, why, sizeof why), -1);
  assert_non_null(strstr(why, "not a Lua 5.4 chunk"));
  assert_int_equal(mbxV_chunk_read(NULL, 0, &c, why, sizeof why), -1);
  free(b.p);
}

/* A hand-made chunk of `depth` functions nested one in another, each empty. */
static bytes nested_chunk(int depth) {
  bytes b = dump_of("return", 1);
  /* Keep the header (up to the main upvalue count), then write the functions ourselves. */
  size_t header = 4 + 1 + 1 + 6 + 3 + 8 + 8;
  size_t cap = header + 1 + (size_t)(depth + 1) * 16;
  char *p = malloc(cap);
  memcpy(p, b.p, header);
  free(b.p);
  size_t n = header;
  p[n++] = 0; /* no upvalues */
  for (int d = 0; d <= depth; d++) {
    /* source, linedefined, lastlinedefined, params, vararg, stack, code, k, upvalues */
    static const unsigned char fixed[] = {0x80, 0x80, 0x80, 0, 0, 2, 0x80, 0x80, 0x80};
    memcpy(p + n, fixed, sizeof fixed);
    n += sizeof fixed;
    p[n++] = (char)(d < depth ? 0x81 : 0x80); /* one nested function, or none */
  }
  for (int d = 0; d <= depth; d++) {
    memset(p + n, 0x80, 4); /* empty debug information */
    n += 4;
  }
  return (bytes){p, n};
}

static void nesting_is_capped(void **state) {
  (void)state;
  mbxV_chunk c;
  char why[160];
  bytes ok = nested_chunk(MBXV_CHUNK_MAX_DEPTH);
  assert_int_equal(mbxV_chunk_read(ok.p, ok.len, &c, why, sizeof why), 0);
  const mbxV_chunk_proto *f = &c.main;
  int depth = 0;
  while (f->nprotos == 1) {
    f = &f->protos[0];
    depth++;
  }
  assert_int_equal(depth, MBXV_CHUNK_MAX_DEPTH);
  mbxV_chunk_free(&c);
  free(ok.p);
  bytes deep = nested_chunk(100000);
  assert_int_equal(mbxV_chunk_read(deep.p, deep.len, &c, why, sizeof why), -1);
  assert_non_null(strstr(why, "nested more than"));
  free(deep.p);
}

/* A count that claims more elements than the bytes left is refused before any allocation. */
static void hostile_counts_are_refused(void **state) {
  (void)state;
  bytes b = nested_chunk(0);
  /* Replace the main function's instruction count (0x80) by 2^31-1 (five size bytes). */
  size_t at = 4 + 1 + 1 + 6 + 3 + 8 + 8 + 1 + 6;
  char *p = malloc(b.len + 4);
  memcpy(p, b.p, at);
  static const unsigned char huge[] = {0x07, 0x7f, 0x7f, 0x7f, 0xff};
  memcpy(p + at, huge, sizeof huge);
  memcpy(p + at + sizeof huge, b.p + at + 1, b.len - at - 1);
  mbxV_chunk c;
  char why[160];
  assert_int_equal(mbxV_chunk_read(p, b.len + 4, &c, why, sizeof why), -1);
  assert_non_null(strstr(why, "instruction count"));
  /* And one past INT_MAX. */
  static const unsigned char past[] = {0x08, 0x00, 0x00, 0x00, 0x80};
  memcpy(p + at, past, sizeof past);
  assert_int_equal(mbxV_chunk_read(p, b.len + 4, &c, why, sizeof why), -1);
  assert_non_null(strstr(why, "does not fit in an int"));
  free(p);
  free(b.p);
}

/* The opcode numbering and the line of every instruction, against stock luac5.4's listing of
   the same source (Debian's 5.4.4: the same compiler), for a program using most opcodes. */
static const char *const ops_program =
    "local a, b, c = 1, 2.5, 'k'\n"
    "local t = {a, b, c, x = 1, [2] = 3}\n"
    "t.f = a + b - c * 2 / 3 // 4 % 5 ^ 6\n"
    "t[a] = t[b] & 1 | 2 ~ 3 << 1 >> 2\n"
    "local s = -a .. ~a .. tostring(not b) .. #t\n"
    "if a == b or a < b or a <= b or a == 3 or a < 3 or a > 3 or a >= 3 then a = nil end\n"
    "for i = 1, 10 do a = i end\n"
    "for k, v in pairs(t) do b = v end\n"
    "while a do a = false end\n"
    "repeat b = true until b\n"
    "local function f(...) local x <close> = nil return ... end\n"
    "local o = {m = function(self, y) return self, y end}\n"
    "o:m(1)\n"
    "goto done\n"
    "::done::\n"
    "g = function() return a, b end\n"
    "return f(s), select('#', ...)\n";

static void opcodes_and_lines_match_luac(void **state) {
  (void)state;
  if (access("/usr/bin/luac5.4", X_OK) != 0) {
    fprintf(stderr, "skipped: /usr/bin/luac5.4 is not installed (Debian package lua5.4)\n");
    skip();
  }
  char path[] = "/tmp/mbx_test_chunk_XXXXXX";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, ops_program, strlen(ops_program)), (ssize_t)strlen(ops_program));
  close(fd);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "/usr/bin/luac5.4 -l -p %s", path);
  FILE *in = popen(cmd, "r");
  assert_non_null(in);
  /* luac lists each function, then its nested ones, depth first: the same order as ours. */
  char line[512];
  char listed[4096][16];
  int listed_line[4096];
  size_t nlisted = 0;
  while (fgets(line, sizeof line, in) && nlisted < 4096) {
    unsigned pc;
    int ln;
    char name[16];
    if (sscanf(line, "\t%u\t[%d]\t%15[A-Z0-9]", &pc, &ln, name) == 3) {
      snprintf(listed[nlisted], sizeof listed[nlisted], "%s", name);
      listed_line[nlisted++] = ln;
    }
  }
  assert_int_equal(pclose(in), 0);
  unlink(path);
  lua_State *L = luaL_newstate();
  assert_int_equal(luaL_loadbuffer(L, ops_program, strlen(ops_program), "=t"), LUA_OK);
  bytes b = {NULL, 0};
  assert_int_equal(lua_dump(L, writer, &b, 0), 0);
  lua_close(L);
  mbxV_chunk c;
  assert_int_equal(read_ok(b, &c), 0);
  /* Depth-first over the tree, with an explicit stack. */
  const mbxV_chunk_proto *stack[64];
  size_t next_child[64];
  int top = 0;
  stack[0] = &c.main;
  next_child[0] = 0;
  size_t at = 0;
  for (size_t pc = 0; pc < c.main.ncode; pc++, at++) {
    assert_true(at < nlisted);
    assert_string_equal(mbxV_op_name(mbxV_op(c.main.code[pc])), listed[at]);
    assert_int_equal(c.main.lines[pc], listed_line[at]);
  }
  int distinct_ops[MBXV_OP_COUNT] = {0};
  for (size_t pc = 0; pc < c.main.ncode; pc++)
    distinct_ops[mbxV_op(c.main.code[pc])] = 1;
  while (top >= 0) {
    const mbxV_chunk_proto *f = stack[top];
    if (next_child[top] == f->nprotos) {
      top--;
      continue;
    }
    const mbxV_chunk_proto *child = &f->protos[next_child[top]++];
    for (size_t pc = 0; pc < child->ncode; pc++, at++) {
      assert_true(at < nlisted);
      assert_string_equal(mbxV_op_name(mbxV_op(child->code[pc])), listed[at]);
      assert_int_equal(child->lines[pc], listed_line[at]);
      distinct_ops[mbxV_op(child->code[pc])] = 1;
    }
    assert_true(top + 1 < 64);
    stack[++top] = child;
    next_child[top] = 0;
  }
  assert_int_equal(at, nlisted);
  int distinct = 0;
  for (int i = 0; i < MBXV_OP_COUNT; i++)
    distinct += distinct_ops[i];
  fprintf(stderr, "%d distinct opcodes compared over %zu instructions\n", distinct, nlisted);
  assert_true(distinct >= 50);
  mbxV_chunk_free(&c);
  free(b.p);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(globals_instructions_and_lines),
      cmocka_unit_test(every_constant_type),
      cmocka_unit_test(nested_functions_and_upvalues),
      cmocka_unit_test(absolute_line_entries),
      cmocka_unit_test(stripped_chunks_have_no_lines_or_names),
      cmocka_unit_test(truncations_and_mutations_are_refused_safely),
      cmocka_unit_test(nesting_is_capped),
      cmocka_unit_test(hostile_counts_are_refused),
      cmocka_unit_test(opcodes_and_lines_match_luac),
  };
  return cmocka_run_group_tests_name("vm/chunk", tests, NULL, NULL);
}
