#!/usr/bin/env bash
# The suite's main job on its embedded default: installs what is missing
# (PyTorch included, for the peer rows), builds the optimized preset, and runs
# the default sweep into results/sweep-<date>-<time>/: MLP 784-2048-2048-10 on
# Fashion-MNIST, 16 steps per run, K = 1, 2, 4 x {fp32 allreduce, bf16
# allreduce, 4-bit QSGD with allgather and with scatter-reduce}, on
# shared memory and on emulated 1 Gbit/s links (network namespaces; without
# them it says so and runs shared memory only), plus PyTorch DDP (fp32, fp16
# hook, PowerSGD hook) on the same links; then the summary table and its
# reading, qsgd-model calibrated on this machine (benchmarks/model/calibrate.sh)
# predicting every row from the sweep's own K = 1 run, and the plots.
# The accuracy column uses the first 2000 test images (16 steps are not a
# training result; benchmarks/scaling/time-to-accuracy is). About 6 minutes
# once built.
# Arguments go to the sweep (benchmarks/scaling/qsgd-sweep --help).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh --python --torch
cmake --preset release >/dev/null
cmake --build --preset release --target qsgd-train qsgd-peer-inputs qsgd-bench-kernels qsgd-bench-exchange -j "$(nproc 2>/dev/null || echo 2)"
exec benchmarks/scaling/qsgd-sweep --mlp-widths 784,2048,2048,10 --max-steps 16 --configs fp32,bf16,4bit \
  --eval-limit 2000 --link local,1gbit --peers ddp --predict "$@"
