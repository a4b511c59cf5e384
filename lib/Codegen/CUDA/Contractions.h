//===- Contractions.h - recognizing GEMM-shaped linalg ops ------*- C++ -*-===//
//
// What the CUDA pipeline hands to cuBLASLt: a linalg.generic whose body is
// `out + a * b` (each of a, b an input, possibly widened with arith.extf)
// and whose indexing maps name loops directly (a loop or the constant 0 of
// a unit dimension per operand dimension). Shared by the tensor-level folds
// that shape contractions and the buffer-level rewrite into GEMM calls.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_CONTRACTIONS_H
#define ACCRUE_LIB_CODEGEN_CUDA_CONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

#include <optional>

namespace accrue::cuda {

/// A multiply-accumulate generic: inputs `lhs` and `rhs` (operand numbers),
/// the element types the product is formed from (the inputs' own, which
/// the body may widen to the output's f32).
struct Contraction {
  unsigned lhs = 0, rhs = 1;
  mlir::Type lhsElement, rhsElement;
};

/// `op` as a contraction: two inputs, one f32 output, body
/// `yield out + x * y` with x, y the inputs (or their arith.extf), and every
/// indexing map a list of loops and unit-dimension zeros.
std::optional<Contraction> matchContraction(mlir::linalg::GenericOp op);

/// For each result of `map`, the loop it names, or -1 for a constant 0;
/// nullopt if a result is anything else.
std::optional<llvm::SmallVector<int64_t>> loopsOf(mlir::AffineMap map);

/// Whether `value` is the result of a linalg.fill with +0.0 or -0.0.
bool isZeroFill(mlir::Value value);

/// For a linalg op that only moves its input to its output (linalg.transpose,
/// or a generic yielding its input, all loops parallel): the map from the
/// output's indices to the input's. nullopt for any other op.
std::optional<mlir::AffineMap> outputToInputMap(mlir::Operation *op);

} // namespace accrue::cuda

#endif // ACCRUE_LIB_CODEGEN_CUDA_CONTRACTIONS_H
