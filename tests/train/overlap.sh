#!/usr/bin/env bash
# overlap.sh QSGD_TRAIN NETLAB: real overlap on a shaped link. Two emulated
# nodes on 100 Mbit/s links, a backward made slower by a synthetic 40 ms per
# gradient hook, 2.7 MB of fp32 gradient in four buckets: with overlap (and
# the progress thread) buckets go out during backward, so in every step a
# bucket must be posted before backward ended, and against the same run with
# --no-overlap the exposed communication must fall and the hidden one rise.
# Needs root and network namespaces (netlab.sh); fails, never skips, without.
set -uo pipefail
. "$(dirname "$0")/common.sh"
train=$1 netlab=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--model mlp --mlp-widths 784,512,512,10 --dataset teacher --teacher-samples 4096 --batch 32 --eval-limit 256
      --layer-filter 1000 --fusion-mb 1 --quiet --strategy allreduce --max-steps 8 --synthetic-backward-ms 40)
for mode in overlap no-overlap; do
  extra=()
  [ "$mode" = no-overlap ] && extra=(--no-overlap)
  "$netlab" --nodes 2 --rate 100mbit -- "$train" "${args[@]}" "${extra[@]}" --trace "$dir/$mode.h5" \
    || fail "netlab run ($mode) exited $? (needs root and ip netns)"
done
/usr/bin/python3 - "$dir/overlap.h5" "$dir/no-overlap.h5" <<'PY' || fail "overlap not shown in the trace"
import sys, h5py, numpy as np
def load(p):
    with h5py.File(p, "r") as f:
        s, b = f["steps"], f["buckets"]
        return {k: s[k][1:] for k in ("comm_hidden", "comm_exposed", "forward", "backward")}, \
               b["posted"][1:], int(f.attrs["buckets"])
ov, posted, nb = load(sys.argv[1])
no, _, _ = load(sys.argv[2])
med = lambda d, k: float(np.median(d[k]))
# A bucket was on the network before backward (compute and the synthetic wait) ended, in every step.
early = float(np.mean(np.nanmin(posted, axis=2) < ov["forward"] + ov["backward"]))
print("buckets %d; steps with a bucket posted during backward: %.0f%%" % (nb, 100 * early))
print("median per step: overlap: exposed %.3f s, hidden %.3f s; no-overlap: exposed %.3f s, hidden %.3f s"
      % (med(ov, "comm_exposed"), med(ov, "comm_hidden"), med(no, "comm_exposed"), med(no, "comm_hidden")))
# Overlap must move communication from exposed to hidden.
ok = nb >= 2 and early == 1.0 and med(ov, "comm_exposed") < med(no, "comm_exposed") \
     and med(ov, "comm_hidden") > med(no, "comm_hidden")
sys.exit(0 if ok else 1)
PY
echo "ok: communication hidden under backward"
