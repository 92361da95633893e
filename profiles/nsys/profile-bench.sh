#!/usr/bin/env bash
# Runs one of the suite's benchmarks under Nsight Systems through
# profile-train.sh and prints its per-range summary (docs/profiling.md).
#
#   profiles/nsys/profile-bench.sh exchange|kernels [profile-train options] [-- BENCH ARGS]
#
#   exchange  qsgd-bench-exchange on --np ranks (default 2): every strategy
#             (comm/<strategy> ranges) with the fixed and elias-dense codecs
#             (qsgd/quantize, qsgd/encode, qsgd/checksum, qsgd/decode).
#             Default args: -b 1M -e 1M -w 1 -n 5 (one 1 MiB gradient, 5
#             timed iterations per row); per-range columns refer to the
#             strategy ranges, so --ref defaults to comm/allreduce.
#   kernels   qsgd-bench-kernels, one process (--np 0): the codec kernels at
#             n = 2^20, Google Benchmark's own loop. Default args:
#             --qsgd_n_min=1048576 --qsgd_n_max=1048576
#             --benchmark_min_time=0.05 --benchmark_repetitions=1; --ref
#             defaults to qsgd/encode.
# BENCH ARGS replace the default args. Output directory default:
# ./nsys-bench-<which>. The build tree is $QSGD_BUILD_DIR, else build/dev
# (--build DIR).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"

which="${1:-}"
case "$which" in
  exchange|kernels) shift ;;
  -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "profile-bench: first argument must be 'exchange' or 'kernels' (see --help)" >&2; exit 2 ;;
esac

build="${QSGD_BUILD_DIR:-$root/build/dev}"
opts=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
  case "$1" in
    --build) build="$2"; shift 2 ;;
    --per-rank|--sampling|--keep-qdstrm) opts+=("$1"); shift ;;
    -h|--help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) [ $# -ge 2 ] || { echo "profile-bench: option '$1' needs a value" >&2; exit 2; }
       opts+=("$1" "$2"); shift 2 ;;
  esac
done
bench_args=()
if [ "${1:-}" = -- ]; then shift; bench_args=("$@"); fi

if [ "$which" = exchange ]; then
  prog="$build/benchmarks/qsgd-bench-exchange"
  [ "${#bench_args[@]}" -gt 0 ] || bench_args=(-b 1M -e 1M -w 1 -n 5)
  defaults=(--out nsys-bench-exchange --name exchange --np 2 --ref comm/allreduce)
else
  prog="$build/benchmarks/qsgd-bench-kernels"
  [ "${#bench_args[@]}" -gt 0 ] ||
    bench_args=(--qsgd_n_min=1048576 --qsgd_n_max=1048576 --benchmark_min_time=0.05 --benchmark_repetitions=1)
  defaults=(--out nsys-bench-kernels --name kernels --np 0 --trace "nvtx,osrt" --ref qsgd/encode)
fi
[ -x "$prog" ] || { echo "profile-bench: error: no $prog (build it, or pass --build DIR)" >&2; exit 1; }
# Later options win: the caller's come after the defaults.
exec "$here/profile-train.sh" "${defaults[@]}" "${opts[@]}" -- "$prog" "${bench_args[@]}"
