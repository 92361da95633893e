#!/usr/bin/env bash
# bad_input.sh MPIRUN QSGD_TRAIN: wrong options, missing data and an existing
# trace each give a clear error naming the cause, and nothing already written
# is touched.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# Every refusal of the command line and its message: test_units.cpp
# (train.Options.*). Here the program's side: exit status 2 and the message,
# launched alone (MPI's singleton start) and under mpirun.
expect 2 "unknown option '--bogus'" "$train" --bogus
expect 2 "unknown strategy 'carrier-pigeon'" "$mpirun" -np 1 "$train" --strategy carrier-pigeon
expect 2 "--strategy scatter-reduce requantizes the average" "$mpirun" -np 1 "$train" --strategy scatter-reduce \
  --codec fixed --error-feedback ef21
expect 1 "$dir/nowhere" "$mpirun" -np 1 "$train" --data-dir "$dir/nowhere" --max-steps 1
"$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 2 --trace "$dir/t.h5" || fail "tiny run failed"
before=$(md5sum < "$dir/t.h5")
expect 1 "never overwritten" "$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 2 --trace "$dir/t.h5"
[ "$(md5sum < "$dir/t.h5")" = "$before" ] || fail "existing trace was modified"
# A trace whose /steps dataspace claims 2^40 rows (no data: a chunked,
# unwritten dataset), edited with h5py: resume refuses it by its checksum
# block before HDF5 parses it. Re-sealed with a valid checksum block (a
# forged file), it reaches the reader, which rejects it with its limit; the
# attempts' peak resident memory stays within 100 MB of a normal tiny run's.
"$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 4 --trace "$dir/r.h5" --checkpoint "$dir/ckpt" \
  --checkpoint-every 2 > /dev/null 2>&1 || fail "tiny run with checkpoints failed"
/usr/bin/python3 - "$dir/r.h5" <<'PY' || fail "could not forge the trace (h5py)"
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    del f["steps/step"]
    f["steps"].create_dataset("step", shape=(2**40,), dtype="i8", chunks=(4096,), maxshape=(None,))
PY
forge="$(dirname "$0")/forge_trace.py"
peaks=$(/usr/bin/python3 - "$mpirun" "$train" "$dir" "$(dirname "$forge")" "${TINY[@]}" <<'PY'
import resource, subprocess, sys
mpirun, train, d, forge_dir, tiny = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5:]
def peak(args):
    p = subprocess.run([mpirun, "-np", "1", train] + tiny + args, capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
sys.path.insert(0, forge_dir)
from forge_trace import seal  # the checksum block of docs/traces.md, written from its description
resume = ["--max-steps", "4", "--trace", d + "/r.h5", "--checkpoint", d + "/ckpt", "--resume"]
rc0, _, base = peak(["--max-steps", "4", "--trace", d + "/base.h5"])
rc1, out1, _ = peak(resume)
seal(d + "/r.h5")
rc, out, forged = peak(resume)
# RUSAGE_CHILDREN is the largest child so far: forged >= base; its growth is what the resumes added.
print(rc0, rc1, "checksum" if "fails its checksum" in out1 else "nochecksum", rc, base // 1024, forged // 1024,
      "limit" if "more than the reader's limit" in out else "nolimit")
print(out1.strip().splitlines()[-1] if out1.strip() else "", file=sys.stderr)
print(out.strip().splitlines()[-1] if out.strip() else "", file=sys.stderr)
PY
) || fail "peak memory probe failed"
read -r rc0 rc1 sum rc base_mb forged_mb msg <<< "$peaks"
[ "$rc0" = 0 ] || fail "baseline tiny run exited $rc0"
[ "$rc1" = 1 ] || fail "resume of the edited trace exited $rc1 (expected 1)"
[ "$sum" = checksum ] || fail "resume of the edited trace did not name its checksum"
[ "$rc" = 1 ] || fail "resume of the forged trace exited $rc (expected 1)"
[ "$msg" = limit ] || fail "resume of the forged trace did not name the reader's limit"
[ $((forged_mb - base_mb)) -lt 100 ] || fail "resume of the forged trace peaked at $forged_mb MB (baseline $base_mb MB)"
echo "forged 2^40-row trace rejected; peak $forged_mb MB, baseline run $base_mb MB"
# Forged traces (valid checksum blocks) whose datasets are not what the
# writer stores: --resume names the dataset and exits 1 before HDF5 reads
# its data. /steps/epoch as floats; /steps/epoch compact with a layout that
# says 0 bytes for its elements, on which HDF5 1.10.8's H5Dread crashes.
"$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 4 --trace "$dir/f.h5" --checkpoint "$dir/ckpt2" \
  --checkpoint-every 2 > /dev/null 2>&1 || fail "tiny run with checkpoints failed"
for edit in float-epoch:"is not of the type the writer stores" empty-compact:"keeps 0 bytes for"; do
  cp "$dir/f.h5" "$dir/g.h5"
  /usr/bin/python3 "$forge" "${edit%%:*}" "$dir/g.h5" || fail "could not forge the trace (${edit%%:*})"
  expect 1 "g.h5: dataset /steps/epoch ${edit#*:}" "$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 4 \
    --trace "$dir/g.h5" --checkpoint "$dir/ckpt2" --resume
done
echo "ok"
