#!/usr/bin/python3
"""Tests of benchmarks/replay/describe-model (docs/replay.md).

  test_describe.py ROOT QSGD_TRAIN

- The FLOP formulas: hand-counted layers (a convolution, a linear layer,
  multi-head attention, a norm) and whole models against the multiply-adds
  torchvision publishes for them (resnet50 4.09 G, vit_b_16 17.56 G per
  224 x 224 image): conv, linear and attention multiply-adds within 2% of those.
- A tiny description regenerated on the CPU, measured and derived from
  FLOPs, is read by qsgd-train --model replay, and its tensors are the
  model's own in backward order.
"""
import importlib.machinery
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

import torch
import torch.nn as nn

ROOT, TRAIN = sys.argv[1], sys.argv[2]
loader = importlib.machinery.SourceFileLoader("describe_model", os.path.join(ROOT, "benchmarks/replay/describe-model"))
spec = importlib.util.spec_from_loader("describe_model", loader)
dm = importlib.util.module_from_spec(spec)
loader.exec_module(dm)
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def flops_of(mod, *inputs):
    out = []
    h = mod.register_forward_hook(lambda m, i, o: out.append(dm.module_flops(m, i, o)))
    with torch.no_grad():
        mod(*inputs)
    h.remove()
    return out[0]


# Hand counts: multiply-add = 2 FLOPs.
conv = nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False)
check(flops_of(conv, torch.zeros(2, 3, 224, 224)) == 2 * (2 * 64 * 112 * 112) * (3 * 7 * 7),
      "conv 7x7/2, 3 -> 64 channels at 224: 2 x outputs x 147")
dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
check(flops_of(dw, torch.zeros(1, 32, 10, 10)) == 2 * 32 * 100 * 9 + 32 * 100, "depthwise 3x3 with bias")
lin = nn.Linear(2048, 1000)
check(flops_of(lin, torch.zeros(4, 2048)) == 2 * 4 * 2048 * 1000 + 4 * 1000, "linear 2048 -> 1000, bias")
check(flops_of(lin, torch.zeros(3, 5, 2048)) == 2 * 15 * 2048 * 1000 + 15 * 1000, "linear over 3 x 5 rows")
mha = nn.MultiheadAttention(64, 4, batch_first=True)
x = torch.zeros(2, 10, 64)
want = 2 * 2 * 10 * 64 * 64 * 4 + 2 * 2 * 10 * 10 * 64 * 2 + 5 * 2 * 4 * 10 * 10
check(flops_of(mha, x, x, x) == want, f"attention E 64, 4 heads, S 10, N 2: {flops_of(mha, x, x, x)} != {want}")
ln = nn.LayerNorm(64)
check(flops_of(ln, x) == 5 * 2 * 10 * 64, "layer norm: 5 per element")


def macs(model, x):
    """Multiply-adds of conv, linear and attention (torchvision's GFLOPS count these)."""
    total = []
    hooks = []
    for n, m in dm.leaves(model):
        if isinstance(m, (nn.Conv2d, nn.Linear, nn.MultiheadAttention)):
            def h(mod, i, o):
                f = dm.module_flops(mod, i, o)
                out = o[0] if isinstance(o, tuple) else o
                if isinstance(mod, (nn.Conv2d, nn.Linear)) and mod.bias is not None:
                    f -= out.numel()  # torchvision counts the multiply-adds alone
                if isinstance(mod, nn.MultiheadAttention):  # batch_first in torchvision
                    f -= 5 * out.shape[0] * mod.num_heads * out.shape[1] ** 2  # softmax is not a multiply-add
                total.append(f / 2)
            hooks.append(m.register_forward_hook(h))
    with torch.no_grad():
        model.eval()(x)
    for h in hooks:
        h.remove()
    return sum(total)


import torchvision.models as tvm
for name, published in (("resnet50", 4.09e9), ("vit_b_16", 17.56e9)):
    got = macs(getattr(tvm, name)(), torch.zeros(1, 3, 224, 224))
    check(abs(got / published - 1) < 0.02, f"{name}: {got / 1e9:.3f} G multiply-adds, published {published / 1e9} G")

# A tiny description, measured and derived, replayed by qsgd-train.
with tempfile.TemporaryDirectory() as d:
    for tag, extra in (("measured", ["--iters", "2"]), ("flops", ["--flops-rate", "1e10"])):
        out = os.path.join(d, tag + ".json")
        subprocess.run([sys.executable, os.path.join(ROOT, "benchmarks/replay/describe-model"), "--model",
                        "mlp:784-64-10", "--batch", "8", "--out", out] + extra, check=True)
        desc = json.load(open(out))
        names = [t["name"] for t in desc["tensors"]]
        check(names == ["2.bias", "2.weight", "0.bias", "0.weight"] or names == ["2.weight", "2.bias", "0.weight", "0.bias"],
              f"{tag}: tensors in backward order: {names}")
        check(desc["times"]["source"] == tag and desc["batch"] == 8, f"{tag}: times {desc['times']}")
        ready = [t["ready_s"] for t in desc["tensors"]]
        check(ready == sorted(ready) and ready[-1] <= desc["times"]["backward_s"], f"{tag}: ready times {ready}")
        if tag == "flops":
            f = 2 * 8 * 784 * 64 + 8 * 64 + 8 * 64 + 2 * 8 * 64 * 10 + 8 * 10  # linear, relu, linear
            check(abs(desc["times"]["forward_s"] - f / 1e10) < 1e-12, f"flops: forward {desc['times']['forward_s']}")
            check(abs(desc["times"]["backward_s"] - 2 * f / 1e10) < 1e-12, "flops: backward is 2x forward")
        r = subprocess.run([TRAIN, "--model", "replay", "--model-file", out, "--max-steps", "3", "--quiet"],
                           capture_output=True, text=True)
        check(r.returncode == 0, f"{tag}: qsgd-train --model replay exit {r.returncode}: {r.stderr}")

if failures:
    sys.exit(f"{len(failures)} check(s) failed")
print("PASS")
