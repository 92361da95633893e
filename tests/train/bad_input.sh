#!/usr/bin/env bash
# bad_input.sh MPIRUN QSGD_TRAIN: wrong options, missing data and an existing
# trace each give a clear error naming the cause, and nothing already written
# is touched.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect() {  # expect CODE PATTERN CMD...
  local code=$1 pat=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$code" ] || fail "exit $rc (expected $code) from: $* :: $out"
  grep -q -- "$pat" <<< "$out" || fail "message lacks '$pat': $out"
}
expect 2 "unknown option '--bogus'" "$train" --bogus
expect 2 "--bits must be 1..24" "$train" --bits 40
expect 2 "--strategy\|unknown strategy" "$train" --strategy carrier-pigeon
expect 1 "$dir/nowhere" "$mpirun" -np 1 "$train" --data-dir "$dir/nowhere" --max-steps 1
"$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 2 --trace "$dir/t.h5" || fail "tiny run failed"
before=$(md5sum < "$dir/t.h5")
expect 1 "never overwritten" "$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 2 --trace "$dir/t.h5"
[ "$(md5sum < "$dir/t.h5")" = "$before" ] || fail "existing trace was modified"
echo "ok"
