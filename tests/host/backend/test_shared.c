/* tests/host/backend/test_shared.c -- the host's half every backend builds (host/backend/shared.c):
   the chunk name rule, sandbox numbers and address keys, the config and port made from a
   policy, the port's side of a checkpoint and rewind, and the refusals. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "host/backend/shared.h"
#include "host/runtime.h"
#include "include/moonbox.h"

static void chunk_name_short_and_default(void **state) {
  (void)state;
  char name[MBXH_CHUNK_NAME_SIZE];
  mbxH_shared_chunk_name(NULL, name);
  assert_string_equal(name, "=input");
  mbxH_shared_chunk_name("", name);
  assert_string_equal(name, "=input");
  mbxH_shared_chunk_name("dir/script.lua", name);
  assert_string_equal(name, "=dir/script.lua");
}

/* Lua keeps MBXH_CHUNK_NAME_SIZE - 1 bytes: a name that fits with its "=" is kept whole, a longer
   one keeps its end behind "=...", and neither overflows. */
static void chunk_name_long_keeps_the_end(void **state) {
  (void)state;
  char given[200], name[MBXH_CHUNK_NAME_SIZE + 8];
  size_t room = MBXH_CHUNK_NAME_SIZE - 2;
  for (size_t i = 0; i < sizeof given; i++)
    given[i] = (char)('a' + i % 26);
  given[room] = '\0';
  memset(name, 'X', sizeof name);
  mbxH_shared_chunk_name(given, name);
  assert_int_equal(strlen(name), room + 1);
  assert_int_equal(name[0], '=');
  assert_memory_equal(name + 1, given, room);
  for (size_t i = MBXH_CHUNK_NAME_SIZE; i < sizeof name; i++)
    assert_int_equal(name[i], 'X');

  for (size_t i = 0; i < sizeof given; i++)
    given[i] = (char)('a' + i % 26);
  given[sizeof given - 1] = '\0';
  memset(name, 'X', sizeof name);
  mbxH_shared_chunk_name(given, name);
  assert_int_equal(strlen(name), MBXH_CHUNK_NAME_SIZE - 1);
  assert_memory_equal(name, "=...", 4);
  size_t tail = strlen(name + 4);
  assert_string_equal(name + 4, given + strlen(given) - tail);
  for (size_t i = MBXH_CHUNK_NAME_SIZE; i < sizeof name; i++)
    assert_int_equal(name[i], 'X');
}

/* The host's half as a backend holds it: the fields shared.c fills, zeroed first. */
typedef struct half {
  mbxC_port_local port;
  mbxC_port_record record;
  int recording;
} half;

static mbx_status open_half(mbx_runtime *rt, const mbx_policy *p, const mbxC_snap_header *snap,
                            half *h, mbx_error *err) {
  memset(h, 0, sizeof *h);
  return mbxH_shared_port(&rt->services, p, snap, NULL, &h->port, &h->record, &h->recording, err);
}

#define KEYS 300

static int cmp_u64(const void *a, const void *b) {
  uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
  return x < y ? -1 : x > y;
}

typedef struct draw {
  const mbxH_services *svc;
  uint64_t *keys;
} draw;

static void *draw_keys(void *arg) {
  draw *d = arg;
  for (int i = 0; i < KEYS; i++)
    d->keys[i] = mbxH_shared_address_key(d->svc);
  return NULL;
}

/* No two sandboxes (or resets) of a runtime get one address key, from one thread or several,
   and a thread that moves between runtimes does not reuse a number of either. */
static void address_keys_are_unique(void **state) {
  (void)state;
  mbx_runtime *a = mbx_runtime_new(NULL), *b = mbx_runtime_new(NULL);
  assert_non_null(a);
  assert_non_null(b);
  static uint64_t keys[3 * KEYS];
  draw d[3] = {{&a->services, keys}, {&a->services, keys + KEYS}, {&a->services, keys + 2 * KEYS}};
  pthread_t t[2];
  assert_int_equal(pthread_create(&t[0], NULL, draw_keys, &d[1]), 0);
  assert_int_equal(pthread_create(&t[1], NULL, draw_keys, &d[2]), 0);
  for (int i = 0; i < KEYS; i++) {
    keys[i] = mbxH_shared_address_key(&a->services);
    (void)mbxH_shared_address_key(&b->services); /* this thread alternates runtimes */
  }
  assert_int_equal(pthread_join(t[0], NULL), 0);
  assert_int_equal(pthread_join(t[1], NULL), 0);
  qsort(keys, 3 * KEYS, sizeof keys[0], cmp_u64);
  for (int i = 1; i < 3 * KEYS; i++)
    assert_true(keys[i] != keys[i - 1]);
  mbx_runtime_free(a);
  mbx_runtime_free(b);
}

static void config_follows_the_policy(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, 32u << 20), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 12345), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, 678), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_OUTPUT, 9000), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_SOURCE, 7000), MBX_OK);
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_RESULT, 5000), MBX_OK);
  mbxV_config c1, c2;
  mbxH_shared_config(&rt->services, p, &c1);
  mbxH_shared_config(&rt->services, p, &c2);
  assert_int_equal(c1.memory_limit, 32u << 20);
  assert_int_equal(c1.instruction_limit, 12345);
  assert_int_equal(c1.time_limit_ms, 678);
  assert_int_equal(c1.output_limit, 9000);
  assert_int_equal(c1.source_limit, 7000);
  assert_int_equal(c1.result_limit, 5000);
  assert_null(c1.shape_key);
  assert_true(c1.address_key != c2.address_key);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* The port takes the runtime's seeds; only a snapshot header brings the record layer. */
static void port_records_only_with_a_header(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  half h;
  assert_int_equal(open_half(rt, p, NULL, &h, NULL), MBX_OK);
  assert_int_equal(h.recording, 0);
  assert_ptr_equal(h.port.seeds, &rt->seeds);
  mbxC_port_local_free(&h.port);

  mbxC_snap_header snap;
  memset(&snap, 0, sizeof snap);
  assert_int_equal(open_half(rt, p, &snap, &h, NULL), MBX_OK);
  assert_int_equal(h.recording, 1);
  assert_ptr_equal(h.port.seeds, &rt->seeds);
  mbxC_port_record_free(&h.record);
  mbxC_port_local_free(&h.port);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* A mounted directory gone since the policy took it: the sandbox is refused with the reason. */
static void port_refuses_a_vanished_mount(void **state) {
  (void)state;
  char dir[] = "/tmp/mbx-test-shared-XXXXXX";
  assert_non_null(mkdtemp(dir));
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  assert_int_equal(mbx_policy_mount(p, "/data", dir, MBX_MOUNT_RO, NULL), MBX_OK);
  assert_int_equal(rmdir(dir), 0);
  half h;
  mbx_error err;
  assert_int_equal(open_half(rt, p, NULL, &h, &err), MBX_INVALID_ARGUMENT);
  assert_int_equal(err.code, MBX_INVALID_ARGUMENT);
  assert_non_null(strstr(err.message, "mbx_sandbox_new: "));
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* A rewind puts io.stdin's position back where the checkpoint left it, but never past the end
   of bytes replaced since. */
static void rewind_puts_the_port_back(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  mbx_policy *p = mbx_policy_new();
  half h;
  assert_int_equal(open_half(rt, p, NULL, &h, NULL), MBX_OK);
  assert_int_equal(mbxH_shared_set_stdin(&h.port, "hello world", 11, -1, NULL), MBX_OK);
  h.port.stdin_source.pos = 5;
  mbxC_vfs_mark *files = NULL;
  assert_int_equal(mbxH_shared_checkpoint_files(&h.port, &files, NULL), MBX_OK);
  mbxH_port_mark mark;
  mbxH_shared_checkpoint_keep(&h.port, &h.record, files, &mark);
  assert_int_equal(mark.stdin_pos, 5);
  h.port.stdin_source.pos = 9;
  assert_int_equal(mbxH_shared_rewind(&h.port, &h.record, h.recording, &mark, NULL), MBX_OK);
  assert_int_equal(h.port.stdin_source.pos, 5);
  assert_int_equal(mbxH_shared_set_stdin(&h.port, "abc", 3, -1, NULL), MBX_OK);
  assert_int_equal(mbxH_shared_rewind(&h.port, &h.record, h.recording, &mark, NULL), MBX_OK);
  assert_int_equal(h.port.stdin_source.pos, 0);
  mbxC_port_local_free(&h.port);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

static void refusals_name_the_cap(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_int_equal(mbx_runtime_set_cap(rt, MBX_CAP_SANDBOXES, 7, NULL), MBX_OK);
  mbx_error err;
  assert_int_equal(mbxH_shared_cap_refusal(&rt->services, &err), MBX_NO_MEMORY);
  assert_int_equal(err.code, MBX_NO_MEMORY);
  assert_non_null(strstr(err.message, "7 sandboxes are live"));
  assert_non_null(strstr(err.message, "MBX_CAP_SANDBOXES"));
  assert_int_equal(mbxH_shared_no_memory(NULL, &err), MBX_NO_MEMORY);
  assert_string_equal(err.message, "mbx_sandbox_new: out of memory");
  assert_int_equal(mbxH_shared_no_arena("mbx_sandbox_rewind", &err), MBX_UNSUPPORTED);
  assert_int_equal(err.code, MBX_UNSUPPORTED);
  assert_non_null(strstr(err.message, "mbx_sandbox_rewind: not available in this build"));
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(chunk_name_short_and_default),
      cmocka_unit_test(chunk_name_long_keeps_the_end),
      cmocka_unit_test(address_keys_are_unique),
      cmocka_unit_test(config_follows_the_policy),
      cmocka_unit_test(port_records_only_with_a_header),
      cmocka_unit_test(port_refuses_a_vanished_mount),
      cmocka_unit_test(rewind_puts_the_port_back),
      cmocka_unit_test(refusals_name_the_cap),
  };
  return cmocka_run_group_tests_name("host/backend/shared", tests, NULL, NULL);
}
