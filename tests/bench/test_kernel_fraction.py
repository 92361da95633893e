#!/usr/bin/env python3
"""The fraction of the memory-copy ceiling (qsgd_report.kernel_medians_by_size):
a kernel's median bytes/s over memcpy/kokkos's median at the same n of the
same run, whatever counter the benchmark program wrote; absent where the run
has no ceiling at that n, and never on the ceiling itself; the spread of the
repetitions from the min and max aggregates. The traffic fraction: the bytes
a kernel reads and writes (qsgd_report.kernel_traffic_bytes, checked against
counts worked out by hand) per second over the copy's 8n per second."""
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

# ---- bytes each kernel moves (kernel_traffic_bytes), worked out by hand ----
# n = 2^20, d = 512: S = 4 * 2048 = 8192 bytes of scales.
# encode/fixed at 6.0625 bits/dim (s = 16): M = 6.0625 * 2^20 / 8 = 794624;
#   reads 4n + S + M = 4194304 + 8192 + 794624 = 4997120 (input once, scales
#   copied into the message, checksum pass), writes S + M = 802816.
# decode_accumulate/rans at 4.5 bits/dim: M = 589824; reads
#   4n + 2M + S = 4194304 + 1179648 + 8192 = 5382144 (accumulator, checksum
#   and decoding passes over the message, scale check), writes 4n = 4194304.
N = 1 << 20


def near(a, b):
    return abs(a - b) <= 1e-9 * max(1.0, abs(b))


def traffic(name, n=N, bits=None, d=512):
    try:
        return qsgd_report.kernel_traffic_bytes(name, n, bits, d)
    except ValueError as e:
        return "ValueError: %s" % e


for name, bits, want in [("encode/fixed", 6.0625, (4997120, 802816)),
                         ("decode_accumulate/rans", 4.5, (5382144, 4194304)),
                         ("memcpy/kokkos", None, (4194304, 4194304)),
                         ("memcpy/std", None, (4194304, 4194304)),
                         ("checksum/crc32c", None, (4194304, 0)),
                         # encode/rans: 12n + P + S + M read, 4n + S + P + M written, P = M - S
                         ("encode/rans", 4.5, (12 * N + 2 * 589824, 4 * N + 2 * 589824)),
                         # fp16: no scales; the message is 2n (+ header)
                         ("decode/fp16", 16.0, (4 * N, 4 * N)),
                         ("decode_accumulate/fp32", 32.0, (12 * N, 4 * N))]:
    got = traffic(name, bits=bits)
    check(isinstance(got, tuple) and near(got[0], want[0]) and near(got[1], want[1]),
          "%s at n = 2^20, %s bits/dim, d = 512: %r, expected %r" % (name, bits, got, want))
# Buckets: ceil(n / d); d = 0 is one bucket.
check(traffic("quantize", n=1000, d=512) == (4000.0, 4008.0), "quantize, n = 1000, d = 512: two buckets: %r"
      % (traffic("quantize", n=1000, d=512),))
check(traffic("quantize", n=1000, d=0) == (4000.0, 4004.0), "quantize, d = 0: one bucket: %r"
      % (traffic("quantize", n=1000, d=0),))
for bad, bits in [("encode/fixed", None), ("encode_only/fp32", 32.0), ("decode/zstd", 8.0), ("zzz/unlisted", None)]:
    check(str(traffic(bad, bits=bits)).startswith("ValueError"),
          "%s (bits %r): no count, ValueError: %r" % (bad, bits, traffic(bad, bits=bits)))

# ---- the traffic fraction on a Google Benchmark document ----
# The copy at 10 GB/s of input moves 8n bytes per 4n / 10e9 s: 20e9 bytes/s.
# encode/fixed at 6 GB/s of input: 4997120 + 802816 = 5799936 bytes per
# 4n / 6e9 s, 8.296875e9 bytes/s: 0.41484375 of the copy's (its fraction
# 0.6 times 5799936 / 8n). decode_accumulate/rans at 2 GB/s:
# 0.2 * 9576448 / 8n = 0.2283203125.
tdoc = {"context": {"qsgd_d": "512", "qsgd_order": "memcpy/kokkos,encode/fixed,decode_accumulate/rans"},
        "benchmarks": [
            rep("memcpy/kokkos", N, 9.0, 0), rep("memcpy/kokkos", N, 10.0, 1), rep("memcpy/kokkos", N, 11.0, 2),
            median("memcpy/kokkos", N, 10.0),
            median("encode/fixed", N, 6.0, bits_per_dim=6.0625, traffic_frac_of_memcpy=9.9),
            median("decode_accumulate/rans", N, 2.0, bits_per_dim=4.5),
            median("decode/fixed", N, 12.0),                       # no bits_per_dim: no count
            median("quantize", 2 * N, 8.0),                         # no ceiling at 2n
        ]}
tby = qsgd_report.kernel_medians_by_size(tdoc)
enc_t = tby["encode/fixed"][N].get("traffic_frac_of_memcpy")
check(enc_t is not None and near(enc_t, 0.41484375), "encode/fixed traffic fraction: %r, expected 0.41484375" % enc_t)
rans_t = tby["decode_accumulate/rans"][N].get("traffic_frac_of_memcpy")
check(rans_t is not None and near(rans_t, 0.2283203125),
      "decode_accumulate/rans traffic fraction: %r, expected 0.2283203125" % rans_t)
check(near(tby["encode/fixed"][N]["frac_of_memcpy"], 0.6), "the fraction of memcpy stays as it was")
check(tdoc["benchmarks"][4]["traffic_frac_of_memcpy"] == 9.9, "the input document is left as it was")
check("traffic_frac_of_memcpy" not in tby["decode/fixed"][N], "a coding kernel without bits_per_dim: no traffic")
check("traffic_frac_of_memcpy" not in tby["quantize"][2 * N], "no ceiling at that n: no traffic")
check("traffic_frac_of_memcpy" not in tby["memcpy/kokkos"][N], "the ceiling has no traffic fraction of itself")
# The same from the helper, with the time per call spelled out.
row, ceil_row = tby["encode/fixed"][N], tby["memcpy/kokkos"][N]
t_k, t_c = 4.0 * N / row["bytes_per_second"], 4.0 * N / ceil_row["bytes_per_second"]
check(near(qsgd_report.traffic_fraction("encode/fixed", N, row, ceil_row, 512),
           ((4997120 + 802816) / t_k) / (8.0 * N / t_c)), "traffic_fraction: bytes per median time over the copy's")
# The run's d from its context: d = 0 (one bucket) changes S to 4 bytes.
d0 = qsgd_report.kernel_medians_by_size(dict(tdoc, context={"qsgd_d": "0"}))
want_d0 = 0.6 * (4 * N + 4 + 2 * 794624 + 4) / (8.0 * N)
check(near(d0["encode/fixed"][N]["traffic_frac_of_memcpy"], want_d0),
      "context qsgd_d 0: one scale: %r, expected %r" % (d0["encode/fixed"][N].get("traffic_frac_of_memcpy"), want_d0))
# The counts are the Serial host paths': none for another backend or the portable fixed-width encoder.
for ctx in ({"kokkos_execution_space": "Cuda"}, {"kokkos_execution_space": "Serial", "qsgd_host_simd_fixed": "portable"}):
    other = qsgd_report.kernel_medians_by_size(dict(tdoc, context=ctx))
    check("traffic_frac_of_memcpy" not in other["encode/fixed"][N] and "frac_of_memcpy" in other["encode/fixed"][N],
          "context %r: no traffic fraction, the fraction kept" % ctx)

if failures:
    print("FAILED:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("kernel fraction: all checks passed")
