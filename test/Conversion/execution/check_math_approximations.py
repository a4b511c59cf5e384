"""Checks math-approximations.mlir's output: the largest relative errors of
the approximated exp, log, tanh and erf (ppm) and their special values."""
import sys

import numpy as np

from runner_output import read_rows

errors, special = read_rows(sys.argv[1])
for name, ppm in zip(["exp", "log", "tanh", "erf"], errors):
    print("%s: largest relative error %.3f ppm" % (name, ppm))
    assert 0 < ppm < 0.5, "%s is off by %.3f ppm" % (name, ppm)
inf, nan = np.inf, np.nan
expected = [0.0, inf, nan, -inf, nan, inf, -1.0, 1.0, -1.0, 1.0]
assert np.array_equal(special, expected, equal_nan=True), special
print("special values ok")
