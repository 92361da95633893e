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
echo "ok: K=$k $strategy, final parameter hash $(attr "$dir/t.h5" final_params_fnv1a)"
