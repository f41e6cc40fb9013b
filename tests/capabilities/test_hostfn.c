/* tests/capabilities/test_hostfn.c -- the host-function table's copy (one block for a
   sandbox's port: capabilities/hostfn.c) holds exactly the policy's entries, outlives the
   original, and still takes additions. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "capabilities/hostfn.h"

static int is_name(const char *s, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++)
    if (!(s[i] == '_' || (s[i] >= 'a' && s[i] <= 'z') || (i > 0 && s[i] >= '0' && s[i] <= '9')))
      return 0;
  return 1;
}

static int is_reserved(const char *s, size_t n) {
  return n == 3 && memcmp(s, "end", 3) == 0;
}

static const char *const globals[] = {"string"};
static const mbxC_name_rules rules = {is_name, is_reserved, globals, 1, NULL};

static mbx_status cb(void *ud, const char *args, size_t len, mbx_host_reply *r) {
  (void)args;
  (void)len;
  (void)r;
  return ud ? MBX_OK : MBX_INTERNAL_ERROR;
}

static int tag[20];

static void fill(mbxC_hostfn_table *t, int n) {
  memset(t, 0, sizeof *t);
  t->rules = &rules;
  char why[256];
  for (int i = 0; i < n; i++) {
    char name[64];
    snprintf(name, sizeof name, "tools.f%d%s", i, i % 3 ? "" : "_with_a_longer_name");
    assert_int_equal(mbxC_hostfn_add(t, name, i % 2 ? MBXC_FN_SYNC : MBXC_FN_EXTERNAL, cb, &tag[i],
                                     why, sizeof why),
                     0);
  }
}

static void expect_same(const mbxC_hostfn_table *a, const mbxC_hostfn_table *b) {
  assert_int_equal(a->count, b->count);
  for (size_t i = 0; i < a->count; i++) {
    assert_string_equal(a->fns[i].name, b->fns[i].name);
    assert_ptr_not_equal(a->fns[i].name, b->fns[i].name); /* a copy, not a borrow */
    assert_int_equal(a->fns[i].kind, b->fns[i].kind);
    assert_ptr_equal(a->fns[i].fn, b->fns[i].fn);
    assert_ptr_equal(a->fns[i].userdata, b->fns[i].userdata);
  }
}

/* The copy equals the original entry for entry, and stays valid once the original is gone. */
static void a_copy_is_its_own(void **state) {
  (void)state;
  for (int n = 0; n <= 17; n += 17) {
    mbxC_hostfn_table t, again, c;
    fill(&t, n);
    fill(&again, n);
    assert_int_equal(mbxC_hostfn_copy(&c, &t), 0);
    expect_same(&t, &c);
    mbxC_hostfn_clear(&t); /* names freed: the copy must not point at them */
    expect_same(&again, &c);
    assert_ptr_equal(c.rules, &rules);
    mbxC_hostfn_clear(&c);
    assert_int_equal(c.count, 0);
    assert_ptr_equal(c.rules, &rules);
    mbxC_hostfn_clear(&again);
  }
}

/* A copy takes additions under the same rules (a duplicate and a keyword refused, nothing
   changed by a refusal), and copies of copies are equal too. */
static void a_copy_grows_under_the_rules(void **state) {
  (void)state;
  mbxC_hostfn_table t, c, cc;
  fill(&t, 5);
  assert_int_equal(mbxC_hostfn_copy(&c, &t), 0);
  char why[256];
  assert_int_equal(mbxC_hostfn_add(&c, "tools.f1", MBXC_FN_SYNC, cb, NULL, why, sizeof why),
                   MBXC_HOSTFN_INVALID);
  assert_int_equal(mbxC_hostfn_add(&c, "tools.end", MBXC_FN_SYNC, cb, NULL, why, sizeof why),
                   MBXC_HOSTFN_INVALID);
  assert_int_equal(c.count, 5);
  expect_same(&t, &c);
  for (int i = 0; i < 12; i++) {
    char name[32];
    snprintf(name, sizeof name, "more.g%d", i);
    assert_int_equal(mbxC_hostfn_add(&c, name, MBXC_FN_SYNC, cb, &tag[i], why, sizeof why), 0);
  }
  assert_int_equal(c.count, 17);
  for (size_t i = 0; i < 5; i++)
    assert_string_equal(c.fns[i].name, t.fns[i].name);
  assert_string_equal(c.fns[16].name, "more.g11");
  assert_int_equal(mbxC_hostfn_copy(&cc, &c), 0);
  expect_same(&c, &cc);
  mbxC_hostfn_clear(&c);
  assert_string_equal(cc.fns[16].name, "more.g11");
  mbxC_hostfn_clear(&cc);
  mbxC_hostfn_clear(&t);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_copy_is_its_own),
      cmocka_unit_test(a_copy_grows_under_the_rules),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
