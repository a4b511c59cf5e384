# bf16 contractions on AVX512-BF16 (vdpbf16ps, accrue-compile's default
# where the CPU has it): the gradients and the loss of bf16 products,
# against float64 on the same bf16 values with the roundings autocast
# makes (each product's result rounded to bf16). The products take every
# kernel path: x @ W1 (outer products, A's pairs in place, k in blocks of
# 8), h @ W2^T (dot products along k), dY @ W2 (B contiguous along n),
# dY^T h and x^T dH (outer products over the samples, A's pairs packed,
# 72 rows of them: vectors and single pairs, or an element at a time);
# micro-batches of 8 (B's rows interleaved in each block), 100 (B's pairs
# packed per block of k, blocks of 32 columns, a remainder of 4 rows) and
# 7 (odd k: those products stay on f32 kernels); and a 3x3 convolution
# (extra k dimensions: kh, kw). The losses (f32 sums of the forward's
# rounded products) check the forward's kernels.
#
# Tolerance: each gradient element within 2^-7 of its magnitude plus
# 2^-7 of the gradient's largest (one bf16 rounding of the result, and
# of the products it sums, flipped by f32 accumulation); a wrong pair or
# block is off by the magnitude of the values.
#
# REQUIRES: avx512bf16
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
rng = np.random.default_rng(11)
K = 2


def bf16(x):
    """x rounded to the nearest bf16 (ties to even), as float64."""
    bits = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16 << 16
    return bits.astype(np.uint32).view(np.float32).astype(np.float64)


def bf16_values(*shape):
    return bf16(rng.standard_normal(shape)).astype(np.float32)


def save_model(nodes, inputs, initializers, name):
    graph = helper.make_graph(
        nodes, name,
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["N"] + list(s))
         for n, s in inputs],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(v, n) for n, v in initializers.items()])
    path = os.path.join(out, name + ".onnx")
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def gradients(model, data, tag, b, **flags):
    """The gradients and the loss of one optimizer step of K micro-batches
    of b."""
    art = e2e.compile_model(model, os.path.join(out, tag), b, accumulation_steps=K,
                            optimizer="none", precision="bf16", **flags)
    assert json.load(open(os.path.join(art, "step.json")))["precision"] == "bf16"
    saved, log = os.path.join(out, tag + "_grads.npz"), os.path.join(out, tag + ".jsonl")
    e2e.train(art, data, 1, log=log, extra=["--save-gradients", saved])
    return dict(np.load(saved)), e2e.read_jsonl(log)[0]["loss"]


def dot_calls(model, tag, b):
    """The step's vdpbf16ps calls in its LLVM IR."""
    llvm = os.path.join(out, tag + ".ll")
    e2e.compile_model(model, llvm, b, accumulation_steps=K, optimizer="none",
                      precision="bf16", emit="llvm")
    calls = open(llvm).read().count("@llvm.x86.avx512bf16.dpbf16ps.512(")
    print("%s: %d vdpbf16ps calls" % (tag, calls))
    return calls


def check(name, got, ref):
    scale = np.abs(ref).max()
    bound = 2.0 ** -7 * (np.abs(ref) + scale)
    worst = (np.abs(got - ref) / bound).max()
    print("%s: worst error %.3g of the bound" % (name, worst))
    assert worst <= 1, name


# 1. loss = sum((x @ W1) @ W2^T * r), x, W1, W2, r exact in bf16.
IN, HID, OUT = 72, 96, 48
weights = {"w1": bf16_values(IN, HID), "w2": bf16_values(OUT, HID)}
model = save_model(
    [helper.make_node("MatMul", ["x", "w1"], ["h"]),
     helper.make_node("Gemm", ["h", "w2"], ["y"], transB=1),
     helper.make_node("Mul", ["y", "r"], ["p"]),
     helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0)],
    [("x", [IN]), ("r", [OUT])], weights, "products")
w1, w2 = (weights[n].astype(np.float64) for n in ("w1", "w2"))
for b in [8, 100, 7]:
    x, r = bf16_values(b * K, IN), bf16_values(b * K, OUT)
    data = os.path.join(out, "products_b%d.npz" % b)
    np.savez(data, x=x, r=r)
    ref = {"w1": 0, "w2": 0}
    loss, terms = 0, 0
    for micro in range(K):
        xs = x[micro * b:(micro + 1) * b].astype(np.float64)
        dy = r[micro * b:(micro + 1) * b].astype(np.float64)
        h = bf16(xs @ w1)
        y = bf16(h @ w2.T)
        loss, terms = loss + np.sum(y * dy), terms + np.sum(np.abs(y * dy))
        ref["w2"] = ref["w2"] + bf16(dy.T @ h)
        ref["w1"] = ref["w1"] + bf16(xs.T @ bf16(dy @ w2))
    got, got_loss = gradients(model, data, "products_b%d" % b, b)
    for n in ref:
        check("b=%d d%s" % (b, n), got[n], ref[n])
    # The loss (its f32 sum) checks the forward's dot products.
    print("b=%d loss %.6g, reference %.6g" % (b, got_loss, loss))
    assert abs(got_loss - loss) <= 1e-5 * terms, (got_loss, loss)
    assert dot_calls(model, "products_b%d" % b, b) > 0

# 2. A 3x3 convolution (8 -> 32 channels, 8x8 images, padding 1): its
#    products have extra k dimensions (kh, kw).
conv_w = {"wc": bf16_values(32, 8, 3, 3)}
conv = save_model(
    [helper.make_node("Conv", ["x", "wc"], ["y"], pads=[1, 1, 1, 1]),
     helper.make_node("Mul", ["y", "r"], ["p"]),
     helper.make_node("ReduceSum", ["p"], ["loss"], keepdims=0)],
    [("x", [8, 8, 8]), ("r", [32, 8, 8])], conv_w, "conv")
b = 16
x, r = bf16_values(b * K, 8, 8, 8), bf16_values(b * K, 32, 8, 8)
data = os.path.join(out, "conv.npz")
np.savez(data, x=x, r=r)
wc = conv_w["wc"].astype(np.float64)
ref, loss, terms = 0, 0, 0
for micro in range(K):
    xs = np.pad(x[micro * b:(micro + 1) * b].astype(np.float64), [(0, 0), (0, 0), (1, 1), (1, 1)])
    dy = r[micro * b:(micro + 1) * b].astype(np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(xs, (3, 3), axis=(2, 3))  # n c i j kh kw
    y = bf16(np.einsum("ncijab,ocab->noij", windows, wc))
    loss, terms = loss + np.sum(y * dy), terms + np.sum(np.abs(y * dy))
    ref = ref + bf16(np.einsum("noij,ncijab->ocab", dy, windows))
got, got_loss = gradients(conv, data, "conv", b)
check("conv dW", got["wc"], ref)
print("conv loss %.6g, reference %.6g" % (got_loss, loss))
assert abs(got_loss - loss) <= 1e-5 * terms, (got_loss, loss)
assert dot_calls(conv, "conv", b) > 0
print("ok")
