#!/usr/bin/env bash
# peer_lost.sh MPIRUN K VICTIM QSGD_ALGORITHMS: SIGKILL one rank (VICTIM; 0
# is the server) of a K-rank run of the asynchronous parameter server in the
# middle of its first run; every other rank must be gone within 60 s, ended
# by the suite itself with the line of its watchdog and exit code 7.
#
# As in tests/train/peer_lost.sh, mpirun is told not to end the job when a
# process dies (orte_abort_on_non_zero_status 0), so that what ends the
# survivors is the suite's own watchdog: with QSGD_PEER_TIMEOUT=10, a worker
# waiting on a dead server, or the server waiting for a dead worker's last
# message, prints
#   qsgd: rank R: no progress on the <operation> of asynchronous parameter
#   server for T s (MPI_Test|MPI_Iprobe); a peer may have died (peer timeout 10 s)
# and calls MPI_Abort with exit code 7. Expected: about the peer timeout. A
# dead worker is noticed by the server's watch on that worker's pushes
# (<operation> "receive of pushes from rank R"), even while the other worker
# keeps the server busy; it is not left to the shutdown drain after the
# whole run, which on a loaded machine outlasted the bound. On a loaded
# machine (ASan, other tests) the kill can also come while the ranks still
# duplicate their communicator for the run; the workers' watch on that
# duplicate then reports it ("no progress on the communicator duplicate for
# T s (MPI_Testall)"), which is accepted as well.
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
. "$(dirname "$0")/../peer_lost.sh"  # ranks_of, kill_rank_and_wait, expect_abort_7
mpirun=$1 k=$2 victim=$3 prog=$4
bound=60
dir=$(mktemp -d)
trap 'pkill -9 -f "$dir" 2>/dev/null; rm -rf "$dir"' EXIT
out="$dir/async.json"
# --updates: the first run (2 x 10^6 updates, about 20 s here) outlasts the
# kill; after it the survivors would go on to further runs.
setsid "$mpirun" -np "$k" --oversubscribe --mca orte_abort_on_non_zero_status 0 -x QSGD_PEER_TIMEOUT=10 \
  "$prog" async --out "$out" --updates 2000000 --taus -1 > "$dir/out.log" 2>&1 &
pid=$!
start=$SECONDS
while [ $((SECONDS - start)) -lt 60 ]; do
  ranks_of qsgd-algorithms "$out"
  [ "${#pid_of[@]}" = "$k" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/out.log"; fail "the run ended before the kill"; }
  sleep 0.1
done
[ "${#pid_of[@]}" = "$k" ] || fail "found the processes of ${#pid_of[@]} of $k ranks"
# Under way: MPI initialized, the first run's pushes flowing.
sleep 3
kill -0 "$pid" 2>/dev/null || { cat "$dir/out.log"; fail "the run ended before the kill"; }
kill_rank_and_wait "$victim" "$bound" "$pid" "$dir/out.log"
msg=$(grep -E "^qsgd: rank [0-9]+: no progress on the (.* of asynchronous parameter server for [0-9.]+ s \(MPI_(Test|Iprobe)\)|communicator duplicate for [0-9.]+ s \(MPI_Testall\)); a peer may have died \(peer timeout 10 s\)$" "$dir/out.log")
[ -n "$msg" ] || { cat "$dir/out.log"; fail "no survivor reported the dead peer"; }
grep -v -q "^qsgd: rank $victim:" <<< "$msg" || fail "only the killed rank is named: $msg"
expect_abort_7 "$dir/out.log"
[ ! -e "$out" ] || fail "a result file was written although a rank died"
echo "$msg" | head -n 1
echo "ok: K=$k asynchronous parameter server, rank $victim killed; survivors gone after $(seconds_of "$elapsed_ms") s (bound ${bound} s, peer timeout 10 s), mpirun exit $mpirun_rc"
