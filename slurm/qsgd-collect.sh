#!/usr/bin/env bash
# Collects a sweep: checks every run the sweep expects (SWEEP_DIR/runs.tsv),
# then writes, from the trace files alone,
#   SWEEP_DIR/summary.txt    qsgd-summary's table
#   SWEEP_DIR/summary.json   qsgd-summary --json
#   SWEEP_DIR/plots/         qsgd-plots
# Exit status 0 when every expected trace is complete, 1 when some are missing
# or incomplete (the summary and plots are still written from those present).
# qsgd-submit.sh submits it as a job after the arrays (--dependency=afterany);
# it also runs by hand on a login node.
#
# usage: slurm/qsgd-collect.sh [--site-env FILE] [--python PY] SWEEP_DIR
#   PY: a Python 3 with h5py, numpy and matplotlib: --python, else
#       $QSGD_PYTHON, else the environment's python3 (PATH, after the site
#       file's modules) when it imports them, else /usr/bin/python3 when it
#       does (Debian's packages import only there); a Python that lacks one
#       is an error that names the module, before any trace is read
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
scaling="$here/../benchmarks/scaling"
prog="qsgd-collect"
die() { echo "$prog: error: $*" >&2; exit 2; }

site_env="" python="${QSGD_PYTHON:-}" dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --site-env) [ $# -ge 2 ] || die "--site-env needs a value"; site_env="$2"; shift ;;
    --python) [ $# -ge 2 ] || die "--python needs a value"; python="$2"; shift ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    -*) die "unknown option '$1'" ;;
    *) [ -z "$dir" ] || die "one sweep directory only"; dir="$1" ;;
  esac
  shift
done
[ -n "$dir" ] || die "usage: qsgd-collect.sh [--site-env FILE] [--python PY] SWEEP_DIR"
[ -d "$dir/traces" ] || die "$dir/traces does not exist (not a sweep directory?)"
if [ -n "$site_env" ]; then
  set +u
  # shellcheck disable=SC1090
  source "$site_env"
  set -u
fi
imports='import h5py, numpy, matplotlib'
if [ -z "$python" ]; then
  python="$(command -v python3 || true)"
  if [ -z "$python" ] || ! "$python" -c "$imports" 2>/dev/null; then
    if [ -x /usr/bin/python3 ] && /usr/bin/python3 -c "$imports" 2>/dev/null; then python=/usr/bin/python3; fi
  fi
  [ -n "$python" ] || die "no python3 found (--python PY or QSGD_PYTHON)"
fi
if ! why="$("$python" -c "$imports" 2>&1)"; then
  die "$python cannot import h5py, numpy and matplotlib: ${why##*$'\n'} (--python PY or QSGD_PYTHON, or load them in the site file)"
fi

trace_complete() {
  "$python" -c 'import sys, h5py
v = h5py.File(sys.argv[1], "r").attrs.get("complete", b"")
sys.exit(0 if (v.decode() if isinstance(v, bytes) else str(v)) == "true" else 1)' "$1" 2>/dev/null
}

# Every run the submissions asked for: K, array index, manifest, trace.
n_expected=0 n_bad=0
if [ -f "$dir/runs.tsv" ]; then
  while IFS=$'\t' read -r k idx manifest trace; do
    n_expected=$((n_expected + 1))
    if [ ! -f "$dir/$trace" ]; then
      echo "$prog: missing:    $trace (re-run: $dir/rerun-K$k.sh $idx, see $manifest)"
      n_bad=$((n_bad + 1))
    elif ! trace_complete "$dir/$trace"; then
      echo "$prog: incomplete: $trace (re-run: $dir/rerun-K$k.sh $idx)"
      n_bad=$((n_bad + 1))
    fi
  done <"$dir/runs.tsv"
fi

if ! compgen -G "$dir/traces/*.h5" >/dev/null; then
  echo "$prog: no traces in $dir/traces yet" >&2
  exit 1
fi
# Each file is written whole under a name of this process, then renamed.
"$python" "$scaling/qsgd-summary" "$dir/traces" >"$dir/summary.txt.tmp.$$"
"$python" "$scaling/qsgd-summary" --json "$dir/traces" >"$dir/summary.json.tmp.$$"
mv -f "$dir/summary.txt.tmp.$$" "$dir/summary.txt"
mv -f "$dir/summary.json.tmp.$$" "$dir/summary.json"
"$python" "$scaling/qsgd-plots" --out "$dir/plots" "$dir/traces"
cat "$dir/summary.txt"
echo "$prog: $((n_expected - n_bad)) of $n_expected expected runs complete; wrote $dir/summary.txt, summary.json, plots/"
[ "$n_bad" -eq 0 ] || exit 1
