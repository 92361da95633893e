#!/usr/bin/env bash
# time-asan-mpi-init.sh: why the asan test preset sets HWLOC_COMPONENTS=-pci.
# Times a 4-rank job that only starts and stops MPI (test_comm_mpi with no
# test selected) under the sanitizers with and without hwloc's PCI
# discovery, and unsanitized, alternating the three, and prints each one's
# median, min and max wall time.
#   scripts/time-asan-mpi-init.sh [--runs N (5)] [--np K (4)] [-o DIR]
# Needs the asan and release builds (build/asan, build/release). With -o,
# writes DIR/times.tsv (every run), DIR/summary.txt and DIR/machine.json
# (benchmarks/report/machine-info of the asan build).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
runs=5 np=4 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --np) np="$2"; shift 2 ;;
    -o) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
    *) echo "time-asan-mpi-init.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
asan="$root/build/asan/tests/comm/test_comm_mpi"
plain="$root/build/release/tests/comm/test_comm_mpi"
for b in "$asan" "$plain"; do
  [ -x "$b" ] || { echo "time-asan-mpi-init.sh: no $b (cmake --preset asan / release and build first)" >&2; exit 1; }
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
sup="$root/tests/lsan_openmpi.supp"
tsv="$(mktemp)"; trap 'rm -f "$tsv"' EXIT
printf 'config\trun\tseconds\n' > "$tsv"
one() {  # CONFIG BINARY ENV-ARGS...: one timed run, appended to the table
  local cfg="$1" bin="$2" s e
  shift 2
  s=$(date +%s.%N)
  env "$@" mpirun -np "$np" --oversubscribe "$bin" --gtest_filter=NONE > /dev/null 2>&1 ||
    { echo "time-asan-mpi-init.sh: the $cfg run failed" >&2; exit 1; }
  e=$(date +%s.%N)
  printf '%s\t%s\t%.3f\n' "$cfg" "$r" "$(echo "$e - $s" | bc)" >> "$tsv"
}
san=(ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 "LSAN_OPTIONS=suppressions=$sup:fast_unwind_on_malloc=0")
for r in $(seq 1 "$runs"); do
  one "asan, HWLOC_COMPONENTS=-pci" "$asan" "${san[@]}" HWLOC_COMPONENTS=-pci
  one "asan, PCI discovery" "$asan" -u HWLOC_COMPONENTS "${san[@]}"
  one "release, PCI discovery" "$plain" -u HWLOC_COMPONENTS
done
hwloc="$(dpkg-query -W -f '${Version}' libhwloc15 2> /dev/null || echo unknown)"
summary="$(awk -F'\t' -v np="$np" -v hwloc="$hwloc" -v git="$(git -C "$root" describe --always --dirty)" '
  NR > 1 { v[$1] = v[$1] " " $3; if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 } }
  END {
    printf "# %d ranks, MPI_Init + MPI_Finalize (test_comm_mpi --gtest_filter=NONE), wall seconds; git %s, hwloc %s\n", np, git, hwloc
    printf "%-28s %8s %8s %8s %5s\n", "config", "median", "min", "max", "runs"
    for (i = 1; i <= n; i++) {
      m = split(substr(v[order[i]], 2), x, " ")
      for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++) if (x[b] + 0 < x[a] + 0) { t = x[a]; x[a] = x[b]; x[b] = t }
      med = (m % 2) ? x[(m + 1) / 2] : (x[m / 2] + x[m / 2 + 1]) / 2
      printf "%-28s %8.2f %8.2f %8.2f %5d\n", order[i], med, x[1], x[m], m
    }
  }' "$tsv")"
echo "$summary"
if [ -n "$out" ]; then
  mkdir -p "$out"
  cp "$tsv" "$out/times.tsv"
  echo "$summary" > "$out/summary.txt"
  "$root/benchmarks/report/machine-info" "$root/build/asan" > "$out/machine.json"
fi
