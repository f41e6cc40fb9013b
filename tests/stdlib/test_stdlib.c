/* tests/stdlib/test_stdlib.c -- unit tests of stdlib/stdlib.c: the guest's global environment
   built by mbxL_open_sandbox: exactly the curated names, and stubs that name themselves. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>

#include "moonbox.h"
#include "stdlib/stdlib.h"
#include "tests/support/snippet.h"
#include "vm/arena.h"
#include "vm/heap.h"
#include "vm/vm.h"

/* Lua that compares the keys of table `t` with the space-separated list `want`, and returns
   "" when they are the same set, else what is missing and what is extra. */
#define SAME_KEYS                                                                                  \
  "local function same_keys(t, want) "                                                             \
  "  local expected, missing, extra = {}, '', '' "                                                 \
  "  local i = 1 "                                                                                 \
  "  while i <= #want do "                                                                         \
  "    local j = i while j <= #want and want:sub(j, j) ~= ' ' do j = j + 1 end "                   \
  "    expected[want:sub(i, j - 1)] = true i = j + 1 "                                             \
  "  end "                                                                                         \
  "  for k in pairs(expected) do if rawget(t, k) == nil then missing = missing .. ' ' .. k end "   \
  "end "                                                                                           \
  "  for k in pairs(t) do if not expected[k] then extra = extra .. ' ' .. tostring(k) end end "    \
  "  if missing == '' and extra == '' then return '' end "                                         \
  "  return 'missing:' .. missing .. ' extra:' .. extra "                                          \
  "end "

static void expect_keys(const char *table_expr, const char *names) {
  char code[4096];
  snprintf(code, sizeof code, "%s return same_keys(%s, '%s')", SAME_KEYS, table_expr, names);
  snippet_check_value(code, "\"\"");
}

static void globals_are_exactly_the_curated_set(void **state) {
  (void)state;
  expect_keys("package", "config cpath loaded loadlib path preload searchers searchpath");
  expect_keys("_G", "_G _VERSION assert collectgarbage coroutine debug dofile error fs "
                    "getmetatable io ipairs json load loadfile math next os package pairs pcall "
                    "print proc rawequal rawget rawlen rawset require select setmetatable string "
                    "table tonumber tostring type utf8 warn xpcall");
  snippet_check_value("return _VERSION, _G._G == _G", "[\"Lua 5.4\",true]");
}

static void dangerous_names_are_absent(void **state) {
  (void)state;
  snippet_check_value("local n = 0 for _, k in ipairs{'loadstring', 'unpack', 'module', "
                      "'setfenv', 'getfenv', 'newproxy', 'gcinfo'} do if _G[k] ~= nil then n = n "
                      "+ 1 end end return n",
                      "0");
  snippet_check_value("return string.dump", "null");
  /* os, io and require exist, but lead nowhere outside the sandbox: the host-reaching
     functions are stubs that say why, os.exit ends only the run, require reads files of the view only. */
  snippet_check_value("return (io.open('/etc/passwd'))", "null");
  snippet_check_error("io.popen('id')", MBX_RUNTIME_ERROR, "io.popen is not available");
  snippet_check_value("return io.read('l')", "null"); /* an empty stdin */
  snippet_check_error("io.lines('/etc/hostname')", MBX_RUNTIME_ERROR,
                      "/etc/hostname: No such file or directory (not in the sandbox view");
  snippet_check_error("os.execute('id')", MBX_RUNTIME_ERROR, "os.execute is not available");
  snippet_check_error("os.exit(1)", MBX_RUNTIME_ERROR, "os.exit(1)");
  /* debug is the curated subset (stdlib/debug.c): no hooks, no registry. */
  snippet_check_value("return require('debug') == debug", "true");
  snippet_check_error("debug.getregistry()", MBX_RUNTIME_ERROR,
                      "debug.getregistry is not available");
  snippet_check_error("require('lfs')", MBX_RUNTIME_ERROR, "module 'lfs' not found:");
  snippet_check_value("return require('os') == os, os.getenv('HOME'), os.getenv('PATH')",
                      "[true,null,null]");
}

static void libraries_hold_exactly_their_functions(void **state) {
  (void)state;
  expect_keys("string", "byte char find format gmatch gsub len lower match pack packsize rep "
                        "reverse sub unpack upper");
  expect_keys("table", "concat insert move pack remove sort unpack");
  expect_keys("utf8", "char charpattern codepoint codes len offset");
  expect_keys("coroutine", "close create isyieldable resume running status wrap yield");
  expect_keys(
      "io",
      "close flush input lines open output popen read stderr stdin stdout tmpfile type write");
  expect_keys("fs", "exists list mkdir remove stat");
  expect_keys("os", "clock date difftime execute exit getenv remove rename setlocale time "
                    "tmpname");
  expect_keys("json", "array decode encode null");
  expect_keys("proc", "run");
  /* io.stdout is a file (methods through its protected metatable). */
  snippet_check_value("return type(io.stdout), io.type(io.stdout), type(io.stdout.write), "
                      "getmetatable(io.stdout)",
                      "[\"userdata\",\"file\",\"function\",\"FILE*\"]");
  snippet_check_value("local n = 0 for k, v in pairs(math) do n = n + 1 end "
                      "return n >= 25, math.floor ~= nil, math.random ~= nil",
                      "[true,true,true]");
}

/* The functions whose stock versions loop in C without the hook are all present, as our
   metered versions (stdlib/pattern.c, strbuild.c, table.c, utf8.c), and work. */
static void metered_replacements_are_present(void **state) {
  (void)state;
  snippet_check_value("return string.find('hello', 'l+'), string.match('k=v', '(%w+)=(%w+)'), "
                      "string.gsub('aaa', 'a', 'b'), string.rep('ab', 3, '-'), "
                      "string.unpack('i4', string.pack('i4', 7))",
                      "[3,\"k\",\"bbb\",\"ab-ab-ab\",7,5]");
  snippet_check_value("local t = {3, 1, 2} table.sort(t) table.insert(t, 4) table.remove(t, 1) "
                      "return table.concat(t, ','), table.unpack(table.move({1, 2}, 1, 2, 2))",
                      "[\"2,3,4\",1,1,2]");
  snippet_check_value(
      "local n = 0 for w in string.gmatch('a b c', '%a') do n = n + 1 end "
      "return n, utf8.len('h\\u{e9}'), utf8.offset('h\\u{e9}', 2), utf8.codepoint('A')",
      "[3,2,2,65]");
}

static void inputs_cannot_shadow_builtins(void **state) {
  (void)state;
  mbx_sandbox *sb = snippet_sandbox();
  mbx_result *res = NULL;
  mbx_error err;
  const char *code = "return x";
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"print\": 1}", 12, &res, &err),
                   MBX_INVALID_INPUT);
  assert_null(res);
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"string\": 1}", 13, &res, &err),
                   MBX_INVALID_INPUT);
  assert_null(res);
  assert_int_equal(mbx_run(sb, code, strlen(code), "{\"x\": 1}", 8, &res, &err), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "1");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

static void sandboxes_have_separate_globals(void **state) {
  (void)state;
  mbx_sandbox *a = snippet_sandbox(), *b = snippet_sandbox();
  snippet_outcome o;
  assert_int_equal(snippet_run_in(a, "shared = 1 string.extra = 2 print = nil return 0", &o),
                   MBX_OK);
  assert_int_equal(snippet_run_in(b, "return shared, string.extra, type(print)", &o), MBX_OK);
  assert_string_equal(o.value, "[null,null,\"function\"]");
  /* Within one sandbox, globals persist between runs. */
  assert_int_equal(snippet_run_in(a, "return shared, string.extra, print", &o), MBX_OK);
  assert_string_equal(o.value, "[1,2,null]");
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

/* luaL_argerror names a function called without a name from the loaded-module table: base
   functions too, each under one name (issue 9, F.2 and E.5). */
static void functions_called_without_a_name_are_named(void **state) {
  (void)state;
  snippet_check_value("return select(2, pcall(setmetatable, 1))",
                      "\"bad argument #1 to 'setmetatable' (table expected, got number)\"");
  snippet_check_value("return select(2, pcall(rawlen, 1))",
                      "\"bad argument #1 to 'rawlen' (table or string expected, got number)\"");
  snippet_check_value("return select(2, pcall(string.rep))",
                      "\"bad argument #1 to 'string.rep' (string expected, got no value)\"");
  snippet_check_value("return select(2, pcall(json.encode))",
                      "\"bad argument #1 to 'json.encode' (value expected)\"");
}

/* ---- no code address reaches a guest (issue 9, D) ---- */

/* Depth-first over everything reachable from the value on top (popped): table keys, values
   and metatables. Counts the light C functions met and the C functions seen; seen is a
   table at index `seen` so cycles end. */
static void walk(lua_State *L, int seen, int *light, int *cfuncs) {
  int v = lua_gettop(L);
  int t = lua_type(L, v);
  if ((t != LUA_TTABLE && t != LUA_TFUNCTION && t != LUA_TUSERDATA) ||
      (lua_pushvalue(L, v), lua_rawget(L, seen))) {
    lua_settop(L, v - 1);
    return;
  }
  lua_pop(L, 1);
  lua_pushvalue(L, v);
  lua_pushboolean(L, 1);
  lua_rawset(L, seen);
  if (t == LUA_TFUNCTION) {
    if (lua_iscfunction(L, v)) (*cfuncs)++;
    if (mbxL_is_light_cfunction(L, v)) (*light)++;
  } else if (t == LUA_TUSERDATA) {
    /* A file's methods are reached through its metatable's __index (io.stdout.write). */
    if (lua_getmetatable(L, v)) walk(L, seen, light, cfuncs);
  } else {
    lua_pushnil(L);
    while (lua_next(L, v)) {
      lua_pushvalue(L, -2);
      walk(L, seen, light, cfuncs);
      walk(L, seen, light, cfuncs);
    }
    if (lua_getmetatable(L, v)) walk(L, seen, light, cfuncs);
  }
  lua_settop(L, v - 1);
}

/* What the factories hand out at run time, next to the globals and the string metatable. */
static const char REACHABLE[] =
    "local f = {} "
    "f[1], f[2] = pairs({}) f[3] = ipairs({}) f[4] = utf8.codes('') "
    "f[5] = utf8.codes('', true) f[6] = string.gmatch('', '') "
    "f[7] = coroutine.wrap(function() end) f[8] = getmetatable('') "
    "f[9] = select(2, load('return 1')) f[10] = load('return 1') "
    /* And, so that a new factory cannot slip past this list, whatever every library
       function returns for a few simple argument lists. */
    "local skip = {[os.exit] = true, [coroutine.yield] = true} "
    "local libs = {_G, string, table, math, utf8, coroutine, os, io, json} "
    "for _, lib in ipairs(libs) do "
    "  for _, fn in pairs(lib) do "
    "    if type(fn) == 'function' and not skip[fn] then "
    "      for _, args in ipairs{{}, {{}}, {''}, {'', ''}, {'', true}, {{}, 1}} do "
    "        f[#f + 1] = table.pack(pcall(fn, table.unpack(args, 1, 2))) "
    "      end "
    "    end "
    "  end "
    "end "
    "return f";

static void no_light_c_function_is_reachable(void **state) {
  (void)state;
  mbxV_config cfg = {.memory_limit = 64u << 20,
                     .output_limit = 1u << 20,
                     .source_limit = 1u << 16,
                     .address_key = 1};
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_State *L = vm->L;
  lua_pushcfunction(L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_OK);
  lua_newtable(L);
  int seen = lua_gettop(L);
  int light = 0, cfuncs = 0;
  lua_pushglobaltable(L);
  walk(L, seen, &light, &cfuncs);
  assert_int_equal(luaL_loadstring(L, REACHABLE), LUA_OK);
  assert_int_equal(lua_pcall(L, 0, 1, 0), LUA_OK);
  walk(L, seen, &light, &cfuncs);
  assert_int_equal(light, 0);
  /* The walk did reach the libraries (every stock function is a C function). */
  assert_true(cfuncs > 100);
  /* And stock identities hold: pairs returns the global next. */
  assert_int_equal(luaL_dostring(L, "return select(1, pairs({})) == next"), LUA_OK);
  assert_true(lua_toboolean(L, -1));
  mbxV_vm_close(vm);
  free(vm);
}

/* The attack of issue 9 D: the order next() walks function keys in follows their hashes,
   `address mod (2^k - 1)` — for a light C function its code address: the same in every
   sandbox of a process, and probing three table sizes recovers the library's address (CRT).
   The probe makes one table keyed by every library function and reports the order next()
   walks them in. Code-address hashes would fix the relative order of most pairs in every
   sandbox; closures in each sandbox's own slot (a random address) leave only the pairs whose
   hashes lie close together (a slot's base shifts all of them alike): about a tenth. Since
   one template serves a size class (vm/arena.c), the slots of one runtime share the low 32
   bits of their bases (Lua hashes pointers by exactly those), so siblings of one runtime walk
   in one order, drawn at random per runtime: the probe runs in ten runtimes of this process
   (code addresses are the same in all of them), one sandbox each. */
#define ORDER_PROBE                                                                                \
  "local names = {} "                                                                              \
  "for _, lib in ipairs{'_G', 'string', 'table', 'math', 'utf8', 'coroutine', 'os'} do "           \
  "  for k, v in pairs(_G[lib]) do "                                                               \
  "    if type(v) == 'function' then names[#names + 1] = lib .. '.' .. k end "                     \
  "  end "                                                                                         \
  "end "                                                                                           \
  "table.sort(names) "                                                                             \
  "local t = {} "                                                                                  \
  "for i, n in ipairs(names) do local lib, k = n:match('([%w_]+)%.(%w+)') t[_G[lib][k]] = i end "  \
  "local out = {} for _, i in next, t do out[#out + 1] = i end "                                   \
  "return table.concat(out, ' ')"

static void function_key_order_varies_between_sandboxes(void **state) {
  (void)state;
  enum { SANDBOXES = 10, MAX_FUNCS = 256 };
  mbx_sandbox *sb[SANDBOXES];
  mbx_runtime *rts[SANDBOXES];
  mbx_policy *policy = mbx_policy_new();
  static int rank[SANDBOXES][MAX_FUNCS + 1];
  int count = -1;
  snippet_outcome o;
  for (int i = 0; i < SANDBOXES; i++) {
    rts[i] = mbx_runtime_new(NULL);
    assert_non_null(rts[i]);
    sb[i] = mbx_sandbox_new(rts[i], policy, NULL);
    assert_non_null(sb[i]);
    assert_int_equal(snippet_run_in(sb[i], ORDER_PROBE, &o), MBX_OK);
    int n = 0;
    for (char *p = o.value + 1; *p && *p != '"' && n < MAX_FUNCS; n++) {
      long f = strtol(p, &p, 10);
      assert_true(f >= 1 && f <= MAX_FUNCS);
      rank[i][f] = n;
    }
    if (count < 0) count = n;
    assert_int_equal(n, count);
  }
  assert_true(count > 90); /* every library function was probed */
  int pairs = 0, fixed = 0;
  for (int f = 1; f <= count; f++) {
    for (int g = f + 1; g <= count; g++) {
      int before = rank[0][f] < rank[0][g], same = 1;
      for (int i = 1; i < SANDBOXES; i++)
        same &= (rank[i][f] < rank[i][g]) == before;
      pairs++;
      fixed += same;
    }
  }
  print_message("%d of %d pairs of function keys in the same order in all %d sandboxes\n", fixed,
                pairs, SANDBOXES);
  assert_true(fixed * 10 < pairs * 4);
  for (int i = 0; i < SANDBOXES; i++) {
    mbx_sandbox_free(sb[i]);
    mbx_runtime_free(rts[i]);
  }
  mbx_policy_free(policy);
}

/* ---- the idle state, block by block (docs/performance.md, "What an idle sandbox holds") ----
   The libraries are built as vm/vm.c builds a template (an arena, zero-filled, one full
   collection), through an allocator that remembers the type Lua names for each new object
   (the osize of a NULL block, Lua manual 4.6). Then every block of the arena is classified by
   the object that owns it. Lua does not name the parts of a table (they are allocated as plain
   vectors), so the walk reads them from the Table struct of the shipped 5.4.4
   (ltable.h/lobject.h: alimit at offset 12, array at 16, node at 24), checking that each
   pointer it reads is a live block it found. */

#ifdef MBX_ARENA_MALLOC
static void idle_state_blocks_by_owner(void **state) {
  (void)state;
  skip(); /* no arena: every block is its own malloc */
}
#else
#define WALK_MAX 4096
typedef struct walk_block {
  char *payload;
  size_t size; /* what Lua asked for: only these bytes are read (ASan poisons the slack) */
  int tag;     /* Lua's type of a new object, 0 for a vector (array, hash part, stack, ...) */
} walk_block;
static walk_block walk_live[WALK_MAX];
static int walk_n;

static void *walk_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  int tag = ptr ? -1 : (int)osize;
  void *r = mbxV_heap_alloc(ud, ptr, osize, nsize);
  if (ptr) {
    for (int i = 0; i < walk_n; i++)
      if (walk_live[i].payload == ptr) {
        if (r) {
          walk_live[i].payload = r;
          walk_live[i].size = nsize;
        } else
          walk_live[i] = walk_live[--walk_n];
        break;
      }
  } else if (r && walk_n < WALK_MAX) {
    walk_live[walk_n++] = (walk_block){r, nsize, tag};
  }
  return r;
}

enum {
  OWN_STRING,
  OWN_TABLE,
  OWN_ARRAY,
  OWN_HASH,
  OWN_CCLOSURE,
  OWN_LCLOSURE,
  OWN_USERDATA,
  OWN_THREAD,
  OWN_UPVALUE,
  OWN_PROTO,
  OWN_STRTAB,
  OWN_OTHER,
  OWN_N
};
static const char *const own_name[OWN_N] = {"strings",
                                            "tables (the Table struct)",
                                            "table array parts",
                                            "table hash parts",
                                            "C closures (1 upvalue: hide_code_addresses)",
                                            "Lua closures",
                                            "userdata",
                                            "the main thread and global state",
                                            "upvalues",
                                            "function prototypes",
                                            "the string table (interned strings' hash array)",
                                            "other vectors (the stack, CallInfo, buffers)"};

static int walk_find(const char *payload) {
  for (int i = 0; i < walk_n; i++)
    if (walk_live[i].payload == payload) return i;
  return -1;
}

static void idle_state_blocks_by_owner(void **state) {
  (void)state;
  const size_t size = (size_t)2 << 20;
  char *m = malloc(2 * size);
  assert_non_null(m);
  char *base = (char *)(((uintptr_t)m + size - 1) & ~(uintptr_t)(size - 1));
  mbxV_arena *a = mbxV_arena_init(base, size, sizeof(mbxV_vm));
  mbxV_vm *vm = (mbxV_vm *)a->user;
  mbxV_heap_init(&vm->heap, (size_t)64 << 20);
  vm->heap.arena = a;
  a->zero_fill = 1;
  walk_n = 0;
  lua_State *L = lua_newstate(walk_alloc, &vm->heap);
  assert_non_null(L);
  *(mbxV_vm **)lua_getextraspace(L) = vm;
  vm->L = L;
  lua_pushcfunction(L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(L, 0, 0, 0), LUA_OK);
  lua_gc(L, LUA_GCCOLLECT);
  assert_true(walk_n < WALK_MAX);

  int owner[WALK_MAX];
  for (int i = 0; i < walk_n; i++) {
    static const int by_tag[] = {
        [LUA_TSTRING] = OWN_STRING, [LUA_TTABLE] = OWN_TABLE,     [LUA_TUSERDATA] = OWN_USERDATA,
        [LUA_TTHREAD] = OWN_THREAD, [LUA_NUMTYPES] = OWN_UPVALUE, [LUA_NUMTYPES + 1] = OWN_PROTO};
    int t = walk_live[i].tag;
    owner[i] = OWN_OTHER;
    if (t == LUA_TFUNCTION)
      owner[i] = OWN_LCLOSURE; /* C closures: by size, below */
    else if (t > 0 && t < (int)(sizeof by_tag / sizeof *by_tag) && by_tag[t])
      owner[i] = by_tag[t];
    else if (t == LUA_TSTRING)
      owner[i] = OWN_STRING;
  }
  int strings = 0;
  size_t nodes = 0, nodes_used = 0; /* a Node is 24 bytes; its value's type tag at offset 8 */
  for (int i = 0; i < walk_n; i++) {
    char *p = walk_live[i].payload;
    if (owner[i] == OWN_STRING) strings++;
    if (owner[i] == OWN_LCLOSURE && p[8] == 6 + (2 << 4)) owner[i] = OWN_CCLOSURE; /* LUA_VCCL */
    if (owner[i] != OWN_TABLE) continue;
    char *array = *(char **)(void *)(p + 16), *node = *(char **)(void *)(p + 24);
    int at = array ? walk_find(array) : -1, nt = walk_find(node);
    if (at >= 0) owner[at] = OWN_ARRAY;
    if (nt < 0) continue; /* the static dummy node: an empty hash part */
    owner[nt] = OWN_HASH;
    size_t n = (size_t)1 << (unsigned char)p[11]; /* lsizenode */
    assert_true(n * 24 <= walk_live[nt].size);
    nodes += n;
    for (size_t k = 0; k < n; k++)
      nodes_used += (node[k * 24 + 8] & 0x0f) != LUA_TNIL;
  }
  /* The string table: the one vector whose words are each NULL or a live string. */
  for (int i = 0; i < walk_n; i++) {
    if (owner[i] != OWN_OTHER) continue;
    char *p = walk_live[i].payload;
    size_t words = walk_live[i].size / sizeof(char *);
    size_t hits = 0, ok = 1;
    for (size_t w = 0; w < words && ok; w++) {
      char *v = ((char **)(void *)p)[w];
      int k = v ? walk_find(v) : -1;
      if (v && (k < 0 || owner[k] != OWN_STRING)) ok = 0;
      hits += v != NULL;
    }
    if (ok && hits > 0 && words >= (size_t)strings / 2) owner[i] = OWN_STRTAB;
  }

  size_t count[OWN_N] = {0}, bytes[OWN_N] = {0}, free_blocks = 0, free_bytes = 0, live = 0;
  for (char *b = a->heap; b < base + mbxV_arena_prefix(a);) {
    size_t w = *(size_t *)(void *)b, sz = w & ~(size_t)7;
    if (w & 1) {
      free_blocks++;
      free_bytes += sz;
    } else {
      int k = walk_find(b + MBXV_ARENA_HEADER);
      assert_true(k >= 0); /* every live block is one Lua asked for */
      count[owner[k]]++;
      bytes[owner[k]] += sz;
      live += sz;
    }
    b += sz;
  }
  size_t prefix = mbxV_arena_prefix(a);
  printf("| the idle state's arena, by owner | blocks | bytes (8-byte headers included) |\n"
         "|---|---:|---:|\n");
  printf("| TLSF header (mbxV_arena) | 1 | %zu |\n", (size_t)(a->user - a->base));
  printf("| vm struct (mbxV_vm) | 1 | %zu |\n", (size_t)(a->heap - a->user));
  for (int o = 0; o < OWN_N; o++)
    if (count[o]) printf("| %s | %zu | %zu |\n", own_name[o], count[o], bytes[o]);
  printf("| (hash parts: %zu of %zu nodes in use; a part is a power of two) | | |\n", nodes_used,
         nodes);
  printf("| free blocks left by the build | %zu | %zu |\n", free_blocks, free_bytes);
  printf("| the prefix a sandbox copies | %d live blocks, %zu B | %zu B = %zu pages |\n", walk_n,
         live, prefix, (prefix + MBXV_ARENA_PAGE - 1) / MBXV_ARENA_PAGE);
  /* What the build must not leave in the template: garbage holes (its scratch is C memory,
     its tables are sized before they are filled) and io.stdin's 4 KiB read-ahead (made at
     the first read). */
  assert_true(free_bytes <= 256);
  assert_true(bytes[OWN_USERDATA] < 1024);
  assert_int_equal(count[OWN_LCLOSURE], 0);
  assert_int_equal(count[OWN_STRTAB], 1);
  lua_close(L);
  free(m);
}
#endif

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(globals_are_exactly_the_curated_set),
      cmocka_unit_test(dangerous_names_are_absent),
      cmocka_unit_test(libraries_hold_exactly_their_functions),
      cmocka_unit_test(metered_replacements_are_present),
      cmocka_unit_test(inputs_cannot_shadow_builtins),
      cmocka_unit_test(sandboxes_have_separate_globals),
      cmocka_unit_test(functions_called_without_a_name_are_named),
      cmocka_unit_test(no_light_c_function_is_reachable),
      cmocka_unit_test(function_key_order_varies_between_sandboxes),
      cmocka_unit_test(idle_state_blocks_by_owner),
  };
  return cmocka_run_group_tests_name("stdlib/stdlib", tests, snippet_setup, snippet_teardown);
}
