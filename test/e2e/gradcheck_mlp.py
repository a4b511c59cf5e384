# The MLP exported by PyTorch: gradients of the effective batch (micro-batch
# 8 x 4) against float64 central finite differences of the same module in
# PyTorch, evaluated at the float32 initial parameters. A third of the
# labels are ignored, so the micro-batches count unequal numbers of samples.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import torch

import accrue_e2e as e2e
import mlp

out = sys.argv[1]
module = mlp.MLP(seed=3)
mlp.export(module, os.path.join(out, "mlp.onnx"))
x, y = mlp.dataset(32, ignored=0.3)
mlp.assert_unequal_counts(y, 8, 32)
np.savez(os.path.join(out, "data.npz"), x=x, y=y)

art = e2e.compile_model(os.path.join(out, "mlp.onnx"), os.path.join(out, "art"), 8,
                        optimizer="none", accumulation_steps=4)
e2e.train(art, os.path.join(out, "data.npz"), 1,
          extra=["--save-gradients", os.path.join(out, "grads.npz")])
got = np.load(os.path.join(out, "grads.npz"))

ref = module.double()
xd, yd = torch.tensor(x, dtype=torch.float64), torch.tensor(y)
h = 1e-6
with torch.no_grad():
    for name, param in ref.named_parameters():
        fd = torch.zeros_like(param)
        flat, fdflat = param.view(-1), fd.view(-1)
        for i in range(flat.numel()):
            saved = flat[i].item()
            flat[i] = saved + h
            plus = ref(xd, yd).item()
            flat[i] = saved - h
            minus = ref(xd, yd).item()
            flat[i] = saved
            fdflat[i] = (plus - minus) / (2 * h)
        scale = max(fd.abs().max().item(), 1e-3)
        e2e.assert_close("d/d" + name, got[name], fd.numpy(), rtol=1e-3,
                         atol=1e-4 * scale)
