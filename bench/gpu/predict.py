#!/usr/bin/env python3
"""A PREDICTED H200 step time for the GPU check's GPTs (bench/gpu/cases.py:
10M and 100M parameters, bf16, AdamW + clipping, b=8, K=4), from a roofline
model of each kernel and GEMM, next to the same model's estimate of PyTorch
eager on the same step. A model, not a measurement: nothing here ran on a
GPU, and every constant below is a datasheet figure or a stated assumption.
The GPU verification issue calibrates it on a lent H200.

Accrue's step comes from the kernel report of the cuda target
(accrue-compile --kernel-report=json, sm_90). Per kernel launch it costs

    max(launch floor under CUDA graphs,
        unique bytes / (HBM bandwidth x achievable fraction),
        sectors x 32 / L2 bandwidth,
        sectors x 32 / (the SMs its blocks occupy x per-SM L2 bandwidth),
        longest per-thread chain of memory operations x a latency)

where unique bytes are the kernel's footprint (the bytes of the views it
reads and writes), sectors are (warps x executions x sectors of the first
warp's request) per access (indirect accesses: 32, one per lane), and the
chain is the report's memory operations per thread. With --counted the
counting emulator's profile (unique sectors, sectors and longest chain of
every launch, counted) replaces the static estimates, for 1- and 2-block
models at the real width, and the per-block cost is extrapolated to the
model's depth. A GEMM costs max(floor, FLOPs / (peak x efficiency by shape),
bytes / HBM), the efficiency from the wave quantization of 128x128 tiles on
132 SMs times an assumed cuBLASLt fraction of peak.

PyTorch eager's step is its op sequence for the same model and step, traced
on the CPU with the dispatcher (TorchDispatchMode: every aten op with its
real shapes and dtypes, as the profiler lists them) under bf16 autocast,
each op that launches a kernel costed as one kernel by the same model
(bytes of its inputs and outputs, FLOPs of matmuls) plus PyTorch's per-op
launch cost; the optimizer is torch.optim.AdamW(foreach=True) after
clip_grad_norm_, as the check runs it.

The test suite's CNN (test/e2e/models/zoo.py: two 3x3 convolutions, the
second grouped and strided) is predicted with --cnn, at micro-batch 16
(K = 4, bf16, AdamW + clipping), as its earlier predictions were.

usage: bench/gpu/predict.py [--build build] [--gpts gpt10m,gpt100m] [--cnn]
                            [--counted] [--out DIR] [--flag=--row-groups]
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "test", "e2e", "models")]

import numpy as np  # noqa: E402

import cases  # noqa: E402
import zoo  # noqa: E402

# --- The machine: NVIDIA H200 SXM datasheet (2024) ---------------------------
HBM_BYTES_PER_S = 4.8e12        # HBM3e, datasheet
BF16_FLOPS = 989e12             # dense bf16/fp16 tensor cores, datasheet
FP32_FLOPS = 67e12              # fp32 CUDA cores (GEMMs on f32 inputs), datasheet
SMS = 132                       # H100/H200 SXM
# --- Assumptions (not measured here; the GPU check calibrates them) ----------
HBM_EFFICIENCY = 0.85           # streaming kernels reach ~85-90% of HBM peak
L2_BYTES_PER_S = 7e12           # published H100 L2 microbenchmarks: 5.5-7.5 TB/s
SM_L2_BYTES_PER_S = 64 * 1.98e9 # 64 bytes per clock per SM at the 1.98 GHz boost
LAUNCH_FLOOR_S = 1.5e-6         # back-to-back kernel nodes of a CUDA graph
GEMM_FLOOR_S = 3e-6             # one cuBLASLt call in a graph
CHAIN_LATENCY_S = 0.25e-6       # a dependent global access (L2 hit to DRAM)
CUBLAS_PEAK_FRACTION = 0.7      # cuBLASLt on large, full-wave shapes
EAGER_OP_S = 6e-6               # PyTorch eager per op: dispatcher + launch
TILE = 128                      # cuBLASLt's tile edge for the wave model
CNN_B = 16                      # the CNN's micro-batch (its earlier predictions')


def gemm_seconds(m, n, k, batch, element_bytes, low_precision, output_bytes=4):
    """One GEMM call: D = A B + beta C; an fp32 D is read and written, a
    bf16 or f16 one (beta 0) only written."""
    flops = 2.0 * m * n * k * batch
    tiles = math.ceil(m / TILE) * math.ceil(n / TILE) * batch
    waves = math.ceil(tiles / SMS)
    efficiency = CUBLAS_PEAK_FRACTION * tiles / (waves * SMS) * min(1.0, k / 64)
    peak = BF16_FLOPS if low_precision else FP32_FLOPS
    moved = (m * k + k * n) * batch * element_bytes + \
        (2 * 4 if output_bytes == 4 else output_bytes) * m * n * batch
    return max(GEMM_FLOOR_S, flops / (peak * efficiency),
               moved / (HBM_BYTES_PER_S * HBM_EFFICIENCY))


def kernel_terms(unique_bytes, sectors, chain, blocks):
    """The roofline's terms for one launch, by name."""
    sms = max(1, min(SMS, blocks))
    return {
        "launch": LAUNCH_FLOOR_S,
        "hbm": unique_bytes / (HBM_BYTES_PER_S * HBM_EFFICIENCY),
        "l2": sectors * 32 / L2_BYTES_PER_S,
        "sms": sectors * 32 / (sms * SM_L2_BYTES_PER_S),
        "chain": chain * CHAIN_LATENCY_S,
    }


def static_launch(kernel):
    """A kernel's counts per launch as the static report estimates them."""
    threads = max(kernel["threads"], 1)
    warps = math.ceil(threads / 32)
    sectors = 0
    for access in kernel["accesses"]:
        per_request = access["sectors_per_request"]
        if per_request is None:
            per_request = 1 if access["pattern"] == "single-thread" else 32
        sectors += warps * access["executions_per_thread"] * per_request
    blocks = kernel["grid"][0] * kernel["grid"][1] * kernel["grid"][2]
    return kernel["footprint_bytes"], sectors, kernel["memory_ops_per_thread"], blocks


class Totals:
    """Predicted seconds per step, by what bounds each launch."""

    def __init__(self):
        self.seconds = {"launch": 0.0, "hbm": 0.0, "l2": 0.0, "sms": 0.0, "chain": 0.0,
                        "gemm": 0.0}
        self.kernels = 0
        self.gemms = 0
        self.bytes = 0

    def add_kernel(self, terms, launches, unique_bytes):
        bound = max(terms, key=terms.get)
        self.seconds[bound] += terms[bound] * launches
        self.kernels += launches
        self.bytes += unique_bytes * launches

    def add_gemm(self, seconds, launches):
        self.seconds["gemm"] += seconds * launches
        self.gemms += launches

    def total(self):
        return sum(self.seconds.values())

    def scaled(self, other, factor):
        """self + factor x (other - self), per category (extrapolation)."""
        out = Totals()
        for key in self.seconds:
            out.seconds[key] = self.seconds[key] + factor * (other.seconds[key] -
                                                             self.seconds[key])
        out.kernels = round(self.kernels + factor * (other.kernels - self.kernels))
        out.gemms = round(self.gemms + factor * (other.gemms - self.gemms))
        out.bytes = self.bytes + factor * (other.bytes - self.bytes)
        return out


def accrue_totals(report, profile=None):
    totals = Totals()
    counted = {k["name"]: k for k in profile["kernels"]} if profile else {}
    for kernel in report["kernels"]:
        launches = kernel["launches_per_step"]
        unique, sectors, chain, blocks = static_launch(kernel)
        c = counted.get(kernel["name"])
        if c and c["launches"]:
            per = c["launches"]
            unique = c["unique_bytes"] / per
            sectors = c["sectors"] / per
            chain = c["longest_chain"]
        totals.add_kernel(kernel_terms(unique, sectors, chain, blocks), launches, unique)
    for gemm in report["gemms"]:
        # f32 inputs holding bf16 values run on the tensor cores
        # (cuBLASLt's 32F_FAST_16BF) but move 4 bytes per element.
        low = gemm["multiply_type"] in ("bf16", "f16")
        seconds = gemm_seconds(gemm["m"], gemm["n"], gemm["k"], gemm["batch"],
                               2 if gemm["input_type"] in ("bf16", "f16") else 4, low,
                               2 if gemm.get("output_type") in ("bf16", "f16") else 4)
        totals.add_gemm(seconds, gemm["launches_per_step"])
    return totals


# --- PyTorch eager ------------------------------------------------------------

# Ops that launch no kernel (views, metadata, allocation).
NO_KERNEL = {"view", "_unsafe_view", "t", "transpose", "expand", "permute", "as_strided",
             "slice", "select", "unsqueeze", "squeeze", "detach", "alias", "empty",
             "empty_like", "empty_strided", "lift_fresh", "split", "split_with_sizes",
             "unbind", "chunk", "_reshape_alias", "reshape", "numpy_T", "is_same_size",
             "size", "stride", "resize_", "set_",
             # PyTorch 1.13's AdamW reads its step counts with .item(); 2.x's
             # foreach AdamW keeps them on the host.
             "_local_scalar_dense", "_record_function_enter", "_record_function_exit"}
MATMULS = {"mm", "addmm", "bmm", "baddbmm"}


def eager_trace(module, data, micro_batches):
    """[(op, bytes, flops, low precision)] of `micro_batches` forward and
    backward passes under bf16 autocast, then clipping and AdamW."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = []

    def nbytes(x):
        return x.numel() * x.element_size() if isinstance(x, torch.Tensor) else 0

    def flatten(values):
        for v in values:
            if isinstance(v, (list, tuple)):
                yield from flatten(v)
            else:
                yield v

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = func.__name__.split(".")[0]
            if name.rstrip("_") in NO_KERNEL or name in NO_KERNEL:
                return result
            tensors = [a for a in flatten(args) if isinstance(a, torch.Tensor)]
            outputs = [r for r in flatten(result if isinstance(result, (list, tuple))
                                          else [result]) if isinstance(r, torch.Tensor)]
            moved = sum(map(nbytes, tensors)) + sum(map(nbytes, outputs))
            flops, low = 0.0, any(t.dtype in (torch.bfloat16, torch.float16) for t in tensors)
            if name in MATMULS:
                a, b = tensors[-2], tensors[-1]
                flops = 2.0 * a.numel() * b.shape[-1]
            if name.startswith("_foreach"):
                # multi_tensor_apply: about one launch per 24 tensors.
                lists = [a for a in args if isinstance(a, (list, tuple))]
                count = max((len(x) for x in lists), default=1)
                for _ in range(max(1, math.ceil(count / 24)) - 1):
                    ops.append((name, 0, 0.0, low))
            ops.append((name, moved, flops, low))
            return result

    params = [p for p in module.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cases.BENCH_LR, foreach=True)
    tensors = {k: torch.as_tensor(v) for k, v in data.items()}

    def step():
        for _ in range(micro_batches):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = module(*tensors.values())
            loss.backward()
        # clip_grad_norm_ as PyTorch 2.x runs it on GPUs (foreach norms and
        # scaling; 1.13's loops over the tensors).
        grads = [p.grad for p in params]
        norms = (torch._foreach_norm(grads) if hasattr(torch, "_foreach_norm")
                 else [torch.linalg.vector_norm(g) for g in grads])
        total = torch.linalg.vector_norm(torch.stack(norms))
        torch._foreach_mul_(grads, torch.clamp(1.0 / (total + 1e-6), max=1.0).item())
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # the optimizer's state exists from the first step on
    with Trace():
        step()
    return ops


def eager_totals(ops):
    totals = Totals()
    for name, moved, flops, low in ops:
        if flops:
            peak = BF16_FLOPS if low else FP32_FLOPS
            seconds = max(EAGER_OP_S, flops / (peak * CUBLAS_PEAK_FRACTION),
                          moved / (HBM_BYTES_PER_S * HBM_EFFICIENCY))
            totals.add_gemm(seconds, 1)
            continue
        totals.add_kernel({"launch": EAGER_OP_S,
                           "hbm": moved / (HBM_BYTES_PER_S * HBM_EFFICIENCY)}, 1, moved)
    return totals


# --- Models -------------------------------------------------------------------


def export(name, module, out):
    model = os.path.join(out, name + ".onnx")
    if not os.path.exists(model):
        zoo.export(module, module.data(2, np.random.default_rng(0)), model, 17)
    return model


def compile_report(compiler, model, art, extra, micro_batch=cases.BENCH_B):
    cmd = [compiler, model, "-o", art, "--micro-batch", str(micro_batch),
           "--accumulation-steps", str(cases.BENCH_K), "--precision", "bf16",
           "--optimizer", "adamw", "--clip-norm", "1"] + extra
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        sys.exit(proc.stderr)
    return json.load(open(os.path.join(art, "step.json")))["kernel_report"]


def counted_totals(build, name, layers, out, flags=()):
    """The counting emulator's totals of a `layers`-block model at `name`'s
    width, one optimizer step."""
    spec = dict(cases.GPTS[name], layers=layers)
    module = zoo.GPT(0, tied=True, **spec)
    tag = "%s_%dblock" % (name, layers)
    model = export(tag, module, out)
    art = os.path.join(out, tag + "_counted")
    compiler = os.path.join(build, "bin", "accrue-compile")
    report = compile_report(compiler, model, art, ["--target", "cuda-emulated",
                                                   "--count-accesses"] + list(flags))
    data = os.path.join(out, tag + ".npz")
    np.savez(data, **module.data(cases.BENCH_B * cases.BENCH_K, np.random.default_rng(1)))
    profile = os.path.join(out, tag + ".profile.json")
    subprocess.run([os.path.join(build, "bin", "accrue-train"), art, "--data", data,
                    "--steps", "1", "--no-progress", "--kernel-profile", profile],
                   check=True, capture_output=True)
    return accrue_totals(report, json.load(open(profile)))


def predict(args, name, out):
    import torch
    compiler = os.path.join(args.build, "bin", "accrue-compile")
    module, micro_batch = ((zoo.CNN(2), CNN_B) if name == "cnn"
                           else (cases.gpt(name), cases.BENCH_B))
    model = export(name, module, out)
    report = compile_report(compiler, model, os.path.join(out, name),
                            ["--target", "cuda", "--cuda-arch", "sm_90", "--kernel-report=json"] +
                            args.flag, micro_batch)
    ours = accrue_totals(report)
    counted = None
    if args.counted and name != "cnn":
        one = counted_totals(args.build, name, 1, out, args.flag)
        two = counted_totals(args.build, name, 2, out, args.flag)
        counted = one.scaled(two, cases.GPTS[name]["layers"] - 1)
    torch.manual_seed(0)
    data = module.data(micro_batch, np.random.default_rng(2))
    eager = eager_totals(eager_trace(module, data, cases.BENCH_K))
    return ours, counted, eager


def row(label, totals):
    s = totals.seconds
    return "| %s | %.1f | %d | %d | %.2f | %.1f | %.1f | %.1f | %.1f |" % (
        label, totals.total() * 1e3, totals.kernels, totals.gemms, totals.bytes / 1e9,
        s["launch"] * 1e3, (s["hbm"] + s["l2"] + s["sms"]) * 1e3, s["chain"] * 1e3,
        s["gemm"] * 1e3)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(HERE, "..", "..", "build"))
    parser.add_argument("--gpts", default="gpt10m,gpt100m")
    parser.add_argument("--cnn", action="store_true",
                        help="also the test suite's CNN (micro-batch %d)" % CNN_B)
    parser.add_argument("--counted", action="store_true",
                        help="also extrapolate from counted 1- and 2-block models")
    parser.add_argument("--out")
    parser.add_argument("--flag", action="append", default=[],
                        help="a further accrue-compile flag for Accrue's step "
                             "(--flag=--row-groups)")
    args = parser.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="accrue-predict-")
    os.makedirs(out, exist_ok=True)
    print("PREDICTED H200 optimizer step (a roofline model, not a measurement): "
          "b=%d (the CNN %d), K=%d, bf16, AdamW + clipping; ms per step"
          % (cases.BENCH_B, CNN_B, cases.BENCH_K))
    print()
    print("| model | predicted ms | kernels | GEMMs | unique GB | launch-bound ms "
          "| bandwidth-bound ms | chain-bound ms | GEMM ms |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.gpts.split(",") + (["cnn"] if args.cnn else []):
        ours, counted, eager = predict(args, name, out)
        print(row("%s Accrue (static report)" % name, ours))
        if counted:
            print(row("%s Accrue (counted, 1 and 2 blocks extrapolated)" % name, counted))
        print(row("%s PyTorch eager (same model)" % name, eager))


if __name__ == "__main__":
    main()
