#!/usr/bin/env bash
# Every NVTX range documented in docs/profiling.md (its marked table) shows up
# in real Nsight Systems runs of short qsgd-train jobs. The jobs, 2 ranks each,
# profiled with profiles/nsys/profile-train.sh (--trace=nvtx,mpi,osrt):
#   allgather      + fixed (4-bit)  fused quantize+encode: qsgd/quantize must
#                                   NOT appear (the documented exception)
#   scatter-reduce + elias-dense    qsgd/quantize, comm/scatter-reduce
#   param-server   + elias-sparse   comm/param-server; rank 1 alone under nsys
#                                   (--per-rank --ranks 1): one report,
#                                   NAME.1, and rank 0 run without nsys
#   capture (--profile-steps 1:2)   train/capture, comm/shared-scale; recorded
#                                   with the recipe's --capture, only the
#                                   window's steps
#   allreduce16                     comm/allreduce16; profiled through a shim
#                                   of nsys that names the NVTX summary as nsys
#                                   after 2022 does (report nvtx_sum, file
#                                   *_nvtx_sum.csv; the old name refused), so
#                                   that the recipe is checked with both names,
#                                   and launched through a shim of srun (whose
#                                   --version names only Slurm): the recipe must
#                                   find Open MPI from the program's libraries
#                                   and pass nsys --mpi-impl=openmpi; the
#                                   shim's first `profile` fails to start
#                                   ("End of file", no report): the recipe
#                                   runs the job again once (start_retries 1
#                                   in summary.json), and a shim that always
#                                   fails so makes the recipe fail after two
#                                   retries (the default); a program that
#                                   fails under a session that started is not
#                                   run again
#   nsys-rank.sh binding              rank 1 of an mpirun --bind-to core job
#                                   through a shim of nsys: nsys on this
#                                   script's CPUs, the program on its rank's
#                                   core alone (docs/profiling.md)
# Every job also runs the fp32 allreduce of the small tensors (comm/allreduce)
# and every train/, model/, data/, optim/ and qsgd/ phase.
#
# usage: check_nvtx_ranges.sh --repo DIR --train PATH/qsgd-train --out DIR
#                             [--mpiexec PATH] [--nvtx ON|OFF]
# nsys missing, or a build without NVTX headers (--nvtx OFF): the test FAILS,
# unless QSGD_ALLOW_NO_NSYS=1, when it is skipped (exit 77).
set -euo pipefail

repo="" train="" out="" mpiexec=mpirun nvtx=ON
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) repo="$2"; shift 2 ;;
    --train) train="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    --mpiexec) mpiexec="$2"; shift 2 ;;
    --nvtx) nvtx="$2"; shift 2 ;;
    *) echo "usage: $0 --repo DIR --train PATH --out DIR [--mpiexec PATH] [--nvtx ON|OFF]" >&2; exit 2 ;;
  esac
done
if [ -z "$repo" ] || [ -z "$train" ] || [ -z "$out" ]; then
  echo "usage: $0 --repo DIR --train PATH --out DIR [--mpiexec PATH] [--nvtx ON|OFF]" >&2
  exit 2
fi
t0=$SECONDS
doc="$repo/docs/profiling.md"
recipe="$repo/profiles/nsys/profile-train.sh"
summary="$repo/profiles/nsys/nvtx_summary.py"
python="${PYTHON:-/usr/bin/python3}"
[ -x "$python" ] || python="$(command -v python3)"

missing_tool() {  # message
  if [ "${QSGD_ALLOW_NO_NSYS:-0}" = 1 ]; then
    echo "SKIP (QSGD_ALLOW_NO_NSYS=1): $1"
    exit 77
  fi
  echo "FAIL: $1"
  echo "      (QSGD_ALLOW_NO_NSYS=1 turns this failure into a skip on machines without Nsight Systems)"
  exit 1
}
if ! command -v "${NSYS:-nsys}" > /dev/null 2>&1; then
  missing_tool "nsys (Nsight Systems) is not installed: run scripts/install-deps.sh --nsys (Debian non-free package nsight-systems)"
fi
case "$nvtx" in
  ON|on|1|TRUE|true) ;;
  *) missing_tool "this build has no NVTX ranges: CMake did not find nvtx3/nvToolsExt.h (QSGD_NVTX_INCLUDE_DIR; Debian's nvidia-cuda-dev or a CUDA toolkit ships it), see docs/profiling.md" ;;
esac
[ -x "$train" ] || { echo "FAIL: $train is not an executable"; exit 1; }

names="$("$python" "$summary" doc-names "$doc")" || { echo "FAIL: cannot read the range table of $doc"; exit 1; }
echo "documented ranges ($doc): ${names//$'\n'/ }"

. "$(dirname "$0")/../../scripts/openmpi-env.sh"
launcher="$mpiexec"
common=(--model mlp --mlp-widths "784,64,10" --dataset teacher --teacher-samples 1024 --batch 32
  --max-steps 3 --epochs 1 --eval-limit 128 --quiet)
jobs=(
  "fixed-allgather:--strategy allgather --codec fixed --bits 4"
  "elias-scatter-reduce:--strategy scatter-reduce --codec elias-dense --bits 4"
  "sparse-param-server:--strategy param-server --codec elias-sparse --bits 2"
  "allreduce16:--strategy allreduce16"
  "capture:--strategy shared-scale --codec fixed --bits 4 --max-steps 4 --profile-steps 1:2"
)
rm -rf "$out"
mkdir -p "$out/shim"
real_nsys="$(command -v "${NSYS:-nsys}")"
{
  echo '#!/usr/bin/env bash'
  echo '# nsys as versions after 2022 name the NVTX range summary (report nvtx_sum,'
  echo '# file BASE_nvtx_sum.csv); the 2022 name nvtxsum is refused.'
  echo "real='$real_nsys'"
  echo "failed_once='$out/shim/failed-once'"
  cat <<'SHIM'
# The first `profile` fails as nsys does when its agent connection ends before
# the session starts (profile-train.sh --start-retries); NSYS_SHIM_START_FAILS=all:
# every `profile` does.
if [ "$1" = profile ] && { [ "${NSYS_SHIM_START_FAILS:-}" = all ] || [ ! -e "$failed_once" ]; }; then
  : > "$failed_once"
  echo "End of file"
  exit 1
fi
[ "$1" = stats ] || exec "$real" "$@"
if [ "$2" = --help-reports ]; then "$real" stats --help-reports | sed 's/^\( *\)nvtxsum /\1nvtx_sum /'; exit; fi
args=("$@") base=""
for i in "${!args[@]}"; do
  if [ "${args[$i]}" = --report ]; then
    case "${args[$((i + 1))]}" in
      nvtxsum) echo "ERROR: Report 'nvtxsum' could not be found." >&2; exit 1 ;;
      nvtx_sum) args[$((i + 1))]=nvtxsum ;;
    esac
  fi
  [ "${args[$i]}" != -o ] || base="${args[$((i + 1))]}"
done
"$real" "${args[@]}" || exit
[ ! -f "${base}_nvtxsum.csv" ] || mv -f "${base}_nvtxsum.csv" "${base}_nvtx_sum.csv"
SHIM
} > "$out/shim/nsys"
chmod +x "$out/shim/nsys"
# srun as the recipe meets it on a cluster (its --version names Slurm, not the
# MPI), running the ranks with mpirun here.
{
  echo '#!/usr/bin/env bash'
  echo "mpiexec='$(command -v "$mpiexec")'"
  cat <<'SHIM'
[ "$1" != --version ] || { echo "slurm 22.05.8"; exit 0; }
[ "$1" = -n ] || { echo "srun shim: expected -n N, got $*" >&2; exit 2; }
np="$2"; shift 2
exec "$mpiexec" -np "$np" "$@"
SHIM
} > "$out/shim/srun"
chmod +x "$out/shim/srun"
csvs=()
for job in "${jobs[@]}"; do
  name="${job%%:*}"
  read -r -a args <<< "${job#*:}"
  nsys_bin="$real_nsys" report=nvtxsum launch="$launcher" extra=() base="$name"
  [ "$name" != capture ] || extra=(--capture)
  [ "$name" != sparse-param-server ] || extra=(--per-rank --ranks 1) base="$name.1"
  [ "$name" != allreduce16 ] || nsys_bin="$out/shim/nsys" report=nvtx_sum launch="$out/shim/srun"
  echo "== $name: ${args[*]} (nsys report $report)"
  if ! NSYS="$nsys_bin" "$recipe" --out "$out/$name" --name "$name" --np 2 --launcher "$launch" "${extra[@]}" --timeout 180 \
         -- "$train" "${common[@]}" "${args[@]}"; then
    echo "FAIL: profiling job '$name' failed (log: $out/$name/profile.log)"
    exit 1
  fi
  [ -s "$out/$name/${base}_${report}.csv" ] || { echo "FAIL: no ${base}_${report}.csv from the recipe"; exit 1; }
  n_reports="$(find "$out/$name" -name '*.nsys-rep' | wc -l)"
  [ "$n_reports" = 1 ] || { echo "FAIL: $name: $n_reports reports, expected 1 ($(ls "$out/$name"))"; exit 1; }
  grep -q -- "--mpi-impl=openmpi" "$out/$name/profile.log" ||
    { echo "FAIL: $name: nsys was not given --mpi-impl=openmpi (launcher $launch; log: $out/$name/profile.log)"; exit 1; }
  csvs+=("$out/$name/${base}_${report}.csv")
done

status=0
# nsys failing to start its session: one retry, counted (the allreduce16 job's
# shim failed its first start); a start that always fails is retried twice
# (the default), not forever, and fails the recipe.
if ! "$python" - "$out/allreduce16/summary.json" <<'PY'
import json, sys
n = json.load(open(sys.argv[1]))["start_retries"]
print("allreduce16: start_retries %s (the shim failed the first start)" % n)
sys.exit(0 if n == 1 else 1)
PY
then
  echo "FAIL: the recipe did not retry once after nsys failed to start (allreduce16/summary.json)"
  status=1
fi
echo "== a start that always fails"
if NSYS_SHIM_START_FAILS=all NSYS="$out/shim/nsys" "$recipe" --out "$out/start-fails" --name start-fails --np 2 \
     --launcher "$out/shim/srun" --timeout 60 -- "$train" "${common[@]}" --strategy allreduce16 > "$out/start-fails.out" 2>&1; then
  echo "FAIL: the recipe succeeded although nsys never started (log: $out/start-fails.out)"
  status=1
elif [ "$(grep -c "running the job again" "$out/start-fails/profile.log")" != 2 ]; then
  echo "FAIL: expected exactly two retries (the default) of a start that always fails (log: $out/start-fails/profile.log)"
  status=1
else
  echo "a start that always fails: two retries, then the recipe failed (as it must)"
fi
echo "== nsys-rank.sh: nsys on the launcher's CPUs, the program on its rank's core"
# A shim of nsys prints its CPU list and runs the program, which prints its
# own; mpirun binds each rank to a core.
cat > "$out/shim/nsys-affinity" <<'SHIM'
#!/usr/bin/env bash
echo "nsys $OMPI_COMM_WORLD_RANK: $(taskset -cp $$ | sed 's/.*: //')"
while [ $# -gt 0 ] && [ "$1" != -o ]; do shift; done
shift 2
exec "$@"
SHIM
chmod +x "$out/shim/nsys-affinity"
here_cpus="$(taskset -cp $$ | sed 's/.*: //')"
aff="$("$launcher" --bind-to core -np 2 "$repo/profiles/nsys/nsys-rank.sh" --rank-var OMPI_COMM_WORLD_RANK --ranks 1 \
         --output "$out/affinity" "$out/shim/nsys-affinity" profile -- \
         bash -c 'echo "program $OMPI_COMM_WORLD_RANK: $(taskset -cp $$ | sed "s/.*: //")"' 2>&1)" || true
echo "$aff"
nsys_cpus="$(sed -n 's/^nsys 1: //p' <<< "$aff")"
prog_cpus="$(sed -n 's/^program 1: //p' <<< "$aff")"
if [ -z "$nsys_cpus" ] || [ -z "$prog_cpus" ] || [ "$nsys_cpus" != "$here_cpus" ] || [ "$prog_cpus" = "$nsys_cpus" ]; then
  echo "FAIL: expected nsys of rank 1 on this script's CPUs ($here_cpus) and its program on its bound core alone"
  status=1
fi
echo "== a program that fails under a session that started"
# It prints nsys' start-failure line itself; nsys generated its report, so
# the job is not run again.
if "$recipe" --out "$out/program-fails" --name program-fails --np 0 --timeout 60 \
     -- bash -c 'echo "End of file"; exit 3' > "$out/program-fails.out" 2>&1; then
  echo "FAIL: the recipe succeeded although its program failed (log: $out/program-fails.out)"
  status=1
elif grep -q "running the job again" "$out/program-fails/profile.log" ||
     ! grep -q "^Generating '" "$out/program-fails/profile.log"; then
  echo "FAIL: a program that failed in a started session was run again, or nsys did not start (log: $out/program-fails/profile.log)"
  status=1
else
  echo "a program that fails under a started session: not run again, the recipe failed"
fi
# The fused fixed-width path quantizes while it packs: no qsgd/quantize range
# (docs/profiling.md says so; a change there must change the docs).
if "$python" "$summary" names "$out/fixed-allgather/fixed-allgather_nvtxsum.csv" | grep -Fxq qsgd/quantize; then
  echo "FAIL: qsgd/quantize was recorded with the fixed codec, documented as fused (no separate quantize)"
  status=1
fi
# The capture window (qsgd-train --profile-steps 1:2, recipe --capture):
# train/capture once per rank, and train/step for the window's one step per
# rank (nsys stops asynchronously: at most one more step per rank may begin
# before it does), not the run's 4 per rank.
if ! "$python" - "$out/capture/summary.json" <<'PY'
import json, sys
r = {x["range"]: x["count"] for x in json.load(open(sys.argv[1]))["ranges"]}
cap, steps = r.get("train/capture", 0), r.get("train/step", 0)
print("capture window: train/capture %d, train/step %d (run: 8 steps over 2 ranks)" % (cap, steps))
sys.exit(0 if cap == 2 and 2 <= steps <= 4 else 1)
PY
then
  echo "FAIL: the capture window recorded more or less than steps 1..1 of each rank"
  status=1
fi
# Payloads (docs/profiling.md): train/step carries the global step, so each
# rank's steps are 0, 1, 2 (the run's --max-steps 3); comm/<strategy> carries
# the operation's tensor, a bucket index (present on every event).
if ! "$python" - "$out/fixed-allgather/fixed-allgather.sqlite" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
steps = sorted(v for (v,) in db.execute("SELECT uint64Value FROM NVTX_EVENTS WHERE text = 'train/step'"))
comm = [v for (v,) in db.execute("SELECT uint64Value FROM NVTX_EVENTS WHERE text = 'comm/allgather'")]
print("payloads: train/step %s; comm/allgather %d events, buckets %s" % (steps, len(comm), sorted(set(comm))))
ok = steps == [0, 0, 1, 1, 2, 2] and comm and all(v is not None for v in comm)
sys.exit(0 if ok else 1)
PY
then
  echo "FAIL: the NVTX payloads are not the global steps (train/step) and bucket indices (comm/allgather)"
  status=1
fi
echo "== documented ranges against the recorded ones"
"$python" "$summary" check "$doc" "${csvs[@]}" || status=1
echo "nvtx ranges test: $((SECONDS - t0)) s for ${#jobs[@]} profiled jobs"
[ "$status" = 0 ] && echo PASS || echo FAIL
exit "$status"
