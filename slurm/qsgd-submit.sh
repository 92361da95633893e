#!/usr/bin/env bash
# Submits a QSGD scaling sweep to Slurm: for every GPU count K of the sweep,
# one job array of slurm/qsgd-array.sbatch whose tasks are the sweep's
# configurations (model x strategy x bit width), then a collect job that runs
# after all of them. Runs already complete in the sweep directory are not
# submitted again. slurm/README.md explains the whole workflow.
#
# usage: slurm/qsgd-submit.sh [options]
#   --sweep FILE          sweep spec (slurm/sweeps/default.conf)
#   --site FILE           site file: partition, account, constraint, MPI plugin,
#                         GPU request, binding, site environment (modules) of
#                         one cluster (slurm/sites/*.conf); options given on the
#                         command line override it
#   --out DIR             sweep directory (results/slurm/<name>); must be on a
#                         file system the compute nodes share
#   --gpus LIST           GPU counts K, e.g. 1,2,4,8,16 (spec: gpus)
#   --gpus-per-node G     GPUs per node (spec: gpus_per_node); K <= G runs on
#                         one node, larger K on K/G nodes of G
#   --shape K=NxG         nodes x GPUs per node for one K (repeatable), e.g. 16=4x4
#   --gpu-request FORM    how GPUs are asked for: gpus-per-node (default:
#                         --gpus-per-node=G) or gres (--gres=gpu:G, the form
#                         some sites document), on sbatch and srun alike
#   --cpu                 CPU mode: no GPU requests, one rank per "GPU" slot,
#                         --overcommit (more ranks than cores is allowed)
#   --mpi TYPE            srun --mpi plugin (pmix, pmi2, pmix_v4, ... as the site
#                         uses; default: none given, the site's MpiDefault)
#   --train PATH          qsgd-train binary (build/release/benchmarks/qsgd-train)
#   --site-env FILE       sourced by every job before it runs (slurm/site-env.sh)
#   --gpu-bind SPEC       srun --gpu-bind (single:1: each rank its nearest GPU)
#   --cpu-bind SPEC       srun --cpu-bind (cores; in CPU mode the site's default)
#   --cpus-per-task N     CPU cores per rank (site default if not given)
#   --time T              time limit per array task (spec: time)
#   --signal-before S     SIGUSR1 to each array task S seconds before its time
#                         limit (sbatch --signal=B:USR1@S; default 120; 0 =
#                         none): its ranks checkpoint after the current step
#                         and the task requeues itself and resumes
#   --no-requeue          at the signal, checkpoint and stop; the next
#                         submission (or rerun-K<K>.sh) resumes the run
#   --checkpoint-every N  also checkpoint every N steps (spec: checkpoint_every;
#                         default 0: at epoch ends and at the signal), which
#                         bounds the work a node failure or hard kill loses
#   --partition P  --account A  --qos Q
#   --sbatch-arg ARG      extra sbatch option for every job: the arrays and the
#                         collect job (repeatable; e.g. a constraint -C gpu)
#   --max-parallel N      at most N tasks of one array at a time (--array=...%N)
#   --per-k               one allocation per K instead of a job array: the same
#                         nodes run the exchange benchmark, then every
#                         configuration one after the other
#                         (slurm/qsgd-allocation.sbatch); --time is then the
#                         allocation's limit (default: spec time x runs)
#   --bench PATH          qsgd-bench-exchange for --per-k (default: next to --train)
#   --bench-args ARGS     its options, word-split (default: -b 4M -e 64M
#                         --transports ring --codecs CODEC of the spec)
#   --no-baseline         --per-k without the exchange benchmark
#   --nsys RANKS          profile these ranks of every run with Nsight Systems
#                         (0, 0,3, 0-3 or all; the others run without nsys):
#                         one report per rank and an NVTX summary per attempt
#                         in SWEEP/profiles/<id>_K<K>/job<id>-r<restart>/
#   --nsys-trace LIST     nsys --trace (default cuda,nvtx,mpi,osrt; in CPU mode
#                         nvtx,mpi,osrt)
#   --nsys-steps A:B      record only global steps A..B-1 (qsgd-train
#                         --profile-steps: no start-up or evaluation)
#   --nsys-args ARGS      more `nsys profile` options, word-split
#   --no-collect          do not submit the collect job (by default one is
#                         submitted every time, after every task of the sweep
#                         that is queued or running, this submission's and
#                         earlier ones', or at once when none is)
#   --dry-run             print the exact sbatch and srun commands; submit,
#                         create and query nothing
#   -h, --help
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/.." && pwd)"
prog="qsgd-submit"

die() { echo "$prog: error: $*" >&2; exit 2; }
# Absolute path without requiring that it exist (realpath -m).
abspath() { realpath -m -- "$1"; }

sweep_file="$here/sweeps/default.conf"
out=""
gpus_opt=""
gpn_opt=""
declare -A shape=()
mode="gpu"
mpi=""
train="$repo/build/release/benchmarks/qsgd-train"
# Site settings: empty until the command line or the site file sets them;
# the defaults come after both are read.
site_file=""
site_env=""
gpu_bind=""
gpu_request=""
cpu_bind=""
cpus_per_task=""
time_opt=""
partition=""
account=""
qos=""
constraint=""
signal_before=""
requeue=""
checkpoint_every=""
extra_sbatch=()
max_parallel=""
per_k=0
bench=""
bench_args=""
baseline=1
collect=1
dry_run=0
nsys_ranks="" nsys_trace="" nsys_steps="" nsys_args=""

need() { [ $# -ge 2 ] && [ -n "$2" ] || die "$1 needs a value"; }
while [ $# -gt 0 ]; do
  # --option=value is --option value (--sbatch-arg=--hold: the value may start with --)
  case "$1" in --*=*) set -- "${1%%=*}" "${1#*=}" "${@:2}" ;; esac
  case "$1" in
    --sweep) need "$@"; sweep_file="$2"; shift ;;
    --site) need "$@"; site_file="$2"; shift ;;
    --out) need "$@"; out="$2"; shift ;;
    --gpus) need "$@"; gpus_opt="${2//,/ }"; shift ;;
    --gpus-per-node) need "$@"; gpn_opt="$2"; shift ;;
    --shape)
      need "$@"
      [[ "$2" =~ ^([0-9]+)=([0-9]+)x([0-9]+)$ ]] || die "--shape expects K=NODESxGPUS, e.g. 16=2x8, got '$2'"
      shape[${BASH_REMATCH[1]}]="${BASH_REMATCH[2]} ${BASH_REMATCH[3]}"
      shift ;;
    --cpu) mode="cpu" ;;
    --mpi) need "$@"; mpi="$2"; shift ;;
    --train) need "$@"; train="$2"; shift ;;
    --site-env) need "$@"; site_env="$2"; shift ;;
    --gpu-bind) need "$@"; gpu_bind="$2"; shift ;;
    --gpu-request) need "$@"; gpu_request="$2"; shift ;;
    --cpu-bind) need "$@"; cpu_bind="$2"; shift ;;
    --cpus-per-task) need "$@"; cpus_per_task="$2"; shift ;;
    --time) need "$@"; time_opt="$2"; shift ;;
    --partition) need "$@"; partition="$2"; shift ;;
    --account) need "$@"; account="$2"; shift ;;
    --qos) need "$@"; qos="$2"; shift ;;
    --sbatch-arg) need "$@"; extra_sbatch+=("$2"); shift ;;
    --signal-before) need "$@"; signal_before="$2"; shift ;;
    --no-requeue) requeue=0 ;;
    --checkpoint-every) need "$@"; checkpoint_every="$2"; shift ;;
    --max-parallel) need "$@"; max_parallel="$2"; shift ;;
    --per-k) per_k=1 ;;
    --bench) need "$@"; bench="$2"; shift ;;
    --bench-args) need "$@"; bench_args="$2"; shift ;;
    --no-baseline) baseline=0 ;;
    --no-collect) collect=0 ;;
    --nsys) need "$@"; nsys_ranks="$2"; shift ;;
    --nsys-trace) need "$@"; nsys_trace="$2"; shift ;;
    --nsys-steps) need "$@"; nsys_steps="$2"; shift ;;
    --nsys-args) need "$@"; nsys_args="$2"; shift ;;
    --dry-run) dry_run=1 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) die "unknown option '$1' (see --help)" ;;
  esac
  shift
done

# ---- "key = value" files, '#' comments: the sweep spec and the site file ----
read_conf() {  # read_conf FILE ARRAY: fills the associative array ARRAY
  local -n into="$2"
  local line lineno=0
  while IFS= read -r line || [ -n "$line" ]; do
    lineno=$((lineno + 1))
    line="${line%%#*}"
    [[ "$line" =~ ^[[:space:]]*$ ]] && continue
    [[ "$line" =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_.-]*)[[:space:]]*=[[:space:]]*(.*[^[:space:]])?[[:space:]]*$ ]] ||
      die "$1:$lineno: expected 'key = value'"
    into[${BASH_REMATCH[1]}]="${BASH_REMATCH[2]}"
  done <"$1"
}
[ -f "$sweep_file" ] || die "sweep spec '$sweep_file' not found"
declare -A spec=()
read_conf "$sweep_file" spec
for key in "${!spec[@]}"; do
  case "$key" in
    name|models|strategies|bits|codec|powersgd_ranks|gpus|gpus_per_node|time|checkpoint_every|train_args|args.*) ;;
    *) die "$sweep_file: unknown key '$key'" ;;
  esac
done

# The site file (slurm/README.md, "Site files"): one cluster's settings.
# Command-line options win over it, and it wins over the sweep spec's
# gpus_per_node (a property of the cluster's nodes).
declare -A site_conf=()
site_sbatch=()
if [ -n "$site_file" ]; then
  [ -f "$site_file" ] || die "site file '$site_file' not found"
  read_conf "$site_file" site_conf
  site_dir="$(cd "$(dirname "$site_file")" && pwd)"
  for key in "${!site_conf[@]}"; do
    val="${site_conf[$key]}"
    case "$key" in
      partition) partition="${partition:-$val}" ;;
      account) account="${account:-$val}" ;;
      qos) qos="${qos:-$val}" ;;
      constraint) constraint="$val" ;;
      mpi) mpi="${mpi:-$val}" ;;
      gpu_request) gpu_request="${gpu_request:-$val}" ;;
      gpus_per_node) gpn_opt="${gpn_opt:-$val}" ;;
      gpu_bind) gpu_bind="${gpu_bind:-$val}" ;;
      cpu_bind) cpu_bind="${cpu_bind:-$val}" ;;
      cpus_per_task) cpus_per_task="${cpus_per_task:-$val}" ;;
      signal_before) signal_before="${signal_before:-$val}" ;;
      requeue)
        case "$val" in yes|no) ;; *) die "$site_file: requeue must be yes or no, got '$val'" ;; esac
        [ -n "$requeue" ] || { [ "$val" = yes ] && requeue=1 || requeue=0; } ;;
      site_env)  # relative to the site file's directory
        if [ -z "$site_env" ]; then
          case "$val" in /*) site_env="$val" ;; *) site_env="$site_dir/$val" ;; esac
        fi ;;
      sbatch_args) read -ra site_sbatch <<<"$val" ;;
      *) die "$site_file: unknown key '$key'" ;;
    esac
  done
fi
# The site file's sbatch options first: the command line's come later and win.
extra_sbatch=("${site_sbatch[@]}" "${extra_sbatch[@]}")
site_env="${site_env:-$here/site-env.sh}"
gpu_bind="${gpu_bind:-single:1}"
gpu_request="${gpu_request:-gpus-per-node}"
[ "$gpu_request" = gpus-per-node ] || [ "$gpu_request" = gres ] ||
  die "the GPU request must be gpus-per-node or gres, got '$gpu_request'"
signal_before="${signal_before:-120}"
requeue="${requeue:-1}"
checkpoint_every="${checkpoint_every:-${spec[checkpoint_every]:-0}}"
[[ "$signal_before" =~ ^[0-9]+$ ]] && [ "$signal_before" -le 65535 ] ||
  die "--signal-before must be 0 to 65535 seconds, got '$signal_before'"
[[ "$checkpoint_every" =~ ^[0-9]+$ ]] || die "--checkpoint-every must be a number of steps, got '$checkpoint_every'"

name="${spec[name]:-$(basename "$sweep_file" .conf)}"
[[ "$name" =~ ^[A-Za-z0-9_.-]+$ ]] || die "sweep name '$name' may hold only letters, digits, '.', '_' and '-'"
read -ra models <<<"${spec[models]:-mlp}"
read -ra strategies <<<"${spec[strategies]:-allreduce}"
read -ra bits <<<"${spec[bits]:-4}"
read -ra psgd_ranks <<<"${spec[powersgd_ranks]:-4}"
codec="${spec[codec]:-elias-dense}"
read -ra gpus <<<"${gpus_opt:-${spec[gpus]:-1}}"
gpn="${gpn_opt:-${spec[gpus_per_node]:-8}}"
time_limit="${time_opt:-${spec[time]:-01:00:00}}"
read -ra train_args <<<"${spec[train_args]:-}"
[ -n "$cpu_bind" ] || [ "$mode" = cpu ] || cpu_bind="cores"

is_uint() { [[ "$1" =~ ^[1-9][0-9]*$ ]]; }
is_uint "$gpn" || die "gpus per node must be a positive integer, got '$gpn'"
[ -z "$max_parallel" ] || is_uint "$max_parallel" || die "--max-parallel must be a positive integer"
[ -z "$cpus_per_task" ] || is_uint "$cpus_per_task" || die "--cpus-per-task must be a positive integer"
for k in "${gpus[@]}"; do is_uint "$k" || die "GPU count must be a positive integer, got '$k'"; done
for b in "${bits[@]}"; do is_uint "$b" || die "bit width must be a positive integer, got '$b'"; done
for r in "${psgd_ranks[@]}"; do is_uint "$r" || die "powersgd rank must be a positive integer, got '$r'"; done

if [ -n "$nsys_ranks" ]; then
  nsys_rank="$repo/profiles/nsys/nsys-rank.sh"
  SLURM_PROCID=0 "$nsys_rank" --rank-var SLURM_PROCID --ranks "$nsys_ranks" --test 2>/dev/null || [ $? = 1 ] ||
    die "--nsys: '$nsys_ranks' is not a list of ranks (0, 0,3, 0-3 or all)"
  [ -n "$nsys_trace" ] || { [ "$mode" = cpu ] && nsys_trace=nvtx,mpi,osrt || nsys_trace=cuda,nvtx,mpi,osrt; }
  [[ "$nsys_trace" =~ ^[a-z0-9_-]+(,[a-z0-9_-]+)*$ ]] || die "--nsys-trace must be a comma-separated list of nsys APIs, got '$nsys_trace'"
  if [ -n "$nsys_steps" ]; then
    [[ "$nsys_steps" =~ ^([0-9]+):([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -lt "${BASH_REMATCH[2]}" ] ||
      die "--nsys-steps must be A:B with A < B (global steps A..B-1), got '$nsys_steps'"
  fi
elif [ -n "$nsys_trace$nsys_steps$nsys_args" ]; then
  die "--nsys-trace, --nsys-steps and --nsys-args need --nsys RANKS"
fi
out="$(abspath "${out:-$repo/results/slurm/$name}")"
train="$(abspath "$train")"
if [ "$per_k" = 1 ] && [ "$baseline" = 1 ]; then
  bench="$(abspath "${bench:-$(dirname "$train")/qsgd-bench-exchange}")"
  bench_args="${bench_args:--b 4M -e 64M --transports ring --codecs $codec}"
  if [ ! -x "$bench" ]; then
    [ "$dry_run" = 1 ] || die "$bench is not an executable (build qsgd-bench-exchange, pass --bench PATH, or --no-baseline)"
    echo "# $prog: note: $bench does not exist yet" >&2
  fi
fi

# Slurm time limits ("M", "M:S", "H:M:S", "D-H", "D-H:M", "D-H:M:S") in
# seconds, and back as D-HH:MM:SS.
time_seconds() {
  local t="$1" d=0 h=0 m=0 sec=0
  if [[ "$t" =~ ^([0-9]+)-([0-9]+)(:([0-9]+)(:([0-9]+))?)?$ ]]; then
    d=${BASH_REMATCH[1]} h=${BASH_REMATCH[2]} m=${BASH_REMATCH[4]:-0} sec=${BASH_REMATCH[6]:-0}
  elif [[ "$t" =~ ^([0-9]+):([0-9]+):([0-9]+)$ ]]; then
    h=${BASH_REMATCH[1]} m=${BASH_REMATCH[2]} sec=${BASH_REMATCH[3]}
  elif [[ "$t" =~ ^([0-9]+)(:([0-9]+))?$ ]]; then
    m=${BASH_REMATCH[1]} sec=${BASH_REMATCH[3]:-0}
  else
    die "time limit '$t' is not in a Slurm format (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S)"
  fi
  echo $(((10#$d * 24 + 10#$h) * 3600 + 10#$m * 60 + 10#$sec))
}
slurm_time() { printf '%d-%02d:%02d:%02d' $(($1 / 86400)) $(($1 % 86400 / 3600)) $(($1 % 3600 / 60)) $(($1 % 60)); }
limit_s="$(time_seconds "$time_limit")" || exit 2
# Slurm sends the signal up to 60 s before the lead asked for: a lead of half
# the limit or more would stop every run as it starts.
[ "$signal_before" = 0 ] || [ $((2 * signal_before)) -lt "$limit_s" ] ||
  die "--signal-before $signal_before s is not below half the time limit ($time_limit): every run would be stopped as it starts"
if [ -n "$site_env" ]; then
  site_env="$(abspath "$site_env")"
  if [ ! -f "$site_env" ]; then
    [ "$dry_run" = 1 ] || die "site environment '$site_env' not found"
    echo "# $prog: note: $site_env does not exist yet" >&2
  fi
fi
if [ ! -x "$train" ]; then
  [ "$dry_run" = 1 ] || die "$train is not an executable (build it, or pass --train PATH)"
  echo "# $prog: note: $train does not exist yet" >&2
elif [ "$mode" = gpu ]; then
  # GPU jobs hold GPUs: the trainer must run on one. Ask the binary which
  # Kokkos backends it was built with (qsgd-train --version).
  version="$("$train" --version 2>/dev/null || true)"
  case "${version##*Kokkos }" in  # "3.4.1 CUDA,SERIAL)": the backends
    *CUDA*|*HIP*|*SYCL*) ;;
    *)
      msg="$train is not built for a GPU (its --version says: ${version:-nothing}); build it with a Kokkos GPU backend, or submit with --cpu"
      [ "$dry_run" = 1 ] || die "$msg"
      echo "# $prog: note: $msg" >&2 ;;
  esac
fi

# ---- configurations: one manifest line per array index -----------------------
# index <TAB> run id <TAB> qsgd-train arguments. The run id names the trace
# (<id>_K<K>.h5), so a re-submission recognises finished runs by name alone.
manifest_text=""
n_cfg=0
add_cfg() {  # add_cfg ID ARGS...
  local id="$1"; shift
  manifest_text+="$n_cfg"$'\t'"$id"$'\t'"$*"$'\n'
  n_cfg=$((n_cfg + 1))
}
for model in "${models[@]}"; do
  read -ra margs <<<"${spec[args.$model]:-}"
  for strategy in "${strategies[@]}"; do
    case "$strategy" in
      allreduce) add_cfg "${model}_allreduce_fp32" --model "$model" "${margs[@]}" --strategy allreduce "${train_args[@]}" ;;
      allreduce16) add_cfg "${model}_allreduce16_bf16" --model "$model" "${margs[@]}" --strategy allreduce16 --codec bf16 "${train_args[@]}" ;;
      allgather|param-server|scatter-reduce|shared-scale)
        for b in "${bits[@]}"; do
          add_cfg "${model}_${strategy}_${codec}-${b}bit" --model "$model" "${margs[@]}" --strategy "$strategy" \
            --codec "$codec" --bits "$b" "${train_args[@]}"
        done ;;
      powersgd)  # as published (and as PyTorch's hook runs it): with its error feedback
        for r in "${psgd_ranks[@]}"; do
          add_cfg "${model}_powersgd_r${r}-ef" --model "$model" "${margs[@]}" --strategy powersgd --powersgd-rank "$r" \
            --error-feedback ef-unscaled "${train_args[@]}"
        done ;;
      *) die "unknown strategy '$strategy'" ;;
    esac
  done
done
[ "$n_cfg" -gt 0 ] || die "the sweep has no configurations"
manifest_hash="$(printf '%s' "$manifest_text" | sha1sum | cut -c1-10)"
manifest="$out/manifest-$manifest_hash.tsv"

# ---- layout of each K: nodes x ranks per node --------------------------------
layout() {  # layout K: sets nodes and per_node
  local k="$1"
  if [ -n "${shape[$k]:-}" ]; then
    read -r nodes per_node <<<"${shape[$k]}"
    [ $((nodes * per_node)) -eq "$k" ] || die "--shape $k=${nodes}x$per_node: $nodes x $per_node is not $k"
  elif [ "$k" -le "$gpn" ]; then
    nodes=1 per_node="$k"
  elif [ $((k % gpn)) -eq 0 ]; then
    nodes=$((k / gpn)) per_node="$gpn"
  else
    die "K=$k is not a multiple of $gpn GPUs per node (give --shape $k=NODESxGPUS)"
  fi
}
for k in "${gpus[@]}"; do layout "$k"; done  # every K valid before anything is submitted

trace_complete() {  # trace_complete FILE: its root attribute complete == "true"
  [ -f "$1" ] || return 1
  if command -v h5dump >/dev/null 2>&1; then
    h5dump -a /complete "$1" 2>/dev/null | grep -q '(0): "true"'
  else
    "${QSGD_PYTHON:-python3}" -c 'import sys, h5py
v = h5py.File(sys.argv[1], "r").attrs.get("complete", b"")
sys.exit(0 if (v.decode() if isinstance(v, bytes) else str(v)) == "true" else 1)' "$1" 2>/dev/null
  fi
}

# The site's environment here too: h5dump (or h5py) to recognise finished runs,
# and sbatch's default --export=ALL hands it on to the jobs, which source it
# again. Not in a dry run, which runs nothing.
if [ "$dry_run" = 0 ] && [ -n "$site_env" ]; then
  set +u
  # shellcheck disable=SC1090
  source "$site_env"
  set -u
fi

# Array tasks of this sweep already queued or running (not re-submitted),
# and their array job ids (the collect job waits for them too).
# A queued or running allocation of a K (--per-k) holds every unfinished
# configuration of that K.
declare -A active=() active_job=() active_alloc=()
if [ "$dry_run" = 0 ]; then
  command -v sbatch >/dev/null || die "sbatch not found (is Slurm's client in PATH? for a preview use --dry-run)"
  while read -r jname task array_id; do
    if [[ "$task" =~ ^[0-9]+$ ]]; then
      active["$jname/$task"]=1
      [[ "$array_id" =~ ^[0-9]+$ ]] && active_job["$jname/$task"]="$array_id"
    elif [[ "$array_id" =~ ^[0-9]+$ ]]; then
      active_alloc["$jname"]="$array_id"
    fi
  done < <(squeue -h -r -u "$(id -un)" -o '%j %K %A' 2>/dev/null || true)
fi

# Shell quoting for printed commands: plain words stay as they are, anything
# else is single-quoted (printf %q would also escape the commas in 784,64,10).
q() {
  if [[ "$1" =~ ^[A-Za-z0-9_./=:,%+@-]+$ ]]; then printf '%s' "$1"
  else printf "'%s'" "${1//\'/\'\\\'\'}"; fi
}
join_q() { local s="" a; for a in "$@"; do s+="${s:+ }$(q "$a")"; done; printf '%s' "$s"; }

if [ "$dry_run" = 0 ]; then
  mkdir -p "$out/traces" "$out/logs"
  if [ ! -f "$manifest" ]; then
    printf '%s' "$manifest_text" >"$manifest.tmp.$$"
    mv -f "$manifest.tmp.$$" "$manifest"
  fi
fi

mpi_note="srun's default MPI plugin"
[ -z "$mpi" ] || mpi_note="--mpi=$mpi"
echo "# $prog: sweep '$name': $n_cfg configurations x K in {${gpus[*]}} ($mode mode, $mpi_note)"
echo "# sweep directory: $out"
[ "$dry_run" = 0 ] || echo "# dry run: nothing is submitted, created or queried"

# Where and under which account every job runs.
site=()
[ -z "$partition" ] || site+=(--partition="$partition")
[ -z "$account" ] || site+=(--account="$account")
[ -z "$qos" ] || site+=(--qos="$qos")
[ -z "$constraint" ] || site+=(--constraint="$constraint")

job_ids=()      # the arrays this submission queues
waiting_ids=()  # arrays of earlier submissions with tasks still queued or running
for k in "${gpus[@]}"; do
  layout "$k"
  jname="qsgd-$name-K$k"
  todo=()
  n_done=0
  n_active=0
  while IFS=$'\t' read -r idx id _; do
    trace="$out/traces/${id}_K$k.h5"
    if trace_complete "$trace"; then
      n_done=$((n_done + 1))
    elif [ -n "${active_alloc[$jname]:-}" ]; then
      n_active=$((n_active + 1))
      waiting_ids+=("${active_alloc[$jname]}")
    elif [ -n "${active[$jname/$idx]:-}" ]; then
      n_active=$((n_active + 1))
      [ -z "${active_job[$jname/$idx]:-}" ] || waiting_ids+=("${active_job[$jname/$idx]}")
    else
      todo+=("$idx")
    fi
  done <<<"${manifest_text%$'\n'}"

  res=(--nodes="$nodes" --ntasks-per-node="$per_node")
  if [ "$mode" = gpu ]; then
    if [ "$gpu_request" = gres ]; then res+=(--gres="gpu:$per_node"); else res+=(--gpus-per-node="$per_node"); fi
  else
    res+=(--overcommit)
  fi
  [ -z "$cpus_per_task" ] || res+=(--cpus-per-task="$cpus_per_task")
  task_args=(--manifest "$manifest" --train "$train" --mode "$mode"
    --ranks "$k" --nodes "$nodes" --per-node "$per_node")
  [ -z "$mpi" ] || task_args+=(--mpi "$mpi")
  [ -z "$cpu_bind" ] || task_args+=(--cpu-bind "$cpu_bind")
  [ "$mode" = cpu ] || task_args+=(--gpu-bind "$gpu_bind" --gpu-request "$gpu_request")
  [ -z "$cpus_per_task" ] || task_args+=(--cpus-per-task "$cpus_per_task")
  [ -z "$site_env" ] || task_args+=(--site-env "$site_env")
  [ "$checkpoint_every" = 0 ] || task_args+=(--checkpoint-every "$checkpoint_every")
  if [ -n "$nsys_ranks" ]; then
    task_args+=(--nsys "$nsys_ranks" --nsys-tools "$repo/profiles/nsys" --nsys-trace "$nsys_trace")
    [ -z "$nsys_steps" ] || task_args+=(--nsys-steps "$nsys_steps")
    [ -z "$nsys_args" ] || task_args+=(--nsys-args "$nsys_args")
  fi
  # The checkpoint signal ahead of the time limit, to the batch script (B:),
  # which forwards it to srun; the task then requeues itself.
  restart=()
  if [ "$signal_before" -gt 0 ]; then
    restart+=(--signal="B:USR1@$signal_before")
    # A requeued task appends to its log instead of truncating it.
    if [ "$requeue" = 1 ]; then restart+=(--requeue --open-mode=append); task_args+=(--requeue); fi
  fi
  # Everything but --array: the same command re-runs any single task.
  base=(sbatch --parsable --job-name="$jname" "${res[@]}" --time="$time_limit" "${restart[@]}" "${site[@]}"
    "${extra_sbatch[@]}" --output="$out/logs/K$k-%A_%a.out" "$here/qsgd-array.sbatch" "${task_args[@]}")

  echo "# K=$k: $nodes node(s) x $per_node $( [ "$mode" = gpu ] && echo GPUs || echo ranks ), $n_cfg runs: $n_done complete, $n_active queued or running, ${#todo[@]} to submit"
  if [ -n "$nsys_ranks" ]; then
    n_prof=0
    for ((r = 0; r < k; r++)); do
      ! SLURM_PROCID=$r "$nsys_rank" --rank-var SLURM_PROCID --ranks "$nsys_ranks" --test || n_prof=$((n_prof + 1))
    done
    if [ "$n_prof" = 0 ]; then echo "# K=$k: note: no rank of $k is in --nsys $nsys_ranks: these runs are not profiled"
    else echo "# K=$k: nsys profiles $n_prof of $k ranks (--nsys $nsys_ranks)"; fi
  fi
  if [ "$dry_run" = 0 ]; then
    rerun="$out/rerun-K$k.sh"
    {
      echo '#!/bin/sh'
      echo "# Re-runs tasks of the K=$k array of sweep '$name' (indices: $(basename "$manifest"))."
      echo "# usage: $(basename "$rerun") INDEX[,INDEX...]   e.g. 3  or  1,4-6"
      echo 'exec '"$(join_q "${base[@]:0:2}")"' --array="${1:?usage: '"$(basename "$rerun")"' INDEX[,INDEX...]}" '"$(join_q "${base[@]:2}")"
    } >"$rerun.tmp.$$"
    chmod +x "$rerun.tmp.$$"
    mv -f "$rerun.tmp.$$" "$rerun"
    # runs.tsv: every run the sweep expects (K, index, trace), for qsgd-collect.sh.
    while IFS=$'\t' read -r idx id _; do
      printf '%s\t%s\t%s\t%s\n' "$k" "$idx" "$(basename "$manifest")" "traces/${id}_K$k.h5"
    done <<<"${manifest_text%$'\n'}" >>"$out/runs.tsv"
    sort -u -o "$out/runs.tsv" "$out/runs.tsv"
  fi
  if [ "${#todo[@]}" -eq 0 ]; then
    echo "# K=$k: skip, nothing to run"
    continue
  fi
  spec_array="$(IFS=,; echo "${todo[*]}")"
  # Compress consecutive indices into ranges (0,1,2,5 -> 0-2,5).
  spec_array="$(awk -v s="$spec_array" 'BEGIN { n = split(s, a, ","); o = ""; i = 1
    while (i <= n) { j = i; while (j < n && a[j+1] == a[j] + 1) j++
      o = o (o == "" ? "" : ",") (j > i ? a[i] "-" a[j] : a[i]); i = j + 1 }
    print o }')"
  [ -z "$max_parallel" ] || spec_array+="%$max_parallel"
  cmd=("${base[@]:0:2}" --array="$spec_array" "${base[@]:2}")
  if [ "$per_k" = 1 ]; then
    # One job for this K: the array's resources, a time limit for all its
    # runs, and the allocation script around the array task's options.
    if [ -n "$time_opt" ]; then alloc_time="$time_opt"
    else alloc_time="$(slurm_time $(($(time_seconds "$time_limit") * ${#todo[@]})))"; fi
    alloc_args=(--array-script "$here/qsgd-array.sbatch" --indices "$(IFS=,; echo "${todo[*]}")")
    [ "$baseline" = 0 ] || alloc_args+=(--bench "$bench" --bench-args "$bench_args")
    cmd=(sbatch --parsable --job-name="$jname" "${res[@]}" --time="$alloc_time" "${restart[@]}" "${site[@]}"
      "${extra_sbatch[@]}" --output="$out/logs/K$k-alloc-%j.out" "$here/qsgd-allocation.sbatch" "${alloc_args[@]}"
      -- "${task_args[@]}")
  fi
  join_q "${cmd[@]}"; echo
  if [ "$dry_run" = 1 ]; then
    for idx in "${todo[@]}"; do
      echo "#   task $idx: $(SLURM_ARRAY_TASK_ID="$idx" QSGD_MANIFEST_TEXT="$manifest_text" bash "$here/qsgd-array.sbatch" --print "${task_args[@]}")"
    done
    job_ids+=("JOB_K$k")
  else
    id="$("${cmd[@]}")"
    id="${id%%;*}"
    [[ "$id" =~ ^[0-9]+$ ]] || die "sbatch printed '$id', not a job id"
    job_ids+=("$id")
    echo "# K=$k: submitted job $id; re-run one task alone: $out/rerun-K$k.sh INDEX"
    printf '%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$id" "$(join_q "${cmd[@]}")" >>"$out/submit.log"
  fi
done

if [ "$collect" = 1 ]; then
  # After every array of the sweep with a task queued or running: this
  # submission's (dry run: JOB_K<K> stands for each) and earlier ones'; and
  # singleton: one collect job of the sweep at a time (they share a name), so
  # that two never write the summary and plots at once.
  dep=""
  for id in $(printf '%s\n' "${job_ids[@]}" "${waiting_ids[@]}" | awk 'NF && !seen[$0]++'); do
    dep+="${dep:+:}$id"
  done
  dep="${dep:+afterany:$dep,}singleton"
  [ "${#job_ids[@]}" -gt 0 ] || [ "${#waiting_ids[@]}" -gt 0 ] ||
    echo "# collect: nothing is queued or running; the collect job runs now"
  wrap="$(join_q "$here/qsgd-collect.sh" ${site_env:+--site-env "$site_env"} "$out")"
  cmd=(sbatch --parsable --job-name="qsgd-$name-collect" --dependency="$dep" --nodes=1 --ntasks=1
    --time=00:30:00 "${site[@]}" "${extra_sbatch[@]}" --output="$out/logs/collect-%j.out" --wrap="$wrap")
  join_q "${cmd[@]}"; echo
  if [ "$dry_run" = 0 ]; then
    id="$("${cmd[@]}")"
    id="${id%%;*}"
    [[ "$id" =~ ^[0-9]+$ ]] || die "sbatch printed '$id', not a job id"
    echo "# collect: job $id writes $out/summary.txt, summary.json and plots/"
    printf '%s\t%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$id" "$(join_q "${cmd[@]}")" >>"$out/submit.log"
  fi
fi
