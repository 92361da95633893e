#!/usr/bin/env bash
# Validates replay against real training (docs/replay.md, "Validation"): for
# each link, K and configuration, a real run of the MLP records its own
# description (--record-model) and the description is replayed at once with
# the same options (spinning: the description's times are this CPU's), then
# the real run once more, the three back to back: the replay's error sits
# beside how far two real runs of the same configuration differ. The description of each pair is recorded in that pair's
# configuration, so that it carries the compute of K ranks sharing the
# machine's cores as the replay does; one more replay per K and link runs the
# K = 1 description of the same model, to show what sharing the cores does
# to compute. validate-table reads OUT and writes OUT/validation.md.
#
#   benchmarks/replay/validate.sh OUT [--link local,1gbit] [--ranks 2,4] [--max-steps N]
#                                     [--mlp-widths LIST] [--build DIR]
#     --link LIST        local (shared memory) and/or emulated link rates (default local,1gbit)
#     --ranks LIST       K of the runs (default 2,4)
#     --max-steps N      steps per run (default 40; the first 4 are not counted)
#     --mlp-widths LIST  the MLP (default 784,4096,4096,10)
#     --build DIR        a build holding benchmarks/qsgd-train (default build/release, else build/ci)
#
# Needs root for emulated links (network namespaces). Run on an otherwise
# idle machine: the numbers are timings. About 1.5 minutes per pair at the defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
[ $# -ge 1 ] && [ "${1#-}" = "$1" ] || { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0" >&2; exit 2; }
out="$1"; shift
links=local,1gbit
ranks=2,4
steps=40
widths=784,4096,4096,10
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --link) links="$2"; shift 2 ;;
    --ranks) ranks="$2"; shift 2 ;;
    --max-steps) steps="$2"; shift 2 ;;
    --mlp-widths) widths="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "validate.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
if [ -z "$build" ]; then
  build="$root/build/release"
  [ -x "$build/benchmarks/qsgd-train" ] || build="$root/build/ci"
fi
train="$build/benchmarks/qsgd-train"
[ -x "$train" ] || { echo "validate.sh: $train not found (cmake --build --preset release)" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mkdir -p "$out"
{ echo "benchmarks/replay/validate.sh $out --link $links --ranks $ranks --max-steps $steps --mlp-widths $widths --build $build"
  echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ)"; echo "git $(git -C "$root" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"
} > "$out/COMMAND"
"$root/benchmarks/report/machine-info" > "$out/machine.json" 2>/dev/null || true
common=(--mlp-widths "$widths" --batch 128 --max-steps "$steps" --quiet)
configs=("fp32-ring:--strategy allreduce" "4bit-scatter-reduce:--strategy scatter-reduce --codec fixed --bits 4")
launch() {  # launch LINK K CMD...
  local link=$1 k=$2; shift 2
  if [ "$link" = local ]; then
    mpirun -np "$k" --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS "$@"
  else
    "$root/benchmarks/scaling/netlab.sh" --nodes "$k" --rate "$link" -- "$@"
  fi
}
run() {  # run NAME LINK K ARGS...: one qsgd-train run into OUT/NAME.h5 (kept if complete)
  local name=$1 link=$2 k=$3; shift 3
  rm -f "$out/$name.h5" "$out/$name.h5.journal"
  echo "validate: $name" >&2
  launch "$link" "$k" "$train" "$@" --trace "$out/$name.h5" > "$out/$name.log" 2>&1 ||
    { tail -5 "$out/$name.log" >&2; echo "validate.sh: $name failed (log $out/$name.log)" >&2; exit 1; }
}
# The K = 1 description: one rank alone on the machine.
run "real-local-K1-fp32-ring" local 1 "${common[@]}" --strategy allreduce --record-model "$out/desc-local-K1.json"
IFS=, read -r -a linklist <<< "$links"
IFS=, read -r -a klist <<< "$ranks"
for link in "${linklist[@]}"; do
  for k in "${klist[@]}"; do
    for c in "${configs[@]}"; do
      name="${c%%:*}"; read -r -a args <<< "${c#*:}"
      tag="$link-K$k-$name"
      run "real-$tag" "$link" "$k" "${common[@]}" "${args[@]}" --record-model "$out/desc-$tag.json"
      run "replay-$tag" "$link" "$k" --model replay --model-file "$out/desc-$tag.json" --max-steps "$steps" \
        --quiet "${args[@]}"
      # The real run once more: how far two real runs of the same configuration differ.
      run "again-$tag" "$link" "$k" "${common[@]}" "${args[@]}"
    done
    # The K = 1 description at this K: compute as one rank alone measured it.
    run "replayK1-$link-K$k-4bit-scatter-reduce" "$link" "$k" --model replay --model-file "$out/desc-local-K1.json" \
      --max-steps "$steps" --quiet --strategy scatter-reduce --codec fixed --bits 4
  done
done
/usr/bin/python3 "$root/benchmarks/replay/validate-table" "$out" > "$out/validation.md"
cat "$out/validation.md"
