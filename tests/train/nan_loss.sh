#!/usr/bin/env bash
# nan_loss.sh MPIRUN QSGD_TRAIN K: one rank's loss turns NaN (the test hook
# QSGD_TEST_NAN_LOSS=RANK:STEP) at step 3 of a K-rank run, on each rank in
# turn. Every rank must end with the loss's own exit code (6) and name the
# step and the failing rank, well within the peer timeout (30 s here): the
# ranks agree on the condition before the collective abort, instead of one
# rank waiting in the abort's barrier while the others wait in the step
# record's gather (exit 7, "a peer may have died", after the timeout).
# Then a NaN in rank 1's gradient at step 3 (QSGD_TEST_NAN_GRAD) under the
# strategies that average raw values (fp32 allreduce, bf16 allreduce16): it
# reaches every rank's averaged gradient, the update's count finds it, and
# every rank ends with exit 6 naming the step.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2 K=$3
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
for victim in $(seq 0 $((K - 1))); do
  start=$SECONDS
  QSGD_TEST_NAN_LOSS="$victim:3" QSGD_PEER_TIMEOUT=30 timeout 120 "$mpirun" -np "$K" --oversubscribe \
    -x QSGD_TEST_NAN_LOSS -x QSGD_PEER_TIMEOUT "$train" "${TINY[@]}" --strategy allgather --codec fixed --bits 4 \
    --max-steps 20 --trace "$dir/run-$victim.h5" > "$dir/out-$victim" 2>&1
  rc=$?
  took=$((SECONDS - start))
  [ "$rc" = 6 ] || { cat "$dir/out-$victim" >&2; fail "rank $victim's NaN loss: exit $rc, expected 6"; }
  [ "$took" -lt 25 ] || fail "rank $victim's NaN loss took ${took}s to end the run (peer timeout 30 s)"
  for r in $(seq 0 $((K - 1))); do
    grep -q "qsgd: rank $r: loss is not finite at step 3 on rank $victim" "$dir/out-$victim" \
      || { cat "$dir/out-$victim" >&2; fail "rank $r did not report rank $victim's NaN loss at step 3"; }
  done
  echo "ok: rank $victim's NaN loss ended all $K ranks with exit 6 in ${took}s"
done
for strategy in allreduce allreduce16; do
  start=$SECONDS
  QSGD_TEST_NAN_GRAD="1:3" QSGD_PEER_TIMEOUT=30 timeout 120 "$mpirun" -np "$K" --oversubscribe \
    -x QSGD_TEST_NAN_GRAD -x QSGD_PEER_TIMEOUT "$train" "${TINY[@]}" --strategy "$strategy" \
    --max-steps 20 --trace "$dir/grad-$strategy.h5" > "$dir/grad-$strategy" 2>&1
  rc=$?
  took=$((SECONDS - start))
  [ "$rc" = 6 ] || { cat "$dir/grad-$strategy" >&2; fail "$strategy: a NaN gradient on rank 1: exit $rc, expected 6"; }
  for r in $(seq 0 $((K - 1))); do
    grep -q "qsgd: rank $r: the averaged gradient is not finite at step 3 on rank 0" "$dir/grad-$strategy" \
      || { cat "$dir/grad-$strategy" >&2; fail "$strategy: rank $r did not report the non-finite average at step 3"; }
  done
  echo "ok: $strategy: rank 1's NaN gradient reached every average; all $K ranks ended with exit 6 in ${took}s"
done
