# Every optimizer (SGD, momentum with dampening, Nesterov, Adam, AdamW,
# Adagrad) x {no clipping, global-norm clipping} x {constant LR,
# linear warmup then cosine decay} for 10 optimizer steps (micro-batch 4 x
# 2) against torch.optim, torch.nn.utils.clip_grad_norm_ and
# torch.optim.lr_scheduler.LambdaLR on the same module: parameters after
# every run, and the loss, gradient norm and LR of every step, rtol 1e-5.
# Plus a linear schedule and the LR being stepped once per optimizer step.
# A third of the labels are ignored, so micro-batches count unequal numbers
# of samples and each window's loss sum is divided by the window's count.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
B, K, STEPS, LR, CLIP, WARMUP = 4, 2, 10, 0.02, 0.3, 3
E = B * K
x, y = mlp.dataset(STEPS * E, seed=7, ignored=0.3)
mlp.assert_unequal_counts(y, B, E)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=3), model)

OPTIMIZERS = {
    "sgd": ({}, lambda p: torch.optim.SGD(p, lr=LR)),
    "sgd_momentum": ({"momentum": 0.9, "dampening": 0.1, "weight_decay": 0.01},
                     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.9, dampening=0.1,
                                               weight_decay=0.01)),
    "sgd_nesterov": ({"momentum": 0.8, "nesterov": True, "weight_decay": 0.02},
                     lambda p: torch.optim.SGD(p, lr=LR, momentum=0.8, nesterov=True,
                                               weight_decay=0.02)),
    "adam": ({"beta1": 0.85, "beta2": 0.99, "eps": 1e-7, "weight_decay": 0.01},
             lambda p: torch.optim.Adam(p, lr=LR, betas=(0.85, 0.99), eps=1e-7,
                                        weight_decay=0.01)),
    "adamw": ({"weight_decay": 0.05},
              lambda p: torch.optim.AdamW(p, lr=LR, weight_decay=0.05)),
    "adagrad": ({"lr_decay": 0.05, "weight_decay": 0.01, "eps": 1e-8},
                lambda p: torch.optim.Adagrad(p, lr=LR, lr_decay=0.05, weight_decay=0.01,
                                              eps=1e-8)),
}


def lr_lambda(kind):
    def f(s):
        if kind == "constant":
            return 1.0
        if s < WARMUP:
            return s / WARMUP
        progress = (s - WARMUP) / (STEPS - WARMUP)
        if kind == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))
    return f


def pytorch(make_opt, clip, schedule):
    module = mlp.MLP(seed=3)
    opt = make_opt(module.parameters())
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(schedule))
    xt, yt = torch.tensor(x), torch.tensor(y)
    log = []
    for step in range(STEPS):
        lr = opt.param_groups[0]["lr"]
        opt.zero_grad()
        total = 0.0
        count = mlp.counted(y[step * E:(step + 1) * E])
        for k in range(K):
            s = slice(step * E + k * B, step * E + (k + 1) * B)
            loss = F.cross_entropy(module.logits(xt[s]), yt[s], reduction="sum") / count
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(),
                                              clip if clip else float("inf")).item()
        opt.step()
        sched.step()  # once per optimizer step
        log.append((total, norm, lr))
    return {n: p.detach().numpy() for n, p in module.named_parameters()}, log


runs = [(o, c, s) for o in OPTIMIZERS for c in (None, CLIP) for s in ("constant", "cosine")]
runs.append(("adamw", CLIP, "linear"))
for name, clip, schedule in runs:
    tag = "%s clip=%s %s" % (name, clip, schedule)
    flags, make_opt = OPTIMIZERS[name]
    optimizer = "sgd" if name.startswith("sgd") else name
    art_flags = dict(flags, accumulation_steps=K, optimizer=optimizer, lr=LR,
                     clip_norm=clip)
    if optimizer == "adamw" and "weight_decay" not in flags:
        art_flags["weight_decay"] = 0.01
    art = e2e.compile_model(model, os.path.join(out, "%s_%s_%s" % (name, clip, schedule)),
                            B, **art_flags)
    trained = os.path.join(out, "%s_%s_%s.onnx" % (name, clip, schedule))
    log_path = os.path.join(out, "%s_%s_%s.jsonl" % (name, clip, schedule))
    extra = ["--lr-schedule", schedule]
    if schedule != "constant":
        extra += ["--warmup-steps", str(WARMUP), "--total-steps", str(STEPS)]
    e2e.train(art, data, STEPS, export=trained, log=log_path, extra=extra)

    want, want_log = pytorch(make_opt, clip, schedule)
    got = e2e.initializers(trained)
    for pname, value in want.items():
        e2e.assert_close("%s %s" % (tag, pname), got[pname], value, rtol=1e-5, atol=1e-6)
    log = e2e.read_jsonl(log_path)
    assert len(log) == STEPS
    for record, (loss, norm, lr) in zip(log, want_log):
        step = record["step"]
        e2e.assert_close("%s step %d loss" % (tag, step), record["loss"], loss,
                         rtol=1e-5, atol=1e-7)
        e2e.assert_close("%s step %d grad_norm" % (tag, step), record["grad_norm"], norm,
                         rtol=1e-5, atol=1e-7)
        e2e.assert_close("%s step %d lr" % (tag, step), record["lr"], lr,
                         rtol=1e-12, atol=1e-15)
    if clip:
        assert max(r[1] for r in want_log) > clip, "clipping must be active"
print("%d optimizer runs match PyTorch" % len(runs))
