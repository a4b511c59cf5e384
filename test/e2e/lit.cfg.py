# Accrue's end-to-end suite: compile and train real models, compare with
# independent references (float64 finite differences, PyTorch, K=1 vs K>1).
import glob
import os
import subprocess

import lit.formats
from lit.llvm import llvm_config

config.name = "Accrue-e2e"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".py", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.accrue_obj_root, "test", "e2e")
config.excludes = ["models", "lib", "lit.cfg.py"]

llvm_config.with_system_environment(["HOME", "TMPDIR"])
llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(["not", "split-file", "llvm-readelf"],
                                   [config.llvm_tools_dir])

config.environment["ACCRUE_TOOLS"] = config.accrue_tools_dir
config.environment["PYTHONPATH"] = os.pathsep.join(
    [os.path.join(config.test_source_root, "lib"),
     os.path.join(config.test_source_root, "models")])
config.environment["PYTHONDONTWRITEBYTECODE"] = "1"
config.environment["OMP_NUM_THREADS"] = "1"
# lit's own %python is the interpreter running lit; the tests want ours.
config.substitutions = [s for s in config.substitutions if s[0] != "%python"]
config.substitutions.append(("%python", config.python_executable))
config.substitutions.append(("%reference_python", config.reference_python))
config.substitutions.append(("%models", os.path.join(config.test_source_root, "models")))
config.substitutions.append(("%accrue_build", os.path.dirname(config.accrue_tools_dir)))
config.substitutions.append(("%cmake", config.cmake_command))
config.substitutions.append(("%cc", config.c_compiler))
config.substitutions.append(("%cxx", config.cxx_compiler))
config.substitutions.append(("%cuda_stub", os.path.join(config.accrue_obj_root, "lib",
                                                       "libaccrue-cuda-stub.so")))
config.substitutions.append(("%accrue_train_path",
                             os.path.join(config.accrue_tools_dir, "accrue-train")))
llvm_config.add_tool_substitutions(
    ["accrue-opt", "accrue-compile", "accrue-train", "capi-train", "capi-compile"],
    [config.accrue_tools_dir])


def python_has(module, python=config.python_executable):
    return subprocess.run([python, "-c", "import " + module],
                          capture_output=True).returncode == 0


if python_has("onnx.reference", config.reference_python):
    config.available_features.add("onnx-reference")
# The newest releases' venv (scripts/setup makes it): onnx's evaluator for
# operators the test venv's onnx predates; PyTorch 2, transformers and
# onnxscript for the models users export today.
latest_python = os.path.join(config.accrue_src_root, ".venv-onnx-latest", "bin", "python")
if os.path.exists(latest_python):
    config.substitutions.append(("%latest_python", latest_python))
    config.available_features.add("onnx-latest")
    if python_has("torch, transformers, onnxscript", latest_python):
        config.available_features.add("torch2")
# The Python package (not in the sanitizer build, whose extension would
# need the sanitizer runtime preloaded into Python).
if glob.glob(os.path.join(os.path.dirname(config.accrue_tools_dir), "python_packages",
                          "accrue", "_accrue*.so")):
    config.available_features.add("accrue-python")
if python_has("torch"):
    config.available_features.add("torch")
if os.path.exists("/usr/bin/time"):
    config.available_features.add("gnu-time")
# Data parallelism: two ranks on this machine (oversubscribed on 2 cores;
# CI runs as root, which Open MPI refuses unless told).
import shutil
if shutil.which("mpirun"):
    config.available_features.add("mpi")
    config.environment["ACCRUE_MPIRUN"] = shutil.which("mpirun")
    config.substitutions.append(("%mpirun", shutil.which("mpirun")))
    config.environment["OMPI_ALLOW_RUN_AS_ROOT"] = "1"
    config.environment["OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"] = "1"
    config.environment["OMPI_MCA_btl_vader_single_copy_mechanism"] = "none"

# The CUDA toolkit (ptxas, libdevice) and the features scripts/test requires.
import sys
sys.path.insert(0, os.path.join(config.accrue_src_root, "test"))
import lit_common
lit_common.add_cuda_toolkit(config)
lit_common.add_sanitizer(config)
lit_common.add_cpu_features(config)
lit_common.require_features(config, lit_config, "ACCRUE_E2E_REQUIRE")
# The slowest tests take a few minutes; the sanitizer build several times that.
lit_common.set_timeout(lit_config, 1800)
# glibc fills allocated and freed blocks with a pattern: a use after free
# or a read of memory never written in generated code gives wrong values
# (and a failed comparison) at once. Tests that measure resident memory
# drop it (filling touches pages that would stay untouched).
config.environment["MALLOC_PERTURB_"] = "165"
