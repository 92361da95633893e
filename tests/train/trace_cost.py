#!/usr/bin/python3
"""trace_cost.py QSGD_TRAIN DIR: a trace costs what it holds. An 8,000-step
run at K = 1 (MLP 784-8-10, batch 4, a flush every 20 steps) writes at most
4x its trace's final size: the bytes the kernel accounts to the process as
written (os.wait4's ru_oublock x 512, which counts the temporary files and the
journal too). DIR must be on a disk-backed file system (tmpfs accounts no
writes: the test then fails, saying so). Writing the whole trace at every
flush grows with the square of the steps and fails the bound."""
import os
import subprocess
import sys
import tempfile

STEPS, FLUSH_EVERY, BOUND = 8000, 20, 4.0


def main():
    train, where = sys.argv[1], sys.argv[2]
    os.makedirs(where, exist_ok=True)
    d = tempfile.mkdtemp(prefix="trace-cost.", dir=where)
    t = os.path.join(d, "run.h5")
    args = [train, "--mlp-widths", "784,8,10", "--batch", "4", "--max-steps", str(STEPS), "--epochs", "1",
            "--flush-every", str(FLUSH_EVERY), "--trace", t, "--quiet"]
    with open(os.path.join(d, "stderr.log"), "w+") as err:
        p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        log = err.read()
    failures = []
    if p.returncode != 0:
        sys.exit("FAIL: qsgd-train exited with %d:\n%s" % (p.returncode, log))
    if not os.path.isfile(t):
        sys.exit("FAIL: no trace at %s" % t)
    if os.path.exists(t + ".journal"):
        failures.append("a finished run left %s.journal" % t)
    size = os.path.getsize(t)
    written = usage.ru_oublock * 512
    print("trace_cost: %d steps, a flush every %d: wrote %d bytes for a %d-byte trace (%.2fx; bound %.1fx)"
          % (STEPS, FLUSH_EVERY, written, size, written / size, BOUND))
    if written < size:
        failures.append("the process is accounted %d bytes written, less than its %d-byte trace: %s does not "
                        "account writes (tmpfs?); run the test with DIR on a disk" % (written, size, where))
    elif written > BOUND * size:
        failures.append("wrote %.2fx the trace's final size, more than %.1fx" % (written / size, BOUND))
    for f in failures:
        print("FAIL: " + f)
    if not failures:
        os.remove(t)
        os.remove(os.path.join(d, "stderr.log"))
        os.rmdir(d)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
