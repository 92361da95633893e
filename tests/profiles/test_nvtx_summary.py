#!/usr/bin/python3
"""nvtx_summary.py on recorded CSV fixtures, without nsys: two per-rank
reports in the column layout nsys 2022.4 writes for `--report nvtxsum` (the
layout `nvtx_sum` keeps), one of them with the ":name" range names of newer
versions. Checks the merge (counts and totals add up, median = the largest
per-report median), the per-report spread (min, median, max of each range's
totals) in the table and the JSON, and the percentages of the reference range.

usage: test_nvtx_summary.py PATH/nvtx_summary.py
"""
import json
import os
import subprocess
import sys
import tempfile

HEAD = ("Time (%),Total Time (ns),Instances,Avg (ns),Med (ns),Min (ns),Max (ns),StdDev (ns),Style,Range\n")


def row(total, count, med, lo, hi, style, name):
    return "%.1f,%d,%d,%.1f,%.1f,%d,%d,%.1f,%s,%s\n" % (0.0, total, count, total / count, med, lo, hi, 0.0, style,
                                                          name)


def main(tool):
    failures = []

    def expect(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as d:
        r0 = os.path.join(d, "train.0_nvtxsum.csv")
        r1 = os.path.join(d, "train.1_nvtx_sum.csv")
        with open(r0, "w") as f:  # rank 0: 2022.4 names
            f.write(HEAD)
            f.write(row(10_000_000, 5, 2_000_000, 1_900_000, 2_200_000, "PushPop", "train/step"))
            f.write(row(4_000_000, 5, 800_000, 700_000, 900_000, "StartEnd", "comm/allgather"))
        with open(r1, "w") as f:  # rank 1: newer names (":range"), slower communication
            f.write(HEAD)
            f.write(row(12_000_000, 5, 2_400_000, 2_300_000, 2_600_000, "PushPop", ":train/step"))
            f.write(row(6_000_000, 5, 1_200_000, 1_100_000, 1_300_000, "StartEnd", ":comm/allgather"))
        js = os.path.join(d, "s.json")
        p = subprocess.run([sys.executable, tool, "summary", "--json", js, r0, r1], capture_output=True, text=True)
        expect(p.returncode == 0, "summary failed: %s" % p.stderr)
        out = p.stdout
        print(out)
        lines = {l.split()[0]: l.split() for l in out.splitlines() if l.startswith(("train/", "comm/"))}
        expect("min/report" in out and "max/report" in out, "no per-report spread columns in the table")
        step, ag = lines.get("train/step", []), lines.get("comm/allgather", [])
        # range style count per-step total median % reports min med max
        expect(step[2:5] == ["10", "1.00", "22.000"], "train/step count/total: %s" % step)
        expect(step[5] == "2.400", "train/step median (largest per-report): %s" % step)
        expect(step[7:] == ["2", "10.000", "11.000", "12.000"], "train/step spread: %s" % step)
        expect(ag[4:7] == ["10.000", "1.200", "45.5"], "comm/allgather total, median, %% of step: %s" % ag)
        expect(ag[7:] == ["2", "4.000", "5.000", "6.000"], "comm/allgather spread: %s" % ag)
        doc = json.load(open(js))
        rng = {r["range"]: r for r in doc["ranges"]}
        expect(rng["comm/allgather"]["report_total_ns"] == [4e6, 6e6], "JSON per-report totals")
        expect((rng["comm/allgather"]["report_total_min_ns"], rng["comm/allgather"]["report_total_median_ns"],
                rng["comm/allgather"]["report_total_max_ns"]) == (4e6, 5e6, 6e6), "JSON spread")
        # One report: no spread columns.
        p1 = subprocess.run([sys.executable, tool, "summary", r0], capture_output=True, text=True)
        expect(p1.returncode == 0 and "min/report" not in p1.stdout, "one report shows a spread")
    for f in failures:
        print("FAIL: " + f)
    print("PASS" if not failures else "FAIL")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
