#!/usr/bin/python3
"""ImageNet training fed by aquifer: the familiar PyTorch recipe (a
torchvision model by name, SGD with momentum and weight decay, a step or
cosine learning-rate schedule, mixed precision on CUDA, DistributedDataParallel
under torchrun or Slurm, top-1/top-5 validation with the evaluation
transform, checkpoints that include the loader's position), with
aquifer.Loader as the input pipeline.

Per epoch it prints images/s and the fraction of step time spent waiting for
data: near 0 means the GPU (or CPU) doing the training is the limit, not the
input pipeline or the storage behind it.

    # one process (CPU or one GPU)
    examples/train_imagenet.py --train TRAIN --val VAL --arch resnet50 --epochs 90
    # all GPUs of a machine
    torchrun --nproc_per_node=8 examples/train_imagenet.py --train aquifer://node:9000/imagenet/train ...

TRAIN and VAL are anything aquifer.Loader reads: TFRecord shards, .rec files,
an image folder, aquifer://HOST:PORT/BUCKET/PREFIX. --loader torchvision feeds
the same script from torchvision's ImageFolder and DataLoader instead (image
folders only), for comparison.
"""
import argparse
import math
import os
import sys
import time

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
BUILT = os.path.join(HERE, "..", "build", "python")
if os.path.isdir(BUILT) and BUILT not in sys.path:
    sys.path.insert(0, BUILT)  # a build tree; an installed aquifer needs nothing

import aquifer.evaluate  # noqa: E402  (after the path above)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--train", required=True, help="training data (anything aquifer.Loader reads)")
    ap.add_argument("--val", help="validation data (evaluated after every epoch)")
    ap.add_argument("--arch", default="resnet50", help="a torchvision model name, or smallcnn")
    ap.add_argument("--num-classes", type=int, default=1000)
    ap.add_argument("--epochs", type=int, default=90)
    ap.add_argument("--steps", type=int, default=0, help="stop each epoch after this many steps (0: all)")
    ap.add_argument("--batch-size", type=int, default=256, help="per process")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--lr", type=float, default=0.1, help="for 256 images per step; scaled linearly with the global batch")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=1e-4)
    ap.add_argument("--schedule", choices=["step", "cosine"], default="step",
                    help="step: /10 at 30, 60, 80 of 90 epochs (scaled to --epochs); cosine: to 0")
    ap.add_argument("--warmup-epochs", type=float, default=0)
    ap.add_argument("--label-smoothing", type=float, default=0.0)
    ap.add_argument("--amp", action="store_true", help="mixed precision (CUDA only)")
    ap.add_argument("--threads", type=int, default=0, help="decode threads per process (0: cores / processes)")
    ap.add_argument("--memory-limit", default="2GiB",
                    help="what each aquifer.Loader's pipeline may hold (batch buffers, records in flight, decode "
                         "scratch): its estimate is checked against this at the start (e.g. 4GiB for large photos)")
    ap.add_argument("--decode", choices=["cpu", "gpu"], default="cpu",
                    help="--loader aquifer on CUDA: gpu decodes each batch's JPEGs with nvJPEG (torchvision's "
                         "decode_jpeg) after the pipeline has read, checked and cropped them")
    ap.add_argument("--loader", choices=["aquifer", "torchvision"], default="aquifer")
    ap.add_argument("--workers", type=int, default=2, help="--loader torchvision: DataLoader worker processes")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--checkpoint", help="write a checkpoint here after every epoch (and --checkpoint-every steps)")
    ap.add_argument("--checkpoint-every", type=int, default=0,
                    help="also checkpoint every N steps: a killed job resumes mid-epoch with the same batches")
    ap.add_argument("--resume", help="resume from this checkpoint (model, optimizer, schedule and loader position)")
    ap.add_argument("--json", help="append one JSON line per epoch here")
    return ap.parse_args(argv)


def setup_distributed():
    """(rank, world, local_rank) from torchrun or Slurm; a process group when world > 1."""
    env = os.environ
    if "RANK" in env and "WORLD_SIZE" in env:
        rank, world, local = int(env["RANK"]), int(env["WORLD_SIZE"]), int(env.get("LOCAL_RANK", 0))
    elif "SLURM_PROCID" in env and "SLURM_NTASKS" in env:
        rank, world, local = int(env["SLURM_PROCID"]), int(env["SLURM_NTASKS"]), int(env.get("SLURM_LOCALID", 0))
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", "29500")
    else:
        return 0, 1, 0
    if world > 1:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        torch.distributed.init_process_group(backend, rank=rank, world_size=world)
    return rank, world, local


def build_model(args, device):
    return aquifer.evaluate.build_model(args.arch, args.num_classes).to(device)


def aquifer_loaders(args, device, world):
    import aquifer
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, torch.cuda.device_count() or world))
    train = aquifer.Loader(args.train, batch_size=args.batch_size, image_size=args.image_size, seed=args.seed,
                           threads=threads, device=device, memory_limit=args.memory_limit,
                           decode=args.decode if str(device).startswith("cuda") else "cpu")
    val = None
    if args.val:
        val = aquifer.Loader(args.val, batch_size=args.batch_size, image_size=args.image_size, training=False,
                             eval_resize=round(args.image_size * 256 / 224), shuffle=False, remainder="pad",
                             threads=threads, device=device, ids=True, memory_limit=args.memory_limit,
                             decode=args.decode if str(device).startswith("cuda") else "cpu")
    return train, val


class TorchvisionLoader:
    """ImageFolder + the standard transforms in a DataLoader, with the same
    set_epoch/state_dict surface the script uses (no mid-epoch resume)."""

    def __init__(self, root, args, training, world, rank):
        import torchvision.transforms as T
        from torchvision.datasets import ImageFolder
        norm = T.Normalize((0.485, 0.456, 0.406), (0.229, 0.224, 0.225))
        if training:
            tf = T.Compose([T.RandomResizedCrop(args.image_size), T.RandomHorizontalFlip(), T.ToTensor(), norm])
        else:
            tf = T.Compose([T.Resize(round(args.image_size * 256 / 224)), T.CenterCrop(args.image_size), T.ToTensor(),
                            norm])
        self.dataset = ImageFolder(root, tf)
        self.sampler = torch.utils.data.distributed.DistributedSampler(
            self.dataset, num_replicas=world, rank=rank, shuffle=training, seed=args.seed, drop_last=training)
        self.loader = torch.utils.data.DataLoader(self.dataset, batch_size=args.batch_size, sampler=self.sampler,
                                                  num_workers=args.workers, drop_last=training,
                                                  persistent_workers=args.workers > 0)
        self.epoch = 0

    def __len__(self):
        return len(self.loader)

    def set_epoch(self, e):
        self.epoch = e
        self.sampler.set_epoch(e)

    def __iter__(self):
        yield from self.loader
        self.epoch += 1

    def state_dict(self):
        return {"epoch": self.epoch, "step": 0}

    def load_state_dict(self, state):
        self.set_epoch(state["epoch"])


def learning_rate(args, epoch_float, base_lr):
    if epoch_float < args.warmup_epochs:
        return base_lr * epoch_float / args.warmup_epochs
    if args.schedule == "cosine":
        return 0.5 * base_lr * (1 + math.cos(math.pi * epoch_float / args.epochs))
    return base_lr * 0.1 ** sum(epoch_float >= args.epochs * f for f in (1 / 3, 2 / 3, 8 / 9))


def accuracy(output, target, ks=(1, 5)):
    top = output.topk(max(ks), dim=1).indices
    hit = top.eq(target.view(-1, 1))
    return [hit[:, :k].any(dim=1).float().sum().item() for k in ks]


def evaluate(model, val, device, world):
    if getattr(val, "ids", False):
        # Each real sample once, however remainder="pad" filled the ranks.
        (top1, top5), _ = aquifer.evaluate.evaluate(model, val, device, ks=(1, min(5, model_classes(model))))
        return top1, top5
    model.eval()
    totals = torch.zeros(3, dtype=torch.float64, device=device)
    with torch.no_grad():
        for images, labels in val:
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            top1, top5 = accuracy(model(images), labels, ks=(1, min(5, model_classes(model))))
            totals += torch.tensor([top1, top5, labels.numel()], dtype=torch.float64, device=device)
    if world > 1:
        torch.distributed.all_reduce(totals)
    model.train()
    return (totals[0] / totals[2]).item(), (totals[1] / totals[2]).item()


def model_classes(model):
    m = model.module if hasattr(model, "module") else model
    for layer in reversed(list(m.modules())):
        if isinstance(layer, nn.Linear):
            return layer.out_features
    return 1000


def save_checkpoint(args, model, optimizer, scaler, loader_state, epoch, world):
    """Model, optimizer, schedule and the loader's position, written whole or
    not at all (a temporary file renamed over the last one)."""
    torch.save({"model": (model.module if world > 1 else model).state_dict(),
                "optimizer": optimizer.state_dict(), "scaler": scaler.state_dict(),
                "loader": loader_state, "epoch": epoch, "args": vars(args)},
               args.checkpoint + ".tmp")
    os.replace(args.checkpoint + ".tmp", args.checkpoint)


def main(argv=None):
    args = parse_args(argv)
    rank, world, local = setup_distributed()
    torch.manual_seed(args.seed)
    cuda = torch.cuda.is_available()
    device = torch.device(f"cuda:{local}" if cuda else "cpu")
    if cuda:
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    else:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world))
    model = build_model(args, device)
    if world > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[local] if cuda else None)
    base_lr = args.lr * args.batch_size * world / 256
    optimizer = torch.optim.SGD(model.parameters(), lr=base_lr, momentum=args.momentum,
                                weight_decay=args.weight_decay)
    scaler = torch.cuda.amp.GradScaler(enabled=args.amp and cuda)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    if args.loader == "aquifer":
        train, val = aquifer_loaders(args, str(device), world)
    else:
        train = TorchvisionLoader(args.train, args, True, world, rank)
        val = TorchvisionLoader(args.val, args, False, world, rank) if args.val else None
    start_epoch, resume_step = 0, 0
    if args.resume:
        state = torch.load(args.resume, map_location=device)
        (model.module if world > 1 else model).load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scaler.load_state_dict(state["scaler"])
        train.load_state_dict(state["loader"])
        start_epoch, resume_step = train.epoch, train.state_dict().get("step", 0)
    steps = len(train) if args.steps == 0 else min(args.steps, len(train))
    if rank == 0:
        print(f"train_imagenet: {args.arch}, {world} process(es), {steps} steps of {args.batch_size} per epoch, "
              f"{args.loader} loader, device {device}", flush=True)
    for epoch in range(start_epoch, args.epochs):
        if not (epoch == start_epoch and resume_step > 0):  # else: the loader resumes mid-epoch
            train.set_epoch(epoch)
        model.train()
        seen, loss_sum, wait, t_epoch = 0, 0.0, 0.0, time.time()
        t_wait = time.time()
        first = resume_step if epoch == start_epoch else 0
        for i, (images, labels) in enumerate(train, start=first):
            images, labels = images.to(device, non_blocking=True), labels.to(device, non_blocking=True)
            wait += time.time() - t_wait
            for group in optimizer.param_groups:
                group["lr"] = learning_rate(args, epoch + i / steps, base_lr)
            with torch.autocast(device_type="cuda", dtype=torch.float16, enabled=args.amp and cuda):
                loss = criterion(model(images), labels)
            optimizer.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            loss_sum += loss.item() * labels.numel()
            seen += labels.numel()
            if args.checkpoint and args.checkpoint_every and (i + 1) % args.checkpoint_every == 0 and i + 1 < steps \
                    and rank == 0:
                save_checkpoint(args, model, optimizer, scaler, train.state_dict(), epoch, world)
            t_wait = time.time()
            if i + 1 >= steps:
                break
        elapsed = time.time() - t_epoch
        line = {"epoch": epoch, "first_step": first, "steps_run": seen // args.batch_size,
                "loss": loss_sum / max(1, seen), "images_per_second": seen * world / elapsed,
                "data_wait_fraction": wait / elapsed, "seconds": elapsed}
        if val is not None:
            line["top1"], line["top5"] = evaluate(model, val, device, world)
        if rank == 0:
            extra = f", val top-1 {line['top1']:.3f} top-5 {line['top5']:.3f}" if val is not None else ""
            print(f"epoch {epoch}: loss {line['loss']:.3f}, {line['images_per_second']:.0f} images/s, "
                  f"waiting for data {100 * line['data_wait_fraction']:.1f}% of the time{extra}", flush=True)
            if args.json:
                import json
                with open(args.json, "a") as fh:
                    fh.write(json.dumps(line) + "\n")
            if args.checkpoint:
                # The epoch is done (whole, or its --steps): resume at the next.
                save_checkpoint(args, model, optimizer, scaler, dict(train.state_dict(), epoch=epoch + 1, step=0),
                                epoch, world)
    if world > 1:
        torch.distributed.destroy_process_group()
    return line if args.epochs > start_epoch else None


if __name__ == "__main__":
    main()
