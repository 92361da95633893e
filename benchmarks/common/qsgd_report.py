"""Helpers of the suite's Python programs, defined once (standard library only).

The C++ programs' counterparts are benchmarks/common/dates.hpp (utc_now),
stats.hpp (median, nearest-rank percentile) and provenance.hpp (the CPU's
model and flags); these follow the same definitions, so a Python peer's JSON
reads like the suite's own. Scripts put this directory on sys.path relative
to their own real path:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(
        os.path.realpath(__file__))), "common"))
    import qsgd_report
"""
import datetime
import math
import statistics


def utc_now():
    """The current UTC time, ISO 8601 to the second: 2026-12-01T00:21:42Z."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def median(samples):
    """The middle sample (the mean of the two middle ones for an even count)."""
    return statistics.median(samples)


def percentile(samples, p):
    """Nearest rank: the smallest sample with at least a fraction p of the
    samples at or below it (p99 of 10 samples is the largest)."""
    s = sorted(samples)
    if not s:
        raise ValueError("percentile of no samples")
    return s[min(max(math.ceil(p * len(s)), 1), len(s)) - 1]


def cpu_model_and_flags(path="/proc/cpuinfo"):
    """The first 'model name' and 'flags' of /proc/cpuinfo (None and "" when
    unreadable)."""
    model, flags = None, ""
    try:
        with open(path) as f:
            for line in f:
                k, _, v = line.partition(":")
                if k.strip() == "model name" and model is None:
                    model = v.strip()
                elif k.strip() == "flags" and not flags:
                    flags = v.strip()
    except OSError:
        pass
    return model, flags


def fmt(v, spec, missing="-"):
    """format(v, spec), or `missing` for None and NaN (a table's empty cell)."""
    if v is None or (isinstance(v, float) and v != v):
        return missing
    return format(v, spec)


def load_script(path, name):
    """One of the suite's extension-less Python programs (qsgd-summary) as a
    module, so that another program can use its functions."""
    import importlib.util
    spec = importlib.util.spec_from_loader(name, loader=None)
    mod = importlib.util.module_from_spec(spec)
    mod.__file__ = path
    with open(path) as f:
        exec(compile(f.read(), path, "exec"), mod.__dict__)
    return mod


def kernel_medians_by_size(doc):
    """{kernel name: {n: its median row}} of a qsgd-bench-kernels JSON
    document (Google Benchmark): the "median" aggregate of each benchmark, or
    the run itself where it ran once. Names stop before their size
    ("encode/fixed/16777216/manual_time" -> "encode/fixed", n 16777216; 0
    where a name has no size).

    Each row but the ceiling's gets "frac_of_memcpy": its median
    bytes_per_second over memcpy/kokkos's median at the same n of the same
    run (the one definition of the fraction; qsgd-bench-kernels interleaves
    the repetitions so that both medians sample the same stretch of time).
    Absent where the run has no memcpy/kokkos at that n. Rows carry
    "min_bytes_per_second" and "max_bytes_per_second" where the run has the
    min and max aggregates (the repetitions' spread). Kernels come in
    the program's order (the context's "qsgd_order"), not the order an
    interleaved run finished them in."""
    single = all(b.get("repetitions", 1) == 1 for b in doc["benchmarks"])
    out, spread = {}, {}

    def key(b):
        parts = b["run_name"].split("/")
        size_at = next((i for i, p in enumerate(parts) if p.isdigit()), len(parts))
        return "/".join(parts[:size_at]), int(parts[size_at]) if size_at < len(parts) else 0

    for b in doc["benchmarks"]:
        agg = b.get("aggregate_name") if b.get("run_type") == "aggregate" else None
        if agg in ("min", "max"):
            spread.setdefault(key(b), {})[agg + "_bytes_per_second"] = b["bytes_per_second"]
        if not (agg == "median" or (single and agg is None)):
            continue
        name, n = key(b)
        out.setdefault(name, {})[n] = dict(b)
    # The spread of the repetitions, where the run has min and max aggregates.
    for (name, n), mm in spread.items():
        if n in out.get(name, {}) and len(mm) == 2:
            out[name][n].update(mm)
    order = doc.get("context", {}).get("qsgd_order", "").split(",")
    rank = {name: i for i, name in enumerate(order)}
    out = dict(sorted(out.items(), key=lambda kv: rank.get(kv[0], len(rank))))
    ceiling = out.get("memcpy/kokkos", {})
    for name, rows in out.items():
        for n, row in rows.items():
            row.pop("frac_of_memcpy", None)
            c = ceiling.get(n, {}).get("bytes_per_second")
            if name != "memcpy/kokkos" and c:
                row["frac_of_memcpy"] = row["bytes_per_second"] / c
    return out


def gbps_spread(row):
    """The repetitions' spread of a kernel_medians row, "min-max" in GB/s
    (1e9 bytes/s, two decimals), or "-" where the run has no min and max."""
    if "min_bytes_per_second" not in row:
        return "-"
    return "%.2f-%.2f" % (row["min_bytes_per_second"] / 1e9, row["max_bytes_per_second"] / 1e9)


def kernel_medians(doc):
    """{kernel name: its median row} (kernel_medians_by_size); with several
    sizes the largest one."""
    return {name: rows[max(rows)] for name, rows in kernel_medians_by_size(doc).items()}
