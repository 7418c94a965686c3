"""aquifer.Loader: the input pipeline as a PyTorch-style iterable.

Each pass over the loader is one epoch of the C++ pipeline (one
aquifer._aquifer.Source); the loader only keeps count of epochs and steps,
wraps batches as tensors and, for device="cuda", copies them to the GPU.
Planning, reading, decoding and augmentation all happen in C++.
"""
import collections
import os

from . import _aquifer

_DTYPES = {"uint8": "uint8", "u8": "uint8", "float16": "float16", "fp16": "float16", "half": "float16",
           "float32": "float32", "fp32": "float32", "float": "float32"}


def _torch_dtype_name(dtype):
    """'float16' for torch.float16 and the like; strings pass through."""
    name = str(dtype)
    return name[len("torch."):] if name.startswith("torch.") else name


def _distributed_rank():
    """(rank, world_size) from torch.distributed when it is initialised."""
    try:
        import torch.distributed as dist
    except ImportError:
        return None, None
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return None, None


class Loader:
    """Batches of decoded, augmented images and their labels.

    data: TFRecord shards, .rec files or an image folder (a directory or one
        file); several mounts of the same data as "ROOT1:ROOT2"; or
        "aquifer://HOST:PORT/BUCKET/PREFIX" on a node or cluster.
    batch_size, image_size: per rank; image_size is the square output side.
    training: RandomResizedCrop(crop_scale, crop_ratio) + horizontal flip
        (+ jitter=(brightness, contrast, saturation)); False: resize the
        shorter side to eval_resize and centre-crop image_size.
    dtype: "float32" or "float16" (normalised with mean/std) or "uint8"
        (raw pixels); layout: "NCHW" or "NHWC".
    seed, shuffle, shuffle_buffer: the order is decided by the seed and the
        epoch only (not by thread counts); shuffle=False reads in order.
    rank, world_size: default from torch.distributed when initialised, else
        RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS. Every
        rank gets the same number of steps; remainder="drop" leaves out the
        samples beyond full batches (different ones every epoch), "pad"
        repeats some instead.
    threads, readers, prefetch, memory_limit: decode threads (0: one per
        core), reader threads, batches prepared ahead, the most the pipeline
        may hold (bytes or "1GiB"; checked before starting).
    on_error: "skip" replaces a damaged sample by another of its batch and
        reports it in stats(); "fail" raises. It applies to damaged bytes
        only: a store that cannot deliver a sample is never a damaged one.
    retry_deadline: aquifer:// only: seconds a read keeps failing over to
        the cluster's other nodes (and waiting for one to come back) before
        the loader raises ConnectionError naming the nodes tried (default
        60, or AQUIFER_RETRY_DEADLINE).
    framework: "torch" (tensors) or "numpy" (arrays). device: "cpu" or a
        CUDA device, where batches are copied asynchronously from pinned
        memory on a side stream.
    ids: also yield each sample's id (a numpy array): its place in the
        dataset's catalog (files in name order, records in file order).
    credentials, profile: keys for aquifer:// (else found as the AWS tools
        find them).

    len(loader) is the number of steps per epoch. Iterating yields (images,
    labels) for one epoch, then advances the epoch; set_epoch(e) picks one
    explicitly (as DistributedSampler.set_epoch). state_dict() /
    load_state_dict() resume mid-epoch with exactly the batches an
    uninterrupted run would have delivered. A batch stays valid for as long
    as it is referenced: its buffer is not reused before.
    """

    def __init__(self, data, batch_size=256, image_size=224, *, training=True, eval_resize=256,
                 crop_scale=(0.08, 1.0), crop_ratio=(3 / 4, 4 / 3), jitter=None, bbox_crop=False,
                 dtype="float32", layout="NCHW", mean=(0.485, 0.456, 0.406), std=(0.229, 0.224, 0.225),
                 seed=1, shuffle=True, shuffle_buffer=10000, rank=None, world_size=None, remainder="drop",
                 threads=0, readers=1, prefetch=2, memory_limit="2GiB", on_error="skip", format="auto",
                 labels_zero_based=True, damage_check=True, framework="torch", device="cpu", ids=False,
                 credentials=None, profile=None, retry_deadline=None):
        dtype = _DTYPES.get(_torch_dtype_name(dtype))
        if dtype is None:
            raise ValueError("dtype must be float32, float16 or uint8")
        if framework not in ("torch", "numpy"):
            raise ValueError("framework must be 'torch' or 'numpy'")
        if rank is None and world_size is None:
            rank, world_size = _distributed_rank()
        self._options = dict(
            data=os.fspath(data) if not str(data).startswith("aquifer://") else str(data), batch_size=batch_size,
            image_size=image_size, training=training, eval_resize=eval_resize, crop_scale=tuple(crop_scale),
            crop_ratio=tuple(crop_ratio), jitter=tuple(jitter) if jitter else None, bbox_crop=bbox_crop,
            dtype=dtype, layout=layout.upper(), mean=tuple(mean), std=tuple(std), seed=seed, shuffle=shuffle,
            shuffle_buffer=shuffle_buffer if shuffle else 1, rank=rank, world_size=world_size,
            remainder=remainder, threads=threads, readers=readers, prefetch=prefetch, memory_limit=memory_limit,
            on_error=on_error, format=format, labels_zero_based=labels_zero_based, damage_check=damage_check,
            credentials=credentials, profile=profile, retry_deadline=retry_deadline)
        self.framework = framework
        self.device = str(device)
        self.ids = bool(ids)
        self.epoch = 0
        self._step = 0  # batches of self.epoch already delivered
        self._source = None  # the running epoch's pipeline
        self._last_stats = None
        # The first epoch's pipeline, started now: it checks every option and
        # reads the catalog once (later epochs reuse it), and says how many
        # steps an epoch has before any batch is asked for.
        self._pending = self._open(self.epoch, 0)
        self._catalog = self._pending.catalog()
        self._steps = self._pending.steps_per_epoch
        self.rank = self._pending.rank
        self.world_size = self._pending.world_size
        self._cuda = None
        if self.framework == "torch":
            import torch
            self._torch = torch
            if self.device.startswith("cuda"):
                self._cuda = _CudaCopier(torch, torch.device(self.device))
        elif self.device != "cpu":
            raise ValueError("device applies to framework='torch' only")

    def _open(self, epoch, start_step):
        opts = dict(self._options, first_epoch=epoch, start_step=start_step)
        if getattr(self, "_catalog", None) is not None:
            opts["catalog"] = self._catalog
        return _aquifer.Source(**opts)

    def __len__(self):
        return self._steps

    def set_epoch(self, epoch):
        """Start epoch `epoch` at its first batch on the next iteration."""
        if epoch != self.epoch or self._step != 0:
            self._close_pending()
        self.epoch = int(epoch)
        self._step = 0

    def state_dict(self):
        """Where the loader stands: resume with load_state_dict() on a loader
        built with the same arguments."""
        return {"epoch": self.epoch, "step": self._step, "seed": self._options["seed"],
                "batch_size": self._options["batch_size"], "rank": self.rank, "world_size": self.world_size,
                "steps_per_epoch": self._steps}

    def load_state_dict(self, state):
        for key in ("seed", "batch_size", "world_size", "steps_per_epoch"):
            if key in state and state[key] != self.state_dict()[key]:
                raise ValueError(f"the saved loader had {key}={state[key]}, this one has {self.state_dict()[key]}: "
                                 "its batches could not be reproduced")
        self._close_pending()
        self.epoch = int(state["epoch"])
        self._step = int(state["step"])
        if self._step >= self._steps:  # saved after the last batch of its epoch
            self.epoch += 1
            self._step = 0

    def stats(self):
        """The running (or last) epoch's pipeline statistics: images/s, each
        stage's utilisation, the limiting stage, bad samples with where."""
        if self._source is not None:
            return self._source.stats()
        return self._last_stats

    def __iter__(self):
        if self._step >= self._steps:  # the last pass stopped after the epoch's last batch
            self._close_pending()
            self.epoch += 1
            self._step = 0
        source = self._pending if self._pending is not None else self._open(self.epoch, self._step)
        self._pending = None
        self._source = source
        try:
            while True:
                batch = source.next()
                if batch is None:
                    break
                self._step += 1
                yield self._wrap(batch)
            self.epoch += 1
            self._step = 0
        finally:
            self._last_stats = source.stats()
            source.close()
            if self._source is source:
                self._source = None

    def epochs(self, count=None):
        """Batches of `count` epochs one after the other (None: without end),
        from the current epoch on."""
        done = 0
        while count is None or done < count:
            yield from self
            done += 1

    def close(self):
        """Stop the pipeline's threads now; batches handed out stay valid."""
        self._close_pending()
        if self._source is not None:
            self._source.close()

    def _close_pending(self):
        if self._pending is not None:
            self._pending.close()
            self._pending = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def _wrap(self, batch):
        images, labels, info = batch
        if self.framework == "torch":
            torch = self._torch
            images = torch.from_numpy(images)  # shares the buffer (and keeps it alive)
            labels = torch.from_numpy(labels)
            if self._cuda is not None:
                images, labels = self._cuda.copy(images, labels)
        return (images, labels, info["samples"]) if self.ids else (images, labels)


class _CudaCopier:
    """Host-to-GPU copies on a side stream: each batch is staged in pinned
    memory (a small ring, so a staging buffer is reused only after its copy
    finished) and copied asynchronously; the caller's stream waits for it."""

    def __init__(self, torch, device, depth=2):
        self.torch = torch
        self.device = device
        self.stream = torch.cuda.Stream(device=device)
        self.depth = depth
        self.staging = collections.deque()  # (pinned images, pinned labels, event)

    def copy(self, images, labels):
        torch = self.torch
        if len(self.staging) >= self.depth:
            old = self.staging.popleft()
            old[2].synchronize()
        pin_images = torch.empty(images.shape, dtype=images.dtype, pin_memory=True)
        pin_labels = torch.empty(labels.shape, dtype=labels.dtype, pin_memory=True)
        pin_images.copy_(images)
        pin_labels.copy_(labels)
        with torch.cuda.stream(self.stream):
            gpu_images = pin_images.to(self.device, non_blocking=True)
            gpu_labels = pin_labels.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        gpu_images.record_stream(torch.cuda.current_stream(self.device))
        gpu_labels.record_stream(torch.cuda.current_stream(self.device))
        self.staging.append((pin_images, pin_labels, event))
        return gpu_images, gpu_labels
