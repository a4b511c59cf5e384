#!/usr/bin/env python3
"""Fused vs unfused clipping + optimizer on a 10M-parameter arena.

usage: bench/fused_update.py [--build build] [--steps 100] [--runs 5] [--out DIR]

The model is one MatMul with a 2560 x 4096 weight (10.5M parameters) and a
mean squared error, trained at micro-batch 1, so the optimizer's passes
over the arenas dominate the step. Three artifacts from the same model:
`--optimizer none` (forward, backward and accumulation only: the baseline),
AdamW with global-norm clipping fused by train-fuse-clip-optimizer (the
default) and the same with `--no-fuse-optimizer`.

Bytes moved per parameter are read off the step on buffers (`--emit
linalg`): every linalg op after the micro-batch loop that touches a whole
arena reads its arena inputs and the outputs its body reads, and writes
its outputs. Time per step is the best of five interleaved `accrue-train`
runs; numpy's copy bandwidth, measured in the same run, says what the
difference in bytes should cost.
"""
import argparse
import os
import re
import subprocess
import time

import numpy as np

from benchlib import build_linear_model, parse_args, seconds_per_step, write_linear_data

IN, OUT = 2560, 4096
PARAMS = IN * OUT


def arena_bytes_per_param(linalg_ir):
    """Bytes per parameter moved by the whole-arena linalg ops that follow
    the micro-batch loop of @train_step."""
    step = linalg_ir[linalg_ir.index("func.func @train_step"):]
    after_loop = step[step.index("train.microbatch_loop"):]
    arena = "memref<%dxf32>" % PARAMS
    total = 0
    ops = []
    for match in re.finditer(r"linalg\.(generic|fill)\b(.*?)(?=\n    [^\s^]|\Z)", after_loop, re.S):
        kind, text = match.group(1), match.group(0)
        head = text.split("\n")[0]
        ins = re.search(r"ins\(([^:]*):([^)]*)\)", head)
        outs = re.search(r"outs\(([^:]*):([^)]*)\)", head)
        in_types = ins.group(2).split(",") if ins else []
        out_names = [n.strip() for n in outs.group(1).split(",")] if outs else []
        out_types = outs.group(2).split(",") if outs else []
        reads = sum(arena in t for t in in_types)
        writes = sum(arena in t for t in out_types)
        if kind == "generic" and writes:
            # An output is read when its block argument is used in the body.
            block = re.search(r"\^bb0\(([^)]*)\)", text)
            args = [a.split(":")[0].strip() for a in block.group(1).split(",")]
            body = text[block.end():]
            out_args = args[len(in_types):]
            for name, ty, arg in zip(out_names, out_types, out_args):
                if arena in ty and re.search(re.escape(arg) + r"\b", body):
                    reads += 1
        if reads or writes:
            ops.append("%s: %d arena reads, %d writes" % (kind, reads, writes))
            total += 4 * (reads + writes)
    return total, ops


def copy_bandwidth():
    """numpy's copy of a 42 MB array, bytes read + written per second (the
    named baseline: what this machine's memory moves)."""
    a = np.ones(PARAMS, np.float32)
    b = np.empty_like(a)
    best = float("inf")
    for _ in range(10):
        start = time.perf_counter()
        np.copyto(b, a)
        best = min(best, time.perf_counter() - start)
    return 2 * a.nbytes / best


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--runs", type=int, default=5)
    args, out, compiler, trainer = parse_args(ap)
    model = os.path.join(out, "linear.onnx")
    build_linear_model(model, IN, OUT)
    data = os.path.join(out, "data.npz")
    write_linear_data(data, 64, IN, OUT)

    variants = [("none (baseline)", ["--optimizer", "none"]),
                ("AdamW + clip, fused", ["--optimizer", "adamw", "--clip-norm", "1.0"]),
                ("AdamW + clip, unfused", ["--optimizer", "adamw", "--clip-norm", "1.0",
                                           "--no-fuse-optimizer"])]
    rows = []
    for name, flags in variants:
        tag = re.sub(r"\W+", "_", name)
        common = [compiler, model, "--micro-batch", "1"] + flags
        subprocess.run(common + ["-o", os.path.join(out, tag)], check=True)
        linalg = os.path.join(out, tag + ".linalg.mlir")
        subprocess.run(common + ["--emit", "linalg", "-o", linalg], check=True)
        moved, ops = arena_bytes_per_param(open(linalg).read())
        rows.append([name, moved, ops, tag, float("inf")])
    # Interleaved runs, best of each: the machine's noise hits all alike.
    for _ in range(args.runs):
        for row in rows:
            row[4] = min(row[4], seconds_per_step(
                [trainer, os.path.join(out, row[3]), "--data", data], args.steps))
    bandwidth = copy_bandwidth()

    print("Clipping + AdamW over a %.1fM-parameter arena (micro-batch 1, K=1; best of %d "
          "runs of %d steps)" % (PARAMS / 1e6, args.runs, args.steps))
    print("| pipeline | bytes per parameter after accumulation | step ms |")
    print("|---|---|---|")
    for name, moved, ops, tag, step in rows:
        print("| %s | %d | %.2f |" % (name, moved, step * 1e3))
    fused, unfused = rows[1], rows[2]
    saved_bytes = (unfused[1] - fused[1]) * PARAMS
    print("\nfused / unfused: %.2fx the bytes; the step saves %.2f ms, against %.2f ms "
          "for moving the %.0f MB difference at numpy's copy bandwidth (%.1f GB/s, "
          "same run)" % (fused[1] / unfused[1], (unfused[4] - fused[4]) * 1e3,
                         saved_bytes / bandwidth * 1e3, saved_bytes / 1e6, bandwidth / 1e9))
    for name, moved, ops, tag, step in rows[1:]:
        print("%s:\n  %s" % (name, "\n  ".join(ops)))


if __name__ == "__main__":
    main()
