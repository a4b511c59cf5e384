#!/usr/bin/env python3
"""The GPU check: runs the bundle prepare.py built (see cases.py) on the GPU
machine and writes a JSON summary and a table of every check and
measurement against its goal (the GPU verification issue's list).

usage: bench/gpu/check.py [--bundle .gpu] [--out DIR] [--device cuda|cpu]
                          [--quick]

--device cpu rehearses everything but the GPU on this machine, from a bundle
prepared with --target cpu (PyTorch on the CPU; no bf16 autocast check).
Needs python3 with torch, numpy and onnx (the GPU machine's image has them).
Exit status 0 when every check ran and met its goal, 1 otherwise.
"""
import argparse
import json
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
import torch
from onnx import numpy_helper

import cases

RESULTS = []


def record(group, name, value, goal, passed, unit="", note=""):
    RESULTS.append(dict(group=group, name=name, value=value, goal=goal,
                        passed=bool(passed), unit=unit, note=note))
    mark = "ok  " if passed else "FAIL"
    shown = "%.4g" % value if isinstance(value, float) else str(value)
    print("%s %-12s %-58s %12s %s  (goal %s)" % (mark, group, name, shown, unit, goal),
          flush=True)


class Runner:
    def __init__(self, bundle, device, work):
        self.bundle, self.device, self.work = bundle, device, work
        self.train = os.path.join(bundle, "bin", "accrue-train")

    def run(self, artifact, data, steps, extra=(), timeout=300, env=None):
        cmd = [self.train, artifact, "--data", data, "--steps", str(steps),
               "--no-progress"] + list(extra)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env=dict(os.environ, **(env or {})))
        if proc.returncode != 0:
            raise RuntimeError("%s failed:\n%s%s" % (" ".join(cmd), proc.stdout,
                                                     proc.stderr))
        return proc

    def trained(self, tag, artifact, data, steps, extra=(), env=None):
        """Trains and returns (parameters, log records)."""
        exported = os.path.join(self.work, tag + ".onnx")
        log = os.path.join(self.work, tag + ".jsonl")
        self.run(artifact, data, steps, ["--export", exported, "--log", log] + list(extra),
                 env=env)
        model = onnx.load(exported)
        params = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        return params, read_log(log)


def read_log(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def worst_relative(got, want, names=None, floor=1e-6):
    """max over elements of |got - want| / max(|want|, floor)."""
    worst = 0.0
    for name in names or want:
        a = np.asarray(got[name], np.float64)
        b = np.asarray(want[name], np.float64)
        worst = max(worst, float(np.max(np.abs(a - b) / np.maximum(np.abs(b), floor))))
    return worst


def within(got, want, rtol, atol):
    """max over elements of |got - want| / (atol + rtol |want|): <= 1 passes."""
    worst = 0.0
    for name in want:
        a = np.asarray(got[name], np.float64)
        b = np.asarray(want[name], np.float64)
        worst = max(worst, float(np.max(np.abs(a - b) / (atol + rtol * np.abs(b)))))
    return worst


def comparable(params):
    import zoo
    return {n: zoo.comparable(n, v) for n, v in params.items()}


def update_error(got, want, initial):
    """|| (got - initial) - (want - initial) || / || want - initial ||: how far
    one run's parameter update is from the other's."""
    num = den = 0.0
    for name in want:
        a = np.asarray(got[name], np.float64) - initial[name]
        b = np.asarray(want[name], np.float64) - initial[name]
        num += float(np.sum((a - b) ** 2))
        den += float(np.sum(b ** 2))
    return math.sqrt(num / max(den, 1e-30))


class ManualScaler:
    """GradScaler's rule, for PyTorch builds without torch.amp.GradScaler on
    this device (the CPU rehearsal)."""

    def __init__(self, scale):
        self.scale_value, self.rule, self.streak = scale["init"], scale, 0
        self.found_inf = False

    def scale(self, loss):
        return loss * self.scale_value

    def unscale_(self, opt):
        grads = [p.grad for group in opt.param_groups for p in group["params"]
                 if p.grad is not None]
        for g in grads:
            g.div_(self.scale_value)
        self.found_inf = not all(bool(torch.isfinite(g).all()) for g in grads)

    def get_scale(self):
        return self.scale_value

    def step(self, opt):
        if not self.found_inf:
            opt.step()

    def update(self):
        if self.found_inf:
            self.scale_value *= self.rule["backoff"]
            self.streak = 0
            return
        self.streak += 1
        if self.streak == self.rule["interval"]:
            self.scale_value *= self.rule["growth"]
            self.streak = 0


def gradient_scaler(device, scale):
    if device == "cuda" and hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler(device, init_scale=scale["init"],
                                    growth_factor=scale["growth"],
                                    backoff_factor=scale["backoff"],
                                    growth_interval=scale["interval"])
    return ManualScaler(scale)


def torch_reference(name, data, device, steps, precision="fp32", scale=None):
    """PyTorch on `device` training the same module: a manual accumulation
    loop with exact normalization (each micro-batch's mean times its item
    count over the window's), clip_grad_norm_, AdamW. bf16: autocast; fp16:
    autocast with GradScaler. Returns (parameters, [skipped per step])."""
    module = cases.make(name).to(device)
    opt = torch.optim.AdamW(module.parameters(), lr=cases.LR, weight_decay=cases.WD)
    scaler = None
    if scale:
        scaler = gradient_scaler(device, scale)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)
    e = cases.B * cases.K
    skipped = []
    for step in range(steps):
        window = {k: v[step * e:(step + 1) * e] for k, v in data.items()}
        total = cases.item_count(name, window)
        opt.zero_grad()
        for k in range(cases.K):
            micro = {n: v[k * cases.B:(k + 1) * cases.B] for n, v in window.items()}
            inputs = [torch.tensor(v, device=device) for v in micro.values()]
            with torch.autocast(device_type=device, dtype=dtype, enabled=dtype is not None):
                loss = module(*inputs) * cases.item_count(name, micro) / total
            (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(module.parameters(), cases.CLIP)
        if scaler:
            before = scaler.get_scale()
            scaler.step(opt)
            scaler.update()
            skipped.append(scaler.get_scale() < before)
        else:
            opt.step()
    params = {n: p.detach().float().cpu().numpy() for n, p in module.named_parameters()}
    return params, skipped


def check_equivalence(runner, name, device, folder):
    data_path = os.path.join(folder, "data.npz")
    data = dict(np.load(data_path))
    initial = {n: p.detach().numpy().astype(np.float64)
               for n, p in cases.make(name).named_parameters()}
    k4, log4 = runner.trained(name + "_k4", os.path.join(folder, "k4"), data_path, cases.STEPS)
    k1, _ = runner.trained(name + "_k1", os.path.join(folder, "k1"), data_path, cases.STEPS)
    record("equivalence", "%s: K=4 b=8 vs K=1 b=32, %d AdamW+clip steps" % (name, cases.STEPS),
           within(comparable(k4), comparable(k1), 1e-5, 1e-7), "<= 1 (rtol 1e-5)",
           within(comparable(k4), comparable(k1), 1e-5, 1e-7) <= 1)
    cpu = dict(np.load(os.path.join(folder, "cpu_params.npz")))
    v = within(comparable(k4), comparable(cpu), 1e-4, 1e-6)
    record("equivalence", "%s: %s artifact vs CPU artifact" % (name, device), v,
           "<= 1 (rtol 1e-4)", v <= 1)
    # (AdamW turns each side's rounding in near-zero gradients into
    # +-lr-sized steps: an absolute 1e-5 besides.)
    want, _ = torch_reference(name, data, device, cases.STEPS)
    v = within(comparable(k4), comparable(want), 1e-4, 1e-5)
    record("equivalence", "%s: vs PyTorch fp32 on %s" % (name, device), v,
           "<= 1 (rtol 1e-4, atol 1e-5)", v <= 1)
    if any(r.get("device_syncs", 0) for r in log4):
        record("equivalence", "%s: device synchronizations in steps" % name,
               sum(r["device_syncs"] for r in log4), "0", False)

    # Checkpoints across device kinds: this device's 2 steps resumed on the
    # CPU, the CPU's 2 steps resumed here; each ends where 3 steps on one
    # device do.
    ck = os.path.join(runner.work, name + "_ck")
    shutil.rmtree(ck, ignore_errors=True)
    runner.run(os.path.join(folder, "k4"), data_path, 2, ["--checkpoint-dir", ck])
    resumed, _ = runner.trained(name + "_to_cpu", os.path.join(folder, "cpu"), data_path,
                                cases.STEPS, ["--checkpoint-dir", ck, "--resume"])
    v = within(comparable(resumed), comparable(k4), 1e-4, 1e-6)
    record("checkpoint", "%s: written on %s, resumed on the CPU" % (name, device), v,
           "<= 1 (rtol 1e-4)", v <= 1)
    ck2 = os.path.join(runner.work, name + "_ck_cpu")
    shutil.rmtree(ck2, ignore_errors=True)
    shutil.copytree(os.path.join(folder, "cpu_ck"), ck2)
    resumed, _ = runner.trained(name + "_from_cpu", os.path.join(folder, "k4"), data_path,
                                cases.STEPS, ["--checkpoint-dir", ck2, "--resume"])
    v = within(comparable(resumed), comparable(cpu), 1e-4, 1e-6)
    record("checkpoint", "%s: written on the CPU, resumed on %s" % (name, device), v,
           "<= 1 (rtol 1e-4)", v <= 1)

    if name == "gpt" and device == "cuda":
        got, _ = runner.trained("gpt_bf16", os.path.join(folder, "bf16"), data_path,
                                cases.STEPS)
        want, _ = torch_reference(name, data, device, cases.STEPS, precision="bf16")
        v = update_error(comparable(got), comparable(want),
                         {n: v for n, v in comparable(initial).items()})
        record("equivalence", "gpt: bf16 vs PyTorch bf16 autocast (update rel. error)",
               v, "<= 0.1", v <= 0.1)
    if name == "mlp":
        fp16_path = os.path.join(folder, "data_fp16.npz")
        got, log = runner.trained("mlp_fp16", os.path.join(folder, "fp16"), fp16_path,
                                  cases.FP16_STEPS)
        cpu_log = read_log(os.path.join(folder, "cpu_fp16.jsonl"))
        mine = [bool(r["skipped"]) for r in log]
        theirs = [bool(r["skipped"]) for r in cpu_log]
        record("equivalence", "mlp fp16: skipped steps (an overflow in step 3) = CPU's",
               "".join("s" if s else "." for s in mine), "".join(
                   "s" if s else "." for s in theirs), mine == theirs and any(mine))
        if device != "cuda":
            return  # PyTorch has no fp16 autocast on the CPU
        want, torch_skipped = torch_reference(name, dict(np.load(fp16_path)), device,
                                              cases.FP16_STEPS, precision="fp16",
                                              scale=cases.FP16_SCALE)
        record("equivalence", "mlp fp16: skipped steps = PyTorch GradScaler's",
               "".join("s" if s else "." for s in mine),
               "".join("s" if s else "." for s in torch_skipped), mine == torch_skipped)
        v = update_error(got, want, initial)
        record("equivalence", "mlp fp16: vs PyTorch (update rel. error)", v, "<= 0.1",
               v <= 0.1)


def write_safetensors(path, arrays):
    header, offset = {}, 0
    for name, a in arrays.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for a in arrays.values():
            f.write(np.ascontiguousarray(a, np.float32).tobytes())


def median_ms(records, warmup):
    times = [r["time_ms"] for r in records[warmup:]]
    return statistics.median(times)


def torch_step_ms(module, data, device, steps, warmup):
    """PyTorch eager: bf16 autocast, K micro-batches with loss / K,
    clip_grad_norm_, AdamW (fused on CUDA); the median step time."""
    opt = torch.optim.AdamW(module.parameters(), lr=cases.BENCH_LR,
                            **({"fused": True} if device == "cuda" else {}))
    idx = torch.tensor(data["idx"], device=device)
    targets = torch.tensor(data["targets"], device=device)
    b, k = cases.BENCH_B, cases.BENCH_K
    times = []
    for step in range(warmup + steps):
        if device == "cuda":
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        else:
            t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        for m in range(k):
            s = slice((step * k + m) * b, (step * k + m + 1) * b)
            with torch.autocast(device_type=device, dtype=torch.bfloat16):
                loss = module(idx[s], targets[s]) / k
            loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), 1.0)
        opt.step()
        if device == "cuda":
            end.record()
            torch.cuda.synchronize()
            times.append(start.elapsed_time(end))
        else:
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times[warmup:])


def copy_bandwidth(device):
    """Device-to-device copy, bytes read plus written per second."""
    n = (1 << 29) if device == "cuda" else (1 << 24)
    a = torch.empty(n, dtype=torch.float32, device=device).uniform_()
    b = torch.empty_like(a)
    for _ in range(3):
        b.copy_(a)
    if device == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(10):
            b.copy_(a)
        end.record()
        torch.cuda.synchronize()
        seconds = start.elapsed_time(end) / 1000 / 10
    else:
        t0 = time.perf_counter()
        for _ in range(10):
            b.copy_(a)
        seconds = (time.perf_counter() - t0) / 10
    return 2 * a.numel() * 4 / seconds


def update_kernel_seconds(runner, artifact, data):
    """The fused update kernel's duration, from Nsight Compute (one launch,
    graphs off); None without ncu."""
    ncu = shutil.which("ncu")
    if not ncu:
        return None
    cmd = [ncu, "--clock-control", "none", "--kernel-name", "regex:update",
           "--launch-count", "1", "--metrics", "gpu__time_duration.sum", "--csv",
           runner.train, artifact, "--data", data, "--steps", "1", "--no-progress"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=240,
                          env=dict(os.environ, ACCRUE_CUDA_GRAPHS="0"))
    for line in proc.stdout.splitlines():
        if "gpu__time_duration.sum" in line:
            fields = [f.strip('"') for f in line.split('","')]
            unit, value = fields[-2], float(fields[-1].replace(",", ""))
            scale = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1}
            return value * scale.get(unit, 1e-9)
    return None


def check_performance(runner, name, device, folder, prepared):
    module = cases.gpt(name)
    params = {n: p.detach().numpy() for n, p in module.named_parameters()}
    for art in ("k4", "big"):
        path = os.path.join(folder, art)
        if os.path.isdir(path):
            manifest = json.load(open(os.path.join(path, "step.json")))
            write_safetensors(os.path.join(path, "init.safetensors"),
                              {p["name"]: params[p["name"]] for p in manifest["params"]})
    steps = cases.BENCH_WARMUP + cases.BENCH_STEPS
    rng = np.random.default_rng(0)
    data = module.data(steps * cases.BENCH_B * cases.BENCH_K + 64, rng)
    data_path = os.path.join(runner.work, name + ".npz")
    np.savez(data_path, **data)
    k4 = os.path.join(folder, "k4")
    log = os.path.join(runner.work, name + ".jsonl")
    runner.run(k4, data_path, steps, ["--log", log], timeout=600)
    records = read_log(log)
    accrue_ms = median_ms(records, cases.BENCH_WARMUP)
    module = module.to(device)
    torch_ms = torch_step_ms(module, data, device, cases.BENCH_STEPS, cases.BENCH_WARMUP)
    info = prepared["gpts"][name]
    label = "%s (%.0fM params, b=%d x K=%d, bf16)" % (name, info["params"] / 1e6,
                                                        cases.BENCH_B, cases.BENCH_K)
    record("performance", label + " step ms: Accrue / PyTorch eager",
           accrue_ms / torch_ms, "<= 0.8", accrue_ms / torch_ms <= 0.8, "x",
           "Accrue %.2f ms, PyTorch %.2f ms" % (accrue_ms, torch_ms))
    syncs = sum(r.get("device_syncs", 0) for r in records[:-1])
    if device == "cuda":
        record("performance", "%s host synchronizations per step" % name,
               syncs / max(len(records) - 1, 1), "0", syncs == 0)
    record("performance", "%s compile time for %s on the 2-core machine" % (
        name, prepared["target"]), info["compile_seconds"], "< 30 s",
        info["compile_seconds"] < 30, "s")
    if name == "gpt10m":
        big_log = os.path.join(runner.work, name + "_big.jsonl")
        runner.run(os.path.join(folder, "big"), data_path, steps, ["--log", big_log],
                   timeout=600)
        big_ms = median_ms(read_log(big_log), cases.BENCH_WARMUP)
        record("performance", "gpt10m accumulation overhead: b=8 x K=4 / b=32 x K=1",
               accrue_ms / big_ms, "<= 1.03", accrue_ms / big_ms <= 1.03, "x")
        if device == "cuda":
            peaks = {}
            for k in (1, 64):
                klog = os.path.join(runner.work, "%s_k%d.jsonl" % (name, k))
                runner.run(k4, data_path, 1, ["--log", klog, "--accumulation-steps", str(k)],
                           timeout=600)
                peaks[k] = read_log(klog)[-1]["device_bytes"]
            record("performance", "gpt10m peak device memory K=64 / K=1",
                   peaks[64] / peaks[1], "<= 1.02", peaks[64] / peaks[1] <= 1.02, "x",
                   "%d / %d bytes" % (peaks[64], peaks[1]))
    if name == "gpt100m" and device == "cuda":
        seconds = update_kernel_seconds(runner, k4, data_path)
        copy = copy_bandwidth(device)
        if seconds is None:
            record("performance", "fused clip+AdamW update bandwidth / copy bandwidth",
                   "n/a", ">= 0.90", False, note="Nsight Compute (ncu) not found")
        else:
            moved = 32 * info["params"]  # p, g, m, v read; p, m, v, g written
            ratio = moved / seconds / copy
            record("performance", "fused clip+AdamW update bandwidth / copy bandwidth",
                   ratio, ">= 0.90", ratio >= 0.9, "x",
                   "update %.3f ms for %.0f MB, copy %.0f GB/s" % (
                       seconds * 1e3, moved / 1e6, copy / 1e9))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bundle", default=os.path.join(cases.ROOT, ".gpu"))
    ap.add_argument("--out", default=os.environ.get("OUT") or None)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    bundle = os.path.abspath(args.bundle)
    prepared = json.load(open(os.path.join(bundle, "prepare.json")))
    out = args.out or tempfile.mkdtemp(prefix="accrue-gpu-check-")
    os.makedirs(out, exist_ok=True)
    work = tempfile.mkdtemp(prefix="accrue-gpu-work-")
    runner = Runner(bundle, args.device, work)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    started = time.time()
    env = {"torch": torch.__version__, "device": args.device,
           "gpu": torch.cuda.get_device_name(0) if args.device == "cuda" else None,
           "bundle": prepared}
    print("GPU check: %s, torch %s, bundle of %s (commit %s)" % (
        env["gpu"] or "CPU rehearsal", torch.__version__, prepared["date"],
        prepared["commit"][:12]), flush=True)
    groups = [("equivalence", name) for name in prepared["models"]]
    if not args.quick:
        groups += [("performance", name) for name in prepared["gpts"]]
    for group, name in groups:
        try:
            if group == "equivalence":
                check_equivalence(runner, name, args.device, os.path.join(bundle, name))
            else:
                check_performance(runner, name, args.device, os.path.join(bundle, name),
                                  prepared)
        except Exception as e:  # a failed run fails its group, the rest go on
            record(group, "%s: did not run" % name, "error", "runs", False,
                   note=str(e)[-2000:])
    summary = dict(environment=env, seconds=round(time.time() - started, 1),
                   results=RESULTS, passed=all(r["passed"] for r in RESULTS))
    with open(os.path.join(out, "gpu-check.json"), "w") as f:
        json.dump(summary, f, indent=2)
    with open(os.path.join(out, "gpu-check.md"), "w") as f:
        f.write("| group | check | value | goal | ok | note |\n|---|---|---|---|---|---|\n")
        for r in RESULTS:
            value = "%.4g" % r["value"] if isinstance(r["value"], float) else r["value"]
            f.write("| %s | %s | %s %s | %s | %s | %s |\n" % (
                r["group"], r["name"], value, r["unit"], r["goal"],
                "yes" if r["passed"] else "**no**", r["note"].replace("\n", " ")[:200]))
    for r in RESULTS:
        if not r["passed"] and r["note"]:
            print("--- %s: %s\n%s" % (r["group"], r["name"], r["note"][-1500:]))
    print("%d checks, %d failed, %.0f s; %s" % (
        len(RESULTS), sum(not r["passed"] for r in RESULTS), summary["seconds"],
        os.path.join(out, "gpu-check.json")))
    shutil.rmtree(work, ignore_errors=True)
    sys.exit(0 if summary["passed"] else 1)


if __name__ == "__main__":
    main()
