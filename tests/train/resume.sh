#!/usr/bin/env bash
# resume.sh MPIRUN QSGD_TRAIN: a run killed (SIGKILL, every rank) right after
# step 7, with checkpoints every 3 steps, resumes from step 6 and ends with
# the same parameter bits and the same per-step losses as an uninterrupted run.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=("${TINY[@]}" --strategy allgather --codec fixed --bits 4 --max-steps 10 --epochs 2 --flush-every 1)
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" --trace "$dir/ref.h5" || fail "reference run failed"
QSGD_TEST_CRASH_AFTER_STEP=7 "$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" \
  --trace "$dir/run.h5" --checkpoint "$dir/ckpt" --checkpoint-every 3 > "$dir/crash.log" 2>&1 \
  && fail "the crash hook did not stop the run"
h5dump -H "$dir/run.h5" > /dev/null || fail "trace of the killed run does not open"
[ "$(steps_in "$dir/run.h5")" = 7 ] || fail "killed run's trace holds $(steps_in "$dir/run.h5") steps, expected 7"
"$train" --help > /dev/null
"$mpirun" -np 2 --oversubscribe "$train" "${args[@]}" --trace "$dir/run.h5" --checkpoint "$dir/ckpt" \
  --checkpoint-every 3 --resume 2> "$dir/resume.log" || { cat "$dir/resume.log"; fail "resume failed"; }
a=$(attr "$dir/ref.h5" final_params_fnv1a) b=$(attr "$dir/run.h5" final_params_fnv1a)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "final parameters differ: uninterrupted $a, resumed $b"
[ "$(steps_in "$dir/run.h5")" = 20 ] || fail "resumed trace holds $(steps_in "$dir/run.h5") steps, expected 20"
[ "$(data_of "$dir/ref.h5" /steps/loss | wc -l)" = 40 ] || fail "reference trace lacks its 20 x 2 losses"
diff <(data_of "$dir/ref.h5" /steps/loss) <(data_of "$dir/run.h5" /steps/loss) > /dev/null \
  || fail "per-step losses of the resumed run differ from the uninterrupted run"
echo "ok: resumed run matches bitwise (hash $a)"
