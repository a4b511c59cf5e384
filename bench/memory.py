#!/usr/bin/env python3
"""Peak memory: the plan against accrue-train's measured peak, and step time
against peak memory with and without activation recomputation.

usage: bench/memory.py [--build build] [--out DIR] [--steps 3]
                       [--models mlp,cnn,gpt] [--no-recompute] [--no-budget]

1. For the MLP, the CNN and the GPT of bench/vs_pytorch.py at three
   micro-batch sizes each: the peak `accrue-compile --plan` predicts (its
   arenas, activations and batch inputs) plus the runtime's own resident
   memory and the dataset, against the maximum resident set size of
   `accrue-train` (GNU time). The runtime's own memory is measured in the
   same run: accrue-train on a model with a few parameters. Predicted =
   runtime + data + plan.
2. The GPT at micro-batch 8 and 16 (E = 32) with --recompute none and
   auto: step time (all cores), planned and measured peak.
3. The GPT under --memory-budget 200MiB, E = 32, with and without
   --recompute auto: the micro-batch each chooses, step time and peak.
Baselines in the same run: the runtime's own memory (1) and the step
without recomputation (2, 3).
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e", "models"))

import vs_pytorch  # noqa: E402
from benchlib import build_linear_model, parse_args, write_linear_data  # noqa: E402

MIB = 2 ** 20
SIZES = {"mlp": [16, 32, 64], "cnn": [8, 16, 32], "gpt": [4, 8, 16]}


def compile_step(compiler, model, art, *flags):
    proc = subprocess.run([compiler, model, "-o", art, "--optimizer", "adamw",
                           "--clip-norm", "1.0", "--plan=json"] + list(flags),
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("accrue-compile failed:\n" + proc.stderr)
    with open(os.path.join(art, "step.json")) as f:
        step = json.load(f)
    return step, proc.stderr


def train(trainer, art, npz, steps, log):
    """(max RSS in bytes, mean step ms after the first step)."""
    if os.path.exists(log):
        os.remove(log)
    proc = subprocess.run(["/usr/bin/time", "-f", "maxrss_kb=%M", trainer, art, "--data", npz,
                           "--steps", str(steps + 1), "--no-progress", "--flush-denormals",
                           "--log", log], capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit("accrue-train failed:\n" + proc.stderr)
    kb = int(proc.stderr.strip().splitlines()[-1].split("=")[1])
    with open(log) as f:
        times = [json.loads(line)["time_ms"] for line in f][1:]
    return kb * 1024, sum(times) / len(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--models", default="mlp,cnn,gpt")
    ap.add_argument("--no-recompute", action="store_true")
    ap.add_argument("--no-budget", action="store_true")
    args, out, compiler, trainer = parse_args(ap)

    # The runtime's own resident memory: a model of 64 parameters.
    tiny = os.path.join(out, "tiny.onnx")
    build_linear_model(tiny, 8, 8)
    tiny_npz = os.path.join(out, "tiny.npz")
    write_linear_data(tiny_npz, 64, 8, 8)
    compile_step(compiler, tiny, os.path.join(out, "tiny"), "--micro-batch", "8")
    runtime, _ = train(trainer, os.path.join(out, "tiny"), tiny_npz, 1,
                       os.path.join(out, "tiny.jsonl"))
    print("accrue-train's own peak RSS: %.1f MiB" % (runtime / MIB))

    models = {}
    for name in args.models.split(","):
        _, data, _, _, path = vs_pytorch.build(name, out, 4 * args.steps)
        npz = os.path.join(out, name + ".npz")
        np.savez(npz, **data)
        models[name] = (path, npz, sum(a.nbytes for a in data.values()))

    print("\n| model | b x K | planned peak MiB | predicted MiB | measured max RSS MiB "
          "| measured / predicted |")
    print("|---|---|---|---|---|---|")
    for name, (path, npz, data_bytes) in models.items():
        for b in SIZES[name]:
            k = max(64 // b, 1) if name != "gpt" else 32 // b
            art = os.path.join(out, "%s_b%d" % (name, b))
            step, _ = compile_step(compiler, path, art, "--micro-batch", str(b),
                                   "--accumulation-steps", str(k))
            planned = step["memory_plan"]["peak_bytes"]
            predicted = runtime + data_bytes + planned
            rss, _ = train(trainer, art, npz, args.steps, art + ".jsonl")
            print("| %s | %d x %d | %.1f | %.1f | %.1f | %.3f |" % (
                name, b, k, planned / MIB, predicted / MIB, rss / MIB, rss / predicted),
                flush=True)

    if "gpt" in models and not args.no_recompute:
        path, npz, _ = models["gpt"]
        print("\n| GPT | recompute | planned A per sample MiB | planned peak MiB "
              "| measured max RSS MiB | step ms | step time / none |")
        print("|---|---|---|---|---|---|---|")
        for b in [8, 16]:
            base = None
            for mode in ["none", "auto"]:
                art = os.path.join(out, "gpt_b%d_%s" % (b, mode))
                step, _ = compile_step(compiler, path, art, "--micro-batch", str(b),
                                       "--effective-batch", "32", "--recompute", mode)
                plan = step["memory_plan"]
                rss, ms = train(trainer, art, npz, args.steps, art + ".jsonl")
                base = base or ms
                print("| b=%d, K=%d | %s | %.1f | %.1f | %.1f | %.1f | %.2f |" % (
                    b, 32 // b, mode, plan["activation_bytes_per_sample"] / MIB,
                    plan["peak_bytes"] / MIB, rss / MIB, ms, ms / base), flush=True)

    if "gpt" in models and not args.no_budget:
        path, npz, _ = models["gpt"]
        print("\n| --memory-budget 200MiB, E = 32 | chosen | planned peak MiB "
              "| measured max RSS MiB | step ms |")
        print("|---|---|---|---|---|")
        for mode in ["none", "auto"]:
            art = os.path.join(out, "gpt_budget_%s" % mode)
            step, said = compile_step(compiler, path, art, "--memory-budget", "200MiB",
                                      "--effective-batch", "32", "--recompute", mode)
            rss, ms = train(trainer, art, npz, args.steps, art + ".jsonl")
            print("| --recompute %s | b=%d, K=%d | %.1f | %.1f | %.1f |" % (
                mode, step["micro_batch"], step["accumulation_steps"],
                step["memory_plan"]["peak_bytes"] / MIB, rss / MIB, ms), flush=True)
            for line in said.splitlines():
                if "remark" in line:
                    print("    " + line.split("remark: ", 1)[1])


if __name__ == "__main__":
    main()
