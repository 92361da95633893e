#!/usr/bin/env bash
# Sets up and runs the whole test suite: the `ci` preset (optimized, warnings
# as errors) and then the same suite under AddressSanitizer+UBSan (`asan`).
#   scripts/run-tests.sh            both
#   scripts/run-tests.sh --no-asan  the ci preset only
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
asan=1
for arg in "$@"; do
  case "$arg" in
    --no-asan) asan=0 ;;
    *) echo "run-tests: unknown option '$arg'" >&2; exit 2 ;;
  esac
done
# Slurm daemons (slurm test), Python for summaries and plots, PyTorch (the
# DDP peer's parity test), Nsight Systems
# (NVTX range test).
scripts/install-deps.sh --slurm --python --torch --nsys
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
jobs=$(nproc 2>/dev/null || echo 2)
cmake --preset ci
cmake --build --preset ci -j "$jobs"
ctest --preset ci
if [ "$asan" = 1 ]; then
  cmake --preset asan
  cmake --build --preset asan -j "$jobs"
  ctest --preset asan
fi
