#!/usr/bin/env bash
# Measures on this machine, in one session, what qsgd-model is calibrated on
# and validated against (docs/model.md), into OUT (made empty first):
#
#   kernels.json          qsgd-bench-kernels at n = 2^20 (an allgather piece) and 2^22
#                         (the exchanges' size), one core, 3 repetitions: the coding
#                         rates, taken at the size of the unit each strategy codes
#   fit-RATE.json         fp32 ring allreduce, K = 2, 64 KiB to 64 MiB (16 MiB at
#                         100mbit), one file per link rate: alpha and beta are
#                         fitted on these rows only
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
#                         K = 4 on each --step-rates link, fp32 ring and 4-bit QSGD
#                         with allgather and scatter-reduce, the three of a model and
#                         rate back to back (qsgd-model validate --signs reads it)
#   links.json            the tbf burst of every rate (netlab.sh --burst-of)
#   machine.json          CPU, cores, compiler, MPI
#
#   benchmarks/model/measure.sh OUT [--rates unshaped,10gbit,1gbit,100mbit] [--ks 2,3,4]
#                                   [--step-rates 10gbit,1gbit] [--parts exchange,steps,compute]
#                                   [--rounds R] [--step-rounds R]
#
# About 25 minutes with three step rounds (each round about 4). A run of some --parts makes a directory with only
# those parts (development). Needs root (network namespaces) and the release build.
# Run on an otherwise idle machine: the numbers are timings.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 1 ] || { sed -n '2,27p' "$0" >&2; exit 2; }
out="$1"; shift
rates=unshaped,10gbit,1gbit,100mbit
ks=2,3,4
step_rates=10gbit,1gbit
parts=exchange,steps,compute
rounds=5
step_rounds=3
while [ $# -gt 0 ]; do
  case "$1" in
    --rates) rates="$2"; shift 2 ;;
    --ks) ks="$2"; shift 2 ;;
    --step-rates) step_rates="$2"; shift 2 ;;
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
echo "benchmarks/model/measure.sh OUT --rates $rates --ks $ks --step-rates $step_rates --parts $parts --rounds $rounds --step-rounds $step_rounds  # $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$root" rev-parse --short HEAD)" \
  > "$out/COMMAND"
"$root/benchmarks/report/machine-info" > "$out/machine.json"

has_part() { [[ ",$parts," == *",$1,"* ]]; }

if has_part exchange; then
  taskset -c 0 "$bin/qsgd-bench-kernels" --qsgd_n_min=1048576 --qsgd_n_max=4194304 --benchmark_repetitions=3 \
    --benchmark_report_aggregates_only=true \
    --benchmark_filter='memcpy/kokkos|^quantize|^encode/|^decode_accumulate/|^decode/' \
    --benchmark_out="$out/kernels.json" --benchmark_out_format=json > "$out/kernels.txt" 2>&1

  IFS=, read -r -a rate_list <<< "$rates"
  IFS=, read -r -a k_list <<< "$ks"
  {
    sep="{"
    for rate in "${rate_list[@]}"; do
      printf '%s\n "%s": {"tbf_burst_bytes": %s}' "$sep" "$rate" "$("$net" --burst-of "$rate")"
      sep=","
    done
    printf '\n}\n'
  } > "$out/links.json"
  for rate in "${rate_list[@]}"; do
    top=64M
    [ "$rate" = 100mbit ] && top=16M
    "$net" --nodes 2 --rate "$rate" -- "$bin/qsgd-bench-exchange" -b 64K -e "$top" -f 4 -w 2 -n 10 \
      --strategies allreduce --transports ring -o "$out/fit-$rate.json" | tee "$out/fit-$rate.txt"
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
  for m in "mlp --widths 784,2048,2048,10 --steps 16" "cnn --steps 12"; do
    read -r -a margs <<< "$m"
    "$sweep" "${common[@]}" --model "${margs[@]}" --ranks 1 --link local
    "$sweep" "${common[@]}" --model "${margs[@]}" --ranks "$ks" --link "$step_rates"
  done
}

# One round of the compute into DIR: K independent one-rank runs at once, no
# network, only the shared cores.
measure_compute() {
  local m margs k i p pids
  mkdir -p "$1"
  IFS=, read -r -a k_list <<< "1,$ks"
  for m in "mlp --mlp-widths 784,2048,2048,10 --max-steps 16" "cnn --max-steps 12"; do
    read -r -a margs <<< "$m"
    for k in "${k_list[@]}"; do
      pids=()
      for i in $(seq 1 "$k"); do
        OPENBLAS_NUM_THREADS=1 mpirun -np 1 --bind-to none -x OPENBLAS_NUM_THREADS "$bin/qsgd-train" --model "${margs[@]}" \
          --batch 128 --epochs 1 --lr 0.05 --eval-limit 200 --quiet --strategy allreduce --codec fp32 \
          --trace "$1/${margs[0]}-K$k-copy$i.h5" --label "compute, $k copies" \
          > "$1/${margs[0]}-K$k-copy$i.h5.log" 2>&1 &
        pids+=($!)
      done
      for p in "${pids[@]}"; do wait "$p"; done
      echo "compute: ${margs[0]}, $k copies at once" >&2
    done
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
  IFS=, read -r -a srate_list <<< "$step_rates"
  for r in $(seq 1 "$rounds"); do
    for rate in "${srate_list[@]}"; do
      for m in "mlp --widths 784,2048,2048,10 --steps 16" "cnn --steps 12"; do
        read -r -a margs <<< "$m"
        "$sweep" --out "$out/signs/round-$r" --configs fp32,4bit --strategies allgather,scatter-reduce \
          --eval-limit 200 --no-plots --model "${margs[@]}" --ranks "$k_max" --link "$rate"
      done
    done
    echo "signs: round $r of $rounds done" >&2
  done
fi
