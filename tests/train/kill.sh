#!/usr/bin/env bash
# kill.sh MPIRUN QSGD_TRAIN: SIGKILL a run (every process) at several moments
# while it flushes its trace every step (appending to its journal, rewriting
# the file now and then); each time the file must open with h5dump, and the
# file with its journal hold steps 0..n-1 with nothing torn: qsgd-trace
# counts them, and merge folds them into the file.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
export QSGD_TRACE_TOOL="$(dirname "$train")/qsgd-trace"
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
for delay in 0.05 0.4 0.9; do
  t="$dir/run-$delay.h5"
  setsid "$mpirun" -np 2 --oversubscribe "$train" "${TINY[@]}" --strategy allgather --codec fixed --bits 4 \
    --max-steps 100000 --flush-every 1 --trace "$t" > /dev/null 2>&1 &
  pid=$!
  # Wait for the first flush, then kill at a moment that falls anywhere in
  # later flushes (each step appends to the journal; some rewrite the file).
  for _ in $(seq 300); do [ -f "$t" ] && break; sleep 0.1; done
  sleep "$delay"
  kill -9 -- -"$pid" 2>/dev/null
  pkill -9 -f "$t" 2>/dev/null
  wait "$pid" 2>/dev/null
  [ -f "$t" ] || fail "no trace (the run flushes every step)"
  h5dump -H "$t" > /dev/null || fail "trace killed after ${delay}s does not open with h5dump"
  in_file=$(steps_in "$t")
  [ -n "$in_file" ] && [ "$in_file" -ge 1 ] || fail "trace killed after ${delay}s holds no step"
  live=$(live_steps "$t")
  [ -n "$live" ] && [ "$live" -ge "$in_file" ] || fail "qsgd-trace steps counts '$live', the file alone $in_file"
  trace_tool merge "$t" > /dev/null || fail "qsgd-trace merge failed on the trace killed after ${delay}s"
  [ ! -e "$t.journal" ] || fail "merge left $t.journal"
  n=$(steps_in "$t")
  [ "$n" = "$live" ] || fail "the merged trace holds $n steps, qsgd-trace steps counted $live"
  rows=$(data_of "$t" /steps/step | tail -n 1)
  [ "$rows" = $((n - 1)) ] || fail "step indices do not run 0..$((n - 1)) (last $rows)"
  echo "ok: killed after ${delay}s, $in_file steps in the file, $n with its journal, all readable after merge"
done
