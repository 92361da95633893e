#!/usr/bin/env bash
# Trains the default model with one command: installs what is missing, builds
# the optimized preset, and runs qsgd-train on 2 ranks (MLP 784-4096-4096-10
# on Fashion-MNIST, 4-bit QSGD: s = 16, d = 512, max norm, allgather).
# Arguments replace the defaults' extra options (qsgd-train --help), e.g.
#   scripts/run-train.sh --model cnn --epochs 3 --trace results/cnn.h5
# QSGD_RANKS sets the number of ranks (default 2).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
scripts/install-deps.sh
cmake --preset release >/dev/null
cmake --build --preset release --target qsgd-train -j "$(nproc 2>/dev/null || echo 2)"
. "$root/scripts/openmpi-env.sh"
args=("$@")
[ ${#args[@]} -gt 0 ] || args=(--epochs 1 --lr 0.02 --warmup 50 --lr-decay cosine)
exec mpirun -np "${QSGD_RANKS:-2}" --oversubscribe --bind-to none build/release/benchmarks/qsgd-train \
  --strategy allgather --codec fixed --bits 4 "${args[@]}"
