/* tests/vm/test_first_run.c -- unit tests of vm/first_run.c: a fresh sandbox's first run of a
   text its slot saw twice replays the recorded preparation, and leaves the state a prepared
   run leaves, byte for byte; nothing else is replayed. */
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
#include "vm/arena.h"
#include "vm/bytecode_cache.h"
#include "vm/run.h"
#include "vm/vm.h"

#define MIB ((size_t)1 << 20)

/* MBX_ARENA_MALLOC builds (the asan preset) have no slot bytes to record or replay: there
   the asan-arena preset runs these tests. */
#ifdef MBX_ARENA_MALLOC
#define NEEDS_THE_ARENA() skip()
#else
#define NEEDS_THE_ARENA() ((void)0)
#endif

static mbxV_config config(size_t memory) {
  mbxV_config cfg = {.memory_limit = memory,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 16,
                     .source_limit = 1u << 20,
                     .address_key = 3};
  return cfg;
}

/* What one fresh sandbox's first run left: its value and its state's bytes. */
typedef struct fresh_run {
  char value[256];
  char *bytes; /* the prefix, with the sandbox's own words (hole, high-water mark) zeroed */
  size_t len;
} fresh_run;

/* Run code on a fresh vm and take its state (then free the vm). */
static fresh_run run_on(mbxV_vm *vm, mbxV_bcache *c, const char *code) {
  mbxV_outcome out;
  mbxV_refusal err;
  mbxV_status s = mbxV_run_cached(vm, c, code, strlen(code), "=input", NULL, 0, &out, &err);
  if (s != MBXV_OK) fail_msg("%s: status %d: %s", code, s, out.error.message);
  fresh_run r = {.len = mbxV_arena_prefix(vm->slot->arena)};
  snprintf(r.value, sizeof r.value, "%.*s", (int)out.value_len, out.value_json);
  mbxV_outcome_free(&out);
  r.bytes = malloc(r.len);
  assert_non_null(r.bytes);
  mbxV_arena_copy_out(vm->slot->arena, r.bytes, r.len);
  size_t hole_len, hole_at = mbxV_vm_hole(vm, &hole_len);
  memset(r.bytes + hole_at, 0, hole_len);
  const size_t high_len = sizeof(uintptr_t); /* mbxV_arena.high, a pointer */
  memset(r.bytes + offsetof(mbxV_arena, high), 0, high_len);
  mbxV_vm_free(vm);
  return r;
}

static fresh_run run_fresh(mbxV_pool *pool, mbxV_bcache *c, size_t memory, const char *code) {
  mbxV_config cfg = config(memory);
  mbxV_vm *vm = NULL;
  assert_int_equal(mbxV_vm_new(pool, &cfg, mbxL_open_sandbox, &vm), MBXV_NEW_OK);
  return run_on(vm, c, code);
}

/* The slot's first sandbox builds the template (no restore, nothing to replay): a pool whose
   slot already holds one. */
static mbxV_pool *warm_pool(mbxV_bcache *c) {
  mbxV_pool *pool = mbxV_pool_new(4);
  free(run_fresh(pool, c, 16 * MIB, "return 0").bytes);
  return pool;
}

static uint64_t hits_of(mbxV_bcache *c) {
  mbxV_bcache_stats st;
  mbxV_bcache_stats_get(c, &st);
  return st.hits;
}

static void expect_same_state(const fresh_run *a, const fresh_run *b) {
  assert_string_equal(a->value, b->value);
  assert_int_equal(a->len, b->len);
  for (size_t i = 0; i < a->len; i++)
    if (a->bytes[i] != b->bytes[i]) fail_msg("the states differ at byte %zu of %zu", i, a->len);
}

/* The first fresh run of a text loads it (a miss), the second loads it again from the cache
   (a hit, recorded), every later one replays the recording: the cache is not asked again, and
   each leaves the very bytes the recorded run left (the guest's view included). */
static void replay_leaves_the_prepared_state(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *code = "local t = {} for k in pairs(_G) do t[#t + 1] = k end table.sort(t) "
                     "return collectgarbage('count'), #t, t[1], tostring(print)";
  fresh_run runs[4];
  for (int i = 0; i < 4; i++)
    runs[i] = run_fresh(pool, c, 16 * MIB, code);
  assert_int_equal(hits_of(c), 1); /* runs 3 and 4 were replayed, not loaded */
  /* The first run parsed (its garbage differs); the second loaded, as the replays stand for. */
  for (int i = 2; i < 4; i++)
    expect_same_state(&runs[1], &runs[i]);
  for (int i = 0; i < 4; i++)
    free(runs[i].bytes);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* A replay writes the preparation only: what the recorded tenant's guest code did is gone. */
static void a_tenants_changes_do_not_survive(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *code = "x = (x or 0) + 1; local before = type(string.rep); string.rep = nil; "
                     "local keep = {} for i = 1, 200 do "
                     "keep[i] = ('%d'):format(i) end return x, before, #keep";
  for (int i = 0; i < 5; i++) {
    fresh_run r = run_fresh(pool, c, 16 * MIB, code);
    assert_string_equal(r.value, "[1,\"function\",200]");
    free(r.bytes);
  }
  assert_int_equal(hits_of(c), 1);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* Another text, or the same text under another memory limit, is prepared as ever (the cache
   is asked), and gives its own answer. */
static void only_the_recorded_first_run_is_replayed(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *code = "return 'recorded'";
  for (int i = 0; i < 3; i++)
    free(run_fresh(pool, c, 16 * MIB, code).bytes);
  assert_int_equal(hits_of(c), 1);
  fresh_run other = run_fresh(pool, c, 16 * MIB, "return 'other'");
  assert_string_equal(other.value, "\"other\"");
  free(other.bytes);
  /* 12 MiB shares the 16 MiB limit's slots (the same size class), not the recording. */
  fresh_run limited = run_fresh(pool, c, 12 * MIB, code);
  assert_string_equal(limited.value, "\"recorded\"");
  free(limited.bytes);
  assert_int_equal(hits_of(c), 2);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* A recording in use stays when other texts come in pairs (recording each would cost two
   copies of the state every other sandbox): the pair is loaded, and the recorded text is
   replayed again after it. */
static void pairs_of_other_texts_keep_the_recording(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *recorded = "return 'recorded'", *other = "return 'other'";
  for (int i = 0; i < 3; i++)
    free(run_fresh(pool, c, 16 * MIB, recorded).bytes);
  free(run_fresh(pool, c, 16 * MIB, other).bytes); /* a miss: compiled */
  uint64_t hits = hits_of(c);
  for (int round = 0; round < 4; round++) {
    free(run_fresh(pool, c, 16 * MIB, other).bytes);
    free(run_fresh(pool, c, 16 * MIB, other).bytes);
    fresh_run r = run_fresh(pool, c, 16 * MIB, recorded);
    assert_string_equal(r.value, "\"recorded\"");
    free(r.bytes);
  }
  /* Each pair of the other text asked the cache twice; the recorded text never did. */
  assert_int_equal(hits_of(c), hits + 8);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* ---- shaped templates (vm/vm.h, mbxV_vm_shape_save) ---- */

/* A stand-in for the stdlib's host functions: a global table `tools` of n functions (n from
   the shape key's first byte), what a policy shape installs after a restore. */
static int tool_stub(lua_State *L) {
  lua_pushinteger(L, 7);
  return 1;
}

static int install_tools(lua_State *L) {
  int n = (int)lua_tointeger(L, lua_upvalueindex(1));
  lua_createtable(L, 0, n);
  for (int i = 0; i < n; i++) {
    char name[16];
    snprintf(name, sizeof name, "f%d", i);
    lua_pushcfunction(L, tool_stub);
    lua_setfield(L, -2, name);
  }
  lua_setglobal(L, "tools");
  return 0;
}

/* A fresh sandbox of shape `key` (its first byte: how many tools it installs), made the way
   host/backend/inproc.c makes one: the shaped template restored, or the install run and saved. */
static mbxV_vm *new_shaped(mbxV_pool *pool, mbxV_config *cfg, const char *key) {
  cfg->shape_key = key;
  cfg->shape_key_len = strlen(key);
  mbxV_vm *vm = NULL;
  assert_int_equal(mbxV_vm_new(pool, cfg, mbxL_open_sandbox, &vm), MBXV_NEW_OK);
  if (!vm->shaped) {
    mbxV_vm_touched(vm);
    mbxV_vm_shape_install(vm, cfg, 1);
    lua_pushinteger(vm->L, key[0] - '0');
    lua_pushcclosure(vm->L, install_tools, 1);
    assert_int_equal(lua_pcall(vm->L, 0, 0, 0), LUA_OK);
    assert_true(mbxV_vm_shape_save(vm, cfg));
  }
  return vm;
}

/* run_fresh for a sandbox of shape `key`; *shaped: it came from the shaped template. With
   as_if_from, the state is named as restored from those bytes instead (a template made at
   the address of a freed one), keeping the generation of the template it came from. */
static fresh_run run_shaped_as(mbxV_pool *pool, mbxV_bcache *c, const char *key, const char *code,
                               int *shaped, const char *as_if_from) {
  mbxV_config cfg = config(16 * MIB);
  mbxV_vm *vm = new_shaped(pool, &cfg, key);
  *shaped = vm->shaped;
  if (as_if_from) vm->fresh_source = as_if_from;
  return run_on(vm, c, code);
}

static fresh_run run_shaped(mbxV_pool *pool, mbxV_bcache *c, const char *key, const char *code,
                            int *shaped) {
  return run_shaped_as(pool, c, key, code, shaped, NULL);
}

/* The class's shaped template for key as it stands: its bytes' address and generation. */
static const char *shape_bytes(mbxV_pool *pool, const char *key, uint64_t *gen) {
  mbxV_config cfg = config(16 * MIB);
  mbxV_vm *vm = new_shaped(pool, &cfg, key);
  mbxV_shape *sh = mbxV_pool_shape_get(vm->slot, key, strlen(key), cfg.memory_limit);
  assert_non_null(sh);
  if (vm->shaped) { /* the restore named its source for a first run's replay */
    assert_ptr_equal(vm->fresh_source, sh->t.bytes);
    assert_int_equal(vm->fresh_gen, sh->gen);
  }
  const char *bytes = sh->t.bytes;
  *gen = sh->gen;
  mbxV_pool_shape_put(vm->slot->pool, sh);
  mbxV_vm_free(vm);
  return bytes;
}

/* A policy with host functions replays like one without: the sandboxes restored from the
   shaped template record the text's preparation once and then replay it (the cache is not
   asked again), leaving the very bytes the recorded load left. */
static void a_shaped_template_is_replayed(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *code = "local n = 0 for k in pairs(tools) do n = n + 1 end "
                     "return n, tools.f2(), collectgarbage('count')";
  fresh_run runs[5];
  int shaped[5];
  for (int i = 0; i < 5; i++)
    runs[i] = run_shaped(pool, c, "4:tools", code, &shaped[i]);
  /* 1 installs (not shaped, nothing to replay over) and parses; 2 loads (a hit); 3 loads
     again (a hit, recorded); 4 and 5 replay. */
  assert_false(shaped[0]);
  for (int i = 1; i < 5; i++)
    assert_true(shaped[i]);
  assert_int_equal(hits_of(c), 2);
  assert_memory_equal(runs[1].value, "[4,7,", 5);
  for (int i = 3; i < 5; i++)
    expect_same_state(&runs[2], &runs[i]);
  for (int i = 0; i < 5; i++)
    free(runs[i].bytes);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* The same in a slot that did not build the shape: it restores the shaped template relocated
   in place (the same bytes every time: the delta is the slot's), and may record there as it
   may for the plain template (it keeps a relocated copy of that one). */
static void a_relocated_shaped_template_is_replayed(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  uint64_t gen;
  const char *built = shape_bytes(pool, "4:tools", &gen); /* in the first slot */
  /* The first slot stays taken: the sandboxes below get another one, whose first sandbox (a
     plain one) leaves it a relocated copy of the plain template. */
  mbxV_config cfg = config(16 * MIB);
  mbxV_vm *held = NULL;
  assert_int_equal(mbxV_vm_new(pool, &cfg, mbxL_open_sandbox, &held), MBXV_NEW_OK);
  free(run_fresh(pool, c, 16 * MIB, "return 0").bytes);
  const char *code = "local n = 0 for k in pairs(tools) do n = n + 1 end "
                     "return n, tools.f3(), collectgarbage('count')";
  uint64_t hits = hits_of(c);
  fresh_run runs[5];
  for (int i = 0; i < 5; i++) {
    cfg = config(16 * MIB);
    mbxV_vm *vm = new_shaped(pool, &cfg, "4:tools");
    assert_true(vm->shaped);
    assert_true(vm->slot != held->slot);
    assert_ptr_equal(vm->fresh_source, built); /* named by the shape's bytes, relocated */
    mbxV_vm_free(vm);
    int shaped;
    runs[i] = run_shaped(pool, c, "4:tools", code, &shaped);
  }
  /* 1 parses (a miss), 2 loads (a hit, recorded), 3-5 replay. */
  assert_int_equal(hits_of(c), hits + 1);
  for (int i = 2; i < 5; i++)
    expect_same_state(&runs[1], &runs[i]);
  for (int i = 0; i < 5; i++)
    free(runs[i].bytes);
  mbxV_vm_free(held);
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

/* Shape A's recording is never replayed over a later shape A made after shape B replaced
   it, even where the rebuilt template got the freed one's address (the allocator may give it
   back; the address alone would then match, and the first sandbox below is named as if it
   had): the generation tells them apart, and the text is loaded. */
static void a_rebuilt_shape_replays_no_stale_recording(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_bcache *c = mbxV_bcache_new(1 << 20);
  mbxV_pool *pool = warm_pool(c);
  const char *code = "return type(tools.f1), tools.f0()";
  int shaped;
  for (int i = 0; i < 4; i++)
    free(run_shaped(pool, c, "3:A", code, &shaped).bytes);
  uint64_t hits = hits_of(c), gen_a, gen_b, gen_rebuilt;
  free(run_shaped(pool, c, "3:A", code, &shaped).bytes);
  assert_int_equal(hits_of(c), hits); /* replayed: the recording is shape A's */
  /* B replaces A, which is freed (no sandbox holds it), and A is made again. */
  const char *a = shape_bytes(pool, "3:A", &gen_a);
  const char *b = shape_bytes(pool, "5:B", &gen_b);
  const char *rebuilt = shape_bytes(pool, "3:A", &gen_rebuilt);
  assert_true(gen_a < gen_b && gen_b < gen_rebuilt);
  assert_true(b != NULL && rebuilt != NULL);
  hits = hits_of(c);
  for (int i = 0; i < 3; i++) {
    fresh_run r = run_shaped_as(pool, c, "3:A", code, &shaped, i == 0 ? a : NULL);
    assert_true(shaped);
    assert_string_equal(r.value, "[\"function\",7]");
    free(r.bytes);
  }
  assert_int_equal(hits_of(c), hits + 3); /* each one loaded: nothing replayed */
  mbxV_bcache_free(c);
  mbxV_pool_free(pool);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(replay_leaves_the_prepared_state),
      cmocka_unit_test(a_tenants_changes_do_not_survive),
      cmocka_unit_test(only_the_recorded_first_run_is_replayed),
      cmocka_unit_test(pairs_of_other_texts_keep_the_recording),
      cmocka_unit_test(a_shaped_template_is_replayed),
      cmocka_unit_test(a_relocated_shaped_template_is_replayed),
      cmocka_unit_test(a_rebuilt_shape_replays_no_stale_recording),
  };
  return cmocka_run_group_tests_name("vm/first_run", tests, NULL, NULL);
}
