#!/usr/bin/env bash
# tests/python/run_tests.sh -- the Python binding's unittest suite (host/python/tests) on one
# interpreter, from PYTHONPATH (CI reaches no package index: nothing is installed).
# Usage: run_tests.sh PYTHON LIBMOONBOX SOURCE_DIR
#   PYTHON is a command ("python3": whichever is first on PATH) or a path (/usr/bin/python3).
# Exits 77 (ctest's skip) with the reason when that interpreter is missing or older than 3.9.
set -u
py=${1:?usage: run_tests.sh PYTHON LIBMOONBOX SOURCE_DIR}
lib=${2:?}
src=${3:?}
if ! command -v "$py" >/dev/null 2>&1; then
  echo "SKIP: $py is not installed (the binding is tested on each python3 that is present)"
  exit 77
fi
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))'; then
  echo "SKIP: $py is $("$py" --version 2>&1); the binding needs CPython >= 3.9"
  exit 77
fi
echo "python: $(command -v "$py") ($("$py" --version 2>&1))"
MOONBOX_LIBRARY=$lib PYTHONPATH=$src/host/python PYTHONDONTWRITEBYTECODE=1 \
  exec "$py" -m unittest discover -v -s "$src/host/python/tests"
