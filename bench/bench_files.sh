#!/usr/bin/env bash
# bench/bench_files.sh -- the filesystem view's cost (issue 11): reading a 10 MB host file line
# by line through a ro mount and writing 10 MB to the memory /tmp, next to stock lua5.4 doing
# the same on the real filesystem, in the same run. Best of 5 wall times of whole processes
# (startup included, the same for both sides). Usage: bash bench/bench_files.sh build/release/moonbox
set -euo pipefail
MBX=${1:?usage: bench_files.sh PATH-TO-MOONBOX}
LUA=${LUA:-lua5.4}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# 10 MiB of 64-byte lines.
line=$(printf '%063d' 7)
(yes "$line" || true) | head -c $((10 << 20)) >"$dir/big.txt"
cat >"$dir/policy.json" <<JSON
{"fs": {"tmp": "16M", "quota": {"bytes": "32M"}}, "limits": {"memory": "64M", "time_ms": 60000}}
JSON
read_code='local n, b = 0, 0 for l in io.lines(P) do n = n + 1 b = b + #l end print(n, b)'
write_code='local f = assert(io.open(P, "w")) local s = string.rep("x", 63) .. "\n"
for i = 1, 163840 do f:write(s) end f:close() print(#io.open(P):read("a"))'
best() { # best <label> <command...>: best of 5 wall ms
  local label=$1 best_ms=
  shift
  for _ in 1 2 3 4 5; do
    local t0 t1 ms
    t0=$(date +%s%N)
    "$@" >"$dir/out" 2>&1 || { cat "$dir/out"; exit 1; }
    t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    if [ -z "$best_ms" ] || [ "$ms" -lt "$best_ms" ]; then best_ms=$ms; fi
  done
  printf '%-44s %6d ms   (%s)\n' "$label" "$best_ms" "$(head -c 60 "$dir/out" | tr '\n\t' '  ')"
}
echo "bench_files: 10 MiB, 163840 lines of 64 bytes"
best "moonbox: io.lines over a ro mount" "$MBX" run --policy "$dir/policy.json" \
  --mount "$dir:/d" -e "local P = '/d/big.txt' $read_code"
best "lua5.4:  io.lines on the real file" "$LUA" -e "local P = '$dir/big.txt' $read_code"
best "moonbox: write 10 MiB to the memory /tmp" "$MBX" run --policy "$dir/policy.json" \
  -e "local P = '/tmp/out.txt' $write_code"
best "lua5.4:  write 10 MiB to a real file" "$LUA" -e "local P = '$dir/out.txt' $write_code"
