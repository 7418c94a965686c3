"""Fixtures for the aquifer Python package tests: the aquifer binary
(AQUIFER, default the build tree's), the package (PYTHONPATH, default the
build tree's python/), and small datasets made with it."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("AQUIFER_BUILD", os.path.join(ROOT, "build"))
AQUIFER = os.environ.get("AQUIFER", os.path.join(BUILD, "aquifer"))
if os.path.join(BUILD, "python") not in sys.path:
    sys.path.insert(0, os.path.join(BUILD, "python"))


def aquifer(*args):
    p = subprocess.run([AQUIFER, *map(str, args)], capture_output=True, text=True)
    if p.returncode != 0:
        raise AssertionError(f"aquifer {' '.join(map(str, args))} failed:\n{p.stdout}\n{p.stderr}")
    return p.stdout


@pytest.fixture(scope="session")
def datasets(tmp_path_factory):
    """A learnable 10-class set of 240 tiny images as a folder, 4 TFRecord
    shards and one RecordIO file."""
    d = tmp_path_factory.mktemp("data")
    aquifer("dataset", "synth", "--out", d / "raw", "--classes", 10, "--images", 240, "--profile", "tiny",
            "--learnable", "--seed", 3, "--no-progress")
    aquifer("dataset", "pack", d / "raw", "--out", d / "tf", "--shards", 4, "--no-progress")
    aquifer("dataset", "pack", d / "raw", "--out", d / "rec", "--format", "recordio", "--no-progress")
    return {"folder": str(d / "raw"), "tfrecord": str(d / "tf"), "recordio": str(d / "rec"), "dir": d}
