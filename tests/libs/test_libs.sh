#!/usr/bin/env bash
# tests/libs/test_libs.sh -- real pure-Lua libraries, as Debian packages them, run under moonbox
# from a read-only mount of their install folder and compared with stock lua5.4 on the same
# calls (issue 26, "how it is checked"). Each tests/libs/<lib>.lua says in its header:
#   -- packages: the Debian packages it needs (tools/dev installs them)
#   -- luadir: the folder of /usr/share/lua it loads from (some packages ship 5.1-5.3 only)
#   -- moonbox-error: (optional) the library needs a C module: stock must run the script,
#      moonbox must stop at the require with this message on stderr
#   -- mount: (optional) HOSTDIR:/PATH, a folder of the package the script also reads (a test
#      suite the package ships): moonbox gets it mounted read-only at /PATH and /PATH as its
#      second argument, stock HOSTDIR
# The script gets that folder as its first argument and sets package.path from it. stdout must
# be byte-identical (one line per call) and both must exit 0, with moonbox in-process, in a
# jailed worker and in deterministic mode.
# Usage: test_libs.sh MOONBOX_BINARY
# Exit 77 (skip) when a package or lua5.4 is missing, unless MBX_LIBS_REQUIRED is set (tools/dev
# test sets it after installing them, so the CI fails instead of skipping).
set -u
if [ $# -ne 1 ]; then
  echo "usage: $0 MOONBOX_BINARY" >&2
  exit 2
fi
moonbox=$(realpath "$1")
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

missing=()
command -v lua5.4 >/dev/null 2>&1 || missing+=(lua5.4)
for script in "$here"/*.lua; do
  # shellcheck disable=SC2013 # one header line of space-separated names
  for p in $(sed -n 's/^-- packages: //p' "$script"); do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
done
for script in "$here"/*.lua; do
  extra=$(sed -n 's/^-- mount: //p' "$script")
  # Some images leave /usr/share/doc out of packages (dpkg path-exclude).
  if [ -n "$extra" ] && [ ! -d "${extra%%:*}" ]; then missing+=("${extra%%:*}"); fi
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ -n "${MBX_LIBS_REQUIRED:-}" ]; then
    echo "FAIL: not installed: ${missing[*]} (tools/dev installs them)" >&2
    exit 1
  fi
  echo "SKIP: not installed: ${missing[*]} (tools/dev installs them)"
  exit 77
fi

# The whole of /usr/share/lua is mounted, not /usr/share/lua/5.4: Debian's 5.2-5.4 folders hold
# symlinks into ../5.1, and a mount never follows a link out of itself (docs/cli.md, --mount).
status=0
total=0
for script in "$here"/*.lua; do
  base=$(basename "$script")
  luadir=$(sed -n 's/^-- luadir: //p' "$script")
  want_error=$(sed -n 's/^-- moonbox-error: //p' "$script")
  extra=$(sed -n 's/^-- mount: //p' "$script")
  stock_extra=() moonbox_mount=() moonbox_extra=()
  if [ -n "$extra" ]; then
    stock_extra=("${extra%%:*}")
    moonbox_mount=(--mount "$extra:ro")
    moonbox_extra=("${extra#*:}")
  fi
  # Both run from the script's folder, so chunk names in messages agree; stock in UTC, as
  # moonbox's os.date always is (docs/compat.md, "`os`": pl.Date reads the local time).
  (cd "$here" && TZ=UTC lua5.4 "$base" "/usr/share/lua/$luadir" "${stock_extra[@]}") >"$tmp/stock.out" 2>"$tmp/stock.err"
  stock_rc=$?
  calls=$(wc -l <"$tmp/stock.out")
  if [ $stock_rc -ne 0 ] || [ "$calls" -eq 0 ]; then
    echo "FAIL $base: lua5.4 exited with $stock_rc after $calls lines:" >&2
    head -20 "$tmp/stock.err" >&2
    status=1
    continue
  fi
  # In-process, in a jailed worker (the mount served from another process), and in
  # deterministic mode (canonical pairs order, object numbers): the same calls, the same bytes.
  for mode in "" "--isolate process" "--deterministic --instructions 1e10"; do
    what="$base${mode:+ ($mode)}"
    # shellcheck disable=SC2086
    (cd "$here" && "$moonbox" run $mode --mount /usr/share/lua:/lua:ro "${moonbox_mount[@]}" "$base" \
      "/lua/$luadir" "${moonbox_extra[@]}") \
      >"$tmp/moonbox.out" 2>"$tmp/moonbox.err"
    moonbox_rc=$?
    if [ -n "$want_error" ]; then
      if [ $moonbox_rc -eq 0 ] || ! grep -qF -- "$want_error" "$tmp/moonbox.err"; then
        echo "FAIL $what: moonbox (exit $moonbox_rc) did not stop with: $want_error" >&2
        head -20 "$tmp/moonbox.err" >&2
        status=1
      else
        echo "ok $what: stock ran $calls calls; moonbox stops at the require: $want_error"
      fi
      continue
    fi
    if [ $moonbox_rc -ne 0 ]; then
      echo "FAIL $what: moonbox exited with $moonbox_rc:" >&2
      head -20 "$tmp/moonbox.err" >&2
      status=1
    fi
    if ! cmp -s "$tmp/stock.out" "$tmp/moonbox.out"; then
      echo "FAIL $what: stdout differs (< lua5.4, > moonbox):" >&2
      diff "$tmp/stock.out" "$tmp/moonbox.out" | head -40 >&2
      status=1
    elif [ $moonbox_rc -eq 0 ]; then
      echo "ok $what: $calls calls identical"
      [ -z "$mode" ] && total=$((total + calls))
    fi
  done
done
[ $status -eq 0 ] && echo "ok: $total calls identical to lua5.4"
exit $status
