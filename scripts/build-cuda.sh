#!/usr/bin/env bash
# Compile-only CUDA build of the whole suite (preset `cuda`): qsgd::kernels,
# qsgd::comm, qsgd::models (GEMM through cuBLAS), the trainer, the
# benchmarks and the kernel tests, from Debian packages only: CUDA 11.8 (non-free),
# g++-11, and Kokkos 3.4.01 with the CUDA backend built from Debian's
# trilinos source. Catches code that runs on Serial but is not valid in
# device lambdas, then checks that every binary carries sm_80 and sm_90 code
# and compute_80 PTX (scripts/cuda-archs.py: Kokkos 3.4 aborts on a Hopper
# GPU without sm_90 code). Runs on machines without a GPU; the binaries run
# where one is (profiles/gpu/).
#
#   scripts/build-cuda.sh              the CI check: every library and program,
#                                      the kernel tests (QSGD_TESTS_KERNELS_ONLY)
#   scripts/build-cuda.sh --all-tests  also the comm, models and trainer tests
#                                      (212 s more on 2 cores, after 651 s)
set -euo pipefail
kernel_tests_only=ON
for arg in "$@"; do
  case "$arg" in
    --all-tests) kernel_tests_only=OFF ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "build-cuda: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
t0=$SECONDS
scripts/install-deps.sh --cuda
scripts/build-kokkos-cuda.sh
echo "build-cuda: toolchain and Kokkos ready after $((SECONDS - t0)) s"
t1=$SECONDS
cmake --preset cuda -DQSGD_TESTS_KERNELS_ONLY=$kernel_tests_only
cmake --build --preset cuda -j "$(nproc 2>/dev/null || echo 2)"
echo "build-cuda: the suite compiled in $((SECONDS - t1)) s"
# Every executable with device code carries both architectures and the PTX;
# the main programs must have device code at all.
mapfile -t bins < <(find build/cuda -type f -perm -u+x ! -path '*/CMakeFiles/*' | sort)
python3 scripts/cuda-archs.py --require-sass 80,90 --require-ptx 80 --skip-non-elf --allow-host-only "${bins[@]}" \
  > build/cuda/cuda-archs.txt || { cat build/cuda/cuda-archs.txt; exit 1; }
python3 scripts/cuda-archs.py --require-sass 80,90 --require-ptx 80 \
  build/cuda/benchmarks/qsgd-train build/cuda/benchmarks/qsgd-bench-kernels build/cuda/benchmarks/qsgd-bench-exchange
echo "build-cuda: $(grep -c 'sass sm_80,sm_90' build/cuda/cuda-archs.txt) binaries carry sm_80 and sm_90 code" \
  "($(grep -c 'no device code' build/cuda/cuda-archs.txt || true) host-only); total $((SECONDS - t0)) s"
