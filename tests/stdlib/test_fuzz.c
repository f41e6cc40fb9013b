/* tests/stdlib/test_fuzz.c -- unit tests of stdlib/fuzz.c: require("fuzz").provider(data). */
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

#define P "local fdp = require('fuzz').provider "

static void integers_come_from_the_end(void **state) {
  (void)state;
  snippet_check_value(P "('\\1\\2') return {fdp:int(0, 255), fdp:int(0, 255), fdp:int(0, 255)}",
                      "[2,1,0]");
  /* Two bytes for a 16-bit range, the last byte first; out of input: lo. */
  snippet_check_value(P "('\\x12\\x34') return {fdp:int(0, 65535), fdp:int(7, 9)}", "[13330,7]");
  /* Reduced into the range; negative ranges; the full 64-bit range by default. */
  snippet_check_value(P "('\\10') return fdp:int(1, 6)", "5");
  snippet_check_value(P "('\\0') return fdp:int(-3, -1)", "-3");
  snippet_check_value(P "(string.rep('\\255', 8)) return fdp:int()", "9223372036854775807");
  snippet_check_value(P "(string.rep('\\0', 8)) return fdp:int() == math.mininteger", "true");
  snippet_check_value(P "('\\3\\2') return {fdp:bool(), fdp:bool(), fdp:bool()}",
                      "[false,true,false]");
}

static void bytes_come_from_the_front(void **state) {
  (void)state;
  snippet_check_value(P "('abcdef\\4') return {fdp:int(0, 9), fdp:bytes(2), fdp:bytes(10), "
                        "fdp:bytes(3), fdp:remaining()}",
                      "[4,\"ab\",\"cdef\",\"\",0]");
  /* string(max): the length like int(0, max), from the end; the bytes from the front. */
  snippet_check_value(P "('hello\\3') return {fdp:string(10), fdp:remaining()}", "[\"hel\",2]");
  snippet_check_value(P "('hello\\200') return fdp:string(0)", "\"\"");
}

static void choice_picks_an_element(void **state) {
  (void)state;
  snippet_check_value(P "('\\1\\0') local t = {'a', 'b', 'c'} return {fdp:choice(t), "
                        "fdp:choice(t), fdp:choice(t)}",
                      "[\"a\",\"b\",\"a\"]");
  snippet_check_error(P "('x') return fdp:choice({})", MBX_RUNTIME_ERROR,
                      "no elements to choose from");
}

static void bad_calls_say_what_is_wrong(void **state) {
  (void)state;
  snippet_check_error(P "('x') return fdp:int(5, 1)", MBX_RUNTIME_ERROR, "the range is empty");
  snippet_check_error(P "('x') return fdp.int(1, 2)", MBX_RUNTIME_ERROR, "call methods with ':'");
  snippet_check_error(P "('x') return fdp:bytes(-1)", MBX_RUNTIME_ERROR, "must not be negative");
  snippet_check_error("return require('fuzz').provider(12)", MBX_RUNTIME_ERROR, "string expected");
  /* The metatable is hidden: the guest cannot reach or change the methods. */
  snippet_check_value(P "('x') return getmetatable(fdp)", "false");
}

/* Copies are charged by size: 100 copies of 1 MiB (1.6M instructions) trip a 1M limit in a
   loop of a few hundred VM instructions. */
static void copies_are_metered(void **state) {
  (void)state;
  snippet_limits lim = snippet_defaults;
  lim.instructions = 1000000;
  snippet_check_ends(lim,
                     "local s = string.rep('x', 1 << 20) local P = require('fuzz').provider "
                     "for i = 1, 100 do local t = P(s):bytes(1 << 20) end",
                     MBX_INSTRUCTION_LIMIT, NULL);
  snippet_check_ends(lim,
                     "local s = string.rep('x', 1 << 20) local P = require('fuzz').provider "
                     "for i = 1, 10 do local t = P(s):bytes(1 << 20) end",
                     MBX_OK, NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(integers_come_from_the_end), cmocka_unit_test(bytes_come_from_the_front),
      cmocka_unit_test(choice_picks_an_element),    cmocka_unit_test(bad_calls_say_what_is_wrong),
      cmocka_unit_test(copies_are_metered),
  };
  return cmocka_run_group_tests_name("stdlib/fuzz", tests, snippet_setup, snippet_teardown);
}
