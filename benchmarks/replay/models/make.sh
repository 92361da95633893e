#!/usr/bin/env bash
# Regenerates the bundled model descriptions (docs/replay.md) with
# benchmarks/replay/describe-model: times derived from each layer's FLOPs at
# 400 TFLOP/s (40% of an H100 SXM's 989 TFLOP/s dense bf16 peak) and the
# optimizer's 20 bytes per parameter at 2.7 TB/s (80% of its 3.35 TB/s
# memory bandwidth); the tensors' order and the gradients' statistics from
# three SGD steps at batch 2 on this machine's CPU. About 2 minutes.
#
#   benchmarks/replay/models/make.sh [--flops-rate R] [--mem-bandwidth B]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
rate=400e12
mem=2.7e12
while [ $# -gt 0 ]; do
  case "$1" in
    --flops-rate) rate="$2"; shift 2 ;;
    --mem-bandwidth) mem="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; exit 0 ;;
    *) echo "make.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
  esac
done
describe() { "$here/../describe-model" --device cuda --flops-rate "$rate" --mem-bandwidth "$mem" "$@"; }
describe --model resnet50 --batch 128 --out "$here/resnet50.json"
describe --model vit_b_16 --batch 64 --out "$here/vit_b_16.json"
describe --model bert-base --batch 32 --seq-len 128 --out "$here/bert-base.json"
describe --model bert-large --batch 32 --seq-len 128 --out "$here/bert-large.json"
