"""Real training fed by aquifer.Loader, on a CPU: examples/train_imagenet.py
learns a class-structured synthetic set (dataset synth --learnable) as well
as the same script fed by torchvision's DataLoader does; and the ImageNet
recipe (resnet18) runs, checkpoints and resumes."""
import json
import os
import subprocess
import sys

import pytest

from conftest import BUILD, ROOT, aquifer

pytest.importorskip("torch")
pytest.importorskip("torchvision")

SCRIPT = os.path.join(ROOT, "examples", "train_imagenet.py")


def train(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"), **(env_extra or {}))
    p = subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True, env=env,
                       timeout=900)
    if p.returncode != 0:
        raise AssertionError(f"train_imagenet.py failed:\n{p.stdout}\n{p.stderr}")
    print(p.stdout)
    return p.stdout


@pytest.fixture(scope="module")
def learnable(tmp_path_factory):
    d = tmp_path_factory.mktemp("learnable")
    # 1,200 images at 32 px keep the check inside a minute on two cores: the
    # classes (a shape and a hue each) stay separable at that size, and both
    # loaders reach ~0.9 top-1 in 6 epochs.
    aquifer("dataset", "synth", "--out", d / "train", "--classes", 10, "--images", 1200, "--profile", "tiny",
            "--learnable", "--seed", 1, "--no-progress")
    aquifer("dataset", "synth", "--out", d / "val", "--classes", 10, "--images", 500, "--profile", "tiny",
            "--learnable", "--seed", 2, "--no-progress")
    aquifer("dataset", "pack", d / "train", "--out", d / "train-tf", "--shards", 4, "--no-progress")
    return d


def last_epoch(json_file):
    with open(json_file) as fh:
        return [json.loads(line) for line in fh][-1]


def test_a_small_cnn_learns_and_matches_torchvision(learnable, tmp_path):
    common = ["--val", learnable / "val", "--arch", "smallcnn", "--num-classes", 10, "--epochs", 6, "--batch-size",
              64, "--image-size", 32, "--lr", 0.4, "--schedule", "cosine", "--warmup-epochs", 1, "--weight-decay",
              5e-4]
    train("--train", learnable / "train-tf", *common, "--json", tmp_path / "aquifer.json", "--checkpoint",
          tmp_path / "small.pt")
    train("--train", learnable / "train", *common, "--loader", "torchvision", "--workers", 2, "--json",
          tmp_path / "torchvision.json")
    ours, theirs = last_epoch(tmp_path / "aquifer.json"), last_epoch(tmp_path / "torchvision.json")
    print(f"top-1: aquifer {ours['top1']:.3f}, torchvision {theirs['top1']:.3f}")
    assert ours["top1"] >= 0.80
    assert abs(ours["top1"] - theirs["top1"]) <= 0.05

    # The inference half: bench infer evaluates the same checkpoint through
    # aquifer.Loader and finds the top-1 the training run reported, over
    # exactly the 500 validation images (batches of 64 pad to 512: the
    # padded repeats are not counted).
    out = aquifer("bench", "infer", learnable / "val", "--size", 32, "--batches", "8,32", "--checkpoint",
                  tmp_path / "small.pt", "--json", "--no-progress")
    result = json.loads(out)
    ev = result["summary"]["evaluation"]
    print(f"bench infer: top-1 {ev['top1']:.3f} over {ev['images']} images, {ev['images_per_second']:.0f} images/s")
    assert ev["images"] == 500 and ev["arch"] == "smallcnn"
    assert abs(ev["top1"] - ours["top1"]) <= 2 / 500
    assert [p["batch"] for p in result["summary"]["points"]] == [8, 32]


def test_the_imagenet_recipe_runs_checkpoints_and_resumes(learnable, tmp_path):
    ckpt = tmp_path / "ckpt.pt"
    args = ["--train", learnable / "train-tf", "--val", learnable / "val", "--arch", "resnet18", "--num-classes", 10,
            "--batch-size", 8, "--image-size", 32, "--steps", 3, "--checkpoint", ckpt, "--json", tmp_path / "log.json"]
    out = train(*args, "--epochs", 1)
    assert "epoch 0:" in out and ckpt.exists()
    out = train(*args, "--epochs", 2, "--resume", ckpt)
    assert "epoch 1:" in out and "epoch 0:" not in out
    line = last_epoch(tmp_path / "log.json")
    assert line["epoch"] == 1 and 0 <= line["data_wait_fraction"] <= 1 and line["images_per_second"] > 0


def test_a_killed_job_resumes_mid_epoch_from_its_last_checkpoint(learnable, tmp_path):
    """--checkpoint-every N: kill -9 the job after a mid-epoch checkpoint;
    --resume runs exactly the steps of that epoch it had not run."""
    import signal
    import time
    import torch
    ckpt, log = tmp_path / "ckpt.pt", tmp_path / "log.json"
    # resnet18 steps are slow enough (tens of ms) that the kill lands long
    # before the epoch's 80th step.
    args = [sys.executable, SCRIPT, "--train", learnable / "train-tf", "--arch", "resnet18", "--num-classes", 10,
            "--batch-size", 4, "--image-size", 32, "--steps", 80, "--epochs", 1, "--checkpoint", ckpt,
            "--checkpoint-every", 4, "--json", log]
    env = dict(os.environ, PYTHONPATH=os.path.join(BUILD, "python"))
    p = subprocess.Popen(list(map(str, args)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 300
    while not ckpt.exists() and p.poll() is None and time.time() < deadline:
        time.sleep(0.005)
    p.send_signal(signal.SIGKILL)
    p.communicate()
    assert ckpt.exists(), "no checkpoint was written mid-epoch"
    state = torch.load(ckpt, map_location="cpu")
    done = state["loader"]["step"]
    assert state["loader"]["epoch"] == 0 and 0 < done < 80 and done % 4 == 0, state["loader"]
    assert not log.exists() or "epoch" not in log.read_text(), "the epoch finished before the kill"
    train(*args[2:], "--resume", ckpt)
    line = last_epoch(log)
    assert line["epoch"] == 0 and line["first_step"] == done and line["steps_run"] == 80 - done

