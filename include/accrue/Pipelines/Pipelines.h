//===- Pipelines.h - Accrue's pass pipelines --------------------*- C++ -*-===//

#ifndef ACCRUE_PIPELINES_PIPELINES_H
#define ACCRUE_PIPELINES_PIPELINES_H

#include "accrue/Pipelines/Options.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace accrue {

/// The train passes on a module holding a whole-batch step: micro-batching
/// with exact normalization, autodiff, inlining, fusion of the end of the
/// step, and the in-place calling convention. Leaves tensors and nn ops.
/// `options.target` decides what the backward recomputes by default
/// (Target::recomputesFusedElementwise).
void buildTrainPipeline(mlir::OpPassManager &pm, const CompileOptions &options);

/// The lowering for `options.target`: CPU, or CUDA (real or emulated).
void buildLoweringPipeline(mlir::OpPassManager &pm,
                           const CompileOptions &options);

/// Exactly what accrue-compile runs: the train pipeline, then the CPU
/// lowering. Registered as --accrue-train-pipeline.
void buildCompilePipeline(mlir::OpPassManager &pm,
                          const CompileOptions &options);

/// Registers the pipelines with accrue-opt (--accrue-train-pipeline,
/// --accrue-train-transforms, --accrue-lower-cpu).
void registerPipelines();

} // namespace accrue

#endif // ACCRUE_PIPELINES_PIPELINES_H
