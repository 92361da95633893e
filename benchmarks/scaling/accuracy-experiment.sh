#!/usr/bin/env bash
# Accuracy parity on real data (Fashion-MNIST, 4 ranks): fp32 against 8-, 4-
# and 2-bit QSGD (paper convention s = 2^bits, d = 512, max norm; fixed-width
# code, allgather), same epochs, seeds and hyper-parameters per model.
#
#   accuracy-experiment.sh [OUT_DIR] [BUILD_DIR]
# Writes one trace per run and OUT_DIR/summary.txt; re-running skips runs
# whose complete trace exists.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/results/accuracy-$(date -u +%Y%m%d-%H%M%S)}"
build="${2:-$root/build/release}"
train="$build/benchmarks/qsgd-train"
[ -x "$train" ] || { echo "accuracy-experiment: $train not found (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }
mkdir -p "$out"
. "$root/scripts/openmpi-env.sh"
K=4
declare -A hyper=(
  [mlp]="--model mlp --epochs 3 --lr 0.02 --warmup 50 --lr-decay cosine --momentum 0.9 --batch 128"
  [cnn]="--model cnn --epochs 5 --lr 0.05 --warmup 50 --lr-decay cosine --momentum 0.9 --batch 128"
)
for model in mlp cnn; do
  for cfg in fp32 8 4 2; do
    if [ "$cfg" = fp32 ]; then name=fp32; xargs=(--strategy allreduce --codec fp32)
    else name="${cfg}bit"; xargs=(--strategy allgather --codec fixed --bits "$cfg" --d 512 --norm max); fi
    t="$out/$model-K$K-$name.h5"
    if [ -f "$t" ] && h5dump -a /complete "$t" 2>/dev/null | grep -q '"true"'; then
      echo "skip $model $name"; continue
    fi
    [ -e "$t" ] && mv "$t" "$t.failed-$(date -u +%Y%m%d-%H%M%S)"
    echo "== $model $name"
    # shellcheck disable=SC2086
    mpirun -np $K --oversubscribe --bind-to none "$train" ${hyper[$model]} "${xargs[@]}" --seed 1 --quiet \
      --trace "$t" --label "accuracy experiment" 2>&1 | tail -n 3
  done
done
/usr/bin/python3 "$here/qsgd-summary" "$out" | tee "$out/summary.txt"
