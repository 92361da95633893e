#!/usr/bin/python3
"""bench.cli_vocabulary: every program speaks docs/cli.md's vocabulary.

Reads the table of programs in docs/cli.md ("| Program | Help | Sizes | Flags |
Aliases |") and, for every row, the program's help: its `--help` output
(stdout and stderr), or for a row whose Help column says `header`, the
script's leading comment (such a script has no --help: running it would do
its work). Then checks:
  - every flag of the Flags column appears in the help, as a whole word;
  - every alias of the Aliases column ("`--old X` = `--new`") appears in the
    help on a line that says "alias", and its canonical spelling is one of
    the row's flags;
  - a row with Sizes "yes" has a help that states the binary suffix rule
    (2^10, 2^20 and 2^30);
  - for a shell script run with --help, every option of its argument
    parser (the patterns of its `case "$1" in` / `case "$arg" in` blocks,
    -h and --help aside) appears in the help: qsgd-sweep's among them;
  - the parser takes every flag and alias of the row, with a value where
    the table shows one: `PROGRAM FLAG VALUE --no-such-option` stops at
    --no-such-option (exit 2, naming it), not at FLAG. Checked for the
    compiled programs (qsgd-bench-kernels aside: Google Benchmark's flags)
    and for qsgd-sweep and time-to-accuracy, whose parsers read the whole
    command line before they do anything.
A flag missing from a help, an alias not marked as one, or an option the
parser takes but the help does not name fails the test, naming them.

usage: test_cli_vocabulary.py ROOT [NAME=PATH ...]
  ROOT       the source tree (docs/cli.md, the scripts)
  NAME=PATH  where program NAME of the table is: the compiled programs
             ($<TARGET_FILE:...>), or another copy of a script
  --doc FILE another vocabulary file than ROOT/docs/cli.md
A compiled program given no path is reported as not built and skipped; at
least one must be given. A script whose --help fails for a missing Python
module fails the test, naming the module (scripts/install-deps.sh --torch).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|(.*)\|\s*$")
SPAN = re.compile(r"`([^`]+)`")
OPTION = re.compile(r"^-{1,2}[A-Za-z][\w-]*")
SUFFIX_RULE = ("2^10", "2^20", "2^30")
# A value of each metavariable the table uses, valid for every program.
SAMPLE = {"SIZE": "4M", "KB": "4096", "MB": "8", "LIST": "784,16,10", "FILE": "out.json", "DIR": "out",
          "N": "1", "K": "2", "STEPS": "1", "S": "16", "D": "512", "X": "0.1", "RATE": "1gbit"}
# Programs whose parser is run with each flag (see the docstring), and the
# arguments that come first (qsgd-algorithms: its command).
PARSED = {"qsgd-train": [], "qsgd-bench-exchange": [], "qsgd-codec-report": [], "qsgd-bench-mlp-step": [],
          "qsgd-algorithms": ["convex"], "qsgd-peer-inputs": [], "qsgd-bench-trace": [],
          "benchmarks/scaling/qsgd-sweep": [],
          "benchmarks/scaling/time-to-accuracy": []}


def spans_with_values(cells_text):
    """[(flag, metavariable or None)] of a cell's `--flag META` spans."""
    out = []
    for span in SPAN.findall(cells_text):
        flag = flag_of(span)
        rest = span.strip()[len(flag):] if flag else ""
        meta = rest.lstrip("= ").split(" ")[0] if rest.strip(" =") else None
        out.append((flag, meta))
    return out


def flag_of(span):
    """`--segment SIZE` -> '--segment', `--qsgd_s=N` -> '--qsgd_s'."""
    m = OPTION.match(span.strip())
    return m.group(0) if m else None


def parse_doc(text):
    """[(program, help_kind, sizes, [flags], [(alias, canonical)], {flag or alias: metavariable or None})]
    from the Programs table."""
    rows = []
    header_seen = False
    for line in text.splitlines():
        if line.startswith("| Program | Help | Sizes | Flags | Aliases |"):
            header_seen = True
            continue
        if not header_seen:
            continue
        if not line.startswith("|"):
            if rows:
                break
            continue
        m = ROW.match(line)
        if not m:
            continue  # the |---| line
        cells = [c.strip() for c in m.group(2).split("|")]
        if len(cells) != 4:
            raise ValueError("docs/cli.md: row of %s has %d cells, not 5" % (m.group(1), len(cells) + 1))
        help_kind = "header" if cells[0] == "header" else "--help"
        flags = [flag_of(s) for s in SPAN.findall(cells[2])]
        aliases = []
        for entry in filter(None, (e.strip() for e in cells[3].split(";"))):
            spans = SPAN.findall(entry)
            if len(spans) != 2 or "=" not in entry:
                raise ValueError("docs/cli.md: alias entry '%s' of %s is not `ALIAS ...` = `CANONICAL`"
                                 % (entry, m.group(1)))
            aliases.append((flag_of(spans[0]), flag_of(spans[1])))
        if None in flags or any(None in a for a in aliases):
            raise ValueError("docs/cli.md: a span of %s's row is not a flag" % m.group(1))
        values = dict(spans_with_values(cells[2]))
        for entry in filter(None, (e.strip() for e in cells[3].split(";"))):
            values.update(spans_with_values(entry)[:1])
        rows.append((m.group(1), help_kind, cells[1] == "yes", flags, aliases, values))
    if not rows:
        raise ValueError("docs/cli.md: no '| Program | Help | Sizes | Flags | Aliases |' table")
    return rows


def word(flag):
    """A flag as a whole word: --segment is not --segment-kb, -n is not --np."""
    return re.compile(r"(?<![\w-])" + re.escape(flag) + r"(?![\w-])")


def leading_comment(path):
    """The comment block after the shebang, '#' and one space taken off."""
    out = []
    with open(path) as f:
        for i, line in enumerate(f):
            if i == 0 and line.startswith("#!"):
                continue
            if not line.startswith("#"):
                break
            out.append(re.sub(r"^# ?", "", line.rstrip("\n")))
    return "\n".join(out)


def run_help(path):
    """(text, error): the --help output, stdout and stderr together."""
    try:
        p = subprocess.run([path, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           stdin=subprocess.DEVNULL, timeout=120, text=True)
    except (OSError, subprocess.TimeoutExpired) as e:
        return "", "cannot run %s --help: %s" % (path, e)
    missing = re.search(r"No module named '([\w.]+)'", p.stdout)
    if missing:
        return "", ("%s --help: Python module %s is missing (scripts/install-deps.sh --python --torch)"
                    % (path, missing.group(1)))
    if not p.stdout.strip():
        return "", "%s --help printed nothing (exit %d)" % (path, p.returncode)
    return p.stdout, None


def case_options(script_text):
    """Every option the script's argument parser accepts: the patterns of its
    case "$1" in / case "$arg" in blocks (nested blocks included), globs aside."""
    opts = []
    lines = script_text.splitlines()
    i = 0
    while i < len(lines):
        if not re.search(r'\bcase "\$(1|arg)" in\b', lines[i]):
            i += 1
            continue
        depth = 0
        j = i
        while j < len(lines):
            code = re.sub(r"#.*", "", lines[j]) if not lines[j].lstrip().startswith("#") else ""
            if j > i:
                m = re.match(r"^\s*([^\s()]+)\)", code)
                if m:
                    for pat in m.group(1).split("|"):
                        if pat.startswith("-") and not re.search(r"[*?\[]", pat) and pat != "--":
                            opts.append(pat)
            depth += len(re.findall(r"\bcase\b.*\bin\b", code)) - len(re.findall(r"\besac\b", code))
            if depth <= 0:
                break
            j += 1
        i = j + 1
    return opts


def check_row(row, help_text, script_text):
    """The failures of one program's help against its row (strings; empty: it passes)."""
    name, _, sizes, flags, aliases = row[:5]
    fails = []
    for f in flags:
        if not word(f).search(help_text):
            fails.append("%s: %s is not in its help" % (name, f))
    lines = help_text.splitlines()
    for alias, canonical in aliases:
        if canonical not in flags:
            fails.append("%s: alias %s stands for %s, which is not among its flags" % (name, alias, canonical))
        if not any(word(alias).search(ln) and "alias" in ln.lower() for ln in lines):
            fails.append("%s: alias %s is not in its help on a line that says 'alias'" % (name, alias))
    if sizes and not all(s in help_text for s in SUFFIX_RULE):
        fails.append("%s: takes sizes, but its help does not state K, M, G = 2^10, 2^20, 2^30" % name)
    if script_text is not None:
        for opt in case_options(script_text):
            if opt not in ("-h", "--help") and not word(opt).search(help_text):
                fails.append("%s: its parser takes %s, its help does not name it" % (name, opt))
    return fails


def parser_takes(name, path, values):
    """The failures of `PROGRAM FLAG [VALUE] --no-such-option` for every flag of the row (run in an
    empty folder: a parser that took everything would write nothing that matters)."""
    fails = []
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    work = tempfile.mkdtemp(prefix="cli-vocabulary-")
    try:
        for flag, meta in values.items():
            if flag == "--version":
                continue
            given = [flag] + ([SAMPLE.get(meta, "1")] if meta else [])
            args = [os.path.abspath(path)] + PARSED[name] + given + ["--no-such-option"]
            try:
                p = subprocess.run(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   timeout=120, text=True, env=env, cwd=work)
            except (OSError, subprocess.TimeoutExpired) as e:
                fails.append("%s: cannot run it with %s: %s" % (name, " ".join(given), e))
                continue
            if p.returncode != 2 or "--no-such-option" not in p.stdout or ("'%s'" % flag) in p.stdout:
                last = (p.stdout.strip().splitlines() or [""])[-1]
                fails.append("%s does not take %s (exit %d: %s)" % (name, " ".join(given), p.returncode, last))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return fails


def self_test():
    """The checks fail where they must (so that this test can fail)."""
    row = ("prog", "--help", True, ["--segment", "-o"], [("--segment-kb", "--segment")])
    good = "usage\n  --segment SIZE (2^10, 2^20, 2^30)\n  -o FILE\n  --segment-kb KB  alias, in KiB\n"
    script = 'while [ $# -gt 0 ]; do\n  case "$1" in\n    --segment) x=1 ;;\n    -o|--out) y=1 ;;\n  esac\ndone\n'
    assert check_row(row, good, None) == [], check_row(row, good, None)
    assert any("--segment is not" in f for f in check_row(row, good.replace("--segment SIZE", "--seg SIZE"), None))
    assert any("alias --segment-kb" in f for f in check_row(row, good.replace("alias,", "same,"), None))
    assert any("2^10" in f for f in check_row(row, good.replace("2^30", "1G"), None))
    assert case_options(script) == ["--segment", "-o", "--out"], case_options(script)
    assert any("takes --out" in f for f in check_row(row, good, script))
    assert word("--segment").search("--segment-kb KB") is None and word("-n").search("--np N") is None


def main(argv):
    self_test()
    if not argv or argv[0].startswith("-"):
        print(__doc__)
        return 2
    root, doc, paths = argv[0], os.path.join(argv[0], "docs", "cli.md"), {}
    it = iter(argv[1:])
    for a in it:
        if a == "--doc":
            doc = next(it)
        elif "=" in a:
            k, v = a.split("=", 1)
            paths[k] = v
        else:
            print("test_cli_vocabulary: unknown argument %s" % a)
            return 2
    with open(doc) as f:
        rows = parse_doc(f.read())
    fails, checked, skipped = [], 0, []
    for row in rows:
        name, help_kind = row[0], row[1]
        compiled = "/" not in name
        path = paths.get(name) or (None if compiled else os.path.join(root, name))
        if path is None:
            skipped.append(name)
            continue
        if not os.path.exists(path):
            fails.append("%s: %s does not exist" % (name, path))
            continue
        script_text = None
        if help_kind == "header":
            help_text = leading_comment(path)
        else:
            help_text, err = run_help(path)
            if err:
                fails.append(err)
                continue
            if not compiled:
                with open(path) as f:
                    text = f.read()
                if text.startswith("#!") and "sh" in text.splitlines()[0].split("/")[-1]:
                    script_text = text
        fails += check_row(row, help_text, script_text)
        if name in PARSED:
            fails += parser_takes(name, path, row[5])
        checked += 1
    if skipped:
        print("not built here, skipped: %s" % ", ".join(skipped))
    if len(skipped) == sum(1 for r in rows if "/" not in r[0]):
        fails.append("no compiled program was given (NAME=PATH)")
    for f in fails:
        print("FAIL: %s" % f)
    if fails:
        return 1
    print("PASS: %d programs' help against %s" % (checked, os.path.relpath(doc, root)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
