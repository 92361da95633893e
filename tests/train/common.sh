# Shared by the qsgd-train tests: a tiny, fast, deterministic configuration.
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/openmpi-env.sh"
TINY=(--model mlp --mlp-widths 784,64,64,10 --dataset teacher --teacher-samples 4096 --batch 32
      --eval-limit 256 --layer-filter 1000 --fusion-mb 1 --quiet)
fail() { echo "FAIL: $*" >&2; exit 1; }
attr() {  # attr FILE NAME -> value of a string attribute of the root group
  h5dump -a "/$2" "$1" 2>/dev/null | sed -n 's/^ *(0): "\(.*\)"$/\1/p'
}
steps_in() {  # steps_in FILE -> number of step rows
  h5dump -H -d /steps/step "$1" 2>/dev/null | sed -n 's/.*DATASPACE *SIMPLE { ( \([0-9]*\) ).*/\1/p'
}
data_of() {  # data_of FILE DATASET -> the dataset's values, one per line
  h5dump -d "$2" "$1" 2>/dev/null | sed -n '/^ *DATA {/,/}/{p;/}/q}' | sed '1d;$d' \
    | sed 's/([0-9,]*)://g' | tr ',' '\n' | sed 's/^ *//;/^$/d'
}
