"""numpy reference for losses.mlir (written from the ONNX operator spec)."""
import sys

import numpy as np

from runner_output import assert_rows

s = np.array([[1.0, 2.0, 0.5], [-1.0, 0.0, 3.0], [0.25, 0.25, 0.25], [4.0, -2.0, 1.0]])
y = np.array([2, 0, -1, 1])
w = np.array([1.0, 2.0, 0.5])
logp = s - s.max(1, keepdims=True)
logp = logp - np.log(np.exp(logp).sum(1, keepdims=True))
p = np.exp(logp)
valid = y != -1
safe = np.where(valid, y, 0)
wy = np.where(valid, w[safe], 0.0)
item = -logp[np.arange(4), safe] * wy
mean = item.sum() / wy.sum()
onehot = np.zeros_like(s)
onehot[np.arange(4), safe] = 1
grad = (p - onehot) * (wy / wy.sum())[:, None]
none = np.where(valid, -logp[np.arange(4), safe], np.nan)
assert_rows(sys.argv[1], [[mean], grad.ravel(), [wy.sum()], none])
