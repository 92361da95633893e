#!/usr/bin/env bash
# End-to-end test of slurm/ against a real Slurm: a private one-node cluster
# (munged, slurmctld, slurmd from Debian's slurm-wlm and munge, started here
# without systemd or cgroups) runs a CPU-mode sweep submitted by
# slurm/qsgd-submit.sh. Checks:
#   1. every expected trace exists and is complete; the collect job's summary
#      (txt and json) lists every run and the plots exist;
#   2. site options (--sbatch-arg) reach every job, the collect job's too; a
#      submission while the sweep's tasks are queued submits none of them
#      again, and its collect job waits for those earlier arrays; a
#      re-submission of the finished sweep submits only a collect job, which
#      runs at once and leaves every trace untouched;
#   3. re-running one array task alone: a complete run skips, a failed run
#      (incomplete trace) is moved aside, never deleted, and redone; a
#      re-submission re-runs exactly the failed task;
#   4. a run that fails is reported as failed: by the task (exit status, Slurm's
#      job state FAILED) and by the collect job (missing trace, re-run command);
#   5. the dry run of the default sweep at 16 GPUs (2 nodes x 8) prints the
#      expected sbatch and srun lines and touches nothing; so do dry runs with
#      each worked-example site file (slurm/sites), whose settings reach the
#      arrays, srun and the collect job, and which command-line options
#      override;
#   6. restarts: a run cut by a real 1-minute time limit (periodic
#      checkpoints, then a re-submission) and a run stopped mid-way by the
#      checkpoint signal (the task checkpoints and requeues itself) both
#      resume from their checkpoints and end with the final parameters of an
#      uncut run, every step in the trace once;
#   7. the sweep as one allocation per K (--per-k): the exchange benchmark,
#      then every configuration, on the same nodes; the collect job after;
#      qsgd-model refits on that sweep and predicts its K = 2 runs.
# Everything it starts is stopped and everything it creates is removed, also
# on failure, when it prints the daemons' logs and the job outputs.
#
# usage: test_slurm_sweep.sh --repo DIR --train PATH/qsgd-train
# QSGD_SLURM_TEST_KEEP=1 keeps the temporary directory (logs, traces, conf).
# The daemons and the package install need root: without it the test fails,
# unless QSGD_ALLOW_NO_SLURM=1 makes it a skip (exit 77; never set by
# scripts/run-tests.sh or CI).
set -euo pipefail

repo="" train=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) repo="$2"; shift ;;
    --train) train="$2"; shift ;;
    *) echo "usage: $0 --repo DIR --train PATH" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$repo" ] && [ -n "$train" ] || { echo "usage: $0 --repo DIR --train PATH" >&2; exit 2; }
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
. "$here/../trace_query.sh"  # attr, is_complete, steps_in, live_steps, data_of
export QSGD_TRACE_TOOL="$(dirname "$train")/qsgd-trace"
t0=$SECONDS
say() { echo "[slurm-test $((SECONDS - t0))s] $*"; }

if [ "$(id -u)" != 0 ]; then
  if [ "${QSGD_ALLOW_NO_SLURM:-0}" = 1 ]; then
    echo "SKIP (QSGD_ALLOW_NO_SLURM=1): the Slurm test starts munged, slurmctld and slurmd and installs packages: it needs root"
    exit 77
  fi
  echo "FAIL: the Slurm test starts munged, slurmctld and slurmd and installs packages: it needs root"
  echo "      (QSGD_ALLOW_NO_SLURM=1 turns this failure into a skip)"
  exit 1
fi
[ -x "$train" ] || { echo "FAIL: $train is not an executable"; exit 1; }

# ---- packages (Debian's slurm-wlm, munge; h5py/matplotlib for the collect step)
have_all() {
  local c
  for c in slurmctld slurmd sbatch squeue sinfo scancel munged h5dump; do
    command -v "$c" >/dev/null 2>&1 || return 1
  done
  /usr/bin/python3 -c 'import h5py, numpy, matplotlib' 2>/dev/null
}
if ! have_all; then
  say "installing Slurm, munge and the Python plotting stack (scripts/install-deps.sh --slurm --python)"
  "$repo/scripts/install-deps.sh" --slurm --python
  have_all || { echo "FAIL: Slurm, munge or python3-h5py/matplotlib still missing after install-deps.sh"; exit 1; }
fi
id munge >/dev/null 2>&1 || { echo "FAIL: no 'munge' user (the munge package creates it)"; exit 1; }

# A Slurm job's environment must not leak into the private cluster's clients.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^SLURM_' || true)
# One BLAS thread in every run, the jobs' (sbatch hands this environment on)
# and the reference runs' alike: a run's bits depend on OpenBLAS's thread
# count (trace attribute blas_threads), which would otherwise follow the
# launcher's core binding (mpirun binds each rank to a core, srun here not).
export OPENBLAS_NUM_THREADS=1

tmp="$(mktemp -d /tmp/qsgd-slurm-test.XXXXXX)"
chmod 0755 "$tmp"  # the munge user must reach its socket directory
conf="$tmp/etc/slurm.conf"
export SLURM_CONF="$conf"
mkdir -p "$tmp/etc" "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/run" "$tmp/munge" "$tmp/tmpfs"
ctld_pid="" slurmd_pid="" munged_pid="" watchdog="" ok=0

show_logs() {
  local f
  echo "=================== diagnostics ==================="
  # A daemon's stderr (*.out) repeats its log file; it matters only when the
  # daemon died before it opened the log.
  for f in "$tmp/log/slurmctld.log" "$tmp/log/slurmd.log" "$tmp/log/slurmctld.out" "$tmp/log/slurmd.out" \
    "$tmp/munge/munged.log"; do
    [ -s "$f" ] || continue
    case "$f" in *.out) [ ! -s "${f%.out}.log" ] || continue ;; esac
    echo "----- tail of $f"
    tail -n 40 "$f"
  done
  for f in "$tmp"/*/logs/* "$tmp"/*.out; do
    [ -f "$f" ] || continue
    echo "----- $f"
    tail -n 30 "$f"
  done
  echo "----- squeue"
  squeue 2>&1 || true
  echo "----- sinfo"
  sinfo -N -l 2>&1 || true
}

stop_pid() {  # stop_pid PID SECONDS: TERM, wait, then KILL
  local pid="$1" i
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for ((i = 0; i < $2 * 10; i++)); do
    kill -0 "$pid" 2>/dev/null || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
}

cleanup() {
  local rc=$?
  set +e
  trap - USR1
  if [ "$ok" != 1 ]; then
    [ "$rc" -ne 0 ] || rc=1
    show_logs
  fi
  if [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
    local jobs
    jobs="$(squeue -h -o %A 2>/dev/null)"
    if [ -n "$jobs" ]; then
      # shellcheck disable=SC2086
      scancel $jobs 2>/dev/null
      for _ in $(seq 30); do [ -z "$(squeue -h -o %A 2>/dev/null)" ] && break; sleep 0.5; done
    fi
  fi
  [ -z "$watchdog" ] || kill "$watchdog" 2>/dev/null
  stop_pid "$slurmd_pid" 15
  stop_pid "$ctld_pid" 20   # slurmctld takes about 5 s to exit
  stop_pid "$munged_pid" 10
  if [ -n "${QSGD_SLURM_TEST_KEEP:-}" ]; then
    say "daemons stopped; kept $tmp (QSGD_SLURM_TEST_KEEP)"
  else
    rm -rf "$tmp"
    say "daemons stopped, $tmp removed"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP
# Give up before ctest's TIMEOUT (600 s) would kill this script without its
# cleanup: the daemons must not outlive the test.
trap 'echo "FAIL: the test ran for 540 s"; exit 1' USR1
( exec >/dev/null 2>&1; sleep 540 & s=$!; trap 'kill $s; exit 0' TERM; wait $s && kill -USR1 $$ ) &
watchdog=$!

fail() { echo "FAIL: $*"; exit 1; }

# ---- munged: private key, socket, log ----------------------------------------
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chown munge:munge "$tmp/munge" "$tmp/munge/munge.key"
chmod 0755 "$tmp/munge"  # munged refuses a 0700 socket directory
chmod 0600 "$tmp/munge/munge.key"
sock="$tmp/munge/munge.socket"
runuser -u munge -- munged --socket="$sock" --key-file="$tmp/munge/munge.key" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" ||
  fail "munged did not start"
for _ in $(seq 50); do [ -S "$sock" ] && [ -s "$tmp/munge/munged.pid" ] && break; sleep 0.1; done
munged_pid="$(cat "$tmp/munge/munged.pid" 2>/dev/null || true)"
[ -S "$sock" ] || fail "munged made no socket at $sock"
munge -n -S "$sock" | unmunge -S "$sock" >/dev/null || fail "munge/unmunge round trip failed"

# ---- slurm.conf: one node, this machine's CPUs, no cgroups -------------------
host="$(hostname -s)"
nodeline="$(slurmd -C | head -n 1)"
[[ "$nodeline" == NodeName=* ]] || fail "slurmd -C printed '$nodeline'"
# Slurm sees three times the cores there are (SlurmdParameters=config_overrides):
# section 6 runs up to three 2-rank jobs at once, and slurmctld starts a job of
# --ntasks-per-node=2 only on a node with 2 free CPUs, --overcommit or not
# (measured with Slurm 22.05: the second job pends for Resources while the
# first holds one CPU of two).
nodeline="$(awk '{ for (i = 1; i <= NF; i++) if ($i ~ /^(CPUs|CoresPerSocket)=/) { split($i, kv, "="); $i = kv[1] "=" 3 * kv[2] } print }' <<<"$nodeline")"
port_free() { ! ss -Htan "( sport = :$1 )" 2>/dev/null | grep -q .; }
pick_ports() {  # pick_ports N: base of N consecutive free TCP ports
  local base p ok_
  for _ in $(seq 100); do
    base=$((20000 + RANDOM % 30000))
    ok_=1
    for ((p = base; p < base + $1; p++)); do port_free "$p" || { ok_=0; break; }; done
    [ "$ok_" = 1 ] && { echo "$base"; return 0; }
  done
  return 1
}
ports="$(pick_ports 22)" || fail "no free ports"
cat >"$conf" <<EOF
# Generated by tests/slurm/test_slurm_sweep.sh: a private one-node cluster.
ClusterName=qsgdtest
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ports
SlurmdPort=$((ports + 1))
SrunPortRange=$((ports + 2))-$((ports + 21))
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a requeued job waits this long before it may start again
# (default 120 s); section 6 requeues a task.
AuthInfo=socket=$sock,cred_expire=15
SlurmUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
# The node's temporary file system, where PMIx puts each step's client
# folder (spmix_appdir_<uid>_<job>.<step>): this cluster's own, so that a
# folder an earlier cluster on this machine left under /tmp for the same job
# number cannot fail a step ("File exists").
TmpFS=$tmp/tmpfs
SlurmctldPidFile=$tmp/run/slurmctld.pid
SlurmdPidFile=$tmp/run/slurmd.pid
SlurmctldLogFile=$tmp/log/slurmctld.log
SlurmdLogFile=$tmp/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=pmix
MailProg=/bin/true
ReturnToService=2
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
KillWait=5
# Scheduling passes every 2 s (defaults: 60 s, backfill 30 s): a requeued
# task starts soon after its cred_expire, not at the next minute.
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmdParameters=config_overrides
$nodeline NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=test Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF

say "starting slurmctld and slurmd (ports $ports-$((ports + 21)))"
slurmctld -D -i -f "$conf" >"$tmp/log/slurmctld.out" 2>&1 &
ctld_pid=$!
slurmd -D -N "$host" -f "$conf" >"$tmp/log/slurmd.out" 2>&1 &
slurmd_pid=$!
state=""
for _ in $(seq 60); do
  state="$(sinfo -h -N -n "$host" -o %t 2>/dev/null || true)"
  [ "$state" = idle ] && break
  kill -0 "$ctld_pid" 2>/dev/null || fail "slurmctld exited"
  kill -0 "$slurmd_pid" 2>/dev/null || fail "slurmd exited"
  sleep 0.5
done
[ "$state" = idle ] || fail "node $host is '$state', not idle, after 30 s"
say "node $host idle"

queued() { local q; q="$(squeue -h -o %A)" || fail "squeue failed"; printf '%s' "$q"; }
wait_empty() {  # wait_empty SECONDS: until no job is pending or running
  local deadline=$((SECONDS + $1))
  while [ -n "$(queued)" ]; do
    [ "$SECONDS" -lt "$deadline" ] || fail "jobs still queued after $1 s"
    sleep 0.5
  done
}
# Slurm's state of every task of job $1 (no accounting here: slurmctld keeps
# finished jobs for MinJobAge, 300 s).
job_states() { scontrol -o show job "$1" | grep -o 'JobState=[A-Z_]*' | sort | uniq -c | awk '{ print $2 "x" $1 }'; }
job_ended() {  # job_ended JOB: no task of JOB is pending, running or on its way to either
  ! job_states "$1" | grep -qE 'PENDING|RUNNING|REQUEUE|COMPLETING|CONFIGURING|SUSPENDED|RESIZING|STOPPED|SIGNALING|STAGE_OUT'
}
submitted_ids() { sed -n 's/^# K=[0-9]*: submitted job \([0-9]*\);.*/\1/p; s/^# collect: job \([0-9]*\) .*/\1/p' "$1"; }
stamps() {  # inode and nanosecond mtime of every trace: changes when one is rewritten
  (cd "$sweep/traces" && stat -c '%n %i %.9Y' -- *.h5)
}

sweep="$tmp/sweep"
submit() {  # submit LOG [options]: the real submitter, CPU mode, tiny sweep
  local log="$1"; shift
  "$repo/slurm/qsgd-submit.sh" --sweep "$here/tiny.conf" --cpu --out "$sweep" --train "$train" "$@" >"$log" 2>&1 ||
    { cat "$log"; fail "qsgd-submit.sh failed"; }
  cat "$log"
}
expected=(mlp_allreduce_fp32_K1 mlp_allreduce_fp32_K2 mlp_allgather_elias-dense-4bit_K1
  mlp_allgather_elias-dense-4bit_K2)

check_sweep() {
  local name n
  for name in "${expected[@]}"; do
    [ -f "$sweep/traces/$name.h5" ] || fail "missing trace $name.h5"
    is_complete "$sweep/traces/$name.h5" || fail "trace $name.h5 is not complete"
  done
  n="$(find "$sweep/traces" -name '*.h5' | wc -l)"
  [ "$n" -eq "${#expected[@]}" ] || fail "$n traces, expected ${#expected[@]}"
  [ -s "$sweep/summary.txt" ] && [ -s "$sweep/summary.json" ] || fail "no summary from the collect job"
  /usr/bin/python3 - "$sweep" "${expected[@]}" <<'PY' || fail "summary.json does not list every run"
import json, os, sys
sweep, names = sys.argv[1], sys.argv[2:]
runs = json.load(open(os.path.join(sweep, "summary.json")))["runs"]
got = {os.path.basename(r["file"])[:-3]: r for r in runs}
assert sorted(got) == sorted(names), (sorted(got), names)
for n, r in got.items():
    assert r["complete"] is True, n
    assert r["K"] == int(n.rsplit("_K", 1)[1]), (n, r["K"])
    assert r["steps"] == 5, (n, r["steps"])
    assert ("allgather" in n) == (r["strategy"] == "allgather"), n
    assert r["space"] == "Serial", (n, r["space"])  # the execution space the CPU build ran on
PY
  head -n 1 "$sweep/summary.txt" | grep -qw space || fail "summary.txt has no execution space column"
  n="$(($(wc -l <"$sweep/summary.txt") - 2))"
  [ "$n" -eq "${#expected[@]}" ] || fail "summary.txt has $n rows, expected ${#expected[@]}"
  ls "$sweep"/plots/*.png >/dev/null 2>&1 || fail "no plots in $sweep/plots"
}

# ---- 1. the sweep: 2 configurations x K in {1, 2}, then the collect job ------
# Every job is submitted held (a site option, as a constraint would be), so
# that a second submission meets the arrays queued.
say "1. submitting the tiny CPU sweep (held, with a site comment from a site file)"
printf 'sbatch_args = --comment=qsgd-site-option\n' > "$tmp/site.conf"
submit "$tmp/submit1.out" --site "$tmp/site.conf" --sbatch-arg=--hold
grep -q -- '--array=0-1 ' "$tmp/submit1.out" || fail "expected two arrays of 2 tasks (--array=0-1)"
[ "$(grep -c '^sbatch ' "$tmp/submit1.out")" -eq 3 ] || fail "expected 3 sbatch commands (K=1, K=2, collect)"
mapfile -t ids < <(submitted_ids "$tmp/submit1.out")
[ "${#ids[@]}" -eq 3 ] || fail "expected 3 job ids (K=1, K=2, collect), got ${ids[*]}"
for id in "${ids[@]}"; do  # the site options reached every job, the collect job's included
  scontrol -o show job "$id" | grep -q 'Comment=qsgd-site-option' || fail "job $id lacks the site option --comment"
  scontrol -o show job "$id" | grep -q 'Priority=0 ' || fail "job $id is not held (--hold)"
done
submit "$tmp/submit1b.out"
[ "$(grep -c '^# K=[12]: .* 0 complete, 2 queued or running, 0 to submit' "$tmp/submit1b.out")" -eq 2 ] ||
  fail "a submission while the sweep is queued did not see its queued tasks"
[ "$(grep -c '^sbatch ' "$tmp/submit1b.out")" -eq 1 ] || fail "queued tasks were submitted twice"
grep -q "^sbatch .*--dependency=afterany:${ids[0]}:${ids[1]},singleton .*qsgd-collect.sh" "$tmp/submit1b.out" ||
  fail "the second collect job does not wait for the arrays of the first submission"
mapfile -t ids1b < <(submitted_ids "$tmp/submit1b.out")
scontrol release "${ids[@]}" || fail "scontrol release failed"
wait_empty 180
say "sweep finished"
for f in "$sweep"/logs/K*.out; do
  grep -q 'qsgd-array: done: .* is complete' "$f" || fail "$f does not report a complete run"
done
[ "$(find "$sweep/logs" -name 'K*.out' | wc -l)" -eq 4 ] || fail "expected 4 array task logs"
check_sweep
for id in "${ids[2]}" "${ids1b[0]}"; do  # both collect jobs ran after every task
  grep -q 'qsgd-collect: 4 of 4 expected runs complete' "$sweep/logs/collect-$id.out" ||
    fail "collect job $id did not report 4 of 4"
done
for id in "${ids[@]}" "${ids1b[@]}"; do
  st="$(job_states "$id")"
  [[ "$st" =~ ^JobState=COMPLETEDx[0-9]+$ ]] || fail "job $id: $st"
done
cat "$sweep/summary.txt"

# ---- 2. re-submission: everything is complete, nothing is submitted -----------
say "2. re-submitting the complete sweep"
before="$(stamps)"
n_logs="$(find "$sweep/logs" -type f | wc -l)"
submit "$tmp/submit2.out"
[ "$(grep -c '^# K=[12]: skip, nothing to run' "$tmp/submit2.out")" -eq 2 ] || fail "re-submission did not skip both K"
[ "$(grep -c '^sbatch ' "$tmp/submit2.out")" -eq 1 ] || fail "re-submission submitted more than its collect job"
grep -q '^sbatch .*qsgd-collect.sh' "$tmp/submit2.out" || fail "re-submission submitted no collect job"
grep -q '^sbatch .*--dependency=singleton ' "$tmp/submit2.out" || fail "the collect job of a complete sweep waits for something"
wait_empty 60
[ "$(find "$sweep/logs" -type f | wc -l)" -eq "$((n_logs + 1))" ] || fail "re-submission ran more than its collect job"
mapfile -t ids2 < <(submitted_ids "$tmp/submit2.out")
grep -q 'qsgd-collect: 4 of 4 expected runs complete' "$sweep/logs/collect-${ids2[0]}.out" ||
  fail "the re-submission's collect job did not report 4 of 4"
[ "$(stamps)" = "$before" ] || fail "traces changed on re-submission"

# ---- 3. failed runs: re-run alone, or picked up by the next submission --------
# A failed run leaves a trace that is not marked complete (the trainer writes
# its trace atomically; only a finished run sets complete = "true").
mark_failed() {
  /usr/bin/python3 -c 'import sys, h5py; h5py.File(sys.argv[1], "r+").attrs["complete"] = "false"' "$1"
  ! is_complete "$1" || fail "could not mark $1 incomplete"
}
others_unchanged() {  # others_unchanged NAME: every trace but NAME as in $before
  [ "$(grep -v "^$1 " <<<"$(stamps)")" = "$(grep -v "^$1 " <<<"$before")" ] || fail "traces other than $1 changed"
  [ "$(grep "^$1 " <<<"$(stamps)")" != "$(grep "^$1 " <<<"$before")" ] || fail "$1 was not redone"
}
say "3a. re-running single tasks alone: a complete one (K=2 task 0), a failed one (K=2 task 1)"
mark_failed "$sweep/traces/mlp_allgather_elias-dense-4bit_K2.h5"
"$sweep/rerun-K2.sh" 0 >/dev/null || fail "rerun-K2.sh 0 failed"
"$sweep/rerun-K2.sh" 1 >/dev/null || fail "rerun-K2.sh 1 failed"
wait_empty 120
[ "$(cat "$sweep"/logs/K2-*_0.out | grep -c 'qsgd-array: skip: .*mlp_allreduce_fp32_K2.h5 is complete')" -eq 1 ] ||
  fail "re-running a complete task did not skip it"
grep -q 'moving the incomplete .*_K2.h5 aside' "$sweep"/logs/K2-*_1.out || fail "the incomplete trace was not moved aside"
ls "$sweep"/traces/mlp_allgather_elias-dense-4bit_K2.h5.failed-* >/dev/null 2>&1 ||
  fail "the failed trace is gone (must be kept as .failed-*)"
others_unchanged mlp_allgather_elias-dense-4bit_K2.h5
before="$(stamps)"

say "3b. re-submitting with one failed run (K=1 task 1)"
mark_failed "$sweep/traces/mlp_allgather_elias-dense-4bit_K1.h5"
submit "$tmp/submit3.out"
grep -q '^sbatch .*--array=1 .*--ranks 1 ' "$tmp/submit3.out" || fail "the failed K=1 task 1 was not submitted alone"
[ "$(grep -c '^sbatch ' "$tmp/submit3.out")" -eq 2 ] || fail "expected the K=1 re-run and a collect job only"
wait_empty 120
grep -q 'moving the incomplete .*_K1.h5 aside' "$sweep"/logs/K1-*_1.out || fail "the incomplete trace was not moved aside"
ls "$sweep"/traces/mlp_allgather_elias-dense-4bit_K1.h5.failed-* >/dev/null 2>&1 ||
  fail "the failed trace is gone (must be kept as .failed-*)"
others_unchanged mlp_allgather_elias-dense-4bit_K1.h5
check_sweep
[ "$(find "$sweep/logs" -name 'collect-*.out' | wc -l)" -eq 4 ] ||
  fail "expected four collect jobs (submissions 1, 1b, 2 and 3b)"

# ---- 4. a failing run: reported by the task, Slurm and the collect job -------
say "4. a sweep whose runs fail"
bad="$tmp/failsweep"
"$repo/slurm/qsgd-submit.sh" --sweep "$here/tiny.conf" --cpu --gpus 1 --out "$bad" --train /bin/false \
  >"$tmp/submit4.out" 2>&1 || { cat "$tmp/submit4.out"; fail "qsgd-submit.sh failed"; }
wait_empty 60
mapfile -t ids < <(submitted_ids "$tmp/submit4.out")
[ "${#ids[@]}" -eq 2 ] || fail "expected an array job and a collect job, got ${ids[*]}"
[ "$(job_states "${ids[0]}")" = "JobState=FAILEDx2" ] || fail "array job ${ids[0]}: $(job_states "${ids[0]}")"
[ "$(job_states "${ids[1]}")" = "JobState=FAILEDx1" ] || fail "collect job ${ids[1]}: $(job_states "${ids[1]}")"
for i in 0 1; do
  grep -q 'qsgd-array: FAILED (srun exit status 1): .* re-run this task alone with .*/rerun-K1.sh '"$i" \
    "$bad"/logs/K1-*_$i.out || fail "task $i does not report its failure"
done
grep -q "missing: *traces/mlp_allreduce_fp32_K1.h5 (re-run: $bad/rerun-K1.sh 0" "$bad"/logs/collect-*.out ||
  fail "the collect job does not report the missing run"

# ---- 4b. GPU mode refuses a trainer built without a GPU backend ------------
say "4b. GPU mode with the CPU build of qsgd-train"
if "$repo/slurm/qsgd-submit.sh" --gpus 2 --out "$tmp/cpu-in-gpu" --train "$train" >"$tmp/submit4b.out" 2>&1; then
  cat "$tmp/submit4b.out"; fail "GPU mode accepted a trainer without a GPU backend"
fi
grep -q "qsgd-submit: error: .* is not built for a GPU (its --version says: qsgd-train .*Kokkos .*SERIAL)" \
  "$tmp/submit4b.out" || { cat "$tmp/submit4b.out"; fail "GPU mode's refusal does not name the trainer's backends"; }
[ ! -e "$tmp/cpu-in-gpu" ] || fail "GPU mode created the sweep directory before refusing"

# ---- 5. dry run: the default sweep at 16 GPUs, 2 nodes x 8 ------------------
say "5. dry run of the default sweep at 16 GPUs"
dry="$tmp/dry"
"$repo/slurm/qsgd-submit.sh" --gpus 16 --gpus-per-node 8 --dry-run --out "$dry" --train "$train" >"$tmp/dry.out" 2>&1 ||
  { cat "$tmp/dry.out"; fail "dry run failed"; }
cat "$tmp/dry.out"
[ ! -e "$dry" ] || fail "the dry run created $dry"
[ -z "$(queued)" ] || fail "the dry run submitted a job"
arr="$(grep '^sbatch .*qsgd-array.sbatch' "$tmp/dry.out")" || fail "no array sbatch line"
[ "$(wc -l <<<"$arr")" -eq 1 ] || fail "expected one array job for K=16"
for want in '--nodes=2 ' '--ntasks-per-node=8 ' '--gpus-per-node=8 ' '--ranks 16 '; do
  grep -q -- "$want" <<<"$arr" || fail "array sbatch line lacks '$want'"
done
# No --mpi given: srun uses the site's MpiDefault (this controller's: pmix).
! grep -q -- '--mpi' <<<"$arr" || fail "the array sbatch line names an MPI plugin that was not asked for"

[[ "$arr" =~ --array=0-([0-9]+)\  ]] || fail "no --array=0-N in the sbatch line"
n_cfg=$((BASH_REMATCH[1] + 1))
n_srun="$(grep -c '^#   task [0-9]*: srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --gpus-per-node=8 --gpu-bind=single:1 --cpu-bind=cores ' "$tmp/dry.out")"
[ "$n_srun" -eq "$n_cfg" ] || fail "$n_srun srun lines for $n_cfg array tasks"
[ "$(grep -c -- "--trace $dry/traces/[a-z0-9_.-]*_K16.h5 " "$tmp/dry.out")" -eq "$n_cfg" ] || fail "trace names"
grep -q '^sbatch .*--dependency=afterany:JOB_K16,singleton .*qsgd-collect.sh' "$tmp/dry.out" || fail "no collect job line"
"$repo/slurm/qsgd-submit.sh" --gpus 16 --shape 16=4x4 --mpi pmi2 --dry-run --out "$dry" --train "$train" >"$tmp/dry2.out" 2>&1 ||
  { cat "$tmp/dry2.out"; fail "dry run (4x4, pmi2) failed"; }
grep -q '^#   task 0: srun --mpi=pmi2 --nodes=4 --ntasks=16 --ntasks-per-node=4 --gpus-per-node=4 ' "$tmp/dry2.out" ||
  { cat "$tmp/dry2.out"; fail "--shape 16=4x4 --mpi pmi2 not honoured"; }
# PowerSGD runs: one per rank in powersgd_ranks, each with its error feedback.
printf 'name = psgd\nmodels = mlp\nstrategies = powersgd\npowersgd_ranks = 2 4\ngpus = 2\n' >"$tmp/psgd.conf"
"$repo/slurm/qsgd-submit.sh" --sweep "$tmp/psgd.conf" --cpu --dry-run --out "$dry" --train "$train" >"$tmp/dry-psgd.out" 2>&1 ||
  { cat "$tmp/dry-psgd.out"; fail "dry run (powersgd) failed"; }
for r in 2 4; do
  grep -q -- "--strategy powersgd --powersgd-rank $r --error-feedback ef-unscaled --trace $dry/traces/mlp_powersgd_r$r-ef_K2.h5 " \
    "$tmp/dry-psgd.out" || { cat "$tmp/dry-psgd.out"; fail "no powersgd rank $r run with its error feedback"; }
done
# The GPU request as a generic resource (--gres=gpu:G), on sbatch and srun.
"$repo/slurm/qsgd-submit.sh" --gpus 16 --gpus-per-node 8 --gpu-request gres --dry-run --out "$dry" --train "$train" \
  >"$tmp/dry3.out" 2>&1 || { cat "$tmp/dry3.out"; fail "dry run (--gpu-request gres) failed"; }
grep -q '^sbatch .*--nodes=2 --ntasks-per-node=8 --gres=gpu:8 .*qsgd-array.sbatch' "$tmp/dry3.out" ||
  { cat "$tmp/dry3.out"; fail "the array sbatch line does not ask --gres=gpu:8"; }
grep -q '^#   task 0: srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --gres=gpu:8 --gpu-bind=single:1 ' "$tmp/dry3.out" ||
  { cat "$tmp/dry3.out"; fail "the srun line does not ask --gres=gpu:8"; }
! grep -q -- '--gpus-per-node' "$tmp/dry3.out" || fail "--gpu-request gres still asks --gpus-per-node"

# The worked-example site files: their settings reach the arrays, every
# srun line and the collect job; a command-line option overrides its key.
say "5b. dry runs with the example site files"
site_dry() {  # site_dry NAME OUT [options]: a dry run at K = 16 with slurm/sites/NAME.conf
  local name="$1" o="$2"; shift 2
  "$repo/slurm/qsgd-submit.sh" --site "$repo/slurm/sites/$name.conf" --gpus 16 --dry-run --out "$dry" \
    --train "$train" "$@" >"$o" 2>&1 || { cat "$o"; fail "dry run with site file $name failed"; }
}
want_in() {  # want_in FILE REGEX WHAT
  grep -q -- "$2" "$1" || { cat "$1"; fail "$3"; }
}
site_dry example-pmix-4gpu "$tmp/site1.out"
want_in "$tmp/site1.out" '^sbatch .*--nodes=4 --ntasks-per-node=4 --gpus-per-node=4 --cpus-per-task=16 --time=01:00:00 --signal=B:USR1@300 --requeue --open-mode=append --partition=gpu --account=proj42 --constraint=a100 --exclusive .*qsgd-array.sbatch .*--site-env '"$repo"'/slurm/sites/example-pmix-4gpu.env.sh .*--requeue' \
  "site file 1: the array's sbatch line"
want_in "$tmp/site1.out" '^#   task 0: srun --mpi=pmix --nodes=4 --ntasks=16 --ntasks-per-node=4 --cpus-per-task=16 --gpus-per-node=4 --gpu-bind=single:1 --cpu-bind=cores .* --checkpoint '"$dry"'/checkpoints/[a-z0-9_.-]*_K16.ckpt --checkpoint-signal USR1' \
  "site file 1: the srun line"
want_in "$tmp/site1.out" '^sbatch .*--partition=gpu --account=proj42 --constraint=a100 --exclusive .*qsgd-collect.sh' \
  "site file 1: the collect job lacks the site's options"
site_dry example-gres-pmi2-8gpu "$tmp/site2.out" --mpi pmix --no-requeue
want_in "$tmp/site2.out" '^sbatch .*--nodes=2 --ntasks-per-node=8 --gres=gpu:8 --cpus-per-task=12 --time=01:00:00 --signal=B:USR1@180 --partition=booster --account=hpc-ml --qos=normal --exclusive --mem=0 .*qsgd-array.sbatch' \
  "site file 2: the array's sbatch line"
! grep -q -- '--requeue' "$tmp/site2.out" || fail "--no-requeue did not override the site file's requeue = yes"
want_in "$tmp/site2.out" '^#   task 0: srun --mpi=pmix --nodes=2 --ntasks=16 --ntasks-per-node=8 --cpus-per-task=12 --gres=gpu:8 --gpu-bind=closest ' \
  "site file 2: the srun line (--mpi pmix given on the command line over the file's pmi2)"
want_in "$tmp/site2.out" '^sbatch .*--partition=booster --account=hpc-ml --qos=normal --exclusive --mem=0 .*qsgd-collect.sh' \
  "site file 2: the collect job lacks the site's options"
printf 'partition = x\nfrobnicate = 1\n' > "$tmp/badsite.conf"
if "$repo/slurm/qsgd-submit.sh" --site "$tmp/badsite.conf" --dry-run --out "$dry" --train "$train" >"$tmp/badsite.out" 2>&1; then
  fail "a site file with an unknown key was accepted"
fi
want_in "$tmp/badsite.out" "badsite.conf: unknown key 'frobnicate'" "the unknown key is not named"

# ---- 6. restarts ------------------------------------------------------------
# Two runs at once (Slurm sees twice the cores there are; see slurm.conf):
# 6b waits for a real time limit while 6a is stopped by the checkpoint signal.
rs_args() { awk -F'\t' '$1 == 0 { print $3 }' "$1"/manifest-*.tsv; }
uncut_hash() {  # uncut_hash SWEEP: final parameters of the same run, uncut, under mpirun
  local args
  read -ra args <<<"$(rs_args "$1")"
  # The synthetic backward only adds wall time: 0 here (the last value counts).
  (. "$repo/scripts/openmpi-env.sh" && mpirun -np 2 "$train" "${args[@]}" --synthetic-backward-ms 0 --quiet \
    --trace "$1/uncut.h5") >"$1/uncut.log" 2>&1 || { cat "$1/uncut.log"; fail "the uncut reference run of $1 failed"; }
  attr "$1/uncut.h5" final_params_fnv1a
}
check_restarted() {  # check_restarted SWEEP STEPS WHAT: complete, uncut bits, every step once
  local t="$1/traces/mlp_allgather_fixed-4bit_K2.h5" want got
  is_complete "$t" || fail "$3: the trace is not complete"
  want="$(uncut_hash "$1")" got="$(attr "$t" final_params_fnv1a)"
  [ -n "$want" ] && [ "$got" = "$want" ] || fail "$3: final parameters $got, the uncut run's $want"
  [ "$(data_of "$t" /steps/step | sort -n | uniq -d | wc -l)" = 0 ] || fail "$3: a step appears twice in the trace"
  [ "$(data_of "$t" /steps/step | wc -l)" = "$2" ] || fail "$3: the trace holds $(data_of "$t" /steps/step | wc -l) steps, expected $2"
  [ ! -e "$1/checkpoints/mlp_allgather_fixed-4bit_K2.ckpt" ] || fail "$3: the checkpoint of a finished run was left behind"
  say "$3: the run ended with the uncut run's parameters ($got), $2 steps, each once"
}

say "6. restarts: 6b under a real 1-minute time limit (periodic checkpoints), 6a stopped by the checkpoint signal"
rs_b="$tmp/limit" rs_a="$tmp/signal"
"$repo/slurm/qsgd-submit.sh" --sweep "$here/restart-limit.conf" --cpu --out "$rs_b" --train "$train" --signal-before 0 \
  --no-collect >"$tmp/submit6b.out" 2>&1 || { cat "$tmp/submit6b.out"; fail "qsgd-submit.sh (6b) failed"; }
want_in "$tmp/submit6b.out" '^sbatch .*--time=1 --output=.* --checkpoint-every 16$' "6b: the sbatch line"
! grep -q -- '--signal\|--requeue' "$tmp/submit6b.out" || fail "6b: --signal-before 0 still asks for a signal or a requeue"
mapfile -t ids6b < <(submitted_ids "$tmp/submit6b.out")
"$repo/slurm/qsgd-submit.sh" --sweep "$here/restart.conf" --cpu --out "$rs_a" --train "$train" \
  --no-collect >"$tmp/submit6a.out" 2>&1 || { cat "$tmp/submit6a.out"; fail "qsgd-submit.sh (6a) failed"; }
want_in "$tmp/submit6a.out" '^sbatch .*--time=5 --signal=B:USR1@120 --requeue --open-mode=append ' "6a: the sbatch line"
mapfile -t ids6a < <(submitted_ids "$tmp/submit6a.out")

# 6a: the signal Slurm sends the batch shell ahead of the time limit
# (--signal=B:USR1@S) comes at a 30-second granularity; scancel --batch
# delivers the same signal the same way, at a chosen moment: mid-run.
# signal_mid_run JOB TRACE WHAT: once JOB runs and TRACE holds 16 steps,
# the checkpoint signal to its batch shell; then until TRACE is complete.
signal_mid_run() {
  local deadline
  for _ in $(seq 60); do [ "$(job_states "$1")" = "JobState=RUNNINGx1" ] && break; sleep 1; done
  [ "$(job_states "$1")" = "JobState=RUNNINGx1" ] ||
    fail "$3: job $1 is not running 60 s after its submission (beside 6b's): $(job_states "$1")"
  for _ in $(seq 600); do [ "$(live_steps "$2")" -ge 16 ] 2>/dev/null && break; sleep 0.1; done
  [ "$(live_steps "$2")" -ge 16 ] 2>/dev/null || fail "$3: the run wrote no 16 steps in 60 s"
  scancel --batch --signal=USR1 "$1" || fail "$3: scancel --signal failed"
  deadline=$((SECONDS + 150))
  until is_complete "$2"; do [ "$SECONDS" -lt "$deadline" ] || fail "$3: the run did not finish within 150 s"; sleep 1; done
  # The trace is complete before the batch script writes its last lines
  # (and removes the checkpoint): wait for the job itself to end.
  until job_ended "$1"; do [ "$SECONDS" -lt "$deadline" ] || fail "$3: job $1 still $(job_states "$1") 150 s after the signal"; sleep 0.5; done
}
t_a="$rs_a/traces/mlp_allgather_fixed-4bit_K2.h5"
signal_mid_run "${ids6a[0]}" "$t_a" 6a
log="$(ls "$rs_a"/logs/K2-*_0.out)"
want_in "$log" 'SIGUSR1 (the time limit is near)' "6a: the task never got the checkpoint signal"
want_in "$log" 'stopped at the signal with a checkpoint .*; requeueing job' "6a: the task did not requeue itself"
want_in "$log" 'resuming from .*/checkpoints/mlp_allgather_fixed-4bit_K2.ckpt (restart 1 ' "6a: the requeued task did not resume"
check_restarted "$rs_a" 128 "6a (signal, requeue)"
# Both attempts are in the trace: the first job start and its requeue, the
# same Slurm job (restart counts 0 and 1), the second from the checkpoint's step.
[ "$(attempts_of "$t_a" | wc -l)" = 2 ] || fail "6a: the trace records $(attempts_of "$t_a" | wc -l) attempts, expected 2"
[ "$(attempts_of "$t_a" | head -n 1)" = 0 ] && [ "$(attempts_of "$t_a" | tail -n 1)" -ge 16 ] ||
  fail "6a: the attempts start at steps $(attempts_of "$t_a" | paste -sd' ')"
job0="$(attr "$t_a" attempts/0/slurm_job_id)"
for i in 0 1; do
  [ -n "$job0" ] && [ "$(attr "$t_a" "attempts/$i/slurm_job_id")" = "$job0" ] &&
    [ "$(attr "$t_a" "attempts/$i/slurm_restart_count")" = "$i" ] ||
    fail "6a: attempt $i was job '$(attr "$t_a" "attempts/$i/slurm_job_id")' restart '$(attr "$t_a" "attempts/$i/slurm_restart_count")', expected '$job0' restart $i"
done
[ "$(attr "$t_a" "attempts/0/slurm_array_task")" = "${ids6a[0]}_0" ] || fail "6a: attempt 0 does not name its array task"

hash_a="$(attr "$t_a" final_params_fnv1a)"

# 6c: a checkpoint that cannot be loaded (here garbage, as a damaged file or
# another build's would be): qsgd-train stops with exit code 9, the task
# moves the checkpoint and the trace aside and requeues itself to start over.
echo "not a checkpoint" > "$rs_a/checkpoints/mlp_allgather_fixed-4bit_K2.ckpt"
echo "not a trace" > "$t_a"
"$repo/slurm/qsgd-submit.sh" --sweep "$here/restart.conf" --cpu --out "$rs_a" --train "$train" \
  --no-collect >"$tmp/submit6d.out" 2>&1 || { cat "$tmp/submit6d.out"; fail "qsgd-submit.sh (6c) failed"; }

# 6d: the same run as 6a in one allocation per K (--per-k), stopped by the
# checkpoint signal mid-run: the allocation forwards it to the running
# configuration, which checkpoints; the job requeues itself, and its next
# start resumes the configuration to 6a's (the uncut run's) bits.
# Its own sweep name: 6c's task of restart.conf is queued under the name.
rs_d="$tmp/signal-perk"
sed 's/^name .*/name = slurm-restart-perk/' "$here/restart.conf" >"$tmp/restart-perk.conf"
"$repo/slurm/qsgd-submit.sh" --sweep "$tmp/restart-perk.conf" --cpu --out "$rs_d" --train "$train" --per-k --no-baseline \
  --no-collect >"$tmp/submit6e.out" 2>&1 || { cat "$tmp/submit6e.out"; fail "qsgd-submit.sh --per-k (6d) failed"; }
want_in "$tmp/submit6e.out" '^sbatch .*--signal=B:USR1@120 --requeue --open-mode=append .*qsgd-allocation.sbatch ' "6d: the sbatch line"
mapfile -t ids6d < <(submitted_ids "$tmp/submit6e.out")
t_d="$rs_d/traces/mlp_allgather_fixed-4bit_K2.h5"
signal_mid_run "${ids6d[0]}" "$t_d" 6d
log="$(ls "$rs_d"/logs/K2-alloc-*.out)"
want_in "$log" 'qsgd-allocation: stopped at the signal during configuration 0 .*; requeueing job' "6d: the allocation did not requeue itself"
want_in "$log" 'resuming from .*/checkpoints/mlp_allgather_fixed-4bit_K2.ckpt (restart 1 ' "6d: the requeued allocation did not resume"
want_in "$log" 'qsgd-allocation: every configuration of K=2 is complete' "6d: the requeued allocation did not finish"
[ "$(attr "$t_d" final_params_fnv1a)" = "$hash_a" ] ||
  fail "6d: final parameters $(attr "$t_d" final_params_fnv1a), the uncut run's $hash_a"
[ "$(data_of "$t_d" /steps/step | sort -n | uniq -d | wc -l)" = 0 ] && [ "$(data_of "$t_d" /steps/step | wc -l)" = 128 ] ||
  fail "6d: the trace does not hold each of 128 steps once"
[ "$(attempts_of "$t_d" | wc -l)" = 2 ] || fail "6d: the trace records $(attempts_of "$t_d" | wc -l) attempts, expected 2"
say "6d (--per-k, signal, requeue): the run ended with the uncut run's parameters ($hash_a)"
wait_empty 150
log="$(ls -t "$rs_a"/logs/K2-*_0.out | head -n 1)"
want_in "$log" 'moving the checkpoint qsgd-train could not resume from .*\.failed-' "6c: the unusable checkpoint was not moved aside"
want_in "$log" 'requeueing job .* to start the run over' "6c: the task did not requeue itself to start over"
is_complete "$t_a" || fail "6c: the run started over did not complete"
[ "$(data_of "$t_a" /steps/step | wc -l)" = 128 ] || fail "6c: the trace of the run started over lacks its 128 steps"
ls "$rs_a"/checkpoints/*.ckpt.failed-* > /dev/null 2>&1 || fail "6c: no *.ckpt.failed-* file kept"
say "6c: an unusable checkpoint was set aside and the run started over to completion"

# 6b: slurmctld ends the task at its time limit (state TIMEOUT); the
# re-submission resumes from the last periodic checkpoint.
t_b="$rs_b/traces/mlp_allgather_fixed-4bit_K2.h5"
for _ in $(seq 150); do [ "$(job_states "${ids6b[0]}")" = "JobState=TIMEOUTx1" ] && break; sleep 1; done
[ "$(job_states "${ids6b[0]}")" = "JobState=TIMEOUTx1" ] || fail "6b: job ${ids6b[0]}: $(job_states "${ids6b[0]}"), not TIMEOUT"
! is_complete "$t_b" || fail "6b: the run finished inside the time limit: make it longer"
ck="$rs_b/checkpoints/mlp_allgather_fixed-4bit_K2.ckpt"
[ -s "$ck" ] || fail "6b: no checkpoint after the time limit"
at="$(od -An -t u8 -j 24 -N 8 "$ck" | tr -d ' ')"
say "6b: cut by the time limit with a checkpoint at step $at of 640"
"$repo/slurm/qsgd-submit.sh" --sweep "$here/restart-limit.conf" --cpu --out "$rs_b" --train "$train" --signal-before 0 \
  --time 5 --no-collect >"$tmp/submit6c.out" 2>&1 || { cat "$tmp/submit6c.out"; fail "re-submission (6b) failed"; }
wait_empty 150
want_in "$(ls -t "$rs_b"/logs/K2-*_0.out | head -n 1)" "resuming from $ck" "6b: the re-submitted task did not resume"
check_restarted "$rs_b" 640 "6b (time limit, re-submission)"

# ---- 7. one allocation per K ------------------------------------------------
say "7. the tiny sweep as one allocation per K (--per-k), each with its exchange benchmark; rank 1 under nsys"
command -v nsys >/dev/null || fail "section 7 profiles with Nsight Systems: run scripts/install-deps.sh --nsys"
pk="$tmp/perk"
"$repo/slurm/qsgd-submit.sh" --sweep "$here/tiny.conf" --cpu --out "$pk" --train "$train" --per-k \
  --bench-args "-b 64K -e 256K -n 3 -w 1 --strategies allreduce,allgather --codecs elias-dense --transports ring" \
  --nsys 1 --nsys-steps 1:3 --nsys-trace nvtx \
  >"$tmp/submit7.out" 2>&1 || { cat "$tmp/submit7.out"; fail "qsgd-submit.sh --per-k failed"; }
cat "$tmp/submit7.out"
want_in "$tmp/submit7.out" "^# K=1: note: no rank of 1 is in --nsys 1" "--nsys 1: K=1 not reported as unprofiled"
! grep -q -- '--array=' "$tmp/submit7.out" || fail "--per-k submitted a job array"
for k in 1 2; do
  want_in "$tmp/submit7.out" "^sbatch .*--job-name=qsgd-slurm-test-K$k .*--time=0-00:10:00 .*qsgd-allocation.sbatch --array-script .*/slurm/qsgd-array.sbatch --indices 0,1 --bench .*qsgd-bench-exchange --bench-args .* -- --manifest .* --ranks $k " \
    "--per-k: the K=$k allocation (both configurations, twice the spec's 5 minutes)"
done
wait_empty 180
sweep_saved="$sweep" sweep="$pk"
check_sweep
sweep="$sweep_saved"
for k in 1 2; do
  log="$(ls "$pk"/logs/K$k-alloc-*.out)"
  want_in "$log" "qsgd-allocation: every configuration of K=$k is complete" "--per-k: the K=$k allocation did not finish"
  want_in "$log" "qsgd-allocation: exchange benchmark written to $pk/baselines/K$k-job" "--per-k: no exchange benchmark at K=$k"
  /usr/bin/python3 - "$pk"/baselines/K$k-job*.json "$k" <<'PY' || fail "--per-k: the K=$k exchange benchmark's JSON"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d.get("results") or d.get("rows") or []
assert rows, "no rows"
assert all(int(r.get("ranks", r.get("K", -1))) == int(sys.argv[2]) for r in rows), "rows of another K"
PY
done
grep -q 'qsgd-collect: 4 of 4 expected runs complete' "$pk"/logs/collect-*.out || fail "--per-k: the collect job did not report 4 of 4"
# The cost model refitted on this sweep (docs/model.md, "A Slurm sweep"): the
# K = 2 allocation's link from its exchange benchmark, both K = 2 runs predicted.
/usr/bin/python3 "$repo/benchmarks/model/qsgd-model" sweep "$pk" --kernels "$repo/results/reference/model/kernels.json" \
  --json "$tmp/model-sweep.json" >"$tmp/model-sweep.out" 2>&1 || { cat "$tmp/model-sweep.out"; fail "qsgd-model sweep failed"; }
cat "$tmp/model-sweep.out"
/usr/bin/python3 - "$tmp/model-sweep.json" <<'PY' || fail "qsgd-model sweep: its JSON"
import json, os, sys
d = json.load(open(sys.argv[1]))
assert [x["rate"] for x in d["links"]] == ["K2-alloc"], d["links"]
assert d["links"][0]["baseline"].startswith("baselines/K2-job"), d["links"][0]
files = sorted(os.path.basename(x["file"]) for x in d["steps"])
assert files == ["mlp_allgather_elias-dense-4bit_K2.h5", "mlp_allreduce_fp32_K2.h5"], files
assert all(x["predicted_s"] > 0 and x["measured_s"] > 0 for x in d["steps"]), d["steps"]
PY
# --nsys 1 --nsys-steps 1:3: at K=2 one report per run, of rank 1 only, with
# the two captured steps; K=1 has no rank 1 and ran without nsys.
[ ! -e "$pk/profiles/mlp_allreduce_fp32_K1" ] && [ ! -e "$pk/profiles/mlp_allgather_elias-dense-4bit_K1" ] ||
  fail "--nsys 1: a K=1 run was profiled"
for id in mlp_allreduce_fp32_K2 mlp_allgather_elias-dense-4bit_K2; do
  mapfile -t dirs < <(find "$pk/profiles/$id" -mindepth 1 -maxdepth 1 -type d -name 'job*-r0')
  [ "${#dirs[@]}" -eq 1 ] || fail "--nsys: expected one attempt directory for $id, got ${dirs[*]:-none}"
  d="${dirs[0]}"
  want_in "$(ls "$pk"/logs/K2-alloc-*.out)" "qsgd-array: profile: $d " "--nsys: the K=2 log does not name $d"
  [ -f "$d/$id.1.nsys-rep" ] || fail "--nsys: no report of rank 1 in $d ($(ls "$d"))"
  [ ! -e "$d/$id.0.nsys-rep" ] && [ ! -e "$d/$id.0.qdstrm" ] || fail "--nsys 1: rank 0 was profiled too ($d)"
  /usr/bin/python3 - "$d/summary.json" "$id" <<'PY' || fail "--nsys: the summary of $d"
import json, sys
s = json.load(open(sys.argv[1]))
meta = s
assert meta["run"] == sys.argv[2].rsplit("_K", 1)[0] and meta["K"] == 2, meta
assert meta["profiled_ranks"] == "1" and meta["steps"] == "1:3" and meta["exit_status"] == 0, meta
assert len(s["reports"]) == 1 and s["reports"][0].endswith(sys.argv[2] + ".1_nvtxsum.csv"), s["reports"]
rows = {r["range"]: r for r in s["ranges"]}
assert rows["train/capture"]["count"] == 1, rows.get("train/capture")
# steps 1 and 2, and at most one more: nsys stops asynchronously
assert 2 <= rows["train/step"]["count"] <= 3, rows["train/step"]
assert "train/evaluate" not in rows, "the evaluation after the window was recorded"
PY
done

ok=1
say "PASS"
