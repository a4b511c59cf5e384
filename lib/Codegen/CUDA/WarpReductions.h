//===- WarpReductions.h - reductions across a warp's lanes ------*- C++ -*-===//
//
// cuda-split-reductions marks a row reduction that a warp computes
// together; cuda-form-kernels forms it (each lane folds its share, then an
// xor butterfly of shuffles combines the lanes); cuda-group-rows puts
// such reductions and the row maps between them in one kernel. Private to
// the CUDA codegen passes.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_WARPREDUCTIONS_H
#define ACCRUE_LIB_CODEGEN_CUDA_WARPREDUCTIONS_H

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <optional>

namespace accrue::cuda {

/// Unit attribute on a linalg.generic whose last loop is a reduction over
/// the 32 lanes of a warp (a loop no operand but a placeholder indexes):
/// lane l folds its share of each output point from the combiner's
/// identity (the body up to its last combine), the lanes' values are
/// combined by an xor butterfly of shuffles (offsets 16, 8, 4, 2, 1), and
/// lane 0 folds the result into the output point with the body's last
/// combine. Read sequentially (as linalg defines it) the op folds the
/// lanes in order instead: the same value up to the association.
constexpr llvm::StringLiteral kWarpLanes = "accrue.warp_lanes";

/// The lanes of a warp.
constexpr int64_t kWarpSize = 32;

/// Integer attribute (the group's number) on the linalg.generic members of
/// a row group (cuda-group-rows): warp reductions and row maps over the
/// same points that follow each other, with nothing with memory effects
/// between them. cuda-form-kernels makes one kernel of a group, a block
/// per point running the members in order with a barrier between them;
/// cuda-plan-workspace keeps every buffer a member touches live through
/// the whole group.
constexpr llvm::StringLiteral kRowGroup = "accrue.row_group";

/// [group, row stride, group, row stride, ...] on an allocation that only
/// row groups touch (cuda-group-rows), each group's first member to touch
/// it writing it: at each point a group's members reach elements [R L(p),
/// R L(p) + R) of it (R the row stride, L the point's row-major index).
/// cuda-form-kernels keeps a point's R elements in the block's workgroup
/// memory instead, and cuda-plan-workspace gives the allocation no
/// workspace.
constexpr llvm::StringLiteral kRowLocal = "accrue.row_local";

/// The kind of `op` if it is a combining operation reductions are split
/// over (add, mul, max, min; floating point or integer).
std::optional<mlir::arith::AtomicRMWKind> combinerKind(mlir::Operation *op);

} // namespace accrue::cuda

#endif // ACCRUE_LIB_CODEGEN_CUDA_WARPREDUCTIONS_H
