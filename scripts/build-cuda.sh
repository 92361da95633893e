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
#   scripts/build-cuda.sh              every library and program, the kernel
#                                      tests (QSGD_TESTS_KERNELS_ONLY): build/cuda
#   scripts/build-cuda.sh --all-tests  also the comm, models and trainer tests
#                                      (their device binaries too)
#   scripts/build-cuda.sh --one-arch   the same targets with sm_80 code and
#                                      compute_80 PTX only (preset cuda-sm80,
#                                      build/cuda-sm80): every device lambda
#                                      compiled once instead of twice (a test
#                                      TU: 56 s against 106 s). Its binaries
#                                      run on A100s, not on sm_90 GPUs.
#   scripts/build-cuda.sh --check      CI's check: --one-arch with host code
#                                      compiled at -O0 (preset cuda-check,
#                                      build/cuda-check). The device code and
#                                      every check below are --one-arch's; g++
#                                      at -O3 was 60% of a TU's time (21 of
#                                      36 s for codec_report.cpp, 8 s at -O0).
set -euo pipefail
kernel_tests_only=ON
preset=cuda
sass=80,90
for arg in "$@"; do
  case "$arg" in
    --all-tests) kernel_tests_only=OFF ;;
    --one-arch) preset=cuda-sm80; sass=80 ;;
    --check) preset=cuda-check; sass=80 ;;
    -h|--help) sed -n '2,27p' "$0"; exit 0 ;;
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
cmake --preset "$preset" -DQSGD_TESTS_KERNELS_ONLY=$kernel_tests_only
cmake --build --preset "$preset" -j "$(nproc 2>/dev/null || echo 2)"
echo "build-cuda: the suite compiled in $((SECONDS - t1)) s"
# Every executable with device code carries the preset's architectures and
# the PTX; the main programs must have device code at all.
out="build/$preset"
mapfile -t bins < <(find "$out" -type f -perm -u+x ! -path '*/CMakeFiles/*' | sort)
python3 scripts/cuda-archs.py --require-sass "$sass" --require-ptx 80 --skip-non-elf --allow-host-only "${bins[@]}" \
  > "$out/cuda-archs.txt" || { cat "$out/cuda-archs.txt"; exit 1; }
python3 scripts/cuda-archs.py --require-sass "$sass" --require-ptx 80 \
  "$out/benchmarks/qsgd-train" "$out/benchmarks/qsgd-bench-kernels" "$out/benchmarks/qsgd-bench-exchange"
if [ "$sass" = 80 ]; then
  # The suite's own objects carry sm_80 code alone (the binaries list sm_90
  # too: Kokkos' library is built for both, scripts/build-kokkos-cuda.sh).
  mapfile -t objs < <(find "$out" -name '*.o' -path '*/CMakeFiles/*' | sort)
  python3 scripts/cuda-archs.py --skip-non-elf --allow-host-only "${objs[@]}" > "$out/cuda-archs-objects.txt"
  if grep -q 'sm_90' "$out/cuda-archs-objects.txt"; then
    grep 'sm_90' "$out/cuda-archs-objects.txt"
    echo "build-cuda: --one-arch/--check compiled objects for sm_90 too (is NVCC_APPEND_FLAGS set?)" >&2
    exit 1
  fi
  echo "build-cuda: $(grep -c 'sass sm_80; ' "$out/cuda-archs-objects.txt") objects with device code, sm_80 alone"
fi
sass_list="sm_${sass//,/,sm_}"
echo "build-cuda: $(grep -c "sass $sass_list\b" "$out/cuda-archs.txt") binaries carry $sass_list code" \
  "($(grep -c 'no device code' "$out/cuda-archs.txt" || true) host-only); total $((SECONDS - t0)) s"
