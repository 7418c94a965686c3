"""Checkpoints in the store: sharded saves by every rank at once, restores,
latest() and retention.

    from aquifer import checkpoint

    root = "aquifer://node:9000/ckpt/run1"
    checkpoint.save(state, f"{root}/step-{step:08d}")   # every rank of the job
    ...
    last = checkpoint.latest(root)                      # None if none is complete
    state = checkpoint.load(last)
    checkpoint.keep_last(root, 3)                       # on one rank

A checkpoint is a folder (a key prefix): one file per rank and a
`.metadata` file. In a job with torch.distributed initialized, the state
(replicated across ranks, as DDP keeps it) is split by size over the ranks,
each rank writing its share into its own file at the same time (each file's
parts leave while it is written); rank 0 writes `.metadata` last, after
every rank's file is stored, and every rank returns only then. Each file
appears whole at its close or never, so a checkpoint is complete exactly
when its `.metadata` exists: a save killed at any point (a rank, the whole
job) leaves the folder without one, and latest() passes it over. The files
of one save carry a token of their own, so a second try at the same folder
never mixes with a torn first one. "Stored" means the node acknowledged the
close: what that survives is the node's durability (docs/cli.md, serve).
"""
import atexit
import io
import pickle
import re
import secrets
import time

from . import _aquifer
from .files import open as _open

METADATA = ".metadata"
SUFFIX = ".distcp"
FORMAT = "aquifer-checkpoint-1"


def _join(folder, name):
    return folder.rstrip("/") + "/" + name


def _keys(credentials, profile):
    return dict(credentials=credentials, profile=profile)


def _dist():
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    return dist if dist.is_available() and dist.is_initialized() else None


def _shares(sizes, world):
    """Keys split over `world` ranks, largest first to the least loaded:
    the same on every rank (sizes are the same everywhere)."""
    load = [0] * world
    share = [[] for _ in range(world)]
    for key, size in sorted(sizes.items(), key=lambda kv: (-kv[1], kv[0])):
        r = min(range(world), key=lambda i: (load[i], i))
        load[r] += size
        share[r].append(key)
    return share


def _size(value):
    import torch
    if torch.is_tensor(value):
        return value.numel() * value.element_size()
    return 0


_exit_hook = []


def _settle_at_exit():
    """Gives the process group's worker threads a moment with the GIL.

    A gloo worker drops its reference to a finished collective's tensors
    after the caller has returned; when that is the last reference it takes
    the GIL to free them. If the interpreter is finalizing by then (a job
    that saves and exits at once), the thread is ended in the middle of a
    C++ destructor and the process aborts ("terminate called without an
    active exception"). Sleeping at exit, before finalization begins, lets
    those releases finish."""
    time.sleep(0.05)


def _collective(dist):
    if not _exit_hook:
        _exit_hook.append(atexit.register(_settle_at_exit))
    return dist


def _first(dist, group):
    return dist.get_global_rank(group, 0) if group is not None else 0


def save(state, folder, *, group=None, credentials=None, profile=None):
    """Saves `state` (a dict with str keys: tensors, and any other value
    torch.save takes) into `folder`. With torch.distributed initialized,
    every rank of `group` (default: the world) calls it with the same keys
    and each writes its share. Returns the bytes this rank wrote. If any
    rank fails to store its file, every rank raises OSError and the
    checkpoint is not complete."""
    import torch
    dist = _dist()
    if dist:
        _collective(dist)
    rank, world = (dist.get_rank(group), dist.get_world_size(group)) if dist else (0, 1)
    if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
        raise TypeError("checkpoint.save: state must be a dict with str keys")
    token = [secrets.token_hex(4)]
    if dist:
        dist.broadcast_object_list(token, src=_first(dist, group), group=group)
    mine = _shares({k: _size(v) for k, v in state.items()}, world)[rank]
    name = f"__{rank}_{token[0]}{SUFFIX}"
    entries, error, wrote = {}, None, 0
    try:
        if mine:
            with _open(_join(folder, name), "wb", **_keys(credentials, profile)) as f:
                for key in mine:
                    at = f.tell()
                    value = state[key]
                    if torch.is_tensor(value):
                        value = value.detach().cpu()
                        if value.storage().size() != value.numel():  # a view: only its own elements
                            value = value.clone()
                    torch.save(value, f)
                    entries[key] = (name, at, f.tell() - at)
                wrote = f.tell()
    except Exception as e:  # noqa: BLE001 - every rank hears of it below
        error = f"rank {rank}: {type(e).__name__}: {e}"
    gathered = [None] * world
    if dist:
        dist.all_gather_object(gathered, (entries, error), group=group)
    else:
        gathered = [(entries, error)]
    errors = [err for _, err in gathered if err]
    if errors:
        raise OSError(f"checkpoint {folder} not saved: " + "; ".join(errors))
    if rank == 0:
        metadata = {"format": FORMAT, "world_size": world, "entries": {}}
        for rank_entries, _ in gathered:
            metadata["entries"].update(rank_entries)
        try:
            with _open(_join(folder, METADATA), "wb", **_keys(credentials, profile)) as f:
                pickle.dump(metadata, f)
        except Exception as e:  # noqa: BLE001
            error = f"rank 0 (.metadata): {type(e).__name__}: {e}"
    if dist:
        done = [error]
        dist.broadcast_object_list(done, src=_first(dist, group), group=group)
        error = done[0]
    if error:
        raise OSError(f"checkpoint {folder} not saved: {error}")
    return wrote


def read_metadata(folder, *, credentials=None, profile=None):
    """The checkpoint's metadata (FileNotFoundError if it is not complete)."""
    with _open(_join(folder, METADATA), "rb", **_keys(credentials, profile)) as f:
        return pickle.load(f)


def load(folder, *, keys=None, map_location="cpu", credentials=None, profile=None):
    """The state saved in `folder` (all of it, or `keys`) as a dict. Each
    file is read front to back."""
    import torch
    metadata = read_metadata(folder, credentials=credentials, profile=profile)
    if not isinstance(metadata, dict) or metadata.get("format") != FORMAT:
        raise ValueError(f"{folder}: not a checkpoint that aquifer.checkpoint.save wrote")
    entries = metadata["entries"]
    wanted = list(entries) if keys is None else list(keys)
    missing = [k for k in wanted if k not in entries]
    if missing:
        raise KeyError(f"{folder}: no {missing[:5]} in the checkpoint")
    per_file = {}
    for key in wanted:
        per_file.setdefault(entries[key][0], []).append(key)
    out = {}
    for name, names in per_file.items():
        with _open(_join(folder, name), "rb", **_keys(credentials, profile)) as f:
            for key in sorted(names, key=lambda k: entries[k][1]):
                _, at, length = entries[key]
                f.seek(at)
                data = f.read(length)
                if len(data) != length:
                    raise OSError(f"{_join(folder, name)}: {len(data)} bytes at {at} where the metadata says "
                                  f"{length} ({key})")
                out[key] = torch.load(io.BytesIO(data), map_location=map_location)
    return out


def _natural(name):
    return [(0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name)]


def complete(folder, *, credentials=None, profile=None):
    """Whether the checkpoint in `folder` is complete (its .metadata is stored)."""
    try:
        names = [e[0] for e in _aquifer.list_dir(folder, credentials or "", profile or "")]
    except FileNotFoundError:
        return False
    return METADATA in names


def checkpoints(root, *, credentials=None, profile=None):
    """The checkpoints under `root`, oldest first: (folder, complete). Order
    is by name, numbers compared as numbers (step-9 before step-10)."""
    try:
        entries = _aquifer.list_dir(root, credentials or "", profile or "")
    except FileNotFoundError:
        return []
    out = []
    for name, _, is_dir, _ in sorted(entries, key=lambda e: _natural(e[0])):
        if is_dir:
            folder = _join(root, name)
            out.append((folder, complete(folder, credentials=credentials, profile=profile)))
    return out


def latest(root, *, credentials=None, profile=None):
    """The newest complete checkpoint under `root` (a folder URL), or None."""
    done = [folder for folder, ok in checkpoints(root, credentials=credentials, profile=profile) if ok]
    return done[-1] if done else None


def keep_last(root, count, *, credentials=None, profile=None):
    """Retention: removes every checkpoint under `root` but the newest `count`
    complete ones, and torn ones older than the newest complete one (a save
    still running, newer than it, is left alone). Returns what it removed."""
    if count < 1:
        raise ValueError("keep_last: count must be at least 1 (the newest complete checkpoint is never removed)")
    found = checkpoints(root, credentials=credentials, profile=profile)
    done = [i for i, (_, ok) in enumerate(found) if ok]
    if not done:
        return []
    keep = set(done[-count:])
    newest = done[-1]
    removed = []
    for i, (folder, _) in enumerate(found):
        if i in keep or i > newest:
            continue
        # .metadata first: a checkpoint half removed is torn, never complete with files missing.
        names = [e[0] for e in _aquifer.list_dir(folder, credentials or "", profile or "")]
        for name in sorted(names, key=lambda n: n != METADATA):
            _aquifer.remove(_join(folder, name), credentials or "", profile or "")
        try:
            _aquifer.remove(folder.rstrip("/") + "/", credentials or "", profile or "")
        except OSError:
            pass  # no folder marker
        removed.append(folder)
    return removed


__all__ = ["checkpoints", "complete", "keep_last", "latest", "load", "read_metadata", "save"]
