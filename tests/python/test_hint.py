"""aquifer.hint: the sampler it wraps decides the order; the plan file gets
that order, a window ahead of every index handed out. A plain directory
stands in for the mount here (the mount's side of the plan file, and the
node staging what it names, is tests/integration/mount_test.py's)."""
import os

import pytest
import torch
import torchvision

import aquifer as aq
from aquifer.hint import PLAN_FILE


def planned_lines(mountpoint):
    with open(os.path.join(mountpoint, PLAN_FILE)) as f:
        return f.read().splitlines()


def test_the_order_is_the_samplers_and_the_plan_runs_ahead_of_it(datasets):
    mountpoint = datasets["dir"]
    data = torchvision.datasets.ImageFolder(datasets["folder"])
    expected = list(torch.utils.data.RandomSampler(data, generator=torch.Generator().manual_seed(7)))
    hinted = aq.hint(torch.utils.data.RandomSampler(data, generator=torch.Generator().manual_seed(7)), mountpoint,
                     ahead=16)
    assert len(hinted) == len(data)
    got = []
    for k, index in enumerate(hinted):
        ahead = len(planned_lines(mountpoint))
        assert k < ahead <= k + 16, f"index {k}: {ahead} planned"
        got.append(index)
    assert got == expected  # the training sees exactly the wrapped sampler's order
    rel = [os.path.relpath(data.samples[i][0], mountpoint) for i in expected]
    assert planned_lines(mountpoint) == rel
    assert hinted.sent == len(data) and hinted.skipped == 0
    # Each epoch is a new draw, planned anew.
    second = list(hinted)
    assert sorted(second) == sorted(expected) and second != expected
    assert planned_lines(mountpoint) == [os.path.relpath(data.samples[i][0], mountpoint) for i in second]


def test_a_dataloader_takes_the_hinted_sampler(datasets):
    data = torchvision.datasets.ImageFolder(datasets["folder"], transform=torchvision.transforms.Compose(
        [torchvision.transforms.Resize((16, 16)), torchvision.transforms.ToTensor()]))
    sampler = aq.hint(torch.utils.data.RandomSampler(data), datasets["dir"], ahead=64)
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=32, num_workers=2)
    seen = sum(len(labels) for _, labels in loader)
    assert seen == len(data)
    assert len(planned_lines(datasets["dir"])) == len(data)


def test_paths_outside_the_mount_are_skipped_and_bad_arguments_refused(datasets, tmp_path):
    data = torchvision.datasets.ImageFolder(datasets["folder"])
    elsewhere = tmp_path / "mnt"
    elsewhere.mkdir()
    hinted = aq.hint(torch.utils.data.SequentialSampler(data), elsewhere)
    assert list(hinted) == list(range(len(data)))
    assert hinted.skipped == len(data) and hinted.sent == 0
    with pytest.raises(ValueError):
        aq.hint(range(3), elsewhere)  # no dataset to name the files
    with pytest.raises(ValueError):
        aq.hint(torch.utils.data.SequentialSampler(data), elsewhere, ahead=0)
    with pytest.raises(OSError, match="aquifer mount"):
        list(aq.hint(torch.utils.data.SequentialSampler(data), tmp_path / "missing"))
    # Paths as a list, or as a callable.
    paths = [p for p, _ in data.samples]
    assert list(aq.hint(range(len(paths)), datasets["dir"], paths=paths)) == list(range(len(paths)))
    assert list(aq.hint(range(5), datasets["dir"], paths=lambda i: paths[i])) == list(range(5))
    assert planned_lines(datasets["dir"]) == [os.path.relpath(p, datasets["dir"]) for p in paths[:5]]
