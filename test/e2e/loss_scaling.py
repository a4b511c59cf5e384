# Loss scaling: power-of-two scales are exact, so a statically scaled run
# equals an unscaled one bit for bit (with SGD, whose update is linear in
# the gradient: a gradient left scaled would move the parameters 1024 times
# as far, where Adam would hide it), and so do the gradient norms it logs;
# the scale is also undone with non-power-of-two scales (to rounding). With
# dynamic scaling, a window whose
# scaled gradient overflows is skipped: parameters, Adam's moments and the
# optimizer step count stay as they were (the run equals, bit for bit, an
# unscaled run on the data without that window), the accumulator is
# cleared, the scale backs off, and it grows again after `interval` finite
# steps. metrics.jsonl shows loss_scale and skipped. Overflow starts at the
# scale where it starts with PyTorch's GradScaler, on the same data.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e

out = sys.argv[1]
B, K = 4, 2
E = B * K

# Linear regression with a mean squared error: a huge input makes a huge
# but finite loss whose gradient overflows f32 once scaled by 65536.
rng = np.random.default_rng(0)
nodes = [helper.make_node("Gemm", ["x", "w", "b"], ["p"]),
         helper.make_node("Sub", ["p", "y"], ["d"]),
         helper.make_node("Mul", ["d", "d"], ["e"]),
         helper.make_node("ReduceMean", ["e"], ["loss"], keepdims=0)]
graph = helper.make_graph(
    nodes, "regression",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
     helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(rng.standard_normal((4, 1)).astype(np.float32), "w"),
     numpy_helper.from_array(np.zeros(1, np.float32), "b")])
model = os.path.join(out, "regression.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)

x = rng.standard_normal((5 * E, 4)).astype(np.float32)
y = rng.standard_normal((5 * E, 1)).astype(np.float32)
clean = os.path.join(out, "clean.npz")
np.savez(clean, x=x, y=y)
poisoned_x = x.copy()
poisoned_x[2 * E + 3] = 1e18  # window 3
poisoned = os.path.join(out, "poisoned.npz")
np.savez(poisoned, x=poisoned_x, y=y)
without = os.path.join(out, "without3.npz")
keep = np.r_[0:2 * E, 3 * E:5 * E]
np.savez(without, x=x[keep], y=y[keep])


def run(tag, data, steps, scale, extra=(), optimizer="adam", lr=0.05):
    art = e2e.compile_model(model, os.path.join(out, tag), B, accumulation_steps=K,
                            optimizer=optimizer, lr=lr, loss_scale=scale)
    trained, log = os.path.join(out, tag + ".onnx"), os.path.join(out, tag + ".jsonl")
    e2e.train(art, data, steps, export=trained, log=log, extra=list(extra))
    return e2e.initializers(trained), e2e.read_jsonl(log), art


def same(a, b, what):
    for name in a:
        assert np.array_equal(a[name], b[name]), "%s: %s differs" % (what, name)


# 1. Static scaling is exact.
plain, plain_log, _ = run("plain", clean, 5, "none", optimizer="sgd")
static, static_log, art = run("static", clean, 5, "static:1024", optimizer="sgd")
same(static, plain, "static:1024 vs none")
initial = e2e.initializers(model)
assert all(np.abs(plain[n] - initial[n]).max() > 1e-3 for n in initial), "SGD did not train"
assert [r["grad_norm"] for r in static_log] == [r["grad_norm"] for r in plain_log]
odd, odd_log, _ = run("odd", clean, 5, "static:1000", optimizer="sgd")
for name in plain:
    e2e.assert_close("static:1000 " + name, odd[name], plain[name], rtol=1e-5, atol=1e-6)
for a, b in zip(odd_log, plain_log):
    e2e.assert_close("static:1000 grad_norm", a["grad_norm"], b["grad_norm"], rtol=1e-5,
                     atol=0)
assert json.load(open(os.path.join(art, "step.json")))["loss_scale"] == \
    {"mode": "static", "scale": 1024.0}
assert all(r["loss_scale"] == 1024 and not r["skipped"] for r in static_log)
assert "loss_scale" not in plain_log[0]

# 2. An overflow at window 3 is skipped.
two, _, _ = run("two", poisoned, 2, "dynamic")
three, log3, _ = run("three", poisoned, 3, "dynamic")
same(three, two, "the skipped step")
assert [r["skipped"] for r in log3] == [False, False, True], log3
assert log3[2]["grad_norm"] is None  # not finite: JSON null
five, log5, _ = run("five", poisoned, 5, "dynamic")
assert [r["loss_scale"] for r in log5] == [65536, 65536, 65536, 32768, 32768], log5
assert [r["loss_scale"] for r in log5] == e2e.grad_scaler_scales(r["skipped"] for r in log5)
assert [r["optimizer_steps"] for r in log5] == [1, 2, 2, 3, 4], log5
# Windows 1, 2, 4, 5 without scaling, as four plain steps: the same
# parameters, so the skip left Adam's moments and step count alone and
# cleared the accumulator.
reference, _, _ = run("reference", without, 4, "none")
same(five, reference, "training after the skip")

# 3. The scale grows after `interval` finite steps.
_, grow_log, _ = run("grow", clean, 5, "dynamic:init=8,interval=2")
assert [r["loss_scale"] for r in grow_log] == [8, 8, 16, 16, 32], grow_log
assert [r["loss_scale"] for r in grow_log] == e2e.grad_scaler_scales(
    [False] * 5, init=8, interval=2)

# 5. The scale at which gradients overflow is GradScaler's. PyTorch's
# recipe scales each micro-batch's mean loss divided by K, so the backward
# sees S times the gradient of the window's mean loss; Accrue seeds each
# micro-batch's loss sum with S / P, P the power of two at or below the
# window's count (here b*K = 8 elements: P = 8), which is the same. Each of
# 30 windows holds one row of magnitude 1e12..1e15, so overflow starts at
# scales from about 2^47 down to 2^27; from 2^40, with growth every 3 finite
# steps, the scale backs off and grows again. The reference is PyTorch
# itself (float32, the scaled backward and the isfinite check GradScaler's
# unscale_ does, its update rule; learning rate 0, so the parameters stay
# where both started). Seeding the loss sum with S (what Accrue did before)
# overflows at scales 8 times smaller: a different trace, checked below so
# the comparison can tell the two apart.
import torch

WINDOWS, INIT = 30, 2.0 ** 40
grng = np.random.default_rng(5)
gx = grng.standard_normal((WINDOWS * E, 4)).astype(np.float32)
gy = grng.standard_normal((WINDOWS * E, 1)).astype(np.float32)
for window in range(WINDOWS):
    row = window * E + grng.integers(E)
    gx[row] = (10.0 ** grng.uniform(12, 15)) * np.sign(grng.standard_normal(4))
scaled_data = os.path.join(out, "grad_scaler.npz")
np.savez(scaled_data, x=gx, y=gy)


def grad_scaler_trace(factor=1.0):
    start = e2e.initializers(model)
    w = torch.tensor(start["w"], requires_grad=True)
    b = torch.tensor(start["b"], requires_grad=True)
    scale, finite, trace = INIT, 0, []
    for window in range(WINDOWS):
        w.grad = b.grad = None
        for m in range(K):
            rows = slice(window * E + m * B, window * E + (m + 1) * B)
            p = torch.from_numpy(gx[rows]) @ w + b
            loss = ((p - torch.from_numpy(gy[rows])) ** 2).mean() / K
            (loss * torch.tensor(scale * factor, dtype=torch.float32)).backward()
        overflow = not all(bool(torch.isfinite(t.grad).all()) for t in (w, b))
        trace.append((scale, overflow))
        if overflow:
            scale, finite = scale * 0.5, 0
        else:
            finite += 1
            if finite == 3:
                scale, finite = scale * 2.0, 0
    return trace


_, gs_log, _ = run("grad_scaler", scaled_data, WINDOWS, "dynamic:init=%d,interval=3" % INIT,
                   optimizer="sgd", lr=0)
ours = [(r["loss_scale"], r["skipped"]) for r in gs_log]
reference = grad_scaler_trace()
print("GradScaler's trace:", reference)
assert ours == reference, (ours, reference)
skipped = sum(s for _, s in ours)
assert 3 <= skipped <= WINDOWS - 3, ours  # backs off and grows again
assert grad_scaler_trace(factor=E) != reference

# 4. Bad settings name the flag.
bad = e2e.run([e2e.tool("accrue-compile"), model, "-o", os.path.join(out, "bad"),
               "--micro-batch", "4", "--loss-scale", "dynamic:growth=0.5"], expect_ok=False)
assert bad.returncode == 1 and "--loss-scale 'dynamic:growth=0.5': growth must exceed 1" \
    in bad.stderr, bad.stderr
print("ok")
