# 8- and 16-bit integer batch inputs (token ids, masks): a model whose ids
# are int16, int8 or uint16 and whose mask is uint8 or int8, fed from .npz
# arrays of those dtypes, trains to exactly the parameters of the same model
# with int64 ids and a float mask (the importer and the loader widen them
# to int32; the values are the same). Ids above 127 (uint8, int16) and
# negative int8 values in the mask check the sign and zero extension.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx

import accrue_e2e as e2e

out = sys.argv[1]
N, T, V, D, C = 12, 5, 300, 4, 3
rng = np.random.default_rng(8)
emb = rng.standard_normal((V, D)).astype(np.float32)
w = rng.standard_normal((D, C)).astype(np.float32)
ids = rng.integers(0, V, (N, T))
mask = (rng.random((N, T)) < 0.7).astype(np.int64)
mask[:, 0] = 1
labels = rng.integers(0, C, N).astype(np.int64)

ONNX_TYPES = {np.int8: TensorProto.INT8, np.uint8: TensorProto.UINT8,
              np.int16: TensorProto.INT16, np.uint16: TensorProto.UINT16,
              np.int64: TensorProto.INT64, np.float32: TensorProto.FLOAT}


def model(id_type, mask_type, path):
    # An int8 mask holds -1 for "keep" (sign extension must hold).
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64),
             helper.make_node("Gather", ["emb", "ids64"], ["h"]),
             helper.make_node("Cast", ["mask"], ["m"], to=TensorProto.FLOAT)]
    if mask_type == np.int8:
        nodes.append(helper.make_node("Neg", ["m"], ["mf"]))
    else:
        nodes.append(helper.make_node("Identity", ["m"], ["mf"]))
    nodes += [helper.make_node("Unsqueeze", ["mf", "two"], ["m3"]),
              helper.make_node("Mul", ["h", "m3"], ["hm"]),
              helper.make_node("ReduceSum", ["hm", "one"], ["s"], keepdims=0),
              helper.make_node("ReduceSum", ["mf", "one"], ["c"], keepdims=1),
              helper.make_node("Div", ["s", "c"], ["pooled"]),
              helper.make_node("MatMul", ["pooled", "w"], ["logits"]),
              helper.make_node("SoftmaxCrossEntropyLoss", ["logits", "y"], ["loss"])]
    graph = helper.make_graph(
        nodes, "narrow",
        [helper.make_tensor_value_info("ids", ONNX_TYPES[id_type], ["N", T]),
         helper.make_tensor_value_info("mask", ONNX_TYPES[mask_type], ["N", T]),
         helper.make_tensor_value_info("y", TensorProto.INT64, ["N"])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        [numpy_helper.from_array(emb, "emb"), numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array([2], np.int64), "two"),
         numpy_helper.from_array(np.array([1], np.int64), "one")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def train(id_type, mask_type):
    tag = "%s_%s" % (np.dtype(id_type).name, np.dtype(mask_type).name)
    path = os.path.join(out, tag + ".onnx")
    model(id_type, mask_type, path)
    m = mask if mask_type != np.int8 else -mask
    npz = os.path.join(out, tag + ".npz")
    np.savez(npz, ids=ids.astype(id_type), mask=m.astype(mask_type), y=labels)
    art = e2e.compile_model(path, os.path.join(out, tag), 3, accumulation_steps=2,
                            optimizer="adam", lr=0.05)
    trained = os.path.join(out, tag + "_trained.onnx")
    e2e.train(art, npz, 2, export=trained)
    return e2e.initializers(trained)


want = train(np.int64, np.float32)
assert np.abs(want["emb"] - emb).max() > 0
for id_type, mask_type in [(np.int16, np.uint8), (np.uint16, np.int8)]:
    got = train(id_type, mask_type)
    for name in want:
        assert np.array_equal(got[name], want[name]), (id_type, mask_type, name)
    print("%s ids, %s mask: same parameters" % (np.dtype(id_type).name,
                                                np.dtype(mask_type).name))
# int8 ids (values below 128).
ids = ids % 128
want_small = train(np.int64, np.float32)
got = train(np.int8, np.uint8)
for name in want_small:
    assert np.array_equal(got[name], want_small[name]), ("int8", name)
print("int8 ids: same parameters")
