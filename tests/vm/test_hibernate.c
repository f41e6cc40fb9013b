/* tests/vm/test_hibernate.c -- unit tests of vm/hibernate.c: a state sent to sleep leaves no
   page resident and comes back byte for byte at the same address, whichever template its slot
   deltas against (the slot's own build, a relocated copy, a relocation in place). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include <lua.h>

#include "stdlib/stdlib.h"
#include "vm/arena.h"
#include "vm/hibernate.h"
#include "vm/run.h"
#include "vm/vm.h"

#ifdef MBX_ARENA_MALLOC
#define NEEDS_THE_ARENA() skip()
#else
#define NEEDS_THE_ARENA() ((void)0)
#endif

static mbxV_config config(void) {
  mbxV_config cfg = {.memory_limit = 4u << 20,
                     .time_limit_ms = 10000,
                     .output_limit = 1u << 16,
                     .source_limit = 1u << 20,
                     .address_key = 7};
  return cfg;
}

static void run_ok(mbxV_vm *vm, const char *code, char *value, size_t size) {
  mbxV_outcome out;
  mbxV_refusal err;
  mbxV_status s = mbxV_run_cached(vm, NULL, code, strlen(code), "=input", NULL, 0, &out, &err);
  if (s != MBXV_OK) fail_msg("%s: status %d: %s", code, s, out.error.message);
  snprintf(value, size, "%.*s", (int)out.value_len, out.value_json);
  mbxV_outcome_free(&out);
}

/* The prefix, with the output struct (its buffers are freed by a hibernation) zeroed. */
static char *state_of(mbxV_vm *vm, size_t *len) {
  *len = mbxV_arena_prefix(vm->slot->arena);
  char *bytes = malloc(*len);
  assert_non_null(bytes);
  mbxV_arena_copy_out(vm->slot->arena, bytes, *len);
  memset(bytes + ((char *)&vm->output - (char *)vm->slot->arena), 0, sizeof vm->output);
  return bytes;
}

/* Pages of [p, p + len) resident now. */
static size_t resident_pages(const void *p, size_t len) {
  size_t pages = (len + 4095) / 4096, n = 0;
  unsigned char *vec = malloc(pages);
  assert_non_null(vec);
  assert_int_equal(mincore((void *)p, len, vec), 0);
  for (size_t i = 0; i < pages; i++)
    n += vec[i] & 1;
  free(vec);
  return n;
}

/* What guests keep, pointer-shaped words included, in vm: then sleep, check, wake, compare. */
static void sleep_and_wake(mbxV_vm *vm) {
  static char value[4096], again[4096];
  run_ok(vm,
         "P = {} for i = 0, 255 do P[i] = 0x110000000000 + i * 0x100000008 end "
         "D = {} for i = 1, 64 do D[i] = string.unpack('<d', string.pack('<j', P[i])) end "
         "S = string.pack('<jjd', P[1], P[200], D[9]) W = setmetatable({}, {__mode = 'k'}) "
         "W[P] = true collectgarbage() return #P",
         value, sizeof value);
  size_t len, len2;
  char *before = state_of(vm, &len);
  char *base = (char *)vm->slot->arena;
  size_t used = vm->heap.used, charged = mbxV_arena_charged(vm->slot->arena);
  mbxV_image img = {0};
  assert_int_equal(mbxV_vm_hibernate(vm, &img), MBXV_HIBERNATE_OK);
  assert_non_null(img.bytes);
  assert_int_equal(img.len, len);
  /* An XOR delta of a state this close to its template is mostly zeros. */
  assert_true(img.packed < len / 3);
  assert_int_equal(resident_pages(base, len), 0);
  assert_int_equal(mbxV_vm_wake(&img), MBXV_WAKE_OK);
  assert_null(img.bytes);
  assert_ptr_equal(vm->slot->arena, base); /* the same address: nothing was relocated */
  char *after = state_of(vm, &len2);
  assert_int_equal(len, len2);
  for (size_t i = 0; i < len; i++)
    if (before[i] != after[i]) fail_msg("byte %zu of %zu differs after the wake", i, len);
  assert_int_equal(vm->heap.used, used);
  assert_int_equal(mbxV_arena_charged(vm->slot->arena), charged);
  run_ok(vm,
         "local a, b, c = string.unpack('<jjd', S) "
         "return string.format('%x %x %a %x %s', a, b, c, P[255], next(W) == P)",
         again, sizeof again);
  assert_string_equal(again, "\"110100000008 11c800000640 0x0.0110900000048p-1022 "
                             "11ff000007f8 true\"");
  free(before);
  free(after);
}

/* Every slot of one pool, in order: the template's builder, the ones that keep a relocated
   copy, and past MBXV_RELOC_COPIES the ones that relocate in place (the XOR then adds the
   slot's delta to the template's pointer words on the fly). */
static void every_kind_of_slot_wakes_identical(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_pool *pool = mbxV_pool_new(64);
  assert_non_null(pool);
  mbxV_config cfg = config();
  enum { N = MBXV_RELOC_COPIES + 4 };
  mbxV_vm *vms[N];
  for (int i = 0; i < N; i++) {
    assert_int_equal(mbxV_vm_new(pool, &cfg, mbxL_open_sandbox, &vms[i]), MBXV_NEW_OK);
    sleep_and_wake(vms[i]);
  }
  for (int i = 0; i < N; i++)
    mbxV_vm_free(vms[i]);
  mbxV_pool_free(pool);
}

/* A sleeping vm given back to the pool: its slot serves the next sandbox, pristine. */
static void freed_while_asleep_slot_is_reused(void **state) {
  NEEDS_THE_ARENA();
  (void)state;
  mbxV_pool *pool = mbxV_pool_new(1); /* one slot: the next vm must get the same one */
  mbxV_config cfg = config();
  mbxV_vm *vm;
  static char value[256];
  assert_int_equal(mbxV_vm_new(pool, &cfg, mbxL_open_sandbox, &vm), MBXV_NEW_OK);
  run_ok(vm, "X = 5 return X", value, sizeof value);
  mbxV_image img = {0};
  assert_int_equal(mbxV_vm_hibernate(vm, &img), MBXV_HIBERNATE_OK);
  mbxV_vm_free_hibernated(&img);
  assert_null(img.bytes);
  assert_int_equal(mbxV_pool_live(pool), 0);
  mbxV_vm *next;
  assert_int_equal(mbxV_vm_new(pool, &cfg, mbxL_open_sandbox, &next), MBXV_NEW_OK);
  assert_ptr_equal(next, vm);
  mbxL_attach(next->L, NULL);
  run_ok(next, "return X == nil and type(string.format)", value, sizeof value);
  assert_string_equal(value, "\"function\"");
  mbxV_vm_free(next);
  mbxV_pool_free(pool);
}

/* Waking an awake vm is nothing. */
static void wake_of_an_empty_image_is_a_no_op(void **state) {
  (void)state;
  mbxV_image img = {0};
  assert_int_equal(mbxV_vm_wake(&img), MBXV_WAKE_OK);
  mbxV_vm_free_hibernated(&img);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_kind_of_slot_wakes_identical),
      cmocka_unit_test(freed_while_asleep_slot_is_reused),
      cmocka_unit_test(wake_of_an_empty_image_is_a_no_op),
  };
  return cmocka_run_group_tests_name("vm/hibernate", tests, NULL, NULL);
}
