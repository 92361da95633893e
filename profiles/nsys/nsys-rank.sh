#!/usr/bin/env bash
# Runs one MPI rank under Nsight Systems or not, by its rank number: the
# launcher (mpirun, srun) starts this script as every rank's program.
#
#   nsys-rank.sh --rank-var VAR --ranks LIST|all --output PREFIX
#                [--session NAME] NSYS profile OPTIONS... -- PROGRAM [ARGS...]
#
# A rank whose number ($VAR: OMPI_COMM_WORLD_RANK under mpirun, SLURM_PROCID
# under srun) is in LIST (comma-separated numbers and ranges: 0,3 or 0-3,8)
# runs `NSYS profile OPTIONS... [--session-new=NAME-<rank>] -o PREFIX.<rank>
# PROGRAM ARGS`: one report per profiled rank, nsys on the launcher's CPUs and
# PROGRAM on the rank's own (taskset; see below). Every other rank runs
# PROGRAM ARGS as it is, without nsys' start-up and tracing cost.
#
#   nsys-rank.sh --rank-var VAR --ranks LIST --test
# runs nothing: exit status 0 when rank $VAR is in LIST, 1 when not, 2 when
# LIST is malformed.
# (profiles/nsys/profile-train.sh --per-rank --ranks, slurm/qsgd-submit.sh --nsys)
set -euo pipefail
die() { echo "nsys-rank: error: $*" >&2; exit 2; }
rank_var="" ranks="" prefix="" session="" test=0
while [ $# -gt 0 ]; do
  case "$1" in
    --rank-var) rank_var="${2:-}"; shift 2 ;;
    --ranks) ranks="${2:-}"; shift 2 ;;
    --output) prefix="${2:-}"; shift 2 ;;
    --session) session="${2:-}"; shift 2 ;;
    --test) test=1; shift ;;
    *) break ;;
  esac
done
[ -n "$rank_var" ] && [ -n "$ranks" ] || die "--rank-var and --ranks are required"
nsys_cmd=()
if [ "$test" = 0 ]; then
  [ -n "$prefix" ] || die "--output is required"
  while [ $# -gt 0 ] && [ "$1" != -- ]; do nsys_cmd+=("$1"); shift; done
  [ $# -ge 2 ] || die "expected NSYS OPTIONS... -- PROGRAM [ARGS...]"
  shift
  [ "${#nsys_cmd[@]}" -gt 0 ] || die "no nsys command before --"
fi
rank="${!rank_var:-}"
[[ "$rank" =~ ^[0-9]+$ ]] || die "\$$rank_var is '${rank}', not a rank number (is this rank started by the launcher that sets it?)"

selected=0
if [ "$ranks" = all ]; then
  selected=1
else
  IFS=, read -r -a parts <<<"$ranks"
  for p in "${parts[@]}"; do
    if [[ "$p" =~ ^([0-9]+)-([0-9]+)$ ]]; then
      [ "$rank" -lt "${BASH_REMATCH[1]}" ] || [ "$rank" -gt "${BASH_REMATCH[2]}" ] || selected=1
    elif [[ "$p" =~ ^[0-9]+$ ]]; then
      [ "$rank" -ne "$p" ] || selected=1
    else
      die "--ranks: '$p' is not a rank or a range A-B"
    fi
  done
fi
if [ "$test" = 1 ]; then [ "$selected" = 1 ]; exit; fi
[ "$selected" = 1 ] || exec "$@"
[ -z "$session" ] || nsys_cmd+=("--session-new=$session-$rank")
# nsys and its agent run on every CPU the launcher's own process (this
# script's parent: mpirun's orted, slurmstepd) may use, and the program on
# the CPUs the launcher bound this rank to. mpirun binds each rank to a core:
# nsys and its agent bound to that one core with other load on the machine
# failed to start ("Connection to the Agent lost", 5 of 8 starts beside two
# low-priority busy loops; this way, 0 of 10; docs/profiling.md).
# QSGD_NSYS_KEEP_BINDING=1 keeps nsys on the rank's CPUs.
if [ "${QSGD_NSYS_KEEP_BINDING:-0}" != 1 ] && command -v taskset > /dev/null 2>&1; then
  bound="$(taskset -cp $$ 2> /dev/null | sed 's/.*: //')" || bound=""
  free="$(taskset -cp "$PPID" 2> /dev/null | sed 's/.*: //')" || free=""
  if [ -n "$bound" ] && [ -n "$free" ] && [ "$bound" != "$free" ] && taskset -c "$free" true 2> /dev/null; then
    exec taskset -c "$free" "${nsys_cmd[@]}" -o "$prefix.$rank" taskset -c "$bound" "$@"
  fi
fi
exec "${nsys_cmd[@]}" -o "$prefix.$rank" "$@"
