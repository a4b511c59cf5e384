//===- MemoryPlan.h - the step's memory plan --------------------*- C++ -*-===//
//
// Private to the compiler library: the memory plan (--plan,
// --memory-budget), measured on probes of the step imported from the
// compilation's StepSource at other micro-batch sizes.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_COMPILER_MEMORYPLAN_H
#define ACCRUE_LIB_COMPILER_MEMORYPLAN_H

#include "StepSource.h"

#include "accrue-runtime/Manifest.h"

#include "llvm/Support/raw_ostream.h"

namespace accrue {

/// The memory plan of `manifest`'s step: the arenas and inputs of the step
/// (probed at 2b: they do not depend on b), the activations at the
/// compiled micro-batch b and at 2b.
llvm::FailureOr<rt::MemoryPlan> buildMemoryPlan(mlir::MLIRContext &ctx,
                                                StepSource &source,
                                                const CompilerOptions &options,
                                                const rt::Manifest &manifest);

/// `options` with the micro-batch and accumulation steps that
/// --memory-budget and --effective-batch ask for. With an effective batch E
/// over G ranks, each rank takes a share of ceil(E / G) samples per step
/// and K = ceil(share / b): the last micro-batch of a step is partly
/// padding when b does not divide the share (the step masks it, so every
/// step still takes exactly E samples). With a budget, b is the largest
/// micro-batch whose planned peak fits, then the smallest with the same K
/// (the least padding). Says what it chose (a remark).
llvm::FailureOr<CompilerOptions> chooseBatch(mlir::MLIRContext &ctx,
                                             StepSource &source,
                                             const CompilerOptions &options);

} // namespace accrue

#endif // ACCRUE_LIB_COMPILER_MEMORYPLAN_H
