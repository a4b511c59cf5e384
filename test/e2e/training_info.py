# A model that carries its training algorithm (a TrainingInfoProto with
# ai.onnx.preview.training's Gradient and an Adam, Momentum or Adagrad
# node) compiles without optimizer flags: the loss, the trained tensors,
# the optimizer, its hyperparameters and the learning rate come from the
# model. Five accumulated steps (b=4, K=2) match PyTorch's gradients fed to
# ONNX's own reference update functions (onnx/backend/test/case/node), which
# take the update count T = completed steps. A third of the labels are
# ignored, so the micro-batches count unequal numbers of samples.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import helper, numpy_helper
from onnx.backend.test.case.node.adagrad import apply_adagrad
from onnx.backend.test.case.node.adam import apply_adam
from onnx.backend.test.case.node.momentum import apply_momentum, apply_nesterov

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
B, K, STEPS, LR = 4, 2, 5, 0.05
E = B * K
DOMAIN = "ai.onnx.preview.training"
x, y = mlp.dataset(STEPS * E, seed=4, ignored=0.3)
mlp.assert_unequal_counts(y, B, E)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)

OPTIMIZERS = {
    "adam": ("Adam", dict(alpha=0.9, beta=0.99, epsilon=1e-6, norm_coefficient=0.01), 2),
    "momentum": ("Momentum", dict(alpha=0.9, beta=0.5, mode="standard",
                                  norm_coefficient=0.01), 1),
    "nesterov": ("Momentum", dict(alpha=0.8, beta=1.0, mode="nesterov",
                                  norm_coefficient=0.0), 1),
    "adagrad": ("Adagrad", dict(decay_factor=0.1, epsilon=1e-6, norm_coefficient=0.01), 1),
}


def with_training_info(path, kind):
    """The exported MLP plus a training algorithm for all its weights."""
    op, attrs, num_states = OPTIMIZERS[kind]
    model = onnx.load(path)
    params = [t.name for t in model.graph.initializer]
    grads = ["grad_" + p for p in params]
    states = [["state%d_%s" % (s, p) for p in params] for s in range(num_states)]
    inits = [numpy_helper.from_array(np.array(LR, np.float32), "R"),
             numpy_helper.from_array(np.array(0, np.int64), "T"),
             numpy_helper.from_array(np.array(1, np.int64), "one")]
    shapes = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    for group in states:
        inits += [numpy_helper.from_array(np.zeros(shapes[p], np.float32), n)
                  for n, p in zip(group, params)]
    new = lambda names: [n + "_new" for n in names]
    nodes = [
        helper.make_node("Gradient", params + ["x", "y"], grads, domain=DOMAIN,
                         xs=params, zs=["x", "y"], y="loss"),
        helper.make_node(op, ["R", "T"] + params + grads + sum(states, []),
                         new(params) + sum((new(g) for g in states), []),
                         domain=DOMAIN, name="optimizer", **attrs),
        helper.make_node("Add", ["T", "one"], ["T_new"]),
    ]
    outputs = new(params) + sum((new(g) for g in states), []) + ["T_new"]
    algorithm = helper.make_graph(nodes, "algorithm", [], [
        helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None) for n in outputs
    ], inits)
    bindings = {p: p + "_new" for p in params}
    bindings.update({n: n + "_new" for g in states for n in g})
    bindings["T"] = "T_new"
    info = helper.make_training_info(algorithm, list(bindings.items()), None, None)
    model.training_info.append(info)
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    result = os.path.join(out, "mlp_%s.onnx" % kind)
    onnx.save(model, result)
    return result


def reference(kind):
    """PyTorch's gradients of the effective batch, ONNX's update functions."""
    op, attrs, num_states = OPTIMIZERS[kind]
    module = mlp.MLP(seed=5)
    params = [p for _, p in module.named_parameters()]
    states = [[np.zeros(p.shape, np.float32) for p in params] for _ in range(num_states)]
    xt, yt = torch.tensor(x), torch.tensor(y)
    for t in range(STEPS):
        module.zero_grad()
        s = slice(t * E, (t + 1) * E)
        F.cross_entropy(module.logits(xt[s]), yt[s]).backward()
        r, T = np.float32(LR), np.int64(t)
        for i, p in enumerate(params):
            X, G = p.detach().numpy(), p.grad.numpy()
            if op == "Adam":
                X, states[0][i], states[1][i] = apply_adam(
                    r, T, X, G, states[0][i], states[1][i], attrs["norm_coefficient"], 0.0,
                    attrs["alpha"], attrs["beta"], attrs["epsilon"])
            elif op == "Adagrad":
                X, states[0][i] = apply_adagrad(r, T, X, G, states[0][i],
                                                attrs["norm_coefficient"], attrs["epsilon"],
                                                attrs["decay_factor"])
            else:
                update = apply_nesterov if attrs["mode"] == "nesterov" else apply_momentum
                X, states[0][i] = update(r, T, X, G, states[0][i], attrs["norm_coefficient"],
                                         attrs["alpha"], attrs["beta"])
            with torch.no_grad():
                p.copy_(torch.tensor(np.asarray(X, np.float32)))
    return {n: p.detach().numpy() for n, p in module.named_parameters()}


plain = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=5), plain)
for kind in OPTIMIZERS:
    model = with_training_info(plain, kind)
    # No --optimizer, --lr or --loss: all from the TrainingInfoProto.
    art = e2e.compile_model(model, os.path.join(out, kind), B, accumulation_steps=K)
    manifest = json.load(open(os.path.join(art, "step.json")))
    print(kind, manifest["optimizer"])
    assert manifest["optimizer"]["lr"] == np.float32(LR), manifest["optimizer"]
    trained = os.path.join(out, kind + "_trained.onnx")
    e2e.train(art, data, STEPS, export=trained)
    got = e2e.initializers(trained)
    # Adam's step is r * V / (sqrt(H) + eps): for a gradient entry near
    # eps / sqrt(1 - beta) it magnifies the last-bit differences of two
    # correct gradients (different summation orders), so Adam gets an
    # absolute tolerance of 2e-4 of a step.
    atol = 1e-5 if kind == "adam" else 1e-6
    for name, value in reference(kind).items():
        e2e.assert_close("%s %s" % (kind, name), got[name], value, rtol=1e-5, atol=atol)
    # The export keeps the training algorithm.
    assert len(onnx.load(trained).training_info) == 1

# A Momentum mode Accrue does not know is refused, naming the node, as in a
# graph (it used to train as the standard mode).
OPTIMIZERS["heavy_ball"] = ("Momentum", dict(alpha=0.9, mode="heavy-ball"), 1)
proc = e2e.run([e2e.tool("accrue-compile"), with_training_info(plain, "heavy_ball"), "-o",
                os.path.join(out, "heavy_ball"), "--micro-batch", str(B)], expect_ok=False)
assert proc.returncode != 0 and "optimizer'" in proc.stderr and \
    "unknown mode 'heavy-ball'" in proc.stderr, proc.stderr
assert not os.path.exists(os.path.join(out, "heavy_ball"))

# Flags given explicitly override the model's algorithm: the Adam model
# compiled with --optimizer sgd --lr 0.02 trains exactly as the plain model
# does with those flags.
overridden = e2e.compile_model(with_training_info(plain, "adam"), os.path.join(out, "override"),
                               B, accumulation_steps=K, optimizer="sgd", lr=0.02)
manifest = json.load(open(os.path.join(overridden, "step.json")))["optimizer"]
assert manifest["name"] == "sgd" and abs(manifest["lr"] - 0.02) < 1e-9, manifest
e2e.train(overridden, data, STEPS, export=os.path.join(out, "override.onnx"))
flags_only = e2e.compile_model(plain, os.path.join(out, "flags_only"), B, accumulation_steps=K,
                               optimizer="sgd", lr=0.02)
e2e.train(flags_only, data, STEPS, export=os.path.join(out, "flags_only.onnx"))
got, want = (e2e.initializers(os.path.join(out, f)) for f in ["override.onnx", "flags_only.onnx"])
for name, value in want.items():
    assert np.array_equal(got[name], value), "override: " + name
print("ok")
