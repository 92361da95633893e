"""The cost model of qsgd-model (docs/model.md): the time of one gradient
exchange of n elements among K ranks, per strategy and schedule, from

  * a link: alpha (seconds per message) and beta (seconds per byte) of every
    rank's full-duplex link to a switch, fitted from measured fp32 ring
    allreduces (fit_link);
  * coding rates: bytes of fp32 input per second of each kernel, and each
    codec's bits per dimension, from a qsgd-bench-kernels JSON document
    (Rates);
  * a CPU share factor: ranks that share cores run their kernels slower
    (share = max(1, K / cores)); an exchange run in lockstep on its own
    (qsgd-bench-exchange) is paced by the ranks that share a core
    (ceil(K / cores), paced_share).

Every formula is a plain function of those inputs, so that a test can check
it against a hand computation and a reader can check it against the
schedules of docs/exchange.md. Standard library only."""

import math

# The suite's schedules and their defaults (comm/include/qsgd/comm/exchange.hpp).
SEGMENT_BYTES = 4 << 20       # ring pipeline segment, and fp32 input per allgather piece
METADATA_BYTES = 32           # four 64-bit words in front of every framed message
LINEAR_BCAST_MAX_RANKS = 4    # libnbc's MPI_Ibcast (Open MPI 4.1): linear up to 4 ranks,
CHAIN_SEGMENT_BYTES = 32768   # a chain of 32 KiB segments above (messages >= 512 KiB)

STRATEGIES = ("allreduce", "allreduce16", "allgather", "param-server", "scatter-reduce", "powersgd")
# PowerSGD compresses matrices: the model prices it only where it knows the
# shapes of a bucket's tensors (a replayed description's; Bucket.matrices).
NEEDS_SHAPES = ("powersgd",)
CODECS = ("fixed", "rans", "elias-dense", "elias-sparse")


class ModelError(ValueError):
    """An input the model cannot use (a missing kernel, an unknown strategy)."""


class Link:
    """One rank's full-duplex link to a switch and the host's network stack:

      alpha  seconds per message (latency and per-message overhead);
      beta   seconds per byte on the wire (1 / link bandwidth; 0 when the
             wire never binds, as with unshaped emulated links);
      gamma  seconds of CPU per byte through the host's network stack (TCP
             copies), a cost that ranks sharing cores share like kernels;
      burst  bytes a link may send faster than its rate after an idle moment
             (the tbf bucket of emulated links; 0 for a real link).

    A byte costs max(beta, gamma x share): the wire or the stack, whichever
    is slower for K ranks on the cores."""

    def __init__(self, alpha, beta, gamma=0.0, burst=0, name=""):
        if not (alpha >= 0 and beta >= 0 and gamma >= 0 and (beta > 0 or gamma > 0)):
            raise ModelError("link %s: alpha, beta and gamma must be >= 0 and beta or gamma > 0 (got %r, %r, %r)"
                             % (name, alpha, beta, gamma))
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.gamma = float(gamma)
        self.burst = int(burst)
        self.name = name

    def per_byte(self, share=1.0):
        return max(self.beta, self.gamma * share)

    def time(self, messages, nbytes, share=1.0, after_idle=False):
        """Seconds for `messages` messages carrying `nbytes` bytes in all, one
        after the other on one link, with `share` ranks per core. After an
        idle moment the first `burst` bytes leave at once (the wire term
        only: the host stack still copies them)."""
        wire = max(0.0, nbytes - self.burst) if after_idle else nbytes
        return messages * self.alpha + max(wire * self.beta, nbytes * self.gamma * share)

    def bound(self, share=1.0):
        return "wire" if self.beta >= self.gamma * share else "host stack"

    def to_json(self):
        return {"name": self.name, "alpha_s": self.alpha, "beta_s_per_byte": self.beta,
                "gamma_s_per_byte": self.gamma, "tbf_burst_bytes": self.burst,
                "wire_GBps": (1e-9 / self.beta) if self.beta > 0 else None,
                "stack_GBps": (1e-9 / self.gamma) if self.gamma > 0 else None}


class Rates:
    """Kernel throughput in bytes of fp32 input (4n) per second, and bits per
    dimension per codec, as qsgd-bench-kernels reports them. A kernel's rate
    is one number, or {n: rate} measured at several sizes: a kernel run over
    units of u elements (an allgather piece, a scatter-reduce chunk) takes
    the rate at u, interpolated in log u between the sizes measured and held
    at the nearest one outside them. The multi-pass coders (rANS, Elias) run
    faster on units whose passes stay in cache (docs/model.md)."""

    def __init__(self, bytes_per_second, bits_per_dim, source="", levels=None):
        self.bps = {k: (dict(v) if isinstance(v, dict) else {0: float(v)}) for k, v in bytes_per_second.items()}
        self.bits = dict(bits_per_dim)
        self.source = source
        self.levels = levels   # the quantization levels s the rates were measured at
        self.floor = 0         # streaming(): the smallest unit a rate is taken at
        self.matrix_cols = None  # the columns of the matrix PowerSGD's kernels ran on

    @classmethod
    def from_kernels_json(cls, doc, source=""):
        import qsgd_report
        bps, bits = {}, {}
        for name, rows in qsgd_report.kernel_medians_by_size(doc).items():
            bps[name] = {n: float(row["bytes_per_second"]) for n, row in rows.items()}
            row = rows[max(rows)]
            if "bits_per_dim" in row:
                bits[name.split("/")[-1]] = float(row["bits_per_dim"])
        bits.setdefault("fp32", 32.0)
        bits.setdefault("bf16", 16.0)
        s = doc.get("context", {}).get("qsgd_s")
        r = cls(bps, bits, source, int(s) if s else None)
        cols = doc.get("context", {}).get("qsgd_matrix_cols")
        r.matrix_cols = int(cols) if cols else None
        return r

    def streaming(self, elements):
        """These rates for a step that streams `elements` elements through
        its kernels: every rate taken at a unit of at least that many, so
        that data larger than the caches is read at the rate measured out of
        them (the benchmark's largest size) and not at a small unit's, which
        the benchmark measured with its input in cache."""
        import copy
        r = copy.copy(self)
        r.floor = max(self.floor, elements)
        return r

    def rate(self, kernel, unit):
        """Bytes of input per second of `kernel` run on units of `unit` elements."""
        unit = max(unit, self.floor)
        if kernel not in self.bps:
            raise ModelError("no rate for kernel '%s' in %s (have: %s)"
                             % (kernel, self.source or "the kernel results", ", ".join(sorted(self.bps))))
        table = self.bps[kernel]
        sizes = sorted(table)
        if len(sizes) == 1 or unit <= sizes[0]:
            return table[sizes[0]]
        if unit >= sizes[-1]:
            return table[sizes[-1]]
        hi = next(i for i, x in enumerate(sizes) if x >= unit)
        a, b = sizes[hi - 1], sizes[hi]
        f = (math.log(unit) - math.log(a)) / (math.log(b) - math.log(a))
        return table[a] + f * (table[b] - table[a])

    def seconds(self, kernel, n, unit=None):
        """Time of `kernel` ("encode/fixed", ...) over n elements on one core,
        run on units of `unit` elements (default: all n at once)."""
        return 4.0 * n / self.rate(kernel, n if unit is None else unit)

    def bits_per_dim(self, codec):
        if codec not in self.bits:
            raise ModelError("no bits per dimension for codec '%s' in %s" % (codec, self.source or "the kernel results"))
        return self.bits[codec]


def bits_of_levels(s):
    """The paper's bit width of s levels (s = 2^b), or None (no quantization)."""
    if not s:
        return None
    b = int(round(math.log2(s)))
    return b if 2 ** b == s else None


def share_factor(ranks_on_cores, cores):
    """How much slower a kernel runs when `ranks_on_cores` single-threaded ranks
    share `cores` cores (MPI waits spin, so a waiting rank takes its share)."""
    return max(1.0, float(ranks_on_cores) / float(cores))


def paced_share(ranks_on_cores, cores):
    """The share of an exchange run in lockstep, back to back, with nothing
    between (qsgd-bench-exchange): K single-threaded ranks on `cores` cores
    put ceil(K / cores) ranks on some core, and every phase waits for the
    slowest rank, so the exchange runs at that core's pace. Inside a training
    step the ranks reach their exchanges at different moments, between
    compute the scheduler spreads over the cores: there share_factor holds."""
    return max(1.0, float(math.ceil(float(ranks_on_cores) / float(cores))))


def message_bytes(n, bits_per_dim):
    """Bytes of one framed message of n elements at the codec's bits per
    dimension (headers, offsets and scales are inside bits_per_dim)."""
    return n * bits_per_dim / 8.0 + METADATA_BYTES


def pieces(nbytes, segment=SEGMENT_BYTES):
    return max(1, int(math.ceil(nbytes / float(segment))))


class Prediction:
    """The parts of one predicted exchange; `total` is what is compared with a
    measured median. `before` is the rank's work inside start() (encoding,
    conversion), `after` its work once the network is done (decoding,
    scaling): a trainer runs the first in a backward hook and the second in
    its wait; the rest of `total` is time the exchange holds the network."""

    def __init__(self, total, network, cpu, wire_bytes, formula, before=0.0, after=0.0, segments=None,
                 inside=0.0):
        self.inside = inside   # kernels run inside the network segments (the ring's additions)
        self.total = total
        self.network = network
        self.cpu = cpu
        self.wire_bytes = wire_bytes
        self.formula = formula
        self.before = before
        self.after = after
        # Between before and after: (caller's kernels, network time) per
        # phase. A later phase's kernels (scatter-reduce's accumulation and
        # requantization, the server's) run only when the caller calls in
        # (a backward hook, or its wait); the network side moves on its own.
        self.segments = segments if segments is not None else [(0.0, max(0.0, total - before - after))]

    def to_json(self):
        return {"total_s": self.total, "network_s": self.network, "cpu_s": self.cpu,
                "before_s": self.before, "after_s": self.after,
                "wire_bytes_per_rank": self.wire_bytes, "formula": self.formula}


def ring_allreduce(n, k, link, rates, share, elem_bytes=4, passes_before=0.0, passes_after=1.0):
    """Pipelined ring allreduce (reduce-scatter + allgather, K - 1 steps each,
    every block cut into segments): 2(K-1) messages per block segment, and
    every rank sends and receives 2(K-1)/K of the vector. CPU: the ring's
    additions ((K-1)/K of the vector) and the passes before (allreduce16's
    conversion to 16 bits) and after it (the 1/K scaling; allreduce16's
    conversion back), each a streaming pass charged at the same run's memcpy
    rate (the suite has no benchmark of the ring's own loops)."""
    if k == 1:
        return Prediction(0.0, 0.0, 0.0, 0, "K = 1: no exchange")
    block = elem_bytes * n / float(k)
    msgs = 2 * (k - 1) * pieces(block)
    wire = 2.0 * (k - 1) / k * elem_bytes * n
    net = link.time(msgs, wire, share)
    copy = share * rates.seconds("memcpy/kokkos", n)
    cpu = (passes_before + (k - 1) / float(k) + passes_after) * copy
    return Prediction(net + cpu, net, cpu, wire, "ring: %d msgs, %.0f B, %s-bound" % (msgs, wire, link.bound(share)),
                      passes_before * copy, passes_after * copy, inside=(k - 1) / float(k) * copy)


def allgather(n, k, link, rates, share, codec):
    """Pipelined ring allgather of pieces (4 MiB of fp32 input each): a rank's
    piece is sent as soon as it is encoded, forwarded K - 1 times, and slice j
    is decoded once every rank's piece j is in. A rank forwards only between
    its kernels (Open MPI moves a message on only inside an MPI call), so each
    of the K - 2 ranks a piece passes through may hold it for one slice's
    decoding. The time is the larger of the rank's CPU time (kernels and
    network stack) and the network path: the first piece's encoding, the
    link time of every byte, the K - 2 forwarding delays and the last
    slice's decoding."""
    if k == 1:
        return Prediction(0.0, 0.0, 0.0, 0, "K = 1: no exchange")
    p = pieces(4.0 * n)
    m = message_bytes(n, rates.bits_per_dim(codec)) + (p - 1) * METADATA_BYTES
    wire = (k - 1) * m
    net = link.time((k - 1) * p, wire, share)
    unit = n / float(p)  # coded piece by piece
    enc = share * rates.seconds("encode/" + codec, n, unit)
    # The rank's own term: decoded from its own message (fixed-width keeps no
    # levels) or accumulated from its levels (rANS, Elias): either way about
    # one pass of the fixed-width decode-accumulate.
    dec = share * ((k - 1) * rates.seconds("decode_accumulate/" + codec, n, unit)
                   + rates.seconds("decode_accumulate/fixed", n, unit))
    cpu = enc + dec + wire * link.gamma * share
    path = enc / p + net + (k - 1) * dec / p
    return Prediction(max(cpu, path), net, cpu, wire,
                      "max(cpu %.4f, network path %.4f); %d pieces" % (cpu, path, p), enc, dec)


def scatter_reduce(n, k, link, rates, share, codec):
    """Stage 1: the vector is encoded as K chunk messages, each sent to its
    owner as soon as it is encoded (pairwise exchange, K - 1 rounds), and the
    owner decode-accumulates the K chunks of its slice as they arrive; then
    it requantizes and encodes the slice; stage 2: ring allgather of the K
    reduced chunks, each decoded as it arrives. Within a stage the kernels
    and the network overlap as in allgather (the larger of the CPU time and
    the network path); the stages and the requantization run in sequence."""
    if k == 1:
        return Prediction(0.0, 0.0, 0.0, 0, "K = 1: no exchange")
    m = message_bytes(n, rates.bits_per_dim(codec))
    chunk = m / k
    net1 = link.time(k - 1, (k - 1) * chunk, share)
    net2 = link.time((k - 1) * pieces(4.0 * n / k), (k - 1) * chunk, share)
    stack = (k - 1) * chunk * link.gamma * share
    unit = n / float(k)  # every kernel runs on chunks of n / K
    enc = share * rates.seconds("encode/" + codec, n, unit)
    acc = share * rates.seconds("decode_accumulate/" + codec, n, unit)
    req = share * rates.seconds("encode/" + codec, unit)
    dec = share * rates.seconds("decode/" + codec, n, unit)
    stage1 = max(enc + acc + stack, enc / k + net1 + acc / k)
    stage2 = max(dec + stack, net2 + dec / k)
    return Prediction(stage1 + req + stage2, net1 + net2, enc + acc + req + dec + 2 * stack, 2.0 * (k - 1) * chunk,
                      "stage 1 %.4f + requantize %.4f + stage 2 %.4f" % (stage1, req, stage2), enc, dec,
                      [(0.0, net1), (acc + req, net2)])


def param_server(n, k, link, rates, share, codec):
    """MPI_Igatherv of K messages to the server (linear: every message crosses
    the server's link), server decode-accumulate and requantize, MPI_Ibcast of
    the result (libnbc: linear up to 4 ranks, the server's link carries K - 1
    copies; a chain of 32 KiB segments above), every rank decodes. In
    sequence. The server's link and CPU carry the network stages and its own
    kernels while the others wait, so those run unshared (share 1); every
    rank encodes and decodes at once (share)."""
    if k == 1:
        return Prediction(0.0, 0.0, 0.0, 0, "K = 1: no exchange")
    m = message_bytes(n, rates.bits_per_dim(codec))
    # The gather fills the server's ingress and the broadcast its egress, one
    # after the other: each direction has been idle, so a link with a burst
    # (emulated links) sends its first `burst` bytes at once.
    gather = link.time(k - 1, (k - 1) * m, after_idle=True)
    if k <= LINEAR_BCAST_MAX_RANKS:
        bcast = link.time(k - 1, (k - 1) * m, after_idle=True)
    else:
        bcast = link.time(pieces(m, CHAIN_SEGMENT_BYTES) + k - 2, m + (k - 2) * CHAIN_SEGMENT_BYTES, after_idle=True)
    net = gather + bcast
    enc = share * rates.seconds("encode/" + codec, n)
    dec = share * rates.seconds("decode/" + codec, n)
    server = k * rates.seconds("decode_accumulate/" + codec, n) + rates.seconds("encode/" + codec, n)
    cpu = enc + dec + server
    return Prediction(net + cpu, net, cpu, (k - 1) * m, "gather + bcast (server), stages in sequence", enc, dec,
                      [(0.0, gather), (server, bcast)])


def psgd_blocks(matrices, r):
    """The matrices (rows, cols) PowerSGD compresses at rank r: those it
    shrinks at least 2x, rows x cols >= 2 r (rows + cols)
    (comm/src/powersgd.cpp)."""
    return [(a, b) for a, b in matrices if a > 1 and a * b >= 2 * r * (a + b)]


def powersgd(n, k, link, rates, share, matrices, r, feedback=False):
    """PowerSGD of rank r on a bucket of n elements holding the matrices
    `matrices` (rows, cols) (comm/src/powersgd.cpp): those psgd_blocks keeps
    are compressed, every other element is averaged exactly beside the P
    factors. In start(): P = M Q per matrix (with error feedback, first a
    copy of the bucket as what was sent) and the rest copied beside P; ring
    allreduce 1 of P and the rest; at the caller's next call: the rest
    copied back, P's columns orthonormalized, Q = M^T P; ring allreduce 2 of
    Q; in the wait: out = P Q^T per matrix, Q kept for the next step (with
    error feedback, the approximation copied as what was sent). Each
    product at its rate per element of M measured on the benchmark's matrix
    (qsgd-bench-kernels powersgd_*, n / C rows of C columns), taken at the
    matrix's size, and the orthonormalization (rows x r^2 work) at the rate
    of a benchmark matrix with as many rows, unless Rates.streaming holds
    every rate at the gradient's size (replay); the copies at the memcpy
    rate; each allreduce as ring_allreduce of its floats."""
    if k == 1:
        return Prediction(0.0, 0.0, 0.0, 0, "K = 1: no exchange")
    blocks = psgd_blocks(matrices, r)
    m = sum(a * b for a, b in blocks)
    if m > n:
        raise ModelError("powersgd: matrices of %d elements in a bucket of %d" % (m, n))
    rest = n - m
    p_len = sum(a for a, _ in blocks) * r + rest
    q_len = sum(b for _, b in blocks) * r

    def kernel(name, elements, unit):
        return share * rates.seconds("powersgd_%s/r%d" % (name, r), elements, unit)

    def copy(elements):
        return share * rates.seconds("memcpy/kokkos", elements) if elements else 0.0
    project = sum(kernel("project", a * b, a * b) for a, b in blocks)
    back = sum(kernel("back", a * b, a * b) for a, b in blocks)
    expand = sum(kernel("expand", a * b, a * b) for a, b in blocks)
    if blocks and not rates.matrix_cols:
        raise ModelError("%s: PowerSGD's kernel rates without the matrix shape they ran on (qsgd_matrix_cols)"
                         % (rates.source or "the kernel results"))
    orth = sum(kernel("orthonormalize", a * rates.matrix_cols, a * rates.matrix_cols) for a, _ in blocks)
    ring_p = ring_allreduce(p_len, k, link, rates, share)
    ring_q = ring_allreduce(q_len, k, link, rates, share) if q_len else Prediction(0.0, 0.0, 0.0, 0, "no Q")
    before = (copy(n) if feedback else 0.0) + project + copy(rest)
    middle = ring_p.after + copy(rest) + orth + back
    after = ring_q.after + expand + copy(q_len) + (copy(m) if feedback else 0.0)
    inside = ring_p.inside + ring_q.inside
    net = ring_p.network + ring_q.network
    cpu = before + middle + after + inside
    return Prediction(net + cpu, net, cpu, ring_p.wire_bytes + ring_q.wire_bytes,
                      "P %.4f (%d floats) + orthonormalize and Q %.4f + Q %.4f (%d floats) + expand %.4f" % (
                          project, p_len, orth + back, ring_q.network, q_len, expand),
                      before, after, [(0.0, ring_p.network + ring_p.inside), (middle, ring_q.network + ring_q.inside)],
                      inside=inside)


def exchange(strategy, codec, n, k, link, rates, cores, paced=False, matrices=None, rank=4, feedback=False):
    """The predicted time of one exchange; `cores` is how many cores the K
    ranks share (ranks on machines of their own: pass cores >= K). `paced`:
    the exchange runs in lockstep on its own (a benchmark's back-to-back
    iterations), so its share is paced_share, not share_factor. PowerSGD
    takes the bucket's `matrices`, its `rank` and whether error feedback
    keeps what was sent (`feedback`)."""
    share = paced_share(k, cores) if paced else share_factor(k, cores)
    if strategy == "allreduce":
        return ring_allreduce(n, k, link, rates, share)
    if strategy == "allreduce16":
        return ring_allreduce(n, k, link, rates, share, elem_bytes=2, passes_before=1.0, passes_after=1.0)
    if strategy == "allgather":
        return allgather(n, k, link, rates, share, codec)
    if strategy == "scatter-reduce":
        return scatter_reduce(n, k, link, rates, share, codec)
    if strategy == "param-server":
        return param_server(n, k, link, rates, share, codec)
    if strategy == "powersgd":
        if matrices is None:
            raise ModelError("powersgd needs the shapes of the bucket's tensors (a replayed description's)")
        return powersgd(n, k, link, rates, share, matrices, rank, feedback)
    raise ModelError("unknown strategy '%s' (known: %s)" % (strategy, ", ".join(STRATEGIES)))


def _ring_terms(rows, rates, cores):
    """(messages, wire bytes x the cores' share, measured time less the
    model's CPU time, measured time) of fp32 ring allreduce rows (n, K,
    seconds)."""
    unit = Link(0.0, 1.0)
    out = []
    for n, k, t in rows:
        share = paced_share(k, cores)  # benchmark rows: back to back
        parts = ring_allreduce(n, k, unit, rates, share)
        # The stack's cost per byte is shared like the kernels (gamma x share).
        out.append((2 * (k - 1) * pieces(4.0 * n / k), parts.wire_bytes * share, t - parts.cpu, t))
    return out


def fit_host(rows, rates, cores, name="unshaped"):
    """alpha and gamma from fp32 ring allreduces on a link that never binds
    (unshaped): alpha x messages + gamma x bytes fitted to the measured time
    less the model's CPU time, by least squares on relative residuals (the
    rows span decades of size, each should count alike). A negative alpha
    (noise) is clamped to 0 and gamma refitted alone."""
    if len(rows) < 2:
        raise ModelError("link %s: need at least two fp32 ring allreduce sizes to fit alpha, got %d" % (name, len(rows)))
    a11 = a12 = a22 = b1 = b2 = 0.0
    for x1, x2, y, t in _ring_terms(rows, rates, cores):
        w = 1.0 / (t * t)
        a11 += w * x1 * x1
        a12 += w * x1 * x2
        a22 += w * x2 * x2
        b1 += w * x1 * y
        b2 += w * x2 * y
    det = a11 * a22 - a12 * a12
    alpha = (b1 * a22 - b2 * a12) / det if det > 0 else -1.0
    gamma = (a11 * b2 - a12 * b1) / det if det > 0 else -1.0
    if alpha < 0 or gamma <= 0:
        alpha, gamma = 0.0, b2 / a22
    if gamma <= 0:
        raise ModelError("link %s: the fit gives no positive per-byte cost (measured times below the kernels' own)" % name)
    return Link(alpha, 0.0, gamma, 0, name)


def fit_wire(rows, rates, cores, host, burst, name):
    """beta of a shaped link: the per-byte slope of fp32 ring allreduces with
    the host's alpha fixed, fitted on the rows whose wire bytes are at least
    four times the link's burst (smaller transfers leave faster than the rate
    and would not measure it). The slope is what a byte cost at the fit's K
    (2 ranks, a core each): the wire, or the host stack where it is slower
    (the model takes max(beta, gamma x share), so such a beta stands for the
    measured cost, not the nominal rate). Returns the link and how many rows
    it was fitted on."""
    terms = [x for x in _ring_terms(rows, rates, cores) if x[1] >= 4 * burst]
    if not terms:
        raise ModelError("link %s: no fp32 ring allreduce moves at least 4 x the %d-byte burst per rank; "
                         "measure larger sizes" % (name, burst))
    num = den = 0.0
    for x1, x2, y, t in terms:
        w = 1.0 / (t * t)
        num += w * x2 * (y - host.alpha * x1)
        den += w * x2 * x2
    beta = num / den
    if beta <= 0:
        raise ModelError("link %s: the fit gives no positive per-byte cost" % name)
    return Link(host.alpha, beta, host.gamma, burst, name), len(terms)


class Bucket:
    """One bucket of a training step (a trace's bucket_plan entry) and when its
    gradient is complete, as a fraction of the backward pass. `tensors`: how
    many tensors share it; a bucket of several is copied into its fusion
    buffer in the hook and out of it after the wait (one memory pass each),
    a tensor alone is exchanged in place (Bucketer::push_inplace).
    `matrices`: (rows, cols) of each of its tensors of more than one row
    (the matrices PowerSGD may compress), where the shapes are known."""

    def __init__(self, elements, compressed, ready_fraction, tensors=1, matrices=None):
        self.elements = int(elements)
        self.compressed = bool(compressed)
        self.ready = min(1.0, max(0.0, float(ready_fraction)))
        self.tensors = int(tensors)
        self.matrices = None if matrices is None else [(int(a), int(b)) for a, b in matrices]


def plan_buckets(sizes, fusion_bytes=8 << 20, layer_filter=10000, align=1):
    """The buckets qsgd::comm::Bucketer::plan forms (comm/src/bucketer.cpp)
    from tensor sizes in the order backward produces them: tensors under the
    layer filter go to the dense (fp32) bucket open at the time, the others
    to the compressed one, each padded to a multiple of `align` (the
    quantization bucket size d of a quantizing codec, else 1); a tensor that
    would take a bucket holding something past the fusion cap opens a new
    one. Returns [(elements with padding, compressed, [tensor indices])] in
    the order the buckets were opened."""
    cap = fusion_bytes // 4
    buckets, open_ = [], {True: None, False: None}
    for t, n in enumerate(sizes):
        compressed = n >= layer_filter
        a = align if compressed else 1
        padded = (n + a - 1) // a * a
        i = open_[compressed]
        if i is None or (buckets[i][0] > 0 and buckets[i][0] + padded > cap):
            buckets.append([0, compressed, []])
            i = open_[compressed] = len(buckets) - 1
        buckets[i][0] += padded
        buckets[i][2].append(t)
    return [tuple(b) for b in buckets]


class Description:
    """A model description (docs/replay.md): the tensors in the order
    backward produces their gradients, the time from the start of backward
    to each gradient, and the phase times (medians). `compute` is how a
    replay emulates them: "sleep" (a GPU's compute, the cores left free) or
    "spin" (a CPU's, on the cores)."""

    def __init__(self, doc, source=""):
        where = source or "the description"
        if not isinstance(doc, dict) or doc.get("format") != "qsgd-model-description":
            raise ModelError("%s: not a qsgd-model-description" % where)
        try:
            times = doc["times"]
            self.model = str(doc["model"])
            self.batch = int(doc["batch"])
            self.forward, self.backward = float(times["forward_s"]), float(times["backward_s"])
            self.optimizer, self.data = float(times["optimizer_s"]), float(times.get("data_s", 0.0))
            self.tensors = [(str(t["name"]), math.prod(int(x) for x in t["shape"]), float(t["ready_s"]))
                            for t in doc["tensors"]]
            # A tensor of two or more dimensions is a matrix of shape[0] rows
            # (train/src/trainer.cpp's Bucketer::add); a vector is none.
            self.rows = [int(t["shape"][0]) if len(t["shape"]) >= 2 else 0 for t in doc["tensors"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ModelError("%s: a field is missing or malformed (%s)" % (where, e))
        if not self.tensors or self.backward <= 0:
            raise ModelError("%s: no tensors or no backward time" % where)
        self.device = str(times.get("device", "cpu"))
        self.times_source = str(times.get("source", "?"))
        self.flops_rate = float(times["flops_rate"]) if times.get("flops_rate") else None
        self.compute = "sleep" if self.device == "cuda" else "spin"
        self.source = source

    def parameters(self):
        return sum(n for _, n, _ in self.tensors)

    def buckets(self, fusion_bytes=8 << 20, layer_filter=10000, align=1):
        """The Bucketer's buckets of these tensors, each ready when its last
        tensor is (its ready time over the backward time), with the matrices
        of its tensors of more than one row (comm/src/bucketer.cpp)."""
        return [Bucket(n, c, max(self.tensors[t][2] for t in ts) / self.backward, len(ts),
                       [(self.rows[t], self.tensors[t][1] // self.rows[t]) for t in ts if self.rows[t] > 1])
                for n, c, ts in plan_buckets([n for _, n, _ in self.tensors], fusion_bytes, layer_filter, align)]

    def step_compute(self, scale=1.0):
        """The phase times, each times `scale` (another device's rate)."""
        return Compute(scale * self.forward, scale * self.backward, scale * self.optimizer, self.data)


class Compute:
    """Per-step times of one rank alone (K = 1, no exchange): forward,
    backward, update, and the rest of the step (data loading, copies)."""

    def __init__(self, forward, backward, update, other):
        self.forward, self.backward, self.update, self.other = forward, backward, update, other


def _stack_during(preds, starts, ends, until, per_byte):
    """The host stack's CPU for the bytes that move before `until`: it
    copies every byte that moves while backward computes on the rank's share
    of the cores (the progress thread's socket reads and writes), so
    backward is that much longer. Bytes that move while the rank waits cost
    it nothing more than the wait. Each bucket's bytes are taken to move
    evenly between its start and end."""
    stack = 0.0
    for p, start, end in zip(preds, starts, ends):
        if end > start:
            stack += max(0.0, min(end, until) - start) / (end - start) * p.wire_bytes * per_byte
    return stack


def _waits(buckets, preds, deferred, ends, outs, t_cpu, link_free):
    """After backward (t_cpu): in its waits the caller runs the phases left
    for it, bucket by bucket, each once the data of the phase before has
    arrived (waiting for it); then it waits for each bucket in turn, decodes
    it and does its work after the wait (`outs`: the copy out of its fusion
    buffer, error feedback's update). Returns (the time it is done,
    the time it waited); `ends` is updated."""
    waited = 0.0
    for i in sorted(deferred, key=lambda j: buckets[j].ready):
        first, arrived = deferred[i]
        waited += max(0.0, arrived - t_cpu)
        t_cpu = max(t_cpu, arrived)
        t = t_cpu
        for cpu, net in preds[i].segments[first:]:
            t_cpu = t = t + cpu
            t = max(t, link_free) + net
            link_free = t
        ends[i] = t
    t = t_cpu
    for end, p, cp in zip(ends, preds, outs):
        waited += max(0.0, end - t)
        t = max(t, end) + p.after + cp
    return t, waited


def _bucket_passes(buckets, rates, share, fill, feedback):
    """Per bucket, the host's memory passes over it at the memcpy rate of the
    rank's share of a core: replay's write of its gradients (`fill`); the
    copy into (and again out of) its fusion buffer, for a bucket of several
    tensors or, under error feedback, any compressed one (Bucketer::push of
    the residual); error feedback's 1.5 passes before the push and 2.5
    after the wait (step_time)."""
    def copy(b):
        return share * rates.seconds("memcpy/kokkos", b.elements)
    ef = [feedback and b.compressed for b in buckets]
    return ([copy(b) if fill else 0.0 for b in buckets],
            [copy(b) if b.tensors > 1 or e else 0.0 for b, e in zip(buckets, ef)],
            [1.5 * copy(b) if e else 0.0 for b, e in zip(buckets, ef)],
            [2.5 * copy(b) if e else 0.0 for b, e in zip(buckets, ef)])


def step_time(buckets, compute, k, link, rates, cores, strategy, codec, compute_scale=None, sleep=False,
              fill=False, stream=False, rank=4, feedback=False):
    """One training step of a rank among K, replayed from its parts:

      * compute: `compute` times `compute_scale` (by default the cores' share
        max(1, K / cores), or 1 with `sleep`; pass 1 when `compute` was
        measured with K ranks at once);
      * each bucket starts when backward has produced it and the rank's
        host is free: its encoding (and the copy into its fusion buffer) runs
        in that backward hook; its network phases hold the link one bucket
        after the other; a later phase's kernels (scatter-reduce's
        accumulation and requantization, the server's) run at the caller's
        next call: a later bucket's hook during backward, or the wait after
        it;
      * compute on the cores (the default) waits for the hooks: backward is
        as much longer as they take; with `sleep` the compute is a GPU's,
        the hooks run on the host beside it and delay only the host's later
        work (replay's --replay-compute sleep);
      * `fill`: the host zeroes the gradients before forward and writes
        every gradient before its hook (replay's copy of drawn values into
        the gradients), one memory pass each;
      * `stream`: the kernels stream the whole gradient, so each rate is
        taken at the gradient's size (Rates.streaming), not its unit's;
      * `feedback`: error feedback (qsgd::train::FeedbackState's ef or
        ef-unscaled; PowerSGD takes ef-unscaled) on the compressed buckets: in the hook, before the
        push, s += g (8 bytes read and 4 written per element: 1.5 passes at
        the memcpy rate); after the wait, s -= c sent and g *= c (12 read, 8
        written: 2.5 passes); the residual is pushed into the fusion buffer
        and the average copied out of it, whatever the bucket holds; the
        exchange keeps what it sent (PowerSGD's copies; `rank` is
        PowerSGD's r);
      * the host stack copies every byte that moves during backward on the
        rank's cores, so backward is that much longer (with `sleep`, the
        host's work during backward is);
      * after backward the rank waits for each bucket in turn, decodes it
        and copies it out of its fusion buffer; then the update and the rest
        of the step (data, copies);
      * the step is at least the rank's whole CPU work (the compute on the
        cores, kernels, copies, the stack's copies of every byte), whatever
        the timeline says; with compute on the cores, the part of that
        surplus that is the stack's copies of bytes moved after backward
        is time the rank waits (exposed).

    Small tensors (dense buckets) go through the fp32 ring. Returns
    (seconds, parts)."""
    share = share_factor(k, cores)
    if stream:
        rates = rates.streaming(sum(b.elements for b in buckets))
    c = (1.0 if sleep else share) if compute_scale is None else compute_scale
    fwd, bwd, upd, other = (c * x for x in (compute.forward, compute.backward, compute.update, compute.other))
    zero = share * rates.seconds("memcpy/kokkos", sum(b.elements for b in buckets)) if fill else 0.0
    other += zero  # on the host, before forward
    preds = []
    for b in buckets:
        if b.compressed:
            preds.append(exchange(strategy, codec, b.elements, k, link, rates, cores, matrices=b.matrices, rank=rank,
                                  feedback=feedback))
        else:
            preds.append(exchange("allreduce", "fp32", b.elements, k, link, rates, cores))

    fills, copies, ef_before, ef_after = _bucket_passes(buckets, rates, share, fill, feedback)
    # The caller's calls into the exchanges during backward: a hook as each
    # bucket's gradients are pushed.
    provisional_end = fwd + bwd + sum(p.before for p in preds)
    calls = sorted(fwd + b.ready * bwd for b in buckets)
    hooks = 0.0   # the hooks' time so far (compute on the cores waits for it)
    host = fwd    # when the rank's host is next free (backward starts after forward)
    link_free = 0.0
    starts, ends = [0.0] * len(buckets), [0.0] * len(buckets)
    deferred = {}  # bucket -> (index of the first phase left for the wait, time its data arrived)
    for i in sorted(range(len(buckets)), key=lambda j: buckets[j].ready):
        p = preds[i]
        host = max(host + fills[i], fwd + buckets[i].ready * bwd + (0.0 if sleep else hooks))
        host += ef_before[i] + copies[i] + p.before
        hooks += ef_before[i] + copies[i] + p.before
        t = starts[i] = max(host, link_free)
        for j, (cpu, net) in enumerate(p.segments):
            if j > 0:
                lag = 0.0 if sleep else hooks
                call = next((x + lag for x in calls if t <= x + lag < provisional_end + lag), None)
                if call is None:
                    deferred[i] = (j, t)
                    break
                t = call + cpu
                hooks += cpu
                if sleep:
                    host = max(host, t)
            t = max(t, link_free) + net
            link_free = t
        ends[i] = t
    busy = sum(fills) + hooks   # the host's work during backward
    backward_end = max(fwd + bwd, host) if sleep else max(fwd + bwd + hooks, host)
    stack = _stack_during(preds, starts, ends, backward_end, link.gamma * share)
    backward_end = max(fwd + bwd, host + stack) if sleep else backward_end + stack
    t, waited = _waits(buckets, preds, deferred, ends, [c + e for c, e in zip(copies, ef_after)], backward_end,
                       link_free)
    timeline = t + upd + other
    # The rank's cores also bound the step: every kernel, the compute on
    # them, and the host stack's copies of every byte run on them, whether
    # or not the timeline above found the network free.
    cpu_total = (other if sleep else fwd + bwd + upd + other) + busy + sum(copies) + sum(ef_after) \
        + sum(p.after + p.inside for p in preds) \
        + sum(cpu for i in deferred for cpu, _ in preds[i].segments[deferred[i][0]:]) \
        + sum(p.wire_bytes for p in preds) * link.gamma * share
    total = max(timeline, cpu_total)
    if not sleep and cpu_total > timeline:
        # The cores bound the step and compute is on them: what the
        # timeline could not absorb is the stack's copies of bytes that
        # moved after backward, which the rank waits for; the rest of the
        # surplus is its own kernels.
        waited += min(cpu_total - timeline, max(0.0, sum(p.wire_bytes for p in preds) * link.gamma * share - stack))
    return total, {"cpu_bound": cpu_total > timeline, "timeline_s": timeline, "forward_s": fwd, "backward_s": bwd, "hooks_s": hooks,
                   "fill_s": sum(fills), "zero_s": zero, "copies_s": 2 * sum(copies),
                   "feedback_s": sum(ef_before) + sum(ef_after), "stack_s": stack, "exposed_s": waited,
                   "after_s": sum(p.after for p in preds), "update_s": upd,
                   "coding_s": sum(p.before + p.after + sum(cpu for cpu, _ in p.segments) for p in preds), "other_s": other, "compute_share": c,
                   "wire_bytes": sum(p.wire_bytes for p in preds)}


# ---------------------------------------------------------------------------
# Projection: GPU nodes from a parameter file (benchmarks/model/params/).

PROJECTED = (("fp32 ring", "allreduce", "fp32", None), ("bf16 ring", "allreduce16", "bf16", None),
             ("scatter-reduce 2-bit", "scatter-reduce", "fixed", "2"),
             ("scatter-reduce 4-bit", "scatter-reduce", "fixed", "4"),
             ("scatter-reduce 8-bit", "scatter-reduce", "fixed", "8"),
             ("allgather 4-bit", "allgather", "fixed", "4"))


def param(params, key):
    """The value of one entry of a parameter file ({"value": ..., "source": ...})."""
    if key not in params:
        raise ModelError("parameter file: no '%s'" % key)
    entry = params[key]
    if not isinstance(entry, dict) or "value" not in entry or not entry.get("source"):
        raise ModelError("parameter file: '%s' needs a value and a source" % key)
    return entry["value"]


class Cluster:
    """The GPU machine a parameter file describes."""

    def __init__(self, params):
        self.gpus_per_node = int(param(params, "gpus_per_node"))
        self.intra = Link(param(params, "intra_node_alpha_s"), 1e-9 / param(params, "intra_node_GBps"),
                          param(params, "host_stack_s_per_byte"), 0, "NVLink")
        self.inter_alpha = param(params, "inter_node_alpha_s")
        self.gamma = param(params, "host_stack_s_per_byte")
        hbm = param(params, "hbm_GBps") * 1e9
        fractions = param(params, "kernel_fraction_of_hbm")
        self.rates = {b: Rates({k: f * hbm for k, f in fractions.items()}, {"fixed": float(v)}, "parameter file")
                      for b, v in param(params, "bits_per_dim").items()}
        self.plain = Rates({k: f * hbm for k, f in fractions.items()}, {}, "parameter file")
        flops = param(params, "peak_TFLOPs") * 1e12 * param(params, "compute_efficiency")
        self.flops_per_param = param(params, "flops_per_parameter_per_sample")
        self.flops = flops
        self.hbm = hbm
        self.update_bytes = param(params, "update_bytes_per_parameter")
        self.fusion = int(param(params, "fusion_bytes"))

    def link(self, k, gbit):
        """A flat ring over K GPUs runs at its slowest hop: NVLink inside one
        node, the NIC (one per GPU) once it spans nodes."""
        if k <= self.gpus_per_node:
            return self.intra
        return Link(self.inter_alpha, 8.0 / (gbit * 1e9), self.gamma, 0, "%g Gbit/s" % gbit)

    def workload(self, parameters, batch, name=""):
        """A model of `parameters` parameters as the parameter file sizes it:
        forward 2 FLOPs per parameter and sample, backward the rest, the
        update bound by memory; buckets of the fusion size, ready at even
        steps of backward (layers of equal cost, in reverse order)."""
        fwd = 2.0 * parameters * batch / self.flops
        bwd = (self.flops_per_param - 2.0) * parameters * batch / self.flops
        compute = Compute(fwd, bwd, self.update_bytes * parameters / self.hbm, 0.0)
        per = self.fusion // 4
        n = max(1, int(math.ceil(parameters / float(per))))
        buckets = [Bucket(min(per, parameters - i * per), True, (i + 1) / float(n)) for i in range(n)]
        return Workload(name or str(parameters), parameters, batch, compute, lambda align: buckets,
                        "%g FLOP per parameter and sample at %g TFLOP/s" % (self.flops_per_param, self.flops / 1e12))

    def described(self, desc):
        """A described model (Description) on this machine: its tensors
        bucketed as the Bucketer does at the fusion size, its phase times
        rescaled to this machine's FLOP rate where they were derived from
        FLOPs at another rate, taken as they are where measured."""
        scale, how = 1.0, "as described (%s on %s)" % (desc.times_source, desc.device)
        if desc.times_source == "flops" and desc.flops_rate:
            scale = desc.flops_rate / self.flops
            how = "derived from FLOPs at %g TFLOP/s, rescaled to %g" % (desc.flops_rate / 1e12, self.flops / 1e12)
        return Workload(desc.model, desc.parameters(), desc.batch, desc.step_compute(scale),
                        lambda align: desc.buckets(self.fusion, 10000, align), how)


class Workload:
    """What one step of a model brings to a projection: its compute and its
    buckets for a codec whose quantization buckets pad tensors to `align`
    elements (buckets(align))."""

    def __init__(self, name, parameters, batch, compute, buckets, compute_source=""):
        self.name, self.parameters, self.batch = name, parameters, batch
        self.compute = compute
        self.compute_source = compute_source
        self._buckets, self._plans = buckets, {}

    def buckets(self, align):
        if align not in self._plans:
            self._plans[align] = self._buckets(align)
        return self._plans[align]


PROJECTED_D = 512   # the quantization bucket size d of the projected codecs (bits_per_dim was measured at it)


def project_step(cluster, work, k, gbit, strategy, codec, bits):
    """One step of `work` (a Workload) on K GPUs of the cluster at `gbit`
    Gbit/s per GPU between nodes."""
    rates = cluster.rates[bits] if bits else cluster.plain
    return step_time(work.buckets(PROJECTED_D if bits else 1), work.compute, k, cluster.link(k, gbit), rates,
                     cores=k, strategy=strategy, codec=codec, compute_scale=1.0)


PAYS = 0.01   # compression "pays" while it makes the step at least 1% faster


def break_even(cluster, work, k, strategy, codec, bits, ref, lo=0.01, hi=1.0e5):
    """The link rate (Gbit/s) above which `strategy` stops making the step at
    least 1% faster than the reference configuration `ref` (strategy, codec):
    None when it pays at every rate up to `hi`, 0 when at none down to `lo`."""
    return pays_below(lambda g: project_step(cluster, work, k, g, ref[0], ref[1], None)[0],
                      lambda g: project_step(cluster, work, k, g, strategy, codec, bits)[0], lo, hi)


def sign_verdict(predicted_speedup, measured_speedups):
    """A predicted break-even sign against repeated measurements of the same
    speedup: "agrees" when every measurement is on the predicted side of
    1 + PAYS (pays or not), "differs" when every one is on the other side,
    "within noise" when they fall on both (the runs' spread is larger than
    the difference the sign asks about)."""
    if not measured_speedups:
        raise ValueError("no measured speedup to judge the sign by")
    pays = predicted_speedup > 1.0 + PAYS
    above = sum(m > 1.0 + PAYS for m in measured_speedups)
    if above == (len(measured_speedups) if pays else 0):
        return "agrees"
    if above == (0 if pays else len(measured_speedups)):
        return "differs"
    return "within noise"


def pays_below(ref_time, time, lo=0.01, hi=1.0e5):
    """The link rate (Gbit/s) below which time(rate) is at least 1% under
    ref_time(rate): None when it is at every rate up to `hi`, 0 when at none
    down to `lo`. Bisection on a log scale (22 halvings over 1e-2..1e5: a
    relative precision of 4e-6, far below what the table prints)."""
    def gain(g):
        return ref_time(g) / time(g) - 1.0 - PAYS
    if gain(hi) > 0:
        return None
    if gain(lo) <= 0:
        return 0.0
    for _ in range(22):
        mid = math.sqrt(lo * hi)
        if gain(mid) > 0:
            lo = mid
        else:
            hi = mid
    return math.sqrt(lo * hi)
