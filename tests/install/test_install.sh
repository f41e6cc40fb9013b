#!/usr/bin/env bash
# tests/install/test_install.sh -- moonbox as a user installs it: `cmake --install` into a
# prefix, a C program built against it with pkg-config and with CMake's find_package, the
# installed CLI (its helpers found under <libexecdir>/moonbox), the same tree moved elsewhere
# (both are relocatable), and the Debian package from CPack unpacked with dpkg -x (the machine
# is left as it was: nothing is installed system-wide).
# Usage: test_install.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?usage: test_install.sh SOURCE_DIR BUILD_DIR}
build=${2:?}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
expect() { # expect WHAT GOT WANT
  [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"
}

cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
prefix=$tmp/prefix
libdir=$(cd "$prefix" && dirname "$(find . -name libmoonbox.so -print -quit)")
[ -n "$libdir" ] || fail "no libmoonbox.so installed"
# Each helper is installed once, under libexec, and nowhere else.
for helper in moonbox-exec moonbox-worker; do
  found=$(cd "$prefix" && find . -name "$helper" | sort)
  expect "$helper installed once" "$found" "./libexec/moonbox/$helper"
done
[ -f "$prefix/share/doc/moonbox/LICENSE" ] || fail "LICENSE not installed"

cat >"$tmp/hello.c" <<'C'
#include <stdio.h>
#include <moonbox.h>
int main(void) {
  mbx_error err;
  mbx_runtime *rt = mbx_runtime_new(&err);
  mbx_policy *p = mbx_policy_new();
  mbx_sandbox *sb = rt && p ? mbx_sandbox_new(rt, p, &err) : NULL;
  mbx_result *r = NULL;
  if (!sb || mbx_run(sb, "return 6 * 7", 12, NULL, 0, &r, &err) >= MBX_API_ERROR_BASE) {
    fprintf(stderr, "%s\n", err.message);
    return 1;
  }
  printf("%s\n", mbx_result_value_json(r, NULL));
  mbx_result_free(r);
  mbx_sandbox_free(sb);
  mbx_policy_free(p);
  mbx_runtime_free(rt);
  return 0;
}
C

check_tree() { # check_tree PREFIX: build and run against an installed tree
  local prefix=$1 libdir=$1/$libdir
  # pkg-config, from the .pc file's own place (${pcfiledir}): no absolute path inside.
  local flags
  flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs moonbox)
  case "$flags" in *"$prefix"*) ;; *) fail "pkg-config flags do not point into $prefix: $flags" ;; esac
  # shellcheck disable=SC2086
  cc -o "$tmp/hello_pc" "$tmp/hello.c" $flags
  expect "pkg-config build" "$(LD_LIBRARY_PATH=$libdir "$tmp/hello_pc")" "42"
  # CMake's find_package.
  rm -rf "$tmp/cmake_src" "$tmp/cmake_build"
  mkdir -p "$tmp/cmake_src"
  cp "$tmp/hello.c" "$tmp/cmake_src/"
  cat >"$tmp/cmake_src/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(hello C)
find_package(moonbox REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE moonbox::moonbox)
CM
  cmake -S "$tmp/cmake_src" -B "$tmp/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$tmp/cmake_build" >/dev/null
  expect "find_package build" "$(LD_LIBRARY_PATH=$libdir "$tmp/cmake_build/hello")" "42"
  # The installed CLI, a mount, and the worker found under libexec (--isolate process).
  expect "installed CLI" "$("$prefix/bin/moonbox" run --mount "$src/examples/data:/data" \
    -e 'return #io.open("/data/orders.csv"):read("a") > 0')" "true"
  expect "worker under libexec" "$("$prefix/bin/moonbox" run --isolate process -e 'return 7')" "7"
}

check_tree "$prefix"
# Relocatable: the same tree, moved.
mv "$prefix" "$tmp/moved"
check_tree "$tmp/moved"

# The Debian package: built by CPack, unpacked (not installed), the demo run from it.
if command -v cpack >/dev/null && command -v dpkg-deb >/dev/null; then
  cpack -G DEB -B "$tmp/deb" --config "$build/CPackConfig.cmake" >/dev/null
  deb=$(find "$tmp/deb" -maxdepth 1 -name '*.deb' -print -quit)
  [ -n "$deb" ] || fail "cpack made no .deb"
  dpkg-deb -f "$deb" Package Depends | grep -q '^Depends: .*liblua5.4-0' || fail "Depends lacks liblua5.4-0"
  dpkg-deb -x "$deb" "$tmp/root"
  root=$tmp/root/usr
  [ -x "$root/bin/moonbox" ] || fail "the package has no usr/bin/moonbox"
  expect "packaged demo" "$("$root/bin/moonbox" run --input-file "$src/examples/orders.json" \
    "$src/examples/summarize.lua")" "$("$build/moonbox" run --input-file \
    "$src/examples/orders.json" "$src/examples/summarize.lua")"
  expect "packaged worker" "$("$root/bin/moonbox" run --isolate process -e 'return 8')" "8"
else
  echo "note: cpack or dpkg-deb missing: the Debian package was not checked"
fi
echo "install: ok"
