"""aquifer.Loader: what PyTorch training code relies on."""
import collections
import gc
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import AQUIFER, BUILD, aquifer

import aquifer as aq  # noqa: E402  (path set up by conftest)

torch = pytest.importorskip("torch")


def small(data, **kw):
    args = dict(batch_size=16, image_size=48, threads=2)
    args.update(kw)
    return aq.Loader(data, **args)


def threads_now():
    return len(os.listdir("/proc/self/task"))


def rss_mib():
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.parametrize("fmt", ["tfrecord", "recordio", "folder"])
@pytest.mark.parametrize("dtype,layout", [("float32", "NCHW"), ("float16", "NHWC"), ("uint8", "NHWC"),
                                          ("uint8", "NCHW")])
def test_shapes_dtypes_layouts_and_labels(datasets, fmt, dtype, layout):
    loader = small(datasets[fmt], dtype=dtype, layout=layout)
    assert len(loader) == 240 // 16
    n = 0
    for images, labels in loader:
        n += 1
        want = (16, 3, 48, 48) if layout == "NCHW" else (16, 48, 48, 3)
        assert tuple(images.shape) == want
        assert images.dtype == getattr(torch, dtype)
        assert labels.dtype == torch.int64 and labels.shape == (16,)
        assert 0 <= int(labels.min()) and int(labels.max()) <= 9
    assert n == len(loader)
    if dtype == "float32":  # normalised: roughly zero-centred
        assert -3 < float(images.mean()) < 3


def test_numpy_framework_and_ids(datasets):
    loader = small(datasets["tfrecord"], framework="numpy", ids=True, dtype="uint8")
    images, labels, ids = next(iter(loader))
    assert isinstance(images, np.ndarray) and images.dtype == np.uint8
    assert labels.dtype == np.int64 and ids.dtype == np.uint32
    assert not images.flags["OWNDATA"], "a view of the pipeline's buffer, not a copy"


def test_the_same_pixels_as_the_cli(datasets, tmp_path):
    """The Loader is the pipeline: same options, same first batch as
    `aquifer bench pipeline --dump`."""
    dump = tmp_path / "batch"
    aquifer("bench", "pipeline", datasets["tfrecord"], "--dtype", "u8", "--layout", "nhwc", "--batch", 16, "--size",
            48, "--seed", 5, "--shuffle-buffer", 64, "--warmup", 0, "--batches", 1, "--dump", dump, "-j", 2,
            "--no-progress")
    meta = json.loads((tmp_path / "batch.json").read_text())
    loader = small(datasets["tfrecord"], dtype="uint8", layout="NHWC", seed=5, shuffle_buffer=64,
                   framework="numpy", ids=True)
    images, labels, ids = next(iter(loader))
    assert ids.tolist() == meta["samples"]
    assert labels.tolist() == meta["labels"]
    assert images.tobytes() == dump.read_bytes()


@pytest.mark.parametrize("remainder", ["drop", "pad"])
def test_ranks_share_every_epoch(datasets, remainder):
    """Three ranks in one process: disjoint shares (drop) or full coverage
    (pad), the same number of steps each, and a new order every epoch."""
    seen_by_epoch = []
    for epoch in range(2):
        seen, steps = [], set()
        for rank in range(3):
            loader = small(datasets["recordio"], rank=rank, world_size=3, remainder=remainder, ids=True,
                           batch_size=8)
            loader.set_epoch(epoch)
            steps.add(len(loader))
            for _, _, ids in loader:
                seen.extend(ids.tolist())
        assert len(steps) == 1
        if remainder == "drop":
            assert len(seen) == len(set(seen)), "no sample twice in an epoch"
            assert len(seen) >= 240 - 3 * 8
        else:
            assert set(seen) == set(range(240)), "every sample at least once"
        seen_by_epoch.append(seen)
    assert seen_by_epoch[0] != seen_by_epoch[1]


WORKER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[3])
import torch.distributed as dist
import aquifer
dist.init_process_group("gloo")
loader = aquifer.Loader(sys.argv[1], batch_size=8, image_size=32, threads=1, ids=True)
ids = [i for _, _, batch in loader for i in batch.tolist()]
with open(sys.argv[2], "w") as fh:
    json.dump({"rank": loader.rank, "world": loader.world_size, "steps": len(loader), "ids": ids}, fh)
dist.barrier()
dist.destroy_process_group()
"""


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_two_ranks(script, data, tmp_path):
    """Runs `script` as ranks 0 and 1 of a gloo group (argv: data, an output
    JSON file, the package path); returns what each wrote."""
    port = free_port()
    procs = []
    for rank in range(2):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        procs.append(subprocess.Popen([sys.executable, "-c", script, data, str(tmp_path / f"rank{rank}.json"),
                                       os.path.join(BUILD, "python")], env=env))
    for p in procs:
        assert p.wait(timeout=120) == 0
    return [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]


def test_two_processes_under_torch_distributed(datasets, tmp_path):
    """Rank and world come from torch.distributed (gloo): two real processes
    split the epoch with no overlap and equal steps."""
    out = run_two_ranks(WORKER, datasets["tfrecord"], tmp_path)
    assert [o["rank"] for o in out] == [0, 1] and {o["world"] for o in out} == {2}
    assert out[0]["steps"] == out[1]["steps"]
    assert not set(out[0]["ids"]) & set(out[1]["ids"])
    assert len(out[0]["ids"]) + len(out[1]["ids"]) >= 240 - 2 * 8


EVAL_WORKER = r"""
import json, sys
sys.path.insert(0, sys.argv[3])
import torch, torch.distributed as dist
import aquifer, aquifer.evaluate
dist.init_process_group("gloo")

class SaysZero(torch.nn.Module):  # always predicts class 0: top-1 = the share of label 0
    def forward(self, x):
        out = torch.zeros(x.shape[0], 10)
        out[:, 0] = 1
        return out

val = aquifer.Loader(sys.argv[1], batch_size=16, image_size=32, threads=1, training=False, shuffle=False,
                     remainder="pad", ids=True)
padded = sum(len(ids) for _, _, ids in val)
val.set_epoch(0)
(top1,), n = aquifer.evaluate.evaluate(SaysZero(), val, ks=(1,))
with open(sys.argv[2], "w") as fh:
    json.dump({"top1": top1, "n": n, "padded": padded}, fh)
dist.destroy_process_group()
"""


def test_evaluation_counts_each_sample_once_across_ranks(datasets, tmp_path):
    """Two ranks, remainder="pad": the ranks see more samples than the
    dataset has, evaluate() counts each real one once, the same on both."""
    out = run_two_ranks(EVAL_WORKER, datasets["folder"], tmp_path)
    alone = small(datasets["folder"], framework="numpy", training=False, shuffle=False, batch_size=240)
    labels = next(iter(alone))[1]
    assert out[0]["padded"] + out[1]["padded"] > 240, "the ranks were padded (else this test proves nothing)"
    assert out[0]["n"] == out[1]["n"] == 240
    assert out[0]["top1"] == out[1]["top1"] == pytest.approx(float((labels == 0).sum()) / 240)


def collect(loader, limit=None):
    out = []
    for i, (images, labels, ids) in enumerate(loader):
        out.append((images.tobytes(), labels.tolist(), ids.tolist()))
        if limit is not None and i + 1 == limit:
            break
    return out


@pytest.mark.parametrize("stop_after", [1, 7, 15])
def test_resume_reproduces_the_remaining_batches(datasets, stop_after):
    """state_dict() after k batches, load_state_dict() in a new loader: the
    batches that follow are bit for bit those of the uninterrupted run, and
    the next epoch starts where it should."""
    kw = dict(framework="numpy", ids=True, seed=9, dtype="uint8")
    whole = small(datasets["tfrecord"], **kw)
    whole.set_epoch(4)
    reference = collect(whole) + collect(whole)  # epochs 4 and 5
    first = small(datasets["tfrecord"], **kw)
    first.set_epoch(4)
    got = collect(first, limit=stop_after)
    state = first.state_dict()
    first.close()
    assert state["epoch"] == 4 and state["step"] == stop_after
    second = small(datasets["tfrecord"], **kw)
    second.load_state_dict(state)
    while len(got) < len(reference):  # the rest of epoch 4, then epoch 5
        got += collect(second, limit=len(reference) - len(got))
    assert got == reference
    assert second.epoch == 6 or second.state_dict()["step"] == len(second)


def test_epochs_in_one_pipeline_give_the_batches_of_separate_ones(datasets):
    """A loader runs several short epochs in one pipeline and opens the next
    one ahead of time; each epoch's batches are still exactly those of a
    loader that starts at that epoch, and the augmentation differs from
    epoch to epoch (its randomness follows the epoch, not where a run began)."""
    kw = dict(framework="numpy", ids=True, seed=5, dtype="uint8")
    together = small(datasets["tfrecord"], **kw)
    epochs = [collect(together) for _ in range(5)]
    assert together.epoch == 5
    for e in (0, 3, 4):
        alone = small(datasets["tfrecord"], **kw)
        alone.set_epoch(e)
        assert collect(alone) == epochs[e], f"epoch {e} differs from a loader started at it"
        alone.close()
    via_epochs = small(datasets["tfrecord"], **kw)
    assert [b for _ in [0] for b in collect(via_epochs.epochs(5))] == [b for ep in epochs for b in ep]
    # In order, without shuffling, every epoch has the same samples in the
    # same places; the crops and flips must still change.
    fixed = small(datasets["tfrecord"], framework="numpy", ids=True, dtype="uint8", shuffle=False)
    first, second = collect(fixed, limit=1), None
    fixed.set_epoch(1)
    second = collect(fixed, limit=1)
    assert first[0][2] == second[0][2] and first[0][0] != second[0][0]


def test_set_epoch_mid_run_and_two_loaders_in_one_process(datasets):
    """Jumping to another epoch mid-epoch, or back, gives that epoch's
    batches; a train and a val loader interleaved give what each gives
    alone; closing leaves no thread of either behind."""
    import threading
    kw = dict(framework="numpy", ids=True, seed=3, dtype="uint8")
    ref = small(datasets["tfrecord"], **kw)
    ref.set_epoch(7)
    epoch7 = collect(ref)
    ref.set_epoch(2)
    epoch2 = collect(ref)
    ref.close()
    jumpy = small(datasets["tfrecord"], **kw)
    collect(jumpy, limit=3)  # epoch 0, part of it
    jumpy.set_epoch(7)
    assert collect(jumpy) == epoch7
    jumpy.set_epoch(2)
    assert collect(jumpy) == epoch2
    base = threads_now()
    train = small(datasets["tfrecord"], **kw)
    val = small(datasets["folder"], training=False, shuffle=False, remainder="pad", **kw)
    val_alone = [collect(val) for _ in range(2)]
    val.set_epoch(0)
    mixed_train, mixed_val = [], []
    for e in range(2):
        train.set_epoch(e)
        mixed_train.append(collect(train))
        val.set_epoch(e)
        mixed_val.append(collect(val))
    assert mixed_val == val_alone
    train_alone = small(datasets["tfrecord"], **kw)
    assert mixed_train == [collect(train_alone) for _ in range(2)]
    for loader in (train, val, train_alone, jumpy):
        loader.close()
    for t in threading.enumerate():
        if t.name.startswith("aquifer-"):
            t.join(timeout=10)
    assert threads_now() <= base


def test_webdataset_shards(datasets, tmp_path):
    """The image folder packed as WebDataset tar shards: the loader finds
    the format itself and delivers every image with its class."""
    aquifer("dataset", "pack", datasets["folder"], "--out", tmp_path / "wds", "--format", "wds", "--shards", 3,
            "--no-progress")
    kw = dict(framework="numpy", training=False, shuffle=False, remainder="pad", batch_size=240)
    wds = small(tmp_path / "wds", **kw)
    folder = small(datasets["folder"], **kw)
    assert len(wds) == 1
    _, wds_labels = next(iter(wds))
    _, folder_labels = next(iter(folder))
    assert sorted(wds_labels.tolist()) == sorted(folder_labels.tolist())


def test_a_packed_dataset_is_verified_once(datasets):
    """pack's manifest vouches for every record: the loader's first epoch
    reads none to its end, and delivers the same pixels as without it."""
    kw = dict(framework="numpy", seed=5)
    trusted, checked = small(datasets["tfrecord"], **kw), small(datasets["tfrecord"], use_manifest=False, **kw)
    for (a, la), (b, lb) in zip(trusted, checked):
        assert np.array_equal(a, b) and np.array_equal(la, lb)
    st = trusted.stats()
    assert st["manifest_trusted"] == len(trusted) * 16 and st["manifest_changed"] == 0
    assert st["manifest"].endswith("aquifer-manifest.json: 240 of 240 samples verified")
    assert checked.stats()["manifest_trusted"] == 0


def _detection_shard(path, n, fmt, folder=None):
    """WebDataset shard of images with one bright box on a dark ground, the
    box in KEY.json (fractions of the image) and a caption in KEY.txt;
    written by tarfile, or (folder given) as an image folder with .json and
    .txt beside each image for `dataset pack --sidecar`."""
    import io as _io
    import tarfile
    from PIL import Image
    rng = __import__("random").Random(7)
    truth = {}
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as t:
        for i in range(n):
            w, h = rng.randint(120, 200), rng.randint(90, 160)
            bx0, by0 = rng.uniform(0.05, 0.5), rng.uniform(0.05, 0.5)
            bx1, by1 = bx0 + rng.uniform(0.25, 0.45), by0 + rng.uniform(0.25, 0.45)
            img = Image.new("RGB", (w, h), (10, 10, 10))
            img.paste((250, 250, 250), (round(bx0 * w), round(by0 * h), round(bx1 * w), round(by1 * h)))
            buf = _io.BytesIO()
            img.save(buf, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
            box = [round(bx0 * w) / w, round(by0 * h) / h, round(bx1 * w) / w, round(by1 * h) / h]
            key = f"det/{i:05d}"
            members = [("jpg" if fmt == "JPEG" else "png", buf.getvalue()), ("cls", str(i % 3).encode()),
                       ("json", json.dumps({"boxes": [box]}).encode()), ("txt", f"caption {i}".encode())]
            if folder is not None:
                os.makedirs(os.path.join(folder, f"c{i % 3}"), exist_ok=True)
                for ext, data in members:
                    if ext != "cls":
                        with open(os.path.join(folder, f"c{i % 3}", f"img{i:05d}.{ext}"), "wb") as fh:
                            fh.write(data)
                truth[f"caption {i}"] = box
                continue
            for ext, data in members:
                info = tarfile.TarInfo(f"{key}.{ext}")
                info.size = len(data)
                t.addfile(info, _io.BytesIO(data))
            truth[f"caption {i}"] = box
    return truth


@pytest.mark.parametrize("fmt,source", [("JPEG", "tarfile"), ("PNG", "tarfile"), ("JPEG", "pack")])
def test_boxes_follow_the_crop_and_flip(tmp_path, fmt, source):
    """Detection targets stay on their objects: a bright box drawn in each
    image, its coordinates in the sample's JSON; after the loader's random
    crop and flip, follow_crop() puts the box where the bright pixels are
    in the output (within two pixels of 64), and each caption arrives with
    its own image."""
    from aquifer.transforms import follow_crop, follow_crop_image
    os.makedirs(tmp_path / "det")
    if source == "pack":  # an image folder with annotations and captions beside the images
        truth = _detection_shard(tmp_path / "unused.tar", 48, fmt, folder=tmp_path / "raw")
        shutil.rmtree(tmp_path / "det")
        aquifer("dataset", "pack", tmp_path / "raw", "--out", tmp_path / "det", "--format", "wds", "--sidecar",
                "json,txt", "--shards", 2, "--no-progress")
    else:
        truth = _detection_shard(tmp_path / "det" / "det-000.tar", 48, fmt)
    loader = aq.Loader(tmp_path / "det", batch_size=16, image_size=64, threads=2, framework="numpy",
                       dtype="uint8", layout="NHWC", crop_scale=(0.3, 1.0), fields=["json", "txt"], seed=11)
    checked = flipped = 0
    for epoch in range(3):
        loader.set_epoch(epoch)
        for images, labels, extra in loader:
            for i in range(len(labels)):
                f = extra["fields"][i]
                box = json.loads(f["json"])["boxes"][0]
                assert truth[f["txt"].decode()] == box, "caption and boxes of one sample"
                out, keep = follow_crop([box], extra["crops"][i], extra["flips"][i])
                bright = images[i].mean(axis=2) > 130
                if not keep[0] or (out[0, 2] - out[0, 0]) * (out[0, 3] - out[0, 1]) < 0.05:
                    continue
                ys, xs = np.nonzero(bright)
                got = np.array([xs.min(), ys.min(), xs.max() + 1, ys.max() + 1]) / 64
                assert np.abs(got - out[0]).max() <= 2 / 64, (got * 64, out[0] * 64, extra["crops"][i])
                # The box as a mask of the source, through the same crop and flip.
                sw, sh = 400, 300
                mask = np.zeros((sh, sw), dtype=np.uint8)
                mask[round(box[1] * sh):round(box[3] * sh), round(box[0] * sw):round(box[2] * sw)] = 1
                moved = follow_crop_image(mask, extra["crops"][i], extra["flips"][i], 64).astype(bool)
                iou = (moved & bright).sum() / (moved | bright).sum()
                assert iou > 0.8, iou
                checked += 1
                flipped += bool(extra["flips"][i])
    assert checked >= 60 and 0 < flipped < checked


def test_hooks_decode_fields_on_the_loaders_thread(tmp_path):
    """hooks: json.loads runs on the loader's helper thread, its cost is
    counted, the results equal decoding by hand, breaking mid-epoch and
    going on gives the batches an uninterrupted run gives, and a failing
    hook raises in the consumer."""
    os.makedirs(tmp_path / "det")
    _detection_shard(tmp_path / "det" / "det-000.tar", 48, "JPEG")
    kw = dict(batch_size=8, image_size=32, threads=2, framework="numpy", dtype="uint8", fields=["json", "txt"],
              seed=4)
    seen_threads = set()

    def parse(raw):
        seen_threads.add(threading.current_thread().name)
        return json.loads(raw)

    plain = aq.Loader(tmp_path / "det", **kw)
    hooked = aq.Loader(tmp_path / "det", hooks={"json": parse}, **kw)
    want = [[(x.tobytes(), [json.loads(f["json"]) for f in e["fields"]]) for x, _, e in plain] for _ in range(2)]
    first = []
    for i, (x, _, e) in enumerate(hooked):  # break after 2 batches, then go on
        first.append((x.tobytes(), [f["json"] for f in e["fields"]]))
        if i == 1:
            break
    first += [(x.tobytes(), [f["json"] for f in e["fields"]]) for x, _, e in hooked]
    second = [(x.tobytes(), [f["json"] for f in e["fields"]]) for x, _, e in hooked]
    assert [first, second] == want
    assert seen_threads == {"aquifer-hooks"}
    st = hooked.stats()
    assert st["hook_samples"] >= 2 * 48 - 8 and st["hook_seconds"] > 0

    def broken(raw):
        raise KeyError("no boxes here")

    bad = aq.Loader(tmp_path / "det", hooks={"txt": broken}, **kw)
    with pytest.raises(KeyError, match="no boxes"):
        next(iter(bad))
    with pytest.raises(ValueError, match="not one of fields"):
        aq.Loader(tmp_path / "det", hooks={"png": len}, **kw)


def test_recordio_packed_labels_as_a_field(tmp_path):
    """MXNet detection records (im2rec --pack-label: a float label list
    with boxes) deliver their whole label list and id as fields."""
    import io as _io
    from PIL import Image
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "compat"))
    import spec
    rec = b""
    want = {}
    for i in range(8):
        buf = _io.BytesIO()
        Image.new("RGB", (40, 30), (i * 20, 50, 90)).save(buf, format="JPEG")
        labels = [2.0, 5.0, float(i % 3), 0.1, 0.2, 0.6, 0.7]  # header width, object width, class, box
        rec += spec.recordio_frame(spec.pack_header(0, 100 + i, labels=labels) + buf.getvalue())
        want[100 + i] = labels
    (tmp_path / "det.rec").write_bytes(rec)
    loader = aq.Loader(tmp_path / "det.rec", batch_size=8, image_size=32, framework="numpy", shuffle=False,
                       fields=["labels", "id"])
    images, labels, extra = next(iter(loader))
    for f in extra["fields"]:
        assert f["labels"].dtype == np.float32
        np.testing.assert_allclose(f["labels"], want[f["id"]], rtol=1e-6)
    assert sorted(f["id"] for f in extra["fields"]) == sorted(want)


def test_pad_batches_variable_length_fields():
    from aquifer.transforms import pad
    boxes = [np.ones((2, 4)), np.zeros((0, 4)), np.full((3, 4), 2.0)]
    out, lengths = pad(boxes, value=-1)
    assert out.shape == (3, 3, 4) and lengths.tolist() == [2, 0, 3]
    assert (out[1] == -1).all() and (out[0, :2] == 1).all() and (out[0, 2] == -1).all()
    cut, lengths = pad([[1, 2, 3], [4]], length=2)
    assert cut.tolist() == [[1, 2], [4, 0]] and lengths.tolist() == [2, 1]
    with pytest.raises(ValueError, match="differ"):
        pad([np.zeros((1, 4)), np.zeros((1, 5))])


def test_extra_fields_of_tf_examples(datasets):
    """tf.Example features by key: ints and floats as arrays, bytes as lists;
    a key no record has is None."""
    loader = small(datasets["tfrecord"], framework="numpy", fields=["image/height", "image/class/synset", "nope"])
    images, labels, extra = next(iter(loader))
    assert len(extra["fields"]) == len(labels) == len(extra["ids"])
    for f in extra["fields"]:
        assert f["image/height"].dtype == np.int64 and f["image/height"][0] > 0
        assert isinstance(f["image/class/synset"][0], bytes) and f["image/class/synset"][0].startswith(b"n")
        assert f["nope"] is None
    assert extra["crops"].shape == (len(labels), 4) and extra["flips"].dtype == bool


def test_resume_refuses_another_configuration(datasets):
    a = small(datasets["tfrecord"])
    b = small(datasets["tfrecord"], batch_size=8)
    with pytest.raises(ValueError, match="batch_size"):
        b.load_state_dict(a.state_dict())


def test_held_batches_stay_intact(datasets):
    """Ten batches held at once (more than the pipeline's buffers) keep
    their contents; nothing is overwritten under a consumer."""
    kw = dict(framework="numpy", ids=True, dtype="uint8", prefetch=2)
    reference = collect(small(datasets["tfrecord"], **kw))
    held = [b for b in small(datasets["tfrecord"], **kw)][:10]
    for (images, labels, ids), (ref_images, ref_labels, ref_ids) in zip(held, reference):
        assert images.tobytes() == ref_images and ids.tolist() == ref_ids
    # Torch tensors share the buffers the same way.
    tensors = [x for x, _ in small(datasets["tfrecord"], dtype="uint8", prefetch=2)][:10]
    assert [t.numpy().tobytes() for t in tensors] == [r[0] for r in reference[:10]]


def test_bad_samples_follow_the_policy(datasets, tmp_path):
    import shutil
    bad = tmp_path / "bad"
    shutil.copytree(datasets["folder"], bad)
    victim = sorted((bad / "n01000000").iterdir())[0]
    victim.write_bytes(victim.read_bytes()[:200])  # cut short
    loader = small(str(bad), on_error="skip")
    batches = [len(labels) for _, labels in loader]
    assert batches == [16] * len(loader)
    stats = loader.stats()
    assert stats["bad_samples"] == 1
    assert stats["problems"][0]["file"] == str(victim)
    with pytest.raises(RuntimeError, match="Truncated: .*ends inside the JPEG headers"):
        for _ in small(str(bad), on_error="fail"):
            pass


def test_file_names_that_are_not_utf8_come_back_as_os_fsdecode_makes_them(datasets, tmp_path):
    """A Latin-1 name (caf\\xe9.jpg) damaged: named in stats() as os.fsdecode
    names it, os.fsencode gives its bytes back, and the error of a run that
    fails on it is readable."""
    import shutil
    bad = tmp_path / "latin1"
    shutil.copytree(datasets["folder"], bad)
    first = sorted((bad / "n01000000").iterdir())[0]
    victim = os.path.join(os.fsencode(bad / "n01000000"), b"caf\xe9.jpg")
    with open(victim, "wb") as fh:
        fh.write(first.read_bytes()[:200])  # cut short
    loader = small(str(bad), on_error="skip")
    for _ in loader:
        pass
    problems = loader.stats()["problems"]
    assert [os.fsencode(p["file"]) for p in problems] == [victim]
    assert "caf\udce9.jpg" in problems[0]["message"]
    with pytest.raises(RuntimeError, match=r"caf\\xe9\.jpg"):
        for _ in small(str(bad), on_error="fail"):
            pass


def test_what_pack_accepted_with_empty_classes_loads(datasets, tmp_path):
    """A class folder with no image: refused by default with the flag named,
    loaded with allow_empty_classes=True, every label as pack gives it."""
    import shutil
    root = tmp_path / "with_empty"
    shutil.copytree(datasets["folder"], root)
    (root / "n00000000_empty").mkdir()  # sorts first: every other class moves up one
    with pytest.raises(Exception, match="allow_empty_classes=True"):
        small(str(root))
    loader = small(str(root), allow_empty_classes=True, shuffle=False)
    labels = sorted({int(x) for _, y in loader for x in y})
    assert labels == list(range(1, 11))
    aquifer("dataset", "pack", root, "--out", tmp_path / "tf", "--allow-empty-classes", "--no-progress")


def test_loader_defaults_are_the_pipelines_own():
    """Loader's signature names the schema's defaults (one declaration in C++
    for the CLI, the C++ API and Python): a drift between them fails here."""
    import inspect
    import math
    defaults = aq.option_defaults()
    docs = aq.option_docs()
    assert set(defaults) == set(docs)
    checked = 0
    for name, param in inspect.signature(aq.Loader).parameters.items():
        if name not in defaults or param.default is inspect.Parameter.empty:
            continue
        want, got = defaults[name], param.default
        checked += 1
        if got is None:  # off: no jitter, no fields
            assert want in ([0.0, 0.0, 0.0], []), (name, want)
        elif isinstance(want, list) and want and isinstance(want[0], float):
            assert len(got) == len(want) and all(math.isclose(a, b, rel_tol=1e-6) for a, b in zip(got, want)), name
        elif name == "memory_limit":
            assert got == "2GiB" and want == 2 << 30
        elif isinstance(want, str):
            assert got.lower() == want.lower(), (name, got, want)
        else:
            assert got == want, (name, got, want)
    assert checked >= 20


def test_options_are_checked_by_the_schema(datasets):
    for bad, match in [(dict(batch_size=0), "batch_size: expected a whole number from 1"),
                       (dict(crop_scale=(0.5, 0.2)), "crop_scale"),
                       (dict(layout="CHWN"), "layout 'CHWN'"),
                       (dict(remainder="keep"), "remainder 'keep'"),
                       (dict(training="yes"), "training"),
                       (dict(std=(0.2, 0.0, 0.2)), "std")]:
        with pytest.raises(ValueError, match=match):
            aq.Loader(datasets["tfrecord"], **bad)
    with pytest.raises(TypeError, match="unknown option 'batchsize'"):
        aq._aquifer.Source(data=datasets["tfrecord"], batchsize=8)


def test_clear_errors_for_bad_options(datasets, tmp_path):
    with pytest.raises(FileNotFoundError):
        aq.Loader(str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="no full batch"):
        aq.Loader(datasets["tfrecord"], batch_size=1000)
    with pytest.raises(ValueError, match="dtype"):
        aq.Loader(datasets["tfrecord"], dtype="int7")
    with pytest.raises(ValueError, match="memory limit"):
        aq.Loader(datasets["tfrecord"], batch_size=128, memory_limit="1MiB")


def test_memory_and_threads_stay_flat(datasets):
    """30 epochs, then 20 loaders made and dropped: RSS and thread count
    come back to where they were."""
    loader = small(datasets["tfrecord"], dtype="uint8")
    for _ in range(3):
        for _ in loader:
            pass
    base_rss = rss_mib()
    for _ in range(27):
        for _ in loader:
            pass
    assert loader.epoch == 30
    assert rss_mib() - base_rss < 40, f"RSS grew {rss_mib() - base_rss:.1f} MiB over 27 epochs"
    del loader
    gc.collect()
    base_threads, base_rss = threads_now(), rss_mib()
    for _ in range(20):
        loader = small(datasets["tfrecord"], dtype="uint8")
        next(iter(loader))
        del loader
        gc.collect()
    assert threads_now() <= base_threads
    assert rss_mib() - base_rss < 40


def test_dropping_a_loader_mid_epoch_stops_its_threads_promptly(datasets):
    base = threads_now()
    loader = small(datasets["folder"], threads=2)
    it = iter(loader)
    next(it)
    assert threads_now() > base
    t0 = time.time()
    del it, loader
    gc.collect()
    assert threads_now() <= base
    assert time.time() - t0 < 2


def test_ctrl_c_interrupts_a_waiting_loader(tmp_path):
    """A batch that takes seconds to make: Ctrl-C while waiting for it
    raises KeyboardInterrupt at once, and the loader can be closed."""
    aquifer("dataset", "synth", "--out", tmp_path / "big", "--images", 48, "--profile", "large", "--no-progress")
    loader = aq.Loader(str(tmp_path / "big"), batch_size=48, image_size=224, threads=1, prefetch=1)
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.time()
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        next(iter(loader))
    assert time.time() - t0 < 1.5, "the wait noticed Ctrl-C promptly"
    loader.close()


def node(tmp_path):
    log = open(tmp_path / "node.log", "w")
    proc = subprocess.Popen([AQUIFER, "serve", "--data", str(tmp_path / "node"), "--listen", "127.0.0.1:0",
                             "--anonymous"], stdout=log, stderr=subprocess.STDOUT)
    for _ in range(100):
        text = (tmp_path / "node.log").read_text()
        m = re.search(r"S3 on http://(\S+)", text)
        if m:
            return proc, m.group(1)
        time.sleep(0.1)
    proc.kill()
    raise AssertionError("node did not start:\n" + (tmp_path / "node.log").read_text())


def test_reads_from_a_node(datasets, tmp_path, monkeypatch):
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AQUIFER_CREDENTIALS", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
    proc, addr = node(tmp_path)
    try:
        aquifer("cp", "-r", datasets["tfrecord"], f"aquifer://{addr}/train/tf")
        kw = dict(framework="numpy", ids=True, dtype="uint8")
        remote = collect(small(f"aquifer://{addr}/train/tf", **kw))
        local = collect(small(datasets["tfrecord"], **kw))
        assert remote == local
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_cuda_batches(datasets):
    loader = small(datasets["tfrecord"], device="cuda")
    for images, labels in loader:
        assert images.is_cuda and labels.is_cuda
    cpu = [x for x, _ in small(datasets["tfrecord"])]
    gpu = [x.cpu() for x, _ in small(datasets["tfrecord"], device="cuda")]
    assert all(torch.equal(a, b) for a, b in zip(cpu, gpu))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_gpu_decode_batches(datasets):
    cpu = list(small(datasets["tfrecord"], extras=True))
    gpu = list(small(datasets["tfrecord"], extras=True, device="cuda", decode="gpu"))
    assert len(cpu) == len(gpu)
    for (a, la, ea), (b, lb, eb) in zip(cpu, gpu):
        assert b.is_cuda and lb.is_cuda and b.dtype == a.dtype and b.shape == a.shape
        assert torch.equal(la, lb.cpu()) and (ea["crops"] == eb["crops"]).all()
        assert float((b.cpu() - a).abs().mean()) * 0.226 * 255 < 3  # nvJPEG's IDCT and upsampling differ a little


def test_gpu_decode_is_refused_where_it_cannot_run(datasets):
    with pytest.raises(ValueError, match="decode must be"):
        small(datasets["tfrecord"], decode="fpga")
    with pytest.raises(ValueError, match="CUDA device"):
        small(datasets["tfrecord"], decode="gpu")  # device="cpu"
    with pytest.raises(ValueError, match="CUDA device"):
        small(datasets["tfrecord"], decode="gpu", device="cuda", framework="numpy")
    with pytest.raises(ValueError, match="jitter"):
        small(datasets["tfrecord"], decode="gpu", device="cuda", jitter=(0.2, 0.2, 0.2))


@pytest.fixture(scope="module")
def mixed_jpegs(tmp_path_factory):
    """A folder of photos' crops as baseline JPEGs (4:2:0, 4:4:4, grey),
    with a progressive JPEG and a PNG among them."""
    from PIL import Image
    root = tmp_path_factory.mktemp("mixed")
    rng = np.random.default_rng(5)
    for i in range(40):
        d = root / f"c{i % 4}"
        d.mkdir(exist_ok=True)
        h, w = int(rng.integers(120, 300)), int(rng.integers(120, 300))
        y, x = np.mgrid[0:h, 0:w]
        pixels = np.stack([x * 255 // w, y * 255 // h, (x + y) * 128 // (w + h)], -1) + rng.integers(0, 8, (h, w, 3))
        img = Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))
        if i == 7:
            img.save(d / f"{i}.jpg", quality=90, progressive=True)
        elif i == 11:
            img.save(d / f"{i}.png")
        elif i % 5 == 0:
            img.convert("L").save(d / f"{i}.jpg", quality=90)
        else:
            img.save(d / f"{i}.jpg", quality=int(rng.integers(75, 96)), subsampling=0 if i % 2 else 2)
    return str(root)


@pytest.mark.parametrize("device", ["cpu", "cuda"])
@pytest.mark.parametrize("sizes", ["similar", "mixed"])
def test_batched_resampling_is_roi_align_per_image(sizes, device):
    """decode="gpu" resamples a batch's crops as two matrix products per
    image, batched over images padded to one size: the same pixels as
    torchvision's roi_align (aligned, adaptive sampling) run per image, at
    the edges of every image too, flips included; in the batch's order
    whether the images are padded as one group or in several. On CUDA the
    products run in float16 (0..255 exact, weights to 11 bits)."""
    from aquifer.loader import _JpegDecoder
    roi_align = pytest.importorskip("torchvision.ops").roi_align
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    opts = {"image_size": 24, "dtype": "float32", "layout": "NCHW", "mean": [0, 0, 0], "std": [1, 1, 1]}
    decoder = _JpegDecoder(torch, torch.device(device), opts)
    rng = np.random.default_rng(11)
    images, crops = [], []
    for k in range(30):
        h, w = (int(rng.integers(60, 70)), int(rng.integers(80, 90))) if sizes == "similar" else \
            (int(rng.integers(3, 90)), int(rng.integers(3, 90)))
        if sizes == "mixed" and k == 17:
            h, w = 400, 300  # one large image among small ones: padded apart
        images.append(torch.from_numpy(rng.integers(0, 256, (3, h, w), dtype=np.uint8)).to(device))
        x0, y0 = rng.uniform(0, 0.6, 2)
        x1, y1 = x0 + rng.uniform(0.02, 1 - x0), y0 + rng.uniform(0.02, 1 - y0)
        if k % 4 == 0:
            x0, y0, x1, y1 = 0.0, 0.0, 1.0, 1.0  # the whole image: every edge sampled
        elif k % 4 == 1:
            x1, y1 = 1.0, 1.0  # the right and bottom edges
        crops.append([x0, y0, x1, y1])
    crops = np.array(crops, dtype=np.float32)
    flips = np.arange(30) % 3 == 0
    groups = len(decoder._chunks([i.shape[1] for i in images], [i.shape[2] for i in images]))
    assert (groups == 1) if sizes == "similar" else (groups > 1)
    got = decoder.resample(images, crops, flips).float()
    assert got.shape == (30, 3, 24, 24) and got.device.type == device
    worst = 0.6 if device == "cuda" else 0.01
    for k, img in enumerate(images):
        h, w = img.shape[1:]
        box = torch.tensor([[0, crops[k][0] * w, crops[k][1] * h, crops[k][2] * w, crops[k][3] * h]]).float()
        want = roi_align(img[None].float(), box.to(device), (24, 24), 1.0, -1, True)[0]
        if flips[k]:
            want = want.flip(-1)
        diff = (want - got[k]).abs()
        assert float(diff.max()) < worst and float(diff.mean()) < worst / 4, (k, float(diff.max()))


@pytest.mark.parametrize("options", [{}, {"training": False}, {"dtype": "uint8", "layout": "NHWC"},
                                     {"dtype": "float16"}])
def test_encoded_batches_decode_to_the_cpu_paths_pixels(mixed_jpegs, options):
    """decode="gpu"'s half on the host: the pipeline delivers each baseline
    JPEG as stored, with the crop and flip it would have used; the decoder
    (run here on torchvision's CPU decoder, as on nvJPEG) crops, resamples,
    flips and normalises them to within a fraction of a grey level of the
    CPU path's pixels. The progressive JPEG and the PNG come decoded."""
    from aquifer.loader import _JpegDecoder
    pytest.importorskip("torchvision")
    opts = dict(data=mixed_jpegs, batch_size=8, image_size=48, seed=3, threads=2)
    opts.update(options)
    ref = aq._aquifer.Source(**opts)
    enc = aq._aquifer.Source(**opts, encoded_images=True)
    decoder = _JpegDecoder(torch, torch.device("cpu"), aq.Loader(mixed_jpegs, batch_size=8, image_size=48,
                                                                 **options)._options)
    scale = 1.0 if options.get("dtype") == "uint8" else 0.226 * 255
    passed = here = 0
    while True:
        a, b = ref.next(), enc.next()
        if a is None:
            assert b is None
            break
        assert (a[2]["crops"] == b[2]["crops"]).all() and (a[2]["flips"] == b[2]["flips"]).all()
        assert (a[1] == b[1]).all() and (a[2]["samples"] == b[2]["samples"]).all()
        data, offsets = b[2]["encoded"]
        sizes = offsets[1:] - offsets[:-1]
        here += int((sizes == 0).sum())
        passed += int((sizes > 0).sum())
        images, labels = decoder.decode(b[0], b[1], b[2])
        want = torch.from_numpy(a[0])
        assert images.dtype == want.dtype and images.shape == want.shape
        diff = (images.float() - want.float()).abs() * scale
        assert float(diff.mean()) < 1.0, float(diff.mean())
        for i in np.flatnonzero(sizes == 0):  # decoded by the pipeline: its very pixels
            assert torch.equal(images[i], want[i])
        assert torch.equal(labels, torch.from_numpy(a[1]))
    assert here == 2 and passed == 38


def test_gpu_decode_stages_deliver_the_cpu_paths_batches(mixed_jpegs):
    """The Loader's decode="gpu" path end to end, its helper threads
    included (reading, nvJPEG, resampling: each a stage a batch ahead of the
    next), run here on torchvision's CPU decoder: every batch in order with
    the CPU path's labels, crops and flips and within a grey level of its
    pixels, over two epochs; a pass left early resumes at the next batch."""
    from aquifer.loader import _JpegDecoder
    pytest.importorskip("torchvision")

    ran_on = collections.defaultdict(set)  # stage -> names of the threads it ran on

    def gpu_path():
        loader = aq.Loader(mixed_jpegs, batch_size=8, image_size=48, seed=3, threads=2, extras=True)
        loader._close_run()  # reopened with the JPEGs passed as stored, as decode="gpu" opens it
        loader._options["encoded_images"] = True
        decoder = loader._cuda = _JpegDecoder(torch, torch.device("cpu"), loader._options)
        for stage in ("start", "finish"):
            def traced(batch, stage=stage, run=getattr(decoder, stage)):
                ran_on[stage].add(threading.current_thread().name)
                return run(batch)
            setattr(decoder, stage, traced)
        return loader

    ref = aq.Loader(mixed_jpegs, batch_size=8, image_size=48, seed=3, threads=2, extras=True)
    want = [b for _ in range(2) for b in ref]
    loader = gpu_path()
    got = [b for _ in range(2) for b in loader]
    assert ran_on == {"start": {"aquifer-nvjpeg"}, "finish": {"aquifer-resample"}}
    assert len(got) == len(want) == 10
    for (a, la, ea), (b, lb, eb) in zip(want, got):
        assert torch.equal(la, lb) and (ea["ids"] == eb["ids"]).all() and (ea["crops"] == eb["crops"]).all()
        assert float((a - b).abs().mean()) * 0.226 * 255 < 1.0
    loader = gpu_path()
    it = iter(loader)
    first = [next(it) for _ in range(2)]
    it.close()  # the stages had taken batches further ahead
    rest = list(loader)
    assert len(first) + len(rest) == 5
    assert all(torch.equal(x[1], y[1]) for x, y in zip(first + rest, want[:5]))
    assert not any(t.name in ("aquifer-nvjpeg", "aquifer-resample") for t in threading.enumerate())


def test_installs_into_a_prefix(tmp_path):
    """cmake --install puts the package beside the binary; it imports from
    there alone."""
    subprocess.run(["cmake", "--install", BUILD, "--prefix", str(tmp_path)], check=True, capture_output=True)
    site = next(tmp_path.glob("lib/python3*/dist-packages"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(site)}
    p = subprocess.run(["/usr/bin/python3", "-c", "import aquifer; print(aquifer.__file__)"], env=env,
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith(str(site))
    assert (tmp_path / "bin" / "aquifer").exists()



def test_prometheus_text_of_the_running_epoch(datasets):
    loader = small(datasets["tfrecord"], framework="numpy")
    it = iter(loader)
    for _ in range(3):
        next(it)
    text = loader.prometheus()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            values[name] = float(value)
    assert values['aquifer_loader_epoch_batches{rank="0"}'] >= 3
    assert values['aquifer_loader_steps_per_epoch{rank="0"}'] == len(loader)
    assert values['aquifer_loader_epoch_read_bytes{rank="0"}'] > 0
    assert sum(v for k, v in values.items() if k.startswith("aquifer_loader_limiting_stage{")) == 1
    assert 'aquifer_loader_stage_utilisation_ratio{rank="0",stage="decode"}' in values
    assert 0 < values['aquifer_loader_batch_buffer_bytes{rank="0"}'] < values['aquifer_loader_memory_bound_bytes{rank="0"}']
    assert values['aquifer_loader_payload_pool_bytes{rank="0"}'] >= values['aquifer_loader_payload_bytes{rank="0"}']
    for _ in it:
        pass
    if shutil.which("promtool"):
        r = subprocess.run(["promtool", "check", "metrics"], input=loader.prometheus(), capture_output=True,
                           text=True)
        assert r.returncode == 0 and not (r.stdout + r.stderr).strip(), r.stdout + r.stderr
