#!/usr/bin/env bash
# resume.sh MPIRUN QSGD_TRAIN: two interrupted runs resume to the bits of an
# uninterrupted one (final parameters, every per-step loss, and the epochs'
# training losses and step counts, which come from the per-rank totals the
# checkpoint carries); training time goes on from the checkpoint's.
#   1. SIGKILL of every rank right after step 7, checkpoints every 3 steps:
#      the trace file opens, with its journal it holds the 7 steps (a merged
#      copy shows them), and the run resumes from step 6 on the file and its
#      journal. The trace keeps both attempts' provenance (/attempts/0 from
#      step 0, /attempts/1 from step 6).
#   2. SIGUSR1 to mpirun (which forwards it to the ranks) with
#      --checkpoint-signal USR1 and no periodic checkpoints: the ranks agree
#      on a step, checkpoint after it and exit with code 8; --resume goes on
#      from there.
#   3. a damaged checkpoint: --resume stops every rank before the first step
#      with exit code 9 and a line naming the file and the cause, and
#      changes neither the checkpoint nor the trace.
#   4. error feedback (ef21: every rank's own state and the shared mean, and
#      ef on scatter-reduce), killed after step 7: the checkpoint carries the
#      ranks' states, and the resumed run ends with the uninterrupted one's bits.
#   5. powersgd (rank 2, ef-unscaled), killed after step 7: the checkpoint
#      carries every matrix's warm-start Q (the exchange's state) as well.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
export QSGD_TRACE_TOOL="$(dirname "$train")/qsgd-trace"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=("${TINY[@]}" --strategy allgather --codec fixed --bits 4 --max-steps 10 --epochs 2 --flush-every 1 --eval-every 4)
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" --trace "$dir/ref.h5" || fail "reference run failed"
[ "$(data_of "$dir/ref.h5" /steps/loss | wc -l)" = 40 ] || fail "reference trace lacks its 20 x 2 losses"
same_as_ref() {  # same_as_ref TRACE WHAT [REF]: the bits an uninterrupted run (REF, else ref.h5) writes
  local a b d ref="${3:-$dir/ref.h5}"
  a=$(attr "$ref" final_params_fnv1a) b=$(attr "$1" final_params_fnv1a)
  [ -n "$a" ] && [ "$a" = "$b" ] || fail "$2: final parameters differ: uninterrupted $a, resumed $b"
  [ "$(attr "$1" complete)" = true ] || fail "$2: the resumed trace is not complete"
  [ "$(steps_in "$1")" = 20 ] || fail "$2: resumed trace holds $(steps_in "$1") steps, expected 20"
  for d in /steps/loss /epochs/train_loss /epochs/steps /evals/step; do
    diff <(data_of "$ref" $d) <(data_of "$1" $d) > /dev/null || fail "$2: $d differs from the uninterrupted run"
  done
  # Training time never restarts at zero: it grows from one evaluation to the next.
  data_of "$1" /evals/train_time | awk -v w="$2" 'NR > 1 && $1 < prev { print "FAIL: " w ": evaluation train_time falls from " prev " to " $1; bad = 1 }
    { prev = $1 } END { exit bad }' >&2 || exit 1
  echo "ok: $2: resumed run matches bitwise (hash $a)"
}

# 1. killed
QSGD_TEST_CRASH_AFTER_STEP=7 "$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" \
  --trace "$dir/run.h5" --checkpoint "$dir/ckpt" --checkpoint-every 3 > "$dir/crash.log" 2>&1 \
  && fail "the crash hook did not stop the run"
h5dump -H "$dir/run.h5" > /dev/null || fail "trace of the killed run does not open"
[ "$(live_steps "$dir/run.h5")" = 7 ] || fail "killed run's trace and journal hold $(live_steps "$dir/run.h5") steps, expected 7"
mkdir "$dir/copy" && cp "$dir/run.h5" "$dir/run.h5.journal" "$dir/copy/" || fail "the killed run left no journal"
trace_tool merge "$dir/copy/run.h5" > /dev/null || fail "qsgd-trace merge failed on the killed run's trace"
[ "$(steps_in "$dir/copy/run.h5")" = 7 ] || fail "the merged trace holds $(steps_in "$dir/copy/run.h5") steps, expected 7"
sleep 1  # the resume's date (whole seconds) differs from the killed run's
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" --trace "$dir/run.h5" --checkpoint "$dir/ckpt" \
  --checkpoint-every 3 --resume 2> "$dir/resume.log" || { cat "$dir/resume.log"; fail "resume failed"; }
same_as_ref "$dir/run.h5" "killed at step 7"
[ "$(attempts_of "$dir/run.h5" | paste -sd' ')" = "0 6" ] ||
  fail "the resumed trace's attempts start at steps '$(attempts_of "$dir/run.h5" | paste -sd' ')', expected '0 6'"
[ "$(attempts_of "$dir/ref.h5" | paste -sd' ')" = 0 ] || fail "an uninterrupted run's trace does not hold one attempt"
for i in 0 1; do
  [ -n "$(attr "$dir/run.h5" "attempts/$i/date")" ] && [ -n "$(attr "$dir/run.h5" "attempts/$i/qsgd_git_hash")" ] ||
    fail "attempt $i of the resumed trace lacks its date or build"
done
# The first attempt's provenance survives the resume: its date is the killed
# run's own, a second or more before the resume's (which is the root's).
[ "$(attr "$dir/run.h5" attempts/1/date)" = "$(attr "$dir/run.h5" date)" ] || fail "the root date is not the last attempt's"
[ "$(attr "$dir/run.h5" attempts/0/date)" \< "$(attr "$dir/run.h5" attempts/1/date)" ] ||
  fail "attempt 0's date $(attr "$dir/run.h5" attempts/0/date) is not before attempt 1's $(attr "$dir/run.h5" attempts/1/date)"
echo "ok: the resumed trace records both attempts (first steps 0 and 6)"

# 2. stopped by the checkpoint signal: steps slowed down (20 ms per gradient
# hook, about 0.1 s a step) so that the signal comes mid-run.
slow=(--synthetic-backward-ms 20 --checkpoint "$dir/sig.ckpt" --checkpoint-signal USR1)
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" "${slow[@]}" --trace "$dir/sig.h5" > "$dir/sig.log" 2>&1 &
pid=$!
for _ in $(seq 300); do  # until the trace holds 3 steps
  [ "$(live_steps "$dir/sig.h5")" -ge 3 ] 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
kill -USR1 "$pid" || fail "mpirun was gone before the signal"
wait "$pid"; rc=$?
[ "$rc" = 8 ] || { cat "$dir/sig.log"; fail "stopped run exited with $rc, expected 8"; }
grep -q "stopped at signal .* after a checkpoint in $dir/sig.ckpt" "$dir/sig.log" || { cat "$dir/sig.log"; fail "no stop message"; }
n=$(steps_in "$dir/sig.h5")
[ ! -e "$dir/sig.h5.journal" ] || fail "a stopped run left its trace's journal (the file holds everything)"
[ "$(attr "$dir/sig.h5" complete)" != true ] || fail "a stopped run's trace is marked complete"
[ "$n" -ge 3 ] && [ "$n" -lt 20 ] || fail "the stopped run's trace holds $n steps"
# The checkpoint is at the step where the trace stopped (its global step:
# u64 at byte 24, docs in train/include/qsgd/train/checkpoint.hpp).
c=$(od -An -t u8 -j 24 -N 8 "$dir/sig.ckpt" | tr -d ' ')
[ "$c" = "$n" ] || fail "the signal's checkpoint is at step $c, the trace stopped at $n"
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" "${slow[@]}" --trace "$dir/sig.h5" --resume \
  2> "$dir/sig-resume.log" || { cat "$dir/sig-resume.log"; fail "resume after the signal failed"; }
same_as_ref "$dir/sig.h5" "stopped by SIGUSR1 after step $n"

# 3. a checkpoint that cannot be loaded (truncated after its header).
cp "$dir/sig.ckpt" "$dir/bad.ckpt"
truncate -s 100 "$dir/bad.ckpt"
cp "$dir/sig.h5" "$dir/bad.h5"
sum_before=$(cat "$dir/bad.ckpt" "$dir/bad.h5" | md5sum)
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" --trace "$dir/bad.h5" --checkpoint "$dir/bad.ckpt" --resume \
  > "$dir/bad.log" 2>&1
rc=$?
[ "$rc" = 9 ] || { cat "$dir/bad.log"; fail "resume from a damaged checkpoint exited with $rc, expected 9"; }
grep -q "cannot resume from $dir/bad.ckpt: .*wrong size" "$dir/bad.log" || { cat "$dir/bad.log"; fail "no line naming the checkpoint and the cause"; }
[ "$(cat "$dir/bad.ckpt" "$dir/bad.h5" | md5sum)" = "$sum_before" ] || fail "a failed resume changed the checkpoint or the trace"
echo "ok: damaged checkpoint refused with exit code 9"

# 4. error feedback: the state each rank keeps goes through the checkpoint.
for fb in "ef21 allgather" "ef scatter-reduce"; do
  read -r kind strategy <<<"$fb"
  efa=("${args[@]}" --strategy "$strategy" --bits 2 --error-feedback "$kind")
  "$mpirun" -np 2 --oversubscribe "$train" "${efa[@]}" --trace "$dir/$kind-ref.h5" || fail "$kind: reference run failed"
  "$mpirun" -np 2 --oversubscribe "$train" "${efa[@]}" --error-feedback none --trace "$dir/$kind-none.h5" ||
    fail "$kind: the run without error feedback failed"
  [ "$(attr "$dir/$kind-ref.h5" final_params_fnv1a)" != "$(attr "$dir/$kind-none.h5" final_params_fnv1a)" ] ||
    fail "$kind: error feedback changed nothing"
  QSGD_TEST_CRASH_AFTER_STEP=7 "$mpirun" -np 2 --oversubscribe "$train" "${efa[@]}" --trace "$dir/$kind.h5" \
    --checkpoint "$dir/$kind.ckpt" --checkpoint-every 3 > "$dir/$kind-crash.log" 2>&1 && fail "$kind: the crash hook did not stop the run"
  "$mpirun" -np 2 --oversubscribe "$train" "${efa[@]}" --trace "$dir/$kind.h5" --checkpoint "$dir/$kind.ckpt" \
    --checkpoint-every 3 --resume 2> "$dir/$kind-resume.log" || { cat "$dir/$kind-resume.log"; fail "$kind: resume failed"; }
  same_as_ref "$dir/$kind.h5" "$kind on $strategy, killed at step 7" "$dir/$kind-ref.h5"
done

# 5. powersgd: its warm start (every matrix's Q) goes through the checkpoint.
psa=("${args[@]}" --strategy powersgd --powersgd-rank 2 --error-feedback ef-unscaled)
"$mpirun" -np 2 --oversubscribe "$train" "${psa[@]}" --trace "$dir/psgd-ref.h5" || fail "powersgd: reference run failed"
QSGD_TEST_CRASH_AFTER_STEP=7 "$mpirun" -np 2 --oversubscribe "$train" "${psa[@]}" --trace "$dir/psgd.h5" \
  --checkpoint "$dir/psgd.ckpt" --checkpoint-every 3 > "$dir/psgd-crash.log" 2>&1 && fail "powersgd: the crash hook did not stop the run"
"$mpirun" -np 2 --oversubscribe "$train" "${psa[@]}" --trace "$dir/psgd.h5" --checkpoint "$dir/psgd.ckpt" \
  --checkpoint-every 3 --resume 2> "$dir/psgd-resume.log" || { cat "$dir/psgd-resume.log"; fail "powersgd: resume failed"; }
same_as_ref "$dir/psgd.h5" "powersgd rank 2 + ef-unscaled, killed at step 7" "$dir/psgd-ref.h5"
