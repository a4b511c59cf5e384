"""Shared by the benchmarks: a linear model whose size sets the arena, and
the step time `accrue-train` reports."""
import os
import re
import subprocess
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def parse_args(ap):
    """Adds --build and --out to `ap` and parses the command line; creates
    the output folder (a fresh temporary one without --out). Returns the
    arguments, the folder, and the paths of accrue-compile and accrue-train."""
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--build", default=os.path.join(here, "..", "build"))
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="accrue-bench-")
    os.makedirs(out, exist_ok=True)
    tool = lambda name: os.path.join(args.build, "bin", name)
    return args, out, tool("accrue-compile"), tool("accrue-train")


def build_linear_model(path, inputs, outputs, layers=1):
    """y ~ x @ w with a mean squared error: one MatMul whose `inputs x
    outputs` weight is the whole parameter arena; or, with `layers` > 1, a
    chain x @ w0 @ w1 ... of square `inputs x inputs` weights, the last
    `inputs x outputs`."""
    rng = np.random.default_rng(0)
    weights, nodes, h = [], [], "x"
    for i in range(layers):
        cols = outputs if i == layers - 1 else inputs
        name = "w" if layers == 1 else "w%d" % i
        weights.append(numpy_helper.from_array(
            (rng.standard_normal((inputs, cols)) / np.sqrt(inputs)).astype(np.float32), name))
        nodes.append(helper.make_node("MatMul", [h, name], ["p" if i == layers - 1 else
                                                            "h%d" % i]))
        h = "h%d" % i
    nodes += [helper.make_node("Sub", ["p", "y"], ["d"]),
             helper.make_node("Mul", ["d", "d"], ["e"]),
             helper.make_node("ReduceMean", ["e"], ["loss"], keepdims=0)]
    graph = helper.make_graph(
        nodes, "linear",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", inputs]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", outputs])],
        [helper.make_tensor_value_info("loss", TensorProto.FLOAT, [])],
        weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def write_linear_data(path, samples, inputs, outputs):
    rng = np.random.default_rng(1)
    np.savez(path, x=rng.standard_normal((samples, inputs)).astype(np.float32),
             y=rng.standard_normal((samples, outputs)).astype(np.float32))


def seconds_per_step(command, steps, copies=1):
    """Runs `command` (an accrue-train command line, possibly under mpirun)
    for `steps` steps, `copies` of it at once; the seconds per step of the
    slowest one's training loop."""
    procs = [subprocess.Popen(command + ["--steps", str(steps), "--no-progress"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(copies)]
    worst = 0.0
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            raise SystemExit("%s failed:\n%s%s" % (" ".join(command), out, err))
        worst = max(worst, float(re.search(r"(\d+) steps in ([0-9.e+-]+) s", out).group(2)))
    return worst / steps
