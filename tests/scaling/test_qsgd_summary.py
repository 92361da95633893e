#!/usr/bin/python3
"""qsgd-summary on synthetic traces: baselines of the same seed, the bounded
hidden figure, the link bound check.

usage: test_qsgd_summary.py [PATH/TO/qsgd-summary]
Builds tiny schema-2 traces (docs/traces.md, what train/src/trace.cpp and
ddp-yardstick write) with h5py in a temporary directory, runs qsgd-summary on
them (--json and the text table) and checks every figure against values
worked out by hand. Exits 1 listing every failed check; h5py missing is a
failure, not a skip."""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
SUMMARY = (sys.argv[1] if len(sys.argv) > 1 else
           os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "scaling", "qsgd-summary"))

sys.path.insert(0, HERE)
from synthetic_traces import FAILURES, check, verdict, close, np, write_trace as write_synthetic  # noqa: E402


# ---- synthetic traces --------------------------------------------------------

K = 2
STEPS = 5                # one epoch of 5 steps; step 0 is the warm-up qsgd-summary drops
LINK_BPS = 1e9 / 8       # "1gbit"
WIRE = 1_250_000         # bytes received per step and rank: 0.01 s on 1 Gbit/s


def config(seed, strategy, codec, s=16, ddp=False):
    if ddp:  # ddp-yardstick's fields (widths, no error_feedback, target null)
        return {"model": "mlp", "widths": [784, 64, 10], "dataset": "synthetic", "batch_per_rank": 32,
                "strategy": "ddp", "codec": codec, "naming": "", "s": None, "d": None, "lr": 0.05,
                "momentum": 0.9, "seed": seed, "bucket_mb": 25.0, "peer": "pytorch-ddp-gloo",
                "hook": "none (DDP allreduce, fp32)", "epochs": 1, "max_steps": 0, "eval_every": 1,
                "target_accuracy": None}
    naming = {"fp32": "fp32", "bf16": "bf16"}.get(codec, "4bit(paper,s=%d)" % s)
    return {"model": "mlp", "mlp_widths": [784, 64, 10], "dataset": "synthetic", "data_dir": "/data/" + str(seed),
            "batch_per_rank": 32, "epochs": 1, "max_steps": 0, "lr": 0.05, "momentum": 0.9, "weight_decay": 0.0,
            "seed": seed, "strategy": strategy, "codec": codec, "s": s, "d": 512, "norm": "max", "naming": naming,
            "fusion_mb": 8, "layer_filter": 10000, "overlap": True, "error_feedback": "none", "transport": "ring",
            "progress": "thread", "poll_us": 100, "synthetic_backward_ms": 0.0, "eval_every": 1,
            "target_accuracy": 0.0, "label": "test seed %d" % seed}


def write_trace(path, cfg, link="1gbit", epoch_time=1.0, tta=None, exposed=0.002, in_flight=0.004,
                wire=WIRE, step_time=0.1, arrive=None, host_cpus=None):
    """One trace of K ranks (synthetic_traces.write_trace). tta: the training
    time at which the evaluations (steps 2 and 4) reach accuracy 0.9 (they
    read 0.5 before); without it they read 0.5 and 0.6."""
    evals = [(tta / 2, 0.5), (tta, 0.9)] if tta else [(epoch_time / 2, 0.5), (epoch_time, 0.6)]
    write_synthetic(path, cfg, K, STEPS, link=link, epoch_time=epoch_time, step_time=step_time, exposed=exposed,
                    in_flight=in_flight, wire=wire, evals=evals, eval_steps=[2, 4], epoch_accuracy=0.9,
                    buckets=(2, None) if arrive else None, arrive=arrive, host_cpus=host_cpus)


def build(d):
    """The trace set and what each name's figures must be."""
    t = {}
    # Seed 1 and seed 2 baselines differ: seed 2's fp32 is 20% faster.
    for seed, fp32, bf16, q4, tta_fp32, tta_bf16, tta_q4 in ((1, 100.0, 60.0, 40.0, 90.0, 45.0, 30.0),
                                                              (2, 80.0, 50.0, 40.0, 70.0, 50.0, 35.0)):
        t["fp32-s%d" % seed] = (config(seed, "allreduce", "fp32"), dict(epoch_time=fp32, tta=tta_fp32))
        t["bf16-s%d" % seed] = (config(seed, "allreduce16", "bf16"), dict(epoch_time=bf16, tta=tta_bf16))
        # Rank 0: in flight 0.05 s against 0.01 s of link time and 0.002 s exposed -> hidden clamped to 0.008;
        # rank 1: in flight 0.004 s, under the bound -> hidden 0.004.
        t["q4-s%d" % seed] = (config(seed, "scatter-reduce", "fixed"),
                              dict(epoch_time=q4, tta=tta_q4, exposed=0.002, in_flight=[0.05, 0.004]))
    # Seed 3 has no baseline at all: no ratio, never seed 1's or 2's.
    t["q4-s3"] = (config(3, "scatter-reduce", "fixed"), dict(epoch_time=40.0, tta=32.0))
    # PyTorch DDP (ddp-yardstick's config fields) of seed 2: paired with seed 2's fp32.
    t["ddp-s2"] = (config(2, "ddp", "fp32", ddp=True), dict(epoch_time=160.0, tta=140.0, exposed=0.05))
    # Exposed 0.02 s against 0.01 s of link time: fails the 1.05 bound (exposed alone).
    t["slow-s4"] = (config(4, "allreduce", "fp32"), dict(epoch_time=10.0, exposed=0.02, in_flight=0.01))
    # Rank 1 reaches the exchange 0.03 s after rank 0, which waits for it (exposed 0.035 s: 0.03 for
    # rank 1, 0.005 for the link); rank 0's step is the longer one. The check takes rank 1:
    # 0.005 + hidden min(0.01, 0.01 - 0.005) = 0.01 of 0.01 s.
    t["skew-s5"] = (config(5, "allreduce", "fp32"), dict(epoch_time=10.0, exposed=[0.035, 0.005], in_flight=0.01,
                                                        step_time=[0.1001, 0.1], arrive=[0.0, 0.03]))
    # As slow-s4 on a host of one CPU for both ranks: not checked (a rank waits for the core).
    t["shared-s6"] = (config(6, "allreduce", "fp32"), dict(epoch_time=10.0, exposed=0.02, in_flight=0.01,
                                                          host_cpus=1))
    # No link: hidden n/a, in flight still reported.
    t["local-s1"] = (config(1, "allreduce", "fp32"), dict(link="local", epoch_time=10.0, in_flight=0.03))
    for name, (cfg, kw) in t.items():
        write_trace(os.path.join(d, name + ".h5"), cfg, **kw)
    return t


# ---- running qsgd-summary --------------------------------------------------------

def run(*args):
    p = subprocess.run([sys.executable, SUMMARY] + list(args), capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        print(p.stdout + p.stderr)
    check(p.returncode == 0, "qsgd-summary %s exits 0 (got %d)" % (" ".join(args), p.returncode))
    return p.stdout, p.stderr


def parse_table(text):
    """The first table of the text output: a list of {header: cell}, the
    columns cut where the dashes under the header are."""
    lines = text.splitlines()
    sep = next(i for i, ln in enumerate(lines) if ln.startswith("-"))
    spans, i, ln = [], 0, lines[sep]
    while i < len(ln):
        if ln[i] == "-":
            j = i
            while j < len(ln) and ln[j] == "-":
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    head = [lines[sep - 1][a:b].strip() for a, b in spans]
    rows = []
    for line in lines[sep + 1:]:
        if not line.strip():
            break
        rows.append({h: line[a:b].strip() for h, (a, b) in zip(head, spans)})
    return head, rows


def check_speedups(g):
    # --- speedups pair each run with its own seed's baselines ---
    want = {  # name: (speedup, x bf16, tta x, tta x bf16)
        "fp32-s1": (1.0, 0.6, 1.0, 0.5), "fp32-s2": (1.0, 0.625, 1.0, 50 / 70),
        "bf16-s1": (100 / 60, 1.0, 2.0, 1.0), "bf16-s2": (1.6, 1.0, 1.4, 1.0),
        "q4-s1": (2.5, 1.5, 3.0, 1.5), "q4-s2": (2.0, 1.25, 2.0, 50 / 35),
        "ddp-s2": (0.5, 50 / 160, 0.5, 50 / 140),
    }
    for name, (sp, spb, tt, ttb) in want.items():
        for key, v in (("speedup", sp), ("speedup_bf16", spb), ("tta_speedup", tt), ("tta_speedup_bf16", ttb)):
            check(close(g(name, key), v), "%s: %s = %.4f against its own seed's baseline (got %s)"
                  % (name, key, v, g(name, key)))
    # The old pairing (the first fp32 row for every seed) gives seed 2's 4-bit 100 / 40 = 2.5.
    check(not close(g("q4-s2", "speedup"), 2.5), "q4-s2: speedup is not against seed 1's fp32 (100/40 = 2.5)")
    for key in ("speedup", "speedup_bf16", "tta_speedup", "tta_speedup_bf16"):
        check(g("q4-s3", key) is None, "q4-s3: no baseline of its seed: %s is null (got %s)"
              % (key, g("q4-s3", key)))
    # slow-s4 is its own fp32 baseline; seed 4 has no bf16 run.
    check(close(g("slow-s4", "speedup"), 1.0) and g("slow-s4", "speedup_bf16") is None,
          "slow-s4: speedup 1.0 against itself, none against bf16 (got %s, %s)"
          % (g("slow-s4", "speedup"), g("slow-s4", "speedup_bf16")))
    check(g("q4-s2", "baseline") and g("q4-s2", "baseline").endswith("fp32-s2.h5"),
          "q4-s2: baseline is fp32-s2.h5 (got %s)" % g("q4-s2", "baseline"))



def check_configs(doc):
    # --- per configuration: ratios per seed, then median and min-max ---
    configs = doc.get("configs") or []
    q4 = [c for c in configs if c["strategy"] == "scatter-reduce" and c["runs"] == 3]
    check(len(q4) == 1, "one scatter-reduce configuration of 3 runs in configs (got %d)" % len(q4))
    if q4:
        c = q4[0]
        check(close(c["speedup"], 2.25) and close(c["speedup_min"], 2.0) and close(c["speedup_max"], 2.5)
              and c["speedup_n"] == 2,
              "scatter-reduce: speedup median 2.25 [2.0-2.5] over the 2 seeds with a baseline "
              "(got %s [%s-%s] n=%s)"
              % (c["speedup"], c["speedup_min"], c["speedup_max"], c["speedup_n"]))
        check(close(c["tta_speedup"], 2.5) and close(c["tta_speedup_min"], 2.0)
              and close(c["tta_speedup_max"], 3.0),
              "scatter-reduce: tta x median 2.5 [2.0-3.0] (got %s [%s-%s])"
              % (c["tta_speedup"], c["tta_speedup_min"], c["tta_speedup_max"]))
        check(close(c["tta_speedup_bf16"], (1.5 + 50 / 35) / 2), "scatter-reduce: tta x bf16 median of 1.5 and "
              "50/35 (got %s)" % c["tta_speedup_bf16"])



def check_in_flight(g, err):
    # --- in flight, hidden, other ---
    # q4: per step, rank 0 in flight 0.05, hidden min(0.05, 0.01 - 0.002) = 0.008; rank 1 0.004 and 0.004.
    for name in ("q4-s1", "q4-s2"):
        check(close(g(name, "in_flight_fraction"), (0.05 + 0.004) / 0.2),
              "%s: in-flight fraction 0.27 = the trace's comm_hidden (got %s)"
              % (name, g(name, "in_flight_fraction")))
        check(close(g(name, "hidden_fraction"), (0.008 + 0.004) / 0.2),
              "%s: hidden fraction 0.06, clamped to link time - exposed on rank 0 (got %s)"
              % (name, g(name, "hidden_fraction")))
        check(close(g(name, "other_in_flight_fraction"), 0.042 / 0.2),
              "%s: other in flight 0.21 = in flight - hidden (got %s)"
              % (name, g(name, "other_in_flight_fraction")))
        check(close(g(name, "hidden"), (0.008 + 0.004) / 2) and close(g(name, "link_time"), 0.01),
              "%s: hidden 0.006 s and link time 0.01 s per step (mean over ranks) (got %s, %s)"
              % (name, g(name, "hidden"), g(name, "link_time")))
    check(g("local-s1", "hidden_fraction") is None and g("local-s1", "other_in_flight_fraction") is None,
          "local-s1: no link: hidden and other are n/a (got %s, %s)"
          % (g("local-s1", "hidden_fraction"), g("local-s1", "other_in_flight_fraction")))
    check(close(g("local-s1", "in_flight_fraction"), 0.3),
          "local-s1: in flight still reported (got %s)" % g("local-s1", "in_flight_fraction"))
    check(g("ddp-s2", "hidden_fraction") is None and g("ddp-s2", "comm_estimated") is True,
          "ddp-s2: hidden n/a, exposed an estimate (got %s, %s)"
          % (g("ddp-s2", "hidden_fraction"), g("ddp-s2", "comm_estimated")))

    # --- the link bound: (exposed + hidden) of the last rank to arrive <= 1.05 x link time ---
    check(close(g("q4-s1", "link_bound"), 1.0) and g("q4-s1", "link_bound_violated") is False,
          "q4-s1: link bound 1.0 (0.002 + 0.008 of 0.01 s), passes (got %s, %s)"
          % (g("q4-s1", "link_bound"), g("q4-s1", "link_bound_violated")))
    check(close(g("slow-s4", "link_bound"), 2.0) and g("slow-s4", "link_bound_violated") is True,
          "slow-s4: link bound 2.0 (exposed 0.02 s of 0.01 s), fails (got %s, %s)"
          % (g("slow-s4", "link_bound"), g("slow-s4", "link_bound_violated")))
    warns = [ln for ln in err.splitlines() if "warning" in ln]
    check(len(warns) == 1 and "slow-s4.h5" in warns[0],
          "one warning, naming slow-s4.h5 (got %s)" % warns)
    check(g("local-s1", "link_bound_violated") is None and g("ddp-s2", "link_bound_violated") is None,
          "no link bound check without a link nor for DDP")
    check(close(g("skew-s5", "link_bound"), 1.0) and g("skew-s5", "link_bound_violated") is False,
          "skew-s5: the check takes rank 1, the last to arrive: 1.0, passes (got %s, %s)"
          % (g("skew-s5", "link_bound"), g("skew-s5", "link_bound_violated")))
    check(close(g("skew-s5", "peer_wait"), 0.015),
          "skew-s5: peer wait 0.03 s on rank 0, 0 on rank 1: 0.015 s per rank (got %s)" % g("skew-s5", "peer_wait"))
    check(g("q4-s1", "peer_wait") is None,
          "q4-s1: no buckets in the trace, no peer wait (got %s)" % g("q4-s1", "peer_wait"))
    check(close(g("shared-s6", "link_bound"), 2.0) and g("shared-s6", "link_bound_violated") is None
          and close(g("shared-s6", "ranks_per_core"), 2.0),
          "shared-s6: two ranks on one CPU: ratio 2.0 reported, not checked (got %s, %s, %s)"
          % (g("shared-s6", "link_bound"), g("shared-s6", "link_bound_violated"), g("shared-s6", "ranks_per_core")))



def check_ceiling():
    """With the sweep's measured link ceiling beside a trace
    (calibration/ceiling-1gbit-K2.json, 0.0625 GB/s: half the nominal rate),
    link time doubles, hidden is bounded by it, and the link bound is judged
    against it: slow-s4's exposed 0.02 s is then exactly its link time."""
    with tempfile.TemporaryDirectory(prefix="qsgd-summary-ceiling.") as d:
        write_trace(os.path.join(d, "slow.h5"), config(4, "allreduce", "fp32"), epoch_time=10.0, exposed=0.02,
                    in_flight=0.01)
        write_trace(os.path.join(d, "q4.h5"), config(4, "scatter-reduce", "fixed"), epoch_time=5.0, exposed=0.002,
                    in_flight=[0.05, 0.004])
        os.makedirs(os.path.join(d, "calibration"))
        with open(os.path.join(d, "calibration", "ceiling-1gbit-K2.json"), "w") as f:
            json.dump({"ceiling": {"GBps": LINK_BPS / 2 / 1e9}}, f)
        out, err = run("--json", d)
        runs = {os.path.basename(r["file"])[:-3]: r for r in json.loads(out)["runs"]}
        for r in runs.values():
            check(close(r["link_ceiling_Bps"], LINK_BPS / 2) and close(r["link_time"], 0.02),
                  "%s: link time at the measured ceiling, 0.02 s (got %s at %s B/s)"
                  % (r["file"], r["link_time"], r["link_ceiling_Bps"]))
        check(close(runs["slow"]["link_bound"], 1.0) and runs["slow"]["link_bound_violated"] is False,
              "slow: exposed 0.02 s of 0.02 s at the ceiling passes (got %s)" % runs["slow"]["link_bound"])
        # q4 rank 0: hidden min(0.05, 0.02 - 0.002) = 0.018; rank 1: 0.004.
        check(close(runs["q4"]["hidden"], (0.018 + 0.004) / 2),
              "q4: hidden bounded by the link time at the ceiling (got %s)" % runs["q4"]["hidden"])
        check("warning" not in err, "no link-bound warning at the ceiling (got %s)" % err.strip())
        # measure.sh's layout: the ceiling at the top, the traces in steps/round-R/; a ceiling
        # beside the traces (calibration/) comes first.
        top = os.path.join(d, "set")
        os.makedirs(os.path.join(top, "steps", "round-1"))
        with open(os.path.join(top, "ceiling-1gbit-K2.json"), "w") as f:
            json.dump({"ceiling": {"GBps": LINK_BPS / 4 / 1e9}}, f)
        write_trace(os.path.join(top, "steps", "round-1", "slow.h5"), config(4, "allreduce", "fp32"), epoch_time=10.0,
                    exposed=0.02, in_flight=0.01)
        out, _ = run("--json", top)
        r = json.loads(out)["runs"][0]
        check(close(r["link_ceiling_Bps"], LINK_BPS / 4) and close(r["link_time"], 0.04),
              "a ceiling two folders above the trace is found (got %s, link time %s)"
              % (r["link_ceiling_Bps"], r["link_time"]))
        with open(os.path.join(d, "calibration", "ceiling-1gbit-K2.json"), "w") as f:
            f.write("{}")
        p = subprocess.run([sys.executable, SUMMARY, d], capture_output=True, text=True, timeout=60)
        check(p.returncode != 0 and "ceiling-1gbit-K2.json: no link ceiling" in p.stderr,
              "a ceiling file without a ceiling is named (got %d: %s)" % (p.returncode, p.stderr.strip()[-200:]))


def check_text(d):
    # --- the text table ---
    out, err = run("--target", "0.85", d)
    head, rows = parse_table(out)
    for h in ("model", "K", "space", "link", "strategy", "codec", "comm", "hidden", "other", "in-flight",
              "epoch s", "speedup", "x bf16", "scal.eff", "accuracy", "t(85%) s", "tta x", "tta x bf16"):
        check(h in head, "text table has column '%s' (columns: %s)" % (h, head))
    check(len(rows) == 12, "text table has 12 rows (got %d)" % len(rows))
    by_epoch = {}
    for r in rows:
        by_epoch.setdefault((r.get("strategy"), r.get("epoch s")), []).append(r)
    q4s2 = by_epoch.get(("scatter-reduce", "40.00"), [])
    # Rows of the three 4-bit runs (seeds 1, 2, 3, in that order): 2.50, 2.00, '-'.
    check([r.get("speedup") for r in q4s2] == ["2.50", "2.00", "-"],
          "text: 4-bit speedups 2.50, 2.00, - for seeds 1, 2, 3 (got %s)" % [r.get("speedup") for r in q4s2])
    check([r.get("tta x") for r in q4s2] == ["3.00", "2.00", "-"],
          "text: 4-bit tta x 3.00, 2.00, - (got %s)" % [r.get("tta x") for r in q4s2])
    ddp = [r for r in rows if r.get("strategy") == "ddp"]
    check(len(ddp) == 1 and ddp[0].get("comm", "").endswith("~") and ddp[0].get("hidden") == "-",
          "text: the DDP row's comm marked '~' (an estimate), hidden '-' (got %s)" % ddp)
    local = [r for r in rows if r.get("link") == "local"]
    check(len(local) == 1 and local[0].get("hidden") == "-" and local[0].get("in-flight") == "0.30",
          "text: the local row's hidden '-', in-flight 0.30 (got %s)" % local)
    check("per configuration" in out, "text: a per-configuration table where seeds repeat")
    check(any("slow-s4.h5" in ln for ln in err.splitlines()), "text mode warns about slow-s4.h5 too")



def check_functions():
    # --- functions, loaded as other tools load them ---
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "benchmarks", "common"))
    try:
        from qsgd_report import load_script
        mod = load_script(SUMMARY, "qsgd_summary")
    except Exception as e:  # noqa: BLE001
        mod = None
        check(False, "qsgd-summary loads as a module (%s)" % e)
    if mod is not None:
        f = getattr(mod, "link_bytes_per_second", None)
        check(f is not None and f("1gbit") == 1.25e8 and f("100mbit") == 1.25e7 and f("10gbit") == 1.25e9
              and f("local") is None and f("unshaped") is None,
              "link_bytes_per_second: 1gbit, 100mbit, 10gbit; local and unshaped have no link")
        split = getattr(mod, "split_in_flight", None)
        if split is None:
            check(False, "split_in_flight exists")
        else:
            link, hidden, other = split(np.array([[0.002, 0.02]]), np.array([[0.05, 0.05]]),
                                        np.array([[WIRE, WIRE]]), LINK_BPS)
            check(np.allclose(hidden, [[0.008, 0.0]]) and np.allclose(other, [[0.042, 0.05]]),
                  "split_in_flight: hidden clamped to max(0, link - exposed) (got %s)" % hidden)
            _, hidden, _ = split(np.array([[0.0]]), np.array([[0.05]]), np.array([[WIRE]]), None)
            check(math.isnan(hidden[0, 0]), "split_in_flight: no link, hidden NaN")



def check_reading():
    # --- --reading: the fastest configuration per link and K, and the speedups that differ from a
    # reference set by more than the runs' step-to-step spreads (0 here: every step alike) ---
    with tempfile.TemporaryDirectory(prefix="qsgd-summary-reading.") as d:
        here, ref = os.path.join(d, "here"), os.path.join(d, "ref")
        for path, q4 in ((here, 0.1), (ref, 0.05)):
            os.makedirs(path)
            # Epoch time (what speedups compare) follows the step time, as in a real trace.
            for name, cfg, t in (("fp32", config(1, "allreduce", "fp32"), 0.2),
                                 ("bf16", config(1, "allreduce16", "bf16"), 0.15),
                                 ("q4", config(1, "scatter-reduce", "fixed"), q4)):
                write_trace(os.path.join(path, name + ".h5"), cfg, step_time=t, epoch_time=STEPS * t)
        out, _ = run("--reading", ref, here)
        lines = out.splitlines()
        check(any(ln.startswith("1gbit, K = 2: fastest 4-bit QSGD, scatter-reduce, 100 ms a step: 2.00x the fp32 "
                                "ring, 1.50x bf16") for ln in lines),
              "--reading: the fastest configuration and its ratios (got %s)" % lines[-3:])
        far = [ln for ln in lines if ln.startswith("speedups outside")]
        check(len(far) == 1 and "4-bit QSGD, scatter-reduce 2.00x (reference 4.00x" in far[0]
              and "bf16" not in far[0].split(":", 1)[1],
              "--reading: only the 4-bit row differs from the reference (got %s)" % far)
        out, _ = run("--reading", "-", here)
        check(not any(ln.startswith("speedups outside") or ln.startswith("every speedup") for ln in out.splitlines()),
              "--reading -: no comparison without a reference")


def check_journal():
    """A trace with a journal beside it (a running, killed or lost run) gets a
    warning naming the journal and qsgd-trace merge; its row still comes."""
    with tempfile.TemporaryDirectory(prefix="qsgd-summary-journal.") as d:
        t = os.path.join(d, "live.h5")
        write_trace(t, config(1, "allreduce", "fp32"), link="local")
        open(t + ".journal", "wb").close()
        out, err = run(d)
        check("live.h5.journal: steps flushed after" in err and "qsgd-trace merge" in err,
              "a journal beside a trace is named with qsgd-trace merge (got %s)" % err.strip()[-300:])
        os.remove(t + ".journal")
        _, err = run(d)
        check("journal" not in err, "no journal, no warning (got %s)" % err.strip()[-300:])


def main():
    if not os.path.isfile(SUMMARY):
        sys.exit("test_qsgd_summary: FAIL: no %s" % SUMMARY)
    with tempfile.TemporaryDirectory(prefix="qsgd-summary-test.") as d:
        build(d)
        out, err = run("--json", "--target", "0.85", d)
        try:
            doc = json.loads(out)
        except ValueError as e:
            print("test_qsgd_summary: FAIL: qsgd-summary --json wrote no JSON (%s); %d check(s) failed"
                  % (e, len(FAILURES)))
            return 1
        runs = {os.path.basename(r["file"])[:-3]: r for r in doc["runs"]}
        check(len(runs) == 12, "12 runs in the JSON (got %d)" % len(runs))
        g = lambda name, k: runs[name].get(k)  # noqa: E731

        check_speedups(g)
        check_configs(doc)
        check_in_flight(g, err)
        check_text(d)
    check_functions()
    check_reading()
    check_ceiling()
    check_journal()

    return verdict("test_qsgd_summary", SUMMARY)


if __name__ == "__main__":
    sys.exit(main())
