# Exact loss normalization with padded, variable-length token batches (the
# Transformers 2024 bug): the mean over the non-ignored tokens of the whole
# effective batch, whatever the split. b=1,K=8 and b=2,K=4 train to the same
# parameters as b=8,K=1 (rtol 1e-5) for cross-entropy with ignore_index and
# for a hand-written masked mean (sum / mask.sum().clamp(min=1)); framework-
# style mean of means (--loss-normalization per-micro-batch) visibly does
# not. NegativeLogLikelihoodLoss with class weights too.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import onnx
import torch
from torch import nn
import torch.nn.functional as F

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
STEPS = 3


def train_all(path, npz, splits, **flags):
    results = {}
    for b, k in splits:
        tag = "%s_b%d_k%d_%s" % (os.path.basename(path), b, k,
                                 flags.get("loss_normalization", "exact"))
        art = e2e.compile_model(path, os.path.join(out, tag), b,
                                accumulation_steps=k, lr=0.02, **flags)
        trained = os.path.join(out, tag + ".onnx")
        log = os.path.join(out, tag + ".jsonl")
        e2e.train(art, npz, STEPS, export=trained, log=log)
        results[(b, k)] = (e2e.initializers(trained), e2e.read_jsonl(log))
    return results


def max_rel_diff(a, b):
    return max(np.abs(a[n] - b[n]).max() / (np.abs(b[n]).max() + 1e-12) for n in b)


# 1. GPTs on padded sequences: every sample keeps a random prefix of its
#    tokens, so micro-batches of one sample hold different token counts.
rng = np.random.default_rng(5)
for loss in ["mean", "masked"]:
    module = zoo.GPT(3, loss=loss)
    data = module.data(8 * STEPS, rng)
    counts = (data["targets"] != -100).sum(axis=1)
    assert len(set(counts.tolist())) > 2, counts
    path = os.path.join(out, "gpt_%s.onnx" % loss)
    zoo.export(module, data, path, 17)
    ops = {n.op_type for n in onnx.load(path).graph.node}
    assert "SoftmaxCrossEntropyLoss" in ops, ops
    npz = os.path.join(out, "gpt_%s.npz" % loss)
    np.savez(npz, **data)

    exact = train_all(path, npz, [(8, 1), (1, 8), (2, 4)])
    ref, ref_log = exact[(8, 1)]
    for key in [(1, 8), (2, 4)]:
        params, log = exact[key]
        for name in ref:
            e2e.assert_close("%s b=%d,K=%d %s" % ((loss,) + key + (name,)),
                             zoo.comparable(name, params[name]),
                             zoo.comparable(name, ref[name]), rtol=1e-5, atol=1e-6)
        for got, want in zip(log, ref_log):
            e2e.assert_close("%s b=%d,K=%d loss" % ((loss,) + key), got["loss"],
                             want["loss"], rtol=1e-5, atol=1e-7)

    # The framework default (mean of the micro-batch means) differs.
    framework = train_all(path, npz, [(1, 8)], loss_normalization="per-micro-batch")
    off = max_rel_diff(framework[(1, 8)][0], ref)
    print("%s: per-micro-batch normalization, max relative parameter difference %.3g"
          % (loss, off))
    assert off > 1e-3, off
    assert abs(framework[(1, 8)][1][0]["loss"] - ref_log[0]["loss"]) > 1e-4


# 2. NegativeLogLikelihoodLoss with class weights and ignore_index: the
#    denominator is the weight sum of the non-ignored targets.
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.fc = nn.Linear(5, 4)
        self.register_buffer("w", torch.tensor([0.5, 1.0, 2.0, 3.0]))

    def forward(self, x, y):
        # log(softmax) rather than log_softmax, which the exporter would
        # fuse with nll_loss into SoftmaxCrossEntropyLoss.
        return F.nll_loss(torch.log(F.softmax(self.fc(x), dim=1)), y, weight=self.w,
                          ignore_index=3)


x = rng.standard_normal((8 * STEPS, 5)).astype(np.float32)
y = rng.integers(0, 4, 8 * STEPS).astype(np.int64)
# Every pair keeps a label, so that per-micro-batch means at b=2 are defined.
y[0::2][(y[0::2] == 3) & (y[1::2] == 3)] = 0
data = {"x": x, "y": y}
path = os.path.join(out, "nll.onnx")
zoo.export(Classifier(), data, path, 13)
assert "NegativeLogLikelihoodLoss" in {n.op_type for n in onnx.load(path).graph.node}
npz = os.path.join(out, "nll.npz")
np.savez(npz, **data)
exact = train_all(path, npz, [(8, 1), (1, 8)])
# Class weights are a buffer, not a parameter: weight decay leaves them be.
assert np.array_equal(exact[(8, 1)][0]["w"], [0.5, 1.0, 2.0, 3.0]), exact[(8, 1)][0]["w"]
for name, value in exact[(8, 1)][0].items():
    e2e.assert_close("nll b=1,K=8 %s" % name, exact[(1, 8)][0][name], value,
                     rtol=1e-5, atol=1e-6)
framework = train_all(path, npz, [(2, 4)], loss_normalization="per-micro-batch")
assert max_rel_diff(framework[(2, 4)][0], exact[(8, 1)][0]) > 1e-3


# 3. A constant divisor: the per-sample mean written by hand,
#    sum / x.shape[0] (a count the importer finds to grow with the batch),
#    and a fixed scale, sum / 1000 (the loss is a scaled sum): both match
#    the whole batch, and a partial last window (20 samples at 8 per step)
#    stays exact for the per-sample mean.
class HandWritten(torch.nn.Module):
    def __init__(self, divisor):
        super().__init__()
        torch.manual_seed(2)
        self.fc = torch.nn.Linear(5, 4)
        self.divisor = divisor

    def forward(self, x, y):
        total = F.cross_entropy(self.fc(x), y, reduction="sum")
        return total / (x.shape[0] if self.divisor == "batch" else 1000.0)


x = rng.standard_normal((20, 5)).astype(np.float32)
y = rng.integers(0, 4, 20).astype(np.int64)
data = {"x": x, "y": y}
npz = os.path.join(out, "hand.npz")
np.savez(npz, **data)
for divisor in ["batch", "fixed"]:
    path = os.path.join(out, "hand_%s.onnx" % divisor)
    zoo.export(HandWritten(divisor), data, path, 13)
    compile_log = e2e.run([e2e.tool("accrue-compile"), path, "-o", os.path.join(out, "probe"),
                           "--micro-batch", "1"])
    assert "mean of means" not in compile_log.stderr, compile_log.stderr
    exact = train_all(path, npz, [(8, 1), (1, 8), (4, 2)])
    for key in [(1, 8), (4, 2)]:
        assert [r["samples"] for r in exact[key][1]] == [8, 8, 4], exact[key][1]
        for name, value in exact[(8, 1)][0].items():
            e2e.assert_close("%s b=%d,K=%d %s" % ((divisor,) + key + (name,)),
                             exact[key][0][name], value, rtol=1e-5, atol=1e-6)
print("ok")
