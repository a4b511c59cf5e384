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

namespace accrue::cpu {

/// The register blocks of the contraction kernels.
struct ContractionTiles {
  int64_t m = 8, n = 32, k = 256, dotWidth = 16;
};

/// The tiles for a target whose vector registers are `vectorBits` wide:
/// blocks of two vectors along n, 8 rows (16 registers of the block) with
/// 8 or more lanes, 4 rows on 128-bit targets.
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
