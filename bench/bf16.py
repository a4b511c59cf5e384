#!/usr/bin/env python3
"""bf16 compute on the CPU: Accrue's step under --precision bf16 against
its fp32 step and against PyTorch 2's CPU autocast, in one run.

usage: bench/bf16.py [--build build] [--models gpt,mlp,cnn] [--steps 3]
                     [--runs 2] [--torch2-python PYTHON]

The models, data and loop are bench/vs_pytorch.py's (K micro-batches per
AdamW step with global-norm clipping). Accrue runs fp32, bf16 with its
products on AVX512-BF16's vdpbf16ps (the default where the CPU has it)
and bf16 with --no-bf16-dot (fp32 kernels over widened copies). PyTorch 2
(the newest-releases venv's PyPI wheel: oneDNN's bf16 kernels) runs the
loop eager in fp32 and under torch.autocast("cpu", dtype=torch.bfloat16).
Each at the best of 1 thread and all cores; ms per optimizer step, the
best of `--runs` runs of `--steps` steps after a warm-up (Accrue's three
variants take turns run by run: step times on the shared development
VMs drift by up to 25% over minutes).
"""
import argparse
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import vs_pytorch as vs  # noqa: E402
from benchlib import parse_args  # noqa: E402


def cpu_has_bf16():
    with open("/proc/cpuinfo") as f:
        return any("avx512_bf16" in line.split() for line in f if line.startswith("flags"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="gpt,mlp,cnn")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--torch2-python",
                    default=os.path.join(HERE, "..", ".venv-onnx-latest", "bin", "python"))
    args, out, compiler, trainer = parse_args(ap)
    cores = os.cpu_count()
    torch2 = os.path.exists(args.torch2_python)
    print("AVX512-BF16: %s; PyTorch 2: %s" % (
        "yes" if cpu_has_bf16() else "no (the bf16 products run on fp32 kernels)",
        args.torch2_python if torch2 else "not found"))
    print("| model | Accrue fp32 ms | Accrue bf16 ms | Accrue bf16 --no-bf16-dot ms | "
          "PyTorch 2 fp32 ms | PyTorch 2 autocast bf16 ms | Accrue fp32 / bf16 | "
          "PyTorch 2 fp32 / autocast | Accrue bf16 / PyTorch 2 autocast |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.models.split(","):
        module, data, b, k, path = vs.build(name, out, args.steps)
        npz = os.path.join(out, name + ".npz")
        np.savez(npz, **data)
        artifacts = {}
        for tag, flags in [("fp32", []), ("bf16", ["--precision", "bf16"]),
                           ("widened", ["--precision", "bf16", "--no-bf16-dot"])]:
            artifacts[tag] = os.path.join(out, "%s_%s" % (name, tag))
            subprocess.run([compiler, path, "-o", artifacts[tag], "--micro-batch", str(b),
                            "--accumulation-steps", str(k), "--optimizer", "adamw",
                            "--lr", str(vs.LR), "--weight-decay", "0.01", "--clip-norm",
                            str(vs.CLIP)] + flags, check=True)
        # Runs of the variants take turns, so that the machine's slower and
        # faster spells reach each of them.
        accrue = {tag: float("inf") for tag in artifacts}
        for _ in range(args.runs):
            for tag, artifact in artifacts.items():
                for t in [1, cores]:
                    accrue[tag] = min(accrue[tag], vs.accrue_step_seconds(
                        trainer, artifact, npz, args.steps, t, os.path.join(out, name + ".jsonl")))
        eager = autocast = float("nan")
        if torch2:
            eager, autocast = (min(vs.pytorch_step_seconds(name, args.steps, t, args.runs,
                                                           args.torch2_python, mode)
                                   for t in [1, cores])
                               for mode in ["eager", "autocast"])
        print("| %s | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |" % (
            name, accrue["fp32"] * 1e3, accrue["bf16"] * 1e3, accrue["widened"] * 1e3,
            eager * 1e3, autocast * 1e3, accrue["fp32"] / accrue["bf16"], eager / autocast,
            accrue["bf16"] / autocast), flush=True)


if __name__ == "__main__":
    main()
