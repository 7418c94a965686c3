"""Evaluation that counts every real sample exactly once.

With remainder="pad" every rank gets the same number of batches, so the last
batches repeat some samples; an accuracy averaged over batches then counts
those twice (270/320 reported for 300 images). evaluate() asks the loader for
each sample's id and keeps the first prediction of each id, across ranks too
(the ids are gathered with torch.distributed when a process group is up).

As a command, the inference half of the measurement method's top-1 check:

    /usr/bin/python3 -m aquifer.evaluate --checkpoint ckpt.pt --data VAL [--json]

loads a checkpoint written by examples/train_imagenet.py (its "args" name the
architecture, class count and image size), evaluates it on the CPU through
aquifer.Loader with the evaluation transform and prints top-1/top-5 and
images/s. `aquifer bench infer --checkpoint` runs it.
"""
import argparse
import json
import os
import sys
import time


def small_cnn(num_classes):
    """A few conv layers: trains in minutes on a CPU (for checks, not ImageNet)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class SmallCNN(nn.Module):
        def __init__(self):
            super().__init__()
            chans = [3, 32, 64, 128, 128]
            layers = []
            for a, b in zip(chans, chans[1:]):
                layers += [nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(inplace=True),
                           nn.MaxPool2d(2)]
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(chans[-1], num_classes)

        def forward(self, x):
            x = self.features(x)
            return self.head(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    return SmallCNN()


def build_model(arch, num_classes):
    """A torchvision model by name, or "smallcnn"."""
    if arch == "smallcnn":
        return small_cnn(num_classes)
    import torchvision
    if not hasattr(torchvision.models, arch):
        raise ValueError(f"unknown architecture {arch!r}: a torchvision model name (resnet50, ...) or smallcnn")
    return getattr(torchvision.models, arch)(num_classes=num_classes)


def evaluate(model, loader, device="cpu", ks=(1, 5)):
    """Top-k accuracies of `model` over one epoch of `loader` (built with
    ids=True), each sample counted once however the loader padded its ranks.
    Returns (accuracies, samples): accuracies in the order of ks."""
    import torch
    if not getattr(loader, "ids", False):
        raise ValueError("evaluate() needs a loader built with ids=True, to count each sample once")
    was_training = model.training
    model.eval()
    seen = {}  # id -> hits per k
    with torch.no_grad():
        for images, labels, ids in loader:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            out = model(images)
            top = out.topk(min(max(ks), out.shape[1]), dim=1).indices
            hit = top.eq(labels.view(-1, 1)).cpu()
            for row, sample in enumerate(ids.tolist()):
                if sample not in seen:
                    seen[sample] = tuple(bool(hit[row, :k].any()) for k in ks)
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        parts = [None] * torch.distributed.get_world_size()
        torch.distributed.all_gather_object(parts, seen)
        seen = {}
        for part in parts:
            for sample, hits in part.items():
                seen.setdefault(sample, hits)
    if was_training:
        model.train()
    n = len(seen)
    return [sum(h[i] for h in seen.values()) / max(1, n) for i in range(len(ks))], n


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m aquifer.evaluate",
                                 description="Top-1/top-5 of a train_imagenet.py checkpoint on the CPU, through "
                                             "aquifer.Loader (each sample counted once).")
    ap.add_argument("--checkpoint", required=True, help="a checkpoint written by examples/train_imagenet.py")
    ap.add_argument("--data", required=True, help="validation data (anything aquifer.Loader reads)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="decode threads (0: one per core)")
    ap.add_argument("--credentials", help="aquifer:// data: a credentials file")
    ap.add_argument("--profile", help="aquifer:// data: a profile of ~/.aws/credentials")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of text")
    args = ap.parse_args(argv)

    import torch
    import aquifer
    try:
        state = torch.load(args.checkpoint, map_location="cpu")
    except (OSError, RuntimeError, EOFError) as e:
        print(f"aquifer.evaluate: cannot read checkpoint {args.checkpoint}: {e}", file=sys.stderr)
        return 1
    if not isinstance(state, dict) or "model" not in state or "args" not in state:
        print(f"aquifer.evaluate: {args.checkpoint} is not a train_imagenet.py checkpoint (no 'model' and 'args')",
              file=sys.stderr)
        return 1
    saved = state["args"]
    arch, classes, size = saved.get("arch", "resnet50"), saved.get("num_classes", 1000), saved.get("image_size", 224)
    model = build_model(arch, classes)
    model.load_state_dict(state["model"])
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    loader = aquifer.Loader(args.data, batch_size=args.batch_size, image_size=size, training=False,
                            eval_resize=round(size * 256 / 224), shuffle=False, remainder="pad", ids=True,
                            threads=args.threads, rank=0, world_size=1, credentials=args.credentials,
                            profile=args.profile)
    t0 = time.time()
    (top1, top5), n = evaluate(model, loader, ks=(1, min(5, classes)))
    seconds = time.time() - t0
    result = {"checkpoint": args.checkpoint, "data": args.data, "arch": arch, "num_classes": classes,
              "image_size": size, "epoch": state.get("epoch"), "top1": top1, "top5": top5, "images": n,
              "seconds": seconds, "images_per_second": n / seconds if seconds > 0 else 0.0,
              "torch_threads": torch.get_num_threads()}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{arch} from {args.checkpoint}: top-1 {top1:.4f}, top-5 {top5:.4f} over {n} images "
              f"({result['images_per_second']:.0f} images/s on the CPU, {torch.get_num_threads()} threads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
