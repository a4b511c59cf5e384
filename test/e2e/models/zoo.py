"""Small PyTorch models the end-to-end tests export and train: an MLP with a
squared-error loss, a CNN, and a GPT. Each module's forward(*inputs) returns
the loss, so torch.onnx.export gives a graph Accrue can train; the same
module is PyTorch's reference."""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class MSEMLP(nn.Module):
    """Linear -> Sigmoid -> Linear, mean squared error written as
    ((a - b) ** 2).mean(): F.mse_loss does not export."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = nn.Linear(6, 12)
        self.fc2 = nn.Linear(12, 3)

    def forward(self, x, t):
        return ((self.fc2(torch.sigmoid(self.fc1(x))) - t) ** 2).mean()

    @staticmethod
    def data(samples, rng):
        x = rng.standard_normal((samples, 6)).astype(np.float32)
        return {"x": x, "t": (np.sin(x[:, :3]) + 0.1).astype(np.float32)}


class CNN(nn.Module):
    """Conv -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool -> Gemm
    -> cross-entropy."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv1 = nn.Conv2d(2, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
        self.fc = nn.Linear(6, 3)

    def forward(self, x, y):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.relu(self.conv2(h))
        h = F.adaptive_avg_pool2d(h, 1).flatten(1)
        return F.cross_entropy(self.fc(h), y)

    @staticmethod
    def data(samples, rng):
        return {"x": rng.standard_normal((samples, 2, 8, 8)).astype(np.float32),
                "y": rng.integers(0, 3, samples).astype(np.int64)}


class Block(nn.Module):
    """Pre-LayerNorm transformer block: causal self-attention, GELU MLP."""

    def __init__(self, d, heads, trilu):
        super().__init__()
        self.heads, self.trilu = heads, trilu
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = nn.Linear(d, 4 * d)
        self.fc2 = nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.size()
        h = self.heads
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, t, h, d // h).transpose(1, 2)
        k = k.view(b, t, h, d // h).transpose(1, 2)
        v = v.view(b, t, h, d // h).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(d // h))
        if self.trilu:  # Trilu needs opset 14
            future = torch.tril(torch.ones(t, t, device=x.device)) == 0
        else:
            pos = torch.arange(t, device=x.device)
            future = pos[None, :] > pos[:, None]
        att = att.masked_fill(future, float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, d)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, blocks, a final LayerNorm, an output
    head tied to the token embedding (or not), cross-entropy that ignores
    padding (-100)."""

    def __init__(self, seed, vocab=17, d=16, heads=2, layers=2, block=8,
                 tied=True, dropout=0.0, trilu=True, loss="mean"):
        super().__init__()
        torch.manual_seed(seed)
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, trilu) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.tied = tied
        if not tied:
            self.head = nn.Linear(d, vocab, bias=False)
        self.vocab, self.block = vocab, block
        # "mean": cross_entropy's mean over non-ignored tokens; "masked": the
        # same written by hand, per-token losses times a mask divided by the
        # mask's sum (clamped to 1), as training scripts often do.
        self.loss = loss

    def forward(self, idx, targets):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.drop(self.wte(idx) + self.wpe(pos))
        for blk in self.blocks:
            x = blk(x)
        x = self.ln(x)
        w = self.wte.weight if self.tied else self.head.weight
        logits = x @ w.t()
        flat = targets.view(-1)
        if self.loss == "masked":
            per_token = F.cross_entropy(logits.view(-1, self.vocab), flat,
                                        ignore_index=-100, reduction="none")
            mask = flat != -100
            return (per_token * mask).sum() / mask.sum().clamp(min=1)
        return F.cross_entropy(logits.view(-1, self.vocab), flat, ignore_index=-100)

    def data(self, samples, rng):
        idx = rng.integers(0, self.vocab, (samples, self.block)).astype(np.int64)
        targets = np.roll(idx, -1, axis=1)
        # Padded sequences: a random tail of each is ignored.
        for i in range(samples):
            targets[i, rng.integers(self.block // 2, self.block + 1):] = -100
        return {"idx": idx, "targets": targets}


def export(module, inputs, path, opset):
    """Exports `module` in training mode with a dynamic batch axis."""
    example = tuple(torch.tensor(v[:2]) for v in inputs.values())
    names = list(inputs)
    torch.onnx.export(module, example, path, input_names=names,
                      output_names=["loss"],
                      dynamic_axes={n: {0: "batch"} for n in names},
                      opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def comparable(name, value):
    """The part of parameter `name` whose update is determined by its exact
    gradient. The key bias of attention shifts every score of a query equally
    and softmax ignores shifts, so its exact gradient is zero; Adam-style
    optimizers turn each side's rounding noise into +-lr steps there."""
    if name.endswith("qkv.bias"):
        d = value.shape[0] // 3
        return value[np.r_[0:d, 2 * d:3 * d]]
    return value
