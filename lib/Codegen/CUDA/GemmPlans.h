//===- GemmPlans.h - contractions as strided batched GEMMs ------*- C++ -*-===//
//
// How cuda-contractions-to-gemm reads a contraction on buffers as a call
// of a strided batched GEMM: its loops sorted into batch, M, N and K
// dimensions, and the copies that make an input's loops collapse.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_GEMMPLANS_H
#define ACCRUE_LIB_CODEGEN_CUDA_GEMMPLANS_H

#include "accrue/Codegen/Common/Contractions.h"

#include "accrue-runtime/StepABI.h"

#include "mlir/IR/PatternMatch.h"

namespace accrue::cuda::gemm {

using mlir::SmallVector;
using mlir::Value;

enum Kind { Batch, M, N, K, NumKinds };
enum OperandIndex { A, B, C };

/// A contraction as a GEMM: for each of A, B, C its buffer, the position of
/// each loop in its dimensions (-1: absent) and its strides; for each
/// kind, its loops, outermost first.
struct Plan {
  Value buffers[3];
  SmallVector<int64_t> position[3];
  SmallVector<int64_t> strides[3];
  SmallVector<int64_t> loops[NumKinds];
  /// Batch loops that do not collapse with the GEMM's batch dimension,
  /// run by the host around the call.
  SmallVector<int64_t> hostLoops;
  /// Whether the K loops do not collapse into one dimension: the plan is
  /// usable only once the inputs are copied so that they do.
  bool splitReduction = false;
  SmallVector<int64_t> ranges;
  AccrueDType inputType = ACCRUE_DTYPE_FLOAT32;
  /// C's: f32, or the bf16 or f16 a zero-started GEMM rounds its sum to.
  AccrueDType outputType = ACCRUE_DTYPE_FLOAT32;
};

/// The GEMM element type of `type`: f32, bf16 or f16.
std::optional<AccrueDType> gemmType(mlir::Type type);

/// `op` (the contraction `c`) as a GEMM, where a strided batched GEMM can
/// read it (perhaps only once compactReductionInputs copied its inputs:
/// Plan::splitReduction).
mlir::FailureOr<Plan> planGemm(mlir::linalg::GenericOp op,
                               const codegen::Contraction &c);

/// When the batch loops of `op`'s GEMM collapse in its output but not in
/// one or both of its inputs, copies each such input with the batch
/// dimensions outermost; returns whether it did.
bool compactBatchInputs(mlir::RewriterBase &rewriter,
                        mlir::linalg::GenericOp op,
                        const codegen::Contraction &c, const Plan &plan);

/// When the K loops of `op`'s GEMM do not collapse in an input, copies each
/// such input with the K dimensions innermost; returns whether it did.
bool compactReductionInputs(mlir::RewriterBase &rewriter,
                            mlir::linalg::GenericOp op,
                            const codegen::Contraction &c, const Plan &plan);

} // namespace accrue::cuda::gemm

#endif // ACCRUE_LIB_CODEGEN_CUDA_GEMMPLANS_H
