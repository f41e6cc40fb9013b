/* tests/fuzz/fuzz_library.c -- libFuzzer harness: library functions called with extreme values. */
/* Each input is read as a list of calls, three or more bytes each: a function (an index into
   `functions` below), an argument count (0-5), then one byte per argument (an index into
   `values`: math.mininteger and math.maxinteger and their neighbours, the bit-width edges,
   huge and tiny floats, NaN, infinities, -0.0, and a few strings and tables). The harness
   writes each call as `pcall(f, a, b, ...)` into one chunk and runs it through the public API
   in a fresh sandbox, so every guest-reachable negation, abs, shift and multiply of a guest
   integer in moonbox's own C (stdlib/ and vm/: string.unpack's position, string.rep's count,
   utf8 positions, table indices, the JSON codec, os.date/os.time fields, ...) meets the
   extremes under UBSan, which the fuzz preset builds the library with (issue 9, E.6:
   string.unpack("b", "x", math.mininteger) negated LUA_MININTEGER and UBSan aborted the host).

   What fails: any sanitizer report (UBSan is not recoverable here), a crash, a hang past
   libFuzzer's -timeout, and a run that does not end ok or on a limit: every call is inside
   pcall, so a runtime error or internal error means something escaped a pcall.

   Build (clang only): cmake --preset fuzz && cmake --build --preset fuzz
   Run: build/fuzz/tests/fuzz_library -max_len=512 -timeout=5 -rss_limit_mb=2048 \
          -artifact_prefix=build/fuzz/ -max_total_time=60 build/fuzz/corpus-library
   tools/dev fuzz_smoke runs it for a short while with a fresh corpus. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "moonbox.h"

#define MEMORY_LIMIT (8u << 20)
#define INSTRUCTION_LIMIT 2000000
#define TIME_LIMIT_MS 500
#define OUTPUT_LIMIT (64u << 10)
#define MAX_CALLS 64

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Every library function a guest can reach that takes a number, one per line. */
static const char *const functions[] = {
    "string.byte",
    "string.char",
    "string.find",
    "string.format",
    "string.gmatch",
    "string.gsub",
    "string.len",
    "string.lower",
    "string.match",
    "string.pack",
    "string.packsize",
    "string.rep",
    "string.reverse",
    "string.sub",
    "string.unpack",
    "string.upper",
    "utf8.char",
    "utf8.codepoint",
    "utf8.len",
    "utf8.offset",
    "table.concat",
    "table.insert",
    "table.move",
    "table.remove",
    "table.unpack",
    "table.sort",
    "table.pack",
    "math.abs",
    "math.ceil",
    "math.floor",
    "math.fmod",
    "math.max",
    "math.min",
    "math.modf",
    "math.random",
    "math.tointeger",
    "math.type",
    "math.ult",
    "math.randomseed",
    "os.date",
    "os.time",
    "os.difftime",
    "select",
    "tostring",
    "tonumber",
    "json.encode",
    "json.decode",
    "string.format",
    "coroutine.wrap",
    "collectgarbage",
    "debug.getinfo",
    "debug.getlocal",
    "debug.getupvalue",
    "debug.traceback",
    "warn",
    "(function(a, b) return debug.setlocal(a, b, a) end)",
    "(function(a, b) return debug.setupvalue(debug.getinfo, a, b) end)",
    "(function(a, b) return debug.getinfo(a, b) end)",
    "rawlen",
    "rawequal",
    "ipairs",
    "next",
    "error",
    "load",
    "(function(a, b) return a // b end)",
    "(function(a, b) return a % b end)",
    "(function(a, b) return a << b end)",
    "(function(a, b) return a >> b end)",
    "(function(a, b) return a * b end)",
    "(function(a) return -a end)",
    "(function(a, b) return a ^ b end)",
    "(function(a, b) return ('x'):rep(a, b) end)",
    "(function(a, b, c) local t = {1, 2, 3} table.insert(t, a, b) return t end)",
    "(function(a, b, c) return table.move({1, 2, 3}, a, b, c) end)",
    "(function(a, b) return table.unpack({1, 2, 3}, a, b) end)",
    "(function(a, b) return table.concat({'a', 'b'}, ',', a, b) end)",
    "(function(a) return os.date('*t', a) end)",
    "(function(a, b) return os.time({year = a, month = b, day = 1}) end)",
    "(function(a, b) return string.unpack('b', 'x', a) end)",
    "(function(a, b) return string.unpack('i16', ('x'):rep(16), a) end)",
    "(function(a, b) return string.pack('j', a) end)",
    "(function(a, b) return string.format('%d %5.2f %x', a, b, a) end)",
    "(function(a, b) return utf8.offset('h\\u{e9}llo', a, b) end)",
    "(function(a, b) return utf8.codepoint('h\\u{e9}llo', a, b) end)",
    "(function(a, b) return ('hello'):find('l', a) end)",
    "(function(a, b) return ('hello'):sub(a, b) end)",
    "(function(a, b) return ('hello'):byte(a, b) end)",
    "(function(a, b) return ('hello'):gsub('l', 'L', a) end)",
    "(function(a) return json.encode({[a] = 1, [1] = a}) end)",
    "(function(a) return json.decode(json.encode(a)) end)",
    "(function(a) return json.encode(setmetatable({}, {__index = a})) end)",
};
#define FUNCTION_COUNT (sizeof functions / sizeof *functions)

static const char *const values[] = {
    "math.mininteger",
    "math.maxinteger",
    "math.mininteger + 1",
    "math.maxinteger - 1",
    "0",
    "1",
    "-1",
    "2",
    "-2",
    "63",
    "64",
    "-64",
    "0x7fffffff",
    "-0x80000000",
    "0xffffffff",
    "0x100000000",
    "0x7fffffffffffffff",
    "0x8000000000000000",
    "2^53",
    "-2^53",
    "2^63",
    "-2^63",
    "1e308",
    "-1e308",
    "1/0",
    "-1/0",
    "0/0",
    "-0.0",
    "0.5",
    "-0.5",
    "4.9e-324",
    "255",
    "256",
    "65535",
    "0x10FFFF",
    "0x7FFFFFFF",
    "''",
    "'x'",
    "'%d'",
    "'-9223372036854775808'",
    "'0x8000000000000000'",
    "'1e999'",
    "'i16'",
    "'<!16i7'",
    "'\\xff\\xfe'",
    "{}",
    "{1, 2, 3}",
    "nil",
    "true",
    "false",
    "('a'):rep(300)",
    "'s4'",
};
#define VALUE_COUNT (sizeof values / sizeof *values)

static mbx_runtime *runtime;
static mbx_policy *policy;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  mbx_error err;
  runtime = mbx_runtime_new(&err);
  policy = mbx_policy_new();
  if (runtime == NULL || policy == NULL) abort();
  if (mbx_policy_set_limit(policy, MBX_LIMIT_MEMORY, MEMORY_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_INSTRUCTIONS, INSTRUCTION_LIMIT) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_TIME_MS, TIME_LIMIT_MS) != MBX_OK ||
      mbx_policy_set_limit(policy, MBX_LIMIT_OUTPUT, OUTPUT_LIMIT) != MBX_OK)
    abort();
  return 0;
}

/* Append text to the growing source; the buffer is sized for MAX_CALLS of the longest. */
static void put(char *src, size_t *len, size_t cap, const char *text) {
  size_t n = strlen(text);
  if (*len + n + 1 > cap) abort(); /* the bound below is wrong */
  memcpy(src + *len, text, n + 1);
  *len += n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  enum { CAP = MAX_CALLS * (8 + 96 + 6 * 32) + 64 };
  static char src[CAP];
  size_t len = 0, at = 0;
  src[0] = '\0';
  for (int calls = 0; calls < MAX_CALLS && at + 2 <= size; calls++) {
    const char *fn = functions[data[at++] % FUNCTION_COUNT];
    int argc = data[at++] % 6;
    put(src, &len, CAP, "pcall(");
    put(src, &len, CAP, fn);
    for (int i = 0; i < argc && at < size; i++) {
      put(src, &len, CAP, ", ");
      put(src, &len, CAP, values[data[at++] % VALUE_COUNT]);
    }
    put(src, &len, CAP, ")\n");
  }
  put(src, &len, CAP, "return 0\n");

  mbx_sandbox *sb = mbx_sandbox_new(runtime, policy, NULL);
  if (sb == NULL) abort();
  mbx_result *res = NULL;
  mbx_status st = mbx_run(sb, src, len, NULL, 0, &res, NULL);
  /* Every call is protected: only a limit may end the run early. */
  if (st != MBX_OK && st != MBX_MEMORY_LIMIT && st != MBX_INSTRUCTION_LIMIT &&
      st != MBX_TIME_LIMIT && st != MBX_OUTPUT_LIMIT) {
    fprintf(stderr, "\nfuzz_library: the run ended with %s\nresult: %s\nsource:\n%s\n",
            mbx_status_name(st), res ? mbx_result_json(res, NULL) : "(none)", src);
    abort();
  }
  mbx_result_free(res);
  mbx_sandbox_free(sb);
  return 0;
}
