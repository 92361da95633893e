#!/usr/bin/env bash
# peer_lost.sh MPIRUN K VICTIM QSGD_TRAIN STRATEGY TRANSPORT: SIGKILL one rank
# (VICTIM) of a K-rank run in the middle of training; every other rank must
# be gone within 60 s, ended by the suite itself, and the trace written so far
# must stay readable.
#
# mpirun is told not to end the job when a process dies
# (orte_abort_on_non_zero_status 0). By default it would: Open MPI 4.1 kills
# the other ranks about 1.3 s after the death, before the suite can say
# anything (docs/exchange.md). Without that, the survivors' requests to the
# dead rank never complete and return no error; what must end them is the
# suite's watchdog on every wait: with --peer-timeout 10, a survivor prints
#   qsgd: rank R: no progress on the <operation> at step S... for T s
#   (MPI_Test...); a peer may have died (peer timeout 10 s)
# and calls MPI_Abort with exit code 7 (Open MPI records "with errorcode 7"),
# which ends the job. mpirun itself exits non-zero (it reports the first
# failure: the killed rank's signal). The bound checked: the survivors exit
# within 60 s of the kill; expected: the peer timeout plus at most one step.
set -uo pipefail
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/../peer_lost.sh"  # ranks_of, kill_rank_and_wait, expect_abort_7
mpirun=$1 k=$2 victim=$3 train=$4 strategy=$5 transport=$6
export QSGD_TRACE_TOOL="$(dirname "$train")/qsgd-trace"
bound=60
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
t="$dir/run.h5"
setsid "$mpirun" -np "$k" --oversubscribe --mca orte_abort_on_non_zero_status 0 "$train" "${TINY[@]}" \
  --strategy "$strategy" --transport "$transport" --codec fixed --bits 4 --epochs 1000000 --flush-every 1 \
  --peer-timeout 10 --trace "$t" > "$dir/out.log" 2>&1 &
pid=$!
# Training is under way once the trace holds a few steps (the file, always
# complete when it exists, with its journal).
n=0
start=$SECONDS
while [ $((SECONDS - start)) -lt 120 ]; do
  [ -f "$t" ] && n=$(live_steps "$t") && [ "${n:-0}" -ge 5 ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/out.log"; fail "the run ended before the kill"; }
  sleep 0.1
done
[ "${n:-0}" -ge 5 ] || fail "no 5 steps in the trace after 120 s"
ranks_of qsgd-train "$t"
[ "${#pid_of[@]}" = "$k" ] || fail "found the processes of ${#pid_of[@]} of $k ranks"
kill_rank_and_wait "$victim" "$bound" "$pid" "$dir/out.log"
msg=$(grep -E "^qsgd: rank [0-9]+: no progress on the .* at step [0-9]+.* for [0-9.]+ s \(MPI_Test(some|all)\); a peer may have died \(peer timeout 10 s\)$" "$dir/out.log")
[ -n "$msg" ] || { cat "$dir/out.log"; fail "no survivor reported the dead peer"; }
grep -v -q "^qsgd: rank $victim:" <<< "$msg" || fail "only the killed rank is named: $msg"
expect_abort_7 "$dir/out.log"
h5dump -H "$t" > /dev/null || fail "the trace does not open with h5dump"
trace_tool merge "$t" > /dev/null || fail "qsgd-trace merge failed on the lost run's trace"
n=$(steps_in "$t")
[ -n "$n" ] && [ "$n" -ge 5 ] || fail "the trace holds ${n:-no} steps"
last=$(data_of "$t" /steps/step | tail -n 1)
[ "$last" = $((n - 1)) ] || fail "step indices do not run 0..$((n - 1)) (last $last)"
echo "$msg" | head -n 1
echo "ok: K=$k $strategy/$transport, rank $victim killed; survivors gone after $(seconds_of "$elapsed_ms") s (bound ${bound} s, peer timeout 10 s), mpirun exit $mpirun_rc, trace readable with $n steps"
