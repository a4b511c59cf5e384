"""Writes ONNX's node tests (model.onnx, test_data_set_N/{input,output}_M.pb,
the layout of the data older onnx releases shipped) from the installed
onnx's case modules into argv[1]: newer releases ship the cases, which
compute their expected outputs, and no data."""
import os
import sys
import warnings

import onnx
from onnx import TensorProto, numpy_helper
from onnx.backend.test.case import node as node_cases

out = sys.argv[1]
# The cases' own numpy warnings (a maximum of nothing is -inf) are noise.
warnings.simplefilter("ignore")
count = 0
for case in node_cases.collect_testcases():
    folder = os.path.join(out, case.name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    for i, (inputs, outputs) in enumerate(case.data_sets):
        data = os.path.join(folder, "test_data_set_%d" % i)
        os.makedirs(data, exist_ok=True)
        for kind, values, infos in (("input", inputs, case.model.graph.input),
                                    ("output", outputs, case.model.graph.output)):
            for j, value in enumerate(values):
                info = infos[j]
                if info.type.HasField("sequence_type"):
                    proto = numpy_helper.from_list(value, info.name)
                elif info.type.HasField("optional_type"):
                    proto = numpy_helper.from_optional(value, info.name)
                elif isinstance(value, TensorProto):
                    proto = value
                else:
                    proto = numpy_helper.from_array(value, info.name)
                with open(os.path.join(data, "%s_%d.pb" % (kind, j)), "wb") as f:
                    f.write(proto.SerializeToString())
    count += 1
print("%d node tests of onnx %s" % (count, onnx.__version__))
