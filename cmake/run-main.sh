#!/usr/bin/env bash
# The suite's main job on its embedded default: installs what is missing,
# builds the optimized preset, runs a short scaling sweep (K = 1, 2, 4 x
# fp32 allreduce, bf16 allreduce, 8/4/2-bit QSGD with allgather and
# scatter-reduce; MLP 784-2048-2048-10 on Fashion-MNIST, 16 steps per run)
# into results/sweep-<date>-<time>/, prints the summary table and writes the
# plots. Arguments go to the sweep (benchmarks/scaling/qsgd-sweep --help),
# e.g. --link 1gbit for emulated 1 Gbit/s links.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cmake/install-deps.sh --python
cmake --preset release >/dev/null
cmake --build --preset release --target qsgd-train -j "$(nproc 2>/dev/null || echo 2)"
exec benchmarks/scaling/qsgd-sweep --widths 784,2048,2048,10 --steps 16 "$@"
