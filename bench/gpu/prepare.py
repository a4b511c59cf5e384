#!/usr/bin/env python3
"""Builds the bundle the GPU check runs from (see cases.py), on the
development machine: the models exported with PyTorch, their artifacts
compiled for the GPU (or, with --target cpu, for a rehearsal of the check on
this machine), the CPU references, and accrue-train.

usage: bench/gpu/prepare.py [--out .gpu] [--build build] [--target cuda]
                            [--cuda-arch sm_90] [--quick]
                            [--gpts gpt10m,gpt100m]

--quick: the MLP's equivalence checks only (what the test suite rehearses).
The bundle stays under the device tool's 64 MiB: the benchmark GPTs travel
without their initial parameters (check.py writes them from the same PyTorch
modules there) and without model.onnx.
"""
import argparse
import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import time

import numpy as np

import cases

sys.path.insert(0, os.path.join(cases.ROOT, "test", "e2e", "lib"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(cases.ROOT, ".gpu"))
    ap.add_argument("--build", default=os.path.join(cases.ROOT, "build"))
    ap.add_argument("--target", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--cuda-arch", default="sm_90")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--gpts", default=",".join(cases.GPTS),
                    help="the benchmark GPTs to build (comma-separated)")
    args = ap.parse_args()
    os.environ["ACCRUE_TOOLS"] = os.path.join(args.build, "bin")
    import accrue_e2e as e2e
    import zoo

    out = os.path.abspath(args.out)
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "bin"))
    shutil.copy2(e2e.tool("accrue-train"), os.path.join(out, "bin"))
    device = dict(target=args.target)
    if args.target == "cuda":
        device["cuda_arch"] = args.cuda_arch
    summary = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(),
               "host": platform.node(), "target": args.target,
               "commit": subprocess.run(["git", "-C", cases.ROOT, "rev-parse", "HEAD"],
                                        capture_output=True, text=True).stdout.strip(),
               "models": {}, "gpts": {}}

    rng = np.random.default_rng(0)
    names = ["mlp"] if args.quick else list(cases.MODELS)
    for name in names:
        folder = os.path.join(out, name)
        os.makedirs(folder)
        module = cases.make(name)
        data = module.data(cases.B * cases.K * max(cases.STEPS, cases.FP16_STEPS), rng)
        model = os.path.join(folder, "model.onnx")
        zoo.export(module, data, model, 17)
        np.savez(os.path.join(folder, "data.npz"), **data)
        # The device's artifacts: 4 x 8 and 1 x 32.
        e2e.compile_model(model, os.path.join(folder, "k4"), cases.B,
                          accumulation_steps=cases.K, **cases.ADAMW, **device)
        e2e.compile_model(model, os.path.join(folder, "k1"), cases.B * cases.K,
                          accumulation_steps=1, **cases.ADAMW, **device)
        # The CPU reference, trained here; and a CPU artifact for any x86-64
        # with AVX2, with a checkpoint after 2 steps, for the resumes across
        # device kinds.
        cpu = os.path.join(folder, "cpu")
        e2e.compile_model(model, cpu, cases.B, accumulation_steps=cases.K,
                          target_cpu="x86-64-v3", **cases.ADAMW)
        e2e.train(cpu, os.path.join(folder, "data.npz"), cases.STEPS,
                  export=os.path.join(folder, "cpu_trained.onnx"),
                  log=os.path.join(folder, "cpu.jsonl"))
        np.savez(os.path.join(folder, "cpu_params.npz"),
                 **e2e.initializers(os.path.join(folder, "cpu_trained.onnx")))
        os.remove(os.path.join(folder, "cpu_trained.onnx"))
        e2e.train(cpu, os.path.join(folder, "data.npz"), 2,
                  extra=["--checkpoint-dir", os.path.join(folder, "cpu_ck")])
        entry = {"steps": cases.STEPS}
        if name == "gpt":
            e2e.compile_model(model, os.path.join(folder, "bf16"), cases.B,
                              accumulation_steps=cases.K, precision="bf16",
                              **cases.ADAMW, **device)
        if name == "mlp":
            # fp16 with dynamic loss scaling: the device's artifact, and the
            # CPU's skipped steps.
            scale = cases.loss_scale_flag(cases.FP16_SCALE)
            e2e.compile_model(model, os.path.join(folder, "fp16"), cases.B,
                              accumulation_steps=cases.K, precision="fp16",
                              loss_scale=scale, **cases.ADAMW, **device)
            e2e.compile_model(model, os.path.join(folder, "cpu_fp16"), cases.B,
                              accumulation_steps=cases.K, precision="fp16",
                              loss_scale=scale, **cases.ADAMW)
            overflow = {k: v.copy() for k, v in data.items()}
            overflow["x"][cases.FP16_OVERFLOW_STEP * cases.B * cases.K] = 1e5
            np.savez(os.path.join(folder, "data_fp16.npz"), **overflow)
            e2e.train(os.path.join(folder, "cpu_fp16"), os.path.join(folder, "data_fp16.npz"),
                      cases.FP16_STEPS, log=os.path.join(folder, "cpu_fp16.jsonl"))
            shutil.rmtree(os.path.join(folder, "cpu_fp16"))
        summary["models"][name] = entry

    if not args.quick:
        for name in filter(None, args.gpts.split(",")):
            folder = os.path.join(out, name)
            os.makedirs(folder)
            module = cases.gpt(name)
            sample = module.data(2, np.random.default_rng(0))
            model = os.path.join(folder, "model.onnx")
            zoo.export(module, sample, model, 17)
            start = time.time()
            e2e.compile_model(model, os.path.join(folder, "k4"), cases.BENCH_B,
                              accumulation_steps=cases.BENCH_K, precision="bf16",
                              optimizer="adamw", lr=cases.BENCH_LR, clip_norm=1.0,
                              **device)
            compile_seconds = time.time() - start
            if name == "gpt10m":
                # One batch of b x K: the accumulation overhead's baseline.
                e2e.compile_model(model, os.path.join(folder, "big"),
                                  cases.BENCH_B * cases.BENCH_K, accumulation_steps=1,
                                  precision="bf16", optimizer="adamw",
                                  lr=cases.BENCH_LR, clip_norm=1.0, **device)
            os.remove(model)
            for art in ("k4", "big"):
                for big_file in ("init.safetensors", "model.onnx"):
                    path = os.path.join(folder, art, big_file)
                    if os.path.exists(path):
                        os.remove(path)
            params = sum(p.numel() for p in module.parameters())
            summary["gpts"][name] = {"params": params, "config": cases.GPTS[name],
                                     "compile_seconds": round(compile_seconds, 2)}
            print("%s: %.1fM parameters, compiled in %.1f s" % (
                name, params / 1e6, compile_seconds))

    size = sum(os.path.getsize(os.path.join(d, f))
               for d, _, files in os.walk(out) for f in files)
    summary["bundle_bytes"] = size
    with open(os.path.join(out, "prepare.json"), "w") as f:
        json.dump(summary, f, indent=2)
    print("bundle: %s, %.1f MiB" % (out, size / 2**20))
    if size > 60 * 2**20:
        sys.exit("the bundle is over the device tool's limit (64 MiB with the tree)")


if __name__ == "__main__":
    main()
