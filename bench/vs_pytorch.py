#!/usr/bin/env python3
"""Step time of Accrue's CPU backend against PyTorch eager and ONNX Runtime
training on the same models.

usage: bench/vs_pytorch.py [--build build] [--steps 3] [--runs 2]
                           [--models mlp,gpt,cnn] [--ort-python PYTHON]
                           [--torch2-python PYTHON] [--jax-python PYTHON]

The models (K micro-batches per AdamW step with global-norm clipping, the
same data for everyone):
  mlp: 512-1024x4-10 with ReLU and cross-entropy, micro-batch 32, K=8;
  gpt: the test suite's GPT at d=256, 4 layers, 4 heads, context 128,
       vocab 4096 (tied head), micro-batch 8, K=4;
  cnn: three 3x3 convolutions (3-32-64-64 channels) on 32x32 images, ReLU,
       max pooling, global average pooling, a linear classifier;
       micro-batch 16, K=4.
Accrue runs with 1 thread and with all cores (`accrue-train --threads`).
PyTorch (Debian's python3-torch with OpenBLAS, `apt install
libopenblas0-pthread`, its core type set with OPENBLAS_CORETYPE, which
these VMs' CPUs need; the bench prints the BLAS it found) runs the same
loop (zero_grad, K x forward/backward of loss / K, clip_grad_norm_, step)
with 1 thread and all cores; its best is the baseline. PyTorch 2 (the
newest-releases venv's PyPI wheel, MKL and oneDNN; --torch2-python) runs
the same loop eager and with torch.compile (inductor, the module and the
optimizer step), each at its better thread count. JAX/XLA runs
bench/jax_baseline.py under --jax-python (default bench/.venv-jax/bin/python,
skipped when absent): the whole window jitted, lax.scan over the
micro-batches, optax clipping and AdamW, donated buffers. ONNX Runtime
training runs bench/ort_training.py under --ort-python (a venv with
onnxruntime-training 1.19.2; default bench/.venv-ort/bin/python, skipped
when absent) with all cores. Time per optimizer step is the best of
`--runs` rounds of `--steps` steps after one warm-up step (Accrue: the
mean of the steps' time_ms in its metrics); a round runs every system
once, so a spell of load on the machine falls on all of them alike.

The machine's limit, measured in the same run: OpenBLAS's sgemm on
2048 x 2048 squares (numpy under this Python, its best core type and
thread count). Each model's FLOPs per optimizer step are PyTorch 2's count
(torch.utils.flop_counter: matrix products and convolutions, forward and
backward, K micro-batches; elementwise work is not counted; the LSTM's
products, which the counter does not see, counted by hand), so "GFLOP/s"
is that count over Accrue's best time, and "% of sgemm" that rate over the
sgemm peak.
"""
import argparse
import functools
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "e2e", "models"))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import zoo  # noqa: E402
from benchlib import parse_args  # noqa: E402

LR, CLIP = 1e-3, 1.0


class DeepMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layers, width = [], 512
        for _ in range(4):
            layers += [torch.nn.Linear(width, 1024), torch.nn.ReLU()]
            width = 1024
        self.net = torch.nn.Sequential(*layers, torch.nn.Linear(width, 10))

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


class LSTMLM(torch.nn.Module):
    """Token embeddings (vocab 1024, width 128), a 2-layer batch-first LSTM
    (hidden 256), a linear head and next-token cross-entropy."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(1024, 128)
        self.rnn = torch.nn.LSTM(128, 256, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(256, 1024)

    def forward(self, idx, y):
        out, _ = self.rnn(self.emb(idx))
        return torch.nn.functional.cross_entropy(self.head(out).flatten(0, 1), y.flatten())


def build(name, out, steps, export=True):
    """(module, data dict, micro-batch, K, onnx path). `lstmT` is the LSTM
    language model over sequences of T tokens (bench/recurrent.py)."""
    rng = np.random.default_rng(0)
    if name.startswith("lstm"):
        module, b, k, t = LSTMLM(), 16, 2, int(name[4:])
        n = b * k * (steps + 1)
        tokens = rng.integers(0, 1024, (n, t + 1)).astype(np.int64)
        data = {"idx": tokens[:, :-1].copy(), "y": tokens[:, 1:].copy()}
    elif name == "gpt":
        module, b, k = zoo.GPT(1, vocab=4096, d=256, heads=4, layers=4, block=128), 8, 4
        data = module.data(b * k * (steps + 1), rng)
    elif name == "cnn":
        module, b, k = SmallCNN(), 16, 4
        n = b * k * (steps + 1)
        data = {"x": rng.standard_normal((n, 3, 32, 32)).astype(np.float32),
                "y": rng.integers(0, 10, n).astype(np.int64)}
    else:
        module, b, k = DeepMLP(), 32, 8
        n = b * k * (steps + 1)
        data = {"x": rng.standard_normal((n, 512)).astype(np.float32),
                "y": rng.integers(0, 10, n).astype(np.int64)}
    path = os.path.join(out, name + ".onnx") if out else None
    if export:
        zoo.export(module, data, path, 17)
    return module, data, b, k, path


def openblas_env(threads):
    """The environment of a process whose OpenMP and OpenBLAS pools have
    `threads` threads and whose OpenBLAS uses its best kernels here."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    # OpenBLAS 0.3.21's runtime detection takes these VMs' CPU ("Intel Xeon
    # Processor") for an old core and runs sgemm at ~30 GFLOP/s on one
    # thread; told the core type it reaches ~130. At its best:
    if "OPENBLAS_CORETYPE" not in env:
        with open("/proc/cpuinfo") as info:
            flags = info.read()
        env["OPENBLAS_CORETYPE"] = "SkylakeX" if "avx512f" in flags else "Haswell"
    return env


SGEMM = """
import time, numpy as np
n = 2048
a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
b = a.T.copy()
a @ b
best = min((lambda t: (a @ b, time.perf_counter() - t)[1])(time.perf_counter())
           for _ in range(5))
print(2 * n ** 3 / best / 1e9)
"""


def sgemm_gflops(threads):
    """OpenBLAS's sgemm rate (numpy's matmul) with `threads` threads."""
    result = subprocess.run([sys.executable, "-c", SGEMM], env=openblas_env(threads),
                            capture_output=True, text=True, check=True)
    return float(result.stdout.split()[-1])


def step_flops(name, python):
    """FLOPs per optimizer step by PyTorch 2's counter (run by `python`)."""
    result = subprocess.run([python, os.path.abspath(__file__), "--flops-worker", name],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("FLOP counter failed:\n" + result.stdout + result.stderr)
    return float(result.stdout.split()[-1])


def flops_worker(name):
    from torch.utils.flop_counter import FlopCounterMode
    module, data, b, k, _ = build(name, None, 1, export=False)
    batch = [torch.tensor(v[:b]) for v in data.values()]
    with FlopCounterMode(display=False) as counter:
        module(*batch).backward()
    # The counter does not see the LSTM kernel (oneDNN's on CPU): its
    # products, counted by hand, 2 x rows x (input + hidden) x 4 hidden per
    # layer forward, twice that backward (the inputs' and weights' adjoints).
    rnn = 0
    for m in module.modules():
        if isinstance(m, torch.nn.LSTM):
            rows = batch[0].numel()
            for layer in range(m.num_layers):
                inputs = m.input_size if layer == 0 else m.hidden_size
                rnn += 3 * 2 * rows * (inputs + m.hidden_size) * 4 * m.hidden_size
    print((counter.get_total_flops() + rnn) * k)


def pytorch_step_seconds(name, steps, threads, runs, python=sys.executable, mode="eager"):
    """PyTorch's best of `runs` in a process of its own (run by `python`)
    whose OpenMP and OpenBLAS pools have `threads` threads (OpenBLAS's
    pthreads pool ignores torch.set_num_threads and oversubscribes the cores
    otherwise); `mode` eager, compile (torch.compile of the module and of
    the optimizer's step, inductor), or autocast (eager under CPU autocast
    to bf16)."""
    env = openblas_env(threads)
    result = subprocess.run([python, os.path.abspath(__file__), "--pytorch-worker",
                             name, "--steps", str(steps), "--runs", str(runs),
                             "--threads", str(threads), "--mode", mode],
                            env=env, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("PyTorch worker failed:\n" + result.stdout + result.stderr)
    return float(result.stdout.split()[-1])


def pytorch_worker(name, steps, threads, runs, mode):
    # Denormals flushed to zero: PyTorch at its best (they made its GPT
    # steps 3.6x slower here as training went on).
    torch.set_flush_denormal(True)
    module, data, b, k, _ = build(name, None, steps, export=False)
    print(min(pytorch_loop_seconds(module, data, b, k, steps, threads, mode)
              for _ in range(runs)))


def pytorch_loop_seconds(module, data, b, k, steps, threads, mode="eager"):
    torch.set_num_threads(threads)
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=0.01)
    tensors = [torch.tensor(v) for v in data.values()]
    forward, update = module, opt.step
    if mode == "compile":
        # PyTorch 2 at its best on the CPU: inductor's code for the forward
        # and backward, and the compiled optimizer step.
        forward, update = torch.compile(module), torch.compile(opt.step)

    def step(s):
        opt.zero_grad(set_to_none=True)
        for m in range(k):
            lo = (s * k + m) * b
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=mode == "autocast"):
                loss = forward(*[t[lo:lo + b] for t in tensors]) / k
            loss.backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP)
        update()

    step(0)  # warm-up (and compilation)
    step(0)
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


def accrue_step_seconds(trainer, artifact, npz, steps, threads, log):
    """Accrue's seconds per step: the mean of its metrics' time_ms over
    `steps` steps after one warm-up step, as for the baselines."""
    if os.path.exists(log):
        os.remove(log)
    # Denormals flushed, as for PyTorch.
    subprocess.run([trainer, artifact, "--data", npz, "--threads", str(threads), "--steps",
                    str(steps + 1), "--log", log, "--no-progress", "--flush-denormals"],
                   check=True, capture_output=True)
    with open(log) as f:
        times = [json.loads(line)["time_ms"] for line in f][1:]
    return sum(times) / len(times) / 1e3


def jax_step_seconds(python, name, npz, b, k, steps, threads):
    result = subprocess.run([python, os.path.join(HERE, "jax_baseline.py"), name, npz, str(b),
                             str(k), str(steps), str(threads)], capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("jax_baseline.py failed:\n" + result.stdout + result.stderr)
    return float(result.stdout.split()[-1])


def ort_step_seconds(python, path, npz, b, k, steps, threads, out):
    result = subprocess.run([python, os.path.join(HERE, "ort_training.py"), path, npz,
                             str(b), str(k), str(steps), str(threads), out],
                            capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit("ort_training.py failed:\n" + result.stdout + result.stderr)
    return float(result.stdout.split()[-1])


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--pytorch-worker":
        wp = argparse.ArgumentParser()
        wp.add_argument("name")
        for flag in ["--steps", "--runs", "--threads"]:
            wp.add_argument(flag, type=int)
        wp.add_argument("--mode", default="eager")
        w = wp.parse_args(sys.argv[2:])
        return pytorch_worker(w.name, w.steps, w.threads, w.runs, w.mode)
    if len(sys.argv) > 1 and sys.argv[1] == "--flops-worker":
        return flops_worker(sys.argv[2])
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--models", default="mlp,gpt,cnn")
    ap.add_argument("--ort-python", default=os.path.join(HERE, ".venv-ort", "bin", "python"))
    ap.add_argument("--jax-python", default=os.path.join(HERE, ".venv-jax", "bin", "python"))
    ap.add_argument("--torch2-python",
                    default=os.path.join(HERE, "..", ".venv-onnx-latest", "bin", "python"))
    args, out, compiler, trainer = parse_args(ap)
    cores = os.cpu_count()
    ort = os.path.exists(args.ort_python)
    torch2 = os.path.exists(args.torch2_python)
    jax = os.path.exists(args.jax_python)
    version2 = subprocess.run([args.torch2_python, "-c", "import torch; print(torch.__version__)"],
                              capture_output=True, text=True).stdout.strip() if torch2 else None
    print("PyTorch %s, BLAS: %s; PyTorch 2: %s; JAX: %s; ONNX Runtime training: %s" % (
        torch.__version__, pytorch_blas(), version2 or "not found",
        args.jax_python if jax else "not found", args.ort_python if ort else "not found"))
    peak = max(sgemm_gflops(t) for t in [1, cores])
    print("sgemm peak (OpenBLAS through numpy, 2048 x 2048, best of 1 and %d threads): "
          "%.1f GFLOP/s" % (cores, peak))
    print("| model | params | b x K | GFLOP / step | Accrue 1 thread ms | Accrue %d threads ms | "
          "Accrue GFLOP/s | %% of sgemm | "
          "PyTorch 1 thread ms | PyTorch %d threads ms | PyTorch 2 eager ms | "
          "torch.compile ms | JAX/XLA ms | ORT training %d threads ms | "
          "Accrue / PyTorch (best of each) | Accrue / best of PyTorch 2 and JAX | "
          "Accrue / ORT | Accrue %d threads / 1 |" % (cores, cores, cores, cores))
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ratios, ratios2 = [], []
    for name in args.models.split(","):
        module, data, b, k, path = build(name, out, args.steps)
        params = sum(p.numel() for p in module.parameters())
        npz = os.path.join(out, name + ".npz")
        np.savez(npz, **data)
        artifact = os.path.join(out, name)
        subprocess.run([compiler, path, "-o", artifact, "--micro-batch", str(b),
                        "--accumulation-steps", str(k), "--optimizer", "adamw",
                        "--lr", str(LR), "--weight-decay", "0.01", "--clip-norm",
                        str(CLIP)], check=True)
        # Every system runs once per round, the rounds one after another, so
        # that a spell of load on this machine (a busy second core) falls on
        # all of them alike; each keeps its best round.
        log = os.path.join(out, name + ".jsonl")
        systems = {}
        for t in [1, cores]:
            systems[("accrue", t)] = functools.partial(
                accrue_step_seconds, trainer, artifact, npz, args.steps, t, log)
            systems[("torch", t)] = functools.partial(
                pytorch_step_seconds, name, args.steps, t, 1)
            if torch2:
                # PyTorch 2 (PyPI's wheel: MKL and oneDNN) eager and
                # compiled, each at its better thread count.
                for mode in ["eager", "compile"]:
                    systems[(mode, t)] = functools.partial(
                        pytorch_step_seconds, name, args.steps, t, 1, args.torch2_python, mode)
            if jax:
                systems[("jax", t)] = functools.partial(
                    jax_step_seconds, args.jax_python, name, npz, b, k, args.steps, t)
        if ort:
            systems[("ort", cores)] = functools.partial(
                ort_step_seconds, args.ort_python, path, npz, b, k, args.steps, cores,
                os.path.join(out, name + "_ort"))
        seconds = {key: float("inf") for key in systems}
        for _ in range(args.runs):
            for key, run in systems.items():
                seconds[key] = min(seconds[key], run())

        def best_of(system):
            times = [v for (s, _), v in seconds.items() if s == system]
            return min(times) if times else float("nan")

        accrue = {t: seconds[("accrue", t)] for t in [1, cores]}
        torch_times = {t: seconds[("torch", t)] for t in [1, cores]}
        eager2, compiled2, xla = best_of("eager"), best_of("compile"), best_of("jax")
        peers = [v for v in (eager2, compiled2, xla) if v == v]
        if peers:
            ratios2.append(min(accrue.values()) / min(peers))
        ort_time = best_of("ort")
        best, torch_best = min(accrue.values()), min(torch_times.values())
        ratios.append(best / torch_best)
        flops = step_flops(name, args.torch2_python) if torch2 else float("nan")
        print("| %s | %.1fM | %d x %d | %.2f | %.1f | %.1f | %.1f | %.0f%% | %.1f | %.1f | %.1f | "
              "%.1f | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f |" % (
                  name, params / 1e6, b, k, flops / 1e9, accrue[1] * 1e3, accrue[cores] * 1e3,
                  flops / best / 1e9, 100 * flops / best / 1e9 / peak,
                  torch_times[1] * 1e3, torch_times[cores] * 1e3, eager2 * 1e3,
                  compiled2 * 1e3, xla * 1e3, ort_time * 1e3, best / torch_best,
                  best / min(peers) if peers else float("nan"), best / ort_time,
                  accrue[1] / accrue[cores]), flush=True)
    print("geometric mean of Accrue / PyTorch: %.2f" % float(np.exp(np.mean(np.log(ratios)))))
    if ratios2:
        print("geometric mean of Accrue / best of PyTorch 2 eager, torch.compile and JAX: %.2f"
              % float(np.exp(np.mean(np.log(ratios2)))))


if __name__ == "__main__":
    main()
