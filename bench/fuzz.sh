#!/usr/bin/env bash
# fuzz.sh -- executions per second of `moonbox fuzz` next to a raw lua_pcall libFuzzer harness
# (bench/fuzz_raw.c: a fresh lua_State per input, no sandbox, no guest coverage), same targets,
# same libFuzzer flags, in the same run.
#
# Usage: bash bench/fuzz.sh [BUILD_DIR]   (default build/release; cmake --preset release first)
# Each figure is the median of 3 runs of RUNS executions (-seed=1 -max_len=64, empty corpus),
# wall clock around the whole process (start-up and the target's top level included: both
# engines pay theirs once; the raw harness pays it per input). Prints a table and the ratios.
set -u
B=$(cd "${1:-build/release}" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
RUNS=${RUNS:-50000}
MBX=$B/moonbox
RAW=$B/bench/bench_fuzz_raw
for f in "$MBX" "$B/moonbox-fuzz" "$RAW"; do
  [ -x "$f" ] || { echo "fuzz.sh: $f is missing (build the release preset with libFuzzer)"; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Prints executions per second of one run: wall-clock ns around the process.
rate() {
  local t0 t1
  t0=$(date +%s%N)
  (cd "$tmp" && "$@" -runs="$RUNS" -seed=1 -max_len=64 -artifact_prefix="$tmp/" >"$tmp/log" 2>&1)
  local rc=$?
  t1=$(date +%s%N)
  if [ "$rc" -ne 0 ] || ! grep -q "Done $RUNS runs" "$tmp/log"; then
    echo "fuzz.sh: $* failed (rc $rc):" >&2
    tail -5 "$tmp/log" >&2
    exit 1
  fi
  echo $((RUNS * 1000000000 / (t1 - t0)))
}

median3() {
  printf '%s\n' "$@" | sort -n | sed -n 2p
}

printf '%-10s %16s %16s %16s %8s\n' target "moonbox fuzz" "(no coverage)" "raw lua_pcall" ratio
for target in trivial parser; do
  file=$HERE/fuzz/$target.lua
  m=() n=() r=()
  for i in 1 2 3; do
    m+=("$(rate "$MBX" fuzz "$file")")
    n+=("$(rate "$MBX" fuzz "$file" --no-coverage)")
    r+=("$(rate "$RAW" --target="$file")")
  done
  mm=$(median3 "${m[@]}") nn=$(median3 "${n[@]}") rr=$(median3 "${r[@]}")
  printf '%-10s %12s e/s %12s e/s %12s e/s %7s\n' "$target" "$mm" "$nn" "$rr" \
    "$(awk -v a="$mm" -v b="$rr" 'BEGIN { printf "x%.2f", a / b }')"
done
