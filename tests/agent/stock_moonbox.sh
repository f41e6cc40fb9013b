#!/usr/bin/env bash
# tests/agent/stock_moonbox.sh -- stands in for `moonbox run --json [OPTIONS] FILE` by running
# the snippet in stock lua5.4 (stock_driver.lua), so that
#   MBX_AGENT_STOCK=1 tests/agent/run_agent.sh tests/agent/stock_moonbox.sh tests/agent
# checks every declared expectation against stock Lua. Not part of ctest. Snippets whose header
# says `-- stock: skip (reason)` test moonbox-only behaviour and are skipped in that mode.
set -u
driver="$(dirname "$(realpath "$0")")/stock_driver.lua"
shift 2 # run --json
args=()
while [ $# -gt 1 ]; do
  case "$1" in
    --input-file) args+=(--input "$(cat "$2")") ;;
    *) args+=("$1" "$2") ;;
  esac
  shift 2
done
TZ=UTC exec lua5.4 "$driver" "$1" "${args[@]}"
