#!/usr/bin/env bash
# Long fuzzing, outside CI: every harness in turn, in rounds, for --hours in
# all. Each harness resumes from and grows its saved corpus in
# results/fuzz/<harness>/corpus (results/ stays out of git); findings go to
# results/fuzz/<harness>/artifacts and do not stop the run (libFuzzer's fork
# mode). After each round the per-harness table (executions, cov, ft,
# corpus, findings) is appended to results/fuzz/report.txt. Interrupt it at
# any time; the next run starts from the corpora saved so far.
#
#   fuzz/run-long.sh [--hours H] [--rounds R] [harness ...]
#     --hours H    total time (default 6); each round gives every harness an
#                  equal share of H / R hours
#     --rounds R   default: one per hour (at least 1)
#
# Build first: cmake --preset fuzz && cmake --build --preset fuzz.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
hours=6
rounds=""
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --hours) hours="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    -*) echo "fuzz/run-long.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
# Every harness, trace-raw included (CI leaves it out: HDF5 crashes).
[ "${#harnesses[@]}" -gt 0 ] || harnesses=(message-raw message-struct checkpoint idx trace trace-raw trace-journal train-options exchange-meta async-push)
total=$(awk -v h="$hours" 'BEGIN { printf "%d", h * 3600 }')
[ -n "$rounds" ] || rounds=$(( total / 3600 > 0 ? total / 3600 : 1 ))
per=$(( total / rounds / ${#harnesses[@]} ))
[ "$per" -ge 10 ] || { echo "fuzz/run-long.sh: under 10 s per harness and round; give more hours or fewer rounds" >&2; exit 2; }

out="$root/results/fuzz"
mkdir -p "$out"
echo "fuzz: $rounds round(s) of ${#harnesses[@]} harness(es) x $per s; corpora and findings in $out"
for ((r = 1; r <= rounds; r++)); do
  {
    echo "== round $r/$rounds, $per s per harness, $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    "$root/fuzz/run.sh" --keep-going --corpus "$out" --seconds "$per" "${harnesses[@]}" || true
  } 2>&1 | tee -a "$out/report.txt"
done
echo "fuzz: findings so far:"
find "$out" -path '*/artifacts/*' -type f | sed 's/^/  /'
