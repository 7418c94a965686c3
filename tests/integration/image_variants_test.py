#!/usr/bin/python3
"""The dataset tools and the input pipeline on the image files real
datasets contain, made by tools other than aquifer (tests/fixtures/
image_variants.py: cjpeg, jpegtran and PIL), judged by tools other than
aquifer (djpeg for JPEGs, PIL for the rest):

  - pack keeps every image libjpeg decodes cleanly, converts every PNG/GIF/
    BMP PIL decodes, lists every other file, and writes the same bytes with
    one thread or two;
  - verify --decode and the pipeline report exactly the damaged and
    undecodable files, whatever thread they land on;
  - the evaluation transform matches torchvision's (MAE <= 3) on every
    image, read from the folder and from the packed records.

usage: image_variants_test.py path/to/aquifer
Skips (exit 0 with a note) without torchvision or libjpeg-turbo-progs."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
sys.path.insert(0, HERE)
import s3lib  # noqa: E402  (Cli: the binary's calls)

try:
    import numpy as np
    from PIL import Image
    from torchvision import transforms
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torchvision not available ({e})")
    sys.exit(0)
if shutil.which("cjpeg") is None or shutil.which("djpeg") is None:
    print("SKIP: cjpeg/djpeg (libjpeg-turbo-progs) not installed")
    sys.exit(0)

AQUIFER = None
GOOD = ("jpeg", "convert", "warned")
BAD = ("damaged", "undecodable")


def aquifer(*args, ok=True):
    return s3lib.Cli(AQUIFER).ok(*args, expect=0 if ok else None)


def aquifer_json(*args, ok=True):
    return s3lib.Cli(AQUIFER).json(*args, expect=0 if ok else None)


class ImageVariants(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aq_variants_")
        cls.root = os.path.join(cls.tmp, "raw")
        subprocess.run([sys.executable, os.path.join(HERE, "..", "fixtures", "image_variants.py"), cls.root],
                       check=True)
        with open(os.path.join(cls.root, "manifest.json")) as fh:
            cls.manifest = {m["path"]: m for m in json.load(fh) if m["kind"] != "ignored"}
        cls.good = {p for p, m in cls.manifest.items() if m["kind"] in GOOD}
        cls.bad = {p for p, m in cls.manifest.items() if m["kind"] in BAD}
        cls.convert = {p for p, m in cls.manifest.items() if m["kind"] == "convert"}
        cls.packs = {}
        for threads in ("1", "2"):
            out = os.path.join(cls.tmp, f"packed-j{threads}")
            cls.packs[threads] = aquifer_json("dataset", "pack", cls.root, "-o", out, "--on-error", "skip",
                                              "--shards", "3", "-j", threads)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def test_fixture_has_the_variety(self):
        kinds = [m["kind"] for m in self.manifest.values()]
        self.assertGreaterEqual(kinds.count("jpeg"), 60)
        self.assertGreaterEqual(kinds.count("convert"), 10)
        self.assertGreaterEqual(kinds.count("damaged") + kinds.count("undecodable"), 15)

    def test_pack_keeps_every_good_image_and_lists_every_bad_one(self):
        r = self.packs["1"]
        skipped = {s["file"]: s["reason"] for s in r["skipped"]}
        lost = sorted(p for p in self.good if p in skipped)
        self.assertEqual(lost, [], "valid images left out: " + "; ".join(f"{p}: {skipped[p]}" for p in lost))
        passed = sorted(p for p in self.bad if p not in skipped)
        self.assertEqual(passed, [], "damaged files packed: " +
                         "; ".join(f"{p} ({self.manifest[p]['why']})" for p in passed))
        self.assertEqual(r["images"], len(self.good))
        self.assertEqual(r["found"], len(self.good) + len(self.bad))
        self.assertEqual({c["file"] for c in r["converted"]}, self.convert)
        # Extraneous bytes before a marker: packed whole, the warning named.
        warned = {p for p, m in self.manifest.items() if m["kind"] == "warned"}
        self.assertGreaterEqual(len(warned), 2)
        self.assertEqual({w["file"] for w in r["warnings"]}, warned)
        self.assertTrue(all("extraneous" in w["warning"] for w in r["warnings"]), r["warnings"])
        # Every file not taken is named with why: README.txt and labels.csv in
        # class folders, manifest.json beside them.
        ignored = {i["file"]: i["reason"] for i in r["ignored"]}
        self.assertEqual(r["ignored_files"], len(ignored))
        self.assertEqual({os.path.basename(p) for p in ignored}, {"README.txt", "labels.csv", "manifest.json"})
        self.assertTrue(all(ignored.values()), ignored)
        for reason in skipped.values():
            self.assertTrue(reason, "every left-out file says why")

    def test_pack_is_identical_with_one_thread_or_two(self):
        a, b = self.packs["1"], self.packs["2"]
        for key in ("images", "found", "converted", "skipped", "ignored_files", "bytes_out"):
            self.assertEqual(a[key], b[key], key)
        for fa, fb in zip(a["files"], b["files"]):
            with open(fa, "rb") as x, open(fb, "rb") as y:
                self.assertEqual(x.read(), y.read(), f"{fa} != {fb}")

    def test_pack_fails_on_the_first_bad_image_by_default_and_says_how_to_go_on(self):
        p = aquifer("dataset", "pack", self.root, "-o", os.path.join(self.tmp, "strict"), ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("--on-error skip", p.stderr)
        self.assertTrue(any(os.path.basename(b) in p.stderr for b in self.bad), p.stderr)

    def test_verify_decode_reports_exactly_the_damaged_files(self):
        for threads in ("1", "2"):
            r = aquifer_json("dataset", "verify", "--decode", self.root, "-j", threads, "--max-problems", "1000",
                             ok=False)
            files = [p["file"] for p in r["problems"]]
            self.assertEqual(len(files), len(set(files)), "one problem per file")
            self.assertEqual(set(files), self.bad, f"-j {threads}")
            self.assertEqual(files, sorted(files), "problems in file order")
        # Headers only: every file that is cut short or not an image, and no valid one.
        r = aquifer_json("dataset", "verify", self.root, "--max-problems", "1000", ok=False)
        files = {p["file"] for p in r["problems"]}
        self.assertTrue(files <= self.bad, files - self.bad)
        self.assertTrue({p for p in self.bad if "/cut_" in p} <= files)

    def test_packed_records_verify_clean(self):
        r = aquifer_json("dataset", "verify", "--decode", os.path.join(self.tmp, "packed-j1"))
        self.assertTrue(r["ok"], r["problems"])
        self.assertEqual(r["records"], len(self.good))

    def test_inspect_reads_every_good_header(self):
        rows = aquifer_json("dataset", "inspect", self.root, "-n", "0")["records"]
        self.assertEqual(len(rows), len(self.good) + len(self.bad))
        for row in rows:
            if row["file"] in self.good:
                self.assertNotIn("error", row, row)
                self.assertGreater(row["width"], 0, row)
            elif "/cut_" in row["file"] or "/soi_" in row["file"] or "/precision_12" in row["file"]:
                self.assertIn("error", row, row)  # cut short or unreadable headers show at once

    def eval_batch(self, data, count):
        dump = os.path.join(self.tmp, "batch")
        stats = aquifer_json("bench", "pipeline", data, "--eval", "--dtype", "u8", "--layout", "nhwc", "--batch",
                             str(count), "--shuffle-buffer", "1", "--no-file-shuffle", "--warmup", "0", "--dump",
                             dump, "-j", "2", "--memory-limit", "4GiB")
        with open(dump + ".json") as fh:
            meta = json.load(fh)
        pixels = np.fromfile(dump, dtype=np.uint8).reshape(meta["size"], 224, 224, 3)
        return stats, meta, pixels

    def assert_matches_torchvision(self, pixels, originals):
        tv = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
        worst = []
        for i, path in enumerate(originals):
            with Image.open(path) as im:
                ref = np.asarray(tv(im.convert("RGB")), dtype=np.int16)
            worst.append((float(np.abs(ref - pixels[i].astype(np.int16)).mean()), path))
        worst.sort(reverse=True)
        print(f"  MAE vs torchvision over {len(worst)} images: max {worst[0][0]:.2f} ({os.path.basename(worst[0][1])})")
        self.assertLessEqual(worst[0][0], 3.0, worst[:5])

    def test_pipeline_reports_the_damaged_files_and_matches_torchvision_on_the_rest(self):
        n = len(self.good) + len(self.bad)
        stats, meta, pixels = self.eval_batch(self.root, n)
        reported = {p["file"] for p in stats["problems"]}
        self.assertEqual(stats["bad_samples"], len(self.bad))
        self.assertEqual(reported, self.bad)
        files = [meta["files"][s] for s in meta["samples"]]
        self.assertEqual(set(files), self.good, "bad samples are replaced by good ones of the batch")
        self.assert_matches_torchvision(pixels, files)

    def test_pipeline_on_packed_records_matches_torchvision_on_the_originals(self):
        packed = os.path.join(self.tmp, "packed-j1")
        stats, meta, pixels = self.eval_batch(packed, len(self.good))
        self.assertEqual(stats["bad_samples"], 0, stats["problems"])
        rows = aquifer_json("dataset", "inspect", packed, "-n", "0")["records"]
        by_key = {(r["file"], r["record"]): r["key"] for r in rows}
        originals_by_name = {os.path.basename(p): p for p in self.good}
        originals = [originals_by_name[by_key[(meta["files"][f], rec)]] for f, rec in meta["where"]]
        self.assertEqual(set(originals), self.good)
        self.assert_matches_torchvision(pixels, originals)


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
