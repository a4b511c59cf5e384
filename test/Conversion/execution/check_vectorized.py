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
    # A batch dimension, blocks of 8 x 32.
    ("batched", "nn.matmul %x, %w", [x, w], np.matmul(x.astype(np.float64), w)),
    # Dot products over k = 12: 4-wide vectors at 256 or 128 bits, and no
    # k block size divides 12 (scalar loops at 512 bits).
    ("gemm_tb12", "nn.gemm %r, %s12 {transB = true}", [r, s12], r.astype(np.float64) @ s12.T),
]
NAMES = {id(a): "a", id(b): "b", id(at): "at", id(bt): "bt", id(x): "x", id(w): "w",
         id(p): "p", id(q): "q", id(r): "r", id(s12): "s12"}


def ty(array):
    return "tensor<%sxf32>" % "x".join(map(str, array.shape))


def dense(array):
    return np.array2string(array, separator=", ", threshold=sys.maxsize,
                           floatmode="unique", max_line_width=sys.maxsize).replace("\n", "")


def gen(path):
    lines = ["func.func private @printMemrefF32(memref<*xf32>)", "", "func.func @main() {"]
    for array in [a, b, at, bt, x, w, p, q, r, s12]:
        lines.append("  %%%s = arith.constant dense<%s> : %s" % (NAMES[id(array)], dense(array),
                                                                 ty(array)))
    for name, op, operands, result in CASES:
        rt = "tensor<%sxf32>" % "x".join(map(str, result.shape))
        mt = rt.replace("tensor", "memref")
        lines += [
            "  %%%s = %s : (%s) -> %s" % (name, op, ", ".join(ty(o) for o in operands), rt),
            "  %%%s_m = bufferization.to_buffer %%%s : %s to %s" % (name, name, rt, mt),
            "  %%%s_u = memref.cast %%%s_m : %s to memref<*xf32>" % (name, name, mt),
            "  func.call @printMemrefF32(%%%s_u) : (memref<*xf32>) -> ()" % name]
    lines += ["  return", "}"]
    open(path, "w").write("\n".join(lines) + "\n")


if sys.argv[1] == "gen":
    gen(sys.argv[2])
else:
    assert_rows(sys.argv[2], [r.ravel() for _, _, _, r in CASES], rtol=1e-5, atol=1e-5)
