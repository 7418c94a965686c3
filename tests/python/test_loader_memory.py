"""The Loader's memory bound (what memory_limit is checked against) against
the peak it really reaches: the bound must hold (peak <= bound, or the
limit does not protect) and be near (bound <= 1.5 x peak, or ordinary
datasets are refused for memory they never use).

Each run is a process of its own (loader_memory_run.py): batches of 224 px
float32, three epochs with one pipeline per epoch as ImageNet-sized epochs
get (the next opens while the last batches of one are consumed), the loop
holding its current batch. Two datasets:
- photographs: crops of scikit-image's sample photographs (Debian's
  python3-skimage, fetched as damaged_photos.py does) at 240-1400 px and
  JPEG quality 60-97, so record sizes spread as a photo collection's do;
- ImageNet-like synthetic images (`dataset synth --profile small`, about
  110 kB) packed as TFRecord shards.
A loop as fast as the pipeline, and one whose step (a model's) takes about
twice a batch's decoding so the pipeline runs full, fill it differently;
both are measured."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD, aquifer

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "fixtures"))
import damaged_photos  # noqa: E402

pytest.importorskip("torch")


def photo_dataset(out, count, seed=7):
    """`count` JPEG crops of the sample photographs in two classes."""
    from PIL import Image
    try:
        where = damaged_photos.photo_dir(None, os.path.join(BUILD, "photo-cache"))
    except SystemExit:
        pytest.skip("the sample photographs (python3-skimage) cannot be had")
    sources = []
    for name in damaged_photos.PNG_PHOTOS + damaged_photos.JPEG_PHOTOS:
        with Image.open(os.path.join(where, name)) as im:
            sources.append(im.convert("RGB"))
    rng = np.random.default_rng(seed)
    for c in ("n01", "n02"):
        os.makedirs(os.path.join(out, c), exist_ok=True)
    for i in range(count):
        src = sources[int(rng.integers(len(sources)))]
        w, h = src.size
        cw, ch = int(w * rng.uniform(0.5, 1.0)), int(h * rng.uniform(0.5, 1.0))
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        side = int(rng.uniform(240, 1400))
        scale = side / max(cw, ch)
        img = src.crop((x, y, x + cw, y + ch)).resize((max(8, int(cw * scale)), max(8, int(ch * scale))))
        img.save(os.path.join(out, ("n01", "n02")[i % 2], f"{i:05d}.JPEG"), quality=int(rng.integers(60, 98)))
    return out


@pytest.fixture(scope="module")
def memory_datasets(tmp_path_factory):
    d = tmp_path_factory.mktemp("memory")
    photos = photo_dataset(str(d / "photos"), 700)
    aquifer("dataset", "synth", "--out", d / "synth", "--classes", 10, "--images", 2600, "--profile", "small",
            "--seed", 5, "--no-progress")
    aquifer("dataset", "pack", d / "synth", "--out", d / "tf", "--shards", 4, "--no-progress")
    return {"photos": photos, "tfrecord": str(d / "tf")}


def run(data, batch, step_s):
    p = subprocess.run([sys.executable, os.path.join(HERE, "loader_memory_run.py"), os.path.join(BUILD, "python"),
                        data, str(batch), "3", str(step_s)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,batch,step_s", [("photos", 64, 0), ("photos", 64, 0.4), ("tfrecord", 256, 0),
                                               ("tfrecord", 256, 0.6)])
def test_memory_bound_is_within_one_and_a_half_of_the_peak(memory_datasets, name, batch, step_s):
    r = run(memory_datasets[name], batch, step_s)
    ratio = r["bound"] / r["peak"]
    print(f"{name} batch {batch} step {step_s}s: bound {r['bound'] / 2**20:.0f} MiB, "
          f"peak {r['peak'] / 2**20:.0f} MiB ({ratio:.2f}x)")
    assert r["peak"] <= r["bound"], f"the peak {r['peak'] / 2**20:.0f} MiB is over the bound"
    assert ratio <= 1.5, f"bound {ratio:.2f}x the peak"
