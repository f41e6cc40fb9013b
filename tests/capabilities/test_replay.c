/* tests/capabilities/test_replay.c -- unit tests of capabilities/replay.c: the record
   encoding, the hash chain, the payload reader's bounds and the snapshot decoder's checks;
   and of the policy digest (capabilities/policy.c) the snapshot carries. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lua.h>
#include <xxhash.h>

#include "capabilities/policy.h"
#include "capabilities/replay.h"
#include "host/policy_api.h"

static void le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++)
    p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--)
    v = (v << 8) | p[i];
  return v;
}

static void three_records(mbxC_replay_log *log, uint64_t chain0) {
  mbxC_replay_init(log, chain0);
  mbxC_replay_begin(log, MBXC_REC_RUN);
  mbxC_replay_put_str(log, "input", 5);
  mbxC_replay_put_str(log, "return 1", 8);
  mbxC_replay_put_u8(log, 0);
  mbxC_replay_put_str(log, "", 0);
  mbxC_replay_end(log);
  mbxC_replay_begin(log, MBXC_REC_WALL_TIME);
  mbxC_replay_put_u64(log, (uint64_t)-5);
  mbxC_replay_end(log);
  mbxC_replay_begin(log, MBXC_REC_OUTCOME);
  mbxC_replay_put_u32(log, 9);
  mbxC_replay_put_u64(log, 0x0123456789abcdefull);
  mbxC_replay_put_u64(log, 1);
  mbxC_replay_end(log);
}

static void records_round_trip(void **state) {
  (void)state;
  mbxC_replay_log log;
  three_records(&log, 77);
  assert_int_equal(log.count, 3);
  assert_false(log.broken);
  mbxC_record r;
  assert_true(mbxC_replay_get(&log, 0, &r));
  assert_int_equal(r.type, MBXC_REC_RUN);
  mbxC_reader rd = mbxC_reader_of(&r);
  size_t n;
  const char *s = mbxC_read_str(&rd, &n);
  assert_int_equal(n, 5);
  assert_memory_equal(s, "input", 5);
  s = mbxC_read_str(&rd, &n);
  assert_int_equal(n, 8);
  assert_memory_equal(s, "return 1", 8);
  assert_int_equal(mbxC_read_u8(&rd), 0);
  mbxC_read_str(&rd, &n);
  assert_int_equal(n, 0);
  assert_true(mbxC_reader_done(&rd));
  assert_true(mbxC_replay_get(&log, 1, &r));
  rd = mbxC_reader_of(&r);
  assert_int_equal((int64_t)mbxC_read_u64(&rd), -5);
  assert_true(mbxC_reader_done(&rd));
  assert_true(mbxC_replay_get(&log, 2, &r));
  rd = mbxC_reader_of(&r);
  assert_int_equal(mbxC_read_u32(&rd), 9);
  assert_true(mbxC_read_u64(&rd) == 0x0123456789abcdefull);
  assert_false(mbxC_replay_get(&log, 3, &r));
  /* little-endian on the wire: the wall time record's payload is fb ff .. ff */
  assert_true(mbxC_replay_get(&log, 1, &r));
  assert_int_equal(r.payload[0], 0xfb);
  assert_int_equal(r.payload[7], 0xff);
  assert_int_equal(r.payload[-4], 8); /* its length */
  assert_string_equal(mbxC_rec_type_name(MBXC_REC_HOST_CALL), "host_call");
  assert_string_equal(mbxC_rec_type_name(MBXC_REC_EXEC), "exec");
  assert_string_equal(mbxC_rec_type_name(200), "unknown");
  mbxC_replay_free(&log);
}

static void every_record_extends_the_chain(void **state) {
  (void)state;
  mbxC_replay_log log;
  three_records(&log, 77);
  uint64_t chain = 77;
  for (size_t i = 0; i < log.count; i++) {
    const unsigned char *at = log.buf + log.offsets[i];
    size_t plen = (size_t)at[1] | (size_t)at[2] << 8 | (size_t)at[3] << 16 | (size_t)at[4] << 24;
    /* chain_i = XXH3_64(chain_{i-1} LE || record) */
    unsigned char *joined = malloc(8 + 5 + plen);
    le64(joined, chain);
    memcpy(joined + 8, at, 5 + plen);
    uint64_t expect = XXH3_64bits(joined, 13 + plen);
    free(joined);
    assert_true(mbxC_replay_chain(chain, at, 5 + plen) == expect);
    chain = expect;
    assert_true(get64(at + 5 + plen) == chain);
  }
  assert_true(log.chain == chain);
  /* another chain_0, another chain */
  mbxC_replay_log other;
  three_records(&other, 78);
  assert_true(other.chain != log.chain);
  /* truncation takes the chain back */
  uint64_t after_one = get64(log.buf + log.offsets[1] - 8);
  mbxC_replay_truncate(&log, 1, 77);
  assert_int_equal(log.count, 1);
  assert_true(log.chain == after_one);
  mbxC_replay_truncate(&log, 0, 77);
  assert_int_equal(log.count, 0);
  assert_int_equal(log.len, 0);
  assert_true(log.chain == 77);
  mbxC_replay_free(&log);
  mbxC_replay_free(&other);
}

static void an_oversized_field_breaks_the_log(void **state) {
  (void)state;
  mbxC_replay_log log;
  three_records(&log, 1);
  size_t len = log.len;
  mbxC_replay_begin(&log, MBXC_REC_RESUME);
  mbxC_replay_put_str(&log, "", MBXC_SNAP_MAX_FIELD + 1); /* never read: refused first */
  mbxC_replay_end(&log);
  assert_true(log.broken);
  assert_int_equal(log.count, 3);
  assert_int_equal(log.len, len);
  mbxC_replay_begin(&log, MBXC_REC_WALL_TIME); /* no-ops from now on */
  mbxC_replay_put_u64(&log, 1);
  mbxC_replay_end(&log);
  assert_int_equal(log.count, 3);
  mbxC_replay_free(&log);
}

static void the_reader_stays_in_bounds(void **state) {
  (void)state;
  unsigned char bytes[16] = {5, 0, 0, 0, 'a', 'b', 'c'};
  mbxC_record r = {.type = MBXC_REC_RESUME, .payload = bytes, .len = 7};
  mbxC_reader rd = mbxC_reader_of(&r);
  size_t n = 99;
  const char *s = mbxC_read_str(&rd, &n); /* claims 5, has 3 */
  assert_true(rd.bad);
  assert_int_equal(n, 0);
  assert_string_equal(s, "");
  assert_int_equal(mbxC_read_u64(&rd), 0);
  assert_false(mbxC_reader_done(&rd));
  r.len = 3;
  rd = mbxC_reader_of(&r);
  assert_int_equal(mbxC_read_u32(&rd), 0);
  assert_true(rd.bad);
  /* a huge claimed length never wraps */
  unsigned char huge[4] = {0xff, 0xff, 0xff, 0xff};
  r.payload = huge;
  r.len = 4;
  rd = mbxC_reader_of(&r);
  mbxC_read_str(&rd, &n);
  assert_true(rd.bad);
  /* trailing bytes: not done */
  r.payload = bytes;
  r.len = 8;
  bytes[0] = 3;
  rd = mbxC_reader_of(&r);
  mbxC_read_str(&rd, &n);
  assert_false(rd.bad);
  assert_false(mbxC_reader_done(&rd));
}

/* ---- the blob ---- */

static mbxC_snap_header header(void) {
  return (mbxC_snap_header){.format = MBXC_SNAP_FORMAT,
                            .lua_version = LUA_VERSION_RELEASE_NUM,
                            .moonbox_version = MBX_VERSION_NUMBER,
                            .build_id = mbxC_build_id(),
                            .policy_digest = 0xfeedull,
                            .seed_fixed = 1,
                            .seed = 42,
                            .time_fixed = 1,
                            .time = 1700000000,
                            .paused = 1};
}

static unsigned char *blob_of(size_t *len) {
  mbxC_snap_header h = header();
  mbxC_replay_log log;
  three_records(&log, mbxC_snap_chain0(&h));
  void *b;
  assert_int_equal(mbxC_snap_encode(&h, &log, &b, len), 0);
  mbxC_replay_free(&log);
  return b;
}

/* Recompute the trailer after an edit, so the check under test is the one that refuses. */
static void reseal(unsigned char *b, size_t len) {
  le64(b + len - 8, XXH3_64bits(b, len - 8));
}

static int decode(const unsigned char *b, size_t len, char *why, size_t why_size) {
  mbxC_snap_header h;
  mbxC_replay_log log;
  int rc = mbxC_snap_decode(b, len, LUA_VERSION_RELEASE_NUM, MBX_VERSION_NUMBER, &h, &log, why,
                            why_size);
  if (rc == 0) mbxC_replay_free(&log);
  return rc;
}

static void blob_round_trip(void **state) {
  (void)state;
  size_t len;
  unsigned char *b = blob_of(&len);
  assert_memory_equal(b, "MBXSNAP1", 8);
  assert_int_equal(len, MBXC_SNAP_HEADER + 8 + (5 + 26 + 8) + (5 + 8 + 8) + (5 + 20 + 8));
  mbxC_snap_header h;
  mbxC_replay_log log;
  char why[300];
  assert_int_equal(mbxC_snap_decode(b, len, LUA_VERSION_RELEASE_NUM, MBX_VERSION_NUMBER, &h, &log,
                                    why, sizeof why),
                   0);
  mbxC_snap_header want = header();
  assert_int_equal(h.seed, want.seed);
  assert_int_equal(h.time, want.time);
  assert_int_equal(h.paused, 1);
  assert_true(h.policy_digest == want.policy_digest);
  assert_int_equal(log.count, 3);
  /* the decoded log keeps growing with the same chain */
  mbxC_replay_begin(&log, MBXC_REC_RESUME);
  mbxC_replay_put_str(&log, "1", 1);
  mbxC_replay_end(&log);
  assert_int_equal(log.count, 4);
  void *again;
  size_t again_len;
  assert_int_equal(mbxC_snap_encode(&h, &log, &again, &again_len), 0);
  mbxC_replay_free(&log);
  assert_int_equal(decode(again, again_len, why, sizeof why), 0);
  free(again);
  free(b);
}

static void decoder_refusals(void **state) {
  (void)state;
  size_t len;
  unsigned char *b = blob_of(&len);
  unsigned char *c = malloc(len + 16);
  char why[300];
#define EXPECT_REFUSED(fragment)                                                                   \
  do {                                                                                             \
    assert_int_equal(decode(c, len, why, sizeof why), -1);                                         \
    if (strstr(why, fragment) == NULL) fail_msg("'%s' does not say '%s'", why, fragment);          \
  } while (0)

  assert_int_equal(decode(NULL, 0, why, sizeof why), -1);
  assert_non_null(strstr(why, "truncated"));
  memcpy(c, b, len);
  c[0] = 'X';
  EXPECT_REFUSED("magic");
  memcpy(c, b, len);
  c[8] = 3; /* format */
  EXPECT_REFUSED("format 3");
  memcpy(c, b, len);
  c[12] ^= 1; /* Lua version */
  EXPECT_REFUSED("Lua release");
  memcpy(c, b, len);
  c[16] ^= 1; /* moonbox version */
  EXPECT_REFUSED("version number");
  memcpy(c, b, len);
  c[20] ^= 1; /* build id */
  EXPECT_REFUSED("another build");
  memcpy(c, b, len);
  c[54] = 2; /* paused flag */
  reseal(c, len);
  EXPECT_REFUSED("flag byte");
  memcpy(c, b, len);
  c[55] = 0xff, c[56] = 0xff, c[57] = 0xff, c[58] = 0x7f; /* record count */
  reseal(c, len);
  EXPECT_REFUSED("at most");
  memcpy(c, b, len);
  c[59] ^= 1; /* log bytes */
  reseal(c, len);
  EXPECT_REFUSED("announces");
  memcpy(c, b, len);
  c[66] = 0x40; /* log bytes: past the maximum */
  reseal(c, len);
  EXPECT_REFUSED("at most");
  memcpy(c, b, len);
  c[len - 1] ^= 1;
  EXPECT_REFUSED("checksum");
  /* a record length past the log */
  memcpy(c, b, len);
  c[MBXC_SNAP_HEADER + 4] = 0x10;
  reseal(c, len);
  EXPECT_REFUSED("past the end");
  /* a record's payload changed: the chain breaks there */
  memcpy(c, b, len);
  c[MBXC_SNAP_HEADER + 5 + 9 + 4 + 2] ^= 1; /* inside "return 1" */
  reseal(c, len);
  EXPECT_REFUSED("chain breaks at record 0");
  /* an unknown record type, with the chain and checksum made valid again */
  memcpy(c, b, len);
  c[MBXC_SNAP_HEADER] = 99;
  {
    mbxC_snap_header h = header();
    le64(c + MBXC_SNAP_HEADER + 31,
         mbxC_replay_chain(mbxC_snap_chain0(&h), c + MBXC_SNAP_HEADER, 31));
  }
  reseal(c, len);
  EXPECT_REFUSED("malformed");
  /* the final chain in the header must match */
  memcpy(c, b, len);
  c[67] ^= 1;
  reseal(c, len);
  EXPECT_REFUSED("final chain");
  /* every truncation, and trailing garbage */
  for (size_t n = 0; n < len; n++)
    assert_int_equal(decode(b, n, why, sizeof why), -1);
  memcpy(c, b, len);
  c[len] = 0;
  assert_int_equal(decode(c, len + 1, why, sizeof why), -1);
  free(c);
  free(b);
}

/* ---- the policy digest ---- */

static mbx_status noop(void *ud, const char *a, size_t n, mbx_host_reply *r) {
  (void)ud, (void)a, (void)n, (void)r;
  return MBX_OK;
}

static mbx_status other(void *ud, const char *a, size_t n, mbx_host_reply *r) {
  (void)ud, (void)a, (void)n, (void)r;
  return MBX_INTERNAL_ERROR;
}

static void policy_digest_covers_what_matters(void **state) {
  (void)state;
  mbx_policy a, b;
  char why[300];
  mbxC_policy_defaults(&a);
  a.host_fns.rules = &mbxH_guest_names; /* what mbx_policy_new sets */
  mbxC_policy_defaults(&b);
  b.host_fns.rules = &mbxH_guest_names; /* what mbx_policy_new sets */
  assert_true(mbxC_policy_digest(&a) == mbxC_policy_digest(&b));
  /* env: order does not matter, values do */
  assert_int_equal(mbxC_policy_set_env(&a, "A", "1", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&a, "B", "2", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&b, "B", "2", why, sizeof why), 0);
  assert_int_equal(mbxC_policy_set_env(&b, "A", "1", why, sizeof why), 0);
  assert_true(mbxC_policy_digest(&a) == mbxC_policy_digest(&b));
  assert_int_equal(mbxC_policy_set_env(&b, "A", "3", why, sizeof why), 0);
  assert_true(mbxC_policy_digest(&a) != mbxC_policy_digest(&b));
  assert_int_equal(mbxC_policy_set_env(&b, "A", "1", why, sizeof why), 0);
  /* callbacks and userdata do not count; names and kinds do */
  assert_int_equal(mbxC_hostfn_add(&a.host_fns, "t.f", MBXC_FN_SYNC, noop, NULL, why, sizeof why),
                   0);
  assert_int_equal(mbxC_hostfn_add(&b.host_fns, "t.f", MBXC_FN_SYNC, other, &a, why, sizeof why),
                   0);
  assert_true(mbxC_policy_digest(&a) == mbxC_policy_digest(&b));
  assert_int_equal(
      mbxC_hostfn_add(&a.host_fns, "t.g", MBXC_FN_EXTERNAL, NULL, NULL, why, sizeof why), 0);
  assert_true(mbxC_policy_digest(&a) != mbxC_policy_digest(&b));
  assert_int_equal(mbxC_hostfn_add(&b.host_fns, "t.g", MBXC_FN_SYNC, noop, NULL, why, sizeof why),
                   0);
  assert_true(mbxC_policy_digest(&a) != mbxC_policy_digest(&b)); /* another kind */
  mbxC_policy_clear(&b);
  mbxC_policy_defaults(&b);
  b.host_fns.rules = &mbxH_guest_names; /* what mbx_policy_new sets */
  uint64_t base = mbxC_policy_digest(&b);
  mbxC_policy_set_seed(&b, 1);
  assert_true(mbxC_policy_digest(&b) != base);
  uint64_t seeded = mbxC_policy_digest(&b);
  mbxC_policy_set_seed(&b, 2);
  assert_true(mbxC_policy_digest(&b) != seeded);
  mbxC_policy_set_deterministic(&b, 1);
  assert_true(mbxC_policy_digest(&b) != seeded);
  uint64_t det = mbxC_policy_digest(&b);
  assert_int_equal(mbxC_policy_set_time(&b, 0, why, sizeof why), 0);
  assert_true(mbxC_policy_digest(&b) != det);
  uint64_t timed = mbxC_policy_digest(&b);
  assert_int_equal(mbxC_policy_set_limit(&b, MBX_LIMIT_OUTPUT, 100, why, sizeof why), 0);
  assert_true(mbxC_policy_digest(&b) != timed);
  mbxC_policy_clear(&a);
  mbxC_policy_clear(&b);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records_round_trip),
      cmocka_unit_test(every_record_extends_the_chain),
      cmocka_unit_test(an_oversized_field_breaks_the_log),
      cmocka_unit_test(the_reader_stays_in_bounds),
      cmocka_unit_test(blob_round_trip),
      cmocka_unit_test(decoder_refusals),
      cmocka_unit_test(policy_digest_covers_what_matters),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
