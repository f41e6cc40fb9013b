/* tests/stdlib/test_deterministic.c -- unit tests of stdlib/deterministic.c through the public
   API: the canonical pairs/next order, object numbers in tostring, os.clock from the
   instruction count, the budget, and that nothing changes with the mode off. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "moonbox.h"
#include "tests/support/snippet.h"

/* A sandbox with deterministic mode on (or off) and, when nonzero, these limits. */
static mbx_sandbox *det_sandbox(int on, uint64_t memory, uint64_t time_ms) {
  mbx_policy *p = mbx_policy_new();
  assert_non_null(p);
  assert_int_equal(mbx_policy_set_deterministic(p, on, NULL), MBX_OK);
  /* Deterministic mode needs an instruction limit; the same one with it off. */
  assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_INSTRUCTIONS, 1000000000), MBX_OK);
  if (memory) assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_MEMORY, memory), MBX_OK);
  if (time_ms) assert_int_equal(mbx_policy_set_limit(p, MBX_LIMIT_TIME_MS, time_ms), MBX_OK);
  mbx_error err;
  mbx_sandbox *sb = mbx_sandbox_new(snippet_runtime, p, &err);
  if (sb == NULL) fail_msg("mbx_sandbox_new: %s", err.message);
  mbx_policy_free(p);
  return sb;
}

/* code returns exactly json in a fresh deterministic sandbox. */
static void det_check(const char *code, const char *json) {
  static snippet_outcome o;
  mbx_sandbox *sb = det_sandbox(1, 0, 0);
  if (snippet_run_in(sb, code, &o) != MBX_OK)
    fail_msg("%s\n  ended with %s: %s", code, mbx_status_name(o.status), o.value);
  if (strcmp(o.value, json) != 0) fail_msg("%s\n  returned %s\n  expected %s", code, o.value, json);
  mbx_sandbox_free(sb);
}

/* Lists keys as text, in the order a traversal gave them: "pairs" or "next" style. */
#define LIST_KEYS                                                                                  \
  "local function show(k) if type(k) == 'string' then return string.format('%q', k) "              \
  "elseif type(k) == 'table' then return k.name else return tostring(k) end end "                  \
  "local function by_pairs(t) local o = {} for k in pairs(t) do o[#o + 1] = show(k) end "          \
  "return table.concat(o, ' ') end "                                                               \
  "local function by_next(t) local o = {} local k = next(t) while k ~= nil do "                    \
  "o[#o + 1] = show(k) k = next(t, k) end return table.concat(o, ' ') end "

static void canonical_order_of_mixed_keys(void **state) {
  (void)state;
  /* Objects: b is numbered first (by tostring), so it comes before a; c and d are first seen
     by the sort, after every numbered object. */
  det_check(LIST_KEYS
            "local a, b, c = {name = 'A'}, {name = 'B'}, {name = 'C'} "
            "tostring(b) tostring(a) "
            "local t = {[3] = 1, [1] = 1, [-2] = 1, [10] = 1, b = 1, a = 1, ab = 1, [''] = 1, "
            "B = 1, ['a\\0'] = 1, [true] = 1, [false] = 1, [2.5] = 1, [-1.5] = 1, "
            "[math.huge] = 1, [a] = 1, [b] = 1, [c] = 1, [2^53] = 1} "
            "return by_pairs(t), by_next(t) == by_pairs(t)",
            "[\"-2 1 3 10 9007199254740992 \\\"\\\" \\\"B\\\" \\\"a\\\" \\\"a\\\\0\\\" \\\"ab\\\" "
            "\\\"b\\\" false true -1.5 2.5 inf B A C\",true]");
  /* An array-like table with a hash part: integers first whatever part holds them. */
  det_check(LIST_KEYS "local t = {10, 20, 30, x = 1, [0] = 1, [100] = 1} return by_pairs(t)",
            "\"0 1 2 3 100 \\\"x\\\"\"");
  /* The values come with their keys, raw (no __index). */
  det_check("local t = setmetatable({z = 1, y = 2}, {__index = function() return 9 end}) "
            "local o = {} for k, v in pairs(t) do o[#o + 1] = k .. '=' .. v end "
            "return table.concat(o, ',')",
            "\"y=2,z=1\"");
  det_check("return next({}), select('#', next({}))", "[null,1]");
}

static void deletion_during_traversal(void **state) {
  (void)state;
  det_check("local t = {} for i = 1, 10 do t[i] = i end t.x = 1 t.y = 2 "
            "local seen = {} "
            "for k in pairs(t) do seen[#seen + 1] = tostring(k) "
            "  if k == 2 then t[3] = nil t[5] = nil t.y = nil t[1] = nil end end "
            "return table.concat(seen, ',')",
            "\"1,2,4,6,7,8,9,10,x\"");
  /* Plain next: clearing every field while traversing (the stock idiom) works. */
  det_check("local t = {a = 1, b = 2, c = 3, [1] = 4} local seen = {} "
            "local k = next(t) while k ~= nil do seen[#seen + 1] = tostring(k) t[k] = nil "
            "k = next(t, k) end return table.concat(seen, ','), next(t)",
            "[\"1,a,b,c\",null]");
  /* Keys added during the traversal are not visited (stock leaves that undefined). */
  det_check("local t = {a = 1} local n = 0 for k in pairs(t) do n = n + 1 t.b = 2 end return n",
            "1");
}

static void pairs_metamethod_is_honoured(void **state) {
  (void)state;
  static const char code[] =
      "local t = setmetatable({}, {__pairs = function(self) "
      "  return function(_, k) if k == nil then return 'only', self end end, 'state', nil end}) "
      "local o = {} for k, v in pairs(t) do o[#o + 1] = k .. tostring(v == t) end "
      "local f, s, c = pairs(t) "
      "return table.concat(o), s, c";
  det_check(code, "[\"onlytrue\",\"state\",null]");
  snippet_check_value(code, "[\"onlytrue\",\"state\",null]");
  /* A __pairs that hands back next gets the canonical order. */
  det_check(LIST_KEYS "return by_pairs(setmetatable({c = 1, a = 1, b = 1}, "
                      "{__pairs = function(t) return next, t, nil end}))",
            "\"\\\"a\\\" \\\"b\\\" \\\"c\\\"\"");
  /* pairs of a non-table without __pairs: stock error at the first step. */
  snippet_outcome o;
  mbx_sandbox *sb = det_sandbox(1, 0, 0);
  assert_int_equal(snippet_run_in(sb, "for k in pairs(5) do end", &o), MBX_RUNTIME_ERROR);
  assert_non_null(strstr(o.value, "table expected, got number"));
  mbx_sandbox_free(sb);
}

static void nested_traversals(void **state) {
  (void)state;
  det_check("local t = {c = 1, a = 2, b = 3} local out = {} "
            "for k in pairs(t) do for k2 in pairs(t) do out[#out + 1] = k .. k2 end end "
            "return table.concat(out, ',')",
            "\"aa,ab,ac,ba,bb,bc,ca,cb,cc\"");
  /* Plain next over two tables in turn: the one-entry cache is replaced at every switch and
     each step still finds its successor. */
  det_check("local t, u = {c = 1, a = 2, b = 3}, {z = 1, y = 2} "
            "local k1, k2 = next(t), next(u) local s = {} "
            "while k1 or k2 do "
            "  if k1 then s[#s + 1] = k1 k1 = next(t, k1) end "
            "  if k2 then s[#s + 1] = k2 k2 = next(u, k2) end end "
            "return table.concat(s, ',')",
            "\"a,y,b,z,c\"");
  /* next inside a pairs loop over the same table does not disturb the loop. */
  det_check("local t = {3, 2, 1, x = 0} local s = {} "
            "for k in pairs(t) do s[#s + 1] = tostring(k) .. ':' .. tostring(next(t, k)) end "
            "return table.concat(s, ',')",
            "\"1:2,2:3,3:x,x:nil\"");
}

static void tostring_uses_the_counter(void **state) {
  (void)state;
  det_check("local a, b = {}, function() end "
            "return tostring(a), tostring(b), tostring(a), tostring(coroutine.create(b))",
            "[\"table: 0x000000000001\",\"function: 0x000000000002\",\"table: 0x000000000001\","
            "\"thread: 0x000000000003\"]");
  /* The same counter as the sort: a table first seen by pairs keeps its number. */
  det_check("local a, b = {}, {} local t = {[a] = 1} for k in pairs(t) do end "
            "return tostring(b), tostring(a)",
            "[\"table: 0x000000000002\",\"table: 0x000000000001\"]");
  det_check("return tostring(setmetatable({}, {__name = 'Point'}))", "\"Point: 0x000000000001\"");
}

static void clock_counts_instructions(void **state) {
  (void)state;
  /* os.clock is instructions / 1e8: it grows with the work and is a multiple of 1e-8. */
  det_check("local a = os.clock() for i = 1, 100000 do end local b = os.clock() "
            "return b > a, b - a < 0.01, b * 1e8 == math.floor(b * 1e8 + 0.5)",
            "[true,true,true]");
}

/* usage.instructions of one run of code in a fresh sandbox (mode on or off). */
static uint64_t instructions_of(int on, const char *code) {
  mbx_sandbox *sb = det_sandbox(on, 0, 0);
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s != MBX_OK) fail_msg("%s: %s", mbx_status_name(s), res ? "" : err.message);
  mbx_usage usage;
  assert_int_equal(mbx_result_usage(res, &usage), MBX_OK);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  return usage.instructions;
}

static void traversal_is_charged(void **state) {
  (void)state;
  /* The sort of 1e5 string keys (about 1.7e6 element moves, plus the passes) is charged:
     far more than the loop's own VM instructions, which both modes execute. */
  static const char code[] = "local t = {} for i = 1, 100000 do t['k' .. i] = i end "
                             "local n = 0 for k in pairs(t) do n = n + 1 end return n";
  uint64_t off = instructions_of(0, code), on = instructions_of(1, code);
  if (on < off + 1500000)
    fail_msg("deterministic pairs over 1e5 keys charged %llu instructions more than stock; "
             "expected at least 1.5e6",
             (unsigned long long)(on - off));
}

static void traversal_bomb_stops(void **state) {
  (void)state;
  /* A 1e6-key traversal under a 50 ms limit: the sort polls the deadline as it goes, so the
     run ends on the limit instead of finishing the sort unmetered. */
  mbx_sandbox *sb = det_sandbox(1, (uint64_t)512 << 20, 50);
  static const char code[] = "local t = {} for i = 1, 1000000 do t[i * 7 % 1000003] = i end "
                             "while true do for k in pairs(t) do end end";
  mbx_result *res = NULL;
  mbx_error err;
  mbx_status s = mbx_run(sb, code, strlen(code), NULL, 0, &res, &err);
  if (s != MBX_TIME_LIMIT && s != MBX_INSTRUCTION_LIMIT)
    fail_msg("expected time_limit or instruction_limit, got %s", mbx_status_name(s));
  mbx_usage usage;
  assert_int_equal(mbx_result_usage(res, &usage), MBX_OK);
  /* Not a timing assertion so much as "did not run away": an unmetered sort of 1e6 keys
     repeated forever would never end, so the bound is generous (ASan on a loaded machine). */
  if (usage.wall_us > 10000000) fail_msg("the run took %llu us", (unsigned long long)usage.wall_us);
  mbx_result_free(res);
  mbx_sandbox_free(sb);
}

static void two_sandboxes_agree(void **state) {
  (void)state;
  /* String keys in hash order, tables first seen by the sort, tostring, math.random with
     a policy seed, and os.clock: two sandboxes (and two processes: tests/cli) agree. */
  static const char code[] =
      "local t = {} for i = 1, 200 do t['key' .. (i * 37 % 211)] = i end "
      "local objs = {} for i = 1, 20 do objs[i] = {id = i} t[objs[i]] = i end "
      "local o = {} for k, v in pairs(t) do "
      "  o[#o + 1] = type(k) == 'table' and ('#' .. k.id) or k end "
      "local names = {} for i = 1, 20, 5 do names[#names + 1] = tostring(objs[i]) end "
      "return table.concat(o, ','), table.concat(names, ','), os.clock()";
  snippet_outcome first, second;
  mbx_sandbox *a = det_sandbox(1, 0, 0), *b = det_sandbox(1, 0, 0);
  assert_int_equal(snippet_run_in(a, code, &first), MBX_OK);
  assert_int_equal(snippet_run_in(b, code, &second), MBX_OK);
  assert_string_equal(first.value, second.value);
  /* All 20 tables were visited, after every string key. */
  assert_non_null(strstr(first.value, ",#"));
  assert_null(strstr(strstr(first.value, ",#"), "key"));
  mbx_sandbox_free(a);
  mbx_sandbox_free(b);
}

static void nothing_changes_when_off(void **state) {
  (void)state;
  /* Stock order for an array-like table, next is what pairs returns, tostring hashed. */
  snippet_check_value(
      "local o = {} for k, v in pairs({10, 20, 30}) do o[#o + 1] = k .. '=' .. v end "
      "return table.concat(o, ','), pairs({}) == next",
      "[\"1=10,2=20,3=30\",true]");
  snippet_outcome o;
  assert_int_equal(snippet_run("return tostring({})", &o), MBX_OK);
  assert_int_equal(strlen(o.value), strlen("\"table: 0x") + 12 + 1);
  assert_null(strstr(o.value, "0x000000000001"));
  /* With the mode off a sandbox's pairs order is the stock lua_next order: the same keys
     visited as a C-side traversal would, compared through the count of steps. */
  snippet_check_value("local t = {} for i = 1, 100 do t['s' .. i] = i end local n = 0 "
                      "for k in pairs(t) do n = n + 1 end return n",
                      "100");
  /* And explicitly off on a policy equals the default. */
  mbx_sandbox *sb = det_sandbox(0, 0, 0);
  assert_int_equal(snippet_run_in(sb, "return tostring({}) ~= 'table: 0x000000000001'", &o),
                   MBX_OK);
  assert_string_equal(o.value, "true");
  mbx_sandbox_free(sb);
  assert_int_equal(mbx_policy_set_deterministic(NULL, 1, NULL), MBX_INVALID_ARGUMENT);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(canonical_order_of_mixed_keys), cmocka_unit_test(deletion_during_traversal),
      cmocka_unit_test(pairs_metamethod_is_honoured),  cmocka_unit_test(nested_traversals),
      cmocka_unit_test(tostring_uses_the_counter),     cmocka_unit_test(clock_counts_instructions),
      cmocka_unit_test(traversal_is_charged),          cmocka_unit_test(traversal_bomb_stops),
      cmocka_unit_test(two_sandboxes_agree),           cmocka_unit_test(nothing_changes_when_off),
  };
  return cmocka_run_group_tests_name("stdlib/deterministic", tests, snippet_setup,
                                     snippet_teardown);
}
