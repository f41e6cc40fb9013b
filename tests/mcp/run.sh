#!/usr/bin/env bash
# tests/mcp/run.sh MOONBOX WORKDIR -- the ctest mcp/sdk: installs the pinned TypeScript SDK
# from package-lock.json into WORKDIR (the build tree, so parallel build presets never share a
# node_modules) and runs test_mcp.mjs against MOONBOX. `npm ci --prefer-offline` takes what
# npm's cache already has, so after the first install it needs no network.
set -euo pipefail
moonbox=$1 work=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "SKIP: node and npm are not installed (tools/dev installs Debian's nodejs and npm)"
  exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/test_mcp.mjs" "$work/"
cd "$work"
# Reinstall only when the lockfile changed: npm ci wipes node_modules every time otherwise.
if ! cmp -s package-lock.json node_modules/.moonbox-lock 2>/dev/null; then
  npm ci --prefer-offline --no-audit --no-fund --loglevel=error
  cp package-lock.json node_modules/.moonbox-lock
fi
exec node test_mcp.mjs "$moonbox"
