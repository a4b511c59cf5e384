//===- KernelForms.h - the kernel forms of cuda-form-kernels ----*- C++ -*-===//
//
// cuda-form-kernels turns each linalg op on buffers into a gpu.launch of
// one of several forms: one thread per point (FormKernels.cpp), the forms
// with vector accesses (VectorKernels.cpp): the streaming form of rank-1
// elementwise ops and the tiled form of transposes, and the forms of a row
// per warp or block (RowKernels.cpp): warp reductions and row groups.
// Private to the pass.
//
//===----------------------------------------------------------------------===//

#ifndef ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H
#define ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

#include <string>

namespace accrue::cuda::forms {

/// `index` values of `map`'s results at `ivs`.
llvm::SmallVector<mlir::Value> applyMap(mlir::OpBuilder &b, mlir::Location loc,
                                        mlir::AffineMap map,
                                        mlir::ValueRange ivs);

/// Clones the ops of a linalg op's body `body` (but its terminator) at the
/// point `ivs` of its loops: `linalg.index d` is `ivs[d]`.
void cloneBodyAt(mlir::OpBuilder &b, mlir::Block &body, mlir::ValueRange ivs,
                 mlir::IRMapping &mapping);

/// A gpu.launch of `blocks` x `threads` at the insertion point (threads
/// and blocks along x; `rows` rows of blocks along y where given), which
/// moves into its body; returns the thread's linear index along x there.
mlir::Value createLinearLaunch(mlir::RewriterBase &rewriter, mlir::Location loc,
                               mlir::Value blocks, mlir::Value threads,
                               mlir::Value rows = nullptr);

/// The ONNX node `loc` names, else "kernel": a kernel's tag.
std::string nodeTag(mlir::Location loc);

/// What a kernel computes, for its name: "update" for the op that writes
/// the parameters, else the ONNX node it comes from, else "kernel".
std::string kernelTag(mlir::linalg::GenericOp op);

/// The streaming form of an elementwise op over rank-1 buffers: a
/// grid-stride loop of 4-element vector accesses.
mlir::LogicalResult formStreamingKernel(mlir::RewriterBase &rewriter,
                                        mlir::linalg::GenericOp op,
                                        int64_t blockSize, int64_t maxBlocks);

/// The tiled form of a transpose: a thread per 4 x 4 tile, vector reads
/// along the input's rows and vector writes along the output's.
mlir::LogicalResult formTransposeKernel(mlir::RewriterBase &rewriter,
                                        mlir::linalg::GenericOp op,
                                        int64_t blockSize);

/// The product of the extents of `ranges`' loops `dims` at the insertion
/// point, and its value when they are all constants.
std::pair<mlir::Value, std::optional<int64_t>>
extentProduct(mlir::RewriterBase &rewriter, mlir::Location loc,
              llvm::ArrayRef<mlir::Range> ranges,
              llvm::ArrayRef<unsigned> dims);

/// Sets `ivs[d]` for the loops `dims` of `ranges` to the point the linear
/// index `linear` is, row-major over them.
void delinearize(mlir::RewriterBase &rewriter, mlir::Location loc,
                 mlir::Value linear, llvm::ArrayRef<mlir::Range> ranges,
                 llvm::ArrayRef<unsigned> dims,
                 llvm::MutableArrayRef<mlir::Value> ivs);

/// Which of a row group's barriers cuda-form-kernels emits: all but to
/// test that the race checker catches a missing one.
struct RowGroupBarriers {
  /// Between two members.
  bool betweenMembers = true;
  /// Inside a reduction, between its warps' values in workgroup memory and
  /// thread 0's fold of them.
  bool inReductions = true;
};

/// Replaces the warp reduction `op` by a kernel of a warp per output
/// point (WarpReduction), or, where a lane would fold several elements
/// that may be split over warps, by a block of as many warps per point
/// (the form of a row group of one member, formRowGroup).
mlir::LogicalResult formWarpKernel(mlir::RewriterBase &rewriter,
                                   mlir::linalg::GenericOp op,
                                   int64_t blockSize,
                                   RowGroupBarriers barriers = {});

/// Replaces the members of a row group (kRowGroup: warp reductions and
/// row maps over the same points, in order, nothing with memory effects
/// between them) by one kernel: each point's threads do each member's
/// work for the point in turn, with a block barrier between two (what one
/// member writes and a later one touches lies in the point's own rows,
/// cuda-group-rows made sure). Where every warp reduction's share splits
/// over warps, a block of up to `blockSize` threads takes a point (as
/// many warps as the longest member has elements a lane, 32 a warp): its
/// warps fold a share of each reduction, leave their values in workgroup
/// memory and thread 0 folds those in order; a row map's threads take
/// every (warps x 32)-th element. Otherwise a block of one warp takes a
/// point. What lies between the members (views, constants) moves before
/// the kernel. Buffers only the group uses (kRowLocal) are kept in the
/// block's workgroup memory, a point's row of each.
mlir::LogicalResult
formRowGroup(mlir::RewriterBase &rewriter,
             llvm::ArrayRef<mlir::linalg::GenericOp> members, int64_t blockSize,
             RowGroupBarriers barriers = {});

} // namespace accrue::cuda::forms

#endif // ACCRUE_LIB_CODEGEN_CUDA_KERNELFORMS_H
