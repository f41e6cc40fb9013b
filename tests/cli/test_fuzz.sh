#!/usr/bin/env bash
# test_fuzz.sh -- end-to-end tests of `moonbox fuzz` (host/cli/fuzz.c, host/fuzz/main.c).
#
# Usage: bash tests/cli/test_fuzz.sh PATH-TO-MOONBOX [sanitized]
# libFuzzer runs with fixed -runs= and -seed=, never a time: the engine is deterministic (the
# guest's coverage, the seed and the instruction clock), so a case finds its bug at the same
# execution every time. Each case runs under a generous `timeout` (a hang guard, not a
# measurement). With "sanitized" (ASan builds: no checkpoints, each input resets the sandbox
# and runs the top level again, ~50x slower) the long coverage comparisons are skipped.
set -u

MBX=${1:?usage: test_fuzz.sh PATH-TO-MOONBOX [sanitized]}
MBX=$(cd "$(dirname "$MBX")" && pwd)/$(basename "$MBX") # cases cd elsewhere
SANITIZED=${2:-}
HERE=$(cd "$(dirname "$0")" && pwd)
T=$HERE/fuzz
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0
case_name=""
rc=0

start() {
  case_name=$1
  cases=$((cases + 1))
}

fail() {
  failures=$((failures + 1))
  printf 'FAIL %s: %s\n' "$case_name" "$1"
}

show() {
  tail -c 600 "$1" | tr '\n' '|'
}

# fz NAME ARGS...: moonbox fuzz in a fresh directory $tmp/NAME, artifacts there.
fz() {
  local dir=$tmp/$1
  shift
  mkdir -p "$dir"
  (cd "$dir" && timeout 600 "$MBX" fuzz "$@" -artifact_prefix="$dir/" >"$dir/out" 2>"$dir/err")
  rc=$?
}

crashes() {
  ls "$tmp/$1"/crash-* 2>/dev/null | wc -l
}

# The finding's report as the fuzzing run printed it: from "moonbox-fuzz: finding" to the
# line before libFuzzer's own report.
report_of() {
  sed -n '/^moonbox-fuzz: finding/,/^==[0-9]*== ERROR: libFuzzer/p' "$1" | sed '$d'
}

long() {
  if [ -n "$SANITIZED" ]; then
    printf 'SKIP %s: sanitizer build (no checkpoints: 100k inputs would take many minutes)\n' "$1"
    return 1
  fi
  return 0
}

# --- Guest coverage is what finds a bug behind six nested comparisons -----------------------
if long nested; then
  start "nested: found with guest coverage"
  fz nested "$T/nested.lua" -runs=100000 -seed=1
  if [ "$rc" -eq 0 ] || [ "$(crashes nested)" -ne 1 ] ||
    ! grep -q "the bug behind six comparisons" "$tmp/nested/err"; then
    fail "rc=$rc, $(crashes nested) crash files: $(show "$tmp/nested/err")"
  elif ! cmp -s <(printf 'moon!?') "$(ls "$tmp"/nested/crash-*)"; then
    fail "the crash file is not the input 'moon!?'"
  fi

  start "nested: not found in as many runs without it"
  fz nested_off "$T/nested.lua" --no-coverage -runs=100000 -seed=1
  if [ "$rc" -ne 0 ] || [ "$(crashes nested_off)" -ne 0 ] ||
    ! grep -q "Done 100000 runs" "$tmp/nested_off/err"; then
    fail "rc=$rc, $(crashes nested_off) crash files: $(show "$tmp/nested_off/err")"
  fi

  start "nested in a coroutine: found with guest coverage"
  fz nested_co "$T/nested_coroutine.lua" -runs=100000 -seed=1
  if [ "$rc" -eq 0 ] || [ "$(crashes nested_co)" -ne 1 ] ||
    ! grep -q "six comparisons, in a coroutine" "$tmp/nested_co/err"; then
    fail "rc=$rc, $(crashes nested_co) crash files: $(show "$tmp/nested_co/err")"
  fi

  start "nested in a coroutine: not found without it"
  fz nested_co_off "$T/nested_coroutine.lua" --no-coverage -runs=100000 -seed=1
  if [ "$rc" -ne 0 ] || [ "$(crashes nested_co_off)" -ne 0 ]; then
    fail "rc=$rc, $(crashes nested_co_off) crash files: $(show "$tmp/nested_co_off/err")"
  fi

  # --- Findings reproduce byte for byte ------------------------------------------------------
  start "reproduce: the same report, twice, as during fuzzing"
  crash=$(ls "$tmp"/nested/crash-* 2>/dev/null | head -1)
  if [ -z "$crash" ]; then
    fail "no crash file from the nested case"
  else
    report_of "$tmp/nested/err" >"$tmp/report.fuzz"
    timeout 120 "$MBX" fuzz "$T/nested.lua" --reproduce "$crash" >"$tmp/r1.out" 2>"$tmp/r1.err"
    r1=$?
    timeout 120 "$MBX" fuzz "$T/nested.lua" --reproduce "$crash" >"$tmp/r2.out" 2>"$tmp/r2.err"
    if [ "$r1" -ne 1 ] || ! cmp -s "$tmp/r1.err" "$tmp/r2.err" ||
      ! cmp -s "$tmp/r1.err" "$tmp/report.fuzz" || [ ! -s "$tmp/report.fuzz" ]; then
      fail "rc=$r1: $(show "$tmp/r1.err") vs fuzzing: $(show "$tmp/report.fuzz")"
    fi
  fi
fi

# --- The dictionary of the target's constants ----------------------------------------------
start "a magic 8-byte string compared with == is found through the constants dictionary"
fz magic "$T/magic.lua" -runs=20000 -seed=1
if [ "$rc" -eq 0 ] || ! grep -q "the magic string" "$tmp/magic/err" ||
  ! grep -q "^Dictionary: [0-9]* entries" "$tmp/magic/err"; then
  fail "rc=$rc: $(show "$tmp/magic/err")"
fi

start "and not without the dictionary in as many runs"
fz magic_off "$T/magic.lua" --no-dictionary -runs=20000 -seed=1
if [ "$rc" -ne 0 ] || [ "$(crashes magic_off)" -ne 0 ] || ! grep -q "Done 20000 runs" "$tmp/magic_off/err"; then
  fail "rc=$rc: $(show "$tmp/magic_off/err")"
fi

start "a user -dict is merged with the constants, and no dictionary file is left behind"
printf 'kw1="hello"\nkw2="world"\n' >"$tmp/user.dict"
before=$(ls "${TMPDIR:-/tmp}"/moonbox-fuzz-*.dict 2>/dev/null | wc -l)
fz userdict "$T/magic.lua" -dict="$tmp/user.dict" -runs=20000 -seed=1
after=$(ls "${TMPDIR:-/tmp}"/moonbox-fuzz-*.dict 2>/dev/null | wc -l)
# magic.lua's constants: "sub", "M00nB0x!", "error", "the magic string", "fuzz", 1, 8 (text
# and byte): 9, plus the user's 2.
if ! grep -q "^Dictionary: 11 entries" "$tmp/userdict/err" || [ "$after" -gt "$before" ]; then
  fail "$(grep Dictionary "$tmp/userdict/err"); dictionary files before $before, after $after"
fi

# --- Hints from string.find ------------------------------------------------------------------
start "a word only string.find compares is found through its compare hint"
fz hint "$T/find_hint.lua" -runs=20000 -seed=1
if [ "$rc" -eq 0 ] || ! grep -q "found the magic word" "$tmp/hint/err"; then
  fail "rc=$rc: $(show "$tmp/hint/err")"
fi

# --- Isolation: every input starts from the checkpoint --------------------------------------
start "a global counter is 1 on every input"
fz counter "$T/counter.lua" -runs=3000 -seed=1
if [ "$rc" -ne 0 ] || [ "$(crashes counter)" -ne 0 ] || ! grep -q "Done 3000 runs" "$tmp/counter/err"; then
  fail "rc=$rc: $(show "$tmp/counter/err")"
fi

# --- Limits: a finding only when chosen ------------------------------------------------------
start "an input that exhausts instructions is not a finding by default"
fz spin_default "$T/spin.lua" --instructions 1e5 -runs=3000 -seed=1 -only_ascii=1
if [ "$rc" -ne 0 ] || [ "$(crashes spin_default)" -ne 0 ]; then
  fail "rc=$rc: $(show "$tmp/spin_default/err")"
fi

start "with --findings instructions it is reported as instruction_limit"
fz spin "$T/spin.lua" --instructions 1e5 --findings errors,instructions -runs=3000 -seed=1 \
  -only_ascii=1
if [ "$rc" -eq 0 ] || [ "$(crashes spin)" -ne 1 ] ||
  ! grep -q "^moonbox-fuzz: finding (instruction_limit): instruction limit exceeded" "$tmp/spin/err"; then
  fail "rc=$rc: $(show "$tmp/spin/err")"
else
  crash=$(ls "$tmp"/spin/crash-*)
  if [ "$(head -c 1 "$crash")" != "!" ]; then fail "the crash file does not start with '!'"; fi
  timeout 120 "$MBX" fuzz "$T/spin.lua" --instructions 1e5 --findings instructions \
    --reproduce "$crash" >/dev/null 2>"$tmp/spin.rep"
  r=$?
  if [ "$r" -ne 1 ] || ! grep -q "finding (instruction_limit)" "$tmp/spin.rep"; then
    fail "reproduce: rc=$r: $(show "$tmp/spin.rep")"
  fi
  timeout 120 "$MBX" fuzz "$T/spin.lua" --instructions 1e5 --reproduce "$crash" \
    >/dev/null 2>"$tmp/spin.rep2"
  r=$?
  if [ "$r" -ne 0 ] || ! grep -q "no finding (instruction_limit)" "$tmp/spin.rep2"; then
    fail "reproduce with errors only: rc=$r: $(show "$tmp/spin.rep2")"
  fi
fi

# --- The provider ----------------------------------------------------------------------------
if long provider; then
  start "structured input through require('fuzz').provider"
  fz provider "$T/provider.lua" -runs=100000 -seed=1
  if [ "$rc" -eq 0 ] || ! grep -q "mul 777" "$tmp/provider/err"; then
    fail "rc=$rc: $(show "$tmp/provider/err")"
  fi
fi

# --- Modules: docs/fuzzing.md's target, as written, finds mylib/parser.lua beside it -------------

start docs_example_requires_a_module
mkdir -p "$tmp/docs_example/mylib"
sed -n '/^-- fuzz_parser.lua$/,/^```$/p' "$HERE/../../docs/fuzzing.md" | sed '$d' \
  >"$tmp/docs_example/fuzz_parser.lua"
cat >"$tmp/docs_example/mylib/parser.lua" <<'LUA'
-- A parser whose print/parse round trip is stable: a list of the input's words.
local M = {}
function M.parse(s)
  local t = {}
  for w in s:gmatch("%a+") do t[#t + 1] = w end
  return t
end
function M.print(t) return table.concat(t, " ") end
return M
LUA
if ! grep -q 'require("mylib.parser")' "$tmp/docs_example/fuzz_parser.lua"; then
  fail "docs/fuzzing.md's example was not found"
fi
fz docs_example "$tmp/docs_example/fuzz_parser.lua" -runs=500 -seed=1
if [ "$rc" -ne 0 ] || [ "$(crashes docs_example)" -ne 0 ]; then
  fail "the docs example did not run clean: rc $rc ($(show "$tmp/docs_example/err"))"
fi
fz docs_example_off "$tmp/docs_example/fuzz_parser.lua" --no-script-modules \
  -runs=10 -seed=1
if [ "$rc" -eq 0 ] || ! grep -q "in global 'require'" "$tmp/docs_example_off/err"; then
  fail "--no-script-modules still found the module: rc $rc ($(show "$tmp/docs_example_off/err"))"
fi

# --- Usage errors ----------------------------------------------------------------------------
start "usage errors name what is wrong"
timeout 60 "$MBX" fuzz >/dev/null 2>"$tmp/u1"
r1=$?
timeout 60 "$MBX" fuzz "$T/nested.lua" --bogus >/dev/null 2>"$tmp/u2"
r2=$?
timeout 60 "$MBX" fuzz "$T/nested.lua" --findings errors,bugs -runs=1 >/dev/null 2>"$tmp/u3"
r3=$?
timeout 60 "$MBX" fuzz "$T/nofuzz.lua" -runs=1 >/dev/null 2>"$tmp/u4"
r4=$?
timeout 60 "$MBX" fuzz "$T/nested.lua" --input '{}' >/dev/null 2>"$tmp/u5"
r5=$?
if [ "$r1" -ne 2 ] || ! grep -q "no target given" "$tmp/u1"; then fail "no target: $r1 $(show "$tmp/u1")"; fi
if [ "$r2" -ne 2 ] || ! grep -q "unknown option '--bogus'" "$tmp/u2"; then fail "bogus: $r2 $(show "$tmp/u2")"; fi
if [ "$r3" -ne 2 ] || ! grep -q "unknown kind 'bugs'" "$tmp/u3"; then fail "findings: $r3 $(show "$tmp/u3")"; fi
if [ "$r4" -ne 1 ] || ! grep -q "defines no global function fuzz" "$tmp/u4"; then fail "nofuzz: $r4 $(show "$tmp/u4")"; fi
if [ "$r5" -ne 2 ] || ! grep -q "every input is the fuzz input" "$tmp/u5"; then fail "input: $r5 $(show "$tmp/u5")"; fi

start "without the engine next to it, moonbox fuzz says what to install"
mkdir -p "$tmp/alone"
cp "$MBX" "$tmp/alone/moonbox"
timeout 60 "$tmp/alone/moonbox" fuzz "$T/nested.lua" -runs=1 >/dev/null 2>"$tmp/u6"
r6=$?
if [ "$r6" -ne 2 ] || ! grep -q "apt-get install clang libclang-rt-14-dev" "$tmp/u6"; then
  fail "rc=$r6: $(show "$tmp/u6")"
fi

printf '%d cases, %d failures\n' "$cases" "$failures"
[ "$failures" -eq 0 ]
