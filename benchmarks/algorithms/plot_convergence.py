#!/usr/bin/python3
"""Convergence plots of the algorithm experiments (docs/algorithms.md).

    plot_convergence.py DIR

reads DIR/{convex,qsvrg,dqgd,async}.json or .json.xz (written by qsgd-algorithms; any
that is missing is skipped) and writes DIR/convex.png, convex_bits.png,
qsvrg.png, dqgd.png and async.png. Plots are made from the result files
only, never from printed output.
"""
import math
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "common"))
import qsgd_report  # noqa: E402

SCHEMA = "qsgd.algorithms/1"


def load(directory, name):
    path = os.path.join(directory, name + ".json")
    if not os.path.exists(path) and not os.path.exists(path + ".xz"):
        print(f"plot_convergence: {path} not found, skipped")
        return None
    doc = qsgd_report.read_json(path)  # path, or path.xz (a committed results folder)
    if doc.get("schema") != SCHEMA:
        raise SystemExit(f"plot_convergence: {path}: schema {doc.get('schema')!r}, expected {SCHEMA!r}")
    return doc


def arr(values):
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def footer(fig, doc):
    c = doc["context"]
    fig.text(0.995, 0.005, f"qsgd {c.get('qsgd_git_hash', '?')}, {c.get('date', '')}, {c.get('host', '')}",
             ha="right", va="bottom", fontsize=6, color="0.5")


def geometric_mean(traces):
    """Per-point geometric mean of equally long suboptimality traces."""
    n = min(len(t) for t in traces)
    stack = np.vstack([t[:n] for t in traces])
    with np.errstate(divide="ignore"):
        return np.exp(np.mean(np.log(np.maximum(stack, 1e-300)), axis=0))


def plot_convex(doc, out):
    runs = doc["runs"]
    keys = []
    for r in runs:
        k = (r["problem"], r["n"])
        if k not in keys:
            keys.append(k)
    summary = {(s["problem"], s["n"], s["wire"]): s for s in doc["summary"]}
    for xaxis, fname in (("iteration", "convex.png"), ("bits", "convex_bits.png")):
        cols = 2
        rows = math.ceil(len(keys) / cols)
        fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.2 * rows), squeeze=False)
        for ax, (prob, n) in zip(axes.flat, keys):
            sel = [r for r in runs if r["problem"] == prob and r["n"] == n]
            wires = []
            for r in sel:
                if r["wire"] not in wires:
                    wires.append(r["wire"])
            f0 = sel[0]["trace"]["suboptimality"][0]
            eps = sel[0]["eps_relative"]
            for w in wires:
                group = [r for r in sel if r["wire"] == w]
                sub = geometric_mean([arr(r["trace"]["suboptimality"]) / f0 for r in group])
                if xaxis == "iteration":
                    x = arr(group[0]["trace"]["iteration"])[: len(sub)]
                else:  # bits per coordinate sent by one worker
                    workers = doc["parameters"]["workers"]
                    x = arr(group[0]["trace"]["bits"])[: len(sub)] / (workers * n)
                s = summary.get((prob, n, w))
                label = w
                if s is not None and w != "fp32":
                    ratio = s["ratio_to_fp32"]
                    ratio = "never" if ratio is None else f"{ratio:.2f}x"
                    label += f"  ({ratio}, {s['bits_per_coordinate']:.1f} b/coord)"
                if sub[-1] > 1.0:
                    label += ", diverges"
                elif np.nanmax(sub) > 10.0:
                    label += ", early blow-up"
                style = dict(color="black", lw=2) if w == "fp32" else dict(lw=1.2)
                ax.plot(x, sub, label=label, **style)
            ax.axhline(eps, color="0.4", ls=":", lw=1)
            ax.set_yscale("log")
            ax.set_xscale("log")
            ax.set_ylim(top=1e3)
            ax.set_xlabel("iteration" if xaxis == "iteration" else "bits sent per coordinate per worker")
            ax.set_ylabel("(f(x) - f*) / (f(x0) - f*)")
            ax.set_title(f"{prob}, n = {n}: geometric mean of {len(group)} seeds")
            ax.legend(fontsize=7)
            ax.grid(True, which="both", alpha=0.3)
        for ax in list(axes.flat)[len(keys):]:
            ax.axis("off")
        p = doc["parameters"]
        fig.suptitle(f"Convex QSGD: {p['workers']} workers, batch {p['batch']}, eta_t = 2/(l(t+1)+4L); "
                     "dotted: eps; (x: median steps to eps relative to fp32; b/coord: wire bits per coordinate)",
                     fontsize=10)
        fig.tight_layout(rect=(0, 0.02, 1, 0.96))
        footer(fig, doc)
        fig.savefig(os.path.join(out, fname), dpi=130)
        plt.close(fig)
        print(f"wrote {os.path.join(out, fname)}")


def plot_qsvrg(doc, out):
    runs = doc["runs"]
    p = doc["parameters"]
    variants = []
    for r in runs:
        if r["variant"] not in variants:
            variants.append(r["variant"])
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(13, 4.6))
    f0 = runs[0]["epochs"]["suboptimality"][0]
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, v in enumerate(variants):
        group = [r for r in runs if r["variant"] == v]
        for k, r in enumerate(group):
            ep = arr(r["epochs"]["iteration"])
            a1.plot(ep, arr(r["epochs"]["suboptimality"]) / f0, marker="o", ms=3, color=colors[i % len(colors)],
                    alpha=1.0 if k == 0 else 0.4, label=v if k == 0 else None)
        r = group[0]
        T = p["inner_steps"]
        a2.plot(arr(r["inner"]["iteration"]) / T, arr(r["inner"]["suboptimality"]) / f0, color=colors[i % len(colors)],
                label=v)
    epochs = np.arange(0, p["epochs"] + 1)
    a1.plot(epochs, 0.9 ** epochs, "k--", lw=1, label="0.9^p (spec factor)")
    a1.plot(epochs, p["rate_bound_at_sqrt_n"] ** epochs, "k:", lw=1,
            label=f"alpha^p, alpha = {p['rate_bound_at_sqrt_n']:.2f} (bound)")
    a1.axhline(p["predicted_floor_quantized_epoch_gradient"] / f0, color="C2", ls="-.", lw=1,
               label="predicted floor, quantized epoch gradient")
    for a in (a1, a2):
        a.set_yscale("log")
        a.grid(True, which="both", alpha=0.3)
        a.set_ylabel("(f - f*) / (f(y0) - f*)")
    a1.set_xlabel("epoch p (snapshot y_p)")
    a1.set_title(f"QSVRG per epoch ({len(group)} seeds; K = {p['workers']}, T = {T}, eta = {p['eta']:.3g})")
    a2.set_xlabel("epoch (inner iterates x_t, seed 0)")
    a2.set_title("inner iterates")
    a1.legend(fontsize=7)
    a2.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    footer(fig, doc)
    path = os.path.join(out, "qsvrg.png")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"wrote {path}")


def plot_dqgd(doc, out):
    fig, ax = plt.subplots(figsize=(7.5, 4.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(doc["runs"]):
        t = arr(r["trace"]["iteration"])
        s = arr(r["trace"]["suboptimality"])
        c = colors[i % len(colors)]
        ax.plot(t, s / s[0], color=c, label=f"{r['variant']} (worst step {r['worst_step_ratio']:.4f})")
        if r["rho_bound"] < 1:
            ax.plot(t, r["rho_bound"] ** t, color=c, ls=":", lw=1)
    ax.set_yscale("log")
    ax.set_ylim(1e-30, 1e3)
    ax.set_xlabel("iteration t")
    ax.set_ylabel("(f(x_t) - f*) / (f(x0) - f*)")
    prob = doc["problems"][0]
    ax.set_title(f"Deterministic quantized GD, quadratic n = {prob['n']}, l = {prob['l']}, L = {prob['L']}; "
                 "dotted: rho^t bound", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    footer(fig, doc)
    path = os.path.join(out, "dqgd.png")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"wrote {path}")


def plot_async(doc, out):
    runs = [r for r in doc["runs"] if r["group"] == "staleness"]
    base = {r["problem"]: r for r in doc["runs"] if r["group"] == "baseline"}
    p = doc["parameters"]
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    tau_name = lambda t: "inf" if t < 0 else str(t)  # noqa: E731
    for ax, prob, measure, ylabel in ((axes[0, 0], "logistic", "suboptimality", "f(x) - f*"),
                                      (axes[0, 1], "robust", "grad_norm2", "|grad f(x)|^2")):
        sel = [r for r in runs if r["problem"] == prob]
        for i, r in enumerate(sel):
            ls = "-" if r["wire"] != "fp32" else "--"
            ax.plot(arr(r["trace"]["iteration"]), arr(r["trace"][measure]), ls=ls, lw=1.1, color=f"C{p['taus'].index(r['tau'])}",
                    label=f"{r['wire']}, tau = {tau_name(r['tau'])} (max stale {r['max_staleness']}, "
                          f"{r['rejected']} rejected)")
        if prob in base:
            b = base[prob]
            ax.plot(arr(b["trace"]["iteration"]), arr(b["trace"][measure]), color="black", lw=2,
                    label="sequential SGD, fp32")
        ax.set_yscale("log")
        ax.set_xlabel("applied updates")
        ax.set_ylabel(ylabel)
        ax.set_title(f"{prob}: {p['workers']} workers, window {p['window']} (solid: QSGD s = sqrt(n), dashed: fp32)",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6)
    ax = axes[1, 0]
    sel = [r for r in runs if r["problem"] == "logistic" and r["wire"] != "fp32"]
    width = 0.8 / max(1, len(sel))
    for i, r in enumerate(sel):
        h = np.array(r["staleness_hist"], dtype=float)
        x = np.arange(len(h))
        ax.bar(x + i * width, h / max(1, h.sum()), width=width, color=f"C{p['taus'].index(r['tau'])}",
               label=f"tau = {tau_name(r['tau'])}")
    ax.set_xlim(-0.5, 25)
    ax.set_xlabel("staleness of an applied update (server version - gradient's version)")
    ax.set_ylabel("share of applied updates")
    ax.set_title("measured staleness, logistic, QSGD s = sqrt(n)", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(True, alpha=0.3)
    ax = axes[1, 1]
    place = [r for r in doc["runs"] if r["group"] == "placement"]
    for r in place:
        share = "/".join(str(round(100 * a / max(1, r["applied"]))) for a in r["applied_per_worker"])
        ax.plot(arr(r["trace"]["iteration"]), arr(r["trace"]["suboptimality"]),
                label=f"data: {r['data']}, update shares {share} %")
    if "logistic" in base:
        b = base["logistic"]
        ax.plot(arr(b["trace"]["iteration"]), arr(b["trace"]["suboptimality"]), color="black", lw=2,
                label="sequential SGD, fp32")
    ax.set_yscale("log")
    ax.set_xlabel("applied updates")
    ax.set_ylabel("f(x) - f*")
    delay = place[0]["worker_delay_us"] if place else 0
    ax.set_title(f"unequal worker speeds (rank r: +(r-1) x {delay:g} us per gradient): replicated vs sharded data",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout(rect=(0, 0.02, 1, 1))
    footer(fig, doc)
    path = os.path.join(out, "async.png")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    print(f"wrote {path}")


def main():
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    d = sys.argv[1]
    for name, fn in (("convex", plot_convex), ("qsvrg", plot_qsvrg), ("dqgd", plot_dqgd), ("async", plot_async)):
        doc = load(d, name)
        if doc is not None:
            fn(doc, d)


if __name__ == "__main__":
    main()
