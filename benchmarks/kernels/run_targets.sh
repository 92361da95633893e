#!/usr/bin/env bash
# Runs qsgd-bench-kernels at n = 2^24 (d = 512, s = 16, max norm), 5
# repetitions, pinned to one core when taskset exists, writes the Google
# Benchmark JSON and prints the medians against the kernel targets:
#   encode/fixed              (fused quantize + fixed-width pack)  frac_of_memcpy >= 0.60
#   decode_accumulate/fixed                                        frac_of_memcpy >= 0.60
#   checksum/crc32c           (CRC32C tree over 64 MiB)            frac_of_memcpy >= 0.80
#   encode/elias-dense        (quantize + Elias dense code)        frac_of_memcpy >= 0.15
#   decode_accumulate/elias-dense                                  frac_of_memcpy >= 0.10
#   encode/rans               (quantize + interleaved rANS)        frac_of_memcpy >= 0.10
#   decode_accumulate/rans                                         frac_of_memcpy >= 0.15
# frac_of_memcpy = median bytes/s of fp32 input / median bytes/s of
# memcpy/kokkos (Kokkos::deep_copy of the same n floats) in the same run,
# whose repetitions run interleaved in random order (the program's default),
# so that the ceiling and the kernels sample the same minutes. The min-max
# column is the spread of each kernel's repetitions.
#
# Usage: run_targets.sh BUILD_DIR [OUT_JSON] [extra qsgd-bench-kernels args...]
# Exit status: 0 all targets met, 3 a target missed, other: the run failed.
set -euo pipefail

if [[ $# -lt 1 || "$1" == -h || "$1" == --help ]]; then
  sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
  exit $(( $# < 1 ? 2 : 0 ))
fi
build_dir=$1
out_json=${2:-$build_dir/qsgd-bench-kernels-targets.json}
shift $(( $# >= 2 ? 2 : 1 ))

exe=$build_dir/benchmarks/qsgd-bench-kernels
if [[ ! -x $exe ]]; then
  echo "run_targets.sh: error: $exe not found; build first (cmake --build --preset release)" >&2
  exit 1
fi
python=/usr/bin/python3
[[ -x $python ]] || python=$(command -v python3 || true)
if [[ -z $python ]]; then
  echo "run_targets.sh: error: python3 is needed to read the JSON" >&2
  exit 1
fi
pin=()
if command -v taskset >/dev/null 2>&1; then pin=(taskset -c 0); fi

"${pin[@]}" "$exe" --benchmark_filter='/16777216/' --benchmark_repetitions=5 \
  --benchmark_out="$out_json" --benchmark_out_format=json "$@" >&2

common="$(cd "$(dirname "$0")/../common" && pwd)"
"$python" - "$out_json" "$common" <<'EOF'
import json, sys
sys.path.insert(0, sys.argv[2])
from qsgd_report import gbps_spread, kernel_medians

targets = {"encode/fixed": 0.60, "decode_accumulate/fixed": 0.60, "checksum/crc32c": 0.80,
           "encode/elias-dense": 0.15, "decode_accumulate/elias-dense": 0.10,
           "encode/rans": 0.10, "decode_accumulate/rans": 0.15}
doc = json.load(open(sys.argv[1]))
for b in doc["benchmarks"]:
    if b.get("error_occurred"):
        sys.exit("run_targets.sh: error: %s failed: %s" % (b["name"], b.get("error_message", "")))
# Medians; with a single repetition there are no aggregates: the run itself.
medians = kernel_medians(doc)
rows = [(name, b["bytes_per_second"] / 1e9, b.get("frac_of_memcpy"), b.get("bits_per_dim"))
        for name, b in medians.items()]
if not rows:
    sys.exit("run_targets.sh: error: no median rows in %s" % sys.argv[1])

ctx = doc["context"]
print("n = 2^24, s = %s, d = %s, norm = %s, %s, git %s, %s; medians of %s repetitions"
      % (ctx.get("qsgd_s"), ctx.get("qsgd_d"), ctx.get("qsgd_norm"), ctx.get("kokkos_execution_space"),
         ctx.get("qsgd_git_hash"), ctx.get("host_name"),
         next((b["repetitions"] for b in doc["benchmarks"] if "repetitions" in b), "?")))
print("CPU %s; flags %s; %s, %s; host paths: fixed-width %s, CRC32C %s, rANS decoder %s, Elias dense encoder %s"
      % (ctx.get("cpu_model"), ctx.get("cpu_simd_flags"), ctx.get("compiler"), ctx.get("cxx_flags"),
         ctx.get("qsgd_host_simd_fixed"), ctx.get("qsgd_host_crc32c"), ctx.get("qsgd_host_rans_decoder"),
         ctx.get("qsgd_host_elias_dense_encoder")))
print("GB/s = 1e9 bytes of fp32 input (4n) per second, median (min-max) of the repetitions; frac = median GB/s / "
      "memcpy/kokkos median GB/s (same run, repetitions interleaved: %s)\n"
      % ("yes" if ctx.get("qsgd_interleaved") == "true" else ctx.get("qsgd_interleaved", "not recorded")))
fmt = "%-30s %9s %15s %8s %9s %8s %7s"
print(fmt % ("benchmark", "GB/s", "min-max", "frac", "bits/dim", "target", ""))
missed = 0
for name, gbs, frac, bits in rows:
    t = targets.get(name)
    verdict = "ceiling" if name == "memcpy/kokkos" else ""
    if t is not None:
        ok = frac is not None and frac >= t
        verdict = "pass" if ok else "MISS"
        missed += not ok
    print(fmt % (name, "%.3f" % gbs, gbps_spread(medians[name]),
                 "-" if frac is None else "%.3f" % frac,
                 "-" if bits is None else "%.3f" % bits, "-" if t is None else ">= %.2f" % t, verdict))
missing = [t for t in targets if t not in {r[0] for r in rows}]
if missing:
    sys.exit("run_targets.sh: error: no result for " + ", ".join(missing))
print("\n%d of %d targets met; JSON: %s" % (len(targets) - missed, len(targets), sys.argv[1]))
sys.exit(3 if missed else 0)
EOF
