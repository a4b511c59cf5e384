# Accrue's fast lit suite: dialects, passes, conversions, importer, pipelines.
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "Accrue"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.accrue_obj_root, "test")
# The end-to-end suite is its own lit suite (check-accrue-e2e).
config.excludes = ["e2e", "ONNXBackend", "Inputs", "CAPI", "CMakeLists.txt",
                   "lit.cfg.py"]
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"

# lit's own %python is the interpreter running lit; the tests want ours.
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%accrue_src_root", config.accrue_src_root))
config.substitutions.append(("%accrue_obj_root", config.accrue_obj_root))
config.substitutions.append(
    ("%onnx-from-text",
     config.python_executable + " " +
     os.path.join(config.accrue_src_root, "test", "Inputs", "onnx_from_text.py")))
llvm_config.add_tool_substitutions(
    ["accrue-opt", "accrue-compile", "accrue-train", "accrue-replay-onnx-import",
     "accrue-replay-npz", "accrue-replay-safetensors", "accrue-replay-manifest",
     "accrue-runtime-units"],
    [config.accrue_tools_dir])
# ONNX's backend node-test models (Debian's libonnx-testdata).
config.substitutions.append(("%node_tests", "/usr/share/libonnx-testdata/data/node"))
if os.path.isdir("/usr/share/libonnx-testdata/data/node"):
    config.available_features.add("onnx-testdata")
llvm_config.add_tool_substitutions(["not", "split-file", "mlir-runner", "mlir-translate", "llvm-nm"],
                                   [config.llvm_tools_dir])
# Runtime support libraries for the execution tests (mlir-runner).
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
for lib in ["mlir_c_runner_utils", "mlir_runner_utils"]:
    config.substitutions.append(
        ("%" + lib, os.path.join(llvm_lib_dir, "lib" + lib + config.llvm_shlib_ext)))
# The runtime's shared library (its entries for counted emulated kernels).
config.substitutions.append(
    ("%accrue_capi_lib", os.path.join(config.accrue_obj_root, "lib",
                                      "libAccrueCAPI" + config.llvm_shlib_ext)))
# OpenMP, for programs with parallel loops.
config.substitutions.append(("%libomp", os.path.join(llvm_lib_dir, "libomp.so")))

# The CUDA toolkit (ptxas, libdevice) and the features scripts/test requires.
import sys
sys.path.insert(0, os.path.join(config.accrue_src_root, "test"))
import lit_common
lit_common.add_cuda_toolkit(config)
lit_common.add_sanitizer(config)
lit_common.add_cpu_features(config)
lit_common.require_features(config, lit_config, "ACCRUE_LIT_REQUIRE")
# The slowest test takes seconds; the sanitizer build several times that.
lit_common.set_timeout(lit_config, 600)
