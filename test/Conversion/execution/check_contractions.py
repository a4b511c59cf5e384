"""numpy reference for contractions.mlir."""
import sys

import numpy as np

from runner_output import assert_rows

a = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
b = np.array([[1.0, -1.0, 0.5], [2.0, 0.0, -0.5]])
c = np.array([0.5, -0.5])
g = 0.5 * (a.T @ b.T) + 2.0 * c
x = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]], [[2.0, 1.0], [1.0, 2.0], [0.5, -1.0]]])
m = np.matmul(x, b)
centered = m - m.mean(axis=1, keepdims=True)
var = (centered ** 2).sum(axis=(0, 2))
act = 1 / (1 + np.exp(-var ** 3))
f = np.transpose(m, (2, 0, 1)).reshape(6, 3)
assert_rows(sys.argv[1], [g.ravel(), var, act, f.ravel()])
