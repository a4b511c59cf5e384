# --flush-denormals: denormal floats are read and written as zero on the
# CPU (x86's DAZ and FTZ, what torch.set_flush_denormal(True) sets), in the
# main thread and in OpenMP's workers. A linear model fed inputs of 1e-39
# (denormal in float32) has the gradient mean(x): about 1e-39 by default,
# exactly 0 with the flag, with 1 and 2 threads. Normal values are
# untouched: inputs of 1 give the same gradient either way.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e

out = sys.argv[1]
B, N = 4096, 64
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["y"]),
     helper.make_node("ReduceMean", ["y"], ["loss"], keepdims=0)],
    "linear",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", N])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.ones((N, 1), np.float32), "w")])
model = os.path.join(out, "linear.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), model)
art = e2e.compile_model(model, os.path.join(out, "art"), B, optimizer="none")

tiny = np.full((B, N), 1e-39, np.float32)
assert 0 < tiny[0, 0] < np.finfo(np.float32).tiny  # denormal
for name, x in [("tiny", tiny), ("ones", np.ones((B, N), np.float32))]:
    np.savez(os.path.join(out, name + ".npz"), x=x)
    grads = {}
    for flags in [[], ["--flush-denormals"]]:
        for threads in ["1", "2"]:
            g = os.path.join(out, "%s%s_%s.npz" % (name, "".join(flags), threads))
            e2e.train(art, os.path.join(out, name + ".npz"), 1,
                      extra=["--save-gradients", g, "--threads", threads] + flags)
            grads[(bool(flags), threads)] = np.load(g)["w"]
    expected = x.astype(np.float64).mean(axis=0)[:, None]
    for threads in ["1", "2"]:
        default, flushed = grads[(False, threads)], grads[(True, threads)]
        e2e.assert_close(name + " default", default, expected, rtol=1e-2, atol=0)
        if name == "tiny":
            assert np.all(default > 0), default
            assert np.all(flushed == 0), flushed
        else:
            assert np.array_equal(default, flushed)
print("ok")
