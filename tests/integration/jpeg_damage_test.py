#!/usr/bin/python3
"""Photographs damaged the way disks and transfers damage JPEGs (bytes
overwritten inside the compressed data; tests/fixtures/damaged_photos.py),
judged by libjpeg-turbo's own djpeg, then given to aquifer:

  - every file djpeg reports corrupt (a bad Huffman code, a premature end,
    coded data left over before a marker) or cannot decode is named by
    `dataset pack`, `dataset verify --decode` and the input pipeline, and
    none of them is packed, vouched for or trained on; so is every file
    whose bad Huffman code djpeg names only once the file is shifted
    against its input buffer ("hidden": djpeg's fast path reads a bad code
    as a zero without a word, see the fixture);
  - no file djpeg decodes without a word, at every shift, is refused by any
    of them (some damaged files are among these: the damage changed
    coefficients without breaking the code, and djpeg cannot see it either).

usage: jpeg_damage_test.py path/to/aquifer [--seeds N]
Skips (exit 77) without libjpeg-turbo-progs or the photographs."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import s3lib  # noqa: E402  (Cli: the binary's calls)

if shutil.which("djpeg") is None or shutil.which("cjpeg") is None:
    print("SKIP: cjpeg/djpeg (libjpeg-turbo-progs) not installed")
    sys.exit(77)

AQUIFER = None
SEEDS = "8"


def aquifer_json(*args):
    return s3lib.Cli(AQUIFER).json(*args, expect=(0, 1))  # 1: damage found


class DamagedPhotos(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aq_damage_")
        cls.root = os.path.join(cls.tmp, "photos")
        cache = os.path.join(os.path.dirname(os.path.abspath(AQUIFER)), "photo-cache")
        p = subprocess.run([sys.executable, os.path.join(HERE, "..", "fixtures", "damaged_photos.py"), cls.root,
                            "--seeds", SEEDS, "--cache", cache])
        if p.returncode == 77:
            raise unittest.SkipTest("no photographs")
        p.check_returncode()
        with open(os.path.join(cls.root, "manifest.json")) as fh:
            cls.manifest = {m["path"]: m for m in json.load(fh)}
        cls.clean = {p for p, m in cls.manifest.items() if m["verdict"] == "clean"}
        cls.bad = set(cls.manifest) - cls.clean

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def check_named(self, named, tool):
        named = {os.path.abspath(p) for p in named}
        missed = sorted(self.bad - named)
        self.assertEqual(missed, [], f"{tool} passed {len(missed)} files djpeg reports corrupt: " +
                         "; ".join(f"{os.path.basename(p)} ({self.manifest[p]['why']})" for p in missed[:10]))
        refused = sorted(named & self.clean)
        self.assertEqual(refused, [], f"{tool} refused {len(refused)} files djpeg decodes cleanly")

    def test_the_corpus_has_every_kind_of_damage(self):
        verdicts = [m["verdict"] for m in self.manifest.values() if m["damage"] != "undamaged"]
        for v in ("clean", "warned", "corrupt"):
            self.assertGreaterEqual(verdicts.count(v), 5, f"too few damaged files djpeg calls {v}")
        whys = " ".join(m["why"] for m in self.manifest.values())
        for why in ("bad Huffman code", "extraneous bytes before marker 0xd9", "premature end"):
            self.assertIn(why, whys)

    def test_pack_names_every_corrupt_file_and_packs_every_clean_one(self):
        out = os.path.join(self.tmp, "packed")
        r = aquifer_json("dataset", "pack", self.root, "-o", out, "--on-error", "skip", "--shards", "2")
        self.check_named([s["file"] for s in r["skipped"]], "pack")
        self.assertEqual(r["images"], len(self.clean))
        for s in r["skipped"]:
            self.assertTrue(s["reason"], s)
        # What pack kept, verify finds clean, record by record.
        v = aquifer_json("dataset", "verify", out, "--decode")
        self.assertEqual(v["problems"], [], v["problems"][:3])

    def test_verify_names_every_corrupt_file(self):
        r = aquifer_json("dataset", "verify", self.root, "--decode", "--max-problems", "100000")
        self.check_named([p["file"] for p in r["problems"]], "verify --decode")

    def test_the_pipeline_names_every_corrupt_sample(self):
        # A batch size that divides the corpus, so every sample is read.
        n = len(self.manifest)
        batch = next(b for b in (5, 4, 3, 2, 1) if n % b == 0)
        r = aquifer_json("bench", "pipeline", self.root, "--on-error", "skip", "--batch", str(batch), "-j", "2",
                         "--warmup", "0")
        self.assertEqual(r["bad_samples"], len(self.bad))
        if len(self.bad) <= 100:  # the pipeline lists the first 100
            self.check_named([p["file"] for p in r["problems"]], "the pipeline")
        else:
            named = {os.path.abspath(p["file"]) for p in r["problems"]}
            self.assertEqual(named & self.clean, set())


def main():
    global AQUIFER, SEEDS
    args = sys.argv[1:]
    if "--seeds" in args:
        i = args.index("--seeds")
        SEEDS = args[i + 1]
        del args[i:i + 2]
    if len(args) != 1:
        sys.exit(__doc__)
    AQUIFER = os.path.abspath(args[0])
    unittest.main(argv=[sys.argv[0], "-v"])


if __name__ == "__main__":
    main()
