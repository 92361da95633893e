#!/usr/bin/env bash
# Builds Kokkos 3.4.01 with the CUDA (sm_80 and sm_90) and Serial backends into PREFIX,
# from Debian packages only:
#   - nvidia-cuda-toolkit 11.8 (non-free; /usr/bin/nvcc) with g++-11 as host
#     compiler (CUDA 11.8 does not accept g++-12),
#   - Kokkos from Debian's `trilinos` source package (packages/kokkos of
#     trilinos 13.2.0 is Kokkos 3.4.01).
#
#   scripts/build-kokkos-cuda.sh [PREFIX]   default PREFIX: <repo>/build/kokkos-cuda/install
#
# Idempotent: when PREFIX holds KokkosConfig.cmake and a stamp with the same
# options, it exits at once. Packages already installed, a downloaded source
# package and an extracted tree are reused. Work tree: <repo>/build/kokkos-cuda
# (src/ = download cache, build/ = CMake build tree).
#
# Consumers (see the end of the output): compiler = PREFIX/bin/nvcc_wrapper,
# Kokkos_DIR = PREFIX/lib/cmake/Kokkos, CMAKE_CXX_FLAGS=-arch=sm_80 and, in the
# environment of both cmake and the build, NVCC_WRAPPER_DEFAULT_COMPILER=g++-11,
# CUDA_ROOT=/usr, NVCC_APPEND_FLAGS=-gencode=arch=compute_90,code=sm_90 and /usr/bin ahead of /usr/local/cuda/bin in PATH (Debian's
# nvcc runs cudafe++, ptxas, fatbinary, nvlink from PATH; CUDA 13's break it).
set -euo pipefail

case "${1:-}" in
  -h|--help) sed -n '2,21p' "$0"; exit 0 ;;
  -*) echo "build-kokkos-cuda: unknown option '$1' (see --help)" >&2; exit 2 ;;
esac
[ "$#" -le 1 ] || { echo "build-kokkos-cuda: at most one argument, PREFIX" >&2; exit 2; }

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
work="$repo/build/kokkos-cuda"
prefix="$(realpath -m "${1:-$work/install}")"
src_cache="$work/src"
kokkos_src="$src_cache/kokkos"
build_dir="$work/build"
stamp="$prefix/.qsgd-kokkos-cuda.stamp"

kokkos_version=3.4.01
host_cxx=g++-11
cuda_arch=sm_80
# Hopper (H100, H200). Kokkos 3.4.01 has no Hopper architecture option, and
# at initialization it aborts when the compute capability its kernels run as
# (__CUDA_ARCH__, read by a kernel of the library) differs in its major
# number from the device's: compute_80 PTX JIT-compiled on a 9.0 device still
# runs as 8.0, so an sm_80-only build aborts on every H100/H200. nvcc appends
# NVCC_APPEND_FLAGS to every call, past nvcc_wrapper (which accepts only one
# -arch/-gencode flag): with this, every object carries sm_80 and sm_90 code
# and compute_80 PTX. Consumers set the same variable (the `cuda` preset does);
# scripts/cuda-archs.py checks the binaries.
cuda_extra_gencode="-gencode=arch=compute_90,code=sm_90"
# Architecture. Kokkos' nvcc_wrapper (3.4.01) adds `-arch=sm_35` to every
# nvcc call that has no -arch/-gencode of its own. Its only knobs are editing
# `default_arch` in the script or passing -arch: it reads the environment for
# the host compiler (NVCC_WRAPPER_DEFAULT_COMPILER) and nvcc's location
# (CUDA_ROOT, else `nvcc` from PATH), but has no NVCC_WRAPPER_DEFAULT_ARCH.
# CMake's compiler checks run before Kokkos adds its own `-arch=sm_80`
# (Kokkos_ARCH_AMPERE80), so they get sm_35: Debian's nvcc 11.8 only warns
# that sm_35 is deprecated, but CUDA 13's nvcc (/usr/local/cuda/bin, first on
# PATH on these machines) rejects it, which is what fails when CUDA_ROOT is
# not set. We pass -arch=sm_80 in CMAKE_CXX_FLAGS: nvcc_wrapper then sees the
# same flag as Kokkos' own (identical flags are accepted, different ones
# abort), the upstream wrapper stays unmodified, and every source file of a
# consumer gets sm_80, also those that do not link Kokkos. A consumer passes
# the same CMAKE_CXX_FLAGS.
kokkos_opts=(
  -DCMAKE_BUILD_TYPE=Release
  -DCMAKE_CXX_STANDARD=17
  -DCMAKE_CXX_EXTENSIONS=OFF
  "-DCMAKE_CXX_FLAGS=-arch=$cuda_arch"
  -DKokkos_ENABLE_SERIAL=ON
  -DKokkos_ENABLE_CUDA=ON
  -DKokkos_ENABLE_CUDA_LAMBDA=ON
  -DKokkos_ARCH_AMPERE80=ON
  -DCUDAToolkit_ROOT=/usr
)
stamp_text="kokkos=$kokkos_version host=$host_cxx ${kokkos_opts[*]} NVCC_APPEND_FLAGS=$cuda_extra_gencode"

log() { echo "build-kokkos-cuda: $*"; }
die() { echo "build-kokkos-cuda: error: $*" >&2; exit 1; }
now() { date +%s.%N; }
t_all="$(now)"
step_t=""
step_begin() { step_t="$(now)"; log "== $*"; }
step_end() { log "   ($(awk -v a="$step_t" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }') s)"; }

print_usage() {
  local config
  config="$(compgen -G "$prefix/lib*/cmake/Kokkos/KokkosConfig.cmake" | head -n 1)"
  cat <<EOF
Kokkos $kokkos_version (CUDA $cuda_arch and sm_90 + Serial) installed in:
  $prefix
Use it with (environment needed at configure and at build time):
  export PATH=/usr/bin:\$PATH NVCC_WRAPPER_DEFAULT_COMPILER=$host_cxx CUDA_ROOT=/usr \\
         NVCC_APPEND_FLAGS=$cuda_extra_gencode
  cmake -DCMAKE_CXX_COMPILER=$prefix/bin/nvcc_wrapper \\
        -DKokkos_DIR=$(dirname "$config") \\
        -DCMAKE_CXX_FLAGS=-arch=$cuda_arch -DCMAKE_CXX_STANDARD=17 -DCMAKE_CXX_EXTENSIONS=OFF ...
EOF
}

# Fast path: nothing to do (the toolchain it needs must still be there).
if compgen -G "$prefix/lib*/cmake/Kokkos/KokkosConfig.cmake" > /dev/null \
   && [ -x "$prefix/bin/nvcc_wrapper" ] && [ -f "$stamp" ] \
   && [ "$(cat "$stamp")" = "$stamp_text" ] \
   && [ -x /usr/bin/nvcc ] && command -v "$host_cxx" > /dev/null; then
  log "up to date"
  print_usage
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

# The machine may carry another CUDA (e.g. /usr/local/cuda, CUDA 13, which
# cannot build Kokkos 3.4) on PATH, CUDA_HOME, CUDA_PATH and LIBRARY_PATH: use
# Debian's toolkit in /usr only. nvcc_wrapper runs $CUDA_ROOT/bin/nvcc, and
# Kokkos passes CUDA_ROOT on to find_package(CUDAToolkit). Debian's nvcc
# (/usr/lib/nvidia-cuda-toolkit/bin/nvcc) finds its helpers cudafe++, ptxas,
# fatbinary and nvlink (in /usr/bin) through PATH: with /usr/local/cuda/bin
# first it runs CUDA 13's cudafe++, and every extended __host__ __device__
# lambda (KOKKOS_LAMBDA) then fails to compile ("type/value mismatch at
# argument 3 ... __nv_hdl_wrapper_t").
export PATH="/usr/bin:$PATH"
export CUDA_ROOT=/usr
export NVCC_WRAPPER_DEFAULT_COMPILER="$host_cxx"
export NVCC_APPEND_FLAGS="$cuda_extra_gencode"
unset CUDA_HOME CUDA_PATH CUDAToolkit_ROOT LIBRARY_PATH CPATH

need_sources=0

# 1. Packages.
step_begin "packages"
pkgs=(nvidia-cuda-toolkit "$host_cxx" dpkg-dev cmake make)
missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  # nvidia-cuda-toolkit is in non-free (and needs contrib); the source
  # package needs deb-src: set both up in one go (one apt-get update).
  "$here/debian-sources.sh" --non-free --deb-src
  need_sources=1
  log "installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  if ! $SUDO apt-get install -y --no-install-recommends "${missing[@]}"; then
    log "install failed; refreshing package lists and retrying"
    $SUDO apt-get update -o Acquire::Retries=3 || log "apt-get update reported errors; retrying anyway"
    $SUDO apt-get install -y --no-install-recommends "${missing[@]}"
  fi
else
  log "all of ${pkgs[*]} present"
fi
[ -x /usr/bin/nvcc ] || die "/usr/bin/nvcc missing after installing nvidia-cuda-toolkit"
command -v "$host_cxx" > /dev/null || die "$host_cxx missing"
log "$(/usr/bin/nvcc --version | tail -n 2 | head -n 1)"
step_end

# 2. Source package (cached; checked against the .dsc's SHA-256 sums).
dsc_ok() {  # dsc: all files it lists are present with the right SHA-256
  local dsc="$1" dir
  dir="$(dirname "$dsc")"
  awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && NF == 3 { print $1 "  " $3 }' "$dsc" \
    | (cd "$dir" && sha256sum --quiet -c -) > /dev/null 2>&1
}
cached_dsc() {  # newest cached .dsc whose files are all intact
  local d best=""
  for d in "$src_cache"/trilinos_*.dsc; do
    [ -e "$d" ] || continue
    if dsc_ok "$d"; then best="$d"; fi   # glob order: sorted, good enough here
  done
  echo "$best"
}
step_begin "source package"
mkdir -p "$src_cache"
dsc="$(cached_dsc)"
if [ -z "$dsc" ]; then
  if [ "$need_sources" = 0 ]; then
    "$here/debian-sources.sh" --non-free --deb-src
  fi
  sandbox=()
  # As root apt downloads unsandboxed anyway, but warns unless told so.
  if [ "$(id -u)" = 0 ]; then sandbox=(-o APT::Sandbox::User=root); fi
  (cd "$src_cache" && apt-get source --download-only "${sandbox[@]}" trilinos)
  dsc="$(cached_dsc)"
  [ -n "$dsc" ] || die "apt-get source trilinos left no intact .dsc in $src_cache"
else
  log "cached: $(basename "$dsc")"
fi
orig="$(awk '/^Checksums-Sha256:/ { on = 1; next } /^[^ ]/ { on = 0 } on && $3 ~ /\.orig\.tar\./ { print $3 }' "$dsc")"
if [ -z "$orig" ] || [ ! -f "$src_cache/$orig" ]; then die "no orig tarball listed in $dsc"; fi
step_end

# 3. packages/kokkos only (12 MB of the 166 MB tarball).
step_begin "extract packages/kokkos"
marker="$kokkos_src/.qsgd-extracted-from"
if [ -f "$marker" ] && [ "$(cat "$marker")" = "$orig" ]; then
  log "already extracted from $orig"
else
  rm -rf "$kokkos_src" "$src_cache/extract.tmp"
  mkdir "$src_cache/extract.tmp"
  # Only members under <top>/packages/kokkos are written ('*' matches one
  # path component, so packages/kokkos-kernels and deeper 'kokkos' dirs don't).
  tar -xf "$src_cache/$orig" -C "$src_cache/extract.tmp" \
    --wildcards --no-wildcards-match-slash '*/packages/kokkos'
  set -- "$src_cache"/extract.tmp/*/packages/kokkos
  [ -d "$1" ] || die "no packages/kokkos in $orig"
  mv "$1" "$kokkos_src"
  rm -rf "$src_cache/extract.tmp"
  echo "$orig" > "$marker"
fi
v="$(sed -n 's/^set(Kokkos_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\))/\2/p' "$kokkos_src/CMakeLists.txt" | paste -sd.)"
[ "$v" = "$kokkos_version" ] || die "expected Kokkos $kokkos_version in $orig, found '$v'"
log "Kokkos $v in $kokkos_src"
step_end

# 4. Configure (a build tree configured with other options is started afresh).
step_begin "configure"
cfg_text="$stamp_text prefix=$prefix"
if [ -f "$build_dir/.qsgd-options" ] && [ "$(cat "$build_dir/.qsgd-options")" = "$cfg_text" ] \
   && [ -f "$build_dir/CMakeCache.txt" ]; then
  log "reusing $build_dir"
else
  rm -rf "$build_dir"
fi
cmake -S "$kokkos_src" -B "$build_dir" \
  "-DCMAKE_CXX_COMPILER=$kokkos_src/bin/nvcc_wrapper" \
  "-DCMAKE_INSTALL_PREFIX=$prefix" \
  "${kokkos_opts[@]}"
echo "$cfg_text" > "$build_dir/.qsgd-options"
step_end

# 5. Build and install.
step_begin "build"
cmake --build "$build_dir" -j 2
step_end
step_begin "install"
rm -f "$stamp"
cmake --install "$build_dir"
config="$(compgen -G "$prefix/lib*/cmake/Kokkos/KokkosConfig.cmake" | head -n 1 || true)"
[ -n "$config" ] || die "no KokkosConfig.cmake under $prefix/lib*/cmake/Kokkos"
[ -x "$prefix/bin/nvcc_wrapper" ] || die "$prefix/bin/nvcc_wrapper was not installed"
echo "$stamp_text" > "$stamp"
step_end

log "done in $(awk -v a="$t_all" -v b="$(now)" 'BEGIN { printf "%.0f", b - a }') s"
print_usage
