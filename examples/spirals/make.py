#!/usr/bin/env python3
"""Writes the demo's model and dataset: three interleaved spirals in 2-D,
classified by a small MLP (2 -> 32 -> 32 -> 3, tanh and relu) with a
cross-entropy loss. Uses only numpy and onnx; the outputs are committed.

    make.py [OUT_DIR]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HIDDEN = 32
CLASSES = 3
PER_CLASS = 512


def spirals(rng):
    xs, ys = [], []
    for c in range(CLASSES):
        r = np.linspace(0.05, 1.0, PER_CLASS)
        t = np.linspace(c * 4.0, c * 4.0 + 4.7, PER_CLASS) + rng.normal(0, 0.15, PER_CLASS)
        xs.append(np.stack([r * np.sin(t), r * np.cos(t)], axis=1))
        ys.append(np.full(PER_CLASS, c))
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.int64)
    order = rng.permutation(len(y))
    return x[order], y[order]


def linear(rng, name, fan_in, fan_out):
    bound = 1 / np.sqrt(fan_in)
    w = rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32)
    b = rng.uniform(-bound, bound, fan_out).astype(np.float32)
    return [numpy_helper.from_array(w, name + ".weight"),
            numpy_helper.from_array(b, name + ".bias")]


def model(rng):
    nodes = [
        helper.make_node("Gemm", ["x", "fc1.weight", "fc1.bias"], ["h1"], transB=1, name="fc1"),
        helper.make_node("Tanh", ["h1"], ["a1"], name="tanh"),
        helper.make_node("Gemm", ["a1", "fc2.weight", "fc2.bias"], ["h2"], transB=1, name="fc2"),
        helper.make_node("Relu", ["h2"], ["a2"], name="relu"),
        helper.make_node("Gemm", ["a2", "fc3.weight", "fc3.bias"], ["logits"], transB=1, name="fc3"),
        helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"],
                         reduction="mean", name="cross_entropy"),
    ]
    inits = (linear(rng, "fc1", 2, HIDDEN) + linear(rng, "fc2", HIDDEN, HIDDEN)
             + linear(rng, "fc3", HIDDEN, CLASSES))
    graph = helper.make_graph(
        nodes, "spirals",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2]),
         helper.make_tensor_value_info("y", TensorProto.INT64, ["batch"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                          producer_name="accrue-examples")
    onnx.checker.check_model(m)
    return m


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    rng = np.random.default_rng(2024)
    x, y = spirals(rng)
    onnx.save(model(rng), os.path.join(out, "model.onnx"))
    np.savez(os.path.join(out, "data.npz"), x=x, y=y)


if __name__ == "__main__":
    main()
