#!/usr/bin/env bash
# Accuracy parity on real data (Fashion-MNIST; the char-LSTM on its text
# corpus, held-out next-character accuracy), 4 ranks: fp32 against 8-, 4- and
# 2-bit QSGD (paper convention s = 2^bits, d = 512, max norm; fixed-width
# code, allgather) and the other gradients below, same epochs, seeds and
# hyper-parameters per model.
#
#   accuracy-experiment.sh [options] [OUT_DIR [BUILD_DIR]]
#     --out DIR        traces and summary.txt (default results/accuracy-<UTC time>)
#     --build DIR      build tree with benchmarks/qsgd-train (default build/release)
#     --models LIST    mlp, cnn, lstm (default mlp,cnn)
#     --configs LIST   fp32; bf16 (bf16 allreduce); B (QSGD, s = 2^B); sN (QSGD,
#                      s = N levels); ssB (shared-scale scatter-reduce, s = 2^B);
#                      a QSGD or shared-scale configuration with +ef,
#                      +ef-unscaled or +ef21 (2+ef, s1+ef21, ss4+ef) runs with
#                      that error feedback; psgdR (PowerSGD of rank R;
#                      psgdR+ef-unscaled: with its error feedback, as published)
#                      (default fp32,8,4,2)
#     --seeds LIST     seeds of every configuration (default 1)
#     --mlp-widths W   the MLP's widths (default 784,4096,4096,10)
#     --epochs N       epochs of every model (default: MLP 3, CNN 5, LSTM 30)
# Traces are <model>-K4-<config>.h5 (seed 1) or <model>-K4-<config>-seed<N>.h5;
# re-running skips runs whose complete trace exists (an incomplete one is
# moved aside), so a long campaign resumes where it stopped.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="" build="$root/build/release" models="mlp,cnn" configs="fp32,8,4,2" seeds="1" widths="784,4096,4096,10"
epochs=""
pos=()
usage() { sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    --out|--build|--models|--configs|--seeds|--mlp-widths|--epochs)
      [ $# -ge 2 ] || { echo "accuracy-experiment: $1 needs a value" >&2; exit 2; }
      case "$1" in
        --out) out="$2" ;; --build) build="$2" ;; --models) models="$2" ;; --configs) configs="$2" ;;
        --seeds) seeds="$2" ;; --mlp-widths) widths="$2" ;; --epochs) epochs="$2" ;;
      esac
      shift 2 ;;
    -h|--help) usage ;;
    -*) echo "accuracy-experiment: unknown option '$1'" >&2; usage ;;
    *) pos+=("$1"); shift ;;
  esac
done
[ ${#pos[@]} -le 2 ] || usage
[ ${#pos[@]} -lt 1 ] || out="${pos[0]}"
[ ${#pos[@]} -lt 2 ] || build="${pos[1]}"
[ -n "$out" ] || out="$root/results/accuracy-$(date -u +%Y%m%d-%H%M%S)"
train="$build/benchmarks/qsgd-train"
[ -x "$train" ] || { echo "accuracy-experiment: $train not found (cmake --preset release && cmake --build --preset release)" >&2; exit 1; }

# Every configuration's qsgd-train options, checked before anything runs.
declare -A cfg_args=()
IFS=, read -r -a clist <<< "$configs"
for cfg in "${clist[@]}"; do
  base="${cfg%%+*}" fb=()
  if [ "$base" != "$cfg" ]; then
    case "${cfg#*+}" in
      ef|ef-unscaled|ef21) fb=(--error-feedback "${cfg#*+}") ;;
      *) echo "accuracy-experiment: '$cfg': error feedback is +ef, +ef-unscaled or +ef21" >&2; exit 2 ;;
    esac
  fi
  case "$base" in
    fp32|bf16) [ ${#fb[@]} -eq 0 ] || { echo "accuracy-experiment: $base has nothing to feed back" >&2; exit 2; }
          q=(--strategy allreduce --codec fp32)
          [ "$base" = fp32 ] || q=(--strategy allreduce16 --codec bf16) ;;
    [0-9]|[0-9][0-9]) q=(--strategy allgather --codec fixed --bits "$base" --d 512 --norm max) ;;
    s[0-9]*) q=(--strategy allgather --codec fixed --s "${base#s}" --d 512 --norm max) ;;
    ss[0-9]|ss[0-9][0-9]) q=(--strategy shared-scale --codec fixed --bits "${base#ss}" --d 512 --norm max) ;;
    psgd[0-9]*) q=(--strategy powersgd --powersgd-rank "${base#psgd}") ;;
    *) echo "accuracy-experiment: unknown configuration '$cfg' (fp32, bf16, B, sN, ssB, psgdR, with +ef...)" >&2; exit 2 ;;
  esac
  cfg_args[$cfg]="${q[*]} ${fb[*]}"
done

mkdir -p "$out"
. "$root/scripts/openmpi-env.sh"
# One BLAS thread per rank (K ranks share the cores), as the sweeps run: the
# thread count changes OpenBLAS's summation order, so traces made with other
# counts differ in their bits.
export OPENBLAS_NUM_THREADS=1
K=4
declare -A hyper=(
  [mlp]="--model mlp --mlp-widths $widths --epochs ${epochs:-3} --lr 0.02 --warmup 50 --lr-decay cosine --momentum 0.9 --batch 128"
  [cnn]="--model cnn --epochs ${epochs:-5} --lr 0.05 --warmup 50 --lr-decay cosine --momentum 0.9 --batch 128"
  # The LSTM clips the averaged gradient to norm 0.5: without clipping, at
  # learning rate 2, 5 of 21 runs over seeds 1-3 diverged (fp32 seed 3 among
  # them), and at 1 the 8-bit run of seed 1 did (loss 2.9 to 21 in epochs
  # 7-12). Seed 1's unclipped fp32 run at 1 has gradient norms of median
  # 0.22, 99th percentile 0.55, peaks 0.69-0.86 in those epochs; clipped at
  # 0.5, that 8-bit run converges (50.8%) and learning rate 2 reaches 57.0%
  # (fp32) and 57.1% (8-bit) instead of 50.6%.
  [lstm]="--model lstm --dataset corpus --epochs ${epochs:-30} --lr 2 --clip-norm 0.5 --warmup 30 --lr-decay cosine --momentum 0.9 --batch 32"
)
IFS=, read -r -a mlist <<< "$models"
IFS=, read -r -a seedlist <<< "$seeds"
for model in "${mlist[@]}"; do
  [ -n "${hyper[$model]:-}" ] || { echo "accuracy-experiment: unknown model '$model' (mlp, cnn, lstm)" >&2; exit 2; }
  for cfg in "${clist[@]}"; do
    for seed in "${seedlist[@]}"; do
      case "$cfg" in fp32|bf16|s*|psgd*) name="$cfg" ;; *) name="${cfg/+/bit+}"; [[ "$name" == *bit* ]] || name="${cfg}bit" ;; esac
      [ "$seed" = 1 ] || name="$name-seed$seed"
      t="$out/$model-K$K-$name.h5"
      if [ -f "$t" ] && h5dump -a /complete "$t" 2>/dev/null | grep -q '"true"'; then
        echo "skip $model $name"; continue
      fi
      [ -e "$t" ] && mv "$t" "$t.failed-$(date -u +%Y%m%d-%H%M%S)"
      echo "== $model $name"
      # shellcheck disable=SC2086
      mpirun -np $K --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS "$train" ${hyper[$model]} ${cfg_args[$cfg]} --seed "$seed" --quiet \
        --trace "$t" --label "accuracy experiment" 2>&1 | tail -n 3
    done
  done
done
/usr/bin/python3 "$here/qsgd-summary" "$out" | tee "$out/summary.txt"
