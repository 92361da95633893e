#!/usr/bin/env bash
# scaling.peer_parity: the PyTorch DDP peer trains on the suite's inputs.
# qsgd-train and ddp-yardstick (fp32, DDP's own allreduce) run the same small
# MLP, seed, batch and learning rate at K = 1 and K = 2, the peer from
# qsgd-peer-inputs' file; every rank's mini-batch loss of every step, and the
# test accuracy, must agree. Same initial parameters, same standardized
# pixels and the same samples in the same order give the same losses up to
# float32 rounding (summation orders differ: GEMM libraries, the ring's
# reduction); a different start, order, shard or preprocessing moves the
# first step's loss by far more than the tolerance.
#   peer_parity.sh MPIRUN TRAIN PEER_INPUTS DDP_YARDSTICK
set -euo pipefail
mpirun="$1" train="$2" inputs_prog="$3" ddp="$4"
. "$(dirname "$0")/../../scripts/openmpi-env.sh"  # root: Open MPI's opt-in, as every MPI test
work="$(mktemp -d /tmp/qsgd-peer-parity.XXXXXX)"
trap 'rm -rf "$work"' EXIT
export OPENBLAS_NUM_THREADS=1
common=(--mlp-widths 784,64,10 --batch 32 --max-steps 8 --epochs 2 --seed 3 --lr 0.05 --eval-limit 500)
"$inputs_prog" --mlp-widths 784,64,10 --seed 3 --epochs 2 --out "$work/in.bin"
# mpirun's default binding: under the asan preset, LeakSanitizer's exit scan of a
# single rank started with --bind-to none crashes in its own tracer ("Tracer
# caught signal 11"); the losses do not depend on binding.
for k in 1 2; do
  "$mpirun" -np "$k" --oversubscribe -x OPENBLAS_NUM_THREADS \
    "$train" "${common[@]}" --quiet --trace "$work/suite-K$k.h5" > "$work/suite-K$k.log" 2>&1 ||
    { cat "$work/suite-K$k.log"; echo "peer_parity: qsgd-train K=$k failed" >&2; exit 1; }
  "$mpirun" -np "$k" --oversubscribe -x OPENBLAS_NUM_THREADS \
    /usr/bin/python3 "$ddp" "${common[@]}" --hook fp32 --inputs "$work/in.bin" --port $((29600 + k)) \
    --trace "$work/ddp-K$k.h5" > "$work/ddp-K$k.log" 2>&1 ||
    { cat "$work/ddp-K$k.log"; echo "peer_parity: ddp-yardstick K=$k failed" >&2; exit 1; }
done
# The peer refuses a file made for another seed, naming both.
"$inputs_prog" --mlp-widths 784,64,10 --seed 4 --epochs 2 --out "$work/other.bin"
if /usr/bin/python3 "$ddp" "${common[@]}" --inputs "$work/other.bin" --trace "$work/wrong.h5" > "$work/wrong.log" 2>&1; then
  echo "peer_parity: ddp-yardstick accepted inputs made for seed 4 in a seed 3 run" >&2; exit 1
fi
grep -q "seed 4, the run is MLP 784-64-10 seed 3" "$work/wrong.log" ||
  { cat "$work/wrong.log"; echo "peer_parity: the wrong-seed error does not name both seeds" >&2; exit 1; }
/usr/bin/python3 - "$work" <<'EOF'
import sys
import h5py
import numpy as np
work = sys.argv[1]
bad = 0
for k in (1, 2):
    with h5py.File("%s/suite-K%d.h5" % (work, k)) as a, h5py.File("%s/ddp-K%d.h5" % (work, k)) as b:
        la, lb = a["steps/loss"][()], b["steps/loss"][()]
        if la.shape != lb.shape or la.shape != (16, k):
            print("K=%d: loss shapes %s (suite) and %s (peer), expected (16, %d)" % (k, la.shape, lb.shape, k))
            bad += 1
            continue
        rel = np.abs(la - lb) / np.abs(la)
        aa, ab = a["evals/test_accuracy"][()], b["evals/test_accuracy"][()]
        print("K=%d: first-step losses %s (suite) %s (peer); worst relative difference over %d losses %.2e; "
              "test accuracy %s / %s" % (k, la[0], lb[0], la.size, rel.max(), aa, ab))
        if rel.max() > 1e-4:
            print("K=%d: the peer's losses differ from the suite's by more than 1e-4 (step %d)"
                  % (k, int(np.argmax(rel.max(axis=1)))))
            bad += 1
        if aa.shape != ab.shape or np.abs(aa - ab).max() > 2.0 / 500:
            print("K=%d: test accuracies differ by more than one sample in 500" % k)
            bad += 1
sys.exit(1 if bad else 0)
EOF
