#!/usr/bin/env bash
# bench/bench_code_mode.sh MOONBOX [N] -- code mode against direct tool calls (bench_code_mode.mjs),
# with the node_modules tests/mcp pins (the SDK and server-memory), installed by npm ci into
# build/bench-code-mode the first time (npm's cache after that).
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
exec node bench_code_mode.mjs "$moonbox" "$n"
