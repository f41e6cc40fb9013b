#!/usr/bin/env bash
# tests/fuzz/seed_corpus.sh -- fill a corpus directory for fuzz_run with the repository's Lua
# scripts (tests/escape, and tests/agent when present). The copies are made at run time so the
# repository never holds a second copy of the seeds. Usage: seed_corpus.sh <corpus-dir>
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 <corpus-dir>" >&2; exit 2; }
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
mkdir -p "$1"
shopt -s nullglob
count=0
for dir in escape agent; do
  for f in "$here/$dir"/*.lua; do
    cp "$f" "$1/${dir}_$(basename "$f")"
    count=$((count + 1))
  done
done
echo "seed_corpus: $count seeds in $1"
