#!/usr/bin/env bash
# Compile-only CUDA build of qsgd::kernels, its tests and its benchmarks
# (preset `cuda`), from Debian packages only: CUDA 11.8 (non-free), g++-11,
# and Kokkos 3.4.01 with the CUDA backend built from Debian's trilinos source.
# Catches code that runs on Serial but is not valid in device lambdas. Runs
# on machines without a GPU; the binaries run where one is (profiles/gpu/).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh --cuda
scripts/build-kokkos-cuda.sh
cmake --preset cuda
cmake --build --preset cuda -j "$(nproc 2>/dev/null || echo 2)"
