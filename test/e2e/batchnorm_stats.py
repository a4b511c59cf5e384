# BatchNormalization in training mode keeps running statistics like
# PyTorch: a CNN with BatchNorm2d and BatchNorm1d (zoo.BatchNormCNN),
# exported by PyTorch at opsets 13 and 17, trains 3 AdamW steps of 2 x 4
# micro-batches; its parameters and the running means and variances match
# PyTorch's module after the same accumulation loop (each micro-batch's
# forward updates the statistics once, the variance unbiased). The
# statistics are in the exported model and in checkpoints (a resumed run
# continues bit-identically); a partial last window's micro-batches of
# padding leave them alone (PyTorch never runs them).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import json
import os
import sys

import numpy as np
import torch

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
B, K, STEPS, LR, WD = 2, 4, 3, 0.01, 0.01
E = B * K


def pytorch_reference(onnx_path, data, windows):
    """PyTorch's accumulation loop from the exported model's starting point
    (tracing for the export ran a training-mode forward, which moved the
    module's statistics); `windows` lists each step's sample count."""
    module = zoo.BatchNormCNN(1)
    start_values = e2e.initializers(onnx_path)
    with torch.no_grad():
        for name, b in module.named_buffers():
            if "running" in name:
                b.copy_(torch.tensor(start_values[name]))
    module.train()
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=WD)
    start = 0
    for count in windows:
        opt.zero_grad()
        for k in range(0, count, B):
            x = torch.tensor(data["x"][start + k:start + k + B])
            y = torch.tensor(data["y"][start + k:start + k + B])
            (module(x, y) * len(x) / count).backward()
        opt.step()
        start += count
    return module


def check(tag, got, module):
    want = dict(module.named_parameters())
    want.update({n: b for n, b in module.named_buffers() if "running" in n})
    for name, value in want.items():
        e2e.assert_close("%s %s" % (tag, name), got[name], value.detach().numpy(),
                         rtol=1e-4, atol=1e-6)


rng = np.random.default_rng(3)
for opset in (13, 17):
    tag = "opset %d" % opset
    module = zoo.BatchNormCNN(1)
    data = zoo.BatchNormCNN.data(STEPS * E, rng)
    path = os.path.join(out, "bn%d.onnx" % opset)
    zoo.export(module, data, path, opset)
    initial = {n: v for n, v in e2e.initializers(path).items() if "running" in n}
    npz = os.path.join(out, "bn%d.npz" % opset)
    np.savez(npz, **data)
    art = e2e.compile_model(path, os.path.join(out, "bn%d" % opset), B,
                            accumulation_steps=K, optimizer="adamw", lr=LR,
                            weight_decay=WD)
    manifest = json.load(open(os.path.join(art, "step.json")))
    assert sorted(b["name"] for b in manifest["buffers"]) == sorted(initial), manifest
    trained = os.path.join(out, "bn%d_trained.onnx" % opset)
    e2e.train(art, npz, STEPS, export=trained)
    got = e2e.initializers(trained)
    reference = pytorch_reference(path, data, [E] * STEPS)
    for name, value in initial.items():
        # The statistics moved, so the comparison below means something.
        assert np.abs(got[name] - value).max() > 1e-2, name
    check(tag, got, reference)
    # (PyTorch's variances are unbiased: BatchNorm1d sees 2 samples per
    # micro-batch, so ONNX's biased form would be off by a factor of 2.)

# A checkpoint holds the statistics; resuming from it continues exactly.
ckpt_dir = os.path.join(out, "ckpt")
e2e.train(art, npz, 2, extra=["--checkpoint-dir", ckpt_dir, "--checkpoint-every", "1"])
checkpoints = sorted(os.listdir(ckpt_dir))
saved = e2e.read_safetensors(os.path.join(ckpt_dir, checkpoints[-1]))
assert "bn2d.running_mean" in saved and "bn1d.running_var" in saved, sorted(saved)
resumed = os.path.join(out, "resumed.onnx")
e2e.train(art, npz, STEPS, export=resumed,
          extra=["--checkpoint-dir", ckpt_dir, "--resume"])
again = e2e.initializers(resumed)
for name, value in e2e.initializers(trained).items():
    assert np.array_equal(value, again[name]), "resume changed " + name

# A partial last window: 3 full steps and one of 4 samples, padded to 8. Its
# last two micro-batches are padding only and must not move the statistics.
partial = zoo.BatchNormCNN.data(STEPS * E + 4, np.random.default_rng(4))
npz = os.path.join(out, "partial.npz")
np.savez(npz, **partial)
exported = os.path.join(out, "partial.onnx")
e2e.train(art, npz, STEPS + 1, export=exported)
check("partial window", e2e.initializers(exported),
      pytorch_reference(path, partial, [E] * STEPS + [4]))

print("ok")
