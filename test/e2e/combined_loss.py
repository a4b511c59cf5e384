# Exact normalization of losses that combine mean-reduced terms whose
# counts differ between micro-batches: token-level cross-entropy over the
# non-padded tokens plus a sequence-level auxiliary mean, and label
# smoothing written by hand over masked tokens (the targets' log-
# probabilities picked with torch.gather, ONNX GatherElements). Each term is
# divided by its own count over the whole effective batch (a counting pass
# before the micro-batch loop), so b=2,K=4 trains like PyTorch's one big
# batch of 8 (SGD, 3 steps, rtol 1e-5), also with a partial last window;
# averaging micro-batch losses (mean of means) differs by far more. The
# compile warns about neither loss, and a form that is not a combination of
# recognized terms gets a warning that says which part is not.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
B, K, STEPS, LR = 2, 4, 3, 0.5
E = B * K


def reference(kind, d, mean_of_means=False):
    module = zoo.CombinedLoss(kind)
    opt = torch.optim.SGD(module.parameters(), lr=LR)
    for step in range((len(d["idx"]) + E - 1) // E):
        window = {k: torch.tensor(v[step * E:(step + 1) * E]) for k, v in d.items()}
        opt.zero_grad()
        if mean_of_means:
            for k in range(K):
                micro = {n: v[k * B:(k + 1) * B] for n, v in window.items()}
                (module(*micro.values()) / K).backward()
        else:
            module(*window.values()).backward()
        opt.step()
    return {n: p.detach().numpy() for n, p in module.named_parameters()}


rng = np.random.default_rng(21)
for kind in ["aux", "smoothing"]:
    d = zoo.CombinedLoss.data(rng, STEPS * E)
    path = os.path.join(out, kind + ".onnx")
    zoo.export(zoo.CombinedLoss(kind), d, path, 17)
    npz = os.path.join(out, kind + ".npz")
    np.savez(npz, **d)
    cmd = [e2e.tool("accrue-compile"), path, "-o", os.path.join(out, kind), "--micro-batch",
           str(B), "--accumulation-steps", str(K), "--optimizer", "sgd", "--lr", str(LR)]
    proc = e2e.run(cmd)
    assert "mean of means" not in proc.stderr, proc.stderr
    trained = os.path.join(out, kind + "_trained.onnx")
    e2e.train(os.path.join(out, kind), npz, STEPS, export=trained)
    got = e2e.initializers(trained)
    want = reference(kind, d)
    naive = reference(kind, d, mean_of_means=True)
    gap = max(np.abs(want[n] - naive[n]).max() for n in want)
    # Mean of means is visibly wrong here, so the check below can fail.
    assert gap > 1e-3, (kind, gap)
    # The smoothing loss does not use the regression head (not imported).
    assert set(want) - set(got) <= ({"reg.weight", "reg.bias"} if kind == "smoothing"
                                    else set()), set(want) - set(got)
    for name in set(want) & set(got):
        e2e.assert_close("%s %s" % (kind, name), got[name], want[name], rtol=1e-5, atol=1e-6)
    print("%s: mean of means would be off by %.3g" % (kind, gap))
    # A partial last window (5 of 8 samples: micro-batches of 2, 2, 1 and
    # none) is one big batch of its 5 samples.
    short = {k: v[:STEPS * E - 3] for k, v in d.items()}
    npz = os.path.join(out, kind + "_short.npz")
    np.savez(npz, **short)
    trained = os.path.join(out, kind + "_short.onnx")
    e2e.train(os.path.join(out, kind), npz, None, export=trained)
    got = e2e.initializers(trained)
    want = reference(kind, short)
    for name in set(want) & set(got):
        e2e.assert_close("%s partial window %s" % (kind, name), got[name], want[name],
                         rtol=1e-5, atol=1e-6)

# A product of two means is not a linear combination: the warning says
# which part is not a recognized term.


class Product(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(4)
        self.fc = nn.Linear(3, 1)

    def forward(self, x):
        y = self.fc(x)
        return (y ** 2).mean() * y.mean()


d = {"x": rng.standard_normal((E, 3)).astype(np.float32)}
path = os.path.join(out, "product.onnx")
zoo.export(Product(), d, path, 17)
proc = e2e.run([e2e.tool("accrue-compile"), path, "-o", os.path.join(out, "product"),
                "--micro-batch", str(B), "--accumulation-steps", str(K)])
assert "nor a linear combination of such terms ('nn.mul' is neither)" in proc.stderr, \
    proc.stderr
print("product: warned")
