#!/usr/bin/env bash
# Packs a build of the suite (the CUDA build; a CPU build for the dry run)
# into one self-contained directory for a GPU node that has the NVIDIA driver
# and nothing else: no Kokkos, MPI, HDF5 or Google Benchmark.
#
#   profiles/gpu/package.sh [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR  default build/cuda (scripts/build-cuda.sh makes it)
#     OUT_DIR    default build/gpu-package
#
# OUT_DIR/bin: the kernel tests (test_backends among them), qsgd-bench-kernels,
# qsgd-codec-report, qsgd-train. OUT_DIR/lib: every library they and the MPI
# runtime load outside glibc/libstdc++ (libcudart.so.11.0 and libcublas in a
# CUDA build; libcuda.so.1 comes from the driver). OUT_DIR/ompi: the Open MPI
# runtime the binaries were linked with (its components, help files, mpirun
# and orted) laid out under a prefix that run.sh passes as OPAL_PREFIX, and
# OUT_DIR/pmix the PMIx components (PMIX_INSTALL_PREFIX), so that qsgd-train
# runs as one process and under the packaged mpirun on one node.
# OUT_DIR/nsys: the Nsight Systems recipe (profiles/nsys) for nodes that
# have nsys. run.sh and summarize.py: see run.sh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
build="$(realpath -m "${1:-$root/build/cuda}")"
out="$(realpath -m "${2:-$root/build/gpu-package}")"
die() { echo "package: $*" >&2; exit 1; }
progs=(tests/kernels/test_quantize tests/kernels/test_codecs tests/kernels/test_message tests/kernels/test_stats
       tests/kernels/test_backends benchmarks/qsgd-bench-kernels benchmarks/qsgd-codec-report benchmarks/qsgd-train)
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || die "$build/$p missing; build it first (scripts/build-cuda.sh, or cmake --build --preset ...)"
done
command -v ompi_info > /dev/null || die "ompi_info not found: the Open MPI the binaries link is needed to pack its runtime"
ompi_path() { ompi_info --path "$1" | awk -F': ' 'NR == 1 {print $2}'; }
prefix="$(ompi_path prefix)"
pkglibdir="$(ompi_path pkglibdir)"
pkgdatadir="$(ompi_path pkgdatadir)"
bindir="$(ompi_path bindir)"
for d in "$pkglibdir" "$pkgdatadir" "$bindir"; do
  case "$d" in "$prefix"/*) ;; *) die "Open MPI's $d is not under its prefix $prefix; cannot relocate it" ;; esac
done
# PMIx (an external library in Debian's Open MPI): its components' folder.
pmix_lib="$(for f in "$pkglibdir"/*.so; do ldd "$f"; done | awk '$1 ~ /^libpmix\.so/ && $3 ~ /^\// && !p {p = $3} END {print p}')"
pmix_prefix=""
if [ -n "$pmix_lib" ]; then
  # Its install prefix is a string in the library: the one with lib/pmix.
  while read -r c; do
    if [ -d "$c/lib/pmix" ]; then pmix_prefix="$c"; break; fi
  done < <(grep -ao '/[A-Za-z0-9_./-]*' "$pmix_lib" | sort -u)
fi

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/ompi" "$out/nsys"
# Libraries every Linux machine has, and the driver's own.
system_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so)'
copy_deps() {  # copy_deps FILE: every library FILE loads, into $out/lib
  while read -r name _ path _; do
    [[ "$name" =~ $system_re ]] && continue
    [ -n "${path:-}" ] && [ -f "$path" ] || die "$1 needs $name, not found"
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$1" | awk '/=>/ {print $1, $2, $3}')
}
for p in "${progs[@]}"; do
  cp "$build/$p" "$out/bin/"
  copy_deps "$build/$p"
done
# The MPI runtime, under the same layout relative to its prefix.
rel() { echo "${1#"$prefix"/}"; }
mkdir -p "$out/ompi/$(rel "$pkglibdir")" "$out/ompi/$(rel "$pkgdatadir")" "$out/ompi/$(rel "$bindir")"
cp -a "$pkglibdir"/. "$out/ompi/$(rel "$pkglibdir")/"
cp -a "$pkgdatadir"/. "$out/ompi/$(rel "$pkgdatadir")/"
for f in "$out/ompi/$(rel "$pkglibdir")"/*.so; do copy_deps "$f"; done
for b in orted orterun mpirun; do
  src="$(realpath "$bindir/$b" 2>/dev/null || true)"
  [ -x "$src" ] || die "$bindir/$b not found"
  cp -L "$src" "$out/ompi/$(rel "$bindir")/$b"
  copy_deps "$src"
done
if [ -n "$pmix_prefix" ] && [ -d "$pmix_prefix/lib/pmix" ]; then
  mkdir -p "$out/pmix/lib" "$out/pmix/share"
  cp -a "$pmix_prefix/lib/pmix" "$out/pmix/lib/"
  [ -d "$pmix_prefix/share/pmix" ] && cp -a "$pmix_prefix/share/pmix" "$out/pmix/share/"
  for f in "$out/pmix/lib/pmix"/*.so; do copy_deps "$f"; done
fi
echo "$(rel "$bindir")" > "$out/ompi/BINDIR"
# Where the runtime came from (tests/profiles hides these to check the package).
{ echo "$pkglibdir"; echo "$pkgdatadir"; echo "$bindir/orted"
  [ -z "$pmix_prefix" ] || { echo "$pmix_prefix/lib/pmix"; [ ! -d "$pmix_prefix/share/pmix" ] || echo "$pmix_prefix/share/pmix"; }
} > "$out/ompi/SOURCES"
cp "$root/profiles/gpu/run.sh" "$root/profiles/gpu/summarize.py" "$root/benchmarks/common/qsgd_report.py" "$out/"
cp "$root/profiles/nsys/"*.sh "$root/profiles/nsys/"*.py "$out/nsys/"
git -C "$root" rev-parse --short=12 HEAD > "$out/GIT_HASH" 2>/dev/null || echo unknown > "$out/GIT_HASH"
"$build/benchmarks/qsgd-train" --version > "$out/BUILD" 2>&1 || die "$build/benchmarks/qsgd-train --version failed"
echo "package: $(du -sh "$out" | cut -f1) in $out ($(ls "$out/lib" | wc -l) libraries): $(ls "$out/bin" | tr '\n' ' ')"
