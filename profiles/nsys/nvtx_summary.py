#!/usr/bin/python3
"""Per-range summary of Nsight Systems NVTX reports, and the check that every
range documented in docs/profiling.md was recorded.

Input is the CSV of `nsys stats --report nvtxsum --format csv` (report
`nvtx_sum` in nsys after 2022; the same columns), one file per report: one
for a whole single-node job, or one per rank. Several files are merged:
counts and total times add up, the median column is the largest of the
per-report medians (the slowest rank; a synchronous step waits for it), and
the spread of each range's total over the reports (min, median, max) shows
how far the ranks differ.

  nvtx_summary.py summary [--ref train/step] [--json OUT] CSV...
      aligned table: range, style, count, count per ref, total ms,
      median ms, % of ref = 100 * total(range) / total(ref); with several
      reports also: reports, min/med/max of the per-report totals (ms)
  nvtx_summary.py doc-names DOC.md
      the range names of DOC's marked table, one per line
  nvtx_summary.py names CSV...
      the range names recorded in the CSVs, one per line
  nvtx_summary.py check DOC.md CSV...
      exit 1, naming them, when documented ranges are missing from every CSV;
      exit 0 otherwise

The documented names are the first column of the Markdown table between the
lines `<!-- nvtx-ranges:begin -->` and `<!-- nvtx-ranges:end -->`, each
written as `name` (in backticks). Uses only the Python standard library.
"""
import argparse
import csv
import json
import os
import re
import sys

BEGIN = "<!-- nvtx-ranges:begin -->"
END = "<!-- nvtx-ranges:end -->"
SCHEMA = 1


def die(msg):
    print("nvtx_summary: error: " + msg, file=sys.stderr)
    sys.exit(2)


def doc_names(path):
    """Range names of the marked table of a Markdown file, in table order."""
    try:
        lines = open(path, encoding="utf-8").read().splitlines()
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    try:
        first = next(i for i, l in enumerate(lines) if l.strip() == BEGIN)
        last = next(i for i, l in enumerate(lines) if i > first and l.strip() == END)
    except StopIteration:
        die("%s has no table between '%s' and '%s'" % (path, BEGIN, END))
    names = []
    rows = [(i + 1, l.strip()) for i, l in enumerate(lines[first + 1:last], first + 1) if l.strip()]
    for k, (lineno, row) in enumerate(rows):
        if not row.startswith("|"):
            die("%s:%d: only table rows may stand between the markers" % (path, lineno))
        cell = row.strip("|").split("|")[0].strip()
        if k == 0 or re.fullmatch(r":?-+:?", cell):
            continue  # header, separator
        m = re.fullmatch(r"`([^`\s]+)`", cell)
        if not m:
            die("%s:%d: first cell '%s' is not a range name in backticks" % (path, lineno, cell))
        names.append(m.group(1))
    if not names:
        die("%s: the marked table lists no ranges" % path)
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        die("%s: ranges listed twice: %s" % (path, ", ".join(dup)))
    return names


def read_nvtxsum(path):
    """{(range, style): row} from one nvtxsum CSV (times in ns)."""
    rows = {}
    try:
        with open(path, newline="", encoding="utf-8") as f:
            reader = csv.DictReader(f)
            need = {"Range", "Style", "Instances", "Total Time (ns)", "Med (ns)", "Min (ns)", "Max (ns)"}
            if reader.fieldnames is None or not need <= set(reader.fieldnames):
                die("%s is not an nvtxsum CSV (columns %s)" % (path, reader.fieldnames))
            for r in reader:
                # Newer nsys versions write the default domain as ":name".
                name = r["Range"][1:] if r["Range"].startswith(":") else r["Range"]
                rows[(name, r["Style"])] = {
                    "count": int(r["Instances"]),
                    "total_ns": float(r["Total Time (ns)"]),
                    "median_ns": float(r["Med (ns)"]),
                    "min_ns": float(r["Min (ns)"]),
                    "max_ns": float(r["Max (ns)"]),
                }
    except OSError as e:
        die("cannot read %s: %s" % (path, e))
    return rows


def merge(paths):
    merged = {}
    for p in paths:
        for key, r in read_nvtxsum(p).items():
            m = merged.setdefault(key, {"count": 0, "total_ns": 0.0, "median_ns": 0.0, "min_ns": float("inf"),
                                        "max_ns": 0.0, "reports": 0, "report_total_ns": []})
            m["count"] += r["count"]
            m["total_ns"] += r["total_ns"]
            m["median_ns"] = max(m["median_ns"], r["median_ns"])
            m["min_ns"] = min(m["min_ns"], r["min_ns"])
            m["max_ns"] = max(m["max_ns"], r["max_ns"])
            m["reports"] += 1
            m["report_total_ns"].append(r["total_ns"])
    return merged


def spread(values):
    """(min, median, max) of a list of numbers."""
    v = sorted(values)
    n = len(v)
    med = v[n // 2] if n % 2 else 0.5 * (v[n // 2 - 1] + v[n // 2])
    return v[0], med, v[-1]


def summary(args):
    merged = merge(args.csv)
    if not merged:
        die("no NVTX ranges in %s" % ", ".join(args.csv))
    ref = [r for (name, _), r in merged.items() if name == args.ref]
    ref_total = sum(r["total_ns"] for r in ref)
    ref_count = sum(r["count"] for r in ref)
    # The program's ranges by total time, then the MPI calls nsys traced.
    rows = sorted(merged.items(), key=lambda kv: (kv[0][0].startswith("MPI:"), -kv[1]["total_ns"], kv[0]))
    many = len(args.csv) > 1
    med_head = "median* ms" if many else "median ms"
    head = ["range", "style", "count", "per " + args.ref.split("/")[-1], "total ms", med_head, "% of " + args.ref]
    if many:  # the spread of each range's total over the reports (ranks, with --per-rank)
        head += ["reports", "min/report ms", "med/report ms", "max/report ms"]
    table = [head]
    for (name, style), r in rows:
        row = [
            name, "push/pop" if style == "PushPop" else "start/end" if style == "StartEnd" else style,
            str(r["count"]),
            "%.2f" % (r["count"] / ref_count) if ref_count else "-",
            "%.3f" % (r["total_ns"] / 1e6),
            "%.3f" % (r["median_ns"] / 1e6),
            "%.1f" % (100.0 * r["total_ns"] / ref_total) if ref_total else "-",
        ]
        if many:
            lo, med, hi = spread(r["report_total_ns"])
            r["report_total_min_ns"], r["report_total_median_ns"], r["report_total_max_ns"] = lo, med, hi
            row += [str(r["reports"]), "%.3f" % (lo / 1e6), "%.3f" % (med / 1e6), "%.3f" % (hi / 1e6)]
        table.append(row)
    width = [max(len(row[i]) for row in table) for i in range(len(head))]
    out = []
    for k, row in enumerate(table):
        out.append("  ".join(c.ljust(width[i]) if i < 2 else c.rjust(width[i]) for i, c in enumerate(row)).rstrip())
        if k == 0:
            out.append("  ".join("-" * w for w in width))
    print("\n".join(out))
    if len(args.csv) > 1:
        print("* %d reports merged: count and total add up; median is the largest per-report median; "
              "min/med/max per report: the spread of the range's total over the reports that recorded it "
              "(one report per rank with --per-rank)" % len(args.csv))
    if not ref_total:
        print("(no '%s' range recorded: the per-step columns are empty)" % args.ref)
    if args.json:
        doc = {
            "schema_version": SCHEMA,
            "source": "nsys stats --report nvtxsum",
            "reports": [os.path.abspath(p) for p in args.csv],
            "ref": args.ref,
            "ref_total_ns": ref_total,
            "ref_count": ref_count,
            "median_is_max_over_reports": len(args.csv) > 1,
            "ranges": [dict(range=name, style=style, **r) for (name, style), r in rows],
        }
        doc.update(json.loads(args.meta) if args.meta else {})
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")


def check(args):
    names = doc_names(args.doc)
    seen = {name for name, _ in merge(args.csv)}
    missing = [n for n in names if n not in seen]
    for n in names:
        print("%-8s %s" % ("ok" if n in seen else "MISSING", n))
    status = 0
    if missing:
        print("nvtx_summary: %d of %d documented ranges (%s) never appear in %s" %
              (len(missing), len(names), args.doc, ", ".join(args.csv)), file=sys.stderr)
        print("nvtx_summary: missing: %s" % ", ".join(missing), file=sys.stderr)
        status = 1
    undocumented = sorted(n for n in seen if n not in names and not n.startswith("MPI:"))
    if undocumented:
        print("nvtx_summary: note: recorded but not documented: %s" % ", ".join(undocumented))
    if status == 0:
        print("nvtx_summary: all %d documented ranges recorded" % len(names))
    return status


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("summary", help="per-range table from nvtxsum CSV files")
    s.add_argument("--ref", default="train/step", help="range the per-step columns refer to (train/step)")
    s.add_argument("--json", help="also write the table as JSON")
    s.add_argument("--meta", help="JSON object of provenance fields to add to the JSON output")
    s.add_argument("csv", nargs="+")
    d = sub.add_parser("doc-names", help="range names documented in a Markdown file")
    d.add_argument("doc")
    n = sub.add_parser("names", help="range names recorded in nvtxsum CSV files")
    n.add_argument("csv", nargs="+")
    c = sub.add_parser("check", help="every documented range appears in the CSV files")
    c.add_argument("doc")
    c.add_argument("csv", nargs="+")
    args = p.parse_args()
    if args.cmd == "summary":
        summary(args)
        return 0
    if args.cmd == "doc-names":
        print("\n".join(doc_names(args.doc)))
        return 0
    if args.cmd == "names":
        print("\n".join(sorted({name for name, _ in merge(args.csv)})))
        return 0
    return check(args)


if __name__ == "__main__":
    sys.exit(main())
