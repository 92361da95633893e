#!/usr/bin/env bash
# sweep.sh REPO BUILD: qsgd-sweep runs a bundled description (--model replay
# --model-file): the description's batch, traces named after it, the
# summary's model replay:NAME, qsgd-plots' plots, and the results report's replay tables read
# the traces (one column per configuration, '-' for a configuration not run);
# --batch and a missing --model-file are refused.
set -uo pipefail
. "$(dirname "$0")/../train/common.sh"
repo=$1 build=$2
sweep=$repo/benchmarks/scaling/qsgd-sweep
desc=$repo/benchmarks/replay/models/resnet50.json
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
expect 2 "needs --model-file" "$sweep" --out "$dir/x" --model replay --dry-run
expect 2 "--batch does not apply to --model replay" "$sweep" --out "$dir/x" --model replay --model-file "$desc" \
  --batch 64 --dry-run
expect 2 "goes with --model replay" "$sweep" --out "$dir/x" --model-file "$desc" --dry-run
dry=$("$sweep" --out "$dir/dry" --model replay --model-file "$desc" --ranks 2 --configs fp32 --dry-run 2>&1) ||
  fail "dry run failed: $dry"
grep -q -- "--batch 128 .*--model replay .*--model-file $desc .*--trace $dir/dry/resnet50-local-K2-allreduce-fp32.h5" \
  <<< "$dry" || fail "the replay's command lacks the description's batch, the file or the trace name: $dry"
"$sweep" --out "$dir/run" --model replay --model-file "$desc" --ranks 2 --configs fp32,4bit --strategies scatter-reduce \
  --max-steps 3 --build "$build" > "$dir/out.txt" 2>&1 || { cat "$dir/out.txt"; fail "the replay sweep failed"; }
for t in resnet50-local-K2-allreduce-fp32 resnet50-local-K2-scatter-reduce-fixed-4bit; do
  is_complete "$dir/run/$t.h5" || fail "$t.h5 is missing or incomplete"
done
ls "$dir"/run/plots/*.png > /dev/null 2>&1 || fail "qsgd-plots wrote no plot of the replay sweep: $(cat "$dir/out.txt")"
grep -q "^replay:resnet50  *2 .*scatter-reduce" "$dir/run/summary.txt" || fail "the summary does not name the model: $(cat "$dir/run/summary.txt")"
/usr/bin/python3 - "$repo" "$dir/run" <<'PY' || fail "the replay tables do not read the sweep"
import sys
sys.path.insert(0, sys.argv[1] + "/benchmarks/common")
from qsgd_report import load_script
T = load_script(sys.argv[1] + "/benchmarks/report/qsgd-tables", "qsgd_tables")
table = T.table_replay_models(sys.argv[2])
rows = [l for l in table.splitlines() if l.startswith("| ResNet-50 ")]
assert len(rows) == 1, table
cells = [c.strip() for c in rows[0].strip("|").split("|")]
# model, link, K, fp32 step (exposed), bf16, 4-bit, 2-bit, rANS, PowerSGD
assert cells[1:3] == ["shared memory", "2"], cells
assert cells[4] == "-" and cells[6:] == ["-", "-", "-"], cells
assert cells[5].endswith(" sr") and cells[5].split(" / ")[1].startswith("-"), cells  # no bf16 run: no ratio
runs = T.table_replay_models_runs(sys.argv[2])
assert sum(l.startswith("| ResNet-50 ") for l in runs.splitlines()) == 2, runs
assert "| 4-bit QSGD, scatter-reduce | " in runs and "| fp32 ring allreduce | 32.00 |" in runs, runs
PY
echo "PASS"
