//===- Options.h - pipeline options -----------------------------*- C++ -*-===//
//
// Plain option structs. Libraries never read command-line flags; tools bind
// these fields to flags (accrue-compile) or to pass-pipeline options
// (accrue-opt --accrue-train-pipeline="...").
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_PIPELINES_OPTIONS_H
#define ACCRUE_PIPELINES_OPTIONS_H

#include <cstdint>
#include <string>

namespace accrue {

/// How the train passes rewrite a whole-batch training step.
struct TrainPipelineOptions {
  /// "exact" (sum and count, divided once) or "per-micro-batch" (mean of the
  /// micro-batch means, as frameworks do).
  std::string lossNormalization = "exact";
  /// Fuse normalization, clipping, the optimizer and the accumulator reset
  /// into one train.fused_update (train-fuse-clip-optimizer).
  bool fuseOptimizer = true;
  /// Compute precision of the forward and backward: "fp32", "bf16" or
  /// "fp16" (train-mixed-precision; parameters, gradients and optimizer
  /// state stay fp32).
  std::string precision = "fp32";
  /// Data-parallel gradient sums: "none" (one process), "deferred" (one
  /// all-reduce per optimizer step, after the micro-batch loop) or
  /// "per-micro-batch" (one per micro-batch, for comparison).
  std::string collectives = "none";
};

/// How a tensor-level step is lowered for the CPU.
struct CPULoweringOptions {
  /// Fuse chains of elementwise linalg ops before bufferization.
  bool fuseElementwise = true;
  /// Register-tile and vectorize contractions (vectorize-contractions).
  bool vectorize = true;
  /// The target's vector register width in bits; sizes the kernels' blocks
  /// (rows of 2 registers, dot products over one register).
  int64_t vectorBits = 512;
};

/// Everything accrue-compile runs between the imported module and LLVM IR.
struct CompileOptions {
  TrainPipelineOptions train;
  CPULoweringOptions cpu;
};

} // namespace accrue

#endif // ACCRUE_PIPELINES_OPTIONS_H
