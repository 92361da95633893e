#!/usr/bin/env python3
"""The GPU code a CUDA binary carries: for each ELF file given, the SASS
(ELF sm_XX) and PTX (compute_XX) images in its .nv_fatbin section.

    cuda-archs.py [--require-sass 80,90] [--require-ptx 80] [--allow-host-only]
                  [--skip-non-elf] FILE...

Without --require-*: prints one line per file. With them: exits 1 naming
every file that has device code but lacks a required image, and every file
given that has no device code at all (unless --allow-host-only). Exit 2 for
a file that is not a 64-bit little-endian ELF (unless --skip-non-elf: such
files are left out) or whose fatbin is malformed.

Why: Kokkos 3.4.01 aborts at initialization when the compute capability its
kernels run as differs in its major number from the device's, so a binary
meant for Hopper (H100, H200) must carry sm_90 code, not only compute_80 PTX
(scripts/build-kokkos-cuda.sh). Debian's cuobjdump 11.8 cannot list these
binaries ("Support for 'sm_4' has been removed"), hence this reader.

Format (the fatbin container nvcc's fatbinary writes): a container header
{u32 magic 0xBA55ED50, u16 version, u16 header size, u64 payload size}
followed by entries {u16 kind (1 PTX, 2 ELF), u16, u32 header size,
u64 payload size, ..., u32 sm at offset 28}; containers follow one another
(one per translation unit with device code).
"""
import struct
import sys

FATBIN_MAGIC = 0xBA55ED50
KINDS = {1: "PTX", 2: "ELF"}


class Malformed(Exception):
    pass


def elf_section(path, wanted):
    """The bytes of section WANTED of the ELF file PATH, or None if it has none."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise Malformed("not a 64-bit little-endian ELF file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    if shentsize < 64 or shnum == 0 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        raise Malformed("section header table out of range")
    hdrs = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    stroff, strsize = hdrs[shstrndx][4], hdrs[shstrndx][5]
    if stroff + strsize > len(data):
        raise Malformed("section name table out of range")
    for name_off, kind, _, _, off, size, *_ in hdrs:
        if name_off >= strsize:
            continue
        end = data.find(b"\0", stroff + name_off, stroff + strsize)
        name = data[stroff + name_off:end if end >= 0 else stroff + strsize]
        if name == wanted.encode():
            if kind == 8:  # SHT_NOBITS
                return b""
            if off + size > len(data):
                raise Malformed("section %s out of range" % wanted)
            return data[off:off + size]
    return None


def fatbin_images(sec):
    """(kind, sm) of every image of every fatbin container in SEC."""
    images = []
    off = 0
    while off + 16 <= len(sec):
        magic, _, hsize, size = struct.unpack_from("<IHHQ", sec, off)
        if magic != FATBIN_MAGIC:
            off += 8  # containers are 8-byte aligned; padding between them
            continue
        p, end = off + hsize, off + hsize + size
        if hsize < 16 or end > len(sec):
            raise Malformed("fatbin container at %d runs past the section" % off)
        while p < end:
            if p + 32 > end:
                raise Malformed("fatbin entry header at %d runs past its container" % p)
            kind, _, ehsize, esize = struct.unpack_from("<HHIQ", sec, p)
            sm, = struct.unpack_from("<I", sec, p + 28)
            if ehsize < 32 or p + ehsize + esize > end:
                raise Malformed("fatbin entry at %d runs past its container" % p)
            images.append((KINDS.get(kind, "kind%d" % kind), sm))
            p += ehsize + esize
        off = end
    return images


def is_elf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"\x7fELF"
    except OSError:
        return False


def parse_list(text, what):
    try:
        return sorted({int(x) for x in text.split(",") if x})
    except ValueError:
        sys.exit("cuda-archs: %s takes a comma-separated list of numbers such as 80,90, got '%s'" % (what, text))


def main(argv):
    need_sass, need_ptx, files = [], [], []
    host_only_ok = skip_non_elf = False
    it = iter(argv)
    for a in it:
        if a in ("--require-sass", "--require-ptx"):
            v = next(it, None)
            if v is None:
                sys.exit("cuda-archs: %s needs a value" % a)
            (need_sass if a == "--require-sass" else need_ptx).extend(parse_list(v, a))
        elif a == "--allow-host-only":
            host_only_ok = True
        elif a == "--skip-non-elf":
            skip_non_elf = True
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        elif a.startswith("-"):
            sys.exit("cuda-archs: unknown option '%s'" % a)
        else:
            files.append(a)
    if not files:
        sys.exit("cuda-archs: no files (see --help)")
    bad, malformed = [], False
    checked = 0
    for path in files:
        if skip_non_elf and not is_elf(path):
            continue
        checked += 1
        try:
            sec = elf_section(path, ".nv_fatbin")
            images = fatbin_images(sec) if sec is not None else []
        except (OSError, Malformed, struct.error) as e:
            print("%s: %s" % (path, e), file=sys.stderr)
            malformed = True
            continue
        sass = sorted({sm for k, sm in images if k == "ELF"})
        ptx = sorted({sm for k, sm in images if k == "PTX"})
        print("%s: %s" % (path, "no device code" if not images else
                          "sass %s; ptx %s" % (",".join("sm_%d" % s for s in sass) or "none",
                                               ",".join("compute_%d" % s for s in ptx) or "none")))
        if need_sass or need_ptx:
            if not images:
                if not host_only_ok:
                    bad.append("%s: no device code" % path)
                continue
            miss = ["sm_%d" % s for s in need_sass if s not in sass] + \
                   ["compute_%d PTX" % s for s in need_ptx if s not in ptx]
            if miss:
                bad.append("%s: lacks %s" % (path, ", ".join(miss)))
    if malformed:
        return 2
    if checked == 0:
        print("cuda-archs: FAIL: no ELF file among the %d given" % len(files), file=sys.stderr)
        return 1
    if bad:
        print("cuda-archs: FAIL:\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
