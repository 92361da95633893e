#!/usr/bin/env bash
# Replays the bundled model descriptions (benchmarks/replay/models) through
# the suite's exchanges and writes the traces, their summary and the table of
# docs/replay.md's "Results" into OUT. For every model, one qsgd-sweep per set
# of links (all into OUT, one trace per run, a complete trace kept):
#   shared memory and 1 Gbit/s links at K = 2 and 4 (BERT-large: K = 2),
#   10 Gbit/s links at K = 2,
# each with the fp32 ring, bf16, 4- and 2-bit QSGD (fixed-width code; allgather
# and scatter-reduce, the table shows the faster), 4-bit QSGD with the rANS
# code (both strategies) and PowerSGD of rank 4 with its error feedback.
# Before the first run, what qsgd-model is calibrated on (calibrate.sh: the
# coding rates at s = 16 and 4 up to 2^24 elements, PowerSGD's kernels at
# r = 4, fp32 ring fits of shared memory, unshaped, 1 and 10 Gbit/s links,
# and the link ceiling of every emulated rate at K = 2 and 4, one 64 MiB ring
# of K ranks) into OUT/calibration, which qsgd-summary
# and qsgd-model replay read; after the last, the ceilings again
# (OUT/calibration-after).
#
#   benchmarks/replay/results.sh OUT [--models LIST] [--max-steps N] [--build DIR] [--dry-run]
#     --models LIST   descriptions in benchmarks/replay/models, without .json
#                     (default resnet50,vit_b_16,bert-base,bert-large)
#     --max-steps N   steps per run (default 10; the first is not counted)
#     --build DIR     a build holding benchmarks/qsgd-train and qsgd-bench-exchange
#                     (default build/release)
#     --dry-run       print the sweeps' commands, run nothing
#     -h, --help      this text
#
# OUT/summary.txt and summary.json: qsgd-summary of every trace; the results
# report's table: benchmarks/report/run-reference.sh replay-models. Needs root (network
# namespaces) and about 24 GB of memory for BERT-large at K = 2 (about 5 GB
# per rank). Run on an otherwise idle machine: the numbers are timings. About
# an hour on a 2-core machine at the defaults; re-running the same command
# redoes only the runs without a complete trace.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
[ $# -ge 1 ] && [ "${1#-}" = "$1" ] || { case "${1:-}" in -h|--help) usage; exit 0 ;; esac; usage >&2; exit 2; }
out="$(realpath -m "$1")"; shift
models=resnet50,vit_b_16,bert-base,bert-large
steps=10
build="$root/build/release"
dry=0
while [ $# -gt 0 ]; do
  case "$1" in
    --models) models="${2:?--models needs a list}"; shift 2 ;;
    --max-steps) steps="${2:?--max-steps needs a number}"; shift 2 ;;
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    --dry-run) dry=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "results.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[[ "$steps" =~ ^[0-9]+$ ]] && [ "$steps" -ge 2 ] || { echo "results.sh: --max-steps takes a whole number >= 2, got '$steps'" >&2; exit 2; }
cd "$root"  # the traces name their description relative to the repository
sweep="$root/benchmarks/scaling/qsgd-sweep"
IFS=, read -r -a model_list <<< "$models"
for m in "${model_list[@]}"; do
  [ -f "$root/benchmarks/replay/models/$m.json" ] ||
    { echo "results.sh: no description benchmarks/replay/models/$m.json (--models)" >&2; exit 2; }
done
if [ "$dry" = 0 ]; then
  for p in qsgd-train qsgd-bench-exchange; do
    [ -x "$build/benchmarks/$p" ] || { echo "results.sh: $build/benchmarks/$p not found (cmake --build --preset release)" >&2; exit 2; }
  done
  mkdir -p "$out"
  echo "benchmarks/replay/results.sh $out --models $models --max-steps $steps --build $build  # $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$root" describe --always --dirty --abbrev=7)" >> "$out/COMMAND"
  "$root/benchmarks/report/machine-info" > "$out/machine.json"
fi

calibrate() {  # calibrate DIR PARTS: calibrate.sh on every link of the runs, ceilings at K = 2 and 4
  local cmd=("$root/benchmarks/model/calibrate.sh" --out "$1" --parts "$2" --link local,unshaped,1gbit,10gbit
             --ranks 2,4 --levels 16,4 --kernel-max 16777216 --build "$build")
  if [ "$dry" = 1 ]; then echo "${cmd[*]}"; return; fi
  "${cmd[@]}"
}
[ -f "$out/calibration/ceiling-10gbit-K4.json" ] || calibrate "$out/calibration" kernels,powersgd,fits,ceilings  # kept when re-run

failed=0
run_sweep() {  # run_sweep ARGS...: one qsgd-sweep into OUT; a failed run is counted, the others go on
  local cmd=("$sweep" --out "$out" --max-steps "$steps" --build "$build" --no-plots "$@")
  if [ "$dry" = 1 ]; then "${cmd[@]}" --dry-run; return; fi
  "${cmd[@]}" > "$out/sweep.log.tmp" 2>&1 || failed=$((failed + 1))
  grep -E '^\[[0-9]+/[0-9]+\]|done in|failed|qsgd-sweep:' "$out/sweep.log.tmp" >&2 || true
  cat "$out/sweep.log.tmp" >> "$out/sweep.log"
  rm -f "$out/sweep.log.tmp"
}
for m in "${model_list[@]}"; do
  file="benchmarks/replay/models/$m.json"
  ranks=2,4
  [ "$m" = bert-large ] && ranks=2  # about 5 GB per rank
  for links in "local,1gbit $ranks" "10gbit 2"; do
    read -r l k <<< "$links"
    echo "results.sh: $m, links $l, K = $k" >&2
    common=(--model replay --model-file "$file" --link "$l" --ranks "$k" --strategies allgather,scatter-reduce)
    run_sweep "${common[@]}" --configs fp32,bf16,4bit,2bit,psgd4
    run_sweep "${common[@]}" --configs 4bit --codec rans
  done
done
[ "$dry" = 1 ] && exit 0
calibrate "$out/calibration-after" ceilings
/usr/bin/python3 "$root/benchmarks/scaling/qsgd-summary" --json "$out" > "$out/summary.json"
/usr/bin/python3 "$root/benchmarks/scaling/qsgd-summary" "$out" | tee "$out/summary.txt"
[ "$failed" = 0 ] || { echo "results.sh: $failed sweep(s) had failed runs (OUT/sweep.log); re-run the same command to redo them" >&2; exit 1; }
