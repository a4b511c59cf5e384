"""Convolutions and max pooling through the CPU pipeline (im2col contractions, their
register-blocked kernels and col2im) against numpy in float64: the forward,
the input gradient and the weight gradient of 2-D and 1-D (height 1)
convolutions with stride, asymmetric padding, dilation, groups (including
depthwise), 1x1 kernels that use the input as its own columns, and output
sizes the vector kernels do not tile; max pooling's forward and adjoint
(the first maximum of each window among the input's elements gets the
window's adjoint) with and without overlap, padding and dilation. Writes the MLIR test program
(`gen OUT.mlir`) or checks mlir-runner's output (`check OUT.txt`)."""
import sys

import numpy as np

from runner_output import assert_rows

rng = np.random.default_rng(11)


def rand(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# (name, input shape, filters, kernel, strides, pads (top, left, bottom,
# right), dilations, groups, bias)
CONFIGS = [
    ("same3x3", (2, 3, 8, 8), 16, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
    ("strided", (2, 4, 9, 8), 6, (3, 2), (2, 2), (1, 0, 2, 1), (2, 1), 2, True),
    ("depthwise", (2, 8, 8, 8), 8, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 8, False),
    ("pointwise", (3, 8, 4, 4), 16, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1, True),
    ("conv1d", (2, 4, 1, 17), 8, (1, 3), (1, 2), (0, 1, 0, 1), (1, 1), 1, False),
    ("odd5x5", (1, 5, 5, 5), 7, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1, True),
]


def out_size(size, k, s, lo, hi, d):
    return (size + lo + hi - d * (k - 1) - 1) // s + 1


def shapes(cfg):
    _, (n, c, h, w), f, (kh, kw), (sh, sw), p, (dh, dw), g, _ = cfg
    oh = out_size(h, kh, sh, p[0], p[2], dh)
    ow = out_size(w, kw, sw, p[1], p[3], dw)
    return (n, c, h, w), (f, c // g, kh, kw), (n, f, oh, ow)


def windows(cfg, x):
    """x padded, and for each kernel position (i, j) the [N, C, OH, OW]
    window of it that position reads."""
    _, _, _, (kh, kw), (sh, sw), p, (dh, dw), _, _ = cfg
    _, _, (n, f, oh, ow) = shapes(cfg)
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    for i in range(kh):
        for j in range(kw):
            yield i, j, (slice(None), slice(None),
                         slice(i * dh, i * dh + (oh - 1) * sh + 1, sh),
                         slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)), xp


def reference(cfg, x, w, b, dy):
    """Forward, input gradient, weight gradient in float64."""
    name, _, f, _, _, p, _, g, _ = cfg
    x, w, dy = x.astype(np.float64), w.astype(np.float64), dy.astype(np.float64)
    (n, c, h, wd), _, (_, _, oh, ow) = shapes(cfg)
    cg, fg = c // g, f // g
    y = np.zeros((n, f, oh, ow))
    dxp = None
    dw = np.zeros_like(w)
    for i, j, win, xp in windows(cfg, x):
        if dxp is None:
            dxp = np.zeros_like(xp)
        cols = xp[win]  # [N, C, OH, OW]
        for gi in range(g):
            fs, cs = slice(gi * fg, (gi + 1) * fg), slice(gi * cg, (gi + 1) * cg)
            y[:, fs] += np.einsum("fc,nchw->nfhw", w[fs, :, i, j], cols[:, cs])
            dw[fs, :, i, j] += np.einsum("nfhw,nchw->fc", dy[:, fs], cols[:, cs])
            dxp[win][:, cs] += 0  # (views of views do not write back)
            grad = np.einsum("fc,nfhw->nchw", w[fs, :, i, j], dy[:, fs])
            sub = dxp[:, cs]
            sub[win] += grad
            dxp[:, cs] = sub
    if b is not None:
        y += b.astype(np.float64)[None, :, None, None]
    dx = dxp[:, :, p[0]:p[0] + h, p[1]:p[1] + wd]
    return y, dx, dw


def ty(shape):
    return "tensor<%sxf32>" % "x".join(map(str, shape))


def dense(array):
    return np.array2string(array, separator=", ", threshold=sys.maxsize,
                           floatmode="unique", max_line_width=sys.maxsize).replace("\n", "")


# Max pooling: (name, input shape, kernel, strides, pads, dilations).
POOLS = [
    ("pool2x2", (2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1)),
    ("pool3x3", (2, 3, 9, 7), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("pooldil", (1, 2, 7, 9), (2, 3), (1, 2), (0, 1, 1, 0), (2, 1)),
]


def pool_reference(cfg, x, dy):
    """Forward and input adjoint of max pooling in float64."""
    _, (n, c, h, w), (kh, kw), s, p, d = cfg
    oh, ow = dy.shape[2:]
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])),
                constant_values=-np.inf)
    y = np.full(dy.shape, -np.inf)
    dxp = np.zeros_like(xp)
    for a in range(n):
        for b in range(c):
            for i in range(oh):
                for j in range(ow):
                    best, at = -np.inf, None
                    for u in range(kh):
                        for v in range(kw):
                            r, q = i * s[0] + u * d[0], j * s[1] + v * d[1]
                            real = p[0] <= r < p[0] + h and p[1] <= q < p[1] + w
                            if real and (at is None or xp[a, b, r, q] > best):
                                best, at = xp[a, b, r, q], (r, q)
                    y[a, b, i, j] = best
                    dxp[a, b, at[0], at[1]] += dy[a, b, i, j]
    return y, dxp[:, :, p[0]:p[0] + h, p[1]:p[1] + w]


def pool_out(cfg):
    _, (n, c, h, w), k, s, p, d = cfg
    return (n, c, out_size(h, k[0], s[0], p[0], p[2], d[0]),
            out_size(w, k[1], s[1], p[1], p[3], d[1]))


POOL_DATA = [(rand(*cfg[1]), rand(*pool_out(cfg))) for cfg in POOLS]

DATA = []
for cfg in CONFIGS:
    xs, ws, ys = shapes(cfg)
    DATA.append((rand(*xs), rand(*ws), rand(ws[0]) if cfg[-1] else None, rand(*ys)))


def gen(path):
    lines = ["func.func private @printMemrefF32(memref<*xf32>)", "", "func.func @main() {"]

    def show(value, shape):
        t, m = ty(shape), ty(shape).replace("tensor", "memref")
        lines.extend([
            "  %%%s_m = bufferization.to_buffer %%%s : %s to %s" % (value, value, t, m),
            "  %%%s_u = memref.cast %%%s_m : %s to memref<*xf32>" % (value, value, m),
            "  func.call @printMemrefF32(%%%s_u) : (memref<*xf32>) -> ()" % value])

    for cfg, (x, w, b, dy) in zip(CONFIGS, DATA):
        name, _, _, _, s, p, d, g, _ = cfg
        xs, ws, ys = shapes(cfg)
        for tag, array in [("x", x), ("w", w), ("b", b), ("dy", dy)]:
            if array is not None:
                lines.append("  %%%s_%s = arith.constant dense<%s> : %s"
                             % (name, tag, dense(array), ty(array.shape)))
        attrs = ("{strides = array<i64: %d, %d>, pads = array<i64: %d, %d, %d, %d>, "
                 "dilations = array<i64: %d, %d>, group = %d : i64}" % (s + p + d + (g,)))
        operands = "%%%s_x, %%%s_w" % (name, name)
        types = [ty(xs), ty(ws)]
        if b is not None:
            operands += ", %%%s_b" % name
            types.append(ty(b.shape))
        lines.append("  %%%s_y = nn.conv %s %s : (%s) -> %s"
                     % (name, operands, attrs, ", ".join(types), ty(ys)))
        lines.append("  %%%s_dx = nn.conv_grad_input %%%s_dy, %%%s_w %s : (%s, %s) -> %s"
                     % (name, name, name, attrs, ty(ys), ty(ws), ty(xs)))
        lines.append("  %%%s_dw = nn.conv_grad_weight %%%s_x, %%%s_dy %s : (%s, %s) -> %s"
                     % (name, name, name, attrs, ty(xs), ty(ys), ty(ws)))
        show(name + "_y", ys)
        show(name + "_dx", xs)
        show(name + "_dw", ws)
    for cfg, (x, dy) in zip(POOLS, POOL_DATA):
        name, xs, k, s, p, d = cfg
        ys = pool_out(cfg)
        lines.append("  %%%s_x = arith.constant dense<%s> : %s" % (name, dense(x), ty(xs)))
        lines.append("  %%%s_dy = arith.constant dense<%s> : %s" % (name, dense(dy), ty(ys)))
        attrs = ("{kernel = array<i64: %d, %d>, strides = array<i64: %d, %d>, "
                 "pads = array<i64: %d, %d, %d, %d>, dilations = array<i64: %d, %d>}"
                 % (k + s + p + d))
        lines.append("  %%%s_y = nn.max_pool %%%s_x %s : (%s) -> %s"
                     % (name, name, attrs, ty(xs), ty(ys)))
        lines.append("  %%%s_dx = nn.max_pool_grad %%%s_x, %%%s_dy %s : (%s, %s) -> %s"
                     % (name, name, name, attrs, ty(xs), ty(ys), ty(xs)))
        show(name + "_y", ys)
        show(name + "_dx", xs)
    lines += ["  return", "}"]
    open(path, "w").write("\n".join(lines) + "\n")


if sys.argv[1] == "gen":
    gen(sys.argv[2])
else:
    expected = []
    for cfg, (x, w, b, dy) in zip(CONFIGS, DATA):
        expected.extend(r.ravel() for r in reference(cfg, x, w, b, dy))
    for cfg, (x, dy) in zip(POOLS, POOL_DATA):
        expected.extend(r.ravel() for r in pool_reference(cfg, x, dy))
    assert_rows(sys.argv[2], expected, rtol=1e-5, atol=1e-5)
