"""aquifer: keep GPU training fed from scale-out storage.

    import aquifer
    loader = aquifer.Loader("train-tfrecords", batch_size=256)   # or aquifer://HOST:PORT/BUCKET/PREFIX
    for epoch in range(90):
        loader.set_epoch(epoch)
        for images, labels in loader:        # torch tensors (framework="numpy" for arrays)
            ...

The input pipeline (reading, shuffling and sharding across ranks, JPEG crop
decoding, augmentation, batching) runs in C++ threads; batches arrive as
zero-copy views of the pipeline's buffers. See docs/python.md.

Checkpoints and other files: aquifer.open(url, "wb") / "rb" (stored whole at
close, or not at all), aquifer.checkpoint for torch.distributed.checkpoint.

A DataLoader reading an aquifer mount keeps its own sampler and sends its
order ahead: DataLoader(data, sampler=aquifer.hint(sampler, "/mnt/aquifer")).
"""
from ._aquifer import __version__, option_defaults, option_docs  # noqa: F401
from .files import open  # noqa: F401,A001
from .hint import HintedSampler, hint  # noqa: F401
from .loader import Loader  # noqa: F401

__all__ = ["HintedSampler", "Loader", "__version__", "hint", "open", "option_defaults", "option_docs"]
