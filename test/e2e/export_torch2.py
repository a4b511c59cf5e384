# accrue.export_torch and accrue.compile_torch on PyTorch 2 (the test venv
# of the newest releases): the dynamo exporter with what training needs. An
# MLP with two LayerNorms whose scales are equal at initialization (the
# exporter's default optimize=True merges them into one initializer) and a
# float buffer (a fixed input scale, marked BUFFER by the exporter) trains 3
# AdamW steps at micro-batch 2 x 4 to PyTorch's one-big-batch step (rtol
# 1e-4); the buffer stays as it was; exporter="torchscript" gives the same
# parameters.
#
# REQUIRES: torch2, accrue-python
# RUN: rm -rf %t && mkdir -p %t
# RUN: env PYTHONPATH=%accrue_build/python_packages:$PYTHONPATH %latest_python %s %t

import copy
import os
import sys
import warnings

import numpy as np
import onnx
import torch

import accrue
import accrue_e2e as e2e

warnings.filterwarnings("ignore")
out = sys.argv[1]
B, K, STEPS, LR = 2, 4, 3, 1e-3
E = B * K


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(6, 16)
        self.norm1 = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 16)
        self.norm2 = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 3)
        self.register_buffer("scale", torch.linspace(0.5, 1.5, 6))

    def forward(self, x, y):
        h = self.norm1(torch.relu(self.fc1(x * self.scale)))
        h = self.norm2(torch.relu(self.fc2(h)))
        return torch.nn.functional.cross_entropy(self.head(h), y)


rng = np.random.default_rng(0)
data = {"x": rng.standard_normal((STEPS * E, 6)).astype(np.float32),
        "y": rng.integers(0, 3, STEPS * E).astype(np.int64)}
torch.manual_seed(0)
initial = Net()

want = copy.deepcopy(initial).train()
opt = torch.optim.AdamW(want.parameters(), lr=LR, weight_decay=0.01)
for step in range(STEPS):
    opt.zero_grad()
    want(*(torch.tensor(v[step * E:(step + 1) * E]) for v in data.values())).backward()
    opt.step()

failures = 0
for exporter in ("auto", "torchscript"):
    art = accrue.compile_torch(copy.deepcopy(initial), data, os.path.join(out, exporter),
                               exporter=exporter, micro_batch=B, accumulation_steps=K,
                               optimizer="adamw", lr=LR, weight_decay=0.01)
    model = onnx.load(os.path.join(out, exporter + ".onnx"))
    opset = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")][0]
    print(exporter, "opset", opset)
    assert opset == (20 if exporter == "auto" else 17), opset
    with accrue.Session(art) as session:
        session.train(data, steps=STEPS)
        got = session.parameters()
        session.export(os.path.join(out, exporter + "_trained.onnx"))
    # The buffer comes back as it was.
    trained = e2e.initializers(os.path.join(out, exporter + "_trained.onnx"))
    scale = [v for k, v in trained.items() if k.endswith("scale")]
    assert len(scale) == 1 and np.array_equal(scale[0], initial.scale.numpy()), sorted(trained)
    # Both LayerNorm scales are parameters of their own (not merged).
    assert len(got) == len(list(initial.parameters())), sorted(got)
    for name, value in want.named_parameters():
        try:
            e2e.assert_close("%s %s" % (exporter, name), got[name], value.detach().numpy(),
                             rtol=1e-4, atol=1e-6)
        except AssertionError as err:
            print("FAILED", err)
            failures += 1
print("%d failures" % failures)
sys.exit(1 if failures else 0)
