#!/usr/bin/python3
"""PyTorch yardstick for qsgd-bench-mlp-step: one SGD training step of the
same MLP on the same batch size, timed the same way.

Step = zero_grad(set_to_none=True) + forward + cross-entropy loss + backward
+ SGD(momentum, weight decay) update. Median, min and p99 over --steps timed
steps after --warmup untimed ones; one JSON object on stdout (or --json FILE).

Run it single-threaded and pinned, as compare_mlp_step.sh does:
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 taskset -c 0 /usr/bin/python3 torch_mlp_step.py
Debian's python3-torch imports only under /usr/bin/python3 and uses the
system BLAS (libblas.so.3; must be OpenBLAS, see the 'blas' field).
"""
import argparse
import json
import os
import platform
import socket
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(__file__))), "common"))
import qsgd_report  # noqa: E402  (benchmarks/common)


def blas_library():
    """The libblas.so.3 this process mapped, resolved through symlinks."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1]
                if "libblas.so" in path or "libopenblas" in path:
                    return os.path.realpath(path)
    except OSError:
        pass
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--widths", default="784,4096,4096,10")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--json", default="-", help="output file, '-' for stdout")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    widths = [int(w) for w in args.widths.split(",")]
    layers = []
    for i in range(len(widths) - 1):
        layers.append(torch.nn.Linear(widths[i], widths[i + 1]))
        if i + 2 < len(widths):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum,
                          weight_decay=args.weight_decay)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(args.batch, widths[0])
    y = torch.randint(0, widths[-1], (args.batch,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    samples = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        loss = step()
        samples.append(time.perf_counter() - t0)
    s = sorted(samples)
    nparams = sum(p.numel() for p in model.parameters())
    out = {
        "schema_version": 1,
        "benchmark": "mlp_step",
        "implementation": "pytorch",
        "context": {
            "torch_version": torch.__version__,
            "python": platform.python_version(),
            "torch_threads": torch.get_num_threads(),
            "blas": blas_library(),
            "OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", ""),
            "host": socket.gethostname(),
            "affinity": sorted(os.sched_getaffinity(0)),
            "date": qsgd_report.utc_now(),
        },
        "config": {
            "widths": widths, "batch": args.batch, "parameters": nparams,
            "warmup": args.warmup, "steps": args.steps, "lr": args.lr,
            "momentum": args.momentum, "weight_decay": args.weight_decay,
            "step": "zero_grad(set_to_none) + forward + cross-entropy + backward + SGD update",
        },
        "final_loss": float(loss),
        "step_seconds": {"median": qsgd_report.median(s), "min": s[0], "p99": qsgd_report.percentile(s, 0.99)},
        "samples": samples,
    }
    text = json.dumps(out, indent=2)
    if args.json == "-":
        print(text)
    else:
        with open(args.json, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
