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
#      expected sbatch and srun lines and touches nothing.
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

tmp="$(mktemp -d /tmp/qsgd-slurm-test.XXXXXX)"
chmod 0755 "$tmp"  # the munge user must reach its socket directory
conf="$tmp/etc/slurm.conf"
export SLURM_CONF="$conf"
mkdir -p "$tmp/etc" "$tmp/state" "$tmp/spool" "$tmp/log" "$tmp/run" "$tmp/munge"
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
AuthInfo=socket=$sock
SlurmUser=root
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
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
submitted_ids() { sed -n 's/^# K=[0-9]*: submitted job \([0-9]*\);.*/\1/p; s/^# collect: job \([0-9]*\) .*/\1/p' "$1"; }
is_complete() { h5dump -a /complete "$1" 2>/dev/null | grep -q '(0): "true"'; }
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
say "1. submitting the tiny CPU sweep (held, with a site comment)"
submit "$tmp/submit1.out" --sbatch-arg=--hold --sbatch-arg=--comment=qsgd-site-option
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
# The GPU request as a generic resource (--gres=gpu:G), on sbatch and srun.
"$repo/slurm/qsgd-submit.sh" --gpus 16 --gpus-per-node 8 --gpu-request gres --dry-run --out "$dry" --train "$train" \
  >"$tmp/dry3.out" 2>&1 || { cat "$tmp/dry3.out"; fail "dry run (--gpu-request gres) failed"; }
grep -q '^sbatch .*--nodes=2 --ntasks-per-node=8 --gres=gpu:8 .*qsgd-array.sbatch' "$tmp/dry3.out" ||
  { cat "$tmp/dry3.out"; fail "the array sbatch line does not ask --gres=gpu:8"; }
grep -q '^#   task 0: srun --nodes=2 --ntasks=16 --ntasks-per-node=8 --gres=gpu:8 --gpu-bind=single:1 ' "$tmp/dry3.out" ||
  { cat "$tmp/dry3.out"; fail "the srun line does not ask --gres=gpu:8"; }
! grep -q -- '--gpus-per-node' "$tmp/dry3.out" || fail "--gpu-request gres still asks --gpus-per-node"

ok=1
say "PASS"
