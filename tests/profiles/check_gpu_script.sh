#!/usr/bin/env bash
# The GPU node script, end to end on a CPU build (its dry run):
# profiles/gpu/package.sh packs BUILD, and the package's run.sh --quick
# --ranks 2 runs in a mount namespace where the system's Open MPI runtime
# (components, help files, orted, PMIx components) is hidden, as on a GPU node
# that has only the driver, and packs its results with --pack. Checks:
# run.sh exits 0; every kernel test passed
# (test_backends included); the kernel table lists every kernel with a
# fraction of the same-run copy; six complete traces (K = 1 and K = 2, fp32,
# 4-bit fixed, 4-bit rANS) that qsgd-summary reads; the nsys profile's
# summary names the trainer's step range. And that the hiding works: in the
# same namespace, the trainer without the package's runtime fails. --pack
# leaves at most 3 files, the archive holding every result. The kernels tier
# (package.sh --tier kernels) holds the kernel programs and no trainer, MPI
# runtime or cuBLAS; its archive and the checkout fit the transfer budget
# (package.sh --archive; a budget below them fails, naming the sizes); run as
# a GPU machine runs it (on-node.sh: unpack, run.sh --pack), it passes with
# the trainer said to be skipped and returns 4 files.
#
# usage: check_gpu_script.sh --repo DIR --build DIR --out DIR
# Needs root (mount namespaces), nsys and python3-h5py; a missing one fails.
set -euo pipefail
repo="" build="" out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repo) repo="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    *) echo "usage: $0 --repo DIR --build DIR --out DIR" >&2; exit 2 ;;
  esac
done
fail() { echo "check_gpu_script: FAIL: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "needs root: the dry run hides the system's MPI runtime in a mount namespace"
command -v nsys > /dev/null || fail "nsys not found (scripts/install-deps.sh --nsys)"
rm -rf "$out"
mkdir -p "$out"
pkg="$out/pkg" res="$out/results"
"$repo/profiles/gpu/package.sh" "$build" "$pkg" > "$out/package.log" 2>&1 || { cat "$out/package.log"; fail "package.sh"; }

# What a GPU node does not have: the MPI runtime the build was linked with
# (package.sh lists where it took it from).
[ -s "$pkg/ompi/SOURCES" ] || fail "package.sh wrote no ompi/SOURCES"
cat > "$out/hidden.sh" <<EOF
#!/usr/bin/env bash
# Runs "\$@" with the system's MPI runtime hidden (this mount namespace only).
set -euo pipefail
mkdir -p "$out/empty"
while read -r p; do
  if [ -d "\$p" ]; then mount --bind "$out/empty" "\$p"; else mount --bind /dev/null "\$p"; fi
done < "$pkg/ompi/SOURCES"
exec "\$@"
EOF
chmod +x "$out/hidden.sh"

# The hiding works: the trainer without the package's runtime cannot start.
if unshare -m "$out/hidden.sh" env LD_LIBRARY_PATH="$pkg/lib" "$pkg/bin/qsgd-train" --model mlp --dataset teacher \
     --mlp-widths 16,8,2 --teacher-samples 64 --max-steps 1 --quiet > "$out/unpackaged.log" 2>&1; then
  fail "qsgd-train started without the packaged MPI runtime: the namespace does not hide the system's"
fi
grep -qE 'opal_init|orte_init|ompi_rte_init|MPI_INIT' "$out/unpackaged.log" ||
  { cat "$out/unpackaged.log"; fail "qsgd-train without the packaged runtime failed, but not in MPI's start-up"; }

start=$SECONDS
unshare -m "$out/hidden.sh" "$pkg/run.sh" --quick --ranks 2 --pack "$out/back" "$res" > "$out/run.log" 2>&1 ||
  { tail -n 60 "$out/run.log"; fail "run.sh exited non-zero (its log: $out/run.log)"; }
echo "run.sh passed in $((SECONDS - start)) s"
# What comes back: the archive and summary.txt (no failures.txt: nothing failed), the archive the whole folder.
[ "$(ls "$out/back" | sort | tr '\n' ' ')" = "results.tar.xz summary.txt " ] || { ls -la "$out/back"; fail "--pack left other files"; }
mkdir -p "$out/unpacked"
tar -C "$out/unpacked" -xJf "$out/back/results.tar.xz" || fail "the packed results do not extract"
diff -r "$res" "$out/unpacked/results" > /dev/null || fail "the packed results differ from the folder"
cmp -s "$res/summary.txt" "$out/back/summary.txt" || fail "the summary beside the archive is not the kernel table"

for t in test_quantize test_codecs test_message test_stats test_backends; do
  grep -q '^\[  PASSED  \]' "$res/$t.log" || fail "$t did not pass"
done
grep -q '^device space ' "$res/test_backends.log" || fail "test_backends did not report the spaces it compared"
for k in "quantize + fixed-width encode" "decode-accumulate (fixed)" "quantize + rANS encode" "decode-accumulate (rANS)" \
         "quantize + Elias dense encode" "decode-accumulate (Elias dense)" "quantize alone" "CRC32C"; do
  line="$(grep -F "$k" "$res/summary.txt")" || fail "kernel table lacks '$k'"
  [[ "$line" =~ [0-9]+\.[0-9]+[[:space:]]+0\.[0-9]{3}|[0-9]+\.[0-9]+[[:space:]]+[1-9][0-9]*\.[0-9]{3} ]] ||
    fail "kernel table row without GB/s and a fraction of copy: $line"
done
grep -q '^copy ceiling' "$res/summary.txt" || fail "kernel table without the same-run copy ceiling"

/usr/bin/python3 "$repo/benchmarks/scaling/qsgd-summary" "$res" > "$out/summary.txt" 2>&1 ||
  { cat "$out/summary.txt"; fail "qsgd-summary cannot read the traces"; }
for k in 1 2; do
  for c in fp32 4bit-fixed 4bit-rans; do
    [ -s "$res/train-K$k-$c.h5" ] || fail "trace train-K$k-$c.h5 missing"
  done
done
rows="$(grep -cE '^mlp +[12] ' "$out/summary.txt" || true)"
[ "$rows" = 6 ] || { cat "$out/summary.txt"; fail "qsgd-summary lists $rows runs of K = 1 and 2, expected 6"; }
grep -qE '^mlp +2 .*rans' "$out/summary.txt" || fail "no K = 2 rANS row in the summary"
grep -qE '^train/step ' "$res/nsys/summary.txt" || fail "the nsys summary has no train/step range"
grep -qE '^train/capture ' "$res/nsys/summary.txt" || fail "the nsys profile was not limited to the capture window"

# The kernels tier: the kernel programs alone, and a run.sh that says the trainer is skipped.
kpkg="$out/kernels" kres="$out/kernels-results"
"$repo/profiles/gpu/package.sh" --tier kernels --archive "$out/gpu-kernels.tar.xz" "$build" "$kpkg" \
  > "$out/package-kernels.log" 2>&1 || { cat "$out/package-kernels.log"; fail "package.sh --tier kernels"; }
grep -q "MiB travel (budget 64 MiB)" "$out/package-kernels.log" ||
  { cat "$out/package-kernels.log"; fail "package.sh --archive did not size the transfer"; }
# The budget is enforced: the same tier against a budget below the checkout fails, naming the sizes.
if "$repo/profiles/gpu/package.sh" --tier kernels --archive "$out/small.tar.xz" --budget-mb 1 "$build" "$out/small" \
     > "$out/small.log" 2>&1; then
  fail "package.sh --budget-mb 1 passed"
fi
grep -q "over the 1 MiB a GPU node's transfer takes" "$out/small.log" || { cat "$out/small.log"; fail "no budget message"; }
rm -rf "$out/small" "$out/small.tar.xz"
[ "$(cat "$kpkg/TIER")" = kernels ] || fail "the kernels tier's TIER says '$(cat "$kpkg/TIER")'"
[ ! -e "$kpkg/bin/qsgd-train" ] && [ ! -e "$kpkg/ompi" ] && [ ! -e "$kpkg/nsys" ] ||
  fail "the kernels tier carries the trainer, the MPI runtime or the nsys recipe"
! compgen -G "$kpkg/lib/libcublas*" > /dev/null && ! compgen -G "$kpkg/lib/libmpi*" > /dev/null ||
  fail "the kernels tier carries cuBLAS or MPI: $(ls "$kpkg/lib" | tr '\n' ' ')"
for t in test_quantize test_codecs test_message test_stats test_backends qsgd-bench-kernels qsgd-codec-report; do
  [ -x "$kpkg/bin/$t" ] || fail "the kernels tier lacks $t"
done
# As a GPU machine runs it: on-node.sh unpacks the archive and returns the results in one folder.
unshare -m "$out/hidden.sh" "$repo/profiles/gpu/on-node.sh" "$out/gpu-kernels.tar.xz" "$out/kernels-back" --quick \
  > "$out/run-kernels.log" 2>&1 || { tail -n 40 "$out/run-kernels.log"; fail "on-node.sh with the kernels tier exited non-zero"; }
back="$(ls "$out/kernels-back" | sort | tr '\n' ' ')"
[ "$back" = "node.txt results.tar.xz run.log summary.txt " ] || fail "on-node.sh returned '$back'"
grep -q "== trainer and nsys: skipped (a kernels-tier package" "$out/kernels-back/run.log" ||
  fail "the kernels tier's run did not say the trainer is skipped"
mkdir -p "$kres"
tar -C "$kres" -xJf "$out/kernels-back/results.tar.xz" || fail "the kernels tier's results do not unpack"
grep -q '^copy ceiling' "$kres/results/summary.txt" || fail "the kernels tier's run made no kernel table"
! compgen -G "$kres/results/train-*" > /dev/null || fail "the kernels tier's run wrote trainer files"
echo "check_gpu_script: the package ran end to end without the system's MPI runtime ($rows runs); the kernels tier too"
