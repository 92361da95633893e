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
mpirun=$1 k=$2 victim=$3 train=$4 strategy=$5 transport=$6
bound=60
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
t="$dir/run.h5"
setsid "$mpirun" -np "$k" --oversubscribe --mca orte_abort_on_non_zero_status 0 "$train" "${TINY[@]}" \
  --strategy "$strategy" --transport "$transport" --codec fixed --bits 4 --epochs 1000000 --flush-every 1 \
  --peer-timeout 10 --trace "$t" > "$dir/out.log" 2>&1 &
pid=$!
# Training is under way once the trace holds a few steps (it is rewritten
# and renamed at every step, so it is always complete when it exists).
n=0
start=$SECONDS
while [ $((SECONDS - start)) -lt 120 ]; do
  [ -f "$t" ] && n=$(steps_in "$t") && [ "${n:-0}" -ge 5 ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/out.log"; fail "the run ended before the kill"; }
  sleep 0.1
done
[ "${n:-0}" -ge 5 ] || fail "no 5 steps in the trace after 120 s"
# The ranks' processes, by OMPI_COMM_WORLD_RANK (mpirun puts it in their environment).
declare -A pid_of
for p in $(pgrep -f -- "$t"); do
  [ "$(cat "/proc/$p/comm" 2>/dev/null)" = qsgd-train ] || continue
  r=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | sed -n 's/^OMPI_COMM_WORLD_RANK=//p')
  [ -n "$r" ] && pid_of[$r]=$p
done
[ "${#pid_of[@]}" = "$k" ] || fail "found the processes of ${#pid_of[@]} of $k ranks"
kill -9 "${pid_of[$victim]}"
t0=$(date +%s%N)
alive() {  # alive PID: the process exists and is not a zombie
  local st
  st=$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$1/status" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
deadline=$((t0 + bound * 1000000000))
left=()
while [ "$(date +%s%N)" -lt "$deadline" ]; do
  left=()
  for r in "${!pid_of[@]}"; do
    [ "$r" = "$victim" ] && continue
    alive "${pid_of[$r]}" && left+=("$r")
  done
  [ "${#left[@]}" = 0 ] && break
  sleep 0.1
done
elapsed=$(( ($(date +%s%N) - t0) / 1000000 ))
if [ "${#left[@]}" != 0 ]; then
  kill -9 -- -"$pid" 2>/dev/null
  cat "$dir/out.log"
  fail "ranks ${left[*]} still running ${bound} s after rank $victim was killed"
fi
# mpirun follows its last processes out within moments.
start=$SECONDS
while kill -0 "$pid" 2>/dev/null && [ $((SECONDS - start)) -lt 10 ]; do sleep 0.1; done
kill -0 "$pid" 2>/dev/null && { kill -9 -- -"$pid"; fail "mpirun still running 10 s after its ranks ended"; }
wait "$pid"
rc=$?
[ "$rc" != 0 ] || fail "mpirun exited 0 after rank $victim was killed"
msg=$(grep -E "^qsgd: rank [0-9]+: no progress on the .* at step [0-9]+.* for [0-9.]+ s \(MPI_Test(some|all)\); a peer may have died \(peer timeout 10 s\)$" "$dir/out.log")
[ -n "$msg" ] || { cat "$dir/out.log"; fail "no survivor reported the dead peer"; }
grep -v -q "^qsgd: rank $victim:" <<< "$msg" || fail "only the killed rank is named: $msg"
# Open MPI prints "with errorcode 7" through its help relay. When two
# survivors abort at the same moment, mpirun 4.1 can fail to unpack the
# relayed help message ("ORTE_ERROR_LOG: Data unpack would read past end of
# buffer in file .../show_help.c") and prints nothing about the code; the job
# still ends through MPI_Abort ("Per user-direction, the job has been
# aborted"). Seen once in 6 runs on 2 loaded cores, and once (of dozens) as
# "ORTE_ERROR_LOG: Out of resource in file .../show_help.c" with a fuzzer
# on one core. Only an error of the help relay (show_help.c) together with
# that line is accepted in place of the errorcode line.
if ! grep -q "with errorcode 7" "$dir/out.log"; then
  if grep -q "ORTE_ERROR_LOG: .* in file .*show_help.c" "$dir/out.log" &&
     grep -q "Per user-direction, the job has been aborted" "$dir/out.log"; then
    echo "note: Open MPI lost the MPI_Abort help message (show_help unpack error); errorcode not printed"
  else
    cat "$dir/out.log"
    fail "the job did not end with exit code 7 (MPI_Abort)"
  fi
fi
h5dump -H "$t" > /dev/null || fail "the trace does not open with h5dump"
n=$(steps_in "$t")
[ -n "$n" ] && [ "$n" -ge 5 ] || fail "the trace holds ${n:-no} steps"
last=$(data_of "$t" /steps/step | tail -n 1)
[ "$last" = $((n - 1)) ] || fail "step indices do not run 0..$((n - 1)) (last $last)"
echo "$msg" | head -n 1
echo "ok: K=$k $strategy/$transport, rank $victim killed; survivors gone after $((elapsed / 1000)).$(printf %03d $((elapsed % 1000))) s (bound ${bound} s, peer timeout 10 s), mpirun exit $rc, trace readable with $n steps"
