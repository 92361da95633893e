#!/usr/bin/env bash
# Compares one MLP training step of qsgd::models with PyTorch's on one core.
#
#   benchmarks/models/compare_mlp_step.sh [BENCH_BINARY] [options for both]
#   benchmarks/models/compare_mlp_step.sh -h|--help
#
# BENCH_BINARY defaults to build/release/benchmarks/models/qsgd-bench-mlp-step
# (cmake --preset release && cmake --build --preset release). Both programs
# run pinned to core $QSGD_BENCH_CORE (default 0) with one BLAS/OpenMP thread
# and the same model, batch and optimizer; the options go to both:
#   --mlp-widths LIST (784,4096,4096,10)  --batch N (128)  -w, --warmup N (3)
#   -n, --iters N timed steps (20)  --lr X (0.01)  --momentum X (0.9)
#   --weight-decay X (0)  --seed N (1)
#   (aliases: --widths for --mlp-widths, --steps for --iters; the script
#   names the JSON files itself: no --out)
# The pair runs $QSGD_BENCH_REPEAT times (default 3), alternating, so that a
# change in machine load hits both sides alike. Prints each run's medians
# and ratio = qsgd median / torch median (< 1: qsgd faster), then the median
# ratio over the runs. JSON results are kept in $QSGD_BENCH_OUT (default: a
# temporary directory).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
case "${1:-}" in -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;; esac
bin="$root/build/release/benchmarks/models/qsgd-bench-mlp-step"
if [ $# -gt 0 ] && [[ "$1" != -* ]]; then bin="$1"; shift; fi
# torch_mlp_step.py takes the old spellings: the same options, renamed for it.
targs=()
for a in "$@"; do
  case "$a" in
    --mlp-widths) targs+=(--widths) ;;
    -n|--iters) targs+=(--steps) ;;
    -w) targs+=(--warmup) ;;
    *) targs+=("$a") ;;
  esac
done
core="${QSGD_BENCH_CORE:-0}"
out="${QSGD_BENCH_OUT:-$(mktemp -d)}"
mkdir -p "$out"

if [ ! -x "$bin" ]; then
  echo "compare_mlp_step: $bin not found; build it with: cmake --preset release && cmake --build --preset release" >&2
  exit 2
fi
if ! /usr/bin/python3 -c "import torch" 2>/dev/null; then
  echo "compare_mlp_step: /usr/bin/python3 cannot import torch (scripts/install-deps.sh --torch)" >&2
  exit 2
fi

repeat="${QSGD_BENCH_REPEAT:-3}"

export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
for r in $(seq 1 "$repeat"); do
  taskset -c "$core" "$bin" --out "$out/qsgd.$r.json" "$@"
  taskset -c "$core" /usr/bin/python3 "$here/torch_mlp_step.py" --threads 1 --json "$out/torch.$r.json" \
    ${targs[@]+"${targs[@]}"}
done

/usr/bin/python3 - "$out" "$repeat" <<'PY'
import json, statistics, sys
out, repeat = sys.argv[1], int(sys.argv[2])
runs = [(json.load(open(f"{out}/qsgd.{r}.json")), json.load(open(f"{out}/torch.{r}.json")))
        for r in range(1, repeat + 1)]
q0, t0 = runs[0]
cfg = q0["config"]
print(f"model {'-'.join(map(str, cfg['widths']))}  batch {cfg['batch']}  params {cfg['parameters']}  "
      f"{cfg['steps']} timed steps after {cfg['warmup']} warm-up, pinned to core(s) {q0['context']['affinity']}, 1 thread")
print(f"BLAS  qsgd: {q0['context']['blas']}")
print(f"      torch {t0['context']['torch_version']}: {t0['context']['blas']}")
print(f"{'run':>4s}  {'qsgd median':>12s} {'min':>8s} {'p99':>8s}  {'torch median':>12s} {'min':>8s} {'p99':>8s}  {'ratio':>6s}")
ratios = []
for i, (q, t) in enumerate(runs, 1):
    qs, ts = q["step_seconds"], t["step_seconds"]
    ratios.append(qs["median"] / ts["median"])
    print(f"{i:4d}  {qs['median']:12.4f} {qs['min']:8.4f} {qs['p99']:8.4f}  "
          f"{ts['median']:12.4f} {ts['min']:8.4f} {ts['p99']:8.4f}  {ratios[-1]:6.3f}")
p = q0["phase_seconds"]
print("qsgd phases, run 1 (median s): " + "  ".join(f"{k} {v['median']:.4f}" for k, v in p.items()))
print(f"qsgd heap allocations per step: {q0['heap_allocations_per_step']:g}, "
      f"workspace allocations in timed steps: {q0['workspace_allocations_in_timed_steps']}")
print(f"ratio qsgd/torch, median over {repeat} runs: {statistics.median(ratios):.3f}")
PY
echo "JSON: $out/{qsgd,torch}.<run>.json"
