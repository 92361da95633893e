#!/usr/bin/python3
"""The table of run.sh's results: for each kernel at n = 2^22, the median
CPU time of one copy alone, and at K = 2, 3, 4 copies at once the median
over copies of each copy's CPU time and wall time, as ratios to one copy
alone. The model charges K ranks on 2 cores max(1, K / 2) times the time
alone (1, 1.5, 2)."""
import glob
import json
import os
import statistics as st
import sys

d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
res = {}
for k in (1, 2, 3, 4):
    for f in sorted(glob.glob(os.path.join(d, "K%d-c*.json" % k))):
        for b in json.load(open(f))["benchmarks"]:
            if b.get("aggregate_name") != "median":
                continue
            name = "/".join(b["run_name"].split("/")[:2])
            u = scale[b["time_unit"]]
            res.setdefault(name, {}).setdefault(k, []).append((b["cpu_time"] * u, b["real_time"] * u))
print("%-30s %9s   %-14s %-14s %-14s" % ("kernel (n = 2^22)", "alone ms", "K=2 cpu  wall", "K=3 cpu  wall",
                                         "K=4 cpu  wall"))
for name in sorted(res):
    r = res[name]
    c1 = st.median(x[0] for x in r[1])
    w1 = st.median(x[1] for x in r[1])
    cells = ["%5.2f  %5.2f  " % (st.median(x[0] for x in r[k]) / c1, st.median(x[1] for x in r[k]) / w1)
             for k in (2, 3, 4)]
    print("%-30s %9.2f   %s" % (name, c1, " ".join(cells)))
print("(ratios to one copy alone; the model's share: K=2 1.0, K=3 1.5, K=4 2.0)")
