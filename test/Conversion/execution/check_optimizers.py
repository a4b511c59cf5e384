"""numpy transcriptions of torch.optim's SGD, Adam and AdamW (SEMANTICS.md)."""
import sys

import numpy as np

from runner_output import assert_rows

p0 = np.array([1.0, -2.0, 0.5, 3.0])
g = np.array([0.1, -0.3, 0.0, 2.0])
lr = 0.1


def adam(p, steps, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, decoupled=False):
    m = np.zeros_like(p)
    v = np.zeros_like(p)
    for t in range(1, steps + 1):
        grad = g.copy()
        if decoupled:
            p = p * (1 - lr * wd)
        else:
            grad = grad + wd * p
        m = b1 * m + (1 - b1) * grad
        v = b2 * v + (1 - b2) * grad * grad
        mhat = m / (1 - b1 ** t)
        vhat = v / (1 - b2 ** t)
        p = p - lr * mhat / (np.sqrt(vhat) + eps)
    return p


def sgd(p, steps, mu, dampening=0.0, nesterov=False, wd=0.0):
    buf = None
    for _ in range(steps):
        d = g + wd * p
        buf = d.copy() if buf is None else mu * buf + (1 - dampening) * d
        d = d + mu * buf if nesterov else buf
        p = p - lr * d
    return p, buf


s_nesterov, _ = sgd(p0, 2, 0.9, nesterov=True, wd=0.01)
s_damp, buf_damp = sgd(p0, 2, 0.5, dampening=0.25)
assert_rows(sys.argv[1], [adam(p0, 3, wd=0.1, decoupled=True),
                          adam(p0, 2, b1=0.5, wd=0.1),
                          s_nesterov, s_damp, buf_damp])
