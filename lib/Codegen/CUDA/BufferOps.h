//===- BufferOps.h - linalg ops on buffers, before kernels ------*- C++ -*-===//
//
// What cuda-fuse-kernels and cuda-group-rows know of the linalg ops on
// buffers that become kernels, and of the views they access: which ops a
// kernel may join, the element of its root buffer an access reaches, and
// whether two views may meet. Private to the CUDA codegen passes.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_BUFFEROPS_H
#define ACCRUE_LIB_CODEGEN_CUDA_BUFFEROPS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace accrue::cuda {

/// Whether `op` may join a kernel: an elementwise linalg op on buffers of
/// static loop ranges (no warp reduction, no reduction loops) whose body
/// writes no memory.
bool isFusible(mlir::linalg::LinalgOp op);

/// Whether `op` is a warp reduction (cuda-split-reductions' form, its
/// lanes' loop last) on buffers of static ranges.
bool isWarpReduction(mlir::linalg::LinalgOp op);

/// Whether an input of `op` is read strided along the loop its first
/// output is contiguous in (a transpose, which cuda-form-kernels tiles).
bool isTranspose(mlir::linalg::LinalgOp op);

/// The strides and offset of the view `memref`, where they are static.
std::optional<std::pair<llvm::SmallVector<int64_t>, int64_t>>
staticLayout(mlir::Value memref);

/// The element of its root buffer that `map` (of loops of extents
/// `ranges`) reaches through the view `buffer`: offset + sum of stride x
/// index, as one expression of the loops, loops of one iteration read as
/// 0; null where the view's layout is not static.
mlir::AffineExpr elementOf(mlir::Value buffer, mlir::AffineMap map,
                           llvm::ArrayRef<int64_t> ranges);

/// Whether `view` is all of `base`: a chain of reshapes and casts of it.
bool isWhole(mlir::Value view, mlir::Value base);

/// Whether `op`, between two ops that become one kernel, may stay where it
/// is: it has no memory effects (views, index arithmetic, constants) or
/// only allocates.
bool staysBetween(mlir::Operation &op);

/// Whether views `x` and `y` may reach a common element.
bool mayOverlap(mlir::Value x, mlir::Value y);

} // namespace accrue::cuda

#endif // ACCRUE_LIB_CODEGEN_CUDA_BUFFEROPS_H
