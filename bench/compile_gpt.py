#!/usr/bin/env python3
"""Import + compile time and peak memory of accrue-compile on GPTs exported
by PyTorch (training mode, opset 17), at ~10M and ~100M parameters.

usage: bench/compile_gpt.py [--build build] [--sizes 10M,100M] [--out DIR]
                            [--budget 3GiB]

Each model is compiled twice, `--emit import` (parse the ONNX file, import,
fold) and the full artifact (autodiff, micro-batch loop, fused AdamW,
bufferization, LLVM -O3, link), with /usr/bin/time for wall time and peak
RSS. Baselines in the same run: the model file's size (peak RSS is reported
as a multiple of it) and `onnx.load` of the same file in Python (compile time
is reported as a multiple of it). With --budget, the memory planner alone:
`--memory-budget B --recompute auto --emit import` (it probes the step at
several micro-batch sizes, with and without recomputation, then imports the
chosen one), against the plain import of the same run.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e", "models"))

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import zoo  # noqa: E402
from benchlib import parse_args  # noqa: E402

# vocab, width, heads, layers, context
SIZES = {
    "10M": dict(vocab=8192, d=320, heads=5, layers=6, block=128),
    "100M": dict(vocab=16384, d=768, heads=12, layers=12, block=256),
}


def timed(cmd):
    """(wall seconds, peak RSS MiB) of `cmd` under GNU time."""
    with tempfile.NamedTemporaryFile("r") as report:
        start = time.perf_counter()
        proc = subprocess.run(["/usr/bin/time", "-f", "%M", "-o", report.name] + cmd,
                              capture_output=True, text=True)
        wall = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit("failed: %s\n%s" % (" ".join(cmd), proc.stderr))
        return wall, int(report.read().split()[-1]) / 1024


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10M,100M")
    ap.add_argument("--micro-batch", type=int, default=8)
    ap.add_argument("--budget", default=None,
                    help="also time the memory planner under this budget")
    args, out, compiler, trainer = parse_args(ap)
    rows = []
    for size in args.sizes.split(","):
        config = SIZES[size]
        module = zoo.GPT(0, tied=True, **config)
        params = sum(p.numel() for p in module.parameters())
        path = os.path.join(out, "gpt%s.onnx" % size)
        if not os.path.exists(path):
            zoo.export(module, module.data(2, np.random.default_rng(0)), path, 17)
        del module
        megabytes = os.path.getsize(path) / 2**20
        start = time.perf_counter()
        onnx.load(path)
        load = time.perf_counter() - start
        nodes = len(onnx.load(path).graph.node)
        flags = ["--micro-batch", str(args.micro_batch)]
        imp = timed([compiler, path, "--emit", "import", "-o", os.devnull] + flags)
        full = timed([compiler, path, "-o", os.path.join(out, "gpt%s" % size)] + flags)
        plan = None
        if args.budget:
            plan = timed([compiler, path, "--memory-budget", args.budget, "--recompute",
                          "auto", "--emit", "import", "-o", os.devnull])
        rows.append((size, params, nodes, megabytes, load, imp, full, plan))

    print("accrue-compile on PyTorch GPTs (opset 17, training mode, micro-batch %d, AdamW)"
          % args.micro_batch)
    print("| model | params | ONNX nodes | file MiB | onnx.load s | import s (x load) "
          "| import peak MiB (x file) | compile s (x load) | compile peak MiB (x file) |")
    print("|---|---|---|---|---|---|---|---|---|")
    for size, params, nodes, mb, load, imp, full, plan in rows:
        print("| GPT-%s | %.1fM | %d | %.0f | %.2f | %.2f (%.1fx) | %.0f (%.2fx) | %.2f (%.1fx) "
              "| %.0f (%.2fx) |" % (size, params / 1e6, nodes, mb, load, imp[0], imp[0] / load,
                                    imp[1], imp[1] / mb, full[0], full[0] / load, full[1],
                                    full[1] / mb))

    if args.budget:
        print("\nThe memory planner alone: --memory-budget %s --recompute auto --emit import"
              % args.budget)
        print("| model | planner s (x import) | planner peak MiB (x file) |")
        print("|---|---|---|")
        for size, params, nodes, mb, load, imp, full, plan in rows:
            print("| GPT-%s | %.2f (%.1fx) | %.0f (%.2fx) |"
                  % (size, plan[0], plan[0] / imp[0], plan[1], plan[1] / mb))


if __name__ == "__main__":
    main()
