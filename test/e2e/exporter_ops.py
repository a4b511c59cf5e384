# Operators that PyTorch 2's exporter and Hugging Face models write, run as
# ONNX node tests whose expected outputs come from ONNX's own reference
# evaluator (onnx.reference): comparisons that include equality (NaN
# compares false), Or and Xor, IsNaN, GatherND (with batch dimensions,
# negative indices, int64 data: a padding mask), ScatterND on int64 data
# (a decoder's labels shifted right), and a Linear's output split into a
# sequence (SplitToSequence) whose parts SequenceAt takes. Each case is a
# node-test directory (model.onnx, test_data_set_0) that
# accrue-onnx-backend-test imports, compiles, runs and compares; every one
# must pass (a skip is a failure here). The gradients through GatherND and
# SequenceAt are checked against finite differences in gradcheck_ops.py.
#
# REQUIRES: onnx-reference
# RUN: rm -rf %t && mkdir -p %t
# RUN: %reference_python %s %t

import os
import subprocess
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import accrue_e2e as e2e

out = sys.argv[1]
rng = np.random.default_rng(3)
TYPES = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
         np.dtype(np.int64): TensorProto.INT64,
         np.dtype(np.bool_): TensorProto.BOOL, np.dtype(np.int32): TensorProto.INT32}


def case(name, nodes, inputs, initializers=(), opset=18):
    """A node test: `inputs` {name: array} are the graph inputs; the
    outputs (every output of the last node) are evaluated by onnx.reference."""
    outputs = [o for o in nodes[-1].output]
    graph_inputs = [helper.make_tensor_value_info(k, TYPES[v.dtype], v.shape)
                    for k, v in inputs.items()]
    inits = [numpy_helper.from_array(v, k) for k, v in initializers]
    # Output types and shapes from the reference run.
    probe = helper.make_model(
        helper.make_graph(nodes, name, graph_inputs,
                          [helper.make_tensor_value_info(o, TensorProto.UNDEFINED, None)
                           for o in outputs], inits),
        opset_imports=[helper.make_opsetid("", opset)])
    results = ReferenceEvaluator(probe).run(None, inputs)
    graph_outputs = [helper.make_tensor_value_info(o, TYPES[r.dtype], r.shape)
                     for o, r in zip(outputs, results)]
    model = helper.make_model(helper.make_graph(nodes, name, graph_inputs, graph_outputs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    folder = os.path.join(out, "node", "test_" + name)
    data = os.path.join(folder, "test_data_set_0")
    os.makedirs(data)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, v in enumerate(inputs.values()):
        with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())
    for i, r in enumerate(results):
        with open(os.path.join(data, "output_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(r).SerializeToString())


nan = np.float32("nan")
a = np.array([[nan, 1, 2, -np.inf], [3, 3, 0.5, np.inf]], np.float32)
b = np.array([1, 1, nan, -np.inf], np.float32)
case("less_or_equal_nan", [helper.make_node("LessOrEqual", ["a", "b"], ["y"])], {"a": a, "b": b})
case("greater_or_equal_nan", [helper.make_node("GreaterOrEqual", ["a", "b"], ["y"])],
     {"a": a, "b": b})
ia = np.array([[3, -1, 4], [0, 7, -2]], np.int64)
case("less_or_equal_int64", [helper.make_node("LessOrEqual", ["a", "b"], ["y"])],
     {"a": ia, "b": np.array([3, 0, 5], np.int64)})
case("greater_or_equal_int32", [helper.make_node("GreaterOrEqual", ["a", "b"], ["y"])],
     {"a": ia.astype(np.int32), "b": np.array([[3], [1]], np.int32)})
p = np.array([[True, False, True], [False, False, True]])
q = np.array([True, False, False])
case("or_broadcast", [helper.make_node("Or", ["p", "q"], ["y"])], {"p": p, "q": q})
case("xor_broadcast", [helper.make_node("Xor", ["p", "q"], ["y"])], {"p": p, "q": q})
# The exporter's attention: Where(IsNaN(softmax), 0, softmax).
scores = np.array([[nan, 0.25, 0.75], [0.5, nan, 0.5]], np.float32)
case("isnan_where", [helper.make_node("IsNaN", ["s"], ["m"]),
                     helper.make_node("Where", ["m", "zero", "s"], ["y"])],
     {"s": scores}, initializers=[("zero", np.array(0, np.float32))])
case("isinf_positive_only", [helper.make_node("IsInf", ["a"], ["y"], detect_negative=0)],
     {"a": a}, opset=20)
case("isinf_neither", [helper.make_node("IsInf", ["a"], ["y"], detect_negative=0,
                                        detect_positive=0)], {"a": a}, opset=20)

# GatherND: a padding mask's entries (int64 data), tuples with a negative
# entry; with one batch dimension (a row per sample); of float data.
mask = rng.integers(0, 2, (3, 5)).astype(np.int64)
case("gathernd_int64_mask", [helper.make_node("GatherND", ["m", "i"], ["y"])],
     {"m": mask, "i": np.array([[0, 4], [2, -1], [1, 0]], np.int64)})
x = rng.standard_normal((2, 3, 4)).astype(np.float32)
case("gathernd_batch_dims_1", [helper.make_node("GatherND", ["x", "i"], ["y"], batch_dims=1)],
     {"x": x, "i": np.array([[[2], [0]], [[-1], [1]]], np.int64)}, opset=13)
case("gathernd_rows", [helper.make_node("GatherND", ["x", "i"], ["y"])],
     {"x": x, "i": np.array([[1, 2], [0, -3]], np.int64)})

# ScatterND on int64 labels: a decoder's shift right writes each row's
# labels one place on (and the start token first).
labels = rng.integers(0, 50, (2, 5)).astype(np.int64)
starts = np.array([[0, 0], [1, 0]], np.int64)
case("scatternd_int64_shift", [helper.make_node("ScatterND", ["l", "i", "u"], ["y"])],
     {"l": labels, "i": starts, "u": np.array([7, 7], np.int64)})
case("scatternd_int64_rows", [helper.make_node("ScatterND", ["l", "i", "u"], ["y"])],
     {"l": labels, "i": np.array([[1]], np.int64), "u": labels[:1] + 100})
case("scatternd_int32_add", [helper.make_node("ScatterND", ["l", "i", "u"], ["y"], reduction="add")],
     {"l": labels.astype(np.int32), "i": np.array([[0, 2], [0, 2]], np.int64),
      "u": np.array([5, -3], np.int32)}, opset=16)

# A Linear's output split into q, k, v as a sequence.
h = rng.standard_normal((2, 9)).astype(np.float32)
case("split_to_sequence_qkv",
     [helper.make_node("SplitToSequence", ["h", "sizes"], ["seq"], axis=1),
      helper.make_node("SequenceAt", ["seq", "one"], ["k"]),
      helper.make_node("SequenceAt", ["seq", "last"], ["v"]),
      helper.make_node("Sub", ["k", "v"], ["y"])],
     {"h": h}, initializers=[("sizes", np.array([3, 3, 3], np.int64)),
                             ("one", np.array(1, np.int64)), ("last", np.array(-1, np.int64))])
case("split_to_sequence_chunks",
     [helper.make_node("SplitToSequence", ["h", "chunk"], ["seq"], axis=-1),
      helper.make_node("SequenceAt", ["seq", "last"], ["y"])],
     {"h": h}, initializers=[("chunk", np.array(4, np.int64)), ("last", np.array(2, np.int64))])
case("split_to_sequence_nokeepdims",
     [helper.make_node("SplitToSequence", ["h"], ["seq"], axis=0, keepdims=0),
      helper.make_node("SequenceAt", ["seq", "one"], ["y"])],
     {"h": h}, initializers=[("one", np.array(1, np.int64))])



def write_case(name, nodes, inputs, expected, opset):
    """A node test with the given expected outputs."""
    graph = helper.make_graph(
        nodes, name, [helper.make_tensor_value_info(k, TYPES[v.dtype], v.shape)
                      for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, TYPES[expected.dtype], expected.shape)
         for o in nodes[-1].output])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    data = os.path.join(out, "node", "test_" + name, "test_data_set_0")
    os.makedirs(data)
    with open(os.path.join(data, "..", "model.onnx"), "wb") as f:
        f.write(model.SerializeToString())
    for i, v in enumerate(inputs.values()):
        with open(os.path.join(data, "input_%d.pb" % i), "wb") as f:
            f.write(numpy_helper.from_array(v).SerializeToString())
    with open(os.path.join(data, "output_0.pb"), "wb") as f:
        f.write(numpy_helper.from_array(expected).SerializeToString())


# Normalizations of f16 rows far from zero (a mean of 1000, where f16's
# spacing is 0.5): their statistics in f32, the stash type (ONNX's function
# bodies, PyTorch), not in f16. Expected: float64 from the f16 inputs,
# rounded to f16 (the test tool allows f16 outputs two ulps). The test
# venv's onnx evaluator computes these in the input's type, so it is no
# reference here.
rows = (1000 + rng.standard_normal((3, 16))).astype(np.float16)
scale = rng.uniform(0.5, 1.5, 16).astype(np.float16)
x64, s64 = rows.astype(np.float64), scale.astype(np.float64)
centered = x64 - x64.mean(axis=1, keepdims=True)
layer = centered / np.sqrt((centered ** 2).mean(axis=1, keepdims=True) + 1e-5) * s64
write_case("layer_normalization_f16_stash",
           [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(scale)),
            helper.make_node("LayerNormalization", ["x", "s"], ["y"])],
           {"x": rows}, layer.astype(np.float16), 17)
rms = x64 / np.sqrt((x64 ** 2).mean(axis=1, keepdims=True) + 1e-5) * s64
write_case("rms_normalization_f16_stash",
           [helper.make_node("Constant", [], ["s"], value=numpy_helper.from_array(scale)),
            helper.make_node("RMSNormalization", ["x", "s"], ["y"])],
           {"x": rows}, rms.astype(np.float16), 23)

cases = len(os.listdir(os.path.join(out, "node")))
proc = subprocess.run([e2e.tool("accrue-onnx-backend-test"), os.path.join(out, "node")],
                      capture_output=True, text=True)
print(proc.stdout)
assert proc.stdout.strip().endswith("%d passed, 0 failed, 0 skipped" % cases), proc.stdout + proc.stderr

# Sequences are read by SequenceAt only, at a constant position: anything
# else is an error naming the node and the sequence.
bad = helper.make_model(helper.make_graph(
    [helper.make_node("SplitToSequence", ["h"], ["seq"], name="split"),
     helper.make_node("Identity", ["seq"], ["y"], name="copy")],
    "bad", [helper.make_tensor_value_info("h", TensorProto.FLOAT, [2, 9])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
    opset_imports=[helper.make_opsetid("", 18)])
path = os.path.join(out, "bad.onnx")
with open(path, "wb") as f:
    f.write(bad.SerializeToString())
proc = subprocess.run([e2e.tool("accrue-compile"), path, "--micro-batch", "2", "--emit", "import",
                       "-o", "-"],
                      capture_output=True, text=True)
assert proc.returncode != 0 and "node 'copy'" in proc.stderr and "'seq'" in proc.stderr \
    and "sequence of tensors" in proc.stderr, proc.stderr

# RMSNormalization (opset 23, which Debian's onnx checker does not know yet)
# of a scale of another type: one line naming the node.
rms = helper.make_model(helper.make_graph(
    [helper.make_node("RMSNormalization", ["x", "s"], ["y"], name="norm"),
     helper.make_node("ReduceSum", ["y"], ["loss"], keepdims=0)],
    "rms", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.ones(4, np.float64), "s")]),
    opset_imports=[helper.make_opsetid("", 23)])
path = os.path.join(out, "rms.onnx")
with open(path, "wb") as f:
    f.write(rms.SerializeToString())
proc = subprocess.run([e2e.tool("accrue-compile"), path, "--micro-batch", "2", "-o",
                       os.path.join(out, "rms")], capture_output=True, text=True)
assert proc.returncode != 0 and "node 'norm': RMSNormalization: expects a floating-point " \
    "input and a scale of its type" in proc.stderr, proc.stderr
print("ok: %d node tests" % cases)

# Attention and RotaryEmbedding (opset 23) refuse what they cannot mean with
# one line naming the node.


def refused(name, node, inputs, message, opset=23):
    model = helper.make_model(helper.make_graph(
        [node, helper.make_node("ReduceSum", [node.output[0]], ["loss"], keepdims=0)],
        name, [helper.make_tensor_value_info(k, TensorProto.FLOAT, v) for k, v in inputs],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])]),
        opset_imports=[helper.make_opsetid("", opset)])
    path = os.path.join(out, name + ".onnx")
    with open(path, "wb") as f:
        f.write(model.SerializeToString())
    proc = subprocess.run([e2e.tool("accrue-compile"), path, "--micro-batch", "2", "--emit",
                           "import", "-o", "-"], capture_output=True, text=True)
    errors = [line for line in proc.stderr.splitlines() if "error" in line]
    assert proc.returncode != 0 and len(errors) == 1 and "node '%s'" % node.name in errors[0] \
        and message in errors[0], proc.stderr
    print("refused:", errors[0])


qkv = [("q", ["N", 3, 4]), ("k", ["N", 5, 4]), ("v", ["N", 5, 4])]
refused("attention_3d_no_heads", helper.make_node("Attention", ["q", "k", "v"], ["y"],
                                                  name="attn"),
        qkv, "3-D inputs need q_num_heads and kv_num_heads")
refused("attention_heads_split", helper.make_node("Attention", ["q", "k", "v"], ["y"],
                                                  name="attn", q_num_heads=3, kv_num_heads=1),
        qkv, "Q's hidden size 4 is not a multiple of its 3 heads")
refused("attention_negative_scale", helper.make_node("Attention", ["q", "k", "v"], ["y"],
                                                     name="attn", q_num_heads=2, kv_num_heads=2,
                                                     scale=-0.5),
        qkv, "scale must be positive")
refused("attention_long_mask", helper.make_node("Attention", ["q", "k", "v", "m"], ["y"],
                                                name="attn", q_num_heads=2, kv_num_heads=2),
        qkv + [("m", ["N", 1, 3, 7])], "does not fit 5 keys")
refused("attention_gqa_heads", helper.make_node("Attention", ["q", "k", "v"], ["y"],
                                                name="attn", q_num_heads=2, kv_num_heads=4),
        [("q", ["N", 3, 4]), ("k", ["N", 5, 8]), ("v", ["N", 5, 8])],
        "Q's 2 heads are not a multiple of K's 4")
refused("rotary_odd", helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], name="rope",
                                       num_heads=1, rotary_embedding_dim=3),
        [("x", ["N", 2, 4]), ("c", ["N", 2, 1]), ("s", ["N", 2, 1])],
        "rotary_embedding_dim 3 must be even")
