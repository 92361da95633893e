#!/usr/bin/env bash
# stack_cpu.sh REPO BUILD: benchmarks/model/stack-cpu on an emulated 1 Gbit/s
# link writes a positive kernel CPU per byte whose bytes are the extra
# iterations' (every rank's wire bytes), keeps both raw runs, and refuses an
# unshaped link by name.
set -euo pipefail
repo=$1; build=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
prog="$repo/benchmarks/model/stack-cpu"
bench="$build/benchmarks/qsgd-bench-exchange"
if "$prog" --link unshaped --bench "$bench" --out "$tmp/u.json" 2> "$tmp/err"; then
  echo "FAIL: an unshaped link was accepted"; exit 1
fi
grep -q "takes an emulated rate" "$tmp/err" || { echo "FAIL: the refusal does not name the rate:"; cat "$tmp/err"; exit 1; }
"$prog" --link 1gbit --bench "$bench" --out "$tmp/s.json" --seconds 1
/usr/bin/python3 - "$tmp/s.json" <<'PY'
import json, os, sys
d = json.load(open(sys.argv[1]))
one, many = d["runs"]
assert one["iterations"] == 1 and many["iterations"] == 1 + d["extra_iterations"] >= 3, d["runs"]
want = d["extra_iterations"] * one["wire_bytes_per_rank_per_iteration"] * one["ranks"]
assert d["extra_bytes_sent"] == want, (d["extra_bytes_sent"], want)
k = d["extra_cpu_s"]["system"] + d["extra_cpu_s"]["softirq"] + d["extra_cpu_s"]["irq"]
assert abs(d["kernel_s_per_byte"] - k / want) < 1e-18 and d["kernel_s_per_byte"] > 0, d
stem = sys.argv[1][:-5]
for n in (1, many["iterations"]):
    assert os.path.isfile("%s-n%d.json" % (stem, n)) and os.path.isfile("%s-n%d.txt" % (stem, n)), n
print("stack_cpu: %.2f ns of kernel CPU per byte sent over 1gbit" % (1e9 * d["kernel_s_per_byte"]))
PY
