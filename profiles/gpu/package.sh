#!/usr/bin/env bash
# Packs the CUDA build of the kernels (tests, benchmarks) with the shared
# libraries they need into one self-contained directory, for a GPU machine
# that has the NVIDIA driver but no Kokkos, MPI, HDF5 or Google Benchmark.
#
#   profiles/gpu/package.sh [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR  default build/cuda (scripts/build-cuda.sh makes it)
#     OUT_DIR    default build/gpu-package
#
# OUT_DIR/bin: the programs; OUT_DIR/lib: libcudart.so.11.0 and every other
# library outside glibc/libstdc++ they load (libcuda.so.1 comes from the
# driver); OUT_DIR/run.sh and summarize.py: see run.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(realpath -m "${1:-$root/build/cuda}")"
out="$(realpath -m "${2:-$root/build/gpu-package}")"
progs=(tests/kernels/test_quantize tests/kernels/test_codecs tests/kernels/test_message tests/kernels/test_stats
       benchmarks/qsgd-bench-kernels benchmarks/qsgd-codec-report)
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || { echo "package: $build/$p missing; run scripts/build-cuda.sh first" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
# Libraries every Linux machine has, and the driver's own.
system_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so)'
for p in "${progs[@]}"; do
  cp "$build/$p" "$out/bin/"
  while read -r name _ path _; do
    [[ "$name" =~ $system_re ]] && continue
    [ -n "${path:-}" ] && [ -f "$path" ] || { echo "package: $p needs $name, not found" >&2; exit 1; }
    cp -L "$path" "$out/lib/$name"
  done < <(ldd "$build/$p" | awk '/=>/ {print $1, $2, $3}')
done
cp "$root/profiles/gpu/run.sh" "$root/profiles/gpu/summarize.py" "$root/benchmarks/common/qsgd_report.py" "$out/"
git -C "$root" rev-parse --short=12 HEAD > "$out/GIT_HASH" 2>/dev/null || echo unknown > "$out/GIT_HASH"
echo "package: $(du -sh "$out" | cut -f1) in $out:"
ls "$out/bin" "$out/lib"
