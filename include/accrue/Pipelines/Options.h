//===- Options.h - pipeline options -----------------------------*- C++ -*-===//
//
// Plain, typed option structs. Libraries never read command-line flags; the
// settings of these structs are declared once (Settings.h) and bound by
// accrue-compile to flags and by accrue-opt to pipeline options. The
// enumerations are the step contract's (accrue-runtime/StepABI.h), so the
// manifest records exactly what was compiled. The targets' own options are
// in Codegen/Options.h.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_PIPELINES_OPTIONS_H
#define ACCRUE_PIPELINES_OPTIONS_H

#include "accrue-runtime/StepABI.h"
#include "accrue/Codegen/Options.h"

#include <cstdint>
#include <optional>
#include <string>

namespace accrue {

/// How the train passes rewrite a whole-batch training step.
struct TrainPipelineOptions {
  /// Exact (sum and count, divided once) or per micro-batch (mean of the
  /// micro-batch means, as frameworks do).
  AccrueLossNormalization lossNormalization = ACCRUE_LOSS_NORMALIZATION_EXACT;
  /// Fuse normalization, clipping, the optimizer and the accumulator reset
  /// into one train.fused_update (train-fuse-clip-optimizer).
  bool fuseOptimizer = true;
  /// Compute precision of the forward and backward (train-mixed-precision;
  /// parameters, gradients and optimizer state stay fp32).
  AccruePrecision precision = ACCRUE_PRECISION_FP32;
  /// Data-parallel gradient sums: none (one process), deferred (one
  /// all-reduce per optimizer step, after the micro-batch loop) or per
  /// micro-batch (for comparison).
  AccrueCollectives collectives = ACCRUE_COLLECTIVES_NONE;
  /// ZeRO stage 1 (train-shard-optimizer): each data-parallel rank keeps
  /// and updates its shard of the optimizer state; the gradients are
  /// reduce-scattered and the parameters all-gathered.
  bool shardOptimizer = false;
  /// ZeRO stage 2 (with shardOptimizer): the gradient accumulator is
  /// sharded too, each micro-batch's gradients reduce-scattered into it.
  bool shardGradients = false;
  /// Activation recomputation in the backward (train-autodiff): the
  /// segments between the forward's cuts, and/or the ops of the ONNX nodes
  /// whose names match a regex.
  bool recomputeSegments = false;
  std::string recomputeNodes;
  /// `--recompute auto`: segment recomputation, which accrue-compile's
  /// planner drops under a memory budget when it does not allow a larger
  /// micro-batch.
  bool recomputeAuto = false;
};

/// Everything accrue-compile runs between the imported module and LLVM IR:
/// the train passes, then the target's lowering.
struct CompileOptions : LoweringOptions {
  TrainPipelineOptions train;
};

} // namespace accrue

#endif // ACCRUE_PIPELINES_OPTIONS_H
