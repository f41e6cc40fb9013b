#!/usr/bin/env bash
# tests/determinism/run_determinism.sh -- the determinism differential (issue 9, E.5): every
# script of the given corpora runs in several fresh processes of the CLI with a deterministic
# policy (--deterministic, a fixed seed and clock); the JSON results (status, value, error,
# output, usage) must be byte-identical, except wall time and usage.memory_peak: the peak
# moves by a few hundred bytes between processes because Lua rehashes a table when a
# colliding key finds no free node, and collisions follow the string-hash seed, which
# Debian's liblua draws from time and addresses with no way to fix it (docs/compat.md). Fresh processes differ in what
# deterministic mode has to hide: Lua's string-hash seed (time and addresses), the addresses
# of slots and objects, the runtime's random keys.
# Usage: run_determinism.sh MOONBOX_BINARY RUNS DIR...
set -u
if [ $# -lt 3 ]; then
  echo "usage: $0 MOONBOX_BINARY RUNS DIR..." >&2
  exit 2
fi
moonbox=$(realpath "$1")
runs=$2
shift 2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Limits that end every hostile loop by instructions (a count, the same in every process)
# long before the generous deadline: a run that still ends by the clock is skipped, since
# wall time is the one input deterministic mode cannot fix.
limits=(--memory 16M --instructions 1e6 --timeout 30s --output-limit 256k)
compared=0 skipped=0 failed=0
for dir in "$@"; do
  for script in "$dir"/*.lua; do
    name=$(basename "$script")
    # The agent corpus's stock-Lua driver is not a guest program.
    [ "$name" = stock_driver.lua ] && continue
    args=()
    input=$(sed -n 's/^-- input: //p' "$script" | head -1)
    [ -n "$input" ] && args+=(--input "$input")
    for ((i = 1; i <= runs; i++)); do
      (cd "$dir" && "$moonbox" run --json --deterministic --seed 7 --time 1700000000 \
        "${limits[@]}" "${args[@]}" "$name" </dev/null 2>/dev/null) |
        sed -e 's/"wall_us":[0-9]*/"wall_us":0/' -e 's/"memory_peak":[0-9]*/"memory_peak":0/' >"$tmp/run$i"
    done
    if grep -q '"status":"\(time_limit\|interrupted\)"' "$tmp/run1"; then
      skipped=$((skipped + 1))
      continue
    fi
    if [ ! -s "$tmp/run1" ]; then
      echo "FAIL: $name: no JSON result" >&2
      failed=$((failed + 1))
      continue
    fi
    compared=$((compared + 1))
    for ((i = 2; i <= runs; i++)); do
      if ! cmp -s "$tmp/run1" "$tmp/run$i"; then
        echo "FAIL: $name: run $i differs from run 1:" >&2
        diff <(tr ',' '\n' <"$tmp/run1") <(tr ',' '\n' <"$tmp/run$i") | head -10 >&2
        failed=$((failed + 1))
        break
      fi
    done
  done
done
# The host's side of the same walks: bad inputs are named the same in every process.
bad_inputs='{"zeta":1,"9lives":2,"8ball":3,"print":4,"a b":5,"pairs":6,"ok_name":7}'
for ((i = 1; i <= runs; i++)); do
  "$moonbox" run --deterministic --input "$bad_inputs" -e 'return 1' >/dev/null 2>"$tmp/input$i"
done
if ! grep -q "key '8ball'" "$tmp/input1"; then
  echo "FAIL: bad inputs: the least bad key is not the one named:" >&2
  cat "$tmp/input1" >&2
  failed=$((failed + 1))
fi
for ((i = 2; i <= runs; i++)); do
  if ! cmp -s "$tmp/input1" "$tmp/input$i"; then
    echo "FAIL: bad inputs: run $i names another key than run 1" >&2
    failed=$((failed + 1))
    break
  fi
done

echo "determinism: $compared scripts identical over $runs processes, $skipped ended by the clock (not compared), $failed differ"
[ $failed -eq 0 ] && [ $compared -gt 0 ]
