#!/usr/bin/python3
"""Forged traces for the tests of qsgd-train's trace reader (bad_input.sh):
files edited with h5py and sealed again with a valid checksum block, as
someone forging a trace would, so that they reach the reader behind the
block. Standard library and h5py only.

usage: forge_trace.py seal FILE
       forge_trace.py float-epoch FILE      /steps/epoch stored as 8-byte floats
       forge_trace.py empty-compact FILE    /steps/epoch compact, its layout saying 0 bytes
(every command seals FILE after editing it)"""
import struct
import sys

USER_BLOCK = 512  # the trace's checksum block (docs/traces.md), before HDF5's data


def crc32c(data):
    """CRC32C (Castagnoli, reflected), as the checksum block uses."""
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    crc = 0xFFFFFFFF
    for b in data:
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def seal(path):
    """Writes the checksum block of docs/traces.md for the file as it is."""
    data = bytearray(open(path, "rb").read())
    block = b"QSGD-TRACE-CRC32" + struct.pack("<QI", len(data), crc32c(data[USER_BLOCK:]))
    data[:USER_BLOCK] = block + bytes(USER_BLOCK - len(block))
    open(path, "wb").write(data)


def float_epoch(path):
    import h5py
    with h5py.File(path, "r+") as f:
        epoch = f["steps/epoch"][...]
        del f["steps/epoch"]
        f["steps"].create_dataset("epoch", data=epoch.astype("f8"))


def empty_compact(path):
    """/steps/epoch rewritten with a compact layout (its data in the object
    header), then the layout message's size field set to 0 while the
    dataspace keeps its elements: what HDF5 1.10.8's H5Dread copies from
    without a check."""
    import h5py
    with h5py.File(path, "r+") as f:
        epoch = f["steps/epoch"][...]
        del f["steps/epoch"]
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_layout(h5py.h5d.COMPACT)
        dset = h5py.h5d.create(f["steps"].id, b"epoch", h5py.h5t.NATIVE_INT32,
                               h5py.h5s.create_simple(epoch.shape), dcpl=dcpl)
        dset.write(h5py.h5s.ALL, h5py.h5s.ALL, epoch)
        header = USER_BLOCK + h5py.h5o.get_info(dset).addr
    data = bytearray(open(path, "rb").read())
    le = lambda at, n: int.from_bytes(data[at:at + n], "little")  # noqa: E731
    if data[header] != 1:
        raise SystemExit("forge_trace.py: the dataset's object header is not version 1")
    chunks = [(header + 16, le(header + 8, 4))]  # version 1: messages after a 16-byte prefix
    for start, length in chunks:
        at = start
        while at + 8 <= start + length:
            kind, size = le(at, 2), le(at + 2, 2)
            if kind == 0x08:  # layout, version 3: version, class (0 compact), u16 size
                if data[at + 8] != 3 or data[at + 9] != 0:
                    raise SystemExit("forge_trace.py: the layout message is not a version 3 compact one")
                data[at + 10:at + 12] = b"\0\0"
                open(path, "wb").write(data)
                return
            if kind == 0x10:  # continuation: address and length of the next chunk
                chunks.append((USER_BLOCK + le(at + 8, 8), le(at + 16, 8)))
            at += 8 + size
    raise SystemExit("forge_trace.py: no layout message in the dataset's object header")


if __name__ == "__main__":
    edits = {"seal": None, "float-epoch": float_epoch, "empty-compact": empty_compact}
    if len(sys.argv) != 3 or sys.argv[1] not in edits:
        raise SystemExit(__doc__)
    if edits[sys.argv[1]]:
        edits[sys.argv[1]](sys.argv[2])
    seal(sys.argv[2])
