#!/usr/bin/python3
"""MXNet RecordIO (.rec/.idx/.lst) compatibility, both directions, byte for byte.

usage: recordio_compat.py path/to/aquifer
"""
import io
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec  # noqa: E402
from PIL import Image  # noqa: E402

AQUIFER = None
MAGIC = struct.pack("<I", spec.MAGIC)


def run(*args, check=True):
    p = subprocess.run([AQUIFER, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"aquifer {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def pil_jpeg(seed, w=48, h=32):
    img = Image.new("RGB", (w, h), ((seed * 40) % 256, 100, 200))
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=85)
    return out.getvalue()


class AquiferWritesPythonReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aq_rec_compat_")
        run("dataset", "synth", "--out", f"{cls.tmp}/raw", "--classes", "4", "--images", "30", "--seed", "5")
        # One image whose bytes contain the RecordIO magic at 4-aligned
        # positions of the record payload (24-byte header + JPEG), so aquifer
        # must split it. JPEG decoders ignore bytes after the end marker.
        jpeg = pil_jpeg(1)
        jpeg += b"\0" * ((-(24 + len(jpeg))) % 4) + MAGIC + b"tail" + MAGIC + MAGIC + b"end"
        cls.magic_jpeg = jpeg
        cls.magic_name = "zz_magic.JPEG"
        first_class = sorted(d for d in os.listdir(f"{cls.tmp}/raw") if os.path.isdir(f"{cls.tmp}/raw/{d}"))[0]
        with open(f"{cls.tmp}/raw/{first_class}/{cls.magic_name}", "wb") as fh:
            fh.write(jpeg)
        run("dataset", "pack", f"{cls.tmp}/raw", "--out", f"{cls.tmp}/rec", "--format", "recordio")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_records_headers_index_and_list(self):
        rec = f"{self.tmp}/rec/train.rec"
        records = list(spec.recordio_read(rec))
        self.assertEqual(len(records), 31)
        with open(f"{self.tmp}/rec/train.idx") as fh:
            idx = [tuple(map(int, line.split("\t"))) for line in fh.read().splitlines()]
        with open(f"{self.tmp}/rec/train.lst") as fh:
            lst = [line.split("\t") for line in fh.read().splitlines()]
        self.assertEqual(len(idx), 31)
        self.assertEqual(len(lst), 31)
        found_magic = False
        for (offset, payload), (key, idx_off), (lst_id, lst_label, lst_path) in zip(records, idx, lst):
            self.assertEqual(offset, idx_off)
            flag, label, id_, _, _, image = spec.unpack_header(payload)
            self.assertEqual(flag, 0)
            self.assertEqual(id_, key)
            self.assertEqual(int(lst_id), key)
            self.assertEqual(float(lst_label), label)
            self.assertEqual(image[:3], b"\xff\xd8\xff")
            class_dir, name = lst_path.split("/")
            with open(f"{self.tmp}/raw/{class_dir}/{name}", "rb") as fh:
                self.assertEqual(fh.read(), image)
            if name == self.magic_name:
                found_magic = True
                self.assertEqual(image, self.magic_jpeg)
        self.assertTrue(found_magic)
        labels = {spec.unpack_header(p)[1] for _, p in records}
        self.assertEqual(labels, {0.0, 1.0, 2.0, 3.0})  # 0-based, as im2rec

    def test_rewritten_file_is_byte_identical(self):
        rec = f"{self.tmp}/rec/train.rec"
        rebuilt = b"".join(spec.recordio_frame(p) for _, p in spec.recordio_read(rec))
        with open(rec, "rb") as fh:
            original = fh.read()
        self.assertEqual(original, rebuilt)
        self.assertGreater(original.count(MAGIC), 31)  # the split record has extra parts


class PythonWritesAquiferReads(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="aq_rec_compat_")
        self.rec = f"{self.tmp}/val.rec"
        blob = bytearray()
        idx = []
        self.expect = []
        for i in range(10):
            jpeg = pil_jpeg(i)
            if i == 3:  # aligned magic inside the payload
                jpeg += b"\0" * ((-(24 + len(jpeg))) % 4) + MAGIC + b"more"
            if i == 6:
                header = spec.pack_header(0, 100 + i, labels=[7.0, 8.0, 9.0])
                label = 7
            else:
                header = spec.pack_header(i % 3, 100 + i)
                label = i % 3
            idx.append(f"{100 + i}\t{len(blob)}\n")
            blob += spec.recordio_frame(header + jpeg)
            self.expect.append((str(100 + i), label, jpeg))
        with open(self.rec, "wb") as fh:
            fh.write(bytes(blob))
        with open(f"{self.tmp}/val.idx", "w") as fh:
            fh.write("".join(idx))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_verify_and_inspect(self):
        v = json.loads(run("dataset", "verify", self.tmp, "--json").stdout)
        self.assertTrue(v["ok"], v)
        self.assertEqual(v["records"], 10)
        rows = json.loads(run("dataset", "inspect", self.rec, "--limit", "0", "--json").stdout)["records"]
        self.assertEqual(len(rows), 10)
        for row, (key, label, jpeg) in zip(rows, self.expect):
            self.assertEqual(row["key"], key)
            self.assertEqual(row["label"], label)
            self.assertEqual(row["image_crc32c"], spec.crc32c(jpeg))
            self.assertEqual((row["width"], row["height"]), (48, 32))

    def test_wrong_index_is_reported(self):
        with open(f"{self.tmp}/val.idx", "a") as fh:
            fh.write("999\t8\n")
        p = run("dataset", "verify", self.tmp, "--json", check=False)
        self.assertEqual(p.returncode, 1)
        v = json.loads(p.stdout)
        self.assertIn("not the start of a record", v["problems"][0]["message"])

    def test_bad_magic_is_reported_with_offset(self):
        offsets = [off for off, _ in spec.recordio_read(self.rec)]
        with open(self.rec, "r+b") as fh:
            fh.seek(offsets[4])
            fh.write(b"JUNK")
        p = run("dataset", "verify", self.rec, "--json", check=False)
        self.assertEqual(p.returncode, 1)
        v = json.loads(p.stdout)
        self.assertEqual(v["problems"][0]["offset"], offsets[4])
        self.assertIn("bad magic", v["problems"][0]["message"])
        self.assertEqual(v["records"], 9)  # verify skips the damage and reads on


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
