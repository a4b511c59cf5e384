"""Small PyTorch models the end-to-end tests export and train: an MLP with a
squared-error loss, a CNN, and a GPT. Each module's forward(*inputs) returns
the loss, so torch.onnx.export gives a graph Accrue can train; the same
module is PyTorch's reference."""
import math
import os

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


class RMSNorm(nn.Module):
    """RMSNorm as LLaMA-style models write it (PyTorch 1.13 has no module
    for it): x / sqrt(mean(x^2) + eps) times a learned scale."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(d))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def norm_layer(kind, d):
    return RMSNorm(d) if kind == "rms" else nn.LayerNorm(d)


class Block(nn.Module):
    """Pre-norm transformer block (LayerNorm, or RMSNorm with norm="rms"):
    causal self-attention, GELU MLP."""

    def __init__(self, d, heads, trilu, norm="layer"):
        super().__init__()
        self.heads, self.trilu = heads, trilu
        self.ln1 = norm_layer(norm, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = norm_layer(norm, d)
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
                 tied=True, dropout=0.0, trilu=True, loss="mean", norm="layer"):
        super().__init__()
        torch.manual_seed(seed)
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(block, d)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList(Block(d, heads, trilu, norm) for _ in range(layers))
        self.ln = norm_layer(norm, d)
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


def export_with_data(module, samples, rng, out, name, opset=17):
    """Exports `module` to OUT/NAME.onnx and `samples` of its data (drawn
    from `rng`) to OUT/NAME.npz; returns both paths."""
    data = module.data(samples, rng)
    path = os.path.join(out, name + ".onnx")
    export(module, data, path, opset)
    npz = os.path.join(out, name + ".npz")
    np.savez(npz, **data)
    return path, npz


def comparable(name, value):
    """The part of parameter `name` whose update is determined by its exact
    gradient. The key bias of attention shifts every score of a query equally
    and softmax ignores shifts, so its exact gradient is zero; Adam-style
    optimizers turn each side's rounding noise into +-lr steps there."""
    if name.endswith("qkv.bias"):
        d = value.shape[0] // 3
        return value[np.r_[0:d, 2 * d:3 * d]]
    return value


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, as LLaMA writes it."""

    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.size(-1) // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaBlock(nn.Module):
    """Pre-RMSNorm decoder block: causal attention with rotary position
    embeddings (computed in the graph: Exp, Sin, Cos, Slice, Concat), no
    biases, a SwiGLU MLP."""

    def __init__(self, d, heads, hidden, trilu):
        super().__init__()
        self.heads, self.trilu = heads, trilu
        self.attn_norm = RMSNorm(d)
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, d, bias=False)
        self.v = nn.Linear(d, d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.mlp_norm = RMSNorm(d)
        self.gate = nn.Linear(d, hidden, bias=False)
        self.up = nn.Linear(d, hidden, bias=False)
        self.down = nn.Linear(hidden, d, bias=False)

    def forward(self, x):
        b, t, d = x.size()
        h, dh = self.heads, d // self.heads
        # Rotary angles: position times 10000^(-2i/dh), as an Exp so that no
        # buffer (which would export as a trainable initializer) is needed.
        inv_freq = torch.exp(torch.arange(0, dh, 2, dtype=torch.float32)
                             * (-math.log(10000.0) / dh))
        pos = torch.arange(t, dtype=torch.float32)
        angles = pos[:, None] * inv_freq[None, :]
        emb = torch.cat((angles, angles), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        y = self.attn_norm(x)
        q = self.q(y).view(b, t, h, dh).transpose(1, 2)
        k = self.k(y).view(b, t, h, dh).transpose(1, 2)
        v = self.v(y).view(b, t, h, dh).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        att = (q @ k.transpose(-2, -1)) / math.sqrt(dh)
        if self.trilu:
            future = torch.tril(torch.ones(t, t)) == 0
        else:
            p = torch.arange(t)
            future = p[None, :] > p[:, None]
        att = F.softmax(att.masked_fill(future, float("-inf")), dim=-1)
        x = x + self.o((att @ v).transpose(1, 2).contiguous().view(b, t, d))
        y = self.mlp_norm(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y))


class Llama(nn.Module):
    """A LLaMA-style decoder: token embeddings, LlamaBlocks, a final RMSNorm,
    the head tied to the embedding, cross-entropy ignoring padding."""

    def __init__(self, seed, vocab=19, d=16, heads=2, hidden=24, layers=2, block=8,
                 trilu=True):
        super().__init__()
        torch.manual_seed(seed)
        self.wte = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, hidden, trilu) for _ in range(layers))
        self.norm = RMSNorm(d)
        self.vocab, self.block = vocab, block

    def forward(self, idx, targets):
        x = self.wte(idx)
        for blk in self.blocks:
            x = blk(x)
        logits = self.norm(x) @ self.wte.weight.t()
        return F.cross_entropy(logits.view(-1, self.vocab), targets.view(-1),
                               ignore_index=-100)

    data = GPT.data


class GroupNormResNet(nn.Module):
    """A ResNet-style CNN: a stem, an identity residual block and a strided
    one with a 1x1 projection, each convolution followed by GroupNorm, SiLU
    activations, global average pooling, a linear classifier."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.gn0 = nn.GroupNorm(4, 8)
        self.c1, self.g1 = nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(4, 8)
        self.c2, self.g2 = nn.Conv2d(8, 8, 3, padding=1), nn.GroupNorm(4, 8)
        self.c3, self.g3 = nn.Conv2d(8, 12, 3, stride=2, padding=1), nn.GroupNorm(3, 12)
        self.c4, self.g4 = nn.Conv2d(12, 12, 3, padding=1), nn.GroupNorm(3, 12)
        self.proj, self.gp = nn.Conv2d(8, 12, 1, stride=2), nn.GroupNorm(3, 12)
        self.fc = nn.Linear(12, 5)

    def forward(self, x, y):
        h = F.silu(self.gn0(self.stem(x)))
        h = F.silu(h + self.g2(self.c2(F.silu(self.g1(self.c1(h))))))
        h = F.silu(self.gp(self.proj(h)) + self.g4(self.c4(F.silu(self.g3(self.c3(h))))))
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1)), y)

    @staticmethod
    def data(samples, rng):
        return {"x": rng.standard_normal((samples, 3, 8, 8)).astype(np.float32),
                "y": rng.integers(0, 5, samples).astype(np.int64)}


class BatchNormCNN(nn.Module):
    """A convolution and a linear layer, each followed by training-mode
    BatchNorm (momenta 0.1 and 0.3; no biases before them, ResNet's layout:
    BatchNorm subtracts the mean, so their exact gradient would be zero),
    ReLU, a linear classifier. The running statistics start away from
    (0, 1)."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = nn.Conv2d(3, 4, 3, padding=1, bias=False)
        self.bn2d = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 6, bias=False)
        self.bn1d = nn.BatchNorm1d(6, momentum=0.3)
        self.head = nn.Linear(6, 3)
        with torch.no_grad():
            self.bn2d.running_mean.uniform_(-0.5, 0.5)
            self.bn2d.running_var.uniform_(0.5, 2.0)
            self.bn1d.weight.uniform_(0.5, 1.5)

    def forward(self, x, y):
        h = F.relu(self.bn2d(self.conv(x)))
        h = F.relu(self.bn1d(self.fc(h.mean(dim=(2, 3)))))
        return F.cross_entropy(self.head(h), y)

    @staticmethod
    def data(samples, rng):
        return {"x": (rng.standard_normal((samples, 3, 5, 5)) * 2 + 1).astype(np.float32),
                "y": rng.integers(0, 3, samples).astype(np.int64)}


class PoolIndicesNet(nn.Module):
    """A convolution and 2x2 max pooling with return_indices=True, whose
    indices (positions in each plane) weight the pooled values in the loss
    next to a classifier's cross-entropy: PyTorch exports MaxPool's Indices
    output minus those of a 1x1 MaxPool (each plane's first index)."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.conv = nn.Conv2d(2, 3, 3, padding=1)
        self.fc = nn.Linear(27, 4)

    def forward(self, x, y):
        h, idx = F.max_pool2d(self.conv(x), 2, return_indices=True)
        position = (h * idx.float() * 0.01).mean()
        return F.cross_entropy(self.fc(h.flatten(1)), y) + position

    @staticmethod
    def data(samples, rng):
        return {"x": rng.standard_normal((samples, 2, 6, 6)).astype(np.float32),
                "y": rng.integers(0, 4, samples).astype(np.int64)}


class MobileNetBlock(nn.Module):
    """An inverted residual block as in MobileNetV3: 1x1 expansion, a 3x3
    depthwise convolution, HardSwish, squeeze-and-excitation (average pool,
    two 1x1 layers, HardSigmoid gate), a 1x1 projection and the skip."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.expand = nn.Conv2d(8, 16, 1)
        self.depthwise = nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.se1 = nn.Conv2d(16, 4, 1)
        self.se2 = nn.Conv2d(4, 16, 1)
        self.project = nn.Conv2d(16, 8, 1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = F.hardswish(self.stem(x))
        e = F.hardswish(self.depthwise(F.hardswish(self.expand(h))))
        s = F.hardsigmoid(self.se2(F.relu(self.se1(F.adaptive_avg_pool2d(e, 1)))))
        h = h + self.project(e * s)
        return F.cross_entropy(self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1)), y)

    data = staticmethod(GroupNormResNet.data)


class UNetBlock(nn.Module):
    """One UNet level: an encoder convolution, max pooling, a second
    convolution, a grouped transposed convolution back up, the skip
    concatenated, nearest and bilinear upsampling on a side path, and a
    per-pixel cross-entropy."""

    def __init__(self, seed):
        super().__init__()
        torch.manual_seed(seed)
        self.enc1 = nn.Conv2d(3, 8, 3, padding=1)
        self.enc2 = nn.Conv2d(8, 16, 3, padding=1)
        self.up = nn.ConvTranspose2d(16, 8, 2, stride=2, groups=2)
        self.dec = nn.Conv2d(16, 8, 3, padding=1)
        self.side = nn.Conv2d(16, 8, 1)
        self.head = nn.Conv2d(8, 3, 1)

    def forward(self, x, y):
        e1 = F.relu(self.enc1(x))
        e2 = F.relu(self.enc2(F.max_pool2d(e1, 2)))
        d = F.relu(self.dec(torch.cat((self.up(e2), e1), dim=1)))
        side = F.interpolate(self.side(e2), scale_factor=2, mode="nearest")
        side = side + F.interpolate(self.side(e2), scale_factor=2, mode="bilinear",
                                    align_corners=False)
        return F.cross_entropy(self.head(d + side), y)

    @staticmethod
    def data(samples, rng):
        return {"x": rng.standard_normal((samples, 3, 8, 8)).astype(np.float32),
                "y": rng.integers(0, 3, (samples, 8, 8)).astype(np.int64)}


class RecurrentClassifier(nn.Module):
    """Token embeddings, a batch-first GRU (2 layers) or bidirectional LSTM,
    the outputs averaged over each sequence's valid steps (variable lengths
    through a mask), a linear classifier."""

    def __init__(self, seed, kind):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(11, 6)
        if kind == "gru":
            self.rnn = nn.GRU(6, 8, num_layers=2, batch_first=True)
            width = 8
        else:
            self.rnn = nn.LSTM(6, 8, batch_first=True, bidirectional=True)
            width = 16
        self.fc = nn.Linear(width, 3)

    def forward(self, idx, mask, y):
        out, _ = self.rnn(self.emb(idx))
        m = mask.unsqueeze(-1)
        pooled = (out * m).sum(1) / m.sum(1).clamp(min=1)
        return F.cross_entropy(self.fc(pooled), y)

    @staticmethod
    def data(samples, rng):
        lengths = rng.integers(2, 8, samples)
        mask = (np.arange(7)[None, :] < lengths[:, None]).astype(np.float32)
        return {"idx": rng.integers(0, 11, (samples, 7)).astype(np.int64), "mask": mask,
                "y": rng.integers(0, 3, samples).astype(np.int64)}


class PackedClassifier(nn.Module):
    """PyTorch's packed sequences: token embeddings through
    pack_padded_sequence (unsorted lengths) into a bidirectional GRU or a
    2-layer LSTM; the final hidden states feed a linear classifier, and the
    padded outputs (zeros past each length) are averaged in too. The export
    sorts the batch by length (TopK), gives the recurrent nodes
    sequence_lens, and undoes the sort (ScatterElements, Gather)."""

    def __init__(self, seed, kind):
        super().__init__()
        torch.manual_seed(seed)
        self.emb = nn.Embedding(11, 6)
        if kind == "gru":
            self.rnn = nn.GRU(6, 8, batch_first=True, bidirectional=True)
            self.width = 16
        else:
            self.rnn = nn.LSTM(6, 8, num_layers=2, batch_first=True)
            self.width = 8
        self.fc = nn.Linear(self.width, 3)

    def forward(self, idx, lengths, y):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(idx), lengths, batch_first=True,
                                                   enforce_sorted=False)
        out, h = self.rnn(packed)
        if isinstance(h, tuple):
            h = h[0]
        padded, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True,
                                                     total_length=idx.shape[1])
        final = torch.cat([h[-2], h[-1]], 1) if self.width == 16 else h[-1]
        return F.cross_entropy(self.fc(final + padded.mean(1)), y)

    @staticmethod
    def data(samples, rng):
        return {"idx": rng.integers(0, 11, (samples, 7)).astype(np.int64),
                "lengths": rng.integers(1, 8, samples).astype(np.int64),
                "y": rng.integers(0, 3, samples).astype(np.int64)}


class CombinedLoss(nn.Module):
    """Per-token logits and a per-sequence regression from pooled states,
    trained on a loss that combines means with different counts: "aux" is
    cross-entropy over the non-padded tokens plus half a sequence-level
    squared error; "smoothing" is label smoothing written by hand over the
    non-padded tokens (the targets' log-probabilities via torch.gather)."""

    VOCAB, T, D = 7, 6, 5

    def __init__(self, kind):
        super().__init__()
        torch.manual_seed(3)
        self.kind = kind
        self.emb = nn.Embedding(self.VOCAB, self.D)
        self.proj = nn.Linear(self.D, self.D)
        self.head = nn.Linear(self.D, self.VOCAB)
        self.reg = nn.Linear(self.D, 1)

    def forward(self, idx, targets, value):
        h = torch.tanh(self.proj(self.emb(idx)))
        logits = self.head(h).view(-1, self.VOCAB)
        flat = targets.view(-1)
        if self.kind == "aux":
            ce = F.cross_entropy(logits, flat, ignore_index=-100)
            aux = ((self.reg(h.mean(1)).squeeze(1) - value) ** 2).mean()
            return ce + 0.5 * aux
        mask = (flat != -100).float()
        logp = F.log_softmax(logits, dim=-1)
        nll = -logp.gather(1, flat.clamp(min=0).unsqueeze(1)).squeeze(1)
        smooth = -logp.mean(-1)
        count = mask.sum().clamp(min=1)
        return 0.9 * (nll * mask).sum() / count + 0.1 * (smooth * mask).sum() / count

    @classmethod
    def data(cls, rng, samples):
        idx = rng.integers(0, cls.VOCAB, (samples, cls.T)).astype(np.int64)
        targets = np.roll(idx, -1, axis=1)
        # Very uneven padding: some sequences keep one token, others all.
        for i in range(samples):
            targets[i, rng.integers(1, cls.T + 1):] = -100
        value = rng.standard_normal(samples).astype(np.float32)
        return {"idx": idx, "targets": targets, "value": value}
