#!/usr/bin/env bash
# kernels_ab.sh AB_SH BUILD_DIR: benchmarks/kernels/ab.sh on the same build
# as A and B (2 rounds, n = 2^16, two kernels, short repetitions) writes
# every round's JSON and a table with one row per kernel and a B/A ratio; a
# build without qsgd-bench-kernels is refused with exit status 1.
set -uo pipefail
fail() { echo "FAIL: $*" >&2; exit 1; }
ab=$1 build=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$ab" "$build" "$build" "$dir/out" --rounds 2 --n 65536 --filter 'memcpy/kokkos|^quantize' --min-time 0.01 \
  > "$dir/log" 2>&1 || { cat "$dir/log"; fail "ab.sh failed"; }
for f in a.1 a.2 b.1 b.2; do [ -s "$dir/out/$f.json" ] || fail "no $f.json"; done
[ -s "$dir/out/ab.txt" ] || fail "no ab.txt"
for k in memcpy/kokkos quantize; do
  row=$(grep -E "^$k +" "$dir/out/ab.txt") || { cat "$dir/out/ab.txt"; fail "no row for $k"; }
  ratio=$(awk '{print $NF}' <<< "$row")
  awk -v r="$ratio" 'BEGIN { exit !(r > 0.2 && r < 5) }' || fail "$k: ratio '$ratio' of one build against itself"
done
rc=0
"$ab" "$dir/nothing" "$build" "$dir/bad" > "$dir/bad.log" 2>&1 || rc=$?
[ "$rc" = 1 ] || fail "a build without the benchmark: exit $rc, expected 1"
grep -q "qsgd-bench-kernels not found" "$dir/bad.log" || fail "the refusal does not name the missing program"
cat "$dir/out/ab.txt"
echo "ok: ab.sh wrote 4 runs and the table; a missing build is refused"
