#!/usr/bin/env python3
"""The statistics behind the README's seeds tables (qsgd-tables: seed_stats,
parity): mean and sample standard deviation of the seeds, and the verdict on
"within 0.5 points of fp32" given the standard error of the difference."""
import importlib.machinery
import importlib.util
import os
import sys

here = os.path.dirname(os.path.abspath(__file__))
path = os.path.join(here, "..", "..", "benchmarks", "report", "qsgd-tables")
loader = importlib.machinery.SourceFileLoader("qsgd_tables", path)
spec = importlib.util.spec_from_loader("qsgd_tables", loader)
T = importlib.util.module_from_spec(spec)
loader.exec_module(T)

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


acc, mean, sd = T.seed_stats([{"accuracy": a} for a in (0.80, 0.82, 0.84)])
check(acc == [80.0, 82.0, 84.0], "accuracies in percent: %s" % acc)
check(abs(mean - 82.0) < 1e-9, "mean of 80, 82, 84: %s" % mean)
check(abs(sd - 2.0) < 1e-9, "sample standard deviation of 80, 82, 84 (n - 1): %s" % sd)
check(T.seed_stats([{"accuracy": 0.5}])[2] is None, "one seed has no standard deviation")

check(T.parity(0.1, 0.1) == "yes", "0.1 +- 0.1 is within 0.5 (0.3 <= 0.5)")
check(T.parity(-0.25, 0.1) == "yes", "-0.25 +- 0.1: 0.45 <= 0.5 is within")
check(T.parity(-0.35, 0.1) == "unresolved", "-0.35 +- 0.1: 0.55 > 0.5 but 0.15 <= 0.5")
check(T.parity(0.8, 0.1) == "no", "0.8 +- 0.1: 0.6 > 0.5 is outside")
check(T.parity(-0.75, 0.1) == "no", "-0.75 +- 0.1: 0.55 > 0.5 is outside")
check(T.parity(0.6, 0.2) == "unresolved", "0.6 +- 0.2: the seeds do not resolve it")
check(T.parity(0.1, None) == "1 seed", "no standard error: one seed, no verdict")
check(T.parity(None, None) == "-", "the baseline itself has no verdict")

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("seed statistics: all checks passed")
