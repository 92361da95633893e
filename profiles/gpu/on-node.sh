#!/usr/bin/env bash
# The one prepared command for a GPU machine that receives this checkout with
# a package archive beside it (package.sh --archive) and returns at most 8
# files from one folder: unpacks the archive under /tmp, runs its run.sh with
# --pack into RETURN_DIR, and keeps the whole console output there too.
#
#   profiles/gpu/on-node.sh ARCHIVE RETURN_DIR [run.sh options ...]
#     ARCHIVE     build/gpu-trainer.tar.xz or build/gpu-kernels.tar.xz
#     RETURN_DIR  the folder whose files come back: <results>.tar.xz,
#                 summary.txt, failures.txt (when a step failed), run.log,
#                 node.txt (nvidia-smi, nvcc, ncu and cuBLAS as found)
#
# Exit status: run.sh's; 2 for bad usage or an archive that does not unpack.
# The unpacked package and its results folder under /tmp are removed at the end.
set -uo pipefail
case "${1:-}" in -h|--help) sed -n '2,/^set -uo pipefail$/{/^set -uo pipefail$/!p}' "$0"; exit 0 ;; esac
[ $# -ge 2 ] || { echo "on-node: usage: on-node.sh ARCHIVE RETURN_DIR [run.sh options]" >&2; exit 2; }
archive="$(realpath -m "$1")" back="$(realpath -m "$2")"
shift 2
[ -f "$archive" ] || { echo "on-node: $archive not found (carry it: package.sh --archive)" >&2; exit 2; }
mkdir -p "$back"
work="$(mktemp -d /tmp/qsgd-gpu.XXXXXX)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
{
  echo "== node"
  date -u +%FT%TZ
  nvidia-smi 2>&1 | head -n 15
  command -v nvcc > /dev/null && nvcc --version | tail -n 2
  command -v ncu > /dev/null && ncu --version | tail -n 1
  ldconfig -p 2>/dev/null | grep -E 'libcublas\.so\.[0-9]+ ' || echo "no cuBLAS in the loader's cache"
} > "$back/node.txt" 2>&1
tar -xJf "$archive" -C "$work" || { echo "on-node: $archive does not unpack" >&2; exit 2; }
pkg="$(find "$work" -mindepth 2 -maxdepth 2 -name run.sh -printf '%h\n' | head -n 1)"
[ -n "$pkg" ] || { echo "on-node: no run.sh in $archive" >&2; exit 2; }
"$pkg/run.sh" --pack "$back" "$@" "$work/results" 2>&1 | tee "$back/run.log"
rc=${PIPESTATUS[0]}
echo "on-node: run.sh exit $rc after $((SECONDS - start)) s" | tee -a "$back/run.log"
exit "$rc"
