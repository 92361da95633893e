#!/bin/bash
# K copies of qsgd-bench-kernels at once (K = 1..4), no binding, as the exchanges' ranks run;
# each copy all the coding kernels at n = 2^22, 3 repetitions.   run.sh [RELEASE-BUILD] [OUT]
bin=${1:-build/release}/benchmarks/qsgd-bench-kernels
out=${2:-.}
f='^encode/(elias-dense|rans|fixed)/|^decode_accumulate/(elias-dense|rans|fixed)/|^decode/(elias-dense|rans)/|memcpy/kokkos'
for k in 1 2 3 4; do
  pids=()
  for i in $(seq 1 $k); do
    $bin --qsgd_n_min=4194304 --qsgd_n_max=4194304 --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
      --benchmark_filter="$f" --benchmark_out=$out/K$k-c$i.json --benchmark_out_format=json > $out/K$k-c$i.txt 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}"
  echo "K=$k done $(date +%T)"
done
