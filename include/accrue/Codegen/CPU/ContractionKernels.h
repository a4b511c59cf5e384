//===- ContractionKernels.h - which vector kernel a layout gets --*- C++
//-*-===//
//
// vectorize-contractions picks a kernel for a contraction from its indexing
// maps, loop ranges and tile sizes. Passes that change a contraction's
// layout before bufferization (fold-into-contractions) ask the same question so
// a rewrite never trades a vector kernel for scalar loops.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_CODEGEN_CPU_CONTRACTIONKERNELS_H
#define ACCRUE_CODEGEN_CPU_CONTRACTIONKERNELS_H

#include "mlir/IR/AffineMap.h"
#include "llvm/ADT/StringRef.h"

namespace accrue::cpu {

/// Marks a contraction whose C starts as zeros (accumulate-in-place folded
/// its zero fill into it): vectorize-contractions' first block of k does
/// not load C.
inline constexpr llvm::StringLiteral kZeroInitAttr = "accrue.zero_init";

/// Marks an scf.parallel loop of a kernel (vectorize-contractions',
/// tile-transposes') that schedule-parallel-loops keeps parallel.
inline constexpr llvm::StringLiteral kParallelKernelAttr =
    "accrue.parallel_kernel";

/// The register blocks of the contraction kernels: m x n elements of C in
/// the outer-product kernel, blocks of k per cache block, and in the
/// dot-product kernel dotM x dotN elements of C, dotWidth k per vector.
struct ContractionTiles {
  int64_t m = 8, n = 32, k = 256, dotWidth = 16, dotM = 4, dotN = 4;
  /// Outer products over many rows copy B's rows of each block of k into
  /// one contiguous buffer (packB), and A's columns where A is contiguous
  /// along m (packA).
  bool packA = false, packB = false;
  /// An outer product's rows after its last whole block of m are one more
  /// block in each block of n, not a second pass over B.
  bool fuseMTail = false;
  /// The L2 cache per core: an outer product's blocks of C re-read the
  /// panel (a block of k by all of m or n) of one operand, the one that
  /// fits half of it (B's, else A's if only A's does not).
  int64_t l2Bytes = 2 << 20;
};

/// The tiles for a target whose vector registers are `vectorBits` wide,
/// sized so a block's accumulators and the vectors it loads fit the
/// target's vector registers: blocks of two vectors along n; 8 rows (16 of
/// AVX-512's 32 registers), 6 rows on AVX2 (12 of its 16), 4 on 128-bit
/// targets; dot-product blocks of 4 x 4 on AVX-512, 2 x 4 with 16
/// registers; with 16 registers, outer products over many rows pack B
/// (and A where A is contiguous along m).
ContractionTiles contractionTilesFor(int64_t vectorBits);

/// The kernels, from worst to best: scalar loops, dot products (A and B
/// contiguous along k), outer products (B and C contiguous along n).
enum class ContractionKernel { None = 0, Dot = 1, OuterProduct = 2 };

/// The kernel a contraction C = A * B with these indexing maps (A, B, C in
/// operand order) and static loop ranges gets when every operand is
/// contiguous in its last dimension; with `bf16`, the kernel of bf16 A and
/// B on vdpbf16ps (k in pairs).
ContractionKernel contractionKernel(llvm::ArrayRef<mlir::AffineMap> maps,
                                    llvm::ArrayRef<int64_t> bounds,
                                    const ContractionTiles &tiles,
                                    bool bf16 = false);

} // namespace accrue::cpu

#endif // ACCRUE_CODEGEN_CPU_CONTRACTIONKERNELS_H
