#!/usr/bin/env bash
# replicas.sh MPIRUN K QSGD_TRAIN STRATEGY: train with the parameter hash
# compared across ranks after every step (--hash-every 1: a mismatch aborts
# with exit 5 naming the ranks), then check the run finished and its loss fell.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 k=$2 train=$3 strategy=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" -np "$k" --oversubscribe "$train" "${TINY[@]}" --strategy "$strategy" --codec fixed --bits 4 \
  --max-steps 12 --epochs 2 --hash-every 1 --trace "$dir/t.h5" || fail "qsgd-train exited $? (5: replicas diverged)"
[ "$(attr "$dir/t.h5" complete)" = true ] || fail "trace not marked complete"
[ "$(steps_in "$dir/t.h5")" = 24 ] || fail "expected 24 steps in the trace, found $(steps_in "$dir/t.h5")"
# The loss fell: the second epoch's mean training loss (over its steps and
# ranks, /epochs/train_loss) is below the first's. Training is deterministic,
# so this is the same comparison on every run of a given build.
read -r l0 l1 <<< "$(data_of "$dir/t.h5" /epochs/train_loss | tr '\n' ' ')"
[ -n "$l0" ] && [ -n "$l1" ] || fail "no per-epoch training loss in the trace"
awk -v a="$l0" -v b="$l1" 'BEGIN { exit !(b < a) }' || fail "the loss did not fall: epoch 0 $l0, epoch 1 $l1"
echo "loss: epoch 0 $l0, epoch 1 $l1"
echo "ok: K=$k $strategy, final parameter hash $(attr "$dir/t.h5" final_params_fnv1a)"
