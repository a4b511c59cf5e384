#!/usr/bin/env python3
"""Accuracy of a spirals model (initial or trained ONNX) on the dataset.

    evaluate.py MODEL.onnx DATA.npz
"""
import sys

import numpy as np
import onnx
from onnx import numpy_helper


def main():
    params = {t.name: numpy_helper.to_array(t) for t in onnx.load(sys.argv[1]).graph.initializer}
    data = np.load(sys.argv[2])
    x, y = data["x"], data["y"]

    def linear(v, name):
        return v @ params[name + ".weight"].T + params[name + ".bias"]

    logits = linear(np.maximum(linear(np.tanh(linear(x, "fc1")), "fc2"), 0), "fc3")
    print("%.1f%%" % (100.0 * np.mean(np.argmax(logits, axis=1) == y)))


if __name__ == "__main__":
    main()
