#!/usr/bin/env bash
# test_check.sh -- end-to-end tests of `moonbox check`: exit codes, text and --json output,
# and that the policy options decide what "not provided" means.
#
# Usage: bash tests/cli/test_check.sh PATH-TO-MOONBOX
# Every case runs under `timeout 10` (the only timing asserted: "did not hang").
set -u

MBX=${1:?usage: test_check.sh PATH-TO-MOONBOX}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0
rc=0

mb() {
  timeout 10 "$MBX" "$@" <"${STDIN_FILE:-/dev/null}" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

fail() {
  failures=$((failures + 1))
  printf 'FAIL %s: %s\n' "$case_name" "$1"
}

expect() { # expect NAME RC STDOUT [STDERR-REGEX]
  case_name=$1
  cases=$((cases + 1))
  [ "$rc" -eq "$2" ] || fail "exit code: expected $2, got $rc (stderr: $(head -c 300 "$tmp/err"))"
  printf '%s' "$3" | cmp -s - "$tmp/out" ||
    fail "stdout: expected [$3], got [$(head -c 400 "$tmp/out")]"
  if [ $# -ge 4 ]; then
    grep -Eq "$4" "$tmp/err" || fail "stderr does not match /$4/: [$(head -c 300 "$tmp/err")]"
  fi
}

printf 'local a = 1\ncount = a + 1\nreturn fetch(url), count, string.rep("x", 2)\n' >"$tmp/s.lua"

mb check "$tmp/s.lua"
expect "text findings, exit 1" 1 "$tmp/s.lua:2: write of global \"count\", which the policy does not provide
$tmp/s.lua:3: read of global \"count\", which the policy does not provide
$tmp/s.lua:3: read of global \"fetch\", which the policy does not provide
$tmp/s.lua:3: read of global \"url\", which the policy does not provide
"

mb check --json "$tmp/s.lua"
expect "--json findings" 1 '{"globals":[{"access":"write","line":2,"name":"count"},{"access":"read","line":3,"name":"count"},{"access":"read","line":3,"name":"fetch"},{"access":"read","line":3,"name":"url"}],"ok":false,"syntax_error":null}
'

# A granted function and the inputs' names are provided.
mb check --json --pause-on fetch --input '{"url": "https://x", "count": 0}' "$tmp/s.lua"
expect "grants and inputs are provided" 0 '{"globals":[],"ok":true,"syntax_error":null}
'
printf '{"url": 1, "count": 2}' >"$tmp/in.json"
printf '{"limits": {"memory": "8M"}}' >"$tmp/policy.json"
mb check --policy "$tmp/policy.json" --pause-on fetch --input-file "$tmp/in.json" "$tmp/s.lua"
expect "--policy and --input-file" 0 ""

mb check -e 'local t = {} for i = 1, 3 do t[i] = math.floor(i / 2) end print(json.encode(t))'
expect "clean code, exit 0, nothing printed" 0 ""

# Nothing runs: a script that would print or loop forever is only compiled.
mb check -e 'print("ran") while true do end'
expect "nothing runs" 0 ""

mb check -e 'if x then = 1 end'
expect "syntax error, exit 1" 1 "input:1: syntax error: unexpected symbol near '='
"
mb check --json -e 'local s = "unfinished'
expect "syntax error --json" 1 '{"globals":[],"ok":false,"syntax_error":{"line":1,"message":"unfinished string near <eof>"}}
'

STDIN_FILE="$tmp/s.lua" mb check --pause-on fetch -
expect "script from stdin" 1 'input:2: write of global "count", which the policy does not provide
input:3: read of global "count", which the policy does not provide
input:3: read of global "url", which the policy does not provide
'

# Names the script chose never reach the terminal raw.
mb check -e 'return _ENV["\27[2J"], _ENV["\255"]'
expect "names are escaped" 1 'input:1: read of global "\u001B[2J", which the policy does not provide
input:1: read of global {"$bytes":"/w=="}, which the policy does not provide
'

mb check
expect "no script: usage" 2 "" '^moonbox: no script given \(use moonbox check FILE'
mb check --bogus x.lua
expect "unknown option: usage" 2 "" "unknown option '--bogus' \\(see moonbox check --help\\)"
mb check --input '[1, 2]' -e 'return 1'
expect "inputs not an object" 2 "" '^moonbox: --input: not a JSON object'
mb check "$tmp/missing.lua"
expect "missing file" 2 "" "^moonbox: cannot open '.*missing.lua'"
mb check --snapshot-out "$tmp/x.snap" -e 'return 1'
expect "--snapshot-out refused" 2 "" 'nothing pauses'

mb check --source-limit 8 -e 'return 1 + 1 + 1'
expect "source limit" 3 "" 'source limit is 8 bytes'
# The parse is metered under the policy's limits (a quadratic or-chain under 50 ms).
{
  printf 'return a'
  for _ in $(seq 1 20000); do printf ' or a'; done
} >"$tmp/chain.lua"
mb check --timeout 50ms --instructions 0 --source-limit 1M "$tmp/chain.lua"
expect "compile stopped by the time limit" 3 "" 'compiling stopped: time limit'

if [ "$failures" -ne 0 ]; then
  echo "test_check.sh: $failures of $cases cases failed"
  exit 1
fi
echo "test_check.sh: all $cases cases passed"
