#!/usr/bin/env bash
# bench/bench_upstream_http.sh MOONBOX [N] -- one upstream tool call over Streamable HTTP against
# the same server over stdio (bench_upstream_http.mjs), with the node_modules tests/mcp pins
# (the SDK and server-everything), installed by npm ci into build/bench-code-mode the first time
# (the folder bench_code_mode.sh uses; npm's cache after that). The HTTP server is
# tests/mcp/http_upstream.mjs, on 127.0.0.1 only.
set -euo pipefail
moonbox=$(realpath "$1") n=${2:-500}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$here/../build/bench-code-mode
mkdir -p "$work"
cp "$here/../tests/mcp/package.json" "$here/../tests/mcp/package-lock.json" \
  "$here/../tests/mcp/http_upstream.mjs" "$here/bench_upstream_http.mjs" "$work/"
cd "$work"
if ! cmp -s package-lock.json node_modules/.moonbox-lock 2>/dev/null; then
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.moonbox-lock
fi
node bench_upstream_http.mjs "$moonbox" "$n"
