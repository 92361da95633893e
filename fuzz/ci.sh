#!/usr/bin/env bash
# The fuzz stage of CI (.ci/run): builds the fuzz preset (the harnesses and
# the libraries they test, nothing else), replays every seed and regression
# input through ctest, then fuzzes each harness for a bounded time from the
# seeds (fuzz/run.sh). Fails on any finding.
#   fuzz/ci.sh [--seconds S]     S per harness (default 15)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
seconds=15
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    *) echo "fuzz/ci.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
scripts/install-deps.sh --fuzz
jobs=$(nproc 2>/dev/null || echo 2)
start=$SECONDS
cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$jobs"
echo "fuzz: build done in $((SECONDS - start)) s"
t=$SECONDS
ctest --preset fuzz
echo "fuzz: seeds and regressions replayed in $((SECONDS - t)) s"
t=$SECONDS
fuzz/run.sh --seconds "$seconds"
echo "fuzz: harnesses ran in $((SECONDS - t)) s; fuzz stage $((SECONDS - start)) s"
