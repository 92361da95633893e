#!/usr/bin/env bash
# Packs a build of the suite (the CUDA build; a CPU build for the dry run)
# into one self-contained directory for a GPU node that has the NVIDIA driver
# and nothing else: no Kokkos, MPI, HDF5 or Google Benchmark.
#
#   profiles/gpu/package.sh [--tier kernels|trainer] [--archive FILE]
#                           [--budget-mb MB] [BUILD_DIR] [OUT_DIR]
#     BUILD_DIR  default build/cuda (scripts/build-cuda.sh makes it)
#     OUT_DIR    default build/gpu-package
#     --tier     kernels: the kernel tests (test_backends among them),
#                qsgd-bench-kernels and qsgd-codec-report with the libraries
#                they load (Kokkos, the CUDA runtime; no MPI, no cuBLAS);
#                trainer (default): those and qsgd-train with the MPI runtime
#                and HDF5, and the Nsight Systems recipe; no cuBLAS (a CUDA
#                build's qsgd-train loads the node's at run time, docs/gpu.md)
#     --archive FILE  also write OUT_DIR as one xz-compressed tar (FILE, e.g.
#                build/gpu-kernels.tar.xz) and check that it and the checkout
#                travel to a GPU node together: the checkout's tracked and
#                untracked-not-ignored files plus FILE at most MB MiB, else
#                exit 1 naming the sizes
#     --budget-mb MB  that limit (default 64: what a GPU node's transfer takes)
#
# OUT_DIR/bin: the tier's programs. OUT_DIR/lib: every library they and the MPI
# runtime load outside glibc/libstdc++ (libcudart.so.11.0 in a CUDA build;
# libcuda.so.1 comes from the driver).
# Trainer tier: OUT_DIR/ompi holds the Open MPI runtime the binaries were
# linked with (its components, help files, mpirun and orted) laid out under a
# prefix that run.sh passes as OPAL_PREFIX, and OUT_DIR/pmix the PMIx
# components (PMIX_INSTALL_PREFIX), so that qsgd-train runs as one process and
# under the packaged mpirun on one node; OUT_DIR/nsys the Nsight Systems
# recipe (profiles/nsys) for nodes that have nsys. OUT_DIR/TIER names the
# tier; run.sh runs what the tier holds (see run.sh).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
die() { echo "package: $*" >&2; exit 1; }
tier=trainer archive="" budget_mb=64 pos=()
while [ $# -gt 0 ]; do
  case "$1" in
    --tier) tier="${2:?--tier needs kernels or trainer}"; shift ;;
    --archive) archive="${2:?--archive needs a file}"; shift ;;
    --budget-mb) budget_mb="${2:?--budget-mb needs a number}"; shift ;;
    -h|--help) sed -n '2,/^set -euo pipefail$/{/^set -euo pipefail$/!p}' "$0"; exit 0 ;;
    -*) echo "package: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) pos+=("$1") ;;
  esac
  shift
done
case "$tier" in kernels|trainer) ;; *) echo "package: --tier is kernels or trainer, not '$tier'" >&2; exit 2 ;; esac
[[ "$budget_mb" =~ ^[0-9]+$ ]] || { echo "package: --budget-mb takes a whole number of MiB, not '$budget_mb'" >&2; exit 2; }
[ ${#pos[@]} -le 2 ] || { echo "package: at most BUILD_DIR and OUT_DIR (see --help)" >&2; exit 2; }
build="$(realpath -m "${pos[0]:-$root/build/cuda}")"
out="$(realpath -m "${pos[1]:-$root/build/gpu-package}")"
progs=(tests/kernels/test_quantize tests/kernels/test_codecs tests/kernels/test_message tests/kernels/test_stats
       tests/kernels/test_backends benchmarks/qsgd-bench-kernels benchmarks/qsgd-codec-report)
[ "$tier" = trainer ] && progs+=(benchmarks/qsgd-train)
for p in "${progs[@]}"; do
  [ -x "$build/$p" ] || die "$build/$p missing; build it first (scripts/build-cuda.sh, or cmake --build --preset ...)"
done
[ "$tier" = kernels ] || command -v ompi_info > /dev/null ||
  die "ompi_info not found: the Open MPI the binaries link is needed to pack its runtime"
# Libraries every Linux machine has, and the driver's own.
system_re='^(linux-vdso|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libstdc\+\+\.so|libgcc_s\.so|libcuda\.so)'
copy_deps() {  # copy_deps FILE: every library FILE loads, into $out/lib
  while read -r name _ path _; do
    [[ "$name" =~ $system_re ]] && continue
    [ -n "${path:-}" ] && [ -f "$path" ] || die "$1 needs $name, not found"
    [ -e "$out/lib/$name" ] || cp -L "$path" "$out/lib/$name"
  done < <(ldd "$1" | awk '/=>/ {print $1, $2, $3}')
}

pack_mpi() {  # the trainer tier's MPI runtime, under the same layout relative to its prefix
  ompi_path() { ompi_info --path "$1" | awk -F': ' 'NR == 1 {print $2}'; }
  local prefix pkglibdir pkgdatadir bindir pmix_lib pmix_prefix="" d c f b src
  prefix="$(ompi_path prefix)"
  pkglibdir="$(ompi_path pkglibdir)"
  pkgdatadir="$(ompi_path pkgdatadir)"
  bindir="$(ompi_path bindir)"
  for d in "$pkglibdir" "$pkgdatadir" "$bindir"; do
    case "$d" in "$prefix"/*) ;; *) die "Open MPI's $d is not under its prefix $prefix; cannot relocate it" ;; esac
  done
  # PMIx (an external library in Debian's Open MPI): its components' folder.
  pmix_lib="$(for f in "$pkglibdir"/*.so; do ldd "$f"; done | awk '$1 ~ /^libpmix\.so/ && $3 ~ /^\// && !p {p = $3} END {print p}')"
  if [ -n "$pmix_lib" ]; then
    # Its install prefix is a string in the library: the one with lib/pmix.
    while read -r c; do
      if [ -d "$c/lib/pmix" ]; then pmix_prefix="$c"; break; fi
    done < <(grep -ao '/[A-Za-z0-9_./-]*' "$pmix_lib" | sort -u)
  fi
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
  rel "$bindir" > "$out/ompi/BINDIR"
  # Where the runtime came from (tests/profiles hides these to check the package).
  { echo "$pkglibdir"; echo "$pkgdatadir"; echo "$bindir/orted"
    [ -z "$pmix_prefix" ] || { echo "$pmix_prefix/lib/pmix"; [ ! -d "$pmix_prefix/share/pmix" ] || echo "$pmix_prefix/share/pmix"; }
  } > "$out/ompi/SOURCES"
}

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for p in "${progs[@]}"; do
  cp "$build/$p" "$out/bin/"
  copy_deps "$build/$p"
done
if [ "$tier" = trainer ]; then
  mkdir -p "$out/ompi" "$out/nsys"
  pack_mpi
  cp "$root/profiles/nsys/"*.sh "$root/profiles/nsys/"*.py "$out/nsys/"
fi
cp "$root/profiles/gpu/run.sh" "$root/profiles/gpu/summarize.py" "$root/benchmarks/common/qsgd_report.py" "$out/"
echo "$tier" > "$out/TIER"
git -C "$root" rev-parse --short=12 HEAD > "$out/GIT_HASH" 2>/dev/null || echo unknown > "$out/GIT_HASH"
"$build/benchmarks/qsgd-bench-kernels" --version > "$out/BUILD" 2>&1 ||
  die "$build/benchmarks/qsgd-bench-kernels --version failed"
mib() { awk -v b="$1" 'BEGIN {printf "%.1f", b / 1048576}'; }
bytes="$(du -sb "$out" | cut -f1)"
echo "package: $tier tier, $(mib "$bytes") MiB in $out ($(ls "$out/lib" | wc -l) libraries): $(ls "$out/bin" | tr '\n' ' ')"
[ -n "$archive" ] || exit 0

# One archive that travels beside the checkout; both together within the budget.
archive="$(realpath -m "$archive")"
mkdir -p "$(dirname "$archive")"
trap 'rm -f "$archive.tmp"' EXIT
tar -C "$(dirname "$out")" -cf - "$(basename "$out")" | xz -6 -T0 > "$archive.tmp" || die "packing $out into $archive failed"
mv "$archive.tmp" "$archive"
packed="$(stat -c %s "$archive")"
# The checkout as it would travel: tracked files that exist and untracked ones git does not ignore.
checkout="$(git -C "$root" ls-files -z --cached --others --exclude-standard |
  (cd "$root" && xargs -0 stat -c %s 2> /dev/null || true) | awk '{s += $1} END {print s + 0}')"
total=$((packed + checkout))
echo "package: $archive: $(mib "$packed") MiB; with the checkout's $(mib "$checkout") MiB, $(mib "$total") MiB travel" \
  "(budget $budget_mb MiB)"
[ "$total" -le $((budget_mb * 1048576)) ] ||
  die "the $tier tier's archive ($(mib "$packed") MiB) and the checkout ($(mib "$checkout") MiB) make $(mib "$total") MiB," \
      "over the $budget_mb MiB a GPU node's transfer takes"
