/* tests/host/test_shape_cache.c -- the slots' shaped templates (vm/vm.h, mbxV_vm_shape_save):
   a sandbox whose policy has the host functions of an earlier one restores them with the
   state instead of installing them, and can never tell, nor reach the earlier policy's
   callbacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "host/runtime.h"
#include "moonbox.h"
#include "tests/support/snippet.h"
#include "vm/arena.h"

/* MBX_ARENA_MALLOC builds keep no templates at all, so nothing is ever cached: the counts
   stay 0 there and every behaviour check still runs (the asan-arena preset runs the cache). */
#ifdef MBX_ARENA_MALLOC
#define CACHED 0
#else
#define CACHED 1
#endif

/* Replies with its userdata (a JSON text): which policy's callback answered. */
static mbx_status reply_ud(void *ud, const char *args, size_t len, mbx_host_reply *reply) {
  (void)args;
  (void)len;
  const char *text = ud;
  return mbx_host_reply_json(reply, text, strlen(text));
}

static mbx_policy *policy_with(const char *const *names, size_t n, const char *reply) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  for (size_t i = 0; i < n; i++)
    assert_int_equal(mbx_policy_add_function(p, names[i], reply_ud, (void *)reply, NULL), MBX_OK);
  return p;
}

static void counts(mbx_runtime *rt, uint64_t *hits, uint64_t *saves) {
  mbxV_pool_shape_counts(rt->slots, hits, saves);
}

/* One run in a fresh sandbox of p (then freed, so the next sandbox takes the same slot). */
static void run_once(mbx_runtime *rt, const mbx_policy *p, const char *code, snippet_outcome *o) {
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  assert_non_null(sb);
  snippet_run_in(sb, code, o);
  mbx_sandbox_free(sb);
}

/* What a guest can see of its globals and host functions, and the heap's exact size. */
static const char *probe =
    "local names = {} "
    "for k, v in pairs(_G) do names[#names + 1] = k .. ':' .. type(v) end "
    "table.sort(names) "
    "local t = {} "
    "for k, v in pairs(tools or {}) do t[#t + 1] = k .. ':' .. type(v) end "
    "table.sort(t) "
    "return table.concat(names, ',') .. '|' .. table.concat(t, ',') .. '|' .. "
    "tostring(collectgarbage('count')) .. '|' .. tostring(require('tools') == tools)";

/* (b) the same shape hits the cache; (c) what the guest sees is the same on the miss that
   built the shaped template and on every hit. */
static void same_shape_hits_and_matches(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_non_null(rt);
  const char *names[] = {"tools.f0", "tools.f1", "tools.f2", "top"};
  mbx_policy *p = policy_with(names, 4, "\"a\"");
  uint64_t h0, s0, h1, s1;
  snippet_outcome first, again;
  /* The probe compiled once (into the runtime's bytecode cache) so that every run below
     loads it the same way: only the shaped template may differ between them. */
  mbx_policy *none = mbx_policy_new();
  run_once(rt, none, probe, &first);
  mbx_policy_free(none);
  counts(rt, &h0, &s0);
  run_once(rt, p, probe, &first);
  assert_int_equal(first.status, MBX_OK);
  counts(rt, &h1, &s1);
  assert_int_equal(h1, h0);          /* the slot's first sandbox of this shape: a miss */
  assert_int_equal(s1, s0 + CACHED); /* that built the shaped template */
  for (int i = 0; i < 3; i++) {
    run_once(rt, p, probe, &again);
    assert_int_equal(again.status, MBX_OK);
    assert_string_equal(again.value, first.value);
  }
  counts(rt, &h1, &s1);
  assert_int_equal(h1, h0 + 3 * CACHED);
  assert_int_equal(s1, s0 + CACHED);
  /* A reset restores the shaped template too, with the same view. */
  mbx_sandbox *sb = mbx_sandbox_new(rt, p, NULL);
  assert_non_null(sb);
  snippet_run_in(sb, "tools = nil top = 1 return 1", &again);
  assert_int_equal(mbx_sandbox_reset(sb, NULL), MBX_OK);
  snippet_run_in(sb, probe, &again);
  assert_int_equal(again.status, MBX_OK);
  assert_string_equal(again.value, first.value);
  mbx_sandbox_free(sb);
  counts(rt, &h1, &s1);
  assert_int_equal(h1, h0 + 5 * CACHED); /* the new and the reset */
  /* The function is there and answers after a hit. */
  run_once(rt, p, "return tools.f2(1) .. top()", &again);
  assert_int_equal(again.status, MBX_OK);
  assert_string_equal(again.value, "\"aa\"");
  mbx_policy_free(p);
  mbx_runtime_free(rt);
}

/* (a) a different shape never restores another's template: other names, another order or
   another kind each miss, and the guest sees only its own functions. */
static void other_shapes_miss(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_non_null(rt);
  const char *a_names[] = {"tools.secret_a"};
  const char *b_names[] = {"tools.other_b"};
  const char *ab[] = {"tools.x", "tools.y"};
  const char *ba[] = {"tools.y", "tools.x"};
  mbx_policy *a = policy_with(a_names, 1, "\"A\"");
  mbx_policy *b = policy_with(b_names, 1, "\"B\"");
  mbx_policy *xy = policy_with(ab, 2, "\"xy\"");
  mbx_policy *yx = policy_with(ba, 2, "\"yx\"");
  mbx_policy *ext = mbx_policy_new();
  assert_int_equal(mbx_policy_add_external(ext, "tools.secret_a", NULL), MBX_OK);
  snippet_outcome o;
  uint64_t h0, s0, h1, s1;
  counts(rt, &h0, &s0);
  run_once(rt, a, "return tools.secret_a()", &o);
  assert_string_equal(o.value, "\"A\"");
  run_once(rt, b, "return tostring(tools.secret_a) .. tools.other_b()", &o);
  assert_int_equal(o.status, MBX_OK);
  assert_string_equal(o.value, "\"nilB\"");
  /* The same names as A but external: A's sync trampoline must not be there. */
  run_once(rt, ext, "return tools.secret_a()", &o);
  assert_int_equal(o.status, MBX_PAUSED);
  run_once(rt, xy, "return tools.x() .. tools.y()", &o);
  assert_string_equal(o.value, "\"xyxy\"");
  run_once(rt, yx, "return tools.x() .. tools.y()", &o);
  assert_string_equal(o.value, "\"yxyx\"");
  counts(rt, &h1, &s1);
  assert_int_equal(h1, h0); /* five shapes, five misses */
  assert_int_equal(s1, s0 + 5 * CACHED);
  mbx_policy_free(a);
  mbx_policy_free(b);
  mbx_policy_free(xy);
  mbx_policy_free(yx);
  mbx_policy_free(ext);
  mbx_runtime_free(rt);
}

/* (a) two policies of the same shape share the shaped template, but each sandbox's calls
   reach its own policy's callback: the template holds indexes, the callbacks are the port's. */
static void same_shape_own_callbacks(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_non_null(rt);
  const char *names[] = {"tools.f"};
  mbx_policy *a = policy_with(names, 1, "\"from A\"");
  mbx_policy *b = policy_with(names, 1, "\"from B\"");
  snippet_outcome o;
  uint64_t h0, s0, h1, s1;
  counts(rt, &h0, &s0);
  run_once(rt, a, "return tools.f()", &o);
  assert_string_equal(o.value, "\"from A\"");
  run_once(rt, b, "return tools.f()", &o);
  assert_string_equal(o.value, "\"from B\"");
  /* Two live at once: different slots, each its own callback. */
  mbx_sandbox *sa = mbx_sandbox_new(rt, a, NULL), *sb = mbx_sandbox_new(rt, b, NULL);
  assert_non_null(sa);
  assert_non_null(sb);
  snippet_run_in(sb, "return tools.f()", &o);
  assert_string_equal(o.value, "\"from B\"");
  snippet_run_in(sa, "return tools.f()", &o);
  assert_string_equal(o.value, "\"from A\"");
  mbx_sandbox_free(sa);
  mbx_sandbox_free(sb);
  counts(rt, &h1, &s1);
  assert_true(h1 >= h0 + 2 * CACHED); /* b, then whichever live one took the first slot */
  mbx_policy_free(a);
  mbx_policy_free(b);
  mbx_runtime_free(rt);
}

/* The shaped templates are the runtime's (its slot pool's): another runtime builds its own. */
static void runtimes_do_not_share(void **state) {
  (void)state;
  const char *names[] = {"tools.f"};
  mbx_policy *p = policy_with(names, 1, "1");
  snippet_outcome o;
  for (int round = 0; round < 2; round++) {
    mbx_runtime *rt = mbx_runtime_new(NULL);
    assert_non_null(rt);
    run_once(rt, p, "return tools.f()", &o);
    assert_string_equal(o.value, "1");
    uint64_t hits, saves;
    counts(rt, &hits, &saves);
    assert_int_equal(hits, 0);
    assert_int_equal(saves, CACHED);
    mbx_runtime_free(rt);
  }
  mbx_policy_free(p);
}

/* The shaped template is the size class's, not one slot's: sandboxes live at once (each in a
   slot of its own) restore it relocated, see the same state as the one that built it, and
   each reaches its own policy's callbacks. Under ThreadSanitizer slots are not placed
   congruently (vm/arena.c), so every slot keeps its own shaped template there. */
#if defined(__SANITIZE_THREAD__)
#define SHARED_SHAPES 0
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SHARED_SHAPES 0
#endif
#endif
#ifndef SHARED_SHAPES
#define SHARED_SHAPES CACHED
#endif

static void live_siblings_share_the_class_shape(void **state) {
  (void)state;
  mbx_runtime *rt = mbx_runtime_new(NULL);
  assert_non_null(rt);
  const char *names[] = {"tools.f0", "tools.f1", "top"};
  mbx_policy *p = policy_with(names, 3, "\"a\"");
  mbx_policy *q = policy_with(names, 3, "\"b\"");
  mbx_policy *none = mbx_policy_new();
  snippet_outcome o, first;
  run_once(rt, none, probe, &o); /* the probe in the bytecode cache, the plain template built */
  uint64_t h0, s0, h1, s1;
  counts(rt, &h0, &s0);
  enum { LIVE = 4 };
  mbx_sandbox *sb[LIVE];
  for (int i = 0; i < LIVE; i++) {
    sb[i] = mbx_sandbox_new(rt, i % 2 ? q : p, NULL);
    assert_non_null(sb[i]);
  }
  counts(rt, &h1, &s1);
  /* The first built it and its live siblings restored it (per slot: each built its own). */
  assert_int_equal(s1, s0 + (SHARED_SHAPES ? 1 : LIVE * CACHED));
  assert_int_equal(h1, h0 + (LIVE - 1) * SHARED_SHAPES);
  for (int i = 0; i < LIVE; i++) {
    snippet_run_in(sb[i], probe, i ? &o : &first);
    assert_int_equal((i ? &o : &first)->status, MBX_OK);
    if (i) assert_string_equal(o.value, first.value);
    snippet_run_in(sb[i], "collectgarbage() collectgarbage() return tools.f1() .. top()", &o);
    assert_int_equal(o.status, MBX_OK);
    assert_string_equal(o.value, i % 2 ? "\"bb\"" : "\"aa\"");
  }
  for (int i = 0; i < LIVE; i++)
    mbx_sandbox_free(sb[i]);
  mbx_policy_free(p);
  mbx_policy_free(q);
  mbx_policy_free(none);
  mbx_runtime_free(rt);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(live_siblings_share_the_class_shape),
      cmocka_unit_test(same_shape_hits_and_matches),
      cmocka_unit_test(other_shapes_miss),
      cmocka_unit_test(same_shape_own_callbacks),
      cmocka_unit_test(runtimes_do_not_share),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
