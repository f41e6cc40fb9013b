/* tests/vm/test_heap.c -- unit tests of vm/heap.c: the guest allocator. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "vm/heap.h"

#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

static int pressure_calls;
static void count_pressure(void *ud) {
  assert_ptr_equal(ud, &pressure_calls);
  pressure_calls++;
}

static void init_sets_every_field(void **state) {
  (void)state;
  mbxV_heap h;
  memset(&h, 0x5A, sizeof h);
  mbxV_heap_init(&h, 4 * MIB);
  assert_int_equal(h.limit, 4 * MIB);
  assert_int_equal(h.ceiling, 6 * MIB);
  assert_int_equal(h.used, 0);
  assert_int_equal(h.peak, 0);
  assert_int_equal(h.large_live, 0);
  assert_null(h.blocks);
  assert_null(h.on_pressure);
  assert_null(h.pressure_ud);
  assert_int_equal(h.pressure_pending, 0);
  assert_int_equal(h.refused, 0);
  assert_int_equal(mbxV_heap_over_limit(&h), 0);
}

static void ceiling_is_a_quarter_over_the_limit_plus_one_mib(void **state) {
  (void)state;
  assert_int_equal(mbxV_heap_ceiling_for(0), MIB);
  assert_int_equal(mbxV_heap_ceiling_for(256 * KIB), 320 * KIB + MIB);
  assert_int_equal(mbxV_heap_ceiling_for(64 * MIB), 81 * MIB);
  assert_int_equal(mbxV_heap_ceiling_for((size_t)1 << 40),
                   ((size_t)1 << 40) + ((size_t)1 << 38) + MIB);
}

/* Lua passes the object type in osize when ptr is NULL: it must not be subtracted. */
static void new_block_ignores_the_type_tag(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, MIB);
  void *p = mbxV_heap_alloc(&h, NULL, LUA_TTABLE, 100);
  assert_non_null(p);
  assert_int_equal(h.used, 100);
  void *q = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, 50);
  assert_non_null(q);
  assert_int_equal(h.used, 150);
  memset(p, 1, 100); /* usable, whole */
  memset(q, 2, 50);
  assert_null(mbxV_heap_alloc(&h, p, 100, 0));
  assert_int_equal(h.used, 50);
  assert_null(mbxV_heap_alloc(&h, q, 50, 0));
  assert_int_equal(h.used, 0);
  assert_null(h.blocks);
  assert_int_equal(h.peak, 150);
}

static void freeing_null_changes_nothing(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, MIB);
  assert_null(mbxV_heap_alloc(&h, NULL, 0, 0));
  assert_null(mbxV_heap_alloc(&h, NULL, LUA_TUSERDATA, 0));
  assert_int_equal(h.used, 0);
  assert_int_equal(h.peak, 0);
}

static void realloc_grow_and_shrink_keep_contents_and_accounting(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, MIB);
  char *p = mbxV_heap_alloc(&h, NULL, 0, 16);
  memcpy(p, "0123456789abcdef", 16);
  p = mbxV_heap_alloc(&h, p, 16, 4000);
  assert_non_null(p);
  assert_int_equal(h.used, 4000);
  assert_memory_equal(p, "0123456789abcdef", 16);
  p = mbxV_heap_alloc(&h, p, 4000, 8);
  assert_non_null(p);
  assert_int_equal(h.used, 8);
  assert_int_equal(h.peak, 4000);
  assert_memory_equal(p, "01234567", 8);
  mbxV_heap_alloc(&h, p, 8, 0);
  assert_int_equal(h.used, 0);
  assert_int_equal(h.peak, 4000);
}

static void peak_is_the_highest_used(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, MIB);
  void *a = mbxV_heap_alloc(&h, NULL, 0, 1000);
  void *b = mbxV_heap_alloc(&h, NULL, 0, 3000);
  assert_int_equal(h.peak, 4000);
  mbxV_heap_alloc(&h, b, 3000, 0);
  void *c = mbxV_heap_alloc(&h, NULL, 0, 2000);
  assert_int_equal(h.used, 3000);
  assert_int_equal(h.peak, 4000);
  void *d = mbxV_heap_alloc(&h, NULL, 0, 1500);
  assert_int_equal(h.peak, 4500);
  mbxV_heap_release_all(&h);
  (void)a, (void)c, (void)d;
  assert_int_equal(h.peak, 4500); /* release_all does not rewrite history */
}

static void large_live_tracks_blocks_over_the_threshold(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  void *small = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK - 1);
  assert_int_equal(h.large_live, 0);
  void *big = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK);
  assert_int_equal(h.large_live, MBXV_LARGE_BLOCK);
  /* small -> large */
  small = mbxV_heap_alloc(&h, small, MBXV_LARGE_BLOCK - 1, 2 * MBXV_LARGE_BLOCK);
  assert_int_equal(h.large_live, 3 * MBXV_LARGE_BLOCK);
  /* large -> larger */
  big = mbxV_heap_alloc(&h, big, MBXV_LARGE_BLOCK, 3 * MBXV_LARGE_BLOCK);
  assert_int_equal(h.large_live, 5 * MBXV_LARGE_BLOCK);
  /* large -> small */
  small = mbxV_heap_alloc(&h, small, 2 * MBXV_LARGE_BLOCK, 10);
  assert_int_equal(h.large_live, 3 * MBXV_LARGE_BLOCK);
  mbxV_heap_alloc(&h, big, 3 * MBXV_LARGE_BLOCK, 0);
  assert_int_equal(h.large_live, 0);
  assert_int_equal(h.used, 10);
  mbxV_heap_alloc(&h, small, 10, 0);
  assert_int_equal(h.used, 0);
}

/* The biggest string block ever allocated: only new objects Lua tags as strings count, and
   freeing one does not lower it (issue 9, B.3: the hook interval's bound). */
static void largest_string_is_the_biggest_ever(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  assert_int_equal(h.largest_string, 0);
  void *table = mbxV_heap_alloc(&h, NULL, LUA_TTABLE, 2 * MBXV_LARGE_BLOCK);
  void *raw = mbxV_heap_alloc(&h, NULL, 0, 3 * MBXV_LARGE_BLOCK);
  assert_int_equal(h.largest_string, 0);
  void *s = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, MBXV_LARGE_BLOCK + 7);
  assert_int_equal(h.largest_string, MBXV_LARGE_BLOCK + 7);
  void *t = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, 100);
  assert_int_equal(h.largest_string, MBXV_LARGE_BLOCK + 7);
  mbxV_heap_alloc(&h, s, MBXV_LARGE_BLOCK + 7, 0);
  assert_int_equal(h.largest_string, MBXV_LARGE_BLOCK + 7);
  /* A grown raw block (a buffer) is not a string, however big. */
  raw = mbxV_heap_alloc(&h, raw, 3 * MBXV_LARGE_BLOCK, 4 * MBXV_LARGE_BLOCK);
  assert_int_equal(h.largest_string, MBXV_LARGE_BLOCK + 7);
  mbxV_heap_alloc(&h, t, 100, 0);
  mbxV_heap_alloc(&h, raw, 4 * MBXV_LARGE_BLOCK, 0);
  mbxV_heap_alloc(&h, table, 2 * MBXV_LARGE_BLOCK, 0);
  assert_int_equal(h.used, 0);
}

static void over_limit_is_strictly_greater(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 1000);
  void *p = mbxV_heap_alloc(&h, NULL, 0, 1000);
  assert_int_equal(mbxV_heap_over_limit(&h), 0);
  p = mbxV_heap_alloc(&h, p, 1000, 1001);
  assert_int_equal(mbxV_heap_over_limit(&h), 1);
  p = mbxV_heap_alloc(&h, p, 1001, 999);
  assert_int_equal(mbxV_heap_over_limit(&h), 0);
  mbxV_heap_alloc(&h, p, 999, 0);
}

/* Past the limit but below the ceiling, growth succeeds: the budget, not a NULL, ends the run. */
static void growth_between_limit_and_ceiling_succeeds(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 100 * KIB); /* ceiling 1 MiB + 200 KiB */
  void *p = mbxV_heap_alloc(&h, NULL, 0, MIB);
  assert_non_null(p);
  assert_true(mbxV_heap_over_limit(&h));
  mbxV_heap_alloc(&h, p, MIB, 0);
}

static void growth_past_the_ceiling_returns_null(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 256 * KIB);
  size_t ceiling = h.ceiling;
  /* Exactly the ceiling is allowed; one byte more is not. */
  void *p = mbxV_heap_alloc(&h, NULL, 0, ceiling);
  assert_non_null(p);
  assert_null(mbxV_heap_alloc(&h, NULL, 0, 1));
  assert_int_equal(h.used, ceiling);
  mbxV_heap_alloc(&h, p, ceiling, 0);
  /* A fresh block bigger than the ceiling. */
  assert_null(mbxV_heap_alloc(&h, NULL, LUA_TSTRING, ceiling + 1));
  assert_int_equal(h.used, 0);
  assert_null(h.blocks);
  /* The size that would overflow the header arithmetic. */
  assert_null(mbxV_heap_alloc(&h, NULL, 0, SIZE_MAX));
  assert_null(mbxV_heap_alloc(&h, NULL, 0, SIZE_MAX - 8));
  assert_int_equal(h.used, 0);
}

/* A refused realloc leaves the old block live, intact and still accounted (Lua keeps it). */
static void refused_growth_keeps_the_old_block(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 256 * KIB);
  char *p = mbxV_heap_alloc(&h, NULL, 0, 64);
  memset(p, 'q', 64);
  assert_null(mbxV_heap_alloc(&h, p, 64, h.ceiling + 1));
  assert_int_equal(h.used, 64);
  assert_ptr_equal(h.blocks, (void *)((char *)p - 16)); /* still linked (header before it) */
  for (int i = 0; i < 64; i++)
    assert_int_equal(p[i], 'q');
  mbxV_heap_alloc(&h, p, 64, 0);
  assert_null(h.blocks);
}

/* Lua assumes shrinking never fails: even with used far past the ceiling. */
static void shrinks_never_fail(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 256 * KIB);
  char *p = mbxV_heap_alloc(&h, NULL, 0, 500 * KIB);
  memset(p, 'z', 100);
  h.ceiling = 0; /* as if every byte were over it */
  p = mbxV_heap_alloc(&h, p, 500 * KIB, 100);
  assert_non_null(p);
  assert_int_equal(h.used, 100);
  for (int i = 0; i < 100; i++)
    assert_int_equal(p[i], 'z');
  /* Same size is not growth either. */
  assert_non_null(p = mbxV_heap_alloc(&h, p, 100, 100));
  assert_null(mbxV_heap_alloc(&h, NULL, 0, 1)); /* but growth is refused */
  mbxV_heap_release_all(&h);
}

static void pressure_fires_once_until_cleared(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 1000);
  h.on_pressure = count_pressure;
  h.pressure_ud = &pressure_calls;
  pressure_calls = 0;
  void *a = mbxV_heap_alloc(&h, NULL, 0, 1000); /* at the limit, not over */
  assert_int_equal(pressure_calls, 0);
  assert_int_equal(h.pressure_pending, 0);
  void *b = mbxV_heap_alloc(&h, NULL, 0, 1);
  assert_int_equal(pressure_calls, 1);
  assert_int_equal(h.pressure_pending, 1);
  void *c = mbxV_heap_alloc(&h, NULL, 0, 100);
  b = mbxV_heap_alloc(&h, b, 1, 500);
  assert_int_equal(pressure_calls, 1); /* pending: not again */
  h.pressure_pending = 0;              /* the budget has looked */
  c = mbxV_heap_alloc(&h, c, 100, 50); /* a shrink over the limit: never a call */
  assert_int_equal(pressure_calls, 1);
  mbxV_heap_alloc(&h, b, 500, 0); /* a free: never a call */
  assert_int_equal(pressure_calls, 1);
  void *d = mbxV_heap_alloc(&h, NULL, 0, 10); /* growth while still over: called again */
  assert_int_equal(pressure_calls, 2);
  assert_int_equal(h.pressure_pending, 1);
  mbxV_heap_release_all(&h);
  (void)a, (void)d;
}

/* Every growth to a large block calls back (even while pending): the next instruction may
   copy or scan megabytes, so the hook must look at the clock. */
/* A string longer than any before, from MBXV_NOTABLE_STRING on, is reported too: the budget
   shortens its hook interval by it at the next instruction (issue 9, B.3). */
static void pressure_fires_at_a_new_longest_string(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  h.on_pressure = count_pressure;
  h.pressure_ud = &pressure_calls;
  pressure_calls = 0;
  void *small = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, MBXV_NOTABLE_STRING - 1);
  assert_int_equal(pressure_calls, 0);
  void *a = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, MBXV_NOTABLE_STRING);
  assert_int_equal(pressure_calls, 1);
  void *b = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, MBXV_NOTABLE_STRING); /* not longer */
  assert_int_equal(pressure_calls, 1);
  void *t = mbxV_heap_alloc(&h, NULL, LUA_TTABLE, 4 * MBXV_NOTABLE_STRING); /* not a string */
  assert_int_equal(pressure_calls, 1);
  void *c = mbxV_heap_alloc(&h, NULL, LUA_TSTRING, 2 * MBXV_NOTABLE_STRING);
  assert_int_equal(pressure_calls, 2);
  assert_int_equal(h.largest_string, 2 * MBXV_NOTABLE_STRING);
  mbxV_heap_alloc(&h, small, MBXV_NOTABLE_STRING - 1, 0);
  mbxV_heap_alloc(&h, a, MBXV_NOTABLE_STRING, 0);
  mbxV_heap_alloc(&h, b, MBXV_NOTABLE_STRING, 0);
  mbxV_heap_alloc(&h, t, 4 * MBXV_NOTABLE_STRING, 0);
  mbxV_heap_alloc(&h, c, 2 * MBXV_NOTABLE_STRING, 0);
  mbxV_heap_release_all(&h);
}

static void pressure_fires_at_every_large_growth(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  h.on_pressure = count_pressure;
  h.pressure_ud = &pressure_calls;
  pressure_calls = 0;
  void *a = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK - 1);
  assert_int_equal(pressure_calls, 0);
  void *b = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK);
  assert_int_equal(pressure_calls, 1);
  assert_int_equal(h.pressure_pending, 1);
  void *c = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK); /* pending: still called */
  assert_int_equal(pressure_calls, 2);
  c = mbxV_heap_alloc(&h, c, MBXV_LARGE_BLOCK, 2 * MBXV_LARGE_BLOCK); /* large -> larger */
  assert_int_equal(pressure_calls, 3);
  c = mbxV_heap_alloc(&h, c, 2 * MBXV_LARGE_BLOCK, MBXV_LARGE_BLOCK); /* a shrink: never */
  assert_int_equal(pressure_calls, 3);
  mbxV_heap_alloc(&h, b, MBXV_LARGE_BLOCK, 0);
  mbxV_heap_alloc(&h, c, MBXV_LARGE_BLOCK, 0);
  assert_int_equal(pressure_calls, 3);
  a = mbxV_heap_alloc(&h, a, MBXV_LARGE_BLOCK - 1, MBXV_LARGE_BLOCK); /* grows into large */
  assert_int_equal(pressure_calls, 4);
  mbxV_heap_release_all(&h);
}

/* A refused growth records the refusal and calls back, so the budget ends the run. */
static void refusal_is_recorded_and_reported(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 256 * KIB);
  assert_int_equal(h.refused, 0);
  h.on_pressure = count_pressure;
  h.pressure_ud = &pressure_calls;
  pressure_calls = 0;
  h.pressure_pending = 1; /* a refusal is reported even while pending */
  assert_null(mbxV_heap_alloc(&h, NULL, 0, h.ceiling + 1));
  assert_int_equal(h.refused, 1);
  assert_int_equal(pressure_calls, 1);
  assert_int_equal(h.used, 0);
  mbxV_heap_init(&h, 256 * KIB);
  assert_int_equal(h.refused, 0);
}

static void no_callback_is_fine(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 1000);
  void *p = mbxV_heap_alloc(&h, NULL, 0, MBXV_LARGE_BLOCK);
  assert_non_null(p);
  assert_int_equal(h.pressure_pending, 0);
  mbxV_heap_release_all(&h);
}

/* Under ASan/LSan this also proves that every block was freed. */
static void release_all_frees_every_block(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  void *ptrs[300];
  for (int i = 0; i < 300; i++)
    ptrs[i] = mbxV_heap_alloc(&h, NULL, 0, (size_t)(i * 37 % 5000 + 1));
  for (int i = 0; i < 300; i += 3)
    mbxV_heap_alloc(&h, ptrs[i], (size_t)(i * 37 % 5000 + 1), 0);
  void *big = mbxV_heap_alloc(&h, NULL, 0, MIB);
  (void)big;
  assert_true(h.used > MIB);
  assert_true(h.large_live >= MIB);
  mbxV_heap_release_all(&h);
  assert_null(h.blocks);
  assert_int_equal(h.used, 0);
  assert_int_equal(h.large_live, 0);
  mbxV_heap_release_all(&h); /* twice: nothing left */
  /* The heap is usable again. */
  void *p = mbxV_heap_alloc(&h, NULL, 0, 10);
  assert_non_null(p);
  assert_int_equal(h.used, 10);
  mbxV_heap_release_all(&h);
}

/* As the allocator of a real Lua state: lua_close gives every byte back, to the byte. */
static void real_state_accounts_to_zero_on_close(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  lua_State *L = lua_newstate(mbxV_heap_alloc, &h);
  assert_non_null(L);
  luaL_openlibs(L);
  size_t opened = h.used;
  assert_true(opened > 0);
  assert_int_equal(luaL_dostring(L, "t = {} for i = 1, 10000 do t[i] = ('x'):rep(i % 100) end "
                                    "big = ('y'):rep(300000)"),
                   LUA_OK);
  assert_true(h.used > opened + 300000);
  assert_true(h.large_live >= 300000);
  assert_true(h.largest_string > 300000 && h.largest_string < 300100); /* the string itself */
  assert_true(h.peak >= h.used);
  assert_int_equal(luaL_dostring(L, "t = nil big = nil collectgarbage() collectgarbage()"), LUA_OK);
  assert_int_equal(h.large_live, 0);
  lua_close(L);
  assert_int_equal(h.used, 0);
  assert_null(h.blocks);
}

/* Teardown without lua_close: release_all frees what the state held (LSan checks). */
static void real_state_released_without_close(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 64 * MIB);
  lua_State *L = lua_newstate(mbxV_heap_alloc, &h);
  assert_non_null(L);
  luaL_openlibs(L);
  assert_int_equal(luaL_dostring(L, "t = {} for i = 1, 5000 do t[i] = {i, tostring(i)} end"),
                   LUA_OK);
  assert_true(h.used > 100000);
  mbxV_heap_release_all(&h);
  assert_int_equal(h.used, 0);
  assert_null(h.blocks);
}

/* With no budget around, the ceiling shows up in Lua as a memory error, and the state lives. */
static void real_state_hits_the_ceiling_as_a_memory_error(void **state) {
  (void)state;
  mbxV_heap h;
  mbxV_heap_init(&h, 256 * KIB); /* ceiling 1.5 MiB */
  lua_State *L = lua_newstate(mbxV_heap_alloc, &h);
  assert_non_null(L);
  luaL_openlibs(L);
  assert_int_equal(luaL_loadstring(L, "local s = ('x'):rep(4 * 1024 * 1024) return #s"), LUA_OK);
  int rc = lua_pcall(L, 0, 1, 0);
  assert_int_equal(rc, LUA_ERRMEM);
  assert_true(h.peak <= h.ceiling);
  lua_settop(L, 0);
  assert_int_equal(luaL_dostring(L, "return 1 + 1"), 0);
  assert_int_equal(lua_tointeger(L, -1), 2);
  lua_close(L);
  assert_int_equal(h.used, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_sets_every_field),
      cmocka_unit_test(ceiling_is_a_quarter_over_the_limit_plus_one_mib),
      cmocka_unit_test(new_block_ignores_the_type_tag),
      cmocka_unit_test(freeing_null_changes_nothing),
      cmocka_unit_test(realloc_grow_and_shrink_keep_contents_and_accounting),
      cmocka_unit_test(peak_is_the_highest_used),
      cmocka_unit_test(large_live_tracks_blocks_over_the_threshold),
      cmocka_unit_test(largest_string_is_the_biggest_ever),
      cmocka_unit_test(over_limit_is_strictly_greater),
      cmocka_unit_test(growth_between_limit_and_ceiling_succeeds),
      cmocka_unit_test(growth_past_the_ceiling_returns_null),
      cmocka_unit_test(refused_growth_keeps_the_old_block),
      cmocka_unit_test(shrinks_never_fail),
      cmocka_unit_test(pressure_fires_once_until_cleared),
      cmocka_unit_test(pressure_fires_at_every_large_growth),
      cmocka_unit_test(pressure_fires_at_a_new_longest_string),
      cmocka_unit_test(refusal_is_recorded_and_reported),
      cmocka_unit_test(no_callback_is_fine),
      cmocka_unit_test(release_all_frees_every_block),
      cmocka_unit_test(real_state_accounts_to_zero_on_close),
      cmocka_unit_test(real_state_released_without_close),
      cmocka_unit_test(real_state_hits_the_ceiling_as_a_memory_error),
  };
  return cmocka_run_group_tests_name("vm/heap", tests, NULL, NULL);
}
