# Mixed precision: bf16 and fp16 compute (fp32 master weights, gradients,
# accumulator and optimizer state) trains the MLP and the GPT for 20 AdamW
# steps within a stated tolerance of the fp32 run, and visibly differs from
# it (the casts are real). fp16 gradients accumulated over K=64
# micro-batches are as accurate as over K=4: the fp32 accumulator keeps
# the error from growing with K.
#
# Tolerances: every step's loss within 1% (bf16) / 0.2% (fp16) of fp32's;
# the total parameter update within 5% (bf16) / 1% (fp16) of fp32's, in
# relative L2 norm (bf16 keeps 8 bits of mantissa, fp16 11; measured on
# the development machine: 1.6%/0.02% MLP, 1.2%/0.16% GPT).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np

import accrue_e2e as e2e
import mlp
import zoo

out = sys.argv[1]
STEPS = 20
TOLERANCE = {"bf16": {"update": 0.05, "loss": 0.01},
             "fp16": {"update": 0.01, "loss": 0.002}}


def run(model, data, tag, b, k, precision, steps=STEPS, **flags):
    art = e2e.compile_model(model, os.path.join(out, tag), b, accumulation_steps=k,
                            precision=precision, **flags)
    assert json.load(open(os.path.join(art, "step.json")))["precision"] == precision
    trained, log = os.path.join(out, tag + ".onnx"), os.path.join(out, tag + ".jsonl")
    e2e.train(art, data, steps, export=trained, log=log)
    return e2e.initializers(trained), e2e.read_jsonl(log)


def compare(name, low, low_log, ref, ref_log, initial, precision):
    """The low-precision run's total parameter update against fp32's
    (relative L2 error), and its losses step by step."""
    tol = TOLERANCE[precision]
    c = zoo.comparable  # without the GPT's key bias, whose exact gradient is 0
    diff = np.sqrt(sum(np.sum((c(n, low[n]) - c(n, ref[n])) ** 2) for n in ref))
    update = np.sqrt(sum(np.sum((c(n, ref[n]) - c(n, initial[n])) ** 2) for n in ref))
    loss_err = max(abs(a["loss"] - b["loss"]) / abs(b["loss"]) for a, b in zip(low_log, ref_log))
    print("%s %s: update off by %.3g (relative), losses within %.3g"
          % (name, precision, diff / update, loss_err))
    assert diff / update < tol["update"] and loss_err < tol["loss"], (diff / update, loss_err)
    assert diff > 1e-6, "%s %s trains exactly like fp32: no casts?" % (name, precision)


# The MLP, micro-batch 8 x 2.
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=1), model)
x, y = mlp.dataset(STEPS * 16, seed=2)
data = os.path.join(out, "mlp.npz")
np.savez(data, x=x, y=y)
ref, ref_log = run(model, data, "mlp_fp32", 8, 2, "fp32", lr=0.01)
for precision in ["bf16", "fp16"]:
    low, low_log = run(model, data, "mlp_" + precision, 8, 2, precision, lr=0.01)
    compare("MLP", low, low_log, ref, ref_log, e2e.initializers(model), precision)

# The GPT (LayerNorm, softmax attention, GELU), micro-batch 2 x 2.
module = zoo.GPT(6)
tokens = module.data(STEPS * 4, np.random.default_rng(7))
gpt = os.path.join(out, "gpt.onnx")
zoo.export(module, tokens, gpt, 17)
gdata = os.path.join(out, "gpt.npz")
np.savez(gdata, **tokens)
ref, ref_log = run(gpt, gdata, "gpt_fp32", 2, 2, "fp32", lr=0.003)
for precision in ["bf16", "fp16"]:
    low, low_log = run(gpt, gdata, "gpt_" + precision, 2, 2, precision, lr=0.003)
    compare("GPT", low, low_log, ref, ref_log, e2e.initializers(gpt), precision)

# fp16 with dynamic loss scaling, as fp16 is meant to run. From
# GradScaler's initial 65536 the GPT's scaled fp16 adjoints overflow: the
# early steps that overflow are skipped, each halving the scale, until it
# settles (here at 4096: 16 steps are applied out of 20, none skipped in
# the second half).
_, scaled_log = run(gpt, gdata, "gpt_fp16_scaled", 2, 2, "fp16", lr=0.003,
                    loss_scale="dynamic")
skips = [r["skipped"] for r in scaled_log]
print("fp16 loss scale by step:", [r["loss_scale"] for r in scaled_log])
assert any(skips[:10]) and not any(skips[10:]), skips
settled = scaled_log[-1]["loss_scale"]
assert settled == 65536 / 2 ** sum(skips), (settled, skips)
assert scaled_log[-1]["optimizer_steps"] == STEPS - sum(skips)
# Started at the settled scale, nothing is skipped and the run stays within
# fp16's tolerance of fp32.
low, low_log = run(gpt, gdata, "gpt_fp16_fits", 2, 2, "fp16", lr=0.003,
                   loss_scale="dynamic:init=%d" % settled)
assert not any(r["skipped"] for r in low_log)
compare("GPT (loss scaling)", low, low_log, ref, ref_log, e2e.initializers(gpt), "fp16")

# fp16 gradients of 4 x K samples against fp32's, for K = 4, 16 and 64.
errors = {}
for k in [4, 16, 64]:
    grads = {}
    for precision in ["fp32", "fp16"]:
        art = e2e.compile_model(model, os.path.join(out, "g_%s_%d" % (precision, k)), 4,
                                accumulation_steps=k, precision=precision, optimizer="none")
        path = os.path.join(out, "g_%s_%d.npz" % (precision, k))
        e2e.train(art, data, 1, extra=["--save-gradients", path])
        grads[precision] = np.load(path)
    num = sum(np.sum((grads["fp16"][n] - grads["fp32"][n]) ** 2) for n in grads["fp32"].files)
    den = sum(np.sum(grads["fp32"][n] ** 2) for n in grads["fp32"].files)
    errors[k] = np.sqrt(num / den)
print("fp16 gradient relative error by K:", errors)
assert all(e < 5e-3 for e in errors.values()), errors
assert errors[64] < 2 * errors[4], "the error grows with K"
print("ok")
