/* tests/vm/test_output.c -- unit tests of vm/output.c: captured stdout/stderr and its limit. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lauxlib.h>
#include <lua.h>

#include "include/moonbox.h"
#include "vm/budget.h"
#include "vm/output.h"
#include "vm/vm.h"

static mbxV_vm *open_vm(size_t output_limit) {
  mbxV_vm *vm = calloc(1, sizeof *vm);
  assert_non_null(vm);
  mbxV_config cfg = {.memory_limit = 16u << 20,
                     .instruction_limit = 0,
                     .time_limit_ms = 0,
                     .output_limit = output_limit,
                     .source_limit = 1u << 16,
                     .address_key = 1};
  assert_true(mbxV_vm_open(vm, &cfg));
  return vm;
}

static void close_vm(mbxV_vm *vm) {
  mbxV_vm_close(vm);
  free(vm);
}

/* mbxV_output_write raises, so it runs in a C function under lua_pcall, as in the stdlib. */
static int call_write(lua_State *L) {
  int stream = (int)lua_tointeger(L, 1);
  size_t n;
  const char *p = lua_tolstring(L, 2, &n);
  mbxV_output_write(L, stream, p, n);
  return 0;
}

/* Returns the pcall status; *msg receives the error text (static copy) when it failed. */
static int write_bytes(mbxV_vm *vm, int stream, const char *p, size_t n, char *msg, size_t size) {
  lua_State *L = vm->L;
  lua_pushcfunction(L, call_write);
  lua_pushinteger(L, stream);
  lua_pushlstring(L, p, n);
  int rc = lua_pcall(L, 2, 0, 0);
  if (msg) msg[0] = '\0';
  if (rc != LUA_OK) {
    if (msg) snprintf(msg, size, "%s", lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return rc;
}

static void init_is_empty(void **state) {
  (void)state;
  mbxV_output o;
  memset(&o, 0x77, sizeof o);
  mbxV_output_init(&o, 123);
  assert_int_equal(o.limit, 123);
  assert_null(o.data[0]);
  assert_null(o.data[1]);
  assert_int_equal(o.len[0] + o.len[1] + o.cap[0] + o.cap[1], 0);
  assert_int_equal(o.total, 0);
  mbxV_output_free(&o);
}

static void writes_within_the_limit_are_kept_per_stream(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(100);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "hello ", 6, NULL, 0), LUA_OK);
  assert_int_equal(write_bytes(vm, MBXV_STDERR, "oops", 4, NULL, 0), LUA_OK);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "world", 5, NULL, 0), LUA_OK);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "a\0b", 3, NULL, 0), LUA_OK);
  mbxV_output *o = &vm->output;
  assert_int_equal(o->len[MBXV_STDOUT], 14);
  assert_memory_equal(o->data[MBXV_STDOUT], "hello worlda\0b", 14);
  assert_int_equal(o->len[MBXV_STDERR], 4);
  assert_memory_equal(o->data[MBXV_STDERR], "oops", 4);
  assert_int_equal(o->total, 18);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  close_vm(vm);
}

/* Exactly the limit is fine; the limit counts both streams together. */
static void exactly_the_limit_does_not_trip(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(10);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "12345", 5, NULL, 0), LUA_OK);
  assert_int_equal(write_bytes(vm, MBXV_STDERR, "67890", 5, NULL, 0), LUA_OK);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "", 0, NULL, 0), LUA_OK); /* nothing: fine */
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_NONE);
  char msg[128];
  assert_int_equal(write_bytes(vm, MBXV_STDERR, "x", 1, msg, sizeof msg), LUA_ERRRUN);
  assert_string_equal(msg, "output limit exceeded (10 bytes)");
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_OUTPUT);
  assert_int_equal(vm->output.len[0] + vm->output.len[1], 10);
  assert_int_equal(vm->output.total, 11);
  close_vm(vm);
}

/* The write that crosses the limit keeps the bytes that fit; total counts all of them. */
static void truncation_keeps_the_bytes_that_fit(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(8);
  assert_int_equal(write_bytes(vm, MBXV_STDERR, "err", 3, NULL, 0), LUA_OK);
  char msg[128];
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "abcdefghij", 10, msg, sizeof msg), LUA_ERRRUN);
  assert_string_equal(msg, "output limit exceeded (8 bytes)");
  assert_int_equal(vm->output.len[MBXV_STDOUT], 5);
  assert_memory_equal(vm->output.data[MBXV_STDOUT], "abcde", 5);
  assert_int_equal(vm->output.len[MBXV_STDERR], 3);
  assert_int_equal(vm->output.total, 13);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_OUTPUT);
  /* Sticky: a later write raises at once and stores nothing. */
  assert_int_equal(write_bytes(vm, MBXV_STDERR, "more", 4, msg, sizeof msg), LUA_ERRRUN);
  assert_string_equal(msg, "output limit exceeded (8 bytes)");
  assert_int_equal(vm->output.len[MBXV_STDERR], 3);
  assert_int_equal(vm->output.len[MBXV_STDOUT], 5);
  close_vm(vm);
}

static void zero_limit_drops_everything(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(0);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "", 0, NULL, 0), LUA_OK);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "x", 1, NULL, 0), LUA_ERRRUN);
  assert_int_equal(vm->output.len[0], 0);
  assert_int_equal(vm->output.total, 1);
  assert_int_equal(mbxV_tripped(vm->L), MBXV_TRIP_OUTPUT);
  close_vm(vm);
}

/* An earlier trip of another kind wins: the write raises that one and stores nothing. */
static void an_earlier_trip_is_raised_first(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(100);
  vm->budget.time_limit_ms = 7;
  mbxV_trip_set(vm->L, MBXV_TRIP_TIME);
  char msg[128];
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "abc", 3, msg, sizeof msg), LUA_ERRRUN);
  assert_string_equal(msg, "time limit exceeded (7 ms)");
  assert_int_equal(vm->output.len[0], 0);
  assert_int_equal(vm->output.total, 0);
  close_vm(vm);
}

static void many_writes_grow_the_buffer_in_order(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(1u << 20);
  char expect[7000];
  size_t n = 0;
  for (int i = 0; i < 1000; i++) {
    char piece[7];
    for (int k = 0; k < 7; k++)
      piece[k] = (char)('A' + (i * 7 + k) % 26);
    assert_int_equal(write_bytes(vm, MBXV_STDOUT, piece, 7, NULL, 0), LUA_OK);
    memcpy(expect + n, piece, 7);
    n += 7;
  }
  assert_int_equal(vm->output.len[0], n);
  assert_true(vm->output.cap[0] >= n);
  assert_memory_equal(vm->output.data[0], expect, n);
  assert_int_equal(vm->output.total, n);
  close_vm(vm);
}

static void reset_empties_but_keeps_buffers(void **state) {
  (void)state;
  mbxV_vm *vm = open_vm(4);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "abcdef", 6, NULL, 0), LUA_ERRRUN);
  char *kept = vm->output.data[0];
  size_t cap = vm->output.cap[0];
  mbxV_output_reset(&vm->output);
  assert_int_equal(vm->output.len[0], 0);
  assert_int_equal(vm->output.len[1], 0);
  assert_int_equal(vm->output.total, 0);
  assert_ptr_equal(vm->output.data[0], kept);
  assert_int_equal(vm->output.cap[0], cap);
  assert_int_equal(vm->output.limit, 4);
  /* The budget is the run's business: a new run clears the trip, then writes work again. */
  mbxV_budget_start(vm->L);
  assert_int_equal(write_bytes(vm, MBXV_STDOUT, "wxyz", 4, NULL, 0), LUA_OK);
  assert_memory_equal(vm->output.data[0], "wxyz", 4);
  mbxV_budget_stop(vm->L);
  close_vm(vm);
}

static void free_releases_and_resets(void **state) {
  (void)state;
  mbxV_output o;
  mbxV_output_init(&o, 100);
  o.data[0] = malloc(16);
  o.cap[0] = 16;
  o.len[0] = 3;
  o.total = 3;
  mbxV_output_free(&o);
  assert_null(o.data[0]);
  assert_null(o.data[1]);
  assert_int_equal(o.cap[0], 0);
  assert_int_equal(o.len[0], 0);
  assert_int_equal(o.total, 0);
  mbxV_output_free(&o); /* twice is fine */
}

/* Through the public API: a print flood keeps the first bytes and ends with output_limit. */
static void print_flood_through_the_api(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_OUTPUT, 10), MBX_OK);
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  assert_non_null(sb);
  mbx_result *res = NULL;
  const char *code = "io.write('abc') for i = 1, 100 do print(i) end return 'unreached'";
  assert_int_equal(mbx_run(sb, code, strlen(code), NULL, 0, &res, NULL), MBX_OUTPUT_LIMIT);
  size_t len;
  const char *out = mbx_result_stdout(res, &len);
  assert_int_equal(len, 10);
  assert_memory_equal(out, "abc1\n2\n3\n4", 10);
  mbx_usage u;
  assert_int_equal(mbx_result_usage(res, &u), MBX_OK);
  assert_int_equal(u.output_bytes, 3 + 2 * 4); /* the write that tripped ("4\n") counts whole */
  assert_string_equal(mbx_result_value_json(res, NULL), "null");
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(init_is_empty),
      cmocka_unit_test(writes_within_the_limit_are_kept_per_stream),
      cmocka_unit_test(exactly_the_limit_does_not_trip),
      cmocka_unit_test(truncation_keeps_the_bytes_that_fit),
      cmocka_unit_test(zero_limit_drops_everything),
      cmocka_unit_test(an_earlier_trip_is_raised_first),
      cmocka_unit_test(many_writes_grow_the_buffer_in_order),
      cmocka_unit_test(reset_empties_but_keeps_buffers),
      cmocka_unit_test(free_releases_and_resets),
      cmocka_unit_test(print_flood_through_the_api),
  };
  return cmocka_run_group_tests_name("vm/output", tests, NULL, NULL);
}
