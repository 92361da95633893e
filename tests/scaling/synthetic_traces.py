"""Synthetic training traces (schema 2, as train/src/trace.cpp and ddp-yardstick
write them) and the check helpers of the tests of benchmarks/scaling's tools
(test_qsgd_summary.py, test_qsgd_plots.py). Every step of a trace is alike.
Debian's python3-h5py and python3-numpy under /usr/bin/python3: a missing
module fails the importing test."""
import json

try:
    import h5py
    import numpy as np
except ImportError as e:
    raise SystemExit("FAIL: %s (the scaling tests need Debian's python3-h5py and python3-numpy under "
                     "/usr/bin/python3)" % e)

FAILURES = []


def check(cond, what):
    """Records a failed check (and prints it); returns cond."""
    if not cond:
        FAILURES.append(what)
        print("FAIL: " + what)
    return cond


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def write_trace(path, cfg, K, steps, link="1gbit", epoch_time=1.0, step_time=0.1, exposed=0.002,
                in_flight=0.004, wire=100000, bits=None, phase=0.01, zero_phases=(), evals=None,
                eval_steps=None, epoch_accuracy=0.9, buckets=None, arrive=None, host_cpus=None):
    """One trace of `steps` steps (one epoch) at K ranks. exposed, in_flight: per
    rank, a scalar for every rank or a list of K; phase: every other phase's
    seconds, 0 for those in zero_phases; bits: bits per dimension (default 32
    for fp32, 16 for bf16, 6 otherwise); evals: [(train_time, accuracy)] at
    eval_steps (default 1, 2, ...); buckets: (count, done) where done is the
    time since the step began at which every bucket's network phase ends
    (None: inside the step), for the suite's runs only; arrive: a list of K
    seconds added to each rank's bucket times (when it reached the exchange);
    host_cpus: the CPUs of the one host (default K: a core per rank)."""
    def per_rank(v):
        return np.tile(np.asarray(v if isinstance(v, list) else [v] * K, dtype=float), (steps, 1))
    with h5py.File(path, "w") as f:
        a = f.attrs
        a["schema_version"] = 2
        a["ranks"] = K
        a["config"] = json.dumps(cfg)
        a["link_rate"] = link
        a["steps_per_epoch"] = str(steps)
        a["steps_per_full_epoch"] = str(steps)
        a["complete"] = "true"
        a["hosts"] = json.dumps(["synthetic-host"] * K)
        a["host_cpus"] = json.dumps({"synthetic-host": K if host_cpus is None else host_cpus})
        if cfg.get("peer"):
            a["comm_exposed_method"] = "backward(DDP) - median backward without DDP"
        else:
            a["kokkos_execution_space"] = "Serial"
        s = f.create_group("steps")
        s["step"] = np.arange(steps, dtype=np.int64)
        s["epoch"] = np.zeros(steps, dtype=np.int32)
        for ph in ("forward", "backward", "quantize", "encode", "requantize", "decode", "update"):
            s[ph] = per_rank(0.0 if ph in zero_phases else phase)
        s["comm_exposed"] = per_rank(exposed)
        s["comm_hidden"] = per_rank(float("nan") if cfg.get("peer") else in_flight)
        s["step_time"] = per_rank(step_time)
        s["wire_bytes"] = np.full((steps, K), wire, dtype=np.uint64)
        if bits is None:
            bits = {"fp32": 32.0, "bf16": 16.0}.get(cfg["codec"], 6.0)
        s["bits_per_dim"] = per_rank(bits)
        s["loss"] = per_rank(1.0)
        if buckets and not cfg.get("peer"):
            count, done_at = buckets
            b = f.create_group("buckets")
            start = np.zeros((steps, K, count))
            for j in range(count):
                start[:, :, j] = 0.02 + 0.01 * j + np.asarray(arrive or [0.0] * K, dtype=float)
            b["start"] = start
            b["posted"] = start + 0.001
            b["done"] = start + 0.03 if done_at is None else np.full_like(start, done_at)
            b["count"] = np.full((steps, K), count, dtype=np.int32)
        e = f.create_group("epochs")
        e["epoch"] = np.zeros(1, dtype=np.int32)
        e["steps"] = np.array([steps], dtype=np.int64)  # a whole epoch: its time is measured
        e["epoch_time"] = np.array([epoch_time])
        e["train_loss"] = np.array([1.0])
        e["test_loss"] = np.array([0.5])
        e["test_accuracy"] = np.array([epoch_accuracy])
        ev = evals or [(epoch_time, epoch_accuracy)]
        v = f.create_group("evals")
        v["step"] = np.array(eval_steps or range(1, len(ev) + 1), dtype=np.int64)
        v["epoch"] = np.zeros(len(ev), dtype=np.int32)
        v["train_time"] = np.array([t for t, _ in ev])
        v["test_loss"] = np.full(len(ev), 0.5)
        v["test_accuracy"] = np.array([acc for _, acc in ev])


def verdict(test, target):
    """The test's exit status: 1 after naming how many checks failed, else 0."""
    if FAILURES:
        print("%s: %d check(s) failed against %s" % (test, len(FAILURES), target))
        return 1
    print("%s: PASS (%s)" % (test, target))
    return 0
