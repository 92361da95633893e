"""Reader of qsgd-peer-inputs files: what qsgd-train's MLP starts from, for a peer.

The file (schema qsgd.peer-inputs/1, benchmarks/train/peer_inputs.cpp) holds
one JSON header line, the model's initial float32 parameters in its layout,
and every epoch's permutation of the training set (uint32). A peer that loads
it standardizes its pixels with the same constants, starts from the same
parameters and visits the same samples in the same order, sharded the same
way, as qsgd-train with the same --mlp-widths and --seed.

Every size is checked against the header and the file's length before
anything is read into memory beyond the header line (at most 1 MiB).
"""
import json
import os

import numpy as np

SCHEMA = "qsgd.peer-inputs/1"
MAX_HEADER = 1 << 20


class PeerInputsError(ValueError):
    """A peer-inputs file that is missing, malformed or not for this run."""


class PeerInputs:
    def __init__(self, path):
        self.path = path
        try:
            size = os.path.getsize(path)
            with open(path, "rb") as f:
                line = f.readline(MAX_HEADER + 1)
        except OSError as e:
            raise PeerInputsError("cannot read %s: %s (make it with qsgd-peer-inputs)" % (path, e))
        if not line.endswith(b"\n"):
            raise PeerInputsError("%s: no header line within %d bytes" % (path, MAX_HEADER))
        try:
            h = json.loads(line)
        except ValueError as e:
            raise PeerInputsError("%s: header is not JSON: %s" % (path, e))
        if not isinstance(h, dict) or h.get("schema") != SCHEMA:
            raise PeerInputsError("%s: schema %r, expected %r" % (path, h.get("schema") if isinstance(h, dict)
                                                                    else None, SCHEMA))
        if h.get("byte_order") != "little":
            raise PeerInputsError("%s: byte order %r is not little" % (path, h.get("byte_order")))
        try:
            self.widths = [int(w) for w in h["widths"]]
            self.seed = int(h["seed"])
            self.samples = int(h["samples"])
            self.epochs = int(h["epochs"])
            self.parameters = int(h["parameters"])
            self.mean = np.float32(h["mean"])
            self.stddev = np.float32(h["stddev"])
            self.tensors = [(str(t["name"]), [int(d) for d in t["shape"]], int(t["offset"]), int(t["size"]))
                            for t in h["tensors"]]
        except (KeyError, TypeError, ValueError) as e:
            raise PeerInputsError("%s: header field missing or malformed: %s" % (path, e))
        self.header = h
        self.params_at = len(line)
        self.order_at = self.params_at + 4 * self.parameters
        want = self.order_at + 4 * self.epochs * self.samples
        if size != want:
            raise PeerInputsError("%s: %d bytes, the header describes %d" % (path, size, want))
        for name, shape, offset, n in self.tensors:
            if int(np.prod(shape)) != n or offset < 0 or offset + n > self.parameters:
                raise PeerInputsError("%s: tensor %s (shape %s, offset %d) does not fit %d parameters"
                                      % (path, name, shape, offset, self.parameters))

    def check_run(self, widths, seed, epochs):
        """PeerInputsError unless the file is for these widths and seed and covers the epochs."""
        if list(widths) != self.widths or seed != self.seed:
            raise PeerInputsError("%s is for MLP %s seed %d, the run is MLP %s seed %d"
                                  % (self.path, "-".join(map(str, self.widths)), self.seed,
                                     "-".join(map(str, widths)), seed))
        if epochs > self.epochs:
            raise PeerInputsError("%s holds the order of %d epoch(s), the run may train %d"
                                  % (self.path, self.epochs, epochs))

    def params(self):
        """{tensor name: float32 array of its shape} (the initial parameters)."""
        flat = np.fromfile(self.path, dtype="<f4", count=self.parameters, offset=self.params_at)
        return {name: flat[offset:offset + n].reshape(shape) for name, shape, offset, n in self.tensors}

    def order(self, epoch):
        """The permutation of the training set for an epoch (int64 array of `samples`)."""
        if not 0 <= epoch < self.epochs:
            raise PeerInputsError("%s: no order for epoch %d (it holds %d)" % (self.path, epoch, self.epochs))
        perm = np.fromfile(self.path, dtype="<u4", count=self.samples,
                           offset=self.order_at + 4 * epoch * self.samples).astype(np.int64)
        if perm.size != self.samples or perm.max(initial=0) >= self.samples:
            raise PeerInputsError("%s: epoch %d's order is not a permutation of %d samples"
                                  % (self.path, epoch, self.samples))
        return perm

    def shard(self, epoch, rank, ranks):
        """Rank's positions of an epoch, as qsgd-train's sampler: [r q, (r + 1) q), q = n // K."""
        q = self.samples // ranks
        return self.order(epoch)[rank * q:(rank + 1) * q]

    def standardize(self, pixels):
        """uint8 pixels [n, 784] -> float32 features, as qsgd-train computes them (same float32 operations)."""
        inv = np.float32(1.0) / self.stddev
        return (pixels.astype(np.float32) / np.float32(255.0) - self.mean) * inv
