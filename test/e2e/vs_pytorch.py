# Training the exported MLP with Accrue (micro-batch 8 x 4, AdamW, global-norm
# clipping) gives the parameters PyTorch gets training the same module with a
# manual accumulation loop, after 5 steps, for opsets 13 and 17.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
B, K, STEPS, LR, WD, CLIP = 8, 4, 5, 0.01, 0.05, 0.5
E = B * K
x, y = mlp.dataset(STEPS * E)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)


def pytorch_reference(module):
    """The textbook accumulation loop, normalized by the effective batch."""
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=WD)
    xt, yt = torch.tensor(x), torch.tensor(y)
    log = []
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        for k in range(K):
            s = slice(step * E + k * B, step * E + (k + 1) * B)
            loss = F.cross_entropy(module.logits(xt[s]), yt[s], reduction="sum") / E
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP).item()
        opt.step()
        log.append((total, norm))
    return {n: p.detach().numpy() for n, p in module.named_parameters()}, log


for opset in (13, 17):
    model = os.path.join(out, "mlp%d.onnx" % opset)
    mlp.export(mlp.MLP(seed=opset), model, opset)
    art = e2e.compile_model(model, os.path.join(out, "art%d" % opset), B,
                            accumulation_steps=K, optimizer="adamw", lr=LR,
                            weight_decay=WD, clip_norm=CLIP)
    trained = os.path.join(out, "trained%d.onnx" % opset)
    log_path = os.path.join(out, "log%d.jsonl" % opset)
    e2e.train(art, data, STEPS, export=trained, log=log_path)

    want, want_log = pytorch_reference(mlp.MLP(seed=opset))
    got = e2e.initializers(trained)
    for name, value in want.items():
        e2e.assert_close("opset %d %s" % (opset, name), got[name], value,
                         rtol=1e-5, atol=1e-6)
    for record, (loss, norm) in zip(e2e.read_jsonl(log_path), want_log):
        e2e.assert_close("opset %d step %d loss" % (opset, record["step"]),
                         record["loss"], loss, rtol=1e-5, atol=1e-7)
        e2e.assert_close("opset %d step %d grad_norm" % (opset, record["step"]),
                         record["grad_norm"], norm, rtol=1e-5, atol=1e-7)
