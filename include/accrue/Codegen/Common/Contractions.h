//===- Contractions.h - contractions and the folds into them ---*- C++ -*-===//
//
// A contraction here is a linalg.generic whose body is `out + a * b` (each
// of a, b an input, possibly widened with arith.extf) and whose indexing
// maps name loops directly (a loop or the constant 0 of a unit dimension
// per operand dimension): what the CUDA pipeline hands to cuBLASLt and the
// CPU pipeline to its vector kernels. Both targets fold the data movement
// around contractions into their indexing maps (see
// populateFoldIntoContractionsPatterns).
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_COMMON_CONTRACTIONS_H
#define ACCRUE_CODEGEN_COMMON_CONTRACTIONS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/PatternMatch.h"

#include <functional>
#include <optional>

namespace accrue::codegen {

/// Marks the generic that rounds a contraction's f32 result to bf16 or f16
/// where the target's GEMM writes the rounded values itself (CUDA):
/// fuse-elementwise fuses it into nothing, so that it stays next to the
/// contraction.
inline constexpr llvm::StringLiteral kGemmRoundingAttr = "accrue.gemm_rounding";

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

/// Whether `op` maps each point of its operands to the same point of its
/// results: every loop parallel, every indexing map the identity.
bool isPointwise(mlir::linalg::GenericOp op);

/// The one op of elementwise `op`'s body, if `op` applies it to its one
/// input at each point (one init, identity maps) and yields its result.
mlir::Operation *onlyOpOf(mlir::linalg::GenericOp op);

/// Whether `type` is bf16 or f16.
bool isNarrowFloat(mlir::Type type);

/// The bf16 or f16 tensor (or buffer) `value` widens to f32, if it is the
/// result of an elementwise op doing only that (as nn-to-linalg widens a
/// low-precision product's inputs); null otherwise.
mlir::Value widenedFrom(mlir::Value value);

/// Whether `value` is the result of a linalg.fill with +0.0 or -0.0.
bool isZeroFill(mlir::Value value);

/// For a linalg op that only moves its input to its output (linalg.transpose,
/// or a generic yielding its input, all loops parallel): the map from the
/// output's indices to the input's. nullopt for any other op.
std::optional<mlir::AffineMap> outputToInputMap(mlir::Operation *op);

/// Whether a fold may give contraction `op` the indexing maps `maps` (on
/// the same loops); a target's kernels may prefer some layouts.
using FoldControl = std::function<bool(mlir::linalg::GenericOp op,
                                       llvm::ArrayRef<mlir::AffineMap> maps)>;

/// Patterns (on tensors) that move data movement into contractions:
///   - an input that is a transposed (or copied) tensor is read from the
///     tensor it was moved from;
///   - a contraction whose result is only summed over some of its
///     dimensions sums over them itself;
///   - a contraction whose result is only transposed writes it transposed.
/// The last two require the contraction to start from a zero fill. Each
/// rewrite is made only where `control` (if given) allows the new maps.
void populateFoldIntoContractionsPatterns(mlir::RewritePatternSet &patterns,
                                          FoldControl control = {});

/// A pattern that moves a transpose of an elementwise op's result (one
/// input, identity maps) to the op's input where that input is a
/// zero-based contraction's result the transpose then folds into (with the
/// patterns above, where `control` allows the contraction's new maps): a
/// bf16 weight gradient's rounding stays, on the gradient's layout. For
/// targets whose contractions cannot round their own results (CUDA's GEMMs
/// can, and write them transposed).
void populateMoveBeforeElementwisePatterns(mlir::RewritePatternSet &patterns,
                                           FoldControl control = {});

/// A pattern that folds x + contraction(a, b), x's only use, into the
/// contraction started from x instead of zeros (where `control` allows
/// its maps): for targets whose kernels accumulate into a buffer they load
/// (the CPU's; a GEMM would need its beta).
void populateFoldAddedInitPatterns(mlir::RewritePatternSet &patterns,
                                   FoldControl control = {});

/// Whether contraction `op` may read its two inputs, each widened from a
/// tensor of `narrow` (bf16 or f16), in that type.
using WideningControl =
    std::function<bool(mlir::linalg::GenericOp op, mlir::Type narrow)>;

/// Patterns (on tensors) for targets whose contractions read bf16 or f16
/// operands and accumulate in f32:
///   - contraction(widen(a), widen(b)) -> contraction(a, b) widening in its
///     body, where `control` (if given) allows it;
///   - movement(widen(x)) -> widen(movement(x)) where what the movement
///     (a pad with a constant exact in the narrow type, a reshape, a copy)
///     feeds is only contractions: it moves the narrow values;
///   - contraction(a, b) widening a in its body while b is f32 (fusion
///     put the widening there) -> contraction(widen(a), b).
void populateFoldWideningPatterns(mlir::RewritePatternSet &patterns,
                                  WideningControl control = {});

/// `narrow` (bf16 or f16) widened to f32 by an elementwise op, as
/// widenedFrom recognizes.
mlir::Value widenToF32(mlir::PatternRewriter &rewriter, mlir::Location loc,
                       mlir::Value narrow);

/// `op` on `inputs` instead of its own, its body cloned with each block
/// argument k mapped to `argument`(k, the new block argument) (the new
/// argument itself by default), but for the body ops `skip` maps to a
/// value (of the new body) that stands for their result; `op`'s
/// discardable attributes kept.
mlir::linalg::GenericOp withInputs(
    mlir::PatternRewriter &rewriter, mlir::linalg::GenericOp op,
    mlir::ValueRange inputs,
    llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location, unsigned,
                                   mlir::Value)>
        argument,
    llvm::function_ref<mlir::Value(mlir::Operation &, mlir::ValueRange)> skip =
        nullptr);

} // namespace accrue::codegen

#endif // ACCRUE_CODEGEN_COMMON_CONTRACTIONS_H
