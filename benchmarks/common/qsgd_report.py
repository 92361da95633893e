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
    Absent where the run has no memcpy/kokkos at that n. Each such row also
    gets "traffic_frac_of_memcpy" (traffic_fraction: the bytes it reads and
    writes per second over the copy's 8n per second) where
    kernel_traffic_bytes counts its bytes and the run took the host paths
    those counts describe (traffic_counts_apply). Rows carry
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
    ctx = doc.get("context", {})
    d = int(ctx.get("qsgd_d", 512))
    counted = traffic_counts_apply(ctx)
    for name, rows in out.items():
        for n, row in rows.items():
            row.pop("frac_of_memcpy", None)
            row.pop("traffic_frac_of_memcpy", None)
            c = ceiling.get(n, {}).get("bytes_per_second")
            if name != "memcpy/kokkos" and c:
                row["frac_of_memcpy"] = row["bytes_per_second"] / c
                t = traffic_fraction(name, n, row, ceiling[n], d) if counted else None
                if t is not None:
                    row["traffic_frac_of_memcpy"] = t
    return out


# The codecs of qsgd-bench-kernels (bench_kernels.cpp, all_codecs()): the
# quantized ones carry bucket scales, the float baselines do not.
QUANTIZED_CODECS = ("fixed", "elias-dense", "elias-sparse", "rans")
FLOAT_CODECS = ("fp16", "bf16", "fp32")


def kernel_traffic_bytes(name, n, bits_per_dim=None, d=512):
    """(bytes read, bytes written) by one call of the qsgd-bench-kernels
    benchmark `name` (without its size: "encode/fixed") on n coordinates:
    the one place these counts live (docs/kernels.md, "Bytes each kernel
    moves", gives the code each term comes from).

    bits_per_dim: the run's counter of a coding kernel, so that the message
    is M = bits_per_dim * n / 8 bytes (header, chunk offsets, scales and
    payload). d: the run's bucket size (context qsgd_d; 0 is one bucket).
    S = 4 ceil(n / d), the bucket scales (quantized codecs; 0 for the float
    ones). P = M - S, the rANS chunk units (its payload, the header and
    chunk offsets counted in it).

        kernel                              read                written
        memcpy/kokkos, memcpy/std           4n                  4n
        quantize                            4n                  4n + S
        checksum/crc32c                     4n                  0
        encode/fixed                        4n + S + M          S + M
        encode/elias-dense, elias-sparse    12n + S + M         4n + S + M
        encode/rans                         12n + P + S + M     4n + S + P + M
        encode/fp16, bf16, fp32             4n + M              M
        encode_only/fixed                   4n + S + M          M
        encode_only/elias-dense, -sparse    8n + S + M          M
        encode_only/rans                    8n + P + S + M      P + M
        decode/<quantized codec>            2M + S              4n
        decode/fp16, bf16, fp32             2M                  4n
        decode_accumulate/<quantized>       4n + 2M + S         4n
        decode_accumulate/fp16, bf16, fp32  4n + 2M             4n

    Counted: each pass over a buffer that grows with n (input, levels,
    output, accumulator, message, rANS scratch) and over the bucket scales,
    as the bytes the kernel's code loads and stores; a pass that reads a
    piece again while it is in L1 or L2 (a bucket, a chunk) counts once.
    Not counted: write-allocate reads; tables of at most a few thousand
    entries (CRC32C, Elias, rANS); per-chunk and per-block scratch (8 bytes
    of length per chunk, 4 bytes of CRC per 64 KiB); the header's second
    read. These are the passes of the Serial backend's host paths (the
    fused fixed-width encoder and quantizer), which the reference run takes;
    the portable fixed-width encoder and a device quantizer read the input
    twice (traffic_counts_apply).

    ValueError for a name the table does not hold, and for a coding kernel
    without bits_per_dim."""
    n = float(n)
    kind, _, codec = name.partition("/")
    if name in ("memcpy/kokkos", "memcpy/std"):
        return 4 * n, 4 * n
    buckets = 0.0 if n == 0 else 1.0 if d == 0 else float(math.ceil(n / d))
    if name == "quantize":
        return 4 * n, 4 * n + 4 * buckets
    if name == "checksum/crc32c":
        return 4 * n, 0.0
    quantized = codec in QUANTIZED_CODECS
    if kind not in ("encode", "encode_only", "decode", "decode_accumulate") or \
            not (quantized or codec in FLOAT_CODECS) or (kind == "encode_only" and not quantized):
        raise ValueError("kernel_traffic_bytes: no byte count for kernel %r" % name)
    if bits_per_dim is None:
        raise ValueError("kernel_traffic_bytes: kernel %r needs the run's bits_per_dim" % name)
    m = float(bits_per_dim) * n / 8
    s = 4 * buckets if quantized else 0.0
    if kind == "decode":  # checksum pass over the message, scale check, decoding pass; output
        return 2 * m + s, 4 * n
    if kind == "decode_accumulate":  # the same, and the accumulator read and written
        return 4 * n + 2 * m + s, 4 * n
    if codec in FLOAT_CODECS:  # input once, message written, checksum pass
        return 4 * n + m, m
    if codec == "fixed":  # encode: the fused path reads the input once; encode_only: the levels once
        return 4 * n + s + m, (s + m if kind == "encode" else m)
    # Elias and rANS: quantize() first (encode only), then two passes over
    # the levels, the rANS chunk units through scratch, the scales copied
    # into the message, the checksum pass.
    q_read, q_written = (4 * n, 4 * n + s) if kind == "encode" else (0.0, 0.0)
    scratch = m - s if codec == "rans" else 0.0
    return q_read + 8 * n + scratch + s + m, q_written + scratch + m


def traffic_counts_apply(context):
    """Whether kernel_traffic_bytes describes a run with this JSON context:
    the Serial backend (its host loops) with the fused fixed-width encoder
    (qsgd_host_simd_fixed not "portable"). A context without these keys (a
    synthetic document) is taken to be such a run."""
    return context.get("kokkos_execution_space", "Serial") == "Serial" and \
        context.get("qsgd_host_simd_fixed", "") != "portable"


def traffic_fraction(name, n, row, ceiling_row, d=512):
    """The traffic fraction of a kernel_medians_by_size row of kernel `name`
    at size n: the bytes it moves per second, (read + written) of
    kernel_traffic_bytes over its median time per call (4n / its median
    bytes_per_second), over the copy's 8n bytes (4n read, 4n written) per
    its median time, ceiling_row being memcpy/kokkos's row at the same n of
    the same run. Equal to frac_of_memcpy * (read + written) / 8n. None
    where the kernel has no byte count (or no bits_per_dim), n is 0, or a
    median rate is missing."""
    bps, cbps = row.get("bytes_per_second"), ceiling_row.get("bytes_per_second")
    if not n or not bps or not cbps:
        return None
    try:
        read, written = kernel_traffic_bytes(name, n, row.get("bits_per_dim"), d)
    except ValueError:
        return None
    kernel_time, copy_time = 4.0 * n / bps, 4.0 * n / cbps
    return ((read + written) / kernel_time) / (8.0 * n / copy_time)


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


def read_json(path):
    """The JSON document at path, or at path + ".xz" where only that exists
    (a results folder keeps its large raw JSON compressed: results/reference/README.md).
    Raises OSError naming path when neither exists, ValueError when it does not parse."""
    import json
    import lzma
    import os
    if not os.path.exists(path) and os.path.exists(path + ".xz"):
        with lzma.open(path + ".xz", "rt") as f:
            return json.load(f)
    with open(path) as f:
        return json.load(f)


# ---- committed traces: one archive per results folder ----
#
# A results folder keeps its HDF5 traces in one solid archive, TRACES_ARCHIVE
# (scripts/pack-results writes it): the traces of one table share their
# metadata and compress 2.2-12.5x together, which keeps a checkout small
# enough to travel to a GPU node whole (docs/gpu.md). Readers call
# unpack_traces on a folder first: it writes the archive's traces beside it
# (git ignores them) and leaves files already there alone.
TRACES_ARCHIVE = "traces.tar.xz"
TRACES_STAMP = ".traces.unpacked"  # beside the archive: its digest and members, once all are written
TRACE_MAX_BYTES = 1 << 30  # one trace; a larger member is refused, not written


def stream_digest(stream):
    """SHA-256 (hex) of what remains in a binary stream."""
    import hashlib
    h = hashlib.sha256()
    for block in iter(lambda: stream.read(1 << 20), b""):
        h.update(block)
    return h.hexdigest()


def _file_digest(path):
    with open(path, "rb") as f:
        return stream_digest(f)


def write_atomically(dest, src, mode=None):
    """Copies the stream src to dest through a temporary file beside it and a
    rename, so a reader sees the whole file or none; the file gets the mode
    a plain open() would (0666 less the umask) unless mode says otherwise."""
    import os
    import tempfile
    if mode is None:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    fd, tmp = tempfile.mkstemp(prefix=".unpack-", dir=os.path.dirname(dest) or ".")
    try:
        with os.fdopen(fd, "wb") as out:
            for block in iter(lambda: src.read(1 << 20), b""):
                out.write(block)
        os.chmod(tmp, mode)
        os.replace(tmp, dest)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _unpack_archive(archive, keep_changed=False):
    import json
    import os
    import tarfile
    root = os.path.dirname(archive)
    stamp = os.path.join(root, TRACES_STAMP)
    digest = _file_digest(archive)
    try:
        with open(stamp) as f:
            done = json.load(f)
        if done.get("archive_sha256") == digest and all(
                os.path.isfile(os.path.join(root, n)) and os.path.getsize(os.path.join(root, n)) == size
                for n, size in done["members"].items()):
            return  # every trace already written back, unchanged
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass
    members = {}
    with tarfile.open(archive, "r:xz") as tar:
        for m in tar:
            name = os.path.normpath(m.name)
            if (not m.isfile() or not name.endswith(".h5") or name.startswith(("..", "/"))
                    or m.size > TRACE_MAX_BYTES):
                raise ValueError("%s: member '%s' is not a trace (*.h5, a plain file under its folder, "
                                 "at most %d bytes)" % (archive, m.name, TRACE_MAX_BYTES))
            dest = os.path.join(root, name)
            members[name] = m.size
            if os.path.exists(dest):
                if os.path.getsize(dest) != m.size and not keep_changed:
                    raise ValueError("%s differs from its copy in %s (%d bytes against %d): a run not yet "
                                     "packed (scripts/pack-results %s), or remove the file"
                                     % (dest, archive, os.path.getsize(dest), m.size, root))
                continue
            os.makedirs(os.path.dirname(dest), exist_ok=True)
            write_atomically(dest, tar.extractfile(m))
    if not keep_changed:
        import io
        write_atomically(stamp, io.BytesIO(json.dumps({"archive_sha256": digest, "members": members}).encode()))


def unpack_traces(path, keep_changed=False):
    """Writes back the traces that are not on disk: of every TRACES_ARCHIVE
    under path when it is a folder, of the one in its own folder when it is a
    file, and of the nearest one above either (a subfolder of a packed
    folder); returns path. Each trace is written to a temporary name and
    renamed, so a reader beside it sees the whole file or none. A member that
    is not a plain *.h5 file under its folder is an error; so is a file
    already there whose size differs from the archive's member (a new run not
    yet packed), naming both, unless keep_changed (scripts/pack-results:
    the file on disk is the newer). Once all are written, a stamp beside the
    archive (its digest and members) lets later calls skip it."""
    import os
    if os.path.isdir(path):
        top = os.path.abspath(path)
        archives = [os.path.join(r, TRACES_ARCHIVE) for r, _, files in os.walk(top) if TRACES_ARCHIVE in files]
    else:
        top = os.path.abspath(os.path.dirname(path) or ".")
        archives = [a for a in [os.path.join(top, TRACES_ARCHIVE)] if os.path.isfile(a)]
    up = os.path.dirname(top)
    while up != os.path.dirname(up) and not os.path.exists(os.path.join(up, ".git")):
        if os.path.isfile(os.path.join(up, TRACES_ARCHIVE)):
            archives.append(os.path.join(up, TRACES_ARCHIVE))
            break
        up = os.path.dirname(up)
    for archive in archives:
        _unpack_archive(archive, keep_changed)
    return path
