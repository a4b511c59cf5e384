#!/usr/bin/env python3
"""ONNX Runtime training's step time on a model Accrue trains: one process
of the baseline for vs_pytorch.py, run by the interpreter of a venv with
onnxruntime-training 1.19.2 (see bench/README.md).

usage: ort_training.py MODEL.onnx DATA.npz MICRO_BATCH K STEPS THREADS OUT_DIR

The model's graph computes the loss (as exported for Accrue). For ONNX
Runtime's on-device training API it gets the loss divided by K (ORT
accumulates gradients of K micro-batch losses as they are) and the
optional outputs of SoftmaxCrossEntropyLoss and LayerNormalization
(artifact generation fails without them); its generated AdamW (lr 1e-3, weight decay 0.01; the
on-device optimizer has no gradient clipping) updates every float
initializer. A step is K train_step calls, optimizer_step and
lazy_reset_grad. Prints the seconds per step of STEPS steps after one
warm-up step."""
import os
import sys
import time

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper
from onnxruntime.training import artifacts
from onnxruntime.training.api import CheckpointState, Module, Optimizer


def main():
    path, data_path, b, k, steps, threads, out = sys.argv[1:8]
    b, k, steps, threads = int(b), int(k), int(steps), int(threads)
    os.makedirs(out, exist_ok=True)
    model = onnx.load(path)
    graph = model.graph
    # ORT's gradient builders read optional outputs PyTorch's export leaves
    # out: SoftmaxCrossEntropyLoss's log_prob, LayerNormalization's mean and
    # inverse standard deviation.
    for node in graph.node:
        if node.op_type == "SoftmaxCrossEntropyLoss" and len(node.output) == 1:
            node.output.append(node.output[0] + "_log_prob")
        if node.op_type == "LayerNormalization" and len(node.output) == 1:
            node.output.extend([node.output[0] + "_mean", node.output[0] + "_inv_std"])
    loss = graph.output[0].name
    graph.initializer.append(helper.make_tensor("ort_bench_inv_k", TensorProto.FLOAT, [],
                                                [1.0 / k]))
    graph.node.append(helper.make_node("Mul", [loss, "ort_bench_inv_k"], ["loss_over_k"]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("loss_over_k", TensorProto.FLOAT, []))
    params = [t.name for t in graph.initializer
              if t.data_type == TensorProto.FLOAT and t.name != "ort_bench_inv_k"
              and len(t.dims) > 0]
    artifacts.generate_artifacts(model, requires_grad=params, frozen_params=[],
                                 loss=None, optimizer=artifacts.OptimType.AdamW,
                                 artifact_directory=out)
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    state = CheckpointState.load_checkpoint(os.path.join(out, "checkpoint"))
    module = Module(os.path.join(out, "training_model.onnx"), state,
                    os.path.join(out, "eval_model.onnx"), session_options=options)
    optimizer = Optimizer(os.path.join(out, "optimizer_model.onnx"), module)
    module.train()
    data = np.load(data_path)
    names = module.input_names()

    def step(s):
        for m in range(k):
            lo = (s * k + m) * b
            module(*[data[n][lo:lo + b] for n in names])
        optimizer.step()
        module.lazy_reset_grad()

    step(0)
    start = time.perf_counter()
    for s in range(steps):
        step(s)
    print((time.perf_counter() - start) / steps)


if __name__ == "__main__":
    main()
