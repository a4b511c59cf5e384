# Every differentiable operator's gradient against float64 central finite
# differences of ONNX's own reference evaluator (onnx.reference, run in
# float64), through the real path: accrue-compile --optimizer none,
# accrue-train --save-gradients. Each case trains parameters that feed the
# operator (added to a batch input so broadcasting adjoints are exercised
# too) and projects the result onto fixed random weights to get a loss,
# which is checked too (the forward value of every operator).
#
# Operators newer than the test venv's onnx evaluator (Attention,
# RotaryEmbedding: opset 23) are checked by gradcheck_newest.test, which runs
# this file with the newest onnx release's evaluator and --newest.
#
# REQUIRES: onnx-reference
# RUN: rm -rf %t && mkdir -p %t
# RUN: %reference_python %s %t

import os
import zlib
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import accrue_e2e as e2e

out = sys.argv[1]
# --newest: only the cases whose reference needs a newer onnx than the test
# venv's (run by gradcheck_newest.test); otherwise those are left out.
NEWEST = "--newest" in sys.argv[2:]
N = 3  # batch size (the micro-batch; one step)
# Tolerances from what float32 arithmetic against a float64 reference
# supports (central differences with h = 1e-6 in float64 are good to ~1e-9):
# the worst gradient error measured over all cases is 3.9e-7 of the largest
# gradient entry (BatchNormalization) and the worst loss error 2.3e-6
# relative (a loss with cancellation). Gradients must agree within 1e-5
# relative + 2e-6 of the largest entry, losses within 1e-5 relative: a Gelu
# with the other approximation is off by up to 8.7e-4 in its derivative and
# 4.7e-4 in its value, and fails the gradient check. The forward value must
# agree within 1e-5 of the sum of the magnitudes of the terms the loss adds.
GRADIENT_RTOL = 1e-5
FORWARD_RTOL = 1e-5
rng = np.random.default_rng(11)


def positive(*shape):
    return rng.uniform(0.5, 1.5, shape)


def normal(*shape, scale=1.0):
    return rng.standard_normal(shape) * scale


class Case:
    """One operator under test.

    `params`: trainable tensors; `batch`: the float batch input x (and
    optionally int labels y); `body(g)` adds the nodes computing `out` from
    `p_<name>` values (the parameters, already combined with x where the case
    says so) and returns the name of the tensor fed to the loss.
    """

    def __init__(self, name, params, body, x_shape=None, add_x_to=None,
                 labels=None, opset=17, loss_is_output=False, rtol=GRADIENT_RTOL,
                 reference_body=None, newest=False):
        self.name, self.params, self.body = name, params, body
        # Whether onnx.reference needs a newer onnx than the test venv's.
        self.newest = newest
        self.reference_body = reference_body
        self.x_shape = x_shape or (N,) + next(iter(params.values())).shape
        self.add_x_to = add_x_to
        self.labels = labels
        self.opset = opset
        self.loss_is_output = loss_is_output
        self.rtol = rtol


def build(case, dtype, params_as_inputs):
    elem = TensorProto.DOUBLE if dtype == np.float64 else TensorProto.FLOAT
    nodes, inits = [], []
    inputs = [helper.make_tensor_value_info("x", elem, ["N"] + list(case.x_shape[1:]))]
    if case.labels is not None:
        inputs.append(helper.make_tensor_value_info("y", TensorProto.INT64,
                                                    ["N"] + list(case.labels.shape[1:])))
    for name, value in case.params.items():
        if params_as_inputs:
            inputs.append(helper.make_tensor_value_info(name, elem, list(value.shape)))
        else:
            inits.append(numpy_helper.from_array(value.astype(dtype), name))
    names = {}
    for name in case.params:
        if name == case.add_x_to:
            nodes.append(helper.make_node("Add", ["x", name], ["p_" + name]))
        else:
            nodes.append(helper.make_node("Identity", [name], ["p_" + name]))
        names[name] = "p_" + name
    g = Graph(nodes, inits, dtype)
    # The float64 reference may evaluate an equivalent graph where ONNX's
    # evaluator lacks a feature (negative pads).
    body = case.reference_body if params_as_inputs and case.reference_body else case.body
    result = body(g)
    if not case.loss_is_output:
        # loss = sum(result * w) with fixed random weights w.
        shape = g.shapes[result]
        w = np.linspace(-1.0, 1.5, int(np.prod(shape))).reshape(shape)
        g.const("loss_weights", w.astype(dtype))
        nodes.append(helper.make_node("Mul", [result, "loss_weights"], ["proj"]))
        nodes.append(helper.make_node("ReduceSum", ["proj"], ["loss"], keepdims=0))
    else:
        nodes.append(helper.make_node("Identity", [result], ["loss"]))
    outputs = [helper.make_tensor_value_info("loss", elem, [])]
    if params_as_inputs and not case.loss_is_output:
        # The reference also returns the terms the loss sums (for the
        # forward check's tolerance).
        outputs.append(helper.make_tensor_value_info("proj", elem, None))
    graph = helper.make_graph(nodes, case.name, inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])


class Graph:
    """Collects nodes; tracks the static shapes the loss weights need."""

    def __init__(self, nodes, inits, dtype):
        self.nodes, self.inits, self.dtype = nodes, inits, dtype
        self.shapes = {}
        self.count = 0

    def const(self, name, value):
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def ints(self, values):
        self.count += 1
        return self.const("c%d" % self.count, np.array(values, np.int64))

    def node(self, op, inputs, shape, **attrs):
        self.count += 1
        name = "t%d" % self.count
        self.nodes.append(helper.make_node(op, inputs, [name], **attrs))
        self.shapes[name] = shape
        return name


S = (2, 3)
cases = []


def unary(op, param=normal, **attrs):
    cases.append(Case(op, {"a": param(*S)}, lambda g: g.node(op, ["p_a"], (N,) + S, **attrs),
                      add_x_to="a"))


for op in ["Neg", "Abs", "Exp", "Relu", "Sigmoid", "Tanh", "Erf", "Softplus",
           "Identity"]:
    unary(op)
for op in ["Log", "Sqrt", "Reciprocal"]:
    unary(op, positive)
unary("LeakyRelu", alpha=0.2)
unary("Elu", alpha=0.7)
unary("HardSigmoid", alpha=0.3, beta=0.4)
unary("HardSwish")
unary("Softsign")
unary("Selu")
unary("Celu", alpha=0.8)
unary("ThresholdedRelu", alpha=0.3)
for op in ["Sin", "Cos", "Sinh", "Cosh"]:
    unary(op, lambda *shape: normal(*shape, scale=2.0))
# Piecewise-constant ops have a zero gradient: each is added to its input,
# so the check sees exactly the identity's gradient (a VJP that passed the
# adjoint through would double it). a + x stays away from the steps.
for op in ["Sign", "Floor", "Ceil", "Round"]:
    cases.append(Case(op, {"a": normal(*S)},
                      lambda g, op=op: g.node("Add", [g.node(op, ["p_a"], (N,) + S), "p_a"],
                                              (N,) + S),
                      add_x_to="a"))
cases.append(Case("Mish", {"a": normal(*S)}, lambda g: g.node("Mish", ["p_a"], (N,) + S),
                  add_x_to="a", opset=18))
cases.append(Case("Gelu", {"a": normal(*S)},
                  lambda g: g.node("Gelu", ["p_a"], (N,) + S), add_x_to="a", opset=20))
cases.append(Case("Gelu_tanh", {"a": normal(*S)},
                  lambda g: g.node("Gelu", ["p_a"], (N,) + S, approximate="tanh"),
                  add_x_to="a", opset=20))
cases.append(Case("Clip", {"a": normal(*S)},
                  lambda g: g.node("Clip", ["p_a", g.const("lo", np.array(-0.5, g.dtype)),
                                            g.const("hi", np.array(0.6, g.dtype))], (N,) + S),
                  add_x_to="a"))
cases.append(Case("Pow", {"a": positive(*S)},
                  lambda g: g.node("Pow", ["p_a", g.const("e", np.array(2.5, g.dtype))], (N,) + S),
                  add_x_to="a"))


def binary(op, lhs=normal, rhs=normal):
    cases.append(Case(op, {"a": lhs(*S), "b": rhs(3)},
                      lambda g: g.node(op, ["p_a", "p_b"], (N,) + S), add_x_to="a"))


for op in ["Add", "Sub", "Mul"]:
    binary(op)
# b spreads over the range of a + x, so that each operand wins somewhere.
for op in ["Max", "Min"]:
    binary(op, normal, lambda n: np.linspace(-0.2, 1.8, n) + normal(n, scale=0.05))
binary("Div", normal, positive)
# a + x spans both signs, so that the slope (broadcast over rows, trained
# too) gets a gradient.
binary("PRelu", lambda *shape: normal(*shape) - 0.5)
cases.append(Case("Where", {"a": normal(*S), "b": normal(1, 3)},
                  lambda g: g.node("Where", [g.node("Greater", ["x", g.const("z", np.full(S, 0.6, g.dtype))], (N,) + S),
                                             "p_a", "p_b"], (N,) + S),
                  add_x_to="a"))
cases.append(Case("MatMul", {"a": normal(4, 5), "b": normal(5, 2)},
                  lambda g: g.node("MatMul", ["p_a", "p_b"], (N, 4, 2)),
                  x_shape=(N, 4, 5), add_x_to="a"))
cases.append(Case("MatMul_batched", {"a": normal(2, 4, 5), "b": normal(2, 5, 3)},
                  lambda g: g.node("MatMul", ["p_a", "p_b"], (N, 2, 4, 3)),
                  x_shape=(N, 2, 4, 5), add_x_to="a"))
cases.append(Case("Gemm", {"a": normal(4), "w": normal(5, 4), "c": normal(5)},
                  lambda g: g.node("Gemm", ["p_a", "p_w", "p_c"], (N, 5), transB=1,
                                   alpha=0.7, beta=1.3),
                  x_shape=(N, 4), add_x_to="a"))
cases.append(Case("Gemm_transA", {"a": normal(4), "w": normal(4, 5)},
                  lambda g: g.node("Gemm", [g.node("Transpose", ["p_a"], (4, N)), "p_w"], (N, 5),
                                   transA=1),
                  x_shape=(N, 4), add_x_to="a"))
cases.append(Case("ReduceSum", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceSum", ["p_a", g.ints([1])], (N, 1, 3)),
                  add_x_to="a"))
cases.append(Case("ReduceMean", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceMean", ["p_a"], (N, 3), axes=[1], keepdims=0),
                  add_x_to="a"))
cases.append(Case("ReduceMax", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceMax", ["p_a"], (N, 1, 3), axes=[1]),
                  add_x_to="a"))
cases.append(Case("ReduceMin", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceMin", ["p_a"], (N, 4, 1), axes=[2]),
                  add_x_to="a"))
cases.append(Case("ReduceSumSquare", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceSumSquare", ["p_a"], (N, 3), axes=[1], keepdims=0),
                  add_x_to="a"))
cases.append(Case("ReduceL2", {"a": normal(4, 3)},
                  lambda g: g.node("ReduceL2", ["p_a"], (N, 1, 1), axes=[1, 2]),
                  add_x_to="a"))
cases.append(Case("Softmax", {"a": normal(4, 3)},
                  lambda g: g.node("Softmax", ["p_a"], (N, 4, 3), axis=1), add_x_to="a"))
cases.append(Case("LogSoftmax", {"a": normal(4, 3)},
                  lambda g: g.node("LogSoftmax", ["p_a"], (N, 4, 3)), add_x_to="a"))
cases.append(Case("LayerNormalization", {"a": normal(4, 3), "s": normal(3), "b": normal(3)},
                  lambda g: g.node("LayerNormalization", ["p_a", "p_s", "p_b"], (N, 4, 3),
                                   epsilon=1e-3),
                  add_x_to="a"))
cases.append(Case("InstanceNormalization",
                  {"a": normal(2, 3, 4), "s": normal(2), "b": normal(2)},
                  lambda g: g.node("InstanceNormalization", ["p_a", "p_s", "p_b"],
                                   (N, 2, 3, 4), epsilon=1e-3),
                  add_x_to="a"))
# Opset 21: scale and bias per channel; 18: per group. Opset 21 computes
# in stash_type (float32 by default): the float64 reference asks for double
# so that its finite differences are not float32 noise.
cases.append(Case("GroupNormalization",
                  {"a": normal(4, 3, 2), "s": normal(4), "b": normal(4)},
                  lambda g: g.node("GroupNormalization", ["p_a", "p_s", "p_b"],
                                   (N, 4, 3, 2), num_groups=2, epsilon=1e-3,
                                   stash_type=(TensorProto.DOUBLE if g.dtype == np.float64
                                               else TensorProto.FLOAT)),
                  add_x_to="a", opset=21))
cases.append(Case("GroupNormalization_18",
                  {"a": normal(6, 5), "s": normal(3), "b": normal(3)},
                  lambda g: g.node("GroupNormalization", ["p_a", "p_s", "p_b"],
                                   (N, 6, 5), num_groups=3),
                  add_x_to="a", opset=18))
# p = 1 on positive values: ONNX's reference sums x, not |x|, for p = 1.
for p in [1, 2]:
    cases.append(Case("LpNormalization_p%d" % p, {"a": normal(*S) if p == 2 else positive(*S) + 4},
                      lambda g, p=p: g.node("LpNormalization", ["p_a"], (N,) + S, axis=1, p=p),
                      add_x_to="a"))
cases.append(Case("BatchNormalization", {"a": normal(2, 3, 3), "s": positive(2), "b": normal(2)},
                  lambda g: g.node("BatchNormalization",
                                   ["p_a", "p_s", "p_b", g.const("m", np.zeros(2, g.dtype)),
                                    g.const("v", np.ones(2, g.dtype))],
                                   (N, 2, 3, 3), training_mode=1),
                  add_x_to="a"))
cases.append(Case("BatchNormalization_inference",
                  {"a": normal(2, 3, 3), "s": positive(2), "b": normal(2)},
                  lambda g: g.node("BatchNormalization",
                                   ["p_a", "p_s", "p_b", g.const("m", np.array([0.1, -0.2], g.dtype)),
                                    g.const("v", np.array([0.5, 2.0], g.dtype))],
                                   (N, 2, 3, 3)),
                  add_x_to="a"))
labels = np.array([2, 0, 4], np.int64)
cases.append(Case("SoftmaxCrossEntropyLoss", {"a": normal(5)},
                  lambda g: g.node("SoftmaxCrossEntropyLoss",
                                   ["p_a", "y", g.const("cw", np.array([1.0, 2.0, 0.5, 1.0, 3.0], g.dtype))],
                                   (), reduction="mean", ignore_index=0),
                  x_shape=(N, 5), add_x_to="a", labels=labels, loss_is_output=True))
cases.append(Case("SoftmaxCrossEntropyLoss_3d", {"a": normal(5, 2)},
                  lambda g: g.node("SoftmaxCrossEntropyLoss", ["p_a", "y"], (N, 2),
                                   reduction="none"),
                  x_shape=(N, 5, 2), add_x_to="a",
                  labels=np.array([[1, 2], [0, 4], [3, 3]], np.int64)))
cases.append(Case("NegativeLogLikelihoodLoss", {"a": normal(5)},
                  lambda g: g.node("NegativeLogLikelihoodLoss",
                                   ["p_a", "y", g.const("cw", np.array([1.0, 2.0, 0.5, 1.0, 3.0], g.dtype))],
                                   (), reduction="sum"),
                  x_shape=(N, 5), add_x_to="a", labels=labels, loss_is_output=True))
cases.append(Case("Conv", {"a": normal(4, 6, 5), "w": normal(6, 2, 3, 2, scale=0.5), "b": normal(6)},
                  lambda g: g.node("Conv", ["p_a", "p_w", "p_b"], (N, 6, 3, 4), group=2,
                                   strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2]),
                  add_x_to="a"))
cases.append(Case("Conv_1d", {"a": normal(2, 7), "w": normal(3, 2, 3, scale=0.5)},
                  lambda g: g.node("Conv", ["p_a", "p_w"], (N, 3, 4), strides=[2], pads=[1, 1]),
                  add_x_to="a"))
# ONNX's reference has no groups (pytorch_models.py trains a grouped one).
cases.append(Case("ConvTranspose",
                  {"a": normal(4, 3, 2), "w": normal(4, 3, 3, 2, scale=0.5), "b": normal(3)},
                  lambda g: g.node("ConvTranspose", ["p_a", "p_w", "p_b"], (N, 3, 7, 3),
                                   strides=[2, 1], pads=[1, 0, 0, 1],
                                   dilations=[1, 2], output_padding=[1, 0]),
                  add_x_to="a"))
cases.append(Case("ConvTranspose_1d", {"a": normal(2, 4), "w": normal(2, 3, 3, scale=0.5)},
                  lambda g: g.node("ConvTranspose", ["p_a", "p_w"], (N, 3, 8), strides=[2],
                                   pads=[1, 0]),
                  add_x_to="a"))
def top_k(g, largest):
    """TopK's values (a selection: each gets its element's gradient)."""
    g.count += 1
    values, indices = "topk%d" % g.count, "topki%d" % g.count
    g.nodes.append(helper.make_node("TopK", ["p_a", g.ints([3])], [values, indices],
                                    axis=-1, largest=largest))
    g.shapes[values] = (N, 2, 3)
    return values


for largest in [1, 0]:
    cases.append(Case("TopK_largest_%d" % largest, {"a": normal(2, 6)},
                      lambda g, l=largest: top_k(g, l), add_x_to="a"))
cases.append(Case("ConvTranspose_3d",
                  {"a": normal(2, 3, 2, 2), "w": normal(2, 2, 2, 2, 2, scale=0.5),
                   "b": normal(2)},
                  lambda g: g.node("ConvTranspose", ["p_a", "p_w", "p_b"], (N, 2, 6, 2, 4),
                                   strides=[2, 1, 1], pads=[1, 0, 0, 0, 1, 0],
                                   dilations=[1, 1, 2], output_padding=[1, 0, 0]),
                  add_x_to="a"))
cases.append(Case("Resize_nearest", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Resize", ["p_a", "", g.const("sc", np.array([1, 1, 2, 1.5], np.float32))],
                                   (N, 2, 6, 6), mode="nearest"),
                  add_x_to="a", opset=13))
cases.append(Case("Resize_linear", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Resize", ["p_a", "", "",
                                              g.const("sz", np.array([N, 2, 5, 7], np.int64))],
                                   (N, 2, 5, 7), mode="linear",
                                   coordinate_transformation_mode="align_corners"),
                  add_x_to="a", opset=13))
cases.append(Case("Resize_bilinear_upsample", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Resize", ["p_a", "", g.const("sc", np.array([1, 1, 2, 2], np.float32))],
                                   (N, 2, 6, 8), mode="linear",
                                   coordinate_transformation_mode="pytorch_half_pixel"),
                  add_x_to="a", opset=13))
# Indices repeat (2 twice in a row) and count from the end (-1), so the
# adjoint must add.
cases.append(Case("GatherElements", {"a": normal(*S)},
                  lambda g: g.node("GatherElements",
                                   ["p_a", g.const("ge", np.array([[[2, 2, 0, -1]] * 2] * N,
                                                                  np.int64))],
                                   (N, 2, 4), axis=2),
                  add_x_to="a"))
for reduction in ["none", "add"]:
    # Distinct indices per row for "none" (ONNX leaves duplicates open);
    # "add" repeats one.
    idx = [[0, 2], [1, 0]] if reduction == "none" else [[2, 2], [1, 0]]
    cases.append(Case("ScatterElements_" + reduction, {"a": normal(*S), "u": normal(2, 2)},
                      lambda g, r=reduction, idx=idx: g.node(
                          "ScatterElements",
                          ["p_a", g.const("si_" + r, np.array([idx] * N, np.int64)),
                           g.node("Expand", ["p_u", g.ints([N, 2, 2])], (N, 2, 2))],
                          (N,) + S, axis=2, reduction=r),
                      add_x_to="a", opset=16))
for reduction in ["none", "add"]:
    # Index tuples (sample, row), one counting from the end; "add" repeats
    # one.
    tuples = [[0, 1], [2, -2]] if reduction == "none" else [[0, 1], [0, 1]]
    cases.append(Case("ScatterND_" + reduction, {"a": normal(*S), "u": normal(2, 3)},
                      lambda g, r=reduction, t=tuples: g.node(
                          "ScatterND", ["p_a", g.const("sn_" + r, np.array(t, np.int64)), "p_u"],
                          (N,) + S, reduction=r),
                      add_x_to="a", opset=16))
cases.append(Case("Tile", {"a": normal(*S)},
                  lambda g: g.node("Tile", ["p_a", g.const("rep", np.array([1, 2, 3], np.int64))],
                                   (N, 4, 9)),
                  add_x_to="a"))
for mode, opset in [("constant", 13), ("reflect", 13), ("edge", 13), ("wrap", 19)]:
    cases.append(Case("Pad_" + mode, {"a": normal(3, 4)},
                      lambda g, mode=mode: g.node(
                          "Pad", ["p_a", g.const("pads", np.array([0, 1, 2, 0, 0, 1], np.int64)),
                                  g.const("pv", np.array(0.7, g.dtype))],
                          (N, 4, 7), mode=mode),
                      add_x_to="a", opset=opset))
# OneHot's values (off, on) train; indices count from the end too.
cases.append(Case("OneHot", {"a": normal(3, 4), "v": normal(2)},
                  lambda g: g.node("Mul", [g.node("OneHot", [
                      g.const("oh", np.array([[1, -1, 0]] * N, np.int64)),
                      g.const("depth", np.array(4, np.int64)), "p_v"], (N, 3, 4)), "p_a"],
                      (N, 3, 4)),
                  add_x_to="a"))
# Negative pads crop: checked against the same crop written as a Slice
# (and the remaining padding as a constant Pad).
cases.append(Case("Pad_crop", {"a": normal(3, 4)},
                  lambda g: g.node("Pad", ["p_a", g.const("pads", np.array([0, -1, 1, 0, 0, -2],
                                                                           np.int64))],
                                   (N, 2, 3)),
                  add_x_to="a",
                  reference_body=lambda g: g.node(
                      "Pad", [g.node("Slice", ["p_a", g.ints([1, 0]), g.ints([3, 2]),
                                               g.ints([1, 2])], (N, 2, 2)),
                              g.const("pads", np.array([0, 0, 1, 0, 0, 0], np.int64))],
                      (N, 2, 3))))
def rms_reference(g):
    # RMSNormalization (opset 23, newer than the reference evaluator of the
    # test venv's onnx) from its definition: x / sqrt(mean(x^2) + eps) * scale
    # over the last two axes.
    square = g.node("Mul", ["p_a", "p_a"], (N, 2, 3))
    mean = g.node("ReduceMean", [square, g.ints([1, 2])], (N, 1, 1), keepdims=1)
    eps = g.const("rms_eps", np.array(1e-3, np.float32 if g.dtype == np.float32 else np.float64))
    root = g.node("Sqrt", [g.node("Add", [mean, eps], (N, 1, 1))], (N, 1, 1))
    return g.node("Mul", [g.node("Div", ["p_a", root], (N, 2, 3)), "p_s"], (N, 2, 3))


cases.append(Case("RMSNormalization", {"a": normal(*S), "s": normal(*S)},
                  lambda g: g.node("RMSNormalization", ["p_a", "p_s"], (N,) + S, axis=1,
                                   epsilon=1e-3),
                  add_x_to="a", opset=23, reference_body=rms_reference))

# Attention (opset 23) with its masks, against the newest onnx's evaluator:
# grouped-query heads with the causal frontier; 3-D inputs with a float mask,
# softcap and a scale; a boolean mask shorter than the keys that leaves one
# query row nothing (its output is zero); a cache of past keys and
# values (the frontier offset by them) and a sliding window (opset 25).
ROW_MASK = np.array([[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 0, 1]], bool)
cases.append(Case("Attention_causal_gqa",
                  {"q": normal(4, 3, 2), "k": normal(N, 2, 4, 2), "v": normal(N, 2, 4, 3)},
                  lambda g: g.node("Attention", ["p_q", "p_k", "p_v"], (N, 4, 3, 3),
                                   is_causal=1),
                  add_x_to="q", opset=23, newest=True))
cases.append(Case("Attention_3d_masks_softcap",
                  {"q": normal(3, 4), "k": normal(N, 4, 4), "v": normal(N, 4, 6)},
                  lambda g: g.node("Attention", [
                      "p_q", "p_k", "p_v",
                      g.const("mask_values", np.array([[0.5, -0.25, 0.0, 0.75]], g.dtype))],
                      (N, 3, 6), q_num_heads=2, kv_num_heads=2, softcap=2.0, scale=0.7),
                  add_x_to="q", opset=23, newest=True))
cases.append(Case("Attention_3d_bool_mask_short",
                  {"q": normal(3, 4), "k": normal(N, 4, 2), "v": normal(N, 4, 3)},
                  lambda g: g.node("Attention", [
                      "p_q", "p_k", "p_v", g.const("short_mask", ROW_MASK[:, :3])],
                      (N, 3, 6), q_num_heads=2, kv_num_heads=1),
                  add_x_to="q", opset=23, newest=True))
cases.append(Case("Attention_past_window",
                  {"q": normal(2, 3, 2), "k": normal(N, 2, 3, 2), "v": normal(N, 2, 3, 2),
                   "pk": normal(N, 2, 2, 2), "pv": normal(N, 2, 2, 2)},
                  lambda g: g.node("Attention", ["p_q", "p_k", "p_v", "", "p_pk", "p_pv"],
                                   (N, 2, 3, 2), is_causal=1, left_window_size=2),
                  add_x_to="q", opset=25, newest=True))
# RotaryEmbedding (opset 23): 3-D input with positions, halves rotated; 4-D
# interleaved with a partial rotation and the caches given per token.
ROPE_COS = np.cos(np.outer(np.arange(5), [1.0, 0.3]))
ROPE_SIN = np.sin(np.outer(np.arange(5), [1.0, 0.3]))
cases.append(Case("RotaryEmbedding_positions",
                  {"a": normal(3, 8)},
                  lambda g: g.node("RotaryEmbedding", [
                      "p_a", g.const("rope_cos", ROPE_COS.astype(g.dtype)),
                      g.const("rope_sin", ROPE_SIN.astype(g.dtype)),
                      g.const("rope_positions",
                              np.array([[0, 1, 2], [2, 3, 4], [4, 0, 1]], np.int64))],
                      (N, 3, 8), num_heads=2),
                  add_x_to="a", opset=23, newest=True))
cases.append(Case("RotaryEmbedding_interleaved_partial",
                  {"a": normal(2, 3, 6)},
                  lambda g: g.node("RotaryEmbedding", [
                      "p_a",
                      g.const("rope_cos3", np.broadcast_to(ROPE_COS[1:4, :1], (N, 3, 1))
                              .astype(g.dtype)),
                      g.const("rope_sin3", np.broadcast_to(ROPE_SIN[1:4, :1], (N, 3, 1))
                              .astype(g.dtype))],
                      (N, 2, 3, 6), interleaved=1, rotary_embedding_dim=2),
                  add_x_to="a", opset=23, newest=True))

for exclusive, reverse in [(0, 0), (1, 1)]:
    cases.append(Case("CumSum_%d%d" % (exclusive, reverse), {"a": normal(*S)},
                      lambda g, e=exclusive, r=reverse: g.node(
                          "CumSum", ["p_a", g.const("ax", np.array(2, np.int64))], (N,) + S,
                          exclusive=e, reverse=r),
                      add_x_to="a"))
# 3-D windows: depth strides, dilations and padding, groups.
cases.append(Case("Conv_3d", {"a": normal(4, 5, 3, 4), "w": normal(2, 2, 2, 2, 3, scale=0.5),
                              "b": normal(2)},
                  lambda g: g.node("Conv", ["p_a", "p_w", "p_b"], (N, 2, 2, 2, 3), group=2,
                                   strides=[2, 1, 1], pads=[1, 0, 1, 0, 0, 0],
                                   dilations=[2, 1, 1]),
                  add_x_to="a"))
cases.append(Case("MaxPool_3d", {"a": normal(2, 5, 4, 4)},
                  lambda g: g.node("MaxPool", ["p_a"], (N, 2, 3, 2, 2), kernel_shape=[3, 2, 2],
                                   strides=[2, 2, 2], pads=[1, 0, 0, 1, 0, 0]),
                  add_x_to="a"))
for include in [0, 1]:
    cases.append(Case("AveragePool_3d_include_pad_%d" % include, {"a": normal(2, 5, 4, 4)},
                      lambda g, i=include: g.node(
                          "AveragePool", ["p_a"], (N, 2, 3, 2, 2), kernel_shape=[3, 2, 2],
                          strides=[2, 2, 2], pads=[1, 1, 0, 1, 0, 0], count_include_pad=i),
                      add_x_to="a"))
cases.append(Case("MaxPool", {"a": normal(2, 5, 5)},
                  lambda g: g.node("MaxPool", ["p_a"], (N, 2, 3, 3), kernel_shape=[3, 2],
                                   strides=[2, 2], pads=[1, 0, 1, 1]),
                  add_x_to="a"))
def max_pool_indices(g, storage_order):
    """MaxPool's values times its Indices output (as floats): the gradient
    scales by the flat index of each window's maximum, the loss checks the
    indices themselves."""
    g.count += 1
    y, idx = "mp%d" % g.count, "mpi%d" % g.count
    g.nodes.append(helper.make_node("MaxPool", ["p_a"], [y, idx], kernel_shape=[2, 3],
                                    strides=[1, 2], pads=[0, 1, 1, 1],
                                    storage_order=storage_order))
    g.shapes[y] = (N, 2, 4, 3)
    as_float = g.node("Cast", [idx], (N, 2, 4, 3),
                      to=TensorProto.DOUBLE if g.dtype == np.float64 else TensorProto.FLOAT)
    scaled = g.node("Mul", [as_float, g.const("idx_scale", np.array(0.01, g.dtype))],
                    (N, 2, 4, 3))
    return g.node("Mul", [y, scaled], (N, 2, 4, 3))


for order in [0, 1]:
    cases.append(Case("MaxPool_indices_storage_order_%d" % order, {"a": normal(2, 4, 5)},
                      lambda g, o=order: max_pool_indices(g, o), add_x_to="a"))
cases.append(Case("AveragePool", {"a": normal(2, 5, 5)},
                  lambda g: g.node("AveragePool", ["p_a"], (N, 2, 3, 3), kernel_shape=[3, 2],
                                   strides=[2, 2], pads=[1, 0, 1, 1]),
                  add_x_to="a"))
cases.append(Case("AveragePool_include_pad", {"a": normal(2, 5, 5)},
                  lambda g: g.node("AveragePool", ["p_a"], (N, 2, 3, 3), kernel_shape=[3, 2],
                                   strides=[2, 2], pads=[1, 0, 1, 1], count_include_pad=1),
                  add_x_to="a"))
cases.append(Case("GlobalAveragePool", {"a": normal(2, 3, 4)},
                  lambda g: g.node("GlobalAveragePool", ["p_a"], (N, 2, 1, 1)), add_x_to="a"))
cases.append(Case("Flatten", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Flatten", ["p_a"], (N * 2, 12), axis=2), add_x_to="a"))
cases.append(Case("Reshape", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Reshape", ["p_a", g.ints([0, 4, -1])], (N, 4, 6)),
                  add_x_to="a"))
cases.append(Case("Transpose", {"a": normal(2, 3, 4)},
                  lambda g: g.node("Transpose", ["p_a"], (N, 4, 2, 3), perm=[0, 3, 1, 2]),
                  add_x_to="a"))
cases.append(Case("Squeeze_Unsqueeze", {"a": normal(1, 3)},
                  lambda g: g.node("Unsqueeze", [g.node("Squeeze", ["p_a", g.ints([1])], (N, 3)),
                                                 g.ints([0])], (1, N, 3)),
                  add_x_to="a"))
cases.append(Case("Concat", {"a": normal(2, 3), "b": normal(N, 4, 3)},
                  lambda g: g.node("Concat", ["p_a", "p_b"], (N, 6, 3), axis=1),
                  add_x_to="a"))
cases.append(Case("Split", {"a": normal(5, 3)},
                  lambda g: g.node("Mul", [
                      g.node_multi("Split", ["p_a", g.ints([2, 3])], [(N, 2, 3), (N, 3, 3)], axis=1)[0],
                      g.node("Slice", ["p_a", g.ints([0]), g.ints([2]), g.ints([1])], (N, 2, 3))],
                      (N, 2, 3)),
                  add_x_to="a"))
cases.append(Case("Slice", {"a": normal(6, 5)},
                  lambda g: g.node("Slice", ["p_a", g.ints([5, 1]), g.ints([0, 5]), g.ints([1, 2]),
                                             g.ints([-2, 2])], (N, 3, 2)),
                  add_x_to="a"))
# GatherND with a batch dimension (a tuple per sample and output row; one
# row taken twice, so the adjoint adds) and without (tuples of two
# entries, one counting from the end).
cases.append(Case("GatherND_batch_dims", {"a": normal(3, 4)},
                  lambda g: g.node("GatherND", ["p_a", g.const("gnd", np.array(
                      [[[2], [2]], [[0], [-1]], [[1], [0]]], np.int64))], (N, 2, 4), batch_dims=1),
                  add_x_to="a", opset=13))
cases.append(Case("GatherND_tuples", {"a": normal(3, 4)},
                  lambda g: g.node("GatherND", ["p_a", g.const("gnt", np.array(
                      [[1, 2], [1, 2], [0, -3]], np.int64))], (3, 4)),
                  add_x_to="a", opset=13))


def sequence_parts(g):
    # A Linear's output split into a sequence (sizes 2 and 4 along the
    # rows) and its two parts taken back by position (1 and -2).
    seq = g.node("SplitToSequence", ["p_a", g.ints([2, 4])], None, axis=1)
    first = g.node("SequenceAt", [seq, g.ints(-2)], (N, 2, 3))
    second = g.node("SequenceAt", [seq, g.ints(1)], (N, 4, 3))
    rows = g.node("Slice", [second, g.ints([0]), g.ints([2]), g.ints([1])], (N, 2, 3))
    return g.node("Mul", [first, rows], (N, 2, 3))


cases.append(Case("SplitToSequence_SequenceAt", {"a": normal(6, 3)}, sequence_parts,
                  add_x_to="a", opset=13))
cases.append(Case("Gather_embedding", {"e": normal(6, 3)},
                  lambda g: g.node("Gather", ["p_e", "y"], (N, 2, 3)),
                  x_shape=(N, 1), labels=np.array([[1, 4], [4, 0], [5, 1]], np.int64)))
cases.append(Case("Gather_axis1", {"a": normal(4, 3)},
                  lambda g: g.node("Gather", ["p_a", g.ints([[3, 0], [3, -1]])], (N, 2, 2, 3), axis=1),
                  add_x_to="a"))
cases.append(Case("Expand", {"a": normal(1, 3)},
                  lambda g: g.node("Expand", ["p_a", g.ints([2, 1, 1, 3])], (2, N, 1, 3)),
                  add_x_to="a"))
cases.append(Case("Trilu", {"a": normal(4, 4)},
                  lambda g: g.node("Trilu", ["p_a", g.ints(1)], (N, 4, 4), upper=0),
                  add_x_to="a", opset=17))
cases.append(Case("Cast", {"a": normal(*S)},
                  lambda g: g.node("Cast", ["p_a"], (N,) + S,
                                   to=TensorProto.DOUBLE if g.dtype == np.float64 else TensorProto.FLOAT),
                  add_x_to="a"))

cases.append(Case("CastLike", {"a": normal(*S)},
                  lambda g: g.node("CastLike", ["p_a", g.const("like", np.zeros(1, g.dtype))],
                                   (N,) + S),
                  add_x_to="a"))
cases.append(Case("GlobalMaxPool", {"a": normal(2, 3, 4)},
                  lambda g: g.node("GlobalMaxPool", ["p_a"], (N, 2, 1, 1)), add_x_to="a"))


# Einsum: batch contractions, the weights on either side, three operands,
# an ellipsis with numpy's implicit output, an index summed away.
for name, eq, params, shape in [
        ("bij_jk", "bij,jk->bik", {"a": normal(2, 3), "w": normal(3, 4)}, (N, 2, 4)),
        ("ij_bj", "ij,bkj->bik", {"a": normal(2, 3), "w": normal(4, 3)}, (N, 4, 2)),
        ("three", "bij,jk,kl->bil", {"a": normal(2, 3), "w": normal(3, 2), "v": normal(2, 4)},
         (N, 2, 4)),
        ("ellipsis", "...ij,jk", {"a": normal(2, 3), "w": normal(3, 2)}, (N, 2, 2)),
        ("sum", "bij,j->b", {"a": normal(2, 3), "w": normal(3)}, (N,))]:
    names = ["p_a", "p_w"] + (["p_v"] if "v" in params else [])
    if name == "ij_bj":
        names = ["p_w", "p_a"]
    cases.append(Case("Einsum_" + name, params,
                      lambda g, eq=eq, names=names, shape=shape: g.node("Einsum", names, shape,
                                                                        equation=eq),
                      add_x_to="a"))


# Recurrent ops: x [N, T, I] transposed to the sequence-major X they take
# (as PyTorch exports batch_first), their outputs transposed back.
T, I, H = 3, 2, 2


def recurrent(g, op, gates, extra_inputs, shapes, **attrs):
    seq = g.node("Transpose", ["p_a"], (T, N, I), perm=[1, 0, 2])
    outs = g.node_multi(op, [seq, "p_w", "p_r", "p_b"] + extra_inputs, shapes, **attrs)
    dirs = shapes[0][1]
    y = g.node("Transpose", [outs[0]], (N, T, dirs, H), perm=[2, 0, 1, 3])
    last = g.node("Transpose", [outs[1]], (N, dirs, H), perm=[1, 0, 2])
    flat = g.node("Reshape", [y, g.ints([N, T * dirs * H])], (N, T * dirs * H))
    flat_last = g.node("Reshape", [last, g.ints([N, dirs * H])], (N, dirs * H))
    return g.node("Concat", [flat, flat_last], (N, (T + 1) * dirs * H), axis=1)


def recurrent_params(gates, dirs=1, peepholes=False):
    params = {"a": normal(T, I), "w": normal(dirs, gates * H, I, scale=0.7),
              "r": normal(dirs, gates * H, H, scale=0.7),
              "b": normal(dirs, 2 * gates * H, scale=0.3)}
    if peepholes:
        params["p"] = normal(dirs, 3 * H, scale=0.5)
    return params


# ONNX's reference runs one direction (pytorch_models.py trains a
# bidirectional LSTM).
cases.append(Case("RNN", recurrent_params(1),
                  lambda g: recurrent(g, "RNN", 1, [], [(T, 1, N, H), (1, N, H)],
                                      hidden_size=H),
                  add_x_to="a"))
for lbr in [0, 1]:
    cases.append(Case("GRU_linear_before_reset_%d" % lbr, recurrent_params(3),
                      lambda g, lbr=lbr: recurrent(g, "GRU", 3, [], [(T, 1, N, H), (1, N, H)],
                                                   hidden_size=H, linear_before_reset=lbr),
                      add_x_to="a"))
# LSTM with peepholes and the initial states (forward: ONNX's reference
# ignores direction; the reverse direction is checked against PyTorch's
# bidirectional LSTM in pytorch_models.py).
cases.append(Case("LSTM_peepholes",
                  {**recurrent_params(4, peepholes=True),
                   "h0": normal(1, N, H, scale=0.5), "c0": normal(1, N, H, scale=0.5)},
                  lambda g: recurrent(g, "LSTM", 4, ["", "p_h0", "p_c0", "p_p"],
                                      [(T, 1, N, H), (1, N, H), (1, N, H)],
                                      hidden_size=H),
                  add_x_to="a"))


def node_multi(self, op, inputs, shapes, **attrs):
    names = []
    for shape in shapes:
        self.count += 1
        names.append("t%d" % self.count)
        self.shapes[names[-1]] = shape
    self.nodes.append(helper.make_node(op, inputs, names, **attrs))
    return names


Graph.node_multi = node_multi

failures = []
cases = [case for case in cases if case.newest == NEWEST]
for case in cases:
    print("==", case.name, flush=True)
    # Each case draws its data from its own generator, so adding a case
    # does not change the others' data.
    x = np.random.default_rng(zlib.crc32(case.name.encode())).uniform(0.2, 1.0, case.x_shape)
    feeds = {"x": x}
    if case.labels is not None:
        feeds["y"] = case.labels
    data = os.path.join(out, case.name + ".npz")
    np.savez(data, **{k: (v.astype(np.float32) if v.dtype.kind == "f" else v)
                      for k, v in feeds.items()})
    path = os.path.join(out, case.name + ".onnx")
    onnx.save(build(case, np.float32, False), path)
    art = e2e.compile_model(path, os.path.join(out, case.name), N, optimizer="none")
    grads_path = os.path.join(out, case.name + "_grads.npz")
    log_path = os.path.join(out, case.name + ".jsonl")
    e2e.train(art, data, 1, log=log_path, extra=["--save-gradients", grads_path])
    got = np.load(grads_path)

    # The reference: the same graph in float64, parameters as inputs.
    ref = ReferenceEvaluator(build(case, np.float64, True))
    params = {k: v.astype(np.float32).astype(np.float64) for k, v in case.params.items()}
    feeds64 = {k: (v.astype(np.float32).astype(np.float64) if v.dtype.kind == "f" else v)
               for k, v in feeds.items()}

    def loss(p):
        return float(ref.run(None, {**feeds64, **p})[0])

    # Forward: the step's loss (the operator's output projected onto the
    # fixed weights) against the float64 evaluation, within FORWARD_RTOL of
    # the sum of the terms' magnitudes (float32 rounding scales with those,
    # not with a loss whose terms cancel).
    outs = ref.run(None, {**feeds64, **params})
    want_loss = float(outs[0])
    magnitude = float(np.abs(outs[1]).sum()) if len(outs) > 1 else abs(want_loss)
    try:
        e2e.assert_close("%s loss" % case.name, e2e.read_jsonl(log_path)[0]["loss"], want_loss,
                         rtol=FORWARD_RTOL, atol=FORWARD_RTOL * magnitude)
    except AssertionError as err:
        print("FAILED", err)
        failures.append(case.name)

    h = 1e-6
    for name, value in params.items():
        fd = np.zeros_like(value)
        for i in np.ndindex(value.shape):
            plus, minus = value.copy(), value.copy()
            plus[i] += h
            minus[i] -= h
            fd[i] = (loss({**params, name: plus}) - loss({**params, name: minus})) / (2 * h)
        # No case may pass by being zero.
        if np.abs(fd).max() < 1e-6:
            print("FAILED %s d/d%s: the reference gradient is zero" % (case.name, name))
            failures.append(case.name)
        scale = max(np.abs(fd).max(), 1e-3)
        try:
            e2e.assert_close("%s d/d%s" % (case.name, name), got[name], fd,
                             rtol=case.rtol, atol=case.rtol * 0.2 * scale)
        except AssertionError as err:
            print("FAILED", err)
            failures.append(case.name)

print("%d operator cases, %d failed %s" % (len(cases), len(failures), failures))

sys.exit(1 if failures else 0)
