#!/usr/bin/env python3
"""Step time of Accrue's CPU backend against PyTorch eager on the same model.

usage: bench/vs_pytorch.py [--build build] [--steps 5] [--runs 3] [--models gpt,mlp]

The models are the test suite's (test/e2e/models): a GPT (d=256, 4 layers,
4 heads, context 64, vocab 4096, tied head, ~4.2M parameters) at micro-batch
8, and a wide MLP (512-4096-4096-10, ~19M parameters) at micro-batch 64,
both with K=4 micro-batches per AdamW step and global-norm clipping. The
baseline is PyTorch (Debian's python3-torch) running the same loop
(zero_grad, K x forward/backward with loss / K, clip_grad_norm_, step) on
the same data, with one thread (Accrue's step is single-threaded) and with
all cores. Debian's PyTorch calls the system BLAS, the slow reference one
unless an optimized one is installed (`apt install libopenblas0-pthread`);
the bench prints which one it got. Time per optimizer step is the best of `--runs` runs of
`--steps` steps, after one warm-up step (PyTorch) or as accrue-train reports
its training loop (Accrue).
"""
import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e", "models"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import zoo  # noqa: E402
from benchlib import parse_args, seconds_per_step  # noqa: E402

K = 4
LR, CLIP = 1e-3, 1.0


class WideMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(512, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 4096), torch.nn.ReLU(),
            torch.nn.Linear(4096, 10))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x), y)


class SmallCNN(torch.nn.Module):
    """Three 3x3 convolutions (3-32-64-64 channels, 32x32 images), ReLU,
    max pooling, global average pooling and a linear classifier."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        nn = torch.nn
        self.net = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x), y)


def build(name, out, steps):
    """(module, data dict, micro-batch, onnx path)."""
    rng = np.random.default_rng(0)
    if name == "gpt":
        module, b = zoo.GPT(1, vocab=4096, d=256, heads=4, layers=4, block=64), 8
        data = module.data(b * K * steps, rng)
    elif name == "cnn":
        module, b = SmallCNN(), 16
        data = {"x": rng.standard_normal((b * K * steps, 3, 32, 32)).astype(np.float32),
                "y": rng.integers(0, 10, b * K * steps).astype(np.int64)}
    else:
        module, b = WideMLP(), 64
        data = {"x": rng.standard_normal((b * K * steps, 512)).astype(np.float32),
                "y": rng.integers(0, 10, b * K * steps).astype(np.int64)}
    path = os.path.join(out, name + ".onnx")
    zoo.export(module, data, path, 17)
    return module, data, b, path


def pytorch_step_seconds(module, data, b, steps, threads):
    torch.set_num_threads(threads)
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=0.01)
    tensors = [torch.tensor(v) for v in data.values()]

    def step(s):
        opt.zero_grad(set_to_none=True)
        for k in range(K):
            lo = (s * K + k) * b
            loss = module(*[t[lo:lo + b] for t in tensors]) / K
            loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP)
        opt.step()

    step(0)  # warm-up
    start = time.perf_counter()
    for s in range(steps):
        step(s)
    return (time.perf_counter() - start) / steps


def pytorch_blas():
    """The BLAS library PyTorch's matmuls ended up in (Debian's python3-torch
    uses whatever libblas.so.3 the alternatives system points to: the
    reference BLAS unless OpenBLAS or BLIS is installed)."""
    torch.ones(64, 64) @ torch.ones(64, 64)
    with open("/proc/self/maps") as maps:
        libs = {line.split()[-1] for line in maps if "blas" in line.split()[-1]}
    return ", ".join(sorted(os.path.realpath(lib) for lib in libs)) or "none found"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--models", default="gpt,mlp")
    args, out, compiler, trainer = parse_args(ap)
    cores = os.cpu_count()
    print("PyTorch %s, BLAS: %s" % (torch.__version__, pytorch_blas()))
    print("| model | params | micro-batch x K | Accrue ms | Accrue --no-vectorize ms | "
          "PyTorch 1 thread ms | PyTorch %d threads ms | Accrue / PyTorch 1 thread |" % cores)
    print("|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        module, data, b, path = build(name, out, args.steps)
        params = sum(p.numel() for p in module.parameters())
        npz = os.path.join(out, name + ".npz")
        np.savez(npz, **data)
        times = []
        for tag, extra in [("", []), ("_scalar", ["--no-vectorize"])]:
            artifact = os.path.join(out, name + tag)
            subprocess.run([compiler, path, "-o", artifact, "--micro-batch", str(b),
                            "--accumulation-steps", str(K), "--optimizer", "adamw",
                            "--lr", str(LR), "--weight-decay", "0.01", "--clip-norm",
                            str(CLIP)] + extra, check=True)
            times.append(min(seconds_per_step([trainer, artifact, "--data", npz], args.steps)
                             for _ in range(args.runs)))
        accrue, scalar = times
        one = min(pytorch_step_seconds(module, data, b, args.steps, 1) for _ in range(args.runs))
        many = min(pytorch_step_seconds(module, data, b, args.steps, cores)
                   for _ in range(args.runs))
        print("| %s | %.1fM | %d x %d | %.0f | %.0f | %.0f | %.0f | %.2f |" % (
            name, params / 1e6, b, K, accrue * 1e3, scalar * 1e3, one * 1e3, many * 1e3,
            accrue / one))


if __name__ == "__main__":
    main()
