#!/usr/bin/env bash
# Re-measures the raw results behind the results report's tables into
# results/reference/<table>/ (one folder per table, each replaced whole:
# tables never mix runs), then regenerates the tables of the report
# (results/reference/RESULTS.md) and of the README from them. Each folder's
# traces are packed into its traces.tar.xz (scripts/pack-results).
#
#   benchmarks/report/run-reference.sh [TABLE ...]
#     codecs          qsgd-codec-report --json, n = 2^20 (~1 min)
#     kernels         qsgd-bench-kernels at n = 2^24, one core, 5 repetitions, and the
#                     coding kernels at n = 2^16 (in cache) (~4 min)
#     exchange-1gbit  qsgd-bench-exchange, 80 MiB, K = 2 and 4 on emulated 1 Gbit/s
#                     links, both transports, PowerSGD r = 4 on matrices of 1024 columns,
#                     PyTorch's gloo allreduce, and the compressed ring allgather rows on
#                     unshaped links (the CPU's bound) (~7 min)
#     exchange-shm    qsgd-bench-exchange on shared memory, 4-64 MiB, K = 2 and 4, with PowerSGD
#                     r = 4 on matrices of 1024 columns (~4 min)
#     ring-checksums  the ring allreduce's segment CRC32C on and off (qsgd-bench-exchange
#                     --ring-checksums), 3 alternating rounds: shared memory at K = 2 and 4,
#                     4-64 MiB, and emulated 1 Gbit/s links at K = 2, 64 MiB (~6 min)
#     shared-scale    shared-scale against allgather and scatter-reduce: bits and error at
#                     K = 1-4 (shared memory, 16 MiB), time at K = 4 on emulated 1 Gbit/s
#                     links, 2^24 floats (~4 min)
#     shared-scale-common  the same strategies' error at K = 4 when the ranks' gradients share
#                     0, 50, 90 or 99% of their variance (--common), shared memory (~1 min)
#     shared-scale-bound  the error ratio one agreed scale must cost, computed for the same
#                     gradients (benchmarks/exchange/shared-scale-bound) (~10 s)
#     sweep           the main job's default sweep (scripts/run-main.sh) (~5 min)
#     trace-flush     qsgd-bench-trace: flush times of a 100,000-step trace of 4 ranks (a flush every
#                     20 steps) at steps 100 to 100,000, and the bytes written (~1 min)
#     mlp-step        one MLP training step against PyTorch on one core, 3 alternating pairs
#                     (benchmarks/models/compare_mlp_step.sh) (~2 min)
#     algorithms      the theory experiments of docs/algorithms.md (run_experiments.sh) (~2 min)
#     accuracy        accuracy with error bars, K = 4: fp32 against bf16, 8-, 4- and 2-bit QSGD,
#                     2-bit with error feedback, shared-scale 4-bit with and without it,
#                     PowerSGD r = 2 and 4; MLP 784-1024-1024-10, CNN on Fashion-MNIST,
#                     char-LSTM (3 seeds each)
#                     (accuracy-experiment.sh) (~2.5 h;
#                     resumable: re-run accuracy-experiment.sh's three commands below with
#                     the same --out; timings not reported)
#     feedback        error feedback's accuracy on Fashion-MNIST, K = 4, MLP 784-1024-1024-10,
#                     3 epochs, fp32 against s = 4 and s = 1 QSGD without and with each error
#                     feedback, 3 seeds each (accuracy-experiment.sh) (~12 min; timings not reported)
#     powersgd        PowerSGD's accuracy on the same runs as feedback: fp32 and 4-bit QSGD
#                     against PowerSGD r = 1, 2, 4 with its error feedback and r = 4 without,
#                     3 seeds each (accuracy-experiment.sh) (~10 min; timings not reported)
#     tta             time to 85% accuracy, K = 2, 1 Gbit/s, 3 seeds: the suite's fp32 ring, bf16,
#                     4- and 2-bit scatter-reduce, 4-bit allgather, PowerSGD r = 4; PyTorch DDP fp32,
#                     fp16 hook, PowerSGD hook (~1 h; to resume a cut run:
#                     benchmarks/scaling/time-to-accuracy --out results/reference/tta --peers ddp)
#     model           qsgd-model's calibration and validation data (benchmarks/model/measure.sh),
#                     training steps and compute in 3 rounds, then its validation table (~25 min)
#     model-signs     the break-even signs of the model table measured again: 5 rounds of
#                     K = 4 runs (measure.sh --parts signs), judged by qsgd-model validate
#                     results/reference/model --signs (~15 min; after the model table)
#     model-projection  qsgd-model project on benchmarks/model/params/h200-cluster.json: the
#                     projection (JSON, text) and its heat map (PNG), of the parameter file's
#                     model sizes and of the bundled descriptions (projection-models.*) (~10 s)
#     replay-validation  replay against real training: the MLP's real runs, the replays of their
#                     own descriptions and the real runs again, back to back
#                     (benchmarks/replay/validate.sh) (~22 min)
#     replay-models   ResNet-50, ViT-B/16, BERT-base and BERT-large replayed from their bundled
#                     descriptions: shared memory and 1 Gbit/s at K = 2 and 4, 10 Gbit/s at K = 2;
#                     fp32 ring, bf16, 4- and 2-bit QSGD, rANS, PowerSGD r = 4, with the model's
#                     calibration and the links' ceilings (benchmarks/replay/results.sh); the
#                     tables of the runs and of qsgd-model replay's predictions of them (~1 h)
#   (default: all but tta, accuracy, feedback, powersgd and the replay tables)
# Needs root (network namespaces), the release build and PyTorch
# (scripts/install-deps.sh --python --torch). Run on an otherwise idle machine:
# the numbers are timings.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
ref="$root/results/reference"
bin="$root/build/release/benchmarks"
net="$root/benchmarks/scaling/netlab.sh"
. "$root/scripts/openmpi-env.sh"
export OPENBLAS_NUM_THREADS=1
tables=("$@")
[ ${#tables[@]} -gt 0 ] || tables=(codecs kernels exchange-1gbit exchange-shm shared-scale shared-scale-common
  shared-scale-bound sweep mlp-step algorithms ring-checksums trace-flush model model-signs model-projection)

fresh() {  # fresh NAME: an empty folder for one table, with its command and machine recorded
  rm -rf "${ref:?}/$1"
  mkdir -p "$ref/$1"
  echo "benchmarks/report/run-reference.sh $1  # $(date -u +%Y-%m-%dT%H:%M:%SZ), git $(git describe --always --dirty --abbrev=7)" \
    > "$ref/$1/COMMAND"
  benchmarks/report/machine-info > "$ref/$1/machine.json"
}

ceiling_of() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["ceiling"]["GBps"])' "$1"; }

for t in "${tables[@]}"; do
  case "$t" in
    codecs)
      fresh "$t"
      "$bin/qsgd-codec-report" --json > "$ref/$t/report.json" ;;
    kernels)
      fresh "$t"
      rc=0  # 3: a target missed, which the table shows; anything else is a failure
      benchmarks/kernels/run_targets.sh build/release "$ref/$t/kernels.json" > "$ref/$t/targets.txt" || rc=$?
      cat "$ref/$t/targets.txt"
      [ "$rc" = 0 ] || [ "$rc" = 3 ] || { echo "run-reference: run_targets.sh failed ($rc)" >&2; exit "$rc"; }
      # The same kernels on cache-resident data (n = 2^16, 256 KiB of input):
      # their compute rate, the bound docs/kernels.md compares against.
      taskset -c 0 "$bin/qsgd-bench-kernels" --qsgd_n_min=65536 --qsgd_n_max=65536 --benchmark_repetitions=5 \
        --benchmark_report_aggregates_only=true \
        --benchmark_filter='memcpy/kokkos|quantize|checksum|^encode/(fixed|rans)|decode_accumulate/(fixed|rans)|decode/rans' \
        --benchmark_out="$ref/$t/incache.json" --benchmark_out_format=json > "$ref/$t/incache.txt" 2>&1 ;;
    exchange-1gbit)
      fresh "$t"
      sizes=(-b 80M -e 80M -w 1 -n 10)
      for k in 2 4; do
        "$net" --nodes "$k" --rate 1gbit -- "$bin/qsgd-bench-exchange" "${sizes[@]}" \
          --strategies allreduce,allreduce16,allgather,scatter-reduce,shared-scale,powersgd --codecs fixed,rans \
          --powersgd-ranks 4 -o "$ref/$t/K$k.json" | tee "$ref/$t/K$k.txt"
        c=$(ceiling_of "$ref/$t/K$k.json")
        # The same gradient: 20,971,520 elements, 80 MiB in fp32, 40 MiB in fp16.
        for dt in fp32:80M fp16:40M; do
          "$net" --nodes "$k" --rate 1gbit -- "$root/benchmarks/exchange/gloo-allreduce" --bytes "${dt#*:}" \
            --dtype "${dt%:*}" --warmup 1 --iters 10 --ceiling-gbps "$c" -o "$ref/$t/gloo-K$k-${dt%:*}.json" \
            | tee -a "$ref/$t/K$k.txt"
        done
        # The compressed allgather rows again on unshaped links: the time the
        # CPU alone needs (coding, copies, the TCP stack), the other bound.
        "$net" --nodes "$k" --rate unshaped -- "$bin/qsgd-bench-exchange" "${sizes[@]}" \
          --strategies allgather --codecs fixed,rans --transports ring -o "$ref/$t/unshaped-K$k.json" \
          | tee "$ref/$t/unshaped-K$k.txt"
      done
      /usr/bin/python3 benchmarks/scaling/qsgd-plots --exchange --out "$ref/$t/plots" "$ref/$t/K2.json" "$ref/$t/K4.json" ;;
    exchange-shm)
      fresh "$t"
      for k in 2 4; do
        mpirun -np "$k" --oversubscribe --bind-to none "$bin/qsgd-bench-exchange" -b 4M -e 64M -f 4 -w 2 -n 10 \
          --strategies allreduce,allreduce16,allgather,scatter-reduce,powersgd --codecs fixed --powersgd-ranks 4 \
          -o "$ref/$t/K$k.json" | tee "$ref/$t/K$k.txt"
      done ;;
    ring-checksums)
      # The CRC32C of every ring segment (allreduce, allreduce16): on and off
      # in alternation, three rounds, on shared memory (where the CPU, not a
      # link, bounds the ring) and on emulated 1 Gbit/s links at K = 2.
      fresh "$t"
      for round in 1 2 3; do
        for c in on off; do
          for k in 2 4; do
            mpirun -np "$k" --oversubscribe --bind-to none "$bin/qsgd-bench-exchange" -b 4M -e 64M -f 4 -w 2 -n 10 \
              --strategies allreduce,allreduce16 --transports ring --no-check --ring-checksums "$c" \
              -o "$ref/$t/shm-K$k-$c-round$round.json" > "$ref/$t/shm-K$k-$c-round$round.txt"
          done
          "$net" --nodes 2 --rate 1gbit -- "$bin/qsgd-bench-exchange" -b 64M -e 64M -w 1 -n 5 \
            --strategies allreduce,allreduce16 --transports ring --no-check --ring-checksums "$c" \
            -o "$ref/$t/1gbit-K2-$c-round$round.json" > "$ref/$t/1gbit-K2-$c-round$round.txt"
        done
      done ;;
    shared-scale)
      fresh "$t"
      for k in 1 2 3 4; do
        mpirun -np "$k" --oversubscribe --bind-to none "$bin/qsgd-bench-exchange" -b 16M -e 16M -w 1 -n 5 \
          --strategies allgather,scatter-reduce,shared-scale --codecs fixed,elias-dense,rans --transports ring \
          -o "$ref/$t/K$k.json" | tee "$ref/$t/K$k.txt"
      done
      # The same rows at 1 Gbit/s and on unshaped links (the CPU's time), same session.
      for rate in 1gbit unshaped; do
        "$net" --nodes 4 --rate "$rate" -- "$bin/qsgd-bench-exchange" -b 64M -e 64M -w 1 -n 10 \
          --strategies scatter-reduce,shared-scale --codecs fixed,rans -o "$ref/$t/$rate-K4.json" \
          | tee "$ref/$t/$rate-K4.txt"
      done ;;
    shared-scale-common)
      fresh "$t"
      for c in 0 0.5 0.9 0.99; do
        mpirun -np 4 --oversubscribe --bind-to none "$bin/qsgd-bench-exchange" -b 16M -e 16M -w 0 -n 3 \
          --strategies allgather,scatter-reduce,shared-scale --codecs fixed,rans --transports ring --common "$c" \
          -o "$ref/$t/K4-common$c.json" | tee "$ref/$t/K4-common$c.txt"
      done ;;
    shared-scale-bound)
      fresh "$t"
      benchmarks/exchange/shared-scale-bound -o "$ref/$t/bound.json" | tee "$ref/$t/bound.txt" ;;
    sweep)
      fresh "$t"
      scripts/run-main.sh --out "$ref/$t" ;;
    mlp-step)
      fresh "$t"
      QSGD_BENCH_OUT="$ref/$t" benchmarks/models/compare_mlp_step.sh | tee "$ref/$t/compare.txt" ;;
    algorithms)
      fresh "$t"
      benchmarks/algorithms/run_experiments.sh "$ref/$t" ;;
    accuracy)
      fresh "$t"
      acc=(benchmarks/scaling/accuracy-experiment.sh --out "$ref/$t")
      every=fp32,bf16,8,4,2,2+ef-unscaled,ss4,ss4+ef-unscaled,psgd2+ef-unscaled,psgd4+ef-unscaled
      "${acc[@]}" --configs "$every" --models mlp --mlp-widths 784,1024,1024,10 --epochs 3 --seeds 1,2,3
      "${acc[@]}" --configs "$every" --models cnn --epochs 3 --seeds 1,2,3
      "${acc[@]}" --configs "$every" --models lstm --seeds 1,2,3 ;;
    feedback)
      fresh "$t"
      benchmarks/scaling/accuracy-experiment.sh --out "$ref/$t" --models mlp --mlp-widths 784,1024,1024,10 \
        --epochs 3 --configs fp32,2,2+ef,2+ef21,s1,s1+ef,s1+ef-unscaled,s1+ef21 --seeds 1,2,3 ;;
    powersgd)
      fresh "$t"
      benchmarks/scaling/accuracy-experiment.sh --out "$ref/$t" --models mlp --mlp-widths 784,1024,1024,10 \
        --epochs 3 --configs fp32,4,psgd1+ef-unscaled,psgd2+ef-unscaled,psgd4+ef-unscaled,psgd4 --seeds 1,2,3 ;;
    trace-flush)
      fresh "$t"
      "$bin/qsgd-bench-trace" --trace-dir "$ref/$t" --ranks 4 --buckets 4 --steps 100200 --flush-every 20 \
        --at 100,1000,10000,100000 --out "$ref/$t/trace-flush.json" | tee "$ref/$t/trace-flush.txt" ;;
    model)
      benchmarks/model/measure.sh "$ref/$t"   # writes its own COMMAND and machine.json
      benchmarks/model/qsgd-model validate "$ref/$t" > "$ref/$t/validation.txt" ;;
    model-signs)
      benchmarks/model/measure.sh "$ref/$t" --parts signs   # writes its own COMMAND and machine.json
      benchmarks/model/qsgd-model validate "$ref/model" --signs "$ref/$t" --json "$ref/$t/signs.json" \
        > "$ref/$t/validation.txt" ;;
    model-projection)
      fresh "$t"
      benchmarks/model/qsgd-model project benchmarks/model/params/h200-cluster.json --json "$ref/$t/projection.json" \
        --heatmap "$ref/$t/heatmap.png" > "$ref/$t/projection.txt"
      described=""
      for m in resnet50 vit_b_16 bert-base bert-large; do described+="${described:+,}benchmarks/replay/models/$m.json"; done
      benchmarks/model/qsgd-model project benchmarks/model/params/h200-cluster.json --model-file "$described" \
        --json "$ref/$t/projection-models.json" --heatmap "$ref/$t/heatmap-models.png" > "$ref/$t/projection-models.txt" ;;
    replay-validation)
      rm -rf "${ref:?}/$t"
      benchmarks/replay/validate.sh "$ref/$t" --build "$root/build/release" ;;   # writes its own COMMAND and machine.json
    replay-models)
      fresh "$t"
      benchmarks/replay/results.sh "$ref/$t" --build "$root/build/release" ;;
    tta)
      fresh "$t"
      benchmarks/scaling/time-to-accuracy --out "$ref/$t" --peers ddp
      benchmarks/scaling/qsgd-plots "$ref/$t" ;;
    *) echo "run-reference: unknown table '$t'" >&2; exit 2 ;;
  esac
  # The folder's traces into one archive (git ignores the *.h5 files themselves).
  scripts/pack-results "$ref/$t"
done
benchmarks/report/qsgd-tables --update results/reference/RESULTS.md
benchmarks/report/qsgd-tables --update README.md
