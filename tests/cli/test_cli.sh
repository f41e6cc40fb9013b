#!/usr/bin/env bash
# test_cli.sh -- end-to-end tests of the moonbox command: exit codes, stdout, stderr, --json.
#
# Usage: bash tests/cli/test_cli.sh PATH-TO-MOONBOX
# Every case runs under `timeout 10`, the only timing this file asserts ("did not hang").
# Prints each failing case with what was expected and what came out; exits 1 on any failure.
set -u

MBX=${1:?usage: test_cli.sh PATH-TO-MOONBOX}
MBX=$(cd "$(dirname "$MBX")" && pwd)/$(basename "$MBX") # some cases cd elsewhere
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
cases=0
case_name=""
rc=0

# ------------------------------------------------------------------------------------------
# Helpers. `mb ARGS...` runs moonbox with stdin from $STDIN_FILE (default /dev/null) and
# leaves the exit code in $rc and the output in $tmp/out and $tmp/err.

start() {
  case_name=$1
  cases=$((cases + 1))
}

mb() {
  timeout 10 "$MBX" "$@" <"${STDIN_FILE:-/dev/null}" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

fail() {
  failures=$((failures + 1))
  printf 'FAIL %s: %s\n' "$case_name" "$1"
}

# Shows a captured file in failure messages, shortened and on one line.
show() {
  head -c 400 "$1" | tr '\n' '|'
}

check_rc() {
  if [ "$rc" -eq 124 ]; then
    fail "did not finish within 10 s"
  elif [ "$rc" -ne "$1" ]; then
    fail "exit code: expected $1, got $rc (stderr: $(show "$tmp/err"))"
  fi
}

# Exact byte comparison of stdout / stderr with $1 (write "\n" as $'\n').
check_out() {
  if ! printf '%s' "$1" | cmp -s - "$tmp/out"; then
    fail "stdout: expected [$(printf '%s' "$1" | tr '\n' '|')], got [$(show "$tmp/out")]"
  fi
}

check_err() {
  if ! printf '%s' "$1" | cmp -s - "$tmp/err"; then
    fail "stderr: expected [$(printf '%s' "$1" | tr '\n' '|')], got [$(show "$tmp/err")]"
  fi
}

# The first line of stderr matches the extended regex $1.
check_err_first() {
  if ! head -n 1 "$tmp/err" | grep -Eq -- "$1"; then
    fail "stderr first line: expected /$1/, got [$(show "$tmp/err")]"
  fi
}

check_err_has() {
  if ! grep -Eq -- "$1" "$tmp/err"; then
    fail "stderr: expected /$1/ somewhere, got [$(show "$tmp/err")]"
  fi
}

check_out_has() {
  if ! grep -Eq -- "$1" "$tmp/out"; then
    fail "stdout: expected /$1/ somewhere, got [$(show "$tmp/out")]"
  fi
}

check_empty() {
  if [ -s "$tmp/$1" ]; then
    fail "$1: expected nothing, got [$(show "$tmp/$1")]"
  fi
}

# stdout is exactly one line holding one JSON object, and the Python expression $1 (over the
# parsed object `d`) is true. Python parses integers exactly, so 2^53 + 1 is checked as such.
check_json() {
  local msg
  if ! msg=$(python3 - "$tmp/out" "$1" 2>&1 <<'PY'
import json, sys
raw = open(sys.argv[1], 'rb').read()
text = raw.decode('utf-8')
if not text.endswith('\n') or text.count('\n') != 1:
    print('not exactly one line: %r' % raw[:400])
    sys.exit(1)
def refuse_constant(name):
    raise ValueError('%s is not JSON' % name)
d = json.loads(text, parse_constant=refuse_constant)  # NaN and Infinity are not JSON
if not isinstance(d, dict):
    print('not an object: %r' % raw[:400])
    sys.exit(1)
if not eval(sys.argv[2], {'d': d}):
    print('%s is false for %s' % (sys.argv[2], text.strip()[:400]))
    sys.exit(1)
PY
  ); then
    fail "json: $msg"
  fi
}

# The contract with the usage figures (which vary) blanked out equals $1 exactly.
check_contract() {
  local got
  got=$(sed -E 's/"usage":\{[^}]*\}/"usage":{}/' "$tmp/out")
  if [ "$got" != "$1" ]; then
    fail "contract: expected [$1], got [$got]"
  fi
}

# ------------------------------------------------------------------------------------------
# Results and values

start json_contract
mb run --json -e 'return 1+1'
check_rc 0
check_contract '{"error":null,"pending":null,"status":"ok","stderr":"","stdout":"","usage":{},"value":2}'
check_json 'd["status"] == "ok" and d["value"] == 2 and d["error"] is None'
check_json 'set(d["usage"]) == {"exec_ms", "exec_runs", "host_calls", "instructions", "memory_peak", "output_bytes", "wall_us"}'
check_empty err

start plain_value
mb run -e 'return 1+1'
check_rc 0
check_out $'2\n'
check_empty err

start no_value
mb run -e 'local x = 1'
check_rc 0
check_empty out
check_empty err

start empty_script
mb run -e ''
check_rc 0
check_empty out

start multiple_values
mb run -e 'return 1, "a", true'
check_rc 0
check_out $'[1,"a",true]\n'

start multiple_values_json
mb run --json -e 'return 1, "a", true'
check_json 'd["value"] == [1, "a", True]'

start string_value
mb run -e 'return "hi"'
check_out $'"hi"\n'

start print_output
mb run -e 'print("hello") print("world", 42)'
check_rc 0
check_out $'hello\nworld\t42\n'
check_empty err

start print_then_value
mb run -e 'print("hi") return 7'
check_out $'hi\n7\n'

start print_output_json
mb run --json -e 'print("hello") return 1'
check_rc 0
check_json 'd["stdout"] == "hello\n" and d["value"] == 1'
check_empty err

start non_utf8_value
mb run -e 'return "\255"'
check_rc 0
check_out $'{"$bytes":"/w=="}\n'

start large_integer
mb run -e 'return 9007199254740993'
check_rc 0
check_out $'9007199254740993\n'

start large_integer_json
mb run --json -e 'return 9007199254740993'
check_json 'd["value"] == 9007199254740993'

# ------------------------------------------------------------------------------------------
# Script errors

start runtime_error
mb run -e 'error("boom")'
check_rc 1
check_err_first '^moonbox: input:1: boom$'
check_empty out

start runtime_error_traceback_indented
mb run -e 'local function f() error("deep") end f()'
check_rc 1
check_err_first '^moonbox: input:1: deep$'
if [ "$(wc -l <"$tmp/err")" -gt 1 ] && tail -n +2 "$tmp/err" | grep -qv '^  '; then
  fail "traceback lines are not indented: [$(show "$tmp/err")]"
fi

start runtime_error_index
mb run -e 'local t = nil; return t.x'
check_rc 1
check_err_first '^moonbox: input:1: .*index.*nil'

start runtime_error_output_kept
mb run -e 'print("before") error("after")'
check_rc 1
check_out $'before\n'
check_err_first '^moonbox: input:1: after$'

start runtime_error_json
mb run --json -e 'error("boom")'
check_rc 1
check_json 'd["status"] == "runtime_error" and d["error"]["line"] == 1 and "boom" in d["error"]["message"]'
check_empty err

start syntax_error
mb run -e 'return +'
check_rc 1
check_err_first '^moonbox: input:1: '
check_empty out

start syntax_error_json
mb run --json -e 'x = = 1'
check_rc 1
check_json 'd["status"] == "syntax_error" and d["value"] is None'

# ------------------------------------------------------------------------------------------
# Limits

start time_limit
mb run --timeout 100ms --instructions 0 -e 'while true do end'
check_rc 3
check_err_first '^moonbox: .*time limit'

start time_limit_json
mb run --json --timeout 100ms --instructions 0 -e 'while true do end'
check_rc 3
check_json 'd["status"] == "time_limit"'

# The default policy has no instruction limit: time and memory are its budgets, and a loop runs
# with no count hook (usage.instructions null) until its deadline, in this process and in a
# jailed worker (whose parent signals the deadline). The bound is generous: the status says why.
start default_policy_loop_ends_by_time
mb run --json --isolate none --timeout 300ms -e 'while true do end'
check_rc 3
check_json 'd["status"] == "time_limit" and d["usage"]["instructions"] is None and d["usage"]["wall_us"] < 10000000'
mb run --json --isolate process --timeout 300ms -e 'while true do end'
check_rc 3
check_json 'd["status"] == "time_limit" and d["usage"]["instructions"] is None and d["usage"]["wall_us"] < 10000000'

# Deterministic mode ends runs by counting: it asks for an instruction limit, in the words of
# the option that turned it on.
start deterministic_needs_instructions
mb run --deterministic -e 'return 1'
check_rc 2
check_err_first '^moonbox: --deterministic needs --instructions N \(e.g. --instructions 1e9\): a deterministic run ends by its instruction count, never by the clock$'
mb run --pause-on tools.fetch --snapshot-out "$tmp/never.bin" -e 'return tools.fetch()'
check_rc 2
check_err_first '^moonbox: --snapshot-out \(snapshots are of deterministic runs\) needs --instructions N'
printf '{"deterministic": true}\n' >"$tmp/det_policy.json"
mb run --policy "$tmp/det_policy.json" -e 'return 1'
check_rc 2
check_err_first '^moonbox: --policy .*: deterministic: a deterministic policy needs an instruction limit: set limits.instructions'
mb run --policy "$tmp/det_policy.json" --instructions 1e9 -e 'return 1'
check_rc 0
check_out $'1\n'

start instruction_limit
mb run --json --instructions 10000 -e 'while true do end'
check_rc 3
check_json 'd["status"] == "instruction_limit"'

start instruction_limit_scientific
mb run --instructions 1e4 -e 'while true do end'
check_rc 3
check_err_first '^moonbox: .*instruction limit'

start memory_limit
mb run --json --memory 1M -e 'local t={} for i=1,1e7 do t[i]=i end'
check_rc 3
check_json 'd["status"] == "memory_limit"'

start memory_limit_text
mb run --memory 1M -e 'local t={} for i=1,1e7 do t[i]=i end'
check_rc 3
check_err_first '^moonbox: .*memory limit'

start output_limit
mb run --json --output-limit 1k -e 'for i=1,1e6 do print(i) end'
check_rc 3
check_json 'd["status"] == "output_limit" and len(d["stdout"]) <= 1024'

start output_limit_text
mb run --output-limit 1k -e 'for i=1,1e6 do print(i) end'
check_rc 3
if [ "$(wc -c <"$tmp/out")" -gt 1024 ]; then
  fail "more than 1k of output passed: $(wc -c <"$tmp/out") bytes"
fi
check_err_has '^moonbox: .*output limit'

start source_limit_code
mb run --source-limit 1k -e "return '$(head -c 2000 /dev/zero | tr '\0' x)'"
check_rc 3
check_err_first '^moonbox: '
check_empty out

start source_limit_file
{ printf 'return 1 --'; head -c 70000 /dev/zero | tr '\0' x; } >"$tmp/big.lua"
mb run "$tmp/big.lua"
check_rc 3
check_err_first '^moonbox: .*source limit'

start source_limit_raised
mb run --source-limit 128k "$tmp/big.lua"
check_rc 0
check_out $'1\n'

start limit_out_of_range
mb run --memory 1k -e 'return 1'
check_rc 2
check_err_first '^moonbox: --memory: .+'
check_empty out

start source_limit_out_of_range
mb run --source-limit 1G -e 'return 1'
check_rc 2
check_err_first '^moonbox: --source-limit: .+'

# SIGINT while the script runs interrupts it. Job control (set -m) keeps the background job
# from inheriting an ignored SIGINT, which moonbox would respect. timeout runs in the
# foreground mode: otherwise it forwards the signal to its process group too, and that second
# SIGINT kills moonbox, as a second Ctrl-C should.
# In a worker too, where the loop has no count hook either: its interrupt signal arms the hook.
start sigint_interrupts
for iso in none process; do
  set -m
  timeout --foreground 10 "$MBX" run --json --isolate "$iso" --timeout 0 --instructions 0 \
    -e 'while true do end' </dev/null >"$tmp/out" 2>"$tmp/err" &
  pid=$!
  set +m
  sleep 1
  kill -INT "$pid" 2>/dev/null
  wait "$pid"
  rc=$?
  check_rc 3
  check_json 'd["status"] == "interrupted" and d["usage"]["instructions"] is None'
done

# ------------------------------------------------------------------------------------------
# Inputs

start input_json
mb run --input '{"x":21}' -e 'return x*2'
check_rc 0
check_out $'42\n'

start input_equals_form
mb run --input='{"name":"moon"}' -e 'return "hi " .. name'
check_out $'"hi moon"\n'

start input_file
printf '{"x": 21, "s": "a"}' >"$tmp/in.json"
mb run --input-file "$tmp/in.json" -e 'return x*2, s'
check_rc 0
check_out $'[42,"a"]\n'

start input_file_stdin
printf '{"x": 5}' >"$tmp/stdin.json"
STDIN_FILE="$tmp/stdin.json" mb run --input-file - -e 'return x + 1'
check_rc 0
check_out $'6\n'

start input_bad_json
mb run --input '{"x":' -e 'return 1'
check_rc 2
check_err_first '^moonbox: --input: .+'
check_empty out

start input_not_object
mb run --json --input '[1,2]' -e 'return 1'
check_rc 2
check_err_first '^moonbox: --input: .+'
check_empty out

start input_file_missing
mb run --input-file "$tmp/nope.json" -e 'return 1'
check_rc 2
check_err_first "^moonbox: cannot open '.*nope.json'"

start input_file_stdin_twice
mb run --input-file - -
check_rc 2
check_err $'moonbox: --input-file -: stdin already holds the script (put the inputs in a file)\n'

# ------------------------------------------------------------------------------------------
# Script sources

start script_file_error
printf 'local a = 1\nerror("kaput")\n' >"$tmp/boom.lua"
mb run "$tmp/boom.lua"
check_rc 1
check_err_first "^moonbox: $tmp/boom.lua:2: kaput\$"

start script_file_value
printf 'local a = 20\nreturn a + 1\n' >"$tmp/ok.lua"
mb run "$tmp/ok.lua"
check_rc 0
check_out $'21\n'

start script_file_with_nul
printf 'return "a\0b"' >"$tmp/nul.lua"
mb run --json "$tmp/nul.lua"
check_rc 0
check_json 'd["value"] == "a\x00b"'

start script_file_shebang
printf '#!/usr/bin/env moonbox run\nerror("line two")\n' >"$tmp/shebang.lua"
mb run "$tmp/shebang.lua"
check_rc 1
check_err_first ':2: line two$'

start script_file_bom
printf '\xef\xbb\xbf#!/usr/bin/env moonbox run\nreturn 3\n' >"$tmp/bom.lua"
mb run "$tmp/bom.lua"
check_rc 0
check_out $'3\n'

# Lua keeps 59 bytes of a chunk name; the CLI shortens a long path so the file name survives.
start script_file_long_path
long_dir="$tmp/a_rather_long_directory_name_for_chunk_names/and_one_more_level"
mkdir -p "$long_dir"
printf 'error("far")' >"$long_dir/script_with_a_long_name.lua"
mb run "$long_dir/script_with_a_long_name.lua"
check_rc 1
check_err_first '^moonbox: \.\.\..*/script_with_a_long_name\.lua:1: far$'

# The chunk name is the path as given, never the absolute host path: the guest reads it in
# its own error messages (issue 9, E.7).
start script_file_path_as_given
mkdir -p "$tmp/given/sub"
printf 'local ok, m = pcall(function() error("where") end)\nprint(m)\nerror("x")\n' >"$tmp/given/rel.lua"
(cd "$tmp/given" && timeout 10 "$MBX" run --json sub/../rel.lua </dev/null >"$tmp/out" 2>"$tmp/err")
rc=$?
check_rc 1
check_json 'd["error"]["chunk"] == "sub/../rel.lua" and d["error"]["line"] == 3'
check_json 'd["stdout"] == "sub/../rel.lua:1: where\n"'
if grep -q "$tmp" "$tmp/out"; then fail "the absolute path reached the result"; fi

start options_after_script_are_its_arguments
mb run "$tmp/ok.lua" --json
check_rc 0
check_out $'21\n'
mb run --json -e 'return 21'
check_rc 0
check_json 'd["value"] == 21'

start double_dash
cp "$tmp/ok.lua" "$tmp/-dash.lua"
(cd "$tmp" && timeout 10 "$MBX" run --json -- -dash.lua </dev/null >"$tmp/out" 2>"$tmp/err")
rc=$?
check_rc 0
check_json 'd["value"] == 21'

start stdin_script
printf 'return 6*7' >"$tmp/stdin.lua"
STDIN_FILE="$tmp/stdin.lua" mb run -
check_rc 0
check_out $'42\n'

# Standard input is read only as the script reads it: 70 MB redirected in costs nothing to a
# script that never reads it, and a script that reads it all meets the 64 MiB the sandbox
# keeps as a Lua error naming standard input, not an option nobody gave.
start stdin_large_unread
head -c 70000000 /dev/zero >"$tmp/big_stdin"
STDIN_FILE="$tmp/big_stdin" mb run -e 'return 1'
check_rc 0
check_out $'1\n'
start stdin_large_read
STDIN_FILE="$tmp/big_stdin" mb run --memory 256M -e 'return #assert(io.read("a"))'
rm -f "$tmp/big_stdin"
check_rc 1
check_err_first '^moonbox: .*more than 64 MiB of standard input read \(the most a sandbox keeps\)'

# A writer that keeps stdin open does not hold up a script that never reads it (before, the
# CLI read all of stdin first: `sleep 3 | moonbox run` took 3 s, and an open pipe hung it);
# a read that waits is guest time and ends at --timeout, in both isolation modes.
for iso in none process; do
  start "stdin_never_read_$iso"
  { sleep 30 & echo $! >"$tmp/sleeper"; wait; } | {
    timeout 10 "$MBX" run --isolate "$iso" -e 'return 1' >"$tmp/out" 2>"$tmp/err"
    echo $? >"$tmp/rc"
    kill "$(cat "$tmp/sleeper")" 2>/dev/null
  }
  rc=$(cat "$tmp/rc")
  check_rc 0
  check_out $'1\n'
  start "stdin_wait_is_guest_time_$iso"
  { sleep 30 & echo $! >"$tmp/sleeper"; wait; } | {
    timeout 10 "$MBX" run --isolate "$iso" --timeout 500ms --json -e 'return io.read()' \
      >"$tmp/out" 2>"$tmp/err"
    echo $? >"$tmp/rc"
    kill "$(cat "$tmp/sleeper")" 2>/dev/null
  }
  rc=$(cat "$tmp/rc")
  check_rc 3
  check_json 'd["status"] == "time_limit" and "standard input" not in d["error"]["message"]'
done

start stdin_script_error
printf '\nerror("from stdin")' >"$tmp/stdin_err.lua"
STDIN_FILE="$tmp/stdin_err.lua" mb run -
check_rc 1
check_err_first '^moonbox: input:2: from stdin$'

start missing_file
mb run "$tmp/nope.lua"
check_rc 2
check_err_first "^moonbox: cannot open '$tmp/nope.lua': "
check_empty out

start directory_as_script
mb run "$tmp"
check_rc 2
check_err_first "^moonbox: cannot (open|read) "

# ------------------------------------------------------------------------------------------
# Help, version, usage errors

for args in "--help" "help" "-h"; do
  start "help ($args)"
  # shellcheck disable=SC2086  # word splitting is the point
  mb $args
  check_rc 0
  check_out_has '^Usage: moonbox COMMAND'
  check_out_has '^  fuzz FILE'
  check_out_has '^moonbox COMMAND --help lists'
  check_empty err
done
# Each command's help is its own: its usage and the options it takes.
for args in "run --help" "run --help x.lua" "help run" "resume --help" "check -h" "mcp --help" \
  "doctor --help"; do
  start "help ($args)"
  # shellcheck disable=SC2086
  mb $args
  check_rc 0
  whose=${args%% *}
  [ "$whose" = help ] && whose=${args#help }
  check_out_has "^Usage: moonbox $whose"
  check_empty err
done
start "help (mcp lists only the policy options)"
mb mcp --help
check_out_has '^  --isolate process[|]none'
if grep -Eq -- '^  (--input|-e) ' "$tmp/out"; then fail "mcp --help lists a run-only option"; fi

for args in "--version" "run --version"; do
  start "version ($args)"
  # shellcheck disable=SC2086
  mb $args
  check_rc 0
  check_out $'moonbox 0.1.0 (Lua 5.4)\n'
done

start unknown_flag
mb run --foo -e 'return 1'
check_rc 2
check_err $'moonbox: unknown option \'--foo\' (see moonbox run --help)\n'
check_empty out

start bad_size
mb run --memory 12Q -e 'return 1'
check_rc 2
check_err $'moonbox: --memory: \'12Q\' is not a size (use a number with an optional k, M, G or T suffix, e.g. 64M)\n'

start size_overflow
mb run --memory 99999999999999999999G -e 'return 1'
check_rc 2
check_err_first "^moonbox: --memory: '99999999999999999999G' is too large"

start duration_without_unit
mb run --timeout 5 -e 'return 1'
check_rc 2
check_err $'moonbox: --timeout: \'5\' has no unit (write e.g. 5ms or 5s; 0 means no limit)\n'

start missing_value
mb run -e 'return 1' --memory
check_rc 2
check_err $'moonbox: --memory needs a value (e.g. --memory 64M)\n'

start json_flag_with_value
mb run --json=yes -e 'return 1'
check_rc 2
check_err_first "^moonbox: --json takes no value"

start no_script
mb run --json
check_rc 2
check_err_first '^moonbox: no script given'
check_empty out

start no_command
mb
check_rc 2
check_err_first '^moonbox: no command given'

start unknown_command
mb walk
check_rc 2
check_err_first "^moonbox: unknown command 'walk'"

start two_scripts
mb run -e 'return 1' "$tmp/ok.lua"
check_rc 2
check_err_first '^moonbox: two scripts given'
# After FILE, -e is the script's argument, as for lua(1).
mb run "$tmp/ok.lua" -e 'return 1'
check_rc 0
check_out $'21\n'

# ------------------------------------------------------------------------------------------
# --json prints exactly one parseable line whatever happened.

for code in 'return 1' 'print("a\nb") return {k = "v"}' 'error("x\ny")' 'return +' \
  'return "\0\1\255"' 'return 1/0, -1/0, 0/0'; do
  start "json_one_line ($code)"
  mb run --json -e "$code"
  check_json '"status" in d and "usage" in d'
done

# ------------------------------------------------------------------------------------------
# --seed, --time, --env and os.exit.

start seed_reproducible
mb run --seed 42 -e 'return math.random(1000000), math.random(1000000)'
check_rc 0
cp "$tmp/out" "$tmp/seed1"
mb run --seed 42 -e 'return math.random(1000000), math.random(1000000)'
if ! cmp -s "$tmp/out" "$tmp/seed1"; then fail "two runs with --seed 42 differ"; fi
mb run --seed 42 -e 'local a, b = math.random(1000000), math.random(1000000) math.randomseed(42) return a == math.random(1000000) and b == math.random(1000000)'
check_out $'true\n'

start seed_bad
mb run --seed x -e 'return 1'
check_rc 2
check_err_first "^moonbox: --seed: 'x' is not a seed"

start time_fixed
mb run --time 1700000000 -e 'return os.time(), os.date("%Y-%m-%dT%H:%M:%S"), os.date("!%H")'
check_rc 0
check_out $'[1700000000,"2023-11-14T22:13:20","22"]\n'

start time_bad
mb run --time 1.5 -e 'return 1'
check_rc 2
check_err_first "^moonbox: --time: '1.5' is not a time"
mb run --time 999999999999999 -e 'return 1'
check_rc 2
check_err_first '^moonbox: --time: .*years 1 to 9999'

start env_virtual
HOME=/host/home mb run --env API_URL=https://x/y?a=b --env EMPTY= -e 'return os.getenv("API_URL"), os.getenv("EMPTY"), os.getenv("HOME"), os.getenv("PATH")'
check_rc 0
check_out $'["https://x/y?a=b","",null,null]\n'

start env_bad
mb run --env 'BAD NAME=1' -e 'return 1'
check_rc 2
check_err_first '^moonbox: --env: .*not allowed'
mb run --env NOVALUE -e 'return 1'
check_rc 2
check_err_first "^moonbox: --env: 'NOVALUE' is not NAME=VALUE"

start os_exit_ok
mb run -e 'print("out") pcall(os.exit) print("never")'
check_rc 0
check_out $'out\n'
check_err ''

start os_exit_code
mb run -e 'io.write("partial") pcall(os.exit, 7)'
check_rc 7
check_out 'partial'
check_err ''
mb run -e 'os.exit(false)'
check_rc 1
mb run -e 'os.exit(256)'
check_rc 1

start os_exit_json
mb run --json -e 'os.exit(5)'
check_rc 5
check_json 'd["status"] == "runtime_error" and d["error"]["message"] == "os.exit(5)"'
mb run --json -e 'os.exit(true)'
check_rc 0
check_json 'd["status"] == "ok" and d["value"] is None and d["error"] is None'

start deterministic_two_processes
# String keys whose hash order differs per process, tables and a function as keys, tostring
# of tables, math.random, os.time, os.date and os.clock: two processes agree on everything
# but the usage figures.
cat >"$tmp/det.lua" <<'LUA'
local t = {}
for i = 1, 50 do t["k" .. (i * 7 % 53)] = i end
local objs = {}
for i = 1, 10 do objs[i] = {id = i}; t[objs[i]] = i end
t[function() end] = "f"
local out = {}
for k, v in pairs(t) do
  out[#out + 1] = (type(k) == "table" and ("#" .. k.id .. "=" .. tostring(k))) or tostring(k)
end
print(table.concat(out, " "))
io.stderr:write(tostring(objs[3]), " ", tostring({}), "\n")
local k, n = next(t), 0
while k ~= nil do n = n + 1; k = next(t, k) end
print(n, math.random(1000000), os.time(), os.date("%c"), os.clock())
return out[1], out[#out], os.clock()
LUA
mb run --json --deterministic --instructions 1e9 --seed 1 --time 0 "$tmp/det.lua"
check_rc 0
check_json 'd["status"] == "ok" and d["value"][0] == "k1" and "table: 0x0000000000" in d["stdout"]'
sed -E 's/"usage":\{[^}]*\}/"usage":{}/' "$tmp/out" >"$tmp/det1"
mb run --json --deterministic --instructions 1e9 --seed 1 --time 0 "$tmp/det.lua"
check_rc 0
sed -E 's/"usage":\{[^}]*\}/"usage":{}/' "$tmp/out" >"$tmp/det2"
if ! cmp -s "$tmp/det1" "$tmp/det2"; then
  fail "two --deterministic runs differ: [$(show "$tmp/det1")] vs [$(show "$tmp/det2")]"
fi
mb run --json --seed 1 --time 0 "$tmp/det.lua"
check_json '"table: 0x0000000000" not in d["stdout"]'

# ------------------------------------------------------------------------------------------
# Pauses, snapshots and resume: each step is its own moonbox process.

cat >"$tmp/chain.lua" <<'LUA'
local seen = {}
for k, v in pairs({b = 2, a = 1, c = 3, [1] = "x"}) do seen[#seen + 1] = tostring(k) .. "=" .. tostring(v) end
print("start", table.concat(seen, ","))
local r1 = tools.fetch("first", 1)
local ok, err = pcall(tools.ask, {q = "second", n = r1.n})
print("end", r1.n, ok, err)
return r1.n + #err, table.concat(seen, ",")
LUA
PAUSE_FLAGS=(--pause-on tools.fetch --pause-on tools.ask --seed 3 --time 0 --timeout 2s --instructions 1e9)

start pause_snapshot_resume_chain
rm -f "$tmp/s1.bin" "$tmp/s2.bin"
mb run "${PAUSE_FLAGS[@]}" --snapshot-out "$tmp/s1.bin" "$tmp/chain.lua"
check_rc 4
check_out $'start\t1=x,a=1,b=2,c=3\n'
check_err $'moonbox: paused at tools.fetch("first",1)\n'
[ -s "$tmp/s1.bin" ] || fail "no snapshot written"
[ -e "$tmp/s1.bin.tmp" ] && fail "the temporary snapshot file was left behind"
# A snapshot holds the bytes of what the guest read (issue 25, 8): owner-only, whatever the
# umask, and also when it replaces an older, wider file.
[ "$(stat -c %a "$tmp/s1.bin")" = 600 ] || fail "the snapshot is mode $(stat -c %a "$tmp/s1.bin"), not 600"
rm -f "$tmp/wide.bin"
: >"$tmp/wide.bin.tmp"
chmod 666 "$tmp/wide.bin.tmp"
(umask 0 && mb run "${PAUSE_FLAGS[@]}" --snapshot-out "$tmp/wide.bin" "$tmp/chain.lua")
[ "$(stat -c %a "$tmp/wide.bin")" = 600 ] || fail "under umask 0 over a 0666 leftover the snapshot is mode $(stat -c %a "$tmp/wide.bin")"
# The options may come in another order (--pause-on included): the policy is the same.
mb resume "$tmp/s1.bin" --value '{"n": 40}' --pause-on tools.ask --timeout 2s --time 0 \
  --seed 3 --instructions 1e9 --pause-on tools.fetch --snapshot-out "$tmp/s2.bin"
check_rc 4
check_out ''
check_err $'moonbox: paused at tools.ask({"n":40,"q":"second"})\n'
mb resume "$tmp/s2.bin" --value '"ok"' "${PAUSE_FLAGS[@]}"
check_rc 0
check_out $'end\t40\ttrue\tok\n[42,"1=x,a=1,b=2,c=3"]\n'
check_err ''
# The same snapshot answers again, any number of times, in new processes.
mb resume "$tmp/s2.bin" --value '"four"' "${PAUSE_FLAGS[@]}" --json
check_rc 0
check_json 'd["status"] == "ok" and d["value"] == [44, "1=x,a=1,b=2,c=3"] and d["usage"]["host_calls"] == 2'

start pause_snapshot_resume_json
mb run "${PAUSE_FLAGS[@]}" --json --snapshot-out "$tmp/j1.bin" "$tmp/chain.lua"
check_rc 4
check_json 'd["status"] == "paused" and d["pending"] == {"function": "tools.fetch", "args": ["first", 1]} and d["stdout"] == "start\t1=x,a=1,b=2,c=3\n" and d["value"] is None'
check_err ''
mb resume "$tmp/j1.bin" --json --value '{"n": 1}' "${PAUSE_FLAGS[@]}" --snapshot-out "$tmp/j2.bin"
check_rc 4
check_json 'd["status"] == "paused" and d["pending"] == {"function": "tools.ask", "args": [{"n": 1, "q": "second"}]}'
# A snapshot of the same state is the same bytes, whichever process wrote it.
mb run "${PAUSE_FLAGS[@]}" --snapshot-out "$tmp/j1b.bin" "$tmp/chain.lua"
cmp -s "$tmp/j1.bin" "$tmp/j1b.bin" || fail "two runs wrote different snapshots of one state"

start resume_error_path
mb resume "$tmp/s2.bin" --error 'no such page' "${PAUSE_FLAGS[@]}"
check_rc 0
check_out $'end\t40\tfalse\tno such page\n[52,"1=x,a=1,b=2,c=3"]\n'
# Uncaught, the host's error ends the run as a script error.
mb resume "$tmp/s1.bin" --error 'fetch failed' "${PAUSE_FLAGS[@]}"
check_rc 1
check_err_first '^moonbox: .*chain\.lua:4: fetch failed$'

start snapshot_with_mounts_replays_host_reads
# A paused run that read a ro mount and edited an overlay resumes from its snapshot after the
# host file changed: the replay answers the reads from the snapshot (issue 11).
mkdir -p "$tmp/snap_ro" "$tmp/snap_ov"
printf 'alpha\n' >"$tmp/snap_ro/a.txt"
printf 'notes' >"$tmp/snap_ov/n.txt"
cat >"$tmp/mnt.lua" <<'LUA'
local a = io.open("/data/a.txt"):read("a")
local f = io.open("/scratch/n.txt", "a") f:write("+edit") f:close()
local r = tools.fetch(a)
return a .. r .. io.open("/scratch/n.txt"):read("a")
LUA
MOUNT_FLAGS=(--mount "$tmp/snap_ro:/data:ro" --mount "$tmp/snap_ov:/scratch:overlay")
mb run "${PAUSE_FLAGS[@]}" "${MOUNT_FLAGS[@]}" --snapshot-out "$tmp/m1.bin" "$tmp/mnt.lua"
check_rc 4
check_err $'moonbox: paused at tools.fetch("alpha\\n")\n'
printf 'CHANGED\n' >"$tmp/snap_ro/a.txt"
printf 'other' >"$tmp/snap_ov/n.txt"
mb resume "$tmp/m1.bin" --value '"|"' "${PAUSE_FLAGS[@]}" "${MOUNT_FLAGS[@]}"
check_rc 0
check_out '"alpha\n|notes+edit"'$'\n'
# Under other mounts the snapshot is refused, naming the mount.
mb resume "$tmp/m1.bin" --value '"|"' "${PAUSE_FLAGS[@]}" --mount "$tmp/snap_ro:/data:overlay" \
  --mount "$tmp/snap_ov:/scratch:overlay"
check_rc 2
check_err_has 'the mount /data was ro in the snapshot; this policy mounts it overlay'

start exec_uids_option
# exec.uids (issue 25, 2): a range FIRST-LAST, checked by the CLI for its shape and by the
# library for where it lies; every command with a runtime takes it, mcp included.
mb run --exec-uids 9-x -e 'return 1'
check_rc 2
check_err_has "--exec-uids: '9-x' is not a range FIRST-LAST"
mb run --exec-uids 7-5 -e 'return 1'
check_rc 2
mb doctor --exec-uids 65000-66000
check_rc 1
check_err_has 'holds 65534 .nobody.'
mb mcp --exec-uids 100-200
check_rc 70
check_err_has 'reaches below 1000'
mb run --exec-uids 1879200000-1879200009 -e 'return 1'
check_rc 0

start pause_without_snapshot
mb run --pause-on tools.fetch -e 'print("a") return tools.fetch()'
check_rc 4
check_out $'a\n'
check_err $'moonbox: paused at tools.fetch()\n'
# --snapshot-out is written only when the run pauses.
rm -f "$tmp/none.bin"
mb run --instructions 1e9 --snapshot-out "$tmp/none.bin" -e 'return 1'
check_rc 0
check_out $'1\n'
[ -e "$tmp/none.bin" ] && fail "a snapshot was written for a run that did not pause"
# A pause-on name the library refuses is a usage error.
mb run --pause-on string.fetch -e 'return 1'
check_rc 2
check_err_first '^moonbox: --pause-on: '

start resume_policy_mismatch
for flags in "--memory 32M" "--seed 4" "--time 1" "--env A=1" "--timeout 3s" "--pause-on tools.other"; do
  # shellcheck disable=SC2086 # one flag and its value
  mb resume "$tmp/s1.bin" --value 1 "${PAUSE_FLAGS[@]}" $flags
  check_rc 2
  check_err_first "^moonbox: .*s1\.bin: the snapshot was made under other policy options; resume needs the same --memory, .*--pause-on as the run that wrote it"
  check_out ''
done
mb resume "$tmp/s1.bin" --value 1 --seed 3 --time 0 --timeout 2s --instructions 1e9 --pause-on tools.fetch
check_rc 2
check_err_has 'other policy options'

start resume_bad_snapshot
size=$(wc -c <"$tmp/s1.bin")
# One byte flipped in the middle, the end cut off, garbage, empty, missing, a directory.
python3 - "$tmp/s1.bin" "$tmp/flip.bin" <<'PY'
import sys
b = bytearray(open(sys.argv[1], 'rb').read())
b[len(b) // 2] ^= 0x40
open(sys.argv[2], 'wb').write(bytes(b))
PY
head -c $((size - 7)) "$tmp/s1.bin" >"$tmp/cut.bin"
printf 'not a snapshot at all' >"$tmp/junk.bin"
: >"$tmp/empty.bin"
for f in flip cut junk; do
  mb resume "$tmp/$f.bin" --value 1 "${PAUSE_FLAGS[@]}"
  check_rc 2
  check_err_first "^moonbox: .*$f\.bin: not a usable snapshot: "
  check_out ''
done
mb resume "$tmp/empty.bin" --value 1 "${PAUSE_FLAGS[@]}"
check_rc 2
check_err_first 'the snapshot file is empty'
mb resume "$tmp/missing.bin" --value 1 "${PAUSE_FLAGS[@]}"
check_rc 2
check_err_first "^moonbox: cannot open '.*missing\.bin'"
mb resume "$tmp" --value 1 "${PAUSE_FLAGS[@]}"
check_rc 2
# From stdin.
STDIN_FILE="$tmp/s2.bin" mb resume - --value '"ok"' "${PAUSE_FLAGS[@]}"
check_rc 0
check_out $'end\t40\ttrue\tok\n[42,"1=x,a=1,b=2,c=3"]\n'

start resume_bad_value
mb resume "$tmp/s1.bin" --value '{"n":' "${PAUSE_FLAGS[@]}"
check_rc 2
check_err_first '^moonbox: --value: .*not valid JSON'
mb resume "$tmp/s1.bin" "${PAUSE_FLAGS[@]}"
check_rc 2
check_err_first '^moonbox: no answer given'
mb resume "$tmp/s1.bin" --value 1 -e 'return 1'
check_rc 2
check_err_first '^moonbox: -e is an option of moonbox run'

start snapshot_out_unwritable
mb run --instructions 1e9 --pause-on tools.fetch --snapshot-out "$tmp/no/such/dir/s.bin" -e 'return tools.fetch()'
check_rc 2
check_err_has "^moonbox: --snapshot-out: cannot create '.*s\.bin\.tmp'"

# ------------------------------------------------------------------------------------------
# Files (docs/cli.md, docs/policy.md): a temporary host tree, checked byte for byte after
# each run, so a ro mount is seen to stay untouched and rw to change exactly what was written.

tree=$tmp/tree
mkdir -p "$tree/data/sub" "$tree/work" "$tree/outside"
printf 'alpha\nbeta\n' >"$tree/data/x.txt"
printf 'secret\n' >"$tree/outside/secret"
ln -s ../outside/secret "$tree/data/link"
printf 'keep\n' >"$tree/work/keep.txt"
snapshot_tree() { (cd "$tree" && find . -printf '%p %y %s\n' | LC_ALL=C sort && find . -type f \
  -exec sha256sum {} + | LC_ALL=C sort); }
snapshot_tree >"$tmp/tree.before"

start mount_lines_just_work
cd "$tree" && mb run --mount ./data:/data -e 'for l in io.lines("/data/x.txt") do print(l) end'
cd - >/dev/null
check_rc 0
check_out $'alpha\nbeta\n'
check_empty err

start mount_ro_refuses_writes_and_escapes
cd "$tree" && mb run --mount ./data:/data -e '
  local r = {}
  r[1] = select(2, io.open("/data/x.txt", "w"))
  r[2] = select(2, io.open("/data/new.txt", "w"))
  r[3] = select(2, os.remove("/data/x.txt"))
  r[4] = select(2, io.open("/data/link"))
  r[5] = select(2, io.open("/data/../outside/secret"))
  r[6] = select(2, io.open("/etc/passwd"))
  print(table.concat(r, "\n"))'
cd - >/dev/null
check_rc 0
check_out "/data/x.txt: Read-only file system (/data is mounted read-only)
/data/new.txt: Read-only file system (/data is mounted read-only)
/data/x.txt: Read-only file system (/data is mounted read-only)
/data/link: Permission denied (the path leads outside its mount)
/data/../outside/secret: No such file or directory (not in the sandbox view; mounts: /data ro, /tmp)
/etc/passwd: No such file or directory (not in the sandbox view; mounts: /data ro, /tmp)
"
snapshot_tree >"$tmp/tree.after"
cmp -s "$tmp/tree.before" "$tmp/tree.after" || fail "the ro run changed the host tree"

start mount_rw_changes_exactly_what_was_written
cd "$tree" && mb run --mount ./data:/data --mount "$tree/work:/work:rw" -e '
  local f = assert(io.open("/work/report.txt", "w"))
  for l in io.lines("/data/x.txt") do f:write(l:upper(), "\n") end
  f:close()
  assert(os.rename("/work/keep.txt", "/work/kept.txt"))
  local t = io.open(os.tmpname(), "w") t:write("scratch") t:close()
  print(#fs.list("/tmp"))'
cd - >/dev/null
check_rc 0
check_out $'1\n'
printf 'ALPHA\nBETA\n' | cmp -s - "$tree/work/report.txt" || fail "report.txt is not what was written"
printf 'keep\n' | cmp -s - "$tree/work/kept.txt" || fail "the rename did not reach the host"
[ -e "$tree/work/keep.txt" ] && fail "keep.txt is still there after the rename"
[ -e "$tree/tmp" ] && fail "the memory /tmp reached the host"
# Undo exactly those two changes: the tree must then be what it was.
mv "$tree/work/kept.txt" "$tree/work/keep.txt" && rm -f "$tree/work/report.txt"
snapshot_tree >"$tmp/tree.after"
cmp -s "$tmp/tree.before" "$tmp/tree.after" || fail "the rw run changed more than it wrote"

start file_and_policy
printf 'id,total\n1,5\n' >"$tmp/orders.csv"
cat >"$tmp/policy.json" <<JSON
{"limits": {"memory": "16M"},
 "fs": {"mounts": [{"path": "/data", "host": "tree/data", "mode": "ro"}],
        "files": [{"path": "/input/note.txt", "text": "inline"}]},
 "env": {"LANG": "C.UTF-8"}}
JSON
mb run --policy "$tmp/policy.json" --file "/input/orders.csv=$tmp/orders.csv" -e '
  print(io.open("/input/orders.csv"):read("a") .. io.open("/input/note.txt"):read("a"))
  print(io.open("/data/x.txt"):read("l"), os.getenv("LANG"))'
check_rc 0
check_out $'id,total\n1,5\ninline\nalpha\tC.UTF-8\n'

start policy_bad_key_exit_2
printf '{"fs": {"mounts": [{"path": "/w", "host": "tree/work", "mode": "wr"}]}}' >"$tmp/bad.json"
mb run --policy "$tmp/bad.json" -e 'return 1'
check_rc 2
check_err_first '^moonbox: --policy .*bad.json: fs.mounts\[0\].mode: expected "ro", "rw" or "overlay", got "wr"$'

start mount_bad_values_exit_2
mb run --mount nocolon -e 'return 1'
check_rc 2
check_err_first "^moonbox: --mount: 'nocolon' is not HOSTDIR:/PATH"
mb run --mount "$tmp/none:/data" -e 'return 1'
check_rc 2
check_err_has 'No such file or directory'
mb run --mount "$tree/data:/tmp/x" -e 'return 1'
check_rc 2
check_err_has 'inside the sandbox.s memory /tmp'

snapshot_tree >"$tmp/tree.after"
cmp -s "$tmp/tree.before" "$tmp/tree.after" || fail "the host tree differs at the end"

start isolate_process
# --isolate process: the same result from a jailed worker (found next to the binary); the
# mount is still served by this process.
mb run --json --isolate process --mount "$tree/data:/data" \
  -e 'print("hi") return io.open("/data/x.txt"):read("l"), 1 + 1'
check_rc 0
check_json 'd["status"] == "ok" and d["value"] == ["alpha", 2] and d["stdout"] == "hi\n"'
mb run --isolate process -e 'error("boom")'
check_rc 1
check_err_has 'boom'
mb run --isolate none -e 'return 3'
check_rc 0
check_out $'3\n'
mb run --isolate bogus -e 'return 1'
check_rc 2
check_err_first "^moonbox: --isolate: 'bogus' is not process or none"

# ------------------------------------------------------------------------------------------
# Script arguments and modules (issue 26, 1 and 2)

mkdir -p "$tmp/proj/mylib" "$tmp/lib/util"
cat >"$tmp/proj/main.lua" <<'LUA'
local parser, where = require("mylib.parser")
print(arg[0], #arg, select("#", ...), arg[-1], ...)
print(parser.parse("abc"), where)
print(io.open("main.lua") == nil, io.open("/mylib/parser.lua") == nil, fs.exists("/mylib"))
print(dofile("mylib/parser.lua").parse("xy"), loadfile("main.lua") ~= nil)
LUA
printf 'return {parse = function(s) return #s end}\n' >"$tmp/proj/mylib/parser.lua"

start script_arguments_and_modules_beside_the_script
mb run "$tmp/proj/main.lua" a "b c" --json
check_rc 0
check_out $'main.lua\t3\t3\tnil\ta\tb c\t--json\n3\t./mylib/parser.lua\ntrue\ttrue\tfalse\n2\ttrue\n'
if grep -q "$tmp" "$tmp/out"; then fail "a host path reached the script"; fi

start script_modules_from_another_directory
(cd / && timeout 10 "$MBX" run "$tmp/proj/main.lua" </dev/null >"$tmp/out" 2>"$tmp/err")
rc=$?
check_rc 0
check_out_has '^3	./mylib/parser.lua$'

start no_script_modules
mb run --no-script-modules "$tmp/proj/main.lua"
check_rc 1
check_err_has "module 'mylib.parser' not found:"
check_err_has "no file './mylib/parser.lua'"

start stdin_script_arguments
printf 'return arg[0], ...' >"$tmp/args.lua"
STDIN_FILE="$tmp/args.lua" mb run --json - x y
check_rc 0
check_json 'd["value"] == ["-", "x", "y"]'

start inputs_and_arguments_together
mb run --input '{"k": 5}' --json "$tmp/args.lua" z
check_rc 0
check_json 'd["value"] == ["args.lua", "z"]'

start mount_a_library_folder
printf 'local M = {} function M.twice(x) return 2 * x end return M\n' >"$tmp/lib/util/init.lua"
printf 'package.path = "/lib/?.lua;/lib/?/init.lua;" .. package.path\nreturn require("util").twice(21), select(2, require("util"))' >"$tmp/uselib.lua"
mb run --json --mount "$tmp/lib:/lib" "$tmp/uselib.lua"
check_rc 0
check_json 'd["value"] == 42'

start registered_module_flag
printf 'return {v = "registered"}\n' >"$tmp/reg.lua"
mb run --module json="$tmp/reg.lua" -e 'return require("json").v, json.encode({})'
check_rc 0
check_out $'["registered","{}"]\n'
mb run --module json -e 'return 1'
check_rc 2
check_err_first "^moonbox: --module: 'json' is not NAME=FILE"

start snapshot_runs_do_not_see_the_script_folder
mb run --instructions 1e9 --snapshot-out "$tmp/mod.bin" --pause-on tools.fetch "$tmp/proj/main.lua"
check_rc 1
check_err_has "module 'mylib.parser' not found:"

# A real pure-Lua library (Debian's lua-argparse, tools/dev installs it) loaded the natural way:
# its install folder mounted read-only (the 5.4 file is a symlink into ../5.1, inside the mount),
# compared with stock lua5.4 on the same calls.
start real_library_from_its_install_folder
if [ -f /usr/share/lua/5.4/argparse.lua ] && command -v lua5.4 >/dev/null; then
  cat >"$tmp/argp_body.lua" <<'LUA'
local argparse = require("argparse")
local p = argparse("prog", "A test program.")
p:argument("input", "Input file.")
p:option("-o --output", "Output file.", "a.out")
p:flag("-v --verbose")
local args = p:parse({"in.txt", "-o", "x.bin", "-v"})
print(args.input, args.output, args.verbose)
print(p:get_help())
print(p:pparse({"--nope"}))
LUA
  { printf 'package.path = "/lua/5.4/?.lua;/lua/5.4/?/init.lua;" .. package.path\n'
    cat "$tmp/argp_body.lua"; } >"$tmp/argp.lua"
  mb run --mount /usr/share/lua:/lua "$tmp/argp.lua"
  check_rc 0
  lua5.4 "$tmp/argp_body.lua" >"$tmp/argp_stock.out" 2>&1
  if ! cmp -s "$tmp/out" "$tmp/argp_stock.out"; then
    fail "argparse differs from stock lua5.4: [$(show "$tmp/out")] vs [$(show "$tmp/argp_stock.out")]"
  fi
else
  printf 'SKIP %s: lua-argparse or lua5.4 is not installed (tools/dev installs both)\n' "$case_name"
fi

start help_explains_script_modules
mb run --help
check_out_has 'no-script-modules'

# ------------------------------------------------------------------------------------------

if [ "$failures" -ne 0 ]; then
  printf '%d checks failed (%d cases run)\n' "$failures" "$cases"
  exit 1
fi
printf 'all %d cases passed\n' "$cases"
