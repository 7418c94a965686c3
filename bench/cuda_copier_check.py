#!/usr/bin/env python3
"""The Loader's CUDA copier (python/aquifer/loader.py, _CudaCopier) on a real
GPU, without the rest of the package: the class is taken from the source
file as it is, so this checks the code aquifer.Loader(device="cuda") runs.

  - correctness: every batch arrives on the GPU bit for bit, labels too,
    also while the consumer's stream is busy and buffers are reused;
  - overlap: a consumer that runs a model step (matrix products sized to
    take about as long as the copy) on the current stream, fed by the
    copier, against the same consumer fed by a blocking .to(device) copy
    and against the step alone: how much of the copy the copier hides;
  - rate: host-to-device GB/s of the copier and of a blocking copy.

usage: cuda_copier_check.py [--batches N] [--batch B] [--size S] [--json FILE]
Needs PyTorch with CUDA; exits 77 (skip) without a GPU."""
import argparse
import ast
import collections
import json
import os
import statistics
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
LOADER = os.path.join(HERE, "..", "python", "aquifer", "loader.py")


def load_copier():
    """_CudaCopier's class definition from loader.py, compiled alone (with
    the function it calls)."""
    with open(LOADER) as fh:
        tree = ast.parse(fh.read(), LOADER)
    nodes = [n for n in tree.body
             if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name in ("_CudaCopier", "_clear_cuda_error")]
    scope = {"collections": collections}
    exec(compile(ast.Module(body=nodes, type_ignores=[]), LOADER, "exec"), scope)
    return scope["_CudaCopier"]


def batches(n, b, s, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand((b, 3, s, s), generator=g), torch.randint(0, 1000, (b,), generator=g)) for _ in range(n)]


def step_fn(device, target_s):
    """A 'model step' on the current stream sized to take about target_s."""
    a = torch.randn(4096, 4096, device=device)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(10):
        a @ a
    torch.cuda.synchronize()
    per = (time.perf_counter() - t0) / 10
    reps = max(1, round(target_s / per))

    def step(x):
        for _ in range(reps):
            a @ a
        return x.sum()

    return step, reps * per


def run(feed, data, step):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    outs = []
    for images, labels in data:
        x, y = feed(images, labels)
        outs.append(step(x) + y.sum())
    torch.cuda.synchronize()
    return time.perf_counter() - t0, outs


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", type=int, default=24)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("SKIP: no CUDA device")
        sys.exit(77)
    device = torch.device("cuda")
    Copier = load_copier()
    data = batches(args.batches, args.batch, args.size)
    nbytes = sum(x.numel() * x.element_size() + y.numel() * y.element_size() for x, y in data)

    # Correctness under a busy consumer stream and a reused staging ring.
    copier = Copier(torch, device)
    busy, _ = step_fn(device, 0.002)
    for images, labels in data:
        x, y = copier.copy(images, labels)
        busy(x)
        if not torch.equal(x.cpu(), images) or not torch.equal(y.cpu(), labels):
            raise SystemExit("FAILED: a batch differs on the GPU")

    # Copy rates: blocking .to() vs the copier (stream synchronised at the end).
    def blocking(images, labels):
        return images.to(device), labels.to(device)

    def timed(feed):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        last = None
        for images, labels in data:
            last = feed(images, labels)
        torch.cuda.synchronize()
        del last
        return time.perf_counter() - t0

    copy_blocking = statistics.median(timed(blocking) for _ in range(args.repeats))
    copier = Copier(torch, device)
    copy_copier = statistics.median(timed(copier.copy) for _ in range(args.repeats))

    # Overlap: a step about as long as one batch's copy.
    per_batch_copy = copy_blocking / len(data)
    step, step_s = step_fn(device, per_batch_copy)
    step_alone = statistics.median(run(lambda i, l: (torch.zeros(1, device=device), torch.zeros(1, device=device)),
                                       data, step)[0] for _ in range(args.repeats))
    with_blocking = statistics.median(run(blocking, data, step)[0] for _ in range(args.repeats))
    copier = Copier(torch, device)
    with_copier = statistics.median(run(copier.copy, data, step)[0] for _ in range(args.repeats))
    hidden = (with_blocking - with_copier) / max(copy_blocking, 1e-9)
    result = {
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "batches": len(data), "batch": args.batch, "size": args.size, "bytes": nbytes,
        "blocking_copy_gb_s": nbytes / copy_blocking / 1e9,
        "copier_gb_s": nbytes / copy_copier / 1e9,
        "step_alone_s": step_alone, "with_blocking_copy_s": with_blocking, "with_copier_s": with_copier,
        "copier_vs_step_alone": step_alone / with_copier,
        "copy_time_hidden_fraction": hidden,
        "correct": True,
    }
    print(json.dumps(result, indent=1))
    print(f"{result['gpu']}: copier {result['copier_gb_s']:.1f} GB/s, blocking .to() {result['blocking_copy_gb_s']:.1f}"
          f" GB/s; a step fed by the copier runs at {result['copier_vs_step_alone']:.2f}x the step alone, "
          f"{hidden:.0%} of the copy time hidden; every batch bit for bit")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)


if __name__ == "__main__":
    main()
