# A pass over data that does not fill its last effective batch ends with a
# partial window, padded to whole micro-batches and masked out of the loss:
# the update equals that of micro-batches of one sample (no padding at all).
# --drop-last skips it instead. An accumulation schedule changes K between
# steps without recompiling. A loss that cannot be masked trains on full
# windows only, with a warning. An effective batch that is not a multiple
# of the micro-batch pads the last micro-batch of every step.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import accrue_e2e as e2e
import mlp
import zoo

out = sys.argv[1]


def run(model, data, b, k, tag, steps=None, extra=(), **flags):
    art = e2e.compile_model(model, os.path.join(out, tag), b, accumulation_steps=k,
                            lr=0.02, **flags)
    trained = os.path.join(out, tag + ".onnx")
    log = os.path.join(out, tag + ".jsonl")
    proc = e2e.train(art, data, steps, export=trained, log=log, extra=list(extra))
    return e2e.initializers(trained), e2e.read_jsonl(log), proc, art


def same(a, b, what, rtol=1e-5):
    for name in b:
        e2e.assert_close("%s %s" % (what, name), zoo.comparable(name, a[name]),
                         zoo.comparable(name, b[name]), rtol=rtol, atol=1e-6)


# 1. The MLP, 38 samples, b=4 x K=4: windows of 16, 16 and 6 (two
#    micro-batches, the second with 2 real samples). Reference: b=1 x K=16,
#    whose last window is 6 whole micro-batches.
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=0), model)
x, y = mlp.dataset(38)
data = os.path.join(out, "mlp.npz")
np.savez(data, x=x, y=y)
padded, padded_log, _, art = run(model, data, 4, 4, "mlp_b4")
assert json.load(open(os.path.join(art, "step.json")))["partial_windows"] is True
exact, exact_log, _, _ = run(model, data, 1, 16, "mlp_b1")
assert [r["samples"] for r in padded_log] == [16, 16, 6], padded_log
assert [r["samples"] for r in exact_log] == [16, 16, 6], exact_log
same(padded, exact, "mlp partial window")
for got, want in zip(padded_log, exact_log):
    e2e.assert_close("mlp step %d loss" % got["step"], got["loss"], want["loss"],
                     rtol=1e-5, atol=1e-7)
# --drop-last: two steps per pass; the third starts the next pass.
dropped, dropped_log, _, _ = run(model, data, 4, 4, "mlp_drop", steps=3, extra=["--drop-last"])
assert [r["samples"] for r in dropped_log] == [16, 16, 16], dropped_log
e2e.assert_close("drop-last step 1 loss", dropped_log[0]["loss"], padded_log[0]["loss"],
                 rtol=1e-6, atol=0)
assert abs(dropped_log[2]["loss"] - padded_log[2]["loss"]) > 1e-4

# 2. A GPT on padded token sequences, b=2 x K=2 over 7 samples: windows of 4
#    and 3 (the last micro-batch half padding). Reference: b=1 x K=4.
module = zoo.GPT(4)
tokens = module.data(7, np.random.default_rng(9))
gpt = os.path.join(out, "gpt.onnx")
zoo.export(module, tokens, gpt, 17)
gdata = os.path.join(out, "gpt.npz")
np.savez(gdata, **tokens)
padded, padded_log, _, _ = run(gpt, gdata, 2, 2, "gpt_b2")
exact, exact_log, _, _ = run(gpt, gdata, 1, 4, "gpt_b1")
assert [r["samples"] for r in padded_log] == [4, 3], padded_log
same(padded, exact, "gpt partial window")

# 3. An accumulation schedule, K = 1 then 2 then 3 micro-batches of 4,
#    against micro-batches of 1 with the same windows (4, 8, 12 samples).
ramp, ramp_log, _, _ = run(model, data, 4, 1, "ramp_b4", steps=3,
                           extra=["--accumulation-schedule", "0:1,1:2,2:3"])
ref, ref_log, _, _ = run(model, data, 1, 1, "ramp_b1", steps=3,
                         extra=["--accumulation-schedule", "0:4,1:8,2:12"])
assert [r["samples"] for r in ramp_log] == [4, 8, 12], ramp_log
assert [r["samples"] for r in ref_log] == [4, 8, 12], ref_log
same(ramp, ref, "schedule")

# 4. A loss the pass cannot split (sqrt of a mean) cannot mask padding: full
#    windows only, with a warning, and the manifest says so.
nodes = [
    helper.make_node("Mul", ["x", "w"], ["h"]),
    helper.make_node("ReduceMean", ["h"], ["m"], keepdims=0),
    helper.make_node("Mul", ["m", "m"], ["m2"]),
    helper.make_node("Sqrt", ["m2"], ["loss"]),
]
graph = helper.make_graph(
    nodes, "odd", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
    [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
    [numpy_helper.from_array(np.ones(8, np.float32), "w")])
odd = os.path.join(out, "odd.onnx")
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), odd)
odd_data = os.path.join(out, "odd.npz")
np.savez(odd_data, x=x)
_, odd_log, proc, art = run(odd, odd_data, 4, 4, "odd", optimizer="sgd")
assert json.load(open(os.path.join(art, "step.json")))["partial_windows"] is False
assert "cannot mask padded samples" in proc.stderr, proc.stderr
assert [r["samples"] for r in odd_log] == [16, 16], odd_log

# 5. An effective batch of 6 at micro-batch 4 (accrue-compile
#    --effective-batch): K = 2, every step 6 samples and 2 padded rows, the
#    pass's last step 2 samples. Reference: micro-batches of 1 x K=6.
fixed, fixed_log, _, art = run(model, data, 4, None, "mlp_e6", effective_batch=6)
manifest = json.load(open(os.path.join(art, "step.json")))
assert manifest["effective_batch"] == 6 and manifest["accumulation_steps"] == 2, manifest
exact, exact_log, _, _ = run(model, data, 1, 6, "mlp_b1_k6")
assert [r["samples"] for r in fixed_log] == [6] * 6 + [2], fixed_log
assert [r["samples"] for r in exact_log] == [6] * 6 + [2], exact_log
same(fixed, exact, "effective batch 6 at micro-batch 4")
# The same from accrue-train's setting, on the b=4 x K=4 artifact of 1.
_, over_log, _, _ = run(model, data, 4, 4, "mlp_b4_e6", extra=["--effective-batch", "6"])
assert [r["samples"] for r in over_log] == [6] * 6 + [2], over_log
for got, want in zip(over_log, exact_log):
    e2e.assert_close("--effective-batch 6 step %d loss" % got["step"], got["loss"],
                     want["loss"], rtol=1e-5, atol=1e-7)
# It excludes accumulation steps; a loss that cannot mask padding needs a
# multiple of the micro-batch (at compile time and at run time).
proc = e2e.run([e2e.tool("accrue-train"), art, "--data", data, "--effective-batch", "6",
                "--accumulation-steps", "2"], expect_ok=False)
assert proc.returncode != 0 and "exclude each other" in proc.stderr, proc.stderr
proc = e2e.run([e2e.tool("accrue-compile"), odd, "-o", os.path.join(out, "odd_e6"),
                "--micro-batch", "4", "--effective-batch", "6"], expect_ok=False)
assert proc.returncode != 0 and "cannot mask padded samples" in proc.stderr, proc.stderr
proc = e2e.run([e2e.tool("accrue-train"), os.path.join(out, "odd"), "--data", odd_data,
                "--effective-batch", "6"], expect_ok=False)
assert proc.returncode != 0 and "cannot mask padded samples" in proc.stderr, proc.stderr
_, odd_log, _, _ = run(odd, odd_data, 4, None, "odd_e8", optimizer="sgd", effective_batch=8)
assert [r["samples"] for r in odd_log] == [8] * 4, odd_log
print("ok")
