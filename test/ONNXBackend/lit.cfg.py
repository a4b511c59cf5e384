# ONNX's backend node tests (from Debian's libonnx-testdata, ONNX 1.12, and
# from the test venv's onnx 1.16), run through Accrue: its own suite,
# check-accrue-onnx.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Accrue-ONNX"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.accrue_obj_root, "test", "ONNXBackend")
llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["accrue-onnx-backend-test"],
                                   [config.accrue_tools_dir])
config.substitutions.append(("%node_tests", "/usr/share/libonnx-testdata/data/node"))
if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")
# The newer suite of the test venv's onnx (scripts/setup pins it).
import glob
venv_node_tests = sorted(glob.glob(os.path.join(
    config.accrue_src_root, ".venv", "lib", "python3*", "site-packages", "onnx", "backend",
    "test", "data", "node")))
if venv_node_tests:
    config.substitutions.append(("%venv_node_tests", venv_node_tests[-1]))
    config.available_features.add("onnx-testdata-venv")

# The newest onnx release's node tests, generated from its case modules by
# the venv scripts/setup makes for it.
latest_python = os.path.join(config.accrue_src_root, ".venv-onnx-latest", "bin", "python")
if os.path.exists(latest_python):
    config.substitutions.append(("%latest_python", latest_python))
    config.available_features.add("onnx-latest")

# scripts/test installs the test data: there, missing data is an install
# bug, not a reason to report the suite unsupported and stay green.
import sys
sys.path.insert(0, os.path.join(config.accrue_src_root, "test"))
import lit_common
lit_common.require_features(config, lit_config, "ACCRUE_ONNX_REQUIRE")
