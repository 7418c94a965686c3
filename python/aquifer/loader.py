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
import contextlib
import os
import queue
import threading
import time
import warnings

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

    def _ahead(self, run, count, pulled):
        """`count` batches of run.source prepared on helper threads, each
        stage at most a few batches ahead of the next: the hooks applied to
        the fields (with the batch's reading), then, for decode="gpu", the
        batch's JPEGs decoded on the GPU and its crops resampled, as two
        stages of their own so that nvJPEG decodes one batch while the one
        before it is resampled. pulled[0] counts the batches taken from the
        source. Yields batches, their GPU work (if any) in info["_gpu"]."""
        decoder = self._cuda if isinstance(self._cuda, _JpegDecoder) else None
        depth = max(1, self._options["prefetch"])
        stop = threading.Event()
        queues = [queue.Queue(maxsize=1 if decoder else depth)]

        def put(q, item):
            while not stop.is_set():
                try:
                    q.put(item, timeout=0.1)
                    return True
                except queue.Full:
                    continue
            return False

        def read():
            try:
                for _ in range(count):
                    if stop.is_set():
                        return
                    batch = run.source.next()
                    pulled[0] += 1
                    if batch is not None and self._hooks:
                        for sample in batch[2].get("fields", ()):
                            t0 = time.perf_counter()
                            for name, fn in self._hooks.items():
                                if sample.get(name) is not None:
                                    sample[name] = fn(sample[name])
                            self._hook_seconds += time.perf_counter() - t0
                            self._hook_samples += 1
                            time.sleep(0)  # the GIL goes to the consumer between samples
                    if not put(queues[0], (None, batch)) or batch is None:
                        return
            except BaseException as e:  # noqa: BLE001  (raised in the consumer's thread)
                put(queues[0], (e, None))

        def stage(fn, inbox, outbox):
            def work():
                while not stop.is_set():
                    try:
                        error, batch = inbox.get(timeout=0.1)
                    except queue.Empty:
                        continue
                    if error is None and batch is not None:
                        try:
                            batch = fn(batch)
                        except BaseException as e:  # noqa: BLE001
                            error, batch = e, None
                    if not put(outbox, (error, batch)) or error is not None or batch is None:
                        return
            return work

        workers = [threading.Thread(target=read, name="aquifer-hooks" if self._hooks else "aquifer-read")]
        if decoder:
            queues += [queue.Queue(maxsize=1), queue.Queue(maxsize=depth)]
            workers.append(threading.Thread(target=stage(decoder.start, queues[0], queues[1]), name="aquifer-nvjpeg"))
            workers.append(threading.Thread(target=stage(decoder.finish, queues[1], queues[2]),
                                            name="aquifer-resample"))
        for t in workers:
            t.start()
        try:
            for _ in range(count):
                error, batch = queues[-1].get()
                if error is not None:
                    raise error
                yield batch
        finally:
            stop.set()
            for t in workers:
                t.join()

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
        ahead = self._hooks or isinstance(self._cuda, _JpegDecoder)
        hooked = ahead and self._ahead(run, self._steps - self._step, pulled)
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
        if self.framework == "torch" and "_gpu" in info:  # decoded on the GPU by the helper threads
            images, labels = self._cuda.hand_over(info.pop("_gpu"))
        elif self.framework == "torch":
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
    (torchvision.io.decode_jpeg: nvJPEG's batched decoder on CUDA, its
    hardware engine where the GPU has one), then every crop resampled to the
    output size at once. The resampling is torchvision.ops.roi_align's
    (aligned, adaptive sampling: bilinear samples averaged over each output
    pixel's footprint, an area filter like the CPU path's) written as two
    matrix products per image, rows then columns, batched: the images are
    padded to one size, and each image's weights only reach its own pixels,
    clamped at its own edges as roi_align clamps them. A flip is the
    columns' weights reversed. So a batch costs a few kernels, not a few per
    image (a roi_align call per image spent half the step launching them).
    Samples the pipeline decoded itself (no JPEG bytes delivered) are taken
    from its batch. Works on any device torchvision decodes on (the CPU in
    tests)."""

    def __init__(self, torch, device, options):
        import torchvision
        from torchvision.io import ImageReadMode, decode_jpeg
        self.torch, self.device = torch, device
        self.decode_jpeg, self.rgb = decode_jpeg, ImageReadMode.RGB
        # A list in one call (nvJPEG's batched decode) from torchvision 0.19.
        major, minor = (int(x) for x in torchvision.__version__.split(".")[:2])
        self.batched = (major, minor) >= (0, 19)
        self.work = torch.float16 if device.type == "cuda" else torch.float32  # 0..255 exact in both
        self.size = int(options["image_size"])
        self.dtype = {"float32": torch.float32, "float16": torch.float16, "uint8": torch.uint8}[options["dtype"]]
        self.nhwc = options["layout"] == "NHWC"
        self.mean = torch.tensor([m * 255 for m in options["mean"]], device=device).view(1, 3, 1, 1)
        self.std = torch.tensor([v * 255 for v in options["std"]], device=device).view(1, 3, 1, 1)
        self.padding = None  # how images were padded to one size: "nested" (one kernel) or "copies"
        self.stream = torch.cuda.Stream(device=device) if device.type == "cuda" else None

    def _axis_weights(self, start, length, extent, longest):
        """[K, n, longest] float32: output position p of image k as weights
        on its pixels along one axis, roi_align's (aligned=True, sampling
        ratio -1) samples of the span [start, start + length) of an axis of
        `extent` pixels, each already divided by the samples per bin."""
        torch, n, dev = self.torch, self.size, self.device
        grid = torch.ceil(length / n).clamp_(min=1)  # samples per bin, per image
        most = int(grid.max())
        start, length, extent, grid = (t.to(dev, non_blocking=True) for t in (start, length, extent, grid))
        binw = (length / n)[:, None, None]
        p = torch.arange(n, dtype=torch.float32, device=dev)[None, :, None]
        i = torch.arange(most, dtype=torch.float32, device=dev)[None, None, :]
        g = grid[:, None, None]
        x = (start - 0.5)[:, None, None] + p * binw + (i + 0.5) * binw / g
        size = extent.to(torch.float32)[:, None, None]
        inside = (i < g) & (x >= -1.0) & (x <= size)
        x = x.clamp(min=0.0)
        low = torch.floor(x)
        edge = low >= size - 1
        low = torch.where(edge, size - 1, low)
        x = torch.where(edge, low, x)
        frac = x - low
        high = torch.where(edge, low, low + 1)
        scale = inside.to(torch.float32) / g
        weights = torch.zeros((len(start), n, longest), dtype=torch.float32, device=dev)
        weights.scatter_add_(2, low.long(), (1 - frac) * scale)
        weights.scatter_add_(2, high.long(), frac * scale)
        return weights

    def _pad(self, images):
        """The images ([3, h, w] uint8 each) as one [K, 3, H, W] tensor in
        the work dtype, zero beyond each image."""
        torch = self.torch
        if self.padding != "copies":
            try:
                with warnings.catch_warnings():  # "prototype stage" in older torch
                    warnings.simplefilter("ignore")
                    nested = torch.nested.as_nested_tensor(images).to(self.work)
                    padded = nested.to_padded_tensor(0.0)
                self.padding = "nested"
                return padded
            except (RuntimeError, NotImplementedError, AttributeError, TypeError):
                self.padding = "copies"  # this torch cannot: one copy per image from now on
        h = max(img.shape[1] for img in images)
        w = max(img.shape[2] for img in images)
        padded = torch.zeros((len(images), 3, h, w), dtype=self.work, device=self.device)
        for k, img in enumerate(images):
            padded[k, :, :img.shape[1], :img.shape[2]] = img
        return padded

    @staticmethod
    def _chunks(heights, widths):
        """Indices in groups whose padding to one size wastes at most half
        the memory (ordered by height, then width): a batch of photos of
        similar sizes is one group, a camera original among thumbnails is
        not padded to by all of them."""
        order = sorted(range(len(heights)), key=lambda k: (heights[k], widths[k]))
        chunks, cur, mh, mw, area = [], [], 0, 0, 0
        for k in order:
            nh, nw = max(mh, heights[k]), max(mw, widths[k])
            if cur and (len(cur) + 1) * nh * nw > 2 * (area + heights[k] * widths[k]):
                chunks.append(cur)
                cur, area, nh, nw = [], 0, heights[k], widths[k]
            cur.append(k)
            mh, mw = nh, nw
            area += heights[k] * widths[k]
        if cur:
            chunks.append(cur)
        return chunks

    def resample(self, images, crops, flips):
        """[K, 3, n, n] in the work dtype: image k's crop (x0, y0, x1, y1 as
        fractions of its width and height) resampled to n x n, flipped
        left-right where flips[k]."""
        torch, n = self.torch, self.size
        out = torch.empty((len(images), 3, n, n), dtype=self.work, device=self.device)
        heights = [int(img.shape[1]) for img in images]
        widths = [int(img.shape[2]) for img in images]
        crops = torch.as_tensor(crops, dtype=torch.float32)
        flips = torch.as_tensor(flips, dtype=torch.bool)
        chunks = self._chunks(heights, widths)
        if len(chunks) == 1:  # one group: in the batch's order, written as is
            chunks = [list(range(len(images)))]
        for chunk in chunks:
            idx = torch.tensor(chunk)
            h = torch.tensor([heights[k] for k in chunk], dtype=torch.float32)
            w = torch.tensor([widths[k] for k in chunk], dtype=torch.float32)
            box = crops[idx]
            padded = self._pad([images[k] for k in chunk])
            rows = self._axis_weights(box[:, 1] * h, (box[:, 3] - box[:, 1]) * h, h, padded.shape[2])
            cols = self._axis_weights(box[:, 0] * w, (box[:, 2] - box[:, 0]) * w, w, padded.shape[3])
            flip = flips[idx].to(self.device, non_blocking=True)[:, None, None]
            cols = torch.where(flip, cols.flip(1), cols).to(self.work)
            rows = rows.to(self.work)
            got = torch.matmul(torch.matmul(rows[:, None], padded), cols[:, None].transpose(-1, -2))
            if len(chunks) == 1:
                return got
            out[idx.to(self.device)] = got
        return out

    def _on_stream(self):
        """The decoder's own CUDA stream as the current one (nothing on the CPU)."""
        return self.torch.cuda.stream(self.stream) if self.stream is not None else contextlib.nullcontext()

    def start(self, batch):
        """The first stage (a helper thread): the batch's JPEGs decoded on
        the decoder's stream. The batch's JPEG bytes and image buffer are let
        go here (images the pipeline decoded itself are copied out), so the
        pipeline has its buffers back while the GPU works."""
        torch = self.torch
        images, labels, info = batch
        data, offsets = info.pop("encoded")
        offsets = offsets.tolist()
        b = len(offsets) - 1
        on_gpu = [i for i in range(b) if offsets[i + 1] > offsets[i]]
        on_cpu = [i for i in range(b) if offsets[i + 1] == offsets[i]]
        flat = torch.from_numpy(data)
        jpegs = [flat[offsets[i]:offsets[i + 1]] for i in on_gpu]
        with self._on_stream():
            if not jpegs:
                decoded = []
            elif self.batched:
                decoded = self.decode_jpeg(jpegs, mode=self.rgb, device=self.device)
            else:
                decoded = [self.decode_jpeg(j, mode=self.rgb, device=str(self.device)) for j in jpegs]
        kept = torch.as_tensor(images)[torch.tensor(on_cpu)] if on_cpu else None  # a copy
        labels = torch.as_tensor(labels).clone()
        info["_gpu"] = (decoded, on_gpu, on_cpu, kept, b)
        return None, labels, info

    def finish(self, batch):
        """The second stage (another helper thread): the crops resampled,
        flipped, normalised and stored in the batch's dtype and layout, the
        labels copied, on the decoder's stream; an event marks the end."""
        torch, n = self.torch, self.size
        _, labels, info = batch
        decoded, on_gpu, on_cpu, kept, b = info["_gpu"]
        with self._on_stream():
            if len(on_gpu) == b:
                out = self.resample(decoded, info["crops"], info["flips"])
            else:
                out = torch.empty((b, 3, n, n), dtype=self.work, device=self.device)
                if decoded:
                    out[torch.tensor(on_gpu).to(self.device, non_blocking=True)] = self.resample(
                        decoded, info["crops"][on_gpu], info["flips"][on_gpu])
            if self.dtype == torch.uint8:
                out = out.round_().clamp_(0, 255).to(torch.uint8)
            else:
                out = ((out.float() - self.mean) / self.std).to(self.dtype)
            if self.nhwc:
                out = out.permute(0, 2, 3, 1).contiguous()
            if on_cpu:  # decoded by the pipeline: already in the batch's form
                out[torch.tensor(on_cpu).to(self.device, non_blocking=True)] = kept.to(self.device)
            if self.stream is not None:
                labels = labels.pin_memory().to(self.device, non_blocking=True)
                event = torch.cuda.Event()
                event.record(self.stream)
            else:
                event = None
        info["_gpu"] = (out, labels, event)
        return None, None, info

    def hand_over(self, state):
        """(images, labels) for the consumer: its stream waits for the
        decoder's work, and the tensors are marked as used there."""
        out, labels, event = state
        if event is not None:
            current = self.torch.cuda.current_stream(self.device)
            current.wait_event(event)
            out.record_stream(current)
            labels.record_stream(current)
        return out, labels

    def decode(self, images, labels, info):
        """(images, labels) on the device from a batch of the pipeline's
        (its images and labels as tensors or arrays, its info), the stages
        one after the other on the caller's thread."""
        batch = self.finish(self.start((images, labels, dict(info))))
        return self.hand_over(batch[2]["_gpu"])
