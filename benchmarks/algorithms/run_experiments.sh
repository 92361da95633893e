#!/usr/bin/env bash
# Runs every algorithm experiment of docs/algorithms.md and plots them.
#
#   benchmarks/algorithms/run_experiments.sh OUTDIR
#
# Writes OUTDIR/{convex,qsvrg,dqgd,async}.json.xz (schema qsgd.algorithms/1, with
# provenance), the printed tables OUTDIR/*.txt, and the PNGs of
# plot_convergence.py. Builds qsgd-algorithms with the release preset when it
# is missing. A few minutes on two cores.
#
# Environment: QSGD_BUILD_DIR (default build/release), QSGD_ASYNC_RANKS
# (default 3: a server and two workers), QSGD_SEEDS (default 5),
# PYTHON (default /usr/bin/python3, with numpy and matplotlib:
# scripts/install-deps.sh --python).
set -euo pipefail

if [ $# -ne 1 ]; then
  sed -n '2,15p' "$0"
  exit 2
fi
out=$1
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${QSGD_BUILD_DIR:-$root/build/release}
bin=$build/benchmarks/qsgd-algorithms
ranks=${QSGD_ASYNC_RANKS:-3}
seeds=${QSGD_SEEDS:-5}
python=${PYTHON:-/usr/bin/python3}

if [ ! -x "$bin" ]; then
  (cd "$root" && cmake --preset release && cmake --build --preset release --target qsgd-algorithms)
fi
mkdir -p "$out"

mpiexec=${MPIEXEC:-mpirun}
. "$root/scripts/openmpi-env.sh"

run() {
  local name=$1
  shift
  echo "== $name: $*"
  local t0=$SECONDS
  "$@" | tee "$out/$name.txt"
  echo "($((SECONDS - t0)) s)"
}

run dqgd "$bin" dqgd --out "$out/dqgd.json"
run qsvrg "$bin" qsvrg --seeds "$seeds" --out "$out/qsvrg.json"
run convex "$bin" convex --seeds "$seeds" --out "$out/convex.json"
run async "$mpiexec" -np "$ranks" "$bin" async --out "$out/async.json"

"$python" "$root/benchmarks/algorithms/plot_convergence.py" "$out"
# The raw JSON (every trace, 7 MB) as xz, as the results folder keeps it; the readers take either.
xz -6 -f "$out/dqgd.json" "$out/qsvrg.json" "$out/convex.json" "$out/async.json"
