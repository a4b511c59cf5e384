"""Contractions in every layout vectorize-contractions handles (and one it
leaves to scalar loops), with extents that need its smaller tiles: writes
the MLIR test program (`gen OUT.mlir`) or checks mlir-runner's output
against numpy in float64 (`check OUT.txt`)."""
import sys

import numpy as np

from runner_output import assert_rows

rng = np.random.default_rng(7)


def rand(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


# (name, nn op text, operands, numpy result)
a, b = rand(10, 24), rand(24, 48)
at, bt = rand(24, 10), rand(48, 24)
x, w = rand(3, 16, 32), rand(32, 64)
p, q = rand(8, 32), rand(12, 32)
r, s12 = rand(8, 12), rand(6, 12)
dy, xw = rand(256, 1056), rand(256, 32)
t3 = rand(3, 20, 18)
u = rand(4, 8, 16, 2, 16, 2)
# (Drawn last: the arrays above keep the values their tolerances were
# checked with.)
g = rand(72, 32)
h, wide = rand(20, 32), rand(32, 256)
xs, ds = rand(64, 16), rand(64, 70)
pin, pdy = rand(4, 8, 32, 32), rand(4, 8, 16, 16)
cin, cdy = rand(8, 3, 16, 16), rand(8, 5, 16, 16)
dl, wh = rand(80, 512), rand(512, 48)
xa, dya, ca = rand(32, 96), rand(32, 64), rand(96, 64)


def max_pool_grad(x, dy):
    """The adjoint of a 2x2, stride 2 max pooling of `x` (no ties)."""
    n, c, h, w = x.shape
    windows = x.reshape(n, c, h // 2, 2, w // 2, 2)
    peak = windows.max(axis=(3, 5), keepdims=True)
    spread = dy.astype(np.float64)[:, :, :, None, :, None]
    return np.where(windows == peak, spread, 0.0).reshape(x.shape)


def conv_grad_weight(x, dy):
    """The adjoint of a 3x3 convolution of `x` (stride 1, pads 1) w.r.t.
    its weight, in float64."""
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, w = x.shape[2:]
    return np.stack([np.stack([
        np.einsum("sohw,sihw->oi", dy, padded[:, :, i:i + h, j:j + w])
        for j in range(3)], axis=-1) for i in range(3)], axis=-2)
CASES = [
    # B and C contiguous along n: outer products (10 rows: blocks of 2).
    ("gemm", "nn.gemm %a, %b", [a, b], a.astype(np.float64) @ b),
    ("gemm_ta", "nn.gemm %at, %b {transA = true}", [at, b], at.T.astype(np.float64) @ b),
    # A and B contiguous along k: dot products over 8 consecutive k.
    ("gemm_tb", "nn.gemm %a, %bt {transB = true}", [a, bt], a.astype(np.float64) @ bt.T),
    ("gemm_tb16", "nn.gemm %p, %q {transB = true}", [p, q], p.astype(np.float64) @ q.T),
    # Neither (A contiguous along m, B along k): scalar loops.
    ("gemm_tatb", "nn.gemm %at, %bt {transA = true, transB = true}", [at, bt],
     at.T.astype(np.float64) @ bt.T),
    # 72 rows: with 16 registers, each block of k packs B's rows (not A's,
    # which is contiguous along k).
    ("gemm_tall", "nn.gemm %g, %w", [g, w], g.astype(np.float64) @ w),
    # 20 rows over 16 blocks of n, in parallel: with 16 registers, 3 blocks
    # of 6 rows and a tail of 2 in each block of n.
    ("gemm_wide", "nn.gemm %h, %wide", [h, wide], h.astype(np.float64) @ wide),
    # A's batch of 3 x 16 rows, merged into one m of 48 rows
    # (merge-contraction-dims): blocks of 8 x 32.
    ("batched", "nn.matmul %x, %w", [x, w], np.matmul(x.astype(np.float64), w)),
    # Dot products over k = 12: 4-wide vectors at 256 or 128 bits, and no
    # k block size divides 12 (scalar loops at 512 bits).
    ("gemm_tb12", "nn.gemm %r, %s12 {transB = true}", [r, s12], r.astype(np.float64) @ s12.T),
    # A weight gradient transposed after the product, as Linear's VJP does
    # it: fold-into-contractions makes C = (B^T A)^T one contraction whose C is
    # contiguous along A's dimension, so A and B trade roles.
    ("wgrad", "nn.gemm %b, %at {transA = true}", [b, at], (b.T.astype(np.float64) @ at).T,
     [1, 0]),
    # The same with a panel of A (256 k x 1056 m) too large for the cache:
    # the blocks of m are the outer loop.
    ("wgrad_large", "nn.gemm %xw, %dy {transA = true}", [xw, dy],
     (xw.T.astype(np.float64) @ dy).T, [1, 0]),
    # 70 rows with 16 registers: A packed for the 11 blocks of 6 rows, read
    # in place by the tail of 4.
    ("wgrad_tail", "nn.gemm %xs, %ds {transA = true}", [xs, ds],
     (xs.T.astype(np.float64) @ ds).T, [1, 0]),
    # Transposes in blocks of 16 x 16 (tile-transposes), with smaller
    # blocks at the edges.
    ("transpose2d", "nn.transpose %b {perm = array<i64: 1, 0>}", [b], b.T.astype(np.float64)),
    ("transpose3d", "nn.transpose %t3 {perm = array<i64: 2, 0, 1>}", [t3],
     t3.transpose(2, 0, 1).astype(np.float64)),
    # A bias gradient over a 2x2 pooling window's split dimensions: its
    # innermost loops (2 and 16 x 2 x 16 around it) merge into one of 1024
    # (collapse-short-loops).
    ("split_sum", "nn.reduce_sum %u {axes = array<i64: 0, 2, 3, 4, 5>, keepdims = false}", [u],
     u.astype(np.float64).sum(axis=(0, 2, 3, 4, 5))),
    # A max pooling's adjoint, iterated [N, C, H/2, 2, W/2, 2] and reading
    # the window's maximum at (N, C, H/2, W/2): the innermost loop (2) is
    # unrolled into the one around it (unroll-short-loops).
    ("pool_grad", "nn.max_pool_grad %pin, %pdy {kernel = array<i64: 2, 2>, "
     "strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, "
     "dilations = array<i64: 1, 1>}", [pin, pdy], max_pool_grad(pin, pdy)),
    # A convolution's weight gradient: dot products of dY's rows (5) with
    # the columns' (27) over the pixels, summed over 8 samples, too long
    # for one block of C's rows to stay in L1: the samples run in blocks
    # around the blocks of C, the partial sums kept in between; 5 x 27
    # leaves a tail of each.
    ("conv_wgrad", "nn.conv_grad_weight %cin, %cdy {strides = array<i64: 1, 1>, "
     "pads = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, group = 1}",
     [cin, cdy], conv_grad_weight(cin, cdy)),
    # An LM head's data gradient in small (rows of A 2 KiB apart): which of
    # its loops over blocks of m and n is outside depends on the L2 size.
    ("lm_dgrad", "nn.gemm %dl, %wh", [dl, wh], dl.astype(np.float64) @ wh),
    # A weight gradient added to the one accumulated so far (96 x 64 +=
    # X^T dY over a micro-batch of 32 rows): 32 FMAs per element of C
    # loaded, so the blocks of m go outside, walking C along its rows.
    ("wgrad_acc", "nn.gemm %xa, %dya, %ca {transA = true}", [xa, dya, ca],
     xa.T.astype(np.float64) @ dya + ca),
]
NAMES = {id(a): "a", id(b): "b", id(at): "at", id(bt): "bt", id(x): "x", id(w): "w",
         id(p): "p", id(q): "q", id(r): "r", id(s12): "s12", id(dy): "dy", id(xw): "xw",
         id(t3): "t3", id(u): "u", id(g): "g", id(h): "h", id(wide): "wide",
         id(xs): "xs", id(ds): "ds", id(pin): "pin", id(pdy): "pdy", id(cin): "cin",
         id(cdy): "cdy", id(dl): "dl", id(wh): "wh", id(xa): "xa", id(dya): "dya",
         id(ca): "ca"}


def ty(array):
    return "tensor<%sxf32>" % "x".join(map(str, array.shape))


def dense(array):
    return np.array2string(array, separator=", ", threshold=sys.maxsize,
                           floatmode="unique", max_line_width=sys.maxsize).replace("\n", "")


def gen(path):
    lines = ["func.func private @printMemrefF32(memref<*xf32>)", "", "func.func @main() {"]
    for array in [a, b, at, bt, x, w, p, q, r, s12, dy, xw, t3, u, g, h, wide, xs,
                  ds, pin, pdy, cin, cdy, dl, wh, xa, dya, ca]:
        lines.append("  %%%s = arith.constant dense<%s> : %s" % (NAMES[id(array)], dense(array),
                                                                 ty(array)))
    for name, op, operands, result, *transposed in CASES:
        rt = "tensor<%sxf32>" % "x".join(map(str, result.shape))
        mt = rt.replace("tensor", "memref")
        if transposed:
            # The op's result, then transposed by the case's permutation.
            perm = transposed[0]
            ct = "tensor<%sxf32>" % "x".join(str(result.shape[perm.index(d)])
                                            for d in range(result.ndim))
            lines.append("  %%%s_c = %s : (%s) -> %s" % (
                name, op, ", ".join(ty(o) for o in operands), ct))
            op = "nn.transpose %%%s_c {perm = array<i64: %s>}" % (
                name, ", ".join(map(str, perm)))
            operand_types = ct
        else:
            operand_types = ", ".join(ty(o) for o in operands)
        lines += [
            "  %%%s = %s : (%s) -> %s" % (name, op, operand_types, rt),
            "  %%%s_m = bufferization.to_buffer %%%s : %s to %s" % (name, name, rt, mt),
            "  %%%s_u = memref.cast %%%s_m : %s to memref<*xf32>" % (name, name, mt),
            "  func.call @printMemrefF32(%%%s_u) : (memref<*xf32>) -> ()" % name]
    lines += ["  return", "}"]
    open(path, "w").write("\n".join(lines) + "\n")


if sys.argv[1] == "gen":
    gen(sys.argv[2])
else:
    assert_rows(sys.argv[2], [case[3].ravel() for case in CASES], rtol=1e-5, atol=1e-5)
