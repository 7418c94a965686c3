#!/usr/bin/python3
"""Saves checkpoints step-1, step-2, ... under --root until killed, each a
state that is a function of its step alone (expected(step)), printing
"ready" once imported and "saved N" after each save returns. checkpoint_test.py kills it with
SIGKILL at random moments and checks what the store holds."""
import argparse
import sys

import torch

from aquifer import checkpoint


def expected(step, mib=16):
    g = torch.Generator().manual_seed(step)
    n = (mib << 20) // 4 // 3
    return {"a": torch.randn(n, generator=g), "b": torch.randn(n, generator=g),
            "c": torch.arange(n, dtype=torch.float32) + step, "step": torch.tensor(step),
            "meta": {"step": step, "note": "ü" * (step % 7)}}


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--credentials", default=None)
    ap.add_argument("--start", type=int, default=1)
    a = ap.parse_args()
    step = a.start
    print("ready", flush=True)
    while True:
        checkpoint.save(expected(step), f"{a.root}/step-{step}", credentials=a.credentials)
        print(f"saved {step}", flush=True)
        sys.stdout.flush()
        step += 1
