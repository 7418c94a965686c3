#!/usr/bin/python3
"""aquifer's evaluation transform against torchvision's on the same images:
Resize(256) + CenterCrop(224) from PIL images must agree within a mean
absolute error of 3 (0-255 scale) per image, for small images and for large
ones, decoded at full size (the default) and at 1/2 or 1/4 scale in the DCT
domain (--eval-dct-scaling).

usage: torchvision_eval.py path/to/aquifer
Skips (exit 0 with a note) when python3-torchvision is not installed."""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

try:
    import numpy as np
    from PIL import Image
    from torchvision import transforms
except ImportError as e:  # pragma: no cover
    print(f"SKIP: torchvision not available ({e})")
    sys.exit(0)

AQUIFER = None


def aquifer(*args):
    p = subprocess.run([AQUIFER, *args], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"aquifer {' '.join(args)} failed:\n{p.stdout}\n{p.stderr}")
    return p.stdout


class EvalTransformMatchesTorchvision(unittest.TestCase):
    def check(self, profile, images, extra=()):
        tmp = tempfile.mkdtemp(prefix="aq_tv_eval_")
        try:
            aquifer("dataset", "synth", "--out", f"{tmp}/raw", "--classes", "3", "--images", str(images),
                    "--profile", profile, "--seed", "11")
            aquifer("bench", "pipeline", f"{tmp}/raw", "--eval", "--dtype", "u8", "--layout", "nhwc", "--batch",
                    str(images), "--shuffle-buffer", "1", "--no-file-shuffle", "--warmup", "0", "--dump",
                    f"{tmp}/batch", "-j", "1", "--memory-limit", "4GiB", *extra)
            with open(f"{tmp}/batch.json") as fh:
                meta = json.load(fh)
            data = np.fromfile(f"{tmp}/batch", dtype=np.uint8).reshape(meta["size"], 224, 224, 3)
            tv = transforms.Compose([transforms.Resize(256), transforms.CenterCrop(224)])
            maes = []
            for i, sample in enumerate(meta["samples"]):
                ref = np.asarray(tv(Image.open(meta["files"][sample]).convert("RGB")), dtype=np.int16)
                maes.append(float(np.abs(ref - data[i].astype(np.int16)).mean()))
            print(f"{profile} {' '.join(extra)}: MAE per image max {max(maes):.2f}, mean {sum(maes) / len(maes):.2f}")
            self.assertLess(max(maes), 3.0, maes)
        finally:
            shutil.rmtree(tmp)

    def test_small_images(self):
        self.check("small", 12)

    def test_large_images_with_dct_scaling(self):
        self.check("large", 4, ("--eval-dct-scaling",))

    def test_large_images_full_decode_by_default(self):
        self.check("large", 4)


if __name__ == "__main__":
    AQUIFER = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
