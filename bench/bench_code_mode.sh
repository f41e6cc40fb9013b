#!/usr/bin/env bash
# bench/bench_code_mode.sh MOONBOX [N] -- code mode against direct tool calls (bench_code_mode.mjs),
# with the node_modules tests/mcp pins (the SDK and server-memory), installed by npm ci into
# build/bench-code-mode the first time (npm's cache after that); then, in the same run, the same
# task in the code-mode peer @utcp/code-mode (bench/peers/codemode: isolated-vm, built from
# source by npm into a scratch folder the first time, which takes minutes; MBX_CODEMODE_PEER=0
# skips it).
set -euo pipefail
moonbox=$(realpath "$1") n=${2:-100}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$here/../build/bench-code-mode
mkdir -p "$work"
cp "$here/../tests/mcp/package.json" "$here/../tests/mcp/package-lock.json" "$here/bench_code_mode.mjs" "$work/"
cd "$work"
if ! cmp -s package-lock.json node_modules/.moonbox-lock 2>/dev/null; then
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.moonbox-lock
fi
node bench_code_mode.mjs "$moonbox" "$n" | tee "$work/moonbox.txt"
[ "${MBX_CODEMODE_PEER:-1}" = 0 ] && exit 0
peer=${MBX_CODEMODE_PEER_DIR:-${TMPDIR:-/tmp}/moonbox-codemode-peer}
mkdir -p "$peer"
if ! cmp -s "$here/peers/codemode/package-lock.json" "$peer/package-lock.json" ||
   [ ! -d "$peer/node_modules/@utcp/code-mode" ]; then
  cp "$here/peers/codemode/package.json" "$here/peers/codemode/package-lock.json" "$peer/"
  (cd "$peer" && npm install --no-audit --no-fund --loglevel=error >/dev/null) ||
    { echo "bench_code_mode.sh: the @utcp/code-mode peer did not install: moonbox's rows only" >&2; exit 0; }
fi
cp "$here/peers/codemode/utcp.mjs" "$peer/"
# utcp.mjs ends itself with SIGKILL (see there): its status is not the measure, its answer is.
(cd "$peer" && node utcp.mjs "$work/node_modules/@modelcontextprotocol/server-memory/dist/index.js" "$n" || true) 2>/dev/null |
  grep -E '^(\||answer )' >"$work/peer.txt"
mine=$(sed -n 's/.*summary \({[^}]*}\).*/\1/p' "$work/moonbox.txt")
theirs=$(sed -n 's/^answer //p' "$work/peer.txt")
[ "$mine" = "$theirs" ] || { echo "bench_code_mode.sh: different answers: $mine vs $theirs" >&2; exit 1; }
echo
echo "the code-mode peer, same run: @utcp/code-mode $(node -e 'console.log(require(process.argv[1]).version)' \
  "$peer/node_modules/@utcp/code-mode/package.json") on isolated-vm, node $(node --version)"
echo
echo '| way | round trips | bytes returned to the client | wall ms, round 1 | round 2 |'
echo '|---|---|---|---|---|'
grep -m1 'callToolChain (isolated-vm' "$work/peer.txt"
echo
echo '| one search_nodes call | µs per call |'
echo '|---|---|'
grep -E 'inside|no tool call' "$work/peer.txt"
