//===- CUDATarget.h - PTX for the artifact ----------------------*- C++ -*-===//

#ifndef ACCRUE_CODEGEN_CUDA_CUDATARGET_H
#define ACCRUE_CODEGEN_CUDA_CUDATARGET_H

#include "mlir/IR/BuiltinOps.h"

#include <map>
#include <optional>
#include <string>

namespace accrue::cuda {

/// A CUDA toolkit directory with libdevice (nvvm/libdevice/libdevice.10.bc):
/// `given` if set, else CUDA_HOME, CUDA_PATH, /usr/local/cuda, or the
/// nvidia-cuda-nvcc Python package of the source tree's .venv.
std::optional<std::string> findToolkit(llvm::StringRef given);

/// Replaces the per-architecture PTX objects of each gpu.binary in `module`
/// by one bundle (ACCRUE_PTX_BUNDLE_MAGIC in StepABI.h) from which the
/// runtime loads the newest architecture the device runs. Returns each
/// architecture's PTX ("sm_90" -> text).
llvm::FailureOr<std::map<std::string, std::string>>
bundleKernels(mlir::ModuleOp module);

} // namespace accrue::cuda

#endif // ACCRUE_CODEGEN_CUDA_CUDATARGET_H
