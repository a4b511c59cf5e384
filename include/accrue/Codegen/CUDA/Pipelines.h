//===- Pipelines.h - the CUDA lowering pipelines ----------------*- C++ -*-===//
//
// From a step on tensors to one whose host code launches kernels: device
// scalars, bufferization, the workspace, kernels, the device-access check;
// then either NVVM/PTX for the GPU or, for testing without one, the kernels
// run as host loops and lowered for the CPU.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CUDA_PIPELINES_H
#define ACCRUE_CODEGEN_CUDA_PIPELINES_H

#include "accrue/Codegen/Options.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace accrue::cuda {

/// nn/train to linalg, device scalars, split reductions, one-shot
/// bufferization: the step on device buffers.
void buildCUDABufferizationPipeline(mlir::OpPassManager &pm,
                                    const LoweringOptions &options);

/// The workspace plan, one kernel per linalg op, the device-access check.
void buildCUDAKernelPipeline(mlir::OpPassManager &pm,
                             const LoweringOptions &options);

/// Kernels to NVVM and PTX (or, for cuda-emulated, to host loops), host
/// code to the LLVM dialect.
void buildCUDAToLLVMPipeline(mlir::OpPassManager &pm,
                             const LoweringOptions &options);

/// All three.
void buildCUDALoweringPipeline(mlir::OpPassManager &pm,
                               const LoweringOptions &options);

} // namespace accrue::cuda

#endif // ACCRUE_CODEGEN_CUDA_PIPELINES_H
