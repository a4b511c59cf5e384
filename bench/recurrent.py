#!/usr/bin/env python3
"""Recurrent nets: compile time and step time of an LSTM language model
(bench/vs_pytorch.py's `lstmT`: vocab 1024, width 128, a 2-layer LSTM with
hidden 256, micro-batch 16, K=2, AdamW with clipping) over sequence lengths
T, against PyTorch eager (OpenBLAS, best of 1 thread and all cores) in the
same run.

usage: bench/recurrent.py [--build build] [--lengths 32,64,128] [--steps 3]
                          [--runs 2]

Compile time is accrue-compile's wall time for the whole artifact (import,
autodiff, lowering, LLVM -O3, link); a recurrence is one loop over the
steps, so it should not grow with T. Step time is the best of `--runs` runs
of `--steps` steps after a warm-up step, as in vs_pytorch.py.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vs_pytorch as vs  # noqa: E402
from benchlib import parse_args  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lengths", default="32,64,128")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    args, out, compiler, trainer = parse_args(ap)
    cores = os.cpu_count()
    print("| T | compile s | Accrue 1 thread ms | Accrue %d threads ms | PyTorch 1 thread ms | "
          "PyTorch %d threads ms | Accrue / PyTorch (best of each) |" % (cores, cores))
    print("|---|---|---|---|---|---|---|")
    for t in [int(v) for v in args.lengths.split(",")]:
        name = "lstm%d" % t
        module, data, b, k, path = vs.build(name, out, args.steps)
        npz = os.path.join(out, name + ".npz")
        np.savez(npz, **data)
        artifact = os.path.join(out, name)
        start = time.perf_counter()
        subprocess.run([compiler, path, "-o", artifact, "--micro-batch", str(b),
                        "--accumulation-steps", str(k), "--optimizer", "adamw",
                        "--lr", str(vs.LR), "--weight-decay", "0.01", "--clip-norm",
                        str(vs.CLIP)], check=True)
        compile_s = time.perf_counter() - start
        accrue = {n: min(vs.accrue_step_seconds(trainer, artifact, npz, args.steps, n,
                                                os.path.join(out, name + ".jsonl"))
                         for _ in range(args.runs))
                  for n in [1, cores]}
        torch_times = {n: vs.pytorch_step_seconds(name, args.steps, n, args.runs)
                       for n in [1, cores]}
        print("| %d | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f |" % (
            t, compile_s, accrue[1] * 1e3, accrue[cores] * 1e3, torch_times[1] * 1e3,
            torch_times[cores] * 1e3, min(accrue.values()) / min(torch_times.values())),
            flush=True)


if __name__ == "__main__":
    main()
