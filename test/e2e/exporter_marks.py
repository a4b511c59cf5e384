# PyTorch 2's exporter marks each initializer with what it is in the module
# (the `pkg.torch.export.graph_signature.InputSpec.kind` entry of the
# ValueInfoProto it writes for it: PARAMETER, BUFFER, CONSTANT_TENSOR): a
# registered buffer (a rotary embedding's inverse frequencies, BART's
# final_logits_bias) must not train. A model whose `scale` is marked BUFFER
# and whose `shift` is marked CONSTANT_TENSOR compiles with a remark naming
# them, trains only its PARAMETERs, and trains exactly as the unmarked model
# with `--freeze scale|shift`; `--freeze` still freezes a marked parameter.
# (The test venv's onnx writes the marks: Debian's predates
# ValueInfoProto.metadata_props.)
#
# REQUIRES: onnx-reference
# RUN: rm -rf %t && mkdir -p %t
# RUN: %reference_python %s %t

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e

out = sys.argv[1]
rng = np.random.default_rng(4)
N, D, C = 8, 5, 3
weights = {"w": rng.standard_normal((D, C)).astype(np.float32),
           "scale": rng.uniform(0.5, 1.5, (D,)).astype(np.float32),
           "shift": rng.standard_normal((C,)).astype(np.float32)}
KINDS = {"x": "USER_INPUT", "w": "PARAMETER", "scale": "BUFFER", "shift": "CONSTANT_TENSOR"}


def save(path, marked):
    nodes = [helper.make_node("Mul", ["x", "scale"], ["xs"]),
             helper.make_node("MatMul", ["xs", "w"], ["h"]),
             helper.make_node("Add", ["h", "shift"], ["logits"]),
             helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"])]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", D]),
              helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])]
    graph = helper.make_graph(
        nodes, "marked", inputs, [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    if marked:
        # As the exporter writes them: a value_info per initializer, the
        # graph inputs' own.
        for name in weights:
            info = helper.make_tensor_value_info(name, TensorProto.FLOAT, weights[name].shape)
            graph.value_info.append(info)
        for info in list(graph.value_info) + [graph.input[0]]:
            entry = info.metadata_props.add()
            entry.key = "pkg.torch.export.graph_signature.InputSpec.kind"
            entry.value = KINDS[info.name]
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


save(os.path.join(out, "marked.onnx"), True)
save(os.path.join(out, "plain.onnx"), False)
data = os.path.join(out, "data.npz")
np.savez(data, x=rng.standard_normal((4 * N, D)).astype(np.float32),
         y=rng.integers(0, C, 4 * N).astype(np.int64))

proc = e2e.run([e2e.tool("accrue-compile"), os.path.join(out, "marked.onnx"), "-o",
                os.path.join(out, "marked"), "--micro-batch", "4", "--accumulation-steps", "2",
                "--optimizer", "adamw"])
assert "remark: 2 initializer(s) the exporter marks as not parameters stay constant: " \
    "scale (BUFFER), shift (CONSTANT_TENSOR)" in proc.stderr, proc.stderr
with open(os.path.join(out, "marked", "step.json")) as f:
    manifest = json.load(f)
trained = [p["name"] for p in manifest["params"]]
assert trained == ["w"], trained
e2e.compile_model(os.path.join(out, "plain.onnx"), os.path.join(out, "plain"), 4,
                  accumulation_steps=2, optimizer="adamw", freeze="scale|shift")

results = {}
for name in ("marked", "plain"):
    exported = os.path.join(out, name + "_out.onnx")
    e2e.train(os.path.join(out, name), data, 3, export=exported)
    results[name] = e2e.initializers(exported)
for k in weights:
    assert np.array_equal(results["marked"][k], results["plain"][k]), k
assert not np.array_equal(results["marked"]["w"], weights["w"])
assert np.array_equal(results["marked"]["scale"], weights["scale"])
assert np.array_equal(results["marked"]["shift"], weights["shift"])

# --freeze still applies to what the exporter marks as a parameter: here
# it leaves nothing to train.
proc = e2e.run([e2e.tool("accrue-compile"), os.path.join(out, "marked.onnx"), "-o",
                os.path.join(out, "frozen"), "--micro-batch", "4", "--freeze", "w"],
               expect_ok=False)
assert proc.returncode != 0 and "no trainable parameters" in proc.stderr, proc.stderr
print("ok: trained", trained)
