#!/usr/bin/env bash
# breakdown.sh MPIRUN QSGD_TRAIN: with one rank nothing is communicated, so
# every step of every strategy (both transports; also without overlap and
# with progress from hooks only) must book exactly zero exposed and zero
# hidden communication and receive zero bytes; and with two ranks an fp32
# allreduce must book some communication (else the check above could pass
# on a field that is never written).
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
check() {  # check TRACE EXPR: EXPR over the /steps datasets must hold
  /usr/bin/python3 - "$1" "$2" <<'PY' || fail "$1: $2 does not hold"
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "r") as f:
    s = {k: f["steps"][k][:] for k in f["steps"]}
    ok = bool(eval(sys.argv[2], {"np": np}, s))
print("%s: %s -> %s" % (sys.argv[1].split("/")[-1], sys.argv[2], ok))
sys.exit(0 if ok else 1)
PY
}
n=0
one_rank() {  # one_rank ARGS...: a K = 1 run must book no communication at all
  n=$((n + 1))
  "$mpirun" -np 1 "$train" "${TINY[@]}" --codec fixed --bits 4 --max-steps 6 --trace "$dir/k1-$n.h5" "$@" \
    || fail "K=1 $* exited $?"
  check "$dir/k1-$n.h5" "(comm_exposed == 0).all() and (comm_hidden == 0).all() and (wire_bytes == 0).all()"
}
for strategy in allreduce allreduce16 allgather param-server scatter-reduce; do
  for transport in ring library; do one_rank --strategy "$strategy" --transport "$transport"; done
done
one_rank --strategy scatter-reduce --no-overlap
one_rank --strategy allreduce --progress hooks
"$mpirun" -np 2 --oversubscribe "$train" "${TINY[@]}" --strategy allreduce --max-steps 6 --trace "$dir/k2.h5" \
  || fail "K=2 allreduce exited $?"
check "$dir/k2.h5" "(wire_bytes > 0).all() and ((comm_exposed + comm_hidden) > 0).all()"
echo "ok: $n one-rank configurations book no communication; two ranks do"
