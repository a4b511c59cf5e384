//===- Pipelines.h - the CPU lowering pipelines -----------------*- C++ -*-===//
//
// From a step on tensors (nn, train, linalg) to the LLVM dialect for the
// CPU, in two halves so the step can be inspected on buffers in between.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_PIPELINES_H
#define ACCRUE_CODEGEN_CPU_PIPELINES_H

#include "accrue/Codegen/Options.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace accrue::cpu {

/// nn/train to linalg, then one-shot bufferization and deallocation: the
/// step on buffers, still in linalg and scf.
void buildCPUBufferizationPipeline(mlir::OpPassManager &pm,
                                   const LoweringOptions &options);

/// A bufferized step to the LLVM dialect.
void buildCPUToLLVMPipeline(mlir::OpPassManager &pm,
                            const LoweringOptions &options);

/// Both of the above.
void buildCPULoweringPipeline(mlir::OpPassManager &pm,
                              const LoweringOptions &options);

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_PIPELINES_H
