#!/usr/bin/env bash
# kill.sh MPIRUN QSGD_TRAIN: SIGKILL a run (every process) at several moments
# while it rewrites its trace every step; each time the trace must open with
# h5dump and hold steps 0..n-1 with nothing torn.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
for delay in 0.05 0.4 0.9; do
  t="$dir/run-$delay.h5"
  setsid "$mpirun" -np 2 --oversubscribe "$train" "${TINY[@]}" --strategy allgather --codec fixed --bits 4 \
    --max-steps 100000 --flush-every 1 --trace "$t" > /dev/null 2>&1 &
  pid=$!
  # Wait for the first flush, then kill at a moment that falls anywhere in
  # later flushes (each step rewrites and renames the file).
  for _ in $(seq 300); do [ -f "$t" ] && break; sleep 0.1; done
  sleep "$delay"
  kill -9 -- -"$pid" 2>/dev/null
  pkill -9 -f "$t" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ -f "$t" ] || fail "no trace (the run flushes every step)"
  h5dump -H "$t" > /dev/null || fail "trace killed after ${delay}s does not open with h5dump"
  n=$(steps_in "$t")
  [ -n "$n" ] && [ "$n" -ge 1 ] || fail "trace killed after ${delay}s holds no step"
  rows=$(data_of "$t" /steps/step | tail -n 1)
  [ "$rows" = $((n - 1)) ] || fail "step indices do not run 0..$((n - 1)) (last $rows)"
  echo "ok: killed after ${delay}s, $n steps readable"
done
