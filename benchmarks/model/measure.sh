#!/usr/bin/env bash
# Measures on this machine, in one session, what qsgd-model is calibrated on
# and validated against (docs/model.md), into OUT (made empty first):
#
#   kernels.json, fit-RATE.json, links.json, ceiling-RATE-K<K>.json, machine.json
#                         the calibration (benchmarks/model/calibrate.sh): kernel
#                         rates at n = 2^20 and 2^22, per link rate the fp32 ring
#                         allreduce at K = 2 from 64 KiB to 64 MiB (16 MiB at
#                         100mbit), on which alpha and beta are fitted and nothing
#                         else, and the link ceiling of each K on each rate, which
#                         bounds the step traces' hidden time (qsgd-summary)
#   val-RATE-K<K>.json    every strategy and codec at 16 MiB, K = 2, 3, 4, ring
#                         transport (param-server: the library's collectives):
#                         the rows the model predicts without having seen them
#   steps/                training traces (qsgd-sweep): MLP 784-2048-2048-10 and the
#                         CNN, K = 1 on shared memory (the compute the model starts
#                         from), K = 2, 3, 4 at 10gbit and 1gbit, fp32 and bf16
#                         allreduce and 4-bit QSGD with allgather and scatter-reduce
#   compute/              the same models' K = 1 fp32 runs, K copies at once (K = 1, 2, 3, 4):
#                         the compute of a rank when K ranks share the cores
#                         With --step-rounds R > 1 (default 3), steps and compute are measured
#                         R times, round after round (steps/round-R/, compute/round-R/): one
#                         run of a configuration and the same one minutes later differ by
#                         13-47% on this machine, and qsgd-model takes the median of the rounds
#   signs/round-R/        only with --parts signs (not a default part): the break-even
#                         check repeated, R = 1..--rounds (default 5): MLP and CNN at
#                         K = 4 on each --step-link link, fp32 ring and 4-bit QSGD
#                         with allgather and scatter-reduce, the three of a model and
#                         rate back to back (qsgd-model validate --signs reads it)
#
#   benchmarks/model/measure.sh OUT [--link unshaped,10gbit,1gbit,100mbit] [--ranks 2,3,4]
#                                   [--step-link 10gbit,1gbit] [--parts exchange,steps,compute]
#                                   [--rounds R] [--step-rounds R]
#   (aliases: --rates = --link, --ks = --ranks, --step-rates = --step-link)
#
# About 25 minutes with three step rounds (each round about 4). A run of some --parts makes a directory with only
# those parts (development). Needs root (network namespaces) and the release build.
# Run on an otherwise idle machine: the numbers are timings.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
out="$1"; shift
rates=unshaped,10gbit,1gbit,100mbit
ks=2,3,4
step_rates=10gbit,1gbit
parts=exchange,steps,compute
rounds=5
step_rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --link|--rates) rates="$2"; shift 2 ;;
    --ranks|--ks) ks="$2"; shift 2 ;;
    --step-link|--step-rates) step_rates="$2"; shift 2 ;;
    --parts) parts="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --step-rounds) step_rounds="$2"; shift 2 ;;
    *) echo "measure.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
bin="$root/build/release/benchmarks"
net="$root/benchmarks/scaling/netlab.sh"
for p in qsgd-bench-kernels qsgd-bench-exchange qsgd-train; do
  [ -x "$bin/$p" ] || { echo "measure.sh: $bin/$p missing (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
done
. "$root/scripts/openmpi-env.sh"
rm -rf "${out:?}"
mkdir -p "$out"
[[ "$step_rounds" =~ ^[1-9][0-9]*$ ]] || { echo "measure.sh: --step-rounds must be a positive integer" >&2; exit 2; }
echo "benchmarks/model/measure.sh OUT --link $rates --ranks $ks --step-link $step_rates --parts $parts --rounds $rounds --step-rounds $step_rounds  # $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$root" describe --always --dirty --abbrev=7)" \
  > "$out/COMMAND"
"$root/benchmarks/report/machine-info" > "$out/machine.json"

has_part() { [[ ",$parts," == *",$1,"* ]]; }

if has_part exchange; then
  "$root/benchmarks/model/calibrate.sh" --out "$out" --link "$rates" --ranks "$ks" --build "$root/build/release"
  IFS=, read -r -a rate_list <<< "$rates"
  IFS=, read -r -a k_list <<< "$ks"
  for rate in "${rate_list[@]}"; do
    for k in "${k_list[@]}"; do
      "$net" --nodes "$k" --rate "$rate" -- "$bin/qsgd-bench-exchange" -b 16M -e 16M -w 2 -n 10 \
        --strategies allreduce,allreduce16,allgather,param-server,scatter-reduce --codecs fixed,rans,elias-dense \
        --transports ring -o "$out/val-$rate-K$k.json" | tee "$out/val-$rate-K$k.txt"
    done
  done
fi

# One round of the training steps into DIR (qsgd-sweep).
measure_steps() {
  local sweep="$root/benchmarks/scaling/qsgd-sweep" m margs
  local common=(--out "$1" --configs fp32,bf16,4bit --strategies allgather,scatter-reduce --eval-limit 200 --no-plots)
  for m in "mlp --mlp-widths 784,2048,2048,10 --max-steps 16" "cnn --max-steps 12"; do
    read -r -a margs <<< "$m"
    "$sweep" "${common[@]}" --model "${margs[@]}" --ranks 1 --link local
    "$sweep" "${common[@]}" --model "${margs[@]}" --ranks "$ks" --link "$step_rates"
  done
}

# One round of the compute into DIR: K independent one-rank runs at once, no
# network, only the shared cores.
measure_compute() {
  local m margs
  for m in "mlp --mlp-widths 784,2048,2048,10 --max-steps 16" "cnn --max-steps 12"; do
    read -r -a margs <<< "$m"
    "$root/benchmarks/model/measure-compute.sh" --out "$1" --name "${margs[0]}" --ranks "1,$ks" -- --model "${margs[@]}" \
      --batch 128 --epochs 1 --lr 0.05 --eval-limit 200 --quiet --strategy allreduce --codec fp32
  done
}

for r in $(seq 1 "$step_rounds"); do
  sub=""
  [ "$step_rounds" = 1 ] || sub="/round-$r"
  if has_part steps; then measure_steps "$out/steps$sub"; fi
  if has_part compute; then measure_compute "$out/compute$sub"; fi
  if has_part steps || has_part compute; then echo "steps and compute: round $r of $step_rounds done" >&2; fi
done

if has_part signs; then
  # The speedups behind the break-even signs, measured again and again: one
  # pair of runs minutes apart differed by more than the 1% that decides a
  # sign (docs/model.md). Each round runs, per link rate and model, the fp32
  # ring and both 4-bit strategies back to back, so every round's speedup
  # compares runs seconds apart; the rounds show the spread.
  sweep="$root/benchmarks/scaling/qsgd-sweep"
  k_max="${ks##*,}"
  # The link ceiling K ranks reach on each rate: qsgd-summary bounds the
  # rounds' hidden time by it (ceiling-RATE-K<K>.json at the top of OUT).
  has_part exchange || "$root/benchmarks/model/calibrate.sh" --out "$out" --link "$step_rates" --ranks "$k_max" \
    --parts ceilings --build "$root/build/release"
  IFS=, read -r -a srate_list <<< "$step_rates"
  for r in $(seq 1 "$rounds"); do
    for rate in "${srate_list[@]}"; do
      for m in "mlp --mlp-widths 784,2048,2048,10 --max-steps 16" "cnn --max-steps 12"; do
        read -r -a margs <<< "$m"
        "$sweep" --out "$out/signs/round-$r" --configs fp32,4bit --strategies allgather,scatter-reduce \
          --eval-limit 200 --no-plots --model "${margs[@]}" --ranks "$k_max" --link "$rate"
      done
    done
    echo "signs: round $r of $rounds done" >&2
  done
fi
