/* tests/capabilities/test_port_record.c -- unit tests of capabilities/port_record.c: the
   record/replay layer wraps any port (here a scripted one that is not the in-process port),
   records every answer live, and replaying answers from the log by each operation's class. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/port.h"
#include "capabilities/port_record.h"

/* A port that is not port_local: it counts how often each operation reached it and answers
   from fields the test sets, so a test can tell a recorded answer from a live one. */
typedef struct scripted {
  mbxC_port port;
  mbxC_grants grants;
  mbxC_grant_fn fns[2];
  int64_t now;
  uint64_t seed;
  const char *env_value;
  char reply[64];
  int wall_calls, random_calls, env_calls, host_calls, native_calls;
} scripted;

static int64_t s_wall(void *ud) {
  scripted *s = ud;
  s->wall_calls++;
  return s->now;
}

static double s_cpu(void *ud) {
  (void)ud;
  return 0.25;
}

static void s_random(void *ud, uint64_t seed[2]) {
  scripted *s = ud;
  s->random_calls++;
  seed[0] = s->seed;
  seed[1] = ~s->seed;
}

static const char *s_env(void *ud, const char *name, size_t name_len, size_t *value_len) {
  scripted *s = ud;
  s->env_calls++;
  if (name_len != 4 || memcmp(name, "LANG", 4) != 0 || s->env_value == NULL) return NULL;
  *value_len = strlen(s->env_value);
  return s->env_value;
}

static mbxC_call_result s_host(void *ud, size_t index, const char *args, size_t args_len,
                               const mbxC_wait *wait, const char **reply, size_t *reply_len) {
  scripted *s = ud;
  (void)index;
  (void)args;
  (void)wait;
  s->host_calls++;
  snprintf(s->reply, sizeof s->reply, "{\"n\":%zu}", args_len);
  *reply = s->reply;
  *reply_len = strlen(s->reply);
  return MBXC_CALL_VALUE;
}

static mbxC_call_result s_native(void *ud, size_t index, const mbxC_ffi_value *args,
                                 const mbxC_wait *wait, mbxC_ffi_value *ret, const char **bytes,
                                 size_t *len) {
  scripted *s = ud;
  (void)index;
  (void)wait;
  s->native_calls++;
  ret->d = args[0].d * 2;
  *bytes = NULL;
  *len = 0;
  return MBXC_CALL_VALUE;
}

static void scripted_init(scripted *s) {
  memset(s, 0, sizeof *s);
  s->fns[0] = (mbxC_grant_fn){.name = "tools.echo", .kind = MBXC_FN_SYNC};
  s->fns[1] = (mbxC_grant_fn){
      .name = "m.twice", .kind = MBXC_FN_NATIVE, .sig = {.ret = 'd', .nargs = 1, .args = {'d'}}};
  s->grants = (mbxC_grants){.deterministic = 1, .fn_count = 2, .fns = s->fns};
  s->port = (mbxC_port){.version = MBXC_PORT_VERSION,
                        .ud = s,
                        .grants = &s->grants,
                        .wall_time = s_wall,
                        .cpu_time = s_cpu,
                        .random_seed = s_random,
                        .env_get = s_env,
                        .host_call = s_host,
                        .native_call = s_native};
  s->now = 1700000000;
  s->seed = 42;
  s->env_value = "C.UTF-8";
}

/* The operations a guest run makes, through port p; the answers land in the out fields. */
typedef struct answers {
  int64_t now;
  uint64_t seed[2];
  const char *env;
  char reply[64];
  double twice;
} answers;

static void guest_session(const mbxC_port *p, answers *a) {
  a->now = p->wall_time(p->ud);
  p->random_seed(p->ud, a->seed);
  size_t n = 0;
  a->env = p->env_get(p->ud, "LANG", 4, &n);
  const char *reply;
  size_t reply_len;
  assert_int_equal(p->host_call(p->ud, 0, "[1,2]", 5, NULL, &reply, &reply_len), MBXC_CALL_VALUE);
  snprintf(a->reply, sizeof a->reply, "%.*s", (int)reply_len, reply);
  mbxC_ffi_value arg = {.d = 21}, ret;
  const char *bytes;
  size_t len;
  assert_int_equal(p->native_call(p->ud, 1, &arg, NULL, &ret, &bytes, &len), MBXC_CALL_VALUE);
  a->twice = ret.d;
}

/* Live, every answer comes from the inner port and is logged; replaying, answers from outside
   come from the log even though the inner port now says something else, and the policy's
   answers (env) are re-executed and checked. */
static void records_live_and_replays_from_the_log(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 7);
  assert_ptr_equal(rec.port.grants, &inner.grants);
  answers live;
  mbxC_port_record_run(&rec, "input", "return 1", 8, NULL, 0);
  guest_session(&rec.port, &live);
  mbxC_port_record_outcome(&rec, 0, 99, 1);
  assert_int_equal(rec.log.count, 7); /* run, 5 answers, outcome */
  assert_int_equal(live.now, 1700000000);
  assert_string_equal(live.reply, "{\"n\":5}");
  assert_true(live.twice == 42.0);
  assert_int_equal(inner.host_calls, 1);
  assert_int_equal(inner.native_calls, 1);

  /* A second layer over a changed inner port replays the first one's log. */
  scripted changed;
  scripted_init(&changed);
  changed.now = 5;
  changed.seed = 1234;
  mbxC_port_record again;
  mbxC_port_record_init(&again, &changed.port, 7);
  mbxC_replay_log copy;
  mbxC_replay_init(&copy, 7);
  for (size_t i = 0; i < rec.log.count; i++) {
    mbxC_record r;
    assert_true(mbxC_replay_get(&rec.log, i, &r));
    mbxC_replay_begin(&copy, r.type);
    for (size_t b = 0; b < r.len; b++)
      mbxC_replay_put_u8(&copy, r.payload[b]);
    mbxC_replay_end(&copy);
  }
  mbxC_port_record_replay_begin(&again, &copy);
  answers replayed;
  mbxC_port_record_run(&again, "input", "return 1", 8, NULL, 0);
  guest_session(&again.port, &replayed);
  mbxC_port_record_outcome(&again, 0, 99, 1);
  assert_int_equal(mbxC_port_record_replay_end(&again), 0);
  assert_string_equal(again.diverged, "");
  assert_int_equal(replayed.now, live.now);
  assert_int_equal(replayed.seed[0], live.seed[0]);
  assert_int_equal(replayed.seed[1], live.seed[1]);
  assert_string_equal(replayed.reply, live.reply);
  assert_true(replayed.twice == live.twice);
  /* Answers from outside were not asked of the inner port again; the seed was drawn (its
     sequence must advance) and the environment re-executed. */
  assert_int_equal(changed.wall_calls, 0);
  assert_int_equal(changed.host_calls, 0);
  assert_int_equal(changed.native_calls, 0);
  assert_int_equal(changed.random_calls, 1);
  assert_int_equal(changed.env_calls, 1);
  mbxC_port_record_free(&again);
  mbxC_port_record_free(&rec);
}

/* A replay that asks for something else than the log holds stops with the record named. */
static void a_divergence_names_the_record(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 1);
  inner.port.wall_time(inner.port.ud);
  rec.port.wall_time(rec.port.ud); /* record 0: a clock read */
  mbxC_replay_log log = rec.log;
  memset(&rec.log, 0, sizeof rec.log);
  mbxC_port_record_replay_begin(&rec, &log);
  uint64_t seed[2];
  rec.port.random_seed(rec.port.ud, seed); /* the replay asks for a seed instead */
  assert_int_equal(seed[0], 0);
  assert_non_null(strstr(rec.diverged, "record 0"));
  assert_non_null(strstr(rec.diverged, "random_seed"));
  assert_int_equal(mbxC_port_record_replay_end(&rec), -1);
  mbxC_port_record_free(&rec);
}

/* The environment is the policy's: a replay under a port whose answer differs diverges. */
static void an_environment_change_diverges(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 3);
  size_t n;
  assert_non_null(rec.port.env_get(rec.port.ud, "LANG", 4, &n));
  mbxC_replay_log log = rec.log;
  memset(&rec.log, 0, sizeof rec.log);
  inner.env_value = "POSIX";
  mbxC_port_record_replay_begin(&rec, &log);
  assert_null(rec.port.env_get(rec.port.ud, "LANG", 4, &n));
  assert_non_null(strstr(rec.diverged, "environment"));
  mbxC_port_record_free(&rec);
}

/* Only what the inner port serves is wrapped: its NULL operations stay NULL (not granted). */
static void absent_capabilities_stay_absent(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  inner.port.native_call = NULL;
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 0);
  assert_null(rec.port.native_call);
  assert_null(rec.port.fs_open);
  assert_null(rec.port.exec_run);
  assert_non_null(rec.port.host_call);
  assert_int_equal(rec.port.version, MBXC_PORT_VERSION);
  mbxC_port_record_free(&rec);
}

/* A rewind drops the records made since the mark and restores the chain. */
static void rewind_drops_later_records(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 11);
  rec.port.wall_time(rec.port.ud);
  mbxC_record_mark m = mbxC_port_record_mark(&rec);
  uint64_t chain = rec.log.chain;
  rec.port.cpu_time(rec.port.ud);
  rec.port.wall_time(rec.port.ud);
  assert_int_equal(rec.log.count, 3);
  mbxC_port_record_rewind(&rec, m);
  assert_int_equal(rec.log.count, 1);
  assert_int_equal(rec.log.chain, chain);
  mbxC_port_record_break(&rec);
  assert_true(rec.log.broken);
  mbxC_port_record_restart(&rec);
  assert_int_equal(rec.log.count, 0);
  assert_false(rec.log.broken);
  mbxC_port_record_free(&rec);
}

/* A mark of an earlier session (a restart since: the sandbox was reset after its checkpoint)
   names records that are gone: the rewind breaks the log rather than truncate the new one. A
   mark of the current session still rewinds. */
static void rewind_across_a_restart_breaks_the_log(void **state) {
  (void)state;
  scripted inner;
  scripted_init(&inner);
  mbxC_port_record rec;
  mbxC_port_record_init(&rec, &inner.port, 11);
  rec.port.wall_time(rec.port.ud);
  mbxC_record_mark old = mbxC_port_record_mark(&rec);
  mbxC_port_record_restart(&rec);
  rec.port.wall_time(rec.port.ud);
  rec.port.wall_time(rec.port.ud);
  mbxC_record_mark now = mbxC_port_record_mark(&rec);
  rec.port.wall_time(rec.port.ud);
  mbxC_port_record_rewind(&rec, now);
  assert_int_equal(rec.log.count, 2);
  assert_false(mbxC_port_record_broken(&rec));
  mbxC_port_record_rewind(&rec, old);
  assert_true(mbxC_port_record_broken(&rec));
  assert_int_equal(rec.log.count, 2); /* nothing of the new session dropped */
  mbxC_port_record_restart(&rec);
  assert_false(mbxC_port_record_broken(&rec));
  mbxC_port_record_free(&rec);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(records_live_and_replays_from_the_log),
      cmocka_unit_test(rewind_across_a_restart_breaks_the_log),
      cmocka_unit_test(a_divergence_names_the_record),
      cmocka_unit_test(an_environment_change_diverges),
      cmocka_unit_test(absent_capabilities_stay_absent),
      cmocka_unit_test(rewind_drops_later_records),
  };
  return cmocka_run_group_tests_name("capabilities/port_record", tests, NULL, NULL);
}
