#!/usr/bin/env bash
# kernels_interleave.sh BENCH REPORT_DIR: qsgd-bench-kernels records the
# order its repetitions ran in as Google Benchmark reads the flag (context
# qsgd_interleaved: interleaved by default; "false" for
# --benchmark_enable_random_interleaving=Off and for the environment variable
# BENCHMARK_ENABLE_RANDOM_INTERLEAVING=no) and the program's kernel order
# (qsgd_order); the report tools (REPORT_DIR/qsgd_report.py) give its rows
# in that order with the fraction of the copy and the repetitions' spread.
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
bench=$1 report=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
run() {  # run NAME [ARGS...]: one short run at n = 2^16 into $dir/NAME.json
  local name=$1
  shift
  "$bench" --qsgd_n_min=65536 --qsgd_n_max=65536 --benchmark_filter='^(memcpy/kokkos|quantize|checksum/crc32c)/' \
    --benchmark_min_time=0.01 --benchmark_repetitions=3 --benchmark_out="$dir/$name.json" \
    --benchmark_out_format=json "$@" > "$dir/$name.log" 2>&1 || { cat "$dir/$name.log"; fail "$name: the run failed"; }
}
run default
run off --benchmark_enable_random_interleaving=Off
run single_n --benchmark_enable_random_interleaving=N
BENCHMARK_ENABLE_RANDOM_INTERLEAVING=no run env
/usr/bin/python3 - "$dir" "$report" <<'PY' || fail "see above"
import json, sys
sys.path.insert(0, sys.argv[2])
from qsgd_report import kernel_medians
d = sys.argv[1]
bad = []
want = {"default": "true", "off": "false", "single_n": "false", "env": "false"}
for name, expect in want.items():
    ctx = json.load(open("%s/%s.json" % (d, name)))["context"]
    if ctx.get("qsgd_interleaved") != expect:
        bad.append("%s: qsgd_interleaved %r, expected %r" % (name, ctx.get("qsgd_interleaved"), expect))
doc = json.load(open("%s/default.json" % d))
order = doc["context"].get("qsgd_order", "").split(",")
if order[:4] != ["memcpy/kokkos", "memcpy/std", "quantize", "checksum/crc32c"]:
    bad.append("qsgd_order starts %r" % order[:4])
med = kernel_medians(doc)
if list(med) != ["memcpy/kokkos", "quantize", "checksum/crc32c"]:
    bad.append("rows not in the program's order: %r" % list(med))
for name in ("quantize", "checksum/crc32c"):
    row = med.get(name, {})
    f = row.get("frac_of_memcpy")
    want_f = row.get("bytes_per_second", 0) / med["memcpy/kokkos"]["bytes_per_second"]
    if f is None or abs(f - want_f) > 1e-12:
        bad.append("%s: frac_of_memcpy %r, expected %r" % (name, f, want_f))
    if not row.get("min_bytes_per_second", 0) <= row.get("bytes_per_second", -1) <= row.get("max_bytes_per_second", 0):
        bad.append("%s: median outside its min-max" % name)
if bad:
    print("\n".join(bad))
    sys.exit(1)
PY
echo "ok: the order recorded as run (default, Off, N, the environment); rows in the program's order with fraction and spread"
