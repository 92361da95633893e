#!/usr/bin/env bash
# Measures on this machine what qsgd-model is calibrated on (docs/model.md),
# into DIR (created if missing; the files below replaced, nothing else
# touched):
#
#   kernels.json       qsgd-bench-kernels at n = 2^20 (an allgather piece), 2^22 (the
#                      exchanges' size) and, with --kernel-max 16777216, 2^24 (64 MiB,
#                      data out of the caches), one core, 3 repetitions: the coding rates
#                      at the first of --levels; kernels-s<S>.json at each other level
#   kernels-powersgd.json  (part powersgd) PowerSGD's kernels, r = 4, on the input as
#                      a matrix of 1024 columns, with the memcpy of the same run, at the
#                      sizes of kernels.json, one core, 3 repetitions
#   fit-LINK.json      fp32 ring allreduce, K = 2, 64 KiB to 64 MiB (16 MiB at 100mbit
#                      and below), one file per link: alpha and the cost per byte are
#                      fitted on these rows only
#   ceiling-RATE-K<K>.json  per emulated rate and K of --ranks: the link ceiling the
#                      ranks reach together (qsgd-bench-exchange's ring of sends, 64 MiB),
#                      below the nominal rate where K ranks share the cores; qsgd-summary
#                      bounds hidden time by the link time at this ceiling
#   stack-RATE.json    per emulated rate: the kernel CPU (system, softirq) per byte sent
#                      through the emulated link (benchmarks/model/stack-cpu), which
#                      competes with the ranks' work on the same cores
#   links.json         the tbf burst of every emulated link (netlab.sh --burst-of)
#   machine.json       CPU, cores, compiler, MPI
#
#   benchmarks/model/calibrate.sh --out DIR [--link LIST] [--ranks LIST] [--levels LIST]
#                                 [--kernel-max N] [--parts LIST] [--build DIR]
#     --out DIR     where the files go (required)
#     --link LIST   links to fit (local,unshaped,1gbit): local (shared memory),
#                   unshaped, <N>gbit, <N>mbit (emulated: netlab.sh). A rate
#                   needs unshaped, the host stack it runs over: added when missing
#     --ranks LIST  K values whose link ceiling is measured on each emulated rate (2)
#     --levels LIST quantization levels s the kernel rates are measured at (16; 4 is
#                   2-bit QSGD, 16 4-bit)
#     --kernel-max N  the largest n of the kernel rates, elements (4194304 = 2^22;
#                   16777216 adds 2^24, the rates of a gradient that streams from
#                   memory: qsgd-model replay takes them)
#     --parts LIST  what to measure: kernels, powersgd, fits (with links.json
#                   and the stack's CPU of every emulated rate), ceilings
#                   (kernels,fits,ceilings)
#     --build DIR   build tree with benchmarks/qsgd-bench-kernels and
#                   benchmarks/qsgd-bench-exchange (default build/release)
#     -h, --help    this text
#
# About 100 s for the kernels per level (150 s with 2^24), 30 s for PowerSGD's
# kernels, 20-60 s per link and 10-40 s per ceiling on a 2-core machine. Needs
# root for emulated links (network namespaces). Run on an otherwise idle
# machine: the numbers are timings.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=""
links="local,unshaped,1gbit"
ranks="2"
levels="16"
kernel_max=4194304
parts="kernels,fits,ceilings"
build="$root/build/release"
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="${2:?--out needs a directory}"; shift 2 ;;
    --link) links="${2:?--link needs a list}"; shift 2 ;;
    --ranks) ranks="${2:?--ranks needs a list}"; shift 2 ;;
    --levels) levels="${2:?--levels needs a list}"; shift 2 ;;
    --kernel-max) kernel_max="${2:?--kernel-max needs a number of elements}"; shift 2 ;;
    --parts) parts="${2:?--parts needs a list}"; shift 2 ;;
    --build) build="${2:?--build needs a directory}"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "calibrate.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
[ -n "$out" ] || { echo "calibrate.sh: --out DIR is required (see --help)" >&2; exit 2; }
IFS=, read -r -a part_list <<< "$parts"
for p in "${part_list[@]}"; do
  case "$p" in
    kernels|powersgd|fits|ceilings) ;;
    *) echo "calibrate.sh: --parts takes kernels, powersgd, fits and ceilings, got '$p'" >&2; exit 2 ;;
  esac
done
[[ "$kernel_max" =~ ^[0-9]+$ ]] && [ "$kernel_max" -ge 1048576 ] ||
  { echo "calibrate.sh: --kernel-max takes a number of elements >= 1048576, got '$kernel_max'" >&2; exit 2; }
bin="$build/benchmarks"
net="$root/benchmarks/scaling/netlab.sh"
for p in qsgd-bench-kernels qsgd-bench-exchange; do
  [ -x "$bin/$p" ] || { echo "calibrate.sh: $bin/$p missing (cmake --preset release && cmake --build --preset release)" >&2; exit 2; }
done
IFS=, read -r -a link_list <<< "$links"
shaped=0
for l in "${link_list[@]}"; do
  case "$l" in
    local|unshaped) ;;
    [1-9]*gbit|[1-9]*mbit) shaped=1 ;;
    *) echo "calibrate.sh: link '$l' is not local, unshaped, <N>gbit or <N>mbit" >&2; exit 2 ;;
  esac
done
if [ "$shaped" = 1 ] && [[ ",$links," != *",unshaped,"* ]]; then link_list+=(unshaped); fi
. "$root/scripts/openmpi-env.sh"
export OPENBLAS_NUM_THREADS=1
mkdir -p "$out"
"$root/benchmarks/report/machine-info" > "$out/machine.json"

has_part() { [[ ",$parts," == *",$1,"* ]]; }

if has_part kernels; then
  IFS=, read -r -a s_list <<< "$levels"
  first=1
  for s in "${s_list[@]}"; do
    [[ "$s" =~ ^[0-9]+$ ]] && [ "$s" -ge 1 ] || { echo "calibrate.sh: --levels takes whole numbers >= 1, got '$s'" >&2; exit 2; }
    name=kernels-s$s
    [ "$first" = 1 ] && name=kernels
    first=0
    taskset -c 0 "$bin/qsgd-bench-kernels" --qsgd_s="$s" --qsgd_n_min=1048576 --qsgd_n_max="$kernel_max" \
      --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_filter='memcpy/kokkos|^quantize|^encode/|^decode_accumulate/|^decode/' \
      --benchmark_out="$out/$name.json" --benchmark_out_format=json > "$out/$name.txt" 2>&1 \
      || { echo "calibrate.sh: qsgd-bench-kernels failed; its output: $out/$name.txt" >&2; exit 1; }
    echo "calibrate.sh: kernel rates at s = $s in $out/$name.json" >&2
  done
fi

if has_part powersgd; then
  taskset -c 0 "$bin/qsgd-bench-kernels" --qsgd_n_min=1048576 --qsgd_n_max="$kernel_max" \
    --qsgd_matrix_cols=1024 --qsgd_powersgd_rank=4 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_filter='memcpy/kokkos|^powersgd_' \
    --benchmark_out="$out/kernels-powersgd.json" --benchmark_out_format=json > "$out/kernels-powersgd.txt" 2>&1 \
    || { echo "calibrate.sh: qsgd-bench-kernels failed; its output: $out/kernels-powersgd.txt" >&2; exit 1; }
  echo "calibrate.sh: PowerSGD's kernel rates in $out/kernels-powersgd.json" >&2
fi

if has_part fits; then
  {
    sep="{"
    for l in "${link_list[@]}"; do
      [ "$l" = local ] && continue
      burst="$("$net" --burst-of "$l")"
      printf '%s\n "%s": {"tbf_burst_bytes": %s}' "$sep" "$l" "$burst"
      sep=","
    done
    [ "$sep" = "{" ] && printf '{'
    printf '\n}\n'
  } > "$out/links.json"

  for l in "${link_list[@]}"; do
    top=64M
    case "$l" in [1-9]*mbit) top=16M ;; esac
    args=(-b 64K -e "$top" -f 4 -w 2 -n 10 --strategies allreduce --transports ring -o "$out/fit-$l.json")
    if [ "$l" = local ]; then
      mpirun -np 2 --bind-to none -x OPENBLAS_NUM_THREADS "$bin/qsgd-bench-exchange" "${args[@]}" > "$out/fit-$l.txt" 2>&1
    else
      "$net" --nodes 2 --rate "$l" -- "$bin/qsgd-bench-exchange" "${args[@]}" > "$out/fit-$l.txt" 2>&1
    fi || { echo "calibrate.sh: the $l exchange benchmark failed; its output: $out/fit-$l.txt" >&2; exit 1; }
    echo "calibrate.sh: $l fitted rows in $out/fit-$l.json" >&2
    case "$l" in
      local|unshaped) ;;
      *) "$root/benchmarks/model/stack-cpu" --link "$l" --bench "$bin/qsgd-bench-exchange" --out "$out/stack-$l.json" >&2 \
           || { echo "calibrate.sh: the $l stack CPU measurement failed (stack-cpu's output above)" >&2; exit 1; } ;;
    esac
  done
fi

has_part ceilings || exit 0

IFS=, read -r -a k_list <<< "$ranks"
for l in "${link_list[@]}"; do
  case "$l" in local|unshaped) continue ;; esac
  for k in "${k_list[@]}"; do
    [[ "$k" =~ ^[0-9]+$ ]] || { echo "calibrate.sh: --ranks takes whole numbers, got '$k'" >&2; exit 2; }
    [ "$k" -ge 2 ] || continue  # one rank sends nothing
    # The benchmark's ceiling moves min(-e, 64 MiB): one 64 MiB fp32 ring beside it.
    # A run that fails is run once more (Open MPI's TCP connection set-up
    # can fail while a shaped link is saturated); the failed attempt's output
    # is kept beside the result.
    for attempt in 1 2; do
      # --no-check: the check's reference average (the library's allreduce of
      # 64 MiB, at a third of a 100 Mbit/s link) outlasts the peer timeout.
      "$net" --nodes "$k" --rate "$l" -- "$bin/qsgd-bench-exchange" -b 64M -e 64M -w 0 -n 1 --strategies allreduce \
        --transports ring --no-check -o "$out/ceiling-$l-K$k.json" > "$out/ceiling-$l-K$k.txt" 2>&1 && break
      [ "$attempt" = 1 ] ||
        { echo "calibrate.sh: the $l K = $k ceiling run failed twice; its output: $out/ceiling-$l-K$k.txt" >&2; exit 1; }
      mv "$out/ceiling-$l-K$k.txt" "$out/ceiling-$l-K$k.failed.txt"
      echo "calibrate.sh: the $l K = $k ceiling run failed ($(grep -m1 -E 'error|failed|no progress' \
        "$out/ceiling-$l-K$k.failed.txt" || echo 'see the output')); running it once more" >&2
    done
    echo "calibrate.sh: $l K = $k link ceiling in $out/ceiling-$l-K$k.json" >&2
  done
done
