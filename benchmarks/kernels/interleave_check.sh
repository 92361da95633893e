#!/usr/bin/env bash
# How much the fraction of the copy ceiling moves from run to run with the
# repetitions in sequence (memcpy/kokkos's five first, then each kernel's
# five) and interleaved in random order (the program's default): runs both
# alternately on one core, the target kernels at n = 2^24, and prints each
# kernel's fraction per run and its range over the runs of each order.
#
#   interleave_check.sh BUILD_DIR OUT_DIR [--rounds R]
#
# OUT_DIR gets seq.<round>.json and mix.<round>.json (Google Benchmark) and
# check.txt (the printed table). Default: 4 rounds.
set -euo pipefail
if [[ $# -lt 2 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit $(( $# < 2 ? 2 : 0 ))
fi
build=$1 out=$2
shift 2
rounds=4
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    *) echo "interleave_check.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
exe=$build/benchmarks/qsgd-bench-kernels
[ -x "$exe" ] || { echo "interleave_check.sh: error: $exe not found" >&2; exit 1; }
mkdir -p "$out"
names='memcpy/kokkos|quantize|checksum/crc32c|encode/(fixed|elias-dense|rans)|decode_accumulate/(fixed|elias-dense|rans)'
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi
for r in $(seq 1 "$rounds"); do
  for mode in seq mix; do
    il=$([ "$mode" = mix ] && echo true || echo false)
    "${pin[@]}" "$exe" --qsgd_n_min=16777216 --qsgd_n_max=16777216 --benchmark_filter="^($names)/" \
      --benchmark_repetitions=5 --benchmark_enable_random_interleaving="$il" \
      --benchmark_out="$out/$mode.$r.json" --benchmark_out_format=json > /dev/null 2>&1
  done
done
common="$(cd "$(dirname "$0")/../common" && pwd)"
/usr/bin/python3 - "$out" "$rounds" "$common" <<'PY' | tee "$out/check.txt"
import json, os, sys
sys.path.insert(0, sys.argv[3])
from qsgd_report import kernel_medians
out, rounds = sys.argv[1], int(sys.argv[2])
runs = {m: [kernel_medians(json.load(open(os.path.join(out, "%s.%d.json" % (m, r))))) for r in range(1, rounds + 1)]
        for m in ("seq", "mix")}
ctx = json.load(open(os.path.join(out, "seq.1.json")))["context"]
print("n = 2^24, one core, 5 repetitions per run, %d runs of each order, alternating; git %s, %s, %s"
      % (rounds, ctx.get("qsgd_git_hash"), ctx.get("cpu_model"), ctx.get("compiler")))
print("seq: repetitions in sequence (the ceiling's first); mix: interleaved in random order")
print("frac = kernel median GB/s / memcpy/kokkos median GB/s of the same run; ceiling in GB/s\n")
names = list(runs["seq"][0])
w = 7 * rounds
print("%-30s %-4s %-*s %13s" % ("kernel", "", w, "per run", "range"))
for name in names:
    for m in ("seq", "mix"):
        if name == "memcpy/kokkos":
            v = [r[name]["bytes_per_second"] / 1e9 for r in runs[m]]
        else:
            v = [r[name]["frac_of_memcpy"] for r in runs[m]]
        print("%-30s %-4s %-*s %6.3f-%.3f" % (name if m == "seq" else "", m, w,
                                           " ".join("%6.3f" % x for x in v), min(v), max(v)))
PY
