# Mixed precision: bf16 and fp16 compute (fp32 master weights, gradients,
# accumulator and optimizer state, each checked to hold fp32 values) trains the MLP and the GPT for 20 AdamW
# steps within a stated tolerance of the fp32 run, and visibly differs from
# it (the casts are real). fp16 gradients accumulated over K=64
# micro-batches are as accurate as over K=4: the fp32 accumulator keeps
# the error from growing with K.
#
# Tolerances: every step's loss within 1% (bf16) / 0.2% (fp16) of fp32's;
# the total parameter update within 5% (bf16) / 1% (fp16) of fp32's, in
# relative L2 norm (bf16 keeps 8 bits of mantissa, fp16 11; measured on
# the development machine: 1.6%/0.02% MLP, 1.1%/0.16% GPT).
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

# fp16 with dynamic loss scaling, as fp16 is meant to run. The backward is
# seeded the way PyTorch's GradScaler seeds it (the scale times the mean
# loss's gradient), so GradScaler's initial 65536 fits this small GPT with
# nothing skipped. Started at 2^24, the scaled fp16 adjoints overflow: the
# early steps that overflow are skipped, each halving the scale, until it
# settles (here at 131072 after 7 skips, 13 steps applied out of 20).
_, default_log = run(gpt, gdata, "gpt_fp16_default", 2, 2, "fp16", lr=0.003,
                     loss_scale="dynamic", steps=4)
assert [r["loss_scale"] for r in default_log] == [65536] * 4, default_log
assert not any(r["skipped"] for r in default_log), default_log
_, scaled_log = run(gpt, gdata, "gpt_fp16_scaled", 2, 2, "fp16", lr=0.003,
                    loss_scale="dynamic:init=%d" % 2 ** 24)
skips = [r["skipped"] for r in scaled_log]
print("fp16 loss scale by step:", [r["loss_scale"] for r in scaled_log])
# The scales follow GradScaler's rule applied to the run's own overflows.
assert [r["loss_scale"] for r in scaled_log] == e2e.grad_scaler_scales(skips, init=2 ** 24), \
    scaled_log
assert any(skips[:5]) and not any(skips[-5:]), skips
settled = scaled_log[-1]["loss_scale"]
assert settled == 2 ** 24 / 2 ** sum(skips), (settled, skips)
assert scaled_log[-1]["optimizer_steps"] == STEPS - sum(skips)
# Started at the settled scale, nothing is skipped and the run stays within
# fp16's tolerance of fp32.
low, low_log = run(gpt, gdata, "gpt_fp16_fits", 2, 2, "fp16", lr=0.003,
                   loss_scale="dynamic:init=%d" % settled)
assert not any(r["skipped"] for r in low_log)
compare("GPT (loss scaling)", low, low_log, ref, ref_log, e2e.initializers(gpt), "fp16")

# Master weights, accumulators and optimizer state stay fp32 under bf16
# compute. SGD at lr 1e-6 moves the MLP's parameters (|p| ~ 0.1-0.5) by
# ~1e-7 per step: below bf16's spacing there (2^-10 to 2^-8), above fp32's.
# bf16 master weights would lose every update and round the initial values
# by up to 0.4%; fp32 ones apply the updates fp32 would, to the accuracy of
# bf16 gradients.
initial = e2e.initializers(model)
tiny = {p: run(model, data, "tiny_" + p, 8, 2, p, steps=3, optimizer="sgd", lr=1e-6)[0]
        for p in ["fp32", "bf16"]}
moved = {p: np.concatenate([(tiny[p][n] - initial[n]).ravel() for n in initial])
         for p in tiny}
assert 0 < np.abs(moved["fp32"]).max() < 1e-5, np.abs(moved["fp32"]).max()
tiny_err = np.linalg.norm(moved["bf16"] - moved["fp32"]) / np.linalg.norm(moved["fp32"])
print("bf16 master weights: updates of ~1e-7 kept, off by %.3g (relative)" % tiny_err)
assert tiny_err < TOLERANCE["bf16"]["update"], tiny_err


def not_bf16(arrays):
    """The fraction of the nonzero values of `arrays` (float32) that bf16
    cannot represent: 0 for bf16 storage widened to float32; well above 0
    for float32 sums of bf16 terms (exact zeros, such as the gradients of
    ReLU's dead units, are representable either way)."""
    bits = np.concatenate([np.ascontiguousarray(a, np.float32).ravel() for a in arrays])
    bits = bits[bits != 0].view(np.uint32)
    return np.mean((bits & 0xFFFF) != 0)


# The optimizer state (a checkpoint of 3 bf16 AdamW steps) and the
# accumulated gradients (K=4) are float32 values, not widened bf16 ones.
ckpt = os.path.join(out, "bf16_ckpt")
art = e2e.compile_model(model, os.path.join(out, "bf16_adamw"), 8, accumulation_steps=2,
                        precision="bf16", lr=0.01)
e2e.train(art, data, 3, extra=["--checkpoint-dir", ckpt])
state = e2e.read_safetensors(os.path.join(ckpt, sorted(os.listdir(ckpt))[-1]))
for name, value in state.items():
    assert value.dtype == np.float32, (name, value.dtype)
for kind in ["exp_avg/", "exp_avg_sq/", ""]:
    group = [v for n, v in state.items() if n.startswith(kind) and (kind or "/" not in n)]
    assert group and not_bf16(group) > 0.25, "%s state holds bf16 values" % (kind or "weight")
art = e2e.compile_model(model, os.path.join(out, "bf16_grads"), 4, accumulation_steps=4,
                        precision="bf16", optimizer="none")
e2e.train(art, data, 1, extra=["--save-gradients", os.path.join(out, "bf16_grads.npz")])
grads = np.load(os.path.join(out, "bf16_grads.npz"))
assert not_bf16([grads[n] for n in grads.files]) > 0.25, "the accumulators hold bf16 values"

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
