# Peak activation memory depends on the micro-batch size, not on the number
# of accumulation steps. With a model whose micro-batch activations take over
# 100 MB, the peak resident memory of accrue-train (GNU time's maximum RSS)
# is the same within 10% for K=1 and K=16 at a fixed micro-batch, and
# doubling the micro-batch raises it by about the activation memory of one
# micro-batch that accrue-compile reports. The memory plan (--plan) plus
# the data and accrue-train's own memory (a model of 64 parameters)
# predicts the peak within 10% at three micro-batch sizes.
#
# REQUIRES: gnu-time
# (Resident memory means nothing under AddressSanitizer, whose quarantine
# holds freed memory: the plain build runs this test.)
# UNSUPPORTED: sanitizer
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import subprocess
import sys

import accrue_e2e as e2e

# Resident memory is measured: glibc's fill pattern would touch pages the
# step never does (lit.cfg.py sets it for the other tests).
os.environ.pop("MALLOC_PERTURB_", None)
import wide

out = sys.argv[1]
B = 1024
onnx_path = os.path.join(out, "wide.onnx")
import onnx
import numpy as np

onnx.save(wide.build(8192), onnx_path)
rng = np.random.default_rng(1)
samples = 16 * B
data = os.path.join(out, "data.npz")
np.savez(data, x=rng.standard_normal((samples, wide.IN)).astype(np.float32),
         y=rng.standard_normal((samples, 1)).astype(np.float32))


def max_rss(art, npz):
    proc = subprocess.run(
        ["/usr/bin/time", "-f", "maxrss_kb=%M", e2e.tool("accrue-train"), art,
         "--data", npz, "--steps", "1", "--no-progress"],
        capture_output=True, text=True, check=True)
    return int(proc.stderr.strip().splitlines()[-1].split("=")[1]) * 1024


def peak_rss(b, k, plan=False):
    """(max RSS in bytes, estimated activation bytes[, planned peak]) of one
    step."""
    # (--plan takes its value after "=": it has a default.)
    art = e2e.compile_model(onnx_path, os.path.join(out, "b%d_k%d" % (b, k)), b,
                            accumulation_steps=k, optimizer="sgd", lr=0.01,
                            **{"plan=json": plan})
    with open(os.path.join(art, "step.json")) as f:
        step = json.load(f)
    activation = step["activation_bytes"]
    rss = max_rss(art, data)
    print("b=%d K=%d: max RSS %.1f MB, estimated activations %.1f MB"
          % (b, k, rss / 2**20, activation / 2**20))
    if plan:
        return rss, activation, step["memory_plan"]["peak_bytes"]
    return rss, activation


rss1, act = peak_rss(B, 1)
rss16, act16 = peak_rss(B, 16)
rss2b, _ = peak_rss(2 * B, 1)

assert act >= 100e6, "the model must have >= 100 MB of activations, has %d" % act
assert act16 == act, "the activation estimate must not depend on K"
assert abs(rss16 - rss1) <= 0.10 * rss1, \
    "K=16 uses %.1f MB, K=1 %.1f MB: more than 10%% apart" % (rss16 / 2**20, rss1 / 2**20)
growth = rss2b - rss1
assert 0.75 * act <= growth <= 1.25 * act, \
    "doubling the micro-batch added %.1f MB, activations are %.1f MB" % (growth / 2**20, act / 2**20)
print("ok: K=16/K=1 = %.3f, (RSS(2b) - RSS(b)) / activations = %.3f"
      % (rss16 / rss1, growth / act))

# The plan against the measured peak: accrue-train's own memory measured on
# a model of 64 parameters, the dataset counted once.
tiny = os.path.join(out, "tiny.onnx")
onnx.save(wide.build(8), tiny)
tiny_data = os.path.join(out, "tiny.npz")
np.savez(tiny_data, x=rng.standard_normal((16, wide.IN)).astype(np.float32),
         y=rng.standard_normal((16, 1)).astype(np.float32))
runtime = max_rss(e2e.compile_model(tiny, os.path.join(out, "tiny"), 16, optimizer="sgd"),
                  tiny_data)
data_bytes = os.path.getsize(data)
for b in [B // 2, B, 2 * B]:
    rss, _, planned = peak_rss(b, 1, plan=True)
    predicted = planned + data_bytes + runtime
    print("b=%d: planned peak %.1f MB, predicted %.1f MB, measured %.1f MB (%.3f)"
          % (b, planned / 2**20, predicted / 2**20, rss / 2**20, rss / predicted))
    assert abs(rss - predicted) <= 0.10 * predicted, (b, rss, predicted)
