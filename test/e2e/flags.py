# Flags checked by the numbers they produce, not only by being accepted:
# - a model whose contractions have k = 300 > 256 (the register-blocked
#   kernels' k blocking, forward and input gradient), trained 4 AdamW steps
#   with clipping (micro-batch 8 x 2, a third of the labels ignored) against
#   PyTorch's manual accumulation loop: by default, with --no-vectorize
#   (scalar loops), with --no-fuse-optimizer (separate passes), with
#   --freeze (frozen tensors bit-identical to their initial values, the
#   others equal to PyTorch with requires_grad=False on them, which also
#   leaves them out of the clipping norm), with accrue-train --lr
#   overriding the compiled learning rate, and on two threads (bitwise the
#   one-thread result);
# - --keep-checkpoints: exactly the newest K checkpoints remain, and the
#   newest resumes bit-identically;
# - resuming a checkpoint with an artifact of another optimizer is refused;
# - --seed: Dropout masks are a function of the seed (the same seed gives the
#   same mask, another seed another), with the kept fraction 1 - ratio.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import re
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e

out = sys.argv[1]
B, K, STEPS, LR, WD, CLIP = 8, 2, 4, 0.01, 0.02, 0.3
E = B * K
IN, HIDDEN, CLASSES, IGNORE = 300, 24, 3, -100


class Deep(torch.nn.Module):
    """300 -> 24 -> 300 -> 3: k = 300 in the forward of fc1 and fc3 and in
    the input gradient of fc2's output."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, IN)
        self.fc3 = torch.nn.Linear(IN, CLASSES)

    def logits(self, x):
        return self.fc3(torch.tanh(self.fc2(torch.tanh(self.fc1(x)))))

    def forward(self, x, y):
        return F.cross_entropy(self.logits(x), y)


rng = np.random.default_rng(9)
x = rng.standard_normal((STEPS * E, IN)).astype(np.float32)
y = rng.integers(0, CLASSES, STEPS * E)
y[rng.random(STEPS * E) < 0.3] = IGNORE
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)
model = os.path.join(out, "deep.onnx")
torch.onnx.export(Deep(), (torch.zeros(2, IN), torch.zeros(2, dtype=torch.int64)), model,
                  input_names=["x", "y"], output_names=["loss"],
                  dynamic_axes={"x": {0: "N"}, "y": {0: "N"}}, opset_version=13,
                  training=torch.onnx.TrainingMode.TRAINING, do_constant_folding=False)
initial = e2e.initializers(model)


def pytorch(lr=LR, frozen=()):
    module = Deep()
    for name, p in module.named_parameters():
        p.requires_grad_(not any(re.fullmatch(f, name) for f in frozen))
    trained = [p for p in module.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trained, lr=lr, weight_decay=WD)
    xt, yt = torch.tensor(x), torch.tensor(y)
    log = []
    for step in range(STEPS):
        opt.zero_grad()
        count = int((yt[step * E:(step + 1) * E] != IGNORE).sum())
        total = 0.0
        for k in range(K):
            s = slice(step * E + k * B, step * E + (k + 1) * B)
            loss = F.cross_entropy(module.logits(xt[s]), yt[s], reduction="sum") / count
            loss.backward()
            total += loss.item()
        log.append((total, torch.nn.utils.clip_grad_norm_(trained, CLIP).item()))
        opt.step()
    return {n: p.detach().numpy() for n, p in module.named_parameters()}, log


def check(tag, want, train_extra=(), **flags):
    art = e2e.compile_model(model, os.path.join(out, tag), B, accumulation_steps=K,
                            optimizer="adamw", lr=LR, weight_decay=WD, clip_norm=CLIP,
                            **flags)
    trained, log = os.path.join(out, tag + ".onnx"), os.path.join(out, tag + ".jsonl")
    e2e.train(art, data, STEPS, export=trained, log=log, extra=list(train_extra))
    got = e2e.initializers(trained)
    params, want_log = want
    for name, value in params.items():
        if not re.fullmatch(flags.get("freeze", "-"), name):
            assert np.abs(value - initial[name]).max() > 1e-4, "%s did not train" % name
        # AdamW's m / sqrt(v) magnifies float32 rounding of the gradient
        # where successive gradients cancel in m: 5e-5 is 0.5% of one step.
        e2e.assert_close("%s %s" % (tag, name), got[name], value, rtol=1e-5, atol=5e-5)
    moved = np.concatenate([(params[n] - initial[n]).ravel() for n in params])
    diff = np.concatenate([(got[n] - params[n]).ravel() for n in params])
    relative = np.linalg.norm(diff) / np.linalg.norm(moved)
    print("%s: update off by %.3g (relative L2)" % (tag, relative))
    assert relative < 1e-4, relative
    for record, (loss, norm) in zip(e2e.read_jsonl(log), want_log):
        e2e.assert_close("%s step %d loss" % (tag, record["step"]), record["loss"], loss,
                         rtol=1e-5, atol=1e-7)
        e2e.assert_close("%s step %d grad_norm" % (tag, record["step"]), record["grad_norm"],
                         norm, rtol=1e-5, atol=1e-7)
    return got, art


reference = pytorch()
assert max(n for _, n in reference[1]) > CLIP, "clipping must be active"
default, art = check("default", reference)
check("no_vectorize", reference, no_vectorize=True)
check("no_fuse_optimizer", reference, no_fuse_optimizer=True)
frozen, _ = check("freeze", pytorch(frozen=[r"fc2\..*"]), freeze=r"fc2\..*")
for name in ["fc2.weight", "fc2.bias"]:
    assert np.array_equal(frozen[name], initial[name]), "frozen %s moved" % name
check("train_lr", pytorch(lr=0.003), train_extra=["--lr", "0.003"])
# Two threads (the suite runs one): the k > 256 contractions' parallel
# blocks against PyTorch, and the same bits as one thread.
two, _ = check("two_threads", reference, train_extra=["--threads", "2"])
for name, value in default.items():
    assert np.array_equal(two[name], value), "2 threads changed " + name

# --keep-checkpoints 2 of a checkpoint every step: the two newest remain.
ckpt = os.path.join(out, "ckpt")
base = [e2e.tool("accrue-train"), art, "--data", data, "--no-progress", "--checkpoint-dir",
        ckpt, "--checkpoint-every", "1", "--keep-checkpoints", "2"]
e2e.run(base + ["--steps", "3"])
kept = sorted(f for f in os.listdir(ckpt) if f.endswith(".safetensors"))
assert len(kept) == 2 and "2" in kept[0] and "3" in kept[1], kept
resumed = os.path.join(out, "resumed.onnx")
e2e.run(base + ["--steps", str(STEPS), "--resume", "--export", resumed])
for name, value in default.items():
    assert np.array_equal(e2e.initializers(resumed)[name], value), "resumed " + name
assert len([f for f in os.listdir(ckpt) if f.endswith(".safetensors")]) == 2

# A checkpoint of AdamW resumed by an SGD artifact is refused, naming both.
sgd = e2e.compile_model(model, os.path.join(out, "sgd"), B, accumulation_steps=K,
                        optimizer="sgd", lr=LR)
proc = e2e.run([e2e.tool("accrue-train"), sgd, "--data", data, "--no-progress", "--steps", "5",
                "--checkpoint-dir", ckpt, "--resume"], expect_ok=False)
assert proc.returncode != 0 and "adamw" in proc.stderr and "sgd" in proc.stderr, proc.stderr
assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1, proc.stderr

# --seed: a gradient-only step of loss = sum(Dropout(p + x) * w) over one
# sample gives d/dp = mask * w / (1 - ratio): the mask itself.
D, RATIO = 4096, 0.25
w = np.linspace(0.5, 1.5, D).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("Add", ["p", "x"], ["a"]),
     helper.make_node("Dropout", ["a", "ratio", "training"], ["d"]),
     helper.make_node("Mul", ["d", "w"], ["m"]),
     helper.make_node("ReduceSum", ["m"], ["loss"], keepdims=0)],
    "dropout",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", D])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.zeros(D, np.float32), "p"),
     numpy_helper.from_array(w, "w"),
     numpy_helper.from_array(np.array(RATIO, np.float32), "ratio"),
     numpy_helper.from_array(np.array(True), "training")])
dropout = os.path.join(out, "dropout.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), dropout)
np.savez(os.path.join(out, "one.npz"), x=np.ones((1, D), np.float32))


def mask(tag, seed):
    art = e2e.compile_model(dropout, os.path.join(out, tag), 1, optimizer="none",
                            freeze="w", seed=seed)
    grads = os.path.join(out, tag + ".npz")
    e2e.train(art, os.path.join(out, "one.npz"), 1, extra=["--save-gradients", grads])
    g = np.load(grads)["p"] * (1 - RATIO) / w
    assert np.all((np.abs(g) < 1e-6) | (np.abs(g - 1) < 1e-5)), g
    return g > 0.5


m1, m1_again, m2 = mask("seed1", 1), mask("seed1_again", 1), mask("seed2", 2)
assert np.array_equal(m1, m1_again), "the same seed must give the same mask"
for m in (m1, m2):
    assert abs(m.mean() - (1 - RATIO)) < 0.03, m.mean()
agree = np.mean(m1 == m2)
# Independent masks agree on (1-r)^2 + r^2 = 62.5% of the elements.
assert abs(agree - 0.625) < 0.04, agree
print("ok")
