# Training the exported MLP with Accrue (micro-batch 8 x 4, global-norm
# clipping) gives the parameters PyTorch gets training the same module with a
# manual accumulation loop, after 5 steps: AdamW for opsets 13 and 17, SGD
# with Nesterov momentum and weight decay for opset 13. A third of the
# labels are ignored (ignore_index), so micro-batches count unequal numbers
# of samples and the reference divides each window's loss sum by its count.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
B, K, STEPS, LR, WD, CLIP = 8, 4, 5, 0.01, 0.05, 0.5
E = B * K
x, y = mlp.dataset(STEPS * E, ignored=0.3)
mlp.assert_unequal_counts(y, B, E)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)


def pytorch_reference(module, optimizer):
    """The textbook accumulation loop, normalized by the window's count of
    labels (what one batch of the whole window would average over)."""
    if optimizer == "adamw":
        opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=WD)
    else:
        opt = torch.optim.SGD(module.parameters(), lr=LR, momentum=0.9,
                              nesterov=True, weight_decay=WD)
    xt, yt = torch.tensor(x), torch.tensor(y)
    log = []
    for step in range(STEPS):
        opt.zero_grad()
        total = 0.0
        count = mlp.counted(y[step * E:(step + 1) * E])
        for k in range(K):
            s = slice(step * E + k * B, step * E + (k + 1) * B)
            loss = F.cross_entropy(module.logits(xt[s]), yt[s], reduction="sum") / count
            loss.backward()
            total += loss.item()
        norm = torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP).item()
        opt.step()
        log.append((total, norm))
    return {n: p.detach().numpy() for n, p in module.named_parameters()}, log


for opset, optimizer in [(13, "adamw"), (17, "adamw"), (13, "sgd")]:
    tag = "opset %d %s" % (opset, optimizer)
    model = os.path.join(out, "mlp%d.onnx" % opset)
    mlp.export(mlp.MLP(seed=opset), model, opset)
    flags = dict(accumulation_steps=K, optimizer=optimizer, lr=LR,
                 weight_decay=WD, clip_norm=CLIP)
    if optimizer == "sgd":
        flags.update(momentum=0.9, nesterov=True)
    art = e2e.compile_model(model, os.path.join(out, "art%d%s" % (opset, optimizer)), B,
                            **flags)
    trained = os.path.join(out, "trained%d%s.onnx" % (opset, optimizer))
    log_path = os.path.join(out, "log%d%s.jsonl" % (opset, optimizer))
    e2e.train(art, data, STEPS, export=trained, log=log_path)

    want, want_log = pytorch_reference(mlp.MLP(seed=opset), optimizer)
    got = e2e.initializers(trained)
    for name, value in want.items():
        e2e.assert_close("%s %s" % (tag, name), got[name], value,
                         rtol=1e-5, atol=1e-6)
    for record, (loss, norm) in zip(e2e.read_jsonl(log_path), want_log):
        e2e.assert_close("%s step %d loss" % (tag, record["step"]),
                         record["loss"], loss, rtol=1e-5, atol=1e-7)
        e2e.assert_close("%s step %d grad_norm" % (tag, record["step"]),
                         record["grad_norm"], norm, rtol=1e-5, atol=1e-7)
    # The export is the original graph with new initializer values.
    original, exported = onnx.load(model), onnx.load(trained)
    onnx.checker.check_model(exported)
    assert [n.op_type for n in original.graph.node] == [n.op_type for n in exported.graph.node]
    # ... and it imports again: compiled as a gradient-only step over the
    # whole data, it reports the trained model's loss (PyTorch with the
    # reference parameters).
    evaluate = e2e.compile_model(trained, os.path.join(out, "eval%d%s" % (opset, optimizer)), B,
                                 optimizer="none")
    eval_log = os.path.join(out, "eval%d%s.jsonl" % (opset, optimizer))
    e2e.train(evaluate, data, 1, log=eval_log,
              extra=["--accumulation-steps", str(STEPS * K)])
    reference = mlp.MLP(seed=opset)
    with torch.no_grad():
        for name, p in reference.named_parameters():
            p.copy_(torch.tensor(want[name]))
        trained_loss = F.cross_entropy(reference.logits(torch.tensor(x)), torch.tensor(y)).item()
    e2e.assert_close("%s exported model's loss" % tag, e2e.read_jsonl(eval_log)[0]["loss"],
                     trained_loss, rtol=1e-5, atol=1e-7)
