#!/usr/bin/python3
"""dataset pack on an image folder with what real folders hold besides
clean class/image files, judged against torchvision's ImageFolder on the
same folder:

  - a hidden class folder with images (torchvision counts it), images in
    sub-folders of a class, a class folder that is a link, a class made
    only of links;
  - dangling links named as images and as other files, a link loop;
  - names with spaces, non-ASCII, a tab and a newline;
  - files beside the class folders and files with other names.

Every file is named in the output as packed, converted, left out (with
why) or ignored (with why); the label of every packed image is
torchvision's class_to_idx of its class; EXIF orientation is ignored as
torchvision does (or applied as PIL's exif_transpose, with
--exif-orientation apply); a .lst line stays one line per image; the empty-class rule is torchvision's (refused, or kept with
--allow-empty-classes).

usage: pack_accounting_test.py path/to/aquifer
Skips (exit 0 with a note) without torchvision."""
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import s3lib  # noqa: E402  (Cli: the binary's calls)

try:
    import numpy as np
    from PIL import Image
    from torchvision.datasets import ImageFolder
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torchvision not available ({e})")
    sys.exit(0)

AQUIFER = None


def aquifer(*args, ok=True):
    return s3lib.Cli(AQUIFER).ok(*args, expect=0 if ok else None)


def image(path, seed, fmt="JPEG"):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, (24, 32, 3), dtype=np.uint8)).save(path, fmt)


def build(root):
    image(f"{root}/.hidden_class/h1.jpg", 1)
    image(f"{root}/cat/a.jpg", 2)
    image(f"{root}/cat/sub/deeper/b.JPEG", 3)
    image(f"{root}/cat/sub dir/ü 名.jpg", 4)
    image(f"{root}/cat/tab\there.jpg", 5)
    image(f"{root}/cat/new\nline.jpg", 6)
    image(f"{root}/cat/p.png", 7, "PNG")
    os.symlink(f"{root}/cat/missing.jpg", f"{root}/cat/dangling.jpg")
    os.symlink(f"{root}/cat/missing.txt", f"{root}/cat/dangling.txt")
    os.symlink(f"{root}/cat", f"{root}/cat/sub/loop")
    with open(f"{root}/cat/notes.txt", "w") as fh:
        fh.write("not an image\n")
    image(f"{root}/../elsewhere/d.jpg", 8)
    os.symlink(os.path.abspath(f"{root}/../elsewhere"), f"{root}/dog")
    os.makedirs(f"{root}/links")
    os.symlink(os.path.abspath(f"{root}/cat/a.jpg"), f"{root}/links/a-link.jpg")
    with open(f"{root}/README.md", "w") as fh:
        fh.write("labels\n")


class PackAccounting(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="aq_accounting_")
        cls.root = os.path.join(cls.tmp, "raw")
        build(cls.root)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    def pack(self, fmt, *extra):
        out = os.path.join(self.tmp, f"out-{fmt}-{len(extra)}")
        p = aquifer("dataset", "pack", self.root, "-o", out, "--format", fmt, "--on-error", "skip", "--json",
                    *extra)
        return json.loads(p.stdout), out

    def test_every_file_is_named_and_labels_are_torchvisions(self):
        r, out = self.pack("wds")
        # torchvision's view of the same folder. A loop is walked by
        # os.walk until the path is too long: keep only paths that do not
        # go through the loop for the comparison.
        tv = ImageFolder(self.root, loader=lambda p: None)
        tv_samples = {p: t for p, t in tv.samples if "/loop/" not in p}
        packed = {}
        for name in sorted(os.listdir(out)):
            if not name.endswith(".tar"):
                continue
            with tarfile.open(os.path.join(out, name)) as tar:
                metas = [json.load(tar.extractfile(m)) for m in tar.getmembers() if m.name.endswith(".meta.json")]
            for m in metas:
                packed[os.path.join(self.root, m["file"])] = m["label"]
        skipped = {s["file"]: s["reason"] for s in r["skipped"]}
        ignored = {i["file"]: i["reason"] for i in r["ignored"]}
        # Every image torchvision lists is packed with its label, or left out with why.
        for path, label in tv_samples.items():
            if path in skipped:
                self.assertTrue(skipped[path])
                continue
            self.assertIn(path, packed, f"{path}: neither packed nor listed")
            self.assertEqual(packed[path], label, f"{path}: label {packed[path]}, torchvision's {label}")
        self.assertEqual(r["classes"], len(tv.classes))
        self.assertIn(os.path.join(self.root, "cat/dangling.jpg"), skipped)
        self.assertIn("dangling", skipped[os.path.join(self.root, "cat/dangling.jpg")])
        for name, why in (("cat/dangling.txt", "dangling"), ("cat/sub/loop", "loop"), ("cat/notes.txt", "not named"),
                          ("README.md", "no class")):
            self.assertIn(why, ignored.get(os.path.join(self.root, name), ""), (name, ignored))
        # Every file on disk is accounted for.
        for dirpath, dirs, files in os.walk(self.root):
            if "/loop" in dirpath:
                continue
            for f in files:
                path = os.path.join(dirpath, f)
                self.assertTrue(path in packed or path in skipped or path in ignored, f"{path} not accounted for")

    def test_lst_keeps_one_line_per_image_whatever_the_names(self):
        r, out = self.pack("recordio")
        with open(os.path.join(out, "train.lst"), encoding="utf-8") as fh:
            lines = fh.read().splitlines()
        self.assertEqual(len(lines), r["images"])
        names = [line.split("\t")[2] for line in lines]
        self.assertTrue(all(len(line.split("\t")) == 3 for line in lines), lines)
        self.assertIn("cat/tab%09here.jpg", names)
        self.assertIn("cat/new%0Aline.jpg", names)
        self.assertIn("cat/sub dir/ü 名.jpg", names)

    def test_exif_orientation_is_ignored_as_torchvision_does_or_applied(self):
        from PIL import ImageOps
        root = os.path.join(self.tmp, "exif")
        os.makedirs(f"{root}/c")
        rng = np.random.default_rng(3)
        base = Image.fromarray(np.kron(rng.integers(0, 255, (6, 8, 3), dtype=np.uint8), np.ones((8, 8, 1),
                                                                                               dtype=np.uint8)))
        exif = base.getexif()
        exif[0x0112] = 6
        base.save(f"{root}/c/turned.jpg", quality=95, exif=exif.tobytes())
        with open(f"{root}/c/turned.jpg", "rb") as fh:
            original = fh.read()

        def packed(*extra):
            out = os.path.join(self.tmp, f"exif-out-{len(extra)}")
            r = json.loads(aquifer("dataset", "pack", root, "-o", out, "--format", "wds", "--shards", "1", "--json",
                                   *extra).stdout)
            with tarfile.open(r["files"][0]) as t:
                data = [t.extractfile(m).read() for m in t.getmembers() if m.name.endswith(".jpg")][0]
            return r, data

        r, data = packed()
        self.assertEqual(data, original)  # ignore (the default): as stored, as torchvision reads it
        self.assertEqual(r["converted"], [])
        r, data = packed("--exif-orientation", "apply")
        self.assertEqual([c["from"] for c in r["converted"]], ["JPEG, EXIF orientation 6"])
        want = np.asarray(ImageOps.exif_transpose(Image.open(f"{root}/c/turned.jpg")).convert("RGB"), np.int16)
        got = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"), np.int16)
        self.assertEqual(got.shape, want.shape)  # 48x64 stored, 64x48 shown
        self.assertLess(np.abs(got - want).mean(), 1.0)

    def test_an_empty_class_is_refused_as_torchvision_does_or_kept(self):
        root = os.path.join(self.tmp, "with-empty")
        image(f"{root}/a/x.jpg", 1)
        os.makedirs(f"{root}/.ipynb_checkpoints")
        p = aquifer("dataset", "pack", root, "-o", os.path.join(self.tmp, "e1"), ok=False)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn(".ipynb_checkpoints (hidden)", p.stderr)
        with self.assertRaises(FileNotFoundError):
            ImageFolder(root)
        p = aquifer("dataset", "pack", root, "-o", os.path.join(self.tmp, "e2"), "--allow-empty-classes", "--json")
        r = json.loads(p.stdout)
        self.assertEqual(r["empty_classes"], [".ipynb_checkpoints"])
        self.assertEqual(r["classes"], 2)


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
