#!/usr/bin/env bash
# Installs, from Debian's archive only, the packages the suite builds and runs
# with. Idempotent: a package already present is not touched, and apt is not
# called at all when nothing is missing.
#
#   scripts/install-deps.sh            core build + tests (Kokkos Serial, MPI, HDF5, ...)
#   scripts/install-deps.sh --python   also the Python stack used by summaries and plots
#   scripts/install-deps.sh --torch    also PyTorch and torchvision (the MLP-step yardstick, the DDP peer, the model describer)
#   scripts/install-deps.sh --cuda     also what the CUDA build needs (non-free)
#   scripts/install-deps.sh --slurm    also Slurm and munge (slurm/, tests/slurm);
#                                    their services are not started
#   scripts/install-deps.sh --nsys     also Nsight Systems 2022.4 (non-free), for
#                                    profiles/nsys and the `nsys` tests
#   scripts/install-deps.sh --fuzz     also clang 15, libFuzzer and the LLVM 15
#                                    symbolizer, for the fuzz preset (fuzz/README.md)
set -euo pipefail

want_python=0
want_torch=0
want_cuda=0
want_slurm=0
want_nsys=0
want_fuzz=0
for arg in "$@"; do
  case "$arg" in
    --python) want_python=1 ;;
    --torch) want_torch=1 ;;
    --cuda) want_cuda=1 ;;
    --slurm) want_slurm=1 ;;
    --nsys) want_nsys=1 ;;
    --fuzz) want_fuzz=1 ;;
    -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
    *) echo "install-deps: unknown option '$arg' (see --help)" >&2; exit 2 ;;
  esac
done

pkgs=(
  build-essential cmake ninja-build pkg-config git
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev libopenblas0-pthread
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libbenchmark-dev libgtest-dev nlohmann-json3-dev
  zlib1g-dev dataset-fashion-mnist
)
if [ "$want_python" = 1 ]; then
  pkgs+=(python3-numpy python3-h5py python3-matplotlib)
fi
if [ "$want_torch" = 1 ]; then
  pkgs+=(python3-torch python3-torchvision python3-numpy)
fi
if [ "$want_cuda" = 1 ]; then
  pkgs+=(nvidia-cuda-toolkit g++-11 dpkg-dev)
fi
if [ "$want_slurm" = 1 ]; then
  pkgs+=(slurm-wlm slurm-client munge)
fi
if [ "$want_nsys" = 1 ]; then
  pkgs+=(nsight-systems)
fi
if [ "$want_fuzz" = 1 ]; then
  # Debian 12's default clang is 14; the fuzz preset names clang-15, whose
  # libFuzzer runtime is a package of its own; llvm-15 has the symbolizer
  # that turns sanitizer reports into file:line.
  pkgs+=(clang-15 libfuzzer-15-dev llvm-15)
fi

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#pkgs[@]} packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ "$want_cuda" = 1 ] || [ "$want_nsys" = 1 ]; then
  # nvidia-cuda-toolkit and nsight-systems live in Debian's non-free component.
  "$(dirname "$0")/debian-sources.sh" --non-free
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Third-party sources on the host may be unreachable; Debian's own are enough.
$SUDO apt-get update -o Acquire::Retries=3 || echo "install-deps: apt-get update reported errors; continuing with the lists it fetched" >&2
# Package scripts (munge, slurmctld, slurmd) start their services; a temporary
# policy-rc.d that answers 101 ("action forbidden") stops that, and is removed
# afterwards even when the install fails. One that was already there is kept.
policy=/usr/sbin/policy-rc.d
own_policy=0
if [ "$want_slurm" = 1 ] && [ ! -e "$policy" ]; then
  trap 'if [ "$own_policy" = 1 ]; then $SUDO rm -f "$policy"; fi' EXIT
  trap 'exit 130' INT TERM HUP
  own_policy=1
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
  $SUDO chmod 755 "$policy"
fi
$SUDO apt-get install -y --no-install-recommends "${missing[@]}"
