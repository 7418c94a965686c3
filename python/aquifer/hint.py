"""Read plans for an unmodified PyTorch DataLoader reading an aquifer mount.

    import aquifer, torch, torchvision
    data = torchvision.datasets.ImageFolder("/mnt/aquifer/train", transform=...)
    sampler = aquifer.hint(torch.utils.data.RandomSampler(data), "/mnt/aquifer")
    loader = torch.utils.data.DataLoader(data, sampler=sampler, batch_size=256, num_workers=8)

Each epoch the wrapped sampler draws its order once, writes the files it
names, in that order and a window ahead of the indices it hands out, to the
mount's plan file (`.aquifer-plan`), and yields the same indices. The mount
sends them to the storage nodes, which stage the files from slow (hdd) pools
into RAM before the DataLoader's workers open them. The order, and so the
training, is exactly the wrapped sampler's.
"""
import os

PLAN_FILE = ".aquifer-plan"


def _paths_of(source):
    """Index -> path: a list of paths, a dataset with .samples or .imgs
    (torchvision's ImageFolder / DatasetFolder), or a callable."""
    if callable(source) and not hasattr(source, "__getitem__"):
        return source
    for attr in ("samples", "imgs"):
        items = getattr(source, attr, None)
        if items is not None:
            return lambda i, items=items: items[i][0] if isinstance(items[i], (tuple, list)) else items[i]
    if hasattr(source, "__getitem__"):
        return lambda i: source[i]
    raise TypeError("paths: give a list of file paths, a dataset with .samples (ImageFolder) or a callable")


class HintedSampler:
    """A sampler whose every epoch's order is sent ahead to an aquifer mount
    (see aquifer.hint). Iterating it yields exactly the wrapped sampler's
    indices."""

    def __init__(self, sampler, mountpoint, paths=None, ahead=1024):
        if ahead < 1:
            raise ValueError("ahead must be at least 1")
        self.sampler = sampler
        self.mountpoint = os.path.realpath(os.fspath(mountpoint))
        self.plan_file = os.path.join(self.mountpoint, PLAN_FILE)
        if paths is None:
            paths = getattr(sampler, "data_source", None) or getattr(sampler, "dataset", None)
            if paths is None:
                raise ValueError("paths: this sampler does not name its dataset; pass paths= (a list, or the dataset)")
        self._path = _paths_of(paths)
        self.ahead = int(ahead)
        self.sent = 0  # lines written to the plan file, all epochs
        self.skipped = 0  # indices whose file is not below the mountpoint (or has a newline in its name)

    def __len__(self):
        return len(self.sampler)

    def set_epoch(self, epoch):  # DistributedSampler's
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def _line(self, index):
        path = os.fspath(self._path(index))
        rel = os.path.relpath(os.path.realpath(path), self.mountpoint)
        if rel.startswith("..") or os.path.isabs(rel) or "\n" in rel:
            self.skipped += 1
            return None
        return rel

    def __iter__(self):
        order = list(iter(self.sampler))  # this epoch's draw, once
        try:
            plan = open(self.plan_file, "w", buffering=1, encoding="utf-8", errors="surrogateescape")
        except OSError as e:
            raise OSError(f"aquifer.hint: cannot open {self.plan_file} ({e.strerror}): "
                          f"is {self.mountpoint} an aquifer mount?") from e
        with plan:
            planned = 0

            def send(upto):
                nonlocal planned
                lines = [line for line in (self._line(i) for i in order[planned:upto]) if line is not None]
                if lines:
                    plan.write("\n".join(lines) + "\n")
                    plan.flush()
                    self.sent += len(lines)
                planned = upto

            for k, index in enumerate(order):
                if planned < len(order) and k + self.ahead // 2 >= planned:
                    send(min(len(order), k + self.ahead))
                yield index


def hint(sampler, mountpoint, paths=None, ahead=1024):
    """Wraps `sampler` so that each epoch's file order is sent ahead to the
    aquifer mount at `mountpoint`, whose nodes then stage those files from
    slow pools before they are read (docs/python.md).

    paths: index -> file: a list of paths, the dataset (anything with
        .samples or .imgs, as torchvision's ImageFolder) or a callable;
        default: the sampler's own dataset (RandomSampler, SequentialSampler
        and DistributedSampler keep it).
    ahead: files named ahead of the index handed out (the next window is
        sent half way through the last).
    """
    return HintedSampler(sampler, mountpoint, paths=paths, ahead=ahead)
