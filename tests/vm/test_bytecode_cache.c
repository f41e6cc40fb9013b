/* tests/vm/test_bytecode_cache.c -- unit tests of vm/bytecode_cache.c: hits, LRU, threads. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lua.h>

#include "include/moonbox.h"
#include "stdlib/stdlib.h"
#include "vm/bytecode_cache.h"
#include "vm/run.h"
#include "vm/vm.h"

static mbxV_vm *open_vm(uint64_t instructions) {
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = 16u << 20,
                     .instruction_limit = instructions,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 16,
                     .source_limit = 1u << 20,
                     .address_key = 3};
  assert_true(mbxV_vm_open(vm, &cfg));
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
  return vm;
}

static void close_vm(mbxV_vm *vm) {
  mbxV_vm_close(vm);
  free(vm);
}

/* Run code through the cache; the outcome is left in *out (free it). */
static mbxV_status run_cached(mbxV_vm *vm, mbxV_bcache *c, const char *code, const char *name,
                              mbxV_outcome *out) {
  mbxV_refusal err;
  mbxV_status s = mbxV_run_cached(vm, c, code, strlen(code), name, NULL, 0, out, &err);
  assert_true(s < MBX_API_ERROR_BASE);
  return s;
}

static void expect_cached(mbxV_vm *vm, mbxV_bcache *c, const char *code, const char *json) {
  mbxV_outcome out;
  mbxV_status s = run_cached(vm, c, code, "=input", &out);
  if (s != MBXV_OK) fail_msg("%s: status %d: %s", code, s, out.error.message);
  assert_string_equal(out.value_json, json);
  mbxV_outcome_free(&out);
}

static mbxV_bcache_stats stats_of(mbxV_bcache *c) {
  mbxV_bcache_stats st;
  mbxV_bcache_stats_get(c, &st);
  return st;
}

static void miss_then_hit(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  mbxV_vm *vm = open_vm(0);
  const char *code = "local t = {} for i = 1, 10 do t[i] = i * i end return t[10], #t";
  expect_cached(vm, c, code, "[100,10]");
  mbxV_bcache_stats st = stats_of(c);
  assert_int_equal(st.misses, 1);
  assert_int_equal(st.hits, 0);
  assert_int_equal(st.entries, 1);
  assert_true(st.bytes > strlen(code));
  expect_cached(vm, c, code, "[100,10]");
  expect_cached(vm, c, code, "[100,10]");
  st = stats_of(c);
  /* The third run in a row is served by the function the vm kept from the second (vm/run.c),
     without asking the cache. */
  assert_int_equal(st.hits, 1);
  assert_int_equal(st.entries, 1);
  /* Another chunk name, or one byte more, is another chunk. */
  mbxV_outcome out;
  assert_int_equal(run_cached(vm, c, code, "=other", &out), MBX_OK);
  mbxV_outcome_free(&out);
  expect_cached(vm, c, "local t = {} for i = 1, 10 do t[i] = i * i end return t[10], #t ",
                "[100,10]");
  st = stats_of(c);
  assert_int_equal(st.hits, 1);
  assert_int_equal(st.misses, 3);
  assert_int_equal(st.entries, 3);
  /* Inputs bind globals before the (cached) chunk runs: a hit sees them like a miss. */
  mbxV_refusal err;
  const char *uses = "return x * 2";
  for (int i = 0; i < 2; i++) {
    char inputs[32];
    snprintf(inputs, sizeof inputs, "{\"x\": %d}", 20 + i);
    assert_int_equal(
        mbxV_run_cached(vm, c, uses, strlen(uses), "=input", inputs, strlen(inputs), &out, &err),
        MBX_OK);
    assert_string_equal(out.value_json, i ? "42" : "40");
    mbxV_outcome_free(&out);
  }
  close_vm(vm);
  mbxV_bcache_free(c);
}

/* The parser is charged 1 instruction per 16 bytes; a hit never runs it, so it is charged
   nothing for the 64 KB of comment the chunk carries. */
static void a_hit_skips_the_parser(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  mbxV_vm *vm = open_vm(0);
  size_t n = 64 * 1024;
  char *code = malloc(n + 32);
  assert_non_null(code);
  memset(code, ' ', n);
  memcpy(code, "--[[", 4);
  strcpy(code + n - 4, "]] return 5");
  mbxV_outcome miss, hit;
  assert_int_equal(run_cached(vm, c, code, "=input", &miss), MBX_OK);
  assert_int_equal(run_cached(vm, c, code, "=input", &hit), MBX_OK);
  assert_string_equal(hit.value_json, "5");
  assert_true(miss.instructions >= (n - 4096) / 16);
  assert_true(hit.instructions < 100);
  assert_int_equal(stats_of(c).hits, 1);
  mbxV_outcome_free(&miss);
  mbxV_outcome_free(&hit);
  free(code);
  close_vm(vm);
  mbxV_bcache_free(c);
}

/* Only clean compiles are cached: not a syntax error, not a parse a limit cut short. */
static void failed_compiles_are_not_cached(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  mbxV_vm *vm = open_vm(0);
  mbxV_outcome out;
  assert_int_equal(run_cached(vm, c, "return +", "=input", &out), MBX_SYNTAX_ERROR);
  mbxV_outcome_free(&out);
  close_vm(vm);
  vm = open_vm(200);
  size_t n = 64 * 1024;
  char *code = malloc(n + 1);
  assert_non_null(code);
  memset(code, '\n', n);
  code[n] = '\0';
  assert_int_equal(run_cached(vm, c, code, "=input", &out), MBX_INSTRUCTION_LIMIT);
  mbxV_outcome_free(&out);
  assert_int_equal(stats_of(c).entries, 0);
  free(code);
  close_vm(vm);
  mbxV_bcache_free(c);
}

/* Debug info is kept: a cached chunk reports the same chunk:line, names and traceback. */
static void error_lines_survive_the_cache(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  mbxV_vm *vm = open_vm(0);
  const char *code = "local a = 1\n"
                     "local function f()\n"
                     "  return a + missing\n"
                     "end\n"
                     "local r = f() return r\n";
  char first[300] = "", first_tb[300] = "";
  for (int round = 0; round < 2; round++) {
    mbxV_outcome out;
    assert_int_equal(run_cached(vm, c, code, "=script.lua", &out), MBX_RUNTIME_ERROR);
    assert_int_equal(out.error.line, 3);
    assert_string_equal(out.error.chunk, "script.lua");
    assert_non_null(strstr(out.error.message, "global 'missing'"));
    if (strstr(out.error.traceback, "script.lua:5") == NULL) fail_msg("%s", out.error.traceback);
    if (round == 0) {
      snprintf(first, sizeof first, "%s", out.error.message);
      snprintf(first_tb, sizeof first_tb, "%s", out.error.traceback);
    } else {
      assert_string_equal(out.error.message, first);
      assert_string_equal(out.error.traceback, first_tb);
    }
    mbxV_outcome_free(&out);
  }
  assert_int_equal(stats_of(c).hits, 1);
  close_vm(vm);
  mbxV_bcache_free(c);
}

/* A forged key (the hash of one source stored with another's bytecode, as a collision would)
   never makes the first source run the second's code: the full source decides. */
static void a_forged_collision_is_verified_away(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(MBXV_BCACHE_DEFAULT_BYTES);
  mbxV_vm *vm = open_vm(0);
  const char *evil = "return 'evil'", *good = "return 'good'";
  const unsigned flags = MBXV_BCACHE_TEXT_WITH_DEBUG;
  /* Compile evil for real to get its bytecode. */
  expect_cached(vm, c, evil, "\"evil\"");
  mbxV_bcache_key evil_key = mbxV_bcache_key_of(evil, strlen(evil), "=input", flags);
  const mbxV_bcache_entry *e = mbxV_bcache_get(c, evil_key, evil, strlen(evil), "=input", flags);
  assert_non_null(e);
  size_t code_len;
  const char *bytes = mbxV_bcache_code(e, &code_len);
  char *evil_code = malloc(code_len);
  assert_non_null(evil_code);
  memcpy(evil_code, bytes, code_len);
  mbxV_bcache_release(c, e);
  /* Store it under good's key, with evil's source (a true collision) ... */
  mbxV_bcache_key good_key = mbxV_bcache_key_of(good, strlen(good), "=input", flags);
  assert_true(good_key.low != evil_key.low || good_key.high != evil_key.high);
  assert_int_equal(
      mbxV_bcache_put(c, good_key, evil, strlen(evil), "=input", flags, evil_code, code_len), 1);
  uint64_t rejected = stats_of(c).rejected;
  expect_cached(vm, c, good, "\"good\"");
  assert_int_equal(stats_of(c).rejected, rejected + 1);
  /* ... and with good's source but another chunk name or flags: still verified. */
  assert_int_equal(
      mbxV_bcache_put(c, good_key, good, strlen(good), "=other", flags, evil_code, code_len), 1);
  /* Another text between the runs of good: three runs of a text in a row would serve the
     third from the function the vm kept (vm/run.c), never asking the cache. */
  expect_cached(vm, c, "return 0", "0");
  expect_cached(vm, c, good, "\"good\"");
  assert_int_equal(
      mbxV_bcache_put(c, good_key, good, strlen(good), "=input", flags + 1, evil_code, code_len),
      1);
  expect_cached(vm, c, "return 0", "0");
  expect_cached(vm, c, good, "\"good\"");
  assert_int_equal(stats_of(c).rejected, rejected + 3);
  free(evil_code);
  close_vm(vm);
  mbxV_bcache_free(c);
}

static mbxV_bcache_key key_n(int i) {
  char src[16];
  snprintf(src, sizeof src, "src%d", i);
  return mbxV_bcache_key_of(src, strlen(src), "=k", 0);
}

static int put_n(mbxV_bcache *c, int i, size_t code_len) {
  char src[16];
  snprintf(src, sizeof src, "src%d", i);
  char *code = calloc(1, code_len);
  int ok = mbxV_bcache_put(c, key_n(i), src, strlen(src), "=k", 0, code, code_len);
  free(code);
  return ok;
}

static int has_n(mbxV_bcache *c, int i) {
  char src[16];
  snprintf(src, sizeof src, "src%d", i);
  const mbxV_bcache_entry *e = mbxV_bcache_get(c, key_n(i), src, strlen(src), "=k", 0);
  mbxV_bcache_release(c, e);
  return e != NULL;
}

/* Bounded by bytes: the least recently used entries go first, a get refreshes an entry, an
   entry bigger than the bound is not kept, and lowering the bound evicts at once. */
static void lru_eviction_by_bytes(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(3 * 1200);
  for (int i = 0; i < 3; i++)
    assert_int_equal(put_n(c, i, 1000), 1);
  assert_int_equal(stats_of(c).entries, 3);
  assert_true(has_n(c, 0)); /* 0 is now the most recent: 1 is the oldest */
  assert_int_equal(put_n(c, 3, 1000), 1);
  assert_int_equal(stats_of(c).entries, 3);
  assert_false(has_n(c, 1));
  assert_true(has_n(c, 0));
  assert_true(has_n(c, 2));
  assert_true(has_n(c, 3));
  assert_true(stats_of(c).bytes <= 3 * 1200);
  assert_int_equal(stats_of(c).evictions, 1);
  /* One big entry pushes out everything else. */
  assert_int_equal(put_n(c, 4, 3000), 1);
  assert_int_equal(stats_of(c).entries, 1);
  assert_true(has_n(c, 4));
  /* Too big for the bound at all. */
  assert_int_equal(put_n(c, 5, 4000), 0);
  assert_false(has_n(c, 5));
  assert_true(has_n(c, 4));
  /* Shrinking the bound evicts now; 0 empties the cache and refuses everything. */
  mbxV_bcache_set_max(c, 0);
  assert_int_equal(stats_of(c).entries, 0);
  assert_int_equal(stats_of(c).bytes, 0);
  assert_int_equal(put_n(c, 6, 10), 0);
  mbxV_bcache_set_max(c, 1 << 20);
  /* Many entries: the table grows and every one is still found. */
  for (int i = 0; i < 2000; i++)
    assert_int_equal(put_n(c, 100 + i, 16), 1);
  for (int i = 0; i < 2000; i++)
    assert_true(has_n(c, 100 + i));
  mbxV_bcache_free(c);
}

/* An entry evicted while a reader holds it stays readable until released. */
static void a_held_entry_outlives_its_eviction(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  char code[64];
  memset(code, 'z', sizeof code);
  assert_int_equal(mbxV_bcache_put(c, key_n(1), "src1", 4, "=k", 0, code, sizeof code), 1);
  const mbxV_bcache_entry *e = mbxV_bcache_get(c, key_n(1), "src1", 4, "=k", 0);
  assert_non_null(e);
  mbxV_bcache_set_max(c, 0); /* evicts it */
  assert_int_equal(stats_of(c).entries, 0);
  size_t len;
  const char *p = mbxV_bcache_code(e, &len);
  assert_int_equal(len, sizeof code);
  assert_memory_equal(p, code, sizeof code); /* ASan would flag a freed entry here */
  mbxV_bcache_release(c, e);
  mbxV_bcache_free(c);
}

/* ---- threads ---- */

#define THREADS 4
#define ROUNDS 400
#define KEYS 6

typedef struct hammer {
  mbxV_bcache *c;
  int failures;
  char first_failure[200];
} hammer;

static void *hammer_main(void *arg) {
  hammer *h = arg;
  mbxV_vm *vm = calloc(1, sizeof *vm);
  mbxV_config cfg = {.memory_limit = 16u << 20,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 16,
                     .source_limit = 1u << 20};
  if (vm == NULL || !mbxV_vm_open(vm, &cfg)) {
    h->failures++;
    return NULL;
  }
  lua_pushcfunction(vm->L, mbxL_open_sandbox);
  lua_pcall(vm->L, 0, 0, 0);
  for (int i = 0; i < ROUNDS; i++) {
    int k = i % KEYS;
    char code[128], want[32];
    snprintf(code, sizeof code, "local s = 0 for i = 1, %d do s = s + i end return s", 10 + k);
    snprintf(want, sizeof want, "%d", (10 + k) * (11 + k) / 2);
    mbxV_outcome out;
    mbxV_refusal err;
    mbxV_status s = mbxV_run_cached(vm, h->c, code, strlen(code), "=input", NULL, 0, &out, &err);
    if (s != MBXV_OK || strcmp(out.value_json, want) != 0) {
      if (!h->failures++)
        snprintf(h->first_failure, sizeof h->first_failure, "status %d value %s want %s", s,
                 s < MBX_API_ERROR_BASE ? out.value_json : "-", want);
    }
    if (s < MBX_API_ERROR_BASE) mbxV_outcome_free(&out);
    /* Shrink and grow the bound now and then, so evictions race with loads. */
    if (i % 50 == 0) mbxV_bcache_set_max(h->c, (i / 50) % 2 ? 2000 : 1 << 20);
  }
  mbxV_vm_close(vm);
  free(vm);
  return NULL;
}

static void threads_hammer_the_same_keys(void **state) {
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  pthread_t threads[THREADS];
  hammer hs[THREADS];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 8u << 20);
  for (int i = 0; i < THREADS; i++) {
    hs[i] = (hammer){.c = c};
    assert_int_equal(pthread_create(&threads[i], &attr, hammer_main, &hs[i]), 0);
  }
  for (int i = 0; i < THREADS; i++)
    pthread_join(threads[i], NULL);
  pthread_attr_destroy(&attr);
  for (int i = 0; i < THREADS; i++)
    if (hs[i].failures)
      fail_msg("thread %d: %d failures, first: %s", i, hs[i].failures, hs[i].first_failure);
  mbxV_bcache_stats st = stats_of(c);
  assert_int_equal(st.hits + st.misses, THREADS * ROUNDS);
  assert_true(st.hits > 0);
  assert_true(st.entries <= KEYS);
  mbxV_bcache_free(c);
}

/* ---- a thread's copy of its last hit ---- */

/* Load text through the cache on vm's state; returns whether it was a hit. */
static int load_hit(mbxV_vm *vm, mbxV_bcache *c, const char *text) {
  int hit = -1;
  assert_int_equal(mbxV_bcache_load(c, vm->L, text, strlen(text), "=input", &hit), LUA_OK);
  lua_pop(vm->L, 1);
  return hit;
}

/* The copy serves a load only while its entry is still cached in that very cache: after an
   eviction, or in another cache (one made after the first was freed, perhaps at its
   address), the load misses and compiles. Its hits are counted like locked ones. */
static void a_thread_copy_serves_only_while_cached(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(0);
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  const char *text = "return 40 + 2";
  assert_int_equal(load_hit(vm, c, text), 0);
  assert_int_equal(load_hit(vm, c, text), 1); /* locked hit: the copy is made */
  assert_int_equal(load_hit(vm, c, text), 1); /* served by the copy */
  assert_int_equal(stats_of(c).hits, 2);
  assert_int_equal(stats_of(c).misses, 1);
  mbxV_bcache_set_max(c, 0); /* evicts it */
  mbxV_bcache_set_max(c, 1 << 20);
  assert_int_equal(load_hit(vm, c, text), 0);
  assert_int_equal(stats_of(c).misses, 2);
  assert_int_equal(load_hit(vm, c, text), 1);
  assert_int_equal(load_hit(vm, c, text), 1);
  /* A different text with the copy in place: compared byte for byte, so a miss. */
  assert_int_equal(load_hit(vm, c, "return 40 + 3"), 0);
  mbxV_bcache_free(c);
  mbxV_bcache *d = mbxV_bcache_new(1 << 20);
  assert_int_equal(load_hit(vm, d, text), 0);
  assert_int_equal(stats_of(d).hits, 0);
  mbxV_bcache_free(d);
  expect_cached(vm, NULL, text, "42");
  close_vm(vm);
}

/* Hits served by the copy still keep their entry recently used (every LAST_HIT_REFRESH-th
   goes through the lock): a hot entry is not the one evicted. */
static void copied_hits_keep_the_entry_recent(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(0);
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  assert_int_equal(load_hit(vm, c, "return 1"), 0);
  assert_int_equal(load_hit(vm, c, "return 2"), 0);
  size_t two = stats_of(c).bytes;
  for (int i = 0; i < 300; i++)
    assert_int_equal(load_hit(vm, c, "return 1"), 1);
  mbxV_bcache_set_max(c, two + two / 4); /* room for two entries of this size, not three */
  assert_int_equal(load_hit(vm, c, "return 3"), 0);
  assert_int_equal(stats_of(c).entries, 2);
  assert_int_equal(load_hit(vm, c, "return 1"), 1); /* kept: it was used last */
  assert_int_equal(load_hit(vm, c, "return 2"), 0); /* evicted: least recently used */
  mbxV_bcache_free(c);
  close_vm(vm);
}

/* ---- through the public API ---- */

/* Guest `load` never reaches the cache: neither a hit (a timing channel between tenants) nor
   a store (guest text must never come back as bytecode). */
static void guest_load_stays_out_of_the_cache(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  assert_non_null(sb);
  mbx_result *res;
  const char *top = "return 7";
  assert_int_equal(mbx_run(sb, top, strlen(top), NULL, 0, &res, NULL), MBX_OK);
  mbx_result_free(res);
  uint64_t one = mbx_runtime_usage(rt, MBX_CAP_BYTECODE_CACHE_BYTES);
  assert_true(one > 0);
  const char *loader = "local f = load('return 7') local g = load('return 8') return f() + g()";
  assert_int_equal(mbx_run(sb, loader, strlen(loader), NULL, 0, &res, NULL), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "15");
  mbx_result_free(res);
  /* Exactly one more entry: the loader chunk itself, sized like one entry, not three. */
  uint64_t two = mbx_runtime_usage(rt, MBX_CAP_BYTECODE_CACHE_BYTES);
  assert_true(two > one && two < 2 * one + 2 * strlen(loader) + 64);
  /* A different sandbox reuses the compile; disabling the cache empties it. */
  mbx_sandbox *other = mbx_sandbox_new(rt, p, NULL);
  assert_int_equal(mbx_run(other, top, strlen(top), NULL, 0, &res, NULL), MBX_OK);
  assert_string_equal(mbx_result_value_json(res, NULL), "7");
  mbx_result_free(res);
  assert_int_equal(mbx_runtime_usage(rt, MBX_CAP_BYTECODE_CACHE_BYTES), two);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_BYTECODE_CACHE_BYTES, 0, NULL), MBX_OK);
  assert_int_equal(mbx_runtime_usage(rt, MBX_CAP_BYTECODE_CACHE_BYTES), 0);
  assert_int_equal(mbx_run(other, top, strlen(top), NULL, 0, &res, NULL), MBX_OK);
  mbx_result_free(res);
  assert_int_equal(mbx_runtime_usage(rt, MBX_CAP_BYTECODE_CACHE_BYTES), 0);
  mbx_sandbox_free(other);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(miss_then_hit),
      cmocka_unit_test(a_hit_skips_the_parser),
      cmocka_unit_test(failed_compiles_are_not_cached),
      cmocka_unit_test(error_lines_survive_the_cache),
      cmocka_unit_test(a_forged_collision_is_verified_away),
      cmocka_unit_test(lru_eviction_by_bytes),
      cmocka_unit_test(a_held_entry_outlives_its_eviction),
      cmocka_unit_test(threads_hammer_the_same_keys),
      cmocka_unit_test(a_thread_copy_serves_only_while_cached),
      cmocka_unit_test(copied_hits_keep_the_entry_recent),
      cmocka_unit_test(guest_load_stays_out_of_the_cache),
  };
  return cmocka_run_group_tests_name("vm/bytecode_cache", tests, NULL, NULL);
}
