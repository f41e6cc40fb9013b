#!/usr/bin/env bash
# tests/python/pip_install.sh -- the Python package as a user installs it, offline (CI reaches
# no package index): a wheel built from host/python (--no-index --no-build-isolation, in a
# venv that sees the system's setuptools and wheel), then installed into a *fresh* venv without
# system site packages (Debian's venvs have no wheel module: installing a wheel needs none), and
# a run from another directory with neither PYTHONPATH nor MOONBOX_LIBRARY: the installed
# package must find the library it recorded at build time and load the extension module the
# wheel carries (built with python3-dev). Exits 77 with the reason when venv or pip is
# unavailable.
# Usage: pip_install.sh LIBMOONBOX SOURCE_DIR WORK_DIR
set -u
lib=$(realpath "${1:?usage: pip_install.sh LIBMOONBOX SOURCE_DIR WORK_DIR}")
src=${2:?}
work=${3:?}
rm -rf "$work"
mkdir -p "$work"
# A copy of the package: the build writes build/ and *.egg-info next to setup.py, which must
# not land in the source tree.
cp -r "$src/host/python" "$work/pkg"
rm -rf "$work/pkg/tests"
# The first interpreter that can build a wheel offline (setuptools and wheel: Debian's
# python3-setuptools and python3-wheel for /usr/bin/python3) in a venv that sees them.
py=
for candidate in python3 /usr/bin/python3; do
  command -v "$candidate" >/dev/null 2>&1 || continue
  rm -rf "$work/venv"
  "$candidate" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1 || continue
  if "$work/venv/bin/python" -c 'import setuptools, wheel, pip' 2>/dev/null; then
    py=$candidate
    break
  fi
done
if [ -z "$py" ]; then
  echo "SKIP: no python3 here has venv, pip, setuptools and wheel (Debian: python3-venv"
  echo "      python3-setuptools python3-wheel) to build the package offline"
  exit 77
fi
echo "python: $(command -v "$py")"
MOONBOX_LIBRARY=$lib "$work/venv/bin/python" -m pip wheel --no-index --no-build-isolation \
  --no-deps --no-cache-dir --disable-pip-version-check -q -w "$work/dist" "$work/pkg" || {
  echo "FAIL: pip wheel of host/python"
  exit 1
}
wheel=$(ls "$work"/dist/moonbox-*.whl 2>/dev/null | head -1)
[ -n "$wheel" ] || {
  echo "FAIL: no wheel in $work/dist"
  exit 1
}
echo "wheel: $(basename "$wheel")"
"$py" -m venv "$work/fresh" >"$work/fresh.log" 2>&1 || {
  echo "FAIL: a fresh venv (no system site packages): $(tail -1 "$work/fresh.log")"
  exit 1
}
if "$work/fresh/bin/python" -c 'import wheel' 2>/dev/null; then
  echo "note: this fresh venv has a wheel module; the install below does not use it"
fi
"$work/fresh/bin/python" -m pip install --no-index --no-cache-dir --disable-pip-version-check \
  -q "$wheel" || {
  echo "FAIL: pip install of the wheel into a fresh venv"
  exit 1
}
cd "$work" || exit 1
out=$(env -u MOONBOX_LIBRARY -u PYTHONPATH "$work/fresh/bin/python" -c '
import moonbox, os
assert "site-packages" in moonbox.__file__, moonbox.__file__
here = os.path.dirname(moonbox.__file__)
assert os.path.exists(os.path.join(here, "py.typed")), "py.typed is not installed"
assert os.path.exists(os.path.join(here, "__init__.pyi")), "the type stubs are not installed"
from moonbox import _native
# The extension pip built (abi3), not the copy in the build tree next to the library.
assert os.path.dirname(_native.ext.__file__) == here, _native.ext.__file__
assert _native.ext.__file__.endswith(".abi3.so"), _native.ext.__file__
print(moonbox.run("return 1 + 1").value, os.path.realpath(moonbox.library_path))
') || {
  echo "FAIL: the installed package does not run"
  exit 1
}
want="2 $(realpath "$lib")"
if [ "$out" != "$want" ]; then
  echo "FAIL: expected [$want], got [$out]"
  exit 1
fi
echo "pip_install: ok ($out)"
