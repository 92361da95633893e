#!/usr/bin/env bash
# replay.sh MPIRUN QSGD_TRAIN: --record-model writes the description of a
# real run's model (every tensor in backward order with its gradient-ready
# time and statistics, the measured times); --model replay runs it at K = 2
# through a real exchange, with the trace saying what was replayed and that
# accuracy was not measured; options replay cannot honour are refused, and a
# missing or broken description is an error naming the file.
set -uo pipefail
. "$(dirname "$0")/common.sh"
mpirun=$1 train=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$mpirun" -np 1 "$train" "${TINY[@]}" --max-steps 12 --record-model "$dir/tiny.json" --trace "$dir/real.h5" ||
  fail "recording run failed"
/usr/bin/python3 - "$dir/tiny.json" <<'PY' || fail "the description is not what the run was"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["format"] == "qsgd-model-description" and d["version"] == 1, d
assert d["model"] == "mlp:784-64-64-10" and d["batch"] == 32 and d["train_samples"] == 4096, d
t = d["times"]
assert t["source"] == "measured" and t["device"] == "cpu", t
assert t["forward_s"] > 0 and t["backward_s"] > 0 and t["optimizer_s"] > 0, t
names = [x["name"] for x in d["tensors"]]
assert names == ["fc3.bias", "fc3.weight", "fc2.bias", "fc2.weight", "fc1.bias", "fc1.weight"], names
ready = [x["ready_s"] for x in d["tensors"]]
assert ready == sorted(ready) and ready[-1] <= t["backward_s"], (ready, t)
for x in d["tensors"]:
    assert x["grad_std"] > 0 and len(x["abs_quantiles"]) == 16, x
    assert x["abs_quantiles"] == sorted(x["abs_quantiles"]), x
assert sum(x["shape"][0] * (x["shape"][1] if len(x["shape"]) > 1 else 1) for x in d["tensors"]) == 784*64+64+64*64+64+64*10+10
assert d["provenance"]["tool"] == "qsgd-train --record-model"
PY
# Recorded at K = 2: the spreads come from both ranks (the factor they share
# in a step and each rank's own); at K = 1 there is one rank's spread only.
"$mpirun" -np 2 "$train" "${TINY[@]}" --max-steps 12 --record-model "$dir/tiny-k2.json" --quiet ||
  fail "recording run at K = 2 failed"
/usr/bin/python3 - "$dir/tiny.json" "$dir/tiny-k2.json" <<'PY' || fail "the spreads are not what the runs' ranks give"
import json, sys
one, two = (json.load(open(p)) for p in sys.argv[1:3])
assert one["provenance"]["spread_ranks"] == "1" and "rank_spread" not in one["times"], one["times"]
assert two["provenance"]["spread_ranks"] == "2", two["provenance"]
for phase in ("forward", "backward", "optimizer"):
    for key in ("spread", "rank_spread"):
        q = two["times"][key][phase]
        assert len(q) == 16 and q == sorted(q) and q[0] > 0, (key, phase, q)
    # Two ranks' own factors about their shared one are mirror images: x / ((x + y) / 2) and y / ((x + y) / 2)
    # sum to 2, so the rank spread's quantiles pair up about 1.
    q = two["times"]["rank_spread"][phase]
    assert all(abs(q[k] + q[15 - k] - 2) < 1e-6 for k in range(8)), (phase, q)
PY
"$mpirun" -np 2 "$train" --model replay --model-file "$dir/tiny-k2.json" --max-steps 4 --quiet ||
  fail "replay of the K = 2 description failed"
"$mpirun" -np 2 "$train" --model replay --model-file "$dir/tiny.json" --max-steps 10 --strategy scatter-reduce --codec fixed \
  --bits 4 --layer-filter 1000 --fusion-mb 1 --trace "$dir/replay.h5" --quiet || fail "replay at K = 2 failed"
is_complete "$dir/replay.h5" || fail "the replay's trace is not complete"
[ "$(steps_in "$dir/replay.h5")" = 10 ] || fail "replay trace holds $(steps_in "$dir/replay.h5") step rows, expected 10"
replay=$(attr "$dir/replay.h5" replay)
grep -q '"accuracy":"not measured' <<< "$replay" || fail "the trace does not say accuracy was not measured: $replay"
grep -q '"compute":"spin"' <<< "$replay" || fail "a CPU description replays spinning by default: $replay"
grep -q '"batch":32' <<< "$replay" || fail "the replay's batch is not the description's: $replay"
[ "$(h5dump -H -d /evals/step "$dir/replay.h5" 2>/dev/null | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p')" = 0 ] ||
  fail "a replay wrote evaluation records"
bits=$(data_of "$dir/replay.h5" /steps/bits_per_dim | head -1)
awk -v b="$bits" 'BEGIN { exit !(b > 1 && b < 32) }' || fail "4-bit scatter-reduce of the replayed gradients: $bits bits per dimension"
# Refusals: what replay cannot honour, and broken descriptions.
expect 2 "needs --model-file" "$train" --model replay
expect 2 "keeps no optimizer state" "$train" --model replay --model-file "$dir/tiny.json" --checkpoint "$dir/c"
expect 2 "measures no accuracy" "$train" --model replay --model-file "$dir/tiny.json" --target-accuracy 0.5
expect 2 "goes with --model replay" "$train" "${TINY[@]}" --model-file "$dir/tiny.json"
expect 2 "differs from the batch of $dir/tiny.json (32)" "$mpirun" -np 1 "$train" --model replay \
  --model-file "$dir/tiny.json" --batch 64 --max-steps 1
expect 1 "model description $dir/none.json: cannot open" "$mpirun" -np 1 "$train" --model replay \
  --model-file "$dir/none.json" --max-steps 1
sed 's/"ready_s": [0-9.e-]*/"ready_s": -1/' "$dir/tiny.json" > "$dir/bad.json"
expect 1 "model description $dir/bad.json: tensor 0 (fc3.bias): 'ready_s' = -1" "$mpirun" -np 1 "$train" \
  --model replay --model-file "$dir/bad.json" --max-steps 1
echo "PASS"
