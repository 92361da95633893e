#!/usr/bin/env bash
# A/B of two builds of qsgd-bench-kernels on the same machine in one sitting:
# runs A and B alternately (A, B, A, B, ...), pinned to one core, and prints
# each kernel's median GB/s over the rounds with its range and the ratio B/A.
# Use it to measure a kernel change against the commit before it, where the
# machine's memory rate drifts between runs (docs/kernels.md).
#
#   ab.sh A_BUILD_DIR B_BUILD_DIR OUT_DIR [--rounds R] [--n N] [--s S] [--filter REGEX] [--min-time S]
#
# Each build dir holds benchmarks/qsgd-bench-kernels (the release preset).
# OUT_DIR gets a.<round>.json and b.<round>.json (Google Benchmark JSON, 3
# repetitions each, interleaved in random order in both builds, whatever
# their own default) and ab.txt (the printed table). Defaults: 3 rounds,
# n = 2^24, s = 16 (--s: the levels of every kernel), the coding kernels and
# the memory copy, Google Benchmark's own minimum time per repetition
# (--min-time S sets it).
set -euo pipefail
if [[ $# -lt 3 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
  exit $(( $# < 3 ? 2 : 0 ))
fi
a_dir=$1 b_dir=$2 out=$3
shift 3
rounds=3
n=16777216
levels=16
min_time=()
filter='memcpy/kokkos|^quantize|^encode/(fixed|elias-dense|rans)|^encode_only/(fixed|elias-dense|rans)|^decode_accumulate/(fixed|elias-dense|rans)'
while [ $# -gt 0 ]; do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --n) n=$2; shift 2 ;;
    --s) levels=$2; shift 2 ;;
    --filter) filter=$2; shift 2 ;;
    --min-time) min_time=(--benchmark_min_time="$2"); shift 2 ;;
    *) echo "ab.sh: unknown option '$1'" >&2; exit 2 ;;
  esac
done
for d in "$a_dir" "$b_dir"; do
  [ -x "$d/benchmarks/qsgd-bench-kernels" ] ||
    { echo "ab.sh: error: $d/benchmarks/qsgd-bench-kernels not found" >&2; exit 1; }
done
mkdir -p "$out"
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi
for ((i = 1; i <= rounds; ++i)); do
  for v in a b; do
    d=$a_dir
    [ $v = b ] && d=$b_dir
    "${pin[@]}" "$d/benchmarks/qsgd-bench-kernels" --qsgd_n_min="$n" --qsgd_n_max="$n" --qsgd_s="$levels" \
      --benchmark_filter="$filter" \
      --benchmark_repetitions=3 --benchmark_enable_random_interleaving=true \
      --benchmark_report_aggregates_only=true "${min_time[@]}" \
      --benchmark_out="$out/$v.$i.json" --benchmark_out_format=json > "$out/$v.$i.txt" 2>&1 ||
      { cat "$out/$v.$i.txt" >&2; echo "ab.sh: error: the run of $d failed" >&2; exit 1; }
  done
done
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3)
common="$(cd "$(dirname "$0")/../common" && pwd)"
"$python" - "$out" "$rounds" "$n" "$levels" "$common" <<'EOF' | tee "$out/ab.txt"
import json, statistics, sys
out, rounds, n, levels = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sys.path.insert(0, sys.argv[5])
from qsgd_report import kernel_medians
rates, ctx = {}, {}
# B first: the rows come in its program's order (kernel_medians), whatever
# order an interleaved run finished its benchmarks in.
for v in "ba":
    for i in range(1, rounds + 1):
        j = json.load(open(f"{out}/{v}.{i}.json"))
        ctx[v] = j["context"]
        for name, row in kernel_medians(j).items():
            rates.setdefault(name, {"a": [], "b": []})[v].append(row["bytes_per_second"] / 1e9)
def rng(x):
    return f"{statistics.median(x):6.2f} ({min(x):.2f}-{max(x):.2f})"
for v in "ab":
    c = ctx[v]
    print(f"{v.upper()}: git {c.get('qsgd_git_hash', '?')}, {c.get('cpu_model', '?')}, {c.get('compiler', '?')}")
print(f"n = {n}, s = {levels}; {rounds} rounds A, B alternating; each: the median of 3 repetitions, interleaved in random order; shown: median (min-max) over rounds, GB/s of fp32 input")
print(f"{'kernel':32s} {'A GB/s':>20s} {'B GB/s':>20s}  B/A")
for k, d in rates.items():
    if d["a"] and d["b"]:
        print(f"{k:32s} {rng(d['a']):>20s} {rng(d['b']):>20s} {statistics.median(d['b']) / statistics.median(d['a']):5.2f}")
EOF
