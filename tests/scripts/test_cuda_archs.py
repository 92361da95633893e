#!/usr/bin/env python3
"""scripts/cuda-archs.py on synthetic ELF files: it lists the SASS and PTX
images of a .nv_fatbin section, fails a binary that lacks a required
architecture or has no device code, and rejects a malformed fatbin."""
import os
import struct
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
tool = os.path.join(here, "..", "..", "scripts", "cuda-archs.py")


def fatbin(images, truncate=0):
    """One fatbin container holding IMAGES, (kind, sm) pairs: kind 1 PTX, 2 ELF."""
    body = b""
    for kind, sm in images:
        payload = b"\xab" * 40
        head = bytearray(64)
        struct.pack_into("<HHIQ", head, 0, kind, 0x0101, 64, len(payload))
        struct.pack_into("<I", head, 28, sm)
        body += bytes(head) + payload
    return struct.pack("<IHHQ", 0xBA55ED50, 1, 16, len(body) + truncate) + body


def elf(sections):
    """A minimal ELF64 LE file with the named sections (name -> bytes) and a .shstrtab."""
    names = [b""] + [n.encode() for n in sections] + [b".shstrtab"]
    strtab = b"\0".join(names) + b"\0"
    offs, o = [], 0
    for n in names:
        offs.append(o)
        o += len(n) + 1
    data = bytearray(64)
    data[:6] = b"\x7fELF\x02\x01"
    blobs = list(sections.values()) + [strtab]
    at = []
    for b in blobs:
        at.append(len(data))
        data += b
    shoff = len(data)
    shdrs = [struct.pack("<IIQQQQIIQQ", 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)]
    for i, b in enumerate(blobs):
        shdrs.append(struct.pack("<IIQQQQIIQQ", offs[i + 1], 1, 0, 0, at[i], len(b), 0, 0, 1, 0))
    data += b"".join(shdrs)
    struct.pack_into("<Q", data, 0x28, shoff)
    struct.pack_into("<HHH", data, 0x3A, 64, len(shdrs), len(shdrs) - 1)
    return bytes(data)


def run(*args):
    p = subprocess.run([sys.executable, tool] + list(args), capture_output=True, text=True)
    return p.returncode, p.stdout + p.stderr


failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


with tempfile.TemporaryDirectory() as d:
    def write(name, content):
        path = os.path.join(d, name)
        with open(path, "wb") as f:
            f.write(content)
        return path
    both = write("both", elf({".text": b"\x90" * 16, ".nv_fatbin": fatbin([(2, 80), (2, 90), (1, 80)]) +
                              b"\0" * 8 + fatbin([(2, 80), (2, 90)])}))
    ampere = write("ampere", elf({".nv_fatbin": fatbin([(2, 80), (1, 80)])}))
    host = write("host", elf({".text": b"\x90" * 16}))
    broken = write("broken", elf({".nv_fatbin": fatbin([(2, 80)], truncate=64)}))
    text = write("text", b"not an ELF file at all\n")

    rc, out = run(both, ampere, host)
    check(rc == 0, "listing only: exit %d (%s)" % (rc, out))
    check("both: sass sm_80,sm_90; ptx compute_80" in out, "both's images, two containers: %s" % out)
    check("ampere: sass sm_80; ptx compute_80" in out, "ampere's images: %s" % out)
    check("host: no device code" in out, "host: %s" % out)
    rc, out = run("--require-sass", "80,90", "--require-ptx", "80", both)
    check(rc == 0, "sm_80 + sm_90 + compute_80 passes: exit %d (%s)" % (rc, out))
    rc, out = run("--require-sass", "80,90", both, ampere)
    check(rc == 1 and "ampere: lacks sm_90" in out and "both: lacks" not in out,
          "a binary without sm_90 fails, named: exit %d (%s)" % (rc, out))
    rc, out = run("--require-sass", "80", host)
    check(rc == 1 and "host: no device code" in out, "no device code fails: exit %d (%s)" % (rc, out))
    rc, out = run("--require-sass", "80", "--allow-host-only", host, both)
    check(rc == 0, "--allow-host-only: exit %d (%s)" % (rc, out))
    rc, out = run(broken)
    check(rc == 2 and "runs past" in out, "a truncated fatbin is malformed: exit %d (%s)" % (rc, out))
    rc, out = run(text)
    check(rc == 2 and "not a 64-bit little-endian ELF" in out, "a text file: exit %d (%s)" % (rc, out))
    rc, out = run("--skip-non-elf", "--require-sass", "80", text, ampere)
    check(rc == 0 and "text" not in out, "--skip-non-elf leaves the text file out: exit %d (%s)" % (rc, out))
    rc, out = run("--skip-non-elf", text)
    check(rc == 1 and "no ELF file" in out, "nothing left to check fails: exit %d (%s)" % (rc, out))

if failures:
    print("FAIL:\n  " + "\n  ".join(failures))
    sys.exit(1)
print("cuda-archs: all checks passed")
