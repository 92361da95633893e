#!/usr/bin/env bash
# Runs an MPI program (by default a short qsgd-train job) under Nsight Systems
# and prints a per-range summary of its NVTX ranges (docs/profiling.md).
#
#   profiles/nsys/profile-train.sh [options] [-- COMMAND [ARG...]]
#
#   -o, --out DIR       output directory (default ./nsys-profile)
#   -n, --np N          MPI ranks (default 2); 0 runs COMMAND without a
#                       launcher (serial programs, or a COMMAND that is
#                       itself `mpirun ...` / `srun ...`)
#   -t, --trace LIST    nsys APIs to trace (default nvtx,mpi,osrt; on a GPU
#                       node cuda,nvtx,mpi,osrt)
#   --per-rank          one nsys session per rank inside the launcher
#                       (reports NAME.<rank>): needed across nodes. Default:
#                       one session around the launcher, one report for all
#                       ranks of this node
#   --rank-var VAR      rank variable for --per-rank report names
#                       (default OMPI_COMM_WORLD_RANK; Slurm: SLURM_PROCID)
#   --ranks LIST        with --per-rank: profile only these ranks (e.g. 0 or
#                       0,2-3; default all); the others run without nsys
#                       (profiles/nsys/nsys-rank.sh)
#   --launcher CMD      launcher and its flags, word-split (default: mpirun
#                       with scripts/openmpi-env.sh: oversubscribed, root
#                       allowed); the rank count follows as `-np N` (srun: `-n N`)
#   --name NAME         report name (default train)
#   --ref RANGE         range the per-step columns refer to (train/step)
#   --sampling          CPU IP sampling and context switches on (default off:
#                       --sample=none --cpuctxsw=none; sampling needs perf
#                       events, often not allowed in containers, and triples
#                       the time of a short job here)
#   --capture           record only the NVTX range train/capture, which
#                       qsgd-train --profile-steps A:B opens over global steps
#                       A..B-1 (nsys --capture-range=nvtx
#                       --nvtx-capture=train/capture --capture-range-end=stop;
#                       NSYS_NVTX_PROFILER_REGISTER_ONLY=0, which nsys needs
#                       for a range name that is not a registered string)
#   --mpi-impl IMPL     nsys --mpi-impl (openmpi or mpich) for --trace mpi;
#                       default: from the MPI library the program links
#                       (ldd: libmpi.so.40 is Open MPI, libmpich or
#                       libmpi.so.12 MPICH and its derivatives), else from the
#                       launcher's --version (mpirun; srun names no MPI)
#   --nsys-args ARGS    more `nsys profile` options, word-split
#   --timeout SEC       stop the profiled job after SEC seconds (default none;
#                       each attempt, see --start-retries)
#   --keep-qdstrm       keep the raw .qdstrm files (tens of MB each)
#   --start-retries N   run the job again, up to N times (default 2), when nsys
#                       failed to start its session: the job failed, wrote no
#                       report, and nsys printed its agent connection's
#                       failure ("End of file", "Connection reset by peer",
#                       "Connection to the Agent lost.") and nothing of the
#                       profile. Each retry is logged and counted in
#                       summary.json ("start_retries"); 0 where
#                       running a job twice is not safe (docs/profiling.md)
#   --build DIR         build tree of the default COMMAND (default
#                       $QSGD_BUILD_DIR, else build/dev)
#
# Without COMMAND: BUILD/benchmarks/qsgd-train with a 5-step MLP job
# (allgather, 4-bit fixed-width codec; see DEFAULT_TRAIN below).
# Writes into DIR: NAME*.nsys-rep (open in nsys-ui), NAME*.sqlite,
# NAME*_nvtxsum.csv or NAME*_nvtx_sum.csv (`nsys stats --report nvtxsum`,
# named nvtx_sum by nsys after 2022), summary.txt (the table
# printed at the end), summary.json (the same with provenance), profile.log
# (nsys' and the program's output).
# Exit status: the program's (or 1) on failure, 2 usage, 3 nsys missing.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
DEFAULT_TRAIN=(--model mlp --mlp-widths "784,64,10" --dataset teacher --teacher-samples 2048 --batch 32
  --max-steps 5 --epochs 1 --eval-limit 256 --strategy allgather --codec fixed --bits 4 --quiet)

usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }
die() { echo "profile-train: error: $*" >&2; exit 1; }

out="nsys-profile"
np=2
trace=nvtx,mpi,osrt
per_rank=0
rank_var=OMPI_COMM_WORLD_RANK
profiled=all
launcher=""
name=train
ref=train/step
sampling=0
nsys_extra=""
mpi_impl=""
capture=0
timeout_s=""
keep_qdstrm=0
start_retries=2
build="${QSGD_BUILD_DIR:-$root/build/dev}"
while [ $# -gt 0 ]; do
  case "$1" in
    -o|--out) out="$2"; shift 2 ;;
    -n|--np) np="$2"; shift 2 ;;
    -t|--trace) trace="$2"; shift 2 ;;
    --per-rank) per_rank=1; shift ;;
    --rank-var) rank_var="$2"; shift 2 ;;
    --ranks) profiled="$2"; shift 2 ;;
    --launcher) launcher="$2"; shift 2 ;;
    --name) name="$2"; shift 2 ;;
    --ref) ref="$2"; shift 2 ;;
    --sampling) sampling=1; shift ;;
    --nsys-args) nsys_extra="$2"; shift 2 ;;
    --mpi-impl) mpi_impl="$2"; shift 2 ;;
    --capture) capture=1; shift ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --keep-qdstrm) keep_qdstrm=1; shift ;;
    --start-retries) start_retries="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) usage; exit 0 ;;
    --) shift; break ;;
    *) echo "profile-train: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$np" in ''|*[!0-9]*) echo "profile-train: --np needs a number" >&2; exit 2 ;; esac
case "$start_retries" in ''|*[!0-9]*) echo "profile-train: --start-retries needs a number" >&2; exit 2 ;; esac
case "$name" in ''|*[!A-Za-z0-9_.-]*) echo "profile-train: --name: letters, digits, . _ - only" >&2; exit 2 ;; esac
if [ "$per_rank" = 1 ] && [ "$np" = 0 ]; then
  echo "profile-train: --per-rank needs --np N > 0" >&2; exit 2
fi
[[ "$profiled" =~ ^(all|[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*)$ ]] ||
  { echo "profile-train: --ranks: comma-separated ranks or ranges A-B, or all" >&2; exit 2; }
if [ "$profiled" != all ] && [ "$per_rank" = 0 ]; then
  echo "profile-train: --ranks needs --per-rank" >&2; exit 2
fi

if [ $# -gt 0 ]; then
  cmd=("$@")
else
  [ -x "$build/benchmarks/qsgd-train" ] ||
    die "no $build/benchmarks/qsgd-train: build it (cmake --preset dev && cmake --build --preset dev), pass --build DIR, or give a COMMAND after --"
  cmd=("$build/benchmarks/qsgd-train" "${DEFAULT_TRAIN[@]}")
fi

# ---- tools ------------------------------------------------------------------
. "$here/nsys-common.sh"
nsys_find || exit 3
case "$mpi_impl" in ""|openmpi|mpich) ;; *) echo "profile-train: --mpi-impl must be openmpi or mpich" >&2; exit 2 ;; esac
if [ -z "$mpi_impl" ] && [[ ",$trace," == *,mpi,* ]]; then mpi_impl="$(nsys_mpi_of_program "${cmd[0]}")"; fi
if [ "$np" != 0 ]; then
  if [ -z "$launcher" ]; then
    launcher="mpirun"
    . "$root/scripts/openmpi-env.sh"  # one machine: oversubscribe, root allowed
  fi
  read -r -a launch <<< "$launcher"
  command -v "${launch[0]}" > /dev/null || die "launcher '${launch[0]}' not found (--launcher)"
  if [ "$(basename "${launch[0]}")" = srun ]; then launch+=(-n "$np"); else launch+=(-np "$np"); fi
  if [ -z "$mpi_impl" ] && [[ ",$trace," == *,mpi,* ]]; then
    v="$("${launch[0]}" --version 2>&1 || true)"
    case "$v" in
      *"Open MPI"*|*OpenRTE*) mpi_impl=openmpi ;;
      *MPICH*|*HYDRA*|*"Intel(R) MPI"*) mpi_impl=mpich ;;
    esac
  fi
fi

if [ -z "$mpi_impl" ] && [[ ",$trace," == *,mpi,* ]]; then
  echo "profile-train: note: no MPI implementation found for nsys --trace=mpi (give --mpi-impl openmpi|mpich)" >&2
fi

mkdir -p "$out"
out="$(cd "$out" && pwd)"
# Reports of an earlier run with this name would be merged into the summary.
nsys_clear "$out" "$name"

nsys_profile_opts "$trace" "$sampling" "$mpi_impl" "$capture" "$nsys_extra"

# The command of one attempt, under session name $session (a retry takes a
# new name: the failed session's agent may not be gone yet).
build_run() {
  if [ "$np" = 0 ]; then
    run=("$nsys" "${nsys_opts[@]}" "--session-new=$session" -o "$out/$name" "${cmd[@]}")
  elif [ "$per_rank" = 0 ]; then
    run=("$nsys" "${nsys_opts[@]}" "--session-new=$session" -o "$out/$name" "${launch[@]}" "${cmd[@]}")
  else
    # Every rank starts nsys-rank.sh, which runs the profiled ranks under nsys
    # (report NAME.<rank>) and the others as they are.
    run=("${launch[@]}" "$here/nsys-rank.sh" --rank-var "$rank_var" --ranks "$profiled" --output "$out/$name"
         --session "$session" "$nsys" "${nsys_opts[@]}" -- "${cmd[@]}")
  fi
  if [ -n "$timeout_s" ]; then run=(timeout -k 20 "$timeout_s" "${run[@]}"); fi
}
session="qsgd-$$-$name"
build_run

# Stops what a timed-out or interrupted run left: nsys' agents run in their
# own sessions, outside the launcher's process group, and a stuck one does not
# answer `nsys shutdown`; the agent is then ended by its PID (the process
# whose arguments hold this run's own session name), and its launchers follow.
stop_sessions() {
  local s=("$session") r p
  if [ "$per_rank" = 1 ]; then
    s=()
    for ((r = 0; r < np; r++)); do s+=("$session-$r"); done
  fi
  local pids=() agents=() i args
  for r in "${s[@]}"; do
    "$nsys" shutdown --kill=sigkill "--session=$r" > /dev/null 2>&1 || true
    agents+=(-e "--session-name=$r")
  done
  # One pass over the processes: the agents (an argument --session-name=NAME
  # of this run) and nsys' launchers of a failed start (an argument under the
  # attempt's TMPDIR, where they wait on files).
  for p in /proc/[0-9]*; do
    args="$(tr '\0' '\n' < "$p/cmdline" 2> /dev/null)" || continue
    grep -Eq -- "^$tmp/[0-9]+/" <<< "$args" || grep -Fxq "${agents[@]}" <<< "$args" || continue
    kill "${p#/proc/}" 2> /dev/null && pids+=("${p#/proc/}")
  done
  # Waits (at most 10 s) until they are gone.
  for ((i = 0; i < 50 && ${#pids[@]} > 0; i++)); do
    for p in "${!pids[@]}"; do [ -e "/proc/${pids[$p]}" ] || unset "pids[$p]"; done
    [ "${#pids[@]}" = 0 ] || sleep 0.2
  done
}
# nsys keeps its temporary files (the raw stream, status files) in TMPDIR
# and leaves some behind when a session fails: give each attempt its own
# (short: Open MPI puts its sockets there too) and remove them at the end.
tmp="$(mktemp -d /tmp/qsgd-nsys.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
trap 'stop_sessions; exit 130' INT TERM

# A command line as text, quoting only words that need it.
show() {
  local w line=""
  for w in "$@"; do
    if [[ "$w" =~ ^[][A-Za-z0-9_./,:=%{}@+-]+$ ]]; then line+="$w "; else line+="$(printf '%q' "$w") "; fi
  done
  echo "${line% }"
}

# True when an attempt's output (FILE) looks like nsys failing to start its
# session rather than the job failing: nsys' CLI lost the connection to the
# agent it had just started (its messages: "End of file", "Connection reset by
# peer", "Connection to the Agent lost."), nsys never said it was generating
# a report, and none was written. Seen on 2-core machines with other load,
# before the profiled program ran (nsys-rank.sh's comment has the cause we
# measured and the fix). It cannot see whether unprofiled ranks (--per-rank
# --ranks) or a program waiting for its --capture window had started:
# --start-retries 0 where running such a job twice is not safe.
nsys_start_failed() {  # FILE
  local f
  grep -Eq $'^(End of file|Connection reset by peer|Connection to the Agent lost\\.)\r?$' "$1" || return 1
  ! grep -q "^Generating '" "$1" || return 1
  for f in "$out/$name".qdstrm "$out/$name".nsys-rep "$out/$name".*.qdstrm "$out/$name".*.nsys-rep; do
    [ ! -e "$f" ] || return 1
  done
  return 0
}

log="$out/profile.log"
echo "profile-train: $(show "${run[@]}")" | tee "$log"
start=$SECONDS
retries=0
while :; do
  mkdir "$tmp/$retries"
  attempt="$tmp/$retries.log"
  : > "$attempt"
  set +e
  TMPDIR="$tmp/$retries" "${run[@]}" 2>&1 | tee -a "$log" "$attempt"
  rc=${PIPESTATUS[0]}
  set -e
  if [ "$rc" = 0 ] || [ "$retries" -ge "$start_retries" ] || [ "$rc" = 124 ] || [ "$rc" = 137 ] ||
     ! nsys_start_failed "$attempt"; then
    break
  fi
  retries=$((retries + 1))
  stop_sessions
  session="qsgd-$$-$name-r$retries"
  build_run
  echo "profile-train: nsys failed to start its session (exit $rc, no report: its agent connection ended); running the job again ($retries of at most $start_retries): $(show "${run[@]}")" | tee -a "$log" >&2
done
elapsed=$((SECONDS - start))
# A failed session can leave its agent and launcher running.
[ "$rc" = 0 ] || stop_sessions
if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
  die "the profiled job ran past --timeout $timeout_s s and was stopped (log: $log)"
fi
[ "$rc" = 0 ] || echo "profile-train: warning: the profiled job exited with status $rc (log: $log)" >&2

# ---- .qdstrm -> .nsys-rep -> NVTX CSVs -> summary ----------------------------
expect=0
if [ "$per_rank" = 1 ] && [ "$profiled" = all ]; then expect="$np"; fi
git_hash="$(git -C "$root" rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
meta="{\"command\": $(nsys_json_str "$(show "${run[@]}")"), \"trace\": $(nsys_json_str "$trace"),
  \"nsys_version\": $(nsys_json_str "$("$nsys" --version 2>/dev/null | head -n 1)"), \"ranks\": $np,
  \"per_rank\": $([ "$per_rank" = 1 ] && echo true || echo false), \"profiled_ranks\": $(nsys_json_str "$profiled"),
  \"host\": $(nsys_json_str "$(hostname)"),
  \"date\": $(nsys_json_str "$(date -u +%Y-%m-%dT%H:%M:%SZ)"), \"git_hash\": $(nsys_json_str "$git_hash"),
  \"exit_status\": $rc, \"start_retries\": $retries, \"wall_s\": $elapsed}"
if [ "$np" = 0 ]; then how="no launcher"; else how="$np ranks"; fi
if [ "$per_rank" = 1 ]; then how+=", one report per rank"; fi
if [ "$profiled" != all ]; then how+=" (ranks $profiled)"; fi
header="# $(show "${cmd[@]}")
# nsys --trace=$trace, $how, ${elapsed} s under nsys"
nsys_summarize "$out" "$name" "$ref" "$meta" "$expect" "$keep_qdstrm" "$header" || die "no summary (log: $log)"
echo "profile-train: reports and summary in $out"
exit "$rc"
