"""Reads the memrefs mlir-runner's printMemrefF32 prints, compares them."""
import re

import numpy as np


def read_rows(path):
    """One flat array per printed memref, in order."""
    rows = []
    with open(path) as f:
        for line in f:
            if line.startswith("Unranked Memref"):
                rows.append([])
            elif rows:
                for tok in re.findall(r"-?nan|-?inf|[-+0-9.eE]+", line):
                    rows[-1].append(float(tok))
    return [np.array(r) for r in rows]


def assert_rows(path, expected, rtol=2e-5, atol=1e-6):
    # printMemrefF32 prints 6 significant digits.
    got = read_rows(path)
    assert len(got) == len(expected), "printed %d memrefs, expected %d" % (len(got), len(expected))
    for i, (g, e) in enumerate(zip(got, expected)):
        e = np.asarray(e, dtype=np.float64)
        assert g.shape == e.shape, "memref %d: %s values, expected %s" % (i, g.shape, e.shape)
        ok = np.isclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        assert ok.all(), "memref %d: got %s, expected %s" % (i, g, e)
    print("%d memrefs match" % len(got))
