#!/usr/bin/env bash
# replicas.sh MPIRUN K QSGD_TRAIN STRATEGY: train with the parameter hash
# compared across ranks after every step (--hash-every 1: a mismatch aborts
# with exit 5 naming the ranks), then check the run finished and its loss fell.
#
# Why the loss must fall: each rank's shard is one batch (32 x K samples in
# all), so all 24 steps (24 one-step epochs, each ending with an evaluation)
# descend the same loss on the same samples, and at lr 0.05 gradient descent
# on a fixed batch lowers it step after step, 4-bit quantization noise or
# not. The test asks that the mean loss of the last 4 steps (over steps and
# ranks) be below 3/4 of the first 4 steps'. Measured at this commit: from
# 2.23-2.28 to 0.003 (K = 1), 0.15 (K = 2), 0.47 (K = 3), 0.82 (K = 4), alike for every
# strategy. A run whose exchange returned zeros or stale gradients would stay
# near ln(10) = 2.30, the loss of a uniform guess over the 10 classes.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 k=$2 train=$3 strategy=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" -np "$k" --oversubscribe "$train" "${TINY[@]}" --teacher-samples $((32 * k)) --strategy "$strategy" \
  --codec fixed --bits 4 --epochs 24 --hash-every 1 --trace "$dir/t.h5" \
  || fail "qsgd-train exited $? (5: replicas diverged)"
[ "$(attr "$dir/t.h5" complete)" = true ] || fail "trace not marked complete"
# Provenance of the message path: this build computes in host memory, where
# MPI reads the buffers itself, GPU-aware or not (docs/exchange.md, section 6).
case "$(attr "$dir/t.h5" mpi_gpu_aware)" in true|false) ;; *) fail "mpi_gpu_aware is '$(attr "$dir/t.h5" mpi_gpu_aware)'" ;; esac
case "$(attr "$dir/t.h5" message_path)" in "host memory: "*) ;; *) fail "message_path is '$(attr "$dir/t.h5" message_path)', expected host memory" ;; esac
[ "$(steps_in "$dir/t.h5")" = 24 ] || fail "expected 24 steps in the trace, found $(steps_in "$dir/t.h5")"
/usr/bin/python3 - "$dir/t.h5" "$k" <<'PY' || fail "the loss did not fall (above)"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    step, loss = f["steps/step"][:], f["steps/loss"][:]  # loss: one row per step, one column per rank
k = int(sys.argv[2])
if list(step) != list(range(24)) or loss.shape != (24, k):
    sys.exit("trace holds steps %s and a loss table of shape %s, expected steps 0..23 x %d ranks"
             % (list(step), loss.shape, k))
per_step = loss.mean(axis=1)
first, last = per_step[:4].mean(), per_step[-4:].mean()
print("loss, mean over ranks, steps 0-3: %.4f; steps 20-23: %.4f (%.2f of the start)" % (first, last, last / first))
if not (np.isfinite(per_step).all() and last < 0.75 * first):
    sys.exit("the loss did not fall below 3/4 of its start: steps 0-3 %.4f, steps 20-23 %.4f" % (first, last))
PY
echo "ok: K=$k $strategy, final parameter hash $(attr "$dir/t.h5" final_params_fnv1a)"
