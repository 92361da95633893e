#!/usr/bin/env bash
# clip.sh MPIRUN QSGD_TRAIN: --clip-norm end to end at K = 2 (4-bit fixed,
# allgather). With clipping on, the averaged gradient's norm is in the trace
# (grad_norm), the same on both ranks, finite and positive; without it the
# norm is not measured (NaN); a bound above every step's norm
# leaves the run bit for bit as without clipping (the scale is exactly 1); a
# bound below every norm changes it, and with momentum 0 each update is then
# lr x the bound long, so the loss moves far less than unclipped. The
# coefficient itself (torch's rule) is unit-tested in tests/models.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # run NAME ARGS...
  local name=$1; shift
  "$mpirun" -np 2 --oversubscribe "$train" "${TINY[@]}" --teacher-samples 64 --strategy allgather --codec fixed \
    --bits 4 --epochs 12 --momentum 0 --lr 0.05 --trace "$dir/$name.h5" "$@" || fail "$name: qsgd-train exited $?"
}
run plain
run above --clip-norm 1e30
run below --clip-norm 1e-4
a=$(attr "$dir/plain.h5" final_params_fnv1a) b=$(attr "$dir/above.h5" final_params_fnv1a)
c=$(attr "$dir/below.h5" final_params_fnv1a)
[ -n "$a" ] && [ "$a" = "$b" ] || fail "a bound above every norm changed the run: hashes '$a' and '$b'"
[ "$a" != "$c" ] || fail "a bound below every norm left the run unchanged (hash $a)"
/usr/bin/python3 - "$dir" <<'PY' || fail "grad_norm or the clipped run's loss (above)"
import sys, h5py, numpy as np
d = sys.argv[1]
def load(name):
    with h5py.File("%s/%s.h5" % (d, name), "r") as f:
        return f["steps/grad_norm"][:], f["steps/loss"][:]
g0, lp = load("plain")
gp, _ = load("above")
gb, lb = load("below")
if not np.isnan(g0).all():
    sys.exit("grad_norm measured without --clip-norm: %s" % g0)
if gp.shape != (12, 2):
    sys.exit("grad_norm has shape %s, expected 12 steps x 2 ranks" % (gp.shape,))
if not (np.isfinite(gp).all() and (gp > 1e-4).all()):
    sys.exit("grad_norm not finite and above the bound 1e-4 everywhere: %s" % gp)
if not (gp[:, 0] == gp[:, 1]).all() or not (gb[:, 0] == gb[:, 1]).all():
    sys.exit("the ranks recorded different norms of the same averaged gradient")
if gp[0, 0] != gb[0, 0]:
    sys.exit("step 0 precedes any update, yet its norm differs: %r vs %r" % (gp[0, 0], gb[0, 0]))
move = lambda l: abs(l.mean(axis=1)[-1] - l.mean(axis=1)[0])
print("grad_norm steps 0-11: %s" % np.array2string(gp[:, 0], precision=3))
print("loss change over 12 steps: unclipped %.4f, clipped to 1e-4: %.6f" % (move(lp), move(lb)))
if not move(lb) < 0.01 * move(lp):
    sys.exit("the clipped run's loss moved %.6f, not under 1%% of the unclipped %.4f" % (move(lb), move(lp)))
PY
echo "ok: clipping off above every norm (hash $a), on below it"
