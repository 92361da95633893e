#!/usr/bin/python3
"""docs.no_history: the prose of README.md, docs/*.md and the results report
says what is, not how it got there: no commit hash (bare or after "git") and
no earlier machine named. Provenance lives in each results folder (COMMAND,
machine.json) and in the generated footer between a table's qsgd-tables
markers, which this test skips, as it skips fenced code blocks.

A hash is a run of 7 to 40 hexadecimal digits with at least one digit and
one letter, standing alone (not after "0x", not inside a longer word).

usage: test_no_history.py ROOT   (exit 1 naming every file:line found)
"""
import glob
import os
import re
import sys

HASH = re.compile(r"(?<![0-9A-Za-z_x/.-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
MACHINES = re.compile(r"\bZen ?[0-9]\b|\bIntel (?:virtual )?machine\b|\bearlier machine\b|\bthis stop\b", re.I)
BLOCK = re.compile(r"<!-- qsgd-tables:([\w-]+) -->.*?<!-- /qsgd-tables:\1 -->", re.S)


def prose_lines(text):
    """(line number, line) of the text outside generated table blocks and fenced code."""
    text = BLOCK.sub(lambda m: "\n" * m.group(0).count("\n"), text)
    fenced = False
    for i, line in enumerate(text.split("\n"), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield i, line


def findings(path):
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for i, line in prose_lines(text):
        for m in HASH.finditer(line):
            yield "%s:%d: commit hash '%s' in prose" % (path, i, m.group(0))
        for m in MACHINES.finditer(line):
            yield "%s:%d: an earlier machine or session named ('%s')" % (path, i, m.group(0))


def self_check():
    """The patterns find what they must and leave what they must (so the test can fail)."""
    must = ["measured on git c028139", "the build of a409bb7", "(871a4ba)", "the Zen 4 machine"]
    mustnot = ["seed 0x9E3779B97F4A7C15", "float 1e-4", "sm_80", "results/reference/kernels-l2tiles-ab",
               "abcdefab", "1234567", "the run of 2026-12-06"]
    bad = [s for s in must if not (HASH.search(s) or MACHINES.search(s))]
    bad += [s for s in mustnot if HASH.search(s) or MACHINES.search(s)]
    return ["pattern self-check failed on %r" % s for s in bad]


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
    files = [os.path.join(root, "README.md"), os.path.join(root, "results", "reference", "RESULTS.md")]
    files += sorted(glob.glob(os.path.join(root, "docs", "*.md")))
    problems = self_check()
    for p in files:
        if not os.path.isfile(p):
            problems.append("%s: missing" % p)
            continue
        problems.extend(findings(p))
    for p in problems:
        print(p)
    print("docs.no_history: %d file(s) read, %d finding(s)" % (len(files), len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
