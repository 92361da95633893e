#!/usr/bin/python3
"""scripts/pack-results and qsgd_report.unpack_traces: a folder's traces go
into traces.tar.xz and come back byte for byte; --check names a trace that is
not packed, one that differs and one git tracks; a member that would land
outside its folder or is not a trace is refused; the archive's bytes depend on
the traces alone."""
import os
import subprocess
import sys
import tarfile
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
PACK = os.path.join(ROOT, "scripts", "pack-results")
sys.path.insert(0, os.path.join(ROOT, "benchmarks", "common"))
import qsgd_report  # noqa: E402


def run(*args, cwd=None):
    return subprocess.run(["/usr/bin/python3", PACK, *args], capture_output=True, text=True, cwd=cwd)


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def read(path):
    with open(path, "rb") as f:
        return f.read()


class PackResults(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.d = os.path.join(self.tmp.name, "table")
        self.files = {"a.h5": os.urandom(5000), "sub/b.h5": b"\x89HDF" * 3000, "c.h5": b""}
        for rel, data in self.files.items():
            write(os.path.join(self.d, rel), data)
        write(os.path.join(self.d, "summary.txt"), b"not a trace")

    def tearDown(self):
        self.tmp.cleanup()

    def pack(self):
        r = run(self.d)
        self.assertEqual(r.returncode, 0, r.stderr)
        return os.path.join(self.d, qsgd_report.TRACES_ARCHIVE)

    def test_round_trip_byte_for_byte(self):
        archive = self.pack()
        with tarfile.open(archive) as tar:
            self.assertEqual(sorted(tar.getnames()), sorted(self.files))
        for rel in self.files:
            os.unlink(os.path.join(self.d, rel))
        qsgd_report.unpack_traces(os.path.join(self.d, "sub"))  # from a subfolder: the archive above it
        for rel, data in self.files.items():
            self.assertEqual(read(os.path.join(self.d, rel)), data, rel)
        self.assertEqual(read(os.path.join(self.d, "summary.txt")), b"not a trace")
        self.assertEqual(run("--check", self.d).returncode, 0)

    def test_same_traces_same_bytes(self):
        first = read(self.pack())
        for rel in self.files:  # new times on disk, same contents
            os.utime(os.path.join(self.d, rel), (1, 1))
        self.assertEqual(read(self.pack()), first)

    def test_packing_again_keeps_what_is_not_on_disk(self):
        self.pack()
        os.unlink(os.path.join(self.d, "a.h5"))
        write(os.path.join(self.d, "d.h5"), b"new run")
        self.pack()
        with tarfile.open(os.path.join(self.d, qsgd_report.TRACES_ARCHIVE)) as tar:
            self.assertEqual(sorted(tar.getnames()), sorted(list(self.files) + ["d.h5"]))

    def test_packing_again_takes_a_changed_trace(self):
        """A run written again into a packed folder: its new bytes (another
        size) replace the packed copy, the other traces stay."""
        self.pack()
        os.unlink(os.path.join(self.d, "c.h5"))
        write(os.path.join(self.d, "a.h5"), b"a newer run of another size")
        self.pack()
        for rel in self.files:
            p = os.path.join(self.d, rel)
            if os.path.exists(p):
                os.unlink(p)
        qsgd_report.unpack_traces(self.d)
        self.assertEqual(read(os.path.join(self.d, "a.h5")), b"a newer run of another size")
        self.assertEqual(read(os.path.join(self.d, "sub", "b.h5")), self.files["sub/b.h5"])
        self.assertEqual(read(os.path.join(self.d, "c.h5")), b"")

    def test_written_back_traces_get_the_umask_mode_and_a_stamp(self):
        self.pack()
        for rel in self.files:
            os.unlink(os.path.join(self.d, rel))
        old = os.umask(0o022)
        try:
            qsgd_report.unpack_traces(self.d)
        finally:
            os.umask(old)
        self.assertEqual(os.stat(os.path.join(self.d, "a.h5")).st_mode & 0o777, 0o644)
        self.assertTrue(os.path.exists(os.path.join(self.d, qsgd_report.TRACES_STAMP)))
        # With the stamp, a trace removed since is still written back.
        os.unlink(os.path.join(self.d, "sub", "b.h5"))
        qsgd_report.unpack_traces(self.d)
        self.assertEqual(read(os.path.join(self.d, "sub", "b.h5")), self.files["sub/b.h5"])

    def test_a_file_argument_reads_its_own_folder_not_the_folders_below(self):
        self.pack()
        for rel in self.files:
            os.unlink(os.path.join(self.d, rel))
        qsgd_report.unpack_traces(os.path.join(self.tmp.name, "x.h5"))  # the folder above: no archive there
        self.assertFalse(os.path.exists(os.path.join(self.d, "a.h5")))
        qsgd_report.unpack_traces(os.path.join(self.d, "a.h5"))
        self.assertEqual(read(os.path.join(self.d, "a.h5")), self.files["a.h5"])

    def test_check_names_unpacked_and_changed_traces(self):
        r = run("--check", self.d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("a.h5: not in", r.stderr)
        self.pack()
        write(os.path.join(self.d, "sub", "b.h5"), b"changed")
        write(os.path.join(self.d, "e.h5"), b"never packed")
        r = run("--check", self.d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("b.h5: differs from its copy", r.stderr)
        self.assertIn("e.h5: not in", r.stderr)
        self.assertNotIn("a.h5", r.stderr)

    def test_check_names_a_trace_git_tracks(self):
        self.pack()
        git = ["git", "-C", self.d, "-c", "user.name=t", "-c", "user.email=t@t"]
        subprocess.run(git + ["init", "-q"], check=True)
        subprocess.run(git + ["add", "a.h5"], check=True)
        r = run("--check", self.d)
        self.assertEqual(r.returncode, 1)
        self.assertIn("a.h5: a trace tracked by git", r.stderr)

    def test_unpack_refuses_a_differing_file_and_leaves_it(self):
        self.pack()
        write(os.path.join(self.d, "a.h5"), b"a run not yet packed")
        with self.assertRaisesRegex(ValueError, "a.h5 differs from its copy"):
            qsgd_report.unpack_traces(self.d)
        self.assertEqual(read(os.path.join(self.d, "a.h5")), b"a run not yet packed")

    def test_unpack_refuses_members_outside_the_folder_or_not_traces(self):
        for name in ("../escape.h5", "/abs.h5", "notes.txt"):
            d = tempfile.mkdtemp(dir=self.tmp.name)
            with tarfile.open(os.path.join(d, qsgd_report.TRACES_ARCHIVE), "w:xz") as tar:
                info = tarfile.TarInfo(name)
                info.size = 3
                tar.addfile(info, __import__("io").BytesIO(b"abc"))
            with self.assertRaisesRegex(ValueError, "is not a trace"):
                qsgd_report.unpack_traces(d)
            self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "escape.h5")))
            self.assertEqual(os.listdir(d), [qsgd_report.TRACES_ARCHIVE])

    def test_bad_usage(self):
        self.assertEqual(run().returncode, 2)
        self.assertEqual(run("--bogus", self.d).returncode, 2)
        r = run(os.path.join(self.d, "missing"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("is not a folder", r.stderr)


if __name__ == "__main__":
    unittest.main()
