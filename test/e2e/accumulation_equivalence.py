# Micro-batch 8 x 4 accumulation steps equals one batch of 32: parameters
# after 5 AdamW steps with clipping agree to float32 rounding, and so do the
# reported loss and gradient norm of every step. A third of the labels are
# ignored (ignore_index), so micro-batches count unequal numbers of samples
# and a mean of micro-batch means would not match.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
model = os.path.join(out, "mlp.onnx")
mlp.export(mlp.MLP(seed=0), model)
x, y = mlp.dataset(160, ignored=0.3)
mlp.assert_unequal_counts(y, 4, 32)
mlp.assert_unequal_counts(y, 8, 32)
data = os.path.join(out, "data.npz")
np.savez(data, x=x, y=y)

results = {}
for b, k in [(8, 4), (32, 1), (4, 8)]:
    art = e2e.compile_model(model, os.path.join(out, "b%d_k%d" % (b, k)), b,
                            accumulation_steps=k, optimizer="adamw", lr=0.01,
                            clip_norm=0.35)
    trained = os.path.join(out, "trained_b%d_k%d.onnx" % (b, k))
    log = os.path.join(out, "log_b%d_k%d.jsonl" % (b, k))
    e2e.train(art, data, 5, export=trained, log=log)
    results[(b, k)] = (e2e.initializers(trained), e2e.read_jsonl(log))

ref_params, ref_log = results[(32, 1)]
initial = e2e.initializers(model)
for key in [(8, 4), (4, 8)]:
    params, log = results[key]
    for name in ref_params:
        # Training moved the parameters, so agreement is not vacuous.
        assert np.abs(ref_params[name] - initial[name]).max() > 1e-3, name
        e2e.assert_close("b=%d,K=%d %s" % (key + (name,)), params[name],
                         ref_params[name], rtol=1e-5, atol=1e-6)
    for got, want in zip(log, ref_log):
        e2e.assert_close("b=%d,K=%d step %d loss" % (key + (got["step"],)),
                         got["loss"], want["loss"], rtol=1e-5, atol=1e-7)
        e2e.assert_close("b=%d,K=%d step %d grad_norm" % (key + (got["step"],)),
                         got["grad_norm"], want["grad_norm"], rtol=1e-5, atol=1e-7)
# Clipping was active on some steps and not on others (max_norm 0.35).
assert max(r["grad_norm"] for r in ref_log) > 0.35
assert min(r["grad_norm"] for r in ref_log) < 0.35
