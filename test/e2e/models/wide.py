"""A wide, compute-light model for memory measurements.

x[N, 16] -> Gemm(16 -> WIDTH) -> Tanh -> Mul(., .) -> Sigmoid -> Gemm(WIDTH -> 1)
-> squared error -> ReduceMean. Each activation is [N, WIDTH] floats while the
contractions stay cheap, so one micro-batch's activations take hundreds of
MB at N = 1024 in well under a second of compute.

    wide.py OUT_DIR [--width 8192] [--samples 32768]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

IN = 16


def build(width, seed=0):
    rng = np.random.default_rng(seed)
    w1 = (rng.standard_normal((width, IN)) / np.sqrt(IN)).astype(np.float32)
    w2 = (rng.standard_normal((1, width)) / np.sqrt(width)).astype(np.float32)
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], transB=1, name="fc1"),
        helper.make_node("Tanh", ["h"], ["t"], name="tanh"),
        helper.make_node("Mul", ["t", "t"], ["t2"], name="square"),
        helper.make_node("Sigmoid", ["t2"], ["s"], name="sigmoid"),
        helper.make_node("Gemm", ["s", "w2", "b2"], ["p"], transB=1, name="fc2"),
        helper.make_node("Sub", ["p", "y"], ["d"], name="diff"),
        helper.make_node("Mul", ["d", "d"], ["e"], name="err"),
        helper.make_node("ReduceMean", ["e"], ["loss"], keepdims=0, name="mse"),
    ]
    graph = helper.make_graph(
        nodes, "wide",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", IN]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 1])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(w1, "w1"),
         numpy_helper.from_array(np.zeros(width, np.float32), "b1"),
         numpy_helper.from_array(w2, "w2"),
         numpy_helper.from_array(np.zeros(1, np.float32), "b2")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--width", type=int, default=8192)
    ap.add_argument("--samples", type=int, default=32768)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    onnx.save(build(args.width), os.path.join(args.out, "wide.onnx"))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((args.samples, IN)).astype(np.float32)
    y = rng.standard_normal((args.samples, 1)).astype(np.float32)
    np.savez(os.path.join(args.out, "data.npz"), x=x, y=y)


if __name__ == "__main__":
    main()
