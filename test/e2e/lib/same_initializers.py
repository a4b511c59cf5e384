"""Exits non-zero unless two ONNX models have the same initializers, bit for
bit (names, shapes, dtypes and values)."""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


a, b = initializers(sys.argv[1]), initializers(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
for name in a:
    assert a[name].dtype == b[name].dtype and a[name].shape == b[name].shape, name
    assert a[name].tobytes() == b[name].tobytes(), "%s differs: max |diff| %g" % (
        name, np.max(np.abs(a[name].astype(np.float64) - b[name])))
print("same: %d initializers" % len(a))
