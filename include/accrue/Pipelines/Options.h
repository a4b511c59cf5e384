//===- Options.h - pipeline options -----------------------------*- C++ -*-===//
//
// Plain, typed option structs. Libraries never read command-line flags; the
// settings of these structs are declared once (Settings.h) and bound by
// accrue-compile to flags and by accrue-opt to pipeline options. The
// enumerations are the step contract's (accrue-runtime/StepABI.h), so the
// manifest records exactly what was compiled.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_PIPELINES_OPTIONS_H
#define ACCRUE_PIPELINES_OPTIONS_H

#include "accrue-runtime/StepABI.h"

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

/// How a tensor-level step is lowered for the CPU.
struct CPULoweringOptions {
  /// Fuse chains of elementwise linalg ops before bufferization.
  bool fuseElementwise = true;
  /// Register-tile and vectorize contractions (vectorize-contractions).
  bool vectorize = true;
  /// Run large kernels on all cores: scf.parallel loops lowered to OpenMP
  /// (the step then links libomp; results do not depend on the thread
  /// count).
  bool parallel = true;
  /// The target's vector register width in bits; sizes the kernels' blocks
  /// (rows of 2 registers, dot products over one register). Unset:
  /// accrue-compile asks the target CPU, accrue-opt takes 512.
  std::optional<int64_t> vectorBits;

  int64_t vectorBitsOrDefault() const { return vectorBits.value_or(512); }
};

/// How a tensor-level step is lowered for NVIDIA GPUs.
struct CUDALoweringOptions {
  /// GPU architectures to generate PTX for ("sm_80,sm_90"); the runtime
  /// loads the newest one the device runs.
  std::string archs = "sm_80,sm_90";
  /// The CUDA toolkit (libdevice, ptxas). Empty: CUDA_HOME, /usr/local/cuda,
  /// or the nvidia-cuda-nvcc Python package next to the compiler.
  std::string toolkit;
};

/// Everything accrue-compile runs between the imported module and LLVM IR.
struct CompileOptions {
  /// Where the step runs: the CPU, an NVIDIA GPU, or the CUDA pipeline
  /// emulated on the CPU (for testing without a GPU).
  AccrueTarget target = ACCRUE_TARGET_CPU;
  TrainPipelineOptions train;
  CPULoweringOptions cpu;
  CUDALoweringOptions cuda;
};

} // namespace accrue

#endif // ACCRUE_PIPELINES_OPTIONS_H
