# Gradients of every op the foundation supports against float64 central
# finite differences of an independent evaluator (lib/onnx_eval.py), through
# the real path: accrue-compile --optimizer none, accrue-train
# --save-gradients, micro-batch 4 accumulated 3 times.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e
import onnx_eval

out = sys.argv[1]
rng = np.random.default_rng(7)


def init(name, *shape, scale=0.5):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, values, dtype=np.int64):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.array(values, dtype)))


def build(loss_nodes, loss_inputs, extra_inits=()):
    """x[N,6], labels y[N]; a body that touches every op, then a loss."""
    nodes = [
        helper.make_node("Gemm", ["x", "W1", "b1"], ["h1"], transB=1, name="gemm"),
        helper.make_node("Tanh", ["h1"], ["t"]),
        helper.make_node("Sigmoid", ["h1"], ["s"]),
        helper.make_node("Mul", ["t", "s"], ["ts"]),
        helper.make_node("Sub", ["ts", "c"], ["d"]),
        const("two", 2.0, np.float32),
        helper.make_node("Pow", ["d", "two"], ["p"]),
        helper.make_node("Add", ["p", "one"], ["p1"]),
        helper.make_node("Div", ["ts", "p1"], ["q"]),
        helper.make_node("Relu", ["q"], ["r"]),
        helper.make_node("Add", ["r", "q"], ["rq"]),
        const("shape", [0, 2, 4]),
        helper.make_node("Reshape", ["rq", "shape"], ["r3"]),
        helper.make_node("Transpose", ["r3"], ["r3t"], perm=[0, 2, 1]),
        helper.make_node("Flatten", ["r3t"], ["f"], axis=1),
        helper.make_node("MatMul", ["f", "W2"], ["m"]),
        helper.make_node("Identity", ["m"], ["logits"]),
    ] + loss_nodes
    inits = [init("W1", 8, 6), init("b1", 8), init("c", 8), init("W2", 8, 5),
             numpy_helper.from_array(np.array(1.0, np.float32), "one")] + list(extra_inits)
    graph = helper.make_graph(
        nodes, "ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6]),
         helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


cases = {
    # Weighted cross-entropy with ignored labels: mean over the weights of
    # the counted labels.
    "sce_weighted": build(
        [helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y", "cw"], ["loss"],
                          reduction="mean", ignore_index=2)], [],
        [numpy_helper.from_array(np.array([1.0, 2.0, 0.5, 1.5, 0.25], np.float32), "cw")]),
    # Squared error through ReduceSum (opset 13 axes input) and ReduceMean.
    "reduce": build(
        [const("axes", [1]),
         helper.make_node("ReduceSum", ["logits", "axes"], ["rs"], keepdims=1),
         helper.make_node("Mul", ["rs", "rs"], ["sq"]),
         helper.make_node("ReduceMean", ["sq"], ["loss"], keepdims=0)], []),
    # Sum reduction: the loss of the whole batch is the sum of the parts.
    "sce_sum": build(
        [helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                          reduction="sum")], []),
}

b, k = 4, 3
n = b * k
x = rng.standard_normal((n, 6)).astype(np.float32)
y = rng.integers(0, 5, n).astype(np.int64)
y[[1, 7]] = 2  # some ignored labels for the weighted case
np.savez(os.path.join(out, "data.npz"), x=x, y=y)

for name, model in cases.items():
    path = os.path.join(out, name + ".onnx")
    onnx.save(model, path)
    art = e2e.compile_model(path, os.path.join(out, name), b, optimizer="none",
                            accumulation_steps=k)
    grads_path = os.path.join(out, name + "_grads.npz")
    e2e.train(art, os.path.join(out, "data.npz"), 1,
              extra=["--save-gradients", grads_path])
    got = np.load(grads_path)

    params = {t.name: numpy_helper.to_array(t).astype(np.float64)
              for t in model.graph.initializer if t.name != "one" and t.name != "cw"}
    feeds = {"x": x, "y": y}

    def loss(p):
        return float(onnx_eval.run(model, feeds, p)["loss"])

    h = 1e-6
    for pname, value in params.items():
        fd = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            plus = dict(params)
            minus = dict(params)
            plus[pname] = value.copy()
            minus[pname] = value.copy()
            plus[pname][i] += h
            minus[pname][i] -= h
            fd[i] = (loss(plus) - loss(minus)) / (2 * h)
        scale = max(np.abs(fd).max(), 1e-3)
        e2e.assert_close("%s d/d%s" % (name, pname), got[pname], fd,
                         rtol=2e-3, atol=2e-4 * scale)
