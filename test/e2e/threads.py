# All cores, same bits: a CNN, a GPT (fp32, and bf16: its products on
# vdpbf16ps where the CPU has AVX512-BF16, B's pairs packed before the
# parallel blocks) and a wide MLP train 3 AdamW steps
# (K=2, clipping) with --threads 1, 2 and 3 to bitwise identical parameters,
# losses and gradient norms. Each kernel's parallel loop splits only
# independent outputs among threads and every sum keeps one order, so the
# thread count cannot change a bit. The steps do link libomp and run their
# parallel loops (the tool reports the threads), so the comparison is not
# between three sequential runs; --no-parallel builds a step without
# OpenMP that also agrees bit for bit (the loops are the same loops).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import subprocess
import sys

import numpy as np
import torch

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
B, K, STEPS = 8, 2, 3


class SmallCNN(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(3)
        nn = torch.nn
        self.net = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x), y)


class WideMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        nn = torch.nn
        self.net = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512),
                                 nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x, y):
        return torch.nn.functional.cross_entropy(self.net(x), y)


rng = np.random.default_rng(0)
n = B * K * STEPS
gpt = zoo.GPT(5, vocab=128, d=64, heads=4, layers=2, block=32)
gpt_data = gpt.data(n, rng)
MODELS = {
    "cnn": (SmallCNN(), {"x": rng.standard_normal((n, 3, 16, 16)).astype(np.float32),
                         "y": rng.integers(0, 10, n).astype(np.int64)}, {}),
    "gpt": (gpt, gpt_data, {}),
    "gpt_bf16": (gpt, gpt_data, {"precision": "bf16"}),
    "mlp": (WideMLP(), {"x": rng.standard_normal((n, 64)).astype(np.float32),
                        "y": rng.integers(0, 10, n).astype(np.int64)}, {}),
}

for name, (module, data, precision) in MODELS.items():
    model, npz = os.path.join(out, name + ".onnx"), os.path.join(out, name + ".npz")
    zoo.export(module, data, model, 17)
    np.savez(npz, **data)
    flags = dict(accumulation_steps=K, optimizer="adamw", lr=1e-3, clip_norm=1.0, **precision)
    art = e2e.compile_model(model, os.path.join(out, name), B, **flags)
    needed = subprocess.run(["readelf", "-d", os.path.join(art, "step.so")],
                            capture_output=True, text=True, check=True).stdout
    assert "libomp" in needed, "%s: the step has no parallel loops" % name
    runs = {}
    for threads in [1, 2, 3]:
        tag = "%s_t%d" % (name, threads)
        trained, log = os.path.join(out, tag + ".onnx"), os.path.join(out, tag + ".jsonl")
        result = e2e.train(art, npz, STEPS, export=trained, log=log,
                           extra=["--threads", str(threads)])
        if threads > 1:
            assert "%d threads" % threads in result.stdout, result.stdout
        runs[threads] = (e2e.initializers(trained), e2e.read_jsonl(log))
    serial = e2e.compile_model(model, os.path.join(out, name + "_serial"), B, no_parallel=True,
                               **flags)
    trained, log = os.path.join(out, name + "_serial.onnx"), os.path.join(out, name + "_serial.jsonl")
    e2e.train(serial, npz, STEPS, export=trained, log=log)
    runs["--no-parallel"] = (e2e.initializers(trained), e2e.read_jsonl(log))
    params, log = runs[1]
    initial = e2e.initializers(model)
    assert any(not np.array_equal(params[p], initial[p]) for p in params), "nothing trained"
    for key, (other, other_log) in runs.items():
        for p in params:
            assert params[p].tobytes() == other[p].tobytes(), "%s: %s differs with %s" % (
                name, p, key)
        assert [(r["loss"], r["grad_norm"]) for r in other_log] == \
            [(r["loss"], r["grad_norm"]) for r in log], (name, key)
    print("%s: bit-identical with 1, 2, 3 threads and without OpenMP" % name)
print("ok")
