#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: runs the kernel tests and the kernel
# benchmarks of a package made by package.sh, writes JSON, and prints the
# GPU table (n = 2^26, d = 512, s = 16): GB/s of fp32 input for
# quantize + fixed-width encode, Elias dense encode and decode-accumulate,
# each as a fraction of the device-to-device copy bandwidth measured in the
# same run (Kokkos::deep_copy between two device Views of the same n floats).
#
#   run.sh [OUT_DIR]     (default ./gpu-results); exit 1 if a test failed
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(realpath -m "${1:-gpu-results}")"
mkdir -p "$out"
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv || true; } \
  > "$out/nvidia-smi.csv" 2>&1
echo "== device"; cat "$out/nvidia-smi.csv"
for t in test_quantize test_codecs test_message test_stats; do
  echo "== $t"
  if ! "$here/bin/$t" --gtest_output="json:$out/$t.json" > "$out/$t.log" 2>&1; then
    status=1
    tail -n 30 "$out/$t.log"
  fi
  tail -n 3 "$out/$t.log"
done
echo "== kernel benchmarks (n = 2^26; the first launch JIT-compiles sm_80 PTX for this GPU)"
"$here/bin/qsgd-bench-kernels" --qsgd_n_min=67108864 --qsgd_n_max=67108864 \
  --benchmark_filter='^(memcpy/kokkos|quantize|encode/(fixed|elias-dense)|decode_accumulate/(fixed|elias-dense))/' \
  --benchmark_repetitions=5 \
  --benchmark_out="$out/bench_kernels.json" --benchmark_out_format=json > "$out/bench_kernels.log" 2>&1 || status=1
"$here/bin/qsgd-codec-report" --json > "$out/codec_report.json" 2> "$out/codec_report.log" || status=1
python3 "$here/summarize.py" "$out/bench_kernels.json" > "$out/summary.txt" || status=1
cat "$out/summary.txt"
exit $status
