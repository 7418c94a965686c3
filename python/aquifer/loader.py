"""aquifer.Loader: the input pipeline as a PyTorch-style iterable.

Each pass over the loader is one epoch of the C++ pipeline (one
aquifer._aquifer.Source); the loader only keeps count of epochs and steps,
wraps batches as tensors and, for device="cuda", copies them to the GPU.
Planning, reading, decoding and augmentation all happen in C++.

Epochs follow each other without a gap. A pipeline runs several short
epochs one after the other (up to 16, about 64k samples), reading into the
next epoch while the last batches of one are consumed; near the end of its
last epoch the next pipeline is opened on a background thread and starts
reading and decoding. Plans are a function of seed and epoch, so none of
this changes a sample or its order. The catalog, the record of which files
were already checked for damage and the batch buffers pass from one
pipeline to the next.
"""
import collections
import os
import queue
import threading
import time

from . import _aquifer

_DTYPES = {"uint8": "uint8", "u8": "uint8", "float16": "float16", "fp16": "float16", "half": "float16",
           "float32": "float32", "fp32": "float32", "float": "float32"}


def _prom_escape(value):
    """A Prometheus label value: backslash, quote and newline escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


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


class _Opening:
    """A _Run being opened on a background thread (pybind11 releases the
    GIL while the pipeline starts): the next pipeline's, while the last
    epoch of the running one ends."""

    def __init__(self, open_source, epoch):
        self.epoch = epoch
        self._source = None
        self._error = None
        # Not a daemon: the interpreter waits for it at exit instead of
        # finalising under a pipeline that is starting.
        self._thread = threading.Thread(target=self._run, args=(open_source,), name="aquifer-next-epoch")
        self._thread.start()

    def _run(self, open_source):
        try:
            self._source = open_source()
        except BaseException as e:  # noqa: BLE001  (raised in the consumer's thread by result())
            self._error = e

    def result(self):
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._source

    def close(self):
        self._thread.join()
        if self._source is not None:
            self._source.source.close()
            self._source = None


class _Run:
    """A Source over epochs [first, last]; (epoch, step): its next batch."""

    def __init__(self, source, epoch, step, count):
        self.source = source
        self.epoch, self.step, self.last = epoch, step, epoch + count - 1


class Loader:
    """Batches of decoded, augmented images and their labels.

    data: TFRecord shards, .rec files, WebDataset .tar shards or an image folder (a directory or one
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

    Every option's default is the pipeline's own, declared once in C++ for
    the CLI, the C++ API and this binding: aquifer.option_docs() lists them
    with their help.
    rank, world_size: default from torch.distributed when initialised, else
        RANK/WORLD_SIZE, OMPI_COMM_WORLD_*, SLURM_PROCID/SLURM_NTASKS. Every
        rank gets the same number of steps; remainder="drop" leaves out the
        samples beyond full batches (different ones every epoch), "pad"
        repeats some instead.
    threads, readers, prefetch, memory_limit: decode threads (0: one per
        core), reader threads, batches prepared ahead, the most the pipeline
        may hold (bytes or "2GiB"; checked before starting).
    plan_ahead: over aquifer://, this many reads ahead of the readers are
        sent to the nodes in the epoch's order, so they stage the files from
        slow (hdd) pools while earlier ones are decoded (0: off).
    on_error: "skip" replaces a damaged sample by another of its batch and
        reports it in stats(); "fail" raises. It applies to damaged bytes
        only: a store that cannot deliver a sample is never a damaged one.
    labels_zero_based: TFRecord's 1-based ImageNet labels become 0-based; a
        TFRecord whose labels start at 0 stops the loader with a message
        (pass False for it).
    wds_image, wds_label: a WebDataset sample's image and label members, by
        their whole extension after the key as the webdataset library names
        them: the first of wds_image's extensions the sample has is its
        image ("jpg;png", "v2.jpg"); wds_label is "cls", "v2.cls",
        "json:PATH" (a field of KEY.json) or "none". A sample without its
        label is a bad sample, not label -1.
    retry_deadline: aquifer:// only: seconds a read keeps failing over to
        the cluster's other nodes (and waiting for one to come back) before
        the loader raises ConnectionError naming the nodes tried (default
        60, or AQUIFER_RETRY_DEADLINE).
    framework: "torch" (tensors) or "numpy" (arrays). device: "cpu" or a
        CUDA device, where batches are copied asynchronously from pinned
        memory on a side stream.
    decode: "cpu" (the pipeline's threads decode and crop) or "gpu" (with a
        CUDA device): the pipeline reads, checks damage and chooses each
        crop and flip; JPEGs are decoded on the device in one batched call
        (torchvision.io.decode_jpeg, nvJPEG), then cropped, resized
        (bilinear, antialiased), flipped and normalised there. JPEGs the
        GPU decoder does not take (progressive, CMYK) and other formats are
        decoded on the CPU as before. Colour jitter is refused with it.
    ids: also yield each sample's id (a numpy array): its place in the
        dataset's catalog (files in name order, records in file order).
    fields: names of extra fields to deliver with each sample: tf.Example
        feature keys ("image/object/bbox/xmin": a float32 array; bytes
        features as lists of bytes) or WebDataset member extensions ("json",
        "txt": the member's bytes); None where a sample has no such field.
        Implies extras.
    hooks: {field: function} for fields the C++ side does not decode (e.g.
        {"json": json.loads}): applied to each sample's field on the
        loader's own thread while the consumer works on earlier batches,
        yielding the GIL between samples; stats() reports their time
        ("hook_seconds", "hook_samples").
    extras: yield (images, labels, extras) where extras is a dict: "ids",
        "crops" (float32 [B, 4]: the x0, y0, x1, y1 of each output's crop as
        fractions of its source image), "flips" (bool [B]: flipped
        horizontally), and "fields" (a dict per sample) when fields are asked
        for. aquifer.transforms.follow_crop() moves boxes the same way.
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
                 seed=1, shuffle=True, shuffle_buffer=1024, rank=None, world_size=None, remainder="drop",
                 threads=0, readers=1, plan_ahead=1024, prefetch=2, memory_limit="2GiB", on_error="skip", format="auto",
                 labels_zero_based=True, allow_empty_classes=False, wds_image="jpg;jpeg;png;ppm;pgm;pnm;bmp;gif;webp",
                 wds_label="cls;cls2;class;label", damage_check=True, use_manifest=True, framework="torch", device="cpu", decode="cpu",
                 ids=False, fields=None, extras=False, hooks=None, credentials=None, profile=None, retry_deadline=None):
        dtype = _DTYPES.get(_torch_dtype_name(dtype))
        if dtype is None:
            raise ValueError("dtype must be float32, float16 or uint8")
        if framework not in ("torch", "numpy"):
            raise ValueError("framework must be 'torch' or 'numpy'")
        if decode not in ("cpu", "gpu"):
            raise ValueError("decode must be 'cpu' or 'gpu'")
        if decode == "gpu" and (framework != "torch" or not str(device).startswith("cuda")):
            raise ValueError("decode='gpu' needs framework='torch' and a CUDA device (device='cuda')")
        if decode == "gpu" and jitter:
            raise ValueError("decode='gpu': colour jitter is applied where images are decoded, on the CPU only")
        if rank is None and world_size is None:
            rank, world_size = _distributed_rank()
        self._options = dict(
            data=os.fspath(data) if not str(data).startswith("aquifer://") else str(data), batch_size=batch_size,
            image_size=image_size, training=training, eval_resize=eval_resize, crop_scale=tuple(crop_scale),
            crop_ratio=tuple(crop_ratio), jitter=tuple(jitter) if jitter else None, bbox_crop=bbox_crop,
            dtype=dtype, layout=layout.upper(), mean=tuple(mean), std=tuple(std), seed=seed, shuffle=shuffle,
            shuffle_buffer=shuffle_buffer if shuffle else 1, rank=rank, world_size=world_size,
            remainder=remainder, threads=threads, readers=readers, plan_ahead=plan_ahead, prefetch=prefetch, memory_limit=memory_limit,
            on_error=on_error, format=format, labels_zero_based=labels_zero_based,
            allow_empty_classes=allow_empty_classes, wds_image=wds_image,
            wds_label=wds_label, damage_check=damage_check,
            use_manifest=use_manifest, encoded_images=decode == "gpu",
            credentials=credentials, profile=profile, retry_deadline=retry_deadline,
            fields=list(fields) if fields else None)
        self.framework = framework
        self.device = str(device)
        self.ids = bool(ids)
        self.extras = bool(extras) or bool(fields)
        self._hooks = dict(hooks or {})
        for name, fn in self._hooks.items():
            if not callable(fn):
                raise ValueError(f"hooks: the hook for {name!r} is not callable")
            if name not in (fields or ()):
                raise ValueError(f"hooks: {name!r} is not one of fields={list(fields or ())}")
        self._hook_seconds = 0.0
        self._hook_samples = 0
        self.epoch = 0
        self._step = 0  # batches of self.epoch already delivered
        self._source = None  # the running epoch's pipeline
        self._run = None  # the running pipeline (_Run)
        self._next = None  # an _Opening of the next pipeline, near the end of the running one's epochs
        self._last_epoch = None  # epochs(count): the last epoch asked for (no read-ahead beyond it)
        self._last_stats = None
        # The first epoch's pipeline, started now: it checks every option and
        # reads the catalog once (later epochs reuse it), and says how many
        # steps an epoch has before any batch is asked for.
        first = self._open(self.epoch, 0)
        self._run = _Run(first, self.epoch, 0, 1)
        self._catalog = first.catalog()
        self._steps = first.steps_per_epoch
        self.rank = first.rank
        self.world_size = first.world_size
        self._cuda = None
        if self.framework == "torch":
            import torch
            self._torch = torch
            if decode == "gpu":
                self._cuda = _JpegDecoder(torch, torch.device(self.device), self._options)
            elif self.device.startswith("cuda"):
                self._cuda = _CudaCopier(torch, torch.device(self.device))
        elif self.device != "cpu":
            raise ValueError("device applies to framework='torch' only")

    def _open(self, epoch, start_step, count=1):
        opts = dict(self._options, first_epoch=epoch, start_step=start_step, epochs=count)
        if getattr(self, "_catalog", None) is not None:
            opts["catalog"] = self._catalog
        return _aquifer.Source(**opts)

    def _epochs_per_run(self, epoch):
        """Epochs one pipeline runs from `epoch`: many when epochs are short
        (its plans and bookkeeping grow with samples x epochs), never past
        the last epoch epochs(count) asked for."""
        count = max(1, min(16, 65536 // max(1, self._steps * self._options["batch_size"])))
        if self._last_epoch is not None:
            count = max(1, min(count, self._last_epoch - epoch + 1))
        return count

    def _open_run(self, epoch, step, count):
        return _Run(self._open(epoch, step, count), epoch, step, count)

    def __len__(self):
        return self._steps

    def set_epoch(self, epoch):
        """Start epoch `epoch` at its first batch on the next iteration."""
        if self._run is not None and (self._run.epoch, self._run.step) != (epoch, 0):
            self._close_run()
        if self._next is not None and self._next.epoch != epoch:
            self._close_next()
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
        self._close_run()
        self._close_next()
        self.epoch = int(state["epoch"])
        self._step = int(state["step"])
        if self._step >= self._steps:  # saved after the last batch of its epoch
            self.epoch += 1
            self._step = 0

    def stats(self):
        """The running (or last) epoch's pipeline statistics: images/s, each
        stage's utilisation, the limiting stage, bad samples with where."""
        s = self._source.stats() if self._source is not None else self._last_stats
        if s is not None and self._hooks:
            s = dict(s, hook_seconds=self._hook_seconds, hook_samples=self._hook_samples)
        return s

    def prometheus(self):
        """stats() as Prometheus text (format 0.0.4), for a training job's own
        /metrics endpoint (prometheus_client's, a web framework's): gauges
        of the running epoch so far, each labelled with this loader's rank.
        A new epoch starts its counts again, so they are gauges, not
        counters: graph them as they are, not with rate()."""
        s = self.stats() or {}
        rank = str(self.rank)
        out = []

        def family(name, help_text, samples):
            out.append(f"# HELP {name} {help_text}")
            out.append(f"# TYPE {name} gauge")
            for labels, value in samples:
                text = ",".join(f'{k}="{_prom_escape(v)}"' for k, v in (("rank", rank),) + tuple(labels))
                out.append(f"{name}{{{text}}} {float(value)!r}")

        def one(name, help_text, key):
            family(name, help_text, [((), s.get(key, 0) or 0)])

        family("aquifer_loader_epoch", "The epoch the loader is in", [((), self.epoch)])
        family("aquifer_loader_steps_per_epoch", "Batches per epoch on this rank", [((), self._steps)])
        one("aquifer_loader_epoch_batches", "Batches delivered in this epoch so far", "batches")
        one("aquifer_loader_epoch_images", "Images delivered in this epoch so far", "images")
        one("aquifer_loader_epoch_read_bytes", "Bytes read from the data in this epoch so far", "bytes_read")
        one("aquifer_loader_epoch_bad_samples", "Damaged samples replaced (or raised) in this epoch so far",
            "bad_samples")
        one("aquifer_loader_images_per_second", "Images per second delivered in this epoch", "images_per_second")
        one("aquifer_loader_epoch_seconds", "Seconds since this epoch's pipeline started", "elapsed_seconds")
        one("aquifer_loader_consumer_wait_seconds", "Seconds the training loop waited for a batch in this epoch",
            "consumer_wait_seconds")
        one("aquifer_loader_memory_bound_bytes", "The most memory the pipeline may hold", "memory_bound_bytes")
        one("aquifer_loader_batch_buffer_bytes", "Batch buffers allocated, the loop's held batches included",
            "batch_buffer_bytes")
        one("aquifer_loader_payload_bytes", "Records read and not yet decoded", "payload_bytes")
        one("aquifer_loader_payload_pool_bytes", "Storage made for records in flight, kept for the next epochs",
            "payload_pool_bytes")
        one("aquifer_loader_epoch_planned_reads", "Reads sent ahead to the store as a read plan in this epoch",
            "planned")
        one("aquifer_loader_epoch_plan_staged_reads", "Planned reads the store took up for staging in this epoch",
            "plan_staged")
        stages = s.get("stages", [])
        family("aquifer_loader_stage_utilisation_ratio", "Busy time of each stage's threads over the epoch's time",
               [((("stage", st["name"]),), st["utilisation"]) for st in stages])
        family("aquifer_loader_stage_threads", "Threads of each stage", [((("stage", st["name"]),), st["threads"])
                                                                          for st in stages])
        family("aquifer_loader_limiting_stage", "1 for the stage that limits the pipeline's speed",
               [((("stage", st["name"]),), 1 if st["name"] == s.get("limiting_stage") else 0) for st in stages])
        return "\n".join(out) + "\n"

    def _hooked(self, run, count, pulled):
        """`count` batches of run.source with the hooks applied to their
        fields, prepared on a helper thread (at most `prefetch` ahead);
        pulled[0] counts the batches taken from the source."""
        q = queue.Queue(maxsize=max(1, self._options["prefetch"]))
        stop = threading.Event()

        def work():
            try:
                for _ in range(count):
                    if stop.is_set():
                        return
                    batch = run.source.next()
                    pulled[0] += 1
                    if batch is not None:
                        for sample in batch[2].get("fields", ()):
                            t0 = time.perf_counter()
                            for name, fn in self._hooks.items():
                                if sample.get(name) is not None:
                                    sample[name] = fn(sample[name])
                            self._hook_seconds += time.perf_counter() - t0
                            self._hook_samples += 1
                            time.sleep(0)  # the GIL goes to the consumer between samples
                    while not stop.is_set():
                        try:
                            q.put((None, batch), timeout=0.1)
                            break
                        except queue.Full:
                            continue
                    if batch is None:
                        return
            except BaseException as e:  # noqa: BLE001  (raised in the consumer's thread)
                q.put((e, None))

        thread = threading.Thread(target=work, name="aquifer-hooks")
        thread.start()
        try:
            for _ in range(count):
                error, batch = q.get()
                if error is not None:
                    raise error
                yield batch
        finally:
            stop.set()
            thread.join()

    def __iter__(self):
        if self._step >= self._steps:  # the last pass stopped after the epoch's last batch
            self.epoch += 1
            self._step = 0
        run = self._run
        if run is None or (run.epoch, run.step) != (self.epoch, self._step):
            self._close_run()
            if self._next is not None and self._next.epoch == self.epoch and self._step == 0:
                run = self._next.result()
                self._next = None
            else:
                self._close_next()
                run = self._open_run(self.epoch, self._step, self._epochs_per_run(self.epoch))
            self._run = run
        self._source = run.source
        # The next pipeline starts this many batches before its first epoch:
        # once the running one has taken the buffer of its last batch, so
        # the two hold no more buffers together than the memory bound counts.
        lead = max(1, self._options["prefetch"])
        pulled = [0]
        hooked = self._hooks and self._hooked(run, self._steps - self._step, pulled)
        consumed = 0
        try:
            while self._step < self._steps:
                if (self._next is None and self.epoch == run.last and self._step + lead >= self._steps
                        and (self._last_epoch is None or self.epoch < self._last_epoch)):
                    e = self.epoch + 1
                    count = self._epochs_per_run(e)
                    self._next = _Opening(lambda e=e, count=count: self._open_run(e, 0, count), e)
                batch = next(hooked) if hooked else run.source.next()
                consumed += 1
                if batch is None or batch[2]["epoch"] != self.epoch or batch[2]["step"] != self._step:
                    got = "nothing" if batch is None else f"epoch {batch[2]['epoch']} step {batch[2]['step']}"
                    raise RuntimeError(f"aquifer: expected epoch {self.epoch} step {self._step} from the pipeline, "
                                       f"got {got}")
                self._step += 1
                run.step += 1
                if run.step == self._steps:
                    run.epoch += 1
                    run.step = 0
                yield self._wrap(batch)
                batch = None  # the consumer holds it, or nobody does: not this frame while the next one is awaited
            self.epoch += 1
            self._step = 0
        finally:
            if hooked:
                hooked.close()
            self._last_stats = run.source.stats()
            if hooked and pulled[0] > consumed and self._run is run:
                # The helper took batches nobody saw: the pipeline is ahead
                # of the loader's position, so it cannot go on.
                self._close_run()
            elif run.epoch > run.last and self._run is run:  # its epochs are done
                self._run = None
                self._source = None
                if self._next is not None:
                    # The next pipeline is already running: join this one's
                    # threads off the consumer's path.
                    threading.Thread(target=run.source.close, name="aquifer-close").start()  # joined at exit
                else:
                    run.source.close()

    def epochs(self, count=None):
        """Batches of `count` epochs one after the other (None: without end),
        from the current epoch on."""
        done = 0
        start = self.epoch if self._step < self._steps else self.epoch + 1
        self._last_epoch = None if count is None else start + count - 1
        try:
            while count is None or done < count:
                yield from self
                done += 1
        finally:
            self._last_epoch = None

    def close(self):
        """Stop the pipeline's threads now; batches handed out stay valid."""
        if isinstance(getattr(self, "_cuda", None), _CudaCopier):
            self._cuda.release()
        self._close_run()
        self._close_next()

    def _close_next(self):
        if self._next is not None:
            self._next.close()
            self._next = None

    def _close_run(self):
        if self._run is not None:
            self._run.source.close()
            self._run = None
        self._source = None

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
            if isinstance(self._cuda, _JpegDecoder):
                images, labels = self._cuda.decode(images, labels, info)
            elif self._cuda is not None:
                images, labels = self._cuda.copy(images, labels)
        if self.extras:
            extra = {"ids": info["samples"], "crops": info["crops"], "flips": info["flips"]}
            if "fields" in info:
                extra["fields"] = info["fields"]
            return images, labels, extra
        return (images, labels, info["samples"]) if self.ids else (images, labels)


def _clear_cuda_error():
    """Resets the CUDA runtime's last error after a call that failed and was
    handled (torch checks it after each kernel launch and would blame the
    kernel): cudaGetLastError from the runtime torch loaded."""
    import ctypes
    try:
        with open("/proc/self/maps") as fh:
            path = next(line.split()[-1] for line in fh if "libcudart.so" in line)
        ctypes.CDLL(path).cudaGetLastError()
    except (OSError, StopIteration, AttributeError):
        pass


class _CudaCopier:
    """Host-to-GPU copies on a side stream, the caller's stream waiting for
    them. The pipeline's batch buffers are page-locked where they are
    (cudaHostRegister, once per buffer: the pipelines of a loader reuse
    them), so a batch is copied by DMA straight from the buffer it was
    decoded into, with no copy on the CPU; a buffer is held until its copy
    is done. Where registering fails, a batch is staged in pinned memory
    first (a small ring, reused once its copy finished)."""

    def __init__(self, torch, device, depth=2):
        self.torch = torch
        self.device = device
        self.stream = torch.cuda.Stream(device=device)
        self.depth = depth
        self.inflight = collections.deque()  # (host tensors kept alive, event)
        self.registered = {}  # host address -> bytes page-locked there
        self.refused = set()  # addresses CUDA would not register: staged instead
        self.cudart = torch.cuda.cudart()

    def _register(self, t):
        """Page-locks t's memory where it is; False if CUDA refuses."""
        ptr, size = t.data_ptr(), t.numel() * t.element_size()
        if self.registered.get(ptr, -1) >= size:
            return True
        if ptr in self.refused:
            return False
        ok = self.cudart.cudaError.success
        if ptr in self.registered:
            self.cudart.cudaHostUnregister(ptr)
            del self.registered[ptr]
        if self.cudart.cudaHostRegister(ptr, size, 0) != ok:
            # Memory freed while registered and allocated again at the same
            # address is still registered (for the old size): start over.
            _clear_cuda_error()
            self.cudart.cudaHostUnregister(ptr)
            _clear_cuda_error()
            if self.cudart.cudaHostRegister(ptr, size, 0) != ok:
                _clear_cuda_error()
                self.refused.add(ptr)
                return False
        self.registered[ptr] = size
        return True

    def release(self):
        """Waits for the copies in flight and unregisters every buffer
        (before the pipeline frees them)."""
        while self.inflight:
            self.inflight.popleft()[1].synchronize()
        for ptr in self.registered:
            self.cudart.cudaHostUnregister(ptr)
        self.registered.clear()

    def copy(self, images, labels):
        torch = self.torch
        while self.inflight and self.inflight[0][1].query():
            self.inflight.popleft()
        if len(self.inflight) >= self.depth:
            self.inflight.popleft()[1].synchronize()
        if not (images.is_contiguous() and self._register(images)):
            staged = torch.empty(images.shape, dtype=images.dtype, pin_memory=True)
            staged.copy_(images)
            images = staged
        pin_labels = torch.empty(labels.shape, dtype=labels.dtype, pin_memory=True)
        pin_labels.copy_(labels)
        with torch.cuda.stream(self.stream):
            gpu_images = images.to(self.device, non_blocking=True)
            gpu_labels = pin_labels.to(self.device, non_blocking=True)
            event = torch.cuda.Event()
            event.record(self.stream)
        torch.cuda.current_stream(self.device).wait_stream(self.stream)
        gpu_images.record_stream(torch.cuda.current_stream(self.device))
        gpu_labels.record_stream(torch.cuda.current_stream(self.device))
        self.inflight.append(((images, pin_labels), event))
        return gpu_images, gpu_labels


class _JpegDecoder:
    """decode="gpu": a batch's JPEGs decoded on the device in one call
    (torchvision.io.decode_jpeg: nvJPEG's batched decoder on CUDA), each
    resampled from the crop box the pipeline chose to the output size
    (torchvision.ops.roi_align: bilinear samples averaged over each output
    pixel's footprint, an area filter like the CPU path's), flipped as it
    chose, normalised and stored in the batch's dtype and layout. Samples
    the pipeline decoded itself (no JPEG bytes delivered) are taken from its
    batch. Works on any device torchvision decodes on (the CPU in tests)."""

    def __init__(self, torch, device, options):
        import torchvision
        from torchvision.io import ImageReadMode, decode_jpeg
        from torchvision.ops import roi_align
        self.torch, self.device = torch, device
        self.decode_jpeg, self.rgb, self.roi_align = decode_jpeg, ImageReadMode.RGB, roi_align
        # A list in one call (nvJPEG's batched decode) from torchvision 0.19.
        major, minor = (int(x) for x in torchvision.__version__.split(".")[:2])
        self.batched = (major, minor) >= (0, 19)
        self.work = torch.float16 if device.type == "cuda" else torch.float32  # 0..255 exact in both
        self.size = int(options["image_size"])
        self.dtype = {"float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}[options["dtype"]]
        self.nhwc = options["layout"] == "NHWC"
        self.mean = torch.tensor([m * 255 for m in options["mean"]], device=device).view(1, 3, 1, 1)
        self.std = torch.tensor([v * 255 for v in options["std"]], device=device).view(1, 3, 1, 1)

    def decode(self, images, labels, info):
        """(images, labels) on the device from a batch of the pipeline's
        (its images and labels as tensors or arrays, its info)."""
        torch, n = self.torch, self.size
        images, labels = torch.as_tensor(images), torch.as_tensor(labels)
        data, offsets = info["encoded"]
        offsets = offsets.tolist()
        b = len(offsets) - 1
        on_gpu = [i for i in range(b) if offsets[i + 1] > offsets[i]]
        on_cpu = [i for i in range(b) if offsets[i + 1] == offsets[i]]
        flat = torch.from_numpy(data)
        jpegs = [flat[offsets[i]:offsets[i + 1]] for i in on_gpu]
        if not jpegs:
            decoded = []
        elif self.batched:
            decoded = self.decode_jpeg(jpegs, mode=self.rgb, device=self.device)
        else:
            decoded = [self.decode_jpeg(j, mode=self.rgb, device=str(self.device)) for j in jpegs]
        # Each crop box in its image's pixels (roi_align's rows: image index
        # in the call, x0, y0, x1, y1), moved to the device in one copy.
        boxes = torch.zeros((len(decoded), 5))
        if decoded:
            wh = torch.tensor([img.shape[-1:-3:-1] for img in decoded], dtype=torch.float32).repeat(1, 2)
            boxes[:, 1:] = torch.from_numpy(info["crops"][on_gpu]) * wh
        boxes = boxes.to(self.device, self.work)
        parts = [self.roi_align(img[None].to(self.work), boxes[k:k + 1], (n, n), 1.0, -1, True)
                 for k, img in enumerate(decoded)]
        out = torch.empty((b, 3, n, n), dtype=self.work, device=self.device)
        if parts:
            sel = torch.tensor(on_gpu, device=self.device)
            flips = torch.from_numpy(info["flips"][on_gpu]).to(self.device).view(-1, 1, 1, 1)
            got = torch.cat(parts)
            out[sel] = torch.where(flips, got.flip(-1), got)
        if self.dtype == torch.uint8:
            out = out.round_().clamp_(0, 255).to(torch.uint8)
        else:
            out = ((out.float() - self.mean) / self.std).to(self.dtype)
        if self.nhwc:
            out = out.permute(0, 2, 3, 1).contiguous()
        if on_cpu:  # decoded by the pipeline: already in the batch's form
            index = torch.tensor(on_cpu)
            out[index.to(self.device)] = images[index].to(self.device)
        return out, labels.to(self.device)
