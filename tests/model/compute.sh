#!/usr/bin/env bash
# compute.sh REPO BUILD: measure-compute.sh runs K copies of a tiny qsgd-train
# run at once for K = 1 and 2, each trace complete and named as qsgd-model
# reads them; measured again into the same folder, it replaces the copies;
# qsgd-model's shared_compute reads the folder (one compute per K).
set -uo pipefail
repo=$1 build=$2
. "$repo/tests/trace_query.sh"  # is_complete
fail() { echo "FAIL: $*" >&2; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
args=(--model mlp --mlp-widths 784,32,10 --dataset teacher --teacher-samples 2048 --batch 32 --max-steps 6 --epochs 1
      --eval-limit 64 --quiet --strategy allreduce --codec fp32)
for attempt in 1 2; do
  "$repo/benchmarks/model/measure-compute.sh" --out "$dir/compute" --name mlp --ranks 1,2 --build "$build" -- "${args[@]}" \
    || fail "measure-compute.sh exited $? (attempt $attempt)"
  for f in mlp-K1-copy1 mlp-K2-copy1 mlp-K2-copy2; do
    is_complete "$dir/compute/$f.h5" || fail "$f.h5 is missing or incomplete (attempt $attempt)"
  done
  [ "$(ls "$dir/compute"/*.h5 | wc -l)" = 3 ] || fail "expected 3 traces, found: $(ls "$dir/compute")"
done
/usr/bin/python3 - "$repo" "$dir" <<'PY' || fail "qsgd-model does not read the copies"
import importlib.util, os, sys
repo, d = sys.argv[1], sys.argv[2]
sys.path.insert(0, os.path.join(repo, "benchmarks", "common"))
import qsgd_report
m = qsgd_report.load_script(os.path.join(repo, "benchmarks", "model", "qsgd-model"), "qsgd_model_cmd")
class Inputs: dir = d
c = m.shared_compute(Inputs())
assert sorted(c) == [("mlp", 1), ("mlp", 2)], sorted(c)
for k, v in c.items():
    assert v.forward > 0 and v.backward > 0, (k, v.forward, v.backward)
print("ok: compute of K = 1 and 2 read by qsgd-model")
PY
echo "ok: measure-compute.sh"
