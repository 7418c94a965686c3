#!/usr/bin/python3
"""TFRecord + tf.Example compatibility, both directions, byte for byte.

usage: tfrecord_compat.py path/to/aquifer
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import spec  # noqa: E402
from PIL import Image  # noqa: E402

AQUIFER = None


def run(*args, check=True):
    p = subprocess.run([AQUIFER, *args], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"aquifer {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def pil_jpeg(seed, w, h):
    img = Image.new("RGB", (w, h))
    img.putdata([((x * 7 + seed) % 256, (y * 5 + seed * 3) % 256, (x * y + seed) % 256)
                 for y in range(h) for x in range(w)])
    out = io.BytesIO()
    img.save(out, format="JPEG", quality=90)
    return out.getvalue()


class AquiferWritesPythonReads(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aq_tf_compat_")
        run("dataset", "synth", "--out", f"{cls.tmp}/raw", "--classes", "5", "--images", "40", "--seed", "3")
        run("dataset", "pack", f"{cls.tmp}/raw", "--out", f"{cls.tmp}/tf", "--shards", "4")
        cls.shards = sorted(f for f in os.listdir(f"{cls.tmp}/tf") if f.startswith("train-"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_framing_crcs_and_examples_parse(self):
        self.assertEqual(self.shards, [f"train-0000{i}-of-00004" for i in range(4)])
        labels = set()
        n = 0
        for shard in self.shards:
            for _, data in spec.tfrecord_read(f"{self.tmp}/tf/{shard}"):
                ex = spec.Example()
                ex.ParseFromString(data)
                f = ex.features.feature
                label = f["image/class/label"].int64_list.value[0]
                self.assertTrue(1 <= label <= 5)
                labels.add(label)
                jpeg = f["image/encoded"].bytes_list.value[0]
                self.assertEqual(jpeg[:3], b"\xff\xd8\xff")
                img = Image.open(io.BytesIO(jpeg))
                self.assertEqual(img.size, (f["image/width"].int64_list.value[0], f["image/height"].int64_list.value[0]))
                self.assertEqual(f["image/format"].bytes_list.value[0], b"JPEG")
                self.assertEqual(f["image/colorspace"].bytes_list.value[0], b"RGB")
                self.assertEqual(f["image/channels"].int64_list.value[0], 3)
                self.assertTrue(f["image/filename"].bytes_list.value[0].endswith(b".JPEG"))
                self.assertTrue(f["image/class/synset"].bytes_list.value[0].startswith(b"n"))
                self.assertIn("image/object/bbox/xmin", f)
                # Byte for byte: protobuf's deterministic serialization of
                # what it parsed is exactly what aquifer wrote.
                self.assertEqual(ex.SerializeToString(deterministic=True), data)
                n += 1
        self.assertEqual(n, 40)
        self.assertEqual(labels, {1, 2, 3, 4, 5})

    def test_rebuilt_shard_is_byte_identical(self):
        # Rebuild each shard from its fields with the reference converter's
        # recipe, in the same order, and compare whole files.
        for shard in self.shards:
            path = f"{self.tmp}/tf/{shard}"
            rebuilt = bytearray()
            for _, data in spec.tfrecord_read(path):
                ex = spec.Example()
                ex.ParseFromString(data)
                f = ex.features.feature
                new = spec.imagenet_example(
                    f["image/encoded"].bytes_list.value[0], f["image/class/label"].int64_list.value[0],
                    f["image/height"].int64_list.value[0], f["image/width"].int64_list.value[0],
                    f["image/filename"].bytes_list.value[0].decode(), f["image/class/synset"].bytes_list.value[0].decode(),
                    f["image/class/text"].bytes_list.value[0].decode())
                rebuilt += spec.tfrecord_frame(new.SerializeToString(deterministic=True))
            with open(path, "rb") as fh:
                self.assertEqual(fh.read(), bytes(rebuilt), shard)

    def test_index_matches_dali_tfrecord2idx(self):
        for shard in self.shards:
            with open(f"{self.tmp}/tf/idx/{shard}.idx") as fh:
                self.assertEqual(fh.read(), spec.tfrecord2idx(f"{self.tmp}/tf/{shard}"))


class PythonWritesAquiferReads(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="aq_tf_compat_")
        self.images = []
        blob = bytearray()
        for i in range(12):
            w, h = 40 + i * 3, 30 + i
            jpeg = pil_jpeg(i, w, h)
            boxes = [(0.1, 0.2, 0.8, 0.9)] if i % 2 else []
            ex = spec.imagenet_example(jpeg, 1 + i % 4, h, w, f"img_{i}.JPEG", f"n{i % 4:08d}", "some text", boxes)
            ex.features.feature["my/unknown_feature"].bytes_list.value.append(b"kept as is")
            blob += spec.tfrecord_frame(ex.SerializeToString())
            self.images.append((jpeg, 1 + i % 4, w, h, f"img_{i}.JPEG"))
        self.path = f"{self.tmp}/train-00000-of-00001"
        with open(self.path, "wb") as fh:
            fh.write(bytes(blob))

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_verify_and_inspect(self):
        v = json.loads(run("dataset", "verify", self.tmp, "--json").stdout)
        self.assertTrue(v["ok"], v)
        self.assertEqual(v["records"], 12)
        self.assertEqual(v["format"], "tfrecord")
        rows = json.loads(run("dataset", "inspect", self.path, "--limit", "0", "--json").stdout)["records"]
        self.assertEqual(len(rows), 12)
        for row, (jpeg, label, w, h, name) in zip(rows, self.images):
            self.assertEqual(row["label"], label)
            self.assertEqual(row["key"], name)
            self.assertEqual((row["width"], row["height"]), (w, h))
            self.assertEqual(row["image_bytes"], len(jpeg))
            self.assertEqual(row["image_crc32c"], spec.crc32c(jpeg))

    def test_resize_keeps_unknown_features(self):
        run("dataset", "resize", self.tmp, "--out", f"{self.tmp}/big", "--scale", "2")
        for (_, data), (jpeg, label, w, h, name) in zip(spec.tfrecord_read(f"{self.tmp}/big/train-00000-of-00001"),
                                                        self.images):
            ex = spec.Example()
            ex.ParseFromString(data)
            f = ex.features.feature
            self.assertEqual(f["my/unknown_feature"].bytes_list.value[0], b"kept as is")
            self.assertEqual(f["image/width"].int64_list.value[0], 2 * w)
            self.assertEqual(Image.open(io.BytesIO(f["image/encoded"].bytes_list.value[0])).size, (2 * w, 2 * h))
            self.assertEqual(f["image/class/label"].int64_list.value[0], label)

    def test_corruption_is_reported_with_record_and_offset(self):
        offsets = [off for off, _ in spec.tfrecord_read(self.path)]
        with open(self.path, "r+b") as fh:
            fh.seek(offsets[5] + 40)
            b = fh.read(1)
            fh.seek(offsets[5] + 40)
            fh.write(bytes([b[0] ^ 0xFF]))
        p = run("dataset", "verify", self.tmp, "--json", check=False)
        self.assertEqual(p.returncode, 1)
        v = json.loads(p.stdout)
        self.assertFalse(v["ok"])
        self.assertEqual(v["problems"][0]["record"], 5)
        self.assertEqual(v["problems"][0]["offset"], offsets[5])
        self.assertIn("CRC", v["problems"][0]["message"])


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
