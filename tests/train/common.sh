# Shared by the qsgd-train tests: a tiny, fast, deterministic configuration.
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/openmpi-env.sh"
TINY=(--model mlp --mlp-widths 784,64,64,10 --dataset teacher --teacher-samples 4096 --batch 32
      --eval-limit 256 --layer-filter 1000 --fusion-mb 1 --quiet)
fail() { echo "FAIL: $*" >&2; exit 1; }
expect() {  # expect CODE PATTERN CMD...
  local code=$1 pat=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  [ "$rc" = "$code" ] || fail "exit $rc (expected $code) from: $* :: $out"
  grep -q -- "$pat" <<< "$out" || fail "message lacks '$pat': $out"
}
. "$(dirname "${BASH_SOURCE[0]}")/../trace_query.sh"  # attr, is_complete, steps_in, data_of
