#!/usr/bin/python3
"""qsgd-plots on synthetic traces and a committed exchange benchmark.

usage: test_qsgd_plots.py [PATH/TO/qsgd-plots]
Builds tiny schema-2 traces (docs/traces.md; the writer follows
test_qsgd_summary.py's, with buckets and several K and links) in a temporary
directory and checks that
  * qsgd-plots writes every expected PNG, and skips accuracy_time.png with a
    message where no trace has more than one evaluation;
  * every configuration has one colour, never shared, whatever the order the
    names come in, and the suite's configurations their fixed ones;
  * the timeline shows the fp32 ring on the slowest link at the largest K
    (not a run with more exposed communication elsewhere), and no bucket
    interval ends after its rank's step;
  * the break-even rate is interpolated in log rate between measured rates;
  * the ranks-on-cores note, the bits_per_dim mode;
  * --exchange writes exchange_bw.png from results/reference/exchange-shm/K2.json.
Exits 1 listing every failed check; h5py, numpy or matplotlib missing is a
failure, not a skip."""
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.realpath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PLOTS = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "benchmarks", "scaling", "qsgd-plots")
EXCHANGE_JSON = os.path.join(ROOT, "results", "reference", "exchange-shm", "K2.json")

try:
    import matplotlib  # noqa: F401  (qsgd-plots needs it)
except ImportError as e:
    sys.exit("test_qsgd_plots: FAIL: %s (the test needs Debian's python3-matplotlib under /usr/bin/python3)" % e)
sys.path.insert(0, HERE)
from synthetic_traces import check, verdict, write_trace as write_synthetic  # noqa: E402


# ---- synthetic traces --------------------------------------------------------

STEPS = 6          # one epoch; step 0 is the warm-up the tools drop
BUCKETS = 3


def config(seed, strategy, codec, s=16, transport="ring", ddp=False):
    if ddp:
        return {"model": "mlp", "widths": [784, 64, 10], "dataset": "synthetic", "batch_per_rank": 32,
                "strategy": "ddp", "codec": codec, "naming": "", "s": None, "d": None, "lr": 0.05,
                "seed": seed, "bucket_mb": 25.0, "peer": "pytorch-ddp-gloo",
                "hook": "none (DDP allreduce, fp32)", "epochs": 1, "max_steps": 0, "eval_every": 1,
                "target_accuracy": None}
    naming = {"fp32": "fp32", "bf16": "bf16"}.get(codec, "%dbit(paper,s=%d)" % (round(math.log2(s)), s))
    return {"model": "mlp", "mlp_widths": [784, 64, 10], "dataset": "synthetic", "data_dir": "",
            "batch_per_rank": 32, "epochs": 1, "max_steps": 0, "lr": 0.05, "seed": seed, "strategy": strategy,
            "codec": codec, "s": s if codec not in ("fp32", "bf16") else None, "d": 512, "norm": "max",
            "naming": naming, "fusion_mb": 8, "layer_filter": 10000, "overlap": True, "error_feedback": "none",
            "transport": transport, "progress": "thread", "poll_us": 100, "eval_every": 1,
            "target_accuracy": 0.0, "label": "plots test"}


def write_trace(path, cfg, K, link, epoch_time, exposed=0.02, step_time=0.1, bucket_done=None, evals=None,
                bits=None):
    """One trace (synthetic_traces.write_trace) with BUCKETS buckets per step.
    bucket_done: seconds since the step began at which every bucket's network
    phase ends (default: inside the step); evals: [(train_time, accuracy)]."""
    write_synthetic(path, cfg, K, STEPS, link=link, epoch_time=epoch_time, step_time=step_time, exposed=exposed,
                    in_flight=0.01, wire=100000, bits=bits, zero_phases=("quantize", "requantize"), evals=evals,
                    epoch_accuracy=0.8, buckets=(BUCKETS, bucket_done))


def build(d, evals=False):
    """A sweep over local, 100mbit and 1gbit, K = 1, 2, 4. At K = 4 the 4-bit
    run's speedup is 2.0 on 100 Mbit/s and 0.5 on 1 Gbit/s: break-even at
    0.1 x 10^(2/3) Gbit/s. Decoys for the timeline: the 1 Gbit/s K = 4 fp32
    ring has more exposed communication, the 100 Mbit/s K = 4 4-bit and
    library-transport fp32 runs too, the 100 Mbit/s K = 2 fp32 ring also."""
    T = {}

    def add(name, cfg, K, link, epoch_time, **kw):
        if evals:  # several evaluations: a time-to-accuracy run
            kw["evals"] = [(epoch_time * x, 0.5 + 0.4 * x) for x in (0.25, 0.5, 0.75, 1.0)]
        T[name] = os.path.join(d, name + ".h5")
        write_trace(T[name], cfg, K, link, epoch_time, **kw)

    fp32, bf16 = config(1, "allreduce", "fp32"), config(1, "allreduce16", "bf16")
    q4, ddp = config(1, "scatter-reduce", "fixed"), config(1, "ddp", "fp32", ddp=True)
    add("local-K1-fp32", fp32, 1, "local", 10.0, exposed=0.0)
    add("local-K1-q4", q4, 1, "local", 11.0, exposed=0.0)
    for link, K, t_fp32, t_q4 in (("local", 2, 10.0, 11.0), ("local", 4, 10.0, 9.0), ("100mbit", 2, 40.0, 25.0),
                                  ("100mbit", 4, 40.0, 20.0), ("1gbit", 2, 12.0, 16.0), ("1gbit", 4, 12.0, 24.0)):
        tag = "%s-K%d" % (link, K)
        target = link == "100mbit" and K == 4
        # The chosen run's buckets end past its 0.1 s step: they must be clipped. The 1 Gbit/s K = 4
        # fp32 ring waits longest of all, on a faster link: not the timeline.
        add(tag + "-fp32", fp32, K, link, t_fp32, exposed=0.05 if target else 0.095 if link == "1gbit" and K == 4
            else 0.02, bucket_done=0.25 if target else None)
        add(tag + "-bf16", bf16, K, link, 0.8 * t_fp32)
        add(tag + "-q4", q4, K, link, t_q4, exposed=0.09 if target else 0.01)
        if K == 4:
            add(tag + "-ddp", ddp, K, link, 1.5 * t_fp32, exposed=0.08)
    # The library transport of fp32 at the chosen link and K, more exposed: the ring is preferred.
    add("100mbit-K4-fp32-library", config(1, "allreduce", "fp32", transport="library"), 4, "100mbit", 45.0,
        exposed=0.097)
    with open(os.path.join(d, "machine.json"), "w") as f:
        json.dump({"cores": 2}, f)
    return T


# ---- running ---------------------------------------------------------------------

def run(*args, fails=False):
    """qsgd-plots ARGS; its output printed where its exit status is not the expected one."""
    p = subprocess.run([sys.executable, PLOTS] + list(args), capture_output=True, text=True, timeout=110)
    if (p.returncode != 0) != fails:
        print(p.stdout + p.stderr)
    return p


def is_png(path):
    try:
        with open(path, "rb") as f:
            return f.read(8) == b"\x89PNG\r\n\x1a\n" and os.path.getsize(path) > 2000
    except OSError:
        return False


def main():
    if not check(os.path.isfile(PLOTS), "qsgd-plots exists at %s" % PLOTS):
        return finish()
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "common"))
    from qsgd_report import load_script
    try:
        mod = load_script(PLOTS, "qsgd_plots")
    except BaseException as e:  # noqa: BLE001  (SystemExit of a missing module included)
        check(False, "qsgd-plots loads as a module (%s)" % e)
        return finish()

    with tempfile.TemporaryDirectory(prefix="qsgd-plots-test.") as tmp:
        # --- the CLI: every PNG; accuracy_time only with several evaluations ---
        sweep, tta = os.path.join(tmp, "sweep"), os.path.join(tmp, "tta")
        os.makedirs(sweep)
        os.makedirs(tta)
        T = build(sweep)
        build(tta, evals=True)
        out = os.path.join(tmp, "out-sweep")
        p = run("--out", out, sweep)
        check(p.returncode == 0, "qsgd-plots exits 0 on the sweep (got %d)" % p.returncode)
        for name in ("speedup", "breakdown", "comm_fraction", "bits_per_dim", "timeline", "link_rate"):
            check(is_png(os.path.join(out, name + ".png")), "sweep: %s.png written" % name)
        check(not os.path.exists(os.path.join(out, "accuracy_time.png")) and "skipped accuracy_time.png" in p.stdout,
              "sweep: one evaluation per trace: accuracy_time.png skipped with a message (stdout: %r)" % p.stdout)
        out = os.path.join(tmp, "out-tta")
        p = run("--target", "0.85", "--out", out, tta)
        check(p.returncode == 0, "qsgd-plots --target exits 0 on traces with evaluations (got %d)" % p.returncode)
        for name in ("speedup", "breakdown", "comm_fraction", "bits_per_dim", "timeline", "link_rate",
                     "accuracy_time"):
            check(is_png(os.path.join(out, name + ".png")), "tta: %s.png written" % name)
        p = run("--target", "2", "--out", out, tta, fails=True)
        check(p.returncode != 0, "--target 2 is refused")

        # --- the functions ---
        rows = mod.load_rows([sweep])
        names = sorted({r["name"] for r in rows})
        check("fp32 MPI_Iallreduce" in names and "4-bit QSGD, scatter-reduce" in names
              and "PyTorch DDP fp32" in names, "configuration names are display_name's (got %s)" % names)

        # Colours: one per name, unique, independent of order; the suite's fixed ones.
        a, b = mod.color_map(names), mod.color_map(list(reversed(names)))
        check(a == b, "color_map: the same colours whatever the order of the names")
        check(len(set(a.values())) == len(a), "color_map: no colour shared by two configurations (%s)" % a)
        many = names + ["configuration %02d" % i for i in range(30)]
        m = mod.color_map(many)
        check(len(set(m.values())) == len(many), "color_map: %d names, %d distinct colours"
              % (len(many), len(set(m.values()))))
        check(all(m[n] == a[n] for n in names if n in mod.KNOWN),
              "color_map: a configuration of the fixed table keeps its colour whatever else is plotted")
        check(a.get("fp32 ring allreduce") == "#1f77b4" and a.get("4-bit QSGD, scatter-reduce") == "#d62728",
              "color_map: fp32 ring tab:blue, 4-bit scatter-reduce tab:red (got %s, %s)"
              % (a.get("fp32 ring allreduce"), a.get("4-bit QSGD, scatter-reduce")))
        style = mod.Style(names)
        out = os.path.join(tmp, "out-fn")
        os.makedirs(out)
        drawn = mod.plot_speedup(rows, out, style) or {}
        check(drawn and all(drawn[n] == a[n] for n in drawn) and len(set(drawn.values())) == len(drawn),
              "speedup.png draws each configuration in its colour, none twice (got %s)" % drawn)

        # Timeline: the fp32 ring, 100 Mbit/s, K = 4; its buckets end at the step's end.
        info = mod.plot_timeline(rows, out)
        want = os.path.join(sweep, "100mbit-K4-fp32.h5")
        check(info is not None and info["file"] == want,
              "timeline: the fp32 ring on the slowest link at the largest K (%s; got %s)"
              % (want, info and info["file"]))
        if info:
            check(info["intervals"] and all(b <= info["rank_end"][rank] + 1e-12 and a >= 0
                                            for rank, _, a, b in info["intervals"]),
                  "timeline: every bucket interval inside its rank's step (ends %s, step ends %s)"
                  % (sorted({round(b, 3) for _, _, _, b in info["intervals"]}), info["rank_end"]))
            check(info["clipped"] == 4 * BUCKETS, "timeline: %d intervals clipped at the step end (got %d)"
                  % (4 * BUCKETS, info["clipped"]))
        check(mod.clip_interval(0.05, 0.3, 0.1) == (0.05, 0.1, True) and mod.clip_interval(0.2, 0.3, 0.1) is None
              and mod.clip_interval(float("nan"), 0.1, 0.2) is None and mod.clip_interval(0.0, 0.05, 0.1)[2] is False,
              "clip_interval: clipped to the step, dropped outside it or unmeasured")

        # Break-even: 2.0 at 0.1 Gbit/s, 0.5 at 1 Gbit/s -> 0.1 x 10^(2/3).
        even = mod.plot_link_rate(rows, out, style) or {}
        q4 = even.get("4-bit QSGD, scatter-reduce") or []
        check(len(q4) == 1 and abs(q4[0] - 0.1 * 10 ** (2 / 3.0)) < 1e-9,
              "link_rate: 4-bit break-even interpolated in log rate at 0.464 Gbit/s (got %s)" % q4)
        check(mod.interpolated_break_even([(1.0, 1.5)]) == [] and mod.interpolated_break_even(
            [(1.0, 1.5), (10.0, 1.2)]) == [], "interpolated_break_even: none from one rate or without a crossing")

        # Ranks on cores, from machine.json beside the traces.
        notes = mod.sharing_notes(rows)
        check(notes.get(4) == "K = 4: four ranks on two cores" and 2 not in notes,
              "sharing_notes: K = 4 on the 2 cores of machine.json (got %s)" % notes)

        # bits_per_dim: one level -> one bar per configuration; two levels -> bits against s.
        check(mod.plot_bits(rows, out, style) == "bars", "bits_per_dim: one codec and level: bars")
        two = rows + [dict(r, s=4, bits_per_dim=4.0) for r in rows if r["codec"] == "fixed"]
        check(mod.plot_bits(two, out, style) == "levels", "bits_per_dim: two levels: bits against s")

        # Breakdown: quantize is zero in every bar: not in the legend; DDP's part estimated.
        legend = mod.plot_breakdown(rows, out, style) or []
        check("quantize" not in legend and "requantize" not in legend and "forward" in legend
              and any("estimated" in x for x in legend),
              "breakdown: zero phases left out of the legend, DDP's estimate in it (got %s)" % legend)

        # --- --exchange ---
        out = os.path.join(tmp, "out-exchange")
        p = run("--exchange", EXCHANGE_JSON, "--out", out)
        check(p.returncode == 0 and is_png(os.path.join(out, "exchange_bw.png")),
              "--exchange %s writes exchange_bw.png" % os.path.relpath(EXCHANGE_JSON, ROOT))
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w") as f:
            json.dump({"schema": "qsgd.bench.gloo-allreduce/1"}, f)
        p = run("--exchange", bad, "--out", out, fails=True)
        check(p.returncode != 0 and "schema" in p.stderr, "--exchange refuses another schema")
    return finish()


def finish():
    return verdict("test_qsgd_plots", PLOTS)


if __name__ == "__main__":
    sys.exit(main())
