#!/usr/bin/env bash
# On a GPU node with only the NVIDIA driver, from a package made by
# package.sh: the kernel tests (test_backends: host and device give the same
# bits), the kernel benchmarks against the device-to-device copy of the same
# run, the codec report, and (trainer tier) the trainer at K = 1 and at K =
# the node's GPU count (through the packaged mpirun, one GPU per rank), each
# with a trace; then, where nsys is on PATH, a profile of the trainer with
# CUDA and NVTX ranges together. On a CPU build (package.sh build/ci) the same
# steps run on the host: the dry run that tests/profiles checks.
#
#   run.sh [--quick] [--ranks K] [--no-nsys] [--no-ncu] [--step-timeout S] [--pack DIR] [OUT_DIR]
#                                                                     (default ./gpu-results)
#     --quick     small sizes (kernels at n = 2^20, one short run each; trainer MLP 784-256-10,
#                 12 steps): the dry run; default n = 2^26 and MLP
#                 784-4096-4096-10 (20.0 M parameters), 60 steps
#     --ranks K   ranks of the multi-rank trainer runs (default: the GPU
#                 count nvidia-smi reports; skipped when below 2)
#     --no-nsys   skip the Nsight Systems profile even where nsys is present
#     --no-ncu    skip the Nsight Compute summary even where ncu is present
#     --step-timeout S  each test, codec report and trainer run is stopped (and
#                 failed) after S seconds, the kernel benchmarks, ncu and nsys
#                 after 2 S (default 120)
#     --pack DIR  at the end, OUT_DIR as one archive DIR/<OUT_DIR's name>.tar.xz
#                 and summary.txt and failures.txt beside it: at most 3 files to
#                 copy back; exit 1 if the archive passes 16 MiB
#
# OUT_DIR: nvidia-smi.csv, BUILD (the binaries' --version), <test>.json/.log,
# bench_kernels.json, codec_report.json, summary.txt (the kernel table),
# ncu.ncu-rep and ncu.csv (on a GPU with ncu on PATH: the suite's quantize
# and coding kernels' speed of light and memory workload sections; ncu.log
# holds the run's output, or says why there are none),
# train-K<k>-<config>.h5 and .log, nsys/ (report, NVTX and CUDA kernel
# summaries). A kernels-tier package (package.sh --tier kernels) has no
# trainer: its steps are said to be skipped. Copy OUT_DIR back and run
# benchmarks/scaling/qsgd-summary on it for the step breakdown. Exit status 1
# if any step failed (the others still run).
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
quick=0 ranks="" nsys_on=1 ncu_on=1 out="" pack="" limit_s=120
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) quick=1 ;;
    --ranks) ranks="${2:?--ranks needs a count}"; shift ;;
    --no-nsys) nsys_on=0 ;;
    --no-ncu) ncu_on=0 ;;
    --step-timeout) limit_s="${2:?--step-timeout needs seconds}"; shift ;;
    --pack) pack="${2:?--pack needs a folder}"; shift ;;
    -h|--help) sed -n '2,/^set -uo pipefail$/{/^set -uo pipefail$/!p}' "$0"; exit 0 ;;
    -*) echo "run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) out="$1" ;;
  esac
  shift
done
[[ "$limit_s" =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: --step-timeout takes whole seconds, not '$limit_s'" >&2; exit 2; }
out="$(realpath -m "${out:-gpu-results}")"
mkdir -p "$out"
# The packaged libraries and MPI runtime (package.sh), not the node's.
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OPAL_PREFIX="$here/ompi"
export PMIX_MCA_mca_base_component_path="$here/pmix/lib/pmix"
tier="$(cat "$here/TIER" 2>/dev/null || echo trainer)"
mpirun=""
[ "$tier" = kernels ] || mpirun="$here/ompi/$(cat "$here/ompi/BINDIR")/mpirun"
status=0
fail() { echo "run.sh: FAILED: $*" | tee -a "$out/failures.txt"; status=1; }
cp "$here/BUILD" "$out/BUILD" 2>/dev/null
echo "== build"; cat "$here/BUILD"

echo "== device"
gpus=0
if command -v nvidia-smi > /dev/null; then
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv \
    > "$out/nvidia-smi.csv" 2>&1 || fail "nvidia-smi"
  cat "$out/nvidia-smi.csv"
  gpus="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')"
else
  echo "no nvidia-smi: a dry run on the host" | tee "$out/nvidia-smi.csv"
fi
[ -n "$ranks" ] || ranks="$gpus"

echo "== kernel tests"
for t in test_quantize test_codecs test_message test_stats test_backends; do
  if timeout "$limit_s" "$here/bin/$t" --gtest_output="json:$out/$t.json" > "$out/$t.log" 2>&1; then
    echo "$t: $(grep -E '^\[  PASSED  \]' "$out/$t.log")"
  else
    fail "$t (last lines of $out/$t.log follow)"
    tail -n 30 "$out/$t.log"
  fi
done
grep -m 1 '^device space' "$out/test_backends.log"

n=67108864 reps=(--benchmark_repetitions=5)
# --quick (the dry run): one short measurement per kernel, enough to make the table.
[ "$quick" = 1 ] && n=1048576 reps=(--benchmark_repetitions=1 --benchmark_min_time=0.05)
echo "== kernel benchmarks (n = $n; the first launch of each kernel loads its code)"
timeout $((2 * limit_s)) "$here/bin/qsgd-bench-kernels" --qsgd_n_min=$n --qsgd_n_max=$n \
  --benchmark_filter='^(memcpy/kokkos|quantize|encode/(fixed|elias-dense|rans)|decode_accumulate/(fixed|elias-dense|rans)|checksum)/' \
  "${reps[@]}" --benchmark_out="$out/bench_kernels.json" --benchmark_out_format=json \
  > "$out/bench_kernels.log" 2>&1 || fail "qsgd-bench-kernels (see $out/bench_kernels.log)"
timeout "$limit_s" "$here/bin/qsgd-codec-report" --json > "$out/codec_report.json" 2> "$out/codec_report.log" ||
  fail "qsgd-codec-report"
if [ "$gpus" -gt 0 ] && [ "$ncu_on" = 1 ] && command -v ncu > /dev/null; then
  echo "== ncu: the main kernels at n = $n, one run each, the first 60 launches"
  # Where the counters are not readable (ERR_NVGPUCTRPERM), ncu.log says so and the run goes on.
  # The suite's own kernels only (their demangled names hold the qsgd namespace), into a report
  # that ncu then prints as CSV: the benchmark's own output stays in ncu.log.
  if timeout $((2 * limit_s)) ncu --section SpeedOfLight --section MemoryWorkloadAnalysis \
       --kernel-name-base demangled --kernel-name regex:qsgd --launch-count 60 \
       --export "$out/ncu" --force-overwrite "$here/bin/qsgd-bench-kernels" --qsgd_n_min=$n --qsgd_n_max=$n \
       --benchmark_filter='^(quantize|encode/(fixed|rans)|decode_accumulate/(fixed|rans))/' \
       --benchmark_repetitions=1 --benchmark_min_time=0.001 > "$out/ncu.log" 2>&1 &&
     ncu --import "$out/ncu.ncu-rep" --csv --page details > "$out/ncu.csv" 2>> "$out/ncu.log"; then
    echo "ncu: $(grep -c . "$out/ncu.csv") lines in ncu.csv"
  elif grep -q ERR_NVGPUCTRPERM "$out/ncu.log"; then
    echo "ncu: this node does not let ncu read the GPU's counters (ERR_NVGPUCTRPERM); no summary"
  else
    fail "ncu (see $out/ncu.log)"
  fi
fi
if python3 "$here/summarize.py" "$out/bench_kernels.json" > "$out/summary.txt"; then
  cat "$out/summary.txt"
else
  fail "summarize.py"
fi

# The trainer: synthetic teacher data (no dataset on the node), fp32
# allreduce against 4-bit QSGD (allgather, fixed-width and rANS codes).
if [ "$quick" = 1 ]; then
  model=(--model mlp --mlp-widths 784,256,10 --dataset teacher --teacher-samples 4096 --batch 32 --max-steps 12)
else
  model=(--model mlp --mlp-widths 784,4096,4096,10 --dataset teacher --teacher-samples 65536 --batch 128 --max-steps 60)
fi
# The node's cuBLAS: the package carries none; a CUDA build's qsgd-train loads
# it at run time (QSGD_CUBLAS, else libcublas.so.13/.12/.11 through the
# loader's search) and its trace records which (attribute blas). Where the
# loader would not find one, look where CUDA and Python's wheels put it.
cache="$(ldconfig -p 2>/dev/null || true)"
if [ -z "${QSGD_CUBLAS:-}" ] && ! grep -qE 'libcublas\.so\.1[123] ' <<<"$cache"; then
  sites="$(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)"
  # shellcheck disable=SC2086  # the site folders are words
  for c in /usr/local/cuda/lib64/libcublas.so.1[123] \
           $( [ -z "$sites" ] || find $sites -path '*nvidia*' -name 'libcublas.so.1[123]' 2>/dev/null); do
    if [ -f "$c" ]; then
      QSGD_CUBLAS="$c"
      LD_LIBRARY_PATH="$LD_LIBRARY_PATH:${c%/*}"
      export QSGD_CUBLAS LD_LIBRARY_PATH
      break
    fi
  done
fi
configs=("fp32:--strategy allreduce" "4bit-fixed:--strategy allgather --codec fixed --bits 4"
         "4bit-rans:--strategy allgather --codec rans --bits 4")
train() {  # train K NAME ARGS...: one trainer run with its trace and log
  local k="$1" name="$2"
  shift 2
  local trace="$out/train-K$k-$name.h5" log="$out/train-K$k-$name.log"
  rm -f "$trace"
  if [ "$k" = 1 ]; then
    # One process, no launcher: MPI starts as a singleton without a daemon.
    OMPI_MCA_ess_singleton_isolated=1 timeout "$limit_s" "$here/bin/qsgd-train" "$@" --trace "$trace" --label "gpu/K$k/$name" > "$log" 2>&1
  else
    # Each rank its own GPU: Kokkos takes device (local rank mod the count).
    local devices=()
    [ "$gpus" -gt 0 ] && devices=(--kokkos-num-devices="$gpus")
    timeout "$limit_s" "$mpirun" --allow-run-as-root --oversubscribe --bind-to none -np "$k" \
      -x LD_LIBRARY_PATH -x OPAL_PREFIX -x PMIX_MCA_mca_base_component_path ${QSGD_CUBLAS:+-x QSGD_CUBLAS} \
      "$here/bin/qsgd-train" "$@" --trace "$trace" --label "gpu/K$k/$name" "${devices[@]}" > "$log" 2>&1
  fi || { fail "qsgd-train K=$k $name (last lines of $log follow)"; tail -n 20 "$log"; return; }
  echo "K=$k $name: $(grep -c . "$log") lines of log, trace $(basename "$trace")"
}
if [ "$tier" = kernels ]; then
  echo "== trainer and nsys: skipped (a kernels-tier package: package.sh --tier trainer adds them)"
  nsys_on=0
else
  echo "== trainer (K = 1${ranks:+; K = $ranks when at least 2}); cuBLAS: ${QSGD_CUBLAS:-found by the loader}"
  for c in "${configs[@]}"; do
    # shellcheck disable=SC2086  # the configuration's options are words
    train 1 "${c%%:*}" "${model[@]}" ${c#*:} --epochs 1
  done
  if [ "$ranks" -ge 2 ] 2>/dev/null; then
    for c in "${configs[@]}"; do
      # shellcheck disable=SC2086
      train "$ranks" "${c%%:*}" "${model[@]}" ${c#*:} --epochs 1
    done
  fi
fi

if [ "$nsys_on" = 1 ] && command -v nsys > /dev/null; then
  echo "== nsys: the trainer at K = 1, CUDA and NVTX ranges together, steps 5..10"
  trace_apis=nvtx,osrt
  [ "$gpus" -gt 0 ] && trace_apis=cuda,nvtx,osrt
  OMPI_MCA_ess_singleton_isolated=1 timeout $((2 * limit_s)) "$here/nsys/profile-train.sh" --np 0 --trace "$trace_apis" --capture \
    --out "$out/nsys" --name train-K1-4bit -- \
    "$here/bin/qsgd-train" "${model[@]}" --strategy allgather --codec fixed --bits 4 --epochs 1 --profile-steps 5:10 \
    > "$out/nsys.log" 2>&1 || fail "nsys profile (see $out/nsys.log)"
  tail -n 25 "$out/nsys.log"
  if [ "$gpus" -gt 0 ] && compgen -G "$out/nsys/*.nsys-rep" > /dev/null; then
    for rep in "$out"/nsys/*.nsys-rep; do
      nsys stats --report cuda_gpu_kern_sum --format csv --output "${rep%.nsys-rep}" "$rep" > /dev/null 2>&1 ||
        nsys stats --report gpukernsum --format csv --output "${rep%.nsys-rep}" "$rep" > /dev/null 2>&1 ||
        fail "nsys stats (CUDA kernel summary) of $rep"
    done
  fi
else
  why="nsys not on PATH"
  [ "$nsys_on" = 0 ] && why="--no-nsys or a kernels-tier package"
  echo "== nsys: not run ($why); where nsys is: run.sh again, or nsys/profile-train.sh --trace cuda,nvtx,osrt"
fi
[ "$status" = 0 ] && echo "run.sh: every step passed; results in $out" || echo "run.sh: some steps failed (failures.txt); results in $out"
if [ -n "$pack" ]; then
  # Everything back in at most 3 files: the archive, and the two texts to read first.
  mkdir -p "$pack"
  name="$(basename "$out")"
  if ! tar -C "$(dirname "$out")" -cf - "$name" | xz -6 -T0 > "$pack/$name.tar.xz"; then
    echo "run.sh: FAILED: packing $out into $pack/$name.tar.xz" | tee -a "$out/failures.txt"
    status=1
  fi
  for f in summary.txt failures.txt; do [ ! -f "$out/$f" ] || cp "$out/$f" "$pack/$f"; done
  size="$(stat -c %s "$pack/$name.tar.xz")"
  echo "run.sh: packed $out into $pack/$name.tar.xz ($((size / 1024)) KiB)"
  if [ "$size" -gt $((16 * 1048576)) ]; then
    echo "run.sh: FAILED: $pack/$name.tar.xz is over 16 MiB, more than one file can bring back" | tee -a "$pack/failures.txt"
    status=1
  fi
fi
exit $status
