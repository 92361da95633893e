# shellcheck shell=bash
# Reading qsgd-train traces from shell tests with h5dump (docs/traces.md):
# sourced by tests/train/common.sh and the Slurm test.
attr() {  # attr FILE NAME -> value of a string attribute of the root group
  h5dump -a "/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): "\(.*\)"$/\1/p'
}
int_attr() {  # int_attr FILE PATH -> value of an integer attribute (PATH: e.g. attempts/1/first_step)
  h5dump -a "/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): \(-\{0,1\}[0-9][0-9]*\)$/\1/p'
}
attempts_of() {  # attempts_of FILE -> first_step of /attempts/0, /attempts/1, ..., one per line
  local i=0 v
  while v="$(int_attr "$1" "attempts/$i/first_step")" && [ -n "$v" ]; do
    echo "$v"
    i=$((i + 1))
  done
}
is_complete() {  # is_complete FILE: the run finished (root attribute complete == "true")
  [ "$(attr "$1" complete)" = true ]
}
steps_in() {  # steps_in FILE -> number of step rows
  h5dump -H -d /steps/step "$1" 2>/dev/null | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p'
}
# A running, killed or lost run's trace is FILE and FILE.journal (docs/traces.md,
# "Journal"): qsgd-trace reads both ($QSGD_TRACE_TOOL: the test sets it to the
# qsgd-trace beside its qsgd-train).
trace_tool() {  # trace_tool ARGS -> qsgd-trace ARGS
  "${QSGD_TRACE_TOOL:?the test sets QSGD_TRACE_TOOL to qsgd-trace}" "$@"
}
live_steps() {  # live_steps FILE -> steps FILE and its journal hold together
  trace_tool steps "$1" 2>/dev/null
}
data_of() {  # data_of FILE DATASET -> the dataset's values, one per line
  h5dump -d "$2" "$1" 2>/dev/null | sed -n '/^ *DATA {/,/}/{p;/}/q}' | sed '1d;$d' \
    | sed 's/([0-9,]*)://g' | tr ',' '\n' | sed 's/^ *//;/^$/d'
}
