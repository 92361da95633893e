#!/usr/bin/env bash
# The compute of a rank when K ranks share this machine's cores, without a
# network: for each K of --ranks, K one-rank qsgd-train runs started at once,
# each writing DIR/NAME-K<K>-copy<I>.h5 (and its .log; copies of an earlier
# measurement of the same NAME and K are replaced). qsgd-model reads the
# folder as the compute of its step predictions (docs/model.md).
#
#   benchmarks/model/measure-compute.sh --out DIR --name NAME [--ranks LIST] [--build DIR] -- QSGD-TRAIN-ARGS
#     --out DIR     where the traces go (created if missing)
#     --name NAME   the model's name in the file names (mlp, cnn, lstm)
#     --ranks LIST  K values (1,2,4)
#     --build DIR   build tree with benchmarks/qsgd-train (default build/release)
#     -h, --help    this text
#   QSGD-TRAIN-ARGS: the run's model and training options (qsgd-train --help),
#   without --trace and --label, which this script sets.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="" name="" ranks="1,2,4" build="$root/build/release"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --name) name="${2:?--name needs a name}"; shift 2 ;;
    --ranks) ranks="${2:?--ranks needs a list}"; shift 2 ;;
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "measure-compute.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] && [ -n "$name" ] || { echo "measure-compute.sh: --out DIR and --name NAME are required (see --help)" >&2; exit 2; }
train="$build/benchmarks/qsgd-train"
[ -x "$train" ] || { echo "measure-compute.sh: $train missing (cmake --build --preset release)" >&2; exit 2; }
. "$root/scripts/openmpi-env.sh"
export OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
IFS=, read -r -a k_list <<< "$ranks"
for k in "${k_list[@]}"; do
  [[ "$k" =~ ^[1-9][0-9]*$ ]] || { echo "measure-compute.sh: --ranks takes positive whole numbers, got '$k'" >&2; exit 2; }
  rm -f "$out/$name-K$k-copy"*.h5 "$out/$name-K$k-copy"*.h5.log  # a run measured again replaces its copies
  pids=()
  for i in $(seq 1 "$k"); do
    mpirun -np 1 --bind-to none -x OPENBLAS_NUM_THREADS "$train" "$@" --trace "$out/$name-K$k-copy$i.h5" \
      --label "compute, $k copies" > "$out/$name-K$k-copy$i.h5.log" 2>&1 &
    pids+=($!)
  done
  rc=0
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  [ "$rc" = 0 ] || { echo "measure-compute.sh: a copy of $name at K = $k failed; logs: $out/$name-K$k-copy*.h5.log" >&2; exit 1; }
  echo "compute: $name, $k copies at once" >&2
done
