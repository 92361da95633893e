#!/usr/bin/env python3
"""Median GB/s of fp32 input and fraction of the same-run copy ceiling for
the GPU targets, from a qsgd-bench-kernels JSON file (Google Benchmark)."""
import json
import os
import sys

# qsgd_report.py: beside this file in a package (package.sh copies it), else
# in the source tree's benchmarks/common.
_here = os.path.dirname(os.path.realpath(__file__))
sys.path[:0] = [_here, os.path.join(os.path.dirname(os.path.dirname(_here)), "benchmarks", "common")]
from qsgd_report import kernel_medians  # noqa: E402

TARGETS = [("encode/fixed", "quantize + fixed-width encode", 0.6),
           ("decode_accumulate/fixed", "decode-accumulate (fixed)", 0.6),
           ("encode/rans", "quantize + rANS encode", 0.15),
           ("decode_accumulate/rans", "decode-accumulate (rANS)", 0.25),
           ("encode/elias-dense", "quantize + Elias dense encode", 0.2),
           ("decode_accumulate/elias-dense", "decode-accumulate (Elias dense)", None),
           ("quantize", "quantize alone", None),
           ("checksum/crc32c", "CRC32C", None)]


def main(path):
    global N
    doc = json.load(open(path))
    sizes = {next((int(p) for p in b["run_name"].split("/") if p.isdigit()), 0) for b in doc["benchmarks"]} - {0}
    N = ", ".join("2^%d" % (x.bit_length() - 1) if x & (x - 1) == 0 else str(x) for x in sorted(sizes)) or "?"
    med = kernel_medians(doc)
    ceiling = next((b for n, b in med.items() if n.startswith("memcpy/kokkos")), None)
    ctx = doc["context"]
    print("device: %s  git %s  n = %s, s = %s, d = %s, norm = %s" % (
        ctx.get("kokkos_execution_space"), ctx.get("qsgd_git_hash"), N, ctx.get("qsgd_s"), ctx.get("qsgd_d"),
        ctx.get("qsgd_norm")))
    if ceiling is not None:
        print("copy ceiling (device-to-device, bytes of fp32 input): %.1f GB/s" % (ceiling["bytes_per_second"] / 1e9))
    print("%-34s %10s %14s %8s %6s" % ("kernel", "GB/s", "frac of copy", "target", ""))
    for key, label, target in TARGETS:
        b = med.get(key)
        if b is None:
            print("%-34s %10s" % (label, "missing"))
            continue
        frac = b.get("frac_of_memcpy")
        verdict = "" if target is None or frac is None else ("met" if frac >= target else "missed")
        print("%-34s %10.1f %14.3f %8s %6s" % (label, b["bytes_per_second"] / 1e9, frac if frac is not None else float("nan"),
                                              "-" if target is None else ">= %g" % target, verdict))


if __name__ == "__main__":
    main(sys.argv[1])
