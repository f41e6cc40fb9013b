#!/usr/bin/env bash
# tests/mcp/run.sh MOONBOX WORKDIR [TEST] -- the ctests mcp/sdk and mcp/code_mode: installs the
# pinned TypeScript SDK and upstream servers from package-lock.json into WORKDIR (the build
# tree, so parallel build presets never share a node_modules) and runs TEST (test_mcp.mjs by
# default; test_code_mode.mjs) against MOONBOX. `npm ci --prefer-offline` takes what
# npm's cache already has, so after the first install it needs no network.
set -euo pipefail
moonbox=$1 work=$2 script=${3:-test_mcp.mjs}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (tools/dev installs Debian's nodejs and npm)"
  exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here"/*.mjs "$work/"
cd "$work"
# Reinstall only when the lockfile changed: npm ci wipes node_modules every time otherwise.
if ! cmp -s package-lock.json node_modules/.moonbox-lock 2>/dev/null; then
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.moonbox-lock
fi
exec node "$script" "$moonbox"
