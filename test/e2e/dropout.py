# Training-mode Dropout: the mask of element e of sample i at optimizer step
# t depends only on (seed, t, i, e). So splitting the same effective batch
# into different micro-batches gives bit-for-bit the same masks and the same
# training; the kept fraction is 1 - ratio; the mask changes from step to
# step for the same samples.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e
import zoo

out = sys.argv[1]

# 1. A GPT with embedding dropout, trained with three micro-batch splits of
#    the same effective batch of 8.
module = zoo.GPT(7, dropout=0.3)
rng = np.random.default_rng(3)
data = module.data(24, rng)
path = os.path.join(out, "gpt_dropout.onnx")
zoo.export(module, data, path, 17)
assert any(n.op_type == "Dropout" for n in onnx.load(path).graph.node)
npz = os.path.join(out, "gpt.npz")
np.savez(npz, **data)
results = {}
for b, k in [(2, 4), (8, 1), (4, 2)]:
    art = e2e.compile_model(path, os.path.join(out, "gpt_b%d_k%d" % (b, k)), b,
                            accumulation_steps=k, lr=0.02)
    trained = os.path.join(out, "gpt_b%d_k%d.onnx" % (b, k))
    e2e.train(art, npz, 3, export=trained)
    results[(b, k)] = e2e.initializers(trained)
for key in [(2, 4), (4, 2)]:
    for name, value in results[(8, 1)].items():
        e2e.assert_close("b=%d,K=%d %s" % (key + (name,)),
                         zoo.comparable(name, results[key][name]),
                         zoo.comparable(name, value), rtol=1e-5, atol=1e-6)

# The same model without dropout trains differently: dropout is active.
plain = zoo.GPT(7, dropout=0.0)
plain_path = os.path.join(out, "gpt_plain.onnx")
zoo.export(plain, data, plain_path, 17)
art = e2e.compile_model(plain_path, os.path.join(out, "gpt_plain"), 8, lr=0.02)
e2e.train(art, npz, 3, export=os.path.join(out, "gpt_plain_trained.onnx"))
differs = e2e.initializers(os.path.join(out, "gpt_plain_trained.onnx"))["wte.weight"]
assert np.abs(differs - results[(8, 1)]["wte.weight"]).max() > 1e-3

# 2. Statistics: loss = sum(dropout(x + p)) with x = 0, so the gradient of
#    p[e] is scale * (number of samples keeping element e).
RATIO, N, WIDTH = 0.25, 4096, 16
nodes = [
    helper.make_node("Add", ["x", "p"], ["h"]),
    helper.make_node("Constant", [], ["ratio"],
                     value=numpy_helper.from_array(np.array(RATIO, np.float32))),
    helper.make_node("Constant", [], ["training"],
                     value=numpy_helper.from_array(np.array(True))),
    helper.make_node("Dropout", ["h", "ratio", "training"], ["y"], seed=42),
    helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0),
]
graph = helper.make_graph(
    nodes, "dropout", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", WIDTH])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.zeros(WIDTH, np.float32), "p")])
stats_path = os.path.join(out, "stats.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), stats_path)
np.savez(os.path.join(out, "zeros.npz"), x=np.zeros((N, WIDTH), np.float32))
art = e2e.compile_model(stats_path, os.path.join(out, "stats"), 512,
                        accumulation_steps=N // 512, optimizer="none")
grads = []
for steps in (1, 2):
    g = os.path.join(out, "grads%d.npz" % steps)
    e2e.train(art, os.path.join(out, "zeros.npz"), steps, extra=["--save-gradients", g])
    grads.append(np.load(g)["p"])
kept = grads[0] * (1 - RATIO) / N  # scale = 1 / (1 - ratio)
sigma = np.sqrt(RATIO * (1 - RATIO) / N)
print("kept fraction per element:", np.round(kept, 4))
assert abs(kept.mean() - (1 - RATIO)) < 5 * sigma / np.sqrt(WIDTH), kept.mean()
assert np.all(np.abs(kept - (1 - RATIO)) < 5 * sigma), kept
# Step 2 sees the same samples (the data is one window) with other masks.
assert np.abs(grads[1] - grads[0]).max() > 0, "the mask must change with the step"
print("ok")
