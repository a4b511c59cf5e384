# Models as torch.onnx.export writes them (opsets 13 and 17): an MLP with a
# squared-error loss, a CNN, a small GPT (tied and untied head, causal
# attention, padded targets ignored), a LLaMA-style decoder (RMSNorm, rotary
# embeddings computed with Sin and Cos, SwiGLU, tied head, padded targets), a
# ResNet-style CNN with GroupNorm and SiLU, a MobileNetV3-style block
# (depthwise convolution, HardSwish, squeeze-and-excitation) and a UNet
# level (grouped ConvTranspose, skip concatenation, nearest and bilinear
# Resize, per-pixel cross-entropy), and sequence classifiers with a 2-layer
# GRU and a bidirectional LSTM (variable lengths through a mask) or through
# PyTorch's packed sequences (bidirectional GRU, 2-layer LSTM: TopK sorts the
# batch, sequence_lens), and a CNN whose loss uses MaxPool's Indices output. Each trains 3 optimizer steps with
# micro-batch 2 x 4 accumulation steps through accrue-compile and
# accrue-train; the parameters match PyTorch training the same module with
# a manual accumulation loop and AdamW.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t

import os
import sys

import numpy as np
import torch

import accrue_e2e as e2e
import zoo

out = sys.argv[1]
B, K, STEPS, LR, WD, CLIP = 2, 4, 3, 0.02, 0.01, 1.0
E = B * K


def item_count(name, inputs):
    """How many items a micro-batch's mean loss averages over."""
    if name.startswith("gpt") or name.startswith("llama"):
        return int((inputs["targets"] != -100).sum())
    if name == "mse":
        return inputs["t"].size
    return len(next(iter(inputs.values())))


def pytorch_reference(name, module, data, dtype=np.float32):
    """Accumulation done right: each micro-batch's mean times its item count
    over the effective batch's total count."""
    if dtype == np.float64:
        module = module.double()
    opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=WD)
    for step in range(STEPS):
        window = {k: v[step * E:(step + 1) * E] for k, v in data.items()}
        total = item_count(name, window)
        opt.zero_grad()
        for k in range(K):
            micro = {n: v[k * B:(k + 1) * B] for n, v in window.items()}
            loss = module(*(torch.tensor(v.astype(dtype) if v.dtype.kind == "f" else v)
                            for v in micro.values()))
            (loss * item_count(name, micro) / total).backward()
        torch.nn.utils.clip_grad_norm_(module.parameters(), CLIP)
        opt.step()
    return {n: p.detach().numpy() for n, p in module.named_parameters()}


models = {
    "mse": lambda opset: zoo.MSEMLP(1),
    "cnn": lambda opset: zoo.CNN(2),
    "gpt": lambda opset: zoo.GPT(3, trilu=opset >= 14),
    "gpt_untied": lambda opset: zoo.GPT(4, tied=False, trilu=opset >= 14),
    "llama": lambda opset: zoo.Llama(6, trilu=opset >= 14),
    "resnet_groupnorm": lambda opset: zoo.GroupNormResNet(7),
    "mobilenet_block": lambda opset: zoo.MobileNetBlock(8),
    "unet_block": lambda opset: zoo.UNetBlock(9),
    "gru_classifier": lambda opset: zoo.RecurrentClassifier(10, "gru"),
    "lstm_classifier": lambda opset: zoo.RecurrentClassifier(11, "lstm"),
    "maxpool_indices": lambda opset: zoo.PoolIndicesNet(12),
    "packed_gru": lambda opset: zoo.PackedClassifier(13, "gru"),
    "packed_lstm": lambda opset: zoo.PackedClassifier(14, "lstm"),
}
rng = np.random.default_rng(5)
for name, make in models.items():
    for opset in (13, 17):
        tag = "%s opset %d" % (name, opset)
        module = make(opset)
        data = module.data(STEPS * E, rng)
        path = os.path.join(out, "%s%d.onnx" % (name, opset))
        zoo.export(module, data, path, opset)
        npz = os.path.join(out, "%s%d.npz" % (name, opset))
        np.savez(npz, **data)
        art = e2e.compile_model(path, os.path.join(out, "%s%d" % (name, opset)), B,
                                accumulation_steps=K, optimizer="adamw", lr=LR,
                                weight_decay=WD, clip_norm=CLIP)
        trained = os.path.join(out, "%s%d_trained.onnx" % (name, opset))
        e2e.train(art, npz, STEPS, export=trained)
        got = e2e.initializers(trained)
        want = pytorch_reference(name, make(opset), data)
        exact = None
        initial = dict(module.named_parameters())
        for pname, value in want.items():
            # Exported initializer names follow the module's parameter names.
            assert np.abs(value - initial[pname].detach().numpy()).max() > 0, pname
            mine, value = zoo.comparable(pname, got[pname]), zoo.comparable(pname, value)
            try:
                e2e.assert_close("%s %s" % (tag, pname), mine, value,
                                 rtol=1e-4, atol=1e-6)
            except AssertionError as err:
                # AdamW divides by sqrt(v): where a gradient is small, float32
                # rounding (PyTorch's and Accrue's, in different orders) moves
                # the update visibly after a few steps. Then both are held to
                # PyTorch in float64: Accrue must be as close to it as
                # PyTorch's own float32 run is.
                if exact is None:
                    exact = pytorch_reference(name, make(opset), data, np.float64)
                ref = zoo.comparable(pname, exact[pname])
                torch_error = np.abs(value - ref).max()
                accrue_error = np.abs(mine - ref).max()
                print("%s; against float64: Accrue %.3g, PyTorch float32 %.3g"
                      % (err, accrue_error, torch_error))
                assert accrue_error <= 2 * torch_error + 1e-7, pname
