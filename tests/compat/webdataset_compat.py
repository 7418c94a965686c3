#!/usr/bin/python3
"""WebDataset tar shards, both directions, against Python's tarfile.

- aquifer writes (dataset pack --format wds), tarfile reads: every image is
  one sample of KEY.jpg, KEY.cls and KEY.meta.json, members grouped by key as
  webdataset groups them, the class in .cls and .json agreeing, every JPEG
  decoding with PIL.
- tarfile writes, in each of its formats (ustar, GNU, pax), shards the way
  webdataset users write them: keys in sub-directories, names longer than
  ustar's 100 bytes, non-ASCII and spaces in keys, extra dots
  ("KEY.seg.png"), upper-case extensions, a PNG image, a .cls with a
  newline, a caption member, directory entries; aquifer verifies them,
  lists every sample with its key and label, and the pipeline delivers each
  sample with its label: locally and over aquifer:// from a real node.
- a damaged shard (a flipped header byte) is named with its offset.

usage: webdataset_compat.py path/to/aquifer
"""
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import s3lib  # noqa: E402
from PIL import Image  # noqa: E402

AQUIFER = None


def run(*args, check=True):
    p = subprocess.run([AQUIFER, *map(str, args)], capture_output=True, text=True)
    if check and p.returncode != 0:
        raise AssertionError(f"aquifer {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def image_bytes(seed, fmt="JPEG", w=40, h=30):
    img = Image.new("RGB", (w, h), ((seed * 37) % 256, (seed * 91) % 256, 120))
    out = io.BytesIO()
    img.save(out, format=fmt)
    return out.getvalue()


def wds_key(name):
    """webdataset's grouping: the path up to the first dot of the basename."""
    d, b = os.path.split(name)
    stem = b.split(".", 1)[0]
    return os.path.join(d, stem) if d else stem


class AquiferWritesTarfileReads(unittest.TestCase):
    def test_sidecar_files_become_members(self):
        tmp = tempfile.mkdtemp(prefix="aq_wds_sidecar_")
        try:
            for c in ("cat", "dog"):
                os.makedirs(f"{tmp}/raw/{c}")
                for i in range(3):
                    open(f"{tmp}/raw/{c}/{c}{i}.jpg", "wb").write(image_bytes(i))
                    open(f"{tmp}/raw/{c}/{c}{i}.txt", "w").write(f"a {c} number {i}")
                    if i < 2:
                        json.dump({"boxes": [[0.1, 0.1, 0.5, 0.5]]}, open(f"{tmp}/raw/{c}/{c}{i}.json", "w"))
            open(f"{tmp}/raw/cat/orphan.txt", "w").write("no image")
            r = run("dataset", "pack", f"{tmp}/raw", "--out", f"{tmp}/wds", "--format", "wds", "--shards", 1,
                    "--sidecar", "json,txt", "--json", "--no-progress")
            report = json.loads(r.stdout)
            self.assertEqual(report["ignored_files"], 1, report)  # the orphan, not the sidecars
            with tarfile.open(f"{tmp}/wds/train-00000-of-00001.tar") as t:
                members = {m.name: t.extractfile(m).read() for m in t.getmembers()}
            by_key = {}
            for name, data in members.items():
                key, ext = name.split(".", 1)
                by_key.setdefault(key, {})[ext] = data
            self.assertEqual(len(by_key), 6)
            for key, m in by_key.items():
                meta = json.loads(m["meta.json"])
                stem = meta["file"].split("/")[1].split(".")[0]
                self.assertEqual(m["txt"].decode(), f"a {meta['class']} number {stem[-1]}")
                self.assertEqual("json" in m, stem[-1] != "2")
            bad = run("dataset", "pack", f"{tmp}/raw", "--out", f"{tmp}/tf", "--sidecar", "json", check=False)
            self.assertNotEqual(bad.returncode, 0)
            self.assertIn("--format wds", bad.stderr)
            self.assertFalse(os.path.exists(f"{tmp}/tf"))
        finally:
            shutil.rmtree(tmp)

    def test_pack_wds_reads_as_webdataset(self):
        tmp = tempfile.mkdtemp(prefix="aq_wds_")
        try:
            run("dataset", "synth", "--out", f"{tmp}/raw", "--classes", 3, "--images", 30, "--seed", 4,
                "--no-progress")
            run("dataset", "pack", f"{tmp}/raw", "--out", f"{tmp}/wds", "--format", "wds", "--shards", 3,
                "--no-progress")
            shards = sorted(f for f in os.listdir(f"{tmp}/wds") if f.endswith(".tar"))
            self.assertEqual(len(shards), 3)
            samples = {}
            for shard in shards:
                with tarfile.open(f"{tmp}/wds/{shard}") as t:
                    order = []
                    for m in t.getmembers():
                        self.assertTrue(m.isfile(), m.name)
                        key = wds_key(m.name)
                        if not order or order[-1] != key:
                            self.assertNotIn(key, samples, "a key's members are consecutive")
                            order.append(key)
                            samples[key] = {}
                        samples[key][m.name.split(".", 1)[1]] = t.extractfile(m).read()
            self.assertEqual(len(samples), 30)
            classes = set()
            for key, s in samples.items():
                self.assertEqual(set(s), {"jpg", "cls", "meta.json"}, key)
                meta = json.loads(s["meta.json"])
                self.assertEqual(int(s["cls"]), meta["label"])
                self.assertTrue(meta["file"].startswith(meta["class"] + "/"))
                self.assertEqual(Image.open(io.BytesIO(s["jpg"])).size, (meta["width"], meta["height"]))
                classes.add(int(s["cls"]))
            self.assertEqual(classes, {0, 1, 2})
            out = json.loads(run("dataset", "inspect", f"{tmp}/wds", "--json", "--limit", 0).stdout)
            rows = out["records"] if isinstance(out, dict) else out
            self.assertEqual(sorted(r["key"] for r in rows), sorted(samples))
        finally:
            shutil.rmtree(tmp)


def write_shard(path, fmt, samples):
    with tarfile.open(path, "w", format=fmt) as t:
        dirs = set()
        for key, members in samples:
            d = os.path.dirname(key)
            if d and d not in dirs:  # directory entries, as `tar -c dir` makes them
                info = tarfile.TarInfo(d)
                info.type = tarfile.DIRTYPE
                t.addfile(info)
                dirs.add(d)
            for ext, data in members:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                info.mtime = 1700000000
                t.addfile(info, io.BytesIO(data))


def their_samples(fmt):
    """(key, members, label, image) the way webdataset users write shards."""
    long_dir = "train/" + "d" * 80
    rows = [
        ("train/n01440764_10026", [("jpg", image_bytes(1)), ("cls", b"0")], 0),
        ("train/n01440764_10027", [("JPG", image_bytes(2)), ("cls", b"1\n"), ("txt", b"a fish")], 1),
        (f"{long_dir}/{'k' * 60}", [("jpg", image_bytes(3)), ("cls", b"2")], 2),
        ("val/with space ünï", [("jpg", image_bytes(4)), ("cls", b" 3 ")], 3),
        ("val/seg", [("jpg", image_bytes(5)), ("seg.png", image_bytes(6, "PNG")), ("cls", b"4")], 4),
        ("val/png_only", [("png", image_bytes(7, "PNG")), ("cls", b"5"), ("json", b'{"caption": "x"}')], 5),
        # Name-sorted, as tar -c --sort=name and most writers leave it: the
        # depth map comes first and is not the image.
        ("val/depth", [("cls", b"6"), ("depth.png", image_bytes(9, "PNG", 64, 48)), ("jpg", image_bytes(10))], 6),
    ]
    if fmt == tarfile.USTAR_FORMAT:  # ustar cannot hold the long name or non-ASCII
        rows = [r for r in rows if len(r[0]) < 90 and r[0].isascii()]
    return rows


class TarfileWritesAquiferReads(unittest.TestCase):
    def check_dataset(self, data, rows, tmp, env=None):
        extra = []
        if env and env.get("creds"):
            extra = ["--credentials", env["creds"]]
        v = run(*extra, "dataset", "verify", data, "--json", check=False)
        report = json.loads(v.stdout)
        self.assertEqual(report["records"], len(rows), v.stdout)
        self.assertEqual(report.get("problem_count", 0), 0, v.stdout)
        ins = json.loads(run(*extra, "dataset", "inspect", data, "--json", "--limit", 0).stdout)
        records = ins["records"] if isinstance(ins, dict) else ins
        got = {r["key"]: r["label"] for r in records}
        self.assertEqual(got, {k: label for k, _, label in rows})
        # The image is the member webdataset's decoders would take ("jpg"
        # before "png"; never "depth.png").
        for r in records:
            members = dict(next(m for k, m, _ in rows if k == r["key"]))
            want = next(members[e] for e in ("jpg", "JPG", "jpeg", "png") if e in members)
            self.assertEqual(r["image_bytes"], len(want), r["key"])
        dump = os.path.join(tmp, "batch")
        run(*extra, "bench", "pipeline", data, "--batch", len(rows), "--size", 32, "--no-file-shuffle",
            "--shuffle-buffer", 1, "--dump", dump, "--no-progress")
        meta = json.load(open(dump + ".json"))
        self.assertEqual(sorted(meta["labels"]), sorted(label for _, _, label in rows))

    def test_every_tarfile_format(self):
        for name, fmt in (("ustar", tarfile.USTAR_FORMAT), ("gnu", tarfile.GNU_FORMAT),
                          ("pax", tarfile.PAX_FORMAT)):
            with self.subTest(format=name):
                tmp = tempfile.mkdtemp(prefix=f"aq_wds_{name}_")
                try:
                    rows = their_samples(fmt)
                    os.makedirs(f"{tmp}/shards")
                    half = len(rows) // 2
                    write_shard(f"{tmp}/shards/part-000.tar", fmt, [(k, m) for k, m, _ in rows[:half]])
                    write_shard(f"{tmp}/shards/part-001.tar", fmt, [(k, m) for k, m, _ in rows[half:]])
                    self.check_dataset(f"{tmp}/shards", rows, tmp)
                finally:
                    shutil.rmtree(tmp)

    def test_gnu_tar_and_bsdtar_in_any_member_order(self):
        """Shards written by GNU tar and bsdtar from a folder of KEY.EXT files,
        members in name order (KEY.cls, KEY.depth.png, KEY.jpg) and in an
        order of our own: the same samples, images and labels."""
        tools = [t for t in ("tar", "bsdtar") if shutil.which(t)]
        if not tools:
            self.skipTest("neither GNU tar nor bsdtar installed")
        rows = [(f"s{i:02d}", [("cls", str(i % 4).encode()), ("depth.png", image_bytes(50 + i, "PNG", 64, 48)),
                               ("jpg", image_bytes(i)), ("json", b'{"i": %d}' % i)], i % 4) for i in range(6)]
        tmp = tempfile.mkdtemp(prefix="aq_wds_tools_")
        try:
            src = os.path.join(tmp, "src")
            os.makedirs(src)
            for key, members, _ in rows:
                for ext, data in members:
                    with open(os.path.join(src, f"{key}.{ext}"), "wb") as fh:
                        fh.write(data)
            names = sorted(os.listdir(src))
            # Each key's members together, in an order no sort gives: jpg last
            # but one, depth map first.
            rank = {"depth.png": 0, "json": 1, "jpg": 2, "cls": 3}
            unsorted = sorted(names, key=lambda n: (n.split(".", 1)[0], rank[n.split(".", 1)[1]]))
            for tool in tools:
                for order, listing in (("sorted", names), ("unsorted", unsorted)):
                    with self.subTest(tool=tool, order=order):
                        shards = os.path.join(tmp, f"{tool}-{order}")
                        os.makedirs(shards)
                        cmd = [tool, "-cf", os.path.join(shards, "part-000.tar"), "-C", src]
                        if tool == "tar":
                            cmd[1:1] = ["--format=gnu"]
                        subprocess.run(cmd + listing, check=True)
                        self.check_dataset(shards, rows, tmp)
        finally:
            shutil.rmtree(tmp)

    def test_over_aquifer_from_a_node(self):
        tmp = tempfile.mkdtemp(prefix="aq_wds_node_")
        node = None
        try:
            rows = their_samples(tarfile.PAX_FORMAT)
            os.makedirs(f"{tmp}/shards")
            write_shard(f"{tmp}/shards/part-000.tar", tarfile.PAX_FORMAT, [(k, m) for k, m, _ in rows])
            creds = os.path.join(tmp, "creds")
            s3lib.write_credentials(creds)
            node = s3lib.Node(AQUIFER, os.path.join(tmp, "node"), credentials=creds)
            s3lib.boto(node.port).create_bucket(Bucket="wds")
            url = f"aquifer://127.0.0.1:{node.port}/wds/shards"
            run("--credentials", creds, "cp", "-r", f"{tmp}/shards", url, "--no-progress")
            self.check_dataset(url, rows, tmp, env={"creds": creds})
        finally:
            if node:
                node.stop()
            shutil.rmtree(tmp)

    def test_labels_are_named_not_guessed(self):
        """A sample without its label is named, not given -1; members other
        than the defaults are named by the user, as with webdataset."""
        tmp = tempfile.mkdtemp(prefix="aq_wds_labels_")
        try:
            write_shard(f"{tmp}/nolabel.tar", tarfile.GNU_FORMAT,
                        [("a", [("jpg", image_bytes(1)), ("cls", b"0")]), ("b", [("jpg", image_bytes(2))])])
            v = run("dataset", "verify", f"{tmp}/nolabel.tar", "--json", check=False)
            self.assertEqual(v.returncode, 1, v.stdout)
            problems = json.loads(v.stdout)["problems"]
            self.assertEqual(len(problems), 1, problems)
            self.assertIn("sample 'b' has no label: none of its files is b.cls", problems[0]["message"])
            v = run("dataset", "verify", f"{tmp}/nolabel.tar", "--wds-label", "none", "--json")
            self.assertEqual(json.loads(v.stdout)["problem_count"], 0)
            write_shard(f"{tmp}/v2.tar", tarfile.GNU_FORMAT,
                        [("c", [("v2.cls", b"7"), ("v2.jpg", image_bytes(3)), ("json", b'{"meta": {"y": 4}}')])])
            v = run("dataset", "verify", f"{tmp}/v2.tar", "--json", check=False)
            self.assertIn("sample 'c' has no image: none of its files is c.jpg", v.stdout)
            for label, want in (("v2.cls", 7), ("json:meta.y", 4)):
                ins = json.loads(run("dataset", "inspect", f"{tmp}/v2.tar", "--wds-image", "v2.jpg", "--wds-label",
                                     label, "--json").stdout)
                records = ins["records"] if isinstance(ins, dict) else ins
                self.assertEqual([r["label"] for r in records], [want])
            # --num-classes flags a label out of range.
            v = run("dataset", "verify", f"{tmp}/v2.tar", "--wds-image", "v2.jpg", "--wds-label", "v2.cls",
                    "--num-classes", "5", check=False)
            self.assertEqual(v.returncode, 1)
            self.assertIn("label 7 outside 0..4", v.stdout)
        finally:
            shutil.rmtree(tmp)

    def test_a_cut_shard_keeps_every_whole_sample_and_names_the_cut(self):
        tmp = tempfile.mkdtemp(prefix="aq_wds_cut_")
        try:
            write_shard(f"{tmp}/s.tar", tarfile.GNU_FORMAT,
                        [(f"k{i}", [("jpg", image_bytes(i)), ("cls", str(i).encode())]) for i in range(4)])
            with open(f"{tmp}/s.tar", "rb") as fh:
                data = fh.read()
            with tarfile.open(f"{tmp}/s.tar") as t:
                last = [m for m in t.getmembers() if m.name == "k3.jpg"][0]
            with open(f"{tmp}/s.tar", "wb") as fh:
                fh.write(data[:last.offset_data + 100])  # inside k3.jpg
            v = run("dataset", "verify", f"{tmp}/s.tar", "--json", check=False)
            self.assertEqual(v.returncode, 1)
            report = json.loads(v.stdout)
            self.assertEqual(report["records"], 3, v.stdout)  # k0, k1, k2 whole
            self.assertIn("after sample 'k2'", v.stdout)
        finally:
            shutil.rmtree(tmp)

    def test_damage_is_named(self):
        tmp = tempfile.mkdtemp(prefix="aq_wds_bad_")
        try:
            rows = their_samples(tarfile.GNU_FORMAT)
            write_shard(f"{tmp}/bad.tar", tarfile.GNU_FORMAT, [(k, m) for k, m, _ in rows])
            data = bytearray(open(f"{tmp}/bad.tar", "rb").read())
            with tarfile.open(f"{tmp}/bad.tar") as t:
                third = [m for m in t.getmembers() if m.isfile()][3]
            data[third.offset + 5] ^= 0x40  # inside its header's name
            open(f"{tmp}/bad.tar", "wb").write(bytes(data))
            v = run("dataset", "verify", f"{tmp}/bad.tar", check=False)
            self.assertEqual(v.returncode, 1, v.stdout + v.stderr)
            self.assertIn(f"offset {third.offset}", v.stdout + v.stderr)
            self.assertIn("checksum", v.stdout + v.stderr)
        finally:
            shutil.rmtree(tmp)


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
