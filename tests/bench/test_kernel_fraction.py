#!/usr/bin/env python3
"""The fraction of the memory-copy ceiling (qsgd_report.kernel_medians_by_size):
a kernel's median bytes/s over memcpy/kokkos's median at the same n of the
same run, whatever counter the benchmark program wrote; absent where the run
has no ceiling at that n, and never on the ceiling itself; the spread of the
repetitions from the min and max aggregates."""
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "..", "benchmarks", "common"))
import qsgd_report  # noqa: E402

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def rep(name, n, gbs, i):
    return {"name": "%s/%d/manual_time" % (name, n), "run_name": "%s/%d/manual_time" % (name, n),
            "run_type": "iteration", "repetitions": 3, "repetition_index": i, "bytes_per_second": gbs * 1e9}


def median(name, n, gbs, **extra):
    return dict({"name": "%s/%d/manual_time_median" % (name, n), "run_name": "%s/%d/manual_time" % (name, n),
                 "run_type": "aggregate", "aggregate_name": "median", "repetitions": 3,
                 "bytes_per_second": gbs * 1e9}, **extra)


# Interleaved repetitions (the order Google Benchmark reports them in), the
# medians after; a stale per-repetition counter on one median row.
doc = {"benchmarks": [
    rep("encode/fixed", 1024, 6.0, 0), rep("memcpy/kokkos", 1024, 12.0, 0), rep("encode/fixed", 1024, 5.0, 1),
    rep("memcpy/kokkos", 1024, 8.0, 1), rep("memcpy/kokkos", 1024, 10.0, 2), rep("encode/fixed", 1024, 7.0, 2),
    median("encode/fixed", 1024, 6.0, frac_of_memcpy=0.9), median("memcpy/kokkos", 1024, 10.0),
    median("decode/fixed", 1024, 15.0), median("decode/fixed", 4096, 3.0, frac_of_memcpy=0.3),
    dict(median("encode/fixed", 1024, 5.0), name="encode/fixed/1024/manual_time_min", aggregate_name="min"),
    dict(median("encode/fixed", 1024, 7.0), name="encode/fixed/1024/manual_time_max", aggregate_name="max"),
]}
by_size = qsgd_report.kernel_medians_by_size(doc)
enc = by_size["encode/fixed"][1024]
check(abs(enc["frac_of_memcpy"] - 0.6) < 1e-12, "encode 6 GB/s over a 10 GB/s ceiling: %r" % enc.get("frac_of_memcpy"))
check(abs(by_size["decode/fixed"][1024]["frac_of_memcpy"] - 1.5) < 1e-12, "a kernel above the ceiling keeps its ratio")
check("frac_of_memcpy" not in by_size["decode/fixed"][4096], "no ceiling at n = 4096: no fraction (the stale counter dropped)")
check("frac_of_memcpy" not in by_size["memcpy/kokkos"][1024], "the ceiling has no fraction of itself")
check((enc.get("min_bytes_per_second"), enc.get("max_bytes_per_second")) == (5.0e9, 7.0e9),
      "the repetitions' spread from the min and max aggregates: %r" % enc)
check(enc["bytes_per_second"] == 6.0e9, "the median stays the median row's")
check("min_bytes_per_second" not in by_size["decode/fixed"][1024], "no min and max aggregates: no spread")
check(qsgd_report.gbps_spread(enc) == "5.00-7.00", "the spread as printed: %r" % qsgd_report.gbps_spread(enc))
check(qsgd_report.gbps_spread(by_size["decode/fixed"][1024]) == "-", "no spread printed as -")
check(doc["benchmarks"][6]["frac_of_memcpy"] == 0.9, "the input document is left as it was")
check(set(qsgd_report.kernel_medians(doc)) == {"encode/fixed", "memcpy/kokkos", "decode/fixed"},
      "kernel_medians: one row per kernel")
check(qsgd_report.kernel_medians(doc)["decode/fixed"]["bytes_per_second"] == 3.0e9,
      "kernel_medians: the largest n")

# Rows in the program's order (context qsgd_order), not the document's;
# a name the order does not list comes last.
ordered = dict(doc, context={"qsgd_order": "memcpy/kokkos,encode/fixed,decode/fixed"})
ordered["benchmarks"] = ordered["benchmarks"] + [median("zzz/unlisted", 1024, 1.0)]
check(list(qsgd_report.kernel_medians(ordered)) == ["memcpy/kokkos", "encode/fixed", "decode/fixed", "zzz/unlisted"],
      "the program's order: %r" % list(qsgd_report.kernel_medians(ordered)))
check(list(qsgd_report.kernel_medians(doc))[0] == "encode/fixed", "no recorded order: the document's")

# One repetition: the runs themselves are the medians.
single = {"benchmarks": [dict(rep("memcpy/kokkos", 64, 4.0, 0), repetitions=1),
                         dict(rep("quantize", 64, 3.0, 0), repetitions=1)]}
q = qsgd_report.kernel_medians(single)["quantize"]
check(abs(q["frac_of_memcpy"] - 0.75) < 1e-12, "one repetition: 3 over 4 GB/s: %r" % q.get("frac_of_memcpy"))

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("kernel fraction: all checks passed")
