//===- BiasGradients.h - bias gradients as GEMM epilogues -------*- C++ -*-===//
//
// A Linear's bias gradient sums the output gradient over the rows that its
// weight gradient's GEMM sums over (K): cuBLASLt computes it in that GEMM
// (the BGRADA / BGRADB epilogue) while it reads the operand anyway, so the
// column reduction's kernels and their pass over the gradient go.
// cuda-split-reductions pairs each such sum with its contraction on tensors
// (where their values can be compared) and leaves the sum whole;
// cuda-contractions-to-gemm gives the pair's GEMM call the epilogue.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_BIASGRADIENTS_H
#define ACCRUE_LIB_CODEGEN_CUDA_BIASGRADIENTS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include "llvm/ADT/DenseSet.h"

namespace accrue::cuda {

/// On a sum: its pair's number (an i64). On a contraction: [number, the
/// input the sum is of] (a DenseI64ArrayAttr).
inline constexpr llvm::StringLiteral kBiasGradientAttr = "accrue.bias_gradient";

/// Marks each column sum `s` in `root` (on tensors: out[j] += x[..., j] over
/// every other dimension of x, from zeros, in f32) whose values one input
/// of a contraction in its block also holds, where the contraction sums
/// exactly those dimensions as K and has j as its only N (M) loop of that
/// input, and no batch loops: the GEMM's bias gradient of that input is
/// `s`. Values compare through reshapes that merge dimensions, widenings
/// and roundings of widened values (exact). Returns the sums marked.
llvm::DenseSet<mlir::Operation *> markBiasGradients(mlir::Operation *root);

} // namespace accrue::cuda

#endif // ACCRUE_LIB_CODEGEN_CUDA_BIASGRADIENTS_H
