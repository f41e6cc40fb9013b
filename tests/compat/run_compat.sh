#!/usr/bin/env bash
# tests/compat/run_compat.sh -- runs one Lua program in moonbox and in stock lua5.4 and
# fails unless both exit cleanly with byte-identical stdout.
# Usage: run_compat.sh MOONBOX_BINARY FILE.lua
set -u
if [ $# -ne 2 ]; then
  echo "usage: $0 MOONBOX_BINARY FILE.lua" >&2
  exit 2
fi
# Absolute paths: both interpreters run from the script's directory (below).
moonbox=$(realpath "$1")
script=$(realpath "$2")
# Without the reference interpreter there is nothing to compare against: fail loudly rather
# than pass silently (ctest would otherwise report a green test that checked nothing).
if ! command -v lua5.4 >/dev/null 2>&1; then
  echo "FAIL: lua5.4 not found (apt-get install lua5.4)" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The script runs from its own directory in both, so chunk names in error messages agree.
dir=$(dirname "$script")
base=$(basename "$script")
(cd "$dir" && lua5.4 "$base") >"$tmp/stock.out" 2>"$tmp/stock.err"
stock_rc=$?
(cd "$dir" && "$moonbox" run "$base") >"$tmp/moonbox.out" 2>"$tmp/moonbox.err"
moonbox_rc=$?

status=0
if [ $stock_rc -ne 0 ]; then
  echo "FAIL: lua5.4 exited with $stock_rc:" >&2
  cat "$tmp/stock.err" >&2
  status=1
fi
if [ $moonbox_rc -ne 0 ]; then
  echo "FAIL: moonbox exited with $moonbox_rc:" >&2
  cat "$tmp/moonbox.err" >&2
  status=1
fi
if ! cmp -s "$tmp/stock.out" "$tmp/moonbox.out"; then
  echo "FAIL: stdout differs (< lua5.4, > moonbox):" >&2
  diff "$tmp/stock.out" "$tmp/moonbox.out" | head -40 >&2
  status=1
fi
if [ $status -eq 0 ]; then
  echo "ok: $(wc -l <"$tmp/stock.out") lines identical ($base)"
fi
exit $status
