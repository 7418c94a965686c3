#!/usr/bin/python3
"""A small data-parallel training job (gloo, CPU) that saves a checkpoint
every N steps through aquifer.checkpoint.save (each rank writing its share)
and, with --resume,
starts from the newest complete one. Deterministic: the same steps give
the same weights bit for bit, killed and resumed or not. Rank 0 writes the
final weights to --out. Started once per rank by checkpoint_test.py
(RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT in the environment)."""
import argparse

import torch
import torch.distributed as dist

from aquifer import checkpoint

ap = argparse.ArgumentParser()
ap.add_argument("--root", required=True)
ap.add_argument("--steps", type=int, default=30)
ap.add_argument("--every", type=int, default=3)
ap.add_argument("--credentials", default=None)
ap.add_argument("--out", required=True)
ap.add_argument("--resume", action="store_true")
a = ap.parse_args()

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(256, 2048), torch.nn.ReLU(), torch.nn.Linear(2048, 10))
model = torch.nn.parallel.DistributedDataParallel(net)
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


def state():
    s = {f"model.{k}": v for k, v in net.state_dict().items()}
    s["optimizer"] = opt.state_dict()
    s["step"] = torch.tensor(step)
    return s


step = 0
if a.resume:
    last = checkpoint.latest(a.root, credentials=a.credentials)
    if last is not None:
        s = checkpoint.load(last, credentials=a.credentials)
        net.load_state_dict({k[len("model."):]: v for k, v in s.items() if k.startswith("model.")})
        opt.load_state_dict(s["optimizer"])
        step = int(s["step"])
        print(f"rank {rank}: resumed from {last} at step {step}", flush=True)

while step < a.steps:
    g = torch.Generator().manual_seed(step * world + rank)
    x, y = torch.randn(64, 256, generator=g), torch.randint(0, 10, (64,), generator=g)
    opt.zero_grad()
    torch.nn.functional.cross_entropy(model(x), y).backward()
    opt.step()
    step += 1
    if step % a.every == 0:
        checkpoint.save(state(), f"{a.root}/step-{step}", credentials=a.credentials)
        print(f"rank {rank}: saved step {step}", flush=True)

if rank == 0:
    torch.save(net.state_dict(), a.out)
dist.destroy_process_group()
