#!/usr/bin/env bash
# bench/peers.sh -- moonbox next to Pydantic Monty, side by side in one run: the same rows
# (a fresh interpreter's "1 + 1", a repeated "1 + 1", a sync host call, the 40-record agent
# snippet, an idle session's resident bytes, a snapshot after 100 host calls) through each
# one's own binding: moonbox's C API (bench_peers) and Monty's napi binding (bench/peers/
# monty.mjs on node). Monty is installed from npm into a scratch folder, never into the source
# tree, pinned by bench/peers/package-lock.json (`npm install`, not `npm ci`: npm 11 leaves the
# binding's per-platform packages out of the lock file, and `ci` then refuses it). Never a test:
# figures depend on the machine.
#
# Usage: bench/peers.sh BUILD_DIR [ITERS]   (BUILD_DIR: a release build with bench_peers)
#   MBX_PEERS_DIR  the scratch folder (default: ${TMPDIR:-/tmp}/moonbox-peers)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
build=${1:?usage: bench/peers.sh BUILD_DIR [ITERS]}
iters=${2:-20000}
scratch=${MBX_PEERS_DIR:-${TMPDIR:-/tmp}/moonbox-peers}

mkdir -p "$scratch"
if ! cmp -s "$here/peers/package-lock.json" "$scratch/package-lock.json" ||
   [ ! -d "$scratch/node_modules/@pydantic/monty" ]; then
  cp "$here/peers/package.json" "$here/peers/package-lock.json" "$scratch/"
  (cd "$scratch" && npm install --no-audit --no-fund --loglevel=error >/dev/null)
fi
cp "$here/peers/monty.mjs" "$here/peers/snippet.py" "$here/peers/records.json" "$scratch/"

mbx=$("$build/bench/bench_peers" "$here/peers" "$iters")
monty=$(node --expose-gc "$scratch/monty.mjs" "$iters")
digests=$(printf '%s\n%s\n' "$mbx" "$monty" | awk '$1 == "digest" { print $2 }' | sort -u | wc -l)
[ "$digests" = 1 ] || { echo "peers.sh: the snippets' digests differ: not the same work" >&2; exit 1; }

echo "moonbox vs Pydantic Monty $(node -e 'console.log(require(process.argv[1]).version)' \
  "$scratch/node_modules/@pydantic/monty/package.json"), one run, $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg)"
echo "moonbox: C API, default policy; Monty: its napi binding on node $(node --version)"
echo
printf '| %-58s | %12s | %12s | %8s |\n' row moonbox Monty "Monty/mbx"
printf '|%s|%s|%s|%s|\n' "$(printf -- '-%.0s' {1..60})" "-------------:" "-------------:" "---------:"
while read -r _ name value unit; do
  peer=$(printf '%s\n' "$monty" | awk -v n="$name" '$1 == "row" && $2 == n { print $3 }')
  case $name in
    fresh_1p1) label='fresh interpreter + `1 + 1` (new + run + free)' ;;
    live_1p1) label='`1 + 1` again (a live sandbox; Monty: code parsed once)' ;;
    host_call) label='a sync host call, add(i, 3), in a loop of 1,000' ;;
    snippet) label='the 40-record agent snippet, fresh state each run' ;;
    idle_session) label='an idle session, resident (1,000 live, after `x = 1`)' ;;
    snapshot_bytes) label='snapshot after 100 host calls: size' ;;
    snapshot_restore) label='... its restore' ;;
    *) label=$name ;;
  esac
  if [ -n "$peer" ]; then ratio=$(awk -v a="$peer" -v b="$value" 'BEGIN { printf "%.2fx", a / b }')
  else peer=n/a ratio=n/a; fi
  printf '| %-58s | %9s %-2s | %9s %-2s | %8s |\n' "$label" "$value" "$unit" "$peer" "$unit" "$ratio"
done < <(printf '%s\n' "$mbx" | awk '$1 == "row"')
repl=$(printf '%s\n' "$monty" | awk '$2 == "repl_feed_1p1" { print $3 }')
echo
echo "Monty's REPL feed of \`1 + 1\` (its live session): ${repl} us over its first 200 feeds; it grows with the session's history."
