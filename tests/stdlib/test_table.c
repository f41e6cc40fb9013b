/* tests/stdlib/test_table.c -- unit tests of stdlib/table.c: stock semantics, metered loops. */
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

/* ---- Running snippets: a fresh sandbox per snippet. ------------------------------------ */

/* A failing snippet: runtime_error with this fragment in its message. */
static void check_error(const char *code, const char *fragment) {
  snippet_check_ends(snippet_defaults, code, MBX_RUNTIME_ERROR, fragment);
}

/* A proxy over `store` whose every access goes through Lua metamethods. */
#define PROXY                                                                                      \
  "local store = {10, 20, 30} "                                                                    \
  "local p = setmetatable({}, {__len = function() return #store end, "                             \
  "__index = function(_, k) return store[k] end, "                                                 \
  "__newindex = function(_, k, v) store[k] = v end}) "

/* A table whose __index / __newindex are C functions: no VM instruction runs per element, so
   only the library's own charge can stop a loop over it (THREATS D4). */
#define C_METAMETHODS(len)                                                                         \
  "local t = setmetatable({}, {__len = function() return " len " end, "                            \
  "__index = rawlen, __newindex = rawequal}) "

static void pack_works(void **state) {
  (void)state;
  snippet_check_value("local t = table.pack(1, nil, 'x') return t.n, t[1], t[2], t[3]",
                      "[3,1,null,\"x\"]");
  snippet_check_value("local t = table.pack() return t.n, #t", "[0,0]");
}

static void library_has_exactly_these_functions(void **state) {
  (void)state;
  snippet_check_value("local n = 0 for k, v in pairs(table) do n = n + 1 "
                      "assert(type(v) == 'function', k) end return n",
                      "7");
}

/* ---- insert / remove ------------------------------------------------------------------- */

static void insert_and_remove_work_like_stock(void **state) {
  (void)state;
  snippet_check_value("local t = {1, 2, 3} table.insert(t, 4) table.insert(t, 1, 0) "
                      "table.insert(t, #t + 1, 9) return t",
                      "[0,1,2,3,4,9]");
  snippet_check_value(
      "local t = {1, 2, 3, 4} local a = table.remove(t) local b = table.remove(t, 1) "
      "local c = table.remove(t, #t + 1) return a, b, c, t",
      "[4,1,null,[2,3]]");
  snippet_check_value("return table.remove({}), table.remove({}, 0), select('#', table.remove({}))",
                      "[null,null,1]");
  /* Metamethods are honoured, as in stock (lua_geti / lua_seti / luaL_len). */
  snippet_check_value(PROXY
                      "table.insert(p, 1, 5) table.insert(p, 40) local r = table.remove(p, 2) "
                      "return r, store",
                      "[10,[5,20,30,40]]");
}

static void insert_and_remove_errors_like_stock(void **state) {
  (void)state;
  check_error("table.insert({})", "wrong number of arguments to 'insert'");
  check_error("table.insert({}, 1, 2, 3)", "wrong number of arguments to 'insert'");
  check_error("table.insert({1}, 5, 2)", "bad argument #2 to 'insert' (position out of bounds)");
  check_error("table.insert({1}, 0, 2)", "bad argument #2 to 'insert' (position out of bounds)");
  check_error("table.insert(nil, 1)", "bad argument #1 to 'insert' (table expected, got nil)");
  check_error("table.insert('abc', 1)", "bad argument #1 to 'insert' (table expected, got "
                                        "string)");
  /* Stock 5.4.4 names argument #1 for remove's position. */
  check_error("table.remove({1, 2}, 5)", "bad argument #1 to 'remove' (position out of bounds)");
  check_error("table.insert(setmetatable({}, {__len = function() return 1.5 end}), 1)",
              "object length is not an integer");
}

/* ---- move ------------------------------------------------------------------------------ */

static void move_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return table.move({1, 2, 3, 4, 5}, 2, 4, 1)", "[2,3,4,4,5]");
  snippet_check_value("return table.move({1, 2, 3, 4, 5}, 1, 3, 3)", "[1,2,1,2,3]");
  snippet_check_value(
      "local a = {1, 2, 3} local b = table.move(a, 1, 3, 2, {}) return b[1], b[2], b[4]",
      "[null,1,3]");
  snippet_check_value("local a = {1, 2} return table.move(a, 1, 0, 5) == a, a", "[true,[1,2]]");
  snippet_check_value(PROXY "table.move(p, 1, 3, 2) return store", "[10,10,20,30]");
  check_error("table.move({}, -1, math.maxinteger, 1)",
              "bad argument #3 to 'move' (too many elements to move)");
  check_error("table.move({}, 1, 10, math.maxinteger)",
              "bad argument #4 to 'move' (destination wrap around)");
  check_error("table.move(1, 1, 1, 1)", "bad argument #1 to 'move' (table expected, got number)");
  check_error("table.move({}, 1, 1, 1, 2)", "bad argument #5 to 'move' (table expected, got "
                                            "number)");
}

/* ---- concat ---------------------------------------------------------------------------- */

static void concat_works_like_stock(void **state) {
  (void)state;
  snippet_check_value(
      "return table.concat({1, 2.5, 'x'}, ', '), table.concat({'a', 'b', 'c'}, '-', 2, "
      "3), table.concat({}, 'x'), table.concat({'a'}, 'x', 3, 2), table.concat({1, 2}, 3)",
      "[\"1, 2.5, x\",\"b-c\",\"\",\"\",\"132\"]");
  snippet_check_value(
      "return table.concat(setmetatable({}, {__index = function(_, k) return 'v' end}), "
      "',', math.maxinteger - 1, math.maxinteger)",
      "\"v,v\"");
  snippet_check_value(PROXY "return table.concat(p, '+')", "\"10+20+30\"");
  snippet_check_value(
      "local t = {} for i = 1, 10000 do t[i] = i % 10 end return #table.concat(t, ',')", "19999");
  check_error("table.concat({1, {}, 3})", "invalid value (table) at index 2 in table for 'concat'");
  check_error("table.concat({1, 2}, ',', 1, 3)",
              "invalid value (nil) at index 3 in table for 'concat'");
  check_error("table.concat({}, {})", "bad argument #2 to 'concat' (string expected, got table)");
}

/* ---- unpack ---------------------------------------------------------------------------- */

static void unpack_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("return table.unpack({1, 2, 3})", "[1,2,3]");
  snippet_check_value("return table.unpack({1, 2, 3}, 2)", "[2,3]");
  snippet_check_value("return table.unpack({1, 2, 3}, 2, 5)", "[2,3,null,null]");
  snippet_check_value("return table.unpack({1, 2, 3}, -1, 1)", "[null,null,1]");
  snippet_check_value(
      "return select('#', table.unpack({}, 1, 0)), select('#', table.unpack({}, 5, 1))", "[0,0]");
  snippet_check_value(PROXY "return table.unpack(p)", "[10,20,30]");
  snippet_check_value("return select('#', table.unpack({}, 1, 999000))", "999000");
  check_error("table.unpack({}, 1, 1e7)", "too many results to unpack");
  check_error("table.unpack({}, math.mininteger, math.maxinteger)", "too many results to unpack");
  check_error("table.unpack({}, 1, 1.5)", "bad argument #3 to 'unpack' (number has no integer "
                                          "representation)");
  check_error("table.unpack()", "attempt to get length of a nil value");
}

/* The stack grows by reallocation: a count that cannot fit is refused before the allocator
   would have to fail (which runs an emergency collection at a moment the guest picks). */
static void unpack_refuses_what_cannot_fit(void **state) {
  (void)state;
  snippet_limits lim = {1024 * 1024, SNIPPET_KEEP, SNIPPET_KEEP};
  const snippet_outcome *o = snippet_check_ends(lim, "return table.unpack({}, 1, 500000)",
                                                MBX_RUNTIME_ERROR, "too many results to unpack");
  assert_true(o->usage.memory_peak < 1024 * 1024);
}

/* ---- sort ------------------------------------------------------------------------------ */

static void sort_works_like_stock(void **state) {
  (void)state;
  snippet_check_value("local t = {5, 2, 8, 1, 9, 3} table.sort(t) return t", "[1,2,3,5,8,9]");
  snippet_check_value("local t = {5, 2, 8, 1, 9, 3} table.sort(t, function(a, b) return a > b end) "
                      "return t",
                      "[9,8,5,3,2,1]");
  snippet_check_value("local t = {'b', 'a', 'c', 'B'} table.sort(t) return t",
                      "[\"B\",\"a\",\"b\",\"c\"]");
  snippet_check_value("local t = {} table.sort(t) local u = {1} table.sort(u) return #t, u",
                      "[0,[1]]");
  /* Many equal keys, already sorted, reversed, and a large random array. */
  snippet_check_value("local function sorted(t, lt) for i = 2, #t do if lt(t[i], t[i - 1]) then "
                      "return false end end return true end "
                      "local lt = function(a, b) return a < b end local r = {} "
                      "local a, b, c, d = {}, {}, {}, {} for i = 1, 1000 do a[i] = i % 3 b[i] = i "
                      "c[i] = -i end for i = 1, 100000 do d[i] = math.random(1, 1000000) end "
                      "table.sort(a) table.sort(b) table.sort(c) table.sort(d) "
                      "return sorted(a, lt), sorted(b, lt), sorted(c, lt), sorted(d, lt), #d",
                      "[true,true,true,true,100000]");
  /* Records sorted by key with a comparator; __lt metamethods are used without one. */
  snippet_check_value("local t = {} for i = 1, 200 do t[i] = {k = (i * 37) % 101} end "
                      "table.sort(t, function(x, y) return x.k < y.k end) local ok = true "
                      "for i = 2, #t do ok = ok and t[i - 1].k <= t[i].k end return ok",
                      "true");
  snippet_check_value(
      "local mt = {__lt = function(x, y) return x.v < y.v end} local t = {} "
      "for i = 1, 50 do t[i] = setmetatable({v = (i * 7) % 50}, mt) end table.sort(t) "
      "return t[1].v, t[50].v",
      "[0,49]");
  snippet_check_value(PROXY "store[4] = 5 table.sort(p) return store", "[5,10,20,30]");
}

/* Integer and string arrays without a metatable take the C-array path (sort_fast); it must
   order them exactly as the general path (a comparator forces that one), and fall back to
   it, still sorting, when the keys do not fit in the memory left. */
static void sort_fast_path_matches_the_general_path(void **state) {
  (void)state;
  snippet_check_value("local a, b, c, d = {}, {}, {}, {} local x = 7 "
                      "for i = 1, 5000 do x = x * 1103515245 % 2147483648 "
                      "a[i] = x % 997 - 498 b[i] = a[i] "
                      "c[i] = ('k' .. (x % 641)):rep(x % 3) .. (x % 5 == 0 and '\\0z' or '') "
                      "d[i] = c[i] end "
                      "table.sort(a) table.sort(b, function(p, q) return p < q end) "
                      "table.sort(c) table.sort(d, function(p, q) return p < q end) "
                      "for i = 1, 5000 do assert(a[i] == b[i], i) assert(c[i] == d[i], i) end "
                      "return a[1], a[5000], #c[1], math.type(a[2500])",
                      "[-498,498,0,\"integer\"]");
  snippet_limits small = {2 * 1024 * 1024, SNIPPET_KEEP, SNIPPET_KEEP};
  const snippet_outcome *o =
      snippet_check_ends(small,
                         "local t = {} for i = 1, 60000 do t[i] = 60001 - i end table.sort(t) "
                         "for i = 1, 60000 do assert(t[i] == i) end return t[1], t[60000]",
                         MBX_OK, NULL);
  assert_string_equal(o->value, "[1,60000]");
}

static void sort_errors_like_stock(void **state) {
  (void)state;
  check_error("table.sort({1, {}, 2})", "attempt to compare");
  check_error("table.sort({1, 2, 3}, 1)", "bad argument #2 to 'sort' (function expected, got "
                                          "number)");
  check_error("table.sort(setmetatable({}, {__len = function() return math.maxinteger end}))",
              "bad argument #1 to 'sort' (array too big)");
  check_error("table.sort({5, 4, 3, 2, 1, 6, 7, 8}, function() return true end)",
              "invalid order function for sorting");
  /* An error in the comparator propagates unchanged. */
  check_error("table.sort({3, 2, 1}, function() error('boom', 0) end)", "boom");
  snippet_check_value(
      "return pcall(table.sort, {3, 1, 2, 5, 4}, function(a, b) error({code = 7}) end)",
      "[false,{\"code\":7}]");
}

/* Whatever an inconsistent comparator answers, sort only touches indices 1..#t. */
static void sort_with_inconsistent_comparator_stays_in_bounds(void **state) {
  (void)state;
  /* Random answers, constant answers and a comparator that sometimes raises: no index outside
     1..n is ever read or written, and the elements stay a permutation of the original. */
  snippet_check_value("local n = 200 local data = {} for i = 1, n do data[i] = (i * 37) % 101 end "
                      "local function counts() local c = {} for i = 1, n do "
                      "c[data[i]] = (c[data[i]] or 0) + 1 end return c end local before = counts() "
                      "local bad = 0 local p = setmetatable({}, {__len = function() return n end, "
                      "__index = function(_, k) if k < 1 or k > n then bad = bad + 1 end "
                      "return data[k] end, __newindex = function(_, k, v) if k < 1 or k > n then "
                      "bad = bad + 1 end data[k] = v end}) "
                      "for seed = 1, 50 do math.randomseed(seed) pcall(table.sort, p, "
                      "function(a, b) if math.random() < 0.002 then error('x') end "
                      "return math.random() < 0.5 end) end "
                      "for _, always in ipairs({true, false}) do pcall(table.sort, p, function() "
                      "return always end) end "
                      "local after, same = counts(), true for k, v in pairs(before) do "
                      "same = same and after[k] == v end return bad, same",
                      "[0,true]");
}

/* ---- metering -------------------------------------------------------------------------- */

static void loops_over_huge_ranges_end_on_the_budget(void **state) {
  (void)state;
  snippet_limits instructions = {SNIPPET_KEEP, 1000000, SNIPPET_KEEP};
  snippet_check_ends(instructions, "table.move({}, 1, math.maxinteger, 1)", MBX_INSTRUCTION_LIMIT,
                     NULL);
  snippet_check_ends(instructions, "table.move({}, 1, math.maxinteger - 1, 2)",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits deadline = {SNIPPET_KEEP, 0, 100};
  snippet_check_ends(deadline, "table.move({}, 1, math.maxinteger, 1)", MBX_TIME_LIMIT, NULL);
  snippet_check_ends(deadline, "table.move({}, 1, math.maxinteger, 1, {})", MBX_TIME_LIMIT, NULL);
}

/* __index = rawlen / __newindex = rawequal: each element costs a C call and no instruction. */
static void c_metamethods_end_on_the_budget(void **state) {
  (void)state;
  snippet_limits lim = {SNIPPET_KEEP, 1000000, SNIPPET_KEEP};
  snippet_check_ends(lim, C_METAMETHODS("2^53") "table.insert(t, 1, 'x')", MBX_INSTRUCTION_LIMIT,
                     NULL);
  snippet_check_ends(lim, C_METAMETHODS("2^53") "table.remove(t, 1)", MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, C_METAMETHODS("2^53") "table.concat(t, '', 1, 2^53)",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, C_METAMETHODS("2^53") "table.move(t, 1, 2^53, 2)", MBX_INSTRUCTION_LIMIT,
                     NULL);
  snippet_check_ends(lim, C_METAMETHODS("2^30") "table.sort(t)", MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim, C_METAMETHODS("2^30") "table.sort(t, rawequal)", MBX_INSTRUCTION_LIMIT,
                     NULL);
  snippet_limits small = {SNIPPET_KEEP, 100000, SNIPPET_KEEP};
  snippet_check_ends(small, C_METAMETHODS("0") "return select('#', table.unpack(t, 1, 500000))",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_limits deadline = {SNIPPET_KEEP, 0, 100};
  snippet_check_ends(deadline, C_METAMETHODS("2^53") "table.concat(t, '', 1, 2^53)", MBX_TIME_LIMIT,
                     NULL);
  snippet_check_ends(deadline, C_METAMETHODS("2^30") "table.sort(t)", MBX_TIME_LIMIT, NULL);
}

/* A comparator (or __lt) that never returns is guest code: the hook stops it. */
static void looping_comparators_end_on_the_budget(void **state) {
  (void)state;
  snippet_limits deadline = {SNIPPET_KEEP, 0, 100};
  snippet_check_ends(deadline,
                     "local mt = {__lt = function() while true do end end} local t = {} "
                     "for i = 1, 10 do t[i] = setmetatable({}, mt) end table.sort(t)",
                     MBX_TIME_LIMIT, NULL);
  snippet_check_ends(deadline, "table.sort({3, 2, 1}, function() while true do end end)",
                     MBX_TIME_LIMIT, NULL);
  /* pcall does not swallow the trip. */
  snippet_check_ends(deadline,
                     "pcall(table.sort, {3, 2, 1}, function() while true do end end) "
                     "return 'survived'",
                     MBX_TIME_LIMIT, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(pack_works),
      cmocka_unit_test(library_has_exactly_these_functions),
      cmocka_unit_test(insert_and_remove_work_like_stock),
      cmocka_unit_test(insert_and_remove_errors_like_stock),
      cmocka_unit_test(move_works_like_stock),
      cmocka_unit_test(concat_works_like_stock),
      cmocka_unit_test(unpack_works_like_stock),
      cmocka_unit_test(unpack_refuses_what_cannot_fit),
      cmocka_unit_test(sort_works_like_stock),
      cmocka_unit_test(sort_fast_path_matches_the_general_path),
      cmocka_unit_test(sort_errors_like_stock),
      cmocka_unit_test(sort_with_inconsistent_comparator_stays_in_bounds),
      cmocka_unit_test(loops_over_huge_ranges_end_on_the_budget),
      cmocka_unit_test(c_metamethods_end_on_the_budget),
      cmocka_unit_test(looping_comparators_end_on_the_budget),
  };
  return cmocka_run_group_tests_name("stdlib/table", tests, snippet_setup, snippet_teardown);
}
