"""The MLP the end-to-end tests train, as a PyTorch module.

The same module is exported to ONNX (what Accrue compiles) and trained by
PyTorch itself (the reference). Run as a script to write model and data:

    mlp.py OUT_DIR [--opset 13] [--samples 160] [--seed 0]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F

IN, HIDDEN, CLASSES = 8, 16, 4
IGNORE = -100  # F.cross_entropy's default ignore_index, exported with the loss


class MLP(torch.nn.Module):
    """Linear -> Tanh -> Linear -> ReLU -> Linear, cross-entropy loss."""

    def __init__(self, seed=0):
        super().__init__()
        torch.manual_seed(seed)
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, HIDDEN)
        self.fc3 = torch.nn.Linear(HIDDEN, CLASSES)

    def logits(self, x):
        return self.fc3(F.relu(self.fc2(torch.tanh(self.fc1(x)))))

    def forward(self, x, y):
        return F.cross_entropy(self.logits(x), y)


def dataset(samples, seed=1, ignored=0.0):
    """Inputs with some structure so that training makes progress. With
    `ignored` > 0, that fraction of the labels (at random places) is IGNORE,
    so micro-batches hold unequal numbers of counted samples: only an exact
    normalization (by the window's count) then matches PyTorch's mean."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((samples, IN)).astype(np.float32)
    w = rng.standard_normal((IN, CLASSES)).astype(np.float32)
    y = np.argmax(x @ w + 0.5 * rng.standard_normal((samples, CLASSES)), axis=1)
    if ignored:
        y[rng.random(samples) < ignored] = IGNORE
    return x, y.astype(np.int64)


def counted(y):
    """How many labels of `y` the loss counts."""
    return int((np.asarray(y) != IGNORE).sum())


def assert_unequal_counts(y, micro_batch, window):
    """Checks that some window's micro-batches count different numbers of
    labels and that no window is empty, so a test using `y` tells an exact
    normalization from a mean of micro-batch means."""
    unequal = False
    for w in range(0, len(y), window):
        counts = [counted(y[i:i + micro_batch]) for i in range(w, min(w + window, len(y)),
                                                              micro_batch)]
        assert sum(counts) > 0, "window at %d counts no label" % w
        unequal |= len(set(counts)) > 1
    assert unequal, "every micro-batch counts the same number of labels"


def export(module, path, opset=13):
    """Exports `module` with its loss, dynamic batch, training mode."""
    x = torch.zeros(2, IN)
    y = torch.zeros(2, dtype=torch.int64)
    torch.onnx.export(module, (x, y), path, input_names=["x", "y"],
                      output_names=["loss"],
                      dynamic_axes={"x": {0: "N"}, "y": {0: "N"}},
                      opset_version=opset,
                      training=torch.onnx.TrainingMode.TRAINING,
                      do_constant_folding=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--opset", type=int, default=13)
    ap.add_argument("--samples", type=int, default=160)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    export(MLP(args.seed), os.path.join(args.out, "mlp.onnx"), args.opset)
    x, y = dataset(args.samples)
    np.savez(os.path.join(args.out, "data.npz"), x=x, y=y)


if __name__ == "__main__":
    main()
