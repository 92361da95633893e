#!/usr/bin/env bash
# Runs the libFuzzer harnesses one after the other, each for a bounded time,
# from the generated seeds (and a saved corpus, when one is given), and
# reports per harness: executions, coverage (libFuzzer's cov and ft), corpus
# size and findings. Build first: cmake --preset fuzz && cmake --build --preset fuzz.
#
#   fuzz/run.sh [options] [harness ...]     (default: the CI set, see below)
#     --all           every harness: the CI set and trace-raw, which fuzzes
#                     HDF5's own file parser and finds its crashes (see
#                     fuzz/regressions/open.txt), so it runs in long runs only
#     --seconds S     time per harness (default 15)
#     --corpus DIR    keep each harness's corpus in DIR/<harness>/corpus and its
#                     findings in DIR/<harness>/artifacts, and resume from them;
#                     default: a fresh corpus in a temporary directory
#     --keep-going    do not stop at the first finding: libFuzzer's fork mode
#                     with crashes, timeouts and out-of-memory ignored (each is
#                     still saved); for long runs (fuzz/run-long.sh)
#     --build DIR     the fuzz build (default build/fuzz)
#
# Exit status: 0 when no harness found anything, 1 otherwise (each finding is
# named with the command that reproduces it). Known open findings
# (fuzz/regressions/open.txt) are tolerated, so that the rest of each
# contract stays under test while they wait for their fix.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds=15
corpus_root=""
keep_going=0
had_all=0
build="$root/build/fuzz"
harnesses=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --all) had_all=1; shift ;;
    --corpus) corpus_root="$2"; shift 2 ;;
    --keep-going) keep_going=1; shift ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
    -*) echo "fuzz/run.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    *) harnesses+=("$1"); shift ;;
  esac
done
ci_set=(message-raw message-struct checkpoint idx trace trace-journal train-options exchange-meta async-push)
[ "$had_all" = 0 ] || harnesses=("${ci_set[@]}" trace-raw)
[ "${#harnesses[@]}" -gt 0 ] || harnesses=("${ci_set[@]}")

bin="$build/fuzz"
if [ ! -f "$bin/seeds.stamp" ]; then
  echo "fuzz/run.sh: no fuzz build in $build (cmake --preset fuzz && cmake --build --preset fuzz)" >&2
  exit 2
fi

# Largest input per harness: room for the biggest seed and its growth.
max_len() {
  case "$1" in
    message-raw) echo 16384 ;;
    message-struct) echo 10240 ;;
    checkpoint|idx|trace|trace-journal) echo 4096 ;;
    trace-raw) echo 32768 ;;
    train-options) echo 1024 ;;
    exchange-meta) echo 20480 ;;
    async-push) echo 20480 ;;
    *) echo "fuzz/run.sh: unknown harness '$1' (${ci_set[*]} trace-raw)" >&2; exit 2 ;;
  esac
}

# The same limits as QSGD_FUZZ_LIMITS in fuzz/CMakeLists.txt.
limits=(-rss_limit_mb=512 -malloc_limit_mb=256 -timeout=10)
QSGD_FUZZ_TOLERATE="$(grep -E '^[a-z]' "$root/fuzz/regressions/open.txt" | awk '{print $1}' | paste -sd, -)"
export QSGD_FUZZ_TOLERATE
[ -z "$QSGD_FUZZ_TOLERATE" ] || echo "fuzz: tolerating open findings: $QSGD_FUZZ_TOLERATE (fuzz/regressions/open.txt)"

# Sanitizer reports with file:line (clang-15's own symbolizer, from llvm-15).
export ASAN_OPTIONS="${ASAN_OPTIONS:-}"
symbolizer="$(command -v llvm-symbolizer-15 || command -v llvm-symbolizer || true)"
if [ -n "$symbolizer" ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}external_symbolizer_path=$symbolizer"
  export UBSAN_OPTIONS="${UBSAN_OPTIONS:+$UBSAN_OPTIONS:}print_stacktrace=1:external_symbolizer_path=$symbolizer"
fi

# Third-party leaks the suite cannot fix (fuzz/lsan.supp says which).
export LSAN_OPTIONS="${LSAN_OPTIONS:+$LSAN_OPTIONS:}suppressions=$root/fuzz/lsan.supp"

scratch="$(mktemp -d "${TMPDIR:-/tmp}/qsgd-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
export TMPDIR="$scratch"  # the harnesses' scratch files

status=0
report=()
for h in "${harnesses[@]}"; do
  len="$(max_len "$h")"
  if [ -n "$corpus_root" ]; then
    dir="$corpus_root/$h"
  else
    dir="$scratch/$h"
  fi
  mkdir -p "$dir/corpus" "$dir/artifacts"
  log="$dir/log-$(date -u +%Y%m%dT%H%M%SZ).txt"
  before="$(find "$dir/artifacts" -type f | wc -l)"
  touch "$dir/.started"
  # One process (libFuzzer's default; -jobs would detach its output): the
  # machine's other cores stay free for whatever else runs.
  args=("${limits[@]}" -max_len="$len" -max_total_time="$seconds" -print_final_stats=1
        -artifact_prefix="$dir/artifacts/")
  # A dictionary of the format's tokens, where the harness has one.
  [ ! -f "$root/fuzz/$h.dict" ] || args+=(-dict="$root/fuzz/$h.dict")
  # HDF5 has no frame pointers: full malloc stacks let lsan.supp name the
  # one HDF5 frame it suppresses.
  asan="$ASAN_OPTIONS"
  case "$h" in trace*) asan="${asan:+$asan:}fast_unwind_on_malloc=0" ;; esac
  if [ "$keep_going" = 1 ]; then
    args+=(-fork=1 -ignore_crashes=1 -ignore_ooms=1 -ignore_timeouts=1)
  fi
  start=$SECONDS
  set +e
  ASAN_OPTIONS="$asan" "$bin/qsgd-fuzz-$h" "${args[@]}" "$dir/corpus" "$bin/seeds/$h" >"$log" 2>&1
  rc=$?
  set -e
  took=$((SECONDS - start))
  after="$(find "$dir/artifacts" -type f | wc -l)"
  found=$((after - before))
  # Plain mode ends with "#N<tab>DONE cov: C ft: F corp: U/S"; fork mode
  # prints "#N: cov: C ft: F corp: U exec/s ..." lines, the last the total.
  last="$(grep -E '^#[0-9]+:?[[:space:]]+(DONE|INITED|NEW|REDUCE|pulse|cov:)' "$log" | tail -1 || true)"
  # Fork mode's parent runs no input itself: its final stat line says 0, and
  # the last "#N:" line holds the children's total.
  execs="$(echo "$last" | grep -oE '^#[0-9]+' | tr -d '#' || true)"
  if [ "$keep_going" = 0 ] || [ -z "$execs" ]; then
    stat="$(grep -oE 'stat::number_of_executed_units: [0-9]+' "$log" | awk '{print $2}' | tail -1 || true)"
    [ -z "$stat" ] || execs="$stat"
  fi
  cov="$(echo "$last" | grep -oE 'cov: [0-9]+' | awk '{print $2}' || true)"
  ft="$(echo "$last" | grep -oE 'ft: [0-9]+' | awk '{print $2}' || true)"
  units="$(find "$dir/corpus" -type f | wc -l)"
  report+=("$(printf '%-15s %6ss %12s %7s %7s %8s %8s' "$h" "$took" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$units" "$found")")
  if [ "$rc" = 72 ] && [ "$found" = 0 ]; then
    # libFuzzer's exit code when interrupted (SIGINT/SIGTERM): not a finding.
    echo "fuzz: $h: interrupted after ${took} s, no finding; log $log" >&2
    status=1
  elif [ "$rc" != 0 ] || [ "$found" != 0 ]; then
    status=1
    echo "fuzz: $h: FINDING (exit $rc); log $log" >&2
    grep -E 'contract violated|ERROR: |runtime error|SUMMARY' "$log" | head -5 >&2 || true
    for a in $(find "$dir/artifacts" -type f -newer "$dir/.started" 2>/dev/null | head -5); do
      echo "  reproduce: $bin/qsgd-fuzz-$h ${limits[*]} $a" >&2
    done
    if [ -z "$corpus_root" ]; then
      # Keep what the temporary directory would lose.
      keep="$root/results/fuzz/findings/$h"
      mkdir -p "$keep"
      cp "$dir/artifacts/"* "$keep/" 2>/dev/null || true
      cp "$log" "$keep/"
      echo "  saved in $keep" >&2
    fi
  fi
done

printf '%-15s %7s %12s %7s %7s %8s %8s\n' harness time executions cov ft corpus findings
printf '%s\n' "${report[@]}"
exit "$status"
